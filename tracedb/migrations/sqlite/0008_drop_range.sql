-- Where threads lost events to full buffers (SQLite; docs/schema.md): one row per batch that
-- reported new losses, from the last event shipped before them to the last of that batch.
CREATE TABLE drop_range (
    session_id INTEGER NOT NULL,
    thread_id INTEGER NOT NULL,
    t_start INTEGER NOT NULL,
    t_end INTEGER NOT NULL,
    events INTEGER NOT NULL
);
CREATE INDEX drop_range_by_thread ON drop_range (session_id, thread_id, t_start);
