//! Which header fields identify a flow for measurement, and the compact id they pack into.
//!
//! Detectors store flow identities in their heaps and summaries, so the identity must be cheap
//! to hash and to store: the selected fields are packed, exactly, into a number of at most
//! [`FLOW_ID_BITS`] bits (an IPv4 5-tuple takes 104, an IPv6 one 296), hashed once per packet,
//! and stored by detectors at the key's own width ([`PackedIds`]), so a wide key costs memory
//! only where it is used. Packing is exact, so every reported flow prints back field by field.

use std::cmp::Ordering;

use xxhash_rust::xxh3::xxh3_128_with_seed;

use crate::packet::field::{id, proto, Prereq};
use crate::packet::format::format_value;
use crate::packet::{FieldId, FlowKey, FlowMask};

/// Most bits a flow key packs into: an IPv6 5-tuple (296) with VLAN, ports and more to spare.
pub const FLOW_ID_BITS: u32 = 384;
const WORDS: usize = FLOW_ID_BITS as usize / 64;
/// Bytes of a flow id at its widest.
pub const FLOW_ID_BYTES: usize = WORDS * 8;

/// A flow's identity under a [`KeySpec`]: its fields packed into one number, the first field
/// most significant. Held as 64-bit words, least significant first; it orders as the number.
#[derive(Clone, Copy, Debug, Default, Eq)]
pub struct FlowId([u64; WORDS]);

impl PartialEq for FlowId {
    /// Every word, without an early exit, so that the comparison stays inline: a derived one
    /// calls `memcmp` for the 48 bytes, and every lookup of a flow in a detector's or a
    /// policy's map makes one (a tenth of a live switch's per-packet profile under Elixir).
    #[inline]
    fn eq(&self, other: &Self) -> bool {
        self.0.iter().zip(&other.0).fold(0, |differ, (a, b)| differ | (a ^ b)) == 0
    }
}

impl std::hash::Hash for FlowId {
    /// The words, as a derived hash gives them (equal ids hash alike, as `eq` requires).
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.hash(state);
    }
}

impl Ord for FlowId {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.iter().rev().cmp(other.0.iter().rev())
    }
}

impl PartialOrd for FlowId {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl FlowId {
    /// The id whose packed value is `v` (keys of at most 128 bits).
    #[inline]
    pub fn from_u128(v: u128) -> FlowId {
        let mut words = [0; WORDS];
        words[0] = v as u64;
        words[1] = (v >> 64) as u64;
        FlowId(words)
    }

    /// Shifts the value left by `bits` (1 to 128) and puts `value` (< 2^bits) in the bits
    /// freed: the packing of one more field.
    fn shift_in(&mut self, bits: u32, value: u128) {
        if bits > 64 {
            self.shift_in_word(bits - 64, (value >> 64) as u64);
            self.shift_in_word(64, value as u64);
        } else if bits > 0 {
            self.shift_in_word(bits, value as u64);
        }
    }

    /// [`FlowId::shift_in`] by 1 to 64 bits.
    fn shift_in_word(&mut self, bits: u32, value: u64) {
        let mut carry = value as u128;
        for w in &mut self.0 {
            let wide = (*w as u128) << bits | carry;
            *w = wide as u64;
            carry = wide >> 64;
        }
    }

    /// The low `bits` bits (at most 128) of the value, which then shifts right by `bits`.
    fn shift_out(&mut self, bits: u32) -> u128 {
        let low = self.0[0] as u128 | (self.0[1] as u128) << 64;
        let value = if bits >= 128 { low } else { low & ((1u128 << bits) - 1) };
        let (words, bit) = ((bits / 64) as usize, bits % 64);
        for i in 0..WORDS {
            let lo = self.0.get(i + words).copied().unwrap_or(0);
            let hi = self.0.get(i + words + 1).copied().unwrap_or(0);
            self.0[i] = if bit == 0 { lo } else { lo >> bit | hi << (64 - bit) };
        }
        value
    }

    /// The value's bytes, least significant first: a key of b bits is in the first ⌈b/8⌉.
    pub fn to_le_bytes(self) -> [u8; FLOW_ID_BYTES] {
        let mut bytes = [0u8; FLOW_ID_BYTES];
        for (chunk, w) in bytes.chunks_exact_mut(8).zip(self.0) {
            chunk.copy_from_slice(&w.to_le_bytes());
        }
        bytes
    }

    /// The id whose low bytes, least significant first, are `bytes` (at most
    /// [`FLOW_ID_BYTES`]); the rest is 0.
    pub fn from_le_bytes(bytes: &[u8]) -> FlowId {
        let mut all = [0u8; FLOW_ID_BYTES];
        all[..bytes.len()].copy_from_slice(bytes);
        let mut words = [0; WORDS];
        for (w, chunk) in words.iter_mut().zip(all.chunks_exact(8)) {
            *w = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
        }
        FlowId(words)
    }

    /// The flow's seeded 128-bit hash, computed once per packet: detectors derive their row
    /// indices and fingerprints from it. Hashes the value's words up to its highest non-zero
    /// one (at least two, most significant first), so a narrow key hashes 16 bytes however
    /// wide an id may be.
    #[inline]
    pub fn hash(self, seed: u64) -> u128 {
        if self.0[2..].iter().all(|&w| w == 0) {
            // Keys of at most 128 bits, the common case: no length to find.
            let v = (self.0[0] as u128) << 64 | self.0[1] as u128;
            return xxh3_128_with_seed(&v.to_le_bytes(), seed);
        }
        let used = WORDS - self.0.iter().rev().take_while(|&&w| w == 0).count();
        let mut bytes = [0u8; FLOW_ID_BYTES];
        for (chunk, w) in bytes.chunks_exact_mut(8).zip(self.0[..used].iter().rev()) {
            chunk.copy_from_slice(&w.to_le_bytes());
        }
        xxh3_128_with_seed(&bytes[..used * 8], seed)
    }
}

/// Bytes of a flow id of `key_bits` bits, as detectors store it.
pub(crate) fn id_bytes(key_bits: u32) -> usize {
    (key_bits as usize).div_ceil(8).clamp(1, FLOW_ID_BYTES)
}

/// A fixed number of flow ids packed at a key's width in one flat array: the id storage of
/// heaps and tables charged to a detector's budget (13 bytes per IPv4 5-tuple, not
/// [`FLOW_ID_BYTES`]).
#[derive(Clone, Debug)]
pub struct PackedIds {
    width: usize,
    bytes: Vec<u8>,
}

impl PackedIds {
    /// Room for `slots` ids of `key_bits` bits, all 0.
    pub(crate) fn new(slots: usize, key_bits: u32) -> PackedIds {
        let width = id_bytes(key_bits);
        PackedIds { width, bytes: vec![0; slots * width] }
    }

    /// Bytes `slots` ids of `key_bits` bits take.
    pub(crate) fn bytes_for(slots: usize, key_bits: u32) -> usize {
        slots * id_bytes(key_bits)
    }

    /// Bytes held.
    pub(crate) fn memory_bytes(&self) -> usize {
        self.bytes.len()
    }

    /// Whether ids are 8 to 16 bytes wide (the IPv4 5-tuple's 13, most keys): then an id is
    /// read, written and compared as two overlapping 8-byte words, where a slice of the run
    /// time width would call `memcmp` or `memcpy` — a tenth of a Space-Saving packet's time.
    #[inline]
    fn two_words(&self) -> bool {
        (8..=16).contains(&self.width)
    }

    /// The id in slot `i`.
    #[inline]
    pub(crate) fn get(&self, i: usize) -> FlowId {
        let (w, slot) = (self.width, &self.bytes[i * self.width..(i + 1) * self.width]);
        if self.two_words() {
            let mut bytes = [0u8; 16];
            bytes[..8].copy_from_slice(&slot[..8]);
            bytes[w - 8..w].copy_from_slice(&slot[w - 8..]);
            return FlowId::from_u128(u128::from_le_bytes(bytes));
        }
        FlowId::from_le_bytes(slot)
    }

    /// Puts `flow` in slot `i`.
    #[inline]
    pub(crate) fn set(&mut self, i: usize, flow: FlowId) {
        let (w, two_words) = (self.width, self.two_words());
        let slot = &mut self.bytes[i * w..(i + 1) * w];
        if two_words {
            let bytes = (flow.0[0] as u128 | (flow.0[1] as u128) << 64).to_le_bytes();
            slot[..8].copy_from_slice(&bytes[..8]);
            slot[w - 8..].copy_from_slice(&bytes[w - 8..w]);
        } else {
            slot.copy_from_slice(&flow.to_le_bytes()[..w]);
        }
    }

    /// `flow` as stored here, to compare with [`PackedIds::holds`] without packing per slot.
    #[inline]
    pub(crate) fn pack(&self, flow: FlowId) -> [u8; FLOW_ID_BYTES] {
        flow.to_le_bytes()
    }

    /// Whether slot `i` holds the id `packed` ([`PackedIds::pack`]).
    #[inline]
    pub(crate) fn holds(&self, i: usize, packed: &[u8; FLOW_ID_BYTES]) -> bool {
        let (w, slot) = (self.width, &self.bytes[i * self.width..(i + 1) * self.width]);
        if self.two_words() {
            let word = |b: &[u8], at: usize| u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"));
            return word(slot, 0) == word(packed, 0) && word(slot, w - 8) == word(packed, w - 8);
        }
        *slot == packed[..w]
    }

    /// Copies slot `from` to slot `to`.
    #[inline]
    pub(crate) fn copy(&mut self, from: usize, to: usize) {
        self.bytes.copy_within(from * self.width..(from + 1) * self.width, to * self.width);
    }

    /// Whether `flow` fits the width (its bytes past it are 0).
    pub(crate) fn fits(&self, flow: FlowId) -> bool {
        flow.to_le_bytes()[self.width..].iter().all(|&b| b == 0)
    }
}

/// Why a key specification is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum KeySpecError {
    /// A name that is no field.
    #[error("unknown key field '{0}' (use ovs-ofctl field names, e.g. nw_src,nw_dst,nw_proto,tp_src,tp_dst, or 5tuple, or 5tuple46 for IPv4 and IPv6)")]
    UnknownField(String),
    /// No field at all.
    #[error("the flow key needs at least one field")]
    Empty,
    /// A field named twice.
    #[error("key field '{0}' given twice")]
    Repeated(String),
    /// More than fits in a [`FlowId`].
    #[error("key fields take {0} bits; at most {FLOW_ID_BITS} fit in a flow id")]
    TooWide(u32),
    /// More fields than a key holds.
    #[error("the flow key takes at most {MAX_KEY_FIELDS} fields, not {0}")]
    TooMany(usize),
}

/// The 5-tuple's fields, in packing order.
const FIVE_TUPLE: [FieldId; 5] = [id::NW_SRC, id::NW_DST, id::NW_PROTO, id::TP_SRC, id::TP_DST];

/// [`KeySpec::flow_id`] for the 5-tuple, the key every policy uses by default, with the field
/// accessors and prerequisites spelt out (the general loop looks each field up): IPv4 only
/// (`nw_src` needs it), transport ports 0 where the packet has none.
#[inline]
fn five_tuple_id(key: &FlowKey) -> Option<FlowId> {
    if key.dl_type() != proto::ETH_IPV4 {
        return None;
    }
    let later = key.nw_frag() & proto::FRAG_LATER != 0;
    let nw_proto = key.nw_proto();
    let ports = Prereq::L4Ports.holds(Some(proto::ETH_IPV4), Some(nw_proto), None, later);
    let (sport, dport) = if ports { (key.tp_src(), key.tp_dst()) } else { (0, 0) };
    let v = (key.nw_src() as u128) << 72
        | (key.nw_dst() as u128) << 40
        | (nw_proto as u128) << 32
        | (sport as u128) << 16
        | dport as u128;
    Some(FlowId::from_u128(v))
}

/// The dual-stack 5-tuple's fields, in packing order (296 bits).
const FIVE_TUPLE_46: [FieldId; 5] = [id::IPV6_SRC, id::IPV6_DST, id::NW_PROTO, id::TP_SRC, id::TP_DST];

/// IPv4-mapped IPv6 addresses (::ffff:0:0/96, RFC 4291 §2.5.5.2): how the dual-stack key holds
/// an IPv4 address, so IPv4 and IPv6 flows share one key and never collide (a mapped address
/// does not appear in real IPv6 headers).
const IPV4_MAPPED: u128 = 0xffff << 32;

/// [`KeySpec::flow_id`] for the dual-stack 5-tuple: IPv6 packets as they are, IPv4 ones with
/// IPv4-mapped addresses.
#[inline]
fn five_tuple_46_id(key: &FlowKey) -> Option<FlowId> {
    let dl_type = key.dl_type();
    let (src, dst) = match dl_type {
        proto::ETH_IPV4 => (IPV4_MAPPED | key.nw_src() as u128, IPV4_MAPPED | key.nw_dst() as u128),
        proto::ETH_IPV6 => (key.get(id::IPV6_SRC), key.get(id::IPV6_DST)),
        _ => return None,
    };
    let later = key.nw_frag() & proto::FRAG_LATER != 0;
    let nw_proto = key.nw_proto();
    let ports = Prereq::L4Ports.holds(Some(dl_type), Some(nw_proto), None, later);
    let (sport, dport) = if ports { (key.tp_src(), key.tp_dst()) } else { (0, 0) };
    let mut v = FlowId::from_u128(src);
    v.shift_in(128, dst);
    v.shift_in(40, (nw_proto as u128) << 32 | (sport as u128) << 16 | dport as u128);
    Some(v)
}

/// Most fields in a flow key (real keys use a handful of fields).
pub(crate) const MAX_KEY_FIELDS: usize = 12;

/// The fields that identify a flow. Fixed-size, so configurations holding one stay `Copy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeySpec {
    fields: [FieldId; MAX_KEY_FIELDS],
    len: u8,
    /// The dual-stack 5-tuple ([`KeySpec::five_tuple_46`]): IPv4 addresses held IPv4-mapped
    /// in the IPv6 address fields.
    dual_stack: bool,
}

impl KeySpec {
    /// The IPv4 5-tuple: addresses, protocol, transport ports (the papers' flow key).
    pub fn five_tuple() -> KeySpec {
        KeySpec::of(&FIVE_TUPLE)
    }

    /// The 5-tuple of IPv4 and IPv6 packets alike (296 bits): IPv6 addresses, IPv4 ones
    /// IPv4-mapped (reported as `::ffff:a.b.c.d`). Ids take almost three times the IPv4 key's
    /// bytes in a detector's heap, which is why the papers' IPv4 key stays the default.
    pub(crate) fn five_tuple_46() -> KeySpec {
        KeySpec { dual_stack: true, ..KeySpec::of(&FIVE_TUPLE_46) }
    }

    fn of(fields: &[FieldId]) -> KeySpec {
        let mut spec =
            KeySpec { fields: [FieldId(0); MAX_KEY_FIELDS], len: fields.len() as u8, dual_stack: false };
        spec.fields[..fields.len()].copy_from_slice(fields);
        spec
    }

    /// Parses `5tuple` (IPv4), `5tuple46` (IPv4 and IPv6) or a comma-separated list of
    /// ovs-ofctl field names.
    pub fn parse(text: &str) -> Result<KeySpec, KeySpecError> {
        match text.trim() {
            "5tuple" => return Ok(KeySpec::five_tuple()),
            "5tuple46" => return Ok(KeySpec::five_tuple_46()),
            _ => {}
        }
        let mut fields = Vec::new();
        for name in text.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            let f = FieldId::from_name(name).ok_or_else(|| KeySpecError::UnknownField(name.to_string()))?;
            if fields.contains(&f) {
                return Err(KeySpecError::Repeated(name.to_string()));
            }
            fields.push(f);
        }
        if fields.is_empty() {
            return Err(KeySpecError::Empty);
        }
        let bits: u32 = fields.iter().map(|f| f.def().bits as u32).sum();
        if bits > FLOW_ID_BITS {
            return Err(KeySpecError::TooWide(bits));
        }
        if fields.len() > MAX_KEY_FIELDS {
            return Err(KeySpecError::TooMany(fields.len()));
        }
        Ok(KeySpec::of(&fields))
    }

    /// Whether this is the IPv4-only 5-tuple, which skips IPv6 packets.
    pub fn is_ipv4_five_tuple(&self) -> bool {
        !self.dual_stack && self.fields() == FIVE_TUPLE
    }

    /// Bits of a packed flow id (104 for the IPv4 5-tuple).
    pub fn bits(&self) -> u32 {
        self.fields().iter().map(|f| f.def().bits as u32).sum()
    }

    /// The fields, in packing order.
    pub fn fields(&self) -> &[FieldId] {
        &self.fields[..self.len as usize]
    }

    /// The bits of the key fields, for a match exact on them.
    pub fn mask(&self) -> FlowMask {
        let mut mask = FlowMask::default();
        for &f in self.fields() {
            mask.unwildcard_all(f);
        }
        if self.dual_stack {
            // IPv4 packets keep their addresses in nw_src/nw_dst, not the IPv6 fields.
            mask.unwildcard_all(id::NW_SRC);
            mask.unwildcard_all(id::NW_DST);
        }
        mask
    }

    /// The id of a packet's flow, or `None` if the packet lacks a key field (a field whose
    /// prerequisite fails, e.g. `nw_src` of an ARP packet). Transport ports of a packet
    /// without them (ICMP, fragments) count as 0, as flow keys usually treat them.
    #[inline]
    pub fn flow_id(&self, key: &FlowKey) -> Option<FlowId> {
        if self.dual_stack {
            return five_tuple_46_id(key);
        }
        if self.fields() == FIVE_TUPLE {
            return five_tuple_id(key);
        }
        self.general_flow_id(key)
    }

    /// [`flow_id`](Self::flow_id) for any fields: each looked up, its prerequisite checked.
    fn general_flow_id(&self, key: &FlowKey) -> Option<FlowId> {
        let mut v = FlowId::default();
        // The prerequisites' inputs, read once for all fields.
        let (dl_type, nw_proto, vlan) = (Some(key.dl_type()), Some(key.nw_proto()), Some(key.has_vlan()));
        let later = key.nw_frag() & proto::FRAG_LATER != 0;
        for &f in self.fields() {
            let def = f.def();
            let value = if def.prereq.holds(dl_type, nw_proto, vlan, later) {
                key.get(f)
            } else if matches!(def.prereq, Prereq::L4Ports | Prereq::Tcp | Prereq::Udp | Prereq::Sctp)
                && key.is_ip()
            {
                0
            } else {
                return None;
            };
            v.shift_in(def.bits as u32, value);
        }
        Some(v)
    }

    /// The fields of a flow id with their values in ovs-ofctl notation.
    pub(crate) fn fields_of(&self, mut flow: FlowId) -> Vec<(&'static str, String)> {
        let mut out: Vec<(&'static str, String)> = self
            .fields()
            .iter()
            .rev()
            .map(|&f| (f.def().name, format_value(f, flow.shift_out(f.def().bits as u32))))
            .collect();
        out.reverse();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openflow::parse_packet;

    /// A deterministic stream of random words (xorshift64).
    fn xorshift(mut state: u64) -> impl FnMut() -> u64 {
        move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        }
    }

    #[test]
    fn packs_and_prints_back_the_fields() {
        let k = parse_packet("tcp,nw_src=10.1.2.3,nw_dst=192.168.0.1,tp_src=1234,tp_dst=80").unwrap();
        let spec = KeySpec::five_tuple();
        let f = spec.flow_id(&k).unwrap();
        let fields = spec.fields_of(f);
        let text: Vec<String> = fields.iter().map(|(n, v)| format!("{n}={v}")).collect();
        assert_eq!(text, ["nw_src=10.1.2.3", "nw_dst=192.168.0.1", "nw_proto=6", "tp_src=1234", "tp_dst=80"]);
        let mut other = k;
        other.set_tp_src(1235);
        assert_ne!(spec.flow_id(&other), Some(f));
        let dst_only = KeySpec::parse("nw_dst").unwrap();
        assert_eq!(dst_only.flow_id(&other), dst_only.flow_id(&k));
        let icmp = parse_packet("icmp,nw_src=10.1.2.3,icmp_type=8").unwrap();
        let fields = spec.fields_of(spec.flow_id(&icmp).unwrap());
        assert_eq!((fields[2].1.as_str(), fields[3].1.as_str()), ("1", "0"), "no ports: 0");
        assert_eq!(spec.flow_id(&parse_packet("arp").unwrap()), None);
    }

    /// The 5-tuple fast path gives what the general extraction gives, on packets of every
    /// kind (IPv4 TCP/UDP/SCTP/ICMP, later fragments, IPv6, ARP, VLAN) with random values.
    #[test]
    fn the_five_tuple_fast_path_agrees_with_the_general_one() {
        let spec = KeySpec::five_tuple();
        let mut next = xorshift(0x1234_5678_9abc_def1u64);
        let (mut ids, mut nones) = (0, 0);
        for _ in 0..20_000 {
            let mut k = FlowKey::default();
            let r = next();
            k.set_dl_type(
                [proto::ETH_IPV4, proto::ETH_IPV4, proto::ETH_IPV6, proto::ETH_ARP][(r % 4) as usize],
            );
            k.set_nw_proto(
                [proto::IP_TCP, proto::IP_UDP, proto::IP_SCTP, proto::IP_ICMP, 47][(r >> 2) as usize % 5],
            );
            k.set_nw_frag((r >> 5) as u8 & 3);
            k.set_nw_src(next() as u32);
            k.set_nw_dst(next() as u32);
            k.set_tp_src(next() as u16);
            k.set_tp_dst(next() as u16);
            if r >> 9 & 1 == 1 {
                k.set_vlan_tci(0x1000 | (next() as u16 & 0xfff));
            }
            let general = spec.general_flow_id(&k);
            assert_eq!(spec.flow_id(&k), general, "{k:?}");
            if general.is_some() {
                ids += 1;
            } else {
                nones += 1;
            }
        }
        assert!(ids > 8_000 && nones > 8_000, "{ids} ids, {nones} without one");
    }

    #[test]
    fn bad_specs_say_why() {
        assert_eq!(KeySpec::parse("nw_src,bogus"), Err(KeySpecError::UnknownField("bogus".into())));
        assert_eq!(KeySpec::parse(" , "), Err(KeySpecError::Empty));
        assert_eq!(KeySpec::parse("nw_src,nw_src"), Err(KeySpecError::Repeated("nw_src".into())));
        assert_eq!(KeySpec::parse("ipv6_src,ipv6_dst,dl_src,dl_dst,tun_id"), Err(KeySpecError::TooWide(416)));
        assert!(KeySpec::parse("ipv6_src,ipv6_dst,nw_proto,tp_src,tp_dst,in_port").is_ok());
    }

    /// Wide keys pack and print back exactly; the dual-stack key tells IPv4 from IPv6 flows
    /// and agrees with the field-by-field IPv6 key on IPv6 packets.
    #[test]
    fn ipv6_keys_pack_print_back_and_hash_whole() {
        let v6 =
            parse_packet("tcp6,ipv6_src=2001:db8::1,ipv6_dst=2001:db8::ff:2,tp_src=1234,tp_dst=443").unwrap();
        let v4 = parse_packet("udp,nw_src=10.1.2.3,nw_dst=10.9.8.7,tp_src=53,tp_dst=5353").unwrap();
        let fields6 = KeySpec::parse("ipv6_src,ipv6_dst,nw_proto,tp_src,tp_dst").unwrap();
        assert_eq!(fields6.bits(), 296);
        let id = fields6.flow_id(&v6).unwrap();
        let text: Vec<String> = fields6.fields_of(id).iter().map(|(n, v)| format!("{n}={v}")).collect();
        assert_eq!(
            text,
            ["ipv6_src=2001:db8::1", "ipv6_dst=2001:db8::ff:2", "nw_proto=6", "tp_src=1234", "tp_dst=443"]
        );
        assert_eq!(fields6.flow_id(&v4), None, "an IPv4 packet has no ipv6_src");

        let dual = KeySpec::parse("5tuple46").unwrap();
        assert_eq!(dual.bits(), 296);
        assert_eq!(dual.flow_id(&v6), Some(id), "IPv6: the same packing as the explicit fields");
        let id4 = dual.flow_id(&v4).unwrap();
        let text: Vec<String> = dual.fields_of(id4).iter().map(|(n, v)| format!("{n}={v}")).collect();
        assert_eq!(
            text,
            [
                "ipv6_src=::ffff:10.1.2.3",
                "ipv6_dst=::ffff:10.9.8.7",
                "nw_proto=17",
                "tp_src=53",
                "tp_dst=5353"
            ]
        );
        assert_eq!(dual.flow_id(&parse_packet("arp").unwrap()), None);
        // Exact on the bits the ids read: IPv4 addresses live in nw_src/nw_dst.
        assert!(
            dual.mask().get(id::NW_SRC) == u32::MAX as u128 && dual.mask().get(id::IPV6_DST) == u128::MAX
        );

        // Every bit of a wide id reaches the hash: addresses differing in their top bit only.
        let mut other = v6;
        other.set(id::IPV6_SRC, (0x2001_0db8u128 << 96 | 1) ^ 1 << 127);
        let other_id = dual.flow_id(&other).unwrap();
        assert_ne!(other_id, id);
        assert_ne!(other_id.hash(7), id.hash(7));
        assert!(other_id > id, "ids order as numbers, the first field most significant");
    }

    /// Packing at the widest and unpacking again is exact, for random field widths and values;
    /// a narrow id hashes as the 16 bytes it always did (results pinned before wide ids exist).
    #[test]
    fn shifting_in_and_out_round_trips() {
        let mut next = xorshift(0x9e37_79b9_7f4a_7c15u64);
        for _ in 0..2_000 {
            let mut fields = Vec::new();
            let mut total = 0;
            let mut id = FlowId::default();
            loop {
                let bits = (next() % 128 + 1) as u32;
                if total + bits > FLOW_ID_BITS {
                    break;
                }
                let value = ((next() as u128) << 64 | next() as u128) & (u128::MAX >> (128 - bits));
                id.shift_in(bits, value);
                fields.push((bits, value));
                total += bits;
            }
            assert_eq!(FlowId::from_le_bytes(&id.to_le_bytes()[..id_bytes(total)]), id);
            let mut back = id;
            for &(bits, value) in fields.iter().rev() {
                assert_eq!(back.shift_out(bits), value);
            }
            assert_eq!(back, FlowId::default());
        }
        let v = 0x000a_0102_03c0_a800_0106_04d2_u128 << 16 | 80;
        let mut legacy = [0u8; 16];
        legacy[..8].copy_from_slice(&((v >> 64) as u64).to_le_bytes());
        legacy[8..].copy_from_slice(&(v as u64).to_le_bytes());
        assert_eq!(FlowId::from_u128(v).hash(42), xxh3_128_with_seed(&legacy, 42));
    }

    /// Ids of every width, the 8- to 16-byte ones through their two-word path: what is put
    /// in a slot comes back, leaves its neighbours alone, and is held by that slot only.
    #[test]
    fn packed_ids_of_every_width_round_trip() {
        let mut next = xorshift(7);
        for key_bits in 1..=FLOW_ID_BITS {
            let width = id_bytes(key_bits);
            let mut ids = PackedIds::new(3, key_bits);
            let mut random_id = || {
                let mut bytes = [0u8; FLOW_ID_BYTES];
                bytes.iter_mut().for_each(|b| *b = next() as u8);
                bytes[width..].fill(0);
                FlowId::from_le_bytes(&bytes)
            };
            let flows = [random_id(), random_id(), random_id()];
            // Written last to first: a write spilling into the next slot would show.
            for (i, &f) in flows.iter().enumerate().rev() {
                ids.set(i, f);
            }
            for (i, &f) in flows.iter().enumerate() {
                assert_eq!(ids.get(i), f, "{key_bits} bits, slot {i}");
                for (j, &g) in flows.iter().enumerate() {
                    assert_eq!(ids.holds(j, &ids.pack(f)), f == g, "{key_bits} bits, slot {j}");
                }
                // A one-bit difference anywhere in the id's width is told apart.
                for byte in 0..width {
                    let mut other = f.to_le_bytes();
                    other[byte] ^= 1;
                    assert!(!ids.holds(i, &other), "{key_bits} bits, byte {byte}");
                }
            }
        }
    }
}
