//! Rule changes and what they invalidate: updates (ovs-ofctl semantics), flows `learn`
//! actions install, MACs `NORMAL` learns, rules whose timeouts pass; each change reports the
//! lookup outcomes it may have altered, and the microflow cache's consistency mechanism and
//! the revalidator act on them.

use super::{caches, Switch};
use crate::openflow::parser::FlowSpec;
use crate::openflow::update::{self, Command};
use crate::openflow::LookupRef;
use crate::packet::FlowKey;
use crate::revalidation::Translator;

impl Switch {
    /// A cached decision that learns (flows or MACs) or uses the MAC table was served: learn
    /// as the slow path would (OVS re-runs `learn` and MAC learning from the datapath flow's
    /// statistics), so that learning does not depend on which layer served the packet.
    pub(super) fn learn_again(&mut self, key: &FlowKey, now_ns: u64) {
        self.pipeline.process(key, &mut self.tr);
        self.install_learned(now_ns);
    }

    /// Applies what the last translation learned — MACs, then flows (`modify-flows --strict`,
    /// adding when absent, as OVS installs learned flows) — and revalidates what they change.
    pub(super) fn install_learned(&mut self, now_ns: u64) {
        if !self.tr.is_stateful() {
            return;
        }
        // Revalidation translates with `self.tr`: take what it learned first.
        let mut learned = std::mem::take(&mut self.tr.learned);
        let mut macs = std::mem::take(&mut self.tr.mac_learned);
        if self.pipeline.learn_macs(&macs, now_ns) {
            self.mac_table_changed(now_ns);
        }
        macs.clear();
        self.tr.mac_learned = macs;
        for rule in &learned {
            let table = self.pipeline.table(rule.table);
            let id = table.find_exact(&rule.matcher(), rule.priority);
            let current = id.and_then(|id| self.pipeline.rule(id));
            if current.is_some_and(|r| r.actions == rule.actions && r.cookie == rule.cookie) {
                // Learning it again refreshes it: its hard timeout restarts, as in OVS.
                self.pipeline.touch(id.expect("found"));
                continue;
            }
            let spec = FlowSpec {
                rule: rule.clone(),
                table_given: true,
                priority_given: true,
                cookie_mask: 0,
                cookie_set: true,
            };
            self.scratch.changed.clear();
            update::apply(&mut self.pipeline, Command::ModifyStrict, &spec, &mut self.scratch.changed);
            self.stats.learned += 1;
            self.revalidate_changed(now_ns);
        }
        learned.clear();
        self.tr.learned = learned;
        self.pipeline.stamp_changes(now_ns);
    }

    /// Applies a rule update at `now_ns`; returns the number of rules added, modified or
    /// deleted.
    pub fn apply_update(&mut self, command: Command, spec: &FlowSpec, now_ns: u64) -> usize {
        self.advance(now_ns);
        self.scratch.changed.clear();
        let n = update::apply(&mut self.pipeline, command, spec, &mut self.scratch.changed);
        self.pipeline.stamp_changes(now_ns);
        self.stats.updates += 1;
        self.stats.rules_changed += n as u64;
        self.revalidate_changed(now_ns);
        n
    }

    /// Revalidates every decision that used the MAC table.
    pub(super) fn mac_table_changed(&mut self, now_ns: u64) {
        self.stats.mac_changes += 1;
        self.scratch.changed.clear();
        self.scratch.changed.push(LookupRef::STATEFUL);
        self.revalidate_changed(now_ns);
    }

    /// Tells every cache that the lookup outcomes in `self.scratch.changed` may have changed.
    fn revalidate_changed(&mut self, now_ns: u64) {
        if self.scratch.changed.is_empty() {
            return;
        }
        self.scratch.changed.sort_unstable();
        self.scratch.changed.dedup();
        self.epoch += 1;
        if let Some(microflow) = &mut self.microflow {
            microflow.on_update(&self.scratch.changed, self.epoch, &mut self.tables);
        }
        let mut caches = caches(&mut self.nic, &mut self.megaflow);
        let mut with = Translator { pipeline: &self.pipeline, tables: &mut self.tables, tr: &mut self.tr };
        let outcome = self.revalidator.on_update(
            &self.scratch.changed,
            now_ns,
            &mut caches,
            &mut with,
            self.clock.as_deref(),
        );
        self.stats.retranslations += outcome.retranslated;
        self.host.nic_revalidation_ns += outcome.nic_host_ns;
    }

    /// Deletes the rules whose idle or hard timeout has passed, as OVS does after each of its
    /// revalidator's dumps, and revalidates what they decided.
    pub(super) fn expire_rules(&mut self, now_ns: u64) {
        let mut expired = std::mem::take(&mut self.scratch.expired);
        expired.clear();
        self.pipeline.expired(now_ns, &mut expired);
        if !expired.is_empty() {
            self.scratch.changed.clear();
            for &id in &expired {
                update::delete(&mut self.pipeline, id, &mut self.scratch.changed);
            }
            self.stats.rules_expired += expired.len() as u64;
            self.revalidate_changed(now_ns);
        }
        self.scratch.expired = expired;
    }
}
