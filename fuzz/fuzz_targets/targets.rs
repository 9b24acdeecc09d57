//! What each fuzz target does with its input, shared with `crates/hyflow/tests/fuzz_corpus.rs`,
//! which replays the committed corpus on stable Rust as ordinary tests. Every function must
//! return (an error is fine) for any input: a panic is a crash.

use std::io::Cursor;

use hyflow::capture::TraceReader;
use hyflow::openflow::group::parse_groups;
use hyflow::openflow::update::parse_updates;
use hyflow::openflow::{parse_flows, parse_packet};
use hyflow::packet::format::format_flow;
use hyflow::packet::{parse_captured, parse_frame, FlowKey, LinkKind};

/// A pcap or pcapng file: every packet read, then parsed as its link type says.
pub fn trace_reader(data: &[u8]) {
    let Ok(mut reader) = TraceReader::new(Cursor::new(data), "fuzz".into()) else { return };
    let mut key = FlowKey::default();
    while let Ok(Some(p)) = reader.next_packet() {
        if let Some(link) = p.link.frame_kind() {
            let _ = parse_captured(p.data, p.orig_len, link, 1, &mut key);
        }
    }
}

/// A frame of every link type, whole and as a capture cut from a longer wire length (the
/// first two bytes choose how many bytes were cut), then printed.
pub fn frame_parser(data: &[u8]) {
    let (cut, frame) = match data {
        [a, b, rest @ ..] => (u16::from_be_bytes([*a, *b]) as u32, rest),
        _ => (0, data),
    };
    let mut key = FlowKey::default();
    for link in [LinkKind::Ethernet, LinkKind::RawIp, LinkKind::LinuxSll, LinkKind::LinuxSll2, LinkKind::Null]
    {
        let _ = parse_frame(frame, link, 1, &mut key);
        let _ = format_flow(&key);
        let _ = parse_captured(frame, frame.len() as u32 + cut, link, 1, &mut key);
        let _ = format_flow(&key);
    }
}

/// A flow file.
pub fn flow_file(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = parse_flows(text, "fuzz");
    }
}

/// A group file, then flows naming its groups.
pub fn group_file(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        let mut names = hyflow::openflow::Names::new();
        if parse_groups(text, "fuzz", &mut names).is_ok() {
            let _ = hyflow::openflow::parse_flows_named("actions=group:1", "fuzz", &mut names);
        }
    }
}

/// An updates file.
pub fn updates_file(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = parse_updates(text, "fuzz");
    }
}

/// A packet given as a match-style string.
pub fn packet_string(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = parse_packet(text);
    }
}
