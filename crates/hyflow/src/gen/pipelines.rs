//! Gigaflow's reference pipelines (Table 1) as Pipebench templates, modelled from their
//! public documentation: `docs/pipelines-ofd-psc-otl.md` says which tables, fields and
//! traversals each has and where it comes from.
//!
//! What the model cannot carry is replaced by stand-ins, all stateless: groups become a
//! pending output port in `reg1` and an egress table 250 that outputs on it (not counted
//! among the pipeline's tables, as in the paper), next-hop rewrites move into the routing
//! rule; flooding becomes a drop; MPLS labels and
//! the inner tag of a pseudowire, which the generated IPv4 traffic does not carry, become the
//! destination address and registers set by the earlier tables. Controller punts (MAC
//! learning misses) become drops. Only IPv4 classes of traffic are generated, so traversals
//! of control frames, ARP and IPv6 exist in the tables but are not exercised.

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

/// OFD: Broadcom OF-DPA 2.0 as programmed by ONOS/CORD (10 tables, 5 traversals).
pub const OFD: Template = Template {
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
            steps: &[
                step(0, "", ""),
                step(10, "", "write_metadata:{vrf}/0xffff"),
                miss(20),
                step(50, "", "load:{port}->NXM_NX_REG1[]"),
                step(60, "", ""),
                step(250, "reg1={port}", ""),
            ],
            terminal: "output",
        },
        TraversalSpec {
            name: "routed IPv4 unicast",
            steps: &[
                step(0, "", ""),
                step(10, "", "write_metadata:{vrf}/0xffff"),
                step(20, "", ""),
                step(
                    30,
                    "metadata={vrf}/0xffff",
                    "dec_ttl,mod_dl_src:02:00:00:00:ff:fe,mod_dl_dst:{mac},load:{port}->NXM_NX_REG1[]",
                ),
                step(60, "", ""),
                step(250, "reg1={port}", ""),
            ],
            terminal: "output",
        },
        TraversalSpec {
            name: "routed IPv4 multicast",
            steps: &[
                step(0, "", ""),
                step(10, "", "write_metadata:{vrf}/0xffff"),
                step(20, "", ""),
                step(40, "metadata={vrf}/0xffff", "load:{port}->NXM_NX_REG1[]"),
                step(60, "", ""),
                step(250, "reg1={port}", ""),
            ],
            terminal: "output",
        },
        TraversalSpec {
            name: "MPLS segment routing (label stand-in)",
            steps: &[
                step(0, "", ""),
                step(10, "", "write_metadata:{vrf}/0xffff"),
                step(20, "", ""),
                step(23, "", "dec_ttl,load:{port}->NXM_NX_REG1[]"),
                step(60, "", ""),
                step(250, "reg1={port}", ""),
            ],
            terminal: "output",
        },
        TraversalSpec {
            name: "double-tagged pseudowire (inner tag stand-in)",
            steps: &[
                step(0, "", ""),
                step(10, "", "load:{vlan}->NXM_NX_REG2[],load:1->NXM_NX_REG3[]"),
                step(11, "reg2={vlan}", "load:{port}->NXM_NX_REG4[]"),
                step(13, "reg3=1,reg4={port}", "load:{port}->NXM_NX_REG1[]"),
                step(60, "", ""),
                step(250, "reg1={port}", ""),
            ],
            terminal: "output",
        },
    ],
};

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
        TraversalSpec {
            name: "switched",
            steps: &[
                step(1, "", "load:{port}->NXM_NX_REG1[]"),
                step(2, "", ""),
                miss(3),
                step(5, "", "move:NXM_NX_REG1[]->NXM_NX_REG0[]"),
                step(6, "", ""),
                step(7, "reg0={port}", "pop_vlan"),
            ],
            terminal: "output",
        },
        TraversalSpec {
            name: "routed IPv4",
            steps: &[
                step(1, "", "load:{port}->NXM_NX_REG1[]"),
                step(2, "", ""),
                step(3, "", ""),
                step(4, "", "mod_dl_src:02:00:00:00:ff:fe,mod_dl_dst:{mac},mod_vlan_vid:{vlan},dec_ttl"),
                step(5, "", "move:NXM_NX_REG1[]->NXM_NX_REG0[]"),
                step(6, "", ""),
                step(7, "reg0={port}", "pop_vlan"),
            ],
            terminal: "output",
        },
    ],
};

/// OTL: the ONF Table Type Patterns example "L2-L3-ACLs" (8 tables).
pub const OTL: Template = Template {
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
        TraversalSpec {
            name: "ACL deny",
            steps: &[miss(0), step(10, "", ""), step(20, "", ""), step(30, "", "")],
            terminal: "drop",
        },
        TraversalSpec {
            name: "L2 unicast",
            steps: &[
                miss(0),
                step(10, "", ""),
                step(20, "", ""),
                step(30, "", ""),
                step(40, "", "load:{port}->NXM_NX_REG1[]"),
                step(250, "reg1={port}", ""),
            ],
            terminal: "output",
        },
        TraversalSpec {
            name: "L2 drop",
            steps: &[miss(0), step(10, "", ""), step(20, "", ""), step(30, "", ""), step(40, "", "")],
            terminal: "drop",
        },
        TraversalSpec {
            name: "unknown unicast (flood stand-in: drop)",
            steps: &[miss(0), step(10, "", ""), step(20, "", ""), step(30, "", ""), miss(40)],
            terminal: "drop",
        },
        TraversalSpec {
            name: "routed IPv4",
            steps: &[
                miss(0),
                step(10, "", ""),
                step(20, "", ""),
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
            terminal: "output",
        },
    ],
};

/// Every template.
pub const ALL: [&Template; 3] = [&OFD, &PSC, &OTL];

/// The template with this name.
pub fn by_name(name: &str) -> Option<&'static Template> {
    ALL.iter().copied().find(|t| t.name == name)
}
