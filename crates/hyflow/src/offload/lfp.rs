//! LFP, the Large Flow Predictor Elixir compares against (§5.1, its reference \[15\]): a
//! decision tree predicts from a flow's first packet whether the flow will be large, and a
//! flow predicted large is offloaded at once, while the table has room.
//!
//! **Training** (offline, before the run, as Elixir used Weka's J48): every flow seen in a
//! prefix of the input (`train_ns`) is one example — the features of its first packet
//! (source and destination address, protocol, ports, length, TCP flags, input port) labelled
//! *large* if the flow ends the prefix among the top `large_share` (10%) of flows by bytes. The
//! tree is grown with entropy splits (C4.5's criterion; `linfa-trees`, the rust-ml project's
//! CART with information gain — C4.5's gain ratio and its pruning are not available there),
//! bounded in depth and leaf size, then copied into flat arrays so that prediction costs no
//! allocation.
//!
//! **Running**: at a flow's first software packet the tree is consulted (costing the host one
//! `sample_ns`); a flow predicted large is queued for the table while it has room. Entries
//! leave when idle for `max-idle` (the table's room comes back), or by revalidation.

use hashbrown::HashSet;
use linfa::prelude::*;
use linfa_trees::{DecisionTree, SplitQuality};
use ndarray::{Array1, Array2};

use std::sync::Arc;

use super::params::{Param, ParamKind, PolicyRegistration, EXACT_TABLE};
use super::{
    NicControl, OffloadPolicy, PolicyConfig, PolicyConfigError, PolicyFactory, PolicyMachine, PolicyTrainer,
    RunSpan, Seen,
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
    /// Deepest the tree grows.
    pub max_depth: usize,
    /// Fewest examples in a leaf.
    pub min_leaf: usize,
}

impl Default for LfpConfig {
    fn default() -> Self {
        LfpConfig {
            entries: 50_100,
            key: KeySpec::five_tuple(),
            train_ns: 10_000_000_000,
            large_share: 0.1,
            max_depth: 16,
            min_leaf: 5,
        }
    }
}

/// `lfp`.
pub(crate) const REGISTRATION: PolicyRegistration = PolicyRegistration {
    name: "lfp",
    about: "LFP: first-packet prediction by a decision tree trained on the first lfp-train seconds, on an \
            exact-match table of large-entries + bursty-entries",
    params: &[
        EXACT_TABLE[0],
        EXACT_TABLE[1],
        EXACT_TABLE[2],
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
        Ok(Arc::new(LfpConfig { entries: p.exact_table(), key: p.flow_key()?, train_ns, ..d }))
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

/// One node of the flattened tree: a leaf's label, or a split (`feature < threshold` goes
/// left, as `linfa-trees` predicts).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Node {
    Leaf(bool),
    Split { feature: usize, threshold: f64, left: u32, right: u32 },
}

/// A trained first-packet classifier.
#[derive(Clone, Debug, PartialEq)]
pub struct LfpModel {
    nodes: Vec<Node>,
    /// Examples it was trained on, and how many were large.
    pub examples: usize,
    /// Of those, labelled large.
    pub large: usize,
}

impl LfpModel {
    /// Whether a flow whose first packet has `x` will be large.
    #[inline]
    pub(crate) fn predict(&self, x: &[f64; FEATURES]) -> bool {
        matches!(self.nodes[self.leaf(x)], Node::Leaf(true))
    }

    /// The index of the leaf `x` falls in.
    #[inline]
    fn leaf(&self, x: &[f64; FEATURES]) -> usize {
        let mut i = 0;
        loop {
            match self.nodes[i] {
                Node::Leaf(_) => return i,
                Node::Split { feature, threshold, left, right } => {
                    i = if x[feature] < threshold { left } else { right } as usize;
                }
            }
        }
    }

    /// Labels every leaf by the majority of the training examples that fall in it, a tie
    /// (or no example) meaning small. `linfa-trees` breaks a tie by the iteration order of a
    /// randomly seeded hash map, so the same prefix could give different trees from run to
    /// run; recounted here, a run is deterministic, and a leaf with no evidence offloads
    /// nothing.
    /// `examples`: each flow's first-packet features and bytes; large means `cutoff` or more.
    fn relabel(&mut self, examples: &[([f64; FEATURES], u64)], cutoff: u64) {
        let mut votes = vec![(0u32, 0u32); self.nodes.len()];
        for (x, bytes) in examples {
            let v = &mut votes[self.leaf(x)];
            if *bytes >= cutoff {
                v.0 += 1;
            } else {
                v.1 += 1;
            }
        }
        for (node, (large, small)) in self.nodes.iter_mut().zip(votes) {
            if let Node::Leaf(label) = node {
                *label = large > small;
            }
        }
    }

    #[cfg(test)]
    /// Nodes in the tree.
    pub(crate) fn size(&self) -> usize {
        self.nodes.len()
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

    /// Grows the tree.
    pub(crate) fn fit(&self, config: &LfpConfig) -> Result<LfpModel, String> {
        let n = self.examples.len();
        if n < 2 {
            return Err(format!("lfp: the training prefix holds {n} flows; it needs at least 2"));
        }
        let mut by_bytes: Vec<u64> = self.examples.iter().map(|e| e.1).collect();
        by_bytes.sort_unstable_by(|a, b| b.cmp(a));
        let top = ((n as f64 * config.large_share).ceil() as usize).clamp(1, n);
        let cutoff = by_bytes[top - 1];
        let records = Array2::from_shape_fn((n, FEATURES), |(r, c)| self.examples[r].0[c]);
        let targets: Array1<bool> = self.examples.iter().map(|e| e.1 >= cutoff).collect();
        let large = targets.iter().filter(|&&t| t).count();
        let data = Dataset::new(records, targets);
        let tree = DecisionTree::params()
            .split_quality(SplitQuality::Entropy)
            .max_depth(Some(config.max_depth))
            .min_weight_leaf(config.min_leaf as f32)
            .min_weight_split(2.0 * config.min_leaf as f32)
            .fit(&data)
            .map_err(|e| format!("lfp: training failed: {e}"))?;
        let mut nodes = Vec::new();
        flatten(tree.root_node(), &mut nodes);
        let mut model = LfpModel { nodes, examples: n, large };
        model.relabel(&self.examples, cutoff);
        Ok(model)
    }
}

fn flatten(node: &linfa_trees::TreeNode<f64, bool>, out: &mut Vec<Node>) -> u32 {
    let at = out.len();
    if let Some(label) = node.prediction() {
        out.push(Node::Leaf(label));
        return at as u32;
    }
    let (feature, threshold, _) = node.split();
    out.push(Node::Leaf(false));
    let children = node.children();
    let (Some(l), Some(r)) = (children[0], children[1]) else {
        unreachable!("an internal node has both children")
    };
    let left = flatten(l, out);
    let right = flatten(r, out);
    out[at] = Node::Split { feature, threshold, left, right };
    at as u32
}

/// What LFP did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct LfpStats {
    /// First packets seen.
    pub first_packets: u64,
    /// Of those, predicted large.
    pub predicted_large: u64,
    /// Offloads queued.
    pub offloads: u64,
}

/// The policy.
pub(crate) struct Lfp {
    config: LfpConfig,
    model: Arc<LfpModel>,
    seen: HashSet<FlowId>,
    stats: LfpStats,
}

impl Lfp {
    /// The policy of `config` predicting with `model`.
    pub(crate) fn new(config: LfpConfig, model: Arc<LfpModel>) -> Lfp {
        Lfp { config, model, seen: HashSet::new(), stats: LfpStats::default() }
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

    fn on_software(&mut self, pkt: Seen, nic: &mut NicControl) -> f64 {
        let Some(flow) = pkt.flow else { return 0.0 };
        if !self.seen.insert(flow) {
            return 0.0;
        }
        self.stats.first_packets += 1;
        if self.model.predict(&features(pkt.key, pkt.bytes)) {
            self.stats.predicted_large += 1;
            if nic.has_room(0) && nic.offload(pkt.key, flow, 0) {
                self.stats.offloads += 1;
            }
        }
        nic.costs().sample_ns
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openflow::parse_packet;

    /// Leaves where large and small tie predict small, in every fit: linfa-trees alone would
    /// pick either by a randomly seeded hash map's order.
    #[test]
    fn tied_leaves_predict_small_in_every_fit() {
        let spec = KeySpec::five_tuple();
        let mut t = LfpTrainer::default();
        // Pairs of flows whose first packets are identical (same features), one large, one
        // small: no split can separate them.
        for i in 0..20u32 {
            for (src, packets) in [(1, 30), (2, 1)] {
                let k =
                    parse_packet(&format!("tcp,nw_src=10.0.0.{src},nw_dst=10.1.0.{i},tp_dst=443")).unwrap();
                let mut same = k;
                same.set_nw_src(0x0a00_0001);
                let flow = spec.flow_id(&k).unwrap();
                for _ in 0..packets {
                    t.observe(flow, &same, 100);
                }
            }
        }
        let config = LfpConfig { large_share: 0.5, min_leaf: 1, ..LfpConfig::default() };
        let first = t.fit(&config).unwrap();
        for _ in 0..20 {
            assert_eq!(t.fit(&config).unwrap(), first);
        }
        let k = parse_packet("tcp,nw_src=10.0.0.1,nw_dst=10.1.0.3,tp_dst=443").unwrap();
        assert!(!first.predict(&features(&k, 100)), "a tie offloads nothing");
    }

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
