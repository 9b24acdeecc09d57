//! Gigaflow's reference pipelines (Table 1) as Pipebench templates, modelled from their
//! public documentation: `docs/pipelines-ofd-psc-otl.md` and `docs/pipelines-ols-ant.md` say
//! which tables, fields and traversals each has and where it comes from. Traversal lists are
//! the IPv4 classes of those documents (the generated traffic is IPv4).
//!
//! What the model cannot carry is replaced by stand-ins, all stateless: groups become a
//! pending output port in `reg1` and an egress table 250 that outputs on it (not counted
//! among the pipeline's tables, as in the paper), next-hop rewrites move into the routing
//! rule; flooding becomes a drop; MPLS labels and
//! the inner tag of a pseudowire, which the generated IPv4 traffic does not carry, become the
//! destination address and registers set by the earlier tables; conntrack state becomes a
//! register (OLS `reg11`, ANT `reg10`) that a table sets from the packet's fields, NAT a
//! rewrite. Controller punts (MAC learning misses) become drops. Only IPv4 classes of traffic
//! are generated, so traversals of control frames, ARP, DHCP, DNS and IPv6 exist in the
//! documents but not in the templates.

use super::pipebench::{Part, StepSpec, TableSpec, Template, TraversalSpec};

use Part::*;

const fn step(table: u8, state: &'static str, actions: &'static str) -> StepSpec {
    StepSpec { table, state, actions, miss: false }
}

/// A table the traversal passes through its miss rule.
const fn miss(table: u8) -> StepSpec {
    StepSpec { table, state: "", actions: "", miss: true }
}

const fn table(
    id: u8,
    name: &'static str,
    parts: &'static [Part],
    miss: &'static str,
    lpm: bool,
) -> TableSpec {
    TableSpec { id, name, parts, miss, lpm }
}

const FIVE_TUPLE: &[Part] = &[NwSrc, NwDst, Proto, TpSrc, TpDst];

/// Egress stand-in for groups: output on the pending port.
const EGRESS: TableSpec = table(250, "egress (group stand-in)", &[], "drop", false);

/// OFD's ingress (port, VLAN with the VRF in metadata) and its egress (ACL, group stand-in).
const OFD_IN: &[StepSpec] = &[step(0, "", ""), step(10, "", "write_metadata:{vrf}/0xffff")];
const OFD_OUT: &[StepSpec] = &[step(60, "", ""), step(250, "reg1={port}", "")];

/// OFD: Broadcom OF-DPA 2.0 as programmed by ONOS/CORD (10 tables, 5 traversals).
pub(crate) const OFD: Template = Template {
    name: "ofd",
    description: "OF-DPA 2.0 (ONOS/CORD): ingress port, VLAN, VLAN 1, MPLS L2 port, termination MAC, \
                  MPLS, unicast and multicast routing, bridging, policy ACL",
    tables: &[
        table(0, "Ingress Port", &[InPort], "goto_table:10", false),
        table(10, "VLAN", &[InPort, Vlan], "drop", false),
        table(11, "VLAN 1", &[InPort], "drop", false),
        table(13, "MPLS L2 Port", &[], "drop", false),
        table(20, "Termination MAC", &[InPort, RouterMac], "goto_table:50", false),
        table(23, "MPLS (label stand-in: nw_dst)", &[NwDst], "drop", false),
        table(30, "Unicast Routing", &[NwDst], "goto_table:60", true),
        table(40, "Multicast Routing", &[Vlan, NwDst], "goto_table:60", false),
        table(50, "Bridging", &[DlDst, Vlan], "goto_table:60", false),
        table(60, "Policy ACL", FIVE_TUPLE, "goto_table:250", false),
        EGRESS,
    ],
    traversals: &[
        TraversalSpec {
            name: "bridged L2",
            steps: &[OFD_IN, &[miss(20), step(50, "", "load:{port}->NXM_NX_REG1[]")], OFD_OUT],
            terminal: "output",
        },
        TraversalSpec {
            name: "routed IPv4 unicast",
            steps: &[
                OFD_IN,
                &[
                    step(20, "", ""),
                    step(
                        30,
                        "metadata={vrf}/0xffff",
                        "dec_ttl,mod_dl_src:02:00:00:00:ff:fe,mod_dl_dst:{mac},load:{port}->NXM_NX_REG1[]",
                    ),
                ],
                OFD_OUT,
            ],
            terminal: "output",
        },
        TraversalSpec {
            name: "routed IPv4 multicast",
            steps: &[
                OFD_IN,
                &[step(20, "", ""), step(40, "metadata={vrf}/0xffff", "load:{port}->NXM_NX_REG1[]")],
                OFD_OUT,
            ],
            terminal: "output",
        },
        TraversalSpec {
            name: "MPLS segment routing (label stand-in)",
            steps: &[
                OFD_IN,
                &[step(20, "", ""), step(23, "", "dec_ttl,load:{port}->NXM_NX_REG1[]")],
                OFD_OUT,
            ],
            terminal: "output",
        },
        TraversalSpec {
            name: "double-tagged pseudowire (inner tag stand-in)",
            steps: &[
                &[
                    step(0, "", ""),
                    step(10, "", "load:{vlan}->NXM_NX_REG2[],load:1->NXM_NX_REG3[]"),
                    step(11, "reg2={vlan}", "load:{port}->NXM_NX_REG4[]"),
                    step(13, "reg3=1,reg4={port}", "load:{port}->NXM_NX_REG1[]"),
                ],
                OFD_OUT,
            ],
            terminal: "output",
        },
    ],
    sequential: false,
};

/// PSC's VLAN ingress and MAC learning, and its switching, ACL and VLAN egress.
const PSC_IN: &[StepSpec] = &[step(1, "", "load:{port}->NXM_NX_REG1[]"), step(2, "", "")];
const PSC_OUT: &[StepSpec] =
    &[step(5, "", "move:NXM_NX_REG1[]->NXM_NX_REG0[]"), step(6, "", ""), step(7, "reg0={port}", "pop_vlan")];

/// PSC: the L2L3-ACL pipeline PISCES (SIGCOMM'16) benchmarks, as its OVS-native flows
/// (7 tables, 2 traversals: switched and routed).
pub const PSC: Template = Template {
    name: "psc",
    description:
        "PISCES l2l3_acl: VLAN ingress, MAC learning, routable, routing, switching, ACL, VLAN egress",
    tables: &[
        table(0, "verify checksum (glue, not counted)", &[], "goto_table:1", false),
        table(1, "vlan_ingress_proc", &[InPort, Vlan], "drop", false),
        table(2, "mac_learning", &[DlSrc], "drop", false),
        table(3, "routable", &[DlSrc, RouterMac, Vlan], "goto_table:5", false),
        table(4, "routing", &[NwDst], "drop", true),
        table(5, "switching", &[DlDst, Vlan], "drop", false),
        table(6, "acl", FIVE_TUPLE, "goto_table:7", false),
        table(7, "vlan_egress_proc", &[], "drop", false),
    ],
    traversals: &[
        TraversalSpec { name: "switched", steps: &[PSC_IN, &[miss(3)], PSC_OUT], terminal: "output" },
        TraversalSpec {
            name: "routed IPv4",
            steps: &[
                PSC_IN,
                &[
                    step(3, "", ""),
                    step(4, "", "mod_dl_src:02:00:00:00:ff:fe,mod_dl_dst:{mac},mod_vlan_vid:{vlan},dec_ttl"),
                ],
                PSC_OUT,
            ],
            terminal: "output",
        },
    ],
    sequential: false,
};

/// OTL's control-frame check, ingress VLAN and MAC learning.
const OTL_IN: &[StepSpec] = &[miss(0), step(10, "", ""), step(20, "", "")];

/// OTL: the ONF Table Type Patterns example "L2-L3-ACLs" (8 tables).
pub(crate) const OTL: Template = Template {
    name: "otl",
    description:
        "ONF TTP L2-L3-ACLs: control frames, ingress VLAN, MAC learning, ACL, L2, protocol filter, IPv4, IPv6",
    tables: &[
        table(0, "ControlFrame", &[], "goto_table:10", false),
        table(10, "IngressVLAN", &[InPort, Vlan], "drop", false),
        table(20, "MacLearning", &[DlSrc, Vlan], "goto_table:30", false),
        table(30, "ACL", FIVE_TUPLE, "goto_table:40", false),
        table(40, "L2", &[DlDst, Vlan], "drop", false),
        table(50, "ProtoFilter", &[], "drop", false),
        table(60, "IPv4", &[NwDst], "drop", true),
        table(80, "IPv6", &[], "drop", false),
        EGRESS,
    ],
    traversals: &[
        TraversalSpec { name: "ACL deny", steps: &[OTL_IN, &[step(30, "", "")]], terminal: "drop" },
        TraversalSpec {
            name: "L2 unicast",
            steps: &[
                OTL_IN,
                &[step(30, "", ""), step(40, "", "load:{port}->NXM_NX_REG1[]"), step(250, "reg1={port}", "")],
            ],
            terminal: "output",
        },
        TraversalSpec {
            name: "L2 drop",
            steps: &[OTL_IN, &[step(30, "", ""), step(40, "", "")]],
            terminal: "drop",
        },
        TraversalSpec {
            name: "unknown unicast (flood stand-in: drop)",
            steps: &[OTL_IN, &[step(30, "", ""), miss(40)]],
            terminal: "drop",
        },
        TraversalSpec {
            name: "routed IPv4",
            steps: &[
                OTL_IN,
                &[
                    step(30, "", ""),
                    step(40, "", ""),
                    step(50, "ip", ""),
                    step(
                        60,
                        "",
                        "mod_dl_src:02:00:00:00:ff:fe,mod_dl_dst:{mac},dec_ttl,load:{port}->NXM_NX_REG1[]",
                    ),
                    step(250, "reg1={port}", ""),
                ],
            ],
            terminal: "output",
        },
    ],
    sequential: false,
};

const fn next(id: u8, name: &'static str, parts: &'static [Part]) -> TableSpec {
    // OVN stages continue to the next stage on a miss.
    table(id, name, parts, NEXT_STAGE[id as usize], false)
}

/// `goto_table:N+1` for each OVN ingress stage N.
const NEXT_STAGE: [&str; 30] = [
    "goto_table:1",
    "goto_table:2",
    "goto_table:3",
    "goto_table:4",
    "goto_table:5",
    "goto_table:6",
    "goto_table:7",
    "goto_table:8",
    "goto_table:9",
    "goto_table:10",
    "goto_table:11",
    "goto_table:12",
    "goto_table:13",
    "goto_table:14",
    "goto_table:15",
    "goto_table:16",
    "goto_table:17",
    "goto_table:18",
    "goto_table:19",
    "goto_table:20",
    "goto_table:21",
    "goto_table:22",
    "goto_table:23",
    "goto_table:24",
    "goto_table:25",
    "goto_table:26",
    "goto_table:27",
    "goto_table:28",
    "goto_table:29",
    "drop",
];

/// Conntrack stand-in for OLS: `reg11` holds a ct_state (0x21 trk+new, 0x22 trk+est).
const CT_NEW: &str = "load:0x21->NXM_NX_REG11[]";
const CT_EST: &str = "load:0x22->NXM_NX_REG11[]";

/// OLS: L2 lookup to a known MAC.
const OLS_L2: &[StepSpec] = &[step(28, "", "load:{port}->NXM_NX_REG15[]")];
/// OLS: port security, then a new connection through conntrack and the ACL hint.
const OLS_CT_NEW: &[StepSpec] = &[
    step(0, "", ""),
    step(4, "ip", "load:1->NXM_NX_REG0[0]"),
    step(6, "reg0=0x1/0x1", CT_NEW),
    step(7, "reg11=0x21/0x21", "load:1->NXM_NX_REG0[7]"),
];
/// OLS: port security, then a new connection to a load-balancer VIP.
const OLS_LB: &[StepSpec] =
    &[step(0, "", ""), step(5, "ip", "load:1->NXM_NX_REG0[2]"), step(6, "reg0=0x4/0x4", CT_NEW)];

/// OLS: the OVN logical switch ingress pipeline (OVN 24.09: 30 stages, stage N in table N).
/// Every stage continues to the next (`next;`), so traversals differ by the stages that hit.
pub(crate) const OLS: Template = Template {
    name: "ols",
    description:
        "OVN logical switch ingress pipeline (30 stages): port security, FDB, pre-ACL/LB, conntrack, \
                  ACLs, QoS, load balancing, hairpin, stateful, ARP/DHCP/DNS responders, L2 lookup",
    tables: &[
        next(0, "ls_in_check_port_sec", &[InPort, DlSrc, NwSrc]),
        next(1, "ls_in_apply_port_sec", &[]),
        next(2, "ls_in_lookup_fdb", &[InPort]),
        next(3, "ls_in_put_fdb", &[InPort]),
        next(4, "ls_in_pre_acl", &[]),
        next(5, "ls_in_pre_lb", &[]),
        next(6, "ls_in_pre_stateful (ct stand-in)", &[NwDst, Proto, TpDst]),
        next(7, "ls_in_acl_hint", &[]),
        next(8, "ls_in_acl_eval", FIVE_TUPLE),
        next(9, "ls_in_acl_sample", &[]),
        next(10, "ls_in_acl_action", &[]),
        next(11, "ls_in_qos", &[NwSrc, NwDst, Proto, TpDst]),
        next(12, "ls_in_lb_aff_check", &[]),
        next(13, "ls_in_lb", &[NwDst, Proto, TpDst]),
        next(14, "ls_in_lb_aff_learn", &[]),
        next(15, "ls_in_pre_hairpin", &[]),
        next(16, "ls_in_nat_hairpin", &[]),
        next(17, "ls_in_hairpin", &[]),
        next(18, "ls_in_acl_after_lb_eval", &[]),
        next(19, "ls_in_acl_after_lb_sample", &[]),
        next(20, "ls_in_acl_after_lb_action", &[]),
        next(21, "ls_in_stateful", &[]),
        next(22, "ls_in_arp_rsp", &[]),
        next(23, "ls_in_dhcp_options", &[]),
        next(24, "ls_in_dhcp_response", &[]),
        next(25, "ls_in_dns_lookup", &[]),
        next(26, "ls_in_dns_response", &[]),
        next(27, "ls_in_external_port", &[]),
        next(28, "ls_in_l2_lkup", &[DlDst]),
        next(29, "ls_in_l2_unknown", &[]),
    ],
    traversals: &[
        TraversalSpec {
            name: "unicast to a known MAC, no ACL or LB",
            steps: &[&[step(0, "", "")], OLS_L2],
            terminal: "output",
        },
        TraversalSpec {
            name: "unicast to an unknown MAC",
            steps: &[&[step(0, "", ""), step(29, "reg15=0", "")]],
            terminal: "drop",
        },
        TraversalSpec {
            name: "first frame from a MAC-learning port",
            steps: &[
                &[step(0, "", ""), step(2, "", "load:0->NXM_NX_REG0[11]"), step(3, "reg0=0/0x800", "")],
                OLS_L2,
            ],
            terminal: "output",
        },
        TraversalSpec {
            name: "new connection allowed by an ACL",
            steps: &[
                OLS_CT_NEW,
                &[
                    step(8, "reg0=0x80/0x80", "load:1->NXM_NX_REG8[16],load:1->NXM_NX_REG0[1]"),
                    step(10, "reg8=0x10000/0x10000", ""),
                    step(21, "reg0=0x2/0x2", "load:1->NXM_NX_REG12[0]"),
                ],
                OLS_L2,
            ],
            terminal: "output",
        },
        TraversalSpec {
            name: "established packet of an allowed connection",
            steps: &[
                &[
                    step(0, "", ""),
                    step(4, "ip", "load:1->NXM_NX_REG0[0]"),
                    step(6, "reg0=0x1/0x1", CT_EST),
                    step(7, "reg11=0x22/0x22", "load:1->NXM_NX_REG0[8]"),
                    step(8, "reg0=0x100/0x100", "load:1->NXM_NX_REG8[16]"),
                    step(10, "reg8=0x10000/0x10000", ""),
                ],
                OLS_L2,
            ],
            terminal: "output",
        },
        TraversalSpec {
            name: "new connection matching a drop ACL",
            steps: &[
                OLS_CT_NEW,
                &[step(8, "reg0=0x80/0x80", "load:1->NXM_NX_REG8[17]"), step(10, "reg8=0x20000/0x20000", "")],
            ],
            terminal: "drop",
        },
        TraversalSpec {
            name: "QoS-marked flow",
            steps: &[&[step(0, "", ""), step(11, "", "mod_nw_tos:40")], OLS_L2],
            terminal: "output",
        },
        TraversalSpec {
            name: "new connection to a load-balancer VIP",
            steps: &[
                OLS_LB,
                &[
                    step(7, "reg11=0x21/0x21", "load:1->NXM_NX_REG0[7]"),
                    step(13, "reg11=0x21/0x21", "mod_nw_dst:10.63.0.1,load:1->NXM_NX_REG0[1]"),
                    step(21, "reg0=0x2/0x2", "load:1->NXM_NX_REG12[0]"),
                ],
                OLS_L2,
            ],
            terminal: "output",
        },
        TraversalSpec {
            name: "load-balancer hairpin (backend to its own VIP)",
            steps: &[
                OLS_LB,
                &[
                    step(13, "reg11=0x21/0x21", "mod_nw_dst:10.63.0.2,load:1->NXM_NX_REG0[6]"),
                    step(16, "reg0=0x40/0x40", "mod_nw_src:10.63.0.3"),
                    step(17, "reg0=0x40/0x40", ""),
                ],
            ],
            terminal: "in_port",
        },
    ],
    sequential: true,
};

/// Conntrack stand-in for ANT: `reg10` holds a ct_state (0x21 trk+new, 0x22 trk+est).
const ANT_NEW: &str = "load:0x21->NXM_NX_REG10[]";

/// ANT: root classifier, classifier (from a local Pod), spoof guard, UnSNAT miss.
const ANT_IN: &[StepSpec] =
    &[step(0, "ip", ""), step(3, "", "load:3->NXM_NX_REG0[0..3]"), step(4, "", ""), miss(5)];
/// ANT: the same, then a new connection.
const ANT_NEW_IN: &[StepSpec] = &[
    step(0, "ip", ""),
    step(3, "", "load:3->NXM_NX_REG0[0..3]"),
    step(4, "", ""),
    miss(5),
    step(7, "", ANT_NEW),
];
/// ANT: no session affinity, Service or endpoint DNAT.
const ANT_NO_SERVICE: &[StepSpec] = &[miss(10), miss(11), miss(12)];
/// ANT: no egress policy decides.
const ANT_NO_EGRESS_POLICY: &[StepSpec] = &[miss(13), miss(14), miss(15)];
/// ANT: L3 forwarding to a local Pod, L2 forwarding, ingress classification.
const ANT_LOCAL: &[StepSpec] = &[
    step(17, "", "mod_dl_src:aa:bb:cc:dd:ee:01,mod_dl_dst:{mac},load:3->NXM_NX_REG0[4..7]"),
    step(22, "", "load:{port}->NXM_NX_REG1[]"),
    step(24, "reg0=0x30/0xf0", ""),
];
/// ANT: no ingress policy decides.
const ANT_NO_INGRESS_POLICY: &[StepSpec] = &[miss(25), miss(26), miss(27)];
/// ANT: output on the computed port.
const ANT_OUT: &[StepSpec] = &[step(30, "reg1={port}", "")];

/// ANT: Antrea's OVS pipeline (v1.15 design document), the 22 tables that match headers or
/// decide (conntrack-only, metric and optional-feature tables folded into their successors).
pub(crate) const ANT: Template = Template {
    name: "ant",
    description: "Antrea OVS pipeline: root classifier, ARP spoof guard/responder, classifier, spoof guard, \
                  conntrack state, session affinity, service LB, endpoint DNAT, egress/ingress policy, \
                  L3 forwarding, SNAT, L2 forwarding, output",
    tables: &[
        table(0, "PipelineRootClassifier", &[], "drop", false),
        table(1, "ARPSpoofGuard", &[InPort, NwSrc, DlSrc], "drop", false),
        table(2, "ARPResponder", &[Proto, NwDst], "drop", false),
        table(3, "Classifier", &[InPort], "drop", false),
        table(4, "SpoofGuard", &[InPort, DlSrc, NwSrc], "drop", false),
        table(5, "UnSNAT", &[NwDst], "goto_table:7", false),
        table(7, "ConntrackState (ct stand-in)", &[Proto, TpSrc, TpDst], "goto_table:10", false),
        table(10, "SessionAffinity", &[NwSrc, NwDst, Proto, TpDst], "goto_table:11", false),
        table(11, "ServiceLB", &[NwDst, Proto, TpDst], "goto_table:12", false),
        table(12, "EndpointDNAT", &[], "goto_table:13", false),
        table(13, "AntreaPolicyEgressRule", &[NwSrc, NwDst, Proto, TpDst], "goto_table:14", false),
        table(14, "EgressRule", &[NwSrc, NwDst, TpDst], "goto_table:15", false),
        table(15, "EgressDefaultRule", &[NwSrc], "goto_table:17", false),
        table(17, "L3Forwarding", &[NwDst], "goto_table:22", true),
        table(20, "SNATMark", &[NwSrc, NwDst], "goto_table:21", false),
        table(21, "SNAT", &[], "goto_table:22", false),
        table(22, "L2ForwardingCalc", &[DlDst], "goto_table:24", false),
        table(24, "IngressSecurityClassifier", &[], "goto_table:25", false),
        table(25, "AntreaPolicyIngressRule", &[NwSrc, DlDst, Proto, TpDst], "goto_table:26", false),
        table(26, "IngressRule", &[NwSrc, TpDst], "goto_table:27", false),
        table(27, "IngressDefaultRule", &[DlDst], "goto_table:30", false),
        table(30, "Output", &[], "drop", false),
    ],
    traversals: &[
        TraversalSpec {
            name: "Pod to Pod on the same Node, new connection",
            steps: &[ANT_NEW_IN, ANT_NO_SERVICE, ANT_NO_EGRESS_POLICY, ANT_LOCAL, ANT_NO_INGRESS_POLICY, ANT_OUT],
            terminal: "output",
        },
        TraversalSpec {
            name: "established connection",
            steps: &[
                ANT_IN,
                &[step(7, "", "load:0x22->NXM_NX_REG10[]"), step(13, "reg10=0x22", "")],
                ANT_LOCAL,
                &[step(25, "reg10=0x22", "")],
                ANT_OUT,
            ],
            terminal: "output",
        },
        TraversalSpec {
            name: "Pod to remote Pod (tunnel), new connection",
            steps: &[
                ANT_NEW_IN,
                ANT_NO_SERVICE,
                ANT_NO_EGRESS_POLICY,
                &[
                    step(17, "", "mod_dl_src:aa:bb:cc:dd:ee:01,mod_dl_dst:aa:bb:cc:dd:ee:ff,load:1->NXM_NX_REG0[4..7],dec_ttl"),
                    step(20, "", ""),
                    step(21, "", ""),
                    step(22, "", "load:{port}->NXM_NX_REG1[]"),
                    step(24, "reg0=0x10/0xf0", ""),
                ],
                ANT_OUT,
            ],
            terminal: "output",
        },
        TraversalSpec {
            name: "Pod to ClusterIP Service, first packet",
            steps: &[
                ANT_NEW_IN,
                &[
                    miss(10),
                    step(11, "reg10=0x21", "load:{port}->NXM_NX_REG4[0..15],load:2->NXM_NX_REG4[16..18]"),
                    step(12, "reg4=0x20000/0x70000", "mod_nw_dst:10.63.1.1,load:1->NXM_NX_REG11[4]"),
                ],
                ANT_NO_EGRESS_POLICY,
                &[
                    step(17, "", "mod_dl_src:aa:bb:cc:dd:ee:01,mod_dl_dst:{mac},load:3->NXM_NX_REG0[4..7]"),
                    step(20, "", ""),
                    step(21, "", ""),
                    step(22, "", "load:{port}->NXM_NX_REG1[]"),
                    step(24, "reg0=0x30/0xf0", ""),
                ],
                ANT_NO_INGRESS_POLICY,
                ANT_OUT,
            ],
            terminal: "output",
        },
        TraversalSpec {
            name: "hairpin: Pod to a Service backed by itself",
            steps: &[
                ANT_NEW_IN,
                &[
                    miss(10),
                    step(11, "reg10=0x21", "load:{port}->NXM_NX_REG4[0..15],load:2->NXM_NX_REG4[16..18]"),
                    step(12, "reg4=0x20000/0x70000", "load:1->NXM_NX_REG11[4]"),
                ],
                ANT_NO_EGRESS_POLICY,
                &[
                    step(17, "", "load:3->NXM_NX_REG0[4..7]"),
                    step(20, "", "load:1->NXM_NX_REG11[6]"),
                    step(21, "reg11=0x40/0x40", "mod_nw_src:10.63.0.254"),
                    step(22, "", "load:{port}->NXM_NX_REG1[]"),
                    step(24, "reg11=0x40/0x40", ""),
                    step(30, "reg11=0x40/0x40", ""),
                ],
            ],
            terminal: "in_port",
        },
        TraversalSpec {
            name: "Antrea-native egress Drop rule",
            steps: &[ANT_NEW_IN, ANT_NO_SERVICE, &[step(13, "", "")]],
            terminal: "drop",
        },
        TraversalSpec {
            name: "Kubernetes NetworkPolicy egress default deny",
            steps: &[ANT_NEW_IN, ANT_NO_SERVICE, &[miss(13), miss(14), step(15, "", "")]],
            terminal: "drop",
        },
        TraversalSpec {
            name: "Kubernetes NetworkPolicy ingress allow",
            steps: &[
                ANT_NEW_IN,
                ANT_NO_SERVICE,
                ANT_NO_EGRESS_POLICY,
                ANT_LOCAL,
                &[miss(25), step(26, "", "load:{port}->NXM_NX_REG6[]")],
                ANT_OUT,
            ],
            terminal: "output",
        },
        TraversalSpec {
            name: "Kubernetes NetworkPolicy ingress default deny",
            steps: &[
                ANT_NEW_IN,
                ANT_NO_SERVICE,
                ANT_NO_EGRESS_POLICY,
                ANT_LOCAL,
                &[miss(25), miss(26), step(27, "", "")],
            ],
            terminal: "drop",
        },
    ],
    sequential: false,
};

/// Every template, in the paper's order.
pub const ALL: [&Template; 5] = [&OFD, &PSC, &OLS, &ANT, &OTL];

/// The template with this name.
pub fn by_name(name: &str) -> Option<&'static Template> {
    ALL.iter().copied().find(|t| t.name == name)
}
