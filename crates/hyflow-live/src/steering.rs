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

/// The name `--steer` takes for FlexNIC's key-based steering of memcached requests.
pub const MEMCACHED_KEY: &str = "memcached.key";
/// The name `--steer` takes for FlexStorm's demultiplexing of tuples by worker.
pub const STORM_WORKER: &str = "storm.worker";
/// What frames other than memcached requests and tuples are steered by when application
/// names are the only ones given: the addresses and ports (RSS's fields).
const DEFAULT_WITH_KEY: &str = "nw_src,nw_dst,tp_src,tp_dst";

/// The fields frames are steered by, and over how many cores.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Steering {
    /// The names, as given.
    pub fields: Vec<String>,
    /// The cores a receive queue's frames are spread over.
    pub cores: u32,
    /// The bits hashed, as the program's key words ([`XDP_KEY_WORDS`]' order).
    pub mask: [u64; XDP_KEY_WORDS.len()],
    /// With `memcached.key`: memcached's UDP port, whose requests are steered by the hash of
    /// their key (the program parses the ASCII and binary protocols) instead of `mask`.
    pub memcached_port: Option<u16>,
    /// With `storm.worker`: FlexStorm's DCCP port, whose tuples go to core `worker % cores`
    /// instead of by `mask`.
    pub storm_port: Option<u16>,
}

impl Steering {
    /// Steering by `fields` (`nw_dst,tp_dst`) over `cores` cores. Only fields the XDP
    /// program's parser computes can be hashed: the Ethernet, VLAN, IPv4, ARP and transport
    /// fields and `in_port` (not metadata, registers, connection tracking or IPv6 fields).
    ///
    /// `memcached.key` among them steers memcached requests (UDP datagrams to port 11211) by
    /// their key, as FlexKVS's NIC does (the request's first key, hashed as `hyflow kvs` hashes
    /// it); `storm.worker` steers FlexStorm tuples (DCCP-Data to port 4444) by their worker;
    /// every other frame goes by the other fields (by addresses and ports if none).
    pub fn new(fields: &str, cores: u32) -> Result<Steering> {
        let mut mask = FlowMask::default();
        let mut names = Vec::new();
        let named = |app: &str| fields.split(',').any(|n| n.trim() == app);
        let (by_key, by_worker) = (named(MEMCACHED_KEY), named(STORM_WORKER));
        let others: Vec<&str> =
            fields.split(',').map(str::trim).filter(|n| *n != MEMCACHED_KEY && *n != STORM_WORKER).collect();
        let others = if (by_key || by_worker) && others.iter().all(|n| n.is_empty()) {
            DEFAULT_WITH_KEY.split(',').collect()
        } else {
            others
        };
        for (app, on) in [(MEMCACHED_KEY, by_key), (STORM_WORKER, by_worker)] {
            if on {
                names.push(app.to_string());
            }
        }
        for name in others {
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
        Ok(Steering {
            fields: names,
            cores,
            mask: XDP_KEY_WORDS.map(|w| mask.words[w]),
            memcached_port: by_key.then_some(hyflow::kvs::memcached::PORT),
            storm_port: by_worker.then_some(crate::storm_args::PORT),
        })
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

    #[test]
    fn memcached_keys_steer_requests_and_the_rest_by_fields() {
        let k = Steering::new("memcached.key", 2).unwrap();
        assert_eq!(k.memcached_port, Some(11211));
        // Other frames by addresses and ports.
        assert_eq!((k.mask[4], k.mask[8]), (u64::MAX, 0xffff_ffff_0000_0000));
        assert_eq!(k.fields, ["memcached.key", "nw_src", "nw_dst", "tp_src", "tp_dst"]);
        let d = Steering::new("nw_dst,memcached.key", 2).unwrap();
        assert_eq!((d.mask[4], d.mask[8]), (0xffff_ffff, 0));
        assert_eq!(Steering::new("nw_dst", 2).unwrap().memcached_port, None);
        assert!(Steering::new("memcached.key,,nw_dst", 2).is_err());
    }

    #[test]
    fn storm_workers_steer_tuples_alone_or_beside_keys() {
        let w = Steering::new("storm.worker", 2).unwrap();
        assert_eq!((w.storm_port, w.memcached_port), (Some(4444), None));
        assert_eq!(w.fields, ["storm.worker", "nw_src", "nw_dst", "tp_src", "tp_dst"]);
        let both = Steering::new("storm.worker,memcached.key,nw_dst", 3).unwrap();
        assert_eq!((both.storm_port, both.memcached_port), (Some(4444), Some(11211)));
        assert_eq!(both.fields, ["memcached.key", "storm.worker", "nw_dst"]);
        assert!(Steering::new("storm.worker", 1).is_err());
        assert!(Steering::new("storm.worker,,nw_dst", 2).is_err());
    }
}
