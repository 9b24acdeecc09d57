//! Path-compressed binary prefix tries, as OVS's classifier keeps them for IP addresses and
//! transport ports.
//!
//! A trie holds the prefixes rules match on for one field. Looking a packet's value up tells
//! (a) which prefix lengths have rules matching the packet and (b) how many leading bits of
//! the packet had to be examined to know that. A subtable whose prefix length is not among
//! (a) cannot match, and the megaflow then needs only (b) bits of the field instead of the
//! subtable's whole mask — this is what keeps megaflows on IP prefixes wide.
//!
//! Nodes hold runs of bits (path compression), and the trie is kept canonical: a node without
//! rules always has two children. Lookups visit one node per branching point or rule prefix on
//! the path (at most the field width), and the result is exactly that of a one-bit-per-level
//! trie (see the brute-force test below).

const NONE: u32 = u32::MAX;

/// The machine word a trie computes in: `u64` for fields up to 64 bits (IPv4, ports), `u128`
/// for IPv6. Lookups are a chain of dependent steps, so cheap arithmetic per step matters.
trait Word:
    Copy
    + Ord
    + std::fmt::Debug
    + std::ops::BitXor<Output = Self>
    + std::ops::BitOr<Output = Self>
    + std::ops::BitAnd<Output = Self>
    + std::ops::Not<Output = Self>
    + std::ops::Shl<u32, Output = Self>
    + std::ops::Shr<u32, Output = Self>
{
    const BITS: u32;
    const ZERO: Self;
    const ONES: Self;
    fn lz(self) -> u32;
    fn truncate(v: u128) -> Self;
}

impl Word for u64 {
    const BITS: u32 = 64;
    const ZERO: Self = 0;
    const ONES: Self = u64::MAX;
    fn lz(self) -> u32 {
        self.leading_zeros()
    }
    fn truncate(v: u128) -> Self {
        v as u64
    }
}

impl Word for u128 {
    const BITS: u32 = 128;
    const ZERO: Self = 0;
    const ONES: Self = u128::MAX;
    fn lz(self) -> u32 {
        self.leading_zeros()
    }
    fn truncate(v: u128) -> Self {
        v
    }
}

#[derive(Clone, Copy, Debug)]
struct Node<W> {
    /// The node's bits, left-aligned; bits past `n_bits` are zero.
    bits: W,
    /// Number of bits this node covers (after its parent's).
    n_bits: u32,
    /// Rules whose prefix ends exactly at the end of this node.
    n_rules: u32,
    child: [u32; 2],
}

impl<W> Node<W> {
    fn is_leaf(&self) -> bool {
        self.child == [NONE, NONE]
    }
}

/// Result of a trie lookup.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct TrieMatch {
    /// Bit `l - 1` is set when some rule's prefix of length `l` matches the value.
    pub plens: u128,
    /// Leading bits of the value that determined the result (OVS's `maskbits`).
    pub maskbits: u32,
}

impl TrieMatch {
    /// A result that rules nothing out (used when the field does not exist in the packet).
    pub(crate) const ALL: TrieMatch = TrieMatch { plens: u128::MAX, maskbits: 0 };

    /// Whether some rule with this prefix length matches.
    #[inline]
    pub(crate) fn has_plen(&self, plen: u32) -> bool {
        plen > 0 && self.plens >> (plen - 1) & 1 == 1
    }
}

/// Where a node hangs: the root slot or one child slot of a node.
#[derive(Clone, Copy)]
enum Link {
    Root,
    Child(u32, usize),
}

#[inline]
fn lead<W: Word>(bits: W, n: u32) -> W {
    match n {
        0 => W::ZERO,
        n if n >= W::BITS => bits,
        n => bits & !(W::ONES >> n),
    }
}

#[inline]
fn shl<W: Word>(v: W, n: u32) -> W {
    if n >= W::BITS {
        W::ZERO
    } else {
        v << n
    }
}

#[inline]
fn top_bit<W: Word>(v: W) -> usize {
    (v >> (W::BITS - 1) != W::ZERO) as usize
}

/// The trie algorithm over one word type.
#[derive(Clone, Debug)]
struct Trie<W> {
    width: u32,
    root: u32,
    nodes: Vec<Node<W>>,
    free: Vec<u32>,
    /// Prefixes (aligned, with their lengths) held back until [`Trie::flush`].
    pending: Vec<(W, u32)>,
}

impl<W: Word> Trie<W> {
    fn new(width: u32) -> Self {
        Trie { width, root: NONE, nodes: Vec::new(), free: Vec::new(), pending: Vec::new() }
    }

    /// `value/plen` as the trie stores it: left-aligned, bits past the prefix cleared.
    fn prefix(&self, value: u128, plen: u32) -> W {
        lead(self.align(value), plen)
    }

    fn defer(&mut self, value: u128, plen: u32) {
        let v = self.prefix(value, plen);
        self.pending.push((v, plen));
    }

    /// Adds the prefixes held back. An empty trie is built bottom-up from them, sorted, each
    /// node made once; otherwise they are inserted in sorted order, which walks the trie's
    /// memory in order.
    fn flush(&mut self) {
        let mut pending = std::mem::take(&mut self.pending);
        pending.sort_unstable();
        if self.root == NONE {
            self.nodes.reserve(2 * pending.len());
            self.root = self.build(&pending, 0);
        } else {
            for &(v, plen) in &pending {
                self.insert_prefix(v, plen);
            }
        }
    }

    /// The subtree of `prefixes` (sorted, all sharing their first `depth` bits and, below the
    /// root, the bit at `depth` that chose this subtree); returns its root.
    fn build(&mut self, prefixes: &[(W, u32)], depth: u32) -> u32 {
        let (Some(&(first, _)), Some(&(last, _))) = (prefixes.first(), prefixes.last()) else { return NONE };
        let shortest = prefixes.iter().map(|&(_, plen)| plen).min().unwrap_or(0);
        // The node runs while every prefix agrees and none has ended; sorted, the first and
        // the last differ first where any two do.
        let end = (first ^ last).lz().min(shortest);
        // Those ending here are the smallest values, and first among equal values.
        let n_rules = prefixes.iter().take_while(|&&(_, plen)| plen == end).count();
        let rest = &prefixes[n_rules..];
        let (zeros, ones) = rest.split_at(rest.partition_point(|&(v, _)| top_bit(shl(v, end)) == 0));
        let node = Node {
            bits: lead(shl(first, depth), end - depth),
            n_bits: end - depth,
            n_rules: n_rules as u32,
            child: [NONE, NONE],
        };
        let id = self.alloc(node);
        let child = [self.build(zeros, end), self.build(ones, end)];
        self.nodes[id as usize].child = child;
        id
    }

    /// The value left-aligned in the word.
    #[inline]
    fn align(&self, value: u128) -> W {
        shl(W::truncate(value), W::BITS - self.width)
    }

    fn get_link(&self, l: Link) -> u32 {
        match l {
            Link::Root => self.root,
            Link::Child(n, side) => self.nodes[n as usize].child[side],
        }
    }

    fn set_link(&mut self, l: Link, to: u32) {
        match l {
            Link::Root => self.root = to,
            Link::Child(n, side) => self.nodes[n as usize].child[side] = to,
        }
    }

    fn alloc(&mut self, node: Node<W>) -> u32 {
        match self.free.pop() {
            Some(i) => {
                self.nodes[i as usize] = node;
                i
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
        }
    }

    fn insert(&mut self, value: u128, plen: u32) {
        let v = self.prefix(value, plen);
        self.insert_prefix(v, plen);
    }

    fn insert_prefix(&mut self, v: W, plen: u32) {
        let mut link = Link::Root;
        let mut depth = 0;
        loop {
            let at = self.get_link(link);
            let rest = shl(v, depth);
            if at == NONE {
                let leaf = Node { bits: rest, n_bits: plen - depth, n_rules: 1, child: [NONE, NONE] };
                let id = self.alloc(leaf);
                self.set_link(link, id);
                return;
            }
            let n = self.nodes[at as usize];
            let eq = (rest ^ n.bits).lz().min(n.n_bits).min(plen - depth);
            if eq < n.n_bits {
                // Split: a new node takes the common bits, the old one keeps the rest.
                let parent =
                    self.alloc(Node { bits: lead(n.bits, eq), n_bits: eq, n_rules: 0, child: [NONE, NONE] });
                let old = &mut self.nodes[at as usize];
                old.bits = shl(old.bits, eq);
                old.n_bits -= eq;
                let side = top_bit(old.bits);
                self.nodes[parent as usize].child[side] = at;
                self.set_link(link, parent);
                depth += eq;
                if depth == plen {
                    self.nodes[parent as usize].n_rules = 1;
                    return;
                }
                link = Link::Child(parent, top_bit(shl(v, depth)));
                continue;
            }
            depth += n.n_bits;
            if depth == plen {
                self.nodes[at as usize].n_rules += 1;
                return;
            }
            link = Link::Child(at, top_bit(shl(v, depth)));
        }
    }

    fn remove(&mut self, value: u128, plen: u32) {
        let v = lead(self.align(value), plen);
        let mut path: Vec<Link> = Vec::new();
        let mut link = Link::Root;
        let mut depth = 0;
        let target = loop {
            let at = self.get_link(link);
            if at == NONE {
                return;
            }
            let n = self.nodes[at as usize];
            let eq = (shl(v, depth) ^ n.bits).lz().min(n.n_bits);
            if eq < n.n_bits || depth + n.n_bits > plen {
                return;
            }
            path.push(link);
            depth += n.n_bits;
            if depth == plen {
                break at;
            }
            link = Link::Child(at, top_bit(shl(v, depth)));
        };
        let node = &mut self.nodes[target as usize];
        if node.n_rules == 0 {
            return;
        }
        node.n_rules -= 1;
        // Restore the invariant bottom-up: drop empty leaves, merge single-child rule-less nodes.
        while let Some(l) = path.pop() {
            let at = self.get_link(l);
            let n = self.nodes[at as usize];
            if n.n_rules > 0 {
                break;
            }
            match n.child {
                [NONE, NONE] => {
                    self.set_link(l, NONE);
                    self.free.push(at);
                }
                [c, NONE] | [NONE, c] => {
                    let child = &mut self.nodes[c as usize];
                    child.bits = n.bits | (child.bits >> n.n_bits);
                    child.n_bits += n.n_bits;
                    self.set_link(l, c);
                    self.free.push(at);
                    break;
                }
                _ => break,
            }
        }
    }

    #[inline]
    fn lookup(&self, value: u128) -> TrieMatch {
        // `rest` holds the value's bits from position `len` on, left-aligned.
        let mut rest = self.align(value);
        let mut plens = 0u128;
        let mut len = 0u32;
        let mut prev_is_leaf = None;
        let mut at = self.root;
        while at != NONE {
            let n = &self.nodes[at as usize];
            let eq = (rest ^ n.bits).lz().min(n.n_bits);
            len += eq;
            if eq < n.n_bits {
                return TrieMatch { plens, maskbits: len + 1 };
            }
            if n.n_rules > 0 && len > 0 {
                plens |= 1u128 << (len - 1);
            }
            if len >= self.width {
                return TrieMatch { plens, maskbits: self.width };
            }
            // len < width ≤ BITS, so this node had fewer than BITS bits.
            rest = rest << n.n_bits;
            prev_is_leaf = Some(n.is_leaf());
            at = n.child[top_bit(rest)];
        }
        let maskbits = match prev_is_leaf {
            Some(false) => len + 1,
            _ => len,
        };
        TrieMatch { plens, maskbits }
    }
}

/// A binary prefix trie over values of up to 128 bits, most significant bit first.
#[derive(Clone, Debug)]
pub(crate) struct PrefixTrie(Width);

#[derive(Clone, Debug)]
enum Width {
    Narrow(Trie<u64>),
    Wide(Trie<u128>),
}

impl PrefixTrie {
    /// An empty trie over `width`-bit values (1..=128).
    pub(crate) fn new(width: u32) -> PrefixTrie {
        assert!((1..=128).contains(&width), "trie width {width} out of range");
        PrefixTrie(if width <= 64 { Width::Narrow(Trie::new(width)) } else { Width::Wide(Trie::new(width)) })
    }

    /// Adds one rule with prefix `value/plen` (`plen` ≥ 1).
    pub(crate) fn insert(&mut self, value: u128, plen: u32) {
        match &mut self.0 {
            Width::Narrow(t) => t.insert(value, plen),
            Width::Wide(t) => t.insert(value, plen),
        }
    }

    /// Holds back adding `value/plen` until [`PrefixTrie::flush`], which adds all held back
    /// at once, several times faster than one by one (a million-rule load's tries). Lookups
    /// and removals wait for the flush.
    pub(crate) fn defer(&mut self, value: u128, plen: u32) {
        match &mut self.0 {
            Width::Narrow(t) => t.defer(value, plen),
            Width::Wide(t) => t.defer(value, plen),
        }
    }

    /// Adds the prefixes [`PrefixTrie::defer`] held back.
    pub(crate) fn flush(&mut self) {
        match &mut self.0 {
            Width::Narrow(t) => t.flush(),
            Width::Wide(t) => t.flush(),
        }
    }

    /// Removes one rule previously inserted with the same `value/plen`, keeping the trie
    /// canonical (rule-less nodes have two children).
    pub(crate) fn remove(&mut self, value: u128, plen: u32) {
        match &mut self.0 {
            Width::Narrow(t) => t.remove(value, plen),
            Width::Wide(t) => t.remove(value, plen),
        }
    }

    /// Looks `value` up: which rule prefix lengths match it and how many bits that took.
    ///
    /// Mirrors OVS `trie_lookup_value`: on a mismatch the first differing bit is included; on
    /// running off the trie after a full node, one more bit is needed unless that node is a leaf.
    #[inline]
    pub(crate) fn lookup(&self, value: u128) -> TrieMatch {
        match &self.0 {
            Width::Narrow(t) => t.lookup(value),
            Width::Wide(t) => t.lookup(value),
        }
    }

    #[cfg(test)]
    /// Whether no rule is stored.
    pub(crate) fn is_empty(&self) -> bool {
        match &self.0 {
            Width::Narrow(t) => t.root == NONE,
            Width::Wide(t) => t.root == NONE,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn v4(a: u8, b: u8, c: u8, d: u8) -> u128 {
        u32::from_be_bytes([a, b, c, d]) as u128
    }

    /// The one-bit-per-level trie's answer, computed from the rule list directly.
    fn brute(rules: &[(u128, u32)], width: u32, x: u128) -> TrieMatch {
        let pre = |v: u128, l: u32| if l == 0 { 0 } else { v >> (width - l) };
        let mut plens = 0u128;
        for &(v, l) in rules {
            if pre(v, l) == pre(x, l) {
                plens |= 1 << (l - 1);
            }
        }
        if rules.is_empty() {
            return TrieMatch { plens, maskbits: 0 };
        }
        // Deepest level the value's path exists in the trie.
        let depth = (0..=width)
            .rev()
            .find(|&d| rules.iter().any(|&(v, l)| l >= d && pre(v, d) == pre(x, d)))
            .unwrap();
        if depth == width {
            return TrieMatch { plens, maskbits: width };
        }
        let leaf = !rules.iter().any(|&(v, l)| l > depth && pre(v, depth) == pre(x, depth));
        TrieMatch { plens, maskbits: if leaf { depth } else { depth + 1 } }
    }

    #[test]
    fn lookup_reports_matching_prefix_lengths_and_bits_needed() {
        let mut t = PrefixTrie::new(32);
        assert_eq!(t.lookup(v4(10, 0, 0, 1)).maskbits, 0);
        t.insert(v4(10, 0, 0, 0), 8);
        t.insert(v4(10, 1, 0, 0), 16);
        let m = t.lookup(v4(10, 1, 2, 3));
        assert!(m.has_plen(8) && m.has_plen(16) && !m.has_plen(24));
        assert_eq!(m.maskbits, 16, "ran off a leaf at depth 16");
        let m = t.lookup(v4(10, 2, 0, 0));
        assert!(m.has_plen(8) && !m.has_plen(16));
        // 10.2 = 00001010.00000010, 10.1 = 00001010.00000001: they part at bit 14.
        assert_eq!(m.maskbits, 15);
        let m = t.lookup(v4(192, 168, 0, 1));
        assert_eq!((m.plens, m.maskbits), (0, 1));
    }

    #[test]
    fn wide_tries_match_narrow_ones() {
        let mut wide = PrefixTrie::new(128);
        let base = 0x2001_0db8u128 << 96;
        wide.insert(base, 32);
        wide.insert(base | (1u128 << 64), 64);
        let m = wide.lookup(base | (1u128 << 64) | 7);
        assert!(m.has_plen(32) && m.has_plen(64));
        assert_eq!(m.maskbits, 64);
        assert_eq!(wide.lookup(base | (2u128 << 64)).maskbits, 63);
    }

    #[test]
    fn remove_keeps_leaf_detection_right() {
        let mut t = PrefixTrie::new(32);
        t.insert(v4(10, 0, 0, 0), 8);
        t.insert(v4(10, 128, 0, 0), 9);
        assert_eq!(t.lookup(v4(10, 0, 0, 1)).maskbits, 9);
        t.remove(v4(10, 128, 0, 0), 9);
        assert_eq!(t.lookup(v4(10, 0, 0, 1)).maskbits, 8);
        t.remove(v4(10, 0, 0, 0), 8);
        assert!(t.is_empty());
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

        #[test]
        fn matches_one_bit_per_level_trie(
            rules in prop::collection::vec((0u128..256, 1u32..=8), 0..12),
            removals in prop::collection::vec(any::<prop::sample::Index>(), 0..6),
            queries in prop::collection::vec(0u128..256, 1..16),
            wide in any::<bool>(),
            deferred in any::<bool>(),
        ) {
            // Eight significant bits, either in a narrow (u64) trie or at the top of a wide one.
            let width = if wide { 72 } else { 8 };
            let up = width - 8;
            let mut kept: Vec<(u128, u32)> =
                rules.iter().map(|&(v, l)| ((v & !((1u128 << (8 - l)) - 1)) << up, l)).collect();
            let mut t = PrefixTrie::new(width);
            match deferred {
                // Into the empty trie, built bottom-up; then some more, inserted.
                true => {
                    let half = kept.len() / 2;
                    for (i, &(v, l)) in kept.iter().enumerate() {
                        if i == half {
                            t.flush();
                        }
                        t.defer(v, l);
                    }
                    t.flush();
                }
                false => kept.iter().for_each(|&(v, l)| t.insert(v, l)),
            }
            for r in removals {
                if kept.is_empty() {
                    break;
                }
                let (v, l) = kept.remove(r.index(kept.len()));
                t.remove(v, l);
            }
            for q in queries {
                let q = q << up;
                prop_assert_eq!(t.lookup(q), brute(&kept, width, q), "rules {:?} query {}", kept, q);
            }
        }
    }
}
