//! How a policy registers itself: its name, what it does, the parameters it takes (which the
//! fronts turn into `--name` options and `name=` keywords, refusing any the chosen policy does
//! not declare) and how its configuration is made from their values. Adding a policy is its
//! file (a [`PolicyRegistration`] and a [`super::PolicyFactory`]) plus one line in
//! [`super::POLICIES`]; no front and no other engine module names it.

use super::{PolicyConfig, PolicyConfigError};
use crate::invalid_param::InvalidParam;
use crate::measure::KeySpec;
use crate::nic::NicConfig;

/// What kind of value a parameter takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamKind {
    /// A count (entries, packets): a non-negative integer.
    Count,
    /// A number (seconds, rates, milliseconds).
    Number,
    /// Text (field lists).
    Text,
}

/// A parameter a policy takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Param {
    /// Its name: `--name` on the command line, `name` (dashes as underscores) in Python.
    pub name: &'static str,
    /// The value's name in help (`N`, `SECONDS`).
    pub value_name: &'static str,
    /// What it sets, with its default.
    pub help: &'static str,
    /// Its value's kind.
    pub kind: ParamKind,
}

/// A parameter's value as given.
#[derive(Clone, Debug, PartialEq)]
pub enum ParamValue {
    /// For [`ParamKind::Count`].
    Count(u64),
    /// For [`ParamKind::Number`].
    Number(f64),
    /// For [`ParamKind::Text`].
    Text(String),
}

/// What a run gives a policy to configure itself from: the values of the parameters given
/// (absent ones take the policy's defaults), the NIC the switch's options describe (for
/// policies that offload upcalls to it) and the sampling rate asked for.
#[derive(Clone, Debug, Default)]
pub struct PolicyParams {
    /// Parameter values given, by name.
    pub values: Vec<(&'static str, ParamValue)>,
    /// The NIC the switch's options describe, for a policy whose registration names a scheme
    /// in [`PolicyRegistration::upcall_nic`].
    pub nic: Option<NicConfig>,
    /// The share of hardware packets sampled to the host, if given.
    pub sample_rate: Option<f64>,
}

impl PolicyParams {
    fn get(&self, name: &str) -> Option<&ParamValue> {
        self.values.iter().find(|(n, _)| *n == name).map(|(_, v)| v)
    }

    /// A count's value, if given.
    pub fn count(&self, name: &str) -> Option<u64> {
        match self.get(name) {
            Some(ParamValue::Count(n)) => Some(*n),
            _ => None,
        }
    }

    /// A number's value, if given.
    pub fn number(&self, name: &str) -> Option<f64> {
        match self.get(name) {
            Some(ParamValue::Number(v)) => Some(*v),
            _ => None,
        }
    }

    /// A text's value, if given.
    pub fn text(&self, name: &str) -> Option<&str> {
        match self.get(name) {
            Some(ParamValue::Text(t)) => Some(t),
            _ => None,
        }
    }

    /// A positive number of seconds as ns (at least 1), or `default_ns` if not given.
    pub(crate) fn seconds_ns(&self, name: &'static str, default_ns: u64) -> Result<u64, PolicyConfigError> {
        match self.number(name) {
            None => Ok(default_ns),
            Some(s) if s.is_finite() && s > 0.0 && s * 1e9 >= 1.0 => Ok((s * 1e9).round() as u64),
            Some(s) => {
                Err(PolicyConfigError::param(name, format!("must be a positive number of seconds, not {s}")))
            }
        }
    }

    /// The exact-match table of the policies Elixir is compared with: its two areas together.
    pub(crate) fn exact_table(&self) -> usize {
        self.count(LARGE_ENTRIES.name).map_or(DEFAULT_LARGE_ENTRIES, |n| n as usize)
            + self.count(BURSTY_ENTRIES.name).map_or(DEFAULT_BURSTY_ENTRIES, |n| n as usize)
    }

    /// The fields the exact-match table keys flows by.
    pub fn flow_key(&self) -> Result<KeySpec, PolicyConfigError> {
        match self.text(FLOW_KEY.name) {
            None => Ok(KeySpec::five_tuple()),
            Some(text) => {
                KeySpec::parse(text).map_err(|e| PolicyConfigError::param(FLOW_KEY.name, e.to_string()))
            }
        }
    }
}

/// A policy as the fronts offer it.
#[derive(Debug)]
pub struct PolicyRegistration {
    /// Its name (`--policy NAME`), as in reports.
    pub name: &'static str,
    /// What it does, in one line of help.
    pub about: &'static str,
    /// The parameters it takes.
    pub params: &'static [Param],
    /// The NIC scheme whose table it fills with upcalls' decisions (`megaflow`, `gigaflow`),
    /// sized by the switch's NIC options; `None` for a policy that brings its own NIC (those
    /// options then do not apply).
    pub upcall_nic: Option<&'static str>,
    /// Its configuration from the values given.
    pub configure: fn(&PolicyParams) -> Result<PolicyConfig, PolicyConfigError>,
}

/// Entries of Elixir's large-flow area by default (§5.1).
pub(crate) const DEFAULT_LARGE_ENTRIES: usize = 50_000;
/// Entries of Elixir's bursty area by default (§5.1).
pub(crate) const DEFAULT_BURSTY_ENTRIES: usize = 100;

/// Entries of the exact-match table's large-flow area (shared by the policies on Elixir's
/// table).
pub(crate) const LARGE_ENTRIES: Param = Param {
    name: "large-entries",
    value_name: "N",
    help: "Entries of the exact-match table's large-flow area [default: 50000]; tfo, lfp and \
           ovs-rebalance get one table of large-entries + bursty-entries",
    kind: ParamKind::Count,
};

/// Entries of the bursty area.
pub(crate) const BURSTY_ENTRIES: Param = Param {
    name: "bursty-entries",
    value_name: "N",
    help: "Entries of the bursty area, whose counters software polls [default: 100]",
    kind: ParamKind::Count,
};

/// The exact-match table's flow key.
pub(crate) const FLOW_KEY: Param = Param {
    name: "flow-key",
    value_name: "FIELDS",
    help: "Fields the exact-match table keys flows by: 5tuple (IPv4), 5tuple46 (IPv4 and IPv6) \
           or comma-separated field names [default: 5tuple]",
    kind: ParamKind::Text,
};

/// The replacement window of the policies that re-choose their table periodically.
pub(crate) const REPLACEMENT_WINDOW: Param = Param {
    name: "replacement-window",
    value_name: "SECONDS",
    help: "Replacement window T, seconds: the table's large flows are re-chosen every T; elixir cuts its \
           identification window L into ⌈L/T⌉ sub-window arrays [default: 10]",
    kind: ParamKind::Number,
};

/// The parameters of the exact-match table every policy on Elixir's table takes.
pub(crate) const EXACT_TABLE: [Param; 3] = [LARGE_ENTRIES, BURSTY_ENTRIES, FLOW_KEY];

/// Checks `sample-rate`, the share of NIC-forwarded packets whose headers the NIC samples to
/// the host. One range for every reader of it: (0, 1]; no sampling is the parameter's absence.
pub(crate) fn check_sample_rate(rate: f64) -> Result<(), InvalidParam> {
    if rate > 0.0 && rate <= 1.0 {
        Ok(())
    } else {
        Err(InvalidParam::new("sample-rate", format!("must be in (0, 1], not {rate}")))
    }
}
