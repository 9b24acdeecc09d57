//! What an experiment forwards: a pipeline's rules (with its groups, ports and MAC table), its
//! rule updates, and the packets — generated traffic or a capture ([`Input`]).

use std::path::Path;

use crate::input::Input;
use crate::openflow::group::{Groups, SwitchPorts};
use crate::openflow::normal::MacTable;
use crate::openflow::update::{read_updates_file_named, Update};
use crate::openflow::{FlowFileError, Names, Pipeline, PrefixTries, Rule};
use crate::workload::{builtin, gateway, GATEWAY_FLOWS};

/// What an experiment forwards: the rules, the rule updates, and the packets.
#[derive(Clone, Debug)]
pub struct Workload {
    /// The pipeline's rules.
    pub rules: Vec<Rule>,
    /// The groups the rules use.
    pub groups: Groups,
    /// The switch's ports (for `FLOOD`, `ALL`, `NORMAL` and bucket liveness).
    pub ports: SwitchPorts,
    /// The (empty) MAC table `NORMAL` starts with: its aging and size.
    pub macs: MacTable,
    /// The tables' prefix tries (OVS's `prefixes`).
    pub prefixes: PrefixTries,
    /// Rule updates, applied on schedule.
    pub updates: Vec<Update>,
    /// The packets.
    pub input: Input,
}

impl Workload {
    /// The built-in workload: the 7-table L2/L3/ACL pipeline of `examples/l2l3acl.flows`,
    /// 200,000 generated packets of 2,000 Zipf-distributed flows arriving on `in_port`
    /// (default 1), 10% of the rules updated per second.
    pub fn builtin(in_port: Option<u32>) -> Workload {
        let rules = builtin::rules();
        let updates = builtin::updates(&rules);
        Workload {
            rules,
            groups: Groups::new(),
            ports: SwitchPorts::default(),
            macs: MacTable::default(),
            prefixes: PrefixTries::default(),
            updates,
            input: Input::Generated { traffic: builtin::TRAFFIC, in_port: in_port.unwrap_or(1) },
        }
    }

    /// Cloud-gateway traffic of `config` streamed through `rules`, or through the gateway
    /// pipeline of `examples/gateway.flows` ([`GATEWAY_FLOWS`]).
    pub fn gateway(config: gateway::GatewayConfig, rules: Option<Vec<Rule>>) -> Workload {
        let rules = rules.unwrap_or_else(|| {
            crate::openflow::parse_flows(GATEWAY_FLOWS, "gateway.flows").expect("the gateway pipeline parses")
        });
        Workload {
            rules,
            groups: Groups::new(),
            ports: SwitchPorts::default(),
            macs: MacTable::default(),
            prefixes: PrefixTries::default(),
            updates: Vec::new(),
            input: Input::Gateway(config),
        }
    }

    /// The slow path: the rules, with the groups and ports they refer to.
    pub fn pipeline(&self) -> Pipeline {
        let mut pipeline = Pipeline::of_switch(
            self.rules.iter().cloned(),
            self.groups.clone(),
            self.ports.clone(),
            self.macs.clone(),
        );
        pipeline.set_prefix_tries(self.prefixes);
        pipeline
    }

    /// Replaces the updates with those of an updates file, whose tables and ports may be
    /// named by `names`.
    pub fn with_updates_file(mut self, path: &Path, names: &Names) -> Result<Workload, FlowFileError> {
        self.updates = read_updates_file_named(path, names)?;
        Ok(self)
    }
}
