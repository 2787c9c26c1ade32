//! `$(format-json)` and `$(format-flat-json)`: chosen name-value pairs written as a JSON
//! object, with syslog-ng's nesting, member order and escaping.
//!
//! Names are split at dots into nested objects (a leading dot makes the first part `_x`), and
//! written in descending byte order of their names, as syslog-ng's walker writes them.

use super::value_pairs::Chosen;
use crate::values::ValueType;
use std::borrow::Cow;

/// How names nest: the byte between their parts (`--key-delimiter`), and whether a leading
/// dot becomes `_` (`.kv.a` is `_kv.a`; not with `--leave-initial-dot` or another delimiter).
#[derive(Clone, Copy, Debug)]
pub(super) struct Nesting {
    pub delimiter: u8,
    pub underscore_initial_dot: bool,
}

impl Default for Nesting {
    fn default() -> Nesting {
        Nesting {
            delimiter: b'.',
            underscore_initial_dot: true,
        }
    }
}

/// A name as it nests.
fn nested(name: &str, nesting: Nesting) -> Cow<'_, str> {
    if !nesting.underscore_initial_dot || nesting.delimiter != b'.' {
        return Cow::Borrowed(name);
    }
    match name.strip_prefix('.') {
        Some(rest) if !rest.is_empty() => Cow::Owned(format!("_{rest}")),
        _ => Cow::Borrowed(name),
    }
}

/// Writes the members as syslog-ng's value-pairs walker does: names in descending byte order,
/// each cut into parts ([`parts`]), objects opened for the parts before the last and closed
/// when a name no longer starts with an open object's dotted name.
pub(super) fn write_object(
    chosen: Vec<Chosen>,
    made: &[u8],
    flat: bool,
    nesting: Nesting,
    out: &mut Vec<u8>,
) {
    let mut members: Vec<(Cow<str>, ValueType, &[u8])> = chosen
        .iter()
        .map(|(name, kind, value)| (nested(name, nesting), *kind, value.bytes(made)))
        .collect();
    // A stable sort keeps values of one name in the order they were given; the last wins.
    members.sort_by(|a, b| descending(a.0.as_bytes(), b.0.as_bytes()));
    members.dedup_by(|later, earlier| {
        let same = later.0 == earlier.0;
        if same {
            std::mem::swap(later, earlier);
        }
        same
    });
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
        cut(name, nesting.delimiter, &mut cuts);
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

/// Descending byte order, compared in place: names are short, and a call to `memcmp` per
/// comparison cost more than the comparison.
fn descending(a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    for (x, y) in b.iter().zip(a) {
        if x != y {
            return x.cmp(y);
        }
    }
    b.len().cmp(&a.len())
}

/// Cuts a name into parts (byte ranges) as syslog-ng's walker cuts it: an empty part is no
/// part (a dot right after another one, or at the start, stays with the text after it; one at
/// the end is dropped), and the dots of an enterprise number (`_SDATA.origin@18372.4.ip`) do
/// not cut. The parts with one dot between each are the start of the name. Another delimiter
/// cuts the same way, without the enterprise numbers.
fn cut(name: &str, delimiter: u8, parts: &mut Vec<(usize, usize)>) {
    let b = name.as_bytes();
    parts.clear();
    let (mut start, mut end) = (0, 0);
    if delimiter != b'.' {
        while end < b.len() {
            if b[end] == delimiter && start != end {
                parts.push((start, end));
                end += 1;
                start = end;
            } else {
                end = memchr::memchr(delimiter, &b[end + 1..]).map_or(b.len(), |p| end + 1 + p);
            }
        }
        if start != end {
            parts.push((start, end));
        }
        return;
    }
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

/// `"name":value`.
pub(super) fn write_member(name: &str, kind: ValueType, value: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    escape(name.as_bytes(), out);
    out.extend_from_slice(b"\":");
    write_value(kind, value, out);
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
/// `\u00XX`, bytes that are not UTF-8 as `\\xXX`. One pass: runs of plain ASCII and whole
/// UTF-8 characters are copied as they are.
fn escape(v: &[u8], out: &mut Vec<u8>) {
    let mut run = 0;
    let mut i = 0;
    while i < v.len() {
        // Eight plain bytes at a time.
        while let Some(chunk) = v.get(i..i + 8) {
            if !plain8(u64::from_le_bytes(chunk.try_into().expect("eight bytes"))) {
                break;
            }
            i += 8;
        }
        let Some(&b) = v.get(i) else { break };
        if (0x20..0x80).contains(&b) && b != b'"' && b != b'\\' {
            i += 1;
            continue;
        }
        if b >= 0x80 {
            // Keep a whole UTF-8 character; escape each byte that does not start one.
            let len = match b {
                0xc2..=0xdf => 2,
                0xe0..=0xef => 3,
                0xf0..=0xf4 => 4,
                _ => 0,
            };
            if len > 0 && v.len() - i >= len && std::str::from_utf8(&v[i..i + len]).is_ok() {
                i += len;
                continue;
            }
        }
        out.extend_from_slice(&v[run..i]);
        i += 1;
        run = i;
        match b {
            8 => out.extend_from_slice(b"\\b"),
            12 => out.extend_from_slice(b"\\f"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'"' => out.extend_from_slice(b"\\\""),
            c if c < 0x20 => {
                out.extend_from_slice(b"\\u00");
                out.extend_from_slice(&hex_byte(c));
            }
            c => {
                out.extend_from_slice(b"\\\\x");
                out.extend_from_slice(&hex_byte(c));
            }
        }
    }
    out.extend_from_slice(&v[run..]);
}

/// Whether none of eight bytes needs a look: no control byte, no byte of 0x80 or above, no `"`,
/// no `\\` (the usual SWAR tests for a byte below a bound and for a given byte).
fn plain8(w: u64) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let below_space = w.wrapping_sub(ONES * 0x20) & !w;
    let quote = (w ^ (ONES * u64::from(b'"'))).wrapping_sub(ONES) & !(w ^ (ONES * u64::from(b'"')));
    let backslash =
        (w ^ (ONES * u64::from(b'\\'))).wrapping_sub(ONES) & !(w ^ (ONES * u64::from(b'\\')));
    (w | below_space | quote | backslash) & HIGH == 0
}

/// A byte in two lower-case hex digits.
fn hex_byte(b: u8) -> [u8; 2] {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    [HEX[usize::from(b >> 4)], HEX[usize::from(b & 15)]]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts_of(name: &str) -> Vec<&str> {
        let mut cuts = Vec::new();
        cut(name, b'.', &mut cuts);
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

    /// The escaping written plainly, to check the fast one against.
    fn escape_plainly(v: &[u8], out: &mut Vec<u8>) {
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
                    c if (c as u32) < 0x20 => {
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

    #[test]
    fn fast_escaping_agrees_with_plain_escaping() {
        let alphabet: &[u8] =
            b"ab \"\\\n\x01\x1f\x7f\x80\xbf\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\xff";
        for input in crate::testing::random_values(alphabet, 40, 20_000) {
            let (mut fast, mut plain) = (Vec::new(), Vec::new());
            escape(&input, &mut fast);
            escape_plainly(&input, &mut plain);
            assert_eq!(fast, plain, "{input:?}");
        }
    }

    #[test]
    fn escaping_keeps_utf8_and_marks_other_bytes() {
        let mut out = Vec::new();
        escape(
            b"a\"b\\c\n\x01 \xc3\xa9 \xe2\x82\x41 \xff\xf0\x9f\x98\x80\xf0\x9f",
            &mut out,
        );
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "a\\\"b\\\\c\\n\\u0001 \u{e9} \\\\xe2\\\\x82A \\\\xff\u{1f600}\\\\xf0\\\\x9f"
        );
    }
}
