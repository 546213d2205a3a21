//! What belongs to a host rather than a thread: the on-CPU stretches of threads p5 did not
//! record (one `cpu N` track per CPU, slices `tid T`), the interrupts (one `irq cpu N` track
//! per CPU, nested by time: a hard IRQ during a softirq is inside it), and the metrics as
//! counter tracks (host metrics under the host, application counters under their process).
//!
//! The interrupts of a host are read in one query by time and dealt out to one sequence per
//! CPU as they come (CPUs are few); the unattributed scheduling is read by CPU, one track
//! after the other.

use crate::error::{Context, Error};
use crate::nest::{Nest, Nesting};
use crate::proto::{EventType, TrackEvent};
use crate::sequence::Sequence;
use crate::tracks;
use std::collections::BTreeMap;

/// The Linux softirq vectors, by number (`irq` = `0x10000 +` vector).
const SOFTIRQS: [&str; 10] = [
    "HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER", "RCU",
];
/// Where softirqs start in the `irq` column.
const SOFTIRQ_BASE: i64 = 0x10000;

/// The slice name of interrupt `irq`.
pub fn irq_name(irq: i64, handled: bool) -> String {
    let name = match irq - SOFTIRQ_BASE {
        v if v < 0 => format!("irq {irq}"),
        v => match SOFTIRQS.get(v as usize) {
            Some(n) => format!("softirq {n}"),
            None => format!("softirq {v}"),
        },
    };
    if handled {
        name
    } else {
        format!("{name} (unhandled)")
    }
}

/// A metric row.
struct Metric {
    id: i64,
    process: i64,
    host: i64,
    kind: String,
    name: String,
    unit: String,
    scale_exp: i64,
}

impl crate::export::Exporter<'_> {
    /// The on-CPU stretches of a host's unrecorded threads.
    pub(crate) fn host_sched(&mut self, host: i64) -> Result<(), Error> {
        let sid = self.meta.sid;
        self.step(|| format!("scheduling on host {host}"));
        let what = || format!("the scheduling on host {host}");
        let mut rows = self.stream.sched_unattributed(sid, host).reading(what)?;
        let mut cpu_now = None;
        let mut seq = Sequence::new(0, 0);
        let mut nest = Nest::default();
        while let Some(r) = rows.next().reading(what)? {
            let cpu = r.i64(0).reading(what)?;
            let (s, e) = (
                self.at(r.i64(1).reading(what)?),
                self.at(r.i64(2).reading(what)?),
            );
            let tid = r.i64(3).reading(what)?;
            if cpu_now != Some(cpu) {
                nest.close_all(&mut self.closed);
                self.close(&mut seq)?;
                self.done(&seq, &nest);
                let parent = self.host_track(host)?;
                let rank = i32::try_from(cpu).unwrap_or(i32::MAX);
                let uuid = self.child(parent, format!("cpu {cpu}"), rank)?;
                (seq, nest, cpu_now) = (
                    Sequence::new(self.tree.sequence(), uuid),
                    Nest::default(),
                    Some(cpu),
                );
            }
            self.slice(
                &mut seq,
                &mut nest,
                (s, e),
                Nesting::Flat,
                tid as u64,
                || format!("tid {tid}"),
            )?;
            self.summary.sched += 1;
        }
        nest.close_all(&mut self.closed);
        self.close(&mut seq)?;
        self.done(&seq, &nest);
        Ok(())
    }

    /// A host's interrupts, one track per CPU.
    pub(crate) fn irqs(&mut self, host: i64) -> Result<(), Error> {
        let sid = self.meta.sid;
        self.step(|| format!("interrupts on host {host}"));
        let what = || format!("the interrupts on host {host}");
        let mut rows = self.stream.irqs(sid, host).reading(what)?;
        let mut cpus: BTreeMap<i64, (Sequence, Nest)> = BTreeMap::new();
        while let Some(r) = rows.next().reading(what)? {
            let cpu = r.i64(0).reading(what)?;
            let t = r.i64(1).reading(what)?;
            let dur = r.i64(2).reading(what)?.max(0);
            let (irq, handled) = (r.i64(3).reading(what)?, r.i64(4).reading(what)? != 0);
            let (seq, nest) = match cpus.entry(cpu) {
                std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::btree_map::Entry::Vacant(e) => {
                    let parent = self.host_track(host)?;
                    let rank = 1_000_000 + i32::try_from(cpu).unwrap_or(0);
                    let uuid = self.child(parent, format!("irq cpu {cpu}"), rank)?;
                    e.insert((Sequence::new(self.tree.sequence(), uuid), Nest::default()))
                }
            };
            let span = (self.at(t), self.at(t.saturating_add(dur)));
            let key = (irq as u64) << 1 | u64::from(handled);
            self.slice(seq, nest, span, Nesting::Time, key, || {
                irq_name(irq, handled)
            })?;
            self.summary.irqs += 1;
        }
        for (_, (mut seq, mut nest)) in cpus {
            nest.close_all(&mut self.closed);
            self.close(&mut seq)?;
            self.done(&seq, &nest);
        }
        Ok(())
    }

    /// Every metric as a counter track.
    pub(crate) fn metrics(&mut self) -> Result<(), Error> {
        let sid = self.meta.sid;
        self.step(|| "metrics".into());
        let what = || "the metrics".to_owned();
        let mut metrics = Vec::new();
        let mut rows = self.stream.metrics(sid).reading(what)?;
        while let Some(r) = rows.next().reading(what)? {
            let text = |i| -> Result<String, Error> {
                Ok(r.text(i).reading(what)?.unwrap_or_default().into_owned())
            };
            metrics.push(Metric {
                id: r.i64(0).reading(what)?,
                process: r.i64(1).reading(what)?,
                host: r.i64(2).reading(what)?,
                kind: text(3)?,
                name: text(4)?,
                unit: text(5)?,
                scale_exp: r.i64(6).reading(what)?,
            });
        }
        drop(rows);
        for m in metrics {
            self.metric(m)?;
        }
        Ok(())
    }

    fn metric(&mut self, m: Metric) -> Result<(), Error> {
        let (sid, id) = (self.meta.sid, m.id);
        let what = || format!("the samples of metric {id}");
        let mut rows = self.stream.metric_samples(sid, m.id).reading(what)?;
        let mut seq = None;
        let exp = m.scale_exp;
        while let Some(r) = rows.next().reading(what)? {
            let (t, v) = (self.at(r.i64(0).reading(what)?), r.i64(1).reading(what)?);
            let seq = match seq.as_mut() {
                Some(s) => s,
                None => {
                    let parent = match (m.kind.as_str(), self.tree.processes.get(&m.process)) {
                        ("host", _) | (_, None) => self.host_track(m.host)?,
                        (_, Some(p)) => p.uuid,
                    };
                    let uuid = self.tree.uuid();
                    let unit = m.unit.clone();
                    self.describe(tracks::counter(uuid, parent, m.name.clone(), unit, exp))?;
                    seq.insert(Sequence::new(self.tree.sequence(), uuid))
                }
            };
            let mut ev = TrackEvent {
                r#type: Some(EventType::Counter as i32),
                ..Default::default()
            };
            if exp < 0 {
                // Divided, not multiplied by 10^exp: 1037 / 100 is 10.37, 1037 × 0.01 is not.
                ev.double_counter_value =
                    Some(v as f64 / 10f64.powi(exp.clamp(-300, 0).unsigned_abs() as i32));
            } else {
                ev.counter_value = Some(v);
            }
            self.event(seq, t, ev)?;
            self.summary.counter_values += 1;
        }
        if let Some(seq) = seq {
            self.done(&seq, &Nest::default());
        }
        Ok(())
    }
}
