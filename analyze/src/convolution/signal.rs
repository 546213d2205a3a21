//! Indicator functions and their cross-correlation (\[P5\] §5.2.1).
//!
//! A message set becomes `s(t) = √(messages in [tμ, (t+1)μ))` — the square root offsets the
//! x² the correlation would otherwise give bursts — and two such signals are correlated by
//! FFT, zero-padded to at least twice their length so the correlation is linear, not
//! circular.
//!
//! Each lag of the correlation is divided by its overlap (`len − d` quanta) and only lags up to
//! half the length are kept: without the division every correlation falls off linearly with the
//! lag and buries its spikes, and the longest lags have too little overlap to be more than
//! noise.

use crate::trace::Time;
use rustfft::FftPlanner;
use rustfft::num_complex::Complex;
use std::sync::Arc;

/// The square-root indicator of `times` over `len` quanta of `quantum` ns from `t0`.
pub fn indicator(times: &[Time], t0: Time, quantum: Time, len: usize) -> Vec<f64> {
    let mut counts = vec![0u32; len];
    for &t in times {
        let k = ((t - t0) / quantum) as usize;
        if let Some(c) = counts.get_mut(k) {
            *c += 1;
        }
    }
    counts.into_iter().map(|c| f64::from(c).sqrt()).collect()
}

/// Correlates signals of one length with FFTs of a padded size, planned once.
pub struct Correlator {
    n: usize,
    fwd: Arc<dyn rustfft::Fft<f64>>,
    inv: Arc<dyn rustfft::Fft<f64>>,
}

impl std::fmt::Debug for Correlator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Correlator").field("n", &self.n).finish()
    }
}

impl Correlator {
    /// A correlator for signals of `len` quanta.
    pub fn new(len: usize) -> Correlator {
        let n = (2 * len).next_power_of_two().max(2);
        let mut planner = FftPlanner::new();
        Correlator {
            n,
            fwd: planner.plan_fft_forward(n),
            inv: planner.plan_fft_inverse(n),
        }
    }

    /// `c[d] = Σ_t a[t]·b[t+d] / (len − d)` for lags `d` from 0 to `len / 2`: how often `b`
    /// follows `a` after `d` quanta, per quantum of overlap — without the division every
    /// correlation would fall off linearly with the lag and bury its spikes in that trend; the
    /// longest lags, with little overlap left, are too noisy to keep.
    pub fn lagged(&self, a: &[f64], b: &[f64]) -> Vec<f64> {
        self.lagged_spectra(&self.spectrum(a), &self.spectrum(b), a.len())
    }

    /// The padded spectrum of a signal, for [`Correlator::lagged_spectra`] (one signal is
    /// often correlated with several).
    pub fn spectrum(&self, x: &[f64]) -> Vec<Complex<f64>> {
        let mut v: Vec<Complex<f64>> = x.iter().map(|&r| Complex::new(r, 0.0)).collect();
        v.resize(self.n, Complex::new(0.0, 0.0));
        self.fwd.process(&mut v);
        v
    }

    /// [`Correlator::lagged`] of two signals of `len` quanta from their spectra.
    pub fn lagged_spectra(&self, fa: &[Complex<f64>], fb: &[Complex<f64>], len: usize) -> Vec<f64> {
        let mut prod: Vec<Complex<f64>> = fa.iter().zip(fb).map(|(x, y)| x.conj() * y).collect();
        self.inv.process(&mut prod);
        let len = len.min(self.n);
        let scale = 1.0 / self.n as f64;
        prod[..len / 2 + 1]
            .iter()
            .enumerate()
            .map(|(d, c)| c.re * scale / (len - d) as f64)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn correlation_is_linear_and_finds_the_lag() {
        let a = [0.0, 1.0, 0.0, 0.0, 2.0, 0.0, 0.0, 0.0];
        let b = [0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 2.0, 0.0]; // a shifted by 2
        let c = Correlator::new(a.len()).lagged(&a, &b);
        assert_eq!(c.len(), 5);
        let best = (0..c.len()).max_by(|&i, &j| c[i].total_cmp(&c[j])).unwrap();
        assert_eq!(best, 2);
        assert!((c[2] - 5.0 / 6.0).abs() < 1e-9);
        // Linear, not circular: b's pulse at 3 follows nothing of a's after 4 quanta.
        assert!(c[4].abs() < 1e-9);
    }

    #[test]
    fn the_indicator_is_the_square_root_of_counts() {
        let s = indicator(&[0, 5, 9, 10, 35], 0, 10, 3);
        assert_eq!(s, vec![3f64.sqrt(), 1.0, 0.0]);
    }
}
