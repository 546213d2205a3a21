-- Convolution's path graph (SQLite; docs/schema.md, written by p5 analyze convolution through
-- p5-tracedb): its edges, and every spike its correlations showed, kept or not, with why.
CREATE TABLE conv_edge (
    session_id INTEGER NOT NULL,
    run_id INTEGER NOT NULL,
    id INTEGER NOT NULL,
    parent_id INTEGER,
    from_node TEXT NOT NULL,
    to_node TEXT NOT NULL,
    messages INTEGER NOT NULL,
    delay_ns INTEGER,
    height_sd REAL,
    PRIMARY KEY (session_id, run_id, id)
);
CREATE TABLE conv_spike (
    session_id INTEGER NOT NULL,
    run_id INTEGER NOT NULL,
    edge_id INTEGER NOT NULL,
    to_node TEXT NOT NULL,
    lag_ns INTEGER NOT NULL,
    height_sd REAL NOT NULL,
    messages INTEGER NOT NULL,
    verdict TEXT NOT NULL,
    child_edge_id INTEGER
);
CREATE INDEX conv_spike_by_edge ON conv_spike (session_id, run_id, edge_id);
