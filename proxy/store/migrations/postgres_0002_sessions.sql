-- hermes-proxy PostgreSQL schema, version 2: session management (twin of sqlite_0002).
ALTER TABLE sessions ADD COLUMN end_reason TEXT;
ALTER TABLE sessions ADD COLUMN transcript_tokens BIGINT NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN sent_tokens BIGINT NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN full_tokens BIGINT NOT NULL DEFAULT 0;
UPDATE sessions SET transcript_tokens = (
    SELECT COALESCE(SUM(m.token_count), 0) FROM messages m WHERE m.session_id = sessions.id
);

DROP INDEX IF EXISTS sessions_tenant_started;
DROP INDEX IF EXISTS sessions_tenant_source;
CREATE INDEX sessions_tenant_started ON sessions (tenant, started_at DESC, id DESC);
CREATE INDEX sessions_tenant_source ON sessions (tenant, source, started_at DESC, id DESC);
CREATE INDEX sessions_tenant_key ON sessions (tenant, key);
CREATE INDEX sessions_tenant_ended ON sessions (tenant, ended_at) WHERE ended_at IS NOT NULL;
