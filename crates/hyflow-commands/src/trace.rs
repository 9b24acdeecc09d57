//! `trace`'s options and their meaning: the pipeline and the packets to trace through it.

use std::io::BufRead;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;

use hyflow::input::PacketSource;
use hyflow::openflow::passes::{trace_passes, Pass};
use hyflow::openflow::{parse_packet_named, Names, Pipeline};
use hyflow::packet::{ct_state, FlowKey};

use crate::names::{NameArgs, PrefixArgs};

#[derive(Args)]
pub struct TraceArgs {
    /// Flow file in `ovs-ofctl add-flows` syntax.
    #[arg(long, value_name = "FILE")]
    pub flows: PathBuf,
    #[command(flatten)]
    pub names: NameArgs,
    #[command(flatten)]
    pub prefixes: PrefixArgs,
    /// A packet as a match-style string, e.g.
    /// `in_port=1,dl_src=00:00:00:00:00:01,dl_type=0x0800,nw_src=10.0.0.1,nw_proto=6,tp_dst=80`
    /// (absent fields are zero).
    #[arg(value_name = "PACKET", conflicts_with_all = ["packets", "pcap"])]
    pub packet: Option<String>,
    /// File with one packet string per line (blank lines and `#` comments skipped).
    #[arg(long, value_name = "FILE", conflicts_with = "pcap")]
    pub packets: Option<PathBuf>,
    /// Take the packet from a pcap/pcapng trace (see --index).
    #[arg(long, value_name = "FILE")]
    pub pcap: Option<PathBuf>,
    /// 0-based index of the packet in --pcap.
    #[arg(long, default_value_t = 0, requires = "pcap")]
    pub index: u64,
    /// Input port for --pcap packets (pcapng interface i arrives on port i+1 when not given).
    #[arg(long, value_name = "PORT", requires = "pcap")]
    pub in_port: Option<u32>,
    /// Print one JSON object per packet instead of text.
    #[arg(long)]
    pub json: bool,
    /// Connection state a pass recirculated by `ct(table=N)` resumes with, as
    /// `ofproto/trace --ct-next` (flags joined by `,` or `|`: `trk,est`, `trk|new|rpl`).
    /// Give it once per recirculation, in order; passes beyond them resume with `trk,new`.
    #[arg(long = "ct-next", value_name = "STATE", value_parser = parse_ct_next)]
    pub ct_next: Vec<u8>,
}

/// A `--ct-next` state: flags, each known, in a state conntrack can give.
fn parse_ct_next(text: &str) -> Result<u8, String> {
    let mut state = 0;
    for flag in text.split([',', '|', ' ']).filter(|f| !f.is_empty()) {
        state |= ct_state::flag(flag).ok_or_else(|| {
            format!("{flag}: unknown connection tracking state flag ({})", ct_state::NAMES.join(", "))
        })?;
    }
    match ct_state::impossible(state) {
        Some(why) => Err(why),
        None => Ok(state),
    }
}

impl TraceArgs {
    /// The pipeline of `--flows`, and the names its packets may use.
    pub fn pipeline(&self) -> Result<(Pipeline, Names)> {
        let (mut pipeline, names) = self.names.load_pipeline(&self.flows)?;
        pipeline.set_prefix_tries(self.prefixes.prefixes);
        Ok((pipeline, names))
    }

    /// Traces every packet through all its passes (the first, then each recirculation with
    /// the `--ct-next` states), handing each packet's passes to `each` with the switch's names
    /// of ports and tables (if any: the text prints them as `ovs-ofctl --names`) and whether
    /// the recirculation limit cut them short.
    pub fn for_each_trace(
        &self,
        mut each: impl FnMut(&[Pass], &Pipeline, Option<&Names>, bool) -> Result<()>,
    ) -> Result<()> {
        let (pipeline, names) = self.pipeline()?;
        let named = Some(&names).filter(|n| !n.is_empty());
        let mut passes = Vec::new();
        for packet in self.packets(&names)? {
            let limit_reached = trace_passes(&pipeline, &packet, &self.ct_next, &mut passes);
            each(&passes, &pipeline, named, limit_reached)?;
        }
        Ok(())
    }

    /// The packets the options name: the one given, a file's, or one from a capture; ports
    /// may be named by `names`.
    pub fn packets(&self, names: &Names) -> Result<Vec<FlowKey>> {
        if let Some(p) = &self.packet {
            Ok(vec![parse_packet_named(p, names)
                .map_err(|e| anyhow!("packet:{}: {} (at '{}')", e.column, e.message, e.token))?])
        } else if let Some(f) = &self.packets {
            packets_from_file(f, names)
        } else if let Some(f) = &self.pcap {
            Ok(vec![packet_from_pcap(f, self.index, self.in_port)?])
        } else {
            bail!("give a PACKET, --packets FILE or --pcap FILE");
        }
    }
}

/// Packet `index` of a capture, as the flow key the pipeline sees.
pub fn packet_from_pcap(path: &Path, index: u64, in_port: Option<u32>) -> Result<FlowKey> {
    let mut source = PacketSource::capture(path, in_port, true)?;
    let Some(p) = source.nth_packet(index)? else {
        bail!("{}: has {} packets, no packet at index {index}", path.display(), source.packets());
    };
    if let Some(reason) = p.malformed {
        eprintln!("hyflow: warning: packet {index} is malformed ({reason}); tracing what was parsed");
    }
    Ok(p.key)
}

/// The packets of a file of packet strings, one per line (blank lines and comments skipped).
pub fn packets_from_file(path: &Path, names: &Names) -> Result<Vec<FlowKey>> {
    let file = std::fs::File::open(path).with_context(|| format!("{}: cannot open", path.display()))?;
    let mut out = Vec::new();
    for (n, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line.with_context(|| format!("{}: cannot read", path.display()))?;
        let Some(body) = hyflow::openflow::parser::strip_comment(&line) else { continue };
        let key = parse_packet_named(body, names).map_err(|e| {
            anyhow!("{}:{}:{}: {} (at '{}')", path.display(), n + 1, e.column, e.message, e.token)
        })?;
        out.push(key);
    }
    Ok(out)
}
