//! Recirculation ids: what a pass of the pipeline left for the next one (OVS
//! `ofproto-dpif-rid`).
//!
//! A pass ends in a recirculation in two ways. `ct(table=N)` sends a clone of the packet
//! through the connection tracker, and the clone's next pass resumes at table N. A select
//! group using the `dp_hash` method ends the pass with the datapath hashing the packet, and
//! the next pass resumes *inside* the action lists: at the group action, then the actions
//! left after it in each enclosing list (OVS's frozen actions). Either way the next pass
//! starts with the pipeline metadata (registers, `metadata`, input port, tunnel id) and the
//! `push`/`pop` stack the packet had, which the datapath does not carry. The datapath carries only an id, `recirc_id`;
//! equal frozen states share one, as in OVS, so each pass's megaflows are shared by every
//! packet that froze alike.
//!
//! Frozen action lists are copies, as in OVS: a rule modified after the freeze changes the
//! next pass of packets that freeze from then on (another state, another id), not of those
//! already frozen.

use std::collections::HashMap;
use std::sync::Arc;

use super::action::Action;
use crate::packet::field::{id, word};
use crate::packet::FlowKey;

/// Key words a frozen state keeps: `metadata`, the registers, `tun_id` and `in_port` (the
/// word also holds `conj_id`, which is zero outside a lookup).
const FROZEN_WORDS: usize = word::IN_PORT as usize + 1;

/// An action list the next pass resumes.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FrozenList {
    /// The actions left to run.
    pub actions: Box<[Action]>,
    /// The table of the rule they come from (where a `resubmit` without a table looks up).
    pub table: u8,
}

/// What a pass left for the next one.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Frozen {
    /// Table the next pass starts at, when it resumes no action list.
    pub table: u8,
    /// Action lists the next pass resumes, outermost first (none after `ct(table=N)`).
    pub lists: Box<[FrozenList]>,
    /// The pipeline metadata words at the freeze.
    pub metadata: [u64; FROZEN_WORDS],
    /// The translation's stack (`push`/`pop`), bottom first.
    pub stack: Box<[u128]>,
    /// Whether the packet carries a `dp_hash` into the next pass. OVS does not freeze this:
    /// keeping packets with and without one under different ids lets a later pass's select
    /// group tell them apart without its megaflow matching `dp_hash` (see `Pipeline`).
    pub hashed: bool,
    /// Whether the next pass sees the connection tracker's state (always, after `ct`).
    pub conntracked: bool,
}

impl Frozen {
    /// The state `flow` freezes in with `stack`, resuming with a lookup in `table`.
    pub fn of(flow: &FlowKey, table: u8, stack: &[u128]) -> Frozen {
        let hashed = flow.get(id::DP_HASH) != 0;
        let metadata = Self::metadata_of(flow);
        Frozen { table, lists: Box::new([]), metadata, stack: stack.into(), hashed, conntracked: true }
    }

    /// The state `flow` freezes in, resuming `lists` after the datapath hashed it.
    pub fn resuming(flow: &FlowKey, lists: Box<[FrozenList]>, stack: &[u128], conntracked: bool) -> Frozen {
        let metadata = Self::metadata_of(flow);
        Frozen { table: 0, lists, metadata, stack: stack.into(), hashed: true, conntracked }
    }

    fn metadata_of(flow: &FlowKey) -> [u64; FROZEN_WORDS] {
        let mut metadata = [0; FROZEN_WORDS];
        metadata.copy_from_slice(&flow.words[..FROZEN_WORDS]);
        metadata
    }

    /// Restores the frozen metadata into `flow`.
    pub(crate) fn thaw_into(&self, flow: &mut FlowKey) {
        flow.words[..FROZEN_WORDS].copy_from_slice(&self.metadata);
    }
}

/// The ids given out, from 1 (0 is a packet's first pass). Ids are never freed: a run has as
/// many as distinct frozen states.
#[derive(Debug, Default)]
pub(crate) struct RecircIds {
    ids: HashMap<Arc<Frozen>, u32>,
    states: Vec<Arc<Frozen>>,
}

impl RecircIds {
    /// The id of `state`, given out now if it has none.
    pub(crate) fn id_of(&mut self, state: &Frozen) -> u32 {
        if let Some(&id) = self.ids.get(state) {
            return id;
        }
        let state = Arc::new(state.clone());
        self.states.push(state.clone());
        let id = self.states.len() as u32;
        self.ids.insert(state, id);
        id
    }

    /// The frozen state of an id.
    pub(crate) fn state(&self, id: u32) -> Option<&Arc<Frozen>> {
        (id as usize).checked_sub(1).and_then(|i| self.states.get(i))
    }
}
