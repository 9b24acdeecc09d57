//! Multi-table semantics, one behaviour per test, each checked on outputs, rewritten headers
//! and the megaflow.

use hyflow::openflow::pipeline::{MAX_DEPTH, MAX_RESUBMITS};
use hyflow::openflow::traversal::DropReason;
use hyflow::openflow::{parse_flows, parse_packet, Pipeline, Traversal};
use hyflow::packet::field::id;
use hyflow::packet::format::format_match;
use hyflow::packet::FlowKey;

fn pipeline(text: &str) -> Pipeline {
    Pipeline::from_rules(parse_flows(text, "test").unwrap())
}

fn run(p: &Pipeline, packet: &str) -> Traversal {
    let mut tr = Traversal::new();
    p.process(&parse_packet(packet).unwrap(), &mut tr);
    tr
}

fn ports(tr: &Traversal) -> Vec<u32> {
    tr.outputs.iter().map(|o| o.port).collect()
}

fn megaflow(tr: &Traversal) -> String {
    format_match(&tr.megaflow.value, &tr.megaflow.mask)
}

const TCP: &str = "in_port=1,dl_src=00:00:00:00:00:01,dl_dst=00:00:00:00:00:02,tcp,nw_src=10.0.0.1,nw_dst=10.0.0.2,nw_ttl=64,tp_src=1000,tp_dst=80";

#[test]
fn goto_table_continues_forward_and_a_miss_ends_the_path() {
    let p = pipeline(
        "table=0,ip actions=output:2,goto_table:3\n\
         table=3,tcp,tp_dst=80 actions=output:3,goto_table:4\n",
    );
    let tr = run(&p, TCP);
    assert_eq!(ports(&tr), vec![2, 3]);
    let tables: Vec<(u8, bool)> = tr.steps.iter().map(|s| (s.table, s.rule.is_some())).collect();
    assert_eq!(tables, vec![(0, true), (3, true), (4, false)], "table 4 misses");
}

#[test]
fn resubmit_returns_to_the_caller_and_may_go_back() {
    let p = pipeline(
        "table=0,priority=10,reg0=0 actions=load:1->NXM_NX_REG0[],resubmit(,1),output:9\n\
         table=0,priority=20,reg0=1 actions=output:5\n\
         table=1 actions=output:4,resubmit(,0)\n",
    );
    let tr = run(&p, TCP);
    // table 0 (reg0=0) → resubmit to 1 → output 4, resubmit back to 0 (now reg0=1) → output 5;
    // back in the first rule, output 9 runs last.
    assert_eq!(ports(&tr), vec![4, 5, 9]);
    assert_eq!(tr.steps.iter().map(|s| s.table).collect::<Vec<_>>(), vec![0, 1, 0]);
    assert_eq!(tr.steps.iter().map(|s| s.depth).collect::<Vec<_>>(), vec![0, 1, 2]);
}

#[test]
fn resubmit_with_a_port_looks_up_as_that_port_then_restores_it() {
    let p = pipeline(
        "table=0,in_port=1 actions=resubmit(7,1),output:in_port\n\
         table=1,in_port=7 actions=output:3\n",
    );
    let tr = run(&p, TCP);
    assert_eq!(ports(&tr), vec![3, 1]);
    assert_eq!(tr.steps[1].flow.in_port(), 7);
}

#[test]
fn set_field_is_seen_by_later_tables_and_pins_the_megaflow() {
    let p = pipeline(
        "table=0,tcp actions=mod_nw_src:9.9.9.9,set_field:8080->tcp_dst,goto_table:1\n\
         table=1,tcp,nw_src=9.9.9.9,tp_dst=8080 actions=output:2\n\
         table=1,priority=1 actions=output:3\n",
    );
    let tr = run(&p, TCP);
    assert_eq!(ports(&tr), vec![2]);
    let out = &tr.outputs[0].packet;
    assert_eq!((out.nw_src(), out.tp_dst()), (0x0909_0909, 8080));
    // The megaflow matches the *original* packet on what was rewritten, exactly (OVS).
    let mf = megaflow(&tr);
    assert!(mf.contains("nw_src=10.0.0.1,") && mf.contains("tp_dst=80"), "{mf}");
    let dp = hyflow::openflow::dp_actions::format_dp_actions(&tr.dp_actions, &tr.entry);
    assert_eq!(dp, "set(ipv4(src=9.9.9.9)),set(tcp(dst=8080)),2");
}

#[test]
fn registers_and_metadata_cross_tables_but_leave_the_megaflow() {
    let p = pipeline(
        "table=0 actions=load:0x2a->NXM_NX_REG3[0..7],write_metadata:0x5/0xff,goto_table:1\n\
         table=1,reg3=0x2a,metadata=0x5/0xff actions=move:NXM_NX_REG3[0..7]->NXM_NX_REG4[8..15],goto_table:2\n\
         table=2,reg4=0x2a00 actions=output:6\n",
    );
    let tr = run(&p, TCP);
    assert_eq!(ports(&tr), vec![6]);
    assert_eq!(tr.final_flow.get(id::reg(4)), 0x2a00);
    assert_eq!(tr.final_flow.get(id::METADATA), 5);
    assert_eq!(tr.megaflow.mask.get(id::reg(3)), 0, "registers are not packet state");
    assert_eq!(tr.megaflow.mask.get(id::METADATA), 0);
    let mf = megaflow(&tr);
    assert!(!mf.contains("reg") && !mf.contains("metadata"), "{mf}");
}

#[test]
fn vlan_push_and_pop() {
    let p = pipeline(
        "table=0,in_port=1 actions=push_vlan:0x8100,mod_vlan_vid:10,mod_vlan_pcp:5,output:2,goto_table:1\n\
         table=1,dl_vlan=10 actions=pop_vlan,output:3\n\
         table=0,in_port=4,dl_vlan=20 actions=strip_vlan,output:5\n",
    );
    let tr = run(&p, TCP);
    assert_eq!(ports(&tr), vec![2, 3]);
    assert_eq!(tr.outputs[0].packet.vlan_tci(), 0x1000 | (5 << 13) | 10);
    assert_eq!(tr.outputs[0].packet.vlan_tpid(), 0x8100);
    assert!(!tr.outputs[1].packet.has_vlan());
    let dp = hyflow::openflow::dp_actions::format_dp_actions(&tr.dp_actions, &tr.entry);
    assert_eq!(dp, "push_vlan(vid=10,pcp=5),2,pop_vlan,3");

    let tagged = "in_port=4,dl_vlan=20,dl_vlan_pcp=3,dl_type=0x0800,nw_src=1.1.1.1,nw_proto=17";
    let tr = run(&p, tagged);
    assert_eq!(ports(&tr), vec![5]);
    assert!(!tr.outputs[0].packet.has_vlan());
    // Popping a tag pins it completely in the megaflow (the datapath must know what it removes).
    assert_eq!(tr.megaflow.mask.get(id::VLAN_TCI), 0xffff);
}

#[test]
fn output_to_the_input_port_is_skipped_unless_asked_for() {
    let p = pipeline("actions=output:1,output:2,in_port\n");
    assert_eq!(ports(&run(&p, TCP)), vec![2, 1]);
}

#[test]
fn dec_ttl_decrements_and_at_one_stops_the_action_list() {
    let p = pipeline("table=0,ip actions=dec_ttl,output:2,goto_table:1\ntable=1 actions=output:3\n");
    let tr = run(&p, TCP);
    assert_eq!(ports(&tr), vec![2, 3]);
    assert_eq!(tr.outputs[0].packet.nw_ttl(), 63);
    let tr = run(&p, &TCP.replace("nw_ttl=64", "nw_ttl=1"));
    assert!(tr.is_drop());
    assert_eq!(tr.ttl_exceeded, 1);
    assert_eq!(tr.megaflow.mask.get(id::NW_TTL), 0xff);
}

#[test]
fn controller_copies_are_counted_and_annotations_change_nothing() {
    let p = pipeline(
        "table=0,ip actions=note:de.ad.be.ef,meter:3,sample(probability=100,collector_set_id=1),output:2,controller(reason=no_match,max_len=128),goto_table:1\n\
         table=1 actions=CONTROLLER,output:CONTROLLER,output:3\n",
    );
    let tr = run(&p, TCP);
    assert_eq!(ports(&tr), vec![2, 3], "the controller is not a port");
    assert_eq!((tr.to_controller, tr.ttl_exceeded), (3, 0));
    // The same without the annotations: the same decision and megaflow.
    let plain = pipeline("table=0,ip actions=output:2,controller,goto_table:1\ntable=1 actions=controller,controller,output:3\n");
    let tr2 = run(&plain, TCP);
    assert_eq!((ports(&tr2), megaflow(&tr2)), (ports(&tr), megaflow(&tr)));
    // They print back as they parse.
    let shown: Vec<String> = p.rules().map(|(_, r)| r.to_string()).collect();
    let again = Pipeline::from_rules(parse_flows(&shown.join("\n"), "again").unwrap());
    assert_eq!(again.rules().map(|(_, r)| r.to_string()).collect::<Vec<_>>(), shown);
    for bad in ["actions=note:abc", "actions=meter:x", "actions=controller(color=red)", "actions=sample(x)"] {
        assert!(parse_flows(bad, "bad").is_err(), "{bad}");
    }
}

#[test]
fn priority_wins_then_the_rule_added_first() {
    let p = pipeline(
        "priority=5,ip actions=output:5\n\
         priority=9,tcp actions=output:9\n\
         priority=9,ip,nw_src=10.0.0.1 actions=output:10\n",
    );
    assert_eq!(ports(&run(&p, TCP)), vec![9]);
    let p = pipeline("priority=9,ip,nw_src=10.0.0.1 actions=output:10\npriority=9,tcp actions=output:9\n");
    assert_eq!(ports(&run(&p, TCP)), vec![10]);
}

#[test]
fn re_adding_a_rule_replaces_it() {
    let p = pipeline("priority=7,tcp actions=output:2\npriority=7,tcp actions=output:3\n");
    assert_eq!(p.len(), 1);
    assert_eq!(ports(&run(&p, TCP)), vec![3]);
}

#[test]
fn resubmit_loops_hit_ovs_limits_and_drop_everything() {
    let p = pipeline("actions=output:2,resubmit(,0)\n");
    let tr = run(&p, TCP);
    assert_eq!(tr.drop_reason, Some(DropReason::RecursionTooDeep));
    assert!(tr.outputs.is_empty() && tr.dp_actions.is_empty());
    assert_eq!(tr.steps.len() as u32, MAX_DEPTH + 1);
    // A forward-only chain that fans out hits the lookup count limit instead.
    let mut text = String::new();
    for t in 0..20 {
        text.push_str(&format!("table={t} actions=resubmit(,{}),resubmit(,{})\n", t + 1, t + 1));
    }
    let tr = run(&pipeline(&text), TCP);
    assert_eq!(tr.drop_reason, Some(DropReason::TooManyResubmits));
    // Every rule hit after the first lookup counts (misses do not), as in OVS.
    let hits = tr.steps.iter().filter(|s| s.rule.is_some()).count() as u32;
    assert_eq!(hits, MAX_RESUBMITS + 1);
}

/// Checked against Open vSwitch 4.0.90: `dec_ttl` pins TTL and protocol of any packet (they
/// read as zero outside IP), the lookups' IP bits are dropped.
#[test]
fn non_ip_megaflows_carry_what_ovs_pins() {
    let p =
        pipeline("priority=10,ip,nw_dst=10.0.0.0/8 actions=output:2\npriority=1 actions=dec_ttl,output:3\n");
    let tr = run(&p, "in_port=1,dl_src=00:00:00:00:00:01,dl_dst=00:00:00:00:00:02,dl_type=0x88cc");
    assert_eq!(ports(&tr), vec![3]);
    assert_eq!(
        megaflow(&tr),
        "recirc_id=0,in_port=1,vlan_tci=0x0000/0x1000,dl_type=0x88cc,nw_proto=0,nw_ttl=0"
    );
}

#[test]
fn rule_counters_are_credited_per_hit() {
    let mut p = pipeline("table=0 actions=resubmit(,1),resubmit(,1)\ntable=1 actions=output:2\n");
    let mut tr = Traversal::new();
    let pkt: FlowKey = parse_packet(TCP).unwrap();
    p.process(&pkt, &mut tr);
    let hits: Vec<_> = tr.rules().collect();
    p.credit(hits, 100, 0);
    let ids: Vec<_> = p.rules().map(|(id, _)| id).collect();
    assert_eq!((p.stats(ids[0]).packets, p.stats(ids[0]).bytes), (1, 100));
    assert_eq!((p.stats(ids[1]).packets, p.stats(ids[1]).bytes), (2, 200));
}

#[test]
fn deepest_nesting_the_limits_allow_does_not_exhaust_the_stack() {
    // 254 forward gotos then a resubmit back to table 0: nesting grows by 255 per round until
    // the lookup limit stops it, about 4,096 levels deep.
    let mut text = String::new();
    for t in 0..254 {
        text.push_str(&format!("table={t} actions=goto_table:{}\n", t + 1));
    }
    text.push_str("table=254 actions=output:2,resubmit(,0)\n");
    let tr = run(&pipeline(&text), TCP);
    assert_eq!(tr.drop_reason, Some(DropReason::TooManyResubmits));
    assert!(tr.steps.iter().map(|s| s.depth).max().unwrap() as u32 >= MAX_RESUBMITS - 1);
}

/// Checked against Open vSwitch 4.0.90: `output:FIELD[]` sends to the port number the bits hold
/// (none if it is the input port or no port), and its megaflow is the one the reads made.
#[test]
fn output_to_the_port_a_register_holds() {
    let p = pipeline(
        "priority=10,ip actions=load:0x3->NXM_NX_REG1[],output:NXM_NX_REG1[]\n\
         priority=20,tcp actions=move:NXM_OF_TCP_DST[]->NXM_NX_REG1[0..15],output:NXM_NX_REG1[0..15]\n\
         priority=5 actions=output:NXM_OF_IN_PORT[]\n",
    );
    for (packet, dp, mf) in [
        (
            "ip,in_port=1,nw_src=10.0.0.1",
            "3",
            "recirc_id=0,ip,in_port=1,vlan_tci=0x0000/0x1000,nw_proto=0,nw_frag=no",
        ),
        (
            "tcp,in_port=1,tp_dst=2",
            "2",
            "recirc_id=0,tcp,in_port=1,vlan_tci=0x0000/0x1000,nw_frag=no,tp_dst=2",
        ),
        (
            "tcp,in_port=1,tp_dst=1",
            "drop",
            "recirc_id=0,tcp,in_port=1,vlan_tci=0x0000/0x1000,nw_frag=no,tp_dst=1",
        ),
        ("arp,in_port=2", "drop", "recirc_id=0,arp,in_port=2,vlan_tci=0x0000/0x1000"),
    ] {
        let tr = run(&p, packet);
        let k = hyflow::openflow::parse_packet(packet).unwrap();
        assert_eq!(hyflow::openflow::dp_actions::format_dp_actions(&tr.dp_actions, &k), dp, "{packet}");
        assert_eq!(megaflow(&tr), mf, "{packet}");
    }
    let rule = &hyflow::openflow::parse_flows("ip actions=output:reg1[0..15]", "f").unwrap()[0];
    assert_eq!(hyflow::openflow::action::format_actions(&rule.actions), "output:reg1[0..15]");
}

/// Checked against Open vSwitch 4.0.90: ARP rewrites and ICMP type/code rewrites are datapath
/// actions OVS slow-paths (`SLOW_ACTION`), an ICMP set is unmasked (type and code together,
/// both pinned in the megaflow); such decisions are never cached.
#[test]
fn arp_and_icmp_rewrites_stay_in_the_slow_path() {
    let p = pipeline(
        "priority=10,arp,arp_op=1 actions=set_field:2->arp_op,set_field:10.0.0.9->arp_spa,output:2\n\
         priority=10,icmp,icmp_type=8 actions=set_field:0->icmp_type,output:2\n\
         priority=10,icmp,icmp_type=3 actions=set_field:9->icmp_code,output:3\n\
         priority=5,icmp actions=output:4\n",
    );
    for (packet, dp, mf, slow) in [
        (
            "arp,in_port=1,arp_op=1,arp_spa=10.0.0.1,arp_tpa=10.0.0.2",
            "set(arp(sip=10.0.0.9,op=2)),2",
            "recirc_id=0,arp,in_port=1,vlan_tci=0x0000/0x1000,arp_spa=10.0.0.1,arp_op=1",
            true,
        ),
        (
            "icmp,in_port=1,icmp_type=8,icmp_code=0,nw_src=10.0.0.1",
            "set(icmp(type=0,code=0)),2",
            "recirc_id=0,icmp,in_port=1,vlan_tci=0x0000/0x1000,nw_frag=no,icmp_type=8,icmp_code=0",
            true,
        ),
        (
            "icmp,in_port=1,icmp_type=3,icmp_code=1",
            "set(icmp(type=3,code=9)),3",
            "recirc_id=0,icmp,in_port=1,vlan_tci=0x0000/0x1000,nw_frag=no,icmp_type=3,icmp_code=1",
            true,
        ),
        (
            "icmp,in_port=1,icmp_type=0,icmp_code=0",
            "4",
            "recirc_id=0,icmp,in_port=1,vlan_tci=0x0000/0x1000,nw_frag=no,icmp_type=0x0/0xfe",
            false,
        ),
    ] {
        let tr = run(&p, packet);
        let k = parse_packet(packet).unwrap();
        assert_eq!(hyflow::openflow::dp_actions::format_dp_actions(&tr.dp_actions, &k), dp, "{packet}");
        assert_eq!(megaflow(&tr), mf, "{packet}");
        assert_eq!(tr.slow_path_only(), slow, "{packet}");
    }
}

/// `xreg` and `xxreg` (OVN's wide registers) are views of the registers, high register
/// first: matched, set, loaded, moved and output as OVS does (the datapath actions and
/// megaflows below are Open vSwitch 4.0.90's `ofproto/trace` for these flows).
#[test]
fn wide_registers_are_views_of_the_registers() {
    let p = pipeline(
        "table=0,priority=10,ip actions=load:0x1->NXM_NX_REG0[],load:0x2->NXM_NX_REG1[],resubmit(,1)\n\
         table=1,priority=20,xreg0=0x100000002 actions=set_field:0xa0000000000000000000000000000004->xxreg1,resubmit(,2)\n\
         table=1,priority=0 actions=output:1\n\
         table=2,priority=20,tcp,reg4=0xa0000000,reg7=4 actions=move:NXM_NX_XXREG1[0..31]->NXM_OF_IP_DST[],\
         output:NXM_NX_REG7[0..15],load:0x3->OXM_OF_PKT_REG3[0..15],output:OXM_OF_PKT_REG3[0..15],\
         move:NXM_NX_XXREG0[64..79]->NXM_OF_TCP_DST[],output:2\n\
         table=2,priority=0 actions=output:4\n",
    );
    for (packet, dp, mf) in [
        (
            "in_port=1,tcp,nw_dst=10.0.0.1",
            "set(ipv4(dst=0.0.0.4)),4,3,set(tcp(dst=2)),2",
            "recirc_id=0,tcp,in_port=1,vlan_tci=0x0000/0x1000,nw_dst=10.0.0.1,nw_frag=no,tp_dst=0",
        ),
        ("in_port=1,udp,nw_dst=10.0.0.1", "4", "recirc_id=0,udp,in_port=1,vlan_tci=0x0000/0x1000,nw_frag=no"),
    ] {
        let tr = run(&p, packet);
        let k = hyflow::openflow::parse_packet(packet).unwrap();
        assert_eq!(hyflow::openflow::dp_actions::format_dp_actions(&tr.dp_actions, &k), dp, "{packet}");
        assert_eq!(megaflow(&tr), mf, "{packet}");
    }
    // Rules match them as their registers and print them so, as OVS.
    let rule = &hyflow::openflow::parse_flows(
        "xxreg1=0x10000000200000003/0xffffffffffffffffffffffff actions=drop",
        "f",
    )
    .unwrap()[0];
    assert_eq!(rule.to_string(), "table=0,priority=32768,reg5=0x1,reg6=0x2,reg7=0x3 actions=drop");
}
