-- Causal-path analysis results (SQLite; docs/schema.md, written by p5 analyze through
-- p5-tracedb). Every table has session_id: re-merging a session clears its analyses too.
-- Ids are per (session, run).
CREATE TABLE analysis_run (
    session_id INTEGER NOT NULL,
    id INTEGER NOT NULL,
    algorithm TEXT NOT NULL,
    params_json TEXT NOT NULL,
    source TEXT NOT NULL,
    session_merged_at_wall_ns INTEGER NOT NULL,
    created_at_wall_ns INTEGER NOT NULL,
    messages INTEGER NOT NULL,
    PRIMARY KEY (session_id, id)
);
CREATE TABLE path_pattern (
    session_id INTEGER NOT NULL,
    run_id INTEGER NOT NULL,
    id INTEGER NOT NULL,
    signature TEXT NOT NULL,
    root_node TEXT NOT NULL,
    instances INTEGER NOT NULL,
    expected REAL,
    max_prob REAL,
    mean_total_ns INTEGER NOT NULL,
    p50_total_ns INTEGER NOT NULL,
    p90_total_ns INTEGER NOT NULL,
    rank INTEGER NOT NULL,
    PRIMARY KEY (session_id, run_id, id)
);
CREATE TABLE path_node (
    session_id INTEGER NOT NULL,
    run_id INTEGER NOT NULL,
    pattern_id INTEGER NOT NULL,
    id INTEGER NOT NULL,
    parent_id INTEGER,
    ord INTEGER NOT NULL,
    node TEXT NOT NULL,
    kind TEXT NOT NULL,
    visit TEXT NOT NULL,
    call_delay_mean_ns INTEGER,
    latency_mean_ns INTEGER,
    net_delay_mean_ns INTEGER,
    samples INTEGER NOT NULL,
    PRIMARY KEY (session_id, run_id, id)
);
CREATE INDEX path_node_by_pattern ON path_node (session_id, run_id, pattern_id, id);
CREATE TABLE path_node_hist (
    session_id INTEGER NOT NULL,
    run_id INTEGER NOT NULL,
    node_id INTEGER NOT NULL,
    bin INTEGER NOT NULL,
    weight REAL NOT NULL
);
CREATE INDEX path_node_hist_by_node ON path_node_hist (session_id, run_id, node_id, bin);
CREATE TABLE path_instance (
    session_id INTEGER NOT NULL,
    run_id INTEGER NOT NULL,
    id INTEGER NOT NULL,
    pattern_id INTEGER NOT NULL,
    prob REAL NOT NULL,
    t_start INTEGER NOT NULL,
    t_end INTEGER NOT NULL,
    PRIMARY KEY (session_id, run_id, id)
);
CREATE INDEX path_instance_by_pattern ON path_instance (session_id, run_id, pattern_id, t_start);
CREATE TABLE path_instance_message (
    session_id INTEGER NOT NULL,
    run_id INTEGER NOT NULL,
    instance_id INTEGER NOT NULL,
    message_id INTEGER NOT NULL,
    node_id INTEGER NOT NULL
);
CREATE INDEX path_instance_message_by_instance ON path_instance_message (session_id, run_id, instance_id);
CREATE INDEX path_instance_message_by_message ON path_instance_message (session_id, message_id);
