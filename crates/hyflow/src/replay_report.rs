//! The per-layer report of a replay: where every packet was handled ([`ReplayReport`]), with
//! the NIC scheme's own figures, recirculation and connection tracking, the steady-state
//! shares after a warm-up, and the host's wall-clock timings apart.

use crate::capture::CaptureCut;
use crate::conntrack::ConntrackStats;
use crate::nic::{SchemeFigures, SCHEMES};
use crate::packet::MalformedCounts;
use crate::switch::{Layer, PassStats, PortStats, Switch};

fn rate(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

/// The report's key of its host wall-clock figures ([`WallClockFigures`]): the only ones that
/// differ between two runs of the same inputs. Tables that compare runs (sweeps) leave it out.
pub const WALL_CLOCK_KEY: &str = "wall_clock";

/// How long the machine running hyflow took for work whose duration is a property of that
/// machine, not of the switch modelled. All 0 unless the switch was timed
/// ([`Switch::time_host`]); never part of a decision.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct WallClockFigures {
    /// Host wall-clock ms spent revalidating NIC entries after rule updates.
    pub nic_revalidation_ms: f64,
    /// Host wall-clock µs per upcall offered to the NIC, spent installing its translation
    /// there (any scheme: Gigaflow's partitioning, rule generation and table writes; a
    /// megaflow table's one write).
    pub nic_install_us_per_upcall: f64,
}

/// Where packets were handled, per layer: what `hyflow replay` prints and `--json` writes
/// (key names are an interface). Entries figures are peaks unless named `_now`.
/// Every figure but those under [`WALL_CLOCK_KEY`] is a deterministic function of the inputs.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct ReplayReport {
    /// Packets replayed.
    pub packets: u64,
    /// Their bytes on the wire.
    pub bytes: u64,
    /// Trace time from the first packet to the last, s.
    pub trace_seconds: f64,
    /// Packets the NIC decided (by their first pass).
    pub nic_hits: u64,
    /// Packets the microflow cache decided (by their first pass).
    pub microflow_hits: u64,
    /// Packets the megaflow cache decided (by their first pass).
    pub megaflow_hits: u64,
    /// Packets the slow path decided (by their first pass).
    pub upcalls: u64,
    /// `nic_hits` / `packets` (0–1).
    pub nic_hit_rate: f64,
    /// `microflow_hits` / `packets` (0–1).
    pub microflow_hit_rate: f64,
    /// `megaflow_hits` / `packets` (0–1).
    pub megaflow_hit_rate: f64,
    /// `upcalls` / `packets` (0–1).
    pub upcall_rate: f64,
    /// Packets of which at least one copy left.
    pub forwarded: u64,
    /// Packets of which no copy left: the pipeline decided to drop them.
    pub dropped: u64,
    /// Those drops by the layer that decided the packet (its first pass).
    pub dropped_by_layer: PassStats,
    /// Every port's packets and bytes in and out, in port order, as `ovs-ofctl dump-ports`
    /// counts them (a copy's bytes as it left: VLAN tags pushed or popped change them).
    pub ports: Vec<PortStats>,
    /// Most NIC entries held at once (over all its tables).
    pub nic_entries: usize,
    /// NIC entries held at the end.
    pub nic_entries_now: usize,
    /// Distinct masks in the NIC's tables at the end.
    pub nic_masks_now: usize,
    /// NIC entries installed.
    pub nic_installs: u64,
    /// NIC installs refused (table full, or no room for a new mask).
    pub nic_refused: u64,
    /// Of those, refused for the mask limit.
    pub nic_refused_masks: u64,
    /// NIC entries removed after `max-idle` without a hit.
    pub nic_expired: u64,
    /// NIC entries evicted by revalidation.
    pub nic_revalidated: u64,
    /// Most microflow entries held at once.
    pub microflow_entries: usize,
    /// Microflow entries held at the end.
    pub microflow_entries_now: usize,
    /// Microflow cache slots.
    pub microflow_capacity: usize,
    /// Bytes of the microflow cache's slots.
    pub microflow_bytes: usize,
    /// Microflows cached.
    pub microflow_inserts: u64,
    /// Microflows replaced by another in their bucket.
    pub microflow_evictions: u64,
    /// Microflows dropped by the consistency mechanism (found invalid on a hit, or removed eagerly).
    pub microflow_invalidated: u64,
    /// Most megaflow entries held at once.
    pub megaflow_entries: usize,
    /// Megaflow entries held at the end.
    pub megaflow_entries_now: usize,
    /// Distinct masks in the megaflow cache at the end.
    pub megaflow_masks_now: usize,
    /// Megaflow entries installed.
    pub megaflow_installs: u64,
    /// Megaflow installs refused (cache full).
    pub megaflow_refused: u64,
    /// Megaflow entries removed after `max-idle` without a hit.
    pub megaflow_expired: u64,
    /// Megaflow entries evicted by revalidation.
    pub megaflow_revalidated: u64,
    /// Distinct action lists cached entries refer to, at the end.
    pub action_table_entries: usize,
    /// Distinct rule paths cached entries refer to, at the end.
    pub rule_paths: usize,
    /// The microflow cache's consistency mechanism (`signature`, `cookie`, `action`).
    pub consistency: &'static str,
    /// Rule updates applied.
    pub updates: u64,
    /// Rules added, modified or deleted by them.
    pub rules_changed: u64,
    /// Flows `learn` actions installed or changed.
    pub learned: u64,
    /// Rules deleted because their idle or hard timeout passed.
    pub rules_expired: u64,
    /// Changes of the MAC table `NORMAL` uses (new, moved, evicted or expired MACs).
    pub mac_changes: u64,
    /// Cached entries re-translated by revalidation.
    pub retranslations: u64,
    /// Packets forwarded by an entry awaiting a revalidation verdict.
    pub stale: u64,
    /// Of those, packets whose outputs differed from the slow path's at that moment.
    pub stale_wrong: u64,
    /// Packets that needed the slow path for a controller action.
    pub controller: u64,
    /// Packets that stayed in the slow path for a rewrite the datapath cannot do.
    pub slow_actions: u64,
    /// Malformed frames (forwarded on what was parsed).
    pub malformed: u64,
    /// Malformed frames by reason, in first-seen order.
    pub malformed_reasons: MalformedCounts,
    /// Packets cut to the capture's snapshot length (read from their headers).
    pub snaplen_truncated: u64,
    /// Where the capture was found cut mid-record, if it was: the figures are over its
    /// complete packets.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capture_cut: Option<CaptureCut>,
    /// The NIC scheme's name (`none` without a NIC).
    pub nic_scheme: &'static str,
    /// The NIC scheme's own figures, under each registered scheme's key (null for the
    /// schemes that did not run).
    #[serde(flatten)]
    pub nic_figures: NicFigures,
    /// Connection tracking and recirculation, when the pipeline used them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recirculation: Option<RecircReport>,
    /// Shares over the packets after a warm-up, if one was asked for (the figures above
    /// count from the first packet, warm-up included).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub steady: Option<SteadyShares>,
    /// The host's wall-clock timings: the only figures that are not a function of the inputs.
    pub wall_clock: WallClockFigures,
    /// Which layers exist (for the text table's "off").
    #[serde(skip)]
    pub layers: Layers,
}

/// The NIC scheme's own figures in a report: serialized as one key per registered scheme
/// that has figures, holding them for the scheme that ran and null for the others.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NicFigures(pub Option<SchemeFigures>);

impl serde::Serialize for NicFigures {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let keys: Vec<&str> = SCHEMES.iter().filter_map(|r| r.report_key).collect();
        let mut map = s.serialize_map(Some(keys.len()))?;
        for key in keys {
            let ours = self.0.as_ref().filter(|f| f.key == key);
            map.serialize_entry(key, &ours.map(|f| &f.json))?;
        }
        map.end()
    }
}

/// Connection tracking and recirculation: where each pass was decided, the megaflows each
/// pass holds, and the connection tracker's counters.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct RecircReport {
    /// Passes after packets' first (clones `ct(table=N)` recirculated).
    pub recirculations: u64,
    /// Clones dropped at the datapath's recirculation depth limit.
    pub too_deep: u64,
    /// Where the passes were decided: the first, the second, the third, later ones.
    pub passes: [PassStats; 4],
    /// Megaflow entries held at the end, by the pass they serve.
    pub megaflows_now: [usize; 4],
    /// The connection tracker's counters.
    pub conntrack: ConntrackStats,
    /// Connections held at the end.
    pub connections_now: usize,
    /// Connections the NIC's table held at the end (`--nic-conntrack established`).
    pub nic_connections_now: usize,
    /// NIC hits that went to software because the NIC's table did not hold a connection the
    /// decision tracks.
    pub nic_conntrack_misses: u64,
}

/// Where packets were handled after a warm-up: the steady state, where the cumulative
/// figures (the Gigaflow artifact's) include the cold start.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct SteadyShares {
    /// Trace time the count starts at, s.
    pub from_s: f64,
    /// Packets counted.
    pub packets: u64,
    /// NIC hits / packets counted.
    pub nic_hit_rate: f64,
    /// Microflow hits / packets counted.
    pub microflow_hit_rate: f64,
    /// Megaflow hits / packets counted.
    pub megaflow_hit_rate: f64,
    /// Upcalls / packets counted.
    pub upcall_rate: f64,
}

impl SteadyShares {
    /// Shares of `by_layer` (packets per [`Layer`], in its order) counted from `from_ns`.
    pub fn new(from_ns: u64, by_layer: [u64; 4]) -> SteadyShares {
        let packets = by_layer.iter().sum();
        SteadyShares {
            from_s: from_ns as f64 / 1e9,
            packets,
            nic_hit_rate: rate(by_layer[Layer::Nic as usize], packets),
            microflow_hit_rate: rate(by_layer[Layer::Microflow as usize], packets),
            megaflow_hit_rate: rate(by_layer[Layer::Megaflow as usize], packets),
            upcall_rate: rate(by_layer[Layer::SlowPath as usize], packets),
        }
    }
}

/// Which layers a switch has.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Layers {
    /// A NIC.
    pub nic: bool,
    /// A microflow cache.
    pub microflow: bool,
    /// A megaflow cache.
    pub megaflow: bool,
}

impl ReplayReport {
    /// The report of a switch after `elapsed_ns` of trace.
    pub fn new(
        sw: &Switch,
        malformed: &MalformedCounts,
        snaplen_truncated: u64,
        elapsed_ns: u64,
    ) -> ReplayReport {
        let s = sw.stats();
        let host = sw.host_timings();
        let nic = sw.nic_report().unwrap_or_default();
        let microflow = sw.microflow();
        let microflow_stats = microflow.map(|m| m.stats()).unwrap_or_default();
        let megaflow = sw.megaflow();
        let megaflow_stats = megaflow.map(|m| m.stats).unwrap_or_default();
        let (actions, paths) = sw.decision_tables();
        ReplayReport {
            packets: s.packets,
            bytes: s.bytes,
            trace_seconds: elapsed_ns as f64 / 1e9,
            nic_hits: s.nic_hits,
            microflow_hits: s.microflow_hits,
            megaflow_hits: s.megaflow_hits,
            upcalls: s.upcalls,
            nic_hit_rate: rate(s.nic_hits, s.packets),
            microflow_hit_rate: rate(s.microflow_hits, s.packets),
            megaflow_hit_rate: rate(s.megaflow_hits, s.packets),
            upcall_rate: rate(s.upcalls, s.packets),
            forwarded: s.forwarded,
            dropped: s.dropped,
            dropped_by_layer: s.dropped_by_layer,
            ports: sw.port_stats(),
            nic_entries: nic.totals.peak,
            nic_entries_now: nic.entries_now,
            nic_masks_now: nic.masks_now,
            nic_installs: nic.totals.installs,
            nic_refused: nic.totals.refused,
            nic_refused_masks: nic.totals.refused_masks,
            nic_expired: nic.totals.expired,
            nic_revalidated: nic.totals.revalidated,
            microflow_entries: microflow_stats.peak,
            microflow_entries_now: microflow.map_or(0, |m| m.len()),
            microflow_capacity: microflow.map_or(0, |m| m.capacity()),
            microflow_bytes: microflow.map_or(0, |m| m.slot_bytes()),
            microflow_inserts: microflow_stats.inserts,
            microflow_evictions: microflow_stats.evictions,
            microflow_invalidated: microflow_stats.invalidated + microflow_stats.removed,
            megaflow_entries: megaflow_stats.peak,
            megaflow_entries_now: megaflow.map_or(0, |m| m.space().len()),
            megaflow_masks_now: megaflow.map_or(0, |m| m.space().n_masks()),
            megaflow_installs: megaflow_stats.installs,
            megaflow_refused: megaflow_stats.refused,
            megaflow_expired: megaflow_stats.expired,
            megaflow_revalidated: megaflow_stats.revalidated,
            action_table_entries: actions,
            rule_paths: paths,
            consistency: sw.config().consistency.name(),
            updates: s.updates,
            rules_changed: s.rules_changed,
            learned: s.learned,
            rules_expired: s.rules_expired,
            mac_changes: s.mac_changes,
            retranslations: s.retranslations,
            stale: s.stale,
            stale_wrong: s.stale_wrong,
            controller: s.controller,
            slow_actions: s.slow_actions,
            malformed: malformed.total(),
            malformed_reasons: malformed.clone(),
            snaplen_truncated,
            capture_cut: None,
            nic_scheme: if sw.nic().is_some() { nic.scheme } else { "none" },
            nic_figures: NicFigures(nic.figures),
            recirculation: (s.recirculations > 0 || sw.conntrack().stats().packets > 0).then(|| {
                RecircReport {
                    recirculations: s.recirculations,
                    too_deep: s.recirc_too_deep,
                    passes: s.by_pass,
                    megaflows_now: sw.megaflows_by_pass(),
                    conntrack: sw.conntrack().stats(),
                    connections_now: sw.conntrack().len(),
                    nic_connections_now: sw.conntrack().offloaded(),
                    nic_conntrack_misses: s.nic_conntrack_misses,
                }
            }),
            steady: None,
            wall_clock: WallClockFigures {
                nic_revalidation_ms: host.nic_revalidation_ms(),
                nic_install_us_per_upcall: host.install_us_per_upcall(),
            },
            layers: Layers {
                nic: sw.nic().is_some(),
                microflow: microflow.is_some(),
                megaflow: megaflow.is_some(),
            },
        }
    }

    /// The report as a text table.
    pub fn text(&self) -> String {
        let r = self;
        let pct = |n: u64| 100.0 * rate(n, r.packets);
        let mut out = format!(
            "packets {} ({} bytes, {:.3} s of trace), consistency {}\n\n",
            r.packets, r.bytes, r.trace_seconds, r.consistency
        );
        out.push_str(&format!(
            "{:<10} {:>12} {:>8} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}\n",
            "layer",
            "packets",
            "share",
            "dropped",
            "entries",
            "peak",
            "installs",
            "evicted",
            "invalid",
            "expired"
        ));
        let row = |name: &str, on: bool, n: u64, dropped: u64, cells: [String; 6]| {
            let [entries, peak, inst, ev, inv, exp] =
                if on { cells } else { std::array::from_fn(|_| "off".to_string()) };
            format!(
                "{name:<10} {n:>12} {:>7.2}% {dropped:>9} {entries:>9} {peak:>9} {inst:>9} {ev:>9} {inv:>9} {exp:>9}\n",
                pct(n)
            )
        };
        let none = || "-".to_string();
        let d = &r.dropped_by_layer;
        out.push_str(&row(
            "nic",
            r.layers.nic,
            r.nic_hits,
            d.nic,
            [
                r.nic_entries_now.to_string(),
                r.nic_entries.to_string(),
                r.nic_installs.to_string(),
                none(),
                r.nic_revalidated.to_string(),
                r.nic_expired.to_string(),
            ],
        ));
        out.push_str(&row(
            "microflow",
            r.layers.microflow,
            r.microflow_hits,
            d.microflow,
            [
                r.microflow_entries_now.to_string(),
                r.microflow_entries.to_string(),
                r.microflow_inserts.to_string(),
                r.microflow_evictions.to_string(),
                r.microflow_invalidated.to_string(),
                none(),
            ],
        ));
        out.push_str(&row(
            "megaflow",
            r.layers.megaflow,
            r.megaflow_hits,
            d.megaflow,
            [
                r.megaflow_entries_now.to_string(),
                r.megaflow_entries.to_string(),
                r.megaflow_installs.to_string(),
                none(),
                r.megaflow_revalidated.to_string(),
                r.megaflow_expired.to_string(),
            ],
        ));
        out.push_str(&row("slowpath", true, r.upcalls, d.upcalls, std::array::from_fn(|_| none())));
        out.push_str(&format!(
            "\nforwarded {} packets ({:.2}%), dropped {} ({:.2}%)\n",
            r.forwarded,
            pct(r.forwarded),
            r.dropped,
            pct(r.dropped)
        ));
        out.push_str(&ports_text(&r.ports));
        out.push_str(&format!(
            "updates {} ({} rules changed, {} entries re-translated); stale decisions {} ({} with wrong outputs)\n",
            r.updates, r.rules_changed, r.retranslations, r.stale, r.stale_wrong
        ));
        if r.rules_expired > 0 {
            out.push_str(&format!("rules expired (idle or hard timeout) {}\n", r.rules_expired));
        }
        if r.learned > 0 {
            out.push_str(&format!("flows learned or changed by learn actions {}\n", r.learned));
        }
        if r.mac_changes > 0 {
            out.push_str(&format!(
                "MAC table changes (NORMAL: new, moved, evicted or expired MACs; each revalidates) {}\n",
                r.mac_changes
            ));
        }
        out.push_str(&format!(
            "action table {} lists, {} rule paths; controller (slow-path only) packets {}\n",
            r.action_table_entries, r.rule_paths, r.controller
        ));
        if r.slow_actions > 0 {
            out.push_str(&format!(
                "slow-path only packets for rewrites the datapath cannot do (ARP, ICMP type/code) {}\n",
                r.slow_actions
            ));
        }
        if let Some(rc) = &r.recirculation {
            out.push_str(&rc.text());
        }
        if let Some(st) = &r.steady {
            out.push_str(&format!(
                "steady state (the {} packets from {:.3} s of trace on): nic {:.2}%, microflow {:.2}%, megaflow {:.2}%, slowpath {:.2}%\n",
                st.packets,
                st.from_s,
                st.nic_hit_rate * 100.0,
                st.microflow_hit_rate * 100.0,
                st.megaflow_hit_rate * 100.0,
                st.upcall_rate * 100.0
            ));
        }
        if let Some(f) = &r.nic_figures.0 {
            out.push_str(&f.summary);
            out.push('\n');
        }
        let clock = &r.wall_clock;
        if clock.nic_install_us_per_upcall > 0.0 || clock.nic_revalidation_ms > 0.0 {
            out.push_str(&format!(
                "host wall clock: {:.1} us per upcall to install in the NIC, {:.1} ms revalidating NIC entries\n",
                clock.nic_install_us_per_upcall, clock.nic_revalidation_ms
            ));
        }
        out.push_str(&format!("malformed packets {}", r.malformed));
        if !r.malformed_reasons.by_reason.is_empty() {
            let parts: Vec<String> =
                r.malformed_reasons.by_reason.iter().map(|(reason, n)| format!("{reason} {n}")).collect();
            out.push_str(&format!(" ({})", parts.join(", ")));
        }
        out.push('\n');
        if r.snaplen_truncated > 0 {
            out.push_str(&format!(
                "snaplen-truncated packets {} (read from their captured headers)\n",
                r.snaplen_truncated
            ));
        }
        out
    }
}

/// Ports' counters as `ovs-ofctl dump-ports` prints them (`LOCAL` by name), with the
/// counters hyflow keeps.
pub fn ports_text(ports: &[PortStats]) -> String {
    let mut out = format!("ports: {}\n", ports.len());
    for p in ports {
        let name = if p.port == crate::openflow::names::LOCAL_PORT {
            "LOCAL".to_string()
        } else {
            p.port.to_string()
        };
        out.push_str(&format!(
            "  port {name:>2}: rx pkts={}, bytes={}\n           tx pkts={}, bytes={}\n",
            p.rx_packets, p.rx_bytes, p.tx_packets, p.tx_bytes
        ));
    }
    out
}

impl RecircReport {
    /// The per-pass table and the connection tracker's line.
    fn text(&self) -> String {
        let mut out = format!(
            "\nrecirculation: {} passes after the first ({} dropped at depth {})\n{:<10} {:>12} {:>9} {:>9} {:>9} {:>9} {:>10}\n",
            self.recirculations,
            self.too_deep,
            crate::switch::MAX_RECIRC_DEPTH,
            "pass",
            "passes",
            "nic",
            "microflow",
            "megaflow",
            "slowpath",
            "megaflows"
        );
        for (i, (p, m)) in self.passes.iter().zip(self.megaflows_now).enumerate() {
            let total = p.total();
            if total == 0 && m == 0 {
                continue;
            }
            let share = |n: u64| format!("{:.2}%", 100.0 * rate(n, total));
            let name = if i == 3 { "4+".to_string() } else { (i + 1).to_string() };
            out.push_str(&format!(
                "{name:<10} {total:>12} {:>9} {:>9} {:>9} {:>9} {m:>10}\n",
                share(p.nic),
                share(p.microflow),
                share(p.megaflow),
                share(p.upcalls)
            ));
        }
        let c = &self.conntrack;
        out.push_str(&format!(
            "conntrack: {} packets, {} connections committed, {} held, {} timed out, {} invalid, {} translated by NAT\n",
            c.packets, c.committed, self.connections_now, c.expired, c.invalid, c.translated
        ));
        if c.offloaded > 0 || self.nic_conntrack_misses > 0 {
            out.push_str(&format!(
                "NIC connection table: {} connections offloaded, {} held, {} left out (table full); \
                 {} NIC hits sent to software for a connection it does not hold\n",
                c.offloaded, self.nic_connections_now, c.offload_full, self.nic_conntrack_misses
            ));
        }
        out
    }
}
