-- Scheduled jobs (prompts run on a schedule in a session) and their run history.
CREATE TABLE jobs (
    id          TEXT PRIMARY KEY,
    tenant      TEXT NOT NULL,
    name        TEXT NOT NULL,
    schedule    TEXT NOT NULL,
    timezone    TEXT NOT NULL DEFAULT 'UTC',
    prompt      TEXT NOT NULL,
    session_key TEXT NOT NULL,
    model       TEXT,
    enabled     INTEGER NOT NULL DEFAULT 1,
    -- Intervals count from here: creation, or the last change of schedule.
    anchor_at   REAL NOT NULL,
    -- The occurrence to run next; NULL when paused or when nothing is left.
    next_run_at REAL,
    last_run_at REAL,
    last_status TEXT,
    created_at  REAL NOT NULL,
    updated_at  REAL NOT NULL,
    UNIQUE (tenant, name)
);
CREATE INDEX jobs_due ON jobs (next_run_at) WHERE enabled;

CREATE TABLE job_runs (
    id            INTEGER PRIMARY KEY,
    job_id        TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
    tenant        TEXT NOT NULL,
    reason        TEXT NOT NULL,
    scheduled_for REAL,
    session_id    TEXT,
    status        TEXT NOT NULL,
    started_at    REAL NOT NULL,
    finished_at   REAL,
    output        TEXT,
    input_tokens  INTEGER,
    output_tokens INTEGER,
    error         TEXT
);
CREATE INDEX job_runs_job ON job_runs (job_id, id);
CREATE INDEX job_runs_running ON job_runs (status) WHERE status = 'running';
