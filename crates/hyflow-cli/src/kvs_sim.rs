//! `hyflow kvs-sim` and `hyflow calibrate --kvs`: FlexKVS extrapolated past this host's cores by
//! the simulator's application stage (`hyflow::kvs::model`), with costs measured here.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;
use serde::Serialize;

use hyflow::experiment::kvs_calibrate::{calibrate_kvs, LiveKvs};
use hyflow::kvs::model::{simulate, KvsCosts, KvsSimConfig, KvsSimReport, Steering};
use hyflow::kvs::workload::KvsWorkload;
use hyflow_commands::scaling_plot::{write_scaling_chart, Series};

#[derive(Args)]
pub struct KvsSimArgs {
    /// The costs `hyflow calibrate --kvs REPORT --out FILE` measured (JSON).
    #[arg(long, value_name = "FILE")]
    pub costs: PathBuf,
    /// Core counts to simulate, comma-separated.
    #[arg(long, default_value = "1,2,3,4,5,6", value_delimiter = ',')]
    pub cores: Vec<usize>,
    /// Requests simulated per run (the paper's workload: 100,000 keys of 32 bytes, values of
    /// 64, Zipf 0.9, 90% GET).
    #[arg(long, default_value_t = 1_000_000)]
    pub requests: u64,
    /// Requests offered per second (Poisson); without it, capacity (every request at once).
    #[arg(long, value_name = "RPS")]
    pub rate: Option<f64>,
    /// Client ports the requests come from (flow steering spreads them over the cores: with
    /// few, unevenly).
    #[arg(long, default_value_t = 256)]
    pub clients: u32,
    /// Seed of the request stream.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Live points to draw with the model: `live_points.json` of `scripts/kvs_bench.py --save
    /// DIR` (a list of {steering, cores, throughput, kind}).
    #[arg(long, value_name = "FILE")]
    pub live: Option<PathBuf>,
    /// Draw throughput against cores, a line per steering mode (FlexNIC's Figure 4), to this
    /// .png or .svg.
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
    /// Print the results as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
struct Row {
    steering: &'static str,
    cores: usize,
    #[serde(flatten)]
    report: KvsSimReport,
}

pub fn run(a: KvsSimArgs) -> Result<()> {
    let text = std::fs::read_to_string(&a.costs).with_context(|| a.costs.display().to_string())?;
    let costs: KvsCosts =
        serde_json::from_str(&text).with_context(|| format!("{}: not a KVS cost file", a.costs.display()))?;
    costs.check().map_err(|e| anyhow::anyhow!("{}: {e}", a.costs.display()))?;
    if a.cores.is_empty() || a.cores.contains(&0) {
        bail!("--cores lists core counts of 1 or more");
    }
    let mut rows = Vec::new();
    for steering in Steering::ALL {
        for &cores in &a.cores {
            let config = KvsSimConfig {
                workload: KvsWorkload::default(),
                cores,
                steering,
                rate: a.rate,
                requests: a.requests,
                clients: a.clients,
                ring: if a.rate.is_some() { hyflow_live::port_io::RX_RING as usize } else { usize::MAX },
                seed: a.seed,
            };
            let report = simulate(&config, &costs)?;
            rows.push(Row { steering: steering.name(), cores, report });
        }
    }
    if a.json {
        println!("{}", serde_json::to_string(&rows)?);
    } else {
        println!("| steering | cores | requests/s | ns/request | cycles/request | lines moved | lock wait ns | busiest core / mean | dropped |");
        println!("|---|---|---|---|---|---|---|---|---|");
        for r in &rows {
            let m = &r.report;
            println!(
                "| {} | {} | {:.0} | {:.0} | {:.0} | {:.1}% | {:.1} | {:.2} | {} |",
                r.steering,
                r.cores,
                m.throughput,
                m.ns_per_request,
                m.cycles_per_request,
                100.0 * m.transfers,
                m.lock_wait_ns,
                m.imbalance,
                m.dropped
            );
        }
    }
    if let Some(path) = &a.plot {
        let lines: Vec<Series> = Steering::ALL
            .iter()
            .map(|s| {
                let pts = rows
                    .iter()
                    .filter(|r| r.steering == s.name())
                    .map(|r| (r.cores as f64, r.report.throughput / 1e6));
                (s.name().to_string(), pts.collect())
            })
            .collect();
        let mut points: Vec<Series> = Vec::new();
        if let Some(live) = &a.live {
            let text = std::fs::read_to_string(live).with_context(|| live.display().to_string())?;
            let list: Vec<serde_json::Value> = serde_json::from_str(&text)
                .with_context(|| format!("{}: not a list of live points", live.display()))?;
            for p in list {
                let (Some(s), Some(c), Some(t), Some(k)) = (
                    p["steering"].as_str(),
                    p["cores"].as_f64(),
                    p["throughput"].as_f64(),
                    p["kind"].as_str(),
                ) else {
                    bail!("{}: a live point needs steering, cores, throughput and kind: {p}", live.display());
                };
                let name = format!("{s}, live ({k})");
                match points.iter_mut().find(|(n, _)| *n == name) {
                    Some((_, v)) => v.push((c, t / 1e6)),
                    None => points.push((name, vec![(c, t / 1e6)])),
                }
            }
        }
        let title = match a.rate {
            None => "FlexKVS: capacity by cores (the model) and this host's live points".to_string(),
            Some(r) => format!("FlexKVS at {r:.0} requests/s offered"),
        };
        write_scaling_chart(path, &title, "requests per second (millions)", &lines, &points)?;
    }
    Ok(())
}

/// `hyflow calibrate --kvs REPORT --out FILE`.
pub fn calibrate(report: &std::path::Path, out: &std::path::Path) -> Result<()> {
    let text = std::fs::read_to_string(report).with_context(|| report.display().to_string())?;
    let r: serde_json::Value = serde_json::from_str(text.lines().last().unwrap_or(""))
        .with_context(|| format!("{}: not a `hyflow kvs --json` report", report.display()))?;
    let cores = r["cores"].as_array().map_or(0, |c| c.len());
    if cores != 1 {
        bail!("{}: the report of a one-core run is needed (--cores 1), not of {cores}", report.display());
    }
    let busy = r["cores"][0]["busy_ns"].as_f64().unwrap_or(0.0);
    let requests = r["service"]["requests"].as_f64().unwrap_or(0.0);
    if busy <= 0.0 || requests < 10_000.0 {
        bail!(
            "{}: too few requests ({requests}) to measure; load the server first (kvs_bench.py, kvs-load)",
            report.display()
        );
    }
    let live =
        LiveKvs { ns_per_request: busy / requests, nic_hash: r["nic_hash"].as_bool().unwrap_or(false) };
    let c = calibrate_kvs(live, hyflow_live::tsc::tsc_ghz())?;
    println!(
        "kvs costs: io {:.0} ns, hash {:.1} ns, store {:.0} ns, line transfer {:.0} ns ({:.0} ns/request shared by two threads against {:.0} partitioned, {:.0}% of requests moved a line); TSC {:.2} GHz; live {:.0} ns/request",
        c.costs.io_ns,
        c.costs.hash_ns,
        c.costs.store_ns,
        c.costs.transfer_ns,
        c.shared_ns,
        c.partitioned_ns,
        100.0 * c.transfer_share,
        c.costs.tsc_ghz,
        live.ns_per_request
    );
    std::fs::write(out, format!("{}\n", serde_json::to_string_pretty(&c.costs)?))
        .with_context(|| out.display().to_string())?;
    println!("wrote {}", out.display());
    Ok(())
}
