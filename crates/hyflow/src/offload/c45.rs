//! C4.5 decision trees (Quinlan, *C4.5: Programs for Machine Learning*, 1993) for two classes
//! over numeric features, grown and pruned as Weka's J48 does with its defaults — the learner
//! Elixir used for its LFP baseline (§5.1: "we employ the J48 implementation").
//!
//! * **Splits**: binary, `x[feature] <= threshold` to the left, the threshold a value seen in
//!   training (C4.5 splits numeric attributes at a value, not a midpoint). Each feature's
//!   threshold maximises information gain, less release 8's MDL penalty log2(candidate
//!   thresholds)/n; among the features whose gain is positive and at least their average,
//!   the one of highest **gain ratio** (gain over split information) is taken.
//! * **Stopping**: a node is a leaf when it is pure, holds fewer than twice `min_leaf`
//!   examples, or no split leaves `max(min_leaf, min(0.1·n/2, 25))` examples on both sides
//!   (J48's `-M 2` and its minimum split size).
//! * **Pruning**: pessimistic error-based subtree replacement at confidence 0.25 (J48's
//!   `-C 0.25`): a subtree becomes a leaf when the leaf's upper-bound error estimate is at
//!   most the subtree's plus 0.1 (J48's margin). J48's subtree raising is not done: it moves
//!   training examples between branches, costs the most and rarely changes two-class trees.
//!
//! Growing and pruning use explicit stacks, so a degenerate input cannot exhaust the call
//! stack; the tree is stored flat (children after their parent), so prediction is a loop
//! over an array.

/// J48's default pruning confidence.
const CONFIDENCE: f64 = 0.25;
/// The standard normal quantile at 1 − [`CONFIDENCE`].
const CONFIDENCE_Z: f64 = 0.674_489_750_196_081_7;

/// How a tree is grown.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct C45Params {
    /// Fewest training examples on each side of a split (J48's `-M`, default 2).
    pub min_leaf: usize,
    /// Whether to prune (J48 prunes by default).
    pub prune: bool,
}

impl Default for C45Params {
    fn default() -> Self {
        C45Params { min_leaf: 2, prune: true }
    }
}

/// One node: its training examples' classes and, unless a leaf, its split.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Node {
    /// Training examples that reached it.
    total: u32,
    /// Of those, positive.
    positive: u32,
    /// `(feature, threshold, left, right)`, or `None` for a leaf.
    split: Option<(u16, f64, u32, u32)>,
}

impl Node {
    fn leaf(total: u32, positive: u32) -> Node {
        Node { total, positive, split: None }
    }

    /// Training examples a leaf here would misclassify.
    fn errors(&self) -> u32 {
        self.positive.min(self.total - self.positive)
    }
}

/// A two-class C4.5 tree over `F` numeric features.
#[derive(Clone, Debug, PartialEq)]
pub struct C45Tree<const F: usize> {
    nodes: Vec<Node>,
}

impl<const F: usize> C45Tree<F> {
    /// Grows (and prunes, as `params` say) a tree on `examples`: features and class.
    ///
    /// An empty training set gives a single leaf that predicts negative.
    pub fn fit(examples: &[([f64; F], bool)], params: &C45Params) -> C45Tree<F> {
        let min_leaf = params.min_leaf.max(1);
        let mut nodes: Vec<Node> = Vec::new();
        let mut order: Vec<u32> = (0..examples.len() as u32).collect();
        let mut scratch: Vec<u32> = Vec::with_capacity(examples.len());
        // (slot of the node, range of `order` it holds)
        let mut work = vec![(0usize, 0usize, examples.len())];
        nodes.push(Node::leaf(0, 0));
        while let Some((slot, lo, hi)) = work.pop() {
            let ids = &mut order[lo..hi];
            let positive = ids.iter().filter(|&&i| examples[i as usize].1).count() as u32;
            let total = ids.len() as u32;
            nodes[slot] = Node::leaf(total, positive);
            let Some((feature, threshold)) = best_split(examples, ids, positive, min_leaf, &mut scratch)
            else {
                continue;
            };
            // Stable partition: left (<= threshold) first.
            scratch.clear();
            scratch.extend(ids.iter().copied().filter(|&i| examples[i as usize].0[feature] > threshold));
            let mut w = 0;
            for r in 0..ids.len() {
                if examples[ids[r] as usize].0[feature] <= threshold {
                    ids[w] = ids[r];
                    w += 1;
                }
            }
            ids[w..].copy_from_slice(&scratch);
            let (left, right) = (nodes.len(), nodes.len() + 1);
            nodes.push(Node::leaf(0, 0));
            nodes.push(Node::leaf(0, 0));
            nodes[slot].split = Some((feature as u16, threshold, left as u32, right as u32));
            work.push((right, lo + w, hi));
            work.push((left, lo, lo + w));
        }
        let mut tree = C45Tree { nodes };
        if params.prune {
            tree.prune();
        }
        tree
    }

    /// Pessimistic subtree replacement, bottom-up (children sit after their parent), then the
    /// pruned-away nodes dropped.
    fn prune(&mut self) {
        let mut estimate = vec![0.0f64; self.nodes.len()];
        for i in (0..self.nodes.len()).rev() {
            let node = self.nodes[i];
            let as_leaf = node.errors() as f64 + added_errors(node.total as f64, node.errors() as f64);
            estimate[i] = match node.split {
                None => as_leaf,
                Some((_, _, l, r)) => {
                    let subtree = estimate[l as usize] + estimate[r as usize];
                    if as_leaf <= subtree + 0.1 {
                        self.nodes[i].split = None;
                        as_leaf
                    } else {
                        subtree
                    }
                }
            };
        }
        let mut kept = Vec::with_capacity(self.nodes.len());
        let mut work = vec![(0usize, usize::MAX, false)];
        while let Some((old, parent, is_right)) = work.pop() {
            let at = kept.len();
            kept.push(self.nodes[old]);
            if parent != usize::MAX {
                if let Some((_, _, l, r)) = &mut kept[parent].split {
                    if is_right {
                        *r = at as u32;
                    } else {
                        *l = at as u32;
                    }
                }
            }
            if let Some((_, _, l, r)) = self.nodes[old].split {
                work.push((r as usize, at, true));
                work.push((l as usize, at, false));
            }
        }
        self.nodes = kept;
    }

    /// The leaf `x` falls in.
    #[inline]
    fn leaf(&self, x: &[f64; F]) -> &Node {
        let mut i = 0;
        loop {
            let node = &self.nodes[i];
            match node.split {
                None => return node,
                Some((feature, threshold, l, r)) => {
                    i = if x[feature as usize] <= threshold { l } else { r } as usize;
                }
            }
        }
    }

    /// The class of `x`: the majority of its leaf's training examples (a tie is negative).
    #[inline]
    pub fn predict(&self, x: &[f64; F]) -> bool {
        let leaf = self.leaf(x);
        2 * leaf.positive > leaf.total
    }

    /// The Laplace-corrected probability that `x` is positive, (p + 1)/(n + 2) over its
    /// leaf's training examples (J48's class distribution with `-A`): how confident the
    /// prediction is, to rank flows by.
    #[inline]
    pub fn probability(&self, x: &[f64; F]) -> f64 {
        let leaf = self.leaf(x);
        (leaf.positive as f64 + 1.0) / (leaf.total as f64 + 2.0)
    }

    /// Nodes in the tree.
    pub fn size(&self) -> usize {
        self.nodes.len()
    }

    /// Leaves in the tree.
    pub fn leaves(&self) -> usize {
        self.nodes.iter().filter(|n| n.split.is_none()).count()
    }
}

/// Binary entropy of `p` positives among `n`, times `n` (bits).
fn info(p: f64, n: f64) -> f64 {
    let term = |k: f64| if k > 0.0 { -k * (k / n).log2() } else { 0.0 };
    if n <= 0.0 {
        0.0
    } else {
        term(p) + term(n - p)
    }
}

/// The best split of `ids` (holding `positive` positives), as C4.5 chooses it, or `None`
/// when the node should be a leaf.
fn best_split<const F: usize>(
    examples: &[([f64; F], bool)],
    ids: &[u32],
    positive: u32,
    min_leaf: usize,
    sorted: &mut Vec<u32>,
) -> Option<(usize, f64)> {
    let n = ids.len();
    if positive == 0 || positive as usize == n || n < 2 * min_leaf {
        return None;
    }
    let nf = n as f64;
    let parent = info(positive as f64, nf);
    // J48's minimum split: 10% of the node's share per class, between min_leaf and 25.
    let min_split = ((0.1 * nf / 2.0).min(25.0) as usize).max(min_leaf);
    // (feature, threshold, gain after the MDL penalty, split information)
    let mut candidates: Vec<(usize, f64, f64, f64)> = Vec::with_capacity(F);
    for f in 0..F {
        sorted.clear();
        sorted.extend_from_slice(ids);
        sorted.sort_unstable_by(|&a, &b| examples[a as usize].0[f].total_cmp(&examples[b as usize].0[f]));
        let value = |k: usize| examples[sorted[k] as usize].0[f];
        let (mut left_n, mut left_p) = (0usize, 0u32);
        let mut best: Option<(f64, usize)> = None;
        let mut thresholds = 0usize;
        for k in 0..n - 1 {
            left_n += 1;
            left_p += examples[sorted[k] as usize].1 as u32;
            if value(k) >= value(k + 1) {
                continue;
            }
            if left_n < min_split || n - left_n < min_split {
                continue;
            }
            thresholds += 1;
            let children =
                info(left_p as f64, left_n as f64) + info((positive - left_p) as f64, (n - left_n) as f64);
            let gain = parent - children;
            if best.is_none_or(|(g, _)| gain > g) {
                best = Some((gain, k));
            }
        }
        let Some((gain_n, k)) = best else { continue };
        let gain = gain_n / nf - (thresholds as f64).log2() / nf;
        if gain <= 0.0 {
            continue;
        }
        let left = (k + 1) as f64;
        let split_info = info(left, nf) / nf;
        candidates.push((f, value(k), gain, split_info));
    }
    if candidates.is_empty() {
        return None;
    }
    let average = candidates.iter().map(|c| c.2).sum::<f64>() / candidates.len() as f64;
    candidates
        .iter()
        .filter(|c| c.2 >= average - 1e-3)
        .max_by(|a, b| (a.2 / a.3).total_cmp(&(b.2 / b.3)).then(b.0.cmp(&a.0)))
        .map(|&(f, t, _, _)| (f, t))
}

/// Errors to add to `errors` of `n` examples for C4.5's upper confidence bound at
/// [`CONFIDENCE`] (Weka's `Stats.addErrs`).
fn added_errors(n: f64, errors: f64) -> f64 {
    if n <= 0.0 {
        return 0.0;
    }
    if errors < 1.0 {
        let base = n * (1.0 - CONFIDENCE.powf(1.0 / n));
        return if errors == 0.0 { base } else { base + errors * (added_errors(n, 1.0) - base) };
    }
    if errors + 0.5 >= n {
        return (n - errors).max(0.0);
    }
    let z = CONFIDENCE_Z;
    let f = (errors + 0.5) / n;
    let r =
        (f + z * z / (2.0 * n) + z * (f / n - f * f / n + z * z / (4.0 * n * n)).sqrt()) / (1.0 + z * z / n);
    r * n - errors
}

#[cfg(test)]
mod tests {
    use super::*;

    fn xorshift(seed: u64) -> impl FnMut() -> u64 {
        let mut s = seed;
        move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        }
    }

    /// Weka's `Stats.addErrs` on known points: the upper bound grows with fewer examples.
    #[test]
    fn pessimistic_errors_match_c45s_bound() {
        // C4.5's book, §4: a leaf of 6 examples and no error is estimated at 0.206 × 6.
        assert!((added_errors(6.0, 0.0) - 6.0 * (1.0 - 0.25f64.powf(1.0 / 6.0))).abs() < 1e-12);
        assert!((added_errors(6.0, 0.0) / 6.0 - 0.206).abs() < 0.001);
        // And one of 16 with one error at 0.157 × 16 in all (the book's exact binomial bound;
        // Weka's normal approximation gives 0.155).
        assert!(((1.0 + added_errors(16.0, 1.0)) / 16.0 - 0.157).abs() < 0.003);
        assert_eq!(added_errors(4.0, 4.0), 0.0);
        assert!(added_errors(1000.0, 100.0) < added_errors(100.0, 10.0) * 10.0);
    }

    /// A planted threshold rule is learned exactly, whatever the noise features.
    #[test]
    fn learns_a_planted_threshold() {
        let mut next = xorshift(7);
        let examples: Vec<([f64; 3], bool)> = (0..3_000)
            .map(|_| {
                let x = [(next() % 1000) as f64, (next() % 1000) as f64, (next() % 7) as f64];
                (x, x[1] > 600.0)
            })
            .collect();
        let tree = C45Tree::fit(&examples, &C45Params::default());
        assert_eq!(tree.size(), 3, "one split suffices: {tree:?}");
        for v in 0..1000 {
            assert_eq!(tree.predict(&[5.0, v as f64, 1.0]), v > 600, "at {v}");
        }
    }

    /// Subtree replacement on hand-built trees: a split whose leaves are no surer than their
    /// parent goes; one that separates the classes stays, and a pruned tree keeps only the
    /// nodes still reachable.
    #[test]
    fn pruning_replaces_weak_subtrees() {
        let split = |l, r| Some((0u16, 0.5, l, r));
        // (8 of 10) splits into (5 of 6) and (3 of 4): the same error rate, more leaves.
        let mut weak = C45Tree::<1> {
            nodes: vec![
                Node { total: 10, positive: 8, split: split(1, 2) },
                Node::leaf(6, 5),
                Node::leaf(4, 3),
            ],
        };
        weak.prune();
        assert_eq!(weak.nodes, vec![Node::leaf(10, 8)]);
        // (5 of 10) splits into pure halves; below it, (5 of 5) has a pointless split.
        let mut strong = C45Tree::<1> {
            nodes: vec![
                Node { total: 10, positive: 5, split: split(1, 2) },
                Node { total: 5, positive: 5, split: Some((0, 0.25, 3, 4)) },
                Node::leaf(5, 0),
                Node::leaf(3, 3),
                Node::leaf(2, 2),
            ],
        };
        strong.prune();
        assert_eq!(
            strong.nodes,
            vec![Node { total: 10, positive: 5, split: split(1, 2) }, Node::leaf(5, 5), Node::leaf(5, 0)]
        );
        assert!(strong.predict(&[0.0]) && !strong.predict(&[1.0]));
    }

    /// Gain ratio prefers the feature that separates the classes over one with as much gain
    /// per example but spread over many thresholds; and every tree is deterministic.
    #[test]
    fn deterministic_and_respects_min_leaf() {
        let mut next = xorshift(3);
        let examples: Vec<([f64; 4], bool)> = (0..5_000)
            .map(|_| {
                let x = [
                    (next() % 50) as f64,
                    (next() % 3) as f64,
                    (next() % 100_000) as f64,
                    (next() % 2) as f64,
                ];
                let noisy = next().is_multiple_of(20);
                (x, ((x[0] < 10.0 && x[1] == 2.0) || x[3] == 1.0 && x[0] > 40.0) ^ noisy)
            })
            .collect();
        let params = C45Params::default();
        let tree = C45Tree::fit(&examples, &params);
        assert_eq!(tree, C45Tree::fit(&examples, &params));
        for node in &tree.nodes {
            assert!(node.total as usize >= params.min_leaf, "{node:?}");
        }
        let right = examples.iter().filter(|(x, y)| tree.predict(x) == *y).count();
        assert!(right as f64 >= 0.94 * examples.len() as f64, "{right} of {} right", examples.len());
        assert_eq!(C45Tree::<4>::fit(&[], &params).size(), 1);
    }

    /// A degenerate input (every split peels off one pair) does not exhaust the stack.
    #[test]
    fn deep_trees_grow_without_recursion() {
        let examples: Vec<([f64; 1], bool)> = (0..20_000).map(|i| ([i as f64], (i / 60) % 2 == 0)).collect();
        let tree = C45Tree::fit(&examples, &C45Params { prune: false, ..C45Params::default() });
        assert!(tree.leaves() > 100, "{} leaves", tree.leaves());
        let pruned = C45Tree::fit(&examples, &C45Params::default());
        assert!(pruned.size() <= tree.size());
    }
}
