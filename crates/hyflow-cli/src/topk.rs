//! `hyflow topk` and `hyflow eval topk`: real-time large flows of a trace, and how well each
//! detector finds them against the exact sliding-window answer.

use std::io::{BufWriter, Write};
use std::path::PathBuf;

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use hyflow::experiment::topk::{topk, EvalConfig, TopkConfig, TopkReport};
use hyflow::input::Input;
use hyflow::measure::{Algo, DetectorConfig, KeySpec, Span};

use crate::replay::Progress;

#[derive(Args)]
pub struct TopkArgs {
    /// pcap/pcapng trace.
    #[arg(long, value_name = "FILE")]
    trace: PathBuf,
    /// Detector: fastkeeper-bitmap, fastkeeper, sl-hk (sliding HeavyKeeper), elixir, wcss,
    /// heavykeeper, cm (Count-Min + heap), univmon, spacesaving, lossy.
    #[arg(long, default_value = "fastkeeper-bitmap", value_name = "ALGO")]
    algo: String,
    #[command(flatten)]
    common: Common,
    /// Memory budget: bytes, or with a unit (KB = 1024 B, MB).
    #[arg(long, default_value = "30KB", value_name = "SIZE")]
    memory: String,
    /// Flows reported per boundary.
    #[arg(long, default_value_t = 100)]
    k: usize,
    /// One JSON object per boundary per line:
    /// {"t": seconds since the first packet, "flows": [{"key": {...}, "count": n}, ...]}.
    #[arg(long)]
    json: bool,
}

/// Options shared by `topk` and `eval topk`.
#[derive(Args)]
struct Common {
    /// Window: a time (5s, 500ms) or a packet count (1290000pkts).
    #[arg(long, default_value = "5s", value_name = "SPAN")]
    window: String,
    /// Block (the window slides by one block): same unit as --window, dividing it.
    #[arg(long, default_value = "1s", value_name = "SPAN")]
    block: String,
    /// Sampling rate in (0, 1]; counts are scaled back by 1 / rate.
    #[arg(long, default_value_t = 1.0, value_name = "R")]
    sample: f64,
    /// Flow key: 5tuple (IPv4, 13-byte ids, the papers' key), 5tuple46 (IPv4 and IPv6,
    /// 37-byte ids; IPv4 addresses shown as ::ffff:a.b.c.d), or comma-separated ovs-ofctl
    /// fields of at most 384 bits in all (e.g. nw_src,nw_dst or ipv6_src,ipv6_dst).
    #[arg(long, default_value = "5tuple", value_name = "FIELDS")]
    key: String,
    /// Seed of hashes and sampling.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

impl Common {
    fn parse(&self) -> Result<(KeySpec, Span, usize)> {
        let spec = KeySpec::parse(&self.key).map_err(|e| anyhow!("--key: {e}"))?;
        let window = Span::parse(&self.window).map_err(|e| anyhow!("--window {e}"))?;
        let block = Span::parse(&self.block).map_err(|e| anyhow!("--block {e}"))?;
        let blocks = Span::blocks(window, block)?;
        Ok((spec, block, blocks))
    }
}

#[derive(Args)]
pub struct EvalTopkArgs {
    /// pcap/pcapng trace.
    #[arg(long, value_name = "FILE")]
    trace: PathBuf,
    /// Comma-separated detectors.
    #[arg(
        long,
        default_value = "fastkeeper-bitmap,fastkeeper,sl-hk,elixir,wcss,heavykeeper,cm,univmon,spacesaving,lossy",
        value_name = "ALGOS"
    )]
    algos: String,
    #[command(flatten)]
    common: Common,
    /// Comma-separated memory budgets (KB = 1024 B).
    #[arg(long, default_value = "30KB", value_name = "SIZES")]
    memory: String,
    /// Comma-separated values of k.
    #[arg(long, default_value = "100", value_name = "KS")]
    k: String,
    /// Print CSV instead of a table.
    #[arg(long, conflicts_with = "json")]
    csv: bool,
    /// Print one JSON object per configuration per line.
    #[arg(long)]
    json: bool,
}

/// `30KB`, `1MB`, `4096`, `512B`.
fn parse_size(text: &str) -> Result<usize> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let v: f64 = num.parse().map_err(|_| anyhow!("'{text}': expected a size such as 30KB"))?;
    let scale = match unit.to_ascii_uppercase().as_str() {
        "" | "B" => 1.0,
        "KB" | "KIB" | "K" => 1024.0,
        "MB" | "MIB" | "M" => 1024.0 * 1024.0,
        _ => bail!("'{text}': unknown unit '{unit}' (B, KB, MB)"),
    };
    let bytes = v * scale;
    if !(bytes >= 1.0 && bytes.is_finite()) {
        bail!("'{text}': must be at least one byte");
    }
    Ok(bytes as usize)
}

fn algo(name: &str) -> Result<Algo> {
    Algo::from_name(name.trim()).ok_or_else(|| {
        let names: Vec<&str> = Algo::ALL.iter().map(|a| a.name()).collect();
        anyhow!("unknown algorithm '{}' (one of: {})", name.trim(), names.join(", "))
    })
}

pub fn run(a: TopkArgs) -> Result<()> {
    let (key, block, blocks) = a.common.parse()?;
    let detector = DetectorConfig {
        k: a.k,
        memory: parse_size(&a.memory).context("--memory")?,
        blocks,
        sample: a.common.sample,
        seed: a.common.seed,
        key_bits: key.bits(),
    };
    let config = TopkConfig { algo: algo(&a.algo)?, detector, key, block };
    let stdout = std::io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let progress = Progress::new("topk");
    let summary = topk(&capture(&a.trace), &config, &mut |n, at| progress.tick(n, at), &mut |r| {
        write_report(&mut out, a.json, r)
    })?;
    progress.finish();
    out.flush()?;
    eprintln!(
        "hyflow topk: {} packets ({} malformed, {} without the key fields, not counted); {} used {} B of {} B",
        summary.packets,
        summary.malformed,
        summary.keyless,
        config.algo.name(),
        summary.memory_used,
        config.detector.memory
    );
    if summary.snaplen_truncated > 0 {
        eprintln!(
            "hyflow topk: {} packets were cut to the capture's snapshot length; read from their headers",
            summary.snaplen_truncated
        );
    }
    if summary.keyless_ipv6 > 0 && config.key.is_ipv4_five_tuple() {
        eprintln!(
            "hyflow topk: the 5tuple key is IPv4's (the papers'); --key 5tuple46 counts IPv6 packets too"
        );
    }
    Ok(())
}

fn capture(path: &std::path::Path) -> Input {
    Input::Capture { path: path.to_path_buf(), in_port: None }
}

fn write_report(out: &mut impl Write, as_json: bool, r: &TopkReport) -> std::io::Result<()> {
    if as_json {
        serde_json::to_writer(&mut *out, r)?;
        return writeln!(out);
    }
    match &r.short {
        None => writeln!(out, "t = {:.3} s ({} packets): {} flows", r.t, r.packets, r.flows.len())?,
        Some(why) => writeln!(
            out,
            "t = {:.3} s ({} packets): {} flows, fewer than k: {why}",
            r.t,
            r.packets,
            r.flows.len()
        )?,
    }
    for (rank, f) in r.flows.iter().enumerate() {
        let fields: Vec<String> = f.key.0.iter().map(|(n, v)| format!("{n}={v}")).collect();
        writeln!(out, "  {:>4} {:>10}  {}", rank + 1, f.count, fields.join(","))?;
    }
    Ok(())
}

pub fn eval(a: EvalTopkArgs) -> Result<()> {
    let (key, block, blocks) = a.common.parse()?;
    let config = EvalConfig {
        algos: a.algos.split(',').map(algo).collect::<Result<_>>()?,
        memories: a.memory.split(',').map(|m| parse_size(m).context("--memory")).collect::<Result<_>>()?,
        ks: a
            .k
            .split(',')
            .map(|k| k.trim().parse::<usize>().map_err(|_| anyhow!("--k: '{}' is not a number", k.trim())))
            .collect::<Result<_>>()?,
        blocks,
        block,
        sample: a.common.sample,
        seed: a.common.seed,
        key,
    };
    let progress = Progress::new("eval topk");
    let rows =
        hyflow::experiment::topk::eval(&capture(&a.trace), &config, &mut |n, at| progress.tick(n, at))?;
    progress.finish();
    let stdout = std::io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    if a.csv {
        writeln!(out, "algo,memory_bytes,memory_used,k,precision,are,windows")?;
    } else if !a.json {
        writeln!(out, "| algo | memory | used B | k | precision | ARE | windows |")?;
        writeln!(out, "|---|---|---|---|---|---|---|")?;
    }
    for r in &rows {
        if let Some(w) = &r.warning {
            eprintln!("hyflow eval topk: {} at {} B, k = {}: {w}", r.algo, r.memory_bytes, r.k);
        }
        if a.json {
            writeln!(out, "{}", serde_json::to_string(r)?)?;
            continue;
        }
        match (r.memory_used, r.precision, r.are, r.windows) {
            (Some(used), Some(p), Some(are), Some(windows)) if a.csv => {
                writeln!(out, "{},{},{used},{},{p:.4},{are:.4},{windows}", r.algo, r.memory_bytes, r.k)?
            }
            (Some(used), Some(p), Some(are), Some(windows)) => writeln!(
                out,
                "| {} | {} KB | {used} | {} | {p:.3} | {are:.3} | {windows} |",
                r.algo,
                r.memory_bytes / 1024,
                r.k
            )?,
            (Some(used), None, None, Some(windows)) if a.csv => {
                writeln!(out, "{},{},{used},{},,,{windows}", r.algo, r.memory_bytes, r.k)?
            }
            (Some(used), None, None, Some(windows)) => writeln!(
                out,
                "| {} | {} KB | {used} | {} | no full window | | {windows} |",
                r.algo,
                r.memory_bytes / 1024,
                r.k
            )?,
            _ if a.csv => writeln!(out, "{},{},,{},,,", r.algo, r.memory_bytes, r.k)?,
            _ => writeln!(
                out,
                "| {} | {} KB | — | {} | does not fit | | |",
                r.algo,
                r.memory_bytes / 1024,
                r.k
            )?,
        }
    }
    out.flush()?;
    Ok(())
}
