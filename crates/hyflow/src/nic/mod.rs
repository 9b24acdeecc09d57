//! The SmartNIC model: caching schemes over bounded match+action tables
//! ([`CacheTable`](crate::cache::table::CacheTable)s, the RMT stages FlexNIC builds on). A
//! packet an entry matches is forwarded in hardware; one that misses goes to the host.
//!
//! Every scheme implements [`NicScheme`] — lookup, install from an upcall's translation,
//! occupancy, counters, its report — and exposes its entries to the revalidator through
//! [`Revalidate`], so the switch never branches on which scheme it drives; each scheme's
//! configuration is a [`NicSchemeConfig`] that builds it. Schemes:
//! [`megaflow_offload`] (OVS hardware offload: whole megaflows in one ternary table),
//! [`gigaflow`] (sub-traversals in K tagged tables) and [`exact_match`] (one entry per flow in
//! areas an offload policy fills, as in Elixir). A new scheme is a new file implementing
//! these traits plus a line in [`SCHEMES`].

pub mod capability;
pub mod exact_match;
pub mod gigaflow;
pub mod megaflow_offload;

pub use capability::NicCapability;
pub use megaflow_offload::{MegaflowOffload, MegaflowOffloadConfig};

use crate::cache::dump::DumpedFlow;
use crate::cache::table::{Refused, TableConfigError};
use crate::decision::{CachedHit, Decision, DecisionTables};
use crate::measure::FlowId;
use crate::openflow::Traversal;
use crate::packet::FlowKey;
use crate::revalidation::Revalidate;
use crate::tuple_space::{EntryId, FlowTableStats};
use std::sync::Arc;

/// Default capacity of the megaflow-offload table (the Gigaflow paper's Megaflow baseline).
pub const DEFAULT_OFFLOAD_ENTRIES: usize = 32_768;
/// Default mask limit of the megaflow-offload table.
pub const DEFAULT_OFFLOAD_MASKS: usize = 512;

/// The Gigaflow artifact's evaluation setup (`docs/gigaflow-paper-setup.md`, from the paper
/// and gigaflow-vswitch/gvs): what its tables accept, as opposed to hyflow's defaults.
pub mod paper_setup {
    /// Distinct masks a table accepts: gvs's limit is 64, and it refuses a new mask once a
    /// table holds 63 — for Gigaflow's tables and for the one-table Megaflow baseline alike.
    pub const MASKS: usize = 63;
    /// Entries per Gigaflow table (K = 4 in the headline comparison; sizes are decimal).
    pub(crate) const GIGAFLOW_ENTRIES: usize = 8_000;
    /// Entries of the Megaflow baseline's one table.
    pub(crate) const MEGAFLOW_ENTRIES: usize = 32_000;
}

/// A NIC scheme's configuration, which names and builds the scheme (as quinn-proto's
/// `ControllerFactory`): nothing outside the scheme's own file branches on which scheme it
/// is. Held as a [`NicConfig`].
pub trait NicSchemeConfig: std::fmt::Debug + Send + Sync {
    /// The scheme's name in reports.
    fn name(&self) -> &'static str;
    /// The scheme, its tables applying installs `update_latency_ns` after they are made.
    fn build(&self, update_latency_ns: u64) -> Result<Box<dyn NicScheme>, TableConfigError>;
}

/// The NIC's caching scheme and shape: any [`NicSchemeConfig`], shared.
#[derive(Clone, Debug)]
pub struct NicConfig(Arc<dyn NicSchemeConfig>);

impl NicConfig {
    /// The NIC `config` describes.
    pub fn new(config: impl NicSchemeConfig + 'static) -> NicConfig {
        NicConfig(Arc::new(config))
    }

    /// The scheme's name.
    pub fn name(&self) -> &'static str {
        self.0.name()
    }

    /// The scheme, its tables applying installs `update_latency_ns` after they are made.
    pub fn build(&self, update_latency_ns: u64) -> Result<Box<dyn NicScheme>, TableConfigError> {
        self.0.build(update_latency_ns)
    }
}

impl Default for NicConfig {
    /// OVS's megaflow offload at hyflow's default size.
    fn default() -> Self {
        NicConfig::new(MegaflowOffloadConfig::default())
    }
}

/// What the switch's NIC options say, for a scheme to size itself from: each absent value
/// takes the scheme's default (or the Gigaflow artifact's, with `paper_setup`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NicSizing {
    /// Entries (in total, or per stage).
    pub entries: Option<usize>,
    /// Distinct masks per table.
    pub masks: Option<usize>,
    /// Stages.
    pub tables: Option<usize>,
    /// How a traversal is cut into stages.
    pub partition: Option<gigaflow::Partition>,
    /// Whether a traversal's pieces install all or none.
    pub whole_mappings: Option<bool>,
    /// The Gigaflow artifact's evaluation setup ([`paper_setup`]).
    pub paper_setup: bool,
}

impl NicSizing {
    /// Distinct masks per table: as given, or the setup's default.
    pub fn masks(&self) -> usize {
        self.masks.unwrap_or(if self.paper_setup { paper_setup::MASKS } else { DEFAULT_OFFLOAD_MASKS })
    }
}

/// A scheme as the fronts offer it (`--nic NAME`).
#[derive(Debug)]
pub struct NicSchemeRegistration {
    /// Its name, as in reports.
    pub name: &'static str,
    /// What it does, in one line of help.
    pub about: &'static str,
    /// Its configuration from the switch's NIC options.
    pub configure: fn(&NicSizing) -> NicConfig,
    /// The key its own figures go under in reports ([`SchemeFigures`]), if it has any: every
    /// report carries each registered key, null unless that scheme ran.
    pub report_key: Option<&'static str>,
}

/// Every scheme the fronts offer, in the order they list them: one line per scheme. (The
/// exact-match scheme is not among them: the policies that fill it configure it.)
pub const SCHEMES: &[&NicSchemeRegistration] = &[&megaflow_offload::REGISTRATION, &gigaflow::REGISTRATION];

/// The registered scheme called `name`.
pub fn scheme(name: &str) -> Option<&'static NicSchemeRegistration> {
    SCHEMES.iter().copied().find(|r| r.name == name)
}

/// A packet at the NIC.
#[derive(Clone, Copy, Debug)]
pub struct Arrival<'a> {
    /// Its headers.
    pub key: &'a FlowKey,
    /// Bytes on the wire.
    pub bytes: u64,
    /// When it arrives, ns.
    pub now_ns: u64,
    /// Its flow's number in its trace, when the input numbers flows (a `.hyf` trace, generated
    /// gateway traffic): the same number always comes with the same key, so a scheme may
    /// remember where that flow's entry was and skip hashing the key. `None` for other inputs
    /// and for recirculated passes.
    pub flow: Option<u32>,
}

/// What an upcall hands the NIC to offload.
#[derive(Clone, Copy)]
pub struct Upcall<'a> {
    /// The packet.
    pub key: &'a FlowKey,
    /// The slow path's traversal of it (with segments if the scheme records them).
    pub traversal: &'a Traversal,
    /// Its decision, interned (a scheme installing it takes its own references).
    pub decision: Decision,
    /// When the upcall installs, ns.
    pub now_ns: u64,
}

/// NIC occupancy and counters, summed over its tables.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NicReport {
    /// Scheme name.
    pub scheme: &'static str,
    /// Entries held now.
    pub entries_now: usize,
    /// Distinct masks held now.
    pub masks_now: usize,
    /// Counters over all tables (peak: most entries held at once).
    pub totals: FlowTableStats,
    /// The scheme's own figures, if it has any.
    pub figures: Option<SchemeFigures>,
}

/// A scheme's own figures (Gigaflow's stages, sharing, coverage), as its report gives them:
/// reports carry them under the scheme's [`NicSchemeRegistration::report_key`] without
/// knowing which scheme ran (as the `get_debug` of Open vSwitch's offload providers).
#[derive(Clone, Debug, PartialEq)]
pub struct SchemeFigures {
    /// The key they go under (`gigaflow`).
    pub key: &'static str,
    /// The figures, as `--json` writes them.
    pub json: serde_json::Value,
    /// One line of text for a summary.
    pub summary: String,
}

/// A NIC caching scheme.
pub trait NicScheme: Send {
    /// Name in reports.
    fn name(&self) -> &'static str;
    /// Whether installs need the traversal's segments recorded (`Traversal::record_segments`).
    fn needs_segments(&self) -> bool {
        false
    }
    /// Looks a packet up. On a hit, fills `hit` with the decision (the entries count the
    /// packet) and returns true; on a miss `hit` means nothing.
    fn lookup(&mut self, pkt: Arrival, hit: &mut CachedHit) -> bool;
    /// Offloads what an upcall translated, as far as the tables have room; appends the
    /// (table, id) of every entry installed.
    fn install(&mut self, upcall: Upcall, tables: &mut DecisionTables, installed: &mut Vec<(u8, EntryId)>);
    /// Installs the decision of `upcall` for its packet's flow in `area`, for schemes an
    /// offload policy fills flow by flow; the entry's id, or why not.
    fn install_flow(
        &mut self,
        _upcall: Upcall,
        _area: u8,
        _tables: &mut DecisionTables,
    ) -> Result<EntryId, Refused> {
        Err(Refused::Unsupported)
    }
    /// The (table, id) of the entry holding `flow`, for schemes keyed by flow.
    fn find_flow(&self, _flow: FlowId) -> Option<(u8, EntryId)> {
        None
    }
    /// Entries `area` holds now: what a policy sees of the NIC's room. An area is one of the
    /// scheme's tables (an exact-match area, a Gigaflow stage; a megaflow offload has one).
    fn area_len(&self, area: u8) -> usize;
    /// Entries `area` can hold.
    fn area_capacity(&self, area: u8) -> usize;
    /// Appends (flow, packets since install) of every entry of `area`, in slot order, for
    /// schemes keyed by flow: what software reads when it polls the NIC's counters.
    fn area_flows(&self, _area: u8, _out: &mut Vec<(FlowId, u64)>) {}
    /// Its entries, for the revalidator.
    fn entries(&self) -> &dyn Revalidate;
    /// Its entries, mutably.
    fn entries_mut(&mut self) -> &mut dyn Revalidate;
    /// Entries installed so far.
    fn installs(&self) -> u64;
    /// The peak of entries held (the report's, per table too) restarts from what is held
    /// now: a warm-up ended, and reports cover what follows.
    fn restart_peak(&mut self);
    /// Occupancy and counters, with the scheme's own figures (deterministic: the host's
    /// wall-clock timings are reported apart, in the replay report's `wall_clock`).
    fn report(&self) -> NicReport;
    /// The scheme itself, for callers that know which one they configured (tests, tools).
    fn as_any(&self) -> &dyn std::any::Any;
    /// Appends the (table, id, packets) hardware counters of every entry, table by table in
    /// id order (what software reads when it polls the NIC).
    fn counters(&self, out: &mut Vec<(u8, EntryId, u64)>);
    /// Appends every entry as `ovs-appctl dpctl/dump-flows type=offloaded` lists the flows
    /// in hardware: match, counters, actions (`tables` resolves the interned actions).
    fn dump(&self, tables: &DecisionTables, out: &mut Vec<DumpedFlow>);
    /// Keeps, from now on, which entries are installed, changed or removed, for a real NIC
    /// the entries are mirrored to; false if the scheme cannot be mirrored (yet).
    fn keep_journal(&mut self) -> bool {
        false
    }
    /// Moves the (table, id) of the entries journaled since the last call to `out`; each
    /// must be looked up again ([`NicScheme::entry_view`]): it may have changed or gone.
    fn drain_journal(&mut self, _out: &mut Vec<(u8, EntryId)>) {}
    /// Entry `id` of `table` as a mirror needs it.
    fn entry_view(&self, _table: u8, _id: EntryId) -> Option<NicEntryView> {
        None
    }
    /// Credits `packets` hits of `bytes` in all, the last at `last_hit_ns`, that a real NIC
    /// counted on its own to entry `id` of `table`; false if the entry is gone.
    fn credit_hits(
        &mut self,
        _table: u8,
        _id: EntryId,
        _packets: u64,
        _bytes: u64,
        _last_hit_ns: u64,
    ) -> bool {
        false
    }
}

/// A NIC entry as a mirror of the NIC's tables (the live XDP tier) needs it.
#[derive(Clone, Copy, Debug)]
pub struct NicEntryView {
    /// What it matches.
    pub matcher: crate::openflow::rule::Match,
    /// The bits of `matcher` a hardware table finds the entry by (its hash key); the rest of
    /// the match is compared once the entry is found. All of them for a ternary table's
    /// entry; the flow's fields for an exact-match table's.
    pub lookup_mask: crate::packet::FlowMask,
    /// The packet whose upcall made it.
    pub rep: FlowKey,
    /// Its decision.
    pub decision: Decision,
    /// Whether it awaits a revalidation verdict (software judges each of its packets
    /// against the slow path; hardware must not serve it meanwhile).
    pub pending: bool,
}
