//! A packet's passes through the pipeline as `ovs-appctl ofproto/trace` follows them: the
//! first pass, then every clone `ct(table=N)` recirculates, in order, each resuming with a
//! connection state the caller chooses (`--ct-next`), not the connection tracker's. A pass
//! ending in the datapath's `hash` and `recirc` (a select group's `dp_hash` method) is
//! followed too, with the hash the datapath computes (`ofproto/trace` stops there).
//!
//! This is the slow path's view, for tracing and for checking against Open vSwitch; the
//! switch runs passes with its connection tracker instead.

use std::collections::VecDeque;

use super::ct::NatKind;
use super::dp_actions::DpAction;
use super::execute::apply_headers;
use super::pipeline::Pipeline;
use super::traversal::{Fork, Traversal};
use crate::packet::ct_state;
use crate::packet::field::id;
use crate::packet::{FlowKey, FlowMask};

/// Recirculations followed per packet before the trace stops (OVS's limit).
pub const MAX_RECIRCULATIONS: usize = 4096;

/// How a later pass began.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Thaw {
    /// Recirculation id it resumed.
    pub recirc_id: u32,
    /// The connection state it resumed with.
    pub ct_state: u8,
    /// Whether that state is the default (`trk|new`), no `--ct-next` being left.
    pub default_state: bool,
    /// The flow before the NAT the fork asked for was simulated, if it asked for one.
    pub before_nat: Option<FlowKey>,
    /// For a pass after the datapath's `hash` (not `ct`): the `dp_hash` it computed.
    pub dp_hash: Option<u32>,
}

/// A recirculation waiting to be followed.
enum Next {
    /// A clone `ct(table=N)` sent.
    Fork(Fork),
    /// The packet itself, hashed by the datapath: its id and the packet as it recirculates.
    Hashed(u32, FlowKey),
}

/// The recirculations a pass ends with: its `ct` clones in order, then the packet itself if
/// the datapath hashed and recirculated it.
fn recirculations(tr: &Traversal, queue: &mut VecDeque<Next>) {
    queue.extend(tr.forks.iter().copied().map(Next::Fork));
    if let [.., DpAction::Hash(_), DpAction::Recirc(id)] = tr.dp_actions[..] {
        let mut k = tr.entry;
        apply_headers(&tr.dp_actions, &mut k);
        let mut k = k.masked(FlowMask::packet_state());
        k.set_recirc_id(id);
        queue.push_back(Next::Hashed(id, k));
    }
}

/// One pass of a traced packet.
#[derive(Clone, Debug, Default)]
pub struct Pass {
    /// How it began (`None` for the packet's first pass).
    pub thaw: Option<Thaw>,
    /// Its translation.
    pub tr: Traversal,
}

/// Traces `packet` through every pass: the first, then each recirculated clone, resuming with
/// the states of `ct_next` in order (then `trk|new`). A `nat(src|dst=...)` is simulated as
/// OVS's trace does: the first address and port of the range replace the packet's. Fills
/// `passes`; returns whether recirculations were left unfollowed at
/// [`MAX_RECIRCULATIONS`].
pub fn trace_passes(p: &Pipeline, packet: &FlowKey, ct_next: &[u8], passes: &mut Vec<Pass>) -> bool {
    let mut used = 0;
    let mut queue: VecDeque<Next> = VecDeque::new();
    let mut next_states = ct_next.iter().copied();
    passes.clear();
    let mut pass = Pass::default();
    p.process(packet, &mut pass.tr);
    recirculations(&pass.tr, &mut queue);
    passes.push(pass);
    while let Some(next) = queue.pop_front() {
        if used == MAX_RECIRCULATIONS {
            return true;
        }
        used += 1;
        let fork = match next {
            Next::Fork(fork) => fork,
            Next::Hashed(recirc_id, flow) => {
                let thaw = Thaw {
                    recirc_id,
                    ct_state: flow.ct_state(),
                    default_state: false,
                    before_nat: None,
                    dp_hash: Some(flow.get(id::DP_HASH) as u32),
                };
                let mut pass = Pass { thaw: Some(thaw), tr: Traversal::new() };
                p.process(&flow, &mut pass.tr);
                recirculations(&pass.tr, &mut queue);
                passes.push(pass);
                continue;
            }
        };
        let mut flow = fork.flow.masked(FlowMask::packet_state());
        flow.set_recirc_id(fork.recirc_id);
        let (state, default_state) = match next_states.next() {
            Some(s) => (s, false),
            None => (ct_state::TRK | ct_state::NEW, true),
        };
        flow.set_ct_state(state);
        let before_nat = fork.nat.filter(|n| n.kind.is_some()).map(|nat| {
            let before = flow;
            let (addr, port) = match nat.kind {
                Some(NatKind::Src) => (id::NW_SRC, id::TP_SRC),
                _ => (id::NW_DST, id::TP_DST),
            };
            if let Some((lo, _)) = nat.addrs {
                flow.set(addr, lo as u128);
                if let Some((plo, _)) = nat.ports.filter(|p| p.0 != 0) {
                    flow.set(port, plo as u128);
                }
            }
            before
        });
        let mut pass = Pass {
            thaw: Some(Thaw {
                recirc_id: fork.recirc_id,
                ct_state: state,
                default_state,
                before_nat,
                dp_hash: None,
            }),
            tr: Traversal::new(),
        };
        p.process(&flow, &mut pass.tr);
        recirculations(&pass.tr, &mut queue);
        passes.push(pass);
    }
    false
}
