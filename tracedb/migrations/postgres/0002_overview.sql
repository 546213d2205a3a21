-- The session overview (merge/src/overview.rs): every Gantt lane summarized in 1024 time
-- buckets, so that a viewer paints a session it has not indexed yet from a few thousand rows.
-- lane: 0 = states, d + 1 = intervals at depth d, -1 = scheduling (thread_id set),
-- -2 = IRQs (host_id set). category: sensor id, CPU or IRQ number of the bucket's longest
-- span; state: its state name (lane 0).
CREATE TABLE overview (
    session_id BIGINT NOT NULL,
    thread_id BIGINT,
    host_id BIGINT,
    lane BIGINT NOT NULL,
    t_start BIGINT NOT NULL,
    t_end BIGINT NOT NULL,
    category BIGINT,
    state TEXT,
    spans BIGINT NOT NULL,
    covered BIGINT NOT NULL
);
CREATE INDEX overview_by_lane ON overview (session_id, thread_id, host_id, lane, t_start);
