//! The `NORMAL` action: Open vSwitch's L2 learning switch (`xlate_normal`, `lib/mac-learning.c`),
//! on a bridge whose ports are all trunks of every VLAN, without bonds, mirrors or multicast
//! snooping (OVS's defaults).
//!
//! A packet on VLAN `v` (its outer tag's id, 0 untagged) from a port of the switch: frames to
//! a reserved multicast MAC (IEEE 802.1D `01:80:c2:00:00:0x`, Cisco, Extreme) are dropped;
//! the source MAC, unless multicast, is learned on `(v, src)` → input port; the destination
//! goes to its learned port (dropped if that is the input port), and is flooded to every other
//! port (LOCAL first, then by number) when it is multicast or unknown. Entries expire after
//! `idle` without a packet from their MAC (OVS: 300 s) and the least recently refreshed is
//! evicted when the table is full (OVS: 8,192 entries).
//!
//! Learning is a side effect: translation lists what it would learn
//! (`Traversal::mac_learned`), the switch applies it — for every packet whose decision uses
//! `NORMAL`, whichever layer served it (OVS refreshes from datapath flow statistics) — and a
//! change of where a MAC is, or an expiry, revalidates every decision that used the table.

use std::collections::BTreeMap;

/// OVS `MAC_ENTRY_DEFAULT_IDLE_TIME`: 300 s.
pub(crate) const DEFAULT_IDLE_NS: u64 = 300_000_000_000;

/// OVS `MAC_DEFAULT_MAX`.
pub const DEFAULT_MAX_ENTRIES: usize = 8192;

/// One learning event: `mac` seen on `vlan` from `port`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MacLearn {
    /// VLAN id (0: untagged).
    pub vlan: u16,
    /// Source MAC (48 bits).
    pub mac: u64,
    /// Input port.
    pub port: u32,
}

/// Where each MAC was last seen, per VLAN.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MacTable {
    /// (vlan, mac) → (port, last refreshed).
    entries: BTreeMap<(u16, u64), (u32, u64)>,
    idle_ns: u64,
    max_entries: usize,
}

impl Default for MacTable {
    fn default() -> Self {
        MacTable::new(DEFAULT_IDLE_NS, DEFAULT_MAX_ENTRIES)
    }
}

impl MacTable {
    /// An empty table whose entries expire after `idle_ns` unrefreshed, holding at most
    /// `max_entries` (at least 1).
    pub fn new(idle_ns: u64, max_entries: usize) -> MacTable {
        MacTable { entries: BTreeMap::new(), idle_ns, max_entries: max_entries.max(1) }
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The port `mac` was learned on in `vlan` (never a multicast MAC).
    pub fn lookup(&self, vlan: u16, mac: u64) -> Option<u32> {
        if is_multicast(mac) {
            return None;
        }
        self.entries.get(&(vlan, mac)).map(|&(port, _)| port)
    }

    /// Learns (or refreshes) an entry at `now_ns`; returns whether forwarding may change: a
    /// new entry, a MAC that moved, or an entry evicted to make room.
    pub fn learn(&mut self, l: MacLearn, now_ns: u64) -> bool {
        if is_multicast(l.mac) {
            return false;
        }
        match self.entries.get_mut(&(l.vlan, l.mac)) {
            Some((port, seen)) => {
                *seen = now_ns;
                let moved = *port != l.port;
                *port = l.port;
                moved
            }
            None => {
                if self.entries.len() >= self.max_entries {
                    // OVS evicts fairly across ports; hyflow evicts the least recently seen.
                    let oldest =
                        self.entries.iter().min_by_key(|(k, (_, seen))| (*seen, **k)).map(|(k, _)| *k);
                    if let Some(k) = oldest {
                        self.entries.remove(&k);
                    }
                }
                self.entries.insert((l.vlan, l.mac), (l.port, now_ns));
                true
            }
        }
    }

    /// Removes the entries not refreshed for the idle time by `now_ns`; returns whether any
    /// was.
    pub fn expire(&mut self, now_ns: u64) -> bool {
        let before = self.entries.len();
        let idle = self.idle_ns;
        self.entries.retain(|_, (_, seen)| now_ns.saturating_sub(*seen) < idle);
        self.entries.len() != before
    }
}

/// Whether a MAC (48 bits, as a number) is multicast (or broadcast): its first octet's low bit.
pub(crate) fn is_multicast(mac: u64) -> bool {
    mac & (1 << 40) != 0
}

/// OVS `eth_addr_is_reserved`: destinations NORMAL never forwards (STP, pause, LACP, LLDP and
/// other IEEE 802.1D reserved addresses; Cisco and Extreme control protocols).
pub(crate) fn is_reserved(mac: u64) -> bool {
    matches!(
        mac,
        0x0180_c200_0000..=0x0180_c200_000f
            | 0x00e0_2b00_0000
            | 0x00e0_2b00_0004
            | 0x00e0_2b00_0006
            | 0x0100_0c00_0000
            | 0x0100_0ccc_cccc
            | 0x0100_0ccc_cccd
            | 0x0100_0ccd_cdcd
            | 0x0100_0ccc_ccc0..=0x0100_0ccc_ccc7
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: u64 = 0x0000_0000_0001;
    const B: u64 = 0x0000_0000_0002;

    #[test]
    fn learns_moves_refreshes_and_expires() {
        let mut t = MacTable::new(10, 8);
        assert!(t.learn(MacLearn { vlan: 0, mac: A, port: 1 }, 0));
        assert!(!t.learn(MacLearn { vlan: 0, mac: A, port: 1 }, 5), "a refresh changes nothing");
        assert_eq!(t.lookup(0, A), Some(1));
        assert_eq!(t.lookup(7, A), None, "per VLAN");
        assert!(t.learn(MacLearn { vlan: 0, mac: A, port: 2 }, 6), "a move changes forwarding");
        assert!(!t.expire(15), "refreshed at 6");
        assert!(t.expire(16));
        assert!(t.is_empty());
        assert!(
            !t.learn(MacLearn { vlan: 0, mac: 0xffff_ffff_ffff, port: 1 }, 0),
            "broadcast is never learned"
        );
    }

    #[test]
    fn a_full_table_evicts_the_least_recently_seen() {
        let mut t = MacTable::new(1_000, 2);
        t.learn(MacLearn { vlan: 0, mac: A, port: 1 }, 0);
        t.learn(MacLearn { vlan: 0, mac: B, port: 2 }, 1);
        t.learn(MacLearn { vlan: 0, mac: A, port: 1 }, 2);
        assert!(t.learn(MacLearn { vlan: 0, mac: 3, port: 3 }, 3));
        assert_eq!((t.lookup(0, A), t.lookup(0, B), t.len()), (Some(1), None, 2));
    }

    #[test]
    fn reserved_and_multicast_addresses() {
        assert!(is_reserved(0x0180_c200_000e) && is_reserved(0x0100_0ccc_cccd));
        assert!(!is_reserved(0x0180_c200_0010));
        assert!(is_multicast(0x0100_5e00_0001) && !is_multicast(0x0200_0000_0101));
    }
}
