//! Rule-update streams for a flow table, as in FlowShadow's experiments (a given fraction of
//! the rules changed per second).
//!
//! Model: updates arrive as a Poisson process at `rate × rules` per second over `seconds`.
//! 60% are `modify-strict` (a live rule gets the actions of another rule of its table, so
//! `goto_table` stays valid), 20% `delete-strict` of a live rule, 20% `add` (a deleted rule
//! comes back, or a live rule is copied one priority higher with another rule's actions).
//! Every line refers to rules that exist at that moment. Deterministic for a seed.

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use rand_distr::{Distribution, Exp};

use super::traffic::TrafficError;
use crate::openflow::action::format_actions;
use crate::openflow::parser::{parse_flow_spec, SpecKind};
use crate::openflow::{Actions, Rule};

/// What to generate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct UpdatesConfig {
    /// Fraction of the rules updated per second.
    pub rate: f64,
    /// Length of the stream in seconds.
    pub seconds: f64,
    /// RNG seed.
    pub seed: u64,
}

fn selector(r: &Rule) -> String {
    let m = r.matcher().to_string();
    let sep = if m.is_empty() { "" } else { "," };
    format!("table={},priority={}{sep}{m}", r.table, r.priority)
}

/// Actions of a random rule of the same table that are valid under rule `i`'s match (a
/// rewrite needs its field's prerequisites in the match); rule `i`'s own if none is.
fn donor_actions(rng: &mut StdRng, live: &[Rule], i: usize) -> Actions {
    let target = &live[i];
    let mut peers: Vec<usize> =
        (0..live.len()).filter(|&j| live[j].table == target.table && j != i).collect();
    while !peers.is_empty() {
        let j = peers.swap_remove(rng.random_range(0..peers.len()));
        let line = format!("{} actions={}", selector(target), format_actions(&live[j].actions));
        if parse_flow_spec(&line, SpecKind::Modify).is_ok() {
            return live[j].actions.clone();
        }
    }
    target.actions.clone()
}

/// Tracks an add: it replaces a live rule with the same table, priority and match.
fn add_live(live: &mut Vec<Rule>, r: Rule) {
    live.retain(|x| !(x.table == r.table && x.priority == r.priority && x.matcher() == r.matcher()));
    live.push(r);
}

/// Most updates a generated stream holds (its lines are kept in memory).
pub(crate) const MAX_UPDATES: usize = 100_000_000;

/// The update lines (`<seconds> <command> <spec>`), in time order.
pub fn generate_updates(rules: &[Rule], config: &UpdatesConfig) -> Result<Vec<String>, TrafficError> {
    if rules.is_empty() {
        return Err(TrafficError::NoRulesToUpdate);
    }
    if !(config.rate.is_finite() && config.rate > 0.0) {
        return Err(TrafficError::param("rate", "must be a positive fraction of rules per second"));
    }
    if !(config.seconds.is_finite() && config.seconds > 0.0) {
        return Err(TrafficError::param("seconds", "must be positive"));
    }
    if config.rate * rules.len() as f64 * config.seconds > MAX_UPDATES as f64 {
        return Err(TrafficError::param(
            "rate",
            "× rules × `seconds` asks for more than 100,000,000 updates",
        ));
    }
    let mut rng = StdRng::seed_from_u64(config.seed);
    let gap = Exp::new(config.rate * rules.len() as f64)
        .map_err(|_| TrafficError::param("rate", "is out of the distribution's range"))?;
    let mut live: Vec<Rule> = rules.to_vec();
    let mut dead: Vec<Rule> = Vec::new();
    let mut out = Vec::new();
    let mut t = gap.sample(&mut rng);
    while t < config.seconds {
        let roll = rng.random_range(0..10);
        if live.is_empty() || (roll >= 8 && !dead.is_empty() && rng.random_range(0..2) == 0) {
            let r = dead.swap_remove(rng.random_range(0..dead.len()));
            out.push(format!("{t:.6} add {r}"));
            add_live(&mut live, r);
        } else {
            let i = rng.random_range(0..live.len());
            let donor = donor_actions(&mut rng, &live, i);
            match roll {
                0..6 => {
                    out.push(format!(
                        "{t:.6} modify-strict {} actions={}",
                        selector(&live[i]),
                        format_actions(&donor)
                    ));
                    live[i].actions = donor;
                }
                6..8 => {
                    out.push(format!("{t:.6} delete-strict {}", selector(&live[i])));
                    dead.push(live.swap_remove(i));
                }
                _ => {
                    let mut r = live[i].clone();
                    r.priority = r.priority.saturating_add(1);
                    r.actions = donor;
                    out.push(format!("{t:.6} add {r}"));
                    add_live(&mut live, r);
                }
            }
        }
        t += gap.sample(&mut rng);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openflow::parse_flows;
    use crate::openflow::update::{apply, parse_updates};
    use crate::openflow::Pipeline;

    #[test]
    fn streams_parse_apply_and_hit_the_rate() {
        let text = "table=0,priority=10,ip,nw_dst=10.0.0.0/8 actions=goto_table:1\n\
                    table=0,priority=0 actions=drop\n\
                    table=1,priority=20,tcp,tp_dst=80 actions=output:2\n\
                    table=1,priority=5 actions=output:3\n";
        let rules = parse_flows(text, "t").unwrap();
        let cfg = UpdatesConfig { rate: 0.5, seconds: 100.0, seed: 4 };
        let lines = generate_updates(&rules, &cfg).unwrap();
        assert_eq!(lines, generate_updates(&rules, &cfg).unwrap());
        // 4 rules × 0.5/s × 100 s = 200 expected.
        assert!((140..260).contains(&lines.len()), "{} updates", lines.len());
        let ups = parse_updates(&lines.join("\n"), "gen").unwrap();
        let mut p = Pipeline::from_rules(rules);
        let mut changed = Vec::new();
        for u in &ups {
            let n = apply(&mut p, u.command, &u.spec, &mut changed);
            assert_eq!(n, 1, "every update targets a live rule: line {}", u.line);
        }
    }
}
