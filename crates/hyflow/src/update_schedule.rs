//! Rule updates on schedule in trace time: a `Schedule` of updates, and a [`Replay`], a
//! switch fed packets with the updates due before each applied first.
//!
//! Time is the trace's: nanoseconds since its first packet (kept non-decreasing if the trace
//! is not). Updates given as `#N` apply before packet N; updates given in seconds apply
//! before the first packet at or after that time; updates due at the same moment apply in
//! file order; updates due after the last packet apply when the replay finishes.

use crate::openflow::traversal::Output;
use crate::openflow::update::{Update, When};
use crate::packet::FlowKey;
use crate::switch::{Layer, Switch};

/// Updates ordered for application.
pub(crate) struct Schedule {
    by_time: Vec<Update>,
    by_index: Vec<Update>,
    t: usize,
    i: usize,
}

impl Schedule {
    pub(crate) fn new(updates: Vec<Update>) -> Schedule {
        let (mut by_time, mut by_index): (Vec<_>, Vec<_>) =
            updates.into_iter().partition(|u| matches!(u.when, When::At(_)));
        by_time.sort_by_key(|u| (u.when, u.line));
        by_index.sort_by_key(|u| (u.when, u.line));
        Schedule { by_time, by_index, t: 0, i: 0 }
    }

    /// Index of the next update due before packet `index` at `now_ns` (all if `index` is
    /// `None`), earliest line first among the two queues.
    pub(crate) fn next_due(&mut self, index: Option<u64>, now_ns: u64) -> Option<&Update> {
        let t_due = self
            .by_time
            .get(self.t)
            .filter(|u| index.is_none() || matches!(u.when, When::At(t) if t <= now_ns));
        let i_due = self.by_index.get(self.i).filter(|u| match (index, u.when) {
            (None, _) => true,
            (Some(n), When::BeforePacket(k)) => k <= n,
            _ => false,
        });
        match (t_due, i_due) {
            (Some(a), Some(b)) if b.line < a.line => {
                self.i += 1;
                self.by_index.get(self.i - 1)
            }
            (Some(_), _) => {
                self.t += 1;
                self.by_time.get(self.t - 1)
            }
            (None, Some(_)) => {
                self.i += 1;
                self.by_index.get(self.i - 1)
            }
            (None, None) => None,
        }
    }
}

/// A replay in progress.
pub struct Replay {
    switch: Switch,
    schedule: Schedule,
    first_ts: Option<u64>,
    now_ns: u64,
    index: u64,
}

impl Replay {
    /// Starts a replay with these updates pending.
    pub fn new(switch: Switch, updates: Vec<Update>) -> Replay {
        Replay { switch, schedule: Schedule::new(updates), first_ts: None, now_ns: 0, index: 0 }
    }

    /// The switch.
    pub fn switch(&self) -> &Switch {
        &self.switch
    }

    /// Forwards one parsed packet, applying the updates due before it.
    pub fn packet(&mut self, ts_ns: u64, key: &FlowKey, bytes: u64, outputs: &mut Vec<Output>) -> Layer {
        let first = *self.first_ts.get_or_insert(ts_ns);
        self.now_ns = self.now_ns.max(ts_ns.saturating_sub(first));
        while let Some(u) = self.schedule.next_due(Some(self.index), self.now_ns) {
            self.switch.apply_update(u.command, &u.spec, self.now_ns);
        }
        self.index += 1;
        self.switch.process(key, bytes, self.now_ns, outputs)
    }

    /// Applies the updates due after the last packet and returns the switch and the trace
    /// time of the last packet.
    pub fn finish(mut self) -> (Switch, u64) {
        while let Some(u) = self.schedule.next_due(None, self.now_ns) {
            self.switch.apply_update(u.command, &u.spec, self.now_ns);
        }
        (self.switch, self.now_ns)
    }
}
