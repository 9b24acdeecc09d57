//! FlexStorm's top-n topology (FlexNIC §4, Figure 5): counting workers count each user name
//! over a sliding window and periodically emit (name, count) for every active name; a ranker
//! keeps the top n. Tuples are dealt to counters by name (Storm's fields grouping), so each
//! name is counted by one counter and the ranker's union is exact. Time is passed in.

use hashbrown::HashMap;

/// Slots of a counter's sliding window.
pub const WINDOW_SLOTS: usize = 8;

/// A name's counts, one per slot of the window (a ring indexed by slot number).
#[derive(Clone, Copy, Debug)]
struct Counts {
    slots: [u32; WINDOW_SLOTS],
    /// The last slot number counted into (older slots are cleared when it moves on).
    last: u64,
}

impl Counts {
    /// Moves the window to slot `now`, clearing the slots that left it.
    fn advance(&mut self, now: u64) {
        if now <= self.last {
            return;
        }
        let stale = (now - self.last).min(WINDOW_SLOTS as u64);
        for k in 1..=stale {
            self.slots[((self.last + k) % WINDOW_SLOTS as u64) as usize] = 0;
        }
        self.last = now;
    }

    fn total(&self) -> u64 {
        self.slots.iter().map(|&c| c as u64).sum()
    }
}

/// A counting worker.
pub struct Counter {
    slot_ns: u64,
    counts: HashMap<Box<[u8]>, Counts>,
    /// Tuples counted.
    pub tuples: u64,
}

impl Counter {
    /// A counter whose window is [`WINDOW_SLOTS`] slots of `slot_ns`.
    pub fn new(slot_ns: u64) -> Counter {
        Counter { slot_ns: slot_ns.max(1), counts: HashMap::new(), tuples: 0 }
    }

    /// Counts one tuple of `name` at `now_ns`.
    #[inline]
    pub fn count(&mut self, name: &[u8], now_ns: u64) {
        let slot = now_ns / self.slot_ns;
        self.tuples += 1;
        let c = match self.counts.get_mut(name) {
            Some(c) => c,
            None => self.counts.entry(name.into()).or_insert(Counts { slots: [0; WINDOW_SLOTS], last: slot }),
        };
        c.advance(slot);
        c.slots[(slot % WINDOW_SLOTS as u64) as usize] += 1;
    }

    /// Every name counted within the window ending at `now_ns`, with its count; names with
    /// none left are forgotten.
    pub fn emit(&mut self, now_ns: u64, out: &mut Vec<(Box<[u8]>, u64)>) {
        let slot = now_ns / self.slot_ns;
        self.counts.retain(|name, c| {
            c.advance(slot);
            let total = c.total();
            if total > 0 {
                out.push((name.clone(), total));
            }
            total > 0
        });
    }
}

/// The top n of counters' emissions: by count, then by name.
pub fn top_n(mut counted: Vec<(Box<[u8]>, u64)>, n: usize) -> Vec<(Box<[u8]>, u64)> {
    counted.sort_unstable_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    counted.truncate(n);
    counted
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_forgets_what_left_it() {
        let mut c = Counter::new(10);
        c.count(b"a", 0);
        c.count(b"a", 5);
        c.count(b"b", 15);
        let mut out = Vec::new();
        c.emit(20, &mut out);
        out.sort();
        assert_eq!(out, vec![(b"a".to_vec().into(), 2), (b"b".to_vec().into(), 1)]);
        // Slot 0 leaves the window at slot 8.
        out.clear();
        c.emit(80, &mut out);
        assert_eq!(out, vec![(b"b".to_vec().into(), 1)]);
        out.clear();
        c.emit(1000, &mut out);
        assert!(out.is_empty());
    }

    #[test]
    fn counts_equal_an_exact_window() {
        // Random names and times against a brute-force count of the last WINDOW_SLOTS slots.
        let mut c = Counter::new(7);
        let mut log: Vec<(u8, u64)> = Vec::new();
        let mut x = 12345u64;
        let mut t = 0;
        for i in 0..5000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            t += x % 5;
            let name = (x % 13) as u8;
            c.count(&[name], t);
            log.push((name, t));
            if i % 500 == 499 {
                let mut out = Vec::new();
                c.emit(t, &mut out);
                let now = t / 7;
                for n in 0..13u8 {
                    let exact =
                        log.iter().filter(|&&(m, s)| m == n && s / 7 + WINDOW_SLOTS as u64 > now).count()
                            as u64;
                    let got = out.iter().find(|(k, _)| **k == [n]).map_or(0, |p| p.1);
                    assert_eq!(got, exact, "name {n} at {t}");
                }
            }
        }
    }

    #[test]
    fn top_n_ranks_by_count_then_name() {
        let v = vec![(b"b".to_vec().into(), 3), (b"a".to_vec().into(), 3), (b"c".to_vec().into(), 5)];
        let top = top_n(v, 2);
        assert_eq!(top, vec![(b"c".to_vec().into(), 5), (b"a".to_vec().into(), 3)]);
    }
}
