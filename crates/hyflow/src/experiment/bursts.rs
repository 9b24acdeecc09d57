//! How a run met the bursts of generated gateway traffic, judged against the generator's own
//! log of them (the ground truth the paper got by injecting bursts with a signal packet,
//! Elixir §5.2): for each burst, when its core's ring first reached the policy's queue
//! threshold K (detection, Fig. 11) and when the NIC first forwarded a packet of it
//! (offload). Only bursts that start and end within the measured time count.

use serde::Serialize;

use crate::workload::gateway::BurstSpan;

/// One burst's fate.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct BurstOutcome {
    /// Its rate while it lasts, packets/s (after rate rescaling).
    pub peak_pps: f64,
    /// When it starts, s of simulated time.
    pub start_s: f64,
    /// How long it lasts, ms.
    pub duration_ms: f64,
    /// From its start until its core's ring reached K, ms (`None`: not during the burst, or
    /// the policy has no K).
    pub detected_ms: Option<f64>,
    /// From its start until the NIC first forwarded a packet of it, ms (`None`: never during
    /// the burst; 0 when the NIC already held the flow).
    pub offloaded_ms: Option<f64>,
    /// Whether the NIC forwarded its first packet (the flow was still held from before).
    pub held_at_start: bool,
}

/// All bursts' fates, and their totals.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct BurstSummary {
    /// Bursts that started and ended within the measured time.
    pub bursts: u64,
    /// Of those, whose flow the NIC held already at their first packet.
    pub held_at_start: u64,
    /// Of those not held, moved into the NIC during the burst.
    pub offloaded: u64,
    /// Of all, during which the ring of the flow's core reached K (policies with a K).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overloaded: Option<u64>,
    /// Of the overloaded not held at their start, moved into the NIC during the burst.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overloaded_offloaded: Option<u64>,
    /// Mean detection time of the overloaded bursts, ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detection_ms_mean: Option<f64>,
    /// Mean time from start to offload of the bursts offloaded during the burst, ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offload_ms_mean: Option<f64>,
    /// Every burst, in start order.
    pub list: Vec<BurstOutcome>,
}

/// What the NIC did with each burst's packets, as they arrive.
#[derive(Default)]
pub(super) struct BurstTracker {
    /// Per burst (index in the generator's log): whether its first packet was a NIC hit, and
    /// when the NIC first forwarded one of its packets.
    seen: Vec<Option<(bool, Option<u64>)>>,
}

impl BurstTracker {
    /// A packet of `burst` arrived at `t_ns`; `hit`: the NIC forwarded it.
    #[inline]
    pub(super) fn packet(&mut self, burst: u32, t_ns: u64, hit: bool) {
        let b = burst as usize;
        if b >= self.seen.len() {
            self.seen.resize(b + 1, None);
        }
        let s = self.seen[b].get_or_insert((hit, None));
        if hit && s.1.is_none() {
            s.1 = Some(t_ns);
        }
    }

    /// The summary of the bursts in `log` (times converted to simulated time by `to_sim`)
    /// that lie within `measured` (first and last arrival measured), with each burst's core
    /// in `cores` (`None`: its packets go to every core, and any core's crossing counts) and the ring-watch `crossings` (time-ordered; `watching`: the policy has
    /// a K).
    pub(super) fn summarize(
        &self,
        log: &[BurstSpan],
        to_sim: impl Fn(u64) -> u64,
        cores: &[Option<usize>],
        crossings: &[(u64, u32)],
        watching: bool,
        measured: (u64, u64),
    ) -> BurstSummary {
        let ms = |ns: u64| ns as f64 / 1e6;
        let mut out = BurstSummary::default();
        let (mut detect_sum, mut offload_sum) = (0.0, 0.0);
        let (mut overloaded, mut overloaded_offloaded) = (0u64, 0u64);
        for (i, span) in log.iter().enumerate() {
            let (start, end) = (to_sim(span.start_ns), to_sim(span.end_ns));
            if start < measured.0 || end > measured.1 {
                continue;
            }
            let (held, first_nic) = self.seen.get(i).copied().flatten().unwrap_or((false, None));
            let core = cores[i].map(|c| c as u32);
            let crossing = crossings
                .iter()
                .skip(crossings.partition_point(|c| c.0 < start))
                .take_while(|c| c.0 < end)
                .find(|c| core.is_none_or(|core| c.1 == core))
                .map(|c| c.0 - start);
            let offloaded = first_nic.filter(|&t| t < end).map(|t| t.saturating_sub(start));
            // Moved in during the burst (not held from before).
            let moved_in = offloaded.filter(|_| !held);
            out.bursts += 1;
            out.held_at_start += held as u64;
            if let Some(d) = moved_in {
                out.offloaded += 1;
                offload_sum += ms(d);
            }
            if let Some(d) = crossing {
                overloaded += 1;
                detect_sum += ms(d);
                overloaded_offloaded += moved_in.is_some() as u64;
            }
            out.list.push(BurstOutcome {
                peak_pps: span.peak_pps * (span.end_ns - span.start_ns) as f64 / (end - start).max(1) as f64,
                start_s: start as f64 / 1e9,
                duration_ms: ms(end - start),
                detected_ms: crossing.map(ms),
                offloaded_ms: offloaded.map(ms),
                held_at_start: held,
            });
        }
        if watching {
            out.overloaded = Some(overloaded);
            out.overloaded_offloaded = Some(overloaded_offloaded);
            out.detection_ms_mean = (overloaded > 0).then(|| detect_sum / overloaded as f64);
        }
        out.offload_ms_mean = (out.offloaded > 0).then(|| offload_sum / out.offloaded as f64);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Three bursts on two cores: one detected and offloaded, one held from before, one
    /// outside the measured time; a crossing on another core does not count.
    #[test]
    fn bursts_are_matched_to_their_cores_crossings_and_nic_hits() {
        let span = |flow, start_ns, end_ns| BurstSpan { flow, start_ns, end_ns, peak_pps: 1e6 };
        let log = [span(7, 1_000, 5_000), span(8, 2_000, 6_000), span(9, 50, 9_000)];
        let mut t = BurstTracker::default();
        t.packet(0, 1_000, false);
        t.packet(0, 2_500, false);
        t.packet(0, 3_000, true);
        t.packet(1, 2_000, true);
        t.packet(2, 60, false);
        let crossings = [(1_200, 1), (1_500, 0), (2_100, 1)];
        let s = t.summarize(&log, |ns| ns, &[Some(0), Some(1), Some(0)], &crossings, true, (100, 10_000));
        assert_eq!(s.bursts, 2, "the third started before the measured time");
        assert_eq!((s.held_at_start, s.offloaded), (1, 1));
        assert_eq!((s.overloaded, s.overloaded_offloaded), (Some(2), Some(1)));
        assert_eq!(s.list[0].detected_ms, Some(500e-6), "core 0's crossing, not core 1's earlier one");
        assert_eq!(s.list[0].offloaded_ms, Some(2_000e-6));
        assert_eq!((s.list[1].detected_ms, s.list[1].offloaded_ms), (Some(100e-6), Some(0.0)));
        assert!(s.list[1].held_at_start);
        assert_eq!(s.offload_ms_mean, Some(2_000e-6));
        // Rate rescaling stretches time: peaks scale inversely.
        let s = t.summarize(&log, |ns| ns * 2, &[Some(0), Some(1), Some(0)], &[], false, (0, 20_000));
        assert_eq!(s.list[0].peak_pps, 5e5);
        assert_eq!(s.overloaded, None);
    }
}
