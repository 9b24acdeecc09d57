//! `.hyf` columnar traces against their sources: every capture of tcpdump's test suite
//! (`tests/data/pcap-corpus`: real protocols and real damage, pcap and pcapng, cut and
//! snapshot-length captures) and generated gateway traffic read back packet for packet as the
//! source reads, with the same malformed and snapshot-length counts.

use std::path::{Path, PathBuf};

use hyflow::experiment::topk::{topk, TopkConfig, TopkReport, TopkSummary};
use hyflow::experiment::unwatched;
use hyflow::input::{write_columnar, Converted, Input, InputPacket, PacketSource};
use hyflow::measure::{Algo, DetectorConfig, KeySpec, Span};
use hyflow::workload::gateway::GatewayConfig;

fn corpus() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/pcap-corpus/captures")
}

fn temp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("hyflow-columnar-test-{}-{name}.hyf", std::process::id()))
}

/// Reads `a` and `b` to their ends, asserting equal packets (flow indices aside: `b`'s are
/// the trace's, in order of first appearance); returns the packets read.
fn same_packets(what: &str, a: &mut PacketSource, b: &mut PacketSource) -> u64 {
    let mut first_seen = std::collections::HashMap::new();
    loop {
        let x: Option<InputPacket> = a.next_packet().unwrap_or_else(|e| panic!("{what}: {e}")).copied();
        let y: Option<InputPacket> =
            b.next_packet().unwrap_or_else(|e| panic!("{what} (.hyf): {e}")).copied();
        let (Some(x), Some(y)) = (x, y) else {
            assert!(x.is_none() && y.is_none(), "{what}: one ends first");
            break;
        };
        let n = a.packets();
        assert_eq!(
            (x.ts_ns, x.key, x.bytes, x.malformed, x.burst),
            (y.ts_ns, y.key, y.bytes, y.malformed, y.burst),
            "{what}: packet {n}"
        );
        let next = first_seen.len() as u32;
        assert_eq!(y.flow, Some(*first_seen.entry(x.key).or_insert(next)), "{what}: packet {n}'s flow index");
    }
    assert_eq!(a.first_ts_ns(), b.first_ts_ns(), "{what}: first time");
    assert_eq!(a.malformed(), b.malformed(), "{what}: malformed counts");
    assert_eq!(a.snaplen_truncated(), b.snaplen_truncated(), "{what}: snapshot-length cuts");
    a.packets()
}

fn capture(path: &Path) -> Input {
    Input::Capture { path: path.to_path_buf(), in_port: None, strict: false }
}

/// Each corpus capture hyflow reads, converted to the `.hyf` at `out` (rewritten for each,
/// as the iteration reaches it): its name, its path and what the conversion wrote. A capture
/// of a link type hyflow cannot read fails both ways alike, and is skipped.
fn corpus_as_hyf(out: &Path) -> impl Iterator<Item = (String, PathBuf, Converted)> + '_ {
    let mut names: Vec<_> = std::fs::read_dir(corpus()).unwrap().map(|e| e.unwrap().path()).collect();
    names.sort();
    names.into_iter().filter_map(move |path| {
        let done = write_columnar(&mut PacketSource::open(&capture(&path), &[]).ok()?, out).ok()?;
        Some((path.file_name().unwrap().to_string_lossy().to_string(), path, done))
    })
}

#[test]
fn every_corpus_capture_reads_back_from_its_hyf() {
    let out = temp("corpus");
    let (mut captures, mut packets) = (0, 0);
    for (what, path, done) in corpus_as_hyf(&out) {
        let mut a = PacketSource::open(&capture(&path), &[]).unwrap();
        let mut b = PacketSource::open(&capture(&out), &[]).unwrap();
        assert_eq!(same_packets(&what, &mut a, &mut b), done.packets, "{what}");
        captures += 1;
        packets += done.packets;
    }
    let _ = std::fs::remove_file(&out);
    // The suite's captures hyflow reads (a few are of link types it does not parse).
    assert!(captures >= 480 && packets >= 9_000, "{captures} captures, {packets} packets compared");
}

/// Every report and the summary of a top-k run over `input` under `key`.
fn topk_run(input: &Input, key: &str) -> (Vec<TopkReport>, TopkSummary) {
    let key = KeySpec::parse(key).unwrap();
    let detector =
        DetectorConfig { k: 5, memory: 4096, blocks: 3, sample: 1.0, seed: 1, key_bits: key.bits() };
    let config = TopkConfig { algo: Algo::FastKeeperBitmap, detector, key, block: Span::Packets(4) };
    let mut reports = Vec::new();
    let summary = topk(input, &config, &mut unwatched, &mut |r| {
        reports.push(r.clone());
        Ok(())
    })
    .unwrap();
    // A `.hyf` keeps a cut capture's complete packets, not where the cut was.
    (reports, TopkSummary { capture_cut: None, ..summary })
}

/// `topk` from a `.hyf` extracts a flow's id once per flow number and reads no key for the
/// flow's later packets: it must report what a read of the capture, parsing every packet,
/// reports — malformed packets, packets without the key's fields and IPv6 ones among them.
#[test]
fn topk_from_a_hyf_reports_what_its_capture_gives() {
    let out = temp("topk-corpus");
    let (mut captures, mut repeated, mut ipv6) = (0, 0, 0);
    for (what, path, done) in corpus_as_hyf(&out) {
        for (key, in_port) in [("5tuple", None), ("5tuple46", None), ("5tuple", Some(7))] {
            let on = |path: &Path| Input::Capture { path: path.to_path_buf(), in_port, strict: false };
            let (from_capture, from_hyf) = (topk_run(&on(&path), key), topk_run(&on(&out), key));
            assert_eq!(from_capture, from_hyf, "{what}, {key}, port {in_port:?}");
            if key == "5tuple" && in_port.is_none() {
                ipv6 += from_capture.1.keyless_ipv6;
            }
        }
        captures += 1;
        repeated += done.packets - done.flows;
    }
    let _ = std::fs::remove_file(&out);
    assert!(
        captures >= 480 && repeated >= 5_000 && ipv6 >= 300,
        "{captures} captures, {repeated} packets of a flow seen before, {ipv6} IPv6 ones without the key"
    );
}

#[test]
fn gateway_traffic_reads_back_with_its_bursts_and_flows() {
    let config = GatewayConfig {
        flows: 2_000,
        rate: 100_000.0,
        duration_ns: 2_000_000_000,
        ..GatewayConfig::default()
    };
    let out = temp("gateway");
    let done = write_columnar(&mut PacketSource::open(&Input::Gateway(config), &[]).unwrap(), &out).unwrap();
    let mut a = PacketSource::open(&Input::Gateway(config), &[]).unwrap();
    let mut b = PacketSource::open(&capture(&out), &[]).unwrap();
    let mut bursty = 0;
    loop {
        let (x, y) = (a.next_packet().unwrap().copied(), b.next_packet().unwrap().copied());
        let (Some(x), Some(y)) = (x, y) else { break };
        assert_eq!((x.ts_ns, x.key, x.bytes, x.burst), (y.ts_ns, y.key, y.bytes, y.burst));
        bursty += u64::from(y.burst.is_some());
    }
    assert_eq!(a.packets(), done.packets);
    assert!(done.packets > 150_000 && bursty > 0, "{} packets, {bursty} in bursts", done.packets);
    // Read on another port, every key says so.
    let on_port = Input::Capture { path: out.clone(), in_port: Some(9), strict: false };
    let mut c = PacketSource::open(&on_port, &[]).unwrap();
    assert_eq!(c.next_packet().unwrap().unwrap().key.in_port(), 9);
    let _ = std::fs::remove_file(&out);
}
