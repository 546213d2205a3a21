-- Flows, anomalies and root causes (SQLite; docs/schema.md, written by p5 analyze flows and
-- p5 analyze diff through p5-tracedb). Rows belong to an analysis_run (algorithm `flows` or
-- `diff`); ids are per (session, run).
CREATE TABLE flow (
    session_id INTEGER NOT NULL,
    run_id INTEGER NOT NULL,
    id INTEGER NOT NULL,
    start_ref TEXT NOT NULL,
    thread_id INTEGER NOT NULL,
    t_start INTEGER NOT NULL,
    t_end INTEGER NOT NULL,
    events INTEGER NOT NULL,
    messages INTEGER NOT NULL,
    bytes INTEGER NOT NULL,
    suspect_score REAL,
    suspect_rank INTEGER,
    label TEXT,
    PRIMARY KEY (session_id, run_id, id)
);
CREATE TABLE flow_segment (
    session_id INTEGER NOT NULL,
    run_id INTEGER NOT NULL,
    flow_id INTEGER NOT NULL,
    thread_id INTEGER NOT NULL,
    t_start INTEGER NOT NULL,
    t_end INTEGER NOT NULL
);
CREATE INDEX flow_segment_by_flow ON flow_segment (session_id, run_id, flow_id, t_start);
CREATE TABLE flow_path (
    session_id INTEGER NOT NULL,
    run_id INTEGER NOT NULL,
    flow_id INTEGER NOT NULL,
    path TEXT NOT NULL,
    first_t INTEGER NOT NULL,
    time_ns INTEGER NOT NULL,
    bytes INTEGER NOT NULL
);
CREATE INDEX flow_path_by_flow ON flow_path (session_id, run_id, flow_id);
CREATE TABLE flow_diff (
    session_id INTEGER NOT NULL,
    run_id INTEGER NOT NULL,
    id INTEGER NOT NULL,
    side TEXT NOT NULL,
    path TEXT NOT NULL,
    merged_leaves TEXT,
    first_t INTEGER NOT NULL,
    len INTEGER NOT NULL,
    rank_time INTEGER NOT NULL,
    rank_len INTEGER NOT NULL,
    PRIMARY KEY (session_id, run_id, id)
);
