//! LFP, the Large Flow Predictor Elixir compares against (§5.1, its reference \[15\]): a
//! decision tree predicts from a flow's first packet whether the flow will be large, and the
//! table is periodically filled with the flows predicted large (Elixir §5.1: both baselines
//! "periodically replace large flows"; LFP "uses a learning method to predict and replace
//! large flows", with J48 on the first packet of each flow, its best setting).
//!
//! **Training** (offline, before the run, as Elixir used Weka's J48): every flow seen in a
//! prefix of the input (`lfp-train`) is one example — the features of its first packet
//! (source and destination address, protocol, ports, length, TCP flags, input port) labelled
//! *large* if the flow ends the prefix among the top `large_share` (10%: Elixir's trace has
//! its top 10% of flows carry 91% of the bytes) of flows by bytes. The tree is C4.5's as J48
//! grows it ([`super::c45`]: gain ratio, at least 2 examples per leaf) but left unpruned
//! and read as a Laplace-corrected class distribution — J48's `-U -A`, the C4.4 setting
//! (Provost and Domingos, "Tree Induction for Probability-Based Ranking", 2003) — because LFP
//! *ranks* flows for a table of fixed size: with large flows a tenth of the examples, a
//! pruned tree keeps only leaves whose majority is large, and on traffic whose first packets
//! carry weak evidence (hyflow's gateway model: a bulk-transfer port makes a flow about
//! 2.6 times likelier to be large, still a minority) it collapses to one leaf that ranks
//! every flow alike. `lfp-prune` grows J48's pruned tree instead (confidence 0.25).
//!
//! **Running**: at a flow's first software packet the tree is consulted (costing the host one
//! `sample_ns`) and the flow remembered with the tree's probability that it is large; a flow
//! predicted large (probability above one half) is installed at once while the table has
//! room. Every replacement window (`replacement-window`, default 10 s: the baselines'
//! period is not published, so Elixir's own T), the flows software saw in the last window
//! and the NIC does not hold are ranked by that probability: they fill the free entries,
//! then replace held flows the tree gave a lower probability, one for one. Held entries
//! leave when idle for `max-idle` (their room comes back at the next replacement), or by
//! revalidation. Ranking is charged to the host (one `sample_ns` per flow remembered).

use hashbrown::{HashMap, HashSet};

use std::sync::Arc;

use super::c45::{C45Params, C45Tree};
use super::params::{Param, ParamKind, PolicyRegistration, EXACT_TABLE, REPLACEMENT_WINDOW};
use super::{
    Every, NicControl, OffloadPolicy, PolicyConfig, PolicyConfigError, PolicyFactory, PolicyFigures,
    PolicyMachine, PolicyReport, PolicyTrainer, RunSpan, Seen,
};
use crate::measure::{FlowId, KeySpec};
use crate::nic::exact_match::ExactMatchConfig;
use crate::nic::NicConfig;
use crate::packet::field::id;
use crate::packet::FlowKey;

/// Features of a first packet.
pub(crate) const FEATURES: usize = 8;

/// The features of a packet of `bytes` bytes.
pub fn features(key: &FlowKey, bytes: u32) -> [f64; FEATURES] {
    [
        key.nw_src() as f64,
        key.nw_dst() as f64,
        key.nw_proto() as f64,
        key.tp_src() as f64,
        key.tp_dst() as f64,
        bytes as f64,
        key.get(id::TCP_FLAGS) as f64,
        key.in_port() as f64,
    ]
}

/// LFP's parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LfpConfig {
    /// NIC entries.
    pub entries: usize,
    /// Fields a flow is keyed by.
    pub key: KeySpec,
    /// Length of the training prefix, ns.
    pub train_ns: u64,
    /// Share of the prefix's flows (by bytes) labelled large.
    pub large_share: f64,
    /// How the tree is grown.
    pub tree: C45Params,
    /// Replacement window, ns.
    pub replacement_window_ns: u64,
}

impl Default for LfpConfig {
    fn default() -> Self {
        LfpConfig {
            entries: 50_100,
            key: KeySpec::five_tuple(),
            train_ns: 10_000_000_000,
            large_share: 0.1,
            tree: C45Params { prune: false, ..C45Params::default() },
            replacement_window_ns: 10_000_000_000,
        }
    }
}

/// `lfp`.
pub(crate) const REGISTRATION: PolicyRegistration = PolicyRegistration {
    name: "lfp",
    about: "LFP: first-packet prediction by a C4.5 tree (J48) trained on the first lfp-train seconds, the \
            predicted-large flows replaced every replacement-window, on an exact-match table of large-entries + \
            bursty-entries",
    params: &[
        EXACT_TABLE[0],
        EXACT_TABLE[1],
        EXACT_TABLE[2],
        REPLACEMENT_WINDOW,
        Param {
            name: "lfp-prune",
            value_name: "BOOL",
            help: "Whether lfp prunes its tree as J48 does by default (confidence 0.25); unpruned, its leaves \
                   rank flows by their probability of being large [default: false]",
            kind: ParamKind::Text,
        },
        Param {
            name: "lfp-train",
            value_name: "SECONDS",
            help: "Seconds of the input (as recorded) lfp's tree is trained on, before the run [default: 10]",
            kind: ParamKind::Number,
        },
    ],
    upcall_nic: None,
    configure: |p| {
        let d = LfpConfig::default();
        let train_ns = match p.number("lfp-train") {
            None => d.train_ns,
            Some(s) if s.is_finite() && s > 0.0 => (s * 1e9).round().max(1.0) as u64,
            Some(s) => {
                return Err(PolicyConfigError::param(
                    "lfp-train",
                    format!("must be a positive number of seconds, not {s}"),
                ))
            }
        };
        let prune = match p.text("lfp-prune") {
            None => d.tree.prune,
            Some("true") => true,
            Some("false") => false,
            Some(other) => {
                return Err(PolicyConfigError::param("lfp-prune", format!("must be true or false, not {other}")))
            }
        };
        Ok(Arc::new(LfpConfig {
            tree: C45Params { prune, ..d.tree },
            entries: p.exact_table(),
            key: p.flow_key()?,
            train_ns,
            replacement_window_ns: p.seconds_ns(REPLACEMENT_WINDOW.name, d.replacement_window_ns)?,
            ..d
        }))
    },
};

/// An LFP configuration is trained before it can run: [`PolicyFactory::trainer`] gives the
/// trainer, whose [`PolicyTrainer::finish`] gives a [`TrainedLfp`].
impl PolicyFactory for LfpConfig {
    fn name(&self) -> &'static str {
        REGISTRATION.name
    }

    fn check(&self, _machine: &PolicyMachine) -> Result<(), PolicyConfigError> {
        if self.entries == 0 {
            return Err(PolicyConfigError::Invalid("lfp needs a table of at least 1 entry".into()));
        }
        if self.train_ns == 0 {
            return Err(PolicyConfigError::param("lfp-train", "must be a positive time"));
        }
        if self.replacement_window_ns == 0 {
            return Err(PolicyConfigError::param(REPLACEMENT_WINDOW.name, "must be a positive time"));
        }
        Ok(())
    }

    fn trainer(&self) -> Option<Box<dyn PolicyTrainer>> {
        Some(Box::new(Training { config: *self, trainer: LfpTrainer::default() }))
    }

    fn build(&self, _machine: &PolicyMachine) -> Result<Box<dyn OffloadPolicy>, PolicyConfigError> {
        Err(PolicyConfigError::Invalid("lfp needs its tree trained before the run".to_string()))
    }
}

/// LFP's training on a prefix of the input.
struct Training {
    config: LfpConfig,
    trainer: LfpTrainer,
}

impl PolicyTrainer for Training {
    fn until_ns(&self) -> u64 {
        self.config.train_ns
    }

    fn observe(&mut self, key: &FlowKey, bytes: u32) {
        if let Some(flow) = self.config.key.flow_id(key) {
            self.trainer.observe(flow, key, bytes);
        }
    }

    fn finish(self: Box<Self>) -> Result<PolicyConfig, PolicyConfigError> {
        let model = self.trainer.fit(&self.config).map_err(PolicyConfigError::Invalid)?;
        Ok(Arc::new(TrainedLfp { config: self.config, model: Arc::new(model) }))
    }
}

/// LFP with its tree trained: what every run of an experiment builds the policy from.
#[derive(Clone, Debug)]
pub struct TrainedLfp {
    /// Its parameters.
    pub config: LfpConfig,
    /// Its tree.
    pub model: Arc<LfpModel>,
}

impl PolicyFactory for TrainedLfp {
    fn name(&self) -> &'static str {
        REGISTRATION.name
    }

    fn check(&self, machine: &PolicyMachine) -> Result<(), PolicyConfigError> {
        self.config.check(machine)
    }

    fn build(&self, _machine: &PolicyMachine) -> Result<Box<dyn OffloadPolicy>, PolicyConfigError> {
        Ok(Box::new(Lfp::new(self.config, self.model.clone())))
    }

    fn caveats(&self, run: &RunSpan) -> Vec<String> {
        if run.warmup_input_ns >= self.config.train_ns {
            return Vec::new();
        }
        let train_s = self.config.train_ns as f64 / 1e9;
        if run.input_ns <= self.config.train_ns {
            return vec![format!(
                "lfp trained on all of this {:.3} s input (`lfp-train` {train_s} s) and is measured on the \
                 packets it learned from: give a longer input, or a shorter `lfp-train` and `warmup` as long",
                run.input_ns as f64 / 1e9
            )];
        }
        vec![format!(
            "lfp is measured on packets its tree learned from: it trained on the input's first {train_s} s \
             (`lfp-train`) and measuring starts at {} s (`warmup`); give `warmup` {train_s} to measure only \
             what it predicts",
            run.warmup_input_ns as f64 / 1e9
        )]
    }
}

/// A trained first-packet classifier.
#[derive(Clone, Debug, PartialEq)]
pub struct LfpModel {
    tree: C45Tree<FEATURES>,
    /// Examples it was trained on.
    pub examples: usize,
    /// Of those, labelled large.
    pub large: usize,
}

impl LfpModel {
    /// Whether a flow whose first packet has `x` will be large.
    #[inline]
    pub(crate) fn predict(&self, x: &[f64; FEATURES]) -> bool {
        self.tree.predict(x)
    }

    /// How confident the tree is that a flow whose first packet has `x` will be large.
    #[inline]
    pub(crate) fn confidence(&self, x: &[f64; FEATURES]) -> f64 {
        self.tree.probability(x)
    }

    /// Nodes in the tree.
    pub fn size(&self) -> usize {
        self.tree.size()
    }
}

/// Collects training examples from a prefix of the input, in arrival order.
#[derive(Default)]
pub(crate) struct LfpTrainer {
    examples: Vec<([f64; FEATURES], u64)>,
    index: hashbrown::HashMap<FlowId, usize>,
}

impl LfpTrainer {
    /// A packet of the prefix.
    pub(crate) fn observe(&mut self, flow: FlowId, key: &FlowKey, bytes: u32) {
        let next = self.examples.len();
        let i = *self.index.entry(flow).or_insert(next);
        if i == next {
            self.examples.push((features(key, bytes), 0));
        }
        self.examples[i].1 += bytes as u64;
    }

    /// Grows the tree: flows of `cutoff` bytes or more, the top `large_share`, are large.
    pub(crate) fn fit(&self, config: &LfpConfig) -> Result<LfpModel, String> {
        let n = self.examples.len();
        if n < 2 {
            return Err(format!("lfp: the training prefix holds {n} flows; it needs at least 2"));
        }
        let mut by_bytes: Vec<u64> = self.examples.iter().map(|e| e.1).collect();
        by_bytes.sort_unstable_by(|a, b| b.cmp(a));
        let top = ((n as f64 * config.large_share).ceil() as usize).clamp(1, n);
        let cutoff = by_bytes[top - 1];
        let labelled: Vec<([f64; FEATURES], bool)> =
            self.examples.iter().map(|(x, bytes)| (*x, *bytes >= cutoff)).collect();
        let large = labelled.iter().filter(|e| e.1).count();
        Ok(LfpModel { tree: C45Tree::fit(&labelled, &config.tree), examples: n, large })
    }
}

/// What LFP did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct LfpStats {
    /// First packets seen.
    pub first_packets: u64,
    /// Of those, predicted large.
    pub predicted_large: u64,
    /// Installs queued at a first packet.
    pub offloads: u64,
    /// Replacement windows closed.
    pub replacements: u64,
    /// Installs queued at a replacement into free entries.
    pub refills: u64,
    /// Held flows replaced by waiting ones the tree was more confident in.
    pub swaps: u64,
}

/// A flow the tree classified.
#[derive(Clone, Copy, Debug)]
struct Classified {
    key: FlowKey,
    confidence: f64,
    /// When software last forwarded one of its packets, ns.
    last_ns: u64,
}

/// The policy.
pub(crate) struct Lfp {
    config: LfpConfig,
    model: Arc<LfpModel>,
    /// Flows whose first packet was classified (its later packets have other features).
    seen: HashSet<FlowId>,
    /// Those software saw in the last window, or the NIC holds.
    classified: HashMap<FlowId, Classified>,
    replacements: Every,
    stats: LfpStats,
}

impl Lfp {
    /// The policy of `config` predicting with `model`.
    pub(crate) fn new(config: LfpConfig, model: Arc<LfpModel>) -> Lfp {
        Lfp {
            replacements: Every::new(config.replacement_window_ns),
            config,
            model,
            seen: HashSet::new(),
            classified: HashMap::new(),
            stats: LfpStats::default(),
        }
    }

    /// The periodic replacement: waiting flows, likeliest to be large first, into free
    /// entries and then in place of held flows the tree found less likely.
    fn replace(&mut self, nic: &mut NicControl) {
        self.stats.replacements += 1;
        let now = nic.now_ns();
        let window = self.config.replacement_window_ns;
        // A flow neither held nor seen by software for a window has ended (or is held: its
        // packets no longer reach software, and the NIC's idle timeout decides for it).
        self.classified.retain(|f, p| now.saturating_sub(p.last_ns) <= window || nic.holds(*f));
        nic.charge(nic.costs().sample_ns * self.classified.len() as f64);
        let (fills, swaps) = nic.rechoose(
            0,
            self.classified.iter().map(|(f, c)| (*f, c.confidence)),
            |f| self.classified[&f].key,
            usize::MAX,
            |waiting, held| waiting > held,
        );
        self.stats.refills += fills;
        self.stats.swaps += swaps;
    }
}

impl OffloadPolicy for Lfp {
    fn name(&self) -> &'static str {
        REGISTRATION.name
    }

    fn restart_counts(&mut self) {
        self.stats = LfpStats::default();
    }

    fn nic(&self) -> Option<NicConfig> {
        Some(ExactMatchConfig::one_area(self.config.entries, self.config.key, true))
    }

    fn flow_key(&self) -> Option<KeySpec> {
        Some(self.config.key)
    }

    fn tick(&mut self, nic: &mut NicControl) {
        if self.replacements.due(nic.now_ns()) {
            self.replace(nic);
        }
    }

    fn on_software(&mut self, pkt: Seen, nic: &mut NicControl) -> f64 {
        let Some(flow) = pkt.flow else { return 0.0 };
        if let Some(c) = self.classified.get_mut(&flow) {
            c.last_ns = pkt.now_ns;
            return 0.0;
        }
        if !self.seen.insert(flow) {
            return 0.0;
        }
        self.stats.first_packets += 1;
        let x = features(pkt.key, pkt.bytes);
        let confidence = self.model.confidence(&x);
        self.classified.insert(flow, Classified { key: *pkt.key, confidence, last_ns: pkt.now_ns });
        if self.model.predict(&x) {
            self.stats.predicted_large += 1;
            if nic.has_room(0) && nic.offload(pkt.key, flow, 0) {
                self.stats.offloads += 1;
            }
        }
        nic.costs().sample_ns
    }

    /// `replacements`: replacement windows closed; `predicted_large`: first packets the
    /// tree predicted large; `swaps`: held flows replaced by likelier ones.
    fn report(&self) -> PolicyReport {
        let s = &self.stats;
        PolicyReport {
            figures: PolicyFigures(vec![
                ("replacements", s.replacements),
                ("predicted_large", s.predicted_large),
                ("swaps", s.swaps),
            ]),
            summary: Some(format!(
                "{} of {} first packets predicted large, {} of them installed at once ({} nodes in the tree); {} \
                 replacements refilled {} entries and swapped {}",
                s.predicted_large,
                s.first_packets,
                s.offloads,
                self.model.size(),
                s.replacements,
                s.refills,
                s.swaps
            )),
            ..PolicyReport::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openflow::parse_packet;

    /// Flows to port 443 are large, all others small, whatever their addresses: the tree
    /// learns the port and nothing else matters.
    #[test]
    fn the_tree_learns_a_planted_rule() {
        let spec = KeySpec::five_tuple();
        let mut t = LfpTrainer::default();
        let mut state = 99u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let flow = |r: u64| {
            let port = [443, 80, 53, 22, 8080][(r % 5) as usize];
            let k = parse_packet(&format!(
                "tcp,nw_src=10.{}.{}.{},nw_dst=192.168.{}.{},tp_src={},tp_dst={port}",
                (r >> 8) % 200,
                (r >> 16) % 250,
                (r >> 24) % 250,
                (r >> 32) % 250,
                (r >> 40) % 250,
                1024 + (r >> 48) % 60_000
            ))
            .unwrap();
            (k, port)
        };
        for _ in 0..2_000 {
            let (k, port) = flow(next());
            let packets = if port == 443 { 50 } else { 1 + next() % 3 };
            for _ in 0..packets {
                t.observe(spec.flow_id(&k).unwrap(), &k, 100 + (next() % 1400) as u32);
            }
        }
        let model = t.fit(&LfpConfig { large_share: 0.2, ..LfpConfig::default() }).unwrap();
        assert!(model.large > 300 && model.large < 500, "{} large of {}", model.large, model.examples);
        let mut right = 0;
        for _ in 0..1_000 {
            let (k, port) = flow(next());
            right += (model.predict(&features(&k, 64 + (next() % 1400) as u32)) == (port == 443)) as usize;
        }
        assert!(right >= 990, "{right} of 1000 predicted right ({} nodes)", model.size());
        assert!(LfpTrainer::default().fit(&LfpConfig::default()).is_err());
    }
}
