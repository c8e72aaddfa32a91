"""Settings: defaults < environment (``HERMES_*``, ``OPENAI_*``) < config file < flags.

Every option is declared once in :data:`OPTIONS`, with its type, default and
help text; the CLI, the environment reader and the config-file reader all
work from that table, so a new option cannot be half-wired::

    >>> s = Settings.load(environ={"HERMES_BUDGET": "2000"})
    >>> s.budget
    2000
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from proxy.reset_policy import ResetPolicies, parse_policies

__all__ = ["OPTIONS", "Option", "Settings", "SettingsError"]


class SettingsError(ValueError):
    pass


@dataclass(frozen=True)
class Option:
    name: str
    cast: Callable[[str], Any]
    help: str
    # Ecosystem variables read when HERMES_<NAME> is not set.
    fallback_env: tuple[str, ...] = ()

    @property
    def env(self) -> str:
        return "HERMES_" + self.name.upper()

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")


def _bool(value: str) -> bool:
    lowered = value.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off", ""):
        return False
    raise ValueError(f"not a boolean: {value!r}")


def _list(value: str) -> tuple[str, ...]:
    return tuple(item.strip() for item in value.split(",") if item.strip())


def _choice(*choices: str) -> Callable[[str], str]:
    def cast(value: str) -> str:
        if value not in choices:
            raise ValueError(f"{value!r} is not one of {', '.join(choices)}")
        return value

    return cast


OPTIONS: tuple[Option, ...] = (
    Option("host", str, "Address to listen on. Without API keys only loopback is allowed."),
    Option("port", int, "Port to listen on."),
    Option("upstream", str, "Base URL of the OpenAI-compatible upstream.", ("OPENAI_BASE_URL",)),
    Option("upstream_api_key", str, "API key sent to the upstream.", ("OPENAI_API_KEY",)),
    Option("upstream_timeout", float, "Seconds to wait for the upstream (read timeout)."),
    Option(
        "db",
        str,
        "Database: a SQLite path, sqlite:///path or postgresql://user@host/db "
        "(default $HERMES_HOME/state.db).",
    ),
    Option("db_pool_size", int, "PostgreSQL connections per process for queries (and for locks)."),
    Option("workers", int, "Server processes; more than 1 needs PostgreSQL."),
    Option("budget", int, "Token budget of every upstream prompt in a session."),
    Option("summarizer", _choice("llm", "extractive"), "How old turns are compacted."),
    Option("summary_model", str, "Model the llm summarizer uses (default: --model)."),
    Option("model", str, "Upstream model that the 'hermes' model alias stands for."),
    Option("api_key", _list, "Client key KEY[:TENANT]; repeat the flag, comma-separate in env."),
    Option("insecure_no_auth", _bool, "Allow a non-loopback --host without client keys."),
    Option("max_body_bytes", int, "Largest request body accepted (413 beyond)."),
    Option("memory_share", float, "Share of the budget for facts, reversals and summary."),
    Option("recall_share", float, "Share of the budget for excerpts recalled from the archive."),
    Option("new_share", float, "Share of the budget kept free for new messages."),
    Option("compaction_step", float, "Share of the budget each compaction folds at least."),
    Option("jobs_tick", float, "Seconds between scheduler checks for due jobs; 0 turns it off."),
    Option("recall", _bool, "Recall matching excerpts from the session's archive (default on)."),
    Option("log_level", _choice("debug", "info", "warning", "error"), "Log level."),
    Option("run_attempts", int, "Upstream attempts per run step before the run ends in error."),
    Option("run_retry_delay", float, "Seconds before a run step's first retry (doubling after)."),
    Option(
        "events_keepalive", float, "Seconds between keep-alive comments on an idle event stream."
    ),
    Option(
        "reset_policy",
        _list,
        "Auto-reset per source: SOURCE=idle:MIN|daily:HOUR|both:MIN:HOUR|none (* = others).",
    ),
)
_BY_NAME = {o.name: o for o in OPTIONS}


def default_home(environ: Mapping[str, str]) -> Path:
    return Path(environ.get("HERMES_HOME") or Path.home() / ".hermes-proxy")


@dataclass(frozen=True)
class Settings:
    host: str = "127.0.0.1"
    port: int = 8080
    upstream: str = "https://api.openai.com/v1"
    upstream_api_key: str | None = None
    upstream_timeout: float = 600.0
    db: str = ""
    db_pool_size: int = 10
    workers: int = 1
    budget: int = 4000
    summarizer: str = "llm"
    summary_model: str | None = None
    model: str = "gpt-4o-mini"
    api_key: tuple[str, ...] = ()
    insecure_no_auth: bool = False
    max_body_bytes: int = 8 * 1024 * 1024
    memory_share: float = 0.40
    recall_share: float = 0.10
    new_share: float = 0.10
    compaction_step: float = 0.05
    jobs_tick: float = 1.0
    recall: bool = True
    log_level: str = "info"
    run_attempts: int = 5
    run_retry_delay: float = 1.0
    events_keepalive: float = 15.0
    reset_policy: tuple[str, ...] = ()
    home: Path = field(default_factory=lambda: default_home(os.environ))

    @classmethod
    def load(
        cls,
        *,
        environ: Mapping[str, str] | None = None,
        config_file: str | Path | None = None,
        flags: Mapping[str, Any] | None = None,
    ) -> Settings:
        """Merge every source in order of precedence; fail naming the culprit."""
        environ = os.environ if environ is None else environ
        values: dict[str, Any] = {"home": default_home(environ)}
        for option in OPTIONS:
            for var in (option.env, *option.fallback_env):
                if environ.get(var):
                    values[option.name] = _cast(option, environ[var], f"environment {var}")
                    break
        config_file = config_file or environ.get("HERMES_CONFIG")
        if config_file:
            values.update(_read_config(Path(config_file)))
        for name, value in (flags or {}).items():
            if value is None or value == ():
                continue
            if name not in _BY_NAME:
                raise SettingsError(f"unknown setting {name!r}")
            values[name] = value
        if not values.get("db"):
            values["db"] = str(values["home"] / "state.db")
        settings = cls(**values)
        settings.validate()
        return settings

    def validate(self) -> None:
        if not 0 < self.port < 65536:
            raise SettingsError(f"port must be 1-65535, not {self.port}")
        if self.budget < 256:
            raise SettingsError(f"budget must be at least 256 tokens, not {self.budget}")
        shares = (self.memory_share, self.recall_share, self.new_share)
        if any(s < 0 for s in shares) or sum(shares) >= 0.9:
            raise SettingsError("memory_share + recall_share + new_share must be below 0.9")
        if not 0 < self.compaction_step < 0.5:
            raise SettingsError("compaction_step must be between 0 and 0.5")
        if self.jobs_tick < 0:
            raise SettingsError(f"jobs_tick must be 0 (off) or more seconds, not {self.jobs_tick}")
        if not self.upstream.startswith(("http://", "https://")):
            raise SettingsError(f"upstream must be an http(s) URL, not {self.upstream!r}")
        if self.run_attempts < 1:
            raise SettingsError(f"run_attempts must be at least 1, not {self.run_attempts}")
        if self.run_retry_delay < 0 or self.events_keepalive <= 0:
            raise SettingsError("run_retry_delay must be >= 0 and events_keepalive > 0")
        for entry in self.api_key:
            if not entry.split(":", 1)[0]:
                raise SettingsError("an API key must not be empty")
        if self.db_pool_size < 1:
            raise SettingsError(f"db_pool_size must be at least 1, not {self.db_pool_size}")
        if self.workers < 1:
            raise SettingsError(f"workers must be at least 1, not {self.workers}")
        if self.workers > 1 and not self.db.startswith(("postgres://", "postgresql://")):
            raise SettingsError(
                f"--workers {self.workers} needs PostgreSQL (--db postgresql://…): with SQLite "
                "the proxy must run as one process, because a session's lock and the database "
                "writer live inside that process and would not hold across several"
            )
        try:
            parse_policies(self.reset_policy)
        except ValueError as exc:
            raise SettingsError(str(exc)) from exc

    @property
    def reset_policies(self) -> ResetPolicies:
        """Automatic reset policies by session source (see :mod:`proxy.reset_policy`)."""
        return parse_policies(self.reset_policy)

    @property
    def tenants(self) -> dict[str, str]:
        """Client key → tenant name; a key without ``:TENANT`` is its own tenant."""
        out = {}
        for entry in self.api_key:
            key, _, tenant = entry.partition(":")
            out[key] = tenant or key
        return out


def _cast(option: Option, raw: str, where: str) -> Any:
    try:
        return option.cast(raw)
    except ValueError as exc:
        raise SettingsError(f"{where}: {exc}") from exc


def _read_config(path: Path) -> dict[str, Any]:
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise SettingsError(f"config file {path}: {exc}") from exc
    out: dict[str, Any] = {}
    for raw_name, value in data.items():
        name = raw_name.replace("-", "_")
        option = _BY_NAME.get(name)
        if option is None:
            raise SettingsError(f"config file {path}: unknown setting {raw_name!r}")
        if isinstance(value, list):
            value = ",".join(str(v) for v in value)
        out[name] = _cast(option, str(value), f"config file {path}, {raw_name}")
    return out


def setting_names() -> list[str]:
    return [f.name for f in fields(Settings)]
