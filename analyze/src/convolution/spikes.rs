//! Spikes of a correlation (\[P5\] §5.2): a point at least `spike` standard deviations above
//! the mean; neighbouring spikes are one cluster unless a point below `valley` standard
//! deviations separates them; the largest point of a cluster is its spike.

/// A spike: lag (quanta) and height in standard deviations.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spike {
    /// Lag in quanta.
    pub lag: usize,
    /// Height above the mean in standard deviations.
    pub height_sd: f64,
}

/// The spikes of `c`, by lag.
pub fn spikes(c: &[f64], spike: f64, valley: f64) -> Vec<Spike> {
    if c.is_empty() {
        return Vec::new();
    }
    let n = c.len() as f64;
    let mean = c.iter().sum::<f64>() / n;
    let sd = (c.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n).sqrt();
    if sd <= 0.0 {
        return Vec::new();
    }
    let (hi, lo) = (mean + spike * sd, mean + valley * sd);
    let mut out = Vec::new();
    let mut cluster: Option<(usize, f64)> = None;
    for (d, &x) in c.iter().enumerate() {
        if x >= lo {
            if cluster.is_none_or(|(_, m)| x > m) {
                cluster = Some((d, x));
            }
        } else if let Some((at, m)) = cluster.take()
            && m >= hi
        {
            out.push(Spike {
                lag: at,
                height_sd: (m - mean) / sd,
            });
        }
    }
    if let Some((at, m)) = cluster
        && m >= hi
    {
        out.push(Spike {
            lag: at,
            height_sd: (m - mean) / sd,
        });
    }
    out
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
        assert!(spikes(&[1.0; 50], 4.0, 3.0).is_empty());
    }
}
