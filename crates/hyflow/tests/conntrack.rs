//! Connection tracking and recirculation as Open vSwitch translates them: `ct(...)` to the
//! datapath's `ct` and `recirc`, each later pass resuming where its pass froze, with the
//! megaflows each pass leaves (`ofproto/trace --ct-next`, checked pass by pass).

mod common;

#[test]
fn open_vswitch_conntrack_vectors() {
    let (packets, passes_seen, recirculated) = common::check_pass_vectors("ovs-conntrack.json");
    eprintln!("{packets} packets, {passes_seen} passes, {recirculated} recirculated");
    assert_eq!(packets, 500);
    assert!(recirculated >= 250, "only {recirculated} packets recirculated");
}
