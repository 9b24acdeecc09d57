//! Flows expire as Open vSwitch expires them (`idle_timeout`, `hard_timeout`, learned flows
//! refreshed by learning them again), checked about twice a second as OVS's revalidator does,
//! and every cache layer forgets what an expired flow decided.

use hyflow::nic::gigaflow::GigaflowConfig;
use hyflow::openflow::{parse_flows, parse_packet, Pipeline};
use hyflow::switch::{NicConfig, Switch, SwitchConfig};

const S: u64 = 1_000_000_000;

/// Every configuration these tests hold to the same outputs.
fn configs() -> Vec<(&'static str, SwitchConfig)> {
    vec![
        ("no cache", SwitchConfig::no_cache()),
        ("all layers", SwitchConfig::default()),
        (
            "gigaflow NIC",
            SwitchConfig { nic: Some(NicConfig::new(GigaflowConfig::default())), ..SwitchConfig::default() },
        ),
    ]
}

/// Runs `(time in ms, packet)` through `flows` under every configuration and checks each
/// packet's output ports.
fn expect(flows: &str, packets: &[(u64, &str, &[u32])], expired: u64) {
    for (name, config) in configs() {
        let rules = parse_flows(flows, "flows").unwrap();
        let mut sw = Switch::new(Pipeline::from_rules(rules), config).unwrap();
        let mut outputs = Vec::new();
        for &(ms, packet, want) in packets {
            sw.process(&parse_packet(packet).unwrap(), 64, ms * S / 1000, &mut outputs);
            let got: Vec<u32> = outputs.iter().map(|o| o.port).collect();
            assert_eq!(got, want, "{name}: {packet} at {ms} ms");
        }
        assert_eq!(sw.stats().rules_expired, expired, "{name}");
    }
}

/// Checked against Open vSwitch 4.0.90 (dummy datapath, the packets received on a port,
/// `time/stop` and `time/warp` to the same times): at 2.6 s its table holds the idle rule
/// (3 packets) and the catch-all, at 4 s the catch-all alone.
#[test]
fn hard_and_idle_timeouts_delete_rules_in_every_layer() {
    let flows = "priority=10,ip,nw_dst=10.0.0.1,hard_timeout=2 actions=output:2\n\
                 priority=5,ip,idle_timeout=1 actions=output:3\n\
                 priority=0 actions=output:4";
    let (x, y) = ("in_port=1,ip,nw_dst=10.0.0.1", "in_port=1,ip,nw_dst=10.0.0.2");
    expect(
        flows,
        &[
            (0, x, &[2]),
            (500, y, &[3]),
            (1200, y, &[3]),
            (1900, y, &[3]),
            // More than 2 s since it was added: gone, whatever its hits.
            (2600, x, &[3]),
            // Hit at 2.6 s, not since: idle for more than 1 s.
            (4000, y, &[4]),
            (4100, x, &[4]),
        ],
        2,
    );
}

/// Checked against Open vSwitch 4.0.90 the same way: at 3 s both learned flows live (A's
/// learned again at 1.8 s), at 3.5 s B's is gone and C's learned, at 4.5 s A's is gone.
#[test]
fn learning_a_flow_again_restarts_its_hard_timeout() {
    // MAC learning with learned flows that live 2 s after they were last learned.
    let flows = "table=0,priority=0 actions=learn(table=1,priority=10,hard_timeout=2,\
                 NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[],output:NXM_OF_IN_PORT[]),resubmit(,1)\n\
                 table=1,priority=0 actions=output:9";
    let from_a = "in_port=1,dl_src=00:00:00:00:00:0a,dl_dst=00:00:00:00:00:0b";
    let to_a_from = |port: u32, mac: u8| {
        format!("in_port={port},dl_src=00:00:00:00:00:{mac:02x},dl_dst=00:00:00:00:00:0a")
    };
    let (b, c) = (to_a_from(2, 0xb), to_a_from(3, 0xc));
    expect(
        flows,
        &[
            (0, from_a, &[9]),
            (1000, &b, &[1]),
            // A speaks again: its flow is learned again, and lives until 3.8 s.
            (1800, from_a, &[2]),
            (3000, &c, &[1]),
            (3500, &b, &[1]),
            (4500, &c, &[9]),
        ],
        // B's (learned at 1 s, expired at the 3.5 s check, learned again then) and A's.
        2,
    );
}
