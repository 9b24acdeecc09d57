//! Cached entries as `ovs-appctl dpctl/dump-flows` prints datapath flows: one line each with
//! the match, the entry's packets and bytes, when it was last used and its actions
//! (`hyflow replay --dump-megaflows` and `--dump-nic`).
//!
//! The match is written in the syntax of `ofproto/trace`'s `Megaflow:` line and of flow files
//! (`recirc_id=0,eth,ip,in_port=1,nw_dst=10.0.0.0/8`), the syntax hyflow reads and prints
//! everywhere else, rather than the datapath's `in_port(1),eth(...)` attributes; the actions
//! are the datapath actions as `ofproto/trace` prints them.

use std::fmt::Write;

use super::megaflow::CachedFlow;
use super::table::CacheTable;
use crate::decision::DecisionTables;
use crate::openflow::dp_actions::format_dp_actions;
use crate::openflow::rule::Match;
use crate::packet::format::format_match;
use crate::tuple_space::EntryStats;

/// One cached entry as a dump shows it.
#[derive(Clone, Debug)]
pub struct DumpedFlow {
    /// The table of a NIC with several (Gigaflow's stages, exact-match areas).
    pub table: Option<u8>,
    /// The exact tag it applies to, where tags chain tables (Gigaflow).
    pub tag: Option<u32>,
    /// What it matches.
    pub matcher: Match,
    /// Its hardware or software counters.
    pub stats: EntryStats,
    /// What it does, as datapath actions.
    pub actions: String,
}

impl DumpedFlow {
    /// What a dump line says the entry matches: its table and tag where it has them, then
    /// its match.
    pub fn match_text(&self) -> String {
        let mut out = String::new();
        if let Some(t) = self.table {
            let _ = write!(out, "table={t},");
        }
        if let Some(t) = self.tag {
            let _ = write!(out, "tag={t},");
        }
        out.push_str(&format_match(&self.matcher.value, &self.matcher.mask));
        out
    }
}

/// The dump of `flows` at trace time `now_ns`, one line each.
pub fn dump_text(flows: &[DumpedFlow], now_ns: u64) -> String {
    let mut out = String::new();
    for f in flows {
        let used = if f.stats.packets == 0 {
            "never".to_string()
        } else {
            format!("{:.3}s", now_ns.saturating_sub(f.stats.last_hit_ns) as f64 / 1e9)
        };
        let _ = writeln!(
            out,
            "{}, packets:{}, bytes:{}, used:{used}, actions:{}",
            f.match_text(),
            f.stats.packets,
            f.stats.bytes,
            f.actions
        );
    }
    out
}

impl CacheTable<CachedFlow> {
    /// Appends every entry, in id order, as table `table` of a dump.
    pub fn dump(&self, tables: &DecisionTables, table: Option<u8>, out: &mut Vec<DumpedFlow>) {
        let space = self.space();
        for id in space.ids() {
            let (Some(e), Some(matcher)) = (space.entry(id), space.matcher(id)) else { continue };
            out.push(DumpedFlow {
                table,
                tag: None,
                matcher,
                stats: e.stats,
                actions: format_dp_actions(tables.actions().get(e.data.decision.actions), &e.data.rep),
            });
        }
    }
}
