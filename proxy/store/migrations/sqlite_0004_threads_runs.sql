-- hermes-proxy SQLite schema, version 4: threads, their runs, run inputs and events.
-- A thread is a session: its id is the session key (sessions.key); this row
-- adds what the threads API needs on top (title, metadata, the event counter).
CREATE TABLE threads (
    tenant        TEXT NOT NULL,
    id            TEXT NOT NULL,
    title         TEXT,
    metadata      TEXT,
    created_at    REAL NOT NULL,
    updated_at    REAL NOT NULL,
    -- Ids of the thread's events are allocated from here, under the row's lock.
    last_event_id INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant, id)
);
CREATE INDEX threads_tenant_created ON threads (tenant, created_at DESC, id DESC);

CREATE TABLE runs (
    id          TEXT PRIMARY KEY,
    tenant      TEXT NOT NULL,
    thread_id   TEXT NOT NULL,
    status      TEXT NOT NULL,
    -- JSON: the upstream request options every step of the run uses.
    request     TEXT NOT NULL,
    -- Upstream calls completed and stored; the next step's number.
    step        INTEGER NOT NULL DEFAULT 0,
    -- Attempts at the current step (a crash mid-step counts as one).
    attempt     INTEGER NOT NULL DEFAULT 0,
    -- JSON: the tool calls a waiting_on_human run waits on.
    waiting     TEXT,
    -- JSON: why a run ended in error.
    error       TEXT,
    lease_owner TEXT,
    lease_until REAL,
    created_at  REAL NOT NULL,
    updated_at  REAL NOT NULL,
    ended_at    REAL,
    FOREIGN KEY (tenant, thread_id) REFERENCES threads (tenant, id) ON DELETE CASCADE
);
-- At most one active run per thread: later messages steer it.
CREATE UNIQUE INDEX runs_one_active ON runs (tenant, thread_id)
    WHERE status IN ('running', 'waiting_on_human');
CREATE INDEX runs_thread ON runs (tenant, thread_id, created_at DESC);
CREATE INDEX runs_running ON runs (lease_until) WHERE status = 'running';

-- Messages sent to a run (the first one, steering messages, tool outputs), in
-- arrival order; a step takes the pending ones (step IS NULL) and marks them.
CREATE TABLE run_inputs (
    id         INTEGER PRIMARY KEY,
    run_id     TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    tenant     TEXT NOT NULL,
    thread_id  TEXT NOT NULL,
    step       INTEGER,
    message    TEXT NOT NULL,
    client_key TEXT,
    created_at REAL NOT NULL
);
CREATE INDEX run_inputs_run ON run_inputs (run_id, step, id);
CREATE UNIQUE INDEX run_inputs_client_key ON run_inputs (tenant, thread_id, client_key)
    WHERE client_key IS NOT NULL;

CREATE TABLE thread_events (
    tenant     TEXT NOT NULL,
    thread_id  TEXT NOT NULL,
    id         INTEGER NOT NULL,
    run_id     TEXT,
    type       TEXT NOT NULL,
    data       TEXT NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (tenant, thread_id, id),
    FOREIGN KEY (tenant, thread_id) REFERENCES threads (tenant, id) ON DELETE CASCADE
);
