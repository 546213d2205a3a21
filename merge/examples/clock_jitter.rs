//! How a two-way clock fit's error falls with the number of samples when delays vary: the
//! multi-host test's jitter relay (each one-way delay uniform in 0.5–3 ms), a clock drifting
//! 100 ppm, samples spread evenly over a run. Prints, per number of samples a direction, the
//! median and 90th percentile over 200 seeds of the worse error at the run's two ends, and the
//! median drift error. `cargo run --release -p p5-merge --example clock_jitter [RUN_S]`.

use p5_merge::clock::{Samples, fit};

/// xorshift64: deterministic, no dependency.
struct Rng(u64);

impl Rng {
    fn uniform(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

const SEEDS: u64 = 200;

fn main() {
    let run_s: f64 = std::env::args()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(7.0);
    let (lo, hi, drift, offset) = (500_000.0, 3_000_000.0, 100e-6, 1e8);
    let span = run_s * 1e9;
    println!("run {run_s} s, one-way delays uniform 0.5–3 ms, drift 100 ppm, {SEEDS} seeds");
    for n in [500usize, 1000, 2000, 4000, 8000, 16000] {
        let (mut worst, mut drift_err) = (Vec::new(), Vec::new());
        for seed in 1..=SEEDS {
            let mut r = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
            let mut s = Samples::default();
            for _ in 0..n {
                let (x, d) = (r.uniform() * span, lo + (hi - lo) * r.uniform());
                s.forward.push((x as i64, (offset + drift * x + d) as i64));
                let (x, d) = (r.uniform() * span, lo + (hi - lo) * r.uniform());
                s.backward.push((x as i64, (offset + drift * x - d) as i64));
            }
            s.span = Some((0, span as i64));
            let f = fit(&s);
            let err = |x: f64| f.offset + f.drift * x - (offset + drift * x);
            worst.push(err(0.0).abs().max(err(span).abs()) / 1e3);
            drift_err.push((f.drift - drift).abs() * 1e6);
        }
        worst.sort_by(f64::total_cmp);
        drift_err.sort_by(f64::total_cmp);
        let q = |v: &[f64], p: f64| v[((v.len() - 1) as f64 * p).round() as usize];
        println!(
            "{n:>6} samples a direction: worse end error median {:>6.2} µs, 90 % {:>6.2} µs; \
             drift error median {:.3} ppm",
            q(&worst, 0.5),
            q(&worst, 0.9),
            q(&drift_err, 0.5)
        );
    }
}
