//! `p5 demo`'s black-box case study (issue 20 item 5): a multi-tier service p5 never saw the
//! source of, recorded with `--preload`, analysed by its messages alone, twice — as is and with
//! a delay injected in one backend — and the two analyses compared.
//!
//! The service (`samples/blackbox/service.c`, plain C, built with plain `cc`, no p5 header or
//! library): a `client` sends N requests to a `front` end, which calls the backends `auth` and
//! then `catalog` *sequentially* (the second call starts when the first has returned); each
//! backend asks the third tier, `db` (one process serving both over `poll`), and the replies
//! flow back. Ten messages per request. In session `blackbox-delayed` the `catalog` backend
//! waits [`super::scenarios::Sizes::blackbox_delay_us`] before each of its db calls.
//!
//! Both sessions run with `libp5_preload.so` in `LD_PRELOAD`, exactly as `p5 record --preload`
//! runs a command (same library, same call-name manifest). After the merge, [`analyze`] runs
//! Project 5's nesting (nodes named by program) on each session and stores the runs in the
//! database (as `p5 analyze nesting --db URL --session NAME --node program` would), reads them
//! back, matches their patterns by signature and the nodes of the most frequent one by place
//! ([`p5_web::compare::match_nodes`], what the viewer's Compare tab shows) and names the node
//! whose own delay grew the most.
//!
//! WAP5's linking (its default weights, ours) runs on each session too and is stored beside
//! nesting, as `p5 analyze linking --db URL --session NAME --node program` would: it knows
//! nothing of calls and returns, only who sent what to whom when, so its most expected
//! pattern being the service's structure, once per request, is a second opinion on the
//! structure nesting found (the closed-loop client — the next request leaves 0.5 ms after the
//! previous reply — starts a path with each request: `--client-roots`).

use super::scenarios::{AppServer, Env, Sizes, check, last_line};
use anyhow::{Context as _, bail};
use p5_analyze::node::NodeKey;
use p5_tracedb::read as q;
use p5_tracedb::schema::PathPattern;
use p5_web::compare::{NodeDelta, match_nodes};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The service's one C source.
pub const SOURCE: &str = include_str!("../../../samples/blackbox/service.c");
/// The session recorded as is.
pub const BASE: &str = "blackbox";
/// The session with the delay injected.
pub const DELAYED: &str = "blackbox-delayed";
/// The backend the delay is injected in.
pub const SLOW_NODE: &str = "catalog";
/// Messages per request: client → front → auth → db → auth → front → catalog → db → catalog
/// → front → client.
pub const MESSAGES_PER_REQUEST: u64 = 10;
/// The call tree of one request, in the analysis' signature notation.
pub const STRUCTURE: &str = "client>front(auth(db),catalog(db))";

/// The built service and how it is preloaded.
#[derive(Debug)]
pub struct Service {
    exe: PathBuf,
    preload: crate::preload::Setup,
}

impl Service {
    /// Writes the source to `src`, compiles it with plain `cc` (`$CC` if set) into `bin`, and
    /// finds (or builds) the preload library, whose call-name manifest goes into `store`.
    pub fn build(src: &Path, bin: &Path, store: &Path) -> anyhow::Result<Service> {
        let dir = src.join("blackbox");
        std::fs::create_dir_all(&dir)?;
        let file = dir.join("service.c");
        std::fs::write(&file, SOURCE)?;
        let exe = bin.join("service");
        let cc = std::env::var_os("CC").unwrap_or_else(|| "cc".into());
        let out = Command::new(&cc)
            .args(["-O2", "-o"])
            .arg(&exe)
            .arg(&file)
            .output()
            .with_context(|| format!("cannot run the C compiler {cc:?} (install gcc)"))?;
        check(&out, "cc samples/blackbox/service.c")?;
        let preload = crate::preload::Setup::prepare(store, &[exe.clone().into_os_string()])?;
        if let Some(o) = preload.opaque {
            bail!("the black-box service cannot be preloaded: {}", o.reason());
        }
        Ok(Service { exe, preload })
    }

    /// The directory of the manifest naming the interposed calls (for the merge).
    pub fn manifest(&self) -> &Path {
        &self.preload.manifest
    }

    /// The service run as `role`, preloaded.
    fn command(&self, env: &Env<'_>, role: &str) -> Command {
        let mut c = env.command(&self.exe, role);
        c.env("LD_PRELOAD", &self.preload.ld_preload);
        c
    }

    /// Runs the whole service once: db, the backends (`catalog` delayed when `delayed`), the
    /// front end, then the client; returns the client's last line.
    pub fn run(&self, env: &Env<'_>, s: &Sizes, delayed: bool) -> anyhow::Result<String> {
        std::fs::create_dir_all(env.work)?;
        let mut db = AppServer::start(self.command(env, "db").args(["0", "2"]))?;
        let db_port = db.port.to_string();
        let mut auth = AppServer::start(self.command(env, "auth").args(["0", &db_port]))?;
        let delay = if delayed { s.blackbox_delay_us } else { 0 };
        let mut catalog = AppServer::start(self.command(env, "catalog").args([
            "0".to_owned(),
            db_port,
            delay.to_string(),
        ]))?;
        let mut front = AppServer::start(self.command(env, "front").args([
            "0".to_owned(),
            auth.port.to_string(),
            catalog.port.to_string(),
        ]))?;
        let client = self
            .command(env, "client")
            .args([
                front.port.to_string(),
                s.blackbox_requests.to_string(),
                s.blackbox_gap_us.to_string(),
            ])
            .output()
            .context("cannot run the black-box client")?;
        front.finish("front")?;
        auth.finish("auth")?;
        catalog.finish("catalog")?;
        db.finish("db")?;
        check(&client, "black-box client")?;
        Ok(last_line(&client.stdout))
    }
}

/// One pattern as the demo prints it.
#[derive(Debug, Clone, PartialEq)]
pub struct Pattern {
    /// Signature.
    pub signature: String,
    /// Instances.
    pub count: i64,
    /// Mean end-to-end latency, ns.
    pub mean_ns: i64,
}

impl From<&PathPattern> for Pattern {
    fn from(p: &PathPattern) -> Self {
        Pattern {
            signature: p.signature.clone(),
            count: p.instances,
            mean_ns: p.mean_total_ns,
        }
    }
}

/// What one session's analyses found.
#[derive(Debug, Clone, Default)]
pub struct Side {
    /// Session name.
    pub session: String,
    /// Session id.
    pub session_id: i64,
    /// Merge: matched messages, sends nobody received, receives no send accounts for,
    /// messages received before they were sent.
    pub merged: [u64; 4],
    /// Nesting: call pairs, nested pairs, calls and returns left unmatched.
    pub pairs: [u64; 4],
    /// The stored nesting run.
    pub nesting_run: i64,
    /// Its patterns, most frequent first (at most five).
    pub patterns: Vec<Pattern>,
    /// Messages in all of its instances.
    pub messages_in_paths: u64,
    /// The stored linking run.
    pub linking_run: i64,
    /// Its patterns, most expected first (at most three): signature, instances, expectation.
    pub linked: Vec<(String, u64, f64)>,
}

/// The case study's result.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Requests the client sent in each session.
    pub requests: u32,
    /// The injected delay, ns.
    pub injected_ns: i64,
    /// The sessions as is and delayed.
    pub sides: Vec<Side>,
    /// The most frequent pattern found in both, and its nodes matched by place.
    pub compared: Option<(String, Vec<NodeDelta>)>,
}

impl Report {
    /// The matched node whose own delay grew the most.
    pub fn grown(&self) -> Option<&NodeDelta> {
        let (_, nodes) = self.compared.as_ref()?;
        nodes
            .iter()
            .filter(|n| n.own_delta.is_some())
            .max_by_key(|n| n.own_delta.unwrap_or(0))
    }

    /// `SID:RUN,SID:RUN` of the two nesting runs (the viewer's `#compare=`).
    pub fn compare_hash(&self) -> Option<String> {
        let [a, b] = self.sides.as_slice() else {
            return None;
        };
        Some(format!(
            "compare={}:{},{}:{}",
            a.session_id, a.nesting_run, b.session_id, b.nesting_run
        ))
    }
}

/// Analyses both sessions of `db` (after the merge, whose summaries are `merged`), stores the
/// runs and compares them. Must not be called from inside an async runtime.
pub fn analyze(
    rt: &tokio::runtime::Runtime,
    db: &str,
    merged: &[p5_merge::SessionSummary],
    s: &Sizes,
) -> anyhow::Result<Report> {
    let mut handle = p5_analyze::db::Database::open(db)?;
    let mut report = Report {
        requests: s.blackbox_requests,
        injected_ns: i64::from(s.blackbox_delay_us) * 1000,
        ..Report::default()
    };
    for name in [BASE, DELAYED] {
        let m = merged
            .iter()
            .find(|m| m.name == name)
            .with_context(|| format!("session {name} was not merged"))?;
        let loaded = handle
            .load_trace(name, NodeKey::Program, &mut |_| {})
            .with_context(|| format!("reading session {name}"))?;
        let (nest, counts) =
            p5_analyze::nesting::nesting(&loaded.trace, &p5_analyze::nesting::Params::default());
        let ids = p5_analyze::store::MessageIds::default();
        let nesting_run = handle.save_result(name, (&nest, "sql", &ids), |_, _, _| {})?;
        let mut patterns = rt.block_on(read_patterns(db, loaded.session_id, nesting_run))?;
        patterns.sort_by_key(|p| (std::cmp::Reverse(p.instances), p.rank, p.id));
        let (linked, _) = p5_analyze::linking::linking(
            &loaded.trace,
            &p5_analyze::linking::Params::default(),
            &mut |_| {},
        );
        let linking_run = handle.save_result(name, (&linked, "sql", &ids), |_, _, _| {})?;
        report.sides.push(Side {
            session: name.to_owned(),
            session_id: loaded.session_id,
            merged: [
                m.matched,
                m.unmatched_sends,
                m.unmatched_recvs,
                m.violations,
            ],
            pairs: [
                counts.pairs,
                counts.nested,
                counts.unmatched_calls,
                counts.unmatched_rets,
            ],
            nesting_run,
            patterns: patterns.iter().take(5).map(Pattern::from).collect(),
            messages_in_paths: nest.instances.iter().map(|i| i.messages.len() as u64).sum(),
            linking_run,
            linked: linked
                .patterns
                .iter()
                .take(3)
                .map(|p| (p.signature.clone(), p.count, p.expectation))
                .collect(),
        });
        if name == DELAYED {
            report.compared = rt.block_on(compare(db, &report.sides))?;
        }
    }
    Ok(report)
}

async fn read_patterns(db: &str, sid: i64, run: i64) -> anyhow::Result<Vec<PathPattern>> {
    let r = q::Reader::open(&p5_tracedb::DbUrl::parse(db)?).await?;
    let v = q::path_patterns(&r, sid, run).await?;
    r.close().await;
    Ok(v)
}

/// The most frequent pattern of the first side found (by signature) in the second, with its
/// nodes matched by place, as the viewer's Compare tab matches them.
async fn compare(db: &str, sides: &[Side]) -> anyhow::Result<Option<(String, Vec<NodeDelta>)>> {
    let [a, b] = sides else {
        return Ok(None);
    };
    let r = q::Reader::open(&p5_tracedb::DbUrl::parse(db)?).await?;
    let mut pa = q::path_patterns(&r, a.session_id, a.nesting_run).await?;
    let pb = q::path_patterns(&r, b.session_id, b.nesting_run).await?;
    pa.sort_by_key(|p| (std::cmp::Reverse(p.instances), p.rank, p.id));
    let pair = pa.iter().find_map(|x| {
        pb.iter()
            .find(|y| y.signature == x.signature)
            .map(|y| (x, y))
    });
    let out = match pair {
        Some((x, y)) => {
            let na = q::path_nodes(&r, a.session_id, a.nesting_run, x.id).await?;
            let nb = q::path_nodes(&r, b.session_id, b.nesting_run, y.id).await?;
            Some((x.signature.clone(), match_nodes(&na, &nb)))
        }
        None => None,
    };
    r.close().await;
    Ok(out)
}

fn ms(ns: i64) -> f64 {
    ns as f64 / 1e6
}

/// The report for people.
pub fn render(r: &Report, o: &mut String) {
    let _ = writeln!(
        o,
        "\nblack-box case study: client -> front -> (auth -> db, then catalog -> db), plain C \
         built without p5, recorded with --preload; {} requests per session, {:.1} ms injected \
         in {SLOW_NODE} in {DELAYED}",
        r.requests,
        ms(r.injected_ns)
    );
    for s in &r.sides {
        let [matched, us, ur, viol] = s.merged;
        let [pairs, nested, uc, ur2] = s.pairs;
        let _ = writeln!(
            o,
            "  {}: {matched} messages matched ({us} sends and {ur} receives unmatched, {viol} \
             received before sent); nesting (run {}): {pairs} call pairs, {nested} nested, \
             {uc} calls and {ur2} returns unmatched, {} messages in paths",
            s.session, s.nesting_run, s.messages_in_paths
        );
        for (i, p) in s.patterns.iter().take(3).enumerate() {
            let _ = writeln!(
                o,
                "    {}. {:>5} x  mean {:>7.3} ms  {}",
                i + 1,
                p.count,
                ms(p.mean_ns),
                p.signature
            );
        }
        let _ = writeln!(
            o,
            "    linking (run {}, nothing but who sent what to whom when), most expected:",
            s.linking_run
        );
        for (i, (sig, count, e)) in s.linked.iter().enumerate() {
            let _ = writeln!(
                o,
                "    {}. {count:>5} x  expectation {e:>7.1}  {sig}",
                i + 1
            );
        }
    }
    match (&r.compared, r.grown()) {
        (Some((sig, nodes)), Some(g)) => {
            let _ = writeln!(o, "  compared by place in {sig}:");
            for n in nodes {
                let lat = |v: Option<i64>| v.map_or("-".to_owned(), |v| format!("{:.3}", ms(v)));
                let _ = writeln!(
                    o,
                    "    {:indent$}{:<10} latency {:>7} -> {:>7} ms   own delay {}",
                    "",
                    n.node,
                    lat(n.latency.0),
                    lat(n.latency.1),
                    n.own_delta
                        .map_or("-".to_owned(), |d| format!("{:+.3} ms", ms(d))),
                    indent = 2 * n.depth
                );
            }
            let d = g.own_delta.unwrap_or(0);
            let _ = writeln!(
                o,
                "  the delay grew in {} ({}): {:+.3} ms per request, {:.0} % of the {:.1} ms injected",
                g.node,
                g.key,
                ms(d),
                100.0 * d as f64 / r.injected_ns.max(1) as f64,
                ms(r.injected_ns)
            );
        }
        _ => {
            let _ = writeln!(o, "  no pattern was found in both sessions");
        }
    }
}

/// The report for scripts (`p5 demo --json`, key `blackbox`).
pub fn json(r: &Report) -> serde_json::Value {
    use serde_json::json;
    let sides: Vec<_> = r
        .sides
        .iter()
        .map(|s| {
            json!({
                "session": s.session,
                "session_id": s.session_id,
                "matched": s.merged[0],
                "unmatched_sends": s.merged[1],
                "unmatched_recvs": s.merged[2],
                "violations": s.merged[3],
                "nesting_run": s.nesting_run,
                "call_pairs": s.pairs[0],
                "nested": s.pairs[1],
                "unmatched_calls": s.pairs[2],
                "unmatched_returns": s.pairs[3],
                "messages_in_paths": s.messages_in_paths,
                "linking_run": s.linking_run,
                "linked": s.linked.iter().map(|(sig, count, e)| json!({
                    "signature": sig, "count": count, "expectation": e,
                })).collect::<Vec<_>>(),
                "patterns": s.patterns.iter().map(|p| json!({
                    "signature": p.signature, "count": p.count, "mean_ns": p.mean_ns,
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    let nodes: Vec<_> = r
        .compared
        .iter()
        .flat_map(|(_, n)| n)
        .map(|n| {
            json!({
                "key": n.key, "node": n.node, "depth": n.depth,
                "a_latency_ns": n.latency.0, "b_latency_ns": n.latency.1,
                "own_delta_ns": n.own_delta,
            })
        })
        .collect();
    json!({
        "requests": r.requests,
        "messages_per_request": MESSAGES_PER_REQUEST,
        "structure": STRUCTURE,
        "injected_node": SLOW_NODE,
        "injected_ns": r.injected_ns,
        "sessions": sides,
        "compared_signature": r.compared.as_ref().map(|c| &c.0),
        "nodes": nodes,
        "grown": r.grown().map(|g| json!({
            "node": g.node, "key": g.key, "own_delta_ns": g.own_delta,
        })),
        "compare_hash": r.compare_hash(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(key: &str, own: Option<i64>) -> NodeDelta {
        NodeDelta {
            key: key.into(),
            node: key.rsplit('/').next().unwrap_or(key).into(),
            depth: key.matches('/').count(),
            latency: (Some(1), Some(2)),
            call_delay: (None, None),
            own_delta: own,
        }
    }

    #[test]
    fn the_grown_node_is_the_largest_own_delay_and_the_link_names_both_runs() {
        let side = |sid, run| Side {
            session_id: sid,
            nesting_run: run,
            ..Side::default()
        };
        let mut r = Report {
            sides: vec![side(3, 1), side(4, 2)],
            ..Report::default()
        };
        assert!(r.grown().is_none());
        assert_eq!(r.compare_hash().as_deref(), Some("compare=3:1,4:2"));
        r.compared = Some((
            STRUCTURE.into(),
            vec![
                node("client", None),
                node("client/front", Some(30)),
                node("client/front/auth", Some(-10)),
                node("client/front/catalog", Some(5000)),
            ],
        ));
        assert_eq!(r.grown().map(|g| g.node.as_str()), Some("catalog"));
        let mut text = String::new();
        render(&r, &mut text);
        assert!(text.contains("the delay grew in catalog"), "{text}");
        assert_eq!(json(&r)["grown"]["own_delta_ns"], 5000);
        r.sides.pop();
        assert!(r.compare_hash().is_none());
    }
}
