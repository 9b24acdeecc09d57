//! Rules as `ovs-ofctl --names` prints them: the ports and tables a rule refers to by number
//! written by name where the switch names them (`in_port="antrea-gw0"`, `output:p1`,
//! `goto_table:SpoofGuard`, `resubmit(,Classifier)`, `ct(table=ConntrackState,...)`).
//!
//! Rules print themselves with numbers (what OVS's vectors compare); [`with_names`] rewrites
//! such text, finding the references where the printer writes them, at the start of the text
//! or after `,`, `(` or a space: `in_port=N`, `output:N`, `enqueue:N:Q`, `goto_table:N`,
//! `resubmit(P,T)` and `table=N` (inside `ct`, `learn`). Numbers without a name stay numbers;
//! names are written bare when they are a letter followed by letters and digits, and quoted
//! JSON-style otherwise, as Open vSwitch writes them.

use super::names::Names;

/// `name` as a flow writes it: bare, or quoted with JSON's escapes.
pub fn quoted(name: &str) -> String {
    let mut chars = name.chars();
    let bare =
        chars.next().is_some_and(|c| c.is_ascii_alphabetic()) && chars.all(|c| c.is_ascii_alphanumeric());
    if bare {
        return name.to_string();
    }
    let mut out = String::with_capacity(name.len() + 2);
    out.push('"');
    for c in name.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// What a reference names.
#[derive(Clone, Copy)]
enum Ref {
    Port,
    Table,
}

/// `text` (a rule's match or actions as hyflow prints them) with every port and table number
/// the switch names written by name.
pub fn with_names(text: &str, names: &Names) -> String {
    const PREFIXES: [(&str, Ref); 5] = [
        ("in_port=", Ref::Port),
        ("output:", Ref::Port),
        ("enqueue:", Ref::Port),
        ("goto_table:", Ref::Table),
        ("table=", Ref::Table),
    ];
    let name_of = |r: Ref, digits: &str| -> Option<String> {
        match r {
            Ref::Port => names.port_name(digits.parse().ok()?).map(quoted),
            Ref::Table => names.table_name(digits.parse().ok()?).map(quoted),
        }
    };
    let mut out = String::with_capacity(text.len() + 16);
    let mut i = 0;
    let bytes = text.as_bytes();
    while i < text.len() {
        let at_boundary = i == 0 || matches!(bytes[i - 1], b',' | b'(' | b' ');
        let rest = &text[i..];
        if at_boundary {
            if let Some((prefix, r)) = PREFIXES.iter().find(|(p, _)| rest.starts_with(p)) {
                let digits_len = rest[prefix.len()..].bytes().take_while(u8::is_ascii_digit).count();
                let digits = &rest[prefix.len()..prefix.len() + digits_len];
                if let Some(name) = (digits_len > 0).then(|| name_of(*r, digits)).flatten() {
                    out.push_str(prefix);
                    out.push_str(&name);
                    i += prefix.len() + digits_len;
                    continue;
                }
            }
            if let Some(args) = rest.strip_prefix("resubmit(") {
                // resubmit(PORT,TABLE) with either part empty.
                let port_len = args.bytes().take_while(u8::is_ascii_digit).count();
                let after_port = &args[port_len..];
                if let Some(table_part) = after_port.strip_prefix(',') {
                    let table_len = table_part.bytes().take_while(u8::is_ascii_digit).count();
                    let port = &args[..port_len];
                    let table = &table_part[..table_len];
                    let port = name_of(Ref::Port, port).unwrap_or_else(|| port.to_string());
                    let table = name_of(Ref::Table, table).unwrap_or_else(|| table.to_string());
                    out.push_str("resubmit(");
                    out.push_str(&port);
                    out.push(',');
                    out.push_str(&table);
                    i += "resubmit(".len() + port_len + 1 + table_len;
                    continue;
                }
            }
        }
        let c = rest.chars().next().expect("within the text");
        out.push(c);
        i += c.len_utf8();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> Names {
        let mut n = Names::new();
        n.add_port("antrea-gw0", 2).unwrap();
        n.add_port("p1", 1).unwrap();
        n.add_table("Classifier", 3).unwrap();
        n.add_table("SpoofGuard", 4).unwrap();
        n
    }

    #[test]
    fn numbers_the_switch_names_are_written_by_name() {
        let n = names();
        assert_eq!(
            with_names("ip,in_port=2,nw_src=10.0.0.2", &n),
            "ip,in_port=\"antrea-gw0\",nw_src=10.0.0.2"
        );
        assert_eq!(
            with_names("set_field:0x3/0xf->reg0,goto_table:4", &n),
            "set_field:0x3/0xf->reg0,goto_table:SpoofGuard"
        );
        assert_eq!(
            with_names("resubmit(,3),resubmit(1,4),resubmit(2,)", &n),
            "resubmit(,Classifier),resubmit(p1,SpoofGuard),resubmit(\"antrea-gw0\",)"
        );
        assert_eq!(
            with_names("ct(commit,table=3,zone=65520),output:1", &n),
            "ct(commit,table=Classifier,zone=65520),output:p1"
        );
        // Numbers without a name, and look-alikes that are not references, stay.
        assert_eq!(
            with_names("in_port=7,output:9,goto_table:5,reg0=0x2", &n),
            "in_port=7,output:9,goto_table:5,reg0=0x2"
        );
        assert_eq!(
            with_names("load:0x2->NXM_OF_IN_PORT[],nw_tos=2", &n),
            "load:0x2->NXM_OF_IN_PORT[],nw_tos=2"
        );
    }

    /// A rule printed with names parses back to the same rule.
    #[test]
    fn named_rules_load_back() {
        let mut n = names();
        let text = "table=3,priority=5,ip,in_port=2 actions=resubmit(1,4),output:2,goto_table:4";
        let rules = crate::openflow::parse_flows(text, "t").unwrap();
        let r = &rules[0];
        let named = format!(
            "table={},priority=5,{} actions={}",
            with_names("table=3", &n).trim_start_matches("table="),
            with_names(&r.matcher().to_string(), &n),
            with_names(&crate::openflow::action::format_actions(&r.actions), &n)
        );
        let again = crate::openflow::parser::parse_flows_named(&named, "t", &mut n).unwrap();
        assert_eq!(again[0].to_string(), r.to_string(), "{named}");
    }
}
