//! Flow files as operators have them: `ovs-ofctl dump-flows` output loads as it is (OVS ignores
//! the statistics on input so that dumps can be fed back), and tables and ports may be named
//! (`ovs-ofctl --names`), from name files or the flow file's own `table=N(name)`.

mod common;

use hyflow::openflow::{parse_flows, parse_flows_named, parse_packet_named, Names, Pipeline};

/// Rules as text, for comparing two parses.
fn shown(text: &str, names: &mut Names) -> Vec<String> {
    parse_flows_named(text, "f", names).unwrap().iter().map(|r| r.to_string()).collect()
}

#[test]
fn a_dump_with_statistics_and_flags_loads_as_the_same_rules() {
    let dump = "\
NXST_FLOW reply (xid=0x4):
 cookie=0x0, duration=12.345s, table=0, n_packets=10, n_bytes=980, idle_age=3, priority=100,ip,nw_dst=10.0.0.0/8 actions=resubmit(,1)
 cookie=0x7, duration=1.5s, table=1, n_packets=0, n_bytes=0, hard_age=2, send_flow_rem, reset_counts idle_timeout=10, priority=5,tcp,tp_dst=80 actions=output:2
 cookie=0x0, duration=0.1s, table=1, n_packets=3, n_bytes=180, check_overlap, importance=7, priority=0 actions=drop
OFPST_FLOW reply (OF1.3) (xid=0x2):
";
    let plain = "\
table=0,priority=100,ip,nw_dst=10.0.0.0/8 actions=resubmit(,1)
cookie=0x7,table=1,idle_timeout=10,priority=5,tcp,tp_dst=80 actions=output:2
table=1,priority=0 actions=drop
";
    let got = shown(dump, &mut Names::new());
    assert_eq!(got, shown(plain, &mut Names::new()));
    assert_eq!(got.len(), 3);
}

#[test]
fn names_resolve_as_ovs_ofctl_names_does() {
    // Open vSwitch's own test (tests/ofproto.at, "flow table names"), without its ct() rule.
    let mut names = Names::new();
    for (n, t) in [("zero", 0), ("one", 1), ("two", 2)] {
        names.add_table(n, t).unwrap();
    }
    for (n, p) in [("p1", 1), ("p2", 2), ("antrea-gw0", 3)] {
        names.add_port(n, p).unwrap();
    }
    let named = "\
table=zero in_port=p2 actions=p1,resubmit(,one)
table=one,in_port=p1,arp,actions=goto_table(two)
table=two,in_port=\"antrea-gw0\",ip actions=output:\"antrea-gw0\",LOCAL,resubmit(p1,zero)
table=\"two\",in_port=LOCAL actions=in_port
";
    let numbered = "\
in_port=2 actions=output:1,resubmit(,1)
table=1,in_port=1,arp,actions=goto_table:2
table=2,in_port=3,ip actions=output:3,output:65534,resubmit(1,0)
table=2,in_port=65534 actions=in_port
";
    assert_eq!(shown(named, &mut names), shown(numbered, &mut Names::new()));
    let k = parse_packet_named("in_port=\"antrea-gw0\",ip", &names).unwrap();
    assert_eq!(k.in_port(), 3);
}

#[test]
fn a_flow_file_names_its_own_tables() {
    let text = "\
table=0(Classifier),priority=10,ip actions=goto_table:Egress
table=Classifier,priority=0 actions=resubmit(,\"Egress\")
table=5(Egress) actions=drop
";
    let mut names = Names::new();
    let rules = parse_flows_named(text, "f", &mut names).unwrap();
    assert_eq!(rules.iter().map(|r| r.table).collect::<Vec<_>>(), [0, 0, 5]);
    // The declarations stay known, for the updates that go with the file.
    assert_eq!(names.table("Egress"), Some(5));
    assert_eq!(Pipeline::from_rules(rules).rules().count(), 3);
}

#[test]
fn unknown_and_conflicting_names_say_where() {
    let cases = [
        (
            "table=Egress actions=drop",
            "f:1:7: unknown table 'Egress' (no table names are known: give the number, declare it as \
             table=N(name) or give a table-names file) (at 'Egress')",
        ),
        ("in_port=uplink actions=drop", "f:1:9: unknown port 'uplink' (no port names are known: give the number or a port-names file) (at 'uplink')"),
        ("actions=output:\"gw\"", "f:1:16: unknown port '\"gw\"' (no port names are known: give the number or a port-names file) (at '\"gw\"')"),
        (
            "table=1(A) actions=drop\ntable=2(A) actions=drop",
            "f:2:9: table name 'A' is already table 1 (at 'A')",
        ),
        ("table=0(\"A) actions=drop", "f:1:9: unclosed quote (at '\"A')"),
        ("n_packets actions=drop", "f:1:1: n_packets needs a value (at 'n_packets')"),
    ];
    for (text, want) in cases {
        let e = parse_flows(text, "f").unwrap_err();
        assert_eq!(e.to_string(), want, "{text}");
    }
}

/// What Open vSwitch itself printed (`tests/data/ovs-names`): a `--names` dump, `ovs-ofctl show`
/// and `dump-table-features` load as they are, and every traced packet gets the outputs,
/// controller copies and megaflow that `ofproto/trace` gave.
#[test]
fn a_dump_from_open_vswitch_traces_as_open_vswitch_traced_it() {
    use hyflow::openflow::{read_flow_file_named, Traversal};
    use hyflow::packet::format::format_match;
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/ovs-names");
    let mut names = Names::new();
    names.read_ports(&dir.join("show.txt")).unwrap();
    names.read_tables(&dir.join("table-features.txt")).unwrap();
    let rules = read_flow_file_named(&dir.join("dump-names.txt"), &mut names).unwrap();
    assert_eq!(rules.len(), 7);
    let p = Pipeline::from_rules(rules);
    let cases: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("cases.json")).unwrap()).unwrap();
    let mut checked = 0;
    for case in cases["cases"].as_array().unwrap() {
        let packet = case["packet"].as_str().unwrap();
        let mut tr = Traversal::new();
        p.process(&parse_packet_named(packet, &names).unwrap(), &mut tr);
        let ports: Vec<u64> = tr.outputs.iter().map(|o| o.port as u64).collect();
        let want: Vec<u64> = case["ports"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect();
        assert_eq!(ports, want, "{packet}");
        assert_eq!(tr.to_controller as u64, case["controller"].as_u64().unwrap(), "{packet}");
        let megaflow = format_match(&tr.megaflow.value, &tr.megaflow.mask);
        assert_eq!(
            common::megaflow_tokens(&megaflow),
            common::megaflow_tokens(case["megaflow"].as_str().unwrap()),
            "{packet}"
        );
        checked += 1;
    }
    assert_eq!(checked, 5);
}

/// As OVS, a word is an action's name before it is a port's: a port named `drop` is reached
/// with `output:drop`, while a bare `drop` drops.
#[test]
fn action_names_come_before_port_names() {
    let mut names = Names::new();
    names.add_port("drop", 5).unwrap();
    names.add_port("uplink", 6).unwrap();
    let p = Pipeline::from_rules(
        parse_flows_named("in_port=1 actions=drop\nin_port=2 actions=output:drop,uplink\n", "f", &mut names)
            .unwrap(),
    );
    let ports = |packet: &str| {
        let mut tr = hyflow::openflow::Traversal::new();
        p.process(&parse_packet_named(packet, &names).unwrap(), &mut tr);
        tr.outputs.iter().map(|o| o.port).collect::<Vec<_>>()
    };
    assert_eq!(ports("in_port=1"), Vec::<u32>::new());
    assert_eq!(ports("in_port=2"), [5, 6]);
}
