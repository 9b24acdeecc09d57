//! FlexKVS (FlexNIC §3): a memcached-compatible key-value store whose requests a NIC steers
//! to the core owning their key.
//!
//! Layers, front to back: [`memcached`] (the UDP frame header, the ASCII and binary
//! protocols: requests parsed in place, replies written into a buffer the caller keeps),
//! [`service`] (a request against the store, counted by outcome and by malformed reason),
//! [`store`] (§3.1: a block-chain hash table of cache-line buckets, each with its lock and
//! five item hashes, and a log-structured item allocator with one active segment per
//! writer), [`workload`] (the paper's request mix, deterministic for a seed). I/O-free and clock-free like the rest of the engine: the live server
//! (`hyflow kvs`, crate `hyflow-live`) brings frames, cores and time.
//!
//! **Steering.** A key's hash ([`key_hash`]) is what the XDP program computes on the NIC
//! side (`crates/hyflow-live/bpf/kvs.bpf.c`, the same function bit for bit) and writes into
//! the frame's metadata, FlexNIC's "special packet header". Its low [`STEER_BITS`] bits
//! index the steering table (FlexNIC's "match table [that maps] ranges of hashes to queues",
//! 128 entries in the paper's prototype), so the core a request lands on is the core whose
//! partition holds its key ([`owner`]). The bucket within a partition comes from the bits
//! above them, so that a partition's keys spread over all of its buckets.

pub mod memcached;
pub mod model;
pub mod service;
pub mod store;
pub mod workload;

/// Bits of a key's hash that pick its steering-table slot (FlexNIC's prototype: up to 128
/// queue-table entries).
pub const STEER_BITS: u32 = 7;
/// Slots of the steering table.
pub const STEER_SLOTS: usize = 1 << STEER_BITS;

/// FNV-1a (32 bits) of a key: cheap per byte, simple enough for the XDP program to compute
/// over a key of up to 250 bytes in a bounded loop, and spread well enough for a hash table
/// indexed by its bits (the same function runs in `kvs.bpf.c`; a change here is a change
/// there).
#[inline]
pub fn key_hash(key: &[u8]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for &b in key {
        h ^= b as u32;
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

/// The partition (and with key steering, the core) owning a key of hash `hash` among
/// `partitions`: the steering table's slot, dealt round-robin.
#[inline]
pub fn owner(hash: u32, partitions: usize) -> usize {
    (hash as usize & (STEER_SLOTS - 1)) % partitions.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a_matches_its_published_vectors() {
        // From the FNV reference (draft-eastlake-fnv, test vectors for FNV-1a 32).
        assert_eq!(key_hash(b""), 0x811c_9dc5);
        assert_eq!(key_hash(b"a"), 0xe40c_292c);
        assert_eq!(key_hash(b"foobar"), 0xbf9c_f968);
    }

    #[test]
    fn owners_cover_every_partition() {
        for partitions in 1..=6 {
            let mut seen = vec![false; partitions];
            for slot in 0..STEER_SLOTS as u32 {
                seen[owner(slot, partitions)] = true;
            }
            assert!(seen.iter().all(|&s| s), "{partitions}");
        }
    }
}
