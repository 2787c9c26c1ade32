//! `$(format-json …)`: name-value pairs chosen as syslog-ng's value-pairs chooses them,
//! written as a JSON object.
//!
//! The selection, as in syslog-ng 3.38:
//! - `--scope` adds sets: `nv-pairs` (the message's pairs without a leading dot: `HOST`,
//!   `PROGRAM`, `SOURCE`, `HOST_FROM`, `LEGACY_MSGHDR`, parsed pairs…), `dot-nv-pairs`,
//!   `all-nv-pairs`, `rfc3164` (`FACILITY PRIORITY HOST PROGRAM PID MESSAGE DATE`), `rfc5424`
//!   (those, `MSGID` and `.SDATA.*`), `selected-macros` (the rfc3164 set, `TAGS SOURCEIP
//!   SEQNUM`), `all-macros`, `sdata`, `everything`.
//! - `--key GLOB` includes and `--exclude GLOB` excludes names, the last pattern that matches a
//!   name deciding; a key also brings in macros of that name. A bare argument is a key, or a
//!   pair when it holds `=`.
//! - `--pair NAME=TEMPLATE` adds a value; `int(…)`, `double(…)`, `boolean(…)` make it a JSON
//!   number or boolean (with `@version` 3.x every other value is a string).
//! - `--rekey GLOB` followed by `--shift N`, `--add-prefix P`, `--replace-prefix OLD=NEW`
//!   renames matching names.
//! - Empty macros are left out; empty pairs too with `--omit-empty-values`.
//!
//! Names are split at dots into nested objects (a leading dot makes the first part `_x`), and
//! each object lists its members in descending byte order of their names, as syslog-ng's
//! output does.

use super::Template;
use crate::macros;
use crate::message::LogMessage;
use crate::values::{name_of, MATCHES};
use std::collections::BTreeMap;

#[derive(Clone, Debug, Default)]
pub struct FormatJson {
    scopes: u8,
    /// `(include, glob)` in the order written.
    patterns: Vec<(bool, glob::Pattern)>,
    /// Macros the scopes and keys bring in, by name.
    macros: Vec<(String, Template)>,
    pairs: Vec<(String, Cast, Template)>,
    rekeys: Vec<(glob::Pattern, Vec<Rename>)>,
    omit_empty: bool,
}

const NV_PAIRS: u8 = 1;
const DOT_NV_PAIRS: u8 = 2;
const RFC3164: u8 = 4;
const RFC5424: u8 = 8;
const ALL_MACROS: u8 = 16;
const SELECTED_MACROS: u8 = 32;
const SDATA: u8 = 64;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cast {
    String,
    Int,
    Double,
    Boolean,
}

#[derive(Clone, Debug)]
enum Rename {
    Shift(usize),
    AddPrefix(String),
    ReplacePrefix(String, String),
}

fn glob(p: &str) -> Result<glob::Pattern, String> {
    glob::Pattern::new(p).map_err(|e| format!("$(format-json) pattern {p}: {e}"))
}

impl FormatJson {
    pub fn compile(args: &[String]) -> Result<FormatJson, String> {
        let mut f = FormatJson::default();
        let mut it = args.iter();
        let mut in_rekey = false;
        while let Some(a) = it.next() {
            let (flag, inline) = match a.split_once('=') {
                Some((f, v)) if f.starts_with("--") => (f, Some(v.to_string())),
                _ => (a.as_str(), None),
            };
            let mut value = || {
                inline
                    .clone()
                    .or_else(|| it.next().cloned())
                    .ok_or(format!("$(format-json) {flag} needs a value"))
            };
            let rekey_option = matches!(
                flag,
                "--shift" | "-S" | "--add-prefix" | "-A" | "--replace-prefix" | "-R"
            );
            if !rekey_option {
                in_rekey = false;
            }
            match flag {
                "--scope" | "-s" => {
                    for s in value()?.split(',') {
                        f.scopes |= match s {
                            "nv-pairs" => NV_PAIRS,
                            "dot-nv-pairs" => DOT_NV_PAIRS,
                            "all-nv-pairs" => NV_PAIRS | DOT_NV_PAIRS,
                            "rfc3164" | "core" | "base" => RFC3164,
                            "rfc5424" | "syslog-proto" => RFC5424,
                            "all-macros" => ALL_MACROS,
                            "selected-macros" => SELECTED_MACROS,
                            "sdata" => SDATA,
                            "everything" => 0x7f,
                            other => return Err(format!("$(format-json) unknown scope {other}")),
                        }
                    }
                }
                "--key" | "-k" => f.patterns.push((true, glob(&value()?)?)),
                "--exclude" | "-x" => f.patterns.push((false, glob(&value()?)?)),
                "--pair" | "-p" => {
                    let v = value()?;
                    f.add_pair(&v)?;
                }
                "--omit-empty-values" => f.omit_empty = true,
                "--rekey" | "-r" => {
                    f.rekeys.push((glob(&value()?)?, Vec::new()));
                    in_rekey = true;
                }
                _ if rekey_option => {
                    if !in_rekey {
                        return Err(format!("$(format-json) {flag} must follow --rekey"));
                    }
                    let v = value()?;
                    let rename = match flag {
                        "--shift" | "-S" => Rename::Shift(v.parse().map_err(|_| {
                            format!("$(format-json) --shift needs a number, not {v}")
                        })?),
                        "--add-prefix" | "-A" => Rename::AddPrefix(v),
                        _ => match v.split_once('=') {
                            Some((old, new)) => Rename::ReplacePrefix(old.into(), new.into()),
                            None => {
                                return Err("$(format-json) --replace-prefix needs OLD=NEW".into())
                            }
                        },
                    };
                    f.rekeys.last_mut().expect("in a rekey").1.push(rename);
                }
                a if a.starts_with('-') => {
                    return Err(format!("$(format-json) unknown option {a}"))
                }
                _ if a.contains('=') => f.add_pair(a)?,
                _ => f.patterns.push((true, glob(a)?)),
            }
        }
        let mut wanted: Vec<&str> = Vec::new();
        if f.scopes & (RFC3164 | RFC5424 | SELECTED_MACROS) != 0 {
            wanted.extend([
                "FACILITY", "PRIORITY", "HOST", "PROGRAM", "PID", "MESSAGE", "DATE",
            ]);
        }
        if f.scopes & RFC5424 != 0 {
            wanted.push("MSGID");
        }
        if f.scopes & SELECTED_MACROS != 0 {
            wanted.extend(["TAGS", "SOURCEIP", "SEQNUM"]);
        }
        let all: Vec<String> = macros::names().collect();
        for name in &all {
            let by_scope = f.scopes & ALL_MACROS != 0 || wanted.contains(&name.as_str());
            // A scope's macro stays unless a pattern excludes it; keys bring in others.
            let decision = f
                .patterns
                .iter()
                .rev()
                .find(|(_, p)| p.matches(name))
                .map(|(inc, _)| *inc);
            if decision.unwrap_or(by_scope) {
                f.macros
                    .push((name.clone(), Template::compile(&format!("${{{name}}}"))?));
            }
        }
        Ok(f)
    }

    fn add_pair(&mut self, spec: &str) -> Result<(), String> {
        let (name, template) = spec.split_once('=').ok_or(format!(
            "$(format-json) --pair needs NAME=VALUE, not {spec}"
        ))?;
        let (cast, text) = cast_of(template);
        self.pairs
            .push((name.to_string(), cast, Template::compile(text)?));
        Ok(())
    }

    pub fn uses_seq(&self) -> bool {
        self.macros.iter().any(|(_, t)| t.uses_seq())
            || self.pairs.iter().any(|(_, _, t)| t.uses_seq())
    }

    fn included(&self, name: &str, by_scope: bool) -> bool {
        self.patterns
            .iter()
            .rev()
            .find(|(_, p)| p.matches(name))
            .map_or(by_scope, |(inc, _)| *inc)
    }

    fn rename(&self, name: &str) -> String {
        let mut name = name.to_string();
        for (pattern, renames) in &self.rekeys {
            if !pattern.matches(&name) {
                continue;
            }
            for r in renames {
                name = match r {
                    Rename::Shift(n) => name.get(*n..).unwrap_or("").to_string(),
                    Rename::AddPrefix(p) => format!("{p}{name}"),
                    Rename::ReplacePrefix(old, new) => match name.strip_prefix(old.as_str()) {
                        Some(rest) => format!("{new}{rest}"),
                        None => name,
                    },
                };
            }
        }
        name
    }

    pub fn append(&self, msg: &LogMessage, seq: u32, out: &mut Vec<u8>) {
        let mut chosen: BTreeMap<String, (Cast, Vec<u8>)> = BTreeMap::new();
        let mut put = |name: &str, cast: Cast, value: Vec<u8>| {
            chosen.insert(self.rename(name), (cast, value));
        };
        // The message's own pairs, as syslog-ng keeps them.
        let mut own: Vec<(String, Vec<u8>, bool)> = Vec::new();
        let mut field = |name: &str, v: Option<&[u8]>| {
            if let Some(v) = v {
                own.push((name.to_string(), v.to_vec(), false));
            }
        };
        let f = &msg.fields;
        field("HOST", Some(msg.host()));
        field("HOST_FROM", Some(&msg.origin.host_from));
        field("SOURCE", Some(msg.origin.source_name.as_bytes()));
        field("PROGRAM", f.program.as_ref().map(|t| t.of(&msg.raw)));
        field("PID", f.pid.as_ref().map(|t| t.of(&msg.raw)));
        field("MSGID", f.msgid.as_ref().map(|t| t.of(&msg.raw)));
        field("MESSAGE", Some(msg.message()));
        field("LEGACY_MSGHDR", f.legacy_msghdr.map(|s| s.of(&msg.raw)));
        for p in msg.fields.sd_params(&msg.raw) {
            let mut name = format!(".SDATA.{}", String::from_utf8_lossy(p.id));
            if let Some(n) = p.name {
                name.push('.');
                name.push_str(&String::from_utf8_lossy(n));
            }
            own.push((name, p.value.to_vec(), true));
        }
        for (id, v) in msg.values.iter() {
            if (id as usize) < MATCHES {
                continue;
            }
            let name = name_of(id);
            let value = v.of(&msg.raw).to_vec();
            match own.iter_mut().find(|(n, _, _)| *n == *name) {
                Some(slot) => slot.1 = value,
                None => own.push((name.to_string(), value, name.starts_with(".SDATA."))),
            }
        }
        if self.scopes & (NV_PAIRS | DOT_NV_PAIRS | SDATA | RFC5424) != 0
            || !self.patterns.is_empty()
        {
            for (name, value, sdata) in own {
                if self.omit_empty && value.is_empty() {
                    continue;
                }
                let by_scope = (name.starts_with('.') && self.scopes & DOT_NV_PAIRS != 0)
                    || (!name.starts_with('.') && self.scopes & NV_PAIRS != 0)
                    || (sdata && self.scopes & (SDATA | RFC5424) != 0);
                if self.included(&name, by_scope) {
                    put(&name, Cast::String, value);
                }
            }
        }
        for (name, template) in &self.macros {
            let mut v = Vec::new();
            template.append(msg, seq, &mut v);
            if !v.is_empty() {
                put(name, Cast::String, v);
            }
        }
        for (name, cast, template) in &self.pairs {
            let mut v = Vec::new();
            template.append(msg, seq, &mut v);
            if self.omit_empty && v.is_empty() {
                continue;
            }
            // A value its cast cannot take empties the whole result, as in syslog-ng.
            if !casts(*cast, &v) {
                return;
            }
            put(name, *cast, v);
        }
        write_object(&chosen, out);
    }
}

/// `int(…)` and the other casts syslog-ng 3.38 honours in a pair's template.
fn cast_of(template: &str) -> (Cast, &str) {
    for (prefix, cast) in [
        ("int(", Cast::Int),
        ("int32(", Cast::Int),
        ("int64(", Cast::Int),
        ("double(", Cast::Double),
        ("float(", Cast::Double),
        ("boolean(", Cast::Boolean),
        ("string(", Cast::String),
        ("literal(", Cast::String),
    ] {
        if let Some(inner) = template
            .strip_prefix(prefix)
            .and_then(|r| r.strip_suffix(')'))
        {
            return (cast, inner);
        }
    }
    (Cast::String, template)
}

/// A tree of objects from dotted names.
#[derive(Default)]
struct Node<'a> {
    value: Option<&'a (Cast, Vec<u8>)>,
    children: BTreeMap<String, Node<'a>>,
}

fn write_object(chosen: &BTreeMap<String, (Cast, Vec<u8>)>, out: &mut Vec<u8>) {
    let mut root = Node::default();
    for (name, value) in chosen {
        let mut parts: Vec<String> = name.split('.').map(str::to_string).collect();
        if name.starts_with('.') && parts.len() > 1 {
            let first = format!("_{}", parts[1]);
            parts.splice(0..2, [first]);
        }
        let mut node = &mut root;
        for part in parts {
            node = node.children.entry(part).or_default();
        }
        node.value = Some(value);
    }
    write_node(&root, out);
}

fn write_node(node: &Node, out: &mut Vec<u8>) {
    out.push(b'{');
    let mut first = true;
    for (name, child) in node.children.iter().rev() {
        if !first {
            out.push(b',');
        }
        first = false;
        out.push(b'"');
        escape(name.as_bytes(), out);
        out.extend_from_slice(b"\":");
        match (child.value, child.children.is_empty()) {
            (Some(v), true) => write_value(v, out),
            _ => write_node(child, out),
        }
    }
    out.push(b'}');
}

/// Whether `v` is a value of the cast's type.
fn casts(cast: Cast, v: &[u8]) -> bool {
    let text = std::str::from_utf8(v).unwrap_or("").trim();
    match cast {
        Cast::String => true,
        Cast::Int => text.parse::<i64>().is_ok(),
        Cast::Double => text.parse::<f64>().is_ok_and(f64::is_finite),
        Cast::Boolean => matches!(text, "true" | "false"),
    }
}

fn write_value((cast, v): &(Cast, Vec<u8>), out: &mut Vec<u8>) {
    if *cast == Cast::String {
        out.push(b'"');
        escape(v, out);
        out.push(b'"');
    } else {
        out.extend_from_slice(std::str::from_utf8(v).unwrap_or("").trim().as_bytes());
    }
}

/// syslog-ng's JSON string escaping: `\b \f \n \r \t \\ \"`, other control characters as
/// `\u00XX`, bytes that are not UTF-8 as `\\xXX`.
fn escape(v: &[u8], out: &mut Vec<u8>) {
    for chunk in v.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\u{8}' => out.extend_from_slice(b"\\b"),
                '\u{c}' => out.extend_from_slice(b"\\f"),
                '\n' => out.extend_from_slice(b"\\n"),
                '\r' => out.extend_from_slice(b"\\r"),
                '\t' => out.extend_from_slice(b"\\t"),
                '\\' => out.extend_from_slice(b"\\\\"),
                '"' => out.extend_from_slice(b"\\\""),
                c if (c as u32) < 32 => {
                    out.extend_from_slice(format!("\\u{:04x}", c as u32).as_bytes())
                }
                c => out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
            }
        }
        for b in chunk.invalid() {
            out.extend_from_slice(format!("\\\\x{b:02x}").as_bytes());
        }
    }
}
