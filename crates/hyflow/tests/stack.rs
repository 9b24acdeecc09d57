//! `push` and `pop` as Open vSwitch runs them: the translation's stack across resubmits and
//! across recirculations (frozen with the pipeline), and the megaflows of what was pushed and
//! popped.

mod common;

/// Open vSwitch's own answers (`tests/data/ovs-stack.json`, made with
/// `scripts/ovs_stack_vectors.py` against OVS 4.0.90): 40 random pipelines pushing registers,
/// MACs, IP addresses and the input port and popping them into registers and headers (lookups,
/// outputs to a register and datapath rewrites then depend on them), some across `ct(table=1)`;
/// 10 packets each, every pass's datapath actions and megaflow as OVS's.
#[test]
fn open_vswitch_stack_vectors() {
    let (packets, passes, recirculated) = common::check_pass_vectors("ovs-stack.json");
    eprintln!("{packets} packets, {passes} passes, {recirculated} recirculated");
    assert_eq!((packets, passes, recirculated), (400, 479, 65));
}
