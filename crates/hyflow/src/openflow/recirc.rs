//! Recirculation ids: what a pass of the pipeline left for the next one (OVS
//! `ofproto-dpif-rid`).
//!
//! When `ct(table=N)` sends a clone of the packet through the connection tracker, the
//! pipeline *freezes*: the next pass resumes at table N with the pipeline metadata (registers,
//! `metadata`, input port, tunnel id) the packet had, which the datapath does not carry. The
//! datapath carries only an id, `recirc_id`; equal frozen states share one, as in OVS, so
//! each pass's megaflows are shared by every packet that froze alike.

use std::collections::HashMap;

use crate::packet::field::word;
use crate::packet::FlowKey;

/// Key words a frozen state keeps: `metadata`, the registers, `tun_id` and `in_port` (the
/// word also holds `conj_id`, which is zero outside a lookup).
const FROZEN_WORDS: usize = word::IN_PORT as usize + 1;

/// What a pass left for the next one.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Frozen {
    /// Table the next pass starts at.
    pub table: u8,
    /// The pipeline metadata words at the freeze.
    pub metadata: [u64; FROZEN_WORDS],
    /// Whether the next pass sees the connection tracker's state (always, after `ct`).
    pub conntracked: bool,
}

impl Frozen {
    /// The state `flow` freezes in, resuming at `table`.
    pub fn of(flow: &FlowKey, table: u8) -> Frozen {
        let mut metadata = [0; FROZEN_WORDS];
        metadata.copy_from_slice(&flow.words[..FROZEN_WORDS]);
        Frozen { table, metadata, conntracked: true }
    }

    /// Restores the frozen metadata into `flow`.
    pub fn thaw_into(&self, flow: &mut FlowKey) {
        flow.words[..FROZEN_WORDS].copy_from_slice(&self.metadata);
    }
}

/// The ids given out, from 1 (0 is a packet's first pass). Ids are never freed: a run has as
/// many as distinct frozen states.
#[derive(Debug, Default)]
pub struct RecircIds {
    ids: HashMap<Frozen, u32>,
    states: Vec<Frozen>,
}

impl RecircIds {
    /// The id of `state`, given out now if it has none.
    pub fn id_of(&mut self, state: &Frozen) -> u32 {
        if let Some(&id) = self.ids.get(state) {
            return id;
        }
        self.states.push(state.clone());
        let id = self.states.len() as u32;
        self.ids.insert(state.clone(), id);
        id
    }

    /// The frozen state of an id.
    pub fn state(&self, id: u32) -> Option<&Frozen> {
        (id as usize).checked_sub(1).and_then(|i| self.states.get(i))
    }

    /// Ids given out.
    pub fn len(&self) -> usize {
        self.states.len()
    }

    /// Whether none was.
    pub fn is_empty(&self) -> bool {
        self.states.is_empty()
    }
}
