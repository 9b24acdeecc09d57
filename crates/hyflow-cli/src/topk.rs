//! `hyflow topk` and `hyflow eval topk`: real-time large flows of a trace, and how well each
//! detector finds them against the exact sliding-window answer.

use std::io::{BufWriter, Write};
use std::path::PathBuf;

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use serde_json::{json, Map, Value};

use hyflow::measure::{
    build, Algo, Boundary, ConfigError, DetectorConfig, FlowId, KeySpec, Monitor, Scored, Span,
};

use hyflow::input::PacketSource;

use crate::replay::Progress;

/// Each packet of a capture as (ns since the first packet, flow id under `spec`; none for a
/// malformed frame or one without the key's fields), with a progress bar on a terminal.
/// Returns the malformed count.
fn for_each_flow(
    path: &std::path::Path,
    spec: &KeySpec,
    mut f: impl FnMut(u64, Option<FlowId>),
) -> Result<u64> {
    let mut source = PacketSource::capture(path, None)?;
    let progress = Progress::new("topk");
    while let Some(p) = source.next_packet()? {
        progress.tick(source.packets(), source.progress());
        f(p.ts_ns, if p.malformed.is_some() { None } else { spec.flow_id(&p.key) });
    }
    progress.finish();
    Ok(source.malformed().total())
}

#[derive(Args)]
pub struct TopkArgs {
    /// pcap/pcapng trace.
    #[arg(long, value_name = "FILE")]
    trace: PathBuf,
    /// Detector: fastkeeper-bitmap, fastkeeper, elixir, wcss, heavykeeper, cm (Count-Min +
    /// heap), univmon, spacesaving, lossy.
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
    /// Flow key: 5tuple, or comma-separated ovs-ofctl fields (e.g. nw_src,nw_dst).
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
        default_value = "fastkeeper-bitmap,fastkeeper,elixir,wcss,heavykeeper,cm,univmon,spacesaving,lossy",
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

fn flow_json(spec: &KeySpec, flow: FlowId) -> Value {
    let mut m = Map::new();
    for (name, value) in spec.fields_of(flow) {
        m.insert(name.to_string(), Value::String(value));
    }
    Value::Object(m)
}

pub fn run(a: TopkArgs) -> Result<()> {
    let (spec, block, blocks) = a.common.parse()?;
    let config = DetectorConfig {
        k: a.k,
        memory: parse_size(&a.memory).context("--memory")?,
        blocks,
        sample: a.common.sample,
        seed: a.common.seed,
    };
    let algo = algo(&a.algo)?;
    let detector = build(algo, &config)?;
    let memory = detector.memory_bytes();
    let mut monitor = Monitor::new(detector, spec.clone(), block);
    let stdout = std::io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let mut failed: Result<()> = Ok(());
    let mut report = |at: Boundary, top: &[(FlowId, u64)]| {
        if failed.is_err() {
            return;
        }
        failed = write_report(&mut out, a.json, &spec, at, top);
    };
    let malformed = for_each_flow(&a.trace, &spec, |ts, flow| monitor.flow(ts, flow, &mut report))?;
    monitor.finish(&mut report);
    failed?;
    out.flush()?;
    eprintln!(
        "hyflow topk: {} packets ({} malformed, {} without the key fields, not counted); {} uses {} B of {} B",
        monitor.packets(),
        malformed,
        monitor.keyless - malformed,
        algo.name(),
        memory,
        config.memory
    );
    Ok(())
}

fn write_report(
    out: &mut impl Write,
    as_json: bool,
    spec: &KeySpec,
    at: Boundary,
    top: &[(FlowId, u64)],
) -> Result<()> {
    let t = at.t_ns as f64 / 1e9;
    if as_json {
        let flows: Vec<Value> =
            top.iter().map(|&(f, c)| json!({"key": flow_json(spec, f), "count": c})).collect();
        writeln!(out, "{}", json!({"t": t, "packets": at.packets, "flows": flows}))?;
    } else {
        writeln!(out, "t = {t:.3} s ({} packets): {} flows", at.packets, top.len())?;
        for (rank, &(f, c)) in top.iter().enumerate() {
            let fields: Vec<String> =
                spec.fields_of(f).into_iter().map(|(n, v)| format!("{n}={v}")).collect();
            writeln!(out, "  {:>4} {:>10}  {}", rank + 1, c, fields.join(","))?;
        }
    }
    Ok(())
}

pub fn eval(a: EvalTopkArgs) -> Result<()> {
    let (spec, block, blocks) = a.common.parse()?;
    let algos: Vec<Algo> = a.algos.split(',').map(algo).collect::<Result<_>>()?;
    let memories: Vec<usize> =
        a.memory.split(',').map(|m| parse_size(m).context("--memory")).collect::<Result<_>>()?;
    let ks: Vec<usize> =
        a.k.split(',')
            .map(|k| k.trim().parse::<usize>().map_err(|_| anyhow!("--k: '{}' is not a number", k.trim())))
            .collect::<Result<_>>()?;
    // Check every configuration before reading the trace: a budget too small for one
    // algorithm is a row saying so; any other error stops here.
    let mut configs = Vec::new();
    for &algo in &algos {
        for &memory in &memories {
            for &k in &ks {
                let config =
                    DetectorConfig { k, memory, blocks, sample: a.common.sample, seed: a.common.seed };
                let fits = match build(algo, &config) {
                    Ok(_) => Ok(()),
                    Err(e @ ConfigError::TooSmall { .. }) => Err(e),
                    Err(e) => return Err(e.into()),
                };
                configs.push((algo, config, fits));
            }
        }
    }
    // The stream once, as (time, flow id): 32 bytes a packet.
    let mut stream: Vec<(u64, Option<FlowId>)> = Vec::new();
    for_each_flow(&a.trace, &spec, |ts, flow| stream.push((ts, flow)))?;
    let stdout = std::io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    if a.csv {
        writeln!(out, "algo,memory_bytes,memory_used,k,precision,are,windows")?;
    } else if !a.json {
        writeln!(out, "| algo | memory | used B | k | precision | ARE | windows |")?;
        writeln!(out, "|---|---|---|---|---|---|---|")?;
    }
    for (algo, config, fits) in configs {
        if let Err(e) = fits {
            if a.json {
                let line = json!({"algo": algo.name(), "memory_bytes": config.memory, "k": config.k,
                    "sample": config.sample, "error": e.to_string()});
                writeln!(out, "{line}")?;
            } else if a.csv {
                writeln!(out, "{},{},,{},,,", algo.name(), config.memory, config.k)?;
            } else {
                writeln!(
                    out,
                    "| {} | {} KB | — | {} | does not fit | | |",
                    algo.name(),
                    config.memory / 1024,
                    config.k
                )?;
            }
            continue;
        }
        let detector = build(algo, &config)?;
        let mut monitor = Monitor::new(Scored::new(detector, config.k, blocks), spec.clone(), block);
        let mut ignore = |_: Boundary, _: &[(FlowId, u64)]| {};
        for &(ts, flow) in &stream {
            monitor.flow(ts, flow, &mut ignore);
        }
        monitor.finish(&mut ignore);
        let scored = monitor.detector();
        let (p, are, windows, used) = (
            scored.score.precision(),
            scored.score.are(),
            scored.score.windows,
            scored.inner().memory_bytes(),
        );
        if a.json {
            let line = json!({"algo": algo.name(), "memory_bytes": config.memory, "memory_used": used, "k": config.k,
                "precision": p, "are": are, "windows": windows, "sample": config.sample});
            writeln!(out, "{line}")?;
        } else if a.csv {
            writeln!(
                out,
                "{},{},{},{},{:.4},{:.4},{}",
                algo.name(),
                config.memory,
                used,
                config.k,
                p,
                are,
                windows
            )?;
        } else {
            writeln!(
                out,
                "| {} | {} KB | {} | {} | {:.3} | {:.3} | {} |",
                algo.name(),
                config.memory / 1024,
                used,
                config.k,
                p,
                are,
                windows
            )?;
        }
    }
    out.flush()?;
    Ok(())
}
