//! `hyflow convert`: a capture (or generated gateway traffic) as a `.hyf` columnar trace,
//! which every command reads as it reads the capture, without parsing a frame again.

use std::path::PathBuf;

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;

use hyflow::input::{write_columnar, Input, PacketSource};
use hyflow::workload::gateway::GatewayConfig;

#[derive(Args)]
pub struct ConvertArgs {
    /// The capture (pcap or pcapng; `-`: standard input; `.gz`: decompressed as it is read),
    /// or `gen:gateway[,KEY=VALUE...]` traffic (the keys of `sim --trace`).
    #[arg(value_name = "IN")]
    pub input: PathBuf,
    /// The `.hyf` trace to write: per packet its time, wire length and flow index, per flow
    /// its parsed key once (the layout is documented in the README).
    #[arg(value_name = "OUT")]
    pub out: PathBuf,
    /// Input port of every packet (pcapng: interface i arrives on port i+1 when not given);
    /// reading the `.hyf` with --in-port sets it again.
    #[arg(long, value_name = "PORT")]
    pub in_port: Option<u32>,
    /// A capture cut mid-record is an error. Without it, every complete packet is written and
    /// a warning says where the capture was cut.
    #[arg(long)]
    pub strict: bool,
}

/// The input `IN` names.
fn input_of(a: &ConvertArgs) -> Result<Input> {
    let text = a.input.to_string_lossy();
    if let Some(spec) = GatewayConfig::parse(&text) {
        let config = spec.map_err(|e| anyhow!("{e}"))?;
        return Ok(Input::Gateway(GatewayConfig { in_port: a.in_port.unwrap_or(config.in_port), ..config }));
    }
    Ok(Input::Capture { path: a.input.clone(), in_port: a.in_port, strict: a.strict })
}

pub fn run(a: ConvertArgs) -> Result<String> {
    if a.out.extension().is_none_or(|e| e != "hyf") {
        bail!("{}: a .hyf trace's name ends in .hyf", a.out.display());
    }
    let mut source = PacketSource::open(&input_of(&a)?, &[])?;
    let done =
        write_columnar(&mut source, &a.out).with_context(|| format!("converting {}", a.input.display()))?;
    if let Some(cut) = source.cut() {
        eprintln!(
            "hyflow: warning: {}: {} (converted the {} packets before it)",
            a.input.display(),
            cut.error,
            cut.packets
        );
    }
    let malformed = source.malformed().total();
    let size = std::fs::metadata(&a.out).map_or(0, |m| m.len());
    Ok(format!(
        "wrote {} packets of {} flows to {} ({:.1} MB){}",
        done.packets,
        done.flows,
        a.out.display(),
        size as f64 / 1e6,
        if malformed > 0 { format!("; {malformed} malformed, as the capture's") } else { String::new() }
    ))
}
