//! Group tables, as `ovs-ofctl add-groups` reads them and `dump-groups` prints them, and how
//! Open vSwitch picks the buckets a packet takes (`ofproto/ofproto-dpif-xlate.c`).
//!
//! - `all` runs every bucket, `indirect` its one bucket, `fast_failover` the first live one
//!   (a bucket watching a port that is up, or a group with a live bucket), `select` one
//!   bucket by hash: OVS scores each live bucket `(hash_int(bucket_id, h) & 0xffff) × weight`
//!   and takes the best (the last of equals), `h` being the packet's hash.
//! - A bucket is an OpenFlow *action set*: only the last `pop_vlan`, `push_vlan`, `dec_ttl`
//!   count, rewrites run in order, and only one final action — the last of the highest class
//!   among `resubmit` < `output` < `group` — and nothing at all without one
//!   (`ofpacts_execute_action_set`). So `bucket=output:1,output:2` outputs to 2 only, as in OVS.
//! - Each bucket acts on a copy of the packet: after it, the flow is as before it.
//! - `select` hashes: `selection_method=hash,fields(...)` hashes the named fields (masked) in
//!   Open vSwitch's field order with `selection_method_param` as basis, un-wildcarding them;
//!   without fields, and as OVS's fallback, the symmetric L4 hash of `flow_hash_symmetric_l4`.
//! - OVS's default method, when the weights fit 256 hash values, is `dp_hash`: the pass ends
//!   with the datapath hashing the packet (`hash(sym_l4(0))`, [`super::ovs_hash`]) and
//!   recirculating; the next pass resumes at the group action, with the actions left after it
//!   in every enclosing action list, and takes the bucket Webster's method mapped that hash to
//!   (or the next live one). Explicit `selection_method=dp_hash` uses the algorithm of
//!   `selection_method_param`: `sym_l4` (0x1 in its high word) as above; the default `l4`
//!   hashes the packet as received (its RSS hash), which hyflow does not model: such groups
//!   pick by the symmetric L4 hash in one pass, with a warning when loaded. A `dp_hash` group
//!   reached inside another group's bucket picks the same way (OVS freezes there too).
//!
//! The hash functions are OVS's own ([`super::ovs_hash`]), so a bucket is the one Open vSwitch
//! picks.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::action::Action;
use super::flow_file::read_lines;
use super::names::{Names, CONTROLLER_PORT};
use super::ovs_hash::{hash_bytes, hash_int, hash_uint64, symmetric_l4_hash};
use super::parser::{parse_action, parse_port_number, split_top, strip_comment, FlowFileError, Tok};
use super::rule::Rule;
use crate::packet::field::{id, proto, FieldId};
use crate::packet::format::{parse_field_value, parse_int};
use crate::packet::{FlowKey, FlowMask};

/// OpenFlow's group types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupKind {
    /// Every bucket (multicast, flooding).
    All,
    /// One bucket chosen by hash (load balancing).
    Select,
    /// Its single bucket (a shared next hop).
    Indirect,
    /// The first live bucket (protection).
    FastFailover,
}

/// One bucket of a group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bucket {
    /// `bucket_id` (given, or its position).
    pub id: u32,
    /// Weight in a select group (1 by default there, 0 elsewhere).
    pub weight: u16,
    /// Port whose liveness makes the bucket live.
    pub watch_port: Option<u32>,
    /// Group whose liveness makes the bucket live.
    pub watch_group: Option<u32>,
    /// Actions as written.
    pub actions: Vec<Action>,
    /// What runs: the actions as an OpenFlow action set, in its order.
    pub executed: Vec<Action>,
}

/// A field a `selection_method=hash` group hashes, under a mask.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HashField {
    /// The field.
    pub field: FieldId,
    /// Bits hashed.
    pub mask: u128,
    /// Bytes of OVS's value for the field (its `n_bytes`).
    bytes: u8,
}

/// How a select group hashes a packet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Selection {
    /// `flow_hash_symmetric_l4` with basis 0 (OVS's `default` method).
    SymmetricL4,
    /// `selection_method=hash,fields(...)`: the fields in OVS's order, and the basis
    /// (`hash_uint64(selection_method_param)`).
    Fields {
        /// Fields hashed.
        fields: Vec<HashField>,
        /// The hash's starting value.
        basis: u32,
    },
    /// OVS's `dp_hash` method (its default when the weights fit 256 hash values): the datapath
    /// hashes the packet (`hash(sym_l4(basis))`) and recirculates; the next pass takes the
    /// bucket its `dp_hash` maps to, or the next live one in the map.
    DpHash {
        /// Bucket index per hash value (a power of two of them).
        map: Box<[u16]>,
        /// Basis of the datapath's hash.
        basis: u32,
    },
}

/// One group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group {
    /// `group_id`.
    pub id: u32,
    /// Type.
    pub kind: GroupKind,
    /// Buckets in order.
    pub buckets: Vec<Bucket>,
    /// How a select group picks (unused by the other types).
    pub selection: Selection,
}

/// The switch's groups, by id.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Groups {
    map: BTreeMap<u32, Group>,
}

/// OVS `MAX_LIVENESS_RECURSION`: links of `watch_group` followed when asking if a bucket is
/// live.
const MAX_LIVENESS_RECURSION: u32 = 128;

/// The ports of the switch and which are up: what `FLOOD`, `ALL` and liveness look at.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SwitchPorts {
    /// Every port, ascending.
    ports: Vec<u32>,
    /// Ports down (administratively or without link).
    down: BTreeSet<u32>,
}

impl SwitchPorts {
    /// `ports` (any order, duplicates ignored), of which `down` are down.
    pub fn new(ports: impl IntoIterator<Item = u32>, down: impl IntoIterator<Item = u32>) -> SwitchPorts {
        let set: BTreeSet<u32> = ports.into_iter().collect();
        SwitchPorts { ports: set.into_iter().collect(), down: down.into_iter().collect() }
    }

    /// The ports a pipeline refers to — exact `in_port` matches, outputs, `resubmit` ports,
    /// bucket watches — and `LOCAL`, every bridge's own port: the best guess of the switch's
    /// ports when none are given. All up.
    pub fn referenced<'a>(rules: impl IntoIterator<Item = &'a Rule>, groups: &Groups) -> SwitchPorts {
        fn note(ports: &mut BTreeSet<u32>, actions: &[Action]) {
            for a in actions {
                if let Action::Output(p) | Action::Resubmit { in_port: Some(p), .. } = *a {
                    ports.insert(p);
                }
            }
        }
        let mut ports = BTreeSet::from([super::names::LOCAL_PORT]);
        for r in rules {
            note(&mut ports, &r.actions);
            if let Some(port) = r.exact_field(id::IN_PORT) {
                ports.insert(port as u32);
            }
        }
        for g in groups.iter() {
            for b in &g.buckets {
                note(&mut ports, &b.actions);
            }
        }
        ports.extend(groups.iter().flat_map(|g| g.buckets.iter().filter_map(|b| b.watch_port)));
        ports.retain(|&p| p != 0 && (p < 0xff00 || p == super::names::LOCAL_PORT));
        SwitchPorts::new(ports, [])
    }

    /// Every port, ascending.
    pub fn all(&self) -> &[u32] {
        &self.ports
    }

    /// Whether `port` is a port of the switch.
    pub fn contains(&self, port: u32) -> bool {
        self.ports.binary_search(&port).is_ok()
    }

    /// Whether `port` exists and is up (OVS `odp_port_is_alive`).
    pub(crate) fn is_live(&self, port: u32) -> bool {
        self.ports.binary_search(&port).is_ok() && !self.down.contains(&port)
    }
}

impl Groups {
    /// No groups.
    pub fn new() -> Groups {
        Groups::default()
    }

    /// The group with this id.
    pub fn get(&self, id: u32) -> Option<&Group> {
        self.map.get(&id)
    }

    /// Groups in id order.
    pub fn iter(&self) -> impl Iterator<Item = &Group> {
        self.map.values()
    }

    /// Whether a bucket of `group` is live: OVS `bucket_is_alive`.
    fn bucket_live(&self, group: &Group, b: &Bucket, ports: &SwitchPorts, depth: u32) -> bool {
        if depth >= MAX_LIVENESS_RECURSION || (group.kind == GroupKind::Select && b.weight == 0) {
            return false;
        }
        if b.watch_port.is_none() && b.watch_group.is_none() {
            return true;
        }
        // A bucket watching the controller is live while a controller is connected: hyflow
        // has none.
        b.watch_port.is_some_and(|p| p != CONTROLLER_PORT && ports.is_live(p))
            || b.watch_group.is_some_and(|g| self.first_live(g, ports, depth + 1).is_some())
    }

    /// Index of the first live bucket of group `id` (fast failover).
    fn first_live(&self, id: u32, ports: &SwitchPorts, depth: u32) -> Option<usize> {
        let g = self.map.get(&id)?;
        g.buckets.iter().position(|b| self.bucket_live(g, b, ports, depth))
    }

    /// The one bucket `packet` takes in a select or fast-failover group (all and indirect
    /// groups run every bucket), un-wildcarding in `wc` what the choice looked at; `None` when
    /// no bucket is live.
    pub fn pick(&self, g: &Group, packet: &FlowKey, wc: &mut FlowMask, ports: &SwitchPorts) -> Option<usize> {
        if g.kind == GroupKind::FastFailover {
            return self.first_live(g.id, ports, 0);
        }
        let hash = match &g.selection {
            Selection::DpHash { map, .. } if packet.get(id::DP_HASH) != 0 => {
                // OVS pick_dp_hash_select_group: the mapped bucket, or the next live one.
                let (h, mask) = (packet.get(id::DP_HASH) as usize, map.len() - 1);
                wc.unwildcard(id::DP_HASH, mask as u128);
                return (0..=mask)
                    .map(|i| map[(h + i) & mask] as usize)
                    .find(|&b| self.bucket_live(g, &g.buckets[b], ports, 0));
            }
            // Without a dp_hash (the translation recirculates for one, except inside another
            // group's bucket), the default hash.
            Selection::SymmetricL4 | Selection::DpHash { .. } => {
                mask_symmetric_l4(packet, wc);
                symmetric_l4_hash(packet)
            }
            Selection::Fields { fields, basis } => hash_fields(fields, *basis, packet, wc),
        };
        // OVS group_best_live_bucket: the last best score wins.
        let mut best: Option<(usize, u32)> = None;
        for (i, b) in g.buckets.iter().enumerate() {
            if !self.bucket_live(g, b, ports, 0) {
                continue;
            }
            let score = (hash_int(b.id, hash) & 0xffff) * b.weight as u32;
            if best.is_none_or(|(_, s)| score >= s) {
                best = Some((i, score));
            }
        }
        best.map(|(i, _)| i)
    }
}

/// What `flow_mask_hash_fields(NX_HASH_FIELDS_SYMMETRIC_L4)` un-wildcards.
fn mask_symmetric_l4(k: &FlowKey, wc: &mut FlowMask) {
    wc.unwildcard_all(id::DL_SRC);
    wc.unwildcard_all(id::DL_DST);
    match k.dl_type() {
        proto::ETH_IPV4 => {
            wc.unwildcard_all(id::NW_SRC);
            wc.unwildcard_all(id::NW_DST);
        }
        proto::ETH_IPV6 => {
            wc.unwildcard_all(id::IPV6_SRC);
            wc.unwildcard_all(id::IPV6_DST);
        }
        _ => {}
    }
    if k.is_ip() {
        wc.unwildcard_all(id::NW_PROTO);
        if k.nw_proto() != proto::IP_UDP {
            wc.unwildcard_all(id::TP_SRC);
            wc.unwildcard_all(id::TP_DST);
        }
    }
    wc.unwildcard(id::VLAN_TCI, 0x0fff | proto::VLAN_CFI as u128);
    wc.unwildcard(id::VLAN_TCI2, 0x0fff | proto::VLAN_CFI as u128);
}

/// OVS `pick_hash_fields_select_group`'s hash: each field whose prerequisites hold, masked,
/// as OVS's value bytes (network order), chained through `hash_bytes`.
fn hash_fields(fields: &[HashField], basis: u32, k: &FlowKey, wc: &mut FlowMask) -> u32 {
    let mut h = basis;
    for f in fields {
        let prereq = f.field.def().prereq;
        read_prereq(prereq, k, wc);
        if !k.prereq_ok(prereq) {
            continue;
        }
        let v = (k.get(f.field) & f.mask).to_be_bytes();
        h = hash_bytes(&v[16 - f.bytes as usize..], h);
        wc.unwildcard(f.field, f.mask);
    }
    h
}

/// Un-wildcards what checking a prerequisite looks at (`mf_are_prereqs_ok` with a mask).
fn read_prereq(p: crate::packet::field::Prereq, k: &FlowKey, wc: &mut FlowMask) {
    use crate::packet::field::Prereq;
    match p {
        Prereq::Vlan => wc.unwildcard(id::VLAN_TCI, proto::VLAN_CFI as u128),
        // OVS is_ip_proto: the protocol is looked at only in an IP packet.
        Prereq::L4Ports | Prereq::Tcp | Prereq::Udp | Prereq::Sctp | Prereq::Icmp | Prereq::Icmpv6
            if k.is_ip() =>
        {
            wc.unwildcard_all(id::NW_PROTO)
        }
        _ => {}
    }
}

/// Fields a select group may hash, in Open vSwitch's field order (`enum mf_field_id`), with
/// the width of OVS's value. Registers and metadata come before the headers.
const HASHABLE: &[(&str, u8)] = &[
    ("tun_id", 8),
    ("metadata", 8),
    ("in_port", 2),
    ("reg0", 4),
    ("reg1", 4),
    ("reg2", 4),
    ("reg3", 4),
    ("reg4", 4),
    ("reg5", 4),
    ("reg6", 4),
    ("reg7", 4),
    ("reg8", 4),
    ("reg9", 4),
    ("reg10", 4),
    ("reg11", 4),
    ("reg12", 4),
    ("reg13", 4),
    ("reg14", 4),
    ("reg15", 4),
    ("dl_src", 6),
    ("dl_dst", 6),
    ("dl_type", 2),
    ("vlan_tci", 2),
    ("nw_src", 4),
    ("nw_dst", 4),
    ("ipv6_src", 16),
    ("ipv6_dst", 16),
    ("ipv6_label", 4),
    ("nw_proto", 1),
    ("nw_tos", 1),
    ("ip_dscp", 1),
    ("nw_ecn", 1),
    ("nw_ttl", 1),
    ("nw_frag", 1),
    ("arp_op", 2),
    ("arp_spa", 4),
    ("arp_tpa", 4),
    ("arp_sha", 6),
    ("arp_tha", 6),
    ("tcp_src", 2),
    ("tcp_dst", 2),
    ("tcp_flags", 2),
    ("udp_src", 2),
    ("udp_dst", 2),
    ("sctp_src", 2),
    ("sctp_dst", 2),
    ("icmp_type", 1),
    ("icmp_code", 1),
    ("icmpv6_type", 1),
    ("icmpv6_code", 1),
];

// ---- parsing ----

/// A group file's problems that Open vSwitch accepts: returned as warnings.
pub(crate) type Warnings = Vec<FlowFileError>;

/// Whether `line` is a header of `ovs-ofctl dump-groups` output (skipped).
fn dump_header(line: &str) -> bool {
    let t = line.trim_start();
    t.starts_with("NXST_GROUP_DESC reply") || t.starts_with("OFPST_GROUP_DESC reply")
}

/// A `group:N` reference to check once every group is known: where it is.
struct GroupRef {
    id: u32,
    line: usize,
    column: usize,
    token: String,
}

/// Groups as lines arrive, then checked as a whole.
#[derive(Default)]
struct Loader {
    groups: Groups,
    refs: Vec<GroupRef>,
    warnings: Warnings,
}

impl Loader {
    fn line(&mut self, line: &str, number: usize, file: &str, names: &Names) -> Result<(), FlowFileError> {
        let Some(body) = strip_comment(line) else { return Ok(()) };
        if dump_header(body) {
            return Ok(());
        }
        let at = |e: super::parser::SpecError| FlowFileError::at(file, number, e.column, &e.token, e.message);
        let (group, line_refs, unmodelled_dp_hash) = parse_group(body, names).map_err(at)?;
        let token = format!("group_id={}", group.id);
        if unmodelled_dp_hash {
            self.warnings.push(FlowFileError::at(
                file,
                number,
                1,
                &token,
                format!(
                    "select group {}: Open vSwitch picks its bucket with dp_hash after the datapath's \
                     hash(l4) action, which hashes the packet as the NIC or datapath received it and which \
                     hyflow does not model; hyflow picks by the symmetric L4 hash in one pass (same spread, \
                     other buckets than OVS's); selection_method_param=0x100000000 (sym_l4) or \
                     selection_method=hash pick as OVS does",
                    group.id
                ),
            ));
        }
        if self.groups.map.contains_key(&group.id) {
            return Err(FlowFileError::at(
                file,
                number,
                1,
                &token,
                format!("group {} is defined twice", group.id),
            ));
        }
        self.refs.extend(line_refs.into_iter().map(|(id, column, token)| GroupRef {
            id,
            line: number,
            column,
            token,
        }));
        self.groups.map.insert(group.id, group);
        Ok(())
    }

    /// Checks every reference to a group, and records the groups in `names`.
    fn finish(self, file: &str, names: &mut Names) -> Result<(Groups, Warnings), FlowFileError> {
        if let Some(r) = self.refs.iter().find(|r| !self.groups.map.contains_key(&r.id)) {
            return Err(FlowFileError::at(
                file,
                r.line,
                r.column,
                &r.token,
                format!("group {} does not exist", r.id),
            ));
        }
        names.set_groups(self.groups.map.keys().copied());
        Ok((self.groups, self.warnings))
    }
}

/// Reads groups from `path` (one group per line, `ovs-ofctl add-groups` syntax or
/// `dump-groups` output), with port and table `names`. Every `group:N` and `watch_group` must
/// name a group of the file. The group ids are recorded in `names` so that flows can be
/// checked against them. Warnings: what loads but does not pick as Open vSwitch would.
pub fn read_groups_file(path: &Path, names: &mut Names) -> Result<(Groups, Warnings), FlowFileError> {
    let mut loader = Loader::default();
    read_lines(path, |line, number, file| loader.line(line, number, file, names))?;
    loader.finish(&path.display().to_string(), names)
}

/// [`read_groups_file`] on text; `file` names it in errors.
pub fn parse_groups(text: &str, file: &str, names: &mut Names) -> Result<(Groups, Warnings), FlowFileError> {
    let mut loader = Loader::default();
    for (i, line) in text.lines().enumerate() {
        loader.line(line, i + 1, file, names)?;
    }
    loader.finish(file, names)
}

/// One group line; also returns its references to groups (id, column, token), and whether
/// Open vSwitch would select by a `dp_hash` hyflow does not model (see the module's notes).
type ParsedGroup = (Group, Vec<(u32, usize, String)>, bool);

fn parse_group(line: &str, names: &Names) -> Result<ParsedGroup, super::parser::SpecError> {
    let (head, buckets_at) = match line.find("bucket=") {
        Some(i) => (&line[..i], Some(i)),
        None => (line, None),
    };
    let mut id = None;
    let mut kind = None;
    let mut method: Option<(Tok, &str)> = None;
    let mut param: Option<(Tok, u64)> = None;
    let mut fields: Option<(Tok, Vec<HashField>)> = None;
    for tok in split_top(head, 0, b", \t\r") {
        let (key, value, vtok) = key_value(&tok);
        match key {
            "group_id" => {
                let v: u32 = parse_int(value)
                    .and_then(|v| u32::try_from(v).ok())
                    .filter(|&v| v <= 0xffff_ff00)
                    .ok_or_else(|| vtok.fail(format!("bad group id '{value}' (0..4294967040)")))?;
                id = Some(v);
            }
            "type" => {
                kind = Some(match value {
                    "all" => GroupKind::All,
                    "select" => GroupKind::Select,
                    "indirect" => GroupKind::Indirect,
                    "ff" | "fast_failover" => GroupKind::FastFailover,
                    _ => {
                        return Err(
                            vtok.fail(format!("invalid group type {value} (all, select, indirect, ff)"))
                        )
                    }
                })
            }
            "selection_method" => {
                if !matches!(value, "hash" | "dp_hash") {
                    return Err(vtok.fail(format!("invalid selection method '{value}' (hash, dp_hash)")));
                }
                method = Some((tok, value));
            }
            "selection_method_param" => {
                let v = parse_int(value)
                    .and_then(|v| u64::try_from(v).ok())
                    .ok_or_else(|| vtok.fail(format!("bad selection_method_param '{value}'")))?;
                param = Some((tok, v));
            }
            "fields" => fields = Some((tok, parse_hash_fields(&vtok, value)?)),
            _ => return Err(tok.fail(format!("unknown keyword {key}"))),
        }
    }
    let whole = Tok { text: line, offset: 0 };
    let id = id.ok_or_else(|| whole.fail("must specify a group_id"))?;
    let kind = kind.ok_or_else(|| whole.fail("must specify a type"))?;
    if let Some((tok, _)) = &fields {
        if method.map(|(_, m)| m) != Some("hash") {
            return Err(tok.fail("fields may only be specified with \"selection_method=hash\""));
        }
    }
    if let (None, Some((tok, _))) = (method, &param) {
        return Err(tok.fail("selection_method_param is only allowed with \"selection_method\""));
    }
    if kind != GroupKind::Select {
        if let Some((tok, _)) = method {
            return Err(tok.fail("only select groups have a selection method"));
        }
    }
    let mut refs = Vec::new();
    let mut buckets = Vec::new();
    if let Some(start) = buckets_at {
        let mut rest = start;
        while rest < line.len() {
            let body_start = rest + "bucket=".len();
            let end = line[body_start..].find("bucket=").map_or(line.len(), |i| body_start + i);
            let text = line[body_start..end].trim_end_matches([',', ' ', '\t']);
            buckets.push(parse_bucket(text, body_start, kind, names, &mut refs)?);
            rest = end;
        }
    }
    let buckets = number_buckets(buckets);
    if kind == GroupKind::Indirect && buckets.len() > 1 {
        return Err(whole.fail("Indirect groups can have at most one bucket."));
    }
    let mut seen = BTreeSet::new();
    for b in &buckets {
        if !seen.insert(b.id) {
            return Err(whole.fail(format!("bucket id {} is used twice", b.id)));
        }
    }
    // OVS group_set_selection_method: no method tries dp_hash (symmetric L3/L4 hash, basis 0)
    // with at most 256 hash values, `dp_hash` with any number OVS allows and the algorithm and
    // basis of `selection_method_param`; both fall back to the default hash otherwise.
    let param = param.map_or(0, |(_, p)| p);
    let (selection, unmodelled_dp_hash) = match (method.map(|(_, m)| m), fields) {
        (Some("hash"), Some((_, fields))) => (Selection::Fields { fields, basis: hash_uint64(param) }, false),
        (None, _) if kind == GroupKind::Select => match dp_hash_table(&buckets, 256) {
            Some(map) => (Selection::DpHash { map, basis: 0 }, false),
            None => (Selection::SymmetricL4, false),
        },
        (Some("dp_hash"), _) => match dp_hash_table(&buckets, 0) {
            Some(map) if param >> 32 == OVS_HASH_ALG_SYM_L4 => {
                (Selection::DpHash { map, basis: param as u32 }, false)
            }
            Some(_) => (Selection::SymmetricL4, true),
            None => (Selection::SymmetricL4, false),
        },
        _ => (Selection::SymmetricL4, false),
    };
    Ok((Group { id, kind, buckets, selection }, refs, unmodelled_dp_hash))
}

/// OVS's `OVS_HASH_ALG_SYM_L4`, the datapath hash algorithm hyflow models.
const OVS_HASH_ALG_SYM_L4: u64 = 1;

/// OVS `group_setup_dp_hash_table`: the bucket (index) each `dp_hash` value maps to, as many
/// values as the weights need (a power of two, 16 to 256; at most `max_hash` unless 0),
/// shared out by Webster's method; `None` when the weights need more.
fn dp_hash_table(buckets: &[Bucket], max_hash: u64) -> Option<Box<[u16]>> {
    const MAX_SELECT_GROUP_HASH_VALUES: u64 = 256;
    let total: u64 = buckets.iter().map(|b| b.weight as u64).sum();
    let min_weight = buckets.iter().map(|b| b.weight as u64).filter(|&w| w > 0).min()?;
    let min_slots = total.div_ceil(min_weight);
    let min_slots = min_slots.max((buckets.len() as u64 * 4).min(MAX_SELECT_GROUP_HASH_VALUES));
    let n_hash = min_slots.next_power_of_two().max(16);
    if n_hash > MAX_SELECT_GROUP_HASH_VALUES || (max_hash != 0 && n_hash > max_hash) {
        return None;
    }
    // Each value goes to the bucket of highest weight / divisor (the first of equals), whose
    // divisor then grows by 2.
    let mut divisors = vec![1u32; buckets.len()];
    let mut values: Vec<f64> = buckets.iter().map(|b| b.weight as f64).collect();
    let mut map = Vec::with_capacity(n_hash as usize);
    for _ in 0..n_hash {
        let mut winner = 0;
        for i in 1..buckets.len() {
            if values[i] > values[winner] {
                winner = i;
            }
        }
        divisors[winner] += 2;
        values[winner] = buckets[winner].weight as f64 / divisors[winner] as f64;
        map.push(winner as u16);
    }
    Some(map.into())
}

/// `key=value`, `key:value` or `key(value)` (OVS `ofputil_parse_key_value`), with the value's
/// token.
fn key_value<'a>(tok: &Tok<'a>) -> (&'a str, &'a str, Tok<'a>) {
    let text = tok.text;
    match text.find(['=', ':', '(']) {
        Some(i) if text.as_bytes()[i] == b'(' && text.ends_with(')') => {
            (&text[..i], &text[i + 1..text.len() - 1], tok.sub(i + 1, text.len() - 1))
        }
        Some(i) => (&text[..i], &text[i + 1..], tok.sub(i + 1, text.len())),
        None => (text, "", tok.sub(text.len(), text.len())),
    }
}

/// `fields(name[=mask],...)`: the fields in Open vSwitch's order.
fn parse_hash_fields(tok: &Tok, text: &str) -> Result<Vec<HashField>, super::parser::SpecError> {
    let mut out: Vec<(usize, HashField)> = Vec::new();
    for t in split_top(text, tok.offset, b", \t") {
        let (name, value, vtok) = key_value(&t);
        let field = FieldId::from_name(name).ok_or_else(|| t.fail(format!("unknown field {name}")))?;
        let (rank, &(_, bytes)) = HASHABLE
            .iter()
            .enumerate()
            .find(|(_, (n, _))| FieldId::from_name(n) == Some(field))
            .ok_or_else(|| t.fail(format!("{name} cannot be hashed by a select group")))?;
        if out.iter().any(|(r, _)| *r == rank) {
            return Err(t.fail(format!("{name}: duplicate field")));
        }
        let mask = if value.is_empty() {
            field.full_mask()
        } else {
            let (v, _) = parse_field_value(field, value).map_err(|e| vtok.fail(e.reason))?;
            if v == 0 {
                return Err(vtok.fail("values are wildcards here and must not be all-zeros"));
            }
            v
        };
        out.push((rank, HashField { field, mask, bytes }));
    }
    if out.is_empty() {
        return Err(tok.fail("fields() names no field"));
    }
    out.sort_by_key(|(r, _)| *r);
    Ok(out.into_iter().map(|(_, f)| f).collect())
}

/// Gives each bucket without a `bucket_id` one, as `ovs-ofctl` does when it sends the group
/// (`ofputil_encode_group_mod`): from the first such bucket on, the lowest ids not taken by
/// it, earlier allocations, or a later bucket's own id.
fn number_buckets(buckets: Vec<(Bucket, bool)>) -> Vec<Bucket> {
    let mut taken: Option<BTreeSet<u32>> = None;
    let mut out = Vec::with_capacity(buckets.len());
    for i in 0..buckets.len() {
        let (mut b, explicit) = buckets[i].clone();
        if !explicit {
            let used = taken.get_or_insert_with(|| {
                buckets[i + 1..].iter().filter(|(_, e)| *e).map(|(b, _)| b.id).collect()
            });
            let id = (0..).find(|id| !used.contains(id)).expect("fewer buckets than ids");
            used.insert(id);
            b.id = id;
        }
        out.push(b);
    }
    out
}

/// One bucket's text (after `bucket=`), at `offset` in its line; and whether it gave its id.
fn parse_bucket(
    text: &str,
    offset: usize,
    kind: GroupKind,
    names: &Names,
    refs: &mut Vec<(u32, usize, String)>,
) -> Result<(Bucket, bool), super::parser::SpecError> {
    let mut explicit = false;
    let mut b = Bucket {
        id: 0,
        weight: if kind == GroupKind::Select { 1 } else { 0 },
        watch_port: None,
        watch_group: None,
        actions: Vec::new(),
        executed: Vec::new(),
    };
    let whole = Tok { text, offset };
    for tok in split_top(text, offset, b", \t\r") {
        let (key, value, vtok) = key_value(&tok);
        match key.to_ascii_lowercase().as_str() {
            "weight" => {
                if kind != GroupKind::Select {
                    return Err(tok.fail("Only select groups can have bucket weights."));
                }
                b.weight = parse_int(value)
                    .and_then(|v| u16::try_from(v).ok())
                    .ok_or_else(|| vtok.fail(format!("bad weight '{value}' (0..65535)")))?;
            }
            "watch_port" => {
                let p = parse_port_number(&vtok, value, names)?;
                if p >= 0xff00 && p != CONTROLLER_PORT && p != 0xffff {
                    return Err(vtok.fail(format!("{value}: invalid watch_port")));
                }
                b.watch_port = (p != 0xffff).then_some(p);
            }
            "watch_group" => {
                let g = parse_int(value)
                    .and_then(|v| u32::try_from(v).ok())
                    .filter(|&v| v <= 0xffff_ff00)
                    .ok_or_else(|| vtok.fail(format!("invalid watch_group id {value}")))?;
                refs.push((g, vtok.col(), value.to_string()));
                b.watch_group = Some(g);
            }
            "bucket_id" => {
                b.id = parse_int(value)
                    .and_then(|v| u32::try_from(v).ok())
                    .filter(|&v| v <= 0xffff_ff00)
                    .ok_or_else(|| vtok.fail(format!("invalid bucket_id id {value}")))?;
                explicit = true;
            }
            "action" | "actions" => push_action(&vtok, names, &mut b.actions, refs)?,
            _ => push_action(&tok, names, &mut b.actions, refs)?,
        }
    }
    if b.actions.is_empty() {
        return Err(whole.fail("bucket must specify actions"));
    }
    if kind == GroupKind::FastFailover && b.watch_port.is_none() && b.watch_group.is_none() {
        return Err(whole.fail("fast failover bucket requires watch_port or watch_group"));
    }
    b.executed = action_set(&b.actions);
    Ok((b, explicit))
}

/// Parses one bucket action, refusing what an action set cannot hold.
fn push_action(
    tok: &Tok,
    names: &Names,
    out: &mut Vec<Action>,
    refs: &mut Vec<(u32, usize, String)>,
) -> Result<(), super::parser::SpecError> {
    let Some(a) = parse_action(tok, None, names)? else {
        return Err(tok.fail("drop is not a bucket action (a bucket without output drops)"));
    };
    match a {
        Action::GotoTable(_) | Action::WriteMetadata { .. } => {
            return Err(tok.fail("instructions (goto_table, write_metadata) are not allowed in a bucket"))
        }
        Action::Conjunction(_) => return Err(tok.fail("conjunction is not allowed in a bucket")),
        Action::Group(g) => refs.push((g, tok.col(), tok.text.to_string())),
        _ => {}
    }
    out.push(a);
    Ok(())
}

/// The order an OpenFlow action set runs in (OVS `ofpacts_execute_action_set`): the last
/// `pop_vlan`, `push_vlan` and `dec_ttl`, then every rewrite in order, then the final action
/// — or nothing if there is none.
fn action_set(actions: &[Action]) -> Vec<Action> {
    let last = |f: fn(&Action) -> bool| actions.iter().rev().find(|a| f(a)).cloned();
    // Final actions by class, lowest first: resubmit < output < group.
    let class = |a: &Action| match a {
        Action::Resubmit { .. } => Some(1),
        Action::Output(_)
        | Action::OutputInPort
        | Action::OutputReg(_)
        | Action::Flood
        | Action::All
        | Action::Normal
        | Action::Controller => Some(2),
        Action::Group(_) => Some(3),
        _ => None,
    };
    let Some(fin) = actions.iter().filter(|a| class(a).is_some()).max_by_key(|a| class(a)).cloned() else {
        return Vec::new();
    };
    // max_by_key returns the last maximum: the later of equal classes, as OVS.
    let mut out = Vec::new();
    out.extend(last(|a| matches!(a, Action::PopVlan)));
    out.extend(last(|a| matches!(a, Action::PushVlan(_))));
    out.extend(last(|a| matches!(a, Action::DecTtl)));
    out.extend(
        actions
            .iter()
            .filter(|a| {
                matches!(
                    a,
                    Action::SetField { .. }
                        | Action::Move { .. }
                        | Action::SetVlanVid { .. }
                        | Action::SetVlanPcp { .. }
                )
            })
            .cloned(),
    );
    out.push(fin);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(line: &str) -> Group {
        parse_group(line, &Names::new()).map(|(g, _, _)| g).unwrap_or_else(|e| panic!("{line}: {e:?}"))
    }

    #[test]
    fn hashes_are_open_vswitch_s() {
        // Values computed by OVS's lib/hash.h (portable build).
        assert_eq!(hash_int(1, 0), 0xea95_647d);
        assert_eq!(hash_int(65534, 0), 0x77e0_1031);
        assert_eq!(hash_int(5, 0), 0xc6f0_84aa);
    }

    #[test]
    fn dump_and_add_syntax_read_alike() {
        let a = group("group_id=1,type=all,bucket=output:1,output:2,bucket=mod_nw_src:9.9.9.9,output:3");
        let d = group(
            "group_id=1,type=all,bucket=bucket_id:0,actions=output:1,output:2,bucket=bucket_id:1,\
             actions=set_field:9.9.9.9->ip_src,output:3",
        );
        assert_eq!(a.buckets.len(), 2);
        assert_eq!(a.buckets[0].executed, d.buckets[0].executed);
        // An action set keeps one output: the last.
        assert_eq!(a.buckets[0].executed, vec![Action::Output(2)]);
        assert_eq!(a.buckets[1].executed.len(), 2);
        assert_eq!(d.buckets[1].id, 1);
        // Unnumbered buckets take the lowest ids that later buckets do not claim.
        let g = group("group_id=1,type=all,bucket=output:1,bucket=bucket_id:1,output:2,bucket=output:3");
        assert_eq!(g.buckets.iter().map(|b| b.id).collect::<Vec<_>>(), [0, 1, 2]);
        let g = group("group_id=1,type=all,bucket=output:1,bucket=output:2,bucket=bucket_id:0,output:3");
        assert_eq!(g.buckets.iter().map(|b| b.id).collect::<Vec<_>>(), [1, 2, 0]);
    }

    #[test]
    fn action_set_order_and_final_action() {
        let g = group("group_id=2,type=indirect,bucket=output:3,group:7,dec_ttl,mod_vlan_vid:5,pop_vlan");
        assert_eq!(
            g.buckets[0].executed,
            vec![
                Action::PopVlan,
                Action::DecTtl,
                Action::SetVlanVid { vid: 5, push_if_needed: true },
                Action::Group(7)
            ]
        );
        // Without a final action the set does nothing.
        let g = group("group_id=3,type=all,bucket=mod_vlan_vid:5");
        assert!(g.buckets[0].executed.is_empty());
    }

    #[test]
    fn selection_fields_in_ovs_order() {
        let g = group(
            "group_id=2,type=select,selection_method=hash,fields(tcp_dst,ip_src=255.255.0.0),bucket=output:1",
        );
        let Selection::Fields { fields, basis } = &g.selection else { panic!("fields expected") };
        assert_eq!(fields[0].field, id::NW_SRC);
        assert_eq!(fields[0].mask, 0xffff_0000);
        assert_eq!(fields[1].field, FieldId::from_name("tcp_dst").unwrap());
        assert_eq!(*basis, hash_uint64(0));
        assert_eq!(g.buckets[0].weight, 1);
    }

    #[test]
    fn bad_groups_say_what_and_where() {
        let cases = [
            ("type=all,bucket=output:1", "must specify a group_id"),
            ("group_id=1,bucket=output:1", "must specify a type"),
            ("group_id=1,type=any,bucket=output:1", "invalid group type any"),
            ("group_id=1,type=indirect,bucket=output:1,bucket=output:2", "at most one bucket"),
            ("group_id=1,type=ff,bucket=output:1", "requires watch_port or watch_group"),
            ("group_id=1,type=all,bucket=weight:3,output:1", "Only select groups"),
            ("group_id=1,type=all,bucket=goto_table:1", "not allowed in a group bucket"),
            ("group_id=1,type=select,fields(ip_src),bucket=output:1", "selection_method=hash"),
            (
                "group_id=1,type=select,selection_method=hash,fields(vlan_tpid),bucket=output:1",
                "cannot be hashed",
            ),
            ("group_id=1,type=all,bucket=output:p9", "unknown port 'p9'"),
            ("group_id=1,type=all,bucket=watch_port:1", "bucket must specify actions"),
        ];
        for (line, want) in cases {
            let e = parse_group(line, &Names::new()).expect_err(line);
            assert!(e.message.contains(want), "{line}: {}", e.message);
        }
        let e = parse_group("group_id=1,type=all,bucket=output:p9", &Names::new()).unwrap_err();
        assert_eq!((e.column, e.token.as_str()), (35, "p9"));
    }

    #[test]
    fn fast_failover_takes_the_first_live_bucket() {
        let mut groups = Groups::new();
        let g = group("group_id=4,type=ff,bucket=watch_port:4,output:4,bucket=watch_port:5,output:5");
        groups.map.insert(4, g.clone());
        let k = FlowKey::default();
        let pick = |up: &[u32], down: &[u32]| {
            let mut wc = FlowMask::CATCHALL;
            groups.pick(&g, &k, &mut wc, &SwitchPorts::new(up.to_vec(), down.to_vec()))
        };
        assert_eq!(pick(&[4, 5], &[]), Some(0));
        assert_eq!(pick(&[4, 5], &[4]), Some(1));
        assert_eq!(pick(&[5], &[]), Some(1));
        assert_eq!(pick(&[4, 5], &[4, 5]), None);
    }
}
