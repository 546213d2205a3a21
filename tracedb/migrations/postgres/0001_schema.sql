-- p5 trace database, PostgreSQL. Documented column by column in docs/schema.md.
-- Times are integer nanoseconds on the session's time base; ids are per session.
CREATE TABLE session (
    id BIGINT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    store TEXT NOT NULL,
    merged_at_wall_ns BIGINT NOT NULL,
    base_run_id BIGINT NOT NULL,
    base_mono_ns BIGINT NOT NULL,
    base_wall_ns BIGINT NOT NULL,
    t_min BIGINT,
    t_max BIGINT,
    events BIGINT NOT NULL,
    processes BIGINT NOT NULL,
    threads BIGINT NOT NULL,
    messages BIGINT NOT NULL,
    matched BIGINT NOT NULL,
    violations BIGINT NOT NULL,
    diagnostics BIGINT NOT NULL
);
CREATE TABLE host (
    session_id BIGINT NOT NULL,
    id BIGINT NOT NULL,
    boot_id TEXT NOT NULL,
    machine_id TEXT NOT NULL,
    hostname TEXT NOT NULL,
    PRIMARY KEY (session_id, id)
);
CREATE TABLE process (
    session_id BIGINT NOT NULL,
    id BIGINT NOT NULL,
    host_id BIGINT NOT NULL,
    uid BIGINT NOT NULL,
    pid BIGINT NOT NULL,
    ppid BIGINT NOT NULL,
    program TEXT NOT NULL,
    argv TEXT NOT NULL,
    runtime TEXT NOT NULL,
    clock TEXT NOT NULL,
    start_wall_ns BIGINT NOT NULL,
    start_mono_ns BIGINT NOT NULL,
    t_start BIGINT NOT NULL,
    t_end BIGINT,
    PRIMARY KEY (session_id, id)
);
CREATE TABLE thread (
    session_id BIGINT NOT NULL,
    id BIGINT NOT NULL,
    process_id BIGINT NOT NULL,
    stream BIGINT NOT NULL,
    kind TEXT NOT NULL,
    tid BIGINT NOT NULL,
    name TEXT NOT NULL,
    t_start BIGINT,
    t_end BIGINT,
    events BIGINT NOT NULL,
    dropped BIGINT NOT NULL,
    PRIMARY KEY (session_id, id)
);
CREATE INDEX thread_by_tid ON thread (session_id, tid);
CREATE TABLE source_file (
    session_id BIGINT NOT NULL,
    id BIGINT NOT NULL,
    path TEXT NOT NULL,
    language TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    lines BIGINT NOT NULL,
    text TEXT,
    PRIMARY KEY (session_id, id)
);
CREATE TABLE sensor (
    session_id BIGINT NOT NULL,
    id BIGINT NOT NULL,
    hex TEXT NOT NULL,
    kind TEXT,
    language TEXT,
    file TEXT,
    source_file_id BIGINT,
    function TEXT,
    name TEXT NOT NULL,
    line BIGINT,
    col BIGINT,
    end_line BIGINT,
    end_col BIGINT,
    PRIMARY KEY (session_id, id)
);
CREATE TABLE interval (
    session_id BIGINT NOT NULL,
    id BIGINT NOT NULL,
    parent_id BIGINT,
    thread_id BIGINT NOT NULL,
    sensor_id BIGINT NOT NULL,
    t_start BIGINT NOT NULL,
    t_end BIGINT NOT NULL,
    depth BIGINT NOT NULL,
    self_ns BIGINT NOT NULL,
    complete BIGINT NOT NULL
);
CREATE INDEX interval_by_thread ON interval (session_id, thread_id, t_start);
CREATE TABLE state (
    session_id BIGINT NOT NULL,
    thread_id BIGINT NOT NULL,
    t_start BIGINT NOT NULL,
    t_end BIGINT NOT NULL,
    state TEXT NOT NULL,
    op TEXT,
    fd BIGINT,
    result BIGINT
);
CREATE INDEX state_by_thread ON state (session_id, thread_id, t_start);
CREATE TABLE mark (
    session_id BIGINT NOT NULL,
    thread_id BIGINT NOT NULL,
    sensor_id BIGINT NOT NULL,
    t BIGINT NOT NULL
);
CREATE INDEX mark_by_thread ON mark (session_id, thread_id, t);
CREATE TABLE message (
    session_id BIGINT NOT NULL,
    id BIGINT NOT NULL,
    proto TEXT NOT NULL,
    bytes BIGINT NOT NULL,
    send_process_id BIGINT,
    send_thread_id BIGINT,
    send_sensor_id BIGINT,
    send_t BIGINT,
    send_end BIGINT,
    recv_process_id BIGINT,
    recv_thread_id BIGINT,
    recv_sensor_id BIGINT,
    recv_t BIGINT,
    recv_end BIGINT,
    recv_calls BIGINT NOT NULL,
    violation BIGINT NOT NULL,
    PRIMARY KEY (session_id, id)
);
CREATE INDEX message_by_send ON message (session_id, send_thread_id, send_t);
CREATE INDEX message_by_recv ON message (session_id, recv_thread_id, recv_end);
CREATE TABLE sched (
    session_id BIGINT NOT NULL,
    host_id BIGINT NOT NULL,
    cpu BIGINT NOT NULL,
    tid BIGINT NOT NULL,
    thread_id BIGINT,
    t_start BIGINT NOT NULL,
    t_end BIGINT NOT NULL,
    end_state TEXT
);
CREATE INDEX sched_by_cpu ON sched (session_id, host_id, cpu, t_start);
CREATE INDEX sched_by_thread ON sched (session_id, thread_id, t_start);
CREATE TABLE irq (
    session_id BIGINT NOT NULL,
    host_id BIGINT NOT NULL,
    cpu BIGINT NOT NULL,
    irq BIGINT NOT NULL,
    t BIGINT NOT NULL,
    duration BIGINT NOT NULL,
    handled BIGINT NOT NULL
);
CREATE INDEX irq_by_host ON irq (session_id, host_id, t);
CREATE TABLE metric (
    session_id BIGINT NOT NULL,
    id BIGINT NOT NULL,
    process_id BIGINT NOT NULL,
    host_id BIGINT NOT NULL,
    kind TEXT NOT NULL,
    key BIGINT NOT NULL,
    name TEXT NOT NULL,
    unit TEXT NOT NULL,
    scale_exp BIGINT NOT NULL,
    PRIMARY KEY (session_id, id)
);
CREATE TABLE metric_sample (
    session_id BIGINT NOT NULL,
    metric_id BIGINT NOT NULL,
    thread_id BIGINT NOT NULL,
    t BIGINT NOT NULL,
    value BIGINT NOT NULL
);
CREATE INDEX metric_sample_by_metric ON metric_sample (session_id, metric_id, t);
CREATE TABLE clock_estimate (
    session_id BIGINT NOT NULL,
    process_id BIGINT NOT NULL,
    domain TEXT NOT NULL,
    method TEXT NOT NULL,
    offset_ns BIGINT NOT NULL,
    drift_ppm DOUBLE PRECISION NOT NULL,
    forward_samples BIGINT NOT NULL,
    backward_samples BIGINT NOT NULL,
    error_bound_ns BIGINT,
    cosmos_min_ns BIGINT,
    tighten_ns BIGINT NOT NULL,
    PRIMARY KEY (session_id, process_id)
);
CREATE TABLE diagnostic (
    session_id BIGINT NOT NULL,
    id BIGINT NOT NULL,
    severity TEXT NOT NULL,
    kind TEXT NOT NULL,
    process_id BIGINT,
    count BIGINT NOT NULL,
    message TEXT NOT NULL,
    PRIMARY KEY (session_id, id)
);
