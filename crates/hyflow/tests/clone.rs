//! `clone(...)` as Open vSwitch translates it: the body on a copy of the packet and of the
//! pipeline state, its datapath actions kept inline when what follows can undo them, wrapped
//! in the datapath's `clone(...)` when not (`ct`, `ct_clear`), and nothing wrapped when
//! nothing follows.

mod common;

/// Open vSwitch's own answers (`tests/data/ovs-clone.json`, made with
/// `scripts/ovs_clone_vectors.py` against OVS 4.0.90): 40 random pipelines whose flows clone
/// bodies of rewrites, outputs, resubmits, pushes and pops, nested clones and conntrack
/// actions, with actions after or none; 10 packets each, every pass's datapath actions and
/// megaflow as OVS's.
#[test]
fn open_vswitch_clone_vectors() {
    let (packets, passes, recirculated) = common::check_pass_vectors("ovs-clone.json");
    eprintln!("{packets} packets, {passes} passes, {recirculated} recirculated");
    assert_eq!((packets, passes, recirculated), (400, 422, 22));
}
