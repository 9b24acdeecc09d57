//! The switch's deadlines in one table, as quinn-proto's `TimerTable`: what runs without a
//! packet (idle-entry sweep, rule expiry, MAC aging, the connection tracker's sweep) and when,
//! so a driver that is not handed packets (a live switch waiting on its rings) knows when to
//! wake.

/// Something the switch does on a clock rather than on a packet. Timers due at the same
/// instant fire in this order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Timer {
    /// The revalidator removes NIC and megaflow entries idle longer than `max-idle`.
    IdleSweep,
    /// Rules whose idle or hard timeout passed are deleted (OVS checks after each of its
    /// revalidator's dumps).
    RuleExpiry,
    /// Idle MACs leave `NORMAL`'s table (OVS ages its MAC table every second).
    MacAging,
    /// Expired connections leave the connection tracker.
    ConntrackSweep,
}

impl Timer {
    /// Every timer, in firing order.
    pub(crate) const ALL: [Timer; 4] =
        [Timer::IdleSweep, Timer::RuleExpiry, Timer::MacAging, Timer::ConntrackSweep];
}

/// When each timer next fires (trace time, ns; `u64::MAX`: never), and the earliest of them.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TimerTable {
    deadlines: [u64; Timer::ALL.len()],
    earliest: u64,
}

impl TimerTable {
    /// A table with every timer set to fire at `first_ns`, by timer.
    pub(crate) fn new(first_ns: impl Fn(Timer) -> u64) -> TimerTable {
        let mut table = TimerTable { deadlines: [u64::MAX; Timer::ALL.len()], earliest: u64::MAX };
        for t in Timer::ALL {
            table.set(t, first_ns(t));
        }
        table
    }

    /// Sets `timer` to fire at `at_ns`.
    pub(crate) fn set(&mut self, timer: Timer, at_ns: u64) {
        self.deadlines[timer as usize] = at_ns;
        self.earliest = self.deadlines.iter().copied().min().unwrap_or(u64::MAX);
    }

    /// Whether any timer is due at `now_ns` (the per-packet check: one comparison).
    #[inline]
    pub(crate) fn any_due(&self, now_ns: u64) -> bool {
        now_ns >= self.earliest
    }

    /// Whether `timer` is due at `now_ns`.
    pub(crate) fn due(&self, timer: Timer, now_ns: u64) -> bool {
        now_ns >= self.deadlines[timer as usize]
    }

    /// The earliest deadline (`u64::MAX`: none).
    pub(crate) fn earliest(&self) -> u64 {
        self.earliest
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn earliest_follows_every_set() {
        let mut t = TimerTable::new(|timer| if timer == Timer::MacAging { 5 } else { 10 });
        assert_eq!(t.earliest(), 5);
        assert!(!t.any_due(4) && t.any_due(5));
        assert!(t.due(Timer::MacAging, 5) && !t.due(Timer::RuleExpiry, 5));
        t.set(Timer::MacAging, 20);
        assert_eq!(t.earliest(), 10);
        for timer in Timer::ALL {
            t.set(timer, u64::MAX);
        }
        assert_eq!(t.earliest(), u64::MAX);
        assert!(!t.any_due(u64::MAX - 1));
    }
}
