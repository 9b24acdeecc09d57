//! Malformed frames counted by reason, as every report that reads packets gives them.

use serde::ser::{Serialize, SerializeMap, Serializer};

/// Malformed packets by reason (serialized as a map, reasons in first-seen order).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MalformedCounts {
    /// `(reason, count)` in first-seen order.
    pub by_reason: Vec<(&'static str, u64)>,
}

impl Serialize for MalformedCounts {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.by_reason.len()))?;
        for (reason, n) in &self.by_reason {
            map.serialize_entry(reason, n)?;
        }
        map.end()
    }
}

impl MalformedCounts {
    /// Counts one packet malformed for `reason`.
    pub fn count(&mut self, reason: &'static str) {
        match self.by_reason.iter_mut().find(|(r, _)| *r == reason) {
            Some((_, n)) => *n += 1,
            None => self.by_reason.push((reason, 1)),
        }
    }

    /// Adds `other`'s counts (one thread's counts merged into the switch's).
    pub fn add(&mut self, other: &MalformedCounts) {
        for &(reason, n) in &other.by_reason {
            match self.by_reason.iter_mut().find(|(r, _)| *r == reason) {
                Some((_, m)) => *m += n,
                None => self.by_reason.push((reason, n)),
            }
        }
    }

    /// Total malformed packets.
    pub fn total(&self) -> u64 {
        self.by_reason.iter().map(|(_, n)| n).sum()
    }
}
