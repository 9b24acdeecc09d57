//! Flow files in `ovs-ofctl add-flows` syntax.
//!
//! Every error names file, line, column and the offending token; a file with any error yields
//! no rules at all, so a pipeline is never half-installed.

use super::action::{Action, Conjunction, SubField};
use super::action_pool::ActionPool;
use super::ct;
use super::names::{
    declared_tables, reserved_port, unquote, Names, ALL_PORT, CONTROLLER_PORT, FLOOD_PORT, LOCAL_PORT,
    NORMAL_PORT,
};
use super::rule::{Match, Rule};
use crate::packet::ct_state;
use crate::packet::field::{id, proto, FieldId, Prereq, FIELDS};
use crate::packet::format::{parse_field_value, parse_int};
use crate::packet::{FlowKey, FlowMask};

/// Default rule priority, as OpenFlow's `OFP_DEFAULT_PRIORITY`.
pub(crate) const DEFAULT_PRIORITY: u16 = 32768;

/// A problem in one flow spec: byte column (1-based), the offending token and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecError {
    /// 1-based column of the token's first character.
    pub column: usize,
    /// The token at fault.
    pub token: String,
    /// What is wrong with it.
    pub message: String,
}

/// A flow-file error with its location: `file:line:column: message (at 'token')`, or
/// `file: message` for the file as a whole (one that cannot be read: line 0).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowFileError {
    /// File name as given.
    pub file: String,
    /// 1-based line; 0 for the file as a whole.
    pub line: usize,
    /// 1-based column.
    pub column: usize,
    /// Offending token.
    pub token: String,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for FlowFileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.line == 0 {
            return write!(f, "{}: {}", self.file, self.message);
        }
        write!(f, "{}:{}:{}: {}", self.file, self.line, self.column, self.message)?;
        if !self.token.is_empty() {
            write!(f, " (at '{}')", self.token)?;
        }
        Ok(())
    }
}

impl std::error::Error for FlowFileError {}

impl FlowFileError {
    /// An error at `column` of line `line` of `file`, at `token`.
    pub fn at(
        file: &str,
        line: usize,
        column: usize,
        token: &str,
        message: impl Into<String>,
    ) -> FlowFileError {
        FlowFileError {
            file: file.to_string(),
            line,
            column,
            token: token.to_string(),
            message: message.into(),
        }
    }
}

/// What a flow spec must contain: `add-flows` lines need actions; `del-flows` specs have none.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpecKind {
    /// A rule to install: `actions=` is required.
    Add,
    /// A rule selector (for deletes): `actions=` is not allowed; `cookie=V/M` filters.
    Selector,
    /// `mod-flows`: a selector plus new actions; `cookie=V/M` filters, `cookie=V` sets.
    Modify,
}

/// One parsed flow spec.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowSpec {
    /// The rule (actions empty for selectors).
    pub rule: Rule,
    /// Whether `table=` was given (selectors without it apply to every table).
    pub table_given: bool,
    /// Whether `priority=` was given.
    pub priority_given: bool,
    /// `cookie=V/M` mask for selectors (0 = any cookie).
    pub cookie_mask: u64,
    /// `cookie=V` without a mask was given: the value to install (adds) or set (modifies).
    pub cookie_set: bool,
}

fn err(column: usize, token: &str, message: impl Into<String>) -> SpecError {
    SpecError { column, token: token.to_string(), message: message.into() }
}

/// A token of a line with its byte offset.
#[derive(Clone, Copy, Debug)]
pub(super) struct Tok<'a> {
    pub(super) text: &'a str,
    pub(super) offset: usize,
}

impl<'a> Tok<'a> {
    pub(super) fn col(&self) -> usize {
        self.offset + 1
    }
    pub(super) fn fail(&self, message: impl Into<String>) -> SpecError {
        err(self.col(), self.text, message)
    }
    /// Sub-token starting `start` bytes in.
    pub(super) fn sub(&self, start: usize, end: usize) -> Tok<'a> {
        Tok { text: &self.text[start..end], offset: self.offset + start }
    }
}

/// Splits at delimiters that are outside parentheses, keeping offsets.
pub(super) fn split_top<'a>(text: &'a str, base: usize, delims: &[u8]) -> Vec<Tok<'a>> {
    let mut out = Vec::new();
    let bytes = text.as_bytes();
    // The delimiters as a set of ASCII bytes: a test per byte, not a search of `delims`.
    let delim_set = delims.iter().filter(|d| d.is_ascii()).fold(0u128, |set, &d| set | 1 << d);
    let is_delim = |b: u8| b.is_ascii() && delim_set >> b & 1 == 1;
    let mut depth = 0i32;
    let mut start = 0;
    // A quoted name (`"antrea-gw0"`, `"p 1"`) is one token, whatever it holds.
    let mut quoted = false;
    let mut escaped = false;
    for (i, &b) in bytes.iter().enumerate() {
        if quoted {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => quoted = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => quoted = true,
            b'(' => depth += 1,
            b')' => depth -= 1,
            _ if depth == 0 && is_delim(b) => {
                if i > start {
                    out.push(Tok { text: &text[start..i], offset: base + start });
                }
                start = i + 1;
            }
            _ => {}
        }
    }
    if bytes.len() > start {
        out.push(Tok { text: &text[start..], offset: base + start });
    }
    out
}

/// Parses one flow spec (one line without its comment); tables and ports by number only.
pub fn parse_flow_spec(line: &str, kind: SpecKind) -> Result<FlowSpec, SpecError> {
    parse_flow_spec_named(line, kind, &Names::new())
}

/// Parses one flow spec (one line without its comment), with table and port `names`.
pub(crate) fn parse_flow_spec_named(
    line: &str,
    kind: SpecKind,
    names: &Names,
) -> Result<FlowSpec, SpecError> {
    let (match_text, actions_at) = match find_actions(line) {
        Some(pos) => (&line[..pos], Some(pos)),
        None => (line, None),
    };
    let mut rule = Rule::new(0, DEFAULT_PRIORITY, &Match::default(), Vec::new());
    let mut spec = FlowSpec {
        rule: rule.clone(),
        table_given: false,
        priority_given: false,
        cookie_mask: 0,
        cookie_set: false,
    };
    let mut value = FlowKey::default();
    let mut mask = FlowMask::CATCHALL;
    let mut used: Vec<(Prereq, Tok)> = Vec::new();
    for tok in split_top(match_text, 0, b", \t\r") {
        parse_match_token(kind, names, tok, &mut spec, &mut rule, &mut value, &mut mask, &mut used)?;
    }
    let matcher = Match::new(value, mask);
    rule.set_matcher(&matcher);
    for (p, tok) in &used {
        if !match_satisfies(&matcher, *p) {
            return Err(tok.fail(format!("{} requires {}", field_name_of(tok.text), prereq_text(*p))));
        }
    }
    match (kind, actions_at) {
        (SpecKind::Add | SpecKind::Modify, None) => {
            let end = line.trim_end();
            return Err(err(
                end.len().max(1),
                end.rsplit([',', ' ']).next().unwrap_or(""),
                "missing actions=",
            ));
        }
        (SpecKind::Selector, Some(pos)) => {
            return Err(err(pos + 1, "actions", "actions are not allowed here"));
        }
        (SpecKind::Add | SpecKind::Modify, Some(pos)) => {
            let start = pos + "actions=".len();
            rule.actions = parse_actions(&line[start..], start, &rule, names)?.into();
        }
        (SpecKind::Selector, None) => {}
    }
    spec.rule = rule;
    Ok(spec)
}

fn field_name_of(token: &str) -> &str {
    token.split('=').next().unwrap_or(token)
}

/// Byte position of the `actions=` keyword (`actions` followed by `=` or `:`), if any.
fn find_actions(line: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(i) = line[from..].find("actions") {
        let pos = from + i;
        let before_ok = pos == 0 || matches!(line.as_bytes()[pos - 1], b',' | b' ' | b'\t');
        let after = line.as_bytes().get(pos + 7);
        if before_ok && matches!(after, Some(b'=') | Some(b':')) {
            return Some(pos);
        }
        from = pos + 7;
    }
    None
}

fn prereq_text(p: Prereq) -> &'static str {
    match p {
        Prereq::None => "nothing",
        Prereq::Vlan => "a VLAN match (dl_vlan or vlan_tci with the CFI bit)",
        Prereq::Ip => "dl_type=0x0800 or 0x86dd (ip or ipv6)",
        Prereq::Ipv4 => "dl_type=0x0800 (ip)",
        Prereq::Ipv6 => "dl_type=0x86dd (ipv6)",
        Prereq::Arp => "dl_type=0x0806 or 0x8035 (arp or rarp)",
        Prereq::L4Ports => "nw_proto=6, 17 or 132 (tcp, udp or sctp), not a later fragment",
        Prereq::Tcp => "nw_proto=6 (tcp), not a later fragment",
        Prereq::Udp => "nw_proto=17 (udp), not a later fragment",
        Prereq::Sctp => "nw_proto=132 (sctp), not a later fragment",
        Prereq::Icmp => "dl_type=0x0800,nw_proto=1 (icmp)",
        Prereq::Icmpv6 => "dl_type=0x86dd,nw_proto=58 (icmp6)",
        Prereq::Ct => {
            "a ct_state match of a valid connection (+new, +est, +rel, +rpl, +snat, +dnat, or +trk-inv)"
        }
    }
}

/// OVS's normal form: a match may use a field only if it pins down what makes the field exist.
fn match_satisfies(m: &Match, p: Prereq) -> bool {
    if p == Prereq::Ct {
        return ct_state::valid_in_match(m.value.get(id::CT_STATE) as u8, m.mask.get(id::CT_STATE) as u8);
    }
    let dl = (m.mask.get(id::DL_TYPE) == 0xffff).then(|| m.value.dl_type());
    let nw = (m.mask.get(id::NW_PROTO) == 0xff).then(|| m.value.nw_proto());
    let vlan = (m.mask.get(id::VLAN_TCI) as u16 & proto::VLAN_CFI != 0).then(|| m.value.has_vlan());
    let later = m.value.nw_frag() & m.mask.get(id::NW_FRAG) as u8 & proto::FRAG_LATER != 0;
    p.holds(dl, nw, vlan, later)
}

fn shorthand(name: &str) -> Option<(u16, Option<u8>)> {
    Some(match name {
        "ip" | "ipv4" => (proto::ETH_IPV4, None),
        "ipv6" => (proto::ETH_IPV6, None),
        "arp" => (proto::ETH_ARP, None),
        "rarp" => (proto::ETH_RARP, None),
        "tcp" => (proto::ETH_IPV4, Some(proto::IP_TCP)),
        "udp" => (proto::ETH_IPV4, Some(proto::IP_UDP)),
        "sctp" => (proto::ETH_IPV4, Some(proto::IP_SCTP)),
        "icmp" => (proto::ETH_IPV4, Some(proto::IP_ICMP)),
        "tcp6" => (proto::ETH_IPV6, Some(proto::IP_TCP)),
        "udp6" => (proto::ETH_IPV6, Some(proto::IP_UDP)),
        "sctp6" => (proto::ETH_IPV6, Some(proto::IP_SCTP)),
        "icmp6" => (proto::ETH_IPV6, Some(proto::IP_ICMPV6)),
        _ => return None,
    })
}

/// Sets exact bits, refusing to contradict an earlier token (`tcp,udp` or `ip,dl_type=0x86dd`).
fn set_exact(
    tok: &Tok,
    value: &mut FlowKey,
    mask: &mut FlowMask,
    f: FieldId,
    v: u128,
    m: u128,
) -> Result<(), SpecError> {
    let old_m = mask.get(f);
    let overlap = old_m & m;
    if overlap != 0 && (value.get(f) ^ v) & overlap != 0 {
        return Err(tok.fail(format!("contradicts an earlier match on {}", f.def().name)));
    }
    value.set_masked(f, v, m);
    mask.unwildcard(f, m);
    Ok(())
}

fn parse_u<T: TryFrom<u128>>(tok: &Tok, text: &str, what: &str) -> Result<T, SpecError> {
    parse_int(text).and_then(|v| T::try_from(v).ok()).ok_or_else(|| tok.fail(format!("bad {what} '{text}'")))
}

/// Statistics of `ovs-ofctl dump-flows` output, which Open vSwitch ignores on input so that a
/// dump loads back (each still needs its value).
fn ignored_statistic(name: &str) -> bool {
    matches!(name, "duration" | "n_packets" | "n_bytes" | "idle_age" | "hard_age")
}

/// Valueless flags of a dump or an `add-flows` line that change nothing hyflow models.
fn ignored_flag(name: &str, kind: SpecKind) -> bool {
    let flow_mod_flags = matches!(
        name,
        "send_flow_rem" | "check_overlap" | "reset_counts" | "no_packet_counts" | "no_byte_counts"
    );
    (flow_mod_flags && kind != SpecKind::Selector)
        || matches!(name, "no_readonly_table" | "allow_hidden_fields")
}

/// The table `text` names: a number, a name (bare or quoted) or `N(name)`.
fn parse_table(tok: &Tok, text: &str, names: &Names, what: &str) -> Result<u8, SpecError> {
    let number = text.split_once('(').map_or(text, |(n, _)| n);
    let t: u8 = if number.bytes().all(|b| b.is_ascii_digit()) && !number.is_empty() {
        parse_u(tok, number, what)?
    } else {
        names.table(text).ok_or_else(|| {
            let known: Vec<&str> = names.table_names().collect();
            let hint = if known.is_empty() {
                "no table names are known: give the number, declare it as table=N(name) or give a table-names file"
                    .to_string()
            } else {
                format!("known: {}", known.join(", "))
            };
            tok.fail(format!("unknown table '{text}' ({hint})"))
        })?
    };
    if t == 255 {
        return Err(tok.fail(format!("{what} must be 0..254")));
    }
    Ok(t)
}

/// The port `text` names: a number, a reserved port (`LOCAL`, ...) or a name (bare or quoted).
pub(super) fn parse_port_number(tok: &Tok, text: &str, names: &Names) -> Result<u32, SpecError> {
    if let Some(p) = parse_int(text).and_then(|p| u32::try_from(p).ok()) {
        return Ok(p);
    }
    if let Some(p) = reserved_port(text) {
        return Ok(p);
    }
    names.port(text).ok_or_else(|| {
        let known: Vec<&str> = names.port_names().collect();
        let hint = if known.is_empty() {
            "no port names are known: give the number or a port-names file".to_string()
        } else {
            format!("known: {}", known.join(", "))
        };
        tok.fail(format!("unknown port '{text}' ({hint})"))
    })
}

#[allow(clippy::too_many_arguments)]
fn parse_match_token<'a>(
    kind: SpecKind,
    names: &Names,
    tok: Tok<'a>,
    spec: &mut FlowSpec,
    rule: &mut Rule,
    value: &mut FlowKey,
    mask: &mut FlowMask,
    used: &mut Vec<(Prereq, Tok<'a>)>,
) -> Result<(), SpecError> {
    let Some((name, val)) = tok.text.split_once('=') else {
        if ignored_flag(tok.text, kind) {
            return Ok(());
        }
        if ignored_statistic(tok.text) {
            return Err(tok.fail(format!("{} needs a value", tok.text)));
        }
        if let Some((dl, nw)) = shorthand(tok.text) {
            set_exact(&tok, value, mask, id::DL_TYPE, dl as u128, 0xffff)?;
            if let Some(nw) = nw {
                set_exact(&tok, value, mask, id::NW_PROTO, nw as u128, 0xff)?;
            }
            return Ok(());
        }
        return Err(tok.fail(match nearest(tok.text, SHORTHANDS) {
            Some(hint) => format!("unknown keyword '{}' (did you mean '{hint}'?)", tok.text),
            None => format!("unknown keyword '{}'", tok.text),
        }));
    };
    let vtok = tok.sub(name.len() + 1, tok.text.len());
    let value_err = |e: crate::packet::format::ValueError| {
        let t = if e.in_mask {
            let slash = val.find('/').map(|i| i + 1).unwrap_or(0);
            vtok.sub(slash, val.len())
        } else {
            vtok.sub(0, val.find('/').unwrap_or(val.len()))
        };
        t.fail(e.reason)
    };
    match name {
        _ if ignored_statistic(name) => {
            if val.is_empty() {
                return Err(tok.fail(format!("{name} needs a value")));
            }
        }
        "importance" if kind == SpecKind::Add => {
            let _: u16 = parse_u(&vtok, val, "importance")?;
        }
        "table" => {
            rule.table = parse_table(&vtok, val, names, "table")?;
            spec.table_given = true;
        }
        "in_port" if parse_int(val).is_none() => {
            let port = parse_port_number(&vtok, val, names)?;
            set_exact(&tok, value, mask, id::IN_PORT, port as u128, u32::MAX as u128)?;
        }
        "priority" => {
            rule.priority = parse_u(&vtok, val, "priority")?;
            spec.priority_given = true;
        }
        "cookie" => {
            let (v, m) = match val.split_once('/') {
                Some((v, m)) => (v, Some(m)),
                None => (val, None),
            };
            rule.cookie = parse_u(&vtok, v, "cookie")?;
            // As ovs-ofctl: a mask searches for cookies, a bare value sets one.
            match (m, kind) {
                (Some(_), SpecKind::Add) => {
                    return Err(vtok.fail("flow additions cannot use a cookie mask"));
                }
                (Some(m), _) => spec.cookie_mask = parse_u(&vtok, m, "cookie mask")?,
                (None, SpecKind::Selector) => return Err(vtok.fail("cannot set cookie")),
                (None, _) => spec.cookie_set = true,
            }
        }
        "idle_timeout" => rule.idle_timeout = parse_u(&vtok, val, "idle_timeout")?,
        "hard_timeout" => rule.hard_timeout = parse_u(&vtok, val, "hard_timeout")?,
        "dl_vlan" => {
            let vid: u16 = parse_u(&vtok, val, "VLAN id")?;
            if vid == 0xffff {
                set_exact(&tok, value, mask, id::VLAN_TCI, 0, 0xffff)?;
            } else if vid > 0x0fff {
                return Err(vtok.fail("VLAN id must be 0..4095 (or 0xffff for untagged)"));
            } else {
                let tci = (vid | proto::VLAN_CFI) as u128;
                set_exact(&tok, value, mask, id::VLAN_TCI, tci, 0x1fff)?;
            }
        }
        "dl_vlan_pcp" => {
            let pcp: u16 = parse_u(&vtok, val, "VLAN priority")?;
            if pcp > 7 {
                return Err(vtok.fail("VLAN priority must be 0..7"));
            }
            let tci = ((pcp << 13) | proto::VLAN_CFI) as u128;
            set_exact(&tok, value, mask, id::VLAN_TCI, tci, 0xf000)?;
        }
        "vlan_vid" => {
            // OXM semantics: bit 0x1000 is "tag present", the low 12 bits the VID.
            let (v, m) = parse_field_value(id::VLAN_TCI, val).map_err(value_err)?;
            let m = if val.contains('/') { m } else { 0x1fff };
            if v > 0x1fff || m > 0x1fff {
                return Err(vtok.fail("vlan_vid is 13 bits (0x1000 = present, low 12 = VID)"));
            }
            set_exact(&tok, value, mask, id::VLAN_TCI, v, m)?;
        }
        "vlan_pcp" => {
            let pcp: u16 = parse_u(&vtok, val, "VLAN priority")?;
            if pcp > 7 {
                return Err(vtok.fail("VLAN priority must be 0..7"));
            }
            set_exact(&tok, value, mask, id::VLAN_TCI, ((pcp << 13) | proto::VLAN_CFI) as u128, 0xf000)?;
        }
        _ => {
            let f = match FieldId::from_name(name) {
                Some(f) => f,
                None => return Err(tok.sub(0, name.len()).fail(unknown_field(name))),
            };
            let def = f.def();
            if matches!(f, id::VLAN_TPID | id::VLAN_TCI2 | id::VLAN_TPID2) {
                return Err(tok.sub(0, name.len()).fail(format!("{name} cannot be matched")));
            }
            let (v, m) = parse_field_value(f, val).map_err(value_err)?;
            let m = if f == id::NW_TOS {
                // nw_tos matches the DSCP bits only; ECN is nw_ecn (OVS semantics).
                if v & 0x03 != 0 {
                    return Err(vtok.fail("nw_tos must be a multiple of 4 (ECN bits are nw_ecn)"));
                }
                m & 0xfc
            } else {
                m
            };
            set_exact(&tok, value, mask, f, v & m, m)?;
            if def.prereq != Prereq::None {
                used.push((def.prereq, tok));
            }
        }
    }
    Ok(())
}

/// Splits `NAME[a..b]` / `NAME[a]` / `NAME[]` into a sub-field.
pub(super) fn parse_subfield(tok: &Tok) -> Result<SubField, SpecError> {
    let text = tok.text;
    let (name, range) = match text.find('[') {
        Some(i) if text.ends_with(']') => (&text[..i], &text[i + 1..text.len() - 1]),
        _ => (text, ""),
    };
    let field = FieldId::from_name(name).ok_or_else(|| tok.fail(unknown_field(name)))?;
    // OVS's `in_port` (NXM_OF_IN_PORT) is OpenFlow 1.0's 16-bit port; `in_port_oxm` its 32 bits.
    let bits = if matches!(name, "in_port" | "NXM_OF_IN_PORT") { 16 } else { field.def().bits };
    let (offset, n_bits) = if range.is_empty() {
        (0, bits)
    } else {
        let (a, b) = match range.split_once("..") {
            Some((a, b)) => (a, b),
            None => (range, range),
        };
        let a: u8 = parse_u(tok, a, "bit offset")?;
        let b: u8 = parse_u(tok, b, "bit offset")?;
        if a > b || b >= bits {
            return Err(tok.fail(format!("bit range [{a}..{b}] is outside {name} ({bits} bits)")));
        }
        (a, b - a + 1)
    };
    Ok(SubField { field, offset, n_bits })
}

fn writable(f: FieldId) -> bool {
    !matches!(
        f,
        id::DL_TYPE
            | id::NW_PROTO
            | id::NW_FRAG
            | id::TCP_FLAGS
            | id::VLAN_TPID
            | id::VLAN_TCI2
            | id::VLAN_TPID2
            | id::RECIRC_ID
            | id::DP_HASH
            | id::CT_STATE
            | id::CT_ZONE
            | id::CT_NW_PROTO
            | id::CT_NW_SRC
            | id::CT_NW_DST
            | id::CT_TP_SRC
            | id::CT_TP_DST
    )
}

/// The EtherType a match pins, if it does.
fn dl_type_of(m: &Match) -> Option<u16> {
    (m.mask.get(id::DL_TYPE) == 0xffff).then(|| m.value.dl_type())
}

/// Whether the match of `rule` guarantees prerequisite `p`; always for actions outside a
/// rule (group buckets), which OVS checks at run time only.
pub(super) fn satisfied(rule: Option<&Rule>, p: Prereq) -> bool {
    rule.is_none_or(|r| match_satisfies(&r.matcher(), p))
}

/// An action reading `f` (at `tok`) needs the rule's match to guarantee the field exists.
fn check_readable(tok: &Tok, f: FieldId, rule: Option<&Rule>) -> Result<(), SpecError> {
    if satisfied(rule, f.def().prereq) {
        Ok(())
    } else {
        Err(tok.fail(format!("reading {} requires {}", tok.text, prereq_text(f.def().prereq))))
    }
}

fn check_writable(tok: &Tok, f: FieldId, rule: Option<&Rule>) -> Result<(), SpecError> {
    check_writable_field(tok, f)?;
    let p = f.def().prereq;
    if !satisfied(rule, p) {
        return Err(tok.fail(format!(
            "writing {} requires the match to have {}",
            f.def().name,
            prereq_text(p)
        )));
    }
    Ok(())
}

fn check_writable_field(tok: &Tok, f: FieldId) -> Result<(), SpecError> {
    if writable(f) {
        Ok(())
    } else {
        Err(tok.fail(format!("{} is not writable", f.def().name)))
    }
}

/// `nw_tos` holds DSCP bits only: writes keep ECN, and a value with ECN bits is an error.
fn dscp_write(tok: &Tok, f: FieldId, value: u128, mask: u128) -> Result<(u128, u128), SpecError> {
    if f != id::NW_TOS {
        return Ok((value, mask));
    }
    if value & mask & 0x03 != 0 {
        return Err(tok.fail("nw_tos must be a multiple of 4 (ECN bits are nw_ecn)"));
    }
    Ok((value & 0xfc, mask & 0xfc))
}

/// An output port: a number, `in_port`, `LOCAL`, `FLOOD`, `ALL`, `CONTROLLER` or a port name.
fn parse_port(tok: &Tok, text: &str, names: &Names) -> Result<Action, SpecError> {
    if text.eq_ignore_ascii_case("in_port") {
        return Ok(Action::OutputInPort);
    }
    match parse_port_number(tok, text, names)? {
        p if p > 0 && p < 0xff00 => Ok(Action::Output(p)),
        LOCAL_PORT => Ok(Action::Output(LOCAL_PORT)),
        CONTROLLER_PORT => Ok(Action::Controller),
        FLOOD_PORT => Ok(Action::Flood),
        NORMAL_PORT => Ok(Action::Normal),
        ALL_PORT => Ok(Action::All),
        _ if reserved_port(text).is_some() => {
            Err(tok
                .fail(format!("output to the reserved port {} is not supported", text.to_ascii_uppercase())))
        }
        _ => Err(tok.fail(format!("bad output port '{text}'"))),
    }
}

fn parse_actions(text: &str, base: usize, rule: &Rule, names: &Names) -> Result<Vec<Action>, SpecError> {
    let toks = split_top(text, base, b", \t\r");
    let mut out = Vec::new();
    let mut saw_drop = None;
    let mut saw_goto: Option<Tok> = None;
    let mut saw_write_metadata: Option<Tok> = None;
    for tok in &toks {
        if let Some(g) = saw_goto {
            return Err(
                tok.fail(format!("nothing may follow {} (goto_table is the last instruction)", g.text))
            );
        }
        let a = parse_action(tok, Some(rule), names)?;
        match &a {
            None => saw_drop = Some(*tok),
            Some(Action::GotoTable(_)) => saw_goto = Some(*tok),
            Some(Action::WriteMetadata { .. }) => {
                if saw_write_metadata.is_some() {
                    return Err(tok.fail("write_metadata given twice"));
                }
                saw_write_metadata = Some(*tok);
            }
            Some(_) => {
                if let Some(w) = saw_write_metadata {
                    return Err(w.fail(
                        "write_metadata must come after all other actions (only goto_table may follow)",
                    ));
                }
            }
        }
        out.extend(a);
    }
    if let Some(d) = saw_drop {
        if toks.len() > 1 {
            return Err(d.fail("drop must be the only action"));
        }
    }
    // As OVS: a clause of a conjunction does nothing itself, so only notes may go with it.
    let is_conj = |a: &Action| matches!(a, Action::Conjunction(_));
    if out.iter().any(is_conj) {
        if let Some((tok, _)) =
            toks.iter().zip(&out).find(|(_, a)| !is_conj(a) && !matches!(a, Action::Note(_)))
        {
            return Err(tok.fail("conjunction actions may be used along with note actions only"));
        }
    }
    Ok(out)
}

/// One action; `Ok(None)` for `drop`.
pub(super) fn parse_action(
    tok: &Tok,
    rule: Option<&Rule>,
    names: &Names,
) -> Result<Option<Action>, SpecError> {
    let a = parse_any_action(tok, rule, names)?;
    if a.as_ref().is_some_and(ct::writes_ct_metadata) {
        return Err(tok.fail("ct_mark and ct_label are set only inside ct(exec(...))"));
    }
    Ok(a)
}

/// One action of `ct(exec(...))`: a set of `ct_mark` or `ct_label`, nothing else (OVS).
pub(super) fn parse_action_in_ct(
    tok: &Tok,
    rule: Option<&Rule>,
    names: &Names,
) -> Result<Option<Action>, SpecError> {
    match parse_any_action(tok, rule, names)? {
        Some(a) if ct::writes_ct_metadata(&a) => Ok(Some(a)),
        _ => Err(tok.fail("ct: exec(...) may only set ct_mark and ct_label (set_field, load or move)")),
    }
}

fn parse_any_action(tok: &Tok, rule: Option<&Rule>, names: &Names) -> Result<Option<Action>, SpecError> {
    let text = tok.text;
    // A bare number or quoted name is `output:` to that port. So is a word that is no
    // action's name but a reserved port or a known port name (below), as in OVS, which tries
    // actions first.
    if text.bytes().all(|b| b.is_ascii_digit()) || text.starts_with('"') {
        return parse_port(tok, text, names).map(Some);
    }
    // name, then ':' arg, '(' args ')' or nothing.
    let name_end = text.find([':', '(', '=']).unwrap_or(text.len());
    let name = &text[..name_end];
    let (arg, arg_tok) = if name_end == text.len() {
        ("", tok.sub(name_end, name_end))
    } else if text.as_bytes()[name_end] == b'(' {
        if !text.ends_with(')') {
            return Err(tok.fail("unbalanced parentheses"));
        }
        (&text[name_end + 1..text.len() - 1], tok.sub(name_end + 1, text.len() - 1))
    } else {
        (&text[name_end + 1..], tok.sub(name_end + 1, text.len()))
    };
    let need_arg = |what: &str| -> Result<(), SpecError> {
        if arg.is_empty() {
            Err(tok.fail(format!("{name} needs {what}")))
        } else {
            Ok(())
        }
    };
    // OpenFlow 1.0 rewrites (mod_*): OVS accepts them whatever the match and skips them at
    // run time on packets without the header, so only writability is checked here.
    let set = |f: FieldId, v: &str, m: Option<u128>| -> Result<Action, SpecError> {
        check_writable_field(tok, f)?;
        let (value, mask) = parse_field_value(f, v).map_err(|e| arg_tok.fail(e.reason))?;
        Ok(Action::SetField { field: f, value: value & m.unwrap_or(mask), mask: m.unwrap_or(mask) })
    };
    let no_arg = || -> Result<(), SpecError> {
        if name_end == text.len() {
            Ok(())
        } else {
            Err(tok.fail(format!("{name} takes no argument")))
        }
    };
    let a = match name {
        "drop" => {
            no_arg()?;
            return Ok(None);
        }
        "output" => {
            need_arg("a port")?;
            let port = arg.strip_prefix("port=").unwrap_or(arg);
            if port.contains(',') || port.contains('=') {
                return Err(
                    arg_tok.fail("only output:PORT, output(PORT) and output(port=PORT) are supported")
                );
            }
            if port.contains('[') {
                // output:FIELD[a..b]: the port a register (or any field) holds at run time.
                let src = parse_subfield(&arg_tok.sub(arg.len() - port.len(), arg.len()))?;
                if !satisfied(rule, src.field.def().prereq) {
                    return Err(arg_tok.fail(format!(
                        "output from {} requires the match to have {}",
                        src.field.def().name,
                        prereq_text(src.field.def().prereq)
                    )));
                }
                Action::OutputReg(src)
            } else {
                parse_port(&arg_tok, port, names)?
            }
        }
        "in_port" | "IN_PORT" => {
            no_arg()?;
            Action::OutputInPort
        }
        "goto_table" => {
            need_arg("a table")?;
            let t = parse_table(&arg_tok, arg, names, "table")?;
            let Some(rule) = rule else {
                return Err(tok.fail("goto_table is an instruction: not allowed in a group bucket"));
            };
            if t <= rule.table {
                return Err(tok.fail(format!(
                    "goto_table:{t} must go to a later table than {} (use resubmit to go back)",
                    rule.table
                )));
            }
            Action::GotoTable(t)
        }
        "resubmit" => {
            need_arg("a port or table")?;
            let (p, t) = if text.as_bytes()[name_end] == b'(' {
                match arg.split_once(',') {
                    Some((p, t)) => (p, t),
                    None => (arg, ""),
                }
            } else {
                (arg, "")
            };
            let in_port = match p {
                "" | "in_port" | "IN_PORT" => None,
                _ => Some(parse_port_number(&arg_tok, p, names)?),
            };
            let table = match t {
                "" => None,
                _ => Some(parse_table(&arg_tok, t, names, "resubmit table")?),
            };
            Action::Resubmit { in_port, table }
        }
        "set_field" => {
            let (v, f) = arg.split_once("->").ok_or_else(|| tok.fail("set_field needs VALUE->FIELD"))?;
            let ftok = arg_tok.sub(v.len() + 2, arg.len());
            match f {
                "vlan_vid" | "dl_vlan" | "vlan_pcp" | "dl_vlan_pcp" if !satisfied(rule, Prereq::Vlan) => {
                    return Err(ftok.fail(format!(
                        "writing {f} requires the match to have {}",
                        prereq_text(Prereq::Vlan)
                    )));
                }
                "vlan_vid" | "dl_vlan" => {
                    let vid: u16 = parse_u(&arg_tok, v, "VLAN id")?;
                    Action::SetVlanVid { vid: vid & 0x0fff, push_if_needed: false }
                }
                "vlan_pcp" | "dl_vlan_pcp" => {
                    let pcp: u8 = parse_u(&arg_tok, v, "VLAN priority")?;
                    if pcp > 7 {
                        return Err(arg_tok.fail("VLAN priority must be 0..7"));
                    }
                    Action::SetVlanPcp { pcp, push_if_needed: false }
                }
                _ => {
                    let field = FieldId::from_name(f).ok_or_else(|| ftok.fail(unknown_field(f)))?;
                    let (value, mask) = parse_field_value(field, v).map_err(|e| arg_tok.fail(e.reason))?;
                    check_writable(&ftok, field, rule)?;
                    let (value, mask) = dscp_write(&arg_tok, field, value, mask)?;
                    Action::SetField { field, value: value & mask, mask }
                }
            }
        }
        "load" => {
            let (v, _) = arg.split_once("->").ok_or_else(|| tok.fail("load needs VALUE->FIELD[bits]"))?;
            let dtok = arg_tok.sub(v.len() + 2, arg.len());
            let dst = parse_subfield(&dtok)?;
            check_writable(&dtok, dst.field, rule)?;
            let value = parse_int(v).ok_or_else(|| arg_tok.fail(format!("bad value '{v}'")))?;
            if dst.n_bits < 128 && value >> dst.n_bits != 0 {
                return Err(arg_tok.fail(format!("{v} does not fit in {} bits", dst.n_bits)));
            }
            let (value, mask) = dscp_write(&arg_tok, dst.field, value << dst.offset, dst.mask())?;
            Action::SetField { field: dst.field, value, mask }
        }
        "move" => {
            let (s, _) = arg.split_once("->").ok_or_else(|| tok.fail("move needs SRC[bits]->DST[bits]"))?;
            let stok = arg_tok.sub(0, s.len());
            let dtok = arg_tok.sub(s.len() + 2, arg.len());
            let src = parse_subfield(&stok)?;
            let dst = parse_subfield(&dtok)?;
            check_writable(&dtok, dst.field, rule)?;
            check_readable(&stok, src.field, rule)?;
            if src.n_bits != dst.n_bits {
                return Err(tok.fail(format!("move copies {} bits into {} bits", src.n_bits, dst.n_bits)));
            }
            Action::Move { src, dst }
        }
        "push" | "pop" => {
            need_arg("a field")?;
            let field = parse_subfield(&arg_tok)?;
            if name == "pop" {
                check_writable(&arg_tok, field.field, rule)?;
                Action::StackPop(field)
            } else {
                check_readable(&arg_tok, field.field, rule)?;
                Action::StackPush(field)
            }
        }
        "write_metadata" => {
            need_arg("a value")?;
            let (v, m) = match arg.split_once('/') {
                Some((v, m)) => (v, Some(m)),
                None => (arg, None),
            };
            let value: u64 = parse_u(&arg_tok, v, "metadata")?;
            let mask: u64 = match m {
                Some(m) => parse_u(&arg_tok, m, "metadata mask")?,
                None => u64::MAX,
            };
            Action::WriteMetadata { value: value & mask, mask }
        }
        "mod_dl_src" => set(id::DL_SRC, arg, None)?,
        "mod_dl_dst" => set(id::DL_DST, arg, None)?,
        "mod_nw_src" => set(id::NW_SRC, arg, None)?,
        "mod_nw_dst" => set(id::NW_DST, arg, None)?,
        "mod_nw_tos" => {
            let tos: u8 = parse_u(&arg_tok, arg, "TOS")?;
            if tos & 0x03 != 0 {
                return Err(arg_tok.fail("mod_nw_tos value must be a multiple of 4"));
            }
            Action::SetField { field: id::NW_TOS, value: tos as u128, mask: 0xfc }
        }
        "mod_nw_ecn" => set(id::NW_ECN, arg, None)?,
        "mod_nw_ttl" => set(id::NW_TTL, arg, None)?,
        "mod_tp_src" => set(id::TP_SRC, arg, None)?,
        "mod_tp_dst" => set(id::TP_DST, arg, None)?,
        "push_vlan" => {
            need_arg("an ethertype")?;
            let tpid: u16 = parse_u(&arg_tok, arg, "ethertype")?;
            if tpid != proto::ETH_VLAN && tpid != proto::ETH_QINQ {
                return Err(arg_tok.fail("push_vlan ethertype must be 0x8100 or 0x88a8"));
            }
            Action::PushVlan(tpid)
        }
        "pop_vlan" | "strip_vlan" => {
            no_arg()?;
            Action::PopVlan
        }
        "mod_vlan_vid" | "set_vlan_vid" => {
            let vid: u16 = parse_u(&arg_tok, arg, "VLAN id")?;
            if vid > 0x0fff {
                return Err(arg_tok.fail("VLAN id must be 0..4095"));
            }
            Action::SetVlanVid { vid, push_if_needed: name == "mod_vlan_vid" }
        }
        "mod_vlan_pcp" | "set_vlan_pcp" => {
            let pcp: u8 = parse_u(&arg_tok, arg, "VLAN priority")?;
            if pcp > 7 {
                return Err(arg_tok.fail("VLAN priority must be 0..7"));
            }
            Action::SetVlanPcp { pcp, push_if_needed: name == "mod_vlan_pcp" }
        }
        "dec_ttl" => {
            // dec_ttl(ids): controller ids for the TTL-exceeded packet-in; hyflow has no
            // controller, but the list must still be numbers.
            if !arg.is_empty() && !arg.split(',').all(|id| parse_int(id.trim()).is_some()) {
                return Err(arg_tok.fail("dec_ttl takes controller ids (numbers)"));
            }
            Action::DecTtl
        }
        "conjunction" => {
            // conjunction(id,k/n), 2 <= n <= 64, 1 <= k <= n (OVS's limits and messages).
            let syntax = || arg_tok.fail("\"conjunction\" syntax is \"conjunction(id,k/n)\"");
            let (id, kn) = arg.split_once(',').ok_or_else(syntax)?;
            let (k, n) = kn.split_once('/').ok_or_else(syntax)?;
            let id: u32 = parse_int(id.trim()).and_then(|v| u32::try_from(v).ok()).ok_or_else(syntax)?;
            let k: u8 = k.trim().parse().map_err(|_| syntax())?;
            let n: u8 = n.trim().parse().map_err(|_| syntax())?;
            if n < 2 {
                return Err(arg_tok.fail("conjunction must have at least 2 clauses"));
            }
            if n > 64 {
                return Err(arg_tok.fail("conjunction must have at most 64 clauses"));
            }
            if k < 1 {
                return Err(arg_tok.fail("clause index must be positive"));
            }
            if k > n {
                return Err(arg_tok.fail("clause index must be less than or equal to number of clauses"));
            }
            Action::Conjunction(Conjunction { id, clause: k - 1, n_clauses: n })
        }
        "ct" => {
            let ct = ct::parse_ct(&arg_tok, names, rule)?;
            let nat_setup = ct.nat.is_some_and(|n| n.kind.is_some());
            if !ct.commit && (nat_setup || !ct.exec.is_empty()) {
                return Err(tok.fail(
                    "ct needs commit to set a mark or label (exec) or set up NAT (nat(src|dst...)); without it only a bare nat applies",
                ));
            }
            // OVS check_CT and check_NAT, against the rule's match.
            if let Some(r) = rule {
                let dl = dl_type_of(&r.matcher());
                if !matches!(dl, Some(proto::ETH_IPV4 | proto::ETH_IPV6)) {
                    return Err(
                        tok.fail("ct requires the match to have dl_type=0x0800 or 0x86dd (ip or ipv6)")
                    );
                }
                let inv =
                    r.matcher().value.ct_state() & r.matcher().mask.get(id::CT_STATE) as u8 & ct_state::INV
                        != 0;
                if ct.commit && inv {
                    return Err(tok
                        .fail("ct(commit) cannot commit invalid connections (the match has ct_state=+inv)"));
                }
                if ct.nat.is_some_and(|n| n.addrs.is_some()) && dl != Some(proto::ETH_IPV4) {
                    return Err(
                        tok.fail("nat with IPv4 addresses requires the match to have dl_type=0x0800 (ip)")
                    );
                }
            }
            Action::Ct(Box::new(ct))
        }
        "ct_clear" => {
            no_arg()?;
            Action::CtClear
        }
        "nat" => return Err(tok.fail("nat is an argument of ct: ct(nat(...))")),
        "clone" => {
            // OVS: a nested action list, never instructions.
            let mut body = Vec::new();
            for t in split_top(arg, arg_tok.offset, b", \t\r") {
                match parse_action(&t, rule, names)? {
                    Some(Action::GotoTable(_) | Action::WriteMetadata { .. }) => {
                        return Err(
                            t.fail("clone holds actions, not instructions (goto_table, write_metadata)")
                        )
                    }
                    a => body.extend(a),
                }
            }
            Action::Clone(body)
        }
        "learn" => {
            need_arg("its specs")?;
            Action::Learn(Box::new(super::learn::parse_learn(&arg_tok, names, rule)?))
        }
        "group" => {
            need_arg("a group id")?;
            let g: u32 = parse_u(&arg_tok, arg, "group id")?;
            // A bucket may name a group of its own file: the group reader checks those.
            if rule.is_some() && !names.has_group(g) {
                return Err(tok.fail(if names.groups_known() {
                    format!("group {g} does not exist")
                } else {
                    format!("group {g} does not exist (no groups are known: give a groups file)")
                }));
            }
            Action::Group(g)
        }
        "controller" | "CONTROLLER" => {
            check_controller_args(&arg_tok, arg)?;
            Action::Controller
        }
        "note" => {
            // OVS: hex bytes, optionally separated by periods.
            let hex: String = arg.chars().filter(|&c| c != '.').collect();
            if !hex.len().is_multiple_of(2) || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(arg_tok.fail("note takes hex bytes (e.g. note:de.ad.be.ef)"));
            }
            Action::Note(arg.to_string())
        }
        "meter" => {
            need_arg("a meter id")?;
            Action::Meter(parse_u(&arg_tok, arg, "meter id")?)
        }
        "sample" => {
            need_arg("its parameters")?;
            if !arg.split(',').all(|kv| kv.contains('=')) {
                return Err(arg_tok.fail("sample takes key=value parameters (probability=N,...)"));
            }
            Action::Sample(arg.to_string())
        }
        _ if name_end == text.len() && (names.port(text).is_some() || reserved_port(text).is_some()) => {
            parse_port(tok, text, names)?
        }
        _ => {
            return Err(tok
                .sub(0, name.len().max(1).min(text.len()))
                .fail(format!("unknown action '{name}'")))
        }
    };
    Ok(Some(a))
}

/// The message for a field name hyflow does not know: some are Open vSwitch's, but not
/// modelled yet; a misspelt one gets the nearest name hyflow knows.
fn unknown_field(name: &str) -> String {
    if name.starts_with("ct_ipv6_") || name.starts_with("NXM_NX_CT_IPV6_") {
        return format!("{name}: IPv6 connection tuples are not modelled yet");
    }
    let fields = FIELDS.iter().flat_map(|f| std::iter::once(f.name).chain(f.aliases.iter().copied()));
    let known = fields.chain(MATCH_KEYWORDS).chain(SHORTHANDS);
    match nearest(name, known) {
        Some(hint) => format!("unknown field '{name}' (did you mean '{hint}'?)"),
        None => format!("unknown field '{name}'"),
    }
}

/// A match's keywords that are not fields.
const MATCH_KEYWORDS: [&str; 7] =
    ["priority", "table", "cookie", "idle_timeout", "hard_timeout", "importance", "actions"];

/// The protocol shorthands [`shorthand`] reads.
const SHORTHANDS: [&str; 12] =
    ["ip", "ipv4", "ipv6", "arp", "rarp", "tcp", "udp", "sctp", "icmp", "tcp6", "udp6", "sctp6"];

/// The name among `known` nearest `name`, if near enough to be a slip: at most one edit in
/// four characters (one at least), the first of the nearest in `known`'s order.
fn nearest<'a>(name: &str, known: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let most = (name.len() / 4).max(1);
    known
        .into_iter()
        .map(|k| (edit_distance(name, k), k))
        .filter(|&(d, _)| d <= most)
        .min_by_key(|&(d, _)| d)
        .map(|(_, k)| k)
}

/// Edit distance between `a` and `b` counting a swap of two neighbours as one edit (optimal
/// string alignment: `tp_dts` is one slip from `tp_dst`); bytes, as names are ASCII.
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut before: Vec<usize> = vec![0; b.len() + 1];
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    let mut row: Vec<usize> = vec![0; b.len() + 1];
    for i in 1..=a.len() {
        row[0] = i;
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut d = (previous[j - 1] + cost).min(previous[j] + 1).min(row[j - 1] + 1);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d = d.min(before[j - 2] + 1);
            }
            row[j] = d;
        }
        std::mem::swap(&mut before, &mut previous);
        std::mem::swap(&mut previous, &mut row);
    }
    previous[b.len()]
}

/// `controller`, `controller:MAX_LEN` or `controller(key=value,...)` with OVS's keys; hyflow
/// has no controller, so they only have to be well formed.
fn check_controller_args(tok: &Tok, arg: &str) -> Result<(), SpecError> {
    if arg.is_empty() || parse_int(arg).is_some() {
        return Ok(());
    }
    for kv in arg.split(',') {
        let key = kv.split_once('=').map_or(kv, |(k, _)| k).trim();
        if !matches!(key, "max_len" | "reason" | "id" | "userdata" | "pause" | "meter_id") {
            return Err(tok.fail(format!(
                "unknown controller parameter '{key}' (max_len, reason, id, userdata, pause, meter_id)"
            )));
        }
    }
    Ok(())
}

/// Strips a `#` comment; returns `None` for blank and comment-only lines.
pub fn strip_comment(line: &str) -> Option<&str> {
    let body = match line.find('#') {
        Some(i) => &line[..i],
        None => line,
    };
    (!body.trim().is_empty()).then_some(body)
}

/// Parses flow-file text; `file` names it in errors. All or nothing. Tables and ports by
/// number, or by the names the file declares (`table=N(name)`).
pub fn parse_flows(text: &str, file: &str) -> Result<Vec<Rule>, FlowFileError> {
    parse_flows_named(text, file, &mut Names::new())
}

/// [`parse_flows`] with table and port `names`, to which the file's own declarations are
/// added (so that updates to the same pipeline can use them).
pub fn parse_flows_named(text: &str, file: &str, names: &mut Names) -> Result<Vec<Rule>, FlowFileError> {
    for (i, line) in text.lines().enumerate() {
        declare_tables(names, line, i + 1, file)?;
    }
    let mut rules = Vec::new();
    // Equal action lists held once, as an installed rule's are.
    let mut lists = ActionPool::default();
    for (i, line) in text.lines().enumerate() {
        if let Some(mut rule) = parse_flow_line(line, i + 1, file, names)? {
            lists.take(&mut rule.actions);
            rules.push(rule);
        }
    }
    Ok(rules)
}

/// Adds the table names `line` declares (`table=N(name)`) to `names`.
pub(crate) fn declare_tables(
    names: &mut Names,
    line: &str,
    number: usize,
    file: &str,
) -> Result<(), FlowFileError> {
    let Some(body) = strip_comment(line) else { return Ok(()) };
    for (table, name, column) in declared_tables(body) {
        let fail = |message: String| FlowFileError::at(file, number, column, name, message);
        let t: u8 =
            table.parse().ok().filter(|&t| t < 255).ok_or_else(|| fail("table must be 0..254".into()))?;
        let unquoted = unquote(name).ok_or_else(|| fail("unclosed quote".into()))?;
        names.add_table(&unquoted, t).map_err(fail)?;
    }
    Ok(())
}

/// Header lines of `ovs-ofctl dump-flows` output, skipped so that a dump loads as it is.
fn dump_header(line: &str) -> bool {
    let t = line.trim_start();
    t.starts_with("NXST_FLOW reply") || t.starts_with("OFPST_FLOW reply")
}

/// One line of a flow file (`line`: its 1-based number): a rule, or nothing for a blank line,
/// a comment or a dump's header.
pub(crate) fn parse_flow_line(
    line: &str,
    number: usize,
    file: &str,
    names: &Names,
) -> Result<Option<Rule>, FlowFileError> {
    let Some(body) = strip_comment(line) else { return Ok(None) };
    if dump_header(body) {
        return Ok(None);
    }
    parse_flow_spec_named(body, SpecKind::Add, names)
        .map(|spec| Some(spec.rule))
        .map_err(|e| FlowFileError::at(file, number, e.column, &e.token, e.message))
}

/// Parses a packet given as a match-style string (`in_port=1,tcp,nw_src=..`): every field
/// named is set exactly, absent fields are zero. Masks are not allowed.
pub fn parse_packet(text: &str) -> Result<FlowKey, SpecError> {
    parse_packet_named(text, &Names::new())
}

/// [`parse_packet`] with port `names` (`in_port="antrea-gw0"`).
pub fn parse_packet_named(text: &str, names: &Names) -> Result<FlowKey, SpecError> {
    if let Some(tok) = split_top(text, 0, b", \t\r").into_iter().find(|t| t.text.contains('/')) {
        return Err(tok.fail("a packet has exact values, not masks"));
    }
    let spec = parse_flow_spec_named(text, SpecKind::Selector, names)?;
    if spec.table_given || spec.priority_given || spec.rule.cookie != 0 {
        return Err(err(1, text, "a packet cannot have table, priority or cookie"));
    }
    let mut k = spec.rule.matcher().value;
    if k.vlan_tci() != 0 && !k.has_vlan() {
        return Err(err(1, text, "a tagged packet's vlan_tci has the CFI bit 0x1000 (untagged is 0)"));
    }
    if k.has_vlan() {
        // A tag on the wire always has a TPID; strings name only the TCI (802.1Q assumed).
        k.set_vlan_tpid(proto::ETH_VLAN);
    }
    Ok(k)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(line: &str) -> Rule {
        parse_flow_spec(line, SpecKind::Add).unwrap().rule
    }

    fn fails(line: &str) -> SpecError {
        parse_flow_spec(line, SpecKind::Add).unwrap_err()
    }

    #[test]
    fn defaults_and_shorthands() {
        let r = one("tcp,tp_dst=80 actions=output:2");
        assert_eq!((r.table, r.priority), (0, DEFAULT_PRIORITY));
        assert_eq!(r.matcher().value.dl_type(), 0x0800);
        assert_eq!(r.matcher().value.nw_proto(), 6);
        assert_eq!(r.matcher().value.tp_dst(), 80);
        assert_eq!(r.actions[..], [Action::Output(2)]);
    }

    #[test]
    fn every_action_spelling() {
        let r =
            one("table=1,priority=5,ip actions=output(3),4,in_port,resubmit(,2),resubmit(7,3),resubmit:5,\
             set_field:10.0.0.1->nw_src,load:0x3->NXM_NX_REG0[0..7],move:NXM_NX_REG0[]->NXM_NX_REG1[],\
             mod_dl_src:00:00:00:00:00:01,mod_nw_ttl:9,mod_nw_tos:32,push_vlan:0x8100,mod_vlan_vid:5,\
             mod_vlan_pcp:3,strip_vlan,pop_vlan,dec_ttl,write_metadata:0x1/0xff,goto_table:4");
        assert_eq!(r.actions.len(), 20);
        assert_eq!(r.actions[3], Action::Resubmit { in_port: None, table: Some(2) });
        assert_eq!(r.actions[5], Action::Resubmit { in_port: Some(5), table: None });
        assert_eq!(r.actions[7], Action::SetField { field: id::reg(0), value: 3, mask: 0xff });
        assert_eq!(r.actions[19], Action::GotoTable(4));
        assert!(one("actions=drop").actions.is_empty());
        assert!(one("actions=").actions.is_empty());
    }

    #[test]
    fn errors_name_column_and_token() {
        let e = fails("tcp,foo_bar=1 actions=drop");
        assert_eq!((e.column, e.token.as_str()), (5, "foo_bar"));
        assert!(e.message.contains("unknown field"), "{}", e.message);

        let e = fails("ip,nw_src=10.0.0.0/33 actions=drop");
        assert_eq!((e.column, e.token.as_str()), (20, "33"));
        assert!(e.message.contains("prefix length"), "{}", e.message);

        let e = fails("tp_dst=80 actions=drop");
        assert_eq!((e.column, e.token.as_str()), (1, "tp_dst=80"));
        assert!(e.message.contains("requires nw_proto"), "{}", e.message);

        let e = fails("nw_src=1.2.3.4 actions=drop");
        assert!(e.message.contains("requires dl_type=0x0800"), "{}", e.message);

        let e = fails("table=3 actions=goto_table:2");
        assert_eq!((e.column, e.token.as_str()), (17, "goto_table:2"));
        assert!(e.message.contains("later table"), "{}", e.message);

        let e = fails("ip actions=goto_table:2,output:1");
        assert_eq!(e.token, "output:1");

        let e = fails("ip actions=frobnicate:1");
        assert_eq!((e.column, e.token.as_str()), (12, "frobnicate"));

        let e = fails("actions=set_field:1.2.3.4->nw_src");
        assert!(e.message.contains("requires the match"), "{}", e.message);
        // OpenFlow 1.0 rewrites are accepted and skipped at run time, as OVS does.
        assert!(parse_flow_spec("actions=mod_nw_src:1.2.3.4", SpecKind::Add).is_ok());
        assert!(fails("actions=pop_vlan:3").message.contains("takes no argument"));
        assert!(fails("cookie=1/1,actions=drop").message.contains("cookie mask"));
        assert!(fails("actions=set_field:5->vlan_vid").message.contains("requires the match"));
        assert!(fails("ip actions=set_field:33->nw_tos").message.contains("multiple of 4"));

        assert!(fails("ip,tcp_dst=80/0x1ffff actions=drop").message.contains("does not fit"));
        assert!(fails("tcp,udp actions=drop").message.contains("contradicts"));
        assert!(fails("in_port=1").message.contains("missing actions"));
        assert!(fails("actions=drop,output:1").message.contains("only action"));
    }

    #[test]
    fn file_errors_carry_line_numbers_and_install_nothing() {
        let text = "# comment\n\ntable=0,actions=output:1\nip,nw_dst=1.2.3.4/99 actions=drop\n";
        let e = parse_flows(text, "f.flows").unwrap_err();
        assert_eq!((e.line, e.column), (4, 19));
        assert_eq!(e.to_string(), "f.flows:4:19: prefix length 99 is longer than 32 bits (at '99')");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 3000, ..Default::default() })]

        /// Any text, including non-ASCII and cut-up valid lines, yields a rule or an error.
        #[test]
        fn arbitrary_text_never_panics(
            junk in "\\PC{0,60}",
            cut in 0usize..200,
            insert in "[,=:/()>\\-\\[\\]\\.0-9a-zé ]{0,6}",
        ) {
            let _ = parse_flow_spec(&junk, SpecKind::Add);
            let _ = parse_packet(&junk);
            let valid = "table=1,priority=5,tcp,nw_src=10.0.0.0/8,tp_dst=0x50/0xfff0 actions=load:0x3->NXM_NX_REG0[0..7],move:NXM_NX_REG0[]->NXM_NX_REG1[],set_field:00:00:00:00:00:01->dl_src,resubmit(2,3),output(port=4),goto_table:7";
            let mut at = cut.min(valid.len());
            while !valid.is_char_boundary(at) {
                at -= 1;
            }
            let mutated = format!("{}{}{}", &valid[..at], insert, &valid[at..]);
            let _ = parse_flow_spec(&mutated, SpecKind::Add);
            let _ = parse_flow_spec(&valid[..at], SpecKind::Add);
            let _ = parse_flow_spec(&valid[..at], SpecKind::Selector);
        }
    }

    #[test]
    fn packets_parse_from_match_strings() {
        let k = parse_packet(
            "in_port=4,dl_src=00:00:00:00:00:06,dl_dst=ff:ff:ff:ff:ff:ff,vlan_tci=0x7007,dl_type=0x0800,\
             nw_src=10.0.0.1,nw_dst=10.0.0.2,nw_proto=6,nw_tos=64,nw_ttl=64,tcp_src=1000,tcp_dst=80",
        )
        .unwrap();
        assert_eq!(k.in_port(), 4);
        assert_eq!(k.vlan_tci(), 0x7007);
        assert_eq!((k.nw_tos(), k.tp_dst()), (64, 80));
        assert!(parse_packet("in_port=1,ip,nw_src=10.0.0.0/8").is_err());
    }

    /// Pipelines built on connection tracking are refused where they use it, by name.
    #[test]
    fn connection_tracking_prints_as_ovs_ofctl_and_reads_back() {
        for flow in [
            "table=0,priority=10,ct_state=-trk,ip actions=ct(table=1,zone=5)",
            "table=1,priority=5,ct_state=+new+trk,tcp actions=ct(commit,zone=reg0[0..15],nat(dst=10.1.1.1:8080),exec(set_field:0x7->ct_mark)),output:2",
            "table=1,priority=5,ct_state=+est+trk,ct_zone=3,ct_mark=0x7,ip actions=ct(commit,force,nat(src=10.9.0.1-10.9.0.9:1000-1999,persistent,hash)),ct_clear",
            "table=1,priority=5,ct_state=-new-inv+trk,ct_label=0x1/0x1,ct_nw_dst=10.0.0.2,ct_nw_proto=6,ct_tp_dst=80,ip actions=ct(nat),output:1",
        ] {
            let rule = parse_flows(flow, "f").unwrap().remove(0);
            let printed = rule.to_string();
            assert_eq!(printed, flow, "printed as ovs-ofctl dump-flows does");
            assert_eq!(parse_flows(&printed, "f").unwrap().remove(0), rule);
        }
    }

    #[test]
    fn bad_connection_tracking_says_where_and_why() {
        for (flow, column, want) in [
            ("actions=ct(table=1)", 9, "ct requires the match to have dl_type"),
            ("ip actions=ct(zone=reg0[0..7])", 20, "a zone field has 16 bits"),
            ("ip actions=ct(table=255)", 21, "invalid table 0xff"),
            ("ip actions=ct(force)", 15, "\"force\" flag requires \"commit\""),
            ("ip actions=ct(bogus)", 15, "invalid argument to \"ct\" action: `bogus'"),
            ("ip actions=ct(exec(set_field:1->ct_mark))", 12, "ct needs commit"),
            ("ip actions=ct(nat(src=10.0.0.1))", 12, "ct needs commit"),
            ("ip actions=ct(commit,exec(output:1))", 27, "may only set ct_mark and ct_label"),
            ("ip actions=set_field:1->ct_mark", 12, "only inside ct(exec(...))"),
            ("ip actions=nat(src=10.0.0.1)", 12, "nat is an argument of ct"),
            ("ip actions=ct(commit,nat(src=10.0.0.5-10.0.0.1))", 30, "bad range"),
            ("ip actions=ct(commit,nat(hash))", 22, "Flags allowed only with"),
            ("ip actions=ct(commit,nat(src=10.0.0.1,dst=10.0.0.2))", 39, "May only specify one of"),
            ("ip actions=ct(commit,nat(src=[::1]))", 30, "IPv6 ranges are not modelled"),
            ("ipv6 actions=ct(commit,nat(src=10.0.0.1))", 14, "nat with IPv4 addresses"),
            ("ip,ct_state=+trk+inv actions=ct(commit)", 30, "cannot commit invalid connections"),
            ("ct_state=+trk,ct_nw_dst=10.0.0.1,ip actions=drop", 15, "requires a ct_state match of a valid"),
            ("ct_state=+bogus,ip actions=drop", 10, "unknown connection tracking state flag"),
            ("ct_state=+trk+trk,ip actions=drop", 10, "only once"),
            ("ip actions=set_field:1->ct_state", 25, "ct_state is not writable"),
            ("ip actions=ct_clear(1)", 12, "ct_clear takes no argument"),
            ("ct_ipv6_src=::1,ipv6 actions=drop", 1, "IPv6 connection tuples are not modelled yet"),
        ] {
            let e = parse_flows(flow, "f").unwrap_err();
            assert_eq!(e.column, column, "{flow}: {e}");
            assert!(e.message.contains(want), "{flow}: {e}");
        }
    }
}
