//! The `ct(...)` action and its `nat(...)`, as `ovs-ofctl` reads and prints them (OVS
//! `parse_CT`, `format_CT`, `parse_NAT`, `format_NAT`).
//!
//! `ct` sends the packet through the connection tracker of a zone; with `commit` it creates
//! or updates the connection, with `exec(...)` it sets the connection's mark and label, with
//! `nat(...)` it translates addresses; with `table=N` a clone of the packet recirculates and
//! the pipeline resumes at table N seeing the connection's state (`ct_state` and the other
//! `ct_*` fields). Translation turns it into the datapath's `ct(...)` and `recirc(...)`.

use std::net::Ipv4Addr;

use super::action::{Action, SubField};
use super::names::Names;
use super::parser::{parse_subfield, split_top, SpecError, Tok};
use super::rule::Rule;
use crate::packet::field::id;
use crate::packet::format::parse_int;

/// Where `ct` takes its zone from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CtZone {
    /// A constant (`zone=5`; 0 when not given).
    Imm(u16),
    /// Bits of a field (`zone=NXM_NX_REG0[0..15]`), 16 of them.
    Field(SubField),
}

/// Which address `nat` translates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NatKind {
    /// Source NAT (`nat(src=...)`).
    Src,
    /// Destination NAT (`nat(dst=...)`).
    Dst,
}

/// `nat(...)`: with no kind it applies the NAT the connection already has (for packets of
/// committed connections); with `src`/`dst` it sets it up for a new connection, choosing from
/// the address and port ranges.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Nat {
    /// Source or destination, if a translation is set up here.
    pub kind: Option<NatKind>,
    /// IPv4 addresses to choose from, inclusive (min = max for one).
    pub addrs: Option<(u32, u32)>,
    /// Ports to choose from, inclusive.
    pub ports: Option<(u16, u16)>,
    /// `persistent`: the same address for a client across connections.
    pub persistent: bool,
    /// `hash`: choose the port by hash.
    pub hash: bool,
    /// `random`: choose the port at random.
    pub random: bool,
}

/// The `ct(...)` action.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Ct {
    /// `commit`: create the connection if it is new (or update it).
    pub commit: bool,
    /// `force`: with `commit`, end a connection found in the other direction and start anew.
    pub force: bool,
    /// `table=N`: recirculate a clone of the packet to table N.
    pub table: Option<u8>,
    /// The zone.
    pub zone: CtZone,
    /// `nat(...)`.
    pub nat: Option<Nat>,
    /// `exec(...)`: sets of `ct_mark` and `ct_label` (`set_field`, `load`, `move`).
    pub exec: Vec<Action>,
}

/// Writes a NAT range as OVS does: `10.0.0.1-10.0.0.9:1000-2000`.
fn format_range(f: &mut std::fmt::Formatter<'_>, nat: &Nat) -> std::fmt::Result {
    if let Some((lo, hi)) = nat.addrs {
        write!(f, "={}", Ipv4Addr::from(lo))?;
        if hi != lo {
            write!(f, "-{}", Ipv4Addr::from(hi))?;
        }
        if let Some((plo, phi)) = nat.ports {
            write!(f, ":{plo}")?;
            if phi != plo {
                write!(f, "-{phi}")?;
            }
        }
    }
    Ok(())
}

impl std::fmt::Display for Nat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "nat")?;
        let Some(kind) = self.kind else { return Ok(()) };
        write!(f, "({}", if kind == NatKind::Src { "src" } else { "dst" })?;
        format_range(f, self)?;
        for (on, name) in [(self.persistent, "persistent"), (self.hash, "hash"), (self.random, "random")] {
            if on {
                write!(f, ",{name}")?;
            }
        }
        write!(f, ")")
    }
}

impl std::fmt::Display for Ct {
    /// As `ovs-ofctl dump-flows` prints it: flags, table, zone, nat, exec.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts: Vec<String> = Vec::new();
        if self.commit {
            parts.push("commit".into());
        }
        if self.force {
            parts.push("force".into());
        }
        if let Some(t) = self.table {
            parts.push(format!("table={t}"));
        }
        match self.zone {
            CtZone::Field(s) => parts.push(format!("zone={s}")),
            CtZone::Imm(0) => {}
            CtZone::Imm(z) => parts.push(format!("zone={z}")),
        }
        if let Some(nat) = &self.nat {
            parts.push(nat.to_string());
        }
        if !self.exec.is_empty() {
            parts.push(format!("exec({})", super::action::format_actions(&self.exec)));
        }
        write!(f, "ct({})", parts.join(","))
    }
}

/// Parses the argument of `ct(...)` (`tok` is the text between the parentheses).
pub(super) fn parse_ct(tok: &Tok, names: &Names, rule: Option<&Rule>) -> Result<Ct, SpecError> {
    let mut ct =
        Ct { commit: false, force: false, table: None, zone: CtZone::Imm(0), nat: None, exec: Vec::new() };
    for t in split_top(tok.text, tok.offset, b", ") {
        let (key, value) = key_value(&t);
        match key.text {
            "commit" => ct.commit = true,
            "force" => ct.force = true,
            "table" => {
                let v = value.ok_or_else(|| t.fail("ct: table needs a value (table=N)"))?;
                let table = match parse_int(v.text) {
                    Some(n) if n < 255 => n as u8,
                    Some(n) => return Err(v.fail(format!("ct: invalid table {n:#x}"))),
                    None => names.table(v.text).ok_or_else(|| v.fail(format!("unknown table {}", v.text)))?,
                };
                ct.table = Some(table);
            }
            "zone" => {
                let v = value.ok_or_else(|| t.fail("ct: zone needs a value (zone=N or zone=FIELD[a..b])"))?;
                ct.zone = match parse_int(v.text) {
                    Some(z) => {
                        CtZone::Imm(u16::try_from(z).map_err(|_| v.fail("ct: zone must be 0..65535"))?)
                    }
                    None => {
                        let s = parse_subfield(&v)?;
                        if s.n_bits != 16 {
                            return Err(v.fail(format!("ct: a zone field has 16 bits, not {}", s.n_bits)));
                        }
                        CtZone::Field(s)
                    }
                };
            }
            "nat" => ct.nat = Some(parse_nat(&t, value)?),
            "exec" => {
                let v = value.ok_or_else(|| t.fail("ct: exec needs actions (exec(set_field:1->ct_mark))"))?;
                for a in split_top(v.text, v.offset, b", ") {
                    let action = super::parser::parse_action_in_ct(&a, rule, names)?;
                    ct.exec.extend(action);
                }
            }
            "alg" => {
                return Err(t.fail("ct: application-layer gateways (alg=ftp, alg=tftp) are not modelled"));
            }
            _ => return Err(key.fail(format!("invalid argument to \"ct\" action: `{}'", key.text))),
        }
    }
    if ct.force && !ct.commit {
        return Err(tok.fail("\"force\" flag requires \"commit\" flag."));
    }
    Ok(ct)
}

/// Splits `key=value` or `key(value)` (either may be absent).
fn key_value<'a>(t: &Tok<'a>) -> (Tok<'a>, Option<Tok<'a>>) {
    let text = t.text;
    match text.find(['=', '(']) {
        Some(i) if text.as_bytes()[i] == b'(' && text.ends_with(')') => {
            (t.sub(0, i), Some(t.sub(i + 1, text.len() - 1)))
        }
        Some(i) if text.as_bytes()[i] == b'=' => (t.sub(0, i), Some(t.sub(i + 1, text.len()))),
        _ => (*t, None),
    }
}

/// `nat` or `nat(src|dst[=ADDR[-ADDR][:PORT[-PORT]]][,persistent][,hash|random])`.
fn parse_nat(tok: &Tok, args: Option<Tok>) -> Result<Nat, SpecError> {
    let mut nat = Nat::default();
    for t in args.map(|a| split_top(a.text, a.offset, b",")).unwrap_or_default() {
        let (key, value) = key_value(&t);
        match key.text {
            "src" | "dst" => {
                if nat.kind.is_some() {
                    return Err(t.fail("May only specify one of \"src\" or \"dst\"."));
                }
                nat.kind = Some(if key.text == "src" { NatKind::Src } else { NatKind::Dst });
                if let Some(v) = value {
                    parse_range(&v, &mut nat)?;
                }
            }
            "persistent" => nat.persistent = true,
            "hash" => nat.hash = true,
            "random" => nat.random = true,
            _ => return Err(key.fail(format!("invalid key \"{}\" in \"nat\" argument", key.text))),
        }
    }
    if nat.kind.is_none() && (nat.persistent || nat.hash || nat.random) {
        return Err(tok.fail("Flags allowed only with \"src\" or \"dst\"."));
    }
    if nat.hash && nat.random {
        return Err(tok.fail("Both \"hash\" and \"random\" are not allowed."));
    }
    Ok(nat)
}

/// `ADDR[-ADDR][:PORT[-PORT]]`, IPv4.
fn parse_range(v: &Tok, nat: &mut Nat) -> Result<(), SpecError> {
    let bad = || v.fail(format!("nat: bad range \"{}\" (ADDR[-ADDR][:PORT[-PORT]], IPv4)", v.text));
    if v.text.starts_with('[') || v.text.matches(':').count() > 1 {
        return Err(v.fail("nat: IPv6 ranges are not modelled yet"));
    }
    let (addrs, ports) = match v.text.split_once(':') {
        Some((a, p)) => (a, Some(p)),
        None => (v.text, None),
    };
    let addr = |s: &str| s.parse::<Ipv4Addr>().map(u32::from).map_err(|_| bad());
    let (lo, hi) = match addrs.split_once('-') {
        Some((a, b)) => (addr(a)?, addr(b)?),
        None => (addr(addrs)?, addr(addrs)?),
    };
    if hi < lo {
        return Err(bad());
    }
    nat.addrs = Some((lo, hi));
    if let Some(p) = ports {
        let port = |s: &str| s.parse::<u16>().map_err(|_| bad());
        let (plo, phi) = match p.split_once('-') {
            Some((a, b)) => (port(a)?, port(b)?),
            None => (port(p)?, port(p)?),
        };
        if phi < plo {
            return Err(bad());
        }
        nat.ports = Some((plo, phi));
    }
    Ok(())
}

/// Whether an action writes a connection's mark or label (allowed only in `ct`'s `exec`).
pub(crate) fn writes_ct_metadata(a: &Action) -> bool {
    let ct = |f| f == id::CT_MARK || f == id::CT_LABEL;
    match a {
        Action::SetField { field, .. } => ct(*field),
        Action::Move { dst, .. } | Action::StackPop(dst) => ct(dst.field),
        _ => false,
    }
}
