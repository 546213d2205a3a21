-- Convolution's path graph (PostgreSQL; docs/schema.md, written by p5 analyze convolution through
-- p5-tracedb): its edges, and every spike its correlations showed, kept or not, with why.
CREATE TABLE conv_edge (
    session_id BIGINT NOT NULL,
    run_id BIGINT NOT NULL,
    id BIGINT NOT NULL,
    parent_id BIGINT,
    from_node TEXT NOT NULL,
    to_node TEXT NOT NULL,
    messages BIGINT NOT NULL,
    delay_ns BIGINT,
    height_sd DOUBLE PRECISION,
    PRIMARY KEY (session_id, run_id, id)
);
CREATE TABLE conv_spike (
    session_id BIGINT NOT NULL,
    run_id BIGINT NOT NULL,
    edge_id BIGINT NOT NULL,
    to_node TEXT NOT NULL,
    lag_ns BIGINT NOT NULL,
    height_sd DOUBLE PRECISION NOT NULL,
    messages BIGINT NOT NULL,
    verdict TEXT NOT NULL,
    child_edge_id BIGINT
);
CREATE INDEX conv_spike_by_edge ON conv_spike (session_id, run_id, edge_id);
