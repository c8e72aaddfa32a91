-- hermes-proxy SQLite schema, version 1.
CREATE TABLE sessions (
    id                TEXT PRIMARY KEY,
    tenant            TEXT NOT NULL,
    key               TEXT NOT NULL,
    source            TEXT NOT NULL DEFAULT 'api',
    user_id           TEXT,
    title             TEXT,
    model             TEXT,
    system_prompt     TEXT,
    parent_id         TEXT REFERENCES sessions(id) ON DELETE SET NULL,
    started_at        REAL NOT NULL,
    updated_at        REAL NOT NULL,
    ended_at          REAL,
    message_count     INTEGER NOT NULL DEFAULT 0,
    last_seq          INTEGER NOT NULL DEFAULT 0,
    last_turn         INTEGER NOT NULL DEFAULT 0,
    input_tokens      INTEGER NOT NULL DEFAULT 0,
    output_tokens     INTEGER NOT NULL DEFAULT 0,
    compaction_tokens INTEGER NOT NULL DEFAULT 0
);
-- One live session per external id and tenant; ended ones keep the key.
CREATE UNIQUE INDEX sessions_live_key ON sessions (tenant, key) WHERE ended_at IS NULL;
CREATE INDEX sessions_tenant_started ON sessions (tenant, started_at DESC);
CREATE INDEX sessions_tenant_source ON sessions (tenant, source, started_at DESC);

CREATE TABLE messages (
    id           INTEGER PRIMARY KEY,
    session_id   TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    seq          INTEGER NOT NULL,
    turn         INTEGER NOT NULL,
    role         TEXT NOT NULL,
    content      TEXT,
    parts        TEXT,
    name         TEXT,
    tool_calls   TEXT,
    tool_call_id TEXT,
    token_count  INTEGER NOT NULL,
    created_at   REAL NOT NULL,
    UNIQUE (session_id, seq)
);

CREATE VIRTUAL TABLE messages_fts USING fts5(
    content, content='messages', content_rowid='id', tokenize='porter unicode61'
);
CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts (rowid, content) VALUES (new.id, new.content);
END;
CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, content) VALUES ('delete', old.id, old.content);
END;
CREATE TRIGGER messages_fts_update AFTER UPDATE OF content ON messages BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, content) VALUES ('delete', old.id, old.content);
    INSERT INTO messages_fts (rowid, content) VALUES (new.id, new.content);
END;

CREATE TABLE session_state (
    session_id TEXT PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,
    version    INTEGER NOT NULL,
    memory     TEXT NOT NULL,
    updated_at REAL NOT NULL
);

-- A turn whose user message is stored but whose answer is not (yet).
CREATE TABLE pending_turns (
    id              TEXT PRIMARY KEY,
    session_id      TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    messages        TEXT NOT NULL,
    idempotency_key TEXT,
    created_at      REAL NOT NULL
);
CREATE INDEX pending_turns_session ON pending_turns (session_id);

CREATE TABLE idempotency (
    tenant     TEXT NOT NULL,
    key        TEXT NOT NULL,
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    response   TEXT NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (tenant, key)
);
CREATE INDEX idempotency_session ON idempotency (session_id);
