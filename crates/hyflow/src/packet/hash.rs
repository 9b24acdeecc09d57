//! Fast, seed-stable hashes of flow keys: the whole-key hash the microflow cache indexes by
//! (computed once per host packet, the role a NIC's RSS hash plays for OVS's exact-match
//! cache), and masked hashes for tuple-space subtables.
//!
//! Pairs of 64-bit words, each XORed with a per-position constant, are mixed by one folded
//! 64×64→128 multiply (the wyhash/foldhash construction); the products are independent, so a
//! whole key takes 12 multiplies. Short hashes matter beyond their own cost: a lookup that
//! misses the CPU caches overlaps with the next packet's work only if that work is short.

use super::field::KEY_WORDS;
use super::key::FlowKey;

const fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

const fn seeds() -> [u64; KEY_WORDS + 1] {
    let mut s = [0u64; KEY_WORDS + 1];
    let mut i = 0;
    while i < s.len() {
        s[i] = splitmix(0x6879_666c_6f77 + i as u64);
        i += 1;
    }
    s
}

/// One constant per key position (and one for finishing).
const SEEDS: [u64; KEY_WORDS + 1] = seeds();

#[inline(always)]
fn fold(a: u64, b: u64) -> u64 {
    let p = (a as u128).wrapping_mul(b as u128);
    (p as u64) ^ ((p >> 64) as u64)
}

/// Hash of a whole key.
#[inline]
pub fn hash_key(key: &FlowKey) -> u64 {
    let w = &key.words;
    let mut acc = 0u64;
    for i in (0..KEY_WORDS - 1).step_by(2) {
        acc = acc.wrapping_add(fold(w[i] ^ SEEDS[i], w[i + 1] ^ SEEDS[i + 1]));
    }
    if KEY_WORDS % 2 == 1 {
        let last = KEY_WORDS - 1;
        acc = acc.wrapping_add(fold(w[last] ^ SEEDS[last], SEEDS[KEY_WORDS]));
    }
    fold(acc ^ SEEDS[KEY_WORDS], 0x2d35_8dcc_aa6c_78a5)
}

/// Hash of `key` under a mask given as its non-zero words `words` and their bits `bits`
/// (`bits[j]` is the mask's word `words[j]`): equal for every key a tuple-space subtable must
/// treat as equal, reading only those words of key and mask.
#[inline]
pub(crate) fn hash_sparse(key: &FlowKey, words: &[u8], bits: &[u64]) -> u64 {
    let masked = |j: usize| {
        let i = words[j] as usize;
        key.words[i] & bits[j] ^ SEEDS[i]
    };
    let mut acc = 0u64;
    let pairs = words.len() / 2;
    for p in 0..pairs {
        acc = acc.wrapping_add(fold(masked(2 * p), masked(2 * p + 1)));
    }
    if words.len() % 2 == 1 {
        acc = acc.wrapping_add(fold(masked(words.len() - 1), SEEDS[KEY_WORDS]));
    }
    fold(acc ^ SEEDS[KEY_WORDS], 0x2d35_8dcc_aa6c_78a5)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masked_hash_ignores_wildcarded_bits_and_spreads() {
        let nw = super::super::field::word::NW_ADDRS;
        let mut a = FlowKey::default();
        a.words[nw as usize] = 0x0a00_0001;
        let mut b = a;
        b.words[3] = 77;
        b.words[nw as usize] |= 0xdead_0000_0000;
        assert_eq!(hash_sparse(&a, &[nw], &[0xffff_ffff]), hash_sparse(&b, &[nw], &[0xffff_ffff]));
        assert_ne!(
            hash_sparse(&a, &[3, nw], &[0xff, 0xffff_ffff]),
            hash_sparse(&b, &[3, nw], &[0xff, 0xffff_ffff])
        );
        assert_ne!(hash_key(&a), hash_key(&b));
        // Single-bit changes in any word flip about half the output bits.
        for w in 0..KEY_WORDS {
            let mut c = a;
            c.words[w] ^= 1 << (w * 5 % 64);
            let flipped = (hash_key(&a) ^ hash_key(&c)).count_ones();
            assert!((12..=52).contains(&flipped), "word {w}: {flipped} bits");
        }
    }
}
