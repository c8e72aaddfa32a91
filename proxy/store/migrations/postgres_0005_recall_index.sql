-- hermes-proxy PostgreSQL schema, version 5: the recall index.
--
-- SQLite needs a dedicated full-text index laid out per session for recall
-- (see sqlite_0005_recall_index.sql). PostgreSQL filters a session's rows
-- through the (session_id, seq) index and ranks them with ts_rank over the
-- tsvector that the PostgreSQL backend maintains for search; this index
-- lets it do so without touching other sessions' rows.
CREATE INDEX IF NOT EXISTS messages_recall ON messages (session_id, seq)
    WHERE role IN ('user', 'assistant');
