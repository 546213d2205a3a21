//! Every table, defined once: its columns in insert order, each column's SQL type on both
//! backends (from the Rust type of its field), and a typed row struct per table.
//!
//! A row is written as its struct ([`Row`]): the macro below generates the struct and the
//! code that turns it into values, one per column, so a row of the wrong arity cannot be
//! written. The migrations (`migrations/{sqlite,postgres}/*.sql`, [`crate::migrate`]) create
//! the same tables; a test applies them to a fresh database of each backend and compares
//! every table's columns, types and nullability with the definitions here.
//!
//! Type mapping: `i64` → `INTEGER` / `BIGINT`, `f64` → `REAL` / `DOUBLE PRECISION`,
//! `String`, `&'static str` and the [`crate::domain`] enums → `TEXT`; `Option<_>` is the
//! nullable column, everything else is `NOT NULL`. Times are integer nanoseconds on the
//! session's time base; 64-bit sensor ids and process uids are stored as signed 64-bit
//! integers with the same bits.

use crate::domain::{
    ClockSource, Direction, InitiatorFrom, NodeKind, Protocol, Runtime, Severity, ThreadState,
    Visit,
};

/// A column value on its way to the database.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// SQL NULL.
    Null,
    /// A 64-bit integer.
    Int(i64),
    /// A double.
    Real(f64),
    /// Text.
    Text(String),
    /// Text known at compile time (state names, protocols): no allocation per row.
    Static(&'static str),
}

/// The SQL type of a column on both backends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SqlType {
    /// SQLite's declared type.
    pub sqlite: &'static str,
    /// PostgreSQL's type (as `information_schema.columns.data_type` spells it, upper case).
    pub postgres: &'static str,
    /// NULL allowed.
    pub nullable: bool,
}

/// A Rust type that is a column: its SQL type and its value.
pub trait Column {
    /// The SQL type.
    const TYPE: SqlType;
    /// The value to bind.
    fn value(self) -> Value;
}

const INT: (&str, &str) = ("INTEGER", "BIGINT");
const REAL: (&str, &str) = ("REAL", "DOUBLE PRECISION");
const TEXT: (&str, &str) = ("TEXT", "TEXT");

macro_rules! column {
    ($ty:ty, $sql:expr, |$v:ident| $value:expr) => {
        impl Column for $ty {
            const TYPE: SqlType = SqlType {
                sqlite: $sql.0,
                postgres: $sql.1,
                nullable: false,
            };
            fn value(self) -> Value {
                let $v = self;
                $value
            }
        }
        impl Column for Option<$ty> {
            const TYPE: SqlType = SqlType {
                sqlite: $sql.0,
                postgres: $sql.1,
                nullable: true,
            };
            fn value(self) -> Value {
                match self {
                    Some($v) => $value,
                    None => Value::Null,
                }
            }
        }
    };
}

column!(i64, INT, |v| Value::Int(v));
column!(f64, REAL, |v| Value::Real(v));
column!(String, TEXT, |v| Value::Text(v));
column!(&'static str, TEXT, |v| Value::Static(v));
column!(ThreadState, TEXT, |v| Value::Static(v.name()));
column!(Runtime, TEXT, |v| Value::Static(v.name()));
column!(ClockSource, TEXT, |v| Value::Static(v.name()));
column!(Protocol, TEXT, |v| Value::Static(v.name()));
column!(Direction, TEXT, |v| Value::Static(v.name()));
column!(InitiatorFrom, TEXT, |v| Value::Static(v.name()));
column!(Severity, TEXT, |v| Value::Static(v.name()));
column!(NodeKind, TEXT, |v| Value::Static(v.name()));
column!(Visit, TEXT, |v| Value::Static(v.name()));

/// A column of a table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Col {
    /// Name.
    pub name: &'static str,
    /// Type.
    pub ty: SqlType,
}

/// A table: its name and columns in insert order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Table {
    /// Table name.
    pub name: &'static str,
    /// Columns (`session_id` first, except in `session`).
    pub columns: &'static [Col],
}

impl Table {
    /// The column names, comma-separated (for `INSERT` and `COPY`).
    pub fn column_list(&self) -> String {
        let names: Vec<&str> = self.columns.iter().map(|c| c.name).collect();
        names.join(",")
    }

    /// The column names.
    pub fn names(&self) -> Vec<&'static str> {
        self.columns.iter().map(|c| c.name).collect()
    }
}

/// A typed row of one table.
pub trait Row {
    /// Its table.
    const TABLE: Table;
    /// Appends one value per column, in column order.
    fn push_values(self, out: &mut Vec<Value>);
}

macro_rules! tables {
    ($(
        $(#[$doc:meta])*
        $konst:ident $row:ident = $name:literal {
            $($(#[$fdoc:meta])* $field:ident : $ty:ty),* $(,)?
        }
    )*) => {
        $(
            $(#[$doc])*
            #[derive(Debug, Clone, PartialEq)]
            pub struct $row {
                $($(#[$fdoc])* pub $field: $ty,)*
            }

            impl Row for $row {
                const TABLE: Table = Table {
                    name: $name,
                    columns: &[$(Col { name: stringify!($field), ty: <$ty as Column>::TYPE }),*],
                };
                fn push_values(self, out: &mut Vec<Value>) {
                    $(out.push(Column::value(self.$field));)*
                }
            }

            #[doc = concat!("The `", $name, "` table.")]
            pub const $konst: Table = <$row as Row>::TABLE;
        )*
    };
}

tables! {
    /// One merged session (`session`).
    SESSION Session = "session" {
        /// Session id (primary key).
        id: i64,
        /// Name in the store (unique).
        name: String,
        /// Store path as given to `p5 merge`.
        store: String,
        /// Wall clock of the merge.
        merged_at_wall_ns: i64,
        /// `server_run_id` of the first segment (whose clock is the base).
        base_run_id: i64,
        /// That run's CLOCK_MONOTONIC start.
        base_mono_ns: i64,
        /// That run's wall-clock start (a label).
        base_wall_ns: i64,
        /// First stream time on the base.
        t_min: Option<i64>,
        /// Last stream time on the base.
        t_max: Option<i64>,
        /// Events decoded.
        events: i64,
        /// Rows in `process`.
        processes: i64,
        /// Rows in `thread`.
        threads: i64,
        /// Rows in `message`.
        messages: i64,
        /// Messages with both ends.
        matched: i64,
        /// Matched messages received before they were sent.
        violations: i64,
        /// Rows in `diagnostic`.
        diagnostics: i64,
    }

    /// A machine boot (`host`).
    HOST Host = "host" {
        /// Session.
        session_id: i64,
        /// Host id.
        id: i64,
        /// Kernel boot id (or `host:<name>`, `unknown`).
        boot_id: String,
        /// `/etc/machine-id`.
        machine_id: String,
        /// Host name.
        hostname: String,
    }

    /// A process (`process`).
    PROCESS Process = "process" {
        /// Session.
        session_id: i64,
        /// Process id (per session).
        id: i64,
        /// → `host.id`.
        host_id: i64,
        /// Random process uid (signed storage).
        uid: i64,
        /// OS pid.
        pid: i64,
        /// Parent pid.
        ppid: i64,
        /// Program name.
        program: String,
        /// JSON array of the arguments.
        argv: String,
        /// Runtime.
        runtime: Runtime,
        /// Clock source.
        clock: ClockSource,
        /// Start, wall clock (label).
        start_wall_ns: i64,
        /// Start, CLOCK_MONOTONIC of its host.
        start_mono_ns: i64,
        /// First time on the base.
        t_start: i64,
        /// Last time on the base.
        t_end: Option<i64>,
    }

    /// A stream: an application thread, a metric source or an OS monitor (`thread`).
    THREAD Thread = "thread" {
        /// Session.
        session_id: i64,
        /// Thread id (the Gantt row).
        id: i64,
        /// → `process.id`.
        process_id: i64,
        /// Stream id within the process.
        stream: i64,
        /// Stream kind (`thread`, `host-metrics`, `os-monitor`, …).
        kind: &'static str,
        /// OS thread id (0 if none).
        tid: i64,
        /// Name.
        name: String,
        /// First event on the base.
        t_start: Option<i64>,
        /// Stream end on the base.
        t_end: Option<i64>,
        /// Events decoded.
        events: i64,
        /// Events lost to a full buffer.
        dropped: i64,
    }

    /// An instrumented source file (`source_file`).
    SOURCE_FILE SourceFile = "source_file" {
        /// Session.
        session_id: i64,
        /// File id.
        id: i64,
        /// Path relative to the instrumented root.
        path: String,
        /// Language.
        language: String,
        /// SHA-256 of the text.
        sha256: String,
        /// Line count.
        lines: i64,
        /// The text, if available.
        text: Option<String>,
    }

    /// A sensor (`sensor`).
    SENSOR Sensor = "sensor" {
        /// Session.
        session_id: i64,
        /// The 64-bit id (signed storage).
        id: i64,
        /// `0x` + 16 hex digits.
        hex: String,
        /// Kind from the manifest.
        kind: Option<String>,
        /// Language.
        language: Option<String>,
        /// File.
        file: Option<String>,
        /// → `source_file.id`.
        source_file_id: Option<i64>,
        /// Enclosing function.
        function: Option<String>,
        /// Display name.
        name: String,
        /// 1-based first line.
        line: Option<i64>,
        /// 1-based column.
        col: Option<i64>,
        /// Last line.
        end_line: Option<i64>,
        /// One past the last column.
        end_col: Option<i64>,
    }

    /// A function call or region (`interval`).
    INTERVAL Interval = "interval" {
        /// Session.
        session_id: i64,
        /// Interval id.
        id: i64,
        /// Enclosing interval.
        parent_id: Option<i64>,
        /// → `thread.id`.
        thread_id: i64,
        /// → `sensor.id`.
        sensor_id: i64,
        /// Enter.
        t_start: i64,
        /// Exit.
        t_end: i64,
        /// Nesting depth, 0 = outermost.
        depth: i64,
        /// Duration minus the direct children's.
        self_ns: i64,
        /// 1, or 0 if the exit was missing.
        complete: i64,
    }

    /// A thread state span (`state`).
    STATE State = "state" {
        /// Session.
        session_id: i64,
        /// → `thread.id`.
        thread_id: i64,
        /// Start.
        t_start: i64,
        /// End.
        t_end: i64,
        /// The state.
        state: ThreadState,
        /// The call of a communication state.
        op: Option<&'static str>,
        /// Its descriptor.
        fd: Option<i64>,
        /// Bytes moved or −errno.
        result: Option<i64>,
    }

    /// An instant (`mark`).
    MARK Mark = "mark" {
        /// Session.
        session_id: i64,
        /// → `thread.id`.
        thread_id: i64,
        /// → `sensor.id`.
        sensor_id: i64,
        /// Time.
        t: i64,
    }

    /// A send and the receive(s) that got its bytes (`message`).
    MESSAGE Message = "message" {
        /// Session.
        session_id: i64,
        /// Message id.
        id: i64,
        /// Protocol.
        proto: Protocol,
        /// Bytes.
        bytes: i64,
        /// Sending process.
        send_process_id: Option<i64>,
        /// Sending thread.
        send_thread_id: Option<i64>,
        /// Send call sensor.
        send_sensor_id: Option<i64>,
        /// Send call start.
        send_t: Option<i64>,
        /// Send call end.
        send_end: Option<i64>,
        /// Receiving process.
        recv_process_id: Option<i64>,
        /// Receiving thread.
        recv_thread_id: Option<i64>,
        /// Receive call sensor.
        recv_sensor_id: Option<i64>,
        /// Start of the receive that got the first byte.
        recv_t: Option<i64>,
        /// End of the receive that got the last byte.
        recv_end: Option<i64>,
        /// Receive calls that got some of its bytes.
        recv_calls: i64,
        /// 1 if received before sent.
        violation: i64,
        /// → `connection.id` (migration 0003).
        connection_id: Option<i64>,
        /// `call` (initiator → acceptor) or `return`.
        direction: Option<Direction>,
        /// 0-based index within its connection and direction.
        ordinal: Option<i64>,
        /// Send calls that wrote it (migration 0012: merge coalesces a message's pieces).
        send_calls: i64,
    }

    /// A thread on a CPU (`sched`).
    SCHED Sched = "sched" {
        /// Session.
        session_id: i64,
        /// → `host.id`.
        host_id: i64,
        /// CPU.
        cpu: i64,
        /// OS thread id.
        tid: i64,
        /// → `thread.id` if recorded.
        thread_id: Option<i64>,
        /// Switched in.
        t_start: i64,
        /// Switched out.
        t_end: i64,
        /// Kernel state letter when switched out.
        end_state: Option<String>,
    }

    /// An interrupt handler or network softirq (`irq`).
    IRQ Irq = "irq" {
        /// Session.
        session_id: i64,
        /// → `host.id`.
        host_id: i64,
        /// CPU.
        cpu: i64,
        /// Line, or `0x10000 + vector` for softirqs.
        irq: i64,
        /// Entry.
        t: i64,
        /// Duration, ns.
        duration: i64,
        /// 0/1.
        handled: i64,
    }

    /// A host metric or application counter (`metric`).
    METRIC Metric = "metric" {
        /// Session.
        session_id: i64,
        /// Metric id.
        id: i64,
        /// Recording process.
        process_id: i64,
        /// Its host.
        host_id: i64,
        /// `host` or `counter`.
        kind: &'static str,
        /// Metric or sensor id as on the wire.
        key: i64,
        /// Name.
        name: String,
        /// Unit.
        unit: String,
        /// Value × 10^scale_exp is in `unit`.
        scale_exp: i64,
    }

    /// A metric sample (`metric_sample`).
    METRIC_SAMPLE MetricSample = "metric_sample" {
        /// Session.
        session_id: i64,
        /// → `metric.id`.
        metric_id: i64,
        /// The stream.
        thread_id: i64,
        /// Time.
        t: i64,
        /// Raw value.
        value: i64,
    }

    /// How a process's clock was mapped onto the base (`clock_estimate`).
    CLOCK_ESTIMATE ClockEstimate = "clock_estimate" {
        /// Session.
        session_id: i64,
        /// → `process.id`.
        process_id: i64,
        /// Clock domain.
        domain: String,
        /// Fit method.
        method: &'static str,
        /// `base(0)`.
        offset_ns: i64,
        /// Drift, ppm.
        drift_ppm: f64,
        /// Forward samples.
        forward_samples: i64,
        /// Backward samples.
        backward_samples: i64,
        /// Error bound.
        error_bound_ns: Option<i64>,
        /// CoSMoS minimum.
        cosmos_min_ns: Option<i64>,
        /// Tightening shift.
        tighten_ns: i64,
    }

    /// What the merge noticed (`diagnostic`).
    DIAGNOSTIC Diagnostic = "diagnostic" {
        /// Session.
        session_id: i64,
        /// Id.
        id: i64,
        /// Severity.
        severity: Severity,
        /// Kebab-case key.
        kind: &'static str,
        /// Process concerned.
        process_id: Option<i64>,
        /// How many times.
        count: i64,
        /// What happened.
        message: String,
    }

    /// A Gantt lane bucket (`overview`, migration 0002).
    OVERVIEW Overview = "overview" {
        /// Session.
        session_id: i64,
        /// Thread of a state, interval or scheduling lane.
        thread_id: Option<i64>,
        /// Host of an IRQ lane.
        host_id: Option<i64>,
        /// Lane.
        lane: i64,
        /// First start.
        t_start: i64,
        /// Last end.
        t_end: i64,
        /// Sensor, CPU or IRQ of the longest span.
        category: Option<i64>,
        /// The longest span's state (lane 0).
        state: Option<&'static str>,
        /// Spans.
        spans: i64,
        /// Time covered.
        covered: i64,
    }

    /// A connection: a stream connection or a datagram port pair (`connection`, 0003).
    CONNECTION Connection = "connection" {
        /// Session.
        session_id: i64,
        /// Connection id.
        id: i64,
        /// Protocol.
        proto: Protocol,
        /// How the initiator was known.
        initiator_from: InitiatorFrom,
        /// Initiator's process (NULL: not recorded).
        initiator_process_id: Option<i64>,
        /// Initiator's thread (of its connect, else of its first call).
        initiator_thread_id: Option<i64>,
        /// Acceptor's process (NULL: not recorded).
        acceptor_process_id: Option<i64>,
        /// Acceptor's thread (of its accept, else of its first call).
        acceptor_thread_id: Option<i64>,
        /// Initiator's endpoint (`ip:port`, a path, or `-`).
        initiator_endpoint: String,
        /// Acceptor's endpoint.
        acceptor_endpoint: String,
        /// Start of its first call on the base.
        t_first: Option<i64>,
        /// End of its last call.
        t_last: Option<i64>,
        /// Messages initiator → acceptor.
        call_messages: i64,
        /// Their bytes.
        call_bytes: i64,
        /// Messages acceptor → initiator.
        return_messages: i64,
        /// Their bytes.
        return_bytes: i64,
        /// When the initiator's `connect` was made, on the base (migration 0013; NULL when
        /// it was not recorded).
        t_connect: Option<i64>,
    }

    /// One run of an analysis over a session (`analysis_run`, 0004).
    ANALYSIS_RUN AnalysisRun = "analysis_run" {
        /// Session analysed.
        session_id: i64,
        /// Run id (per session).
        id: i64,
        /// `nesting`, `convolution`, `linking`, `flows`, …
        algorithm: String,
        /// Parameters as JSON.
        params_json: String,
        /// Input: `sql`, `pcap:…`, `trace:…`.
        source: String,
        /// `session.merged_at_wall_ns` of the merge analysed (stale when it differs).
        session_merged_at_wall_ns: i64,
        /// Wall clock of the run.
        created_at_wall_ns: i64,
        /// Messages read.
        messages: i64,
    }

    /// A causal-path pattern (`path_pattern`).
    PATH_PATTERN PathPattern = "path_pattern" {
        /// Session.
        session_id: i64,
        /// → `analysis_run.id`.
        run_id: i64,
        /// Pattern id (per run).
        id: i64,
        /// Canonical text of the pattern's tree.
        signature: String,
        /// Root node name.
        root_node: String,
        /// Instances found.
        instances: i64,
        /// Expected instances (linking), if computed.
        expected: Option<f64>,
        /// Highest instance probability (linking), if computed.
        max_prob: Option<f64>,
        /// Mean total time.
        mean_total_ns: i64,
        /// Median total time.
        p50_total_ns: i64,
        /// 90th percentile.
        p90_total_ns: i64,
        /// Rank within the run, 1 = first.
        rank: i64,
    }

    /// A node of a pattern's tree (`path_node`).
    PATH_NODE PathNode = "path_node" {
        /// Session.
        session_id: i64,
        /// → `analysis_run.id`.
        run_id: i64,
        /// → `path_pattern.id`.
        pattern_id: i64,
        /// Node id (per run).
        id: i64,
        /// Parent node (NULL at the root).
        parent_id: Option<i64>,
        /// Order among its siblings, 0-based.
        ord: i64,
        /// Node name (`program@host`, …).
        node: String,
        /// `node` or `untraced`.
        kind: NodeKind,
        /// `call` or `return`.
        visit: Visit,
        /// Mean delay from the parent's entry to this entry.
        call_delay_mean_ns: Option<i64>,
        /// Mean latency including children.
        latency_mean_ns: Option<i64>,
        /// Mean network delay into the node.
        net_delay_mean_ns: Option<i64>,
        /// Samples behind the means.
        samples: i64,
    }

    /// A bin of a node's delay histogram (`path_node_hist`).
    PATH_NODE_HIST PathNodeHist = "path_node_hist" {
        /// Session.
        session_id: i64,
        /// → `analysis_run.id`.
        run_id: i64,
        /// → `path_node.id`.
        node_id: i64,
        /// Lower edge of the bin, ns.
        bin: i64,
        /// Weight.
        weight: f64,
    }

    /// One instance of a pattern (`path_instance`).
    PATH_INSTANCE PathInstance = "path_instance" {
        /// Session.
        session_id: i64,
        /// → `analysis_run.id`.
        run_id: i64,
        /// Instance id (per run).
        id: i64,
        /// → `path_pattern.id`.
        pattern_id: i64,
        /// Probability (1 for nesting).
        prob: f64,
        /// Start.
        t_start: i64,
        /// End.
        t_end: i64,
    }

    /// A message of an instance (`path_instance_message`).
    PATH_INSTANCE_MESSAGE PathInstanceMessage = "path_instance_message" {
        /// Session.
        session_id: i64,
        /// → `analysis_run.id`.
        run_id: i64,
        /// → `path_instance.id`.
        instance_id: i64,
        /// → `message.id`.
        message_id: i64,
        /// → `path_node.id` it enters.
        node_id: i64,
    }

    /// Where a thread lost events to a full buffer (`drop_range`, migration 0008): between
    /// the last event shipped before the loss and the last one of the batch that reported it.
    DROP_RANGE DropRange = "drop_range" {
        /// Session.
        session_id: i64,
        /// → `thread.id`.
        thread_id: i64,
        /// From (on the base).
        t_start: i64,
        /// To.
        t_end: i64,
        /// Events lost in the range.
        events: i64,
    }

    /// An edge of a convolution run's path graph (`conv_edge`, migration 0011).
    CONV_EDGE ConvEdge = "conv_edge" {
        /// Session.
        session_id: i64,
        /// → `analysis_run.id`.
        run_id: i64,
        /// Edge id (per run), 1-based, depth first.
        id: i64,
        /// The edge it continues (NULL: out of a root).
        parent_id: Option<i64>,
        /// Sender.
        from_node: String,
        /// Receiver.
        to_node: String,
        /// Messages on it (a root edge: all; else those its delay explains).
        messages: i64,
        /// Delay from a message into `from_node` to one on this edge (NULL: root edge).
        delay_ns: Option<i64>,
        /// The spike's height in standard deviations (NULL: root edge).
        height_sd: Option<f64>,
    }

    /// A spike of the correlation of an edge's messages with those its receiver sends on
    /// (`conv_spike`, migration 0011), kept as an edge or not.
    CONV_SPIKE ConvSpike = "conv_spike" {
        /// Session.
        session_id: i64,
        /// → `analysis_run.id`.
        run_id: i64,
        /// → `conv_edge.id` whose messages were correlated.
        edge_id: i64,
        /// Where the receiver's messages went.
        to_node: String,
        /// The spike's lag.
        lag_ns: i64,
        /// Its height in standard deviations.
        height_sd: f64,
        /// Messages its delay explains (within the tolerance).
        messages: i64,
        /// `edge`, `cycle` (the receiver is already on the path) or `few-messages` (its delay
        /// explains fewer messages than the minimum).
        verdict: String,
        /// → `conv_edge.id` it became (verdict `edge`).
        child_edge_id: Option<i64>,
    }

    /// One flow: the events reachable from one start event (`flow`, migration 0009).
    FLOW Flow = "flow" {
        /// Session.
        session_id: i64,
        /// → `analysis_run.id`.
        run_id: i64,
        /// Flow id (per run), 1-based in start order.
        id: i64,
        /// What started it (`sensor:NAME`, `mark:NAME`, `message:ID`).
        start_ref: String,
        /// The thread of the start event.
        thread_id: i64,
        /// Start event.
        t_start: i64,
        /// Last event.
        t_end: i64,
        /// Events in the flow.
        events: i64,
        /// Messages sent in the flow.
        messages: i64,
        /// Their bytes.
        bytes: i64,
        /// Distance to common or known-normal behaviour (NULL: not scored).
        suspect_score: Option<f64>,
        /// Rank by suspect score, 1 = most suspect.
        suspect_rank: Option<i64>,
        /// `normal` for a known-normal flow given by the user.
        label: Option<String>,
    }

    /// A stretch of one thread inside one flow (`flow_segment`).
    FLOW_SEGMENT FlowSegment = "flow_segment" {
        /// Session.
        session_id: i64,
        /// → `analysis_run.id`.
        run_id: i64,
        /// → `flow.id`.
        flow_id: i64,
        /// → `thread.id`.
        thread_id: i64,
        /// From.
        t_start: i64,
        /// To.
        t_end: i64,
    }

    /// A call path a flow covered (`flow_path`): one row per path present in the flow.
    FLOW_PATH FlowPath = "flow_path" {
        /// Session.
        session_id: i64,
        /// → `analysis_run.id`.
        run_id: i64,
        /// → `flow.id`.
        flow_id: i64,
        /// Function names from the thread's outermost call, joined by `→`.
        path: String,
        /// First time the flow entered it.
        first_t: i64,
        /// Time the flow spent with this path innermost, ns.
        time_ns: i64,
        /// Bytes sent with this path innermost.
        bytes: i64,
    }

    /// A root-cause candidate (`flow_diff`): a path present on one side only, after prefix
    /// pruning and leaf merging.
    FLOW_DIFF FlowDiff = "flow_diff" {
        /// Session (of the anomalous side).
        session_id: i64,
        /// → `analysis_run.id`.
        run_id: i64,
        /// Difference id (per run).
        id: i64,
        /// `anomalous` (only in the anomalous flows, Δa) or `normal` (Δn).
        side: String,
        /// The path (the common parent when leaves were merged).
        path: String,
        /// The merged last calls, comma-separated (`main→[A,D]` is path `main`, leaves `A,D`).
        merged_leaves: Option<String>,
        /// First occurrence on its side.
        first_t: i64,
        /// Calls in the path (a merged path counts its leaf level).
        len: i64,
        /// Rank by first occurrence, 1 = earliest.
        rank_time: i64,
        /// Rank by length, 1 = shortest.
        rank_len: i64,
    }

    /// Call counts of a scope sensor the runtime throttled or the selection file pinned
    /// count-only (`sensor_calls`, migration 0010): the runtime's last report per process.
    SENSOR_CALLS SensorCalls = "sensor_calls" {
        /// Session.
        session_id: i64,
        /// → `process.id`.
        process_id: i64,
        /// → `sensor.id`.
        sensor_id: i64,
        /// When it was throttled (or first counted), on the base.
        t_throttled: i64,
        /// Calls made in all (recorded or not).
        calls: i64,
        /// Calls timed: every call before throttling, every 64th after.
        timed: i64,
        /// Their summed duration, ns.
        timed_ns: i64,
        /// Long calls still recorded as intervals while throttled.
        recorded: i64,
        /// 1 if pinned count-only by the selection file rather than throttled.
        pinned: i64,
    }
}

/// Every table keyed by session (everything but `session`), in deletion order: re-merging a
/// session clears all of them.
pub const PER_SESSION: &[Table] = &[
    HOST,
    PROCESS,
    THREAD,
    SOURCE_FILE,
    SENSOR,
    INTERVAL,
    STATE,
    MARK,
    MESSAGE,
    SCHED,
    IRQ,
    METRIC,
    METRIC_SAMPLE,
    CLOCK_ESTIMATE,
    DIAGNOSTIC,
    OVERVIEW,
    CONNECTION,
    ANALYSIS_RUN,
    PATH_PATTERN,
    PATH_NODE,
    PATH_NODE_HIST,
    PATH_INSTANCE,
    PATH_INSTANCE_MESSAGE,
    DROP_RANGE,
    FLOW,
    FLOW_SEGMENT,
    FLOW_PATH,
    FLOW_DIFF,
    SENSOR_CALLS,
    CONV_EDGE,
    CONV_SPIKE,
];

/// The analysis tables (migration 0004): what `p5 analyze` writes.
pub const ANALYSIS: &[Table] = &[
    ANALYSIS_RUN,
    PATH_PATTERN,
    PATH_NODE,
    PATH_NODE_HIST,
    PATH_INSTANCE,
    PATH_INSTANCE_MESSAGE,
];

/// The flow tables (migration 0009): what `p5 analyze flows` and `diff` write, keyed by run
/// like [`ANALYSIS`].
pub const FLOWS: &[Table] = &[FLOW, FLOW_SEGMENT, FLOW_PATH, FLOW_DIFF];

/// Convolution's graph (migration 0011), keyed by run like [`ANALYSIS`].
pub const CONVOLUTION: &[Table] = &[CONV_EDGE, CONV_SPIKE];

/// Every table.
pub fn all() -> impl Iterator<Item = Table> {
    std::iter::once(SESSION).chain(PER_SESSION.iter().copied())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_gives_one_value_per_column() {
        let mut v = Vec::new();
        Mark {
            session_id: 1,
            thread_id: 2,
            sensor_id: 3,
            t: 4,
        }
        .push_values(&mut v);
        assert_eq!(v.len(), MARK.columns.len());
        assert_eq!(MARK.column_list(), "session_id,thread_id,sensor_id,t");
        let t = STATE.columns.iter().find(|c| c.name == "op").unwrap().ty;
        assert!(t.nullable && t.sqlite == "TEXT");
        for t in PER_SESSION {
            assert_eq!(t.columns[0].name, "session_id", "{}", t.name);
        }
    }
}
