-- hermes-proxy SQLite schema, version 2: session management.
-- Why a session ended ('reset', 'idle', 'daily', …); NULL while it is live.
ALTER TABLE sessions ADD COLUMN end_reason TEXT;
-- Sum of the stored messages' token counts: what replaying the whole
-- transcript costs, kept so each turn can record what a full-history client
-- would have sent.
ALTER TABLE sessions ADD COLUMN transcript_tokens INTEGER NOT NULL DEFAULT 0;
-- Per turn, summed: prompt tokens the proxy sent upstream (its own count), and
-- prompt tokens the full history would have cost. Their difference is what
-- compaction saved.
ALTER TABLE sessions ADD COLUMN sent_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN full_tokens INTEGER NOT NULL DEFAULT 0;
UPDATE sessions SET transcript_tokens = (
    SELECT COALESCE(SUM(m.token_count), 0) FROM messages m WHERE m.session_id = sessions.id
);

-- Listing pages by (started_at, id), newest first: a stable keyset cursor.
DROP INDEX sessions_tenant_started;
DROP INDEX sessions_tenant_source;
CREATE INDEX sessions_tenant_started ON sessions (tenant, started_at DESC, id DESC);
CREATE INDEX sessions_tenant_source ON sessions (tenant, source, started_at DESC, id DESC);
-- Ids are resolved by key (live or ended) and by prefix of key.
CREATE INDEX sessions_tenant_key ON sessions (tenant, key);
-- Pruning finds ended sessions by age.
CREATE INDEX sessions_tenant_ended ON sessions (tenant, ended_at) WHERE ended_at IS NOT NULL;
