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
use std::borrow::Cow;

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
    /// `$(format-flat-json)`: one object, dotted names as they are.
    flat: bool,
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
    pub fn compile(args: &[String], flat: bool) -> Result<FormatJson, String> {
        let mut f = FormatJson {
            flat,
            ..FormatJson::default()
        };
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

    fn rename<'n>(&self, name: Cow<'n, str>) -> Cow<'n, str> {
        let mut name = name;
        for (pattern, renames) in &self.rekeys {
            if !pattern.matches(&name) {
                continue;
            }
            for r in renames {
                name = match r {
                    Rename::Shift(n) => Cow::Owned(name.get(*n..).unwrap_or("").to_string()),
                    Rename::AddPrefix(p) => Cow::Owned(format!("{p}{name}")),
                    Rename::ReplacePrefix(old, new) => match name.strip_prefix(old.as_str()) {
                        Some(rest) => Cow::Owned(format!("{new}{rest}")),
                        None => name,
                    },
                };
            }
        }
        name
    }

    pub fn append(&self, msg: &LogMessage, seq: u32, out: &mut Vec<u8>) {
        SCRATCH.with_borrow_mut(|scratch| self.append_with(msg, seq, scratch, out));
    }

    fn append_with(&self, msg: &LogMessage, seq: u32, made: &mut Vec<u8>, out: &mut Vec<u8>) {
        made.clear();
        // Values chosen so far, in the order syslog-ng inserts them (a later one with the same
        // name replaces an earlier one).
        let mut chosen: Vec<Chosen> = Vec::new();
        let raw = &msg.raw[..];
        if self.scopes & (NV_PAIRS | DOT_NV_PAIRS | SDATA | RFC5424) != 0
            || !self.patterns.is_empty()
        {
            let f = &msg.fields;
            fn text<'m>(t: &'m Option<sluice_protocol::Text>, raw: &'m [u8]) -> Option<&'m [u8]> {
                t.as_ref().map(|t| t.of(raw))
            }
            let source = msg.origin.source_name.as_bytes();
            let fields: [(&str, Option<&[u8]>); 8] = [
                ("HOST", Some(msg.host())),
                ("HOST_FROM", Some(&msg.origin.host_from[..])),
                ("SOURCE", Some(source)),
                ("PROGRAM", text(&f.program, raw)),
                ("PID", text(&f.pid, raw)),
                ("MSGID", text(&f.msgid, raw)),
                ("MESSAGE", Some(msg.message())),
                ("LEGACY_MSGHDR", text(&f.legacy_msghdr, raw)),
            ];
            let mut own: Vec<(Cow<str>, Piece, bool)> = Vec::new();
            for (name, value) in fields {
                if let Some(v) = value {
                    own.push((Cow::Borrowed(name), Piece::Borrowed(v), false));
                }
            }
            for p in f.sd_params(raw) {
                let mut name = format!(".SDATA.{}", String::from_utf8_lossy(p.id));
                if let Some(n) = p.name {
                    name.push('.');
                    name.push_str(&String::from_utf8_lossy(n));
                }
                own.push((Cow::Owned(name), Piece::Borrowed(p.value), true));
            }
            for (id, v) in msg.values.iter() {
                if (id as usize) < MATCHES {
                    continue;
                }
                let name = name_of(id);
                let value = Piece::Borrowed(v.of(raw));
                match own.iter_mut().find(|(n, _, _)| **n == *name) {
                    Some(slot) => slot.1 = value,
                    None => {
                        let sdata = name.starts_with(".SDATA.");
                        own.push((Cow::Owned(name.to_string()), value, sdata));
                    }
                }
            }
            for (name, value, sdata) in own {
                if self.omit_empty && value.is_empty(made) {
                    continue;
                }
                let by_scope = (name.starts_with('.') && self.scopes & DOT_NV_PAIRS != 0)
                    || (!name.starts_with('.') && self.scopes & NV_PAIRS != 0)
                    || (sdata && self.scopes & (SDATA | RFC5424) != 0);
                if self.included(&name, by_scope) {
                    chosen.push((self.rename(name), Cast::String, value));
                }
            }
        }
        for (name, template) in &self.macros {
            let start = made.len();
            template.append(msg, seq, made);
            if made.len() > start {
                chosen.push((
                    self.rename(Cow::Borrowed(name)),
                    Cast::String,
                    Piece::Made(start..made.len()),
                ));
            }
        }
        for (name, cast, template) in &self.pairs {
            let start = made.len();
            template.append(msg, seq, made);
            if self.omit_empty && made.len() == start {
                continue;
            }
            // A value its cast cannot take empties the whole result, as in syslog-ng.
            if !casts(*cast, &made[start..]) {
                return;
            }
            chosen.push((
                self.rename(Cow::Borrowed(name)),
                *cast,
                Piece::Made(start..made.len()),
            ));
        }
        write_object(chosen, made, self.flat, out);
    }
}

/// A value: borrowed from the message, or a range of the buffer macros were expanded into.
enum Piece<'a> {
    Borrowed(&'a [u8]),
    Made(std::ops::Range<usize>),
}

impl Piece<'_> {
    fn bytes<'b>(&'b self, made: &'b [u8]) -> &'b [u8] {
        match self {
            Piece::Borrowed(b) => b,
            Piece::Made(r) => &made[r.clone()],
        }
    }

    fn is_empty(&self, made: &[u8]) -> bool {
        self.bytes(made).is_empty()
    }
}

/// A chosen member: its name, its cast and its value.
type Chosen<'a> = (Cow<'a, str>, Cast, Piece<'a>);

thread_local! {
    /// Macro expansions of the message being formatted.
    static SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
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

/// A name as it nests: a leading dot makes the first part `_x` (`.kv.a` is `_kv.a`).
fn nested(name: &str) -> Cow<'_, str> {
    match name.strip_prefix('.') {
        Some(rest) if !rest.is_empty() => Cow::Owned(format!("_{rest}")),
        _ => Cow::Borrowed(name),
    }
}

/// Descending order of dotted names part by part: a dot sorts below every other byte.
fn descending(a: &str, b: &str) -> std::cmp::Ordering {
    let key = |c: u8| if c == b'.' { 0 } else { u16::from(c) + 1 };
    let (a, b) = (a.as_bytes(), b.as_bytes());
    b.iter().map(|&c| key(c)).cmp(a.iter().map(|&c| key(c)))
}

/// Writes the members as nested objects, each object's members in descending order of name.
fn write_object(chosen: Vec<Chosen>, made: &[u8], flat: bool, out: &mut Vec<u8>) {
    // The last value given for a name wins.
    let mut members: Vec<(Cow<str>, Cast, &[u8])> = Vec::with_capacity(chosen.len());
    for (i, (name, cast, value)) in chosen.iter().enumerate() {
        if chosen[i + 1..].iter().any(|(n, _, _)| n == name) {
            continue;
        }
        members.push((nested(name), *cast, value.bytes(made)));
    }
    if flat {
        members.sort_by(|a, b| b.0.cmp(&a.0));
        out.push(b'{');
        for (i, (name, cast, value)) in members.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.push(b'"');
            escape(name.as_bytes(), out);
            out.extend_from_slice(b"\":");
            write_value(*cast, value, out);
        }
        out.push(b'}');
        return;
    }
    members.sort_by(|a, b| descending(&a.0, &b.0));
    // A name that is also the start of longer names becomes their object.
    members.dedup_by(|later, earlier| {
        earlier.0.len() > later.0.len()
            && earlier.0.starts_with(&*later.0)
            && earlier.0.as_bytes()[later.0.len()] == b'.'
    });
    let mut open: Vec<&str> = Vec::new();
    out.push(b'{');
    let mut first = true;
    for (name, cast, value) in &members {
        let parts: Vec<&str> = name.split('.').collect();
        let (leaf, objects) = parts.split_last().expect("split gives a part");
        let common = open.iter().zip(objects).take_while(|(a, b)| a == b).count();
        while open.len() > common {
            open.pop();
            out.push(b'}');
        }
        for part in &objects[open.len()..] {
            if !first {
                out.push(b',');
            }
            out.push(b'"');
            escape(part.as_bytes(), out);
            out.extend_from_slice(b"\":{");
            first = true;
            open.push(part);
        }
        if !first {
            out.push(b',');
        }
        first = false;
        out.push(b'"');
        escape(leaf.as_bytes(), out);
        out.extend_from_slice(b"\":");
        write_value(*cast, value, out);
    }
    for _ in open {
        out.push(b'}');
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

fn write_value(cast: Cast, v: &[u8], out: &mut Vec<u8>) {
    if cast == Cast::String {
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
    if std::str::from_utf8(v).is_ok() {
        escape_text(v, out);
        return;
    }
    for chunk in v.utf8_chunks() {
        escape_text(chunk.valid().as_bytes(), out);
        for b in chunk.invalid() {
            out.extend_from_slice(format!("\\\\x{b:02x}").as_bytes());
        }
    }
}

/// Escapes UTF-8 text.
fn escape_text(text: &[u8], out: &mut Vec<u8>) {
    let mut run = 0;
    for (i, &b) in text.iter().enumerate() {
        if b >= 0x20 && b != b'"' && b != b'\\' {
            continue;
        }
        out.extend_from_slice(&text[run..i]);
        run = i + 1;
        match b {
            8 => out.extend_from_slice(b"\\b"),
            12 => out.extend_from_slice(b"\\f"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'"' => out.extend_from_slice(b"\\\""),
            c => out.extend_from_slice(format!("\\u{c:04x}").as_bytes()),
        }
    }
    out.extend_from_slice(&text[run..]);
}
