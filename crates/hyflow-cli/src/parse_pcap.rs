//! `hyflow parse-pcap`: the flow of every packet of a capture, as `ovs-ofctl parse-pcap`
//! prints it, streamed (one packet in memory at a time).

use std::io::{BufWriter, Write};
use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use hyflow::input::PacketSource;
use hyflow::packet::format::format_flow;
use hyflow::packet::Malformed;

#[derive(Args)]
pub struct ParsePcapArgs {
    /// pcap/pcapng capture (Ethernet, Linux cooked SLL/SLL2, raw IP or BSD loopback; `-`:
    /// standard input; `.gz`: decompressed as it is read).
    file: PathBuf,
    /// One JSON object per packet: {"i": N, "flow": "<match>", "malformed": null|"<reason>"}
    /// (i counts from 0; flow is empty for a frame nothing could be extracted from).
    #[arg(long)]
    json: bool,
    /// Check lengths against each packet's original (wire) length, as replay, sim and topk
    /// do, so that a capture cut to a snapshot length is read from its headers. Without it,
    /// the captured bytes are the packet, as Open vSwitch reads a capture.
    #[arg(long)]
    wire_lengths: bool,
    /// A capture cut mid-record is an error. Without it, every complete packet is printed and
    /// a warning says where the capture was cut.
    #[arg(long)]
    strict: bool,
}

/// Prints each packet's flow, then a summary on stderr.
pub fn run(a: ParsePcapArgs) -> Result<()> {
    let mut source = PacketSource::capture(&a.file, None, a.strict)?;
    if !a.wire_lengths {
        source = source.captured_bytes_only();
    }
    let stdout = std::io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let mut i = 0;
    while let Some(p) = source.next_packet()? {
        // Nothing was extracted from a frame of a link layer hyflow does not read.
        let nothing = Some(Malformed::UnsupportedLinkLayer.name());
        let flow = if p.malformed == nothing { String::new() } else { format_flow(&p.key) };
        if a.json {
            serde_json::to_writer(
                &mut out,
                &serde_json::json!({"i": i, "flow": flow, "malformed": p.malformed}),
            )?;
            writeln!(out)?;
        } else {
            match p.malformed {
                Some(reason) => writeln!(out, "{flow}  # malformed: {reason}")?,
                None => writeln!(out, "{flow}")?,
            }
        }
        i += 1;
    }
    out.flush()?;
    let malformed = source.malformed();
    let reasons: Vec<String> = malformed.by_reason.iter().map(|(r, n)| format!("{r} {n}")).collect();
    if let Some(cut) = source.cut() {
        eprintln!("hyflow: warning: {}", hyflow_commands::capture_cut_warning(cut));
    }
    eprintln!(
        "hyflow parse-pcap: {} packets, {} malformed{}, {} cut to the snapshot length",
        source.packets(),
        malformed.total(),
        if reasons.is_empty() { String::new() } else { format!(" ({})", reasons.join(", ")) },
        source.snaplen_truncated()
    );
    Ok(())
}
