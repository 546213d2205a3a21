//! The findings: the numbers behind the paper's figures, read from the merged database per
//! session (thread states, messages, latencies, segments and softirqs).

use super::SCENARIOS;
use p5_tracedb::domain::{Runtime, ThreadState};
use p5_wire::event::{NET_RX_SOFTIRQ, NET_TX_SOFTIRQ, SOFTIRQ_BASE};
use std::collections::{BTreeMap, HashMap};

/// The thread state names, in the schema's order.
pub(super) const STATES: &[&str] = p5_tracedb::domain::ThreadState::NAMES;

/// One application thread's time per state.
#[derive(Debug, Clone, Default)]
pub struct ThreadStates {
    /// Program name.
    pub program: String,
    /// The process's role: its first argument (`db`, `shop`, `client`; a worker's slowness).
    pub role: String,
    /// Process id (OS).
    pub pid: i64,
    /// Thread row id.
    pub thread: i64,
    /// ns per state name.
    pub ns: BTreeMap<&'static str, i64>,
}

impl ThreadStates {
    /// Total recorded time.
    pub fn total(&self) -> i64 {
        self.ns.values().sum()
    }

    /// Calculating time over calculating plus receiving and waiting (in poll/select/epoll):
    /// how busy a worker was, leaving out sends (on a loaded machine a send that wakes the peer
    /// often loses the CPU inside the call, which stretches it from microseconds to a time
    /// slice). Waiting never counts as busy.
    pub fn busy(&self) -> f64 {
        let ns = |s: ThreadState| self.ns.get(s.name()).copied().unwrap_or(0);
        let c = ns(ThreadState::Calculating);
        let idle = ns(ThreadState::Receiving) + ns(ThreadState::Waiting);
        if c + idle <= 0 {
            return 0.0;
        }
        c as f64 / (c + idle) as f64
    }

    /// Share of `state` in the thread's recorded time.
    pub fn share(&self, state: &str) -> f64 {
        let t = self.total();
        if t <= 0 {
            return 0.0;
        }
        self.ns.get(state).copied().unwrap_or(0) as f64 / t as f64
    }
}

/// What one session shows.
#[derive(Debug, Clone, Default)]
pub struct Finding {
    /// Session name.
    pub name: String,
    /// Processes (program names, sorted).
    pub programs: Vec<String>,
    /// Span of the application processes, ns.
    pub span_ns: i64,
    /// Matched messages.
    pub matched: i64,
    /// Messages received before they were sent.
    pub violations: i64,
    /// Message latency (receive end − send start), ns: median and 99th percentile.
    pub latency_ns: Option<(i64, i64)>,
    /// Time per state of each application thread.
    pub threads: Vec<ThreadStates>,
    /// Total time and calls per function (all threads).
    pub functions: BTreeMap<String, (i64, u64)>,
    /// Rows of `sched` and `irq`.
    pub sched_rows: usize,
    /// IRQ rows (NIC interrupts and network softirqs).
    pub irq_rows: usize,
    /// Of them, NET_RX and NET_TX softirqs (the kernel's packet work; on loopback all of it).
    pub net_softirqs: (usize, usize),
    /// Host metric series.
    pub metrics: usize,
}

/// Reads the findings of every session from the merged database.
pub async fn findings(db_url: &str) -> anyhow::Result<Vec<Finding>> {
    use p5_tracedb::read as q;
    let db = q::Reader::open(&p5_tracedb::DbUrl::parse(db_url)?).await?;
    let mut out = Vec::new();
    let sessions = q::sessions(&db).await?;
    for s in sessions {
        let e = |e: p5_tracedb::Error| anyhow::anyhow!("session {}: {e}", s.name);
        let procs = q::processes(&db, s.id).await.map_err(e)?;
        let threads = q::threads(&db, s.id).await.map_err(e)?;
        let states = q::states(&db, s.id, STATES).await.map_err(e)?;
        let msgs = q::messages(&db, s.id).await.map_err(e)?;
        let sensors = q::sensors(&db, s.id).await.map_err(e)?;
        let intervals = q::intervals(&db, s.id).await.map_err(e)?;
        let app: Vec<&q::Process> = procs
            .iter()
            .filter(|p| Runtime::parse(&p.runtime).is_none_or(Runtime::is_program))
            .collect();
        let mut programs: Vec<String> = app.iter().map(|p| p.program.clone()).collect();
        programs.sort();
        let t0 = app.iter().map(|p| p.t_start).min().unwrap_or(0);
        let t1 = app.iter().filter_map(|p| p.t_end).max().unwrap_or(t0);
        let by_thread: HashMap<i64, &q::Thread> = threads.iter().map(|t| (t.id, t)).collect();
        let by_proc: HashMap<i64, &q::Process> = procs.iter().map(|p| (p.id, p)).collect();
        let mut ts: BTreeMap<i64, ThreadStates> = BTreeMap::new();
        for r in &states {
            let Some(t) = by_thread.get(&r.thread) else {
                continue;
            };
            let entry = ts.entry(r.thread).or_insert_with(|| {
                let p = by_proc.get(&t.process_id);
                let argv: Vec<String> = p
                    .and_then(|p| serde_json::from_str(&p.argv).ok())
                    .unwrap_or_default();
                let program = p.map(|p| p.program.clone()).unwrap_or_default();
                let role = match program.as_str() {
                    "cow" => argv.get(2).map(|s| format!("slowness {s}")),
                    _ => argv.get(1).cloned(),
                };
                ThreadStates {
                    program,
                    role: role.unwrap_or_default(),
                    pid: p.map_or(0, |p| p.pid),
                    thread: r.thread,
                    ns: BTreeMap::new(),
                }
            });
            let name = STATES.get(r.state as usize).copied().unwrap_or("other");
            *entry.ns.entry(name).or_insert(0) += (r.t_end - r.t_start).max(0);
        }
        let mut lat: Vec<i64> = msgs
            .iter()
            .map(|m| m.latency_ns())
            .filter(|d| *d >= 0)
            .collect();
        lat.sort_unstable();
        let latency_ns = (!lat.is_empty()).then(|| {
            let pick = |p: f64| lat[((lat.len() - 1) as f64 * p).round() as usize];
            (pick(0.5), pick(0.99))
        });
        let names: HashMap<i64, String> = sensors
            .iter()
            .map(|x| (x.id, x.function.clone().unwrap_or_else(|| x.name.clone())))
            .collect();
        let mut functions: BTreeMap<String, (i64, u64)> = BTreeMap::new();
        for i in &intervals {
            let n = names
                .get(&i.sensor)
                .cloned()
                .unwrap_or_else(|| format!("{:#x}", i.sensor));
            let f = functions.entry(n).or_insert((0, 0));
            f.0 += (i.t_end - i.t_start).max(0);
            f.1 += 1;
        }
        let sched_rows = q::sched(&db, s.id).await.map_err(e)?.len();
        let irqs = q::irqs(&db, s.id).await.map_err(e)?;
        let irq_rows = irqs.len();
        let softirq = |v: u32| {
            let n = i64::from(SOFTIRQ_BASE + v);
            irqs.iter().filter(|r| r.irq == n).count()
        };
        let net_softirqs = (softirq(NET_RX_SOFTIRQ), softirq(NET_TX_SOFTIRQ));
        let metrics = q::host_metrics(&db, s.id).await.map_err(e)?.len();
        out.push(Finding {
            name: s.name.clone(),
            programs,
            span_ns: t1 - t0,
            matched: s.matched,
            violations: s.violations,
            latency_ns,
            threads: ts.into_values().collect(),
            functions,
            sched_rows,
            irq_rows,
            net_softirqs,
            metrics,
        });
    }
    let order = |n: &str| SCENARIOS.iter().position(|(s, _)| *s == n).unwrap_or(99);
    out.sort_by_key(|f| order(&f.name));
    Ok(out)
}

pub(super) fn ms(ns: i64) -> f64 {
    ns as f64 / 1e6
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waiting_is_not_busy() {
        let mut t = ThreadStates::default();
        t.ns.insert("calculating", 100);
        t.ns.insert("receiving", 100);
        assert_eq!(t.busy(), 0.5);
        t.ns.insert("waiting", 200);
        assert_eq!(t.busy(), 0.25);
        assert_eq!(t.share("waiting"), 0.5);
    }
}
