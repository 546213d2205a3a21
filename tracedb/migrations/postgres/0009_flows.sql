-- Flows, anomalies and root causes (PostgreSQL; docs/schema.md, written by p5 analyze flows and
-- p5 analyze diff through p5-tracedb). Rows belong to an analysis_run (algorithm `flows` or
-- `diff`); ids are per (session, run).
CREATE TABLE flow (
    session_id BIGINT NOT NULL,
    run_id BIGINT NOT NULL,
    id BIGINT NOT NULL,
    start_ref TEXT NOT NULL,
    thread_id BIGINT NOT NULL,
    t_start BIGINT NOT NULL,
    t_end BIGINT NOT NULL,
    events BIGINT NOT NULL,
    messages BIGINT NOT NULL,
    bytes BIGINT NOT NULL,
    suspect_score DOUBLE PRECISION,
    suspect_rank BIGINT,
    label TEXT,
    PRIMARY KEY (session_id, run_id, id)
);
CREATE TABLE flow_segment (
    session_id BIGINT NOT NULL,
    run_id BIGINT NOT NULL,
    flow_id BIGINT NOT NULL,
    thread_id BIGINT NOT NULL,
    t_start BIGINT NOT NULL,
    t_end BIGINT NOT NULL
);
CREATE INDEX flow_segment_by_flow ON flow_segment (session_id, run_id, flow_id, t_start);
CREATE TABLE flow_path (
    session_id BIGINT NOT NULL,
    run_id BIGINT NOT NULL,
    flow_id BIGINT NOT NULL,
    path TEXT NOT NULL,
    first_t BIGINT NOT NULL,
    time_ns BIGINT NOT NULL,
    bytes BIGINT NOT NULL
);
CREATE INDEX flow_path_by_flow ON flow_path (session_id, run_id, flow_id);
CREATE TABLE flow_diff (
    session_id BIGINT NOT NULL,
    run_id BIGINT NOT NULL,
    id BIGINT NOT NULL,
    side TEXT NOT NULL,
    path TEXT NOT NULL,
    merged_leaves TEXT,
    first_t BIGINT NOT NULL,
    len BIGINT NOT NULL,
    rank_time BIGINT NOT NULL,
    rank_len BIGINT NOT NULL,
    PRIMARY KEY (session_id, run_id, id)
);
