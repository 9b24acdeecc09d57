//! Rule updates during a replay, with `ovs-ofctl add-flow`/`mod-flows`/`del-flows` semantics.
//!
//! An updates file has one update per line: `<when> <command> <flow spec>`, where `<when>` is
//! seconds from the trace start (`1.25`) or `#N` (before packet N, 0-based) and `<command>` is
//! `add`, `modify`, `modify-strict`, `delete` or `delete-strict`. Applying an update reports
//! every lookup outcome it may have changed, which is what every cache's consistency
//! mechanism works from.

use std::path::Path;

use super::flow_file::read_lines;
use super::names::Names;
use super::parser::{parse_flow_spec_named, strip_comment, FlowFileError, FlowSpec, SpecError, SpecKind};
use super::pipeline::{Pipeline, N_TABLES};
use super::rule::{Rule, RuleId};
use super::traversal::LookupRef;

/// What an update does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Command {
    /// Install a rule, replacing one with the same table, match and priority.
    Add,
    /// New actions for every rule whose match lies within the spec's (any priority).
    Modify,
    /// New actions for the rule with exactly this match and priority.
    ModifyStrict,
    /// Remove every rule whose match lies within the spec's.
    Delete,
    /// Remove the rule with exactly this match and priority.
    DeleteStrict,
}

impl Command {
    /// The word an updates file spells it with.
    pub fn name(self) -> &'static str {
        match self {
            Command::Add => "add",
            Command::Modify => "modify",
            Command::ModifyStrict => "modify-strict",
            Command::Delete => "delete",
            Command::DeleteStrict => "delete-strict",
        }
    }

    fn parse(word: &str) -> Option<Command> {
        Some(match word {
            "add" => Command::Add,
            "modify" => Command::Modify,
            "modify-strict" => Command::ModifyStrict,
            "delete" => Command::Delete,
            "delete-strict" => Command::DeleteStrict,
            _ => return None,
        })
    }

    fn spec_kind(self) -> SpecKind {
        match self {
            Command::Add => SpecKind::Add,
            Command::Modify | Command::ModifyStrict => SpecKind::Modify,
            Command::Delete | Command::DeleteStrict => SpecKind::Selector,
        }
    }

    fn strict(self) -> bool {
        matches!(self, Command::ModifyStrict | Command::DeleteStrict)
    }
}

/// The flow spec `text` of one `command` as a controller sends it to a running switch
/// (`ovs-ofctl add-flow`'s flow, `mod-flows`' selector and actions, `del-flows`' match —
/// empty: every rule), with the table and port `names` the flows were loaded with.
pub fn parse_command_spec(command: Command, text: &str, names: &Names) -> Result<FlowSpec, SpecError> {
    parse_flow_spec_named(text, command.spec_kind(), names)
}

/// When an update takes effect.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum When {
    /// Nanoseconds after the trace's first packet: before the first packet at or after it.
    At(u64),
    /// Before the packet with this 0-based index.
    BeforePacket(u64),
}

/// One line of an updates file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Update {
    /// When it applies.
    pub when: When,
    /// What it does.
    pub command: Command,
    /// The flow spec: rule to add, or selector plus new actions.
    pub spec: FlowSpec,
    /// 1-based line in the updates file (ties at the same moment apply in line order).
    pub line: usize,
}

/// Parses updates text; `file` names it in errors. All or nothing.
pub fn parse_updates(text: &str, file: &str) -> Result<Vec<Update>, FlowFileError> {
    parse_updates_named(text, file, &Names::new())
}

/// [`parse_updates`] with the table, port and group `names` the flows were loaded with.
pub fn parse_updates_named(text: &str, file: &str, names: &Names) -> Result<Vec<Update>, FlowFileError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        out.extend(parse_update_line(line, i + 1, file, names)?);
    }
    Ok(out)
}

/// One line of an updates file (`number`: 1-based): an update, or nothing for a blank line or
/// a comment.
fn parse_update_line(
    line: &str,
    number: usize,
    file: &str,
    names: &Names,
) -> Result<Option<Update>, FlowFileError> {
    let Some(body) = strip_update_comment(line) else { return Ok(None) };
    let fail =
        |column: usize, token: &str, message: String| FlowFileError::at(file, number, column, token, message);
    let mut words = Vec::with_capacity(2);
    let mut rest = body;
    let mut offset = 0;
    while words.len() < 2 {
        let trimmed = rest.trim_start();
        offset += rest.len() - trimmed.len();
        let end = trimmed.find(char::is_whitespace).unwrap_or(trimmed.len());
        words.push((&trimmed[..end], offset));
        offset += end;
        rest = &trimmed[end..];
    }
    let (time_tok, time_at) = words[0];
    let (cmd_tok, cmd_at) = words[1];
    let when = parse_when(time_tok).map_err(|m| fail(time_at + 1, time_tok, m))?;
    let command = Command::parse(cmd_tok).ok_or_else(|| {
        let msg = if cmd_tok.is_empty() {
            "missing command (add, modify, modify-strict, delete, delete-strict)".to_string()
        } else {
            format!("unknown command '{cmd_tok}' (add, modify, modify-strict, delete, delete-strict)")
        };
        fail(cmd_at + 1, cmd_tok, msg)
    })?;
    let spec = parse_flow_spec_named(rest, command.spec_kind(), names)
        .map_err(|e| fail(offset + e.column, &e.token, e.message))?;
    Ok(Some(Update { when, command, spec, line: number }))
}

/// Like [`strip_comment`], except that a leading `#` followed by a digit or a sign is a `#N`
/// time (so that `#-1` is refused as a packet index, not silently taken for a comment).
fn strip_update_comment(line: &str) -> Option<&str> {
    let trimmed = line.trim_start();
    match trimmed.strip_prefix('#') {
        Some(rest) if rest.starts_with(|c: char| c.is_ascii_digit() || c == '-' || c == '+') => {
            let lead = line.len() - rest.len();
            strip_comment(rest).map(|body| &line[..lead + body.len()])
        }
        _ => strip_comment(line),
    }
}

fn parse_when(tok: &str) -> Result<When, String> {
    if let Some(n) = tok.strip_prefix('#') {
        return n
            .parse::<u64>()
            .map(When::BeforePacket)
            .map_err(|_| format!("'#N' needs a packet index (a non-negative integer), not '{n}'"));
    }
    let secs: f64 = tok.parse().map_err(|_| format!("update time must be seconds or #N, not '{tok}'"))?;
    if !secs.is_finite() || secs < 0.0 {
        return Err(format!("update time must be a non-negative number of seconds, not '{tok}'"));
    }
    Ok(When::At((secs * 1e9).round() as u64))
}

/// Reads and parses an updates file.
pub fn read_updates_file(path: &Path) -> Result<Vec<Update>, FlowFileError> {
    read_updates_file_named(path, &Names::new())
}

/// [`read_updates_file`] with table and port `names` (those of the flow file it updates).
pub fn read_updates_file_named(path: &Path, names: &Names) -> Result<Vec<Update>, FlowFileError> {
    let mut out = Vec::new();
    read_lines(path, |line, number, name| {
        out.extend(parse_update_line(line, number, name, names)?);
        Ok(())
    })?;
    Ok(out)
}

/// Applies `command` with `spec` to the pipeline, appending to `changed` every lookup outcome
/// whose result may now differ: rules modified, deleted or replaced, and, for an added rule,
/// the lower-priority rules it overlaps, the rules matching `conj_id` (conjunctive answers)
/// and its table's miss (a packet that used to reach them may now hit the new rule); for a
/// rule taking part in conjunctive matches, every outcome of its table. Returns the number of rules added, modified or deleted.
pub fn apply(p: &mut Pipeline, command: Command, spec: &FlowSpec, changed: &mut Vec<LookupRef>) -> usize {
    match command {
        Command::Add => {
            add(p, spec, changed);
            1
        }
        Command::Modify | Command::ModifyStrict => {
            let targets = select(p, spec, command.strict());
            let cookie = spec.cookie_set.then_some(spec.rule.cookie);
            for &id in &targets {
                let was = p.rule(id).is_some_and(conjunctive);
                p.modify(id, &spec.rule.actions, cookie);
                changed.push(LookupRef::rule(id));
                if was || p.rule(id).is_some_and(conjunctive) {
                    whole_table(p, p.rule(id).map_or(0, |r| r.table), changed);
                }
            }
            // OVS adds the flow when nothing matched and a new cookie was given without a
            // cookie mask (`modify_may_add_flow`).
            if targets.is_empty() && spec.cookie_set && spec.cookie_mask == 0 {
                add(p, spec, changed);
                return 1;
            }
            targets.len()
        }
        Command::Delete | Command::DeleteStrict => {
            let targets = select(p, spec, command.strict());
            for &id in &targets {
                delete(p, id, changed);
            }
            targets.len()
        }
    }
}

/// Deletes rule `id` (as `delete-strict` of it would, or its expiry), appending the lookup
/// outcomes that may now differ to `changed`.
pub fn delete(p: &mut Pipeline, id: RuleId, changed: &mut Vec<LookupRef>) {
    if let Some(r) = p.remove(id) {
        if conjunctive(&r) {
            whole_table(p, r.table, changed);
        }
    }
    changed.push(LookupRef::rule(id));
}

/// Whether a rule takes part in conjunctive matching: a clause (`conjunction(...)`) or a rule
/// matching `conj_id`. What such a rule changes does not follow priorities (a conjunction's
/// answer is the `conj_id` rule, whatever its own priority), so a change to one is taken to
/// change every lookup of its table.
fn conjunctive(r: &Rule) -> bool {
    r.matcher().mask.get(crate::packet::field::id::CONJ_ID) != 0 || is_clause(r)
}

/// Whether a rule is a clause of a conjunction (its actions are `conjunction(...)`).
fn is_clause(r: &Rule) -> bool {
    r.actions.iter().any(|a| matches!(a, crate::openflow::Action::Conjunction(_)))
}

/// Every outcome of `table`: each rule and its miss.
fn whole_table(p: &Pipeline, table: u8, changed: &mut Vec<LookupRef>) {
    changed.extend(p.rules().filter(|(_, r)| r.table == table).map(|(id, _)| LookupRef::rule(id)));
    changed.push(LookupRef::miss(table));
}

fn add(p: &mut Pipeline, spec: &FlowSpec, changed: &mut Vec<LookupRef>) {
    let new = &spec.rule;
    let mut replaces_conjunctive = false;
    if let Some(old) = p.table(new.table).find_exact(&new.matcher(), new.priority) {
        changed.push(LookupRef::rule(old));
        replaces_conjunctive = p.rule(old).is_some_and(conjunctive);
    }
    // Ties go to the rule added first, so only strictly lower priorities can lose packets —
    // except after a conjunctive match that did not complete, whose fallback may take an
    // equal-priority rule added later: in a table with conjunctions, equal priorities too.
    // And once a conjunction completes, OVS's second lookup (on `conj_id`) answers with the
    // best hard rule matching at any priority, conj_id rule or not: a new rule, whatever its
    // priority, may take the packets of an answer the lookup fell back to below the clauses.
    let (mut with_conjunctions, mut clauses_top) = (false, None);
    for (_, r) in p.rules().filter(|(_, r)| r.table == new.table) {
        with_conjunctions |= conjunctive(r);
        if is_clause(r) {
            clauses_top = clauses_top.max(Some(r.priority));
        }
    }
    changed.extend(
        p.rules()
            .filter(|(_, r)| {
                r.table == new.table
                    && (r.priority < new.priority
                        || (with_conjunctions && r.priority == new.priority)
                        || clauses_top.is_some_and(|top| r.priority < top))
                    && r.matcher().overlaps(&new.matcher())
            })
            .map(|(id, _)| LookupRef::rule(id)),
    );
    changed.push(LookupRef::miss(new.table));
    if conjunctive(new) || replaces_conjunctive {
        whole_table(p, new.table, changed);
    } else {
        // A conjunctive answer competes at its clauses' priority, not its own: any rule added
        // may beat it.
        changed.extend(
            p.rules()
                .filter(|(_, r)| {
                    r.table == new.table && r.matcher().mask.get(crate::packet::field::id::CONJ_ID) != 0
                })
                .map(|(id, _)| LookupRef::rule(id)),
        );
    }
    p.add(new.clone());
}

/// Rules a modify/delete spec selects, in id order: in its table (every table when none was
/// given), with a matching cookie under the cookie mask, and either exactly its match and
/// priority (strict) or a match within its match (loose, any priority).
fn select(p: &Pipeline, spec: &FlowSpec, strict: bool) -> Vec<u32> {
    let want = &spec.rule;
    let cookie_ok = |r: &Rule| (r.cookie & spec.cookie_mask) == (want.cookie & spec.cookie_mask);
    if strict {
        // A table holds at most one rule with a given match and priority: look it up.
        let tables =
            if spec.table_given { want.table as usize..want.table as usize + 1 } else { 0..N_TABLES };
        let mut ids: Vec<u32> = tables
            .filter_map(|t| p.table(t as u8).find_exact(&want.matcher(), want.priority))
            .filter(|&id| p.rule(id).is_some_and(cookie_ok))
            .collect();
        ids.sort_unstable();
        return ids;
    }
    p.rules()
        .filter(|(_, r)| {
            (!spec.table_given || r.table == want.table)
                && cookie_ok(r)
                && r.matcher().within(&want.matcher())
        })
        .map(|(id, _)| id)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openflow::parse_flows;
    use crate::openflow::parse_packet;
    use crate::openflow::Traversal;

    fn pipeline(text: &str) -> Pipeline {
        Pipeline::from_rules(parse_flows(text, "t").unwrap())
    }

    fn out_ports(p: &Pipeline, pkt: &str) -> Vec<u32> {
        let mut tr = Traversal::new();
        p.process(&parse_packet(pkt).unwrap(), &mut tr);
        tr.outputs.iter().map(|o| o.port).collect()
    }

    fn run(p: &mut Pipeline, text: &str) -> (usize, Vec<LookupRef>) {
        let ups = parse_updates(text, "u").unwrap();
        let mut changed = Vec::new();
        let mut n = 0;
        for u in &ups {
            n += apply(p, u.command, &u.spec, &mut changed);
        }
        (n, changed)
    }

    const BASE: &str = "priority=10,ip,nw_dst=10.0.0.0/8 actions=output:2\n\
                        priority=20,tcp,nw_dst=10.1.0.0/16 actions=output:3\n\
                        table=1,priority=5 actions=output:9\n\
                        priority=0 actions=drop\n";

    #[test]
    fn parses_times_and_packet_indices() {
        let ups = parse_updates("0.5 add actions=drop\n#7 delete-strict priority=0\n# c\n\n", "u").unwrap();
        assert_eq!(ups[0].when, When::At(500_000_000));
        assert_eq!(ups[1].when, When::BeforePacket(7));
        assert_eq!(ups[1].line, 2);
    }

    #[test]
    fn bad_lines_name_line_column_and_token() {
        let e = parse_updates("1 add actions=drop\n2 frob actions=drop\n", "u.txt").unwrap_err();
        assert_eq!((e.line, e.column, e.token.as_str()), (2, 3, "frob"));
        assert!(e.message.contains("unknown command"));
        let e = parse_updates("-1 add actions=drop", "u").unwrap_err();
        assert!(e.message.contains("non-negative"), "{e}");
        let e = parse_updates("soon add actions=drop", "u").unwrap_err();
        assert_eq!(e.token, "soon");
        let e = parse_updates("1 add ip,nw_dst=10.0.0.300 actions=drop", "u").unwrap_err();
        assert_eq!(e.column, 17, "{e}");
        let e = parse_updates("1 delete ip actions=drop", "u").unwrap_err();
        assert!(e.message.contains("not allowed"), "{e}");
        let e = parse_updates("#1.5 delete ip", "u").unwrap_err();
        assert!(e.message.contains("packet index"), "{e}");
        assert!(parse_updates("1", "u").unwrap_err().message.contains("missing command"));
    }

    #[test]
    fn add_replaces_identical_and_reports_overlaps() {
        let mut p = pipeline(BASE);
        let (n, changed) = run(&mut p, "0 add priority=15,ip,nw_dst=10.0.0.0/8 actions=output:4");
        assert_eq!(n, 1);
        // Overlaps the priority-10 and priority-0 rules (ids 0 and 3), not the higher one.
        assert_eq!(changed, vec![LookupRef::rule(0), LookupRef::rule(3), LookupRef::miss(0)]);
        assert_eq!(out_ports(&p, "ip,nw_dst=10.2.0.1"), vec![4]);
        let (_, changed) = run(&mut p, "0 add priority=15,ip,nw_dst=10.0.0.0/8 actions=output:5");
        assert_eq!(changed[0], LookupRef::rule(4));
        assert_eq!(p.len(), 5);
        assert_eq!(out_ports(&p, "ip,nw_dst=10.2.0.1"), vec![5]);
    }

    #[test]
    fn modify_loose_and_strict() {
        let mut p = pipeline(BASE);
        // Loose: every rule within ip,nw_dst=10.0.0.0/8, any priority, any table.
        let (n, changed) = run(&mut p, "0 modify ip,nw_dst=10.0.0.0/8 actions=output:7");
        assert_eq!((n, changed), (2, vec![LookupRef::rule(0), LookupRef::rule(1)]));
        assert_eq!(out_ports(&p, "tcp,nw_dst=10.1.2.3"), vec![7]);
        // Strict needs the priority too (default 32768 here, so nothing matches).
        assert_eq!(run(&mut p, "0 modify-strict ip,nw_dst=10.0.0.0/8 actions=output:8").0, 0);
        assert_eq!(run(&mut p, "0 modify-strict priority=10,ip,nw_dst=10.0.0.0/8 actions=output:8").0, 1);
        assert_eq!(out_ports(&p, "ip,nw_dst=10.2.0.1"), vec![8]);
        // Nothing matched and a new cookie was given: OVS adds the flow.
        assert_eq!(run(&mut p, "0 modify cookie=0x5,udp actions=output:6").0, 1);
        assert_eq!(out_ports(&p, "udp,nw_dst=1.1.1.1"), vec![6]);
        assert_eq!(p.len(), 5);
    }

    #[test]
    fn delete_by_table_and_cookie() {
        let mut p =
            pipeline("cookie=1,priority=5,ip actions=output:1\ncookie=2,priority=6,tcp actions=output:2\n");
        assert_eq!(run(&mut p, "0 delete cookie=2/0xff").0, 1);
        assert_eq!(out_ports(&p, "tcp"), vec![1]);
        assert_eq!(run(&mut p, "0 delete table=1").0, 0);
        assert_eq!(run(&mut p, "0 delete-strict priority=5,ip").0, 1);
        assert!(p.is_empty());
    }
}
