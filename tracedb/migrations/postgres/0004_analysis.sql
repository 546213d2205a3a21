-- Causal-path analysis results (PostgreSQL; docs/schema.md, written by p5 analyze through
-- p5-tracedb). Every table has session_id: re-merging a session clears its analyses too.
-- Ids are per (session, run).
CREATE TABLE analysis_run (
    session_id BIGINT NOT NULL,
    id BIGINT NOT NULL,
    algorithm TEXT NOT NULL,
    params_json TEXT NOT NULL,
    source TEXT NOT NULL,
    session_merged_at_wall_ns BIGINT NOT NULL,
    created_at_wall_ns BIGINT NOT NULL,
    messages BIGINT NOT NULL,
    PRIMARY KEY (session_id, id)
);
CREATE TABLE path_pattern (
    session_id BIGINT NOT NULL,
    run_id BIGINT NOT NULL,
    id BIGINT NOT NULL,
    signature TEXT NOT NULL,
    root_node TEXT NOT NULL,
    instances BIGINT NOT NULL,
    expected DOUBLE PRECISION,
    max_prob DOUBLE PRECISION,
    mean_total_ns BIGINT NOT NULL,
    p50_total_ns BIGINT NOT NULL,
    p90_total_ns BIGINT NOT NULL,
    rank BIGINT NOT NULL,
    PRIMARY KEY (session_id, run_id, id)
);
CREATE TABLE path_node (
    session_id BIGINT NOT NULL,
    run_id BIGINT NOT NULL,
    pattern_id BIGINT NOT NULL,
    id BIGINT NOT NULL,
    parent_id BIGINT,
    ord BIGINT NOT NULL,
    node TEXT NOT NULL,
    kind TEXT NOT NULL,
    visit TEXT NOT NULL,
    call_delay_mean_ns BIGINT,
    latency_mean_ns BIGINT,
    net_delay_mean_ns BIGINT,
    samples BIGINT NOT NULL,
    PRIMARY KEY (session_id, run_id, id)
);
CREATE INDEX path_node_by_pattern ON path_node (session_id, run_id, pattern_id, id);
CREATE TABLE path_node_hist (
    session_id BIGINT NOT NULL,
    run_id BIGINT NOT NULL,
    node_id BIGINT NOT NULL,
    bin BIGINT NOT NULL,
    weight DOUBLE PRECISION NOT NULL
);
CREATE INDEX path_node_hist_by_node ON path_node_hist (session_id, run_id, node_id, bin);
CREATE TABLE path_instance (
    session_id BIGINT NOT NULL,
    run_id BIGINT NOT NULL,
    id BIGINT NOT NULL,
    pattern_id BIGINT NOT NULL,
    prob DOUBLE PRECISION NOT NULL,
    t_start BIGINT NOT NULL,
    t_end BIGINT NOT NULL,
    PRIMARY KEY (session_id, run_id, id)
);
CREATE INDEX path_instance_by_pattern ON path_instance (session_id, run_id, pattern_id, t_start);
CREATE TABLE path_instance_message (
    session_id BIGINT NOT NULL,
    run_id BIGINT NOT NULL,
    instance_id BIGINT NOT NULL,
    message_id BIGINT NOT NULL,
    node_id BIGINT NOT NULL
);
CREATE INDEX path_instance_message_by_instance ON path_instance_message (session_id, run_id, instance_id);
CREATE INDEX path_instance_message_by_message ON path_instance_message (session_id, message_id);
