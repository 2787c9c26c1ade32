//! `json-parser()`: the members of a JSON object become name-value pairs, as syslog-ng 3.38's
//! json-c based parser makes them.
//!
//! - Nested objects flatten into `outer.inner` (`key-delimiter()`), under `prefix()`.
//! - Strings are stored unescaped; integers as written in decimal (beyond 64 bits, the largest
//!   64-bit value, as json-c clamps); other numbers with six decimals (`printf("%f")`);
//!   booleans as `true`/`false`; `null` as an empty value.
//! - An array of scalars becomes a comma-separated list, each element quoted where it needs to
//!   be; an array holding objects or arrays is stored as compact JSON.
//! - A top-level array sets the match variables instead: `$1`… to its elements (scalars as
//!   above, others as compact JSON), every other one unset. Anything else that is not an
//!   object or an array, or not JSON, fails the parser.
//!
//! The object is walked as it is parsed (a serde visitor), without building a tree; strings
//! without escapes are reported as ranges of the input, so they need no copy.

use crate::values::ValueType;
use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use std::fmt;
use std::ops::Range;

/// Where a value found goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Name<'a> {
    /// A member, by its full name (prefix and delimiters included).
    Pair(&'a str),
    /// The input is an array: every match variable is unset before its elements come.
    Matches,
    /// Element `n` (from 1) of a top-level array: match variable `$n`.
    Match(usize),
}

/// A value found in the object.
pub enum Found<'a> {
    /// A string that stands as is in the input.
    In(Range<usize>),
    Made(&'a [u8]),
}

pub struct Options<'a> {
    pub prefix: &'a str,
    pub key_delimiter: char,
    pub extract_prefix: Option<&'a str>,
}

/// Parses `input` and reports every value with its full name; `false` when the input is not
/// JSON or not an object (or array) where one is expected.
pub fn parse(input: &[u8], opts: &Options, sink: &mut dyn FnMut(Name, Found, ValueType)) -> bool {
    if walk_input(input, opts, sink) {
        return true;
    }
    if std::str::from_utf8(input).is_ok() {
        return false;
    }
    // json-c takes strings whose bytes are not UTF-8 and keeps the bytes; serde_json refuses
    // them. Such bytes go through serde_json as private-use characters and come back out.
    let mapped = map_invalid(input);
    let mut unmapping = |name: Name, found: Found, kind: ValueType| {
        let bytes = match found {
            Found::In(r) => &mapped[r],
            Found::Made(b) => b,
        };
        let value = unmap(bytes);
        match name {
            Name::Pair(name) => {
                let name = String::from_utf8_lossy(&unmap(name.as_bytes())).into_owned();
                sink(Name::Pair(&name), Found::Made(&value), kind);
            }
            other => sink(other, Found::Made(&value), kind),
        }
    };
    walk_input(&mapped, opts, &mut unmapping)
}

/// Where invalid UTF-8 bytes go while serde_json reads the text: U+10FF80 to U+10FFFF.
const MAPPED_BASE: u32 = 0x10FF00;

fn map_invalid(input: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(input.len() + 16);
    for chunk in input.utf8_chunks() {
        out.extend_from_slice(chunk.valid().as_bytes());
        for &b in chunk.invalid() {
            let c = char::from_u32(MAPPED_BASE + u32::from(b)).expect("a valid scalar value");
            out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
        }
    }
    out
}

fn unmap(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            match u32::from(c).checked_sub(MAPPED_BASE) {
                Some(b @ 0x80..=0xff) => out.push(b as u8),
                _ => out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
            }
        }
        out.extend_from_slice(chunk.invalid());
    }
    out
}

fn walk_input(input: &[u8], opts: &Options, sink: &mut dyn FnMut(Name, Found, ValueType)) -> bool {
    let mut name = String::from(opts.prefix);
    let walk = Walk {
        input,
        name: &mut name,
        delimiter: opts.key_delimiter,
        sink,
        top: true,
    };
    let mut de = serde_json::Deserializer::from_slice(input);
    match opts.extract_prefix {
        None => walk.deserialize(&mut de).is_ok_and(|ok| ok),
        Some(path) => {
            let Ok(root) = serde::Deserialize::deserialize(&mut de) else {
                return false;
            };
            let root: serde_json::Value = root;
            match extract(&root, path) {
                Some(v) => walk.deserialize(v).is_ok_and(|ok| ok),
                None => false,
            }
        }
    }
}

/// json-c's `json_extract`: `a.b[2].c` from the root.
fn extract<'v>(mut v: &'v serde_json::Value, path: &str) -> Option<&'v serde_json::Value> {
    for part in path.split('.') {
        let (key, mut rest) = match part.find('[') {
            Some(i) => (&part[..i], &part[i..]),
            None => (part, ""),
        };
        if !key.is_empty() {
            v = v.get(key)?;
        }
        while let Some(inner) = rest.strip_prefix('[') {
            let close = inner.find(']')?;
            v = v.get(inner[..close].parse::<usize>().ok()?)?;
            rest = &inner[close + 1..];
        }
    }
    Some(v)
}

/// Walks one value whose name is `name` (a member) or the root (`top`).
struct Walk<'s, 'i> {
    input: &'i [u8],
    name: &'s mut String,
    delimiter: char,
    sink: &'s mut dyn FnMut(Name, Found, ValueType),
    top: bool,
}

impl Walk<'_, '_> {
    fn made(&mut self, bytes: &[u8], kind: ValueType) -> bool {
        (self.sink)(Name::Pair(self.name), Found::Made(bytes), kind);
        true
    }

    /// Where `s` lies in the input, when it is a slice of it.
    fn range_of(&self, s: &str) -> Option<Range<usize>> {
        let base = self.input.as_ptr() as usize;
        let at = (s.as_ptr() as usize).checked_sub(base)?;
        (at + s.len() <= self.input.len()).then(|| at..at + s.len())
    }
}

impl<'de> DeserializeSeed<'de> for Walk<'_, '_> {
    /// Whether the value was one the parser accepts here.
    type Value = bool;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Walk<'_, '_> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E: serde::de::Error>(mut self, v: bool) -> Result<bool, E> {
        if self.top {
            return Ok(false);
        }
        Ok(self.made(if v { b"true" } else { b"false" }, ValueType::Boolean))
    }

    fn visit_i64<E: serde::de::Error>(mut self, v: i64) -> Result<bool, E> {
        if self.top {
            return Ok(false);
        }
        let mut buf = itoa::Buffer::new();
        Ok(self.made(buf.format(v).as_bytes(), ValueType::Int))
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<bool, E> {
        self.visit_i64(i64::try_from(v).unwrap_or(i64::MAX))
    }

    fn visit_f64<E: serde::de::Error>(mut self, v: f64) -> Result<bool, E> {
        if self.top {
            return Ok(false);
        }
        Ok(self.made(format!("{v:.6}").as_bytes(), ValueType::Double))
    }

    fn visit_borrowed_str<E: serde::de::Error>(self, v: &'de str) -> Result<bool, E> {
        if self.top {
            return Ok(false);
        }
        match self.range_of(v) {
            Some(r) => {
                (self.sink)(Name::Pair(self.name), Found::In(r), ValueType::String);
                Ok(true)
            }
            None => self.visit_str(v),
        }
    }

    fn visit_str<E: serde::de::Error>(mut self, v: &str) -> Result<bool, E> {
        if self.top {
            return Ok(false);
        }
        Ok(self.made(v.as_bytes(), ValueType::String))
    }

    fn visit_unit<E: serde::de::Error>(mut self) -> Result<bool, E> {
        if self.top {
            return Ok(false);
        }
        Ok(self.made(b"", ValueType::Null))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
        let base = self.name.len();
        if !self.top {
            self.name.push(self.delimiter);
        }
        let member = self.name.len();
        while map.next_key_seed(Key(self.name))?.is_some() {
            map.next_value_seed(Walk {
                input: self.input,
                name: self.name,
                delimiter: self.delimiter,
                sink: self.sink,
                top: false,
            })?;
            self.name.truncate(member);
        }
        self.name.truncate(base);
        Ok(true)
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<bool, A::Error> {
        let mut items: Vec<serde_json::Value> = Vec::new();
        while let Some(v) = seq.next_element()? {
            items.push(v);
        }
        if self.top {
            (self.sink)(Name::Matches, Found::Made(b""), ValueType::Null);
            for (i, v) in items.iter().enumerate().take(crate::values::MATCHES - 1) {
                let (text, kind) = match scalar(v) {
                    Some(scalar) => scalar,
                    None => (
                        serde_json::to_string(v).unwrap_or_default(),
                        ValueType::Json,
                    ),
                };
                (self.sink)(Name::Match(i + 1), Found::Made(text.as_bytes()), kind);
            }
            return Ok(true);
        }
        let mut out = Vec::new();
        let mut kind = ValueType::List;
        if items.iter().all(|v| !v.is_array() && !v.is_object()) {
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                let (text, _) = scalar(v).unwrap_or_default();
                crate::list::encode(&mut out, text.as_bytes(), None);
            }
        } else {
            out = serde_json::to_vec(&items).unwrap_or_default();
            kind = ValueType::Json;
        }
        Ok(self.made(&out, kind))
    }
}

/// The text and type json-c's parser gives a scalar; `None` for an object or an array.
fn scalar(v: &serde_json::Value) -> Option<(String, ValueType)> {
    Some(match v {
        serde_json::Value::String(s) => (s.clone(), ValueType::String),
        serde_json::Value::Null => (String::new(), ValueType::Null),
        serde_json::Value::Bool(b) => (b.to_string(), ValueType::Boolean),
        serde_json::Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => (i.to_string(), ValueType::Int),
            (None, Some(_), _) => (i64::MAX.to_string(), ValueType::Int),
            (_, _, f) => (format!("{:.6}", f.unwrap_or_default()), ValueType::Double),
        },
        serde_json::Value::Array(_) | serde_json::Value::Object(_) => return None,
    })
}

/// Appends a member's key to the name being built.
struct Key<'s>(&'s mut String);

impl<'de> DeserializeSeed<'de> for Key<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Key<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a member name")
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<(), E> {
        self.0.push_str(v);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(input: &str, opts: &Options) -> Option<Vec<String>> {
        let mut got = Vec::new();
        let ok = parse(input.as_bytes(), opts, &mut |name, v, kind| {
            let v = match v {
                Found::In(r) => input[r].to_string(),
                Found::Made(b) => String::from_utf8_lossy(b).into_owned(),
            };
            let kind = match kind {
                ValueType::String => String::new(),
                other => format!(" ({other:?})"),
            };
            match name {
                Name::Pair(name) => got.push(format!("{name}={v}{kind}")),
                Name::Matches => got.push("matches unset".into()),
                Name::Match(i) => got.push(format!("${i}={v}{kind}")),
            }
        });
        ok.then_some(got)
    }

    const PLAIN: Options = Options {
        prefix: ".j.",
        key_delimiter: '.',
        extract_prefix: None,
    };

    #[test]
    fn members_flatten_with_syslog_ng_value_texts() {
        let got = pairs(
            r#"{"s": "a\"b", "i": -7, "big": 18446744073709551615, "f": 1.5, "t": true, "n": null,
                "o": {"x": {"y": "deep"}}, "l": [1, "two words", null], "m": [1, {"a": 2}]} trailing"#,
            &PLAIN,
        );
        assert_eq!(
            got.unwrap(),
            [
                r#".j.s=a"b"#,
                ".j.i=-7 (Int)",
                ".j.big=9223372036854775807 (Int)",
                ".j.f=1.500000 (Double)",
                ".j.t=true (Boolean)",
                ".j.n= (Null)",
                ".j.o.x.y=deep",
                r#".j.l=1,"two words","" (List)"#,
                r#".j.m=[1,{"a":2}] (Json)"#,
            ]
        );
    }

    #[test]
    fn not_an_object_fails_and_extract_prefix_descends() {
        assert_eq!(pairs("not json", &PLAIN), None);
        assert_eq!(pairs("42", &PLAIN), None);
        assert_eq!(
            pairs(r#"[1, "a", {"b": [2]}, null]"#, &PLAIN).unwrap(),
            [
                "matches unset",
                "$1=1 (Int)",
                "$2=a",
                r#"$3={"b":[2]} (Json)"#,
                "$4= (Null)"
            ]
        );
        let opts = Options {
            extract_prefix: Some("a.b[1]"),
            ..PLAIN
        };
        assert_eq!(
            pairs(r#"{"a": {"b": [{"x": 1}, {"y": 2}]}}"#, &opts).unwrap(),
            [".j.y=2 (Int)"]
        );
        assert_eq!(pairs(r#"{"a": 1}"#, &opts), None);
    }

    #[test]
    fn bytes_that_are_not_utf8_are_kept_as_json_c_keeps_them() {
        let input = b"{\"a\": \"caf\xe9\", \"b\": \"x\xff\xfey\", \"c\": 1}";
        let mut got = Vec::new();
        assert!(parse(input, &PLAIN, &mut |name, v, _| {
            let v = match v {
                Found::In(r) => input[r].to_vec(),
                Found::Made(b) => b.to_vec(),
            };
            if let Name::Pair(name) = name {
                got.push((name.to_string(), v));
            }
        }));
        let want: [(&str, &[u8]); 3] = [
            (".j.a", b"caf\xe9"),
            (".j.b", b"x\xff\xfey"),
            (".j.c", b"1"),
        ];
        let want: Vec<(String, Vec<u8>)> = want
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_vec()))
            .collect();
        assert_eq!(got[got.len() - 3..], want[..]);
    }
}
