//! `kv-parser()`: `key=value` pairs as syslog-ng 3.38's scanner finds them.
//!
//! Its rules, which the differential tests hold sluice to:
//! - A key is the run of `[A-Za-z0-9_.-]` right before a value separator (`=`), spaces between
//!   them allowed; a separator with no key before it is skipped.
//! - A value may be quoted (`"…"` or `'…'`, with `\b \f \n \r \t \\` and `\<quote>` escapes;
//!   other backslashes are kept). Unquoted, it runs to the pair separator (`, ` by default) or to
//!   a space followed by the next key, so `msg=hello world x=1` gives `msg` = `hello world`.
//! - A quoted value with text after its closing quote, or without a closing quote, is kept as
//!   written, and the scan for the next key starts again at the value.
//! - Text that is neither key nor value is a stray word; with `extract-stray-words-into()` the
//!   words are listed comma-separated, each quoted where it needs to be.

use crate::str_repr;
pub use crate::str_repr::Piece;
use std::ops::Range;

pub struct Scanner<'a> {
    input: &'a [u8],
    at: usize,
    separator: u8,
    pair_separator: &'a [u8],
    quoted: bool,
    /// Stray words seen so far, when asked for.
    pub stray: Option<Vec<u8>>,
}

fn is_key_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-')
}

impl<'a> Scanner<'a> {
    /// Scans `input` up to its first NUL (the parser reads a C string).
    pub fn new(input: &'a [u8], separator: u8, pair_separator: &'a [u8], stray: bool) -> Self {
        let end = memchr::memchr(0, input).unwrap_or(input.len());
        Scanner {
            input: &input[..end],
            at: 0,
            separator,
            pair_separator,
            quoted: false,
            stray: stray.then(Vec::new),
        }
    }

    fn byte(&self, at: usize) -> u8 {
        self.input.get(at).copied().unwrap_or(0)
    }

    /// The next pair: the key's range and the value.
    pub fn next_pair(&mut self) -> Option<(Range<usize>, Piece)> {
        if self.at >= self.input.len() {
            return None;
        }
        let key = self.key()?;
        self.quoted = false;
        while self.byte(self.at) == b' ' && self.delimiter(self.at).is_none() {
            self.at += 1;
        }
        Some((key, self.value()))
    }

    fn key(&mut self) -> Option<Range<usize>> {
        let from = self.at;
        let mut search = from;
        while let Some(i) = memchr::memchr(self.separator, &self.input[search..]) {
            let sep = search + i;
            let mut end = sep;
            while end > from && self.input[end - 1] == b' ' {
                end -= 1;
            }
            let mut start = end;
            while start > from && is_key_byte(self.input[start - 1]) {
                start -= 1;
            }
            if end > start {
                self.stray_word(from..start);
                self.at = sep + 1;
                return Some(start..end);
            }
            search = sep + 1;
        }
        self.stray_word(from..self.input.len());
        self.at = self.input.len();
        None
    }

    /// A key (key bytes, spaces, the separator) starts at `at`.
    fn key_follows(&self, at: usize) -> bool {
        let mut k = at;
        while is_key_byte(self.byte(k)) {
            k += 1;
        }
        let after_key = k;
        while self.byte(k) == b' ' {
            k += 1;
        }
        after_key != at && self.byte(k) == self.separator
    }

    fn pair_separator_at(&self, at: usize) -> Option<usize> {
        let sep = self.pair_separator;
        (!sep.is_empty() && self.input.get(at..at + sep.len()) == Some(sep))
            .then_some(at + sep.len())
    }

    /// Whether a value ends at `at`, and where scanning goes on if so.
    fn delimiter(&self, at: usize) -> Option<usize> {
        let b = self.byte(at);
        let first = self.pair_separator.first().copied().unwrap_or(0);
        if b != b' ' && b != first {
            return None;
        }
        if b == b' ' && !self.quoted {
            if first == b' ' {
                if let Some(next) = self.pair_separator_at(at) {
                    return Some(next);
                }
            }
            let mut cur = at;
            while self.byte(cur) == b' ' {
                cur += 1;
            }
            if cur >= self.input.len() || self.key_follows(cur) {
                return Some(cur);
            }
            return self.pair_separator_at(cur);
        }
        if b == b' ' {
            return Some(at + 1);
        }
        self.pair_separator_at(at)
    }

    fn value(&mut self) -> Piece {
        let start = self.at;
        self.quoted = matches!(self.byte(start), b'"' | b'\'');
        let first = self.pair_separator.first().copied().unwrap_or(0);
        let read = str_repr::decode(self.input, start, [b' ', first], |at| self.delimiter(at));
        if read.ok {
            self.at = read.end;
        } else {
            // Kept as written; the next key is looked for from the value on.
            self.quoted = false;
        }
        read.value
    }

    fn stray_word(&mut self, range: Range<usize>) {
        let Some(out) = self.stray.as_mut() else {
            return;
        };
        let word = self.input[range].trim_ascii_start();
        let word = {
            let end = word.iter().rposition(|&b| b != b' ').map_or(0, |i| i + 1);
            &word[..end]
        };
        if word.is_empty() {
            return;
        }
        if !out.is_empty() {
            out.push(b',');
        }
        crate::list::encode(out, word, Some(b','));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `key=value` for each pair, then the stray words, as syslog-ng 3.38 gives them for the
    /// same input (checked by hand with its `format-json`).
    fn scan(input: &str) -> (Vec<String>, String) {
        let mut s = Scanner::new(input.as_bytes(), b'=', b", ", true);
        let mut pairs = Vec::new();
        while let Some((k, v)) = s.next_pair() {
            let value = match v {
                Piece::In(r) => input.as_bytes()[r].to_vec(),
                Piece::Decoded(d) => d,
            };
            pairs.push(format!("{}={}", &input[k], String::from_utf8_lossy(&value)));
        }
        (pairs, String::from_utf8(s.stray.unwrap()).unwrap())
    }

    #[test]
    fn syslog_ng_examples() {
        let cases: &[(&str, &[&str], &str)] = &[
            ("a=1 b=2 c=3", &["a=1", "b=2", "c=3"], ""),
            (
                r#"devname=fw1 msg="hello world" act=deny"#,
                &["devname=fw1", "msg=hello world", "act=deny"],
                "",
            ),
            (
                r#"a="unterminated b=c"#,
                &[r#"a="unterminated b=c"#, "b=c"],
                r#"'"unterminated'"#,
            ),
            (r#"a="x"y b=2"#, &[r#"a="x"y "#, "b=2"], r#"'"x"y'"#),
            (
                "foo:bar=baz stray words here=1",
                &["bar=baz stray words", "here=1"],
                "foo:",
            ),
            ("a=1, b=2,c=3", &["a=1", "b=2,c=3"], ""),
            (" a = 1  b= 2", &["a=1", "b=2"], ""),
            (
                r#"k='single q' k2="esc \" \\ \n \t \x""#,
                &["k=single q", "k2=esc \" \\ \n \t \\x"],
                "",
            ),
            ("a=b=c d=", &["a=b=c", "d="], ""),
            ("=x y==z", &["y==z"], "=x"),
            (
                "key.with.dot=1 key-dash=2 _u=3",
                &["key.with.dot=1", "key-dash=2", "_u=3"],
                "",
            ),
            (r#"a="" b='' c=x"""#, &["a=", "b=", r#"c=x"""#], ""),
        ];
        for (input, pairs, stray) in cases {
            assert_eq!(
                scan(input),
                (
                    pairs.iter().map(|p| p.to_string()).collect(),
                    stray.to_string()
                ),
                "{input}"
            );
        }
    }
}
