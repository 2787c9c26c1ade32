//! `$(format-json)` and `$(format-flat-json)`: chosen name-value pairs written as a JSON
//! object, with syslog-ng's nesting, member order and escaping.
//!
//! Names are split at dots into nested objects (a leading dot makes the first part `_x`), and
//! each object lists its members in descending byte order of their names, as syslog-ng's
//! output does.

use super::value_pairs::{Cast, Chosen};
use std::borrow::Cow;

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
pub(super) fn write_object(chosen: Vec<Chosen>, made: &[u8], flat: bool, out: &mut Vec<u8>) {
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
