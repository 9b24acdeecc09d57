//! Steering (`--steer FIELDS`): which core's socket gets a frame the NIC tier hands to
//! software, chosen by hashing the named fields in the XDP program, as FlexNIC §2 steers a
//! flow to a core by a hash of fields the NIC parses (and RSS does with a fixed 5-tuple).
//! Every frame of a flow lands on one core, so a flow's frames keep their order and its
//! state stays warm in one core's caches.

use anyhow::{anyhow, bail, Result};

use hyflow::nic::capability::XDP_KEY_WORDS;
use hyflow::packet::field::Prereq;
use hyflow::packet::key::FlowMask;
use hyflow::packet::FieldId;

/// The fields frames are steered by, and over how many cores.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Steering {
    /// The names, as given.
    pub fields: Vec<String>,
    /// The cores a receive queue's frames are spread over.
    pub cores: u32,
    /// The bits hashed, as the program's key words ([`XDP_KEY_WORDS`]' order).
    pub mask: [u64; XDP_KEY_WORDS.len()],
}

impl Steering {
    /// Steering by `fields` (`nw_dst,tp_dst`) over `cores` cores. Only fields the XDP
    /// program's parser computes can be hashed: the Ethernet, VLAN, IPv4, ARP and transport
    /// fields and `in_port` (not metadata, registers, connection tracking or IPv6 fields).
    pub fn new(fields: &str, cores: u32) -> Result<Steering> {
        let mut mask = FlowMask::default();
        let mut names = Vec::new();
        for name in fields.split(',').map(str::trim) {
            if name.is_empty() {
                bail!("--steer {fields}: a comma-separated list of fields, e.g. nw_dst,tp_dst");
            }
            let field = FieldId::from_name(name)
                .ok_or_else(|| anyhow!("--steer: no field {name} (field names as ovs-ofctl writes them)"))?;
            let def = field.def();
            let words = if def.bits == 128 { [def.word, def.word + 1] } else { [def.word, def.word] };
            let parsed = words.iter().all(|&w| XDP_KEY_WORDS.contains(&(w as usize)));
            // IPv6's fields share words with IPv4's, but the parser hands IPv6 frames over
            // whole: they would hash as zeros.
            let ipv6 = matches!(def.prereq, Prereq::Ipv6 | Prereq::Icmpv6);
            if !parsed || !def.packet || def.prereq == Prereq::Ct || ipv6 {
                bail!(
                    "--steer: {name} is not a field the XDP program parses (it hashes Ethernet, VLAN, \
                     IPv4, ARP and TCP/UDP/SCTP/ICMP fields, and in_port)"
                );
            }
            mask.unwildcard_all(field);
            names.push(name.to_string());
        }
        if cores < 2 {
            bail!("--steer spreads frames over cores: it needs --cores 2 or more");
        }
        Ok(Steering { fields: names, cores, mask: XDP_KEY_WORDS.map(|w| mask.words[w]) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn takes_the_parsers_fields_and_refuses_the_rest() {
        let s = Steering::new("nw_src,nw_dst,nw_proto,tp_src,tp_dst", 2).unwrap();
        assert_eq!(s.fields.len(), 5);
        // nw_src·nw_dst fill word 4, tp_src·tp_dst the high half of word 8 (not ct_tp_*).
        assert_eq!(s.mask[4], u64::MAX);
        assert_eq!(s.mask[8], 0xffff_ffff_0000_0000);
        assert_eq!(s.mask[0], 0);
        let p = Steering::new("in_port", 3).unwrap();
        assert_eq!(p.mask[0], 0xffff_ffff_0000_0000);
        for bad in [
            "reg0",
            "ipv6_dst",
            "ipv6_label",
            "icmpv6_type",
            "ct_tp_src",
            "tun_id",
            "metadata",
            "nope",
            "nw_dst,,tp_dst",
            "",
        ] {
            assert!(Steering::new(bad, 2).is_err(), "{bad}");
        }
        assert!(Steering::new("nw_dst", 1).is_err());
    }
}
