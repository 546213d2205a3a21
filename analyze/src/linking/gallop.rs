//! Galloping search in a sorted slice, for lookups that move forward: the next one is
//! usually a few places on from the last, sometimes hundreds.

/// The last index `k ≥ from` with `sorted[k] <= x`, where `sorted[from] <= x` already:
/// doubling steps forward from `from`, then a binary search within the last step.
pub fn last_at_most<T: PartialOrd + Copy>(sorted: &[T], x: T, from: usize) -> usize {
    let (mut lo, mut step) = (from, 1);
    let hi = loop {
        let probe = lo + step;
        match sorted.get(probe) {
            Some(&v) if v <= x => (lo, step) = (probe, step * 2),
            Some(_) => break probe,
            None => break sorted.len(),
        }
    };
    lo + sorted
        .get(lo + 1..hi)
        .map_or(0, |s| s.partition_point(|&v| v <= x))
}

#[cfg(test)]
mod tests {
    use super::last_at_most;

    /// Galloping from any earlier index finds what a search of the whole slice finds,
    /// runs of equal values included.
    #[test]
    fn galloping_agrees_with_a_full_search() {
        let off = [0u32, 0, 3, 3, 3, 4, 9, 9, 12, 20];
        let full = |l: u32| off.partition_point(|&o| o <= l) - 1;
        for l in 0..25 {
            let want = full(l);
            for from in 0..=want {
                assert_eq!(last_at_most(&off, l, from), want, "value {l} from {from}");
            }
        }
    }
}
