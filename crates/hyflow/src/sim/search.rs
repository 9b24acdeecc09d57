//! Capacity searches over deterministic runs: the fewest cores with no loss at a rate, and
//! the highest rate with no loss on some cores.

/// The smallest core count in 1..=`max_cores` for which `lossless(cores)` holds, assuming
/// more cores never lose more (doubling, then bisection). `None` if even `max_cores` loses.
pub fn min_cores(max_cores: usize, mut lossless: impl FnMut(usize) -> bool) -> Option<usize> {
    // `lo` always loses (0: no run needed), `hi` is the candidate.
    let (mut lo, mut hi) = (0, 1);
    while !lossless(hi) {
        if hi >= max_cores {
            return None;
        }
        lo = hi;
        hi = (hi * 2).min(max_cores);
    }
    while lo + 1 < hi {
        let mid = (lo + hi) / 2;
        if lossless(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Some(hi)
}

/// The highest rate in (0, `max_rate`] within a relative `tolerance` for which
/// `lossless(rate)` holds, assuming a higher rate never loses less (bisection). `None` if
/// even the lowest rate tried loses.
pub fn max_rate(max_rate: f64, tolerance: f64, mut lossless: impl FnMut(f64) -> bool) -> Option<f64> {
    if lossless(max_rate) {
        return Some(max_rate);
    }
    let (mut lo, mut hi) = (0.0f64, max_rate);
    let mut found = None;
    // Find a lossless rate first by halving.
    let mut r = max_rate / 2.0;
    while r >= max_rate * 1e-6 {
        if lossless(r) {
            lo = r;
            found = Some(r);
            break;
        }
        hi = r;
        r /= 2.0;
    }
    found?;
    while (hi - lo) / hi > tolerance {
        let mid = (lo + hi) / 2.0;
        if lossless(mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Some(lo)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn searches_find_the_threshold() {
        for need in 1..=40 {
            let mut runs = 0;
            assert_eq!(
                min_cores(64, |c| {
                    runs += 1;
                    c >= need
                }),
                Some(need)
            );
            assert!(runs <= 14, "{runs} runs");
        }
        assert_eq!(min_cores(8, |c| c >= 9), None);
        let r = max_rate(1e7, 0.001, |r| r <= 3.3e6).unwrap();
        assert!((r - 3.3e6).abs() / 3.3e6 < 0.002, "{r}");
        assert_eq!(max_rate(1e7, 0.01, |r| r <= 2e7), Some(1e7));
        assert_eq!(max_rate(1e7, 0.01, |_| false), None);
    }
}
