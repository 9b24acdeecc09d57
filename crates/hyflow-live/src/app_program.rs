//! What `hyflow kvs` and `hyflow storm` do alike with their XDP programs (feature `afxdp`):
//! load one, attach it through a bpf link owned by the process (gone when the process ends,
//! however it ends), sum its per-CPU counters, and measure its run time per frame — the work
//! the NIC does, which on a veth runs on the sending CPU and no server thread sees.

use std::os::fd::OwnedFd;

use anyhow::{anyhow, Context, Result};
use aya::maps::PerCpuArray;
use aya::programs::{Xdp, XdpMode};
use aya::Ebpf;
use serde::Serialize;

use crate::args::XdpModeArg;
use crate::interfaces::Interface;

/// Loads `ebpf`'s XDP program `name` and attaches it to `iface`: native XDP unless generic is
/// asked for (or, with `auto`, the driver refuses native); returns whether native.
pub fn attach(ebpf: &mut Ebpf, name: &str, iface: &Interface, mode: XdpModeArg) -> Result<bool> {
    let program: &mut Xdp =
        ebpf.program_mut(name).ok_or_else(|| anyhow!("the XDP program has no {name}"))?.try_into()?;
    program.load().context("the kernel refused the XDP program (CAP_BPF and CAP_NET_ADMIN needed)")?;
    if mode != XdpModeArg::Generic {
        match program.attach_to_if_index(iface.ifindex, XdpMode::Driver) {
            Ok(_) => return Ok(true),
            Err(e) if mode == XdpModeArg::Native => return Err(anyhow!("attaching native XDP: {e}")),
            Err(_) => {}
        }
    }
    program.attach_to_if_index(iface.ifindex, XdpMode::Skb).map_err(|e| anyhow!("attaching XDP: {e}"))?;
    Ok(false)
}

/// The sums over CPUs of the first `n` counters of per-CPU array `map`.
pub fn per_cpu_sums(ebpf: &Ebpf, map: &str, n: u32) -> Result<Vec<u64>> {
    let counters: PerCpuArray<_, u64> =
        PerCpuArray::try_from(ebpf.map(map).ok_or_else(|| anyhow!("no {map} map"))?)?;
    Ok((0..n).map(|i| counters.get(&i, 0).map(|v| v.iter().sum::<u64>()).unwrap_or(0)).collect())
}

/// Keeps the kernel's run-time statistics of BPF programs on (`BPF_ENABLE_STATS`) while it
/// lives: two clock reads per run of every program.
pub struct RunStats {
    _enabled: OwnedFd,
}

impl RunStats {
    /// Turns the statistics on.
    pub fn enable() -> Result<RunStats> {
        let fd =
            aya::sys::enable_stats(aya::sys::Stats::RunTime).map_err(|e| anyhow!("BPF_ENABLE_STATS: {e}"))?;
        Ok(RunStats { _enabled: fd })
    }
}

/// A program's runs and time in them while statistics were on.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct ProgramRuns {
    /// Runs (frames).
    pub runs: u64,
    /// Mean nanoseconds per run.
    pub ns_per_run: f64,
}

/// Program `name`'s runs so far.
pub fn runs(ebpf: &Ebpf, name: &str) -> Result<ProgramRuns> {
    let program: &Xdp = ebpf.program(name).ok_or_else(|| anyhow!("no program {name}"))?.try_into()?;
    let info = program.info().map_err(|e| anyhow!("program info: {e}"))?;
    let runs = info.run_count();
    let ns = info.run_time().as_nanos() as f64;
    Ok(ProgramRuns { runs, ns_per_run: if runs > 0 { ns / runs as f64 } else { 0.0 } })
}

/// Prints a server's report at exit: as one JSON object, or as `text` writes it.
pub fn print_report<R: Serialize>(json: bool, report: &R, text: impl Fn(&R) -> String) -> Result<()> {
    if json {
        println!("{}", serde_json::to_string(report)?);
    } else {
        print!("{}", text(report));
    }
    Ok(())
}
