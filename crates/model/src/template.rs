//! Templates: `"$ISODATE $HOST ${MSG}\n"` compiled into a list of operations.
//!
//! Syntax as in syslog-ng: `$NAME` or `${NAME}` expands a macro or a name-value pair,
//! `${NAME:-default}` gives a default for an empty value, `$$` is a literal `$`. Template
//! functions (`$(substr $MSG 0 10)`) are in [`functions`].

use crate::macros::{self, append, DateOptions, Macro};
use crate::message::LogMessage;
use crate::values::{name_id, NameId, ValueType};

/// How deep `$(…)` calls may nest. Compiling and expanding a template recurse once a level,
/// with large frames in a debug build: 64 levels stay well inside the 2 MiB stack of any
/// thread that expands templates. syslog-ng reads thousands and crashes further on; real
/// templates nest a handful.
pub const MAX_CALLS_NESTED: usize = 64;

/// How deep `$(…)` calls nest in `text` (parentheses that open no call are counted apart, so
/// `$(if ("$x" == "y") …)` is one deep).
fn calls_nested(text: &str) -> usize {
    let mut open: Vec<bool> = Vec::new();
    let (mut calls, mut deepest) = (0usize, 0usize);
    let bytes = text.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            b'(' => {
                let call = i > 0 && bytes[i - 1] == b'$';
                calls += usize::from(call);
                deepest = deepest.max(calls);
                open.push(call);
            }
            b')' => calls -= usize::from(open.pop().unwrap_or(false)),
            _ => {}
        }
    }
    deepest
}

/// What a configuration names, for what is compiled from it to refer to: `template`
/// statements (`$(template t_name)`, `template("t_name")`) and `filter` statements
/// (`filter(f_name)` in the conditions of `$(if)`, `$(grep)` and `$(filter)`). The engine
/// fills it as it reads the configuration and hands it to every compile.
#[derive(Clone, Debug, Default)]
pub struct Names {
    pub templates: std::collections::HashMap<String, Template>,
    pub filters: std::collections::HashMap<String, sluice_config::Expr>,
    /// What compiling found worth saying without refusing the configuration (a pattern
    /// database's duplicate patterns); the engine says it once the configuration is built.
    pub notes: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    /// Files the configuration read besides its text (pattern databases): when one changes,
    /// the engine builds the configuration again.
    pub read: std::sync::Arc<std::sync::Mutex<Vec<std::path::PathBuf>>>,
}

impl Names {
    /// Notes that the configuration read `path` (a file or a directory of them).
    pub fn read(&self, path: &std::path::Path) {
        self.read
            .lock()
            .expect("read lock")
            .push(path.to_path_buf());
    }

    /// Keeps `note` to be said with the configuration's other notes.
    pub fn note(&self, note: String) {
        self.notes.lock().expect("notes lock").push(note);
    }
}

#[derive(Clone, Debug)]
pub struct Template {
    ops: Vec<Op>,
    /// `template-escape(yes)`: quote `'`, `"` and `\` in expanded values.
    pub escape: bool,
    pub dates: DateOptions,
}

#[derive(Clone, Debug)]
enum Op {
    Literal(Box<[u8]>),
    Call(Box<functions::Call>),
    Value {
        value: Value,
        default: Option<Box<[u8]>>,
    },
    /// `${name}@N`, `$(function …)@N`: the value or call on the message N before the last of a
    /// correlation context ([`context`]); nothing outside one.
    Earlier(usize, Box<Op>),
}

#[derive(Clone, Debug)]
enum Value {
    Macro(Macro),
    /// `.SDATA.<id>.<param>`: a value `set()` gave that name, else the received one.
    Sdata {
        id: Box<[u8]>,
        param: Box<[u8]>,
        name: NameId,
    },
    /// A name-value pair set by a rewrite rule or a parser.
    Pair(NameId),
    /// `$_`: the item `$(map)` or `$(filter)` is at.
    Element,
}

impl Template {
    /// Compiles template text that refers to no named template or filter.
    pub fn compile(text: &str) -> Result<Template, String> {
        Template::compile_in(text, &Names::default())
    }

    /// Compiles template text whose `$(template …)` and conditions refer to `names`; the error
    /// says what is wrong in words (the caller adds the position of the string).
    /// A template that writes a message's pairs as `$(format-json ARGS)` does, its arguments
    /// (`--scope rfc5424`, `--pair name=$TEMPLATE`…) given one by one.
    pub fn format_json(args: &[String]) -> Result<Template, String> {
        Ok(Template {
            ops: vec![Op::Call(Box::new(functions::Call::format_json(args)?))],
            escape: false,
            dates: DateOptions::default(),
        })
    }

    pub fn compile_in(text: &str, names: &Names) -> Result<Template, String> {
        if calls_nested(text) > MAX_CALLS_NESTED {
            return Err(format!(
                "template functions nested more than {MAX_CALLS_NESTED} deep"
            ));
        }
        let mut ops = Vec::new();
        let mut literal = Vec::new();
        let bytes = text.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            let b = bytes[i];
            if b != b'$' {
                literal.push(b);
                i += 1;
                continue;
            }
            match bytes.get(i + 1) {
                Some(b'$') => {
                    literal.push(b'$');
                    i += 2;
                }
                Some(b'(') => {
                    let (argv, used) = functions::split(&text[i + 2..])?;
                    flush(&mut literal, &mut ops);
                    let call = Op::Call(Box::new(functions::Call::compile(argv, names)?));
                    i += 2 + used;
                    ops.push(referred(call, message_reference(bytes, &mut i)));
                }
                Some(b'{') => {
                    let end = text[i + 2..]
                        .find('}')
                        .map(|e| i + 2 + e)
                        .ok_or_else(|| format!("unterminated '${{' in template at byte {i}"))?;
                    let inner = &text[i + 2..end];
                    let (name, default) = match inner.split_once(":-") {
                        Some((n, d)) => (n, Some(d.as_bytes().into())),
                        None => (inner, None),
                    };
                    flush(&mut literal, &mut ops);
                    let value = Op::Value {
                        value: resolve(name)?,
                        default,
                    };
                    i = end + 1;
                    ops.push(referred(value, message_reference(bytes, &mut i)));
                }
                _ => {
                    let len = bytes[i + 1..]
                        .iter()
                        .take_while(|c| c.is_ascii_alphanumeric() || **c == b'_')
                        .count();
                    if len == 0 {
                        literal.push(b'$');
                        i += 1;
                        continue;
                    }
                    flush(&mut literal, &mut ops);
                    ops.push(Op::Value {
                        value: resolve(&text[i + 1..i + 1 + len])?,
                        default: None,
                    });
                    i += 1 + len;
                }
            }
        }
        flush(&mut literal, &mut ops);
        Ok(Template {
            ops,
            escape: false,
            dates: DateOptions::default(),
        })
    }

    /// Whether the template shows the destination's sequence number (`$SEQNUM`, `$SDATA`).
    pub fn uses_seq(&self) -> bool {
        self.ops.iter().any(|op| match op {
            Op::Call(call) => call.uses_seq(),
            op => matches!(
                op,
                Op::Value {
                    value: Value::Macro(Macro::SeqNum | Macro::Sdata),
                    ..
                }
            ),
        })
    }

    /// The macro of a template that is literals around one macro (`/var/log/${HOST}.log`): its
    /// expansion depends on the message only through that macro's value. `None` for escaping
    /// templates, function calls, name-value pairs, defaults (a default can equal a value)
    /// and more than one value.
    pub fn only_macro(&self) -> Option<Macro> {
        if self.escape {
            return None;
        }
        let mut only = None;
        for op in &self.ops {
            match op {
                Op::Literal(_) => {}
                Op::Value {
                    value: Value::Macro(m),
                    default: None,
                } if only.is_none() => only = Some(*m),
                _ => return None,
            }
        }
        only
    }

    /// The template has no macros: its output is always the same.
    pub fn literal(&self) -> Option<&[u8]> {
        match self.ops.as_slice() {
            [] => Some(b""),
            [Op::Literal(l)] => Some(l),
            _ => None,
        }
    }

    /// The text before the first macro or function (`/var/log/` of `/var/log/${HOST}.log`).
    pub fn literal_prefix(&self) -> &[u8] {
        match self.ops.first() {
            Some(Op::Literal(l)) => l,
            _ => b"",
        }
    }

    /// Appends the template's expansion for `msg` to `out`. `seq` is the destination's sequence
    /// number for the message (`$SEQNUM`, `$SDATA`); 0 outside destinations.
    pub fn append(&self, msg: &LogMessage, seq: u32, out: &mut Vec<u8>) {
        self.append_with(msg, seq, out, |_, _| {});
    }

    /// [`Template::append`], calling `each_value(out, start)` after each macro, pair or
    /// function has appended its part at `out[start..]` (literals are left alone): a file
    /// name makes what a sender sent safe there (`destinations::file_name`).
    pub fn append_with(
        &self,
        msg: &LogMessage,
        seq: u32,
        out: &mut Vec<u8>,
        mut each_value: impl FnMut(&mut Vec<u8>, usize),
    ) {
        for op in &self.ops {
            // Literals (the spaces between macros, mostly) without a call.
            match op {
                Op::Literal(bytes) => out.extend_from_slice(bytes),
                op => self.append_op(op, msg, seq, out, &mut each_value),
            }
        }
    }

    fn append_op(
        &self,
        op: &Op,
        msg: &LogMessage,
        seq: u32,
        out: &mut Vec<u8>,
        each_value: &mut impl FnMut(&mut Vec<u8>, usize),
    ) {
        match op {
            Op::Literal(bytes) => out.extend_from_slice(bytes),
            Op::Call(call) => {
                let start = out.len();
                call.append(msg, seq, out);
                each_value(out, start);
            }
            Op::Value { value, default } => {
                let start = out.len();
                match value {
                    Value::Macro(m) => m.expand(msg, &self.dates, self.escape, seq, out),
                    Value::Sdata { id, param, name } => {
                        let set = msg.values.get(*name).map(|v| v.of(msg.raw));
                        if let Some(v) = set.or_else(|| msg.sdata(id, param)) {
                            append(out, v, self.escape);
                        }
                    }
                    Value::Pair(name) => {
                        if let Some(v) = msg.values.get(*name) {
                            append(out, v.of(msg.raw), self.escape);
                        }
                    }
                    Value::Element => functions::append_element(out),
                }
                if out.len() == start {
                    if let Some(d) = default {
                        out.extend_from_slice(d);
                    }
                }
                each_value(out, start);
            }
            Op::Earlier(n, op) => {
                context::earlier(*n, |earlier| {
                    self.append_op(op, earlier, seq, out, each_value)
                });
            }
        }
    }

    /// Appends the expansion and says its type, as syslog-ng types a template's result: one
    /// name-value pair gives that pair's type, one function call the type of its result;
    /// anything else (text, several parts, escaping, a default taking over) is a string. A
    /// pair that is not set is a null.
    pub fn append_typed(&self, msg: &LogMessage, seq: u32, out: &mut Vec<u8>) -> ValueType {
        if !self.escape {
            match self.ops.as_slice() {
                [Op::Call(call)] => return call.append_typed(msg, seq, out),
                [Op::Value {
                    value: Value::Pair(name),
                    default,
                }] => match msg.values.get_typed(*name) {
                    Some((kind, v)) => {
                        let v = v.of(msg.raw);
                        if !v.is_empty() || default.is_none() {
                            out.extend_from_slice(v);
                            return kind;
                        }
                    }
                    None if default.is_none() => return ValueType::Null,
                    None => {}
                },
                _ => {}
            }
        }
        self.append(msg, seq, out);
        ValueType::String
    }

    /// The expansion as a new buffer, for tests (the pipeline appends into reused buffers).
    #[cfg(test)]
    pub fn format(&self, msg: &LogMessage) -> Vec<u8> {
        let mut out = Vec::new();
        self.append(msg, 0, &mut out);
        out
    }
}

/// After `${name}` or `$(function …)` at `*i`: `@N`, the message it refers to in a correlation
/// context (`@0` the last one, `@1` the one before, …), as syslog-ng reads it; `@@` is a
/// literal `@` (the first is taken here); `@` and anything else is a literal `@`.
fn message_reference(bytes: &[u8], i: &mut usize) -> usize {
    if bytes.get(*i) != Some(&b'@') {
        return 0;
    }
    let digits = bytes[*i + 1..]
        .iter()
        .take_while(|b| b.is_ascii_digit())
        .count();
    if digits == 0 {
        if bytes.get(*i + 1) == Some(&b'@') {
            *i += 1;
        }
        return 0;
    }
    let n = std::str::from_utf8(&bytes[*i + 1..*i + 1 + digits])
        .ok()
        .and_then(|d| d.parse().ok())
        .unwrap_or(usize::MAX);
    *i += 1 + digits;
    n
}

/// `op` on the message `n` before the last of a correlation context (`@N`); `@0` is the last.
fn referred(op: Op, n: usize) -> Op {
    match n {
        0 => op,
        n => Op::Earlier(n, Box::new(op)),
    }
}

fn flush(literal: &mut Vec<u8>, ops: &mut Vec<Op>) {
    if !literal.is_empty() {
        ops.push(Op::Literal(std::mem::take(literal).into_boxed_slice()));
    }
}

fn resolve(name: &str) -> Result<Value, String> {
    if let Some(m) = Macro::lookup(name) {
        return Ok(Value::Macro(m));
    }
    if macros::NOT_YET.contains(&name) {
        return Err(format!("the macro ${name} is not supported yet"));
    }
    if name.bytes().all(|b| b.is_ascii_digit()) {
        return match name.parse::<usize>() {
            Ok(i) if i < crate::values::MATCHES => Ok(Value::Pair(crate::values::match_id(i))),
            _ => Err(format!(
                "${name} is out of range: match references go from $0 to ${}",
                crate::values::MATCHES - 1
            )),
        };
    }
    if name == "_" {
        return Ok(Value::Element);
    }
    if let Some(rest) = name.strip_prefix(".SDATA.") {
        let (id, param) = rest.rsplit_once('.').unwrap_or((rest, ""));
        return Ok(Value::Sdata {
            id: id.as_bytes().into(),
            param: param.as_bytes().into(),
            name: name_id(name),
        });
    }
    Ok(Value::Pair(name_id(name)))
}

/// A value a filter reads: a macro or an SD parameter, by the names `value()` takes.
#[derive(Clone, Debug)]
pub struct ValueRef(Template);

impl ValueRef {
    pub fn parse(name: &str) -> Result<ValueRef, String> {
        Ok(ValueRef(Template {
            ops: vec![Op::Value {
                value: resolve(name)?,
                default: None,
            }],
            escape: false,
            dates: DateOptions::default(),
        }))
    }

    pub fn append(&self, msg: &LogMessage, out: &mut Vec<u8>) {
        self.0.append(msg, 0, out);
    }
}

pub mod context;
pub mod functions;
mod json;
#[cfg(test)]
mod tests;
mod value_pairs;
