//! The connection-tracking state flags of `ct_state`, in Open vSwitch's notation.
//!
//! Exact values are written as names joined by `|` (`new|trk`, `0` for none) and matches as
//! `+flag`/`-flag` lists (`+trk-new`), both in bit order; numbers (`0x21`, `0x21/0x21`) are
//! accepted too (OVS `parse_flags`, `format_flags_masked`).

/// A new connection (no reply seen).
pub(crate) const NEW: u8 = 0x01;
/// An established connection.
pub(crate) const EST: u8 = 0x02;
/// Related to an existing connection.
pub(crate) const REL: u8 = 0x04;
/// The packet goes in the reply direction.
pub(crate) const RPL: u8 = 0x08;
/// Invalid: conntrack could not track the packet.
pub(crate) const INV: u8 = 0x10;
/// Tracked: the packet went through conntrack.
pub const TRK: u8 = 0x20;
/// Source NAT applied.
pub(crate) const SNAT: u8 = 0x40;
/// Destination NAT applied.
pub(crate) const DNAT: u8 = 0x80;

/// Flag names in bit order.
pub const NAMES: [&str; 8] = ["new", "est", "rel", "rpl", "inv", "trk", "snat", "dnat"];

/// The bit of a flag's name (`trk` → [`TRK`]).
pub fn flag(name: &str) -> Option<u8> {
    NAMES.iter().position(|&n| n == name).map(|i| 1u8 << i)
}

/// An exact state as OVS prints it: `new|trk`, `0` for none.
pub(crate) fn format_exact(state: u8) -> String {
    if state == 0 {
        return "0".to_string();
    }
    (0..8).filter(|b| state >> b & 1 != 0).map(|b| NAMES[b]).collect::<Vec<_>>().join("|")
}

/// A masked state as OVS prints it: the exact form under a full mask, else `+flag`/`-flag` for
/// each bit of the mask.
pub(crate) fn format_masked(state: u8, mask: u8) -> String {
    if mask == u8::MAX {
        return format_exact(state);
    }
    if mask == 0 {
        return "0/0".to_string();
    }
    (0..8)
        .filter(|b| mask >> b & 1 != 0)
        .map(|b| format!("{}{}", if state >> b & 1 != 0 { '+' } else { '-' }, NAMES[b]))
        .collect()
}

/// Reads `ct_state`'s value: `+trk-new` (a mask of the named flags), `0x21/0x21`, or flags
/// joined by `|` or numbers (exact). Returns (value, mask).
pub fn parse(text: &str) -> Result<(u8, u8), String> {
    let number = |s: &str| -> Result<u8, String> {
        crate::packet::format::parse_int(s)
            .and_then(|v| u8::try_from(v).ok())
            .ok_or_else(|| format!("'{s}' is not a connection tracking state (flags: {})", NAMES.join(", ")))
    };
    if let Some((v, m)) = text.split_once('/') {
        return Ok((number(v)?, number(m)?));
    }
    if text.starts_with(['+', '-']) {
        let (mut value, mut mask) = (0u8, 0u8);
        let mut rest = text;
        while let Some(c) = rest.chars().next() {
            let set = match c {
                '+' => true,
                '-' => false,
                _ => {
                    return Err(format!(
                        "{rest}: ct_state must be preceded by '+' (for SET) or '-' (NOT SET)"
                    ))
                }
            };
            rest = &rest[1..];
            let end = rest.find(['+', '-']).unwrap_or(rest.len());
            let name = &rest[..end];
            let bit = flag(name).ok_or_else(|| format!("{name}: unknown connection tracking state flag"))?;
            if mask & bit != 0 {
                return Err(format!("{name}: Each ct_state flag can be specified only once"));
            }
            mask |= bit;
            if set {
                value |= bit;
            }
            rest = &rest[end..];
        }
        return Ok((value, mask));
    }
    let mut value = 0u8;
    for part in text.split('|') {
        value |= match flag(part) {
            Some(bit) => bit,
            None => number(part)?,
        };
    }
    Ok((value, u8::MAX))
}

/// Whether a match on `ct_state` (value, mask) implies a valid connection, which the `ct_nw_*`
/// and `ct_tp_*` fields require (OVS `is_ct_valid` on a match): one of new, est, rel, rpl,
/// snat, dnat required, or +trk with -inv.
pub fn valid_in_match(value: u8, mask: u8) -> bool {
    let v = value & mask;
    v & (NEW | EST | REL | RPL | SNAT | DNAT) != 0 || (v & TRK != 0 && mask & INV != 0 && v & INV == 0)
}

/// The bits of a packet's state that tell whether it has a valid connection (OVS
/// `CS_VALID_MASK`): one of them is set in every tracked, valid state.
pub(crate) const VALID_BITS: u8 = NEW | EST | RPL;

/// Why a state can never occur, as OVS's `validate_ct_state` says it, if it cannot.
pub fn impossible(state: u8) -> Option<String> {
    let name = format_exact(state);
    if state != 0 && state & TRK == 0 {
        Some(format!("{name}: invalid connection state: If \"trk\" is unset, no other flags are set"))
    } else if state & INV != 0 && state & !(TRK | INV) != 0 {
        Some(format!("{name}: invalid connection state: when \"inv\" is set, only \"trk\" may also be set"))
    } else if state & NEW != 0 && state & EST != 0 {
        Some(format!("{name}: invalid connection state: \"new\" and \"est\" are mutually exclusive"))
    } else if state & NEW != 0 && state & RPL != 0 {
        Some(format!("{name}: invalid connection state: \"new\" and \"rpy\" are mutually exclusive"))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_like_ovs() {
        assert_eq!(format_exact(NEW | TRK), "new|trk");
        assert_eq!(format_exact(0), "0");
        assert_eq!(format_masked(NEW | TRK, NEW | TRK), "+new+trk");
        assert_eq!(format_masked(0, TRK), "-trk");
        assert_eq!(format_masked(TRK, TRK | EST | NEW), "-new-est+trk");
    }

    #[test]
    fn parses_every_spelling() {
        assert_eq!(parse("+trk-new"), Ok((TRK, TRK | NEW)));
        assert_eq!(parse("-trk"), Ok((0, TRK)));
        assert_eq!(parse("new|trk"), Ok((NEW | TRK, 0xff)));
        assert_eq!(parse("0x21/0x21"), Ok((0x21, 0x21)));
        assert_eq!(parse("0"), Ok((0, 0xff)));
        assert!(parse("+trk+trk").unwrap_err().contains("only once"));
        assert!(parse("+bogus").unwrap_err().contains("unknown connection tracking state flag"));
        assert!(parse("trk-new").is_err());
        for s in 0..=255u8 {
            for m in [0xffu8, s | 0x21, 0x0f] {
                assert_eq!(parse(&format_masked(s & m, m)), Ok((s & m, m)), "{s:#x}/{m:#x}");
            }
        }
    }

    #[test]
    fn validity_as_ovs_decides_it() {
        assert!(valid_in_match(TRK | EST, TRK | EST));
        assert!(valid_in_match(TRK, TRK | INV));
        assert!(!valid_in_match(TRK, TRK));
        assert!(!valid_in_match(0, NEW));
        assert!(impossible(NEW).is_some());
        assert!(impossible(TRK | NEW | EST).is_some());
        assert!(impossible(TRK | INV | NEW).is_some());
        assert!(impossible(TRK | NEW | DNAT).is_none());
    }
}
