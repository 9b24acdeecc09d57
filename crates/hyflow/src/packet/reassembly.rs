//! IPv4 reassembly (RFC 791) for a server on a raw port: a memcached SET whose value does not
//! fit one frame reaches `hyflow kvs` as IP fragments, which a kernel's stack would put
//! together before the socket saw them. A fixed number of datagrams are put together at a
//! time, each in a buffer allocated up front, so that a fragment costs no allocation; the
//! caller passes the time in (the module reads no clock).
//!
//! Conservative as RFC 5722 asks of IPv6 and Linux does of IPv4 since 2018: a fragment that
//! overlaps one already received (a duplicate included) drops the whole datagram, so that no
//! two readings of the same bytes can disagree.

use serde::Serialize;

/// The largest IP payload: a 65,535-byte packet less a 20-byte header.
pub const MAX_PAYLOAD: usize = 65_535 - 20;
/// Fragment offsets count 8-byte blocks; the received blocks are kept as a bitmap.
const BLOCK: usize = 8;
const BITMAP_WORDS: usize = MAX_PAYLOAD.div_ceil(BLOCK).div_ceil(64);

/// What identifies a datagram's fragments (RFC 791): source, destination, protocol and
/// identification.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FragmentKey {
    /// Source address.
    pub src: [u8; 4],
    /// Destination address.
    pub dst: [u8; 4],
    /// IP protocol.
    pub protocol: u8,
    /// IP identification.
    pub id: u16,
}

/// One fragment as its IP header describes it.
#[derive(Clone, Copy, Debug)]
pub struct Fragment<'a> {
    /// Its datagram.
    pub key: FragmentKey,
    /// Where its data starts in the datagram's payload (bytes: 8 × the fragment offset).
    pub offset: usize,
    /// Whether more fragments follow (MF).
    pub more: bool,
    /// Its data (the IP payload it carries).
    pub data: &'a [u8],
}

/// Why fragments were dropped, or a datagram given up.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FragmentDrop {
    /// It overlaps bytes already received (a duplicate included): the datagram is dropped.
    Overlap,
    /// It reaches past the largest IP payload.
    TooLong,
    /// A fragment with more to follow whose length is not a multiple of 8 bytes, or an empty
    /// one.
    BadLength,
    /// Its end disagrees with the datagram's end a last fragment gave: the datagram is
    /// dropped.
    Inconsistent,
    /// A datagram not complete within the timeout (counted when its slot is taken back).
    TimedOut,
    /// A datagram given up to make room for another, all slots busy.
    Evicted,
}

impl FragmentDrop {
    /// Every reason, in report order.
    pub const ALL: [FragmentDrop; 6] = [
        FragmentDrop::Overlap,
        FragmentDrop::TooLong,
        FragmentDrop::BadLength,
        FragmentDrop::Inconsistent,
        FragmentDrop::TimedOut,
        FragmentDrop::Evicted,
    ];

    /// Its place in [`FragmentDrop::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            FragmentDrop::Overlap => "overlap",
            FragmentDrop::TooLong => "too_long",
            FragmentDrop::BadLength => "bad_length",
            FragmentDrop::Inconsistent => "inconsistent",
            FragmentDrop::TimedOut => "timed_out",
            FragmentDrop::Evicted => "evicted",
        }
    }
}

/// What the reassembler did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ReassemblyStats {
    /// Fragments given to it.
    pub fragments: u64,
    /// Datagrams put together whole.
    pub datagrams: u64,
    /// Fragments dropped and datagrams given up, by [`FragmentDrop::ALL`]'s order.
    pub dropped: [u64; 6],
}

impl ReassemblyStats {
    /// Adds `other`'s counts (several reassemblers' totals).
    pub fn add(&mut self, other: &ReassemblyStats) {
        self.fragments += other.fragments;
        self.datagrams += other.datagrams;
        for (all, one) in self.dropped.iter_mut().zip(other.dropped) {
            *all += one;
        }
    }
}

/// A datagram being put together.
struct Slot {
    key: Option<FragmentKey>,
    /// When its first fragment came (ns, the caller's clock).
    started_ns: u64,
    /// The payload's length, once the last fragment has come.
    total: Option<usize>,
    /// Bytes received.
    received: usize,
    /// The 8-byte blocks received.
    blocks: Box<[u64; BITMAP_WORDS]>,
    payload: Box<[u8]>,
}

impl Slot {
    fn clear(&mut self) {
        self.key = None;
        self.total = None;
        self.received = 0;
        self.blocks.fill(0);
    }
}

/// Puts IPv4 datagrams together from their fragments, `slots` at a time.
pub struct Reassembler {
    slots: Vec<Slot>,
    timeout_ns: u64,
    /// The slot whose datagram [`Reassembler::add`] handed back last: freed at the next call.
    handed: Option<usize>,
    stats: ReassemblyStats,
}

impl Reassembler {
    /// A reassembler with `slots` datagrams in progress at most (each with a buffer of the
    /// largest IP payload, allocated now), giving up on a datagram `timeout_ns` after its
    /// first fragment.
    pub fn new(slots: usize, timeout_ns: u64) -> Reassembler {
        let slots = (0..slots.max(1))
            .map(|_| Slot {
                key: None,
                started_ns: 0,
                total: None,
                received: 0,
                blocks: Box::new([0; BITMAP_WORDS]),
                payload: vec![0; MAX_PAYLOAD].into_boxed_slice(),
            })
            .collect();
        Reassembler { slots, timeout_ns, handed: None, stats: ReassemblyStats::default() }
    }

    /// What it did so far.
    pub fn stats(&self) -> ReassemblyStats {
        self.stats
    }

    /// Takes fragment `f` at time `now_ns`: the datagram's whole payload if `f` completes
    /// it (valid until the next call), `Ok(None)` while fragments are missing, or why `f`
    /// was dropped (and with it, for an overlap or an inconsistency, its datagram).
    pub fn add(&mut self, now_ns: u64, f: Fragment<'_>) -> Result<Option<&[u8]>, FragmentDrop> {
        self.stats.fragments += 1;
        if let Some(done) = self.handed.take() {
            self.slots[done].clear();
        }
        let end = f.offset + f.data.len();
        let checked = if end > MAX_PAYLOAD {
            Err(FragmentDrop::TooLong)
        } else if f.data.is_empty()
            || (f.more && !f.data.len().is_multiple_of(BLOCK))
            || !f.offset.is_multiple_of(BLOCK)
        {
            Err(FragmentDrop::BadLength)
        } else {
            Ok(())
        };
        if let Err(why) = checked {
            self.stats.dropped[why.index()] += 1;
            return Err(why);
        }
        let at = self.slot_for(now_ns, f.key);
        match self.place(at, &f, end) {
            Err(why) => {
                self.slots[at].clear();
                self.stats.dropped[why.index()] += 1;
                Err(why)
            }
            Ok(false) => Ok(None),
            Ok(true) => {
                self.stats.datagrams += 1;
                self.handed = Some(at);
                let slot = &self.slots[at];
                Ok(Some(&slot.payload[..slot.total.expect("complete")]))
            }
        }
    }

    /// The slot of `key`'s datagram: its own, a free one, or one taken back (timed out
    /// first, else the oldest: evicted).
    fn slot_for(&mut self, now_ns: u64, key: FragmentKey) -> usize {
        let timeout = self.timeout_ns;
        let expired = |s: &Slot| s.key.is_some() && now_ns.saturating_sub(s.started_ns) > timeout;
        if let Some(i) = self.slots.iter().position(|s| s.key == Some(key) && !expired(s)) {
            return i;
        }
        for s in &mut self.slots {
            if expired(s) {
                self.stats.dropped[FragmentDrop::TimedOut.index()] += 1;
                s.clear();
            }
        }
        let at = match self.slots.iter().position(|s| s.key.is_none()) {
            Some(i) => i,
            None => {
                let (i, _) = self
                    .slots
                    .iter()
                    .enumerate()
                    .min_by_key(|(_, s)| s.started_ns)
                    .expect("at least one slot");
                self.stats.dropped[FragmentDrop::Evicted.index()] += 1;
                self.slots[i].clear();
                i
            }
        };
        let s = &mut self.slots[at];
        s.key = Some(key);
        s.started_ns = now_ns;
        at
    }

    /// Copies `f` into slot `at`; whether the datagram is now whole.
    fn place(&mut self, at: usize, f: &Fragment<'_>, end: usize) -> Result<bool, FragmentDrop> {
        let s = &mut self.slots[at];
        match (s.total, f.more) {
            (Some(total), _) if end > total => return Err(FragmentDrop::Inconsistent),
            (Some(total), false) if end != total => return Err(FragmentDrop::Inconsistent),
            (None, false)
                if s.received > 0 && highest_block(&s.blocks).is_some_and(|b| (b + 1) * BLOCK > end) =>
            {
                return Err(FragmentDrop::Inconsistent)
            }
            (None, false) => s.total = Some(end),
            _ => {}
        }
        let (first, last) = (f.offset / BLOCK, (end - 1) / BLOCK);
        if any_set(&s.blocks, first, last) {
            return Err(FragmentDrop::Overlap);
        }
        set_range(&mut s.blocks, first, last);
        s.payload[f.offset..end].copy_from_slice(f.data);
        s.received += f.data.len();
        Ok(s.total == Some(s.received))
    }
}

/// The highest block received, if any.
fn highest_block(blocks: &[u64; BITMAP_WORDS]) -> Option<usize> {
    blocks.iter().rposition(|&w| w != 0).map(|i| i * 64 + 63 - blocks[i].leading_zeros() as usize)
}

/// Bits `first..=last` as (word, mask) pairs.
fn word_masks(first: usize, last: usize) -> impl Iterator<Item = (usize, u64)> {
    (first / 64..=last / 64).map(move |w| {
        let lo = if w == first / 64 { first % 64 } else { 0 };
        let hi = if w == last / 64 { last % 64 } else { 63 };
        let mask = (u64::MAX >> (63 - hi)) & (u64::MAX << lo);
        (w, mask)
    })
}

fn any_set(blocks: &[u64; BITMAP_WORDS], first: usize, last: usize) -> bool {
    word_masks(first, last).any(|(w, m)| blocks[w] & m != 0)
}

fn set_range(blocks: &mut [u64; BITMAP_WORDS], first: usize, last: usize) {
    for (w, m) in word_masks(first, last) {
        blocks[w] |= m;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand::seq::SliceRandom;
    use rand::SeedableRng;

    const KEY: FragmentKey = FragmentKey { src: [10, 0, 0, 2], dst: [10, 0, 0, 1], protocol: 17, id: 7 };

    /// `payload` cut into fragments of `size` bytes (a multiple of 8).
    fn cut(payload: &[u8], size: usize, key: FragmentKey) -> Vec<Fragment<'_>> {
        payload
            .chunks(size)
            .enumerate()
            .map(|(i, data)| Fragment { key, offset: i * size, more: (i + 1) * size < payload.len(), data })
            .collect()
    }

    #[test]
    fn fragments_in_any_order_give_the_datagram() {
        let payload: Vec<u8> = (0..5000u32).map(|i| (i * 7) as u8).collect();
        let mut r = Reassembler::new(4, 1_000_000_000);
        let mut frags = cut(&payload, 1480, KEY);
        frags.reverse();
        let last = frags.pop().unwrap();
        for f in frags {
            assert_eq!(r.add(0, f), Ok(None));
        }
        assert_eq!(r.add(1, last), Ok(Some(payload.as_slice())));
        let s = r.stats();
        assert_eq!((s.fragments, s.datagrams, s.dropped), (4, 1, [0; 6]));
    }

    #[test]
    fn overlaps_and_duplicates_drop_the_datagram() {
        let payload = vec![1u8; 3000];
        let mut r = Reassembler::new(4, 1_000_000_000);
        let frags = cut(&payload, 1000, KEY);
        assert_eq!(r.add(0, frags[0]), Ok(None));
        assert_eq!(r.add(0, frags[0]), Err(FragmentDrop::Overlap));
        // The datagram went with it: the rest alone never completes it.
        for f in &frags[1..] {
            assert_eq!(r.add(0, *f), Ok(None));
        }
        let shifted = Fragment { offset: 8, ..frags[0] };
        let mut r = Reassembler::new(4, 1_000_000_000);
        assert_eq!(r.add(0, frags[0]), Ok(None));
        assert_eq!(r.add(0, shifted), Err(FragmentDrop::Overlap));
        assert_eq!(r.stats().dropped[FragmentDrop::Overlap.index()], 1);
    }

    #[test]
    fn bad_fragments_are_named() {
        let mut r = Reassembler::new(2, 1_000_000_000);
        let odd = Fragment { key: KEY, offset: 0, more: true, data: &[0; 13] };
        assert_eq!(r.add(0, odd), Err(FragmentDrop::BadLength));
        let far = Fragment { key: KEY, offset: MAX_PAYLOAD - 8, more: false, data: &[0; 16] };
        assert_eq!(r.add(0, far), Err(FragmentDrop::TooLong));
        let first = Fragment { key: KEY, offset: 0, more: true, data: &[0; 16] };
        let end = Fragment { key: KEY, offset: 32, more: false, data: &[0; 4] };
        let beyond = Fragment { key: KEY, offset: 40, more: true, data: &[0; 8] };
        assert_eq!(r.add(0, first), Ok(None));
        assert_eq!(r.add(0, end), Ok(None));
        assert_eq!(r.add(0, beyond), Err(FragmentDrop::Inconsistent));
        // A last fragment ending before data already received.
        assert_eq!(r.add(0, beyond), Ok(None));
        assert_eq!(
            r.add(0, Fragment { key: KEY, offset: 8, more: false, data: &[0; 8] }),
            Err(FragmentDrop::Inconsistent)
        );
    }

    #[test]
    fn slots_time_out_and_the_oldest_is_evicted() {
        let mut r = Reassembler::new(2, 100);
        let frag =
            |id, offset| Fragment { key: FragmentKey { id, ..KEY }, offset, more: true, data: &[0; 8] };
        assert_eq!(r.add(0, frag(1, 0)), Ok(None));
        assert_eq!(r.add(10, frag(2, 0)), Ok(None));
        // Both slots busy: the oldest (id 1) goes.
        assert_eq!(r.add(20, frag(3, 0)), Ok(None));
        assert_eq!(r.stats().dropped[FragmentDrop::Evicted.index()], 1);
        // Past the timeout, id 2's and id 3's slots are taken back as timed out.
        assert_eq!(r.add(500, frag(4, 0)), Ok(None));
        assert_eq!(r.stats().dropped[FragmentDrop::TimedOut.index()], 2);
        // A fragment of a timed-out datagram starts it afresh.
        assert_eq!(r.add(501, frag(2, 8)), Ok(None));
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

        /// Several datagrams cut at random sizes, their fragments interleaved in a random
        /// order (one fragment maybe duplicated): each comes out exactly as sent, once — one
        /// with a duplicate maybe not at all (an overlap drops it), or twice if it is a single
        /// fragment; nothing panics.
        #[test]
        fn interleaved_fragments_reassemble(seed in any::<u64>(), count in 1usize..5, dup in 0usize..3) {
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
            let datagrams: Vec<Vec<u8>> = (0..count)
                .map(|_| (0..rng.random_range(1..9000)).map(|_| rng.random()).collect())
                .collect();
            let mut frags = Vec::new();
            for (id, d) in datagrams.iter().enumerate() {
                let size = rng.random_range(1..200usize) * 8;
                frags.extend(cut(d, size, FragmentKey { id: id as u16, ..KEY }));
            }
            let dup_of = (dup > 0 && frags.len() > 1).then(|| frags[rng.random_range(0..frags.len())]);
            frags.extend(dup_of);
            frags.shuffle(&mut rng);
            let mut r = Reassembler::new(count, u64::MAX);
            let mut out: Vec<Option<Vec<u8>>> = vec![None; count];
            for f in &frags {
                if let Ok(Some(p)) = r.add(0, *f) {
                    let id = f.key.id as usize;
                    // Twice only for a duplicated datagram of one fragment, complete each time.
                    let again = dup_of.is_some_and(|x| x.key.id == f.key.id && !x.more && x.offset == 0);
                    prop_assert!(out[id].is_none() || again);
                    prop_assert_eq!(p, datagrams[id].as_slice());
                    out[id] = Some(p.to_vec());
                }
            }
            for (id, d) in datagrams.iter().enumerate() {
                match (dup_of, &out[id]) {
                    (Some(x), got) if x.key.id as usize == id => prop_assert!(got.is_none() || got.as_deref() == Some(d.as_slice())),
                    (_, got) => prop_assert_eq!(got.as_deref(), Some(d.as_slice())),
                }
            }
        }
    }
}
