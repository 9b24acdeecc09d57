//! Flow extraction against Open vSwitch on real captures: tcpdump's test suite (509 captures,
//! 9,193 packets of real protocols and real damage, `tests/data/pcap-corpus`), with the flow
//! `ovs-ofctl parse-pcap` (OVS 4.0.90) printed for each packet.
//!
//! Every packet OVS read must print, field for field, what OVS printed, except the fields
//! hyflow does not model (MPLS labels, NSH, IPv6 neighbour-discovery options); a packet OVS
//! extracted no flow from (a cooked frame of an unsupported device type, recorded as a hex
//! dump) must give an empty flow. Frames OVS could not read at all (over 64 KiB) are only
//! required to parse.

use std::collections::BTreeSet;
use std::path::PathBuf;

use hyflow::capture::TraceReader;
use hyflow::packet::format::format_flow;
use hyflow::packet::{parse_frame, FlowKey, Malformed};

fn corpus() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/pcap-corpus")
}

/// Field names OVS prints that hyflow's flow key does not hold.
fn unmodelled(token: &str) -> bool {
    let name = token.split('=').next().unwrap_or_default();
    name.starts_with("mpls_") || name.starts_with("nsh_") || name.starts_with("nd_")
}

fn tokens(flow: &str) -> BTreeSet<String> {
    flow.split(',').filter(|t| !t.is_empty() && !unmodelled(t)).map(str::to_string).collect()
}

#[test]
fn every_packet_extracts_as_open_vswitch_does() {
    let text = std::fs::read_to_string(corpus().join("expected.json")).unwrap();
    let expected: serde_json::Map<String, serde_json::Value> = serde_json::from_str(&text).unwrap();
    let (mut compared, mut no_flow, mut unread, mut packets) = (0, 0, 0, 0);
    let mut disagreements = Vec::new();
    for (name, packets_expected) in &expected {
        let packets_expected = packets_expected.as_array().unwrap();
        let mut reader = TraceReader::open(&corpus().join("captures").join(name)).unwrap();
        let mut key = FlowKey::default();
        let mut i = 0;
        while let Some(p) = reader.next_packet().unwrap_or_else(|e| panic!("{name}: {e}")) {
            let link = p.link.frame_kind().unwrap_or_else(|| panic!("{name}: link type {:?}", p.link));
            let parsed = parse_frame(p.data, link, 1, &mut key);
            let got = if parsed == Err(Malformed::UnsupportedLinkLayer) {
                String::new()
            } else {
                format_flow(&key)
            };
            let want = &packets_expected[i];
            i += 1;
            let Some(flow) = want.get("flow").and_then(|f| f.as_str()) else {
                unread += 1;
                continue;
            };
            let mut want_tokens = tokens(flow);
            if let Some(tun) = want.get("tun_id").and_then(|t| t.as_u64()) {
                want_tokens.insert(format!("tun_id={tun:#x}"));
            }
            if flow.starts_with("00000000 ") {
                // OVS printed a hex dump instead of a flow.
                no_flow += 1;
                want_tokens.clear();
            } else {
                compared += 1;
            }
            let got_tokens = tokens(&got);
            if got_tokens != want_tokens {
                disagreements.push(format!(
                    "{name} #{}: only OVS {:?}, only hyflow {:?}",
                    i - 1,
                    want_tokens.difference(&got_tokens).collect::<Vec<_>>(),
                    got_tokens.difference(&want_tokens).collect::<Vec<_>>()
                ));
            }
        }
        assert_eq!(i, packets_expected.len(), "{name}: packets read");
        packets += i;
    }
    assert!(
        disagreements.is_empty(),
        "{} disagreements:\n{}",
        disagreements.len(),
        disagreements[..disagreements.len().min(20)].join("\n")
    );
    // Every packet of the corpus was checked: these are the corpus's own counts.
    assert_eq!((expected.len(), packets), (509, 9_193));
    assert_eq!((compared, no_flow, unread), (8_860, 11, 322));
}
