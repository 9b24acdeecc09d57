//! What the switch counts: where each packet and each pass was decided, and why some stayed
//! in software.

/// The layer that decided a packet's fate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Layer {
    /// A NIC entry, in hardware.
    Nic,
    /// The FlowShadow microflow cache.
    Microflow,
    /// The software megaflow cache.
    Megaflow,
    /// An upcall to the OpenFlow pipeline.
    SlowPath,
}

impl Layer {
    /// Name as `--decisions` writes it.
    pub fn name(self) -> &'static str {
        match self {
            Layer::Nic => "nic",
            Layer::Microflow => "microflow",
            Layer::Megaflow => "megaflow",
            Layer::SlowPath => "slowpath",
        }
    }
}

/// Counters of the whole switch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SwitchStats {
    /// Packets processed.
    pub packets: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Decided by the NIC.
    pub nic_hits: u64,
    /// Decided by the microflow cache (these four count packets by their first pass; see
    /// `by_pass` for recirculated ones).
    pub microflow_hits: u64,
    /// Decided by the megaflow cache.
    pub megaflow_hits: u64,
    /// Sent to the slow path.
    pub upcalls: u64,
    /// Forwarded by an entry known outdated whose revalidation was still pending.
    pub stale: u64,
    /// Of those, packets whose outputs differed from what the slow path decided then.
    pub stale_wrong: u64,
    /// Packets that needed the slow path for a controller action (`dec_ttl` at TTL ≤ 1).
    pub controller: u64,
    /// Packets that stayed in the slow path for a rewrite OVS's datapath cannot do (ARP
    /// fields, ICMP type and code).
    pub slow_actions: u64,
    /// Rule updates applied.
    pub updates: u64,
    /// Rules added, modified or deleted by them.
    pub rules_changed: u64,
    /// Entries re-translated by revalidation.
    pub retranslations: u64,
    /// Upcalls whose translation was offered to the NIC for installation.
    pub nic_offers: u64,
    /// Flows `learn` actions installed or changed.
    pub learned: u64,
    /// Rules deleted because their idle or hard timeout passed.
    pub rules_expired: u64,
    /// Changes of the MAC table `NORMAL` uses (new, moved, evicted or expired MACs).
    pub mac_changes: u64,
    /// Passes after a packet's first: clones `ct(table=N)` recirculated.
    pub recirculations: u64,
    /// Recirculations dropped at the datapath's depth limit ([`MAX_RECIRC_DEPTH`](super::MAX_RECIRC_DEPTH)).
    pub recirc_too_deep: u64,
    /// NIC hits (first passes and later ones) that went to software because the NIC's
    /// connection table did not hold a connection the decision tracks
    /// ([`NicConntrack::Established`](super::NicConntrack::Established)).
    pub nic_conntrack_misses: u64,
    /// Upcalls whose decision the NIC's hardware cannot carry out (its parser or its
    /// actions: [`NicCapability`](crate::nic::NicCapability)), so not offered to it.
    pub nic_unsupported: u64,
    /// Where each pass was decided, by pass: the first, the second, the third, later ones.
    pub by_pass: [PassStats; 4],
    /// Packets of which at least one copy left.
    pub forwarded: u64,
    /// Packets of which no copy left (dropped by the pipeline's decision).
    pub dropped: u64,
    /// Those drops by the layer that decided the packet's first pass.
    pub dropped_by_layer: PassStats,
}

/// Where the passes of one depth were decided.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct PassStats {
    /// By the NIC.
    pub nic: u64,
    /// By the microflow cache.
    pub microflow: u64,
    /// By the megaflow cache.
    pub megaflow: u64,
    /// By the slow path.
    pub upcalls: u64,
}

impl PassStats {
    /// Passes counted.
    pub fn total(&self) -> u64 {
        self.nic + self.microflow + self.megaflow + self.upcalls
    }

    pub(super) fn count(&mut self, layer: Layer) {
        match layer {
            Layer::Nic => self.nic += 1,
            Layer::Microflow => self.microflow += 1,
            Layer::Megaflow => self.megaflow += 1,
            Layer::SlowPath => self.upcalls += 1,
        }
    }
}
