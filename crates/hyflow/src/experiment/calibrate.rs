//! Calibration: what hyflow's own software path costs on this machine, measured on the
//! built-in workload, as the [`CostModel`] the simulator prices host work with.

use crate::cost_model::CostModel;
use crate::host_time::best_per_item;
use crate::nic::NicConfig;
use crate::openflow::Pipeline;
use crate::packet::{parse_frame, FlowKey, LinkKind};
use crate::switch::{Offload, Switch, SwitchConfig};
use crate::workload::{builtin, generate, make_flows};

/// Measures hyflow's own software path on this machine, on the built-in workload (the
/// 7-table L2/L3/ACL pipeline): parsing, microflow hits, megaflow hits (microflow off),
/// upcalls (every packet a new flow), the same upcalls offloaded to a Gigaflow NIC (the
/// difference is Gigaflow's install work), and a FastKeeper update per sampled packet.
pub fn calibrate() -> CostModel {
    let rules = builtin::rules();
    let mut frames = Vec::new();
    let _ = generate(&rules, &builtin::TRAFFIC, |p| {
        frames.push(p.frame);
        Ok(())
    });
    let mut keys = vec![FlowKey::default(); frames.len()];
    let rx_ns = best_per_item(5, frames.len(), || {
        for (f, k) in frames.iter().zip(keys.iter_mut()) {
            let _ = parse_frame(std::hint::black_box(f), LinkKind::Ethernet, 1, k);
        }
    });
    let mut out = Vec::new();
    let mut now = 0u64;
    let mut steady = |config: SwitchConfig| {
        let mut sw = Switch::new(Pipeline::from_rules(rules.clone()), config.clone()).expect("valid config");
        for k in &keys {
            now += 1;
            sw.process(k, 100, now, &mut out);
        }
        best_per_item(5, keys.len(), || {
            for k in &keys {
                now += 1;
                sw.process_host(k, 100, now, Offload::Allowed, &mut out);
            }
        })
    };
    let host = SwitchConfig { nic: None, ..SwitchConfig::default() };
    let microflow_hit_ns = steady(host.clone());
    let megaflow_hit_ns = steady(SwitchConfig { microflow: None, ..host.clone() });
    // Upcalls: 20,000 distinct flows, each seen once by a fresh switch.
    let fresh = make_flows(&rules, 20_000, 99).expect("built-in rules");
    let mut upcalls = |config: SwitchConfig| {
        best_per_item(3, fresh.len(), || {
            let mut sw =
                Switch::new(Pipeline::from_rules(rules.clone()), config.clone()).expect("valid config");
            for (i, k) in fresh.iter().enumerate() {
                sw.process_host(k, 100, i as u64, Offload::Allowed, &mut out);
            }
        })
    };
    let upcall_ns = upcalls(host.clone());
    let gigaflow = NicConfig::new(crate::nic::gigaflow::GigaflowConfig::default());
    let gigaflow_install_ns = (upcalls(SwitchConfig { nic: Some(gigaflow), ..host }) - upcall_ns).max(0.0);
    let config = crate::measure::DetectorConfig {
        k: 100,
        memory: 30 * 1024,
        blocks: 5,
        sample: 1.0,
        seed: 1,
        key_bits: 104,
    };
    let mut detector =
        crate::measure::build(crate::measure::Algo::FastKeeperBitmap, &config).expect("fits 30 KB");
    let spec = crate::measure::KeySpec::five_tuple();
    let ids: Vec<_> = keys.iter().filter_map(|k| spec.flow_id(k)).collect();
    let sample_ns = best_per_item(5, ids.len(), || {
        for f in &ids {
            detector.insert(*f, f.hash(1));
        }
    });
    // The engine has no NIC whose writes cost the host: `calibrate --live` measures them.
    let nic_write_ns = 0.0;
    CostModel {
        rx_ns,
        microflow_hit_ns,
        megaflow_hit_ns,
        upcall_ns,
        sample_ns,
        gigaflow_install_ns,
        nic_write_ns,
    }
}
