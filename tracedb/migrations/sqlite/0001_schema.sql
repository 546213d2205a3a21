-- p5 trace database, SQLite. Documented column by column in docs/schema.md.
-- Times are integer nanoseconds on the session's time base; ids are per session.
CREATE TABLE session (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    store TEXT NOT NULL,
    merged_at_wall_ns INTEGER NOT NULL,
    base_run_id INTEGER NOT NULL,
    base_mono_ns INTEGER NOT NULL,
    base_wall_ns INTEGER NOT NULL,
    t_min INTEGER,
    t_max INTEGER,
    events INTEGER NOT NULL,
    processes INTEGER NOT NULL,
    threads INTEGER NOT NULL,
    messages INTEGER NOT NULL,
    matched INTEGER NOT NULL,
    violations INTEGER NOT NULL,
    diagnostics INTEGER NOT NULL
);
CREATE TABLE host (
    session_id INTEGER NOT NULL,
    id INTEGER NOT NULL,
    boot_id TEXT NOT NULL,
    machine_id TEXT NOT NULL,
    hostname TEXT NOT NULL,
    PRIMARY KEY (session_id, id)
);
CREATE TABLE process (
    session_id INTEGER NOT NULL,
    id INTEGER NOT NULL,
    host_id INTEGER NOT NULL,
    uid INTEGER NOT NULL,
    pid INTEGER NOT NULL,
    ppid INTEGER NOT NULL,
    program TEXT NOT NULL,
    argv TEXT NOT NULL,
    runtime TEXT NOT NULL,
    clock TEXT NOT NULL,
    start_wall_ns INTEGER NOT NULL,
    start_mono_ns INTEGER NOT NULL,
    t_start INTEGER NOT NULL,
    t_end INTEGER,
    PRIMARY KEY (session_id, id)
);
CREATE TABLE thread (
    session_id INTEGER NOT NULL,
    id INTEGER NOT NULL,
    process_id INTEGER NOT NULL,
    stream INTEGER NOT NULL,
    kind TEXT NOT NULL,
    tid INTEGER NOT NULL,
    name TEXT NOT NULL,
    t_start INTEGER,
    t_end INTEGER,
    events INTEGER NOT NULL,
    dropped INTEGER NOT NULL,
    PRIMARY KEY (session_id, id)
);
CREATE INDEX thread_by_tid ON thread (session_id, tid);
CREATE TABLE source_file (
    session_id INTEGER NOT NULL,
    id INTEGER NOT NULL,
    path TEXT NOT NULL,
    language TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    lines INTEGER NOT NULL,
    text TEXT,
    PRIMARY KEY (session_id, id)
);
CREATE TABLE sensor (
    session_id INTEGER NOT NULL,
    id INTEGER NOT NULL,
    hex TEXT NOT NULL,
    kind TEXT,
    language TEXT,
    file TEXT,
    source_file_id INTEGER,
    function TEXT,
    name TEXT NOT NULL,
    line INTEGER,
    col INTEGER,
    end_line INTEGER,
    end_col INTEGER,
    PRIMARY KEY (session_id, id)
);
CREATE TABLE interval (
    session_id INTEGER NOT NULL,
    id INTEGER NOT NULL,
    parent_id INTEGER,
    thread_id INTEGER NOT NULL,
    sensor_id INTEGER NOT NULL,
    t_start INTEGER NOT NULL,
    t_end INTEGER NOT NULL,
    depth INTEGER NOT NULL,
    self_ns INTEGER NOT NULL,
    complete INTEGER NOT NULL
);
CREATE INDEX interval_by_thread ON interval (session_id, thread_id, t_start);
CREATE TABLE state (
    session_id INTEGER NOT NULL,
    thread_id INTEGER NOT NULL,
    t_start INTEGER NOT NULL,
    t_end INTEGER NOT NULL,
    state TEXT NOT NULL,
    op TEXT,
    fd INTEGER,
    result INTEGER
);
CREATE INDEX state_by_thread ON state (session_id, thread_id, t_start);
CREATE TABLE mark (
    session_id INTEGER NOT NULL,
    thread_id INTEGER NOT NULL,
    sensor_id INTEGER NOT NULL,
    t INTEGER NOT NULL
);
CREATE INDEX mark_by_thread ON mark (session_id, thread_id, t);
CREATE TABLE message (
    session_id INTEGER NOT NULL,
    id INTEGER NOT NULL,
    proto TEXT NOT NULL,
    bytes INTEGER NOT NULL,
    send_process_id INTEGER,
    send_thread_id INTEGER,
    send_sensor_id INTEGER,
    send_t INTEGER,
    send_end INTEGER,
    recv_process_id INTEGER,
    recv_thread_id INTEGER,
    recv_sensor_id INTEGER,
    recv_t INTEGER,
    recv_end INTEGER,
    recv_calls INTEGER NOT NULL,
    violation INTEGER NOT NULL,
    PRIMARY KEY (session_id, id)
);
CREATE INDEX message_by_send ON message (session_id, send_thread_id, send_t);
CREATE INDEX message_by_recv ON message (session_id, recv_thread_id, recv_end);
CREATE TABLE sched (
    session_id INTEGER NOT NULL,
    host_id INTEGER NOT NULL,
    cpu INTEGER NOT NULL,
    tid INTEGER NOT NULL,
    thread_id INTEGER,
    t_start INTEGER NOT NULL,
    t_end INTEGER NOT NULL,
    end_state TEXT
);
CREATE INDEX sched_by_cpu ON sched (session_id, host_id, cpu, t_start);
CREATE INDEX sched_by_thread ON sched (session_id, thread_id, t_start);
CREATE TABLE irq (
    session_id INTEGER NOT NULL,
    host_id INTEGER NOT NULL,
    cpu INTEGER NOT NULL,
    irq INTEGER NOT NULL,
    t INTEGER NOT NULL,
    duration INTEGER NOT NULL,
    handled INTEGER NOT NULL
);
CREATE INDEX irq_by_host ON irq (session_id, host_id, t);
CREATE TABLE metric (
    session_id INTEGER NOT NULL,
    id INTEGER NOT NULL,
    process_id INTEGER NOT NULL,
    host_id INTEGER NOT NULL,
    kind TEXT NOT NULL,
    key INTEGER NOT NULL,
    name TEXT NOT NULL,
    unit TEXT NOT NULL,
    scale_exp INTEGER NOT NULL,
    PRIMARY KEY (session_id, id)
);
CREATE TABLE metric_sample (
    session_id INTEGER NOT NULL,
    metric_id INTEGER NOT NULL,
    thread_id INTEGER NOT NULL,
    t INTEGER NOT NULL,
    value INTEGER NOT NULL
);
CREATE INDEX metric_sample_by_metric ON metric_sample (session_id, metric_id, t);
CREATE TABLE clock_estimate (
    session_id INTEGER NOT NULL,
    process_id INTEGER NOT NULL,
    domain TEXT NOT NULL,
    method TEXT NOT NULL,
    offset_ns INTEGER NOT NULL,
    drift_ppm REAL NOT NULL,
    forward_samples INTEGER NOT NULL,
    backward_samples INTEGER NOT NULL,
    error_bound_ns INTEGER,
    cosmos_min_ns INTEGER,
    tighten_ns INTEGER NOT NULL,
    PRIMARY KEY (session_id, process_id)
);
CREATE TABLE diagnostic (
    session_id INTEGER NOT NULL,
    id INTEGER NOT NULL,
    severity TEXT NOT NULL,
    kind TEXT NOT NULL,
    process_id INTEGER,
    count INTEGER NOT NULL,
    message TEXT NOT NULL,
    PRIMARY KEY (session_id, id)
);
