//! `--ports` and `--tables`: the names a flow file may use for ports and tables, on every
//! command that loads flows.

use std::path::{Path, PathBuf};

use anyhow::Result;
use clap::Args;

use hyflow::openflow::{read_flow_file_checked, Names, Rule};

/// Where port and table names come from.
#[derive(Args, Clone, Default)]
pub struct NameArgs {
    /// Port names the flow, updates and packet texts use (`in_port="antrea-gw0"`,
    /// `output:p1`): `name=number` lines, or the output of `ovs-ofctl show`.
    #[arg(long, value_name = "FILE")]
    pub ports: Option<PathBuf>,
    /// Table names they use (`table=Classifier`, `resubmit(,Egress)`): `name=number` lines, or
    /// the output of `ovs-ofctl dump-table-features`. A flow file may also name its tables
    /// itself, as `table=N(name)` in any rule.
    #[arg(long, value_name = "FILE")]
    pub tables: Option<PathBuf>,
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

    /// The rules of flow file `path`, and the names with the file's own declarations added
    /// (for the updates and packets that go with it). What loads but cannot work as written
    /// (a conjunction missing a clause) is printed as a warning on standard error.
    pub fn read_flows(&self, path: &Path) -> Result<(Vec<Rule>, Names)> {
        let mut names = self.names()?;
        let (rules, warnings) = read_flow_file_checked(path, &mut names)?;
        for w in warnings {
            eprintln!("hyflow: warning: {w}");
        }
        Ok((rules, names))
    }
}
