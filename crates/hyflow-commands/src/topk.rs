//! `topk`'s and `eval topk`'s options and their meaning: the detector and evaluation configs,
//! and a report as the CLI prints it.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use hyflow::experiment::topk::{EvalConfig, TopkConfig, TopkReport, TopkSummary};
use hyflow::input::Input;
use hyflow::measure::{Algo, DetectorConfig, KeySpec, Span};

#[derive(Args)]
pub struct TopkArgs {
    /// pcap/pcapng trace (`-`: standard input; `.gz`: decompressed as it is read).
    #[arg(long, value_name = "FILE")]
    pub trace: PathBuf,
    /// A capture cut mid-record (a killed tcpdump, a partial copy) is an error. Without it,
    /// every complete packet is read and a warning says where the capture was cut.
    #[arg(long)]
    pub strict: bool,
    /// Detector: fastkeeper-bitmap (hyflow's FastKeeper: bitmap voting with four
    /// extensions), fastkeeper-paper (bitmap voting as published), fastkeeper (collision
    /// counters), sl-hk (sliding HeavyKeeper), elixir, wcss, heavykeeper, cm (Count-Min +
    /// heap), univmon, spacesaving, lossy. The ablation of fastkeeper-bitmap's extensions
    /// (guard, burst, weight, refresh): fastkeeper-bitmap-no-EXT and fastkeeper-paper+EXT.
    #[arg(long, default_value = "fastkeeper-bitmap", value_name = "ALGO")]
    pub algo: String,
    #[command(flatten)]
    pub common: Common,
    /// Memory budget: bytes, or with a unit (KB = 1024 B, MB).
    #[arg(long, default_value = "30KB", value_name = "SIZE")]
    pub memory: String,
    /// Flows reported per boundary.
    #[arg(long, default_value_t = 100)]
    pub k: usize,
    /// One JSON object per boundary per line:
    /// {"t": seconds since the first packet, "flows": [{"key": {...}, "count": n}, ...]}.
    #[arg(long)]
    pub json: bool,
}

/// Options shared by `topk` and `eval topk`.
#[derive(Args)]
pub struct Common {
    /// Window: a time (5s, 500ms) or a packet count (1290000pkts).
    #[arg(long, default_value = "5s", value_name = "SPAN")]
    pub window: String,
    /// Block (the window slides by one block): same unit as --window, dividing it.
    #[arg(long, default_value = "1s", value_name = "SPAN")]
    pub block: String,
    /// Sampling rate in (0, 1]; counts are scaled back by 1 / rate.
    #[arg(long, default_value_t = 1.0, value_name = "R")]
    pub sample: f64,
    /// Flow key: 5tuple (IPv4, 13-byte ids, the papers' key), 5tuple46 (IPv4 and IPv6,
    /// 37-byte ids; IPv4 addresses shown as ::ffff:a.b.c.d), or comma-separated ovs-ofctl
    /// fields of at most 384 bits in all (e.g. nw_src,nw_dst or ipv6_src,ipv6_dst).
    #[arg(long, default_value = "5tuple", value_name = "FIELDS")]
    pub key: String,
    /// Seed of hashes and sampling.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

impl Common {
    /// The key, the block and the blocks per window.
    pub fn parse(&self) -> Result<(KeySpec, Span, usize)> {
        let spec = KeySpec::parse(&self.key).map_err(|e| anyhow!("--key: {e}"))?;
        let window = Span::parse(&self.window).map_err(|e| anyhow!("--window {e}"))?;
        let block = Span::parse(&self.block).map_err(|e| anyhow!("--block {e}"))?;
        let blocks = Span::blocks(window, block)?;
        Ok((spec, block, blocks))
    }
}

#[derive(Args)]
pub struct EvalTopkArgs {
    /// pcap/pcapng trace (`-`: standard input; `.gz`: decompressed as it is read).
    #[arg(long, value_name = "FILE")]
    pub trace: PathBuf,
    /// A capture cut mid-record (a killed tcpdump, a partial copy) is an error. Without it,
    /// every complete packet is read and a warning says where the capture was cut.
    #[arg(long)]
    pub strict: bool,
    /// Comma-separated detectors (names as `hyflow topk --algo`).
    #[arg(
        long,
        default_value = "fastkeeper-bitmap,fastkeeper-paper,fastkeeper,sl-hk,elixir,wcss,heavykeeper,cm,univmon,spacesaving,lossy",
        value_name = "ALGOS"
    )]
    pub algos: String,
    #[command(flatten)]
    pub common: Common,
    /// Comma-separated memory budgets (KB = 1024 B).
    #[arg(long, default_value = "30KB", value_name = "SIZES")]
    pub memory: String,
    /// Comma-separated values of k.
    #[arg(long, default_value = "100", value_name = "KS")]
    pub k: String,
    /// Print CSV instead of a table.
    #[arg(long, conflicts_with = "json")]
    pub csv: bool,
    /// Print one JSON object per configuration per line.
    #[arg(long)]
    pub json: bool,
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
        let names: Vec<&str> = Algo::ALL.iter().chain(&Algo::ABLATION).map(|a| a.name()).collect();
        anyhow!("unknown algorithm '{}' (one of: {})", name.trim(), names.join(", "))
    })
}

impl TopkArgs {
    /// The detector run the options describe.
    pub fn config(&self) -> Result<TopkConfig> {
        let (key, block, blocks) = self.common.parse()?;
        let detector = DetectorConfig {
            k: self.k,
            memory: parse_size(&self.memory).context("--memory")?,
            blocks,
            sample: self.common.sample,
            seed: self.common.seed,
            key_bits: key.bits(),
        };
        Ok(TopkConfig { algo: algo(&self.algo)?, detector, key, block })
    }
}

/// What a run's summary adds on standard error: packets counted and left out, memory used,
/// and the notes a reader needs (snapshot length, IPv6 under the IPv4 key).
pub fn summary_notes(summary: &TopkSummary, config: &TopkConfig) -> Vec<String> {
    let mut notes = vec![format!(
        "{} packets ({} malformed, {} without the key fields, not counted); {} used {} B of {} B",
        summary.packets,
        summary.malformed,
        summary.keyless,
        config.algo.name(),
        summary.memory_used,
        config.detector.memory
    )];
    if summary.snaplen_truncated > 0 {
        notes.push(format!(
            "{} packets were cut to the capture's snapshot length; read from their headers",
            summary.snaplen_truncated
        ));
    }
    if summary.keyless_ipv6 > 0 && config.key.is_ipv4_five_tuple() {
        notes.push("the 5tuple key is IPv4's (the papers'); --key 5tuple46 counts IPv6 packets too".into());
    }
    notes
}

/// The trace a top-k run reads (`strict`: a capture cut mid-record is an error).
pub fn capture(path: &std::path::Path, strict: bool) -> Input {
    Input::Capture { path: path.to_path_buf(), in_port: None, strict }
}

/// Writes one boundary's report as the CLI prints it: a JSON line or a ranked table.
pub fn write_report(out: &mut impl Write, as_json: bool, r: &TopkReport) -> std::io::Result<()> {
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

impl EvalTopkArgs {
    /// The evaluation the options describe.
    pub fn config(&self) -> Result<EvalConfig> {
        let (key, block, blocks) = self.common.parse()?;
        Ok(EvalConfig {
            algos: self.algos.split(',').map(algo).collect::<Result<_>>()?,
            memories: self
                .memory
                .split(',')
                .map(|m| parse_size(m).context("--memory"))
                .collect::<Result<_>>()?,
            ks: self
                .k
                .split(',')
                .map(|k| {
                    k.trim().parse::<usize>().map_err(|_| anyhow!("--k: '{}' is not a number", k.trim()))
                })
                .collect::<Result<_>>()?,
            blocks,
            block,
            sample: self.common.sample,
            seed: self.common.seed,
            key,
        })
    }
}
