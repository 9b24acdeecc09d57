//! Frame parsing (`parse_frame`, Open vSwitch's flow extraction) on the built-in workload's
//! frames (200,000 generated TCP/UDP/ICMP frames of 64, 576 and 1,500 bytes, in memory),
//! against etherparse's `SlicedPacket::from_ethernet` on the same frames in the same run: a
//! general header parser that slices headers without building a flow key, the baseline any
//! hand-written parser must not fall far behind.

use std::hint::black_box;

use criterion::{Criterion, Throughput};
use hyflow::packet::{parse_frame, FlowKey, LinkKind};
use hyflow::workload::{builtin, generate};

fn main() {
    let mut c = Criterion::default().configure_from_args();
    let rules = builtin::rules();
    let mut frames = Vec::new();
    generate(&rules, &builtin::TRAFFIC, |p| {
        frames.push(p.frame);
        Ok(())
    })
    .expect("built-in traffic generates")
    .expect("in memory");
    let mut group = c.benchmark_group("parse");
    group.throughput(Throughput::Elements(frames.len() as u64));
    group.sample_size(20);
    group.bench_function("parse_frame", |b| {
        let mut key = FlowKey::default();
        b.iter(|| {
            let mut ok = 0;
            for f in &frames {
                ok += parse_frame(black_box(f), LinkKind::Ethernet, 1, &mut key).is_ok() as usize;
            }
            ok
        })
    });
    group.bench_function("etherparse_sliced", |b| {
        b.iter(|| {
            let mut ok = 0;
            for f in &frames {
                ok += etherparse::SlicedPacket::from_ethernet(black_box(f)).is_ok() as usize;
            }
            ok
        })
    });
    group.finish();
    c.final_summary();
}
