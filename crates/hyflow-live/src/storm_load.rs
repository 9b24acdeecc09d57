//! `hyflow storm-load`: a tweet-like stream of FlexStorm tuples as Ethernet frames in a pcap,
//! for `hyflow send` to put on the wire: DCCP-Data packets over several connections (source
//! ports), sequence numbers counting up per connection, each naming the worker its user name
//! is dealt to.

use anyhow::Result;

use hyflow::capture::{LinkType, PcapWriter};
use hyflow::storm::dccp::{self, IP_DCCP};
use hyflow::storm::workload::TweetStream;

use crate::storm_args::StormLoadArgs;

/// Writes the frames; says how many.
pub fn run(a: StormLoadArgs) -> Result<()> {
    if a.connections == 0 {
        anyhow::bail!("--connections must be at least 1");
    }
    let stream = TweetStream { users: a.users, zipf: a.zipf, workers: a.workers };
    let mut tweets = stream.tweets(a.seed)?;
    let mut out = PcapWriter::create(&a.frames, LinkType::Ethernet, true)?;
    let (src, dst) = (a.source.octets(), a.server.octets());
    let (mut name, mut segment, mut frame) = (Vec::new(), Vec::new(), vec![0u8; 1600]);
    for i in 0..a.count {
        let worker = tweets.next(&mut name);
        let connection = (i % a.connections as u64) as u16;
        let seq = i / a.connections as u64 + 1;
        segment.clear();
        dccp::write_data(&mut segment, (src, dst), (50_000 + connection, a.port), seq, worker, &name);
        let n = crate::udp_reply::write_ipv4(
            &mut frame,
            ([0xff; 6], [2, 0, 0, 0, 0, 1]),
            (src, dst),
            IP_DCCP,
            i as u16,
            &segment,
        )
        .expect("a tuple fits a frame");
        out.write_packet(i * 1000, &frame[..n])?;
    }
    out.finish()?;
    println!("storm-load: {} tuples for {} workers in {}", a.count, a.workers, a.frames.display());
    Ok(())
}
