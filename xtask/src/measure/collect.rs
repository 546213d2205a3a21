//! Collecting: the log server's ingest (`cargo bench -p p5-logserver --bench ingest`, with
//! `P5_BENCH_EVENTS` reduced) and the host agent's overhead (`cargo bench -p p5-hostagent
//! --bench overhead`: a real agent at 10 samples/s for 20 s).

use super::{after, all_na, cargo, env_of, line, size};
use crate::report::{Better, Row};
use crate::{Ctx, parse};

pub fn ingest(ctx: &Ctx) -> Vec<Row> {
    let clients = [1, 8, 64];
    let rows: Vec<Row> = clients
        .iter()
        .map(|c| {
            Row::new(
                format!("log-server ingest, {c} client(s)"),
                20.0,
                "M ev per server CPU-s",
                Better::Higher,
            )
        })
        .collect();
    let n = size(ctx, 8 << 20, 32 << 20);
    let args = ["bench", "-p", "p5-logserver", "--bench", "ingest"];
    let out = match cargo(ctx, "ingest", &args, &env_of("P5_BENCH_EVENTS", &n)) {
        Ok(o) => o,
        Err(e) => return all_na(rows, &e),
    };
    rows.into_iter()
        .zip(clients)
        .map(|(r, c)| match parse::table_row(&out, &c.to_string()) {
            // clients events B/event wall-s Mevents/s MB/s Mev/server-s baseline/s ratio
            Some(cols) if cols.len() >= 9 => {
                let server = cols[6].parse::<f64>().map_err(|e| e.to_string());
                r.measured(server).note(format!(
                    "to a durable store; wall {} M ev/s; {}× a plain TCP→file copy",
                    cols[4], cols[8]
                ))
            }
            _ => r.measured(Err(format!(
                "no {c}-client row in: {}",
                parse::tail(&out, 2)
            ))),
        })
        .collect()
}

pub fn hostagent(ctx: &Ctx) -> Vec<Row> {
    let rows = vec![
        Row::new(
            "host agent CPU at 10 samples/s",
            0.5,
            "% of a core",
            Better::Lower,
        ),
        Row::new("host agent peak RSS", 20.0, "MB", Better::Lower),
    ];
    let args = ["bench", "-p", "p5-hostagent", "--bench", "overhead"];
    let out = match cargo(ctx, "hostagent", &args, &[]) {
        Ok(o) => o,
        Err(e) => return all_na(rows, &e),
    };
    let [cpu, rss] = rows.try_into().expect("two rows");
    let agent = line(&out, "agent at 10 samples/s");
    vec![
        cpu.measured(agent.clone().and_then(|l| after(l, "CPU ")))
            .note("every metric, one monitored process, 20 s"),
        rss.measured(agent.clone().and_then(|l| after(l, "(peak ")))
            .note("VmHWM of the agent process"),
    ]
}
