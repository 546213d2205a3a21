//! Spikes of a correlation (\[P5\] §5.2): a point at least `spike` standard deviations above
//! the mean; neighbouring spikes are one cluster unless a point below `valley` standard
//! deviations separates them; the largest point of a cluster is its spike.
//!
//! Two delays one quantum apart (10 s and 15 s at μ = 5 s, \[P5\] §7.4) fill neighbouring
//! lags: there is no point between them to be the valley, and by the rule alone they are one
//! spike. A cluster of two or three lags with two points at spike height is therefore looked
//! at again at half the quantum ([`split`]; wider clusters are a spread delay, and looking at
//! every one again tripled the time on the multi-tier trace): where the finer correlation
//! shows a valley between spikes that fall into different lags of the coarse one, each is a
//! spike of its own, at its coarse lag (the quantum stays the resolution: a single delay
//! spread over two lags shows no valley at half the quantum and stays one spike).

/// A spike: lag (quanta) and height in standard deviations.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spike {
    /// Lag in quanta.
    pub lag: usize,
    /// Height above the mean in standard deviations.
    pub height_sd: f64,
    /// The cluster's first and last lag (points at least `valley` deviations up).
    pub span: (usize, usize),
    /// How many points of the cluster reach spike height.
    pub peaks: usize,
}

/// Mean and standard deviation of `c`.
pub fn moments(c: &[f64]) -> (f64, f64) {
    let n = c.len() as f64;
    let mean = c.iter().sum::<f64>() / n;
    let sd = (c.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n).sqrt();
    (mean, sd)
}

/// The spikes of `c`, by lag.
pub fn spikes(c: &[f64], spike: f64, valley: f64) -> Vec<Spike> {
    if c.is_empty() {
        return Vec::new();
    }
    let (mean, sd) = moments(c);
    if sd <= 0.0 {
        return Vec::new();
    }
    let (hi, lo) = (mean + spike * sd, mean + valley * sd);
    let mut out = Vec::new();
    // The open cluster: first lag, largest point (lag, value), points at spike height.
    let mut cluster: Option<(usize, usize, f64, usize)> = None;
    let mut close = |cl: Option<(usize, usize, f64, usize)>, end: usize| {
        if let Some((first, at, m, peaks)) = cl
            && m >= hi
        {
            out.push(Spike {
                lag: at,
                height_sd: (m - mean) / sd,
                span: (first, end),
                peaks,
            });
        }
    };
    for (d, &x) in c.iter().enumerate() {
        if x >= lo {
            let peak = usize::from(x >= hi);
            cluster = Some(match cluster {
                None => (d, d, x, peak),
                Some((f, at, m, p)) if x <= m => (f, at, m, p + peak),
                Some((f, _, _, p)) => (f, d, x, p + peak),
            });
        } else {
            close(cluster.take(), d.saturating_sub(1));
        }
    }
    close(cluster, c.len() - 1);
    out
}

/// Splits `coarse` (a spike of a correlation at quantum μ with more than one point at spike
/// height) by the spikes `fine` of the same signals correlated at μ/2: the fine spikes inside
/// the coarse cluster, each at its coarse lag (`fine lag / 2`), the highest per coarse lag,
/// with the coarse correlation's height there (`coarse_sd[lag]`). Fewer than two such lags: the
/// cluster stays the one spike it was.
pub fn split(coarse: &Spike, fine: &[Spike], coarse_sd: impl Fn(usize) -> f64) -> Vec<Spike> {
    let (a, b) = coarse.span;
    let mut lags: Vec<(usize, f64)> = Vec::new();
    for f in fine.iter().filter(|f| (2 * a..=2 * b + 1).contains(&f.lag)) {
        let lag = f.lag / 2;
        match lags.last_mut() {
            Some((l, h)) if *l == lag => *h = h.max(f.height_sd),
            _ => lags.push((lag, f.height_sd)),
        }
    }
    if lags.len() < 2 {
        return vec![*coarse];
    }
    lags.into_iter()
        .map(|(lag, _)| Spike {
            lag,
            height_sd: coarse_sd(lag),
            span: (lag, lag),
            peaks: 1,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clusters_keep_their_largest_point() {
        let mut c = vec![0.0; 200];
        c[10] = 50.0;
        c[11] = 60.0; // the same cluster: no valley between
        c[12] = 45.0;
        c[100] = 55.0;
        let s = spikes(&c, 4.0, 3.0);
        assert_eq!(s.iter().map(|s| s.lag).collect::<Vec<_>>(), vec![11, 100]);
        assert_eq!((s[0].span, s[0].peaks), ((10, 12), 3));
        assert_eq!((s[1].span, s[1].peaks), ((100, 100), 1));
        assert!(spikes(&[1.0; 50], 4.0, 3.0).is_empty());
    }

    #[test]
    fn a_cluster_splits_where_half_the_quantum_shows_a_valley() {
        let coarse = Spike {
            lag: 3,
            height_sd: 5.0,
            span: (2, 3),
            peaks: 2,
        };
        let at = |lag, h| Spike {
            lag,
            height_sd: h,
            span: (lag, lag),
            peaks: 1,
        };
        // Fine spikes at 4 and 6 (10 s and 15 s at 2.5 s), one outside the cluster at 0.
        let s = split(&coarse, &[at(0, 40.0), at(4, 6.0), at(6, 7.0)], |l| {
            l as f64
        });
        assert_eq!(s.iter().map(|s| s.lag).collect::<Vec<_>>(), vec![2, 3]);
        assert_eq!(s[0].height_sd, 2.0);
        // One fine spike, or two within one coarse lag: still one spike.
        assert_eq!(split(&coarse, &[at(5, 9.0)], |_| 0.0), vec![coarse]);
        assert_eq!(
            split(&coarse, &[at(6, 9.0), at(7, 8.0)], |_| 0.0),
            vec![coarse]
        );
    }
}
