//! FlexKVS's workload (FlexNIC §3.3): a key space of fixed-size keys and values, requests on
//! keys drawn by Zipf popularity, a share of GETs, the rest SETs — as memcached ASCII
//! requests, deterministic for a seed.

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use rand_distr::{Distribution, Zipf};

use super::memcached::push_decimal;
use crate::invalid_param::InvalidParam;

/// The paper's workload: 100,000 pairs of 32-byte keys and 64-byte values, Zipf s = 0.9,
/// 90% GET and 10% SET.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct KvsWorkload {
    /// Keys in the key space.
    pub keys: u64,
    /// Bytes of a key (at most 250).
    pub key_bytes: usize,
    /// Bytes of a value.
    pub value_bytes: usize,
    /// Zipf exponent of key popularity (0: uniform).
    pub zipf: f64,
    /// Share of requests that are GETs.
    pub get_share: f64,
}

impl Default for KvsWorkload {
    fn default() -> Self {
        KvsWorkload { keys: 100_000, key_bytes: 32, value_bytes: 64, zipf: 0.9, get_share: 0.9 }
    }
}

/// What a request asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// A GET of key `rank` (0: the most popular).
    Get(u64),
    /// A SET of it.
    Set(u64),
}

/// A stream of requests of a workload.
pub struct Requests {
    workload: KvsWorkload,
    rng: StdRng,
    zipf: Option<Zipf<f64>>,
    /// Where the popularity ranks land in the key space: a fixed permutation, so that popular
    /// keys are not neighbours (and not all in one steering slot).
    stride: u64,
}

impl KvsWorkload {
    /// Checks the workload's numbers.
    pub fn check(&self) -> Result<(), InvalidParam> {
        if self.keys == 0 {
            return Err(InvalidParam::new("keys", "must be at least 1"));
        }
        let digits = self.keys.to_string().len();
        if self.key_bytes > crate::kvs::store::MAX_KEY || self.key_bytes < digits + 1 {
            return Err(InvalidParam::new(
                "key-bytes",
                format!("must be {} to {} for {} keys", digits + 1, crate::kvs::store::MAX_KEY, self.keys),
            ));
        }
        if !(self.zipf.is_finite() && self.zipf >= 0.0) {
            return Err(InvalidParam::new("zipf", "must be 0 or more"));
        }
        if !(0.0..=1.0).contains(&self.get_share) {
            return Err(InvalidParam::new("get-share", "must be 0 to 1"));
        }
        Ok(())
    }

    /// Its requests, drawn with `seed`.
    pub fn requests(&self, seed: u64) -> Result<Requests, InvalidParam> {
        self.check()?;
        let zipf = if self.zipf > 0.0 {
            Some(
                Zipf::new(self.keys as f64, self.zipf)
                    .map_err(|e| InvalidParam::new("zipf", e.to_string()))?,
            )
        } else {
            None
        };
        // An odd multiplier coprime with the key count permutes the ranks over the keys.
        let mut stride = (0x9e37_79b9_7f4a_7c15u64 % self.keys.max(2)) | 1;
        while gcd(stride, self.keys) != 1 {
            stride += 2;
        }
        Ok(Requests { workload: *self, rng: StdRng::seed_from_u64(seed), zipf, stride })
    }

    /// Writes key number `index`'s bytes: `k` and its number, zero-padded to the key size.
    pub fn key(&self, index: u64, out: &mut Vec<u8>) {
        out.push(b'k');
        // The number written, then shifted right behind its zeros: no allocation per key.
        let at = out.len();
        push_decimal(out, index);
        let digits = out.len() - at;
        let pad = self.key_bytes - 1 - digits;
        out.splice(at..at, std::iter::repeat_n(b'0', pad));
    }

    /// Writes memcached's ASCII request for `op` (key index after the rank's permutation is
    /// applied by [`Requests::next_op`]): `get KEY` or `set KEY 0 0 N` and a value of `version`.
    pub fn request(&self, op: Op, version: u64, out: &mut Vec<u8>) {
        match op {
            Op::Get(key) => {
                out.extend_from_slice(b"get ");
                self.key(key, out);
                out.extend_from_slice(b"\r\n");
            }
            Op::Set(key) => {
                out.extend_from_slice(b"set ");
                self.key(key, out);
                out.extend_from_slice(b" 0 0 ");
                push_decimal(out, self.value_bytes as u64);
                out.extend_from_slice(b"\r\n");
                let start = out.len();
                out.resize(start + self.value_bytes, 0);
                for (i, b) in out[start..].iter_mut().enumerate() {
                    *b = b'a' + ((i as u64 + key + version) % 26) as u8;
                }
                out.extend_from_slice(b"\r\n");
            }
        }
    }
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

impl Requests {
    /// The next request's operation, on a key index (not a rank).
    pub fn next_op(&mut self) -> Op {
        let rank = match &self.zipf {
            Some(z) => (z.sample(&mut self.rng) as u64).saturating_sub(1).min(self.workload.keys - 1),
            None => self.rng.random_range(0..self.workload.keys),
        };
        let key = ((rank as u128 * self.stride as u128) % self.workload.keys as u128) as u64;
        if self.rng.random::<f64>() < self.workload.get_share {
            Op::Get(key)
        } else {
            Op::Set(key)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_papers_mix_and_sizes() {
        let w = KvsWorkload::default();
        let mut r = w.requests(1).unwrap();
        let (mut gets, mut first) = (0, 0);
        let n = 100_000;
        for _ in 0..n {
            let op = r.next_op();
            gets += matches!(op, Op::Get(_)) as u32;
            let key = match op {
                Op::Get(k) | Op::Set(k) => k,
            };
            first += (key == 0) as u32;
        }
        assert!((gets as f64 / n as f64 - 0.9).abs() < 0.01, "{gets}");
        // Zipf(0.9) over 100,000 keys: the top key takes 1/H(100000, 0.9) ≈ 1/22.2 ≈ 4.5%.
        assert!((first as f64 / n as f64 - 0.045).abs() < 0.005, "{first}");
        let mut out = Vec::new();
        w.key(42, &mut out);
        assert_eq!(out.len(), 32);
        assert_eq!(&out[..3], b"k00");
        out.clear();
        w.request(Op::Set(42), 1, &mut out);
        let (_, parsed) = crate::kvs::memcached::parse(&out);
        match parsed.unwrap() {
            crate::kvs::memcached::Request::Store { key, value, .. } => {
                assert_eq!(key.len(), 32);
                assert_eq!(value.len(), 64);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn bad_numbers_are_refused() {
        assert!(KvsWorkload { key_bytes: 3, ..Default::default() }.check().is_err());
        assert!(KvsWorkload { get_share: 1.5, ..Default::default() }.check().is_err());
        assert!(KvsWorkload { keys: 0, ..Default::default() }.check().is_err());
    }
}
