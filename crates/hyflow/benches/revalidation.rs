//! What one rule update costs the switch as its caches grow: 10k, 100k and 1M cached
//! megaflows, and a `modify-strict` of one rule that exactly 10 of them depend on.
//!
//! Pipeline: table 0 sends each destination (`nw_dst`, /32) to table 1, which outputs by
//! `tp_dst` (10 ports). Each (destination, port) flow gets its own megaflow, whose path is
//! [its table-0 rule, its table-1 rule]; modifying one table-0 rule (same actions, so every
//! entry is kept) affects the 10 entries of that destination. The update is applied to a
//! switch holding N megaflows in its software cache (no NIC, no microflow cache, no idle
//! expiry), cycling over destinations so successive updates touch different entries. The
//! baseline is the same update on a switch with an empty cache: the pipeline's own share.

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput};
use hyflow::openflow::parser::{parse_flow_spec, SpecKind};
use hyflow::openflow::update::Command;
use hyflow::openflow::{parse_flows, Pipeline};
use hyflow::packet::field::id;
use hyflow::packet::FlowKey;
use hyflow::switch::{Switch, SwitchConfig};

const PORTS: u32 = 10;

fn dst(i: u32) -> String {
    format!("10.{}.{}.{}", i >> 16, (i >> 8) & 0xff, i & 0xff)
}

fn rules(dsts: u32) -> String {
    let mut text: String = (0..dsts)
        .map(|i| format!("table=0,priority=10,ip,nw_dst={} actions=goto_table:1\n", dst(i)))
        .collect();
    text.extend(
        (0..PORTS).map(|p| format!("table=1,priority=10,tcp,tp_dst={} actions=output:{}\n", 1000 + p, p + 1)),
    );
    text
}

fn key(d: u32, port: u32) -> FlowKey {
    let mut k = FlowKey::default();
    k.set_in_port(1);
    k.set(id::DL_TYPE, 0x0800);
    k.set(id::NW_PROTO, 6);
    k.set(id::NW_SRC, 0x0101_0101);
    k.set(id::NW_DST, (10u128 << 24) | d as u128);
    k.set(id::TP_SRC, 40_000);
    k.set(id::TP_DST, 1000 + port as u128);
    k
}

/// A switch whose megaflow cache holds `entries` flows (`entries / 10` destinations × 10 ports),
/// or none when `fill` is false.
fn switch(entries: u32, fill: bool) -> Switch {
    let dsts = entries / PORTS;
    let pipeline = Pipeline::from_rules(parse_flows(&rules(dsts), "bench").expect("valid rules"));
    let config = SwitchConfig {
        nic: None,
        microflow: None,
        megaflow: Some(entries as usize + 1),
        max_idle_ns: 0,
        ..SwitchConfig::default()
    };
    let mut sw = Switch::new(pipeline, config).expect("valid config");
    if fill {
        let mut out = Vec::new();
        for d in 0..dsts {
            for p in 0..PORTS {
                sw.process(&key(d, p), 64, 1, &mut out);
            }
        }
        assert_eq!(sw.stats().upcalls, entries as u64, "one megaflow per flow");
    }
    sw
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    let mut group = c.benchmark_group("rule_update");
    group.throughput(Throughput::Elements(1));
    group.sample_size(10);
    for entries in [10_000u32, 100_000, 1_000_000] {
        let dsts = entries / PORTS;
        let specs: Vec<_> = (0..dsts.min(1024))
            .map(|d| {
                let text = format!("table=0,priority=10,ip,nw_dst={} actions=goto_table:1", dst(d));
                parse_flow_spec(&text, SpecKind::Modify).expect("valid spec")
            })
            .collect();
        for (name, fill) in [("cached", true), ("empty_cache", false)] {
            let mut sw = switch(entries, fill);
            let before = sw.stats().retranslations;
            let mut i = 0;
            group.bench_with_input(BenchmarkId::new(name, entries), &entries, |b, _| {
                b.iter(|| {
                    let spec = &specs[i % specs.len()];
                    i += 1;
                    black_box(sw.apply_update(Command::ModifyStrict, spec, 2))
                })
            });
            let per_update = (sw.stats().retranslations - before) as f64 / i.max(1) as f64;
            let want = if fill { PORTS as f64 } else { 0.0 };
            assert_eq!(per_update, want, "entries re-translated per update");
        }
    }
    group.finish();
    c.final_summary();
}
