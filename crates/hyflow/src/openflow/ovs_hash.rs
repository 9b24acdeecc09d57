//! Open vSwitch's hash functions, bit for bit: the portable ones of `lib/hash.h` (murmur3
//! based, as a build without SSE 4.2 uses them), `lib/jhash.c`, and the flow hashes of
//! `lib/flow.c` that select a group's bucket and compute the datapath's `dp_hash`. A bucket
//! or a `dp_hash` is then the one such an Open vSwitch computes.

use crate::packet::field::{id, proto};
use crate::packet::FlowKey;

/// OVS `hash_add` (`mhash_add`).
fn mhash_add(hash: u32, data: u32) -> u32 {
    let mut h = hash;
    if data != 0 {
        let d = data.wrapping_mul(0xcc9e_2d51).rotate_left(15).wrapping_mul(0x1b87_3593);
        h ^= d;
    }
    h.rotate_left(13).wrapping_mul(5).wrapping_add(0xe654_6b64)
}

/// OVS `hash_add64` (portable: low word, then high).
fn hash_add64(hash: u32, data: u64) -> u32 {
    mhash_add(mhash_add(hash, data as u32), (data >> 32) as u32)
}

/// OVS `hash_finish`.
fn hash_finish(hash: u32, last: u32) -> u32 {
    let mut h = hash ^ last;
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^ (h >> 16)
}

/// OVS `hash_int` (= `hash_2words(x, basis)`).
pub(crate) fn hash_int(x: u32, basis: u32) -> u32 {
    hash_finish(mhash_add(mhash_add(x, 0), basis), 8)
}

/// OVS `hash_uint64`.
pub(crate) fn hash_uint64(x: u64) -> u32 {
    hash_finish(mhash_add(mhash_add(0, x as u32), (x >> 32) as u32), 8)
}

/// OVS `hash_bytes`: little-endian words of the bytes, the tail zero-padded.
pub(crate) fn hash_bytes(bytes: &[u8], basis: u32) -> u32 {
    let mut h = basis;
    let mut chunks = bytes.chunks_exact(4);
    for c in &mut chunks {
        h = mhash_add(h, u32::from_le_bytes([c[0], c[1], c[2], c[3]]));
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut tmp = [0u8; 4];
        tmp[..rest.len()].copy_from_slice(rest);
        h = mhash_add(h, u32::from_le_bytes(tmp));
    }
    hash_finish(h, bytes.len() as u32)
}

fn jhash_mix(a: &mut u32, b: &mut u32, c: &mut u32) {
    *a = a.wrapping_sub(*c) ^ c.rotate_left(4);
    *c = c.wrapping_add(*b);
    *b = b.wrapping_sub(*a) ^ a.rotate_left(6);
    *a = a.wrapping_add(*c);
    *c = c.wrapping_sub(*b) ^ b.rotate_left(8);
    *b = b.wrapping_add(*a);
    *a = a.wrapping_sub(*c) ^ c.rotate_left(16);
    *c = c.wrapping_add(*b);
    *b = b.wrapping_sub(*a) ^ a.rotate_left(19);
    *a = a.wrapping_add(*c);
    *c = c.wrapping_sub(*b) ^ b.rotate_left(4);
    *b = b.wrapping_add(*a);
}

fn jhash_final(a: &mut u32, b: &mut u32, c: &mut u32) {
    *c = (*c ^ *b).wrapping_sub(b.rotate_left(14));
    *a = (*a ^ *c).wrapping_sub(c.rotate_left(11));
    *b = (*b ^ *a).wrapping_sub(a.rotate_left(25));
    *c = (*c ^ *b).wrapping_sub(b.rotate_left(16));
    *a = (*a ^ *c).wrapping_sub(c.rotate_left(4));
    *b = (*b ^ *a).wrapping_sub(a.rotate_left(14));
    *c = (*c ^ *b).wrapping_sub(b.rotate_left(24));
}

/// OVS `jhash_bytes`.
fn jhash_bytes(bytes: &[u8], basis: u32) -> u32 {
    let word = |p: &[u8], i: usize| u32::from_le_bytes([p[i], p[i + 1], p[i + 2], p[i + 3]]);
    let init = 0xdead_beef_u32.wrapping_add(bytes.len() as u32).wrapping_add(basis);
    let (mut a, mut b, mut c) = (init, init, init);
    let mut p = bytes;
    while p.len() >= 12 {
        a = a.wrapping_add(word(p, 0));
        b = b.wrapping_add(word(p, 4));
        c = c.wrapping_add(word(p, 8));
        jhash_mix(&mut a, &mut b, &mut c);
        p = &p[12..];
    }
    if !p.is_empty() {
        let mut tmp = [0u8; 12];
        tmp[..p.len()].copy_from_slice(p);
        a = a.wrapping_add(word(&tmp, 0));
        b = b.wrapping_add(word(&tmp, 4));
        c = c.wrapping_add(word(&tmp, 8));
        jhash_final(&mut a, &mut b, &mut c);
    }
    c
}

/// OVS `flow_hash_symmetric_l4(flow, 0)`: a 32-byte struct of address XORs, EtherType, VLAN
/// ids, the TCP/SCTP port XOR and the protocol, hashed with `jhash_bytes`.
pub(crate) fn symmetric_l4_hash(k: &FlowKey) -> u32 {
    let mut s = [0u8; 32];
    let dl = k.dl_type();
    let nw = k.nw_proto();
    let ports = |s: &mut [u8; 32]| {
        if nw == proto::IP_TCP || nw == proto::IP_SCTP {
            let x = (k.get(id::TP_SRC) ^ k.get(id::TP_DST)) as u16;
            s[20..22].copy_from_slice(&x.to_be_bytes());
        }
    };
    if dl == proto::ETH_IPV4 {
        let x = (k.get(id::NW_SRC) ^ k.get(id::NW_DST)) as u32;
        s[0..4].copy_from_slice(&x.to_be_bytes());
        s[28] = nw;
        ports(&mut s);
    } else if dl == proto::ETH_IPV6 {
        let x = k.get(id::IPV6_SRC) ^ k.get(id::IPV6_DST);
        s[0..16].copy_from_slice(&x.to_be_bytes());
        s[28] = nw;
        ports(&mut s);
    }
    s[16..18].copy_from_slice(&dl.to_be_bytes());
    let vid = (k.vlan_tci() ^ k.vlan_tci2()) & 0x0fff;
    s[18..20].copy_from_slice(&vid.to_be_bytes());
    let macs = (k.get(id::DL_SRC) ^ k.get(id::DL_DST)) as u64;
    s[22..28].copy_from_slice(&macs.to_be_bytes()[2..]);
    jhash_bytes(&s, 0)
}

/// OVS `flow_hash_symmetric_l3l4(flow, basis, false)`, the datapath's `hash(sym_l4(basis))`
/// that sets `dp_hash` for a select group: the address XOR, the protocol and (TCP and SCTP,
/// unfragmented) the port XOR, so both directions of a connection hash alike; other packets
/// hash their Ethernet header (`flow_hash_symmetric_l2`). Values are hashed as the bytes of
/// OVS's `struct flow` (network order) read as little-endian words, as on x86.
pub(crate) fn symmetric_l3l4_hash(k: &FlowKey, basis: u32) -> u32 {
    let mut h = basis;
    match k.dl_type() {
        proto::ETH_IPV4 => {
            let x = (k.get(id::NW_SRC) ^ k.get(id::NW_DST)) as u32;
            h = mhash_add(h, u32::from_le_bytes(x.to_be_bytes()));
        }
        proto::ETH_IPV6 => {
            let x = (k.get(id::IPV6_SRC) ^ k.get(id::IPV6_DST)).to_be_bytes();
            for half in x.chunks_exact(8) {
                h = hash_add64(h, u64::from_le_bytes(half.try_into().expect("8 bytes")));
            }
        }
        _ => return symmetric_l2_hash(k, basis),
    }
    let nw = k.nw_proto();
    h = mhash_add(h, nw as u32);
    if k.nw_frag() == 0 && matches!(nw, proto::IP_TCP | proto::IP_SCTP) {
        let x = (k.get(id::TP_SRC) ^ k.get(id::TP_DST)) as u16;
        h = mhash_add(h, u16::from_le_bytes(x.to_be_bytes()) as u32);
    }
    hash_finish(h, basis)
}

/// OVS `flow_hash_symmetric_l2`: EtherType, the VLAN ids' XOR and the MAC addresses' XOR,
/// as three words.
fn symmetric_l2_hash(k: &FlowKey, basis: u32) -> u32 {
    let mut s = [0u8; 12];
    s[0..2].copy_from_slice(&k.dl_type().to_be_bytes());
    let vid = (k.vlan_tci() ^ k.vlan_tci2()) & 0x0fff;
    s[2..4].copy_from_slice(&vid.to_be_bytes());
    let macs = (k.get(id::DL_SRC) ^ k.get(id::DL_DST)) as u64;
    s[4..10].copy_from_slice(&macs.to_be_bytes()[2..]);
    let h = s
        .chunks_exact(4)
        .fold(basis, |h, w| mhash_add(h, u32::from_le_bytes(w.try_into().expect("4 bytes"))));
    hash_finish(h, basis)
}
