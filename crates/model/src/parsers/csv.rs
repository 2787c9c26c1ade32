//! `csv-parser()`: columns of delimited text, as syslog-ng 3.38's CSV scanner cuts them.
//!
//! Its rules, which the differential tests hold sluice to:
//! - A column starts quoted when its first byte opens a quote pair (`""` and `''` by default);
//!   inside quotes, delimiters are text, and the dialect decides escapes (`escape-backslash`:
//!   `\x` is `x`; `escape-double-char`: `""` is `"`). After the closing quote the column goes
//!   on, unquoted, to the next delimiter.
//! - Delimiters are single bytes (`delimiters(" ")` by default, or `chars()`) or strings
//!   (`strings()`, tried first).
//! - `strip-whitespace` (the default, unless `flags()` says otherwise) drops spaces and tabs
//!   around unquoted text — after the quote test, so `  "a"` keeps its quotes.
//! - `greedy`: the last column takes the rest of the input. Columns with no input left are not
//!   set; with `drop-invalid`, such input (or input left over) fails the parser.
//! - A value equal to `null()` is stored empty.

pub use crate::str_repr::Piece;
use std::ops::Range;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dialect {
    EscapeNone,
    EscapeBackslash,
    EscapeDoubleChar,
}

#[derive(Clone, Debug)]
pub struct Options {
    pub columns: usize,
    pub delimiters: Vec<u8>,
    pub string_delimiters: Vec<Vec<u8>>,
    pub quotes_start: Vec<u8>,
    pub quotes_end: Vec<u8>,
    pub null: Option<Vec<u8>>,
    pub dialect: Dialect,
    pub strip_whitespace: bool,
    pub greedy: bool,
}

/// Cuts `input` (up to its first NUL) into at most `opts.columns` values, calling `column` with
/// each one's index; returns whether the scan was complete (every column set, no input left),
/// which `drop-invalid` asks for.
pub fn scan(input: &[u8], opts: &Options, column: &mut dyn FnMut(usize, Piece)) -> bool {
    let input = &input[..memchr::memchr(0, input).unwrap_or(input.len())];
    let mut at = 0;
    for i in 0..opts.columns {
        let last = i + 1 == opts.columns;
        if last && opts.greedy {
            if opts.strip_whitespace {
                at += whitespace(&input[at..]);
            }
            let value = Value {
                span: at..input.len(),
                copy: None,
            };
            column(i, value.finish(input, opts));
            return true;
        }
        if at >= input.len() {
            return false;
        }
        let mut quote = match opts.quotes_start.iter().position(|&q| q == input[at]) {
            Some(k) => {
                at += 1;
                Some(opts.quotes_end[k])
            }
            None => None,
        };
        if opts.strip_whitespace {
            at += whitespace(&input[at..]);
        }
        let mut value = Value::at(at);
        while at < input.len() {
            let b = input[at];
            match quote {
                Some(q) => {
                    let next = input.get(at + 1).copied();
                    let escape = match opts.dialect {
                        Dialect::EscapeBackslash => b == b'\\' && next.is_some(),
                        Dialect::EscapeDoubleChar => b == q && next == Some(q),
                        Dialect::EscapeNone => false,
                    };
                    if escape {
                        // The escape byte is left out; the byte after it is text.
                        value.skip(input, at);
                        at += 1;
                        value.push(input, at);
                    } else if b == q {
                        quote = None;
                        value.skip(input, at);
                    } else {
                        value.push(input, at);
                    }
                    at += 1;
                }
                None => {
                    if let Some(d) = opts
                        .string_delimiters
                        .iter()
                        .find(|d| !d.is_empty() && input[at..].starts_with(d))
                    {
                        at += d.len();
                        break;
                    }
                    if opts.delimiters.contains(&b) {
                        at += 1;
                        break;
                    }
                    value.push(input, at);
                    at += 1;
                }
            }
        }
        column(i, value.finish(input, opts));
    }
    at >= input.len()
}

fn whitespace(s: &[u8]) -> usize {
    s.iter().take_while(|&&b| b == b' ' || b == b'\t').count()
}

/// A value being cut: a range of the input while its bytes are contiguous, a copy once a
/// quote or escape left a gap.
struct Value {
    span: Range<usize>,
    copy: Option<Vec<u8>>,
}

impl Value {
    fn at(at: usize) -> Value {
        Value {
            span: at..at,
            copy: None,
        }
    }

    /// Takes `input[at]` into the value.
    fn push(&mut self, input: &[u8], at: usize) {
        match &mut self.copy {
            Some(c) => c.push(input[at]),
            None if self.span.end == at => self.span.end = at + 1,
            None => {
                let mut c = input[self.span.clone()].to_vec();
                c.push(input[at]);
                self.copy = Some(c);
            }
        }
    }

    /// Leaves `input[at]` out of the value (a quote or an escape character).
    fn skip(&mut self, _input: &[u8], at: usize) {
        if self.copy.is_none() && self.span.is_empty() {
            // Nothing taken yet: the value may still start after this byte.
            self.span = at + 1..at + 1;
        }
    }

    fn finish(self, input: &[u8], opts: &Options) -> Piece {
        let mut piece = match self.copy {
            Some(c) => Piece::Decoded(c),
            None => Piece::In(self.span),
        };
        if opts.strip_whitespace {
            match &mut piece {
                Piece::In(r) => {
                    r.end -= input[r.clone()]
                        .iter()
                        .rev()
                        .take_while(|&&b| b == b' ' || b == b'\t')
                        .count()
                }
                Piece::Decoded(c) => {
                    let keep = c.len()
                        - c.iter()
                            .rev()
                            .take_while(|&&b| b == b' ' || b == b'\t')
                            .count();
                    c.truncate(keep);
                }
            }
        }
        if let Some(null) = &opts.null {
            let bytes = match &piece {
                Piece::In(r) => &input[r.clone()],
                Piece::Decoded(c) => c,
            };
            if bytes == null.as_slice() {
                return Piece::In(0..0);
            }
        }
        piece
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(columns: usize) -> Options {
        Options {
            columns,
            delimiters: b" ".to_vec(),
            string_delimiters: Vec::new(),
            quotes_start: b"\"'".to_vec(),
            quotes_end: b"\"'".to_vec(),
            null: None,
            dialect: Dialect::EscapeNone,
            strip_whitespace: true,
            greedy: false,
        }
    }

    fn cut(input: &str, opts: &Options) -> (Vec<String>, bool) {
        let mut got = Vec::new();
        let complete = scan(input.as_bytes(), opts, &mut |_, p| {
            let v = match p {
                Piece::In(r) => input.as_bytes()[r].to_vec(),
                Piece::Decoded(d) => d,
            };
            got.push(String::from_utf8(v).unwrap());
        });
        (got, complete)
    }

    #[test]
    fn quotes_escapes_and_whitespace() {
        let o = opts(3);
        assert_eq!(
            cut(r#"a "b c" d"#, &o),
            (vec!["a".into(), "b c".into(), "d".into()], true)
        );
        assert_eq!(cut(r#""ab"cd x"#, &o).0, ["abcd", "x"]);
        assert_eq!(cut(r#"  "a" b"#, &o).0, [r#""a""#, "b"]);
        let o = Options {
            dialect: Dialect::EscapeBackslash,
            delimiters: b",".to_vec(),
            ..opts(2)
        };
        assert_eq!(cut(r#""a\"b",c"#, &o).0, [r#"a"b"#, "c"]);
        let o = Options {
            dialect: Dialect::EscapeDoubleChar,
            delimiters: b",".to_vec(),
            ..opts(2)
        };
        assert_eq!(cut(r#""a""b",c"#, &o).0, [r#"a"b"#, "c"]);
    }

    #[test]
    fn greedy_null_string_delimiters_and_completeness() {
        let o = Options {
            greedy: true,
            null: Some(b"-".to_vec()),
            string_delimiters: vec![b"::".to_vec()],
            ..opts(3)
        };
        assert_eq!(
            cut("a::- rest of it  ", &o),
            (vec!["a".into(), "".into(), "rest of it".into()], true)
        );
        assert_eq!(cut("a b", &opts(3)), (vec!["a".into(), "b".into()], false));
        assert_eq!(
            cut("a b c d", &opts(3)),
            (vec!["a".into(), "b".into(), "c".into()], false)
        );
    }
}
