//! A value remembered per input flow number.
//!
//! Inputs that number their flows (`.hyf` traces, the gateway generator) give every packet of
//! one number the same headers, so anything derived from the headers alone — the core they
//! hash to, the policy's flow id, where the flow's NIC entry or counters are — can be worked
//! out on the number's first packet and read back from an array on every later one, instead of
//! extracting and hashing a key per packet. The table fills lazily, up to the highest number
//! seen; numbers past a memory bound are not remembered, so their packets take the slow way
//! every time, with the same answers.

/// Bytes a table may grow to: numbers past `TABLE_BYTES / size_of::<T>()` are not remembered.
const TABLE_BYTES: usize = 256 << 20;

/// Values by flow number, with `unknown` marking numbers not seen yet (a value the caller
/// never stores: a sentinel for compact types, `None` for an `Option`).
#[derive(Clone, Debug)]
pub(crate) struct FlowNumberTable<T> {
    values: Vec<T>,
    unknown: T,
}

impl<T: Copy + PartialEq> FlowNumberTable<T> {
    /// An empty table whose not-yet-known marker is `unknown`.
    pub(crate) fn new(unknown: T) -> FlowNumberTable<T> {
        FlowNumberTable { values: Vec::new(), unknown }
    }

    /// Numbers below this are remembered.
    pub(crate) fn limit() -> usize {
        TABLE_BYTES / std::mem::size_of::<T>().max(1)
    }

    /// The value remembered for `number`, if the packet has a number and one was.
    #[inline]
    pub(crate) fn get(&self, number: Option<u32>) -> Option<T> {
        let v = *self.values.get(number? as usize)?;
        (v != self.unknown).then_some(v)
    }

    /// Starts loading the value of `number` into the CPU's cache, for a packet a few ahead.
    #[inline]
    pub(crate) fn prefetch(&self, number: u32) {
        if let Some(v) = self.values.get(number as usize) {
            crate::prefetch::prefetch(v, std::mem::size_of::<T>());
        }
    }

    /// Remembers `value` for `number` (nothing for a packet without a number or a number past
    /// the bound). `value` must not be the unknown marker.
    #[inline]
    pub(crate) fn remember(&mut self, number: Option<u32>, value: T) {
        debug_assert!(value != self.unknown, "the unknown marker is not a value");
        let Some(n) = number.map(|n| n as usize).filter(|&n| n < Self::limit()) else {
            return;
        };
        if self.values.len() <= n {
            self.values.resize(n + 1, self.unknown);
        }
        self.values[n] = value;
    }

    /// Forgets every value (the memory stays, for the numbers to come back).
    pub(crate) fn forget_all(&mut self) {
        let unknown = self.unknown;
        self.values.fill(unknown);
    }

    /// Entries the table holds, remembered or not: one past the highest number remembered.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.values.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_by_number_and_forgets() {
        let mut t = FlowNumberTable::new(u16::MAX);
        assert_eq!(t.get(Some(3)), None);
        t.remember(Some(3), 7);
        t.remember(None, 9);
        assert_eq!(
            (t.get(Some(3)), t.get(Some(2)), t.get(Some(4)), t.get(None)),
            (Some(7), None, None, None)
        );
        assert_eq!(t.len(), 4);
        t.forget_all();
        assert_eq!(t.get(Some(3)), None);
    }

    /// Numbers past the bound are never stored, so a stray large number cannot allocate.
    #[test]
    fn numbers_past_the_bound_are_not_remembered() {
        let mut t = FlowNumberTable::<u64>::new(u64::MAX);
        let far = FlowNumberTable::<u64>::limit() as u32;
        t.remember(Some(far), 1);
        t.remember(Some(u32::MAX), 1);
        assert_eq!((t.get(Some(far)), t.len()), (None, 0));
    }
}
