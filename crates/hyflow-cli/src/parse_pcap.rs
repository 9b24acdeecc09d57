//! `hyflow parse-pcap`: the flow of every packet of a capture, as `ovs-ofctl parse-pcap`
//! prints it, streamed.

use std::io::{BufWriter, ErrorKind, Write};
use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use hyflow::input::PacketSource;
use hyflow::packet::format::format_flow;

#[derive(Args)]
pub struct ParsePcapArgs {
    /// pcap/pcapng capture (Ethernet, Linux cooked SLL/SLL2, raw IP or BSD loopback).
    file: PathBuf,
    /// One JSON object per packet: {"i": N, "flow": "<match>", "malformed": null|"<reason>"}
    /// (i counts from 0; flow is empty for a frame nothing could be extracted from).
    #[arg(long)]
    json: bool,
}

/// Prints each packet's flow; a closed pipe (`| head`) ends the run quietly.
pub fn run(a: ParsePcapArgs) -> Result<()> {
    let mut source = PacketSource::capture(&a.file, None)?;
    let stdout = std::io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let written = (|| -> Result<()> {
        let mut i = 0;
        while let Some(p) = source.next_packet()? {
            let flow = if p.malformed == Some("unsupported_link_layer") {
                String::new()
            } else {
                format_flow(&p.key)
            };
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
        Ok(())
    })();
    if let Err(e) = written {
        let closed = e.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == ErrorKind::BrokenPipe)
            || e.downcast_ref::<serde_json::Error>().and_then(|j| j.io_error_kind())
                == Some(ErrorKind::BrokenPipe);
        return if closed { Ok(()) } else { Err(e) };
    }
    let malformed = source.malformed();
    let reasons: Vec<String> = malformed.by_reason.iter().map(|(r, n)| format!("{r} {n}")).collect();
    eprintln!(
        "hyflow parse-pcap: {} packets, {} malformed{}",
        source.packets(),
        malformed.total(),
        if reasons.is_empty() { String::new() } else { format!(" ({})", reasons.join(", ")) }
    );
    Ok(())
}
