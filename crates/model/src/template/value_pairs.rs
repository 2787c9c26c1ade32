//! syslog-ng's value-pairs: the name-value pairs `$(format-json)`, `$(format-flat-json)`,
//! `$(format-welf)`, `$(names)` and `$(values)` choose from a message by their options, and
//! how each of them writes what it chose.
//!
//! The selection, as in syslog-ng 3.38:
//! - `--scope` adds sets: `nv-pairs` (the message's pairs without a leading dot: `HOST`,
//!   `PROGRAM`, `SOURCE`, `HOST_FROM`, `LEGACY_MSGHDR`, parsed pairs…), `dot-nv-pairs`,
//!   `all-nv-pairs`, `rfc3164` (`FACILITY PRIORITY HOST PROGRAM PID MESSAGE DATE`), `rfc5424`
//!   (those, `MSGID` and `.SDATA.*`), `selected-macros` (the rfc3164 set, `TAGS SOURCEIP
//!   SEQNUM`), `all-macros`, `sdata`, `everything`; `none` adds nothing.
//! - `--key GLOB` includes and `--exclude GLOB` excludes names, the last pattern that matches a
//!   name deciding; a key also brings in macros of that name. A bare argument is a key, or a
//!   pair when it holds `=`.
//! - `--pair NAME=TEMPLATE` adds a value; `int(…)`, `double(…)`, `boolean(…)`, `list(…)`,
//!   `json(…)`/`literal(…)` and `null(…)` give it a type. Other values are strings, as
//!   syslog-ng 3.x writes them, unless `--no-cast` asks for the types values have
//!   ([`ValueType`]: set by `json-parser()`, or a template function's result).
//! - `--rekey GLOB` followed by `--shift N`, `--add-prefix P`, `--replace-prefix OLD=NEW`
//!   renames matching names.
//! - Empty macros are left out; empty pairs too with `--omit-empty-values`.
//!
//! JSON is written by [`super::json`]; `$(format-welf)` writes `name=value` pairs (`id` first,
//! then by name; a value with a space in double quotes), and `$(names)` and `$(values)` a list
//! in the order of the names.

use super::Template;
use crate::macros;
use crate::message::LogMessage;
use crate::values::{name_of, ValueType, MATCHES};
use std::borrow::Cow;

#[derive(Clone, Debug, Default)]
pub struct ValuePairs {
    scopes: u8,
    /// `(include, glob)` in the order written.
    patterns: Vec<(bool, glob::Pattern)>,
    /// Macros the scopes and keys bring in, by name.
    macros: Vec<(String, Template)>,
    /// `--pair NAME=TEMPLATE`, with the type its cast (`int(…)`) names.
    pairs: Vec<(String, Option<ValueType>, Template)>,
    /// Values other than cast pairs are written as strings: syslog-ng 3.x's default, changed
    /// by `--no-cast` (and back by `--cast`).
    cast_to_strings: bool,
    rekeys: Vec<(glob::Pattern, Vec<Rename>)>,
    omit_empty: bool,
    output: Output,
    /// `--key-delimiter`, `--leave-initial-dot` (`$(format-json)`).
    nesting: super::json::Nesting,
    /// For JSON, when every name that can be chosen is known from the options and has no dot:
    /// the members in the order they are written. A message with name-value pairs or
    /// structured data of its own goes the general way.
    plan: Option<Vec<Planned>>,
}

/// A member of a [`ValuePairs::plan`]: its name and where its value can come from, the
/// source given last (which wins) first.
#[derive(Clone, Debug)]
struct Planned {
    name: String,
    sources: Vec<Source>,
}

#[derive(Clone, Copy, Debug)]
enum Source {
    /// One of the [`OWN_PAIRS`].
    Own(usize),
    Macro(usize),
    Pair(usize),
}

/// What a function writes of the pairs it chose.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Output {
    #[default]
    Json,
    /// `$(format-flat-json)`: one object, dotted names as they are.
    FlatJson,
    Welf,
    Names,
    Values,
}

impl Output {
    /// The function of this name.
    pub fn of(function: &str) -> Option<Output> {
        Some(match function {
            "format-json" => Output::Json,
            "format-flat-json" => Output::FlatJson,
            "format-welf" => Output::Welf,
            "names" => Output::Names,
            "values" => Output::Values,
            _ => return None,
        })
    }

    fn function(self) -> &'static str {
        match self {
            Output::Json => "format-json",
            Output::FlatJson => "format-flat-json",
            Output::Welf => "format-welf",
            Output::Names => "names",
            Output::Values => "values",
        }
    }
}

/// The pairs every message has, in the order syslog-ng lists them.
const OWN_PAIRS: [&str; 8] = [
    "HOST",
    "HOST_FROM",
    "SOURCE",
    "PROGRAM",
    "PID",
    "MSGID",
    "MESSAGE",
    "LEGACY_MSGHDR",
];

const NV_PAIRS: u8 = 1;
const DOT_NV_PAIRS: u8 = 2;
const RFC3164: u8 = 4;
const RFC5424: u8 = 8;
const ALL_MACROS: u8 = 16;
const SELECTED_MACROS: u8 = 32;
const SDATA: u8 = 64;

#[derive(Clone, Debug)]
enum Rename {
    Shift(usize),
    AddPrefix(String),
    ReplacePrefix(String, String),
}

impl ValuePairs {
    pub fn compile(args: &[String], output: Output) -> Result<ValuePairs, String> {
        let function = output.function();
        let glob =
            |p: &str| glob::Pattern::new(p).map_err(|e| format!("$({function}) pattern {p}: {e}"));
        let mut f = ValuePairs {
            output,
            cast_to_strings: true,
            ..ValuePairs::default()
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
                    .ok_or(format!("$({function}) {flag} needs a value"))
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
                            "none" => 0,
                            other => return Err(format!("$({function}) unknown scope {other}")),
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
                "--key-delimiter" if output == Output::Json => {
                    let d = value()?;
                    f.nesting.delimiter = *d
                        .as_bytes()
                        .first()
                        .ok_or(format!("$({function}) --key-delimiter needs a character"))?;
                }
                "--leave-initial-dot" if output == Output::Json => {
                    f.nesting.underscore_initial_dot = false
                }
                // syslog-ng 3.38 reads `--auto-cast` as it reads `--cast`: type hints are kept.
                "--cast" | "--auto-cast" => f.cast_to_strings = true,
                "--no-cast" => f.cast_to_strings = false,
                "--rekey" | "-r" => {
                    f.rekeys.push((glob(&value()?)?, Vec::new()));
                    in_rekey = true;
                }
                _ if rekey_option => {
                    if !in_rekey {
                        return Err(format!("$({function}) {flag} must follow --rekey"));
                    }
                    let v = value()?;
                    let rename = match flag {
                        "--shift" | "-S" => Rename::Shift(v.parse().map_err(|_| {
                            format!("$({function}) --shift needs a number, not {v}")
                        })?),
                        "--add-prefix" | "-A" => Rename::AddPrefix(v),
                        _ => match v.split_once('=') {
                            Some((old, new)) => Rename::ReplacePrefix(old.into(), new.into()),
                            None => {
                                return Err("$({function}) --replace-prefix needs OLD=NEW".into())
                            }
                        },
                    };
                    f.rekeys.last_mut().expect("in a rekey").1.push(rename);
                }
                a if a.starts_with('-') => return Err(format!("$({function}) unknown option {a}")),
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
            // With `nv-pairs`, a macro named as one of the message's own pairs gives the value
            // that pair has and would replace it: the pair alone is the same, and cheaper.
            let shadowed = f.scopes & NV_PAIRS != 0 && OWN_PAIRS.contains(&name.as_str());
            if decision.unwrap_or(by_scope) && !shadowed {
                f.macros
                    .push((name.clone(), Template::compile(&format!("${{{name}}}"))?));
            }
        }
        f.plan = f.plan();
        Ok(f)
    }

    /// The members a message without pairs or structured data of its own gets, in the order
    /// they are written, when that can be known now (see [`ValuePairs::plan`]).
    fn plan(&self) -> Option<Vec<Planned>> {
        if !self.rekeys.is_empty() || !matches!(self.output, Output::Json | Output::FlatJson) {
            return None;
        }
        let mut sources: Vec<(&str, Source)> = Vec::new();
        if self.own_pairs_apply() {
            for (i, name) in OWN_PAIRS.iter().enumerate() {
                if self.included(name, self.scopes & NV_PAIRS != 0) {
                    sources.push((name, Source::Own(i)));
                }
            }
        }
        for (i, (name, _)) in self.macros.iter().enumerate() {
            sources.push((name, Source::Macro(i)));
        }
        for (i, (name, _, _)) in self.pairs.iter().enumerate() {
            sources.push((name, Source::Pair(i)));
        }
        let delimiter = char::from(self.nesting.delimiter);
        let plain = |n: &str| !n.is_empty() && !n.contains('.') && !n.contains(delimiter);
        let pair_names: Vec<&str> = self.pairs.iter().map(|(n, _, _)| n.as_str()).collect();
        let repeated = (1..pair_names.len()).any(|i| pair_names[..i].contains(&pair_names[i]));
        if repeated || !sources.iter().all(|(n, _)| plain(n)) {
            return None;
        }
        let mut names: Vec<&str> = sources.iter().map(|(n, _)| *n).collect();
        names.sort_by(|a, b| b.cmp(a));
        names.dedup();
        Some(
            names
                .into_iter()
                .map(|name| Planned {
                    name: name.to_string(),
                    sources: sources
                        .iter()
                        .rev()
                        .filter(|(n, _)| *n == name)
                        .map(|(_, s)| *s)
                        .collect(),
                })
                .collect(),
        )
    }

    /// Whether the message's own pairs (`HOST`, `PROGRAM`…) are candidates at all.
    fn own_pairs_apply(&self) -> bool {
        self.scopes & (NV_PAIRS | DOT_NV_PAIRS | SDATA | RFC5424) != 0 || !self.patterns.is_empty()
    }

    fn add_pair(&mut self, spec: &str) -> Result<(), String> {
        let (name, template) = spec.split_once('=').ok_or(format!(
            "$({}) --pair needs NAME=VALUE, not {spec}",
            self.output.function()
        ))?;
        let (cast, text) = cast_of(template);
        self.pairs
            .push((name.to_string(), cast, Template::compile(text)?));
        Ok(())
    }

    /// The type of what the function writes.
    pub fn result_type(&self) -> ValueType {
        match self.output {
            Output::Json | Output::FlatJson => ValueType::Json,
            Output::Welf => ValueType::String,
            Output::Names | Output::Values => ValueType::List,
        }
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

    #[inline]
    fn rename<'n>(&self, name: Cow<'n, str>) -> Cow<'n, str> {
        if self.rekeys.is_empty() {
            return name;
        }
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
        // A `$(format-json)` inside another one's pair gets a buffer of its own.
        SCRATCH.with(|cell| match cell.try_borrow_mut() {
            Ok(mut scratch) => self.append_with(msg, seq, &mut scratch, out),
            Err(_) => self.append_with(msg, seq, &mut Vec::new(), out),
        });
    }

    fn append_with(&self, msg: &LogMessage, seq: u32, made: &mut Vec<u8>, out: &mut Vec<u8>) {
        made.clear();
        let raw = msg.raw;
        if let Some(plan) = &self.plan {
            if !msg.values.has_pairs() && msg.fields.sd_params(raw).next().is_none() {
                return self.append_planned(plan, msg, seq, made, out);
            }
        }
        // Values chosen so far, in the order syslog-ng inserts them (a later one with the same
        // name replaces an earlier one).
        let mut chosen: Vec<Chosen> = Vec::new();
        if self.own_pairs_apply() {
            let f = &msg.fields;
            let fields = own_pairs(msg);
            // Each candidate: name, value, whether it is structured data, type.
            let mut own: Vec<(Cow<str>, Piece, bool, ValueType)> = Vec::new();
            for (name, value) in OWN_PAIRS.into_iter().zip(fields) {
                if let Some(v) = value {
                    own.push((
                        Cow::Borrowed(name),
                        Piece::Borrowed(v),
                        false,
                        ValueType::String,
                    ));
                }
            }
            for p in f.sd_params(raw) {
                let mut name = format!(".SDATA.{}", String::from_utf8_lossy(p.id));
                if let Some(n) = p.name {
                    name.push('.');
                    name.push_str(&String::from_utf8_lossy(n));
                }
                own.push((
                    Cow::Owned(name),
                    Piece::Borrowed(p.value),
                    true,
                    ValueType::String,
                ));
            }
            for (id, kind, v) in msg.values.iter_typed() {
                if (id as usize) < MATCHES {
                    continue;
                }
                let name = name_of(id);
                let value = Piece::Borrowed(v.of(raw));
                let kind = if self.cast_to_strings {
                    ValueType::String
                } else {
                    kind
                };
                match own.iter_mut().find(|(n, ..)| **n == *name) {
                    Some(slot) => {
                        slot.1 = value;
                        slot.3 = kind;
                    }
                    None => {
                        let sdata = name.starts_with(".SDATA.");
                        own.push((Cow::Owned(name.to_string()), value, sdata, kind));
                    }
                }
            }
            for (name, value, sdata, kind) in own {
                if self.omit_empty && value.is_empty(made) {
                    continue;
                }
                let by_scope = (name.starts_with('.') && self.scopes & DOT_NV_PAIRS != 0)
                    || (!name.starts_with('.') && self.scopes & NV_PAIRS != 0)
                    || (sdata && self.scopes & (SDATA | RFC5424) != 0);
                if self.included(&name, by_scope) {
                    chosen.push((self.rename(name), kind, value));
                }
            }
        }
        for (name, template) in &self.macros {
            let start = made.len();
            template.append(msg, seq, made);
            if made.len() > start {
                chosen.push((
                    self.rename(Cow::Borrowed(name)),
                    ValueType::String,
                    Piece::Made(start..made.len()),
                ));
            }
        }
        for (i, (name, _, _)) in self.pairs.iter().enumerate() {
            let start = made.len();
            let kind = self.pair_value(i, msg, seq, made);
            if self.omit_empty && made.len() == start {
                continue;
            }
            // A value its type cannot take empties the whole result, as in syslog-ng.
            if !casts(kind, &made[start..]) {
                return;
            }
            chosen.push((
                self.rename(Cow::Borrowed(name)),
                kind,
                Piece::Made(start..made.len()),
            ));
        }
        match self.output {
            Output::Json => super::json::write_object(chosen, made, false, self.nesting, out),
            Output::FlatJson => super::json::write_object(chosen, made, true, self.nesting, out),
            Output::Welf => write_welf(last_of_each(chosen, made), out),
            Output::Names | Output::Values => {
                let start = out.len();
                for (name, value) in last_of_each(chosen, made) {
                    let item = match self.output {
                        Output::Names => name.as_bytes(),
                        _ => value,
                    };
                    crate::list::push(out, start, item);
                }
            }
        }
    }
}

/// The chosen pairs, the last value given for a name winning, in byte order of names.
fn last_of_each<'a>(chosen: Vec<Chosen<'a>>, made: &'a [u8]) -> Vec<(Cow<'a, str>, &'a [u8])> {
    let mut pairs: Vec<(Cow<str>, &[u8])> = Vec::with_capacity(chosen.len());
    for (name, _, value) in chosen.into_iter().rev() {
        if !pairs.iter().any(|(n, _)| *n == name) {
            let value = match value {
                Piece::Borrowed(b) => b,
                Piece::Made(r) => &made[r],
            };
            pairs.push((name, value));
        }
    }
    pairs.sort_by(|a, b| a.0.cmp(&b.0));
    pairs
}

/// `id=… name=value name="value with spaces"`: `id` first, values escaped as syslog-ng's
/// `append_unsafe_utf8_as_escaped_binary` does, with `"` escaped inside quotes.
fn write_welf(mut pairs: Vec<(Cow<str>, &[u8])>, out: &mut Vec<u8>) {
    if let Some(at) = pairs.iter().position(|(n, _)| n == "id") {
        let id = pairs.remove(at);
        pairs.insert(0, id);
    }
    for (i, (name, value)) in pairs.iter().enumerate() {
        if i > 0 {
            out.push(b' ');
        }
        out.extend_from_slice(name.as_bytes());
        out.push(b'=');
        if value.contains(&b' ') {
            out.push(b'"');
            sluice_protocol::syslog::escape_binary(value, Some(b'"'), out);
            out.push(b'"');
        } else {
            sluice_protocol::syslog::escape_binary(value, None, out);
        }
    }
}

impl ValuePairs {
    /// Writes the JSON object of the [`ValuePairs::plan`]: each member's value from the first
    /// of its sources that gives one.
    fn append_planned(
        &self,
        plan: &[Planned],
        msg: &LogMessage,
        seq: u32,
        made: &mut Vec<u8>,
        out: &mut Vec<u8>,
    ) {
        let own = own_pairs(msg);
        let start = out.len();
        out.push(b'{');
        let mut first = true;
        for member in plan {
            let mut found = None;
            for source in &member.sources {
                let at = made.len();
                match *source {
                    Source::Own(i) => match own[i] {
                        Some(v) if !(self.omit_empty && v.is_empty()) => {
                            found = Some((ValueType::String, Piece::Borrowed(v)));
                        }
                        _ => {}
                    },
                    Source::Macro(i) => {
                        self.macros[i].1.append(msg, seq, made);
                        if made.len() > at {
                            found = Some((ValueType::String, Piece::Made(at..made.len())));
                        }
                    }
                    Source::Pair(i) => {
                        let kind = self.pair_value(i, msg, seq, made);
                        if !(self.omit_empty && made.len() == at) {
                            if !casts(kind, &made[at..]) {
                                out.truncate(start);
                                return;
                            }
                            found = Some((kind, Piece::Made(at..made.len())));
                        }
                    }
                }
                if found.is_some() {
                    break;
                }
            }
            let Some((kind, value)) = found else { continue };
            if !first {
                out.push(b',');
            }
            first = false;
            super::json::write_member(&member.name, kind, value.bytes(made), out);
        }
        out.push(b'}');
    }

    /// Formats pair `i` into `made` and says its type.
    fn pair_value(&self, i: usize, msg: &LogMessage, seq: u32, made: &mut Vec<u8>) -> ValueType {
        let (_, cast, template) = &self.pairs[i];
        match cast {
            Some(kind) => {
                template.append(msg, seq, made);
                *kind
            }
            None if self.cast_to_strings => {
                template.append(msg, seq, made);
                ValueType::String
            }
            None => template.append_typed(msg, seq, made),
        }
    }
}

/// The values of the [`OWN_PAIRS`] of a message, where it has them.
fn own_pairs<'m>(msg: &'m LogMessage<'_>) -> [Option<&'m [u8]>; 8] {
    let raw = msg.raw;
    let f = &msg.fields;
    fn text<'m>(t: &'m Option<sluice_protocol::Text>, raw: &'m [u8]) -> Option<&'m [u8]> {
        t.as_ref().map(|t| t.of(raw))
    }
    [
        Some(msg.host()),
        Some(&msg.origin.host_from[..]),
        Some(msg.origin.source_name.as_bytes()),
        text(&f.program, raw),
        text(&f.pid, raw),
        text(&f.msgid, raw),
        Some(msg.message()),
        text(&f.legacy_msghdr, raw),
    ]
}

/// A value: borrowed from the message, or a range of the buffer macros were expanded into.
pub(super) enum Piece<'a> {
    Borrowed(&'a [u8]),
    Made(std::ops::Range<usize>),
}

impl Piece<'_> {
    pub(super) fn bytes<'b>(&'b self, made: &'b [u8]) -> &'b [u8] {
        match self {
            Piece::Borrowed(b) => b,
            Piece::Made(r) => &made[r.clone()],
        }
    }

    fn is_empty(&self, made: &[u8]) -> bool {
        self.bytes(made).is_empty()
    }
}

/// A chosen member: its name, its type and its value.
pub(super) type Chosen<'a> = (Cow<'a, str>, ValueType, Piece<'a>);

thread_local! {
    /// Macro expansions of the message being formatted.
    static SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// `int(…)` and the other type hints syslog-ng 3.38 honours in a pair's template.
fn cast_of(template: &str) -> (Option<ValueType>, &str) {
    for (prefix, kind) in [
        ("int(", ValueType::Int),
        ("int32(", ValueType::Int),
        ("int64(", ValueType::Int),
        ("double(", ValueType::Double),
        ("float(", ValueType::Double),
        ("boolean(", ValueType::Boolean),
        ("string(", ValueType::String),
        ("datetime(", ValueType::String),
        ("literal(", ValueType::Json),
        ("json(", ValueType::Json),
        ("list(", ValueType::List),
        ("null(", ValueType::Null),
    ] {
        if let Some(inner) = template
            .strip_prefix(prefix)
            .and_then(|r| r.strip_suffix(')'))
        {
            return (Some(kind), inner);
        }
    }
    (None, template)
}

/// Whether `v` reads as a value of its type, as syslog-ng's `type_cast_to_*` read them:
/// integers and doubles in full (after leading white space), booleans by their first letter.
pub(super) fn casts(kind: ValueType, v: &[u8]) -> bool {
    let text = std::str::from_utf8(v).unwrap_or("").trim_start();
    match kind {
        ValueType::Int => text.parse::<i64>().is_ok(),
        ValueType::Double => text
            .parse::<f64>()
            .is_ok_and(|f| f.is_finite() || !text.bytes().any(|b| b.is_ascii_digit())),
        ValueType::Boolean => matches!(v.first(), Some(b't' | b'T' | b'1' | b'f' | b'F' | b'0')),
        ValueType::String | ValueType::Null | ValueType::List | ValueType::Json => true,
    }
}
