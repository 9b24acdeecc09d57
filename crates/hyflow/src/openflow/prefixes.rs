//! Which fields a table keeps prefix tries for: Open vSwitch's `Flow_Table` `prefixes` column.
//!
//! A prefix trie lets a lookup skip a subtable after un-wildcarding only the address bits that
//! prove none of its prefixes can match, so megaflows stay wide on addresses (see
//! [`super::trie`]). Open vSwitch keeps tries for `ip_dst` and `ip_src` unless told otherwise
//! (`ofproto.c`'s `default_prefix_fields`; `vswitch.xml`: "By default, the
//! prefixes=ip_dst,ip_src are used"), at most three per table (`CLS_MAX_TRIES`), checked in the
//! order configured, and `none` turns them off: then every subtable a lookup reaches folds its
//! whole address masks into the megaflow. The transport ports' trie is not configurable there
//! and is always on here too.

use std::fmt;
use std::str::FromStr;

use crate::packet::field::{id, FieldId};

/// Fields a trie can be kept for, as Open vSwitch names them in `prefixes`.
pub(crate) const TRIE_FIELDS: [FieldId; 4] = [id::NW_DST, id::NW_SRC, id::IPV6_DST, id::IPV6_SRC];

/// Names each of [`TRIE_FIELDS`] is given by (the first is how it is printed).
const TRIE_FIELD_NAMES: [&[&str]; 4] =
    [&["ip_dst", "nw_dst"], &["ip_src", "nw_src"], &["ipv6_dst"], &["ipv6_src"]];

/// The most tries a table keeps (Open vSwitch's `CLS_MAX_TRIES`).
pub const MAX_TRIES: usize = 3;

/// The tries a table keeps, in the order its lookups check them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PrefixTries {
    /// Indices into [`TRIE_FIELDS`], the first `len` of them used.
    order: [u8; MAX_TRIES],
    len: u8,
}

impl Default for PrefixTries {
    /// Open vSwitch's default: `ip_dst`, then `ip_src`.
    fn default() -> Self {
        PrefixTries { order: [0, 1, 0], len: 2 }
    }
}

impl PrefixTries {
    /// No tries (`prefixes=none`).
    pub const NONE: PrefixTries = PrefixTries { order: [0; MAX_TRIES], len: 0 };

    /// Indices into [`TRIE_FIELDS`] of the tries kept, in the order they are checked.
    pub(crate) fn order(&self) -> &[u8] {
        &self.order[..self.len as usize]
    }

    /// Bit j set if the trie of `TRIE_FIELDS[j]` is kept.
    pub(crate) fn set(&self) -> u8 {
        self.order().iter().fold(0, |s, &j| s | 1 << j)
    }
}

impl FromStr for PrefixTries {
    type Err = String;

    /// `none`, or up to three of `ip_dst` (`nw_dst`), `ip_src` (`nw_src`), `ipv6_dst`,
    /// `ipv6_src`, comma-separated, in the order lookups check them.
    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        if s == "none" {
            return Ok(PrefixTries::NONE);
        }
        let mut tries = PrefixTries::NONE;
        for name in s.split(',').map(str::trim) {
            let Some(j) = TRIE_FIELD_NAMES.iter().position(|names| names.contains(&name)) else {
                return Err(format!(
                    "'{name}' has no prefix trie: give none, or up to {MAX_TRIES} of ip_dst, ip_src, ipv6_dst, \
                     ipv6_src"
                ));
            };
            if tries.order().contains(&(j as u8)) {
                return Err(format!("{name} is named twice in prefixes={s}"));
            }
            if tries.len as usize == MAX_TRIES {
                return Err(format!("prefixes={s}: a table keeps at most {MAX_TRIES} tries"));
            }
            tries.order[tries.len as usize] = j as u8;
            tries.len += 1;
        }
        Ok(tries)
    }
}

impl fmt::Display for PrefixTries {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.len == 0 {
            return f.write_str("none");
        }
        for (i, &j) in self.order().iter().enumerate() {
            let sep = if i == 0 { "" } else { "," };
            write!(f, "{sep}{}", TRIE_FIELD_NAMES[j as usize][0])?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_parse_as_open_vswitch_spells_them() {
        let default = PrefixTries::default();
        assert_eq!(default.to_string(), "ip_dst,ip_src");
        assert_eq!("ip_dst,ip_src".parse::<PrefixTries>(), Ok(default));
        assert_eq!("nw_dst, nw_src".parse::<PrefixTries>(), Ok(default));
        assert_eq!("none".parse::<PrefixTries>(), Ok(PrefixTries::NONE));
        assert_eq!(PrefixTries::NONE.set(), 0);
        let v6: PrefixTries = "ipv6_src,ip_src,ipv6_dst".parse().unwrap();
        assert_eq!((v6.order(), v6.to_string().as_str()), (&[3, 1, 2][..], "ipv6_src,ip_src,ipv6_dst"));
        assert_eq!(v6.set(), 0b1110);
        let err = |s: &str| s.parse::<PrefixTries>().unwrap_err();
        assert!(err("tp_dst").contains("'tp_dst' has no prefix trie"));
        assert!(err("ip_dst,nw_dst").contains("named twice"));
        assert!(err("ip_dst,ip_src,ipv6_dst,ipv6_src").contains("at most 3"));
        assert!(err("").contains("has no prefix trie"));
    }
}
