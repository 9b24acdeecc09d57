//! Capacity searches over deterministic runs: the fewest cores with no loss at a rate, and
//! the highest rate with no loss on some cores.
//!
//! Each search is a state machine ([`Bisection`]): the next probe is a function of the
//! outcomes so far. [`search`] runs one sequentially, or on several threads by *speculating*:
//! it evaluates, in parallel, the probes the search would make next under every combination
//! of the next few outcomes, then replays the sequential search over those results. The
//! answer — and every probe it rests on — is exactly the sequential one whatever the number of
//! threads; threads only buy time (the probes of the branches not taken are wasted work).

use std::collections::HashMap;
use std::hash::Hash;

/// A search as a sequence of probes, each chosen from the outcomes of the previous ones.
pub trait Bisection: Clone {
    /// What a probe tries (a core count, a rate's bits).
    type Probe: Copy + Eq + Hash + Send + Sync;
    /// What the search answers.
    type Answer;
    /// The next probe, or `None` when the search is over.
    fn next(&self) -> Option<Self::Probe>;
    /// Takes the outcome of the probe [`Bisection::next`] gave.
    fn advance(&mut self, lossless: bool);
    /// The answer once [`Bisection::next`] is `None` (`None`: nothing tried was lossless).
    fn answer(&self) -> Option<Self::Answer>;
}

/// The smallest core count in 1..=`max_cores` that is lossless, assuming more cores never
/// lose more: doubling, then bisection.
#[derive(Clone, Debug)]
pub struct MinCores {
    max_cores: usize,
    /// Always loses (0: no run needed).
    lo: usize,
    /// The candidate.
    hi: usize,
    doubling: bool,
    failed: bool,
}

impl MinCores {
    /// A search up to `max_cores` (at least 1).
    pub fn new(max_cores: usize) -> MinCores {
        MinCores { max_cores: max_cores.max(1), lo: 0, hi: 1, doubling: true, failed: false }
    }
}

impl Bisection for MinCores {
    type Probe = usize;
    type Answer = usize;

    fn next(&self) -> Option<usize> {
        if self.failed || (!self.doubling && self.lo + 1 >= self.hi) {
            None
        } else if self.doubling {
            Some(self.hi)
        } else {
            Some((self.lo + self.hi) / 2)
        }
    }

    fn advance(&mut self, lossless: bool) {
        if self.doubling {
            if lossless {
                self.doubling = false;
            } else if self.hi >= self.max_cores {
                self.failed = true;
            } else {
                self.lo = self.hi;
                self.hi = (self.hi * 2).min(self.max_cores);
            }
        } else {
            let mid = (self.lo + self.hi) / 2;
            if lossless {
                self.hi = mid;
            } else {
                self.lo = mid;
            }
        }
    }

    fn answer(&self) -> Option<usize> {
        (!self.failed).then_some(self.hi)
    }
}

/// The highest rate in (0, `max_rate`] within a relative tolerance that is lossless,
/// assuming a higher rate never loses less: the ceiling, then halving until lossless, then
/// bisection.
#[derive(Clone, Debug)]
pub struct MaxRate {
    max_rate: f64,
    tolerance: f64,
    lo: f64,
    hi: f64,
    phase: RatePhase,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum RatePhase {
    Ceiling,
    Halving(f64),
    Bisecting,
    Done(Option<f64>),
}

impl MaxRate {
    /// A search below `max_rate` to a relative `tolerance`.
    pub fn new(max_rate: f64, tolerance: f64) -> MaxRate {
        MaxRate { max_rate, tolerance, lo: 0.0, hi: max_rate, phase: RatePhase::Ceiling }
    }
}

impl Bisection for MaxRate {
    /// The rate's bits (rates are compared exactly).
    type Probe = u64;
    type Answer = f64;

    fn next(&self) -> Option<u64> {
        let rate = match self.phase {
            RatePhase::Ceiling => self.max_rate,
            RatePhase::Halving(r) => r,
            RatePhase::Bisecting => (self.lo + self.hi) / 2.0,
            RatePhase::Done(_) => return None,
        };
        Some(rate.to_bits())
    }

    fn advance(&mut self, lossless: bool) {
        self.phase = match self.phase {
            RatePhase::Ceiling if lossless => RatePhase::Done(Some(self.max_rate)),
            RatePhase::Ceiling => RatePhase::Halving(self.max_rate / 2.0),
            RatePhase::Halving(r) if lossless => {
                self.lo = r;
                RatePhase::Bisecting
            }
            RatePhase::Halving(r) => {
                self.hi = r;
                if r / 2.0 >= self.max_rate * 1e-6 {
                    RatePhase::Halving(r / 2.0)
                } else {
                    RatePhase::Done(None)
                }
            }
            RatePhase::Bisecting => {
                let mid = (self.lo + self.hi) / 2.0;
                if lossless {
                    self.lo = mid;
                } else {
                    self.hi = mid;
                }
                RatePhase::Bisecting
            }
            done @ RatePhase::Done(_) => done,
        };
        if self.phase == RatePhase::Bisecting && (self.hi - self.lo) / self.hi <= self.tolerance {
            self.phase = RatePhase::Done(Some(self.lo));
        }
    }

    fn answer(&self) -> Option<f64> {
        match self.phase {
            RatePhase::Done(a) => a,
            _ => None,
        }
    }
}

/// Runs `search` to its end, `lossless` judging each probe, on up to `threads` threads (see
/// the module: the result does not depend on `threads`). The first error (in the sequential
/// order of probes) stops the search and is returned.
pub fn search<B, E>(
    mut search: B,
    threads: usize,
    lossless: impl Fn(B::Probe) -> Result<bool, E> + Sync,
) -> Result<Option<B::Answer>, E>
where
    B: Bisection,
    E: Send,
{
    let mut known: HashMap<B::Probe, bool> = HashMap::new();
    // Speculate breadth first, one probe per thread: the current probe, then those of the
    // next steps (a tree of depth d has up to 2^d − 1).
    let threads = threads.max(1);
    let depth = (usize::BITS - threads.leading_zeros()) as usize;
    while let Some(probe) = search.next() {
        if let Some(&outcome) = known.get(&probe) {
            search.advance(outcome);
            continue;
        }
        let mut wanted = Vec::new();
        speculate(&search, depth, &known, &mut wanted);
        wanted.truncate(threads);
        let results: Vec<(B::Probe, Result<bool, E>)> = if threads <= 1 || wanted.len() <= 1 {
            wanted.into_iter().take(1).map(|p| (p, lossless(p))).collect()
        } else {
            std::thread::scope(|s| {
                let handles: Vec<_> = wanted
                    .iter()
                    .map(|&p| {
                        let lossless = &lossless;
                        s.spawn(move || (p, lossless(p)))
                    })
                    .collect();
                handles.into_iter().map(|h| h.join().expect("a probe panicked")).collect()
            })
        };
        for (p, r) in results {
            match r {
                Ok(outcome) => {
                    known.insert(p, outcome);
                }
                // An error on the probe the sequential search makes now is its error; one on
                // a speculative probe matters only if the search gets there.
                Err(e) if p == probe => return Err(e),
                Err(_) => {}
            }
        }
        if !known.contains_key(&probe) {
            unreachable!("the current probe is always evaluated first");
        }
    }
    Ok(search.answer())
}

/// The distinct unknown probes of the search's next `depth` steps, breadth first (the
/// current probe first).
fn speculate<B: Bisection>(from: &B, depth: usize, known: &HashMap<B::Probe, bool>, out: &mut Vec<B::Probe>) {
    let mut level = vec![from.clone()];
    for _ in 0..depth {
        let mut next_level = Vec::new();
        for s in &level {
            let Some(p) = s.next() else { continue };
            let outcomes: &[bool] = match known.get(&p) {
                Some(o) => std::slice::from_ref(o),
                None => {
                    if !out.contains(&p) {
                        out.push(p);
                    }
                    &[true, false]
                }
            };
            for &o in outcomes {
                let mut child = s.clone();
                child.advance(o);
                next_level.push(child);
            }
        }
        level = next_level;
    }
}

/// The smallest core count in 1..=`max_cores` for which `lossless(cores)` holds, run
/// sequentially. `None` if even `max_cores` loses.
pub fn min_cores(max_cores: usize, mut lossless: impl FnMut(usize) -> bool) -> Option<usize> {
    let mut s = MinCores::new(max_cores);
    while let Some(c) = s.next() {
        s.advance(lossless(c));
    }
    s.answer()
}

#[cfg(test)]
/// The highest rate in (0, `max_rate`] within a relative `tolerance` for which
/// `lossless(rate)` holds, run sequentially. `None` if even the lowest rate tried loses.
pub(crate) fn max_rate(max_rate: f64, tolerance: f64, mut lossless: impl FnMut(f64) -> bool) -> Option<f64> {
    let mut s = MaxRate::new(max_rate, tolerance);
    while let Some(bits) = s.next() {
        s.advance(lossless(f64::from_bits(bits)));
    }
    s.answer()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

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

    /// Speculation on any number of threads probes a superset of what the sequential search
    /// probes and answers exactly the same; an error on a probe the search needs is returned.
    #[test]
    fn parallel_searches_answer_as_the_sequential_one() {
        for threads in [1, 2, 3, 4, 8] {
            for need in [1usize, 2, 3, 5, 17, 33, 64, 65] {
                let runs = AtomicUsize::new(0);
                let got = search(MinCores::new(64), threads, |c| -> Result<bool, ()> {
                    runs.fetch_add(1, Ordering::Relaxed);
                    Ok(c >= need)
                });
                assert_eq!(got, Ok(min_cores(64, |c| c >= need)), "{threads} threads, need {need}");
                if threads == 1 {
                    assert!(runs.load(Ordering::Relaxed) <= 14);
                }
            }
            for limit in [3.3e6, 1e3, 9.99e6, 2e7, 0.0] {
                let got = search(MaxRate::new(1e7, 0.001), threads, |bits| -> Result<bool, ()> {
                    Ok(f64::from_bits(bits) <= limit)
                });
                assert_eq!(got, Ok(max_rate(1e7, 0.001, |r| r <= limit)), "{threads} threads, limit {limit}");
            }
            let failing = search(MinCores::new(64), threads, |c| if c >= 4 { Err(c) } else { Ok(false) });
            assert_eq!(failing, Err(4), "{threads} threads: the sequential search's first error");
        }
    }
}
