//! The fixed-layout flow key and its mask.
//!
//! A key is `KEY_WORDS` 64-bit words; every field lives at a fixed place (see
//! [`field`](super::field)). Matching, masking and hashing are word-wise, so the classifier and
//! the caches never branch on which fields a rule uses.

use super::field::{id, proto, FieldDef, FieldId, Prereq, KEY_WORDS};

/// Header and metadata state of one packet at one point in the pipeline.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct FlowKey {
    /// Raw words; use the field accessors unless doing word-wise work.
    pub words: [u64; KEY_WORDS],
}

/// Which bits of a [`FlowKey`] matter: 1 = exact, 0 = wildcard.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct FlowMask {
    /// Raw words, same layout as [`FlowKey::words`].
    pub words: [u64; KEY_WORDS],
}

#[inline]
fn word_mask(bits: u8) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

#[inline]
fn read(words: &[u64; KEY_WORDS], f: &FieldDef) -> u128 {
    if f.bits == 128 {
        ((words[f.word as usize] as u128) << 64) | words[f.word as usize + 1] as u128
    } else {
        ((words[f.word as usize] >> f.shift) & word_mask(f.bits)) as u128
    }
}

#[inline]
fn write_masked(words: &mut [u64; KEY_WORDS], f: &FieldDef, value: u128, mask: u128) {
    if f.bits == 128 {
        let (w0, w1) = (f.word as usize, f.word as usize + 1);
        let (vh, vl, mh, ml) = ((value >> 64) as u64, value as u64, (mask >> 64) as u64, mask as u64);
        words[w0] = (words[w0] & !mh) | (vh & mh);
        words[w1] = (words[w1] & !ml) | (vl & ml);
    } else {
        let m = ((mask as u64) & word_mask(f.bits)) << f.shift;
        let v = ((value as u64) << f.shift) & m;
        let w = &mut words[f.word as usize];
        *w = (*w & !m) | v;
    }
}

macro_rules! accessors {
    ($($get:ident / $set:ident : $ty:ty = $field:expr),* $(,)?) => {
        impl FlowKey {
            $(
                #[doc = concat!("The `", stringify!($get), "` field.")]
                #[inline]
                pub fn $get(&self) -> $ty {
                    self.get($field) as $ty
                }
                #[doc = concat!("Sets the `", stringify!($get), "` field.")]
                #[inline]
                pub fn $set(&mut self, v: $ty) {
                    self.set($field, v as u128)
                }
            )*
        }
    };
}

accessors! {
    in_port / set_in_port: u32 = id::IN_PORT,
    recirc_id / set_recirc_id: u32 = id::RECIRC_ID,
    ct_state / set_ct_state: u8 = id::CT_STATE,
    dl_type / set_dl_type: u16 = id::DL_TYPE,
    dl_src / set_dl_src: u64 = id::DL_SRC,
    dl_dst / set_dl_dst: u64 = id::DL_DST,
    vlan_tci / set_vlan_tci: u16 = id::VLAN_TCI,
    vlan_tpid / set_vlan_tpid: u16 = id::VLAN_TPID,
    vlan_tci2 / set_vlan_tci2: u16 = id::VLAN_TCI2,
    vlan_tpid2 / set_vlan_tpid2: u16 = id::VLAN_TPID2,
    nw_src / set_nw_src: u32 = id::NW_SRC,
    nw_dst / set_nw_dst: u32 = id::NW_DST,
    nw_proto / set_nw_proto: u8 = id::NW_PROTO,
    nw_tos / set_nw_tos: u8 = id::NW_TOS,
    nw_ttl / set_nw_ttl: u8 = id::NW_TTL,
    nw_frag / set_nw_frag: u8 = id::NW_FRAG,
    tp_src / set_tp_src: u16 = id::TP_SRC,
    tp_dst / set_tp_dst: u16 = id::TP_DST,
    tun_id / set_tun_id: u64 = id::TUN_ID,
}

impl FlowKey {
    /// Value of a field.
    #[inline]
    pub fn get(&self, f: FieldId) -> u128 {
        read(&self.words, f.def())
    }

    /// Overwrites a field.
    #[inline]
    pub fn set(&mut self, f: FieldId, value: u128) {
        write_masked(&mut self.words, f.def(), value, u128::MAX)
    }

    /// Overwrites the bits of a field selected by `mask`.
    #[inline]
    pub(crate) fn set_masked(&mut self, f: FieldId, value: u128, mask: u128) {
        write_masked(&mut self.words, f.def(), value, mask)
    }

    /// The key with every wildcarded bit cleared.
    #[inline]
    pub fn masked(&self, mask: &FlowMask) -> FlowKey {
        let mut out = *self;
        for (w, m) in out.words.iter_mut().zip(mask.words.iter()) {
            *w &= m;
        }
        out
    }

    /// Whether `self` agrees with `value` on every bit of `mask` (`value` need not be masked).
    #[inline]
    pub fn matches(&self, value: &FlowKey, mask: &FlowMask) -> bool {
        self.words.iter().zip(value.words.iter()).zip(mask.words.iter()).all(|((a, b), m)| (a ^ b) & m == 0)
    }

    /// Whether two keys carry the same packet headers (metadata and registers ignored).
    pub fn same_packet(&self, other: &FlowKey) -> bool {
        self.matches(other, FlowMask::packet_state())
    }

    /// Whether the packet carries at least one VLAN tag.
    #[inline]
    pub fn has_vlan(&self) -> bool {
        self.vlan_tci() & proto::VLAN_CFI != 0
    }

    /// IPv4 or IPv6.
    #[inline]
    pub fn is_ip(&self) -> bool {
        matches!(self.dl_type(), proto::ETH_IPV4 | proto::ETH_IPV6)
    }

    /// Leaves the connection tracker's view: `ct_state` and every other `ct_*` field zero
    /// (OVS `flow_clear_conntrack`).
    pub(crate) fn clear_conntrack(&mut self) {
        for &f in id::CONNTRACK {
            self.set(f, 0);
        }
    }

    /// Whether a field exists in this packet (OVS `mf_are_prereqs_ok`).
    pub(crate) fn prereq_ok(&self, p: Prereq) -> bool {
        if p == Prereq::Ct {
            return self.get(id::CT_STATE) as u8 & super::ct_state::VALID_BITS != 0;
        }
        let later = self.nw_frag() & proto::FRAG_LATER != 0;
        p.holds(Some(self.dl_type()), Some(self.nw_proto()), Some(self.has_vlan()), later)
    }
}

impl FlowMask {
    /// Mask with every bit wildcarded.
    pub const CATCHALL: FlowMask = FlowMask { words: [0; KEY_WORDS] };

    /// Every bit of packet header state (no metadata, no registers): what leaves the switch.
    pub fn packet_state() -> &'static FlowMask {
        static MASK: std::sync::OnceLock<FlowMask> = std::sync::OnceLock::new();
        MASK.get_or_init(|| {
            let mut m = FlowMask::CATCHALL;
            for (i, f) in super::field::FIELDS.iter().enumerate() {
                if f.packet {
                    m.unwildcard_all(FieldId(i as u8));
                }
            }
            m
        })
    }

    /// What leaves the switch on a port: the packet's headers, without the datapath's own
    /// metadata (`recirc_id` and the connection tracker's `ct_*` fields, which megaflows match
    /// but no packet carries out).
    pub fn leaving() -> &'static FlowMask {
        static MASK: std::sync::OnceLock<FlowMask> = std::sync::OnceLock::new();
        MASK.get_or_init(|| {
            let mut m = *FlowMask::packet_state();
            for f in id::DATAPATH {
                m.set(f, 0);
            }
            m
        })
    }

    /// Bitwise AND with another mask.
    #[inline]
    pub fn intersect_with(&mut self, other: &FlowMask) {
        for (a, b) in self.words.iter_mut().zip(other.words.iter()) {
            *a &= b;
        }
    }

    /// The mask bits of one field.
    #[inline]
    pub fn get(&self, f: FieldId) -> u128 {
        read(&self.words, f.def())
    }

    /// Makes the bits `mask` of field `f` exact (OR, never clears).
    #[inline]
    pub(crate) fn unwildcard(&mut self, f: FieldId, mask: u128) {
        let def = f.def();
        let cur = read(&self.words, def);
        write_masked(&mut self.words, def, cur | mask, u128::MAX);
    }

    /// Makes all bits of field `f` exact.
    #[inline]
    pub fn unwildcard_all(&mut self, f: FieldId) {
        self.unwildcard(f, u128::MAX)
    }

    /// Overwrites the mask bits of a field.
    #[inline]
    pub fn set(&mut self, f: FieldId, mask: u128) {
        write_masked(&mut self.words, f.def(), mask, u128::MAX)
    }

    /// Bitwise OR with another mask.
    #[inline]
    pub fn union_with(&mut self, other: &FlowMask) {
        for (a, b) in self.words.iter_mut().zip(other.words.iter()) {
            *a |= b;
        }
    }

    /// Wildcards every bit exact in `other` (AND NOT).
    #[inline]
    pub fn subtract(&mut self, other: &FlowMask) {
        for (a, b) in self.words.iter_mut().zip(other.words.iter()) {
            *a &= !b;
        }
    }

    /// Number of exact bits.
    pub fn exact_bits(&self) -> u32 {
        self.words.iter().map(|w| w.count_ones()).sum()
    }

    /// Whether every exact bit of `self` is exact in `other` too.
    pub fn is_subset_of(&self, other: &FlowMask) -> bool {
        self.words.iter().zip(other.words.iter()).all(|(a, b)| a & !b == 0)
    }
}

impl std::fmt::Debug for FlowKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "FlowKey({})", super::format::format_packet(self))
    }
}

impl std::fmt::Debug for FlowMask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "FlowMask(")?;
        for (i, w) in self.words.iter().enumerate().filter(|(_, w)| **w != 0) {
            write!(f, "w{i}={w:#x} ")?;
        }
        write!(f, ")")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_round_trip_without_disturbing_neighbours() {
        let mut k = FlowKey::default();
        k.set_dl_dst(0x0102_0304_0506);
        k.set_dl_type(0x0800);
        k.set(id::IPV6_SRC, 0x2001_0db8_0000_0000_0000_0000_0000_0001);
        k.set_tp_src(80);
        k.set_tp_dst(443);
        k.set(id::reg(3), 0xdead_beef);
        assert_eq!(k.dl_dst(), 0x0102_0304_0506);
        assert_eq!(k.dl_type(), 0x0800);
        assert_eq!(k.get(id::IPV6_SRC), 0x2001_0db8_0000_0000_0000_0000_0000_0001);
        assert_eq!((k.tp_src(), k.tp_dst()), (80, 443));
        assert_eq!(k.get(id::reg(3)), 0xdead_beef);
        assert_eq!(k.get(id::reg(2)), 0);
        k.set_masked(id::TP_DST, 0xffff, 0x00f0);
        assert_eq!(k.tp_dst(), 443 | 0xf0);
        assert_eq!(k.get(id::ICMP_TYPE), 80, "icmp_type views tp_src's low byte");
    }

    #[test]
    fn masks_unwildcard_and_count() {
        let mut m = FlowMask::CATCHALL;
        m.unwildcard(id::NW_SRC, 0xff00_0000);
        m.unwildcard_all(id::DL_TYPE);
        assert_eq!(m.exact_bits(), 24);
        assert_eq!(m.get(id::NW_SRC), 0xff00_0000);
        let mut k = FlowKey::default();
        k.set_nw_src(0x0a01_0203);
        let v = k.masked(&m);
        assert_eq!(v.nw_src(), 0x0a00_0000);
        assert!(k.matches(&v, &m));
    }
}
