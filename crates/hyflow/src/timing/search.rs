//! Capacity searches over deterministic runs: the fewest cores with no loss at a rate, and
//! the highest rate with no loss on some cores.
//!
//! Fewer cores do not always lose more: flows are hashed onto cores, and one more core can
//! put two heavy flows on the same one (TFO on the gateway mix: lossless on 7 cores, 133
//! packets lost on 8). So the fewest cores are found by a [`sweep`] of every count up to the
//! bound, as Elixir's Figure 13 plots loss against cores, and answered as the fewest from
//! which every larger count is lossless ([`fewest_cores_from`]), with the counts below it that
//! were lossless all the same.
//!
//! The highest rate is a bisection ([`Bisection`]): the next probe is a function of the
//! outcomes so far. [`search`] runs one sequentially, or several probes at a time (on threads,
//! or as Ray tasks: the caller runs each batch) by *speculating*: it evaluates, in parallel,
//! the probes the search would make next under every combination of the next few outcomes,
//! then replays the sequential search over those results. The answer — and every probe it
//! rests on — is exactly the sequential one whatever the number of probes at a time; they
//! only buy time (the probes of the branches not taken are wasted work).

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use serde::Serialize;

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

/// How a core count fared in a sweep: packets lost (at full rings) of those offered, and
/// whether the host kept up to the input's end.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct CoreLoss {
    /// Cores.
    pub cores: usize,
    /// Packets lost.
    pub lost: u64,
    /// Packets offered (measured).
    pub offered: u64,
    /// Lost / offered.
    pub loss_rate: f64,
    /// Whether the host emptied its rings in time (a run that is not was falling behind).
    pub steady: bool,
}

impl CoreLoss {
    /// `cores` lost `lost` of `offered` packets; `steady` as [`CoreLoss::steady`].
    pub fn new(cores: usize, lost: u64, offered: u64, steady: bool) -> CoreLoss {
        CoreLoss { cores, lost, offered, loss_rate: lost as f64 / offered.max(1) as f64, steady }
    }

    /// Whether the run lost nothing and kept up.
    pub fn lossless(&self) -> bool {
        self.lost == 0 && self.steady
    }

    /// Whether the run lost at most `tolerance` of what it was offered and kept up.
    pub fn within(&self, tolerance: f64) -> bool {
        self.steady && self.loss_rate <= tolerance
    }
}

/// The fewest cores from which every count of the sweep `losses` (in order of cores, ending
/// at the bound) is `good`; `None` if the bound itself is not.
pub fn fewest_cores_from(losses: &[CoreLoss], good: impl Fn(&CoreLoss) -> bool) -> Option<usize> {
    let bad_above = losses.iter().rposition(|l| !good(l));
    match bad_above {
        None => losses.first().map(|l| l.cores),
        Some(i) => losses.get(i + 1).map(|l| l.cores),
    }
}

/// `run` on every one of `probes`, on up to `threads` threads, results in the order of
/// `probes` (they do not depend on `threads`). An error stops the sweep — no new probe starts
/// — and is returned (the first in the order of probes among those that ran).
pub fn sweep<P, T, E>(
    probes: &[P],
    threads: usize,
    run: impl Fn(&P) -> Result<T, E> + Sync,
) -> Result<Vec<T>, E>
where
    P: Sync,
    T: Send,
    E: Send,
{
    let mut out = Vec::with_capacity(probes.len());
    // Not started (`None`): an earlier probe failed (its error comes first in order, or a
    // later one did and is returned when reached).
    for r in run_on_threads(probes, threads, true, run).into_iter().flatten() {
        out.push(r?);
    }
    Ok(out)
}

/// `run` on every one of `probes`, on up to `threads` threads, every result in the order of
/// `probes`, errors included: the batch runner of a [`search`] on this process's threads.
pub fn parallel<P, T, E>(
    probes: &[P],
    threads: usize,
    run: impl Fn(&P) -> Result<T, E> + Sync,
) -> Vec<Result<T, E>>
where
    P: Sync,
    T: Send,
    E: Send,
{
    let all = run_on_threads(probes, threads, false, run);
    all.into_iter().map(|r| r.expect("every probe runs unless an error stops them")).collect()
}

/// Threads taking `probes` in order from a shared counter, each running `run` on the next;
/// with `stop_on_error`, no probe starts after one failed (those are `None`).
fn run_on_threads<P, T, E>(
    probes: &[P],
    threads: usize,
    stop_on_error: bool,
    run: impl Fn(&P) -> Result<T, E> + Sync,
) -> Vec<Option<Result<T, E>>>
where
    P: Sync,
    T: Send,
    E: Send,
{
    let results: Mutex<Vec<Option<Result<T, E>>>> = Mutex::new((0..probes.len()).map(|_| None).collect());
    let next = AtomicUsize::new(0);
    let failed = std::sync::atomic::AtomicBool::new(false);
    let work = || loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        if i >= probes.len() || failed.load(Ordering::Relaxed) {
            break;
        }
        let r = run(&probes[i]);
        if r.is_err() && stop_on_error {
            failed.store(true, Ordering::Relaxed);
        }
        results.lock().expect("no probe panics holding it")[i] = Some(r);
    };
    let threads = threads.clamp(1, probes.len().max(1));
    if threads == 1 {
        work();
    } else {
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(work);
            }
        });
    }
    results.into_inner().expect("no probe panics holding it")
}

/// The highest whole rate (packets/s) in [1, `max_rate`] within a relative tolerance that is
/// lossless, assuming a higher rate never loses less: the ceiling, then halving until
/// lossless, then bisection. Probes are whole rates, so the answer is a rate that was run
/// exactly, not one rounded after.
#[derive(Clone, Debug)]
pub struct MaxRate {
    max_rate: u64,
    tolerance: f64,
    lo: u64,
    hi: u64,
    phase: RatePhase,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum RatePhase {
    Ceiling,
    Halving(u64),
    Bisecting,
    Done(Option<u64>),
}

impl MaxRate {
    /// A search at or below `max_rate` (at least 1) to a relative `tolerance`.
    pub fn new(max_rate: u64, tolerance: f64) -> MaxRate {
        let max_rate = max_rate.max(1);
        MaxRate { max_rate, tolerance, lo: 0, hi: max_rate, phase: RatePhase::Ceiling }
    }

    fn settled(&self) -> bool {
        self.hi - self.lo <= 1 || (self.hi - self.lo) as f64 / self.hi as f64 <= self.tolerance
    }
}

impl Bisection for MaxRate {
    /// The rate, packets/s.
    type Probe = u64;
    type Answer = u64;

    fn next(&self) -> Option<u64> {
        match self.phase {
            RatePhase::Ceiling => Some(self.max_rate),
            RatePhase::Halving(r) => Some(r),
            RatePhase::Bisecting => Some(self.lo + (self.hi - self.lo) / 2),
            RatePhase::Done(_) => None,
        }
    }

    fn advance(&mut self, lossless: bool) {
        self.phase = match self.phase {
            RatePhase::Ceiling if lossless => RatePhase::Done(Some(self.max_rate)),
            RatePhase::Ceiling => RatePhase::Halving(self.max_rate / 2),
            RatePhase::Halving(r) if lossless => {
                self.lo = r;
                RatePhase::Bisecting
            }
            RatePhase::Halving(r) => {
                self.hi = r;
                if r / 2 >= 1 && r as f64 / 2.0 >= self.max_rate as f64 * 1e-6 {
                    RatePhase::Halving(r / 2)
                } else {
                    RatePhase::Done(None)
                }
            }
            RatePhase::Bisecting => {
                let mid = self.lo + (self.hi - self.lo) / 2;
                if lossless {
                    self.lo = mid;
                } else {
                    self.hi = mid;
                }
                RatePhase::Bisecting
            }
            done @ RatePhase::Done(_) => done,
        };
        if self.phase == RatePhase::Bisecting && self.settled() {
            self.phase = RatePhase::Done(Some(self.lo));
        }
    }

    fn answer(&self) -> Option<u64> {
        match self.phase {
            RatePhase::Done(a) => a,
            _ => None,
        }
    }
}

/// Runs `search` to its end on up to `width` probes at a time: `batch` runs the probes it is
/// given (at once, wherever it likes: this process's threads with [`parallel`], Ray tasks)
/// and answers each one's outcome, in their order. The result does not depend on `width` (see
/// the module). The first error in the sequential order of probes stops the search and is
/// returned; an error on a speculative probe the search never reaches is ignored.
pub fn search<B, E>(
    mut search: B,
    width: usize,
    mut batch: impl FnMut(&[B::Probe]) -> Vec<Result<bool, E>>,
) -> Result<Option<B::Answer>, E>
where
    B: Bisection,
{
    let mut known: HashMap<B::Probe, bool> = HashMap::new();
    // Speculate breadth first, one probe per slot: the current probe, then those of the
    // next steps (a tree of depth d has up to 2^d − 1).
    let width = width.max(1);
    let depth = (usize::BITS - width.leading_zeros()) as usize;
    while let Some(probe) = search.next() {
        if let Some(&outcome) = known.get(&probe) {
            search.advance(outcome);
            continue;
        }
        let mut wanted = Vec::new();
        speculate(&search, depth, &known, &mut wanted);
        wanted.truncate(width);
        let results = batch(&wanted);
        assert_eq!(results.len(), wanted.len(), "a batch answers every probe it is given");
        for (p, r) in wanted.into_iter().zip(results) {
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

#[cfg(test)]
/// The highest whole rate at or below `max_rate` within a relative `tolerance` for which
/// `lossless(rate)` holds, run sequentially. `None` if even the lowest rate tried loses.
pub(crate) fn max_rate(max_rate: u64, tolerance: f64, mut lossless: impl FnMut(u64) -> bool) -> Option<u64> {
    let mut s = MaxRate::new(max_rate, tolerance);
    while let Some(rate) = s.next() {
        s.advance(lossless(rate));
    }
    s.answer()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(lossless: &[bool]) -> Vec<CoreLoss> {
        lossless
            .iter()
            .enumerate()
            .map(|(i, &ok)| CoreLoss::new(i + 1, if ok { 0 } else { 100 - i as u64 }, 1000, true))
            .collect()
    }

    #[test]
    fn the_fewest_cores_are_those_from_which_every_count_is_lossless() {
        // Lossless at 3, loses at 4, lossless from 5: the answer is 5, not 3.
        let t = table(&[false, false, true, false, true, true, true]);
        assert_eq!(fewest_cores_from(&t, CoreLoss::lossless), Some(5));
        assert_eq!(fewest_cores_from(&table(&[true, true]), CoreLoss::lossless), Some(1));
        assert_eq!(fewest_cores_from(&table(&[true, false]), CoreLoss::lossless), None);
        assert_eq!(fewest_cores_from(&[], CoreLoss::lossless), None);
        // Within a tolerance of 9.7%: 4 (97 of 1000 lost) is good, 2 (99) is not.
        assert_eq!(fewest_cores_from(&t, |l| l.within(0.097)), Some(3));
        assert_eq!(fewest_cores_from(&t, |l| l.within(0.096)), Some(5));
        // A run that fell behind is never good, whatever it lost.
        let mut behind = table(&[true, true, true]);
        behind[1].steady = false;
        assert_eq!(fewest_cores_from(&behind, |l| l.within(1.0)), Some(3));
    }

    #[test]
    fn sweeps_keep_the_order_of_their_probes_on_any_number_of_threads() {
        let probes: Vec<usize> = (1..=40).collect();
        for threads in [1, 2, 3, 8, 64] {
            let got = sweep(&probes, threads, |&c| -> Result<usize, ()> { Ok(c * c) });
            assert_eq!(got, Ok(probes.iter().map(|c| c * c).collect::<Vec<_>>()), "{threads} threads");
            let failing = sweep(&probes, threads, |&c| if c == 7 { Err(c) } else { Ok(c) });
            assert_eq!(failing, Err(7), "{threads} threads");
        }
    }

    #[test]
    fn max_rate_answers_a_whole_rate_it_ran() {
        let r = max_rate(10_000_000, 0.001, |r| r <= 3_300_000).unwrap();
        assert!(r <= 3_300_000 && 3_300_000 - r < 3_300_000 / 500, "{r}");
        assert_eq!(max_rate(10_000_000, 0.01, |r| r <= 20_000_000), Some(10_000_000));
        assert_eq!(max_rate(10_000_000, 0.01, |_| false), None);
        // Down to single packets per second: the bisection ends on neighbours.
        assert_eq!(max_rate(1000, 0.0, |r| r <= 7), Some(7));
        let mut probed = Vec::new();
        let answer = max_rate(10_000_000, 0.01, |r| {
            probed.push(r);
            r <= 4_444_444
        });
        assert!(probed.contains(&answer.unwrap()), "the answer is a probe that was run");
    }

    /// Speculation on any number of threads probes a superset of what the sequential search
    /// probes and answers exactly the same; an error on a probe the search needs is returned.
    #[test]
    fn parallel_searches_answer_as_the_sequential_one() {
        for threads in [1, 2, 3, 4, 8] {
            for limit in [3_300_000u64, 1_000, 9_990_000, 20_000_000, 0] {
                let got = search(MaxRate::new(10_000_000, 0.001), threads, |ps: &[u64]| {
                    parallel(ps, threads, |&r| -> Result<bool, ()> { Ok(r <= limit) })
                });
                assert_eq!(
                    got,
                    Ok(max_rate(10_000_000, 0.001, |r| r <= limit)),
                    "{threads} threads, limit {limit}"
                );
            }
            let failing = search(MaxRate::new(10_000_000, 0.01), threads, |ps: &[u64]| {
                parallel(ps, threads, |&r| if r < 5_000_000 { Err(r) } else { Ok(false) })
            });
            assert_eq!(failing, Err(2_500_000), "{threads} threads: the sequential search's first error");
        }
    }
}
