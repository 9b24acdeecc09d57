//! Which header fields identify a flow for measurement, and the compact id they pack into.
//!
//! Detectors store flow identities in their heaps and summaries, so the identity must be small
//! and cheap to hash: the selected fields are packed into 128 bits (an IPv4 5-tuple takes
//! 104). Packing is exact, so every reported flow can be printed back field by field.

use xxhash_rust::xxh3::xxh3_128_with_seed;

use crate::packet::field::{id, proto, Prereq};
use crate::packet::format::format_value;
use crate::packet::{FieldId, FlowKey, FlowMask};

/// A flow's identity under a [`KeySpec`]: its fields packed, most significant first.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FlowId(pub [u64; 2]);

impl FlowId {
    fn as_u128(self) -> u128 {
        (self.0[0] as u128) << 64 | self.0[1] as u128
    }

    fn from_u128(v: u128) -> FlowId {
        FlowId([(v >> 64) as u64, v as u64])
    }

    /// The flow's seeded 128-bit hash, computed once per packet: detectors derive their row
    /// indices and fingerprints from it.
    pub fn hash(self, seed: u64) -> u128 {
        let mut bytes = [0u8; 16];
        bytes[..8].copy_from_slice(&self.0[0].to_le_bytes());
        bytes[8..].copy_from_slice(&self.0[1].to_le_bytes());
        xxh3_128_with_seed(&bytes, seed)
    }
}

/// Why a key specification is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum KeySpecError {
    /// A name that is no field.
    #[error("unknown key field '{0}' (use ovs-ofctl field names, e.g. nw_src,nw_dst,nw_proto,tp_src,tp_dst, or 5tuple)")]
    UnknownField(String),
    /// No field at all.
    #[error("the flow key needs at least one field")]
    Empty,
    /// A field named twice.
    #[error("key field '{0}' given twice")]
    Repeated(String),
    /// More than fits in a [`FlowId`].
    #[error("key fields take {0} bits; at most 128 fit in a flow id")]
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

/// Most fields in a flow key (a flow id holds 128 bits; real keys use a handful of fields).
pub const MAX_KEY_FIELDS: usize = 12;

/// The fields that identify a flow. Fixed-size, so configurations holding one stay `Copy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeySpec {
    fields: [FieldId; MAX_KEY_FIELDS],
    len: u8,
}

impl KeySpec {
    /// The IPv4 5-tuple: addresses, protocol, transport ports (the papers' flow key).
    pub fn five_tuple() -> KeySpec {
        KeySpec::of(&FIVE_TUPLE)
    }

    fn of(fields: &[FieldId]) -> KeySpec {
        let mut spec = KeySpec { fields: [FieldId(0); MAX_KEY_FIELDS], len: fields.len() as u8 };
        spec.fields[..fields.len()].copy_from_slice(fields);
        spec
    }

    /// Parses `5tuple` or a comma-separated list of ovs-ofctl field names.
    pub fn parse(text: &str) -> Result<KeySpec, KeySpecError> {
        if text.trim() == "5tuple" {
            return Ok(KeySpec::five_tuple());
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
        if bits > 128 {
            return Err(KeySpecError::TooWide(bits));
        }
        if fields.len() > MAX_KEY_FIELDS {
            return Err(KeySpecError::TooMany(fields.len()));
        }
        Ok(KeySpec::of(&fields))
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
        mask
    }

    /// The id of a packet's flow, or `None` if the packet lacks a key field (a field whose
    /// prerequisite fails, e.g. `nw_src` of an ARP packet). Transport ports of a packet
    /// without them (ICMP, fragments) count as 0, as flow keys usually treat them.
    #[inline]
    pub fn flow_id(&self, key: &FlowKey) -> Option<FlowId> {
        if self.fields() == FIVE_TUPLE {
            return five_tuple_id(key);
        }
        self.general_flow_id(key)
    }

    /// [`flow_id`](Self::flow_id) for any fields: each looked up, its prerequisite checked.
    fn general_flow_id(&self, key: &FlowKey) -> Option<FlowId> {
        let mut v = 0u128;
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
            v = v << def.bits | value;
        }
        Some(FlowId::from_u128(v))
    }

    /// The fields of a flow id with their values in ovs-ofctl notation.
    pub fn fields_of(&self, flow: FlowId) -> Vec<(&'static str, String)> {
        let mut v = flow.as_u128();
        let mut out: Vec<(&'static str, String)> = self
            .fields()
            .iter()
            .rev()
            .map(|&f| {
                let bits = f.def().bits as u32;
                let value = if bits >= 128 { v } else { v & ((1u128 << bits) - 1) };
                v = v.checked_shr(bits).unwrap_or(0);
                (f.def().name, format_value(f, value))
            })
            .collect();
        out.reverse();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openflow::parse_packet;

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
        let mut state = 0x1234_5678_9abc_def1u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
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
        assert_eq!(KeySpec::parse("ipv6_src,ipv6_dst"), Err(KeySpecError::TooWide(256)));
        assert!(KeySpec::parse("ipv6_src").is_ok());
    }
}
