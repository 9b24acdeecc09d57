//! Binary prefix tries, as OVS's classifier keeps them for IP addresses and transport ports.
//!
//! A trie holds the prefixes rules match on for one field. Looking a packet's value up tells
//! (a) which prefix lengths have rules matching the packet and (b) how many leading bits of
//! the packet had to be examined to know that. A subtable whose prefix length is not among
//! (a) cannot match, and the megaflow then needs only (b) bits of the field instead of the
//! subtable's whole mask — this is what keeps megaflows on IP prefixes wide.

const NONE: u32 = u32::MAX;

#[derive(Clone, Copy, Debug)]
struct Node {
    child: [u32; 2],
    /// Rules whose prefix ends exactly at this node.
    n_rules: u32,
}

impl Node {
    const EMPTY: Node = Node { child: [NONE, NONE], n_rules: 0 };

    fn is_leaf(&self) -> bool {
        self.child == [NONE, NONE]
    }
}

/// Result of a trie lookup.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TrieMatch {
    /// Bit `l - 1` is set when some rule's prefix of length `l` matches the value.
    pub plens: u128,
    /// Leading bits of the value that determined the result (OVS's `maskbits`).
    pub maskbits: u32,
}

impl TrieMatch {
    /// A result that rules nothing out (used when the field does not exist in the packet).
    pub const ALL: TrieMatch = TrieMatch { plens: u128::MAX, maskbits: 0 };

    /// Whether some rule with this prefix length matches.
    #[inline]
    pub fn has_plen(&self, plen: u32) -> bool {
        plen > 0 && self.plens >> (plen - 1) & 1 == 1
    }
}

/// A binary trie over values of up to 128 bits, most significant bit first.
#[derive(Clone, Debug)]
pub struct PrefixTrie {
    width: u32,
    nodes: Vec<Node>,
    free: Vec<u32>,
}

impl PrefixTrie {
    /// An empty trie over `width`-bit values.
    pub fn new(width: u32) -> PrefixTrie {
        PrefixTrie { width, nodes: vec![Node::EMPTY], free: Vec::new() }
    }

    #[inline]
    fn bit(&self, value: u128, i: u32) -> usize {
        (value >> (self.width - 1 - i) & 1) as usize
    }

    fn alloc(&mut self) -> u32 {
        match self.free.pop() {
            Some(i) => {
                self.nodes[i as usize] = Node::EMPTY;
                i
            }
            None => {
                self.nodes.push(Node::EMPTY);
                (self.nodes.len() - 1) as u32
            }
        }
    }

    /// Adds one rule with prefix `value/plen` (`plen` ≥ 1).
    pub fn insert(&mut self, value: u128, plen: u32) {
        let mut node = 0u32;
        for i in 0..plen {
            let b = self.bit(value, i);
            let next = self.nodes[node as usize].child[b];
            node = if next == NONE {
                let n = self.alloc();
                self.nodes[node as usize].child[b] = n;
                n
            } else {
                next
            };
        }
        self.nodes[node as usize].n_rules += 1;
    }

    /// Removes one rule previously inserted with the same `value/plen`, pruning empty branches.
    pub fn remove(&mut self, value: u128, plen: u32) {
        let mut path = Vec::with_capacity(plen as usize + 1);
        let mut node = 0u32;
        path.push(node);
        for i in 0..plen {
            node = self.nodes[node as usize].child[self.bit(value, i)];
            if node == NONE {
                return;
            }
            path.push(node);
        }
        let n = &mut self.nodes[node as usize];
        n.n_rules = n.n_rules.saturating_sub(1);
        for depth in (1..path.len()).rev() {
            let id = path[depth];
            let nd = self.nodes[id as usize];
            if nd.n_rules > 0 || !nd.is_leaf() {
                break;
            }
            let parent = path[depth - 1] as usize;
            let b = self.bit(value, depth as u32 - 1);
            self.nodes[parent].child[b] = NONE;
            self.free.push(id);
        }
    }

    /// Looks `value` up: which rule prefix lengths match it and how many bits that took.
    ///
    /// Mirrors OVS `trie_lookup_value`: on running off the trie, the first bit where the value
    /// left the stored prefixes is included, unless the last node was a leaf.
    pub fn lookup(&self, value: u128) -> TrieMatch {
        let mut plens = 0u128;
        let mut node = &self.nodes[0];
        if node.is_leaf() && node.n_rules == 0 {
            return TrieMatch { plens, maskbits: 0 };
        }
        let mut len = 0u32;
        loop {
            if node.n_rules > 0 && len > 0 {
                plens |= 1u128 << (len - 1);
            }
            if len >= self.width {
                return TrieMatch { plens, maskbits: self.width };
            }
            let next = node.child[self.bit(value, len)];
            if next == NONE {
                let maskbits = if node.is_leaf() { len } else { len + 1 };
                return TrieMatch { plens, maskbits };
            }
            node = &self.nodes[next as usize];
            len += 1;
        }
    }

    /// Whether no rule is stored.
    pub fn is_empty(&self) -> bool {
        self.nodes[0].is_leaf() && self.nodes[0].n_rules == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4(a: u8, b: u8, c: u8, d: u8) -> u128 {
        u32::from_be_bytes([a, b, c, d]) as u128
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
    fn remove_prunes_so_leaf_detection_stays_right() {
        let mut t = PrefixTrie::new(32);
        t.insert(v4(10, 0, 0, 0), 8);
        t.insert(v4(10, 128, 0, 0), 9);
        assert_eq!(t.lookup(v4(10, 0, 0, 1)).maskbits, 9);
        t.remove(v4(10, 128, 0, 0), 9);
        assert_eq!(t.lookup(v4(10, 0, 0, 1)).maskbits, 8);
        t.remove(v4(10, 0, 0, 0), 8);
        assert!(t.is_empty());
    }
}
