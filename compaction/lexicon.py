"""The vocabulary subject keys are read with: known values, synonyms, modifiers.

Data only; :mod:`compaction.subjects` does the reading. Extend it here when a
kind of value the ledger should recognize is missing.
"""

from __future__ import annotations

__all__ = ["CATEGORIES", "GENERIC_HEADS", "MODIFIERS", "SYNONYMS", "VAGUE"]

# Known values → the subject they are a value of. Lowercase entries match in
# any case; capitalized ones only as written (they are also English words).
_CATEGORY_TERMS = {
    "database": (
        "postgresql|postgres|mysql|mariadb|sqlite|mongodb|mongo|dynamodb|cassandra|"
        "cockroachdb|couchdb|firestore|sql server|scylladb|Oracle|Aurora|Supabase|Neon|"
        "Spanner"
    ),
    "cache": "redis|memcached|varnish|valkey|dragonfly",
    "message queue": (
        "kafka|rabbitmq|sqs|nats|pulsar|kinesis|pub/sub|activemq|zeromq|redpanda|celery|"
        "sidekiq|resque|bullmq"
    ),
    "architecture": (
        "microservices|microservice|monolith|monolithic|serverless|modular monolith|"
        "service-oriented|event-driven architecture"
    ),
    "api style": "graphql|grpc|REST|RESTful|json-rpc|trpc|SOAP",
    "frontend framework": (
        "react|angular|svelte|sveltekit|vue|vue.js|next.js|nuxt|ember|htmx|SolidJS|Solid"
    ),
    "language": (
        "Python|Go|Golang|Rust|Java|Kotlin|TypeScript|JavaScript|Ruby|Elixir|Scala|C#|"
        "C++|PHP|Swift|Haskell|Clojure|Erlang|Zig|OCaml|Dart|Perl"
    ),
    "cloud provider": (
        "aws|gcp|azure|google cloud|digitalocean|heroku|fly.io|hetzner|linode|vercel|"
        "netlify|ovh|render.com|on-prem|on-premises"
    ),
    "orchestration": "kubernetes|k8s|nomad|ecs|docker swarm|openshift|eks|gke",
    "ci": (
        "jenkins|github actions|gitlab ci|circleci|buildkite|travis|teamcity|"
        "bitbucket pipelines|Drone"
    ),
    "monitoring": "datadog|prometheus|grafana|new relic|honeycomb|dynatrace|splunk|elastic apm",
    "error tracking": "sentry|rollbar|bugsnag",
    "search engine": "elasticsearch|opensearch|meilisearch|algolia|typesense|solr",
    "auth provider": "auth0|okta|cognito|keycloak|firebase auth|Clerk",
    "payment provider": "stripe|paypal|adyen|braintree|Paddle",
    "editor": "vim|neovim|emacs|vs code|vscode|intellij|pycharm|sublime text",
    "web framework": (
        "django|flask|fastapi|rails|ruby on rails|laravel|nestjs|phoenix|Express|Spring|"
        "spring boot|asp.net|starlette"
    ),
    "package manager": "poetry|pipenv|conda|npm|yarn|pnpm|pip|uv",
    "repository layout": "monorepo|polyrepo|multi-repo",
    "process": "scrum|kanban|shape up|SAFe",
    "data warehouse": "snowflake|bigquery|redshift|databricks|clickhouse",
    "operating system": "ubuntu|debian|alpine|centos|rhel|fedora|macos",
    "infrastructure as code": "terraform|pulumi|cloudformation|ansible|opentofu",
    "feature flags": "launchdarkly|unleash|flagsmith|growthbook",
    "issue tracker": "jira|github issues|youtrack|asana|trello|Linear",
    "on-call": "pagerduty|opsgenie|incident.io",
    "test framework": "pytest|jest|junit|mocha|vitest|rspec|unittest",
    "end-to-end testing": "cypress|playwright|selenium",
    "orm": "sqlalchemy|prisma|hibernate|typeorm|activerecord|drizzle",
    "indentation": "tabs|spaces",
}
CATEGORIES: dict[str, tuple[str, ...]] = {
    k: tuple(v.split("|")) for k, v in _CATEGORY_TERMS.items()
}

# Subject phrases that mean the same thing (after modifiers are dropped).
SYNONYMS = {
    "db": "database",
    "datastore": "database",
    "data store": "database",
    "database engine": "database",
    "database server": "database",
    "rdbms": "database",
    "message bus": "message queue",
    "event bus": "message queue",
    "queue": "message queue",
    "message broker": "message queue",
    "broker": "message queue",
    "job queue": "message queue",
    "system architecture": "architecture",
    "service architecture": "architecture",
    "platform architecture": "architecture",
    "backend architecture": "architecture",
    "system design": "architecture",
    "frontend": "frontend framework",
    "front end": "frontend framework",
    "front-end": "frontend framework",
    "ui framework": "frontend framework",
    "ui": "frontend framework",
    "cloud": "cloud provider",
    "hosting": "cloud provider",
    "hosting provider": "cloud provider",
    "host": "cloud provider",
    "ci pipeline": "ci",
    "ci system": "ci",
    "ci/cd": "ci",
    "build pipeline": "ci",
    "build system": "ci",
    "continuous integration": "ci",
    "programming language": "language",
    "backend language": "language",
    "full name": "name",
    "first name": "name",
    "caching layer": "cache",
    "cache layer": "cache",
    "search": "search engine",
    "search backend": "search engine",
    "payments": "payment provider",
    "payment processor": "payment provider",
    "orm layer": "orm",
    "indent style": "indentation",
    "indentation style": "indentation",
    "editor of choice": "editor",
    "text editor": "editor",
    "tracker": "issue tracker",
    "ticket tracker": "issue tracker",
    "headcount": "team size",
    "caching": "cache",
    "deployment": "orchestration",
    "release schedule": "release cadence",
    "release cycle": "release cadence",
    "city": "location",
    "home city": "location",
}
# Words that qualify a subject without changing it ("our main database").
MODIFIERS = frozenset(
    (
        "main primary current new old whole entire production prod existing own actual real "
        "default official overall chosen preferred favourite favorite usual standard team's "
        "company's project's shared core internal external daily weekly nightly monthly"
    ).split()
)
# Heads that name a kind of thing rather than which one: "billing service" is "billing".
GENERIC_HEADS = frozenset(
    "service system app application tool team platform stack setup layer module component "
    "pipeline cluster server project codebase repo repository process".split()
)
# Heads too vague to be a subject ("the problem is …", "the plan is …").
VAGUE = frozenset(
    (
        "reason problem issue plan idea point thing question answer goal result way fact truth "
        "catch trick downside upside difference rest same best key part bit one other first "
        "last next good bad worst easiest hardest only risk concern hope worry feeling sense "
        "situation case thought story news deal year month week day hour minute time while ages "
        "now example instance sure real long good start well soon expected usual planned "
        "discussed mentioned promised agreed everything nothing everyone something anything "
        "someone nobody this that it quick context note update fyi also anyway"
    ).split()
)
