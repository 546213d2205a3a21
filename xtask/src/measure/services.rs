//! The analysis of a large recording of a real service: `cargo bench -p p5-cli --bench
//! services` records the services test's stack (nginx → Python backends → redis, PostgreSQL,
//! MariaDB) under `p5 record --preload` and times `p5 analyze nesting` and `linking` on it as
//! whole commands (median of `P5_BENCH_RUNS`), 8 closed-loop clients. The budget is for
//! 10,000 requests; a quick run records fewer and is scaled to 10,000 (the analyses are
//! linear in the requests).

use super::{after, all_na, cargo, env_of, line, size};
use crate::Ctx;
use crate::report::{Better, Row};

pub fn services(ctx: &Ctx) -> Vec<Row> {
    let rows = vec![
        Row::new(
            "nesting of a 10,000-request recorded service",
            2.0,
            "s",
            Better::Lower,
        ),
        Row::new(
            "linking of a 10,000-request recorded service",
            2.0,
            "s",
            Better::Lower,
        ),
    ];
    let requests = size(ctx, 2000, 10_000);
    let mut envs = env_of("P5_BENCH_REQUESTS", &requests);
    envs.push(("P5_BENCH_CLIENTS", "8".to_owned()));
    let args = ["bench", "-p", "p5-cli", "--bench", "services"];
    let out = match cargo(ctx, "services", &args, &envs) {
        Ok(o) => o,
        Err(e) => return all_na(rows, &e),
    };
    let l = line(&out, "services analysis:");
    let n = l.clone().and_then(|l| after(l, "services analysis: "));
    let note = l
        .clone()
        .map(|l| {
            let l = l.trim_start_matches("services analysis: ");
            l.split(" (budget").next().unwrap_or(l).to_owned()
        })
        .unwrap_or_default();
    let [nesting, linking] = rows.try_into().expect("two rows");
    let per_10k = |key: &str| {
        let secs = l.clone().and_then(|l| after(l, key));
        secs.and_then(|s| n.clone().map(|n| s * 10_000.0 / n.max(1.0)))
    };
    vec![
        nesting
            .measured(per_10k("nesting median "))
            .note(note.clone()),
        linking.measured(per_10k("linking median ")).note(note),
    ]
}
