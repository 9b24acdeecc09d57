//! The five reference pipelines of the Gigaflow paper (Table 1) as Pipebench templates,
//! modelled from their public documentation (see `docs/pipelines.md`). Stateful pieces
//! (conntrack) become stateless tables on the fields the state is derived from.

use super::pipebench::{Part, StepSpec, TableSpec, Template, TraversalSpec};

const fn step(table: u8, state: &'static str, actions: &'static str) -> StepSpec {
    StepSpec { table, state, actions }
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

use Part::*;

/// PSC: the L2L3-ACL pipeline PISCES (SIGCOMM'16) benchmarks on OVS.
pub const PSC: Template = Template {
    name: "psc",
    description: "PISCES L2L3-ACL: VLAN ingress, MAC learning check, L2 forwarding or routing, ACL",
    tables: &[
        table(0, "ingress VLAN", &[Vlan], "drop", false),
        table(1, "source MAC (learning)", &[DlSrc], "goto_table:2", false),
        table(2, "router MAC", &[DlDst], "goto_table:5", false),
        table(3, "IPv4 routing", &[NwDst], "drop", true),
        table(4, "next hop (ARP)", &[NwDst], "drop", false),
        table(5, "L2 forwarding", &[DlDst, Vlan], "drop", false),
        table(6, "ACL", &[NwSrc, NwDst, Proto, TpSrc, TpDst], "drop", false),
    ],
    traversals: &[
        TraversalSpec {
            name: "routed IPv4",
            steps: &[
                step(0, "", ""),
                step(1, "", ""),
                step(2, "", ""),
                step(3, "", "dec_ttl,load:1->NXM_NX_REG1[]"),
                step(4, "reg1=1", "mod_dl_src:02:00:00:00:ff:fe"),
                step(6, "", ""),
            ],
            terminal: "output",
        },
        TraversalSpec {
            name: "bridged",
            steps: &[step(0, "", ""), step(1, "", ""), step(2, "", ""), step(5, "", ""), step(6, "", "")],
            terminal: "output",
        },
    ],
};

/// Every template, by name.
pub const ALL: [&Template; 1] = [&PSC];

/// The template with this name.
pub fn by_name(name: &str) -> Option<&'static Template> {
    ALL.iter().copied().find(|t| t.name == name)
}
