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
    enabled     BOOLEAN NOT NULL DEFAULT TRUE,
    -- Intervals count from here: creation, or the last change of schedule.
    anchor_at   DOUBLE PRECISION NOT NULL,
    -- The occurrence to run next; NULL when paused or when nothing is left.
    next_run_at DOUBLE PRECISION,
    last_run_at DOUBLE PRECISION,
    last_status TEXT,
    created_at  DOUBLE PRECISION NOT NULL,
    updated_at  DOUBLE PRECISION NOT NULL,
    UNIQUE (tenant, name)
);
CREATE INDEX jobs_due ON jobs (next_run_at) WHERE enabled;

CREATE TABLE job_runs (
    id            BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id        TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
    tenant        TEXT NOT NULL,
    reason        TEXT NOT NULL,
    scheduled_for DOUBLE PRECISION,
    session_id    TEXT,
    status        TEXT NOT NULL,
    started_at    DOUBLE PRECISION NOT NULL,
    finished_at   DOUBLE PRECISION,
    output        TEXT,
    input_tokens  BIGINT,
    output_tokens BIGINT,
    error         TEXT
);
CREATE INDEX job_runs_job ON job_runs (job_id, id);
CREATE INDEX job_runs_running ON job_runs (status) WHERE status = 'running';
