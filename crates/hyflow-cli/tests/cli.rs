//! The `hyflow` binary end to end: outputs, and one clear message with a non-zero exit on
//! every kind of bad input.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use hyflow::capture::{LinkType, PcapWriter};

fn hyflow(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hyflow")).args(args).output().expect("hyflow runs")
}

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

/// A fresh file holding `contents`: every call gets its own directory, so tests running in
/// parallel never share a file even when they pick the same name.
fn tmp(name: &str, contents: &[u8]) -> PathBuf {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("hyflow-cli-test-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, contents).unwrap();
    p
}

/// `hyflow trace --flows FLOWS --pcap PCAP EXTRA...`.
fn trace_pcap(flows: &Path, pcap: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["trace", "--flows", flows.to_str().unwrap(), "--pcap", pcap.to_str().unwrap()];
    args.extend_from_slice(extra);
    hyflow(&args)
}

/// Asserts failure with exactly one line on stderr containing every `needle`.
fn fails_with(out: &Output, needles: &[&str]) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "should fail: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    for n in needles {
        assert!(err.contains(n), "stderr {err:?} should contain {n:?}");
    }
}

/// A TCP/IPv4 frame: 00:..:01 → 00:..:02, 10.1.0.1:40000 → 10.1.0.2:80.
fn tcp_frame() -> Vec<u8> {
    let mut f = vec![0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 1, 0x08, 0x00];
    f.extend_from_slice(&[0x45, 0, 0, 40, 0, 0, 0x40, 0, 64, 6, 0, 0, 10, 1, 0, 1, 10, 1, 0, 2]);
    f.extend_from_slice(&[0x9c, 0x40, 0, 80, 0, 0, 0, 0, 0, 0, 0, 0, 0x50, 0x02, 0xff, 0xff, 0, 0, 0, 0]);
    f
}

fn pcap_with(frames: &[Vec<u8>]) -> Vec<u8> {
    let mut w = PcapWriter::new(Vec::new(), "mem".into(), LinkType::Ethernet, true).unwrap();
    for (i, f) in frames.iter().enumerate() {
        w.write_packet(i as u64 * 1000, f).unwrap();
    }
    w.finish().unwrap()
}

/// A capture cut mid-record (tcpdump killed, a partial copy) still gives its report: replay,
/// sim and topk read every complete packet, warn once with the byte offset and the count, and
/// exit 0; `--strict` makes the cut an error. The same capture from standard input (`-`) or
/// gzip-compressed gives the same report.
#[test]
fn a_cut_capture_still_gives_its_report() {
    let whole = pcap_with(&vec![tcp_frame(); 40]);
    // The last record (16 + 54 bytes) cut 20 bytes in.
    let last = whole.len() - 70;
    let cut = tmp("cut.pcap", &whole[..last + 20]);
    let flows = examples().join("l2l3acl.flows");
    let (flows, cut_s) = (flows.to_str().unwrap(), cut.to_str().unwrap());
    let warning = format!("byte {last}: truncated packet record");
    for command in [
        vec!["replay", "--flows", flows, "--trace", cut_s],
        vec!["sim", "--flows", flows, "--trace", cut_s],
        vec!["topk", "--trace", cut_s, "--k", "3"],
        vec!["eval", "topk", "--trace", cut_s, "--k", "3", "--memory", "20000"],
        vec!["parse-pcap", cut_s],
    ] {
        let out = hyflow(&command);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{command:?}: {err}");
        let warnings: Vec<&str> = err.lines().filter(|l| l.contains("the capture ends there")).collect();
        assert_eq!(warnings.len(), 1, "{command:?}: one warning: {err}");
        assert!(warnings[0].contains(&warning) && warnings[0].contains("its 39 complete packets"), "{err}");
        let mut strict = command.clone();
        strict.push("--strict");
        fails_with(&hyflow(&strict), &[&warning]);
    }
    let json = |trace: &str, stdin: Option<&Path>| {
        let out_path = tmp("cut.json", b"");
        let args = ["replay", "--flows", flows, "--trace", trace, "--json", out_path.to_str().unwrap()];
        let mut command = Command::new(env!("CARGO_BIN_EXE_hyflow"));
        command.args(args);
        if let Some(input) = stdin {
            command.stdin(std::fs::File::open(input).unwrap());
        }
        let out = command.output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(&out_path).unwrap()).unwrap();
        v.as_object_mut().unwrap().remove("wall_clock");
        v
    };
    let from_file = json(cut_s, None);
    assert_eq!(from_file["packets"], 39);
    assert_eq!(from_file["capture_cut"]["packets"], 39);
    assert_eq!(from_file["capture_cut"]["offset"], last as u64);
    // Standard input: the same report, the cut named in standard input's bytes.
    assert_eq!(json("-", Some(&cut)), cut_naming(from_file.clone(), "standard input", cut_s));
    // Gzip-compressed: the same report.
    let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut z, &whole[..last + 20]).unwrap();
    let gz = tmp("cut.pcap.gz", &z.finish().unwrap());
    assert_eq!(json(gz.to_str().unwrap(), None), cut_naming(from_file.clone(), gz.to_str().unwrap(), cut_s));
    // Standard input is read once: a run that reads its input twice says so.
    let mut twice = Command::new(env!("CARGO_BIN_EXE_hyflow"));
    twice.args(["sim", "--flows", flows, "--trace", "-", "--rate", "1000"]);
    twice.stdin(std::fs::File::open(&cut).unwrap());
    fails_with(
        &twice.output().unwrap(),
        &["standard input: cannot open: it was read already", "give a file"],
    );
}

/// `report` with its cut's message naming the capture `name` instead of `was`.
fn cut_naming(mut report: serde_json::Value, name: &str, was: &str) -> serde_json::Value {
    let e = report["capture_cut"]["error"].as_str().unwrap().replace(was, name);
    report["capture_cut"]["error"] = e.into();
    report
}

/// Friction a newcomer met: a misspelt field names the one meant; `replay --warmup` past the
/// end and `sim --rate 1e300` are refused with their range; `sim --help` does not list the
/// `--nic`/`--no-nic` it refuses; `gen --help` names every generator.
#[test]
fn a_newcomers_slips_get_clear_answers() {
    let flows = tmp("slip.flows", b"priority=10,tcp,tp_dts=80 actions=drop\n");
    fails_with(
        &hyflow(&["replay", "--flows", flows.to_str().unwrap(), "--trace", "x.pcap"]),
        &["unknown field 'tp_dts' (did you mean 'tp_dst'?)"],
    );
    let flows = tmp("slip2.flows", b"priority=10,tpc actions=drop\n");
    fails_with(
        &hyflow(&["replay", "--flows", flows.to_str().unwrap(), "--trace", "x.pcap"]),
        &["unknown keyword 'tpc' (did you mean 'tcp'?)"],
    );
    let far = tmp("far.flows", b"priority=10,zzzzzz=1 actions=drop\n");
    let out = hyflow(&["replay", "--flows", far.to_str().unwrap(), "--trace", "x.pcap"]);
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("did you mean"),
        "no hint for a name nowhere near"
    );
    fails_with(
        &hyflow(&["replay", "--warmup", "5"]),
        &["--warmup 5 s is past the input's end (1.995 s of trace)"],
    );
    fails_with(
        &hyflow(&["sim", "--rate", "1e300"]),
        &["--rate must be a positive number of packets per second, at most 1e10"],
    );
    let help = String::from_utf8(hyflow(&["sim", "--help"]).stdout).unwrap();
    assert!(!help.contains("--no-nic") && !help.contains("--nic <"), "{help}");
    assert!(help.contains("--nic-entries"), "{help}");
    let help = String::from_utf8(hyflow(&["gen", "--help"]).stdout).unwrap();
    for generator in ["traffic", "conversations", "updates", "dynamic", "gateway", "pipeline"] {
        assert!(help.contains(generator), "{generator}: {help}");
    }
}

#[test]
fn traces_the_example_pipeline() {
    let flows = examples().join("l2l3acl.flows");
    let packets = examples().join("packets.txt");
    let out = hyflow(&["trace", "--flows", flows.to_str().unwrap(), "--packets", packets.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.matches("Megaflow: ").count(), 5);
    assert!(text.contains("Datapath actions: set(ipv4(tos=0x80/0xfc)),2"), "{text}");
    assert!(text.contains("TTL exceeded"), "{text}");
}

#[test]
fn json_lists_outputs_with_the_packet_as_it_leaves() {
    let flows = tmp(
        "json.flows",
        b"table=0,priority=10,tcp actions=mod_nw_dst:9.9.9.9,output:3,goto_table:1\n\
          table=1,tcp,nw_dst=9.9.9.9 actions=mod_tp_dst:8080,output:4\n",
    );
    let out = hyflow(&[
        "trace",
        "--flows",
        flows.to_str().unwrap(),
        "--json",
        "in_port=1,tcp,nw_src=10.0.0.1,nw_dst=10.0.0.2,tp_dst=80",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["drop"], false);
    let outs = v["outputs"].as_array().unwrap();
    assert_eq!(outs.len(), 2);
    assert_eq!(outs[0]["port"], 3);
    assert_eq!(outs[0]["packet"]["nw_dst"], "9.9.9.9");
    assert_eq!(outs[0]["packet"]["tp_dst"], "80");
    assert_eq!(outs[1]["packet"]["tp_dst"], "8080");
    assert_eq!(v["tables"].as_array().unwrap().len(), 2);
    let mf = v["megaflow"].as_str().unwrap();
    assert!(mf.starts_with("recirc_id=0,tcp,in_port=1,") && mf.contains("nw_dst=10.0.0.2"), "{mf}");
}

#[test]
fn packet_from_pcap() {
    let pcap = tmp("one.pcap", &pcap_with(&[tcp_frame(), tcp_frame()]));
    let flows = tmp("pcap.flows", b"tcp,tp_dst=80 actions=output:2\n");
    let out = trace_pcap(&flows, &pcap, &["--index", "1", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["outputs"][0]["port"], 2);
    assert_eq!(v["outputs"][0]["packet"]["in_port"], "1");
    assert_eq!(v["outputs"][0]["packet"]["nw_src"], "10.1.0.1");
    let out = trace_pcap(&flows, &pcap, &["--index", "2"]);
    fails_with(&out, &["has 2 packets", "index 2"]);
}

#[test]
fn bad_traces_name_the_byte_offset() {
    let flows = tmp("t.flows", b"actions=output:1\n");
    let full = pcap_with(&[tcp_frame()]);
    let truncated = tmp("truncated.pcap", &full[..full.len() - 10]);
    let out = trace_pcap(&flows, &truncated, &[]);
    fails_with(&out, &["truncated.pcap", "byte 24", "truncated"]);
    let garbage = tmp("garbage.pcap", b"this is not a capture file at all");
    let out = trace_pcap(&flows, &garbage, &[]);
    fails_with(&out, &["garbage.pcap", "byte 0", "not a pcap"]);
}

#[test]
fn bad_flow_files_name_line_column_and_token() {
    let cases: [(&str, &[u8], &[&str]); 4] = [
        (
            "unknown.flows",
            b"# ok\ntcp,tcp_dts=80 actions=drop\n",
            &["unknown.flows:2:5", "unknown field", "tcp_dts"],
        ),
        (
            "mask.flows",
            b"ip,nw_src=10.0.0.0/40 actions=drop\n",
            &["mask.flows:1:20", "prefix length 40", "'40'"],
        ),
        ("prereq.flows", b"ip,tp_dst=80 actions=drop\n", &["prereq.flows:1:4", "tp_dst requires nw_proto"]),
        (
            "goto.flows",
            b"table=2,actions=goto_table:1\n",
            &["goto.flows:1:17", "later table", "goto_table:1"],
        ),
    ];
    for (name, text, needles) in cases {
        let f = tmp(name, text);
        let out = hyflow(&["trace", "--flows", f.to_str().unwrap(), "in_port=1"]);
        fails_with(&out, needles);
    }
    let out = hyflow(&["trace", "--flows", "/nonexistent/x.flows", "in_port=1"]);
    fails_with(&out, &["/nonexistent/x.flows", "cannot read"]);
    let f = tmp("ok.flows", b"actions=drop\n");
    let out = hyflow(&["trace", "--flows", f.to_str().unwrap(), "in_port=1,nw_src=1.2.3.4"]);
    fails_with(&out, &["packet:", "requires dl_type"]);
}

#[test]
fn replay_generated_traffic_with_updates_matches_no_cache() {
    let flows = examples().join("l2l3acl.flows");
    let f = flows.to_str().unwrap();
    let pcap = tmp("gen.pcap", b"");
    let ups = tmp("gen-updates.txt", b"");
    let out = hyflow(&[
        "gen",
        "traffic",
        "--flows",
        f,
        "--out",
        pcap.to_str().unwrap(),
        "--packets",
        "3000",
        "--flows-count",
        "200",
        "--rate",
        "1000",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = hyflow(&[
        "gen",
        "updates",
        "--flows",
        f,
        "--out",
        ups.to_str().unwrap(),
        "--rate",
        "0.5",
        "--seconds",
        "3",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let run = |name: &str, extra: &[&str]| {
        let dec = tmp(name, b"");
        let json = tmp(&format!("{name}.json"), b"");
        let mut args = vec![
            "replay",
            "--flows",
            f,
            "--trace",
            pcap.to_str().unwrap(),
            "--updates",
            ups.to_str().unwrap(),
        ];
        args.extend_from_slice(&["--decisions", dec.to_str().unwrap(), "--json", json.to_str().unwrap()]);
        args.extend_from_slice(extra);
        let out = hyflow(&args);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        (std::fs::read_to_string(&dec).unwrap(), report)
    };
    let (reference, r0) = run("ref.jsonl", &["--no-cache"]);
    assert_eq!(r0["upcalls"], 3000);
    let first: serde_json::Value = serde_json::from_str(reference.lines().next().unwrap()).unwrap();
    for key in ["i", "layer", "outputs", "drop"] {
        assert!(first.get(key).is_some(), "decision lines have {key}");
    }
    for mode in ["signature", "cookie", "action"] {
        let (got, report) = run(&format!("{mode}.jsonl"), &["--consistency", mode, "--microflow-ways", "2"]);
        let strip = |s: &str| -> Vec<serde_json::Value> {
            s.lines()
                .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["outputs"].clone())
                .collect()
        };
        assert_eq!(strip(&reference), strip(&got), "{mode}");
        for key in [
            "packets",
            "nic_hits",
            "microflow_hits",
            "megaflow_hits",
            "upcalls",
            "nic_entries",
            "stale",
            "malformed",
        ] {
            assert!(report.get(key).is_some(), "report has {key}");
        }
        assert!(report["upcalls"].as_u64().unwrap() < 600, "caches serve most packets: {report}");
        assert!(report["updates"].as_u64().unwrap() > 10);
    }
    for partition in ["dp", "random", "one-to-one"] {
        let args =
            ["--nic", "gigaflow", "--nic-tables", "3", "--nic-entries", "500", "--partition", partition];
        let (got, report) = run(&format!("gigaflow-{partition}.jsonl"), &args);
        let outputs = |s: &str| -> Vec<serde_json::Value> {
            s.lines()
                .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["outputs"].clone())
                .collect()
        };
        assert_eq!(outputs(&reference), outputs(&got), "gigaflow {partition}");
        let g = &report["gigaflow"];
        assert_eq!(report["nic_scheme"], "gigaflow");
        assert_eq!(g["tables"], 3);
        assert_eq!(g["partition"], partition);
        assert_eq!(g["stage_entries"].as_array().map(|a| a.len()), Some(3));
        assert!(report["nic_hits"].as_u64().unwrap() > 2000, "{report}");
        assert!(g["coverage"].as_f64().unwrap() >= report["nic_entries_now"].as_f64().unwrap() / 3.0);
    }
}

/// `gen traffic --timing caida|backbone`: flows that arrive, send in trains and end, keyed
/// for the flow file's rules; the caches forward them as the slow path does, and a
/// microflow cache of a tenth of the flows serves most packets (trains), unlike the same
/// cache on Zipf traffic of as many flows.
#[test]
fn gen_traffic_times_flows_in_trains() {
    let flows = examples().join("l2l3acl.flows");
    let f = flows.to_str().unwrap();
    let hit_rate = |pcap: &Path, extra: &[&str]| -> (f64, String) {
        let dec = pcap.with_extension("jsonl");
        let mut args = vec!["replay", "--flows", f, "--trace", pcap.to_str().unwrap(), "--json", "-"];
        args.extend_from_slice(&[
            "--decisions",
            dec.to_str().unwrap(),
            "--microflow-entries",
            "256",
            "--no-nic",
        ]);
        args.extend_from_slice(extra);
        let out = hyflow(&args);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let report: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
        let outputs = std::fs::read_to_string(&dec)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["outputs"].to_string())
            .collect::<Vec<_>>()
            .join("\n");
        (report["microflow_hit_rate"].as_f64().unwrap_or(0.0), outputs)
    };
    let gen = |name: &str, timing: &[&str]| {
        let pcap = tmp(name, b"");
        let mut args =
            vec!["gen", "traffic", "--flows", f, "--out", pcap.to_str().unwrap(), "--packets", "40000"];
        args.extend_from_slice(&["--flows-count", "2500", "--rate", "400"]);
        args.extend_from_slice(timing);
        let out = hyflow(&args);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        (pcap, String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr))
    };
    let (zipf, _) = gen("zipf.pcap", &["--zipf", "0.8"]);
    let (zipf_rate, _) = hit_rate(&zipf, &[]);
    for timing in ["caida", "backbone"] {
        let (pcap, said) = gen(&format!("{timing}.pcap"), &["--timing", timing]);
        assert!(said.contains("wrote 40000 packets of "), "{said}");
        let (rate, cached) = hit_rate(&pcap, &[]);
        let (_, reference) = hit_rate(&pcap, &["--no-cache"]);
        assert_eq!(cached, reference, "{timing}: the caches forward as the slow path does");
        assert!(rate > 0.6 && rate > zipf_rate + 0.2, "{timing}: {rate} against Zipf's {zipf_rate}");
    }
    let pcap = tmp("bad.pcap", b"");
    let out = hyflow(&[
        "gen",
        "traffic",
        "--flows",
        f,
        "--out",
        pcap.to_str().unwrap(),
        "--timing",
        "backbone",
        "--zipf",
        "1",
    ]);
    fails_with(&out, &["--zipf sets the popularity of --timing zipf"]);
}

#[test]
fn replay_bad_input_is_one_clear_line() {
    let flows = examples().join("l2l3acl.flows");
    let f = flows.to_str().unwrap();
    let pcap = tmp("one.pcap", b"");
    let mut w = PcapWriter::create(&pcap, LinkType::Ethernet, false).unwrap();
    w.write_packet(0, &[0u8; 60]).unwrap();
    w.finish().unwrap();
    let p = pcap.to_str().unwrap();
    let replay = |extra: &[&str]| {
        let mut args = vec!["replay", "--flows", f, "--trace", p];
        args.extend_from_slice(extra);
        hyflow(&args)
    };
    let bad = tmp("bad-cmd.txt", b"0.5 add actions=drop\n1 frobnicate priority=1 actions=drop\n");
    fails_with(
        &replay(&["--updates", bad.to_str().unwrap()]),
        &["bad-cmd.txt:2:3", "unknown command", "frobnicate"],
    );
    let bad = tmp("bad-spec.txt", b"1 add ip,nw_dst=10.0.0.999 actions=drop\n");
    fails_with(&replay(&["--updates", bad.to_str().unwrap()]), &["bad-spec.txt:1:", "10.0.0.999"]);
    let bad = tmp("neg.txt", b"-2 delete ip\n");
    fails_with(&replay(&["--updates", bad.to_str().unwrap()]), &["neg.txt:1:1", "non-negative"]);
    let bad = tmp("nan.txt", b"soon delete ip\n");
    fails_with(&replay(&["--updates", bad.to_str().unwrap()]), &["nan.txt:1:1", "soon"]);
    fails_with(
        &replay(&["--microflow-entries", "0"]),
        &["--microflow-entries must be at least 1", "--no-microflow"],
    );
    fails_with(
        &replay(&["--megaflow-entries", "0"]),
        &["--megaflow-entries must be at least 1", "--no-megaflow"],
    );
    fails_with(
        &replay(&["--nic-entries", "0"]),
        &["--nic-entries must be at least 1", "--no-nic in replay, policy psf in sim"],
    );
    fails_with(
        &replay(&["--nic", "gigaflow", "--nic-tables", "300"]),
        &["--nic-tables must be 1 to 256 for gigaflow, not 300"],
    );
    fails_with(
        &replay(&["--nic", "gigaflow", "--nic-tables", "0"]),
        &["--nic-tables must be 1 to 256 for gigaflow, not 0"],
    );
    fails_with(&replay(&["--microflow-ways", "3"]), &["1, 2 or 4"]);
    fails_with(&replay(&["--nic", "gigaflow", "--nic-entries", "0"]), &["--nic-entries must be at least 1"]);
    let out = replay(&["--nic", "gigaflow", "--partition", "best"]);
    assert!(
        !out.status.success()
            && String::from_utf8_lossy(&out.stderr).contains("possible values: dp, random, one-to-one")
    );
    fails_with(&replay(&["--max-idle=-1"]), &["--max-idle"]);
    // A cache size of 0 with the cache off is fine.
    assert!(replay(&["--no-microflow", "--microflow-entries", "0"]).status.success());
}

/// `tcp_frame` with source port 40000 + `n`.
fn tcp_frame_port(n: u16) -> Vec<u8> {
    let mut f = tcp_frame();
    f[34..36].copy_from_slice(&(40000 + n).to_be_bytes());
    f
}

#[test]
fn topk_reports_each_boundary_as_json() {
    // Two seconds, one packet every 10 ms: flow 0 sends 5 of every 10 packets, flow 1 three,
    // flow 2 two.
    let mut w = PcapWriter::new(Vec::new(), "mem".into(), LinkType::Ethernet, true).unwrap();
    let pattern = [0u16, 1, 0, 2, 0, 1, 0, 2, 0, 1];
    for i in 0..200u64 {
        w.write_packet(1_000_000_000 + i * 10_000_000, &tcp_frame_port(pattern[i as usize % 10])).unwrap();
    }
    let pcap = tmp("topk.pcap", &w.finish().unwrap());
    for algo in [
        "fastkeeper-bitmap",
        "fastkeeper-paper",
        "fastkeeper-bitmap-no-refresh",
        "fastkeeper-paper+guard",
        "fastkeeper",
        "sl-hk",
        "elixir",
        "wcss",
        "heavykeeper",
        "cm",
        "univmon",
        "spacesaving",
        "lossy",
    ] {
        let out = hyflow(&[
            "topk",
            "--trace",
            pcap.to_str().unwrap(),
            "--algo",
            algo,
            "--k",
            "2",
            "--memory",
            "64KB",
            "--window",
            "2s",
            "--block",
            "1s",
            "--json",
        ]);
        assert!(out.status.success(), "{algo}: {}", String::from_utf8_lossy(&out.stderr));
        let lines: Vec<serde_json::Value> =
            String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines.len(), 2, "{algo}: boundaries at 1 s and 2 s");
        assert_eq!(lines[1]["t"], 2.0);
        let flows = lines[1]["flows"].as_array().unwrap();
        assert_eq!(flows[0]["key"]["tp_src"], 40000, "{algo}: ports are numbers");
        assert_eq!(flows[0]["key"]["nw_dst"], "10.1.0.2", "{algo}");
        assert_eq!(flows[1]["key"]["tp_src"], 40001, "{algo}");
        assert!(String::from_utf8_lossy(&out.stderr).contains(" used "), "{algo}: memory after the run");
        if algo.starts_with("fastkeeper") || algo == "wcss" {
            // Sliding: the window holds both seconds.
            assert_eq!(flows[0]["count"], 100, "{algo}");
        }
    }
    // A trace shorter than the window has no precision to give, and says so instead of 0.
    let p = pcap.to_str().unwrap();
    let eval = |extra: &[&str]| {
        let mut args = vec!["eval", "topk", "--trace", p, "--algos", "cm", "--k", "2", "--memory", "64KB"];
        args.extend_from_slice(extra);
        hyflow(&args)
    };
    let short = eval(&["--window", "10s", "--block", "1s", "--json"]);
    assert!(short.status.success(), "{}", String::from_utf8_lossy(&short.stderr));
    let row: serde_json::Value = serde_json::from_slice(&short.stdout).unwrap();
    assert_eq!(row["windows"], 0);
    assert!(row.get("precision").is_none(), "{row}");
    assert!(row["warning"].as_str().unwrap().contains("no full window"), "{row}");
    assert!(String::from_utf8_lossy(&short.stderr).contains("no full window"));
    let table = eval(&["--window", "10s", "--block", "1s"]);
    assert!(String::from_utf8_lossy(&table.stdout).contains("| no full window |"));
    let scored: serde_json::Value =
        serde_json::from_slice(&eval(&["--window", "1s", "--block", "1s", "--json"]).stdout).unwrap();
    assert!(scored["windows"].as_u64().unwrap() >= 1 && scored["precision"].is_number(), "{scored}");
}

/// A TCP/IPv6 frame: 2001:db8::1:40000 → 2001:db8::2:443.
fn tcp6_frame() -> Vec<u8> {
    let mut f = vec![0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 1, 0x86, 0xdd];
    f.extend_from_slice(&[0x60, 0, 0, 0, 0, 20, 6, 64]);
    for last in [1, 2] {
        f.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, last]);
    }
    f.extend_from_slice(&[
        0x9c, 0x40, 0x01, 0xbb, 0, 0, 0, 0, 0, 0, 0, 0, 0x50, 0x02, 0xff, 0xff, 0, 0, 0, 0,
    ]);
    f
}

/// IPv6 is measured under the dual-stack key (and the IPv4 key says it skipped it); a report
/// with fewer than k flows says why.
#[test]
fn topk_measures_ipv6_and_explains_short_reports() {
    // One second, one packet every 10 ms: IPv6 flow 3 of every 4 packets, IPv4 flow 0 the
    // rest; then a second of IPv4 flow 1 alone.
    let mut w = PcapWriter::new(Vec::new(), "mem".into(), LinkType::Ethernet, true).unwrap();
    for i in 0..200u64 {
        let frame = match (i < 100, i % 4) {
            (true, 0) => tcp_frame_port(0),
            (true, _) => tcp6_frame(),
            (false, _) => tcp_frame_port(1),
        };
        w.write_packet(1_000_000_000 + i * 10_000_000, &frame).unwrap();
    }
    let pcap = tmp("dual.pcap", &w.finish().unwrap());
    let run = |key: &str, k: &str| {
        let p = pcap.to_str().unwrap();
        let args = ["topk", "--trace", p, "--algo", "fastkeeper-bitmap", "--k", k, "--memory", "64KB"];
        let out = hyflow(&[&args[..], &["--window", "1s", "--block", "1s", "--key", key, "--json"]].concat());
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let lines: Vec<serde_json::Value> =
            String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        (lines, String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (v4, err) = run("5tuple", "2");
    assert_eq!(v4[0]["flows"].as_array().unwrap().len(), 1, "{v4:?}");
    assert!(err.contains("75 without the key fields") && err.contains("--key 5tuple46"), "{err}");
    assert_eq!(v4[0]["short"], serde_json::json!({"reason": "fewer_flows_seen", "held": 1}));

    let (dual, err) = run("5tuple46", "2");
    assert!(err.contains("0 without the key fields") && !err.contains("--key 5tuple46"), "{err}");
    let first = dual[0]["flows"].as_array().unwrap();
    assert_eq!(first[0]["key"]["ipv6_src"], "2001:db8::1");
    assert_eq!(first[0]["key"]["tp_dst"], 443);
    assert_eq!(first[0]["count"], 75);
    assert_eq!(first[1]["key"]["ipv6_dst"], "::ffff:10.1.0.2");
    assert_eq!(first[1]["count"], 25);
    assert!(dual[0].get("short").is_none(), "k flows: no shortfall");
    // The second window holds flow 1 only; the first second's two flows are still held.
    let second = dual[1]["flows"].as_array().unwrap();
    assert_eq!(second.len(), 1);
    assert_eq!(second[0]["count"], 100);
    assert_eq!(dual[1]["short"]["reason"], "estimates_at_zero", "{}", dual[1]);
}

#[test]
fn topk_bad_input_is_one_clear_message() {
    let pcap = tmp("one.pcap", &pcap_with(&[tcp_frame()]));
    let p = pcap.to_str().unwrap();
    let run = |extra: &[&str]| {
        let mut args = vec!["topk", "--trace", p];
        args.extend_from_slice(extra);
        hyflow(&args)
    };
    fails_with(&run(&["--memory", "100B"]), &["--memory 100 B is too small", "needs at least"]);
    fails_with(&run(&["--window", "1s", "--block", "5s"]), &["--block must not be longer than --window"]);
    fails_with(&run(&["--window", "5s", "--block", "2s"]), &["whole number of blocks"]);
    fails_with(&run(&["--k", "0"]), &["--k must be at least 1"]);
    fails_with(&run(&["--algo", "bogus"]), &["unknown algorithm 'bogus'", "fastkeeper"]);
    fails_with(&run(&["--key", "nw_src,bogus"]), &["unknown key field 'bogus'"]);
    fails_with(&run(&["--sample", "0"]), &["--sample must be in (0, 1]"]);
    fails_with(&run(&["--window", "5parsecs"]), &["unknown unit"]);
    fails_with(&run(&["--memory", "30XB"]), &["unknown unit"]);
    fails_with(&hyflow(&["eval", "topk", "--trace", p, "--algos", "cm,nope"]), &["unknown algorithm 'nope'"]);
}

#[test]
fn sim_is_deterministic_and_reports_the_summary_keys() {
    let a = tmp("a.json", b"");
    let b = tmp("b.json", b"");
    for p in [&a, &b] {
        let out = hyflow(&["sim", "--policy", "offload-all", "--cores", "2", "--json", p.to_str().unwrap()]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let (ja, jb) = (std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
    assert_eq!(ja, jb, "two runs, byte-identical JSON");
    let v: serde_json::Value = serde_json::from_slice(&ja).unwrap();
    for key in ["packets", "lost", "loss_rate", "latency_us", "ring_max", "cores", "rate_pps"] {
        assert!(v.get(key).is_some(), "missing {key}");
    }
    for key in ["mean", "p50", "p99", "p999", "max"] {
        assert!(v["latency_us"].get(key).is_some(), "missing latency_us.{key}");
    }
    assert_eq!(v["packets"], 200_000);
    assert_eq!(v["cores"], 2);
    // A search reports what it found.
    let out = hyflow(&["sim", "--policy", "psf", "--rate", "20000000", "--find", "min-cores", "--json", "-"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let last = String::from_utf8_lossy(&out.stdout).lines().last().unwrap().to_string();
    let v: serde_json::Value = serde_json::from_str(&last).unwrap();
    let min = v["min_cores"].as_u64().unwrap();
    assert!(min > 1, "{v}");
    assert_eq!(v["lost"], 0);
    // Every count to the bound was run; the answer is the fewest from which all are lossless
    // (and the one below it loses or falls behind), the tolerant answer never above it.
    let table = v["loss_by_cores"].as_array().unwrap();
    assert_eq!(table.len(), 32);
    let lossless = |row: &serde_json::Value| row["lost"] == 0 && row["steady"] == true;
    assert!(table[min as usize - 1..].iter().all(lossless), "{v}");
    assert!(!lossless(&table[min as usize - 2]), "{v}");
    assert!(v["min_cores_within_tolerance"].as_u64().unwrap() <= min);
    // A Ray task's probe (the hidden --probe-cores, on the search's own options, outputs
    // included) prints the loss the search recorded for that count, and nothing else.
    for (cores, row) in [(1usize, &table[0]), (min as usize, &table[min as usize - 1])] {
        let c = cores.to_string();
        let args = ["sim", "--policy", "psf", "--rate", "20000000", "--find", "min-cores", "--json", "-"];
        let out = hyflow(&[&args[..], &["--probe-cores", &c]].concat());
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let probe: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(&probe, row, "{cores} cores");
    }
    // With no lossless count below the bound, the search still reports loss by cores, the
    // bound's run and why there is no answer.
    let bound = (min - 1).to_string();
    let out = hyflow(&[
        "sim",
        "--policy",
        "psf",
        "--rate",
        "20000000",
        "--find",
        "min-cores",
        "--max-cores",
        &bound,
        "--json",
        "-",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // (With the record on stdout, the report goes to stderr.)
    let report = String::from_utf8_lossy(&out.stderr);
    assert!(report.contains(&format!("min cores without loss: none up to {bound}")), "{report}");
    let last = String::from_utf8_lossy(&out.stdout).lines().last().unwrap().to_string();
    let v: serde_json::Value = serde_json::from_str(&last).unwrap();
    assert!(v.get("min_cores").is_none(), "{v}");
    assert_eq!(v["cores"].as_u64(), Some(min - 1));
    assert_eq!(v["loss_by_cores"].as_array().unwrap().len() as u64, min - 1);
    assert!(v["warnings"].to_string().contains("is lossless"), "{v}");
    // A max-rate search answers a whole rate, the rate of the run it reports, lossless.
    let out = hyflow(&["sim", "--policy", "psf", "--cores", "2", "--find", "max-rate", "--json", "-"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let last = String::from_utf8_lossy(&out.stdout).lines().last().unwrap().to_string();
    let v: serde_json::Value = serde_json::from_str(&last).unwrap();
    let rate = v["max_rate_pps"].as_f64().unwrap();
    assert_eq!(rate.fract(), 0.0, "{v}");
    assert_eq!(v["rate_target_pps"].as_f64(), Some(rate));
    assert_eq!((v["lost"].as_u64(), v["steady"].as_bool()), (Some(0), Some(true)), "{v}");
}

#[test]
fn calibration_writes_sane_costs_that_sim_loads() {
    let costs = tmp("costs.json", b"");
    let out = hyflow(&["calibrate", "--out", costs.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&costs).unwrap()).unwrap();
    let ns = |k: &str| v[k].as_f64().unwrap();
    for k in ["rx_ns", "microflow_hit_ns", "megaflow_hit_ns", "upcall_ns", "sample_ns"] {
        assert!(ns(k) > 0.0 && ns(k) < 1e6, "{k} = {}", ns(k));
    }
    assert!(ns("upcall_ns") > ns("megaflow_hit_ns"), "an upcall costs more than a cache hit: {v}");
    let out = hyflow(&["sim", "--costs", costs.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

/// With `--warmup` every figure covers the window after it: the host's counts come to the
/// software packets measured (give or take those waiting in the ring when the warm-up ended),
/// the NIC's installs are those after it, and its update rate divides them by the measured span.
#[test]
fn sim_warmup_restarts_every_count() {
    let run = |extra: &[&str]| {
        let out = tmp(&format!("warm{}.json", extra.len()), b"");
        let mut args = vec!["sim", "--ring", "256", "--json", out.to_str().unwrap()];
        args.extend_from_slice(extra);
        let r = hyflow(&args);
        assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
        serde_json::from_slice::<serde_json::Value>(&std::fs::read(&out).unwrap()).unwrap()
    };
    let (full, warm) = (run(&[]), run(&["--warmup", "1"]));
    let host_sum = |v: &serde_json::Value| {
        ["microflow_hits", "megaflow_hits", "upcalls"]
            .iter()
            .map(|k| v["host"][k].as_u64().unwrap())
            .sum::<u64>()
    };
    for v in [&full, &warm] {
        let sw = v["sw_packets"].as_u64().unwrap();
        assert!(host_sum(v).abs_diff(sw) <= 257, "host counts {} against {sw} software packets", host_sum(v));
        let (installs, rate) =
            (v["nic"]["installs"].as_f64().unwrap(), v["nic"]["update_rate"].as_f64().unwrap());
        let span = v["duration_s"].as_f64().unwrap();
        assert!(
            (rate * span - installs).abs() <= 1e-6 * installs.max(1.0),
            "{rate}/s over {span} s, {installs}"
        );
    }
    assert!(warm["packets"].as_u64() < full["packets"].as_u64());
    assert!(warm["nic"]["installs"].as_u64().unwrap() < full["nic"]["installs"].as_u64().unwrap());
    assert!(warm["nic"]["installs"].as_u64().unwrap() > 0, "the NIC keeps installing after the warm-up");
}

/// A setup that cannot mean anything says so in one warning line naming the cause, and the
/// JSON carries it; a setup that means something warns of nothing. The summary's first line
/// gives the simulated duration.
#[test]
fn sim_warns_when_its_setup_cannot_mean_anything() {
    let run = |args: &[&str]| {
        let json = tmp("warn.json", b"");
        let mut all = vec!["sim", "--json", json.to_str().unwrap()];
        all.extend_from_slice(args);
        let out = hyflow(&all);
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(out.status.success(), "{args:?}: {err}");
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        let warnings: Vec<String> =
            err.lines().filter(|l| l.starts_with("hyflow: warning:")).map(String::from).collect();
        let in_json = v.get("warnings").and_then(|w| w.as_array()).map_or(0, |w| w.len());
        assert_eq!(warnings.len(), in_json, "{args:?}: every warning is in the JSON too");
        (warnings, String::from_utf8_lossy(&out.stdout).to_string())
    };
    for (args, cause) in [
        (&["--policy", "elixir"][..], "no large-flow replacement: the run lasts 1.995 s of simulated time, less than --replacement-window (10 s)"),
        (&["--policy", "elixir", "--replacement-window", "1"][..], "less than one --identification-window (30 s)"),
        (&["--policy", "lfp"][..], "lfp trained on all of this 1.995 s input (--lfp-train 10 s)"),
        (&["--policy", "lfp", "--lfp-train", "0.5"][..], "measuring starts at 0 s (--warmup); give --warmup 0.5"),
        (&["--rate", "20000000"][..], "rescaled to --rate 20000000 packets/s, is measured over 10.000 ms of simulated time"),
    ] {
        let (warnings, _) = run(args);
        assert_eq!(warnings.len(), 1, "{args:?}: {warnings:?}");
        assert!(warnings[0].contains(cause), "{args:?}: {warnings:?}");
    }
    for args in [
        &[][..],
        &["--policy", "elixir", "--replacement-window", "0.5", "--identification-window", "1"][..],
        &["--policy", "lfp", "--lfp-train", "0.5", "--warmup", "0.5"][..],
        &["--rate", "50000"][..],
    ] {
        let (warnings, text) = run(args);
        assert!(warnings.is_empty(), "{args:?}: {warnings:?}");
        assert!(text.lines().next().unwrap().contains(" s of simulated time at "), "{text}");
    }
}

/// LFP replaces periodically (Elixir §5.1): its table of 600 fills from the flows its tree
/// ranked, where predicting once at first packets left it half empty. TFO reports its fills
/// and swaps.
#[test]
fn lfp_fills_its_table_and_tfo_reports_its_swaps() {
    let run = |args: &[&str]| {
        let json = tmp("baseline.json", b"");
        let mut all = vec![
            "sim",
            "--json",
            json.to_str().unwrap(),
            "--large-entries",
            "500",
            "--bursty-entries",
            "100",
        ];
        all.extend_from_slice(args);
        let out = hyflow(&all);
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice::<serde_json::Value>(&std::fs::read(&json).unwrap()).unwrap()
    };
    let lfp = run(&["--policy", "lfp", "--lfp-train", "1", "--warmup", "1", "--replacement-window", "1"]);
    assert_eq!(lfp["nic"]["entries_peak"], 600, "{}", lfp["nic"]);
    assert!(lfp["policy_report"]["replacements"].as_u64().unwrap() >= 1, "{}", lfp["policy_report"]);
    let tfo = run(&["--policy", "tfo", "--tfo-max-changes", "3", "--tfo-hysteresis", "1.5"]);
    let report = &tfo["policy_report"];
    let (bins, swaps) = (report["replacements"].as_u64().unwrap(), report["swaps"].as_u64().unwrap());
    assert!(bins >= 1 && swaps <= 3 * bins, "{report}");
    assert!(report["fills"].as_u64().unwrap() > 0, "{report}");
    fails_with(
        &hyflow(&["sim", "--policy", "tfo", "--tfo-hysteresis", "0.5"]),
        &["--tfo-hysteresis must be a ratio of at least 1"],
    );
    fails_with(
        &hyflow(&["sim", "--policy", "lfp", "--lfp-prune", "maybe"]),
        &["--lfp-prune must be true or false"],
    );
}

#[test]
fn sim_bad_input_is_one_clear_message() {
    fails_with(&hyflow(&["sim", "--rate", "0"]), &["--rate must be a positive"]);
    fails_with(&hyflow(&["sim", "--rate=-5"]), &["--rate must be a positive"]);
    fails_with(&hyflow(&["sim", "--cores", "0"]), &["--cores must be at least 1"]);
    fails_with(&hyflow(&["sim", "--ring", "0"]), &["--ring must be at least 1"]);
    // A time series bounded by what is asked: a microsecond interval over the built-in 2 s
    // would be 2·10^9 points (a 7.4 GB allocation once); it is refused with the range.
    let series = tmp("series.csv", b"");
    for interval in ["0.000001", "1e-9"] {
        fails_with(
            &hyflow(&["sim", "--interval", interval, "--timeseries", series.to_str().unwrap()]),
            &["--interval", "makes more than 1000000 points over this run's 1.99", "give at least 0.001"],
        );
    }
    // Unknown values of an enumerated option: clap's message, naming the option, the value and
    // the values allowed.
    for (args, allowed) in [
        (
            ["sim", "--policy", "magic"],
            "[possible values: psf, offload-all, gigaflow, elixir, tfo, lfp, ovs-rebalance]",
        ),
        (["sim", "--find", "everything"], "[possible values: min-cores, max-rate]"),
    ] {
        let out = hyflow(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success());
        let want = format!("invalid value '{}' for '{} <", args[2], args[1]);
        assert!(err.contains(&want) && err.contains(allowed), "{err}");
    }
    // Elixir's parameters: out of range, or given to a policy they do not apply to.
    let elixir = |extra: &[&str]| {
        let mut args = vec!["sim", "--policy", "elixir"];
        args.extend_from_slice(extra);
        hyflow(&args)
    };
    fails_with(&elixir(&["--sample-rate", "0"]), &["--sample-rate must be in (0, 1], not 0"]);
    fails_with(&elixir(&["--sample-rate", "1.5"]), &["--sample-rate must be in (0, 1], not 1.5"]);
    fails_with(&elixir(&["--bursty-entries", "0"]), &["--bursty-entries must be at least 1"]);
    fails_with(&elixir(&["--large-entries", "0"]), &["--large-entries must be at least 1"]);
    fails_with(&elixir(&["--identification-window", "0"]), &["--identification-window must be a positive"]);
    fails_with(&elixir(&["--replacement-window=-1"]), &["--replacement-window must be a positive"]);
    fails_with(
        &elixir(&["--queue-threshold", "70000"]),
        &["--queue-threshold must be in 1..=65536", "70000"],
    );
    fails_with(&elixir(&["--ring", "1000"]), &["queue threshold K", "is not positive", "--queue-threshold"]);
    fails_with(
        &hyflow(&["sim", "--burst-window", "2"]),
        &["--burst-window does not apply to --policy offload-all"],
    );
    fails_with(
        &hyflow(&["sim", "--policy", "tfo", "--queue-threshold", "9"]),
        &["--queue-threshold does not apply to --policy tfo"],
    );
    fails_with(
        &hyflow(&["sim", "--policy", "elixir", "--lfp-train", "9"]),
        &["--lfp-train does not apply to --policy elixir"],
    );
    fails_with(&hyflow(&["sim", "--policy", "lfp", "--lfp-train", "0"]), &["--lfp-train must be a positive"]);
    // The switch's NIC sizing means nothing to a policy that brings its own NIC.
    for (policy, option) in [("elixir", "--nic-entries"), ("tfo", "--nic-tables"), ("psf", "--partition")] {
        let value = if option == "--partition" { "random" } else { "4" };
        fails_with(
            &hyflow(&["sim", "--policy", policy, option, value]),
            &[&format!("{option} does not apply to --policy {policy}: it brings its own NIC")],
        );
    }
    fails_with(&elixir(&["--flow-key", "bogus"]), &["--flow-key", "unknown key field 'bogus'"]);
    fails_with(&hyflow(&["sim", "--nic", "gigaflow"]), &["--nic and --no-nic do not apply to sim"]);
    fails_with(&hyflow(&["sim", "--no-nic"]), &["--policy says what the NIC holds"]);
    let missing = tmp(
        "missing.json",
        br#"{"rx_ns": 50, "microflow_hit_ns": 100, "megaflow_hit_ns": 200, "sample_ns": 30}"#,
    );
    fails_with(
        &hyflow(&["sim", "--costs", missing.to_str().unwrap()]),
        &["missing.json", "missing field `upcall_ns`"],
    );
    let negative = tmp(
        "negative.json",
        br#"{"rx_ns": 50, "microflow_hit_ns": -100, "megaflow_hit_ns": 200, "upcall_ns": 8000, "sample_ns": 30}"#,
    );
    fails_with(&hyflow(&["sim", "--costs", negative.to_str().unwrap()]), &["'microflow_hit_ns' must be"]);
}

/// Gateway traffic streamed in process through the gateway pipeline, under Elixir: the NIC
/// holds at most its two areas, the policy replaced the large set every second, and the same
/// command gives the same JSON.
#[test]
fn sim_elixir_on_streamed_gateway_traffic() {
    let args = [
        "sim",
        "--trace",
        "gen:gateway,flows=5000,bursty=20,rate=200000,duration=4",
        "--policy",
        "elixir",
        "--large-entries",
        "500",
        "--bursty-entries",
        "10",
        "--identification-window",
        "2",
        "--replacement-window",
        "1",
        "--json",
        "-",
    ];
    let out = hyflow(&args);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    let json = text.lines().last().unwrap();
    let v: serde_json::Value = serde_json::from_str(json).unwrap();
    assert_eq!(v["policy"], "elixir");
    assert!(v["nic"]["entries_peak"].as_u64().unwrap() <= 510, "{}", v["nic"]);
    assert!(v["policy_report"]["replacements"].as_u64().unwrap() >= 3, "{}", v["policy_report"]);
    assert!(v["hw_share"].as_f64().unwrap() > 0.5, "the large set holds most traffic: {}", v["hw_share"]);
    assert!(v["packets"].as_u64().unwrap() > 700_000);
    let again = hyflow(&args);
    assert_eq!(String::from_utf8_lossy(&again.stdout).lines().last().unwrap(), json, "deterministic");
    fails_with(
        &hyflow(&["sim", "--trace", "gen:gateway,speed=3"]),
        &["--trace", "unknown key 'speed'", "flows, bursty, rate"],
    );
    fails_with(&hyflow(&["sim", "--trace", "x.pcap"]), &["--trace needs --flows"]);
}

/// `sim --decisions` writes one line per packet in input order; every packet the NIC
/// forwarded leaves as `replay --no-cache` sends it (the built-in workload has rule updates).
#[test]
fn sim_decisions_match_the_slow_path_for_nic_packets() {
    let dir = std::env::temp_dir().join(format!("hyflow-sim-decisions-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (sim, reference) = (dir.join("sim.jsonl"), dir.join("ref.jsonl"));
    let out = hyflow(&["sim", "--decisions", sim.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = hyflow(&["replay", "--no-cache", "--decisions", reference.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let read = |p: &Path| -> Vec<serde_json::Value> {
        std::fs::read_to_string(p).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    };
    let (got, want) = (read(&sim), read(&reference));
    assert_eq!(got.len(), want.len());
    let mut nic = 0;
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g["i"], i as u64);
        assert!(g["t_ns"].is_u64());
        if g["layer"] == "nic" {
            nic += 1;
            assert_eq!(g["outputs"], w["outputs"], "packet {i}");
        }
    }
    assert!(nic > 10_000, "{nic} NIC decisions");
    // clap's own message (with its usage line).
    let out = hyflow(&["sim", "--decisions", "x", "--find", "max-rate"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("'--decisions <FILE>' cannot be used with '--find <WHAT>'"),
        "{err}"
    );
}

/// Defaults that fit a laptop: `--trace gen:gateway` and `gen gateway` share one default
/// (2 M packets, seconds to run) that their help shows; Elixir's scale is asked for by name.
/// Without a terminal, a long run prints a progress line every few seconds.
#[test]
fn gateway_defaults_fit_a_laptop_and_long_runs_say_how_far() {
    let help = String::from_utf8(hyflow(&["gen", "gateway", "--help"]).stdout).unwrap();
    for default in ["[default: 50000]", "[default: 300]", "[default: 500000]", "[default: 4]", "[default: 2]"]
    {
        assert!(help.contains(default), "gen gateway --help shows {default}: {help}");
    }
    let help = String::from_utf8(hyflow(&["sim", "--help"]).stdout).unwrap();
    assert!(
        help.contains("laptop, the default: 50000 steady and 300 bursty flows at 500 kpps for 4 s"),
        "{help}"
    );
    let json = tmp("laptop.json", b"");
    let out = Command::new(env!("CARGO_BIN_EXE_hyflow"))
        .args(["sim", "--trace", "gen:gateway", "--json", json.to_str().unwrap()])
        .env("HYFLOW_PROGRESS_AFTER", "0")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let packets = v["packets"].as_u64().unwrap();
    assert!((1_800_000..2_100_000).contains(&packets), "about 2 M packets: {packets}");
    assert!((v["duration_s"].as_f64().unwrap() - 4.0).abs() < 0.01, "{v}");
    assert!(v["bursts"]["bursts"].as_u64().unwrap() >= 3, "a handful of bursts: {}", v["bursts"]);
    // Progress without a terminal: plain lines naming the packets done.
    let lines: Vec<&str> =
        err.lines().filter(|l| l.starts_with("hyflow sim: ") && l.contains(" packets, ")).collect();
    assert!(!lines.is_empty() && lines[0].contains("packets read"), "{err}");
    // A short run prints none by default.
    let quiet = hyflow(&["replay"]);
    assert!(!String::from_utf8_lossy(&quiet.stderr).contains("packets read"));
}

/// `gen gateway` writes the traffic `--trace gen:gateway` streams: simulating the capture
/// gives the same figures as simulating the stream.
#[test]
fn gen_gateway_writes_what_the_stream_simulates() {
    let pcap = std::env::temp_dir().join(format!("hyflow-gateway-{}.pcap", std::process::id()));
    let out = hyflow(&[
        "gen",
        "gateway",
        "--out",
        pcap.to_str().unwrap(),
        "--flows-count",
        "3000",
        "--bursty",
        "100",
        "--rate",
        "50000",
        "--duration",
        "4",
        "--seed",
        "5",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let policy = [
        "--policy",
        "elixir",
        "--large-entries",
        "300",
        "--bursty-entries",
        "5",
        "--replacement-window",
        "0.5",
    ];
    let json = |trace: &[&str]| {
        let mut args = vec!["sim", "--json", "-"];
        args.extend_from_slice(trace);
        args.extend_from_slice(&policy);
        let out = hyflow(&args);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).lines().last().unwrap().to_string()
    };
    let flows = examples().join("gateway.flows");
    let from_file = json(&["--flows", flows.to_str().unwrap(), "--trace", pcap.to_str().unwrap()]);
    let streamed = json(&["--trace", "gen:gateway,flows=3000,bursty=100,rate=50000,duration=4,seed=5"]);
    let mut from_file: serde_json::Value = serde_json::from_str(&from_file).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&streamed).unwrap();
    // The file keeps 128 bytes of each packet (`--snaplen`), with its wire length: read from
    // their headers, the packets cut are the same traffic.
    let cut = from_file.as_object_mut().unwrap().remove("snaplen_truncated").unwrap();
    assert!(
        cut.as_u64().unwrap() > 0 && v.as_object_mut().unwrap().remove("snaplen_truncated").unwrap() == 0
    );
    // Only the stream knows its bursts (the generator's log): the rest is the same.
    let bursts = v.as_object_mut().unwrap().remove("bursts").expect("the stream reports its bursts");
    assert!(from_file.get("bursts").is_none());
    assert_eq!(from_file, v);
    assert!(bursts["bursts"].as_u64().unwrap() >= 1 && bursts["list"].is_array(), "{bursts}");
    assert!(v["packets"].as_u64().unwrap() > 190_000 && v["malformed"] == 0, "{v}");
    std::fs::remove_file(&pcap).ok();
}

/// `--preset gigaflow-paper` sets the artifact's limits (63 masks per table, no microflow
/// cache, its table sizes), and options given explicitly override it.
#[test]
fn the_gigaflow_paper_preset_sets_the_artifacts_limits() {
    let run = |args: &[&str]| -> serde_json::Value {
        let mut all = vec!["replay", "--json", "-"];
        all.extend_from_slice(args);
        let out = hyflow(&all);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_str(String::from_utf8_lossy(&out.stdout).lines().last().unwrap()).unwrap()
    };
    // The built-in workload's megaflows need more than 63 masks.
    let own = run(&["--nic", "megaflow"]);
    assert!(own["nic_masks_now"].as_u64().unwrap() > 63 && own["nic_refused_masks"] == 0, "{own}");
    assert!(own["microflow_capacity"].as_u64().unwrap() > 0);
    let paper = run(&["--nic", "megaflow", "--preset", "gigaflow-paper"]);
    assert!(paper["nic_masks_now"].as_u64().unwrap() <= 63, "{paper}");
    assert!(paper["nic_refused_masks"].as_u64().unwrap() > 0, "{paper}");
    assert_eq!(paper["microflow_capacity"], 0, "EMC/SMC off");
    let overridden = run(&["--nic", "megaflow", "--preset", "gigaflow-paper", "--nic-masks", "512"]);
    assert_eq!(overridden["nic_refused_masks"], 0, "{overridden}");
    let gigaflow = run(&["--nic", "gigaflow", "--preset", "gigaflow-paper"]);
    assert_eq!(gigaflow["gigaflow"]["entries_per_table"], 8_000);
    let sized = run(&["--nic", "gigaflow", "--preset", "gigaflow-paper", "--nic-entries", "100"]);
    assert_eq!(sized["gigaflow"]["entries_per_table"], 100);
    // Cumulative figures include the cold start; --warmup adds the steady state after it.
    assert!(gigaflow.get("steady").is_none());
    let warm = run(&["--nic", "gigaflow", "--preset", "gigaflow-paper", "--warmup", "0.5"]);
    let steady = &warm["steady"];
    assert!(steady["packets"].as_u64().unwrap() < warm["packets"].as_u64().unwrap(), "{steady}");
    assert!(steady["nic_hit_rate"].as_f64().unwrap() > warm["nic_hit_rate"].as_f64().unwrap(), "{warm}");
    let shares: f64 = ["nic_hit_rate", "microflow_hit_rate", "megaflow_hit_rate", "upcall_rate"]
        .iter()
        .map(|k| steady[k].as_f64().unwrap())
        .sum();
    assert!((shares - 1.0).abs() < 1e-9, "{steady}");
    let bad = hyflow(&["replay", "--warmup=-1"]);
    assert!(!bad.status.success() && String::from_utf8_lossy(&bad.stderr).contains("--warmup"));
}

/// `gen pipeline` writes the rules, the header pool (a line per tuple) and a trace of 64-byte
/// packets, the same for the same seed; with `--locality-from` a capture's 5-tuples, in order
/// of first appearance, take the pool's headers modulo its size, at the capture's times.
#[test]
fn gen_pipeline_writes_a_header_pool_and_folds_a_capture_onto_it() {
    let dir = tmp("x", b"").parent().unwrap().to_path_buf();
    let gen = |out: &str, extra: &[&str]| {
        let out = dir.join(out);
        let mut args = vec![
            "gen",
            "pipeline",
            "--kind",
            "psc",
            "--rules",
            "50",
            "--headers",
            "50",
            "--out",
            out.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let o = hyflow(&args);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        (out, String::from_utf8_lossy(&o.stdout).to_string())
    };
    let (a, said) = gen("a", &["--packets", "3000", "--flows-count", "300"]);
    assert!(said.contains("3000 packets"), "{said}");
    let pool = std::fs::read_to_string(a.join("traffic.txt")).unwrap();
    assert_eq!(pool.lines().filter(|l| !l.starts_with('#')).count(), 50);
    let trace = std::fs::read(a.join("trace.pcap")).unwrap();
    assert_eq!(trace.len(), 24 + 3000 * (16 + 60), "3000 frames of 60 bytes");
    let (b, _) = gen("b", &["--packets", "3000", "--flows-count", "300"]);
    assert_eq!(trace, std::fs::read(b.join("trace.pcap")).unwrap(), "same seed, same trace");

    // Three 5-tuples in the capture (first appearance: A, B, C): with a pool of 50 lines
    // they take lines 0, 1, 2.
    let mut frames = Vec::new();
    for port in [80u8, 81, 80, 82, 81] {
        let mut f = tcp_frame();
        f[14 + 20 + 3] = port;
        frames.push(f);
    }
    let capture = tmp("capture.pcap", &pcap_with(&frames));
    let (c, said) = gen("c", &["--locality-from", capture.to_str().unwrap()]);
    assert!(said.contains("5 packets of 3 flows"), "{said}");
    // Same seed and rules: the same pool as `a`. Records: 16-byte header, 60-byte frame.
    let trace = std::fs::read(c.join("trace.pcap")).unwrap();
    let record = |i: usize| &trace[24 + i * 76..24 + (i + 1) * 76];
    let frame = |i: usize| &record(i)[16..];
    assert_eq!(trace.len(), 24 + 5 * 76);
    assert_eq!(frame(0), frame(2));
    assert_eq!(frame(1), frame(4));
    assert!(frame(0) != frame(1) && frame(1) != frame(3) && frame(0) != frame(3));
    for (i, line) in [0, 1, 0, 2, 1].into_iter().enumerate() {
        let ns = u32::from_le_bytes(record(i)[4..8].try_into().unwrap());
        assert_eq!(ns as usize, i * 1000, "packet {i} keeps the capture's time");
        // IPv4 source behind the Ethernet header and the VLAN tag.
        let src: std::net::Ipv4Addr = pool
            .lines()
            .filter(|l| !l.starts_with('#'))
            .nth(line)
            .unwrap()
            .split(' ')
            .nth(5)
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(frame(i)[30..34], src.octets(), "packet {i} has pool line {line}");
    }
    // The capture sets packets, flows and timing: clap refuses the model's options beside it.
    let o = hyflow(&[
        "gen",
        "pipeline",
        "--kind",
        "psc",
        "--out",
        "x",
        "--locality-from",
        "c.pcap",
        "--packets",
        "9",
    ]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("cannot be used with '--packets"));
}

/// A capture that cannot be opened is named once, with the system's reason once (not
/// repeated by the error's cause chain); `gen pipeline` checks it before writing anything.
#[test]
fn an_unopenable_capture_is_named_once_with_its_reason() {
    let missing = "/nonexistent/hyflow-missing.pcap";
    let flows = examples().join("l2l3acl.flows");
    let out = hyflow(&["replay", "--flows", flows.to_str().unwrap(), "--trace", missing]);
    fails_with(&out, &[missing, "cannot open"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.matches("No such file or directory").count(), 1, "{err}");
    assert!(!err.contains("os error"), "{err}");
    let dir = tmp("x", b"").parent().unwrap().join("never-written");
    let out = hyflow(&[
        "gen",
        "pipeline",
        "--kind",
        "psc",
        "--out",
        dir.to_str().unwrap(),
        "--locality-from",
        missing,
    ]);
    fails_with(&out, &[missing, "cannot open"]);
    assert!(!dir.exists(), "nothing written for a bad input");
}

/// `parse-pcap`: one line per packet in OVS's notation, JSON with the index and malformed
/// reason; a link type hyflow does not read is one clear error naming it.
#[test]
fn parse_pcap_prints_every_packet() {
    let mut short = tcp_frame();
    short.truncate(40); // IPv4 total length beyond the bytes present
    let pcap = tmp("p.pcap", &pcap_with(&[tcp_frame(), tcp6_frame(), short]));
    let out = hyflow(&["parse-pcap", pcap.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        "tcp,in_port=ANY,vlan_tci=0x0000,dl_src=00:00:00:00:00:01,dl_dst=00:00:00:00:00:02,\
         nw_src=10.1.0.1,nw_dst=10.1.0.2,nw_tos=0,nw_ecn=0,nw_ttl=64,nw_frag=no,tp_src=40000,tp_dst=80,tcp_flags=syn"
    );
    assert!(
        lines[1].starts_with("tcp6,")
            && lines[1].contains("ipv6_src=2001:db8::1,")
            && lines[1].contains("tp_dst=443")
    );
    assert!(lines[2].ends_with("nw_src=0.0.0.0,nw_dst=0.0.0.0,nw_proto=0,nw_tos=0,nw_ecn=0,nw_ttl=0,nw_frag=no  # malformed: bad_ipv4"), "{}", lines[2]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("3 packets, 1 malformed (bad_ipv4 1), 0 cut"));

    let json = hyflow(&["parse-pcap", pcap.to_str().unwrap(), "--json"]);
    let rows: Vec<serde_json::Value> =
        String::from_utf8_lossy(&json.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(rows.len(), 3);
    assert_eq!((rows[2]["i"].as_u64(), rows[2]["malformed"].as_str()), (Some(2), Some("bad_ipv4")));
    assert_eq!(rows[0]["malformed"], serde_json::Value::Null);
    assert_eq!(rows[0]["flow"].as_str(), Some(lines[0]));

    // 802.11 (link type 105): refused by name, once.
    let mut w = PcapWriter::new(Vec::new(), "mem".into(), LinkType::from_linktype(105), true).unwrap();
    w.write_packet(0, &[0; 30]).unwrap();
    let wifi = tmp("wifi.pcap", &w.finish().unwrap());
    fails_with(
        &hyflow(&["parse-pcap", wifi.to_str().unwrap()]),
        &["wifi.pcap", "link type 105 (IEEE 802.11) is not supported"],
    );
}

/// A reader that goes away (`| head`) ends the run quietly: no panic, killed by SIGPIPE or
/// exit 0.
#[test]
fn a_closed_pipe_ends_quietly() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    let frames: Vec<Vec<u8>> = (0..20_000).map(|i| tcp_frame_port(i % 500)).collect();
    let pcap = tmp("many.pcap", &pcap_with(&frames));
    let mut child = Command::new(env!("CARGO_BIN_EXE_hyflow"))
        .args(["parse-pcap", pcap.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
    assert!(first.starts_with("tcp,"));
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        assert!(out.status.success() || out.status.signal() == Some(13), "{:?}: {err}", out.status);
    }
}

/// `pcap` with every packet cut to `snaplen` bytes, the original lengths kept (what
/// `tcpdump -s SNAPLEN` writes). Little-endian pcap, as hyflow writes it.
fn cut_to_snaplen(pcap: &[u8], snaplen: u32) -> (Vec<u8>, usize) {
    let mut out = pcap[..24].to_vec();
    out[16..20].copy_from_slice(&snaplen.to_le_bytes());
    let (mut at, mut cut) = (24, 0);
    while at < pcap.len() {
        let incl = u32::from_le_bytes(pcap[at + 8..at + 12].try_into().unwrap()) as usize;
        let kept = incl.min(snaplen as usize);
        cut += usize::from(kept < incl);
        out.extend_from_slice(&pcap[at..at + 8]);
        out.extend_from_slice(&(kept as u32).to_le_bytes());
        out.extend_from_slice(&pcap[at + 12..at + 16]);
        out.extend_from_slice(&pcap[at + 16..at + 16 + kept]);
        at += 16 + incl;
    }
    (out, cut)
}

/// A capture taken with `-s 96` has every header: the same forwarding decisions and the same
/// top-k as the full capture, and the report says how many packets were cut.
#[test]
fn a_snaplen_96_capture_decides_as_the_full_one() {
    let flows = examples().join("l2l3acl.flows");
    let full = tmp("full.pcap", b"");
    let gen = hyflow(&[
        "gen",
        "traffic",
        "--flows",
        flows.to_str().unwrap(),
        "--out",
        full.to_str().unwrap(),
        "--packets",
        "20000",
        "--flows-count",
        "500",
    ]);
    assert!(gen.status.success(), "{}", String::from_utf8_lossy(&gen.stderr));
    let (cut_bytes, cut) = cut_to_snaplen(&std::fs::read(&full).unwrap(), 96);
    assert!(cut > 5_000, "{cut} packets cut: the test needs many");
    let short = tmp("cut.pcap", &cut_bytes);
    let run = |trace: &Path, extra: &[&str]| {
        let decisions = trace.with_extension("decisions");
        let mut args = vec!["replay", "--flows", flows.to_str().unwrap(), "--trace", trace.to_str().unwrap()];
        args.extend_from_slice(&["--decisions", decisions.to_str().unwrap()]);
        args.extend_from_slice(extra);
        let out = hyflow(&args);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        (std::fs::read_to_string(decisions).unwrap(), String::from_utf8(out.stdout).unwrap())
    };
    let (full_decisions, full_report) = run(&full, &[]);
    let (cut_decisions, cut_report) = run(&short, &[]);
    assert_eq!(full_decisions.lines().count(), 20_000);
    assert!(full_decisions == cut_decisions, "decisions differ");
    assert!(!full_report.contains("snaplen-truncated"), "{full_report}");
    assert!(
        cut_report.contains(&format!("snaplen-truncated packets {cut} (read from their captured headers)")),
        "{cut_report}"
    );
    assert!(cut_report.contains("malformed packets 0"), "{cut_report}");
    let topk = |trace: &Path| {
        let out = hyflow(&[
            "topk",
            "--trace",
            trace.to_str().unwrap(),
            "--window",
            "100ms",
            "--block",
            "20ms",
            "--json",
        ]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        out.stdout
    };
    let full_top = topk(&full);
    assert!(full_top.len() > 1_000);
    assert!(full_top == topk(&short), "top-k differs");
    // parse-pcap reads the cut capture as OVS does, unless asked for the wire lengths.
    let parse = |extra: &[&str]| {
        let mut args = vec!["parse-pcap", short.to_str().unwrap()];
        args.extend_from_slice(extra);
        String::from_utf8(hyflow(&args).stdout).unwrap()
    };
    assert!(parse(&[]).contains("# malformed: bad_ipv4"));
    let wire = parse(&["--wire-lengths"]);
    assert!(!wire.contains("malformed") && wire.lines().count() == 20_000);
}

/// Ordinary abuse, each ending in one clear message (or a warning) and never a panic or an
/// out-of-memory kill.
#[test]
fn the_cli_under_abuse() {
    // A file that is not there: its name and the system's reason, once, no position.
    let out = hyflow(&["trace", "--flows", "/nonexistent/x.flows", "in_port=1"]);
    fails_with(&out, &["/nonexistent/x.flows: cannot read: No such file or directory"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains(":0:0") && !err.contains("os error"), "{err}");
    let out = hyflow(&["topk", "--trace", "/nonexistent/t.pcap"]);
    fails_with(&out, &["/nonexistent/t.pcap: cannot open: No such file or directory"]);
    // A cache size that would not fit in memory: refused before allocating.
    let out = hyflow(&["replay", "--microflow-entries", "4000000000"]);
    fails_with(&out, &["--microflow-entries 4000000000", "at most 8388608 entries"]);
    // A generator count beyond what the traffic can hold.
    let pcap = tmp("b.pcap", b"");
    let out = hyflow(&["gen", "dynamic", "--out", pcap.to_str().unwrap(), "--bursts", "100000000"]);
    fails_with(&out, &["--bursts 100000000: at most 6000 for 600000 packets"]);
    fails_with(&hyflow(&["sim", "--cores", "100000"]), &["--cores 100000: at most 256"]);
    let flows = examples().join("l2l3acl.flows");
    let out = hyflow(&[
        "gen",
        "traffic",
        "--flows",
        flows.to_str().unwrap(),
        "--out",
        pcap.to_str().unwrap(),
        "--flows-count",
        "4000000000",
    ]);
    fails_with(&out, &["--flows-count 4000000000: at most 20000000"]);
    let out = hyflow(&[
        "gen",
        "updates",
        "--flows",
        flows.to_str().unwrap(),
        "--out",
        pcap.to_str().unwrap(),
        "--seconds",
        "1e12",
    ]);
    fails_with(&out, &["more than 100,000,000 updates"]);
    let trace = tmp("t.pcap", &pcap_with(&[tcp_frame()]));
    let out = hyflow(&["topk", "--trace", trace.to_str().unwrap(), "--memory", "99999999999"]);
    fails_with(&out, &["--memory 99999999999 B: at most 1073741824 B"]);
    let out = hyflow(&["gen", "dynamic", "--out", pcap.to_str().unwrap(), "--flows-count", "99999999999"]);
    fails_with(&out, &["--flows-count 99999999999: at most 20000000"]);
    // A negative number is a value to refuse with its range, not an unknown option.
    fails_with(&hyflow(&["sim", "--rate", "-1"]), &["--rate must be a positive number", "not -1"]);
    // `#-1` is a bad packet index, not a comment.
    let updates = tmp("u.txt", b"#-1 add priority=1,actions=drop\n");
    let out = hyflow(&["replay", "--updates", updates.to_str().unwrap()]);
    fails_with(&out, &["u.txt:1:1", "'#N' needs a packet index", "not '-1'"]);
    // An empty flow file runs, with a warning.
    let empty = tmp("empty.flows", b"# nothing\n");
    let trace = tmp("one.pcap", &pcap_with(&[tcp_frame()]));
    let out = hyflow(&["replay", "--flows", empty.to_str().unwrap(), "--trace", trace.to_str().unwrap()]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("empty.flows has no rules: every packet misses table 0"));
    // Hostile sizes end in one message without allocating them: a flow-file line of 2 MiB, a
    // pcapng block and a pcap record each claiming about 4 GB.
    let long = tmp("long.flows", format!("priority=1,{}actions=drop\n", "tcp,".repeat(600_000)).as_bytes());
    fails_with(
        &hyflow(&["trace", "--flows", long.to_str().unwrap(), "in_port=1"]),
        &["long.flows:1:1: line longer than 1048576 bytes"],
    );
    let mut ng = Vec::new();
    for word in
        [0x0A0D_0D0Au32, 28, 0x1A2B_3C4D, 1, 0xffff_ffff, 0xffff_ffff, 28, 1, 20, 1, 0, 20, 6, 0xffff_fffc]
    {
        ng.extend_from_slice(&word.to_le_bytes());
    }
    ng.extend_from_slice(&[0; 64]);
    let ng = tmp("big.pcapng", &ng);
    fails_with(
        &hyflow(&["parse-pcap", ng.to_str().unwrap()]),
        &["big.pcapng: byte 48", "block length 4294967292 exceeds the limit"],
    );
    let mut snap = pcap_with(&[]);
    snap[16..20].copy_from_slice(&u32::MAX.to_le_bytes());
    for word in [0u32, 0, 0xffff_fff0, 0xffff_fff0] {
        snap.extend_from_slice(&word.to_le_bytes());
    }
    let snap = tmp("snap.pcap", &snap);
    fails_with(
        &hyflow(&["parse-pcap", snap.to_str().unwrap()]),
        &["snap.pcap: byte 24", "captured length 4294967280 exceeds the limit"],
    );
    // `--json -`: stdout is the JSON alone, the human report on stderr.
    for cmd in [&["replay", "--json", "-"][..], &["sim", "--json", "-", "--cores", "2"][..]] {
        let out = hyflow(cmd);
        assert!(out.status.success(), "{cmd:?}: {}", String::from_utf8_lossy(&out.stderr));
        let json: serde_json::Value =
            serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
        assert!(json.is_object());
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("packets"),
            "{cmd:?}: the report went to stderr"
        );
    }
}

/// A dump with names (`ovs-ofctl --names dump-flows`) traces with `--ports` and `--tables`,
/// given as the output of `ovs-ofctl show` and `dump-table-features`; replay loads it too, with
/// an updates file that uses the same names.
#[test]
fn named_dumps_load_with_port_and_table_files() {
    let dump = tmp(
        "dump.txt",
        b"NXST_FLOW reply (xid=0x4):\n \
          cookie=0x0, duration=3.2s, table=Classifier, n_packets=4, n_bytes=240, idle_age=1, priority=200,in_port=\"antrea-gw0\",ip actions=goto_table:Output\n \
          cookie=0x0, duration=3.2s, table=Classifier, n_packets=0, n_bytes=0, priority=0 actions=drop\n \
          cookie=0x0, duration=3.2s, table=Output, n_packets=4, n_bytes=240, priority=0 actions=output:\"antrea-tun0\"\n",
    );
    let ports = tmp(
        "show.txt",
        b"OFPT_FEATURES_REPLY (xid=0x2): dpid:0000b2e4d1b8a84c\nn_tables:254, n_buffers:0\n \
          1(antrea-tun0): addr:aa:55:aa:55:00:01\n     config:     0\n \
          2(antrea-gw0): addr:aa:55:aa:55:00:02\n LOCAL(br-int): addr:b2:e4:d1:b8:a8:4c\n",
    );
    let tables = tmp(
        "tables.txt",
        b"  table 0 (\"Classifier\"):\n  table 5 (\"Output\"): ditto\n  tables 6...252: ditto\n",
    );
    let (d, p, t) = (dump.to_str().unwrap(), ports.to_str().unwrap(), tables.to_str().unwrap());
    let out =
        hyflow(&["trace", "--flows", d, "--ports", p, "--tables", t, "in_port=\"antrea-gw0\",ip", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let record: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(record["outputs"][0]["port"], 1);
    assert_eq!(record["tables"].as_array().unwrap().len(), 2);
    // Without the names: the first name the dump uses, with where it is.
    fails_with(
        &hyflow(&["trace", "--flows", d, "in_port=1"]),
        &["dump.txt:2:", "unknown table 'Classifier'"],
    );
    fails_with(
        &hyflow(&["trace", "--flows", d, "--tables", t, "in_port=1"]),
        &["unknown port '\"antrea-gw0\"'"],
    );
    let updates =
        tmp("updates.txt", b"#2 add table=Classifier,priority=300,in_port=\"antrea-gw0\" actions=drop\n");
    let trace = tmp("t.pcap", &pcap_with(&[tcp_frame(), tcp_frame(), tcp_frame(), tcp_frame()]));
    let out = hyflow(&[
        "replay",
        "--flows",
        d,
        "--ports",
        p,
        "--tables",
        t,
        "--trace",
        trace.to_str().unwrap(),
        "--in-port",
        "2",
        "--updates",
        updates.to_str().unwrap(),
        "--json",
        "-",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&out.stdout).lines().last().unwrap()).unwrap();
    assert_eq!(report["updates"], 1);
}

/// A conjunction some clause of which no flow provides loads (Open vSwitch accepts it) with a
/// warning naming where it is; a clause-count disagreement too.
#[test]
fn incomplete_conjunctions_are_warned_about_with_their_place() {
    let flows = tmp(
        "conj.flows",
        b"priority=100,ip actions=conjunction(5,1/3)\n\
          priority=100,tcp actions=conjunction(5,2/3)\n\
          priority=100,udp actions=conjunction(6,1/2)\n\
          priority=100,in_port=1 actions=conjunction(6,2/3)\n\
          priority=100,conj_id=5 actions=output:2\n",
    );
    let out = hyflow(&["trace", "--flows", flows.to_str().unwrap(), "in_port=1,tcp"]);
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("conj.flows:1:25: conjunction 5 in table 0 at priority 100 never matches: no flow is its clause 3 of 3"),
        "{err}"
    );
    assert!(err.contains("conj.flows:4:32: conjunction 6 has 3 clauses here but 2 at line 3"), "{err}");
    assert!(err.contains("conj.flows:3:26: conjunction 6 in table 0 at priority 100 never matches: no flow is its clause 2 of 2"), "{err}");
}

/// Meters load (OVS's flows use them) with one warning saying their rate limits are not
/// modelled, naming the first.
#[test]
fn meters_are_accepted_and_reported_as_not_modelled() {
    let flows = tmp(
        "meters.flows",
        b"priority=10,ip actions=meter:1,output:2\npriority=5 actions=meter:2,output:3\n",
    );
    let out = hyflow(&["trace", "--flows", flows.to_str().unwrap(), "in_port=1,ip"]);
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("meters.flows:1:24: 2 flow(s) use meters: accepted, but rate limits are not modelled"),
        "{err}"
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("Datapath actions: 2"));
}

const FIREWALL: &[u8] = b"table=0,priority=100,ip,ct_state=-trk actions=ct(table=1,zone=1)\n\
    table=0,priority=1 actions=output:2\n\
    table=1,priority=100,ip,ct_state=+trk+new actions=ct(commit,zone=1,nat(dst=10.8.0.5:8080)),output:2\n\
    table=1,priority=100,ip,ct_state=+trk+est actions=ct(zone=1,nat),output:3\n\
    table=1,priority=1 actions=drop\n";

/// `--prefixes` sets the tables' prefix tries as OVS's `Flow_Table` `prefixes`: with the
/// default (ip_dst, ip_src) one bit of nw_dst rules 10.0.0.0/8 out; with none the megaflow
/// takes the subtable's /8; replay and sim accept it too, and a field without a trie is refused.
#[test]
fn prefixes_set_the_tables_tries() {
    let flows = tmp(
        "prefixes.flows",
        b"priority=10,ip,nw_dst=10.0.0.0/8 actions=output:2\npriority=1,ip actions=output:3\n",
    );
    let f = flows.to_str().unwrap();
    let packet = "in_port=1,ip,nw_dst=192.168.1.1";
    let megaflow = |extra: &[&str]| {
        let mut args = vec!["trace", "--flows", f];
        args.extend_from_slice(extra);
        args.push(packet);
        let out = hyflow(&args);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8(out.stdout).unwrap();
        text.lines().find(|l| l.starts_with("Megaflow:")).expect("a megaflow line").to_string()
    };
    assert!(megaflow(&[]).contains("nw_dst=128.0.0.0/1"), "{}", megaflow(&[]));
    assert_eq!(megaflow(&[]), megaflow(&["--prefixes", "ip_dst,ip_src"]));
    assert!(megaflow(&["--prefixes", "none"]).contains("nw_dst=192.0.0.0/8"));
    assert!(megaflow(&["--prefixes", "ip_src"]).contains("nw_dst=192.0.0.0/8"));
    let out = hyflow(&["replay", "--prefixes", "none", "--json", "-"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = hyflow(&["trace", "--flows", f, "--prefixes", "ip_dst,tp_dst", packet]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("'tp_dst' has no prefix trie"));
}

#[test]
fn trace_follows_recirculation_with_the_states_given() {
    let flows = tmp("fw.flows", FIREWALL);
    let packet = "in_port=1,tcp,nw_src=10.0.0.1,nw_dst=10.96.0.1,tp_src=1000,tp_dst=80";
    let f = flows.to_str().unwrap();
    let out = hyflow(&["trace", "--flows", f, packet]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("Datapath actions: ct(zone=1),recirc(0x1)"), "{text}");
    assert!(text.contains("recirc(0x1) - resume conntrack with default ct_state=trk|new"), "{text}");
    assert!(text.contains("Megaflow: recirc_id=0x1,ct_state=+new+trk,ip,"), "{text}");
    assert!(text.contains("Datapath actions: ct(commit,zone=1,nat(dst=10.8.0.5:8080)),2"), "{text}");
    let out = hyflow(&["trace", "--flows", f, "--ct-next", "trk,est", "--json", packet]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let second = &v["recirculations"][0];
    assert_eq!(second["ct_state"], "est|trk");
    assert_eq!(second["datapath_actions"], "ct(zone=1,nat),3");
    // Clap's own message: the option, the value and why.
    for (state, why) in
        [("trk,bogus", "bogus: unknown connection tracking state flag"), ("new", "If \"trk\" is unset")]
    {
        let out = hyflow(&["trace", "--flows", f, "--ct-next", state, packet]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success());
        assert!(
            err.contains(&format!("invalid value '{state}' for '--ct-next <STATE>'")) && err.contains(why),
            "{err}"
        );
    }
}

#[test]
fn replay_reports_passes_and_the_connection_tracker() {
    let flows = tmp("fw.flows", FIREWALL);
    let pcap = examples().join("../crates/hyflow/tests/data/pcap-corpus/captures/of13_ericsson.pcapng");
    let args = ["replay", "--flows", flows.to_str().unwrap(), "--trace", pcap.to_str().unwrap()];
    let out = hyflow(&[&args[..], &["--json", "-"]].concat());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let r = &v["recirculation"];
    let first: u64 =
        ["nic", "microflow", "megaflow", "upcalls"].iter().map(|k| r["passes"][0][k].as_u64().unwrap()).sum();
    let second: u64 =
        ["nic", "microflow", "megaflow", "upcalls"].iter().map(|k| r["passes"][1][k].as_u64().unwrap()).sum();
    assert!(r["recirculations"].as_u64().unwrap() > 0, "{r}");
    assert_eq!(second, r["recirculations"].as_u64().unwrap(), "every recirculation is a second pass here");
    assert_eq!(first, v["packets"].as_u64().unwrap());
    assert_eq!(r["passes"][0]["nic"], 0, "the NIC has no connection tracker: {r}");
    assert!(r["conntrack"]["committed"].as_u64().unwrap() > 0, "{r}");
    let text = String::from_utf8(hyflow(&args).stdout).unwrap();
    assert!(text.contains("recirculation: ") && text.contains("conntrack: "), "{text}");
    // A NIC that tracks every connection takes first and later passes.
    let out = hyflow(&[&args[..], &["--nic-conntrack", "all", "--json", "-"]].concat());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let passes = &v["recirculation"]["passes"];
    assert!(passes[0]["nic"].as_u64().unwrap() > 0 && passes[1]["nic"].as_u64().unwrap() > 0, "{passes}");
}

/// `--nic-conntrack established`: the NIC tracks the connections software saw established; in
/// `replay` and `sim` alike, new connections' packets go to software and the rest stay in
/// hardware, with the same outputs.
#[test]
fn a_nic_tracking_established_connections_in_replay_and_sim() {
    let flows = tmp("fw-est.flows", FIREWALL);
    let spec = tmp(
        "conv-est.spec",
        b"in_port=1,tcp,nw_src=10.0.0.1,nw_dst=10.96.0.1,tp_dst=80
in_port=1,udp,nw_src=10.0.0.1,nw_dst=10.0.0.7,tp_dst=53
",
    );
    let pcap = spec.with_file_name("conv-est.pcapng");
    let (f, s, o) = (flows.to_str().unwrap(), spec.to_str().unwrap(), pcap.to_str().unwrap());
    let out =
        hyflow(&["gen", "conversations", "--flows", f, "--spec", s, "--out", o, "--conversations", "300"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let base = ["--flows", f, "--trace", o, "--nic-conntrack", "established"];
    let out = hyflow(&[&["replay"][..], &base, &["--json", "-"]].concat());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let r = &v["recirculation"];
    let (nic, packets) = (r["passes"][0]["nic"].as_u64().unwrap(), v["packets"].as_u64().unwrap());
    assert!(nic > packets / 4 && nic < packets, "the NIC takes established connections only: {r}");
    assert!(r["conntrack"]["offloaded"].as_u64().unwrap() >= 250, "{r}");
    assert!(r["nic_conntrack_misses"].as_u64().unwrap() > 0, "{r}");
    let text = String::from_utf8(hyflow(&[&["replay"][..], &base].concat()).stdout).unwrap();
    assert!(text.contains("NIC connection table: "), "{text}");
    // sim times it: per packet, the outputs replay gives.
    let decisions = |cmd: &str| -> Vec<serde_json::Value> {
        let out = hyflow(&[&[cmd][..], &base, &["--decisions", "-"]].concat());
        assert!(out.status.success(), "{cmd}: {}", String::from_utf8_lossy(&out.stderr));
        out.stdout
            .split(|&b| b == b'\n')
            .filter(|l| l.starts_with(b"{"))
            .map(|l| serde_json::from_slice::<serde_json::Value>(l).unwrap()["outputs"].clone())
            .collect()
    };
    let (replayed, simulated) = (decisions("replay"), decisions("sim"));
    assert_eq!(replayed.len() as u64, packets);
    assert_eq!(replayed, simulated);
}

#[test]
fn conversations_replay_through_the_firewall_both_ways() {
    let flows = tmp("fw.flows", FIREWALL);
    let spec = tmp("conv.spec", b"# to the service\nweight=2 in_port=1,tcp,nw_src=10.0.0.1,nw_dst=10.96.0.1,tp_dst=80\nin_port=1,udp,nw_src=10.0.0.1,nw_dst=10.0.0.7,tp_dst=53\n");
    let out_file = spec.with_file_name("conv.pcapng");
    let (f, s, o) = (flows.to_str().unwrap(), spec.to_str().unwrap(), out_file.to_str().unwrap());
    let out =
        hyflow(&["gen", "conversations", "--flows", f, "--spec", s, "--out", o, "--conversations", "300"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let said = String::from_utf8(out.stdout).unwrap();
    assert!(said.contains("of 300 conversations (300 answered, 0 unanswered)"), "{said}");
    let out = hyflow(&["replay", "--flows", f, "--trace", o, "--json", "-"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let ct = &v["recirculation"]["conntrack"];
    assert_eq!(ct["invalid"], 0, "{v}");
    assert!(ct["translated"].as_u64().unwrap() > 1000, "{v}");
    // A bad spec line: file, line, column, token.
    let bad = tmp("bad.spec", b"in_port=1,tcp,nw_dst=10.0.0.300\n");
    let out = hyflow(&["gen", "conversations", "--flows", f, "--spec", bad.to_str().unwrap(), "--out", o]);
    fails_with(&out, &["bad.spec:1:", "10.0.0.300"]);
}

/// The Antrea and OVN examples load, their packets trace, and their conversations replay
/// through conntrack without an invalid packet, every layer agreeing with the slow path.
#[test]
fn the_antrea_and_ovn_examples_run() {
    let ex = examples();
    let antrea = ex.join("antrea");
    let a = |f: &str| antrea.join(f).to_str().unwrap().to_string();
    let names = ["--ports", &a("ports.txt"), "--tables", &a("tables.txt"), "--groups", &a("groups.txt")]
        .map(String::from);
    let ovn = ex.join("ovn");
    let o = |f: &str| ovn.join(f).to_str().unwrap().to_string();
    for (flows, names, packets, spec) in [
        (a("antrea.flows"), names.to_vec(), a("packets.txt"), a("conversations.txt")),
        (
            o("ovn.flows"),
            vec!["--ports".to_string(), o("ports.txt")],
            o("packets.txt"),
            o("conversations.txt"),
        ),
    ] {
        let with = |cmd: &[&str], extra: &[&str]| {
            let mut args: Vec<&str> = cmd.to_vec();
            args.extend(["--flows", &flows]);
            args.extend(names.iter().map(String::as_str));
            args.extend_from_slice(extra);
            hyflow(&args)
        };
        let out = with(&["trace"], &["--packets", &packets]);
        assert!(out.status.success(), "{flows}: {}", String::from_utf8_lossy(&out.stderr));
        assert!(
            String::from_utf8(out.stdout).unwrap().contains("recirc("),
            "{flows}: no packet recirculates"
        );
        let pcap = tmp("conv.pcapng", b"");
        let out = with(
            &["gen", "conversations"],
            &["--spec", &spec, "--out", pcap.to_str().unwrap(), "--conversations", "400"],
        );
        assert!(out.status.success(), "{flows}: {}", String::from_utf8_lossy(&out.stderr));
        let mut runs = Vec::new();
        for layers in [&["--no-cache"][..], &[][..]] {
            let mut extra = vec!["--trace", pcap.to_str().unwrap(), "--decisions", "-"];
            extra.extend_from_slice(layers);
            let out = with(&["replay"], &extra);
            assert!(out.status.success(), "{flows}: {}", String::from_utf8_lossy(&out.stderr));
            runs.push(out.stdout);
        }
        // Per packet, the same outputs with and without caches.
        let outputs = |run: &[u8]| -> Vec<serde_json::Value> {
            run.split(|&b| b == b'\n')
                .filter(|l| l.starts_with(b"{"))
                .map(|l| serde_json::from_slice::<serde_json::Value>(l).unwrap()["outputs"].clone())
                .collect()
        };
        let (reference, cached) = (outputs(&runs[0]), outputs(&runs[1]));
        assert!(reference.len() > 3000, "{flows}: {} decisions", reference.len());
        assert_eq!(reference, cached, "{flows}");
        let out = with(&["replay"], &["--trace", pcap.to_str().unwrap(), "--json", "-"]);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let r = &v["recirculation"];
        assert_eq!(r["conntrack"]["invalid"], 0, "{flows}: {r}");
        assert!(r["recirculations"].as_u64().unwrap() >= v["packets"].as_u64().unwrap() / 2, "{flows}: {r}");
    }
}

fn json_of(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// The counters people look for (issue 31, part 5): replay and sim say how many packets
/// were forwarded and how many dropped (per deciding layer in replay's table), count every
/// port's packets and bytes both ways as `ovs-ofctl dump-ports` does, and keep microflow
/// evictions apart from invalidations. Whatever the layers, and whether `sim` builds the
/// copies or only counts them, the counts are the same.
#[test]
fn replay_and_sim_count_forwarded_dropped_and_ports() {
    let dir = tmp("counters", b"").parent().unwrap().to_path_buf();
    let mut reports = Vec::new();
    for (name, args) in [
        ("all.json", vec!["replay"]),
        ("none.json", vec!["replay", "--no-cache"]),
        ("giga.json", vec!["replay", "--nic", "gigaflow"]),
        ("sim.json", vec!["sim"]),
    ] {
        let json = dir.join(name);
        let mut a = args.clone();
        a.extend(["--json", json.to_str().unwrap()]);
        let out = hyflow(&a);
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(
            text.contains("forwarded ") && text.contains("  port  1: rx pkts=200000"),
            "{args:?}: {text}"
        );
        reports.push((args, json_of(&json), text));
    }
    let replay = &reports[0].1;
    let packets = replay["packets"].as_u64().unwrap();
    let (forwarded, dropped) = (replay["forwarded"].as_u64().unwrap(), replay["dropped"].as_u64().unwrap());
    assert_eq!(forwarded + dropped, packets);
    // The built-in workload drops most of what the NIC handles.
    let by_layer = &replay["dropped_by_layer"];
    assert!(by_layer["nic"].as_u64().unwrap() * 2 > replay["nic_hits"].as_u64().unwrap(), "{by_layer}");
    let ports = replay["ports"].as_array().unwrap();
    let sum = |k: &str| ports.iter().map(|p| p[k].as_u64().unwrap()).sum::<u64>();
    assert_eq!(sum("rx_packets"), packets);
    assert_eq!(sum("rx_bytes"), replay["bytes"].as_u64().unwrap());
    assert!(sum("tx_packets") >= forwarded, "a forwarded packet sends at least one copy");
    for (args, other, _) in &reports[1..] {
        for key in ["forwarded", "dropped", "ports"] {
            assert_eq!(other[key], replay[key], "{args:?}: {key}");
        }
    }
    // Evictions (bucket full) and invalidations (rule updates) apart, in both reports.
    let replay_text = &reports[0].2;
    assert!(replay_text.contains(" evicted ") && replay_text.contains(" invalid "), "{replay_text}");
    let sim = &reports[3].1;
    assert!(sim["host"]["microflow_evictions"].as_u64().unwrap() > 0);
    assert!(sim["host"]["microflow_invalidated"].as_u64().unwrap() > 0);
    assert!(reports[3].2.contains("microflow evictions "), "{}", reports[3].2);
}

/// `replay --dump-megaflows` and `--dump-nic` write the caches at the end as
/// `ovs-appctl dpctl/dump-flows` lists datapath flows: one line per entry (as many as the
/// report says are held), each `MATCH, packets:N, bytes:N, used:T, actions:A` whose match
/// loads back as a flow's, and whose counters add up to the hits of entries still held.
#[test]
fn replay_dumps_megaflows_and_nic_entries_like_dpctl() {
    let flows = examples().join("l2l3acl.flows");
    let pcap = tmp("dump.pcap", b"");
    let out = hyflow(&[
        "gen",
        "traffic",
        "--flows",
        flows.to_str().unwrap(),
        "--packets",
        "5000",
        "--out",
        pcap.to_str().unwrap(),
    ]);
    assert!(out.status.success());
    let dir = pcap.parent().unwrap();
    let (mf, nic, json) = (dir.join("mf.txt"), dir.join("nic.txt"), dir.join("r.json"));
    for extra in [vec!["--no-nic"], vec![]] {
        let mut args = vec!["replay", "--flows", flows.to_str().unwrap(), "--trace", pcap.to_str().unwrap()];
        args.extend(&extra);
        args.extend([
            "--dump-megaflows",
            mf.to_str().unwrap(),
            "--dump-nic",
            nic.to_str().unwrap(),
            "--json",
            json.to_str().unwrap(),
        ]);
        let out = hyflow(&args);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let report = json_of(&json);
        for (file, entries_key, hits_key, removed) in [
            (&mf, "megaflow_entries_now", "megaflow_hits", ["megaflow_expired", "megaflow_revalidated"]),
            (&nic, "nic_entries_now", "nic_hits", ["nic_expired", "nic_revalidated"]),
        ] {
            let text = std::fs::read_to_string(file).unwrap();
            let lines: Vec<&str> = text.lines().collect();
            assert_eq!(lines.len() as u64, report[entries_key].as_u64().unwrap(), "{extra:?} {entries_key}");
            let mut packets = 0;
            for line in &lines {
                let (matcher, rest) = line.split_once(", packets:").expect(line);
                let fields: Vec<&str> = rest.split(", ").collect();
                assert!(fields[1].starts_with("bytes:") && fields[2].starts_with("used:"), "{line}");
                assert!(fields[3].starts_with("actions:"), "{line}");
                packets += fields[0].parse::<u64>().unwrap();
                let rule = tmp("rule.flows", format!("priority=1,{matcher},actions=drop\n").as_bytes());
                let parsed = hyflow(&["trace", "--flows", rule.to_str().unwrap(), "in_port=1"]);
                assert!(parsed.status.success(), "{line}: {}", String::from_utf8_lossy(&parsed.stderr));
            }
            // Nothing left the caches (no update, no expiry, no recirculation on this input):
            // the entries held saw every hit.
            assert!(removed.iter().all(|k| report[*k] == 0) && report["recirculation"].is_null(), "{report}");
            assert_eq!(packets, report[hits_key].as_u64().unwrap(), "{extra:?}: {hits_key}");
        }
    }
}

/// `trace` prints the rules' ports and tables by name when the switch names them, as
/// `ovs-ofctl --names` does (issue 31, part 9), and numbers when it does not.
#[test]
fn trace_prints_names_it_was_given() {
    let antrea = examples().join("antrea");
    let path = |f: &str| antrea.join(f).to_str().unwrap().to_string();
    let (flows, tables, ports, groups, packets) = (
        path("antrea.flows"),
        path("tables.txt"),
        path("ports.txt"),
        path("groups.txt"),
        path("packets.txt"),
    );
    let out = hyflow(&[
        "trace",
        "--flows",
        &flows,
        "--tables",
        &tables,
        "--ports",
        &ports,
        "--groups",
        &groups,
        "--packets",
        &packets,
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    for named in
        [" 3. Classifier: in_port=\"client-7-a1b2c3\"", "goto_table:SpoofGuard", "ct(table=ConntrackState,"]
    {
        assert!(text.contains(named), "{named:?} in\n{text}");
    }
    // Datapath-level lines keep the datapath's numbers.
    assert!(text.contains("Megaflow: recirc_id=0,ip,in_port=3,"), "{text}");
    let plain =
        hyflow(&["trace", "--flows", examples().join("l2l3acl.flows").to_str().unwrap(), "in_port=1,ip"]);
    let plain = String::from_utf8_lossy(&plain.stdout);
    assert!(
        plain.contains(" 0. ") && !plain.contains(" 0. ip:") && plain.contains("goto_table:1"),
        "{plain}"
    );
}

/// `convert` writes a `.hyf` that `replay` and `sim` read as they read its capture, and names
/// what is wrong with a file that is not one.
#[test]
fn columnar_traces_run_as_their_captures() {
    let flows = examples().join("l2l3acl.flows");
    let flows = flows.to_str().unwrap();
    let dir = tmp("unused", b"");
    let pcap = dir.with_file_name("t.pcap");
    let hyf = dir.with_file_name("t.hyf");
    let (pcap_s, hyf_s) = (pcap.to_str().unwrap(), hyf.to_str().unwrap());
    let made = hyflow(&["gen", "traffic", "--flows", flows, "--out", pcap_s, "--packets", "3000"]);
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let out = hyflow(&["convert", pcap_s, hyf_s]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("wrote 3000 packets of "), "{out:?}");
    let report = |command: &str, trace: &str, extra: &[&str]| {
        let mut args = vec![command, "--flows", flows, "--trace", trace, "--json", "-"];
        args.extend_from_slice(extra);
        let out = hyflow(&args);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let mut v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v.as_object_mut().unwrap().remove("wall_clock");
        v
    };
    assert_eq!(report("replay", pcap_s, &[]), report("replay", hyf_s, &[]));
    let sim = ["--cores", "1", "--rate", "2000000"];
    assert_eq!(report("sim", pcap_s, &sim), report("sim", hyf_s, &sim));
    // An exact-match NIC finds a numbered flow's entry by its number: the same run.
    let elixir = [
        &sim[..],
        &["--policy", "elixir", "--identification-window", "0.0004", "--replacement-window", "0.0002"],
    ]
    .concat();
    let (from_pcap, from_hyf) = (report("sim", pcap_s, &elixir), report("sim", hyf_s, &elixir));
    assert!(from_pcap["hw_packets"].as_u64().unwrap() > 100, "{from_pcap}");
    assert_eq!(from_pcap, from_hyf);
    // `gen --out X.hyf` writes the trace straight away.
    let direct = dir.with_file_name("direct.hyf");
    let made =
        hyflow(&["gen", "traffic", "--flows", flows, "--out", direct.to_str().unwrap(), "--packets", "3000"]);
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    assert_eq!(std::fs::read(&direct).unwrap(), std::fs::read(&hyf).unwrap());
    fails_with(
        &hyflow(&["convert", pcap_s, dir.with_file_name("t.pcap2").to_str().unwrap()]),
        &["ends in .hyf"],
    );
    let whole = std::fs::read(&hyf).unwrap();
    let damaged = tmp("damaged.hyf", &whole[..whole.len() - 3]);
    let out = hyflow(&["replay", "--flows", flows, "--trace", damaged.to_str().unwrap()]);
    fails_with(&out, &["damaged.hyf: not a valid .hyf trace: the file's end is not where the header says"]);
    // Frames cannot be sent from flow keys.
    fails_with(&hyflow(&["send", "--iface", "lo", "--trace", hyf_s]), &["holds flow keys, not frames"]);
}
