-- Where threads lost events to full buffers (PostgreSQL; docs/schema.md): one row per batch
-- that reported new losses, from the last event shipped before them to the last of that batch.
CREATE TABLE drop_range (
    session_id BIGINT NOT NULL,
    thread_id BIGINT NOT NULL,
    t_start BIGINT NOT NULL,
    t_end BIGINT NOT NULL,
    events BIGINT NOT NULL
);
CREATE INDEX drop_range_by_thread ON drop_range (session_id, thread_id, t_start);
