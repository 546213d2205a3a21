-- Call counts of scope sensors the runtime throttled (TAU's rule) or the selection file pinned
-- count-only (PostgreSQL; docs/schema.md): one row per process and sensor, the runtime's last report.
CREATE TABLE sensor_calls (
    session_id BIGINT NOT NULL,
    process_id BIGINT NOT NULL,
    sensor_id BIGINT NOT NULL,
    t_throttled BIGINT NOT NULL,
    calls BIGINT NOT NULL,
    timed BIGINT NOT NULL,
    timed_ns BIGINT NOT NULL,
    recorded BIGINT NOT NULL,
    pinned BIGINT NOT NULL
);
CREATE INDEX sensor_calls_by_sensor ON sensor_calls (session_id, sensor_id);
