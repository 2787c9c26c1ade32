//! Tokens of syslog-ng's configuration language.
//!
//! Punctuation is `{ } ( ) ; ,`. Strings come in double quotes (with `\n`, `\t`, `\r`, `\\`,
//! `\"`, `\xHH` and friends) and single quotes (taken literally). Everything else up to white
//! space, punctuation, a quote or a `#` comment is a word: `tcp`, `514`, `1GiB`, `0.0.0.0`,
//! `/var/log/messages`, `info..emerg`.

use crate::error::{ConfigError, Pos};

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Tok {
    Open,   // {
    Close,  // }
    LParen, // (
    RParen, // )
    Semi,   // ;
    Comma,  // ,
    Word(String),
    Str(String),
    End,
}

#[derive(Clone, Debug)]
pub struct Token {
    pub tok: Tok,
    pub pos: Pos,
    /// Where the token starts in the text it was read from, in bytes: a block definition keeps
    /// the text between its braces as written.
    pub offset: u32,
    /// Which text it was read from: 0 for the configuration, others for block expansions.
    pub text: u32,
    /// How many block expansions produced it, to stop a block that references itself.
    pub depth: u8,
}

/// The characters of a text with the byte offset of the next one.
struct Chars<'a> {
    inner: std::iter::Peekable<std::str::CharIndices<'a>>,
    len: usize,
}

impl Chars<'_> {
    fn next(&mut self) -> Option<char> {
        self.inner.next().map(|(_, c)| c)
    }

    fn peek(&mut self) -> Option<&char> {
        self.inner.peek().map(|(_, c)| c)
    }

    fn next_if(&mut self, f: impl FnOnce(&char) -> bool) -> Option<char> {
        self.inner.next_if(|(_, c)| f(c)).map(|(_, c)| c)
    }

    fn offset(&mut self) -> u32 {
        self.inner.peek().map_or(self.len, |&(i, _)| i) as u32
    }
}

pub fn tokenize(text: &str) -> Result<Vec<Token>, ConfigError> {
    let mut out = Vec::new();
    let mut line = 0u32;
    let mut col = 0u32;
    let mut chars = Chars {
        inner: text.char_indices().peekable(),
        len: text.len(),
    };
    loop {
        let offset = chars.offset();
        let Some(c) = chars.next() else { break };
        let start = Pos { line, col, len: 1 };
        col += 1;
        let tok = match c {
            '\n' => {
                line += 1;
                col = 0;
                continue;
            }
            c if c.is_whitespace() => continue,
            '#' => {
                while chars.peek().is_some_and(|&c| c != '\n') {
                    chars.next();
                }
                continue;
            }
            '{' => Tok::Open,
            '}' => Tok::Close,
            '(' => Tok::LParen,
            ')' => Tok::RParen,
            ';' => Tok::Semi,
            ',' => Tok::Comma,
            '"' | '\'' => {
                let mut s = String::new();
                let mut end_line = line;
                loop {
                    let Some(ch) = chars.next() else {
                        return Err(ConfigError::new(start, "unterminated string"));
                    };
                    col += 1;
                    if ch == c {
                        break;
                    }
                    if ch == '\n' {
                        end_line += 1;
                        col = 0;
                    }
                    if ch == '\\' && c == '"' {
                        let Some(esc) = chars.next() else {
                            return Err(ConfigError::new(start, "unterminated string"));
                        };
                        col += 1;
                        match esc {
                            'n' => s.push('\n'),
                            't' => s.push('\t'),
                            'r' => s.push('\r'),
                            'a' => s.push('\x07'),
                            'b' => s.push('\x08'),
                            'f' => s.push('\x0c'),
                            'v' => s.push('\x0b'),
                            'x' => {
                                let hex: String = (0..2)
                                    .filter_map(|_| chars.next_if(char::is_ascii_hexdigit))
                                    .collect();
                                col += hex.len() as u32;
                                match u8::from_str_radix(&hex, 16) {
                                    Ok(b) => s.push(b as char),
                                    Err(_) => s.push_str("\\x"),
                                }
                            }
                            '\n' => {
                                end_line += 1;
                                col = 0;
                            }
                            other => s.push(other),
                        }
                    } else {
                        s.push(ch);
                    }
                }
                let tok = Tok::Str(s);
                let len = if end_line == line { col - start.col } else { 1 };
                line = end_line;
                out.push(Token {
                    tok,
                    pos: Pos { len, ..start },
                    offset,
                    text: 0,
                    depth: 0,
                });
                continue;
            }
            c => {
                let mut w = String::from(c);
                while let Some(&n) = chars.peek() {
                    if n.is_whitespace()
                        || matches!(n, '{' | '}' | '(' | ')' | ';' | ',' | '"' | '\'' | '#')
                    {
                        break;
                    }
                    w.push(n);
                    chars.next();
                    col += 1;
                }
                let len = w.chars().count() as u32;
                out.push(Token {
                    tok: Tok::Word(w),
                    pos: Pos { len, ..start },
                    offset,
                    text: 0,
                    depth: 0,
                });
                continue;
            }
        };
        out.push(Token {
            tok,
            pos: start,
            offset,
            text: 0,
            depth: 0,
        });
    }
    out.push(Token {
        tok: Tok::End,
        pos: Pos { line, col, len: 1 },
        offset: text.len() as u32,
        text: 0,
        depth: 0,
    });
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_strings_and_punctuation() {
        let toks =
            tokenize("source s { tcp(port(514) ip('0.0.0.0')); }; # comment\nx \"a\\tb\\x41\"")
                .unwrap();
        let kinds: Vec<Tok> = toks.into_iter().map(|t| t.tok).collect();
        let w = |s: &str| Tok::Word(s.into());
        assert_eq!(
            kinds,
            vec![
                w("source"),
                w("s"),
                Tok::Open,
                w("tcp"),
                Tok::LParen,
                w("port"),
                Tok::LParen,
                w("514"),
                Tok::RParen,
                w("ip"),
                Tok::LParen,
                Tok::Str("0.0.0.0".into()),
                Tok::RParen,
                Tok::RParen,
                Tok::Semi,
                Tok::Close,
                Tok::Semi,
                w("x"),
                Tok::Str("a\tbA".into()),
                Tok::End
            ]
        );
    }

    #[test]
    fn positions_count_lines_and_columns() {
        let toks = tokenize("a\n  bb").unwrap();
        assert_eq!(
            toks[1].pos,
            Pos {
                line: 1,
                col: 2,
                len: 2
            }
        );
    }
}
