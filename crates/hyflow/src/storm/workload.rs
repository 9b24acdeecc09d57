//! A tweet-like stream for the top-n topology: user names drawn by Zipf popularity (a few
//! users tweet most), each tuple dealt to the counter its name hashes to (Storm's fields
//! grouping), deterministic for a seed.

use rand::rngs::StdRng;
use rand::SeedableRng;
use rand_distr::{Distribution, Zipf};

use crate::invalid_param::InvalidParam;

/// The stream's shape.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TweetStream {
    /// Distinct users.
    pub users: u64,
    /// Zipf exponent of how much each tweets.
    pub zipf: f64,
    /// Counting workers the tuples are dealt to.
    pub workers: u16,
}

impl Default for TweetStream {
    fn default() -> Self {
        TweetStream { users: 100_000, zipf: 1.0, workers: 2 }
    }
}

/// The tuples of a stream.
pub struct Tweets {
    stream: TweetStream,
    rng: StdRng,
    zipf: Zipf<f64>,
}

impl TweetStream {
    /// Its tuples, drawn with `seed`.
    pub fn tweets(&self, seed: u64) -> Result<Tweets, InvalidParam> {
        if self.users == 0 {
            return Err(InvalidParam::new("users", "must be at least 1"));
        }
        if self.workers == 0 {
            return Err(InvalidParam::new("workers", "must be at least 1"));
        }
        let zipf =
            Zipf::new(self.users as f64, self.zipf).map_err(|e| InvalidParam::new("zipf", e.to_string()))?;
        Ok(Tweets { stream: *self, rng: StdRng::seed_from_u64(seed), zipf })
    }
}

/// User `index`'s name: letters and digits of varying length, as Twitter names are (the
/// index scrambled so that popular names are not alike).
pub fn user_name(index: u64, out: &mut Vec<u8>) {
    const ALPHABET: &[u8; 36] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut x = index.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x5bd1_e995;
    let len = 4 + (x % 12) as usize;
    x /= 12;
    for _ in 0..len {
        out.push(ALPHABET[(x % 36) as usize]);
        x = (x / 36) ^ index.wrapping_mul(0x2545_f491);
    }
    out.extend_from_slice(format!("{index}").as_bytes());
}

/// The counter a name goes to.
pub fn worker_of(name: &[u8], workers: u16) -> u16 {
    (crate::kvs::key_hash(name) % workers.max(1) as u32) as u16
}

impl Tweets {
    /// The next tuple: its user's name into `name` (cleared), and its worker.
    pub fn next(&mut self, name: &mut Vec<u8>) -> u16 {
        let rank = (self.zipf.sample(&mut self.rng) as u64).saturating_sub(1).min(self.stream.users - 1);
        name.clear();
        user_name(rank, name);
        worker_of(name, self.stream.workers)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_distinct_and_dealt_by_name() {
        let mut names = std::collections::HashSet::new();
        let mut n = Vec::new();
        for i in 0..10_000 {
            n.clear();
            user_name(i, &mut n);
            assert!(n.len() >= 5 && n.len() <= 20, "{n:?}");
            assert!(names.insert(n.clone()));
        }
        let mut t = TweetStream::default().tweets(3).unwrap();
        let mut per = [0u32; 2];
        for _ in 0..10_000 {
            let w = t.next(&mut n);
            assert_eq!(w, worker_of(&n, 2));
            per[w as usize] += 1;
        }
        assert!(per.iter().all(|&p| p > 2000), "{per:?}");
    }
}
