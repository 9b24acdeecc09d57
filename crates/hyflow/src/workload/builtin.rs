//! The built-in workload `hyflow replay` runs without `--flows`/`--trace`, shared with the
//! benchmarks so the figures in BENCHMARKS.md are for exactly what the main job runs.
//!
//! The 7-table L2/L3/ACL pipeline of `examples/l2l3acl.flows`, 200,000 packets of 2,000
//! Zipf(1.1) flows at 100,000 packets/s (about 2 s of trace), and 10% of the rules updated per
//! second, as in FlowShadow's experiments.

use super::{generate_updates, TrafficConfig, UpdatesConfig};
use crate::openflow::update::{parse_updates, Update};
use crate::openflow::{parse_flows, Rule};

/// Name the pipeline is reported under.
pub const FLOWS_NAME: &str = "examples/l2l3acl.flows";
/// The pipeline's flow file.
pub const FLOWS: &str = include_str!("l2l3acl.flows");
/// The traffic.
pub const TRAFFIC: TrafficConfig =
    TrafficConfig { flows: 2_000, packets: 200_000, zipf: 1.1, rate: 100_000.0, seed: 1 };
/// Fraction of the rules updated per second.
pub const UPDATE_RATE: f64 = 0.1;

/// The pipeline's rules.
pub fn rules() -> Vec<Rule> {
    parse_flows(FLOWS, FLOWS_NAME).expect("the shipped example pipeline parses")
}

/// The update stream over the traffic's duration.
pub fn updates(rules: &[Rule]) -> Vec<Update> {
    let seconds = TRAFFIC.packets as f64 / TRAFFIC.rate;
    let lines = generate_updates(rules, &UpdatesConfig { rate: UPDATE_RATE, seconds, seed: 1 })
        .expect("the example pipeline has rules");
    parse_updates(&lines.join("\n"), "built-in updates").expect("generated updates parse")
}

#[cfg(test)]
mod tests {
    #[test]
    fn workload_builds() {
        let rules = super::rules();
        assert!(rules.len() > 30);
        assert!(!super::updates(&rules).is_empty());
    }
}
