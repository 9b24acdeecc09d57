//! The NIC tier in the kernel (`--nic xdp`, feature `afxdp`): the engine's NIC entries
//! mirrored into the XDP program's tables (`bpf/port.bpf.c`), and the program's counters
//! credited back to the engine.
//!
//! The engine's NIC scheme stays the one place entries are decided — which upcalls install,
//! the table's entry and mask limits, revalidation after rule updates, idle expiry — and the
//! XDP tables follow its journal of changed entries ([`XdpTier::sync`], under the engine's
//! lock, after every batch and every update, so that an update has taken its entries out of
//! the kernel before `hyflow ctl` returns). Each entry becomes a tuple-space entry: its mask
//! in the mask list, its masked key and its actions in the flow table, as the program reads
//! them (`struct flow_key`, `struct flow_value`). Frames the program forwards never reach
//! userspace; their counts come back when the counters are read ([`XdpTier::read_counters`],
//! every second and before every report), crediting the entry, its rules and the ports.

use std::collections::{HashMap as StdHashMap, HashSet};

use anyhow::{anyhow, Context, Result};
use aya::maps::{Array, HashMap, MapData, RingBuf};
use aya::Ebpf;
use hdrhistogram::Histogram;
use serde::Serialize;

use hyflow::nic::capability::XDP_KEY_WORDS;
use hyflow::nic::NicEntryView;
use hyflow::offload::budget::RateLimit;
use hyflow::offload::HardwareCounters;
use hyflow::openflow::dp_actions::DpAction;
use hyflow::openflow::execute::{execute, Outputs};
use hyflow::openflow::rule::Match;
use hyflow::packet::field::id;
use hyflow::packet::frame_rewrite::VlanCommit;
use hyflow::packet::FlowKey;
use hyflow::switch::{NicEntry, Switch};

use crate::nic_tier::NicTier;

/// Masks the program's lookup loop goes through at most (its `MAX_MASKS`).
pub const MAX_MASKS: usize = 64;
/// VLAN tags a hit pushes at most (its `MAX_PUSHES`).
const MAX_PUSHES: usize = 2;

// The program's `flags`.
const SET_DL_DST: u32 = 1 << 0;
const SET_DL_SRC: u32 = 1 << 1;
const SET_NW_SRC: u32 = 1 << 2;
const SET_NW_DST: u32 = 1 << 3;
const SET_NW_TOS: u32 = 1 << 4;
const SET_NW_TTL: u32 = 1 << 5;
const SET_TP_SRC: u32 = 1 << 6;
const SET_TP_DST: u32 = 1 << 7;
const OUT_DROP: u32 = 1 << 8;

/// `struct nic_key`: the key words the program computes, in [`XDP_KEY_WORDS`]' order.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct NicKey {
    w: [u64; 9],
}

/// `struct flow_key`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct BpfFlowKey {
    mask: u32,
    pad: u32,
    key: NicKey,
}

/// `struct flow_value`: what a hit does, and its counters.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BpfFlowValue {
    flags: u32,
    out_port: u32,
    pops: u8,
    pushes: u8,
    push_tpid: [u16; MAX_PUSHES],
    push_tci: [u16; MAX_PUSHES],
    dl_dst: [u8; 6],
    dl_src: [u8; 6],
    pad: u16,
    nw_src: u32,
    nw_dst: u32,
    nw_tos: u8,
    nw_ttl: u8,
    tp_src: u16,
    tp_dst: u16,
    pad2: u16,
    counter: u32,
    pad4: u32,
    verify: u32,
    pad3: u32,
    check_mask: NicKey,
    check_value: NicKey,
}

/// `struct counters`: an entry's counters, as the program updates them.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct BpfCounters {
    packets: u64,
    bytes: u64,
    used_ns: u64,
    first_ns: u64,
}

/// The program's `counters` array, memory-mapped: read with plain loads (the program adds to
/// them atomically), so that reading a counter costs no system call.
struct CounterArea {
    /// Keeps the map (and so the mapping's object) alive.
    _map: MapData,
    base: *mut BpfCounters,
    len: usize,
    bytes: usize,
    /// Slots no entry uses.
    free: Vec<u32>,
}

// SAFETY: the mapping is owned by this value alone and only touched through `&mut self` or
// plain reads of counters the kernel updates atomically.
unsafe impl Send for CounterArea {}

impl CounterArea {
    /// Maps `map`, an array of `len` counters created with BPF_F_MMAPABLE.
    fn new(map: MapData, len: usize) -> Result<CounterArea> {
        use std::os::fd::{AsFd, AsRawFd};
        let page = 4096;
        let bytes = (len * size_of::<BpfCounters>()).div_ceil(page) * page;
        let fd = map.fd().as_fd().as_raw_fd();
        // SAFETY: mapping `bytes` of the array's fd, shared, as the kernel allows for an
        // mmapable array; the result is checked.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(anyhow!("mapping the counters: {}", std::io::Error::last_os_error()));
        }
        let free = (0..len as u32).rev().collect();
        Ok(CounterArea { _map: map, base: base.cast(), len, bytes, free })
    }

    /// A zeroed slot for a new entry, if one is free.
    fn take(&mut self) -> Option<u32> {
        let slot = self.free.pop()?;
        // SAFETY: `slot` < `len`, within the mapping; no entry of the program points at a
        // free slot, so nothing else writes it.
        unsafe { self.base.add(slot as usize).write_volatile(BpfCounters::default()) };
        Some(slot)
    }

    /// Frees `slot` (its entry is out of the flow table).
    fn give_back(&mut self, slot: u32) {
        self.free.push(slot);
    }

    /// Slot `slot`'s counters now.
    fn read(&self, slot: u32) -> BpfCounters {
        assert!((slot as usize) < self.len);
        // SAFETY: within the mapping; the program updates the words atomically, and a torn
        // read across words is at worst a count one frame behind, caught up at the next read.
        unsafe { self.base.add(slot as usize).read_volatile() }
    }
}

impl Drop for CounterArea {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly what `new` mapped.
        unsafe { libc::munmap(self.base.cast(), self.bytes) };
    }
}

/// `struct config`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct BpfConfig {
    nic: u32,
    n_masks: u32,
    sample: u32,
    pad: u32,
}

/// `struct sample`: a sampled hit's headers.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct BpfSample {
    key: NicKey,
    bytes: u32,
    pad: u32,
}

// SAFETY: plain `repr(C)` data with no padding the kernel could leave undefined (every gap
// is an explicit field), as the program declares them.
unsafe impl aya::Pod for NicKey {}
// SAFETY: as above.
unsafe impl aya::Pod for BpfFlowKey {}
// SAFETY: as above.
unsafe impl aya::Pod for BpfFlowValue {}
// SAFETY: as above.
unsafe impl aya::Pod for BpfConfig {}

fn nic_key(k: &FlowKey) -> NicKey {
    NicKey { w: XDP_KEY_WORDS.map(|w| k.words[w]) }
}

fn mac(v: u64) -> [u8; 6] {
    let b = v.to_be_bytes();
    [b[2], b[3], b[4], b[5], b[6], b[7]]
}

/// What the program does on a hit of `entry`, whose output ports are `ports` (port number
/// by index in the program's `out_ports`): `None` if it cannot (an output to a port the
/// switch has no interface for).
fn plan(entry: &NicEntry, ports: &[u32]) -> Option<BpfFlowValue> {
    let rep = &entry.view.rep;
    let mut outputs = Vec::new();
    execute(entry.actions, &mut rep.clone(), &mut Outputs(&mut outputs));
    let mut v = BpfFlowValue::default();
    let Some(out) = outputs.first() else {
        v.flags = OUT_DROP;
        return Some(v);
    };
    if outputs.len() > 1 {
        return None;
    }
    v.out_port = ports.iter().position(|&p| p == out.port)? as u32;
    let leaving = &out.packet;
    for a in entry.actions {
        let DpAction::Set { field, .. } = *a else { continue };
        match field {
            id::DL_DST => (v.flags, v.dl_dst) = (v.flags | SET_DL_DST, mac(leaving.dl_dst())),
            id::DL_SRC => (v.flags, v.dl_src) = (v.flags | SET_DL_SRC, mac(leaving.dl_src())),
            id::NW_SRC => (v.flags, v.nw_src) = (v.flags | SET_NW_SRC, leaving.nw_src()),
            id::NW_DST => (v.flags, v.nw_dst) = (v.flags | SET_NW_DST, leaving.nw_dst()),
            id::NW_TOS => (v.flags, v.nw_tos) = (v.flags | SET_NW_TOS, leaving.nw_tos()),
            id::NW_TTL => (v.flags, v.nw_ttl) = (v.flags | SET_NW_TTL, leaving.nw_ttl()),
            id::TP_SRC => (v.flags, v.tp_src) = (v.flags | SET_TP_SRC, leaving.tp_src()),
            id::TP_DST => (v.flags, v.tp_dst) = (v.flags | SET_TP_DST, leaving.tp_dst()),
            _ => {}
        }
    }
    // The tags as the engine's frame writer commits them.
    let commit = VlanCommit::of(rep, leaving);
    v.pops = commit.pops as u8;
    v.pushes = commit.n_pushes as u8;
    for (i, &(tpid, tci)) in commit.pushes[..commit.n_pushes].iter().enumerate() {
        v.push_tpid[i] = tpid;
        v.push_tci[i] = tci;
    }
    Some(v)
}

/// An entry as the XDP tables hold it.
struct Mirrored {
    key: BpfFlowKey,
    actions: BpfFlowValue,
    /// When it went into the kernel (CLOCK_MONOTONIC ns), until its first hit is seen.
    installed_mono_ns: Option<u64>,
    /// The entry as last seen, to credit hits read after it was removed.
    view: NicEntryView,
    /// Counters as last read.
    packets: u64,
    bytes: u64,
}

/// The tier's figures, for `show`.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct XdpTierStats {
    /// Entries in the XDP tables now.
    pub entries: usize,
    /// Masks in the mask list now.
    pub masks: usize,
    /// Entries written into the XDP tables.
    pub installs: u64,
    /// Entries taken out (removed, changed, or awaiting a verdict in the engine).
    pub removals: u64,
    /// Engine entries the tables could not take: its mask list or its flow table was full.
    pub refused: u64,
    /// Engine entries the program cannot serve (an output to a port with no interface).
    pub unservable: u64,
    /// Frames the program forwarded or dropped on its own, as read from its counters.
    pub hits_read: u64,
    /// Entry counters read.
    pub counter_reads: u64,
    /// Sampled headers of hits read from the program's ring buffer.
    pub samples: u64,
    /// Time spent bringing the kernel's tables in line (a system call per entry written or
    /// taken out), under the engine's lock, ms: host work `sim`'s cost model has no price for.
    pub sync_ms: f64,
}

/// How long installs take, per install (µs): from the engine's decision to install (its
/// batch's clock) to the entry in the kernel's table, and from there to its first hit.
#[derive(Clone, Debug, Default, Serialize)]
pub struct InstallLatency {
    /// Installs measured.
    pub installs: u64,
    /// Decision → in the kernel: p50, p99, max.
    pub to_kernel_us: [f64; 3],
    /// Entries whose first hit was seen.
    pub first_hits: u64,
    /// In the kernel → first hit: p50, p99, max.
    pub to_first_hit_us: [f64; 3],
}

/// Entry counters the periodic read takes per hold of the engine at most (about 3 µs each
/// with the crediting: a pass over 27,000 entries held the engine 14–16 ms in one piece).
const READS_PER_HOLD: usize = 256;

/// The XDP tables of the switch's NIC tier and their mirror of the engine's NIC entries.
pub struct XdpTier {
    flows: HashMap<MapData, BpfFlowKey, BpfFlowValue>,
    /// Each entry's counters, a slot per entry of `flows`.
    counters: CounterArea,
    masks: Array<MapData, NicKey>,
    config: Array<MapData, BpfConfig>,
    /// Sampled headers of hits, and the program's sampling threshold (0: none).
    samples: RingBuf<MapData>,
    sample: u32,
    /// Port number by index in the program's `out_ports`.
    ports: Vec<u32>,
    mirror: StdHashMap<(u8, u32), Mirrored>,
    /// The matches of the entries in the tables.
    held: HashSet<Match>,
    /// Each mask slot's mask and how many entries use it.
    mask_slots: Vec<Option<(NicKey, usize)>>,
    max_masks: usize,
    changed: Vec<(u8, u32)>,
    /// Install latencies (ns): decision → kernel, and kernel → first hit.
    to_kernel: Histogram<u64>,
    to_first_hit: Histogram<u64>,
    /// The counter-read budget; the entries of the periodic read's pass under way (in entry
    /// order) and how far it got.
    reads: RateLimit,
    read_pass: Vec<(u8, u32)>,
    read_at: usize,
    /// CLOCK_MONOTONIC when the engine's clock reads 0: the program stamps hits in the
    /// former.
    start_mono_ns: u64,
    stats: XdpTierStats,
}

impl XdpTier {
    /// The tier over the program's maps in `ebpf`, for a switch whose ports are `ports` (port
    /// number by index), with a flow table of `flow_entries` entries (the size the program
    /// was loaded with), at most `max_masks` masks, reading at most `counter_reads` entry
    /// counters per second (0: no limit); turns the program's lookups on.
    pub fn new(
        ebpf: &mut Ebpf,
        ports: Vec<u32>,
        (flow_entries, max_masks, counter_reads): (usize, usize, f64),
        start_mono_ns: u64,
    ) -> Result<XdpTier> {
        let mut take =
            |name: &str| ebpf.take_map(name).ok_or_else(|| anyhow!("the XDP program has no map {name}"));
        let flows = HashMap::try_from(take("flows")?).context("the flows map")?;
        let counters = match take("counters")? {
            aya::maps::Map::Array(data) => CounterArea::new(data, flow_entries)?,
            _ => return Err(anyhow!("the XDP program's counters map is not an array")),
        };
        let masks = Array::try_from(take("masks")?).context("the masks map")?;
        let mut config: Array<MapData, BpfConfig> =
            Array::try_from(take("config")?).context("the config map")?;
        config.set(0, BpfConfig { nic: 1, ..BpfConfig::default() }, 0).context("turning the NIC tier on")?;
        let samples = RingBuf::try_from(take("samples")?).context("the samples map")?;
        Ok(XdpTier {
            flows,
            counters,
            masks,
            config,
            samples,
            sample: 0,
            ports,
            // Sized for the whole table up front (address space: buckets are touched as they
            // fill): growing by doubling moved every entry while a core held the engine.
            mirror: StdHashMap::with_capacity(flow_entries),
            held: HashSet::with_capacity(flow_entries),
            mask_slots: Vec::new(),
            max_masks: max_masks.min(MAX_MASKS),
            changed: Vec::new(),
            to_kernel: Histogram::new(3).expect("3 significant figures is valid"),
            to_first_hit: Histogram::new(3).expect("3 significant figures is valid"),
            reads: RateLimit::new(counter_reads),
            read_pass: Vec::new(),
            read_at: 0,
            start_mono_ns,
            stats: XdpTierStats::default(),
        })
    }

    /// The tier's figures.
    pub fn stats(&self) -> XdpTierStats {
        XdpTierStats { entries: self.mirror.len(), masks: self.live_masks(), ..self.stats }
    }

    fn live_masks(&self) -> usize {
        self.mask_slots.iter().flatten().count()
    }

    /// Brings the XDP tables in line with the engine's NIC entries changed since the last
    /// call. An entry that changed is taken out and put back as it is now; one the tables
    /// cannot hold stays in software.
    fn sync_tables(&mut self, switch: &mut Switch, decided_ns: u64, max_installs: usize) -> bool {
        // Entries left over from the last call come first.
        switch.drain_nic_journal(&mut self.changed);
        if self.changed.is_empty() {
            return false;
        }
        let started = std::time::Instant::now();
        self.changed.sort_unstable();
        self.changed.dedup();
        let changed = std::mem::take(&mut self.changed);
        let mut installs = 0;
        for &at in &changed {
            let wanted = switch.nic_entry(at.0, at.1).and_then(|e| {
                let servable = e.servable;
                let planned = servable.then(|| plan(&e, &self.ports)).flatten();
                if servable && planned.is_none() {
                    self.stats.unservable += 1;
                }
                planned.map(|mut actions| {
                    let (mask, check) = lookup_and_check(&e.view);
                    (actions.verify, actions.check_mask, actions.check_value) = check;
                    let mut key = nic_key(&e.view.matcher.value);
                    key.w.iter_mut().zip(mask.w).for_each(|(w, m)| *w &= m);
                    (BpfFlowKey { mask: 0, pad: 0, key }, mask, actions, e.view)
                })
            });
            if let (Some(m), Some((key, mask, actions, view))) = (self.mirror.get_mut(&at), &wanted) {
                let same_mask = self.mask_slots[m.key.mask as usize].is_some_and(|(k, _)| k == *mask);
                // The counter slot is the mirror's, not part of what the entry does.
                let same_actions = BpfFlowValue { counter: m.actions.counter, ..*actions } == m.actions;
                if same_mask && m.key.key == key.key && same_actions {
                    // The kernel's entry stands; hits from now on credit the decision as it is.
                    if m.view.decision != view.decision {
                        switch.hold_decision(view.decision);
                        switch.release_decision(m.view.decision);
                    }
                    m.view = *view;
                    continue;
                }
            }
            // What the engine no longer has leaves at once (an update must not return while
            // the kernel holds an outdated entry); what it added may wait for the next call.
            if let Some(old) = self.mirror.remove(&at) {
                self.take_out(switch, at, old);
            }
            if wanted.is_some() && installs == max_installs {
                self.changed.push(at);
                continue;
            }
            if let Some((key, mask, actions, view)) = wanted {
                self.put_in(switch, at, key, mask, (actions, view), decided_ns);
                installs += 1;
            }
        }
        self.publish_masks();
        self.stats.sync_ms += started.elapsed().as_secs_f64() * 1e3;
        !self.changed.is_empty()
    }

    /// Removes an entry from the tables, crediting the hits counted since the last read to the
    /// decision it carried out.
    fn take_out(&mut self, switch: &mut Switch, at: (u8, u32), old: Mirrored) {
        // Out of the flow table first, then the counters' last values (a frame the program
        // was forwarding at that instant may still add to them: a count, not a decision).
        let _ = self.flows.remove(&old.key);
        let v = self.counters.read(old.actions.counter);
        self.counters.give_back(old.actions.counter);
        let (packets, bytes) = (v.packets - old.packets, v.bytes - old.bytes);
        let used = v.used_ns.saturating_sub(self.start_mono_ns);
        credit(switch, at, &old.view, (packets, bytes, used));
        self.stats.hits_read += packets;
        switch.release_decision(old.view.decision);
        self.held.remove(&old.view.matcher);
        self.stats.removals += 1;
        let slot = &mut self.mask_slots[old.key.mask as usize];
        if let Some((_, uses)) = slot {
            *uses -= 1;
            if *uses == 0 {
                *slot = None;
            }
        }
    }

    /// Writes an entry into the tables, if its mask has a slot and the flow table room.
    fn put_in(
        &mut self,
        switch: &mut Switch,
        at: (u8, u32),
        mut key: BpfFlowKey,
        mask: NicKey,
        (mut actions, view): (BpfFlowValue, NicEntryView),
        decided_ns: u64,
    ) {
        let Some(counter) = self.counters.take() else {
            self.stats.refused += 1;
            return;
        };
        actions.counter = counter;
        let slot = match self.mask_slots.iter().position(|s| s.is_some_and(|(k, _)| k == mask)) {
            Some(i) => i,
            None => match self.mask_slots.iter().position(Option::is_none) {
                Some(i) => i,
                None if self.mask_slots.len() < self.max_masks => {
                    self.mask_slots.push(None);
                    self.mask_slots.len() - 1
                }
                None => {
                    self.stats.refused += 1;
                    return;
                }
            },
        };
        if self.mask_slots[slot].is_none() && self.masks.set(slot as u32, mask, 0).is_err() {
            self.stats.refused += 1;
            return;
        }
        key.mask = slot as u32;
        if self.flows.insert(key, actions, 0).is_err() {
            self.counters.give_back(counter);
            self.stats.refused += 1;
            return;
        }
        let uses = self.mask_slots[slot].map_or(0, |(_, n)| n);
        self.mask_slots[slot] = Some((mask, uses + 1));
        switch.hold_decision(view.decision);
        let in_kernel = monotonic_ns();
        let _ =
            self.to_kernel.record(in_kernel.saturating_sub(self.start_mono_ns).saturating_sub(decided_ns));
        self.held.insert(view.matcher);
        let installed_mono_ns = Some(in_kernel);
        self.mirror.insert(at, Mirrored { key, actions, installed_mono_ns, view, packets: 0, bytes: 0 });
        self.stats.installs += 1;
    }

    /// Tells the program how many mask slots to go through (the highest in use, plus one).
    fn publish_masks(&mut self) {
        while self.mask_slots.last().is_some_and(Option::is_none) {
            self.mask_slots.pop();
        }
        self.publish_config();
    }

    /// Reads entries' counters and credits the hits since their last read to the engine:
    /// every entry's (`all`), or, in passes over the entries held when the pass began, as
    /// many as the read budget allows and at most [`READS_PER_HOLD`] per call, so that a
    /// pass over tens of thousands of entries never holds the engine long; true if the pass
    /// has entries left (the caller comes back soon).
    fn read(&mut self, switch: &mut Switch, all: bool) -> bool {
        if all {
            let order: Vec<(u8, u32)> = self.mirror.keys().copied().collect();
            for at in order {
                self.read_entry(switch, at);
            }
            return false;
        }
        if self.read_pass.is_empty() {
            self.read_pass.extend(self.mirror.keys().copied());
            self.read_pass.sort_unstable();
            self.read_at = 0;
        }
        let left = self.read_pass.len() - self.read_at;
        let tokens = self.reads.available(monotonic_ns().saturating_sub(self.start_mono_ns)) as usize;
        let budget = tokens.min(READS_PER_HOLD).min(left);
        for i in self.read_at..self.read_at + budget {
            // An entry taken out since the pass began is skipped (`read_entry` finds none).
            self.read_entry(switch, self.read_pass[i]);
        }
        self.reads.spend(budget as u64);
        self.read_at += budget;
        if self.read_at == self.read_pass.len() {
            self.read_pass.clear();
            return false;
        }
        budget > 0
    }

    /// Reads entry `at`'s counters from the kernel and credits its hits since the last read.
    fn read_entry(&mut self, switch: &mut Switch, at: (u8, u32)) {
        let Some(m) = self.mirror.get_mut(&at) else { return };
        let v = self.counters.read(m.actions.counter);
        let (packets, bytes) = (v.packets - m.packets, v.bytes - m.bytes);
        (m.packets, m.bytes) = (v.packets, v.bytes);
        self.stats.counter_reads += 1;
        if let (Some(installed), true) = (m.installed_mono_ns, v.first_ns != 0) {
            let _ = self.to_first_hit.record(v.first_ns.saturating_sub(installed));
            m.installed_mono_ns = None;
        }
        if packets == 0 {
            return;
        }
        let used = v.used_ns.saturating_sub(self.start_mono_ns);
        credit(switch, at, &m.view, (packets, bytes, used));
        self.stats.hits_read += packets;
    }

    /// Writes the program's configuration: lookups on, the masks in use, the sampling
    /// threshold.
    fn publish_config(&mut self) {
        let n_masks = self.mask_slots.len() as u32;
        let _ = self.config.set(0, BpfConfig { nic: 1, n_masks, sample: self.sample, pad: 0 }, 0);
    }
}

impl HardwareCounters for XdpTier {
    fn refresh(&mut self, switch: &mut Switch, entries: &[(u8, u32)]) {
        for &at in entries {
            self.read_entry(switch, at);
        }
    }
}

impl NicTier for XdpTier {
    fn sample(&mut self, rate: f64) {
        // A hit is sampled when a random u32 falls below the threshold.
        self.sample = match rate {
            r if r >= 1.0 => u32::MAX,
            r if r > 0.0 => ((r * 4_294_967_296.0) as u32).max(1),
            _ => 0,
        };
        self.publish_config();
    }

    fn samples(&self) -> bool {
        self.sample != 0
    }

    fn drain_samples(&mut self, max: u64, seen: &mut dyn FnMut(&FlowKey, u32)) -> u64 {
        let mut n = 0;
        while n < max {
            let Some(item) = self.samples.next() else { break };
            if item.len() < size_of::<BpfSample>() {
                continue;
            }
            // SAFETY: the record is a `struct sample` the program wrote, at least as long as
            // one (checked above); read unaligned, as the ring gives 8-byte alignment only.
            let sample: BpfSample = unsafe { std::ptr::read_unaligned(item.as_ptr().cast()) };
            drop(item);
            let mut key = FlowKey::default();
            for (i, &w) in XDP_KEY_WORDS.iter().enumerate() {
                key.words[w] = sample.key.w[i];
            }
            seen(&key, sample.bytes);
            n += 1;
        }
        self.stats.samples += n;
        n
    }

    fn sync(&mut self, switch: &mut Switch, decided_ns: u64, max_installs: usize) -> bool {
        self.sync_tables(switch, decided_ns, max_installs)
    }

    fn read_counters(&mut self, switch: &mut Switch, all: bool) -> bool {
        self.read(switch, all)
    }

    fn write_ns(&self) -> Option<f64> {
        let writes = self.stats.installs + self.stats.removals;
        (writes > 0).then(|| self.stats.sync_ms * 1e6 / writes as f64)
    }

    fn report(&self) -> serde_json::Value {
        let us = |h: &Histogram<u64>| {
            [0.5, 0.99, 1.0].map(|q| if h.is_empty() { 0.0 } else { h.value_at_quantile(q) as f64 / 1e3 })
        };
        let latency = InstallLatency {
            installs: self.to_kernel.len(),
            to_kernel_us: us(&self.to_kernel),
            first_hits: self.to_first_hit.len(),
            to_first_hit_us: us(&self.to_first_hit),
        };
        serde_json::json!({
            "kind": "xdp", "max_masks": self.max_masks, "stats": self.stats(), "install_latency": latency,
        })
    }

    fn summary(&self) -> String {
        let s = self.stats();
        let p50 = |h: &Histogram<u64>| if h.is_empty() { 0.0 } else { h.value_at_quantile(0.5) as f64 / 1e3 };
        format!(
            "nic tier: xdp, {} entries in the kernel ({} masks of {}), {} frames served; {} installs, {} removals, \
             {} refused (table or masks full), {} unservable; install p50 {:.1} µs to the kernel, {:.1} µs more to the \
             first hit",
            s.entries,
            s.masks,
            self.max_masks,
            s.hits_read,
            s.installs,
            s.removals,
            s.refused,
            s.unservable,
            p50(&self.to_kernel),
            p50(&self.to_first_hit),
        )
    }

    fn holds(&self, m: &Match) -> bool {
        self.held.contains(m)
    }
}

/// Credits `(packets, bytes, last hit)` the kernel counted for entry `at`, mirrored as `view`:
/// to the engine's entry if it still carries out the same decision, else to that decision
/// alone (the entry was removed or changed since).
fn credit(switch: &mut Switch, at: (u8, u32), view: &NicEntryView, (packets, bytes, used): (u64, u64, u64)) {
    let same = switch.nic_entry(at.0, at.1).is_some_and(|e| e.view.decision == view.decision);
    if !(same && switch.credit_nic_hits(at.0, at.1, packets, bytes, used)) {
        switch.credit_removed_nic_hits(view, packets, bytes, used);
    }
}

/// The entry's lookup mask over the words the program computes, and what is compared once
/// the entry is found: whether its match has bits beyond the lookup mask (`verify`), and the
/// mask and value of the words that do (zero elsewhere, which any key passes).
fn lookup_and_check(view: &NicEntryView) -> (NicKey, (u32, NicKey, NicKey)) {
    let lookup = NicKey { w: XDP_KEY_WORDS.map(|w| view.lookup_mask.words[w]) };
    let (mut verify, mut mask, mut value) = (0, NicKey::default(), NicKey::default());
    for (i, &w) in XDP_KEY_WORDS.iter().enumerate() {
        let rest = view.matcher.mask.words[w] & !lookup.w[i];
        if rest != 0 {
            verify = 1;
            mask.w[i] = view.matcher.mask.words[w];
            value.w[i] = view.matcher.value.words[w];
        }
    }
    (lookup, (verify, mask, value))
}

/// CLOCK_MONOTONIC now, in ns (the clock `bpf_ktime_get_ns` reads, and `Instant`).
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid timespec to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
