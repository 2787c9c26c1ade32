//! Backtick substitution: `` `name` `` replaced by a value, as syslog-ng does it in the
//! configuration text (with `@define`s and the environment) and in the body of a block when the
//! block is used (with the block's arguments first).
//!
//! Inside a quoted string, a value that is itself one quoted string goes in by its content,
//! escaped for the string around it: with `dir("/var/log")`, `file("`dir`/x")` becomes
//! `file("/var/log/x")`. Anywhere else the value goes in as written. ``` `` ``` is a literal
//! backtick, and `#` comments are copied untouched.

use crate::lexer::{tokenize, Tok};

#[derive(Debug, PartialEq, Eq)]
pub enum SubstError {
    /// `` `name` `` with no value; `offset` and `len` cover the backticks and the name.
    Unknown {
        offset: usize,
        len: usize,
        name: String,
    },
    Unterminated {
        offset: usize,
    },
    /// A value holding `'` cannot go into a single-quoted string.
    Apostrophe {
        offset: usize,
    },
    /// `"\`name`"`: the backslash would escape the value's first character.
    AfterBackslash {
        offset: usize,
    },
    /// The text grew past [`GROWTH_LIMIT`] at the reference at `offset`: a value made of
    /// values, each used many times (an expansion bomb).
    TooLarge {
        offset: usize,
    },
}

/// How much larger than what it was given one substitution may make a text. syslog-ng holds
/// a substituted line in 8 KiB; sluice allows far more, and still refuses a value that doubles
/// itself a few dozen times before it takes seconds and gigabytes.
pub const GROWTH_LIMIT: usize = 1 << 20;

impl SubstError {
    pub fn offset(&self) -> usize {
        match self {
            SubstError::Unknown { offset, .. }
            | SubstError::Unterminated { offset }
            | SubstError::Apostrophe { offset }
            | SubstError::AfterBackslash { offset }
            | SubstError::TooLarge { offset } => *offset,
        }
    }

    pub fn len(&self) -> usize {
        match self {
            SubstError::Unknown { len, .. } => *len,
            _ => 1,
        }
    }

    pub fn message(&self, unknown_is: &str) -> String {
        match self {
            SubstError::Unknown { name, .. } => format!("`{name}` is {unknown_is}"),
            SubstError::Unterminated { .. } => "unterminated backtick reference".into(),
            SubstError::Apostrophe { .. } => {
                "a value with an apostrophe cannot go into a single-quoted string".into()
            }
            SubstError::AfterBackslash { .. } => {
                "a backtick reference cannot follow a backslash in a string".into()
            }
            SubstError::TooLarge { .. } => format!(
                "backtick substitution makes this text more than {} MiB larger: \
                 a value made of values, each used many times?",
                GROWTH_LIMIT >> 20
            ),
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    Code,
    Comment,
    /// In `"…"`; `escaped` just after a backslash.
    Quoted {
        escaped: bool,
    },
    /// In `'…'`, where backslashes are literal.
    Apostrophed,
}

/// Replaces every `` `name` `` in `input` with `lookup(name)`.
pub fn substitute(
    input: &str,
    mut lookup: impl FnMut(&str) -> Option<String>,
) -> Result<String, SubstError> {
    if !input.contains('`') {
        return Ok(input.to_string());
    }
    let mut out = String::with_capacity(input.len());
    let mut state = State::Code;
    let mut rest = input;
    while let Some(c) = rest.chars().next() {
        let offset = input.len() - rest.len();
        rest = &rest[c.len_utf8()..];
        if c == '`' && !matches!(state, State::Comment) {
            if state == (State::Quoted { escaped: true }) {
                return Err(SubstError::AfterBackslash { offset });
            }
            let end = rest.find('`').ok_or(SubstError::Unterminated { offset })?;
            let name = &rest[..end];
            rest = &rest[end + 1..];
            if name.is_empty() {
                out.push('`');
                continue;
            }
            let value = lookup(name).ok_or_else(|| SubstError::Unknown {
                offset,
                len: name.len() + 2,
                name: name.to_string(),
            })?;
            match (state, string_literal(&value)) {
                (State::Quoted { .. }, Some(text)) => {
                    for ch in text.chars() {
                        match ch {
                            '"' => out.push_str("\\\""),
                            '\n' => out.push_str("\\n"),
                            '\r' => out.push_str("\\r"),
                            '\\' => out.push_str("\\\\"),
                            ch => out.push(ch),
                        }
                    }
                }
                (State::Apostrophed, Some(text)) => {
                    if text.contains('\'') {
                        return Err(SubstError::Apostrophe { offset });
                    }
                    out.push_str(&text);
                }
                _ => out.push_str(&value),
            }
            if out.len() > input.len() + GROWTH_LIMIT {
                return Err(SubstError::TooLarge { offset });
            }
            continue;
        }
        out.push(c);
        state = match (state, c) {
            (State::Code, '"') => State::Quoted { escaped: false },
            (State::Code, '\'') => State::Apostrophed,
            (State::Code, '#') => State::Comment,
            (State::Comment, '\n') => State::Code,
            (State::Quoted { escaped: false }, '\\') => State::Quoted { escaped: true },
            (State::Quoted { escaped: false }, '"') | (State::Apostrophed, '\'') => State::Code,
            (State::Quoted { .. }, _) => State::Quoted { escaped: false },
            (s, _) => s,
        };
    }
    Ok(out)
}

/// The content of `value` when it is exactly one quoted string.
fn string_literal(value: &str) -> Option<String> {
    let mut toks = tokenize(value).ok()?.into_iter().map(|t| t.tok);
    match (toks.next(), toks.next()) {
        (Some(Tok::Str(s)), Some(Tok::End)) => Some(s),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(input: &str) -> Result<String, SubstError> {
        substitute(input, |name| match name {
            "dir" => Some("\"/var/log\"".into()),
            "port" => Some("514".into()),
            "quote" => Some("\"say \\\"hi\\\"\"".into()),
            "apos" => Some("\"it's\"".into()),
            _ => None,
        })
    }

    #[test]
    fn values_go_in_as_written_or_as_string_content() {
        assert_eq!(
            run("tcp(port(`port`)) file(`dir`) file(\"`dir`/x\") file('`dir`/y')").unwrap(),
            "tcp(port(514)) file(\"/var/log\") file(\"/var/log/x\") file('/var/log/y')"
        );
        assert_eq!(run("\"`quote`\"").unwrap(), "\"say \\\"hi\\\"\"");
        assert_eq!(run("\"`port`\" ``").unwrap(), "\"514\" `");
        assert_eq!(
            run("x # `nope` in a comment\n`port`").unwrap(),
            "x # `nope` in a comment\n514"
        );
        assert_eq!(
            run("\"# not a comment `port`\"").unwrap(),
            "\"# not a comment 514\""
        );
    }

    #[test]
    fn errors_carry_their_offset() {
        assert_eq!(
            run("ab `nope` c"),
            Err(SubstError::Unknown {
                offset: 3,
                len: 6,
                name: "nope".into()
            })
        );
        assert_eq!(run("a `port"), Err(SubstError::Unterminated { offset: 2 }));
        let big = "x".repeat(GROWTH_LIMIT / 2 + 8);
        assert_eq!(
            substitute("a `b` `b`", |_| Some(big.clone())),
            Err(SubstError::TooLarge { offset: 6 })
        );
        assert_eq!(run("'`apos`'"), Err(SubstError::Apostrophe { offset: 1 }));
        assert_eq!(
            run("\"\\`port`\""),
            Err(SubstError::AfterBackslash { offset: 2 })
        );
    }
}
