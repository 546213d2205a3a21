//! Convolution time (issue 17's budget: a 500 s trace at μ = 10 ms in ≤ 1 s; 6,684 CPU-s in
//! 2003): the multi-tier system of \[P5\] Fig. 10, 500 s, from CLIENT, at μ = 10 ms and 100 ms
//! (at 1 ms: 50 s, 217 edges, measured once). Input generation is not timed;
//! medians of three runs.

use p5_analyze::convolution::{Params, convolution};
use p5_analyze::maketrace::{self, Config, Options};
use std::path::Path;
use std::time::Instant;

fn main() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/fig10-multi-tier.toml");
    let text = std::fs::read_to_string(&fixture).expect("fixture");
    let cfg = Config::parse(&text, &fixture).expect("config");
    let g = maketrace::generate(
        &cfg,
        &Options {
            seed: 1,
            queue: 64,
            ..Options::default()
        },
    );
    let t = g.trace;
    let root = [t.nodes.get("CLIENT").expect("CLIENT")];
    for ms in [100, 10] {
        let p = Params::at(ms * 1_000_000);
        let mut runs = Vec::new();
        let mut edges = 0;
        for _ in 0..3 {
            let t0 = Instant::now();
            let r = convolution(&t, &root, &p).expect("convolution");
            runs.push(t0.elapsed().as_secs_f64());
            edges = r.edges.len();
        }
        runs.sort_by(f64::total_cmp);
        println!(
            "convolution: {} messages over 500 s at μ = {ms} ms ({} quanta): {:.3} s median \
             (runs {:.3} / {:.3} / {:.3}), {edges} edges",
            t.messages.len(),
            500_000 / ms,
            runs[1],
            runs[0],
            runs[1],
            runs[2]
        );
    }
}
