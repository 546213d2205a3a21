//! Clock domains and the synchronization of a session: which sources share a clock, their
//! fits, agent-tree composition, refinement and tightening with matched messages.
//!
//! Pure (no I/O): works on the first pass's [`Scan`] and the [`Matches`]. A *domain* is a set
//! of processes sharing one clock: all processes of one boot (CLOCK_MONOTONIC; their samples
//! are pooled in monotonic coordinates, so kernel events of an OS monitor there map exactly),
//! or a single process when its handshake gives no boot id or monotonic start.
//!
//! Order of a session's synchronization: exact domains (the log server's own boot maps onto its
//! clock with no estimate), fits from each domain's samples, composition along the agent tree,
//! then refinement with matched messages from the best-bounded domain outwards (Dijkstra on the
//! bounds), so that no message lands before its send and bounds add up hop by hop; an
//! offset-only tightening is the last resort.

use crate::clock::{self, Constraint, Fit, Method, Samples};
use crate::load::Scan;
use crate::matching::{self, Matches};
use std::collections::BTreeMap;

/// The result: one fit per process (on its own clock) and what was done.
#[derive(Debug, Clone)]
pub struct Synchronized {
    /// Per process: maps its times onto the session base (tightening included).
    pub fits: Vec<Fit>,
    /// Per process: offset shift applied by message tightening, ns.
    pub tighten_ns: Vec<i64>,
    /// Per process: its domain's name (`host:<boot id>`, `process`, `tree`).
    pub domains: Vec<String>,
    /// Matched messages received before they were sent under the fits before tightening.
    pub violations_before: u64,
}

/// Where a process's clock comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum DomainKey {
    Host(usize),
    Process(usize),
}

#[derive(Debug)]
struct Domains {
    /// Domain of each process and its shift (start_mono − domain reference).
    of: Vec<(usize, i64)>,
    keys: Vec<DomainKey>,
    fits: Vec<Fit>,
    /// Each domain's own samples (frames, pings, echoes), in domain coordinates.
    samples: Vec<Samples>,
}

/// Builds clock domains (hosts sharing CLOCK_MONOTONIC, or single processes) and fits them.
fn domains(scan: &Scan, hosts: &[usize]) -> Domains {
    let mut index: BTreeMap<DomainKey, usize> = BTreeMap::new();
    let mut keys = Vec::new();
    let mut members: Vec<Vec<usize>> = Vec::new();
    let mut of = Vec::with_capacity(scan.processes.len());
    for (p, info) in scan.processes.iter().enumerate() {
        let id = &info.identity;
        let key = if !id.boot_id.is_empty() && id.start_mono_ns > 0 {
            DomainKey::Host(hosts[p])
        } else {
            DomainKey::Process(p)
        };
        let d = *index.entry(key).or_insert_with(|| {
            keys.push(key);
            members.push(Vec::new());
            keys.len() - 1
        });
        members[d].push(p);
        of.push((d, 0i64));
    }
    let mut fits = Vec::with_capacity(keys.len());
    let mut all = Vec::with_capacity(keys.len());
    for (d, ms) in members.iter().enumerate() {
        let reference = match keys[d] {
            DomainKey::Host(_) => ms
                .iter()
                .map(|&p| scan.processes[p].identity.start_mono_ns)
                .min()
                .unwrap_or(0),
            DomainKey::Process(_) => 0,
        };
        let mut samples = Samples::default();
        for &p in ms {
            let info = &scan.processes[p];
            let shift = match keys[d] {
                DomainKey::Host(_) => info.identity.start_mono_ns.wrapping_sub(reference) as i64,
                DomainKey::Process(_) => 0,
            };
            of[p].1 = shift;
            samples.forward.extend(
                info.forward
                    .iter()
                    .map(|&(x, y)| (x.saturating_add(shift), y.saturating_sub(shift))),
            );
            samples.backward.extend(
                info.backward
                    .iter()
                    .map(|&(x, y)| (x.saturating_add(shift), y.saturating_sub(shift))),
            );
        }
        let mut fit = clock::fit(&samples);
        if let (DomainKey::Host(_), Some(base)) = (keys[d], scan.base) {
            let boot = p5_wire::store::parse_boot_id(&scan.processes[ms[0]].identity.boot_id);
            if base.server_boot_id != [0; 16] && boot == Some(base.server_boot_id) {
                // Same boot as the log server: one CLOCK_MONOTONIC, so the map is exact.
                fit = Fit {
                    offset: (reference as i64).wrapping_sub(base.server_start_mono_ns as i64)
                        as f64,
                    drift: 0.0,
                    method: Method::Exact,
                    error_bound_ns: Some(0),
                    ..fit
                };
            }
        }
        fits.push(fit);
        all.push(samples);
    }
    Domains {
        of,
        keys,
        fits,
        samples: all,
    }
}

/// Refines clock domains with matched messages, jointly in offset and drift, from the
/// best-bounded domain outwards (Dijkstra on the bounds): once a domain is settled, each
/// neighbour exchanging messages with it is refitted from its own samples plus its messages
/// with every settled domain — a message sent from `d` is a forward sample of `d` (its
/// receipt on the base bounds `d`'s offset from above), one received in `d` a backward
/// sample. The counterpart's clock is only known to within its bound, so the line comes from
/// the messages against its estimate (it then cannot put them before their send) and the
/// bound from the same messages widened by the counterpart's bound (the truth is surely
/// consistent with those): bounds compose hop by hop along a chain of hosts. Exact domains
/// and those composed through the agent tree keep their fits.
fn refine_with_messages(scan: &Scan, matches: &Matches, dom: &mut Domains, fits: &mut [Fit]) {
    let n = dom.keys.len();
    let fixed: Vec<bool> = (0..n)
        .map(|d| {
            dom.fits[d].method == Method::Exact
                || (0..fits.len()).any(|p| dom.of[p].0 == d && fits[p].method == Method::Tree)
        })
        .collect();
    let hops = hops(scan, matches, dom);
    let mut by_domain: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, h) in hops.iter().enumerate() {
        by_domain[h.from].push(i);
        by_domain[h.to].push(i);
    }
    let bound = |f: &Fit| f.error_bound_ns.unwrap_or(i64::MAX);
    let mut settled = vec![false; n];
    while let Some(e) = (0..n)
        .filter(|&d| !settled[d] && dom.fits[d].error_bound_ns.is_some())
        .min_by_key(|&d| bound(&dom.fits[d]))
    {
        settled[e] = true;
        let mut neighbours: Vec<usize> = by_domain[e]
            .iter()
            .map(|&i| {
                if hops[i].from == e {
                    hops[i].to
                } else {
                    hops[i].from
                }
            })
            .filter(|&d| !settled[d] && !fixed[d])
            .collect();
        neighbours.sort_unstable();
        neighbours.dedup();
        for d in neighbours {
            let (mut strict, mut loose) = (dom.samples[d].clone(), dom.samples[d].clone());
            let mut used = 0u64;
            for h in by_domain[d].iter().map(|&i| &hops[i]) {
                let (other, sent) = if h.from == d {
                    (h.to, true)
                } else {
                    (h.from, false)
                };
                if !settled[other] {
                    continue;
                }
                let f = &dom.fits[other];
                let b = f.error_bound_ns.unwrap_or(0);
                used += 1;
                if sent {
                    let y = f.map(h.x_to).saturating_sub(h.x_from);
                    strict.forward.push((h.x_from, y));
                    loose.forward.push((h.x_from, y.saturating_add(b)));
                } else {
                    let y = f.map(h.x_from).saturating_sub(h.x_to);
                    strict.backward.push((h.x_to, y));
                    loose.backward.push((h.x_to, y.saturating_sub(b)));
                }
            }
            let Some(f) = clock::fit_strict_loose(&strict, &loose) else {
                continue;
            };
            let old = dom.fits[d];
            dom.fits[d] = Fit {
                method: Method::Messages,
                forward: old.forward,
                backward: old.backward,
                messages: used,
                cosmos_min_ns: old.cosmos_min_ns,
                ..f
            };
        }
    }
    for (p, pf) in fits.iter_mut().enumerate() {
        let (d, shift) = dom.of[p];
        if dom.fits[d].method == Method::Messages {
            *pf = dom.fits[d].shifted(shift);
        }
    }
}

/// A matched message between two clock domains, in domain coordinates: sent at `x_from`
/// (send start) in `from`, received by `x_to` (receive end) in `to`.
struct Hop {
    from: usize,
    to: usize,
    x_from: i64,
    x_to: i64,
}

/// The matched messages between different clock domains.
fn hops(scan: &Scan, matches: &Matches, dom: &Domains) -> Vec<Hop> {
    let calls = &scan.calls;
    matches
        .messages
        .iter()
        .filter_map(|m| {
            let (cs, cr) = (&calls[m.send?], &calls[m.recv_last?]);
            let ((from, shift_s), (to, shift_r)) = (dom.of[cs.process], dom.of[cr.process]);
            (from != to).then(|| Hop {
                from,
                to,
                x_from: cs.t.saturating_add(shift_s),
                x_to: cr.t.saturating_add(cr.duration).saturating_add(shift_r),
            })
        })
        .collect()
}

/// Fits every domain, composes agent trees, refines with messages and tightens offsets.
pub fn synchronize(scan: &Scan, hosts: &[usize], matches: &Matches) -> Synchronized {
    // Clocks: domain fits, then agent-tree composition for processes without samples.
    let mut dom = domains(scan, hosts);
    let mut fits: Vec<Fit> = (0..scan.processes.len())
        .map(|p| {
            let (d, shift) = dom.of[p];
            dom.fits[d].shifted(shift)
        })
        .collect();
    for (p, pi) in scan.processes.iter().enumerate() {
        if fits[p].method != Method::None {
            continue;
        }
        let uid = pi.identity.process_uid;
        let mut inner = Samples::default();
        let mut agent = None;
        for t in scan.tree.iter().filter(|t| t.peer_uid == uid) {
            if fits[t.agent].method == Method::None {
                continue;
            }
            if agent.is_some_and(|a| a != t.agent) {
                continue;
            }
            agent = Some(t.agent);
            inner.forward.extend(
                t.samples
                    .iter()
                    .map(|&(r, s)| (s as i64, (r as i64).wrapping_sub(s as i64))),
            );
        }
        if let Some(a) = agent {
            let f = clock::fit(&inner);
            if f.method != Method::None {
                fits[p] = fits[a].compose(&f);
            }
        }
    }
    refine_with_messages(scan, matches, &mut dom, &mut fits);
    let mut node_of: Vec<usize> = Vec::with_capacity(scan.processes.len());
    let mut node_fit_bound: Vec<(Method, Option<i64>)> = vec![(Method::None, None); dom.keys.len()];
    for (d, f) in dom.fits.iter().enumerate() {
        node_fit_bound[d] = (f.method, f.error_bound_ns);
    }
    for (p, f) in fits.iter().enumerate() {
        if f.method == Method::Tree {
            node_of.push(node_fit_bound.len());
            node_fit_bound.push((Method::Tree, None));
        } else {
            node_of.push(dom.of[p].0);
        }
    }
    let calls = &scan.calls;
    let constraint = |m: &matching::Message, fits: &[Fit]| -> Option<(Constraint, usize)> {
        let (s, r) = (m.send?, m.recv_last?);
        let (cs, cr) = (&calls[s], &calls[r]);
        let send_t = fits[cs.process].map(cs.t);
        let recv_end = fits[cr.process].map(cr.t.saturating_add(cr.duration));
        Some((
            Constraint {
                from: node_of[cs.process],
                to: node_of[cr.process],
                slack: recv_end.saturating_sub(send_t),
            },
            cs.process,
        ))
    };
    let constraints: Vec<Constraint> = matches
        .messages
        .iter()
        .filter_map(|m| constraint(m, &fits).map(|c| c.0))
        .collect();
    let zero = vec![0i64; node_fit_bound.len()];
    let violations_before = clock::violations(&constraints, &zero);
    let weight: Vec<f64> = node_fit_bound
        .iter()
        .map(|(m, b)| match (m, b) {
            (Method::Exact, _) => 0.0,
            (Method::TwoWay | Method::Messages, Some(b)) => *b as f64,
            (Method::None, _) => 1e12,
            _ => 1e9,
        })
        .collect();
    let limit: Vec<Option<i64>> = node_fit_bound
        .iter()
        .map(|(m, b)| {
            if matches!(m, Method::Exact | Method::TwoWay | Method::Messages) {
                *b
            } else {
                None
            }
        })
        .collect();
    let delta = if violations_before > 0 {
        clock::tighten(&constraints, &weight, &limit, 200)
    } else {
        zero.clone()
    };
    let mut tighten_ns = vec![0i64; scan.processes.len()];
    for (p, f) in fits.iter_mut().enumerate() {
        let d = delta[node_of[p]];
        f.offset += d as f64;
        tighten_ns[p] = d;
    }
    let names = (0..scan.processes.len())
        .map(|p| match (fits[p].method, dom.keys[dom.of[p].0]) {
            (Method::Tree, _) => "tree".to_owned(),
            (_, DomainKey::Host(_)) => format!("host:{}", scan.processes[p].identity.boot_id),
            (_, DomainKey::Process(_)) => "process".to_owned(),
        })
        .collect();
    Synchronized {
        fits,
        tighten_ns,
        domains: names,
        violations_before,
    }
}
