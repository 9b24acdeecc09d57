//! Replaying a trace through a [`Switch`] with rule updates on schedule, and the per-layer
//! report of where every packet was handled.
//!
//! Time is the trace's: nanoseconds since its first packet (kept non-decreasing if the trace
//! is not). Updates given as `#N` apply before packet N; updates given in seconds apply
//! before the first packet at or after that time; updates due at the same moment apply in
//! file order; updates due after the last packet apply when the replay finishes.

use serde_json::{json, Value};

use crate::nic::gigaflow::Gigaflow;
use crate::openflow::traversal::Output;
use crate::openflow::update::{Update, When};
use crate::packet::{parse_frame, FlowKey, LinkKind, Malformed};
use crate::switch::{Layer, Switch};

/// Updates ordered for application.
pub(crate) struct Schedule {
    by_time: Vec<Update>,
    by_index: Vec<Update>,
    t: usize,
    i: usize,
}

impl Schedule {
    pub(crate) fn new(updates: Vec<Update>) -> Schedule {
        let (mut by_time, mut by_index): (Vec<_>, Vec<_>) =
            updates.into_iter().partition(|u| matches!(u.when, When::At(_)));
        by_time.sort_by_key(|u| (u.when, u.line));
        by_index.sort_by_key(|u| (u.when, u.line));
        Schedule { by_time, by_index, t: 0, i: 0 }
    }

    /// Index of the next update due before packet `index` at `now_ns` (all if `index` is
    /// `None`), earliest line first among the two queues.
    pub(crate) fn next_due(&mut self, index: Option<u64>, now_ns: u64) -> Option<&Update> {
        let t_due = self
            .by_time
            .get(self.t)
            .filter(|u| index.is_none() || matches!(u.when, When::At(t) if t <= now_ns));
        let i_due = self.by_index.get(self.i).filter(|u| match (index, u.when) {
            (None, _) => true,
            (Some(n), When::BeforePacket(k)) => k <= n,
            _ => false,
        });
        match (t_due, i_due) {
            (Some(a), Some(b)) if b.line < a.line => {
                self.i += 1;
                self.by_index.get(self.i - 1)
            }
            (Some(_), _) => {
                self.t += 1;
                self.by_time.get(self.t - 1)
            }
            (None, Some(_)) => {
                self.i += 1;
                self.by_index.get(self.i - 1)
            }
            (None, None) => None,
        }
    }
}

/// Malformed packets by reason.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MalformedCounts {
    /// `(reason, count)` in first-seen order.
    pub by_reason: Vec<(&'static str, u64)>,
}

impl MalformedCounts {
    fn count(&mut self, reason: &'static str) {
        match self.by_reason.iter_mut().find(|(r, _)| *r == reason) {
            Some((_, n)) => *n += 1,
            None => self.by_reason.push((reason, 1)),
        }
    }

    /// Total malformed packets.
    pub fn total(&self) -> u64 {
        self.by_reason.iter().map(|(_, n)| n).sum()
    }
}

/// A replay in progress.
pub struct Replay {
    switch: Switch,
    schedule: Schedule,
    first_ts: Option<u64>,
    now_ns: u64,
    index: u64,
    malformed: MalformedCounts,
}

impl Replay {
    /// Starts a replay with these updates pending.
    pub fn new(switch: Switch, updates: Vec<Update>) -> Replay {
        Replay {
            switch,
            schedule: Schedule::new(updates),
            first_ts: None,
            now_ns: 0,
            index: 0,
            malformed: MalformedCounts::default(),
        }
    }

    /// The switch.
    pub fn switch(&self) -> &Switch {
        &self.switch
    }

    /// Malformed packets seen so far (forwarded on what could be parsed, as OVS does).
    pub fn malformed(&self) -> &MalformedCounts {
        &self.malformed
    }

    /// Trace time of the last packet, ns since the first.
    pub fn elapsed_ns(&self) -> u64 {
        self.now_ns
    }

    /// Parses a frame (`None` link kind: a link type hyflow cannot parse, counted malformed
    /// and forwarded as a packet with only its input port) and forwards it.
    pub fn frame(
        &mut self,
        ts_ns: u64,
        frame: &[u8],
        link: Option<LinkKind>,
        in_port: u32,
        wire_len: u64,
        outputs: &mut Vec<Output>,
    ) -> Layer {
        let mut key = FlowKey::default();
        match link {
            Some(link) => {
                if let Err(m) = parse_frame(frame, link, in_port, &mut key) {
                    self.malformed.count(Malformed::name(m));
                }
            }
            None => {
                key.set_in_port(in_port);
                self.malformed.count("unsupported_link_type");
            }
        }
        self.packet(ts_ns, &key, wire_len, outputs)
    }

    /// Forwards one parsed packet, applying the updates due before it.
    pub fn packet(&mut self, ts_ns: u64, key: &FlowKey, bytes: u64, outputs: &mut Vec<Output>) -> Layer {
        let first = *self.first_ts.get_or_insert(ts_ns);
        self.now_ns = self.now_ns.max(ts_ns.saturating_sub(first));
        while let Some(u) = self.schedule.next_due(Some(self.index), self.now_ns) {
            self.switch.apply_update(u.command, &u.spec, self.now_ns);
        }
        self.index += 1;
        self.switch.process(key, bytes, self.now_ns, outputs)
    }

    /// Applies the updates due after the last packet and returns the switch.
    pub fn finish(mut self) -> (Switch, MalformedCounts, u64) {
        while let Some(u) = self.schedule.next_due(None, self.now_ns) {
            self.switch.apply_update(u.command, &u.spec, self.now_ns);
        }
        (self.switch, self.malformed, self.now_ns)
    }
}

fn rate(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

/// The per-layer report as one JSON object.
pub fn report_json(sw: &Switch, malformed: &MalformedCounts, elapsed_ns: u64) -> Value {
    let s = sw.stats();
    let gf = sw.gigaflow();
    let gf_totals = gf.map(|g| g.totals());
    let nic = sw.nic().map(|n| &n.stage.stats).or(gf_totals.as_ref());
    let mf = sw.microflow();
    let mc = sw.megaflow();
    let (actions, paths) = sw.decision_tables();
    let reasons: serde_json::Map<String, Value> =
        malformed.by_reason.iter().map(|(r, n)| (r.to_string(), json!(n))).collect();
    json!({
        "packets": s.packets,
        "bytes": s.bytes,
        "trace_seconds": elapsed_ns as f64 / 1e9,
        "nic_hits": s.nic_hits,
        "microflow_hits": s.microflow_hits,
        "megaflow_hits": s.megaflow_hits,
        "upcalls": s.upcalls,
        "nic_hit_rate": rate(s.nic_hits, s.packets),
        "microflow_hit_rate": rate(s.microflow_hits, s.packets),
        "megaflow_hit_rate": rate(s.megaflow_hits, s.packets),
        "upcall_rate": rate(s.upcalls, s.packets),
        "nic_entries": nic.map_or(0, |n| n.peak),
        "nic_entries_now": sw.nic().map(|n| n.stage.space().len()).or(gf.map(|g| g.len())).unwrap_or(0),
        "nic_masks_now": sw.nic().map(|n| n.stage.space().n_masks())
            .or(gf.map(|g| g.stages.iter().map(|s| s.space().n_masks()).sum())).unwrap_or(0),
        "nic_installs": nic.map_or(0, |n| n.installs),
        "nic_refused": nic.map_or(0, |n| n.refused),
        "nic_refused_masks": nic.map_or(0, |n| n.refused_masks),
        "nic_expired": nic.map_or(0, |n| n.expired),
        "nic_revalidated": nic.map_or(0, |n| n.revalidated),
        "microflow_entries": mf.map_or(0, |m| m.stats().peak),
        "microflow_entries_now": mf.map_or(0, |m| m.len()),
        "microflow_capacity": mf.map_or(0, |m| m.capacity()),
        "microflow_bytes": mf.map_or(0, |m| m.slot_bytes()),
        "microflow_inserts": mf.map_or(0, |m| m.stats().inserts),
        "microflow_evictions": mf.map_or(0, |m| m.stats().evictions),
        "microflow_invalidated": mf.map_or(0, |m| m.stats().invalidated + m.stats().removed),
        "megaflow_entries": mc.map_or(0, |m| m.stats.peak),
        "megaflow_entries_now": mc.map_or(0, |m| m.space.len()),
        "megaflow_masks_now": mc.map_or(0, |m| m.space.n_masks()),
        "megaflow_installs": mc.map_or(0, |m| m.stats.installs),
        "megaflow_refused": mc.map_or(0, |m| m.stats.refused),
        "megaflow_expired": mc.map_or(0, |m| m.stats.expired),
        "megaflow_revalidated": mc.map_or(0, |m| m.stats.revalidated),
        "action_table_entries": actions,
        "rule_paths": paths,
        "consistency": sw.config().consistency.name(),
        "updates": s.updates,
        "rules_changed": s.rules_changed,
        "retranslations": s.retranslations,
        "nic_revalidation_ms": s.nic_revalidation_ns as f64 / 1e6,
        "stale": s.stale,
        "stale_wrong": s.stale_wrong,
        "controller": s.controller,
        "malformed": malformed.total(),
        "malformed_reasons": reasons,
        "nic_scheme": if gf.is_some() { "gigaflow" } else if sw.nic().is_some() { "megaflow" } else { "none" },
        "gigaflow": gf.map_or(Value::Null, gigaflow_json),
    })
}

/// Gigaflow's own figures: per-stage entries, sharing, coverage, host time.
fn gigaflow_json(g: &Gigaflow) -> Value {
    let st = &g.stats;
    let (sharing_mean, sharing_max) = g.sharing();
    let per_upcall_us = |ns: u64, n: u64| if n == 0 { 0.0 } else { ns as f64 / n as f64 / 1e3 };
    json!({
        "tables": g.stages.len(),
        "entries_per_table": g.config().entries,
        "partition": g.config().partition.name(),
        "stage_entries": g.stages.iter().map(|s| s.space().len()).collect::<Vec<_>>(),
        "stage_peak": g.stages.iter().map(|s| s.stats.peak).collect::<Vec<_>>(),
        "stage_hits": g.stages.iter().map(|s| s.stats.hits).collect::<Vec<_>>(),
        "installed": st.installed,
        "reused": st.reused,
        "upcalls": st.upcalls,
        "completed": st.completed,
        "not_offloadable": st.not_offloadable,
        "sharing_mean": sharing_mean,
        "sharing_max": sharing_max,
        "coverage": g.coverage(),
        "install_us_per_upcall": per_upcall_us(st.install_ns, st.upcalls),
        "retranslated": st.retranslated,
        "revalidation_ms": st.revalidation_ns as f64 / 1e6,
    })
}

/// The per-layer report as a text table.
pub fn report_text(sw: &Switch, malformed: &MalformedCounts, elapsed_ns: u64) -> String {
    let s = sw.stats();
    let pct = |n: u64| 100.0 * rate(n, s.packets);
    let mut out = format!(
        "packets {} ({} bytes, {:.3} s of trace), consistency {}\n\n",
        s.packets,
        s.bytes,
        elapsed_ns as f64 / 1e9,
        sw.config().consistency.name()
    );
    out.push_str(&format!(
        "{:<10} {:>12} {:>8} {:>9} {:>9} {:>9} {:>9} {:>9}\n",
        "layer", "packets", "share", "entries", "peak", "installs", "evicted", "expired"
    ));
    let row = |name: &str, n: u64, entries: String, peak: String, inst: String, ev: String, exp: String| {
        format!("{name:<10} {n:>12} {:>7.2}% {entries:>9} {peak:>9} {inst:>9} {ev:>9} {exp:>9}\n", pct(n))
    };
    let off = || "off".to_string();
    let nic = sw
        .nic()
        .map(|n| (n.stage.space().len(), n.stage.stats))
        .or(sw.gigaflow().map(|g| (g.len(), g.totals())));
    out.push_str(&match nic {
        Some((len, st)) => row(
            "nic",
            s.nic_hits,
            len.to_string(),
            st.peak.to_string(),
            st.installs.to_string(),
            st.revalidated.to_string(),
            st.expired.to_string(),
        ),
        None => row("nic", 0, off(), off(), off(), off(), off()),
    });
    out.push_str(&match sw.microflow() {
        Some(m) => {
            let st = m.stats();
            row(
                "microflow",
                s.microflow_hits,
                m.len().to_string(),
                st.peak.to_string(),
                st.inserts.to_string(),
                (st.evictions + st.invalidated + st.removed).to_string(),
                "-".to_string(),
            )
        }
        None => row("microflow", 0, off(), off(), off(), off(), off()),
    });
    out.push_str(&match sw.megaflow() {
        Some(m) => row(
            "megaflow",
            s.megaflow_hits,
            m.space.len().to_string(),
            m.stats.peak.to_string(),
            m.stats.installs.to_string(),
            m.stats.revalidated.to_string(),
            m.stats.expired.to_string(),
        ),
        None => row("megaflow", 0, off(), off(), off(), off(), off()),
    });
    out.push_str(&row("slowpath", s.upcalls, "-".into(), "-".into(), "-".into(), "-".into(), "-".into()));
    let (actions, paths) = sw.decision_tables();
    out.push_str(&format!(
        "\nupdates {} ({} rules changed, {} entries re-translated); stale decisions {} ({} with wrong outputs)\n",
        s.updates, s.rules_changed, s.retranslations, s.stale, s.stale_wrong
    ));
    out.push_str(&format!(
        "action table {actions} lists, {paths} rule paths; controller (slow-path only) packets {}\n",
        s.controller
    ));
    if let Some(g) = sw.gigaflow() {
        let (mean, max) = g.sharing();
        let entries: Vec<String> = g.stages.iter().map(|s| s.space().len().to_string()).collect();
        out.push_str(&format!(
            "gigaflow {}x{} ({}): entries per stage [{}], {} installed, {} reused, sharing {:.2} flows/entry (max {}), coverage {:.0} chains, {:.1} us per upcall to partition and install\n",
            g.stages.len(),
            g.config().entries,
            g.config().partition.name(),
            entries.join(", "),
            g.stats.installed,
            g.stats.reused,
            mean,
            max,
            g.coverage(),
            if g.stats.upcalls == 0 { 0.0 } else { g.stats.install_ns as f64 / g.stats.upcalls as f64 / 1e3 },
        ));
    }
    out.push_str(&format!("malformed packets {}", malformed.total()));
    if !malformed.by_reason.is_empty() {
        let parts: Vec<String> = malformed.by_reason.iter().map(|(r, n)| format!("{r} {n}")).collect();
        out.push_str(&format!(" ({})", parts.join(", ")));
    }
    out.push('\n');
    out
}
