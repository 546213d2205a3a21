-- Call counts of scope sensors the runtime throttled (TAU's rule) or the selection file pinned
-- count-only (SQLite; docs/schema.md): one row per process and sensor, the runtime's last report.
CREATE TABLE sensor_calls (
    session_id INTEGER NOT NULL,
    process_id INTEGER NOT NULL,
    sensor_id INTEGER NOT NULL,
    t_throttled INTEGER NOT NULL,
    calls INTEGER NOT NULL,
    timed INTEGER NOT NULL,
    timed_ns INTEGER NOT NULL,
    recorded INTEGER NOT NULL,
    pinned INTEGER NOT NULL
);
CREATE INDEX sensor_calls_by_sensor ON sensor_calls (session_id, sensor_id);
