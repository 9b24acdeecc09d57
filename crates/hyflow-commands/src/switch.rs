//! The workload and switch options `replay` and `sim` share, and their meaning: the files
//! or built-in workload they name, and the [`SwitchConfig`] they describe.

use std::path::PathBuf;

use anyhow::{anyhow, bail, Result};
use clap::builder::{PossibleValue, PossibleValuesParser};
use clap::Args;

use hyflow::cache::Consistency;
use hyflow::experiment::Workload;
use hyflow::input::Input;
use hyflow::nic::gigaflow::Partition;
use hyflow::nic::{scheme, NicSizing, SCHEMES};
use hyflow::openflow::normal::MacTable;
use hyflow::openflow::update::read_updates_file_named;
use hyflow::openflow::PrefixTries;
use hyflow::switch::{MicroflowConfig, NicConfig, NicConntrack, SwitchConfig};
use hyflow::workload::gateway::{GatewayConfig, SPEC_PREFIX};

use crate::names::{NameArgs, PrefixArgs};

/// Workload and cache options shared by `replay` and `sim`.
#[derive(Args)]
pub struct SwitchArgs {
    /// Flow file in `ovs-ofctl add-flows` syntax.
    #[arg(long, value_name = "FILE", requires = "trace")]
    pub flows: Option<PathBuf>,
    #[command(flatten)]
    pub names: NameArgs,
    #[command(flatten)]
    pub prefixes: PrefixArgs,
    /// pcap/pcapng trace to replay (`-`: standard input; `.gz`: decompressed as it is read), or
    /// `gen:gateway[,KEY=VALUE...]` for cloud-gateway traffic
    /// streamed in process (keys: preset (laptop, the default: 50000 steady and 300 bursty
    /// flows at 500 kpps for 4 s, churn every 2 s; elixir: Elixir's 500000 and 300 at 56 Mpps
    /// for 60 s, churn every 10 s: 3.36 G packets, an hour or more to simulate), flows, bursty, rate, duration, top-share, head, churn, seed, in-port; through
    /// examples/gateway.flows unless --flows is given). With it, `sim` also
    /// reports how the generated bursts fared: already in the NIC, moved in during the burst
    /// and how soon, and (elixir) how soon the flow's core's ring reached K.
    #[arg(long, value_name = "FILE|gen:gateway,...")]
    pub trace: Option<PathBuf>,
    /// Rule updates: `<seconds|#N> add|modify|modify-strict|delete|delete-strict <flow spec>` per line.
    #[arg(long, value_name = "FILE")]
    pub updates: Option<PathBuf>,
    /// Input port of trace packets (pcapng: interface i arrives on port i+1 when not given).
    #[arg(long, value_name = "PORT")]
    pub in_port: Option<u32>,
    /// A capture cut mid-record (a killed tcpdump, a partial copy) is an error. Without it,
    /// every complete packet is read and a warning says where the capture was cut.
    #[arg(long)]
    pub strict: bool,
    #[command(flatten)]
    pub nic: NicArgs,
    #[command(flatten)]
    pub host: HostArgs,
}

/// What the NIC holds: its scheme and sizes (`replay`; `sim` takes a policy instead).
#[derive(Args, Clone)]
pub struct NicArgs {
    /// No NIC (`sim` takes --policy psf instead).
    #[arg(long)]
    pub no_nic: bool,
    /// NIC caching scheme, one of those below [default: megaflow]; `sim` takes --policy
    /// instead.
    #[arg(id = "nic", long = "nic", value_name = "NIC", value_parser = nic_schemes())]
    pub scheme: Option<String>,
    /// The NIC tracks connections in hardware too (megaflow NIC): decisions through `ct` and
    /// their recirculated passes may be offloaded, and a packet whose first pass the NIC holds
    /// makes its later passes there while it holds them. `established`: as tc's `ct` offload
    /// (ConnectX-class NICs) — the NIC tracks TCP connections once both peers are established
    /// and UDP ones once both directions were seen, up to --nic-ct-entries, from
    /// --nic-update-latency after (sim); new connections, TCP SYN/FIN/RST segments, ICMP and
    /// connections left out go to software from the pass that tracks them. `all`: every
    /// connection from its first packet, an upper bound. Without it the NIC leaves every
    /// decision through `ct` to software.
    #[arg(long, value_enum, value_name = "MODE")]
    pub nic_conntrack: Option<NicConntrackArg>,
    /// Connections the NIC's table holds with --nic-conntrack established.
    #[arg(long, value_name = "N", default_value_t = 1 << 20)]
    pub nic_ct_entries: usize,
    /// Defaults of a published setup; options given explicitly override them.
    /// `gigaflow-paper`: the Gigaflow artifact's evaluation (docs/gigaflow-paper-setup.md) —
    /// 63 usable masks per NIC table for both schemes, 8,000 entries per Gigaflow stage and
    /// 32,000 for Megaflow, no idle expiry (fill-only tables: a full table refuses, nothing is
    /// evicted), whole mappings, no microflow cache (EMC/SMC disabled); `replay`'s hit rates are cumulative
    /// from the first packet, as the artifact counted them.
    #[arg(long, value_enum)]
    pub preset: Option<PresetArg>,
    /// NIC entries: in total for megaflow (default 32768), per stage for gigaflow (default 8192);
    /// 32000 and 8000 with --preset gigaflow-paper.
    #[arg(long, value_name = "N")]
    pub nic_entries: Option<usize>,
    /// Distinct masks per NIC stage (default 512; 63 with --preset gigaflow-paper).
    #[arg(long, value_name = "N")]
    pub nic_masks: Option<usize>,
    /// Gigaflow stages (K) [default: 4].
    #[arg(long, value_name = "K")]
    pub nic_tables: Option<usize>,
    /// Gigaflow partitioning: dp (disjoint partitioning), random, one-to-one [default: dp].
    #[arg(long, value_enum)]
    pub partition: Option<PartitionArg>,
    /// Gigaflow installs: partial (the pieces that fit; later traversals may complete the
    /// chain; the default) or whole (all of a traversal's pieces or none, as the Gigaflow
    /// artifact; the default with --preset gigaflow-paper).
    #[arg(long, value_enum, value_name = "HOW")]
    pub mappings: Option<MappingsArg>,
    /// What the NIC's hardware can hold: model (whatever its tables have room for) or xdp
    /// (what the live switch's XDP tier can carry out exactly: Ethernet and LLC/SNAP with up
    /// to two VLAN tags, IPv4, ARP; set Ethernet and IPv4 addresses, TOS, TTL, TCP/UDP ports,
    /// VLAN pops and pushes, one output or a drop; IPv6 frames never reach it), so that
    /// `replay` predicts what `hyflow switch --nic xdp` serves in the kernel.
    #[arg(long, value_enum, value_name = "KIND", default_value = "model")]
    pub nic_capability: NicCapabilityArg,
}

/// `--nic-capability`'s values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum NicCapabilityArg {
    /// Whatever the tables have room for.
    Model,
    /// What the XDP tier can carry out.
    Xdp,
}

/// The host's caches and the switch's own behaviour (revalidation, MAC learning): what
/// `replay`, `sim` and the live `switch` share.
#[derive(Args, Clone)]
pub struct HostArgs {
    /// Every packet through the slow path (the reference for the caches).
    #[arg(long)]
    pub no_cache: bool,
    /// No microflow cache (the default with --preset gigaflow-paper).
    #[arg(long)]
    pub no_microflow: bool,
    /// Microflow cache entries.
    #[arg(long, value_name = "N", default_value_t = hyflow::switch::DEFAULT_MICROFLOW_ENTRIES)]
    pub microflow_entries: usize,
    /// Entries per microflow bucket: 1 (direct replacement), 2 or 4 (pseudo-LRU).
    #[arg(long, value_name = "W", default_value_t = 1)]
    pub microflow_ways: usize,
    /// No software megaflow cache.
    #[arg(long)]
    pub no_megaflow: bool,
    /// Software megaflow cache entries.
    #[arg(long, value_name = "N", default_value_t = hyflow::switch::DEFAULT_MEGAFLOW_ENTRIES)]
    pub megaflow_entries: usize,
    /// How the microflow cache stays consistent with rule updates.
    #[arg(long, value_enum, default_value = "action")]
    pub consistency: ConsistencyArg,
    /// Seconds of trace time without a hit after which NIC and megaflow entries expire
    /// (0 = never; default 10).
    #[arg(long, value_name = "SECONDS")]
    pub max_idle: Option<f64>,
    /// Seconds between a rule update and the revalidator acting on NIC and megaflow entries.
    #[arg(long, value_name = "SECONDS", default_value_t = 0.0)]
    pub revalidation_delay: f64,
    /// Seconds without a packet from a MAC after which NORMAL forgets where it is (OVS's
    /// `mac-aging-time`).
    #[arg(long, value_name = "SECONDS", default_value_t = 300.0)]
    pub mac_aging: f64,
    /// MACs NORMAL remembers at most (OVS's `mac-table-size`); the least recently seen goes.
    #[arg(long, value_name = "N", default_value_t = hyflow::openflow::normal::DEFAULT_MAX_ENTRIES as u64,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub mac_table_size: u64,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PresetArg {
    /// The Gigaflow artifact's evaluation setup.
    GigaflowPaper,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum MappingsArg {
    /// Install the pieces that fit.
    Partial,
    /// Install all of a traversal's pieces or none.
    Whole,
}

/// `--nic`'s values: the registered schemes ([`hyflow::nic::SCHEMES`]), each with its line of
/// help.
fn nic_schemes() -> PossibleValuesParser {
    PossibleValuesParser::new(SCHEMES.iter().map(|r| PossibleValue::new(r.name).help(r.about)))
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum NicConntrackArg {
    /// The connections software saw established, while the NIC's table has room (tc `ct`
    /// offload).
    Established,
    /// Every connection from its first packet (an upper bound).
    All,
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum PartitionArg {
    /// The paper's disjoint partitioning (dynamic program).
    Dp,
    /// Random cuts.
    Random,
    /// One lookup per stage.
    OneToOne,
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum ConsistencyArg {
    /// Signature Table: eager removal of a changed rule's microflows (strong).
    Signature,
    /// Cookie Table: rule states checked on every hit (weak).
    Cookie,
    /// Action Table time stamps checked on every hit (weak).
    Action,
}

/// Option `flag`'s seconds as nanoseconds, refused by name when negative or not a number.
pub fn seconds_to_ns(flag: &str, s: f64) -> Result<u64> {
    if !(s.is_finite() && s >= 0.0) {
        bail!("{flag} must be a non-negative number of seconds, not {s}");
    }
    Ok((s * 1e9).round() as u64)
}

/// The MAC table `NORMAL` starts with, as `--mac-aging` and `--mac-table-size` give it.
pub fn mac_table(h: &HostArgs) -> Result<MacTable> {
    let aging = seconds_to_ns("--mac-aging", h.mac_aging)?;
    if aging == 0 {
        bail!("--mac-aging must be a positive number of seconds, not {}", h.mac_aging);
    }
    Ok(MacTable::new(aging, usize::try_from(h.mac_table_size).unwrap_or(usize::MAX)))
}

/// Whether the options ask for the Gigaflow artifact's setup.
fn paper(n: &NicArgs) -> bool {
    n.preset == Some(PresetArg::GigaflowPaper)
}

/// What the NIC options say, for a scheme to size itself from.
pub fn nic_sizing(n: &NicArgs) -> NicSizing {
    NicSizing {
        entries: n.nic_entries,
        masks: n.nic_masks,
        tables: n.nic_tables,
        partition: n.partition.map(|p| match p {
            PartitionArg::Dp => Partition::Disjoint,
            PartitionArg::Random => Partition::Random,
            PartitionArg::OneToOne => Partition::OneToOne,
        }),
        whole_mappings: n.mappings.map(|m| m == MappingsArg::Whole),
        paper_setup: paper(n),
    }
}

/// The NIC of the registered scheme `name`, sized by the options.
pub fn nic_of_scheme(name: &str, n: &NicArgs) -> Result<NicConfig> {
    let scheme = scheme(name).ok_or_else(|| anyhow!("no NIC scheme {name}"))?;
    Ok((scheme.configure)(&nic_sizing(n)))
}

/// The options given that size the megaflow or Gigaflow NIC, by name: they mean nothing to
/// a policy that brings its own NIC.
pub fn nic_sizing_given(n: &NicArgs) -> Vec<&'static str> {
    [
        (n.nic_entries.is_some(), "--nic-entries"),
        (n.nic_masks.is_some(), "--nic-masks"),
        (n.nic_tables.is_some(), "--nic-tables"),
        (n.partition.is_some(), "--partition"),
        (n.mappings.is_some(), "--mappings"),
    ]
    .into_iter()
    .filter_map(|(given, name)| given.then_some(name))
    .collect()
}

/// The switch the options describe, NIC included.
pub fn switch_config(a: &SwitchArgs) -> Result<SwitchConfig> {
    let n = &a.nic;
    // A NIC table of nothing: a parameter out of range, named as such (not the engine's
    // table error, which knows tables, not options; `nic-tables` the engine names itself).
    for (param, value) in [("nic-entries", n.nic_entries), ("nic-masks", n.nic_masks)] {
        if value == Some(0) {
            let why = "must be at least 1 (for no NIC at all: `no-nic` in replay, policy psf in sim)";
            return Err(hyflow::invalid_param::InvalidParam::new(param, why).into());
        }
    }
    if n.nic_capability == NicCapabilityArg::Xdp && n.scheme.as_deref().is_some_and(|s| s != "megaflow") {
        let why = "xdp models the live XDP tier, which holds megaflows: it goes with --nic megaflow";
        return Err(hyflow::invalid_param::InvalidParam::new("nic-capability", why).into());
    }
    let host = host_config(&a.host, paper(n))?;
    if a.host.no_cache {
        return Ok(host);
    }
    Ok(SwitchConfig {
        nic: if n.no_nic { None } else { Some(nic_of_scheme(n.scheme.as_deref().unwrap_or("megaflow"), n)?) },
        nic_conntrack: match n.nic_conntrack {
            None => NicConntrack::Off,
            Some(NicConntrackArg::Established) => NicConntrack::Established { entries: n.nic_ct_entries },
            Some(NicConntrackArg::All) => NicConntrack::All,
        },
        nic_capability: match n.nic_capability {
            NicCapabilityArg::Model => hyflow::nic::NicCapability::Model,
            NicCapabilityArg::Xdp => hyflow::nic::NicCapability::Xdp,
        },
        ..host
    })
}

/// The switch the host options describe, with no NIC: the software datapath alone (`paper`:
/// the Gigaflow artifact's setup, which has no microflow cache and never expires entries).
pub fn host_config(h: &HostArgs, paper: bool) -> Result<SwitchConfig> {
    let consistency = match h.consistency {
        ConsistencyArg::Signature => Consistency::Signature,
        ConsistencyArg::Cookie => Consistency::Cookie,
        ConsistencyArg::Action => Consistency::Action,
    };
    let config = SwitchConfig {
        nic: None,
        nic_update_latency_ns: 0,
        nic_conntrack: NicConntrack::Off,
        nic_capability: hyflow::nic::NicCapability::Model,
        microflow: (!h.no_microflow && !paper)
            .then_some(MicroflowConfig { entries: h.microflow_entries, ways: h.microflow_ways }),
        megaflow: (!h.no_megaflow).then_some(h.megaflow_entries),
        consistency,
        max_idle_ns: match h.max_idle {
            Some(s) => seconds_to_ns("--max-idle", s)?,
            // The artifact's tables never expire (fill-only).
            None if paper => 0,
            None => hyflow::switch::DEFAULT_MAX_IDLE_NS,
        },
        revalidation_delay_ns: seconds_to_ns("--revalidation-delay", h.revalidation_delay)?,
    };
    Ok(if h.no_cache { SwitchConfig { microflow: None, megaflow: None, ..config } } else { config })
}

/// The workload the options name: the given files, or the built-in workload (with
/// `--updates` replacing its update stream when given).
pub fn workload(a: &SwitchArgs) -> Result<Workload> {
    if let Some(spec) = a.trace.as_ref().and_then(|t| GatewayConfig::parse(&t.to_string_lossy())) {
        let config = spec.map_err(|e| anyhow!("--trace: {e}"))?;
        let config = GatewayConfig { in_port: a.in_port.unwrap_or(config.in_port), ..config };
        let (flows, names) = match &a.flows {
            Some(f) => {
                let flows = a.names.read_flows(f)?;
                let names = flows.names.clone();
                (Some(flows), names)
            }
            None => (None, a.names.names()?),
        };
        let w = match flows {
            Some(f) => {
                Workload { groups: f.groups, ports: f.ports, ..Workload::gateway(config, Some(f.rules)) }
            }
            None => Workload::gateway(config, None),
        };
        return Ok(match &a.updates {
            Some(u) => w.with_updates_file(u, &names)?,
            None => w,
        });
    }
    if a.trace.is_some() && a.flows.is_none() {
        bail!("--trace needs --flows (the pipeline the capture goes through), unless it is {SPEC_PREFIX}");
    }
    let w = match (&a.flows, &a.trace) {
        (Some(flows), Some(trace)) => {
            let flows = a.names.read_flows(flows)?;
            let updates =
                a.updates.as_deref().map(|u| read_updates_file_named(u, &flows.names)).transpose()?;
            Workload {
                macs: MacTable::default(),
                prefixes: PrefixTries::default(),
                rules: flows.rules,
                groups: flows.groups,
                ports: flows.ports,
                updates: updates.unwrap_or_default(),
                input: Input::Capture { path: trace.clone(), in_port: a.in_port, strict: a.strict },
            }
        }
        _ => match &a.updates {
            Some(u) => Workload::builtin(a.in_port).with_updates_file(u, &a.names.names()?)?,
            None => Workload::builtin(a.in_port),
        },
    };
    if let (Some(flows), true) = (&a.flows, w.rules.is_empty()) {
        eprintln!(
            "hyflow: warning: {} has no rules: every packet misses table 0 and is dropped",
            flows.display()
        );
    }
    Ok(Workload { macs: mac_table(&a.host)?, prefixes: a.prefixes.prefixes, ..w })
}
