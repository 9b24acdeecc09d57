//! Table and port names, as `ovs-ofctl --names` reads and prints them.
//!
//! A pipeline dumped from a running switch says `table=Classifier`, `in_port="antrea-gw0"`,
//! `output:p1` and `resubmit(,one)`: names the switch knows and a flow file does not. They come
//! from files given with the flows (`--ports`: `name=number` lines or the output of
//! `ovs-ofctl show`; `--tables`: `name=number` lines or the output of
//! `ovs-ofctl dump-table-features`) and from the flow file itself, where a rule may name its
//! table as `table=N(name)` (hyflow's shorthand, so that a dump edited once carries its map).
//!
//! As in Open vSwitch, a name is written bare when it is a letter followed by letters and
//! digits, and quoted JSON-style (`"antrea-gw0"`) otherwise; numbers are always numbers, and
//! the reserved ports (`LOCAL`, `NORMAL`, ...) are recognised before any name, in any case.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::flow_file::read_lines;
use super::parser::FlowFileError;

/// OpenFlow 1.0's `OFPP_LOCAL`: the switch's own network stack.
pub const LOCAL_PORT: u32 = 0xfffe;

/// OpenFlow 1.0's `OFPP_CONTROLLER`.
pub(crate) const CONTROLLER_PORT: u32 = 0xfffd;

/// OpenFlow 1.0's `OFPP_NORMAL`.
pub(crate) const NORMAL_PORT: u32 = 0xfffa;

/// OpenFlow 1.0's `OFPP_FLOOD`.
pub(crate) const FLOOD_PORT: u32 = 0xfffb;

/// OpenFlow 1.0's `OFPP_ALL`.
pub(crate) const ALL_PORT: u32 = 0xfffc;

/// What a flow may refer to besides itself: names of tables and ports, each bound to one
/// number, the ports `--ports` says are down, and the ids of the switch's groups (once
/// `--groups` was read), so that every reference is checked where it is written.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Names {
    tables: BTreeMap<String, u8>,
    ports: BTreeMap<String, u32>,
    down: BTreeSet<u32>,
    groups: Option<BTreeSet<u32>>,
}

/// `"name"` unquoted (with JSON's `\"` and `\\` escapes), or `text` itself when not quoted;
/// `None` for a quote that does not close.
pub(crate) fn unquote(text: &str) -> Option<String> {
    let Some(inner) = text.strip_prefix('"') else { return Some(text.to_string()) };
    let inner = inner.strip_suffix('"')?;
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next()? {
                'n' => out.push('\n'),
                't' => out.push('\t'),
                other => out.push(other),
            },
            '"' => return None,
            c => out.push(c),
        }
    }
    Some(out)
}

impl Names {
    /// No names: every table and port must be a number.
    pub fn new() -> Names {
        Names::default()
    }

    /// Binds table `name` to `table`; a name bound to another number, or a table already
    /// named otherwise, is refused (a switch gives each table one name).
    pub fn add_table(&mut self, name: &str, table: u8) -> Result<(), String> {
        bind(&mut self.tables, name, table, "table")
    }

    /// Binds port `name` to `port`, with the same rules as tables; reserved names are refused.
    pub fn add_port(&mut self, name: &str, port: u32) -> Result<(), String> {
        if reserved_port(name).is_some() {
            return Err(format!("'{name}' is a reserved port name"));
        }
        bind(&mut self.ports, name, port, "port")
    }

    /// The table `text` names (bare or quoted), if known.
    pub fn table(&self, text: &str) -> Option<u8> {
        self.tables.get(&unquote(text)?).copied()
    }

    /// The port `text` names (bare or quoted), if known; reserved names are the caller's.
    pub fn port(&self, text: &str) -> Option<u32> {
        self.ports.get(&unquote(text)?).copied()
    }

    /// The name of table `table`, if it has one.
    pub fn table_name(&self, table: u8) -> Option<&str> {
        self.tables.iter().find(|(_, &t)| t == table).map(|(n, _)| n.as_str())
    }

    /// The name of port `port`, if it has one.
    pub fn port_name(&self, port: u32) -> Option<&str> {
        self.ports.iter().find(|(_, &p)| p == port).map(|(n, _)| n.as_str())
    }

    /// Whether no table or port has a name.
    pub fn is_empty(&self) -> bool {
        self.tables.is_empty() && self.ports.is_empty()
    }

    /// Records the switch's groups: from now on `group:N` must name one of them.
    pub(crate) fn set_groups(&mut self, ids: impl IntoIterator<Item = u32>) {
        self.groups = Some(ids.into_iter().collect());
    }

    /// Whether group `id` exists.
    pub(crate) fn has_group(&self, id: u32) -> bool {
        self.groups.as_ref().is_some_and(|g| g.contains(&id))
    }

    /// Whether the switch's groups were given.
    pub(crate) fn groups_known(&self) -> bool {
        self.groups.is_some()
    }

    /// Numbers of the named ports, ascending.
    pub fn port_numbers(&self) -> BTreeSet<u32> {
        self.ports.values().copied().collect()
    }

    /// Ports `--ports` marks down (`config: PORT_DOWN` or `state: LINK_DOWN` in
    /// `ovs-ofctl show`, or `name=number down`).
    pub fn down_ports(&self) -> &BTreeSet<u32> {
        &self.down
    }

    /// Table names in order, for messages.
    pub(crate) fn table_names(&self) -> impl Iterator<Item = &str> {
        self.tables.keys().map(String::as_str)
    }

    /// Port names in order, for messages.
    pub(crate) fn port_names(&self) -> impl Iterator<Item = &str> {
        self.ports.keys().map(String::as_str)
    }

    /// Reads port names from `path`: `name=number` lines (`name=number down` for a port that is
    /// down), or what `ovs-ofctl show` prints (` 1(antrea-gw0): addr:...`,
    /// ` LOCAL(br-int): addr:...`, then the port's `config:` and `state:` lines; its other
    /// lines are skipped).
    pub fn read_ports(&mut self, path: &Path) -> Result<(), FlowFileError> {
        let mut show = false;
        // The port whose detail lines follow, in `ovs-ofctl show` output.
        let mut current = None;
        read_lines(path, |line, number, file| {
            let fail = |column: usize, token: &str, message: String| {
                FlowFileError::at(file, number, column, token, message)
            };
            if number == 1 && line.starts_with("OFPT_FEATURES_REPLY") {
                show = true;
                return Ok(());
            }
            let Some(body) = super::parser::strip_comment(line) else { return Ok(()) };
            if show {
                // ` N(name): addr:...` or ` LOCAL(name): addr:...`; the rest is port detail.
                let t = body.trim_start();
                if let (Some(p), Some(("config" | "state", value))) = (current, t.split_once(':')) {
                    if value.split_whitespace().any(|w| w == "PORT_DOWN" || w == "LINK_DOWN") {
                        self.down.insert(p);
                    }
                    return Ok(());
                }
                let Some((head, _)) = t.split_once("): addr:") else { return Ok(()) };
                let Some((num, name)) = head.split_once('(') else { return Ok(()) };
                let column = line.len() - t.len() + 1;
                let port = if num == "LOCAL" {
                    LOCAL_PORT
                } else {
                    num.parse().map_err(|_| fail(column, num, format!("bad port number '{num}'")))?
                };
                current = Some(port);
                return self.add_port(name, port).map_err(|m| fail(column + num.len() + 1, name, m));
            }
            let (name, value) = name_value(body).map_err(|(c, t, m)| fail(c, &t, m))?;
            let (value, down) = match value.0.split_once(char::is_whitespace) {
                Some((number, state)) if state.trim() == "down" => ((number, value.1), true),
                Some((_, state)) => {
                    let state = state.trim();
                    let column = value.1 + value.0.len() - state.len();
                    return Err(fail(column, state, format!("unknown port state '{state}' (down)")));
                }
                None => (value, false),
            };
            let port = match value.0 {
                "LOCAL" | "local" => LOCAL_PORT,
                v => v.parse().map_err(|_| fail(value.1, v, format!("bad port number '{v}'")))?,
            };
            if port == 0 || (port >= 0xff00 && port != LOCAL_PORT) {
                return Err(fail(value.1, value.0, "port numbers are 1..65279 (or LOCAL)".into()));
            }
            if down {
                self.down.insert(port);
            }
            self.add_port(&name.0, port).map_err(|m| fail(name.1, &name.0, m))
        })
    }

    /// Reads table names from `path`: `name=number` lines, or what
    /// `ovs-ofctl dump-table-features` prints (`  table 0 ("Classifier"):`; other lines are
    /// skipped).
    pub fn read_tables(&mut self, path: &Path) -> Result<(), FlowFileError> {
        // Once a `table N` line or the reply's header is seen, the file is that output: its
        // other lines (table properties) are skipped.
        let mut features = false;
        read_lines(path, |line, number, file| {
            let fail = |column: usize, token: &str, message: String| {
                FlowFileError::at(file, number, column, token, message)
            };
            let Some(body) = super::parser::strip_comment(line) else { return Ok(()) };
            let t = body.trim_start();
            let column = line.len() - t.len() + 1;
            if t.starts_with("OFPST_TABLE_FEATURES") {
                features = true;
                return Ok(());
            }
            if let Some(rest) = t.strip_prefix("table ") {
                features = true;
                // `table N ("name"):` or `table N ("name"): ditto`; unnamed tables skipped.
                let Some((num, named)) = rest.split_once(" (") else { return Ok(()) };
                let quoted = named.trim_end().trim_end_matches(" ditto").trim_end_matches(':');
                let Some(quoted) = quoted.strip_suffix(')') else { return Ok(()) };
                let table: u8 = num
                    .parse()
                    .ok()
                    .filter(|&t| t < 255)
                    .ok_or_else(|| fail(column + 6, num, format!("bad table number '{num}' (0..254)")))?;
                let name = unquote(quoted).ok_or_else(|| fail(column, quoted, "unclosed quote".into()))?;
                return self.add_table(&name, table).map_err(|m| fail(column, quoted, m));
            }
            if features {
                return Ok(());
            }
            let (name, value) = name_value(body).map_err(|(c, t, m)| fail(c, &t, m))?;
            let table: u8 =
                value.0.parse().ok().filter(|&t| t < 255).ok_or_else(|| {
                    fail(value.1, value.0, format!("bad table number '{}' (0..254)", value.0))
                })?;
            self.add_table(&name.0, table).map_err(|m| fail(name.1, &name.0, m))
        })
    }
}

/// Binds `name` to `number` in `map` (tables or ports, `what`): one number per name, one name
/// per number.
fn bind<T: Copy + PartialEq + std::fmt::Display>(
    map: &mut BTreeMap<String, T>,
    name: &str,
    number: T,
    what: &str,
) -> Result<(), String> {
    check_name(name, what)?;
    if let Some(&n) = map.get(name) {
        if n != number {
            return Err(format!("{what} name '{name}' is already {what} {n}"));
        }
    }
    if let Some((other, _)) = map.iter().find(|(n, &v)| v == number && n.as_str() != name) {
        return Err(format!("{what} {number} is already named '{other}'"));
    }
    map.insert(name.to_string(), number);
    Ok(())
}

/// A `name=value` line: (name unquoted, its column), (value, its column).
type NameValue<'a> = ((String, usize), (&'a str, usize));

fn name_value(body: &str) -> Result<NameValue<'_>, (usize, String, String)> {
    let lead = body.len() - body.trim_start().len();
    let t = body.trim();
    let Some((name, value)) = t.rsplit_once('=') else {
        return Err((lead + 1, t.to_string(), "expected name=number".to_string()));
    };
    let (name, value) = (name.trim_end(), value.trim_start());
    let value_col = lead + t.len() - value.len() + 1;
    let unquoted = unquote(name).ok_or((lead + 1, name.to_string(), "unclosed quote".to_string()))?;
    Ok(((unquoted, lead + 1), (value, value_col)))
}

/// A name must not be empty or a number (a number always means itself).
fn check_name(name: &str, what: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err(format!("empty {what} name"));
    }
    if name.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("{what} name '{name}' is a number"));
    }
    Ok(())
}

/// The reserved port `name` stands for (any case), as OpenFlow numbers them in 1.0.
pub(crate) fn reserved_port(name: &str) -> Option<u32> {
    const RESERVED: [(&str, u32); 9] = [
        ("IN_PORT", 0xfff8),
        ("TABLE", 0xfff9),
        ("NORMAL", NORMAL_PORT),
        ("FLOOD", FLOOD_PORT),
        ("ALL", ALL_PORT),
        ("CONTROLLER", CONTROLLER_PORT),
        ("LOCAL", LOCAL_PORT),
        ("ANY", 0xffff),
        ("NONE", 0xffff),
    ];
    RESERVED.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|&(_, p)| p)
}

/// Table declarations `table=N(name)` in a flow file's line (its match part).
pub(crate) fn declared_tables(line: &str) -> impl Iterator<Item = (&str, &str, usize)> {
    let match_part = line.find("actions").map_or(line, |i| &line[..i]);
    match_part.match_indices("table=").filter_map(move |(i, _)| {
        let rest = &match_part[i + 6..];
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        let after = &rest[digits..];
        let inner = after.strip_prefix('(')?;
        let close = inner.find(')')?;
        (digits > 0).then(|| (&rest[..digits], &inner[..close], i + 6 + digits + 2))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::openflow::flow_file::TempFile;

    fn write(text: &str) -> TempFile {
        TempFile::holding(text.as_bytes())
    }

    #[test]
    fn ports_from_name_lines_and_from_ovs_ofctl_show() {
        let mut n = Names::new();
        let f = write("# ports\nantrea-gw0=2\n\"p 1\" = 7\nuplink=LOCAL\n");
        n.read_ports(&f.0).unwrap();
        assert_eq!(n.port("antrea-gw0"), Some(2));
        assert_eq!(n.port("\"antrea-gw0\""), Some(2));
        assert_eq!(n.port("\"p 1\""), Some(7));
        assert_eq!(n.port("uplink"), Some(LOCAL_PORT));
        let show = write(
            "OFPT_FEATURES_REPLY (xid=0x2): dpid:0000b2e4d1b8a84c\nn_tables:254, n_buffers:0\n \
             1(p1): addr:aa:55:aa:55:00:01\n     config:     0\n     state:      0\n \
             2(antrea-tun0): addr:aa:55:aa:55:00:02\n LOCAL(br-int): addr:b2:e4:d1:b8:a8:4c\n\
             OFPT_GET_CONFIG_REPLY (xid=0x4): frags=normal miss_send_len=0\n",
        );
        let mut m = Names::new();
        m.read_ports(&show.0).unwrap();
        assert_eq!(m.port("p1"), Some(1));
        assert_eq!(m.port("antrea-tun0"), Some(2));
        assert_eq!(m.port("br-int"), Some(LOCAL_PORT));
    }

    #[test]
    fn tables_from_name_lines_and_from_dump_table_features() {
        let mut n = Names::new();
        let f = write("Classifier=0\nSpoofGuard = 1\n");
        n.read_tables(&f.0).unwrap();
        assert_eq!(n.table("SpoofGuard"), Some(1));
        let dump = write(
            "OFPST_TABLE_FEATURES reply (OF1.5) (xid=0x2):\n  table 0 (\"zero\"):\n    active=0\n  \
             table 1 (\"one\"): ditto\n  tables 3...252: ditto\n  table 253:\n",
        );
        let mut m = Names::new();
        m.read_tables(&dump.0).unwrap();
        assert_eq!((m.table("zero"), m.table("one")), (Some(0), Some(1)));
    }

    #[test]
    fn bad_name_files_say_where() {
        let cases = [
            ("p1=2\np2=2\n", "x:2:1: port 2 is already named 'p1' (at 'p2')"),
            ("p1=70000\n", "x:1:4: port numbers are 1..65279 (or LOCAL) (at '70000')"),
            ("p1\n", "x:1:1: expected name=number (at 'p1')"),
            ("12=3\n", "x:1:1: port name '12' is a number (at '12')"),
            ("NORMAL=3\n", "x:1:1: 'NORMAL' is a reserved port name (at 'NORMAL')"),
        ];
        for (text, want) in cases {
            let f = write(text);
            let e = Names::new().read_ports(&f.0).unwrap_err();
            let shown = FlowFileError { file: "x".into(), ..e }.to_string();
            assert_eq!(shown, want, "{text:?}");
        }
        let f = write("t=255\n");
        let e = Names::new().read_tables(&f.0).unwrap_err();
        assert_eq!(
            FlowFileError { file: "x".into(), ..e }.to_string(),
            "x:1:3: bad table number '255' (0..254) (at '255')"
        );
    }

    #[test]
    fn declarations_are_found_in_the_match_part_only() {
        let got: Vec<_> = declared_tables("table=3(Egress),priority=5 actions=ct(table=4(x))").collect();
        assert_eq!(got, [("3", "Egress", 9)]);
        assert_eq!(unquote("\"a\\\"b\""), Some("a\"b".into()));
        assert_eq!(unquote("\"open"), None);
        assert_eq!(reserved_port("normal"), Some(0xfffa));
    }
}
