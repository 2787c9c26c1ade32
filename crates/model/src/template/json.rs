//! `$(format-json)` and `$(format-flat-json)`: chosen name-value pairs written as a JSON
//! object, with syslog-ng's nesting, member order and escaping.
//!
//! Names are split at dots into nested objects (a leading dot makes the first part `_x`), and
//! written in descending byte order of their names, as syslog-ng's walker writes them.

use super::value_pairs::Chosen;
use crate::values::ValueType;
use std::borrow::Cow;

/// A name as it nests: a leading dot makes the first part `_x` (`.kv.a` is `_kv.a`).
fn nested(name: &str) -> Cow<'_, str> {
    match name.strip_prefix('.') {
        Some(rest) if !rest.is_empty() => Cow::Owned(format!("_{rest}")),
        _ => Cow::Borrowed(name),
    }
}

/// Writes the members as syslog-ng's value-pairs walker does: names in descending byte order,
/// each cut into parts ([`parts`]), objects opened for the parts before the last and closed
/// when a name no longer starts with an open object's dotted name.
pub(super) fn write_object(chosen: Vec<Chosen>, made: &[u8], flat: bool, out: &mut Vec<u8>) {
    // The last value given for a name wins.
    let mut members: Vec<(Cow<str>, ValueType, &[u8])> = Vec::with_capacity(chosen.len());
    for (i, (name, kind, value)) in chosen.iter().enumerate() {
        if chosen[i + 1..].iter().any(|(n, _, _)| n == name) {
            continue;
        }
        members.push((nested(name), *kind, value.bytes(made)));
    }
    members.sort_by(|a, b| b.0.cmp(&a.0));
    out.push(b'{');
    // The open objects: each one's dotted name, the start of the name of the member (by its
    // index) that opened it: its parts so far with the dots between them.
    let mut open: Vec<(usize, usize)> = Vec::new();
    let mut cuts: Vec<(usize, usize)> = Vec::new();
    let mut need_comma = false;
    let key = |key: &str, out: &mut Vec<u8>, need_comma: &mut bool| {
        if std::mem::replace(need_comma, false) {
            out.push(b',');
        }
        out.push(b'"');
        escape(key.as_bytes(), out);
        out.extend_from_slice(b"\":");
    };
    for (m, (name, kind, value)) in members.iter().enumerate() {
        if flat {
            key(name, out, &mut need_comma);
            write_value(*kind, value, out);
            need_comma = true;
            continue;
        }
        while let Some(&(by, len)) = open.last() {
            if name.starts_with(&members[by].0[..len]) {
                break;
            }
            open.pop();
            out.push(b'}');
            need_comma = true;
        }
        cut(name, &mut cuts);
        let Some((&(start, end), objects)) = cuts.split_last() else {
            continue;
        };
        for &(s, e) in objects.iter().skip(open.len()) {
            key(&name[s..e], out, &mut need_comma);
            out.push(b'{');
            open.push((m, e));
        }
        key(&name[start..end], out, &mut need_comma);
        write_value(*kind, value, out);
        need_comma = true;
    }
    for _ in open {
        out.push(b'}');
    }
    out.push(b'}');
}

/// Cuts a name into parts (byte ranges) as syslog-ng's walker cuts it: an empty part is no
/// part (a dot right after another one, or at the start, stays with the text after it; one at
/// the end is dropped), and the dots of an enterprise number (`_SDATA.origin@18372.4.ip`) do
/// not cut. The parts with one dot between each are the start of the name.
fn cut(name: &str, parts: &mut Vec<(usize, usize)>) {
    let b = name.as_bytes();
    parts.clear();
    let (mut start, mut end) = (0, 0);
    while end < b.len() {
        match b[end] {
            b'@' => loop {
                end += 1;
                end += b[end..].iter().take_while(|c| c.is_ascii_digit()).count();
                if !(b.get(end) == Some(&b'.') && b.get(end + 1).is_some_and(u8::is_ascii_digit)) {
                    break;
                }
            },
            b'.' if start != end => {
                parts.push((start, end));
                end += 1;
                start = end;
            }
            _ => {
                end += 1;
                end += b[end..]
                    .iter()
                    .take_while(|c| !matches!(c, b'@' | b'.'))
                    .count();
            }
        }
    }
    if start != end {
        parts.push((start, end));
    }
}

/// A value as its type is written: numbers as they are written, booleans as `true` or
/// `false`, lists as arrays of strings, JSON as it is, `null`; anything else a string.
fn write_value(kind: ValueType, v: &[u8], out: &mut Vec<u8>) {
    match kind {
        ValueType::String => {
            out.push(b'"');
            escape(v, out);
            out.push(b'"');
        }
        ValueType::Int | ValueType::Double => escape(v, out),
        ValueType::Boolean => {
            out.extend_from_slice(if matches!(v.first(), Some(b't' | b'T' | b'1')) {
                b"true"
            } else {
                b"false"
            })
        }
        ValueType::Null => out.extend_from_slice(b"null"),
        ValueType::Json => out.extend_from_slice(v),
        ValueType::List => {
            out.push(b'[');
            for (i, item) in crate::list::items(&[v]).iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                out.push(b'"');
                escape(item, out);
                out.push(b'"');
            }
            out.push(b']');
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn parts_of(name: &str) -> Vec<&str> {
        let mut cuts = Vec::new();
        cut(name, &mut cuts);
        cuts.iter().map(|&(s, e)| &name[s..e]).collect()
    }

    #[test]
    fn names_cut_as_syslog_ng_cuts_them() {
        assert_eq!(parts_of("a.b.c"), ["a", "b", "c"]);
        assert_eq!(parts_of("_j."), ["_j"]);
        assert_eq!(parts_of("a..b"), ["a", ".b"]);
        assert_eq!(parts_of(".a"), [".a"]);
        assert_eq!(
            parts_of("_SDATA.origin@18372.4.ip"),
            ["_SDATA", "origin@18372.4", "ip"]
        );
        assert!(parts_of("").is_empty());
    }
}
