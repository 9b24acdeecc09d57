//! `--ports`, `--tables` and `--groups`: what a flow file may refer to besides its own rules
//! (port and table names, the switch's ports and groups), on every command that loads flows;
//! and `--prefixes`, the tables' prefix tries, on those that build megaflows from them.

use std::path::{Path, PathBuf};

use anyhow::Result;
use clap::Args;

use hyflow::openflow::group::{read_groups_file, Groups, SwitchPorts};
use hyflow::openflow::names::LOCAL_PORT;
use hyflow::openflow::normal::MacTable;
use hyflow::openflow::{
    read_flow_file_checked, stream_flow_file, Action, Names, Pipeline, PipelineLoad, PrefixTries, Rule,
};

/// Where port and table names, ports and groups come from.
#[derive(Args, Clone, Default)]
pub struct NameArgs {
    /// The switch's ports and their names (`in_port="antrea-gw0"`, `output:p1`):
    /// `name=number` lines (`name=number down` for a port that is down), or the output of
    /// `ovs-ofctl show`. They are where FLOOD, ALL and NORMAL send copies, the ports NORMAL
    /// accepts packets from, and which fast-failover watches are live; without this option,
    /// the ports the flows and groups refer to, and LOCAL.
    #[arg(long, value_name = "FILE")]
    pub ports: Option<PathBuf>,
    /// Table names they use (`table=Classifier`, `resubmit(,Egress)`): `name=number` lines, or
    /// the output of `ovs-ofctl dump-table-features`. A flow file may also name its tables
    /// itself, as `table=N(name)` in any rule.
    #[arg(long, value_name = "FILE")]
    pub tables: Option<PathBuf>,
    /// The switch's groups (`group:N` actions): one per line in `ovs-ofctl add-groups` syntax,
    /// or the output of `ovs-ofctl dump-groups`; types all, select, indirect and ff.
    #[arg(long, value_name = "FILE")]
    pub groups: Option<PathBuf>,
}

/// The tables' prefix tries, on the commands that build megaflows (`trace`, `replay`, `sim`,
/// `switch`).
#[derive(Args, Clone, Copy, Default)]
pub struct PrefixArgs {
    /// The address fields every table keeps prefix tries for, as Open vSwitch's `Flow_Table`
    /// `prefixes` column: `none`, or up to 3 of ip_dst, ip_src, ipv6_dst, ipv6_src in the
    /// order lookups check them. A trie lets a lookup skip a subtable after looking at only
    /// the address bits that rule it out, so megaflows stay wide on addresses; with `none`
    /// they match addresses to the longest prefix any visited subtable has.
    #[arg(long, value_name = "FIELDS", default_value_t = PrefixTries::default())]
    pub prefixes: PrefixTries,
}

/// A flow file as loaded: its rules, the names it may use (the files' and its own), and the
/// switch's groups and ports.
pub struct Flows {
    /// The rules, in file order.
    pub rules: Vec<Rule>,
    /// Names for the updates and packets that go with the flows.
    pub names: Names,
    /// The groups of `--groups`.
    pub groups: Groups,
    /// The ports of `--ports`, or those the pipeline refers to.
    pub ports: SwitchPorts,
}

impl NameArgs {
    /// The names the files give (none without them).
    pub fn names(&self) -> Result<Names> {
        let mut names = Names::new();
        if let Some(p) = &self.ports {
            names.read_ports(p)?;
        }
        if let Some(t) = &self.tables {
            names.read_tables(t)?;
        }
        Ok(names)
    }

    /// Flow file `path` with the names, groups and ports it refers to. What loads but cannot
    /// work as written (a conjunction missing a clause, a select group OVS would hash
    /// otherwise, FLOOD without the switch's ports) is printed as a warning on standard error.
    pub fn read_flows(&self, path: &Path) -> Result<Flows> {
        let (mut names, groups) = self.names_and_groups()?;
        let (rules, warnings) = read_flow_file_checked(path, &mut names)?;
        for w in warnings {
            eprintln!("hyflow: warning: {w}");
        }
        let ports = self.switch_ports(path, &names, &rules, &groups);
        Ok(Flows { rules, names, groups, ports })
    }

    /// [`NameArgs::read_flows`] straight into the slow path, with the names the flows may use:
    /// the pipeline is built while later lines are still being parsed, and the rules are never
    /// held twice (a million-rule file loads in about half the time).
    pub fn load_pipeline(&self, path: &Path) -> Result<(Pipeline, Names)> {
        let (mut names, groups) = self.names_and_groups()?;
        let mut load = PipelineLoad::with_capacity(0);
        let warnings = stream_flow_file(path, &mut names, |rule| {
            load.add(rule);
        })?;
        for w in warnings {
            eprintln!("hyflow: warning: {w}");
        }
        let ports = self.switch_ports(path, &names, load.rules(), &groups);
        Ok((load.finish(groups, ports, MacTable::default()), names))
    }

    /// The names of the files, and the groups of `--groups` (their warnings printed).
    fn names_and_groups(&self) -> Result<(Names, Groups)> {
        let mut names = self.names()?;
        let mut groups = Groups::new();
        if let Some(g) = &self.groups {
            let (read, warnings) = read_groups_file(g, &mut names)?;
            groups = read;
            for w in warnings {
                eprintln!("hyflow: warning: {w}");
            }
        }
        Ok((names, groups))
    }

    /// The ports of `--ports`, or else those `rules` and `groups` refer to, with a warning
    /// when FLOOD, ALL or NORMAL needs the ports the switch really has.
    fn switch_ports<'a>(
        &self,
        path: &Path,
        names: &Names,
        rules: impl IntoIterator<Item = &'a Rule, IntoIter: Clone>,
        groups: &Groups,
    ) -> SwitchPorts {
        if self.ports.is_some() {
            return SwitchPorts::new(
                names.port_numbers().into_iter().chain([LOCAL_PORT]),
                names.down_ports().iter().copied(),
            );
        }
        let rules = rules.into_iter();
        let ports = SwitchPorts::referenced(rules.clone(), groups);
        let floods =
            |a: &[Action]| a.iter().any(|a| matches!(a, Action::Flood | Action::All | Action::Normal));
        if rules.clone().any(|r| floods(&r.actions))
            || groups.iter().any(|g| g.buckets.iter().any(|b| floods(&b.actions)))
        {
            let list: Vec<String> = ports.all().iter().map(|p| p.to_string()).collect();
            eprintln!(
                "hyflow: warning: {}: FLOOD, ALL and NORMAL use the switch's ports, which --ports gives; \
                 without it, the ports the flows name: {} (65534 is LOCAL; NORMAL drops packets from other \
                 ports)",
                path.display(),
                list.join(", ")
            );
        }
        ports
    }
}
