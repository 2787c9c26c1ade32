//! Configuration errors with a position, rendered like a compiler's:
//!
//! ```text
//! /etc/sluice/sluice.conf:4:22: unknown option 'prot' in tcp()
//!     4 | source s { tcp(ip(0.0.0.0) prot(514)); };
//!       |                            ^^^^
//!   = did you mean 'port'? valid options: port, ip, transport, …
//! ```

use crate::source::SourceMap;
use std::fmt::Write;

/// A place in the joined configuration text; [`SourceMap`] turns it back into a file and line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pos {
    /// Line in the joined text, from 0.
    pub line: u32,
    /// Column in characters, from 0.
    pub col: u32,
    /// Length of the offending token in characters (at least 1 when rendered).
    pub len: u32,
}

/// A configuration that could not be read, with what was read of it to show where.
#[derive(Debug)]
pub struct LoadError {
    pub error: ConfigError,
    pub map: SourceMap,
}

impl LoadError {
    pub fn new(error: ConfigError, map: SourceMap) -> Box<LoadError> {
        Box::new(LoadError { error, map })
    }

    pub fn render(&self) -> String {
        self.error.render(&self.map)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    pub pos: Option<Pos>,
    pub message: String,
    /// Lines of help shown under the caret.
    pub help: Vec<String>,
}

impl ConfigError {
    pub fn new(pos: Pos, message: impl Into<String>) -> ConfigError {
        ConfigError {
            pos: Some(pos),
            message: message.into(),
            help: Vec::new(),
        }
    }

    /// An error that belongs to no token (a file that cannot be read).
    pub fn general(message: impl Into<String>) -> ConfigError {
        ConfigError {
            pos: None,
            message: message.into(),
            help: Vec::new(),
        }
    }

    pub fn with_help(mut self, help: impl Into<String>) -> ConfigError {
        self.help.push(help.into());
        self
    }

    /// `what` is not one of `valid`: says so, with the nearest spelling first.
    pub fn unknown(pos: Pos, what: &str, name: &str, context: &str, valid: &[&str]) -> ConfigError {
        let err = ConfigError::new(pos, format!("unknown {what} '{name}'{context}"));
        let wanted = crate::normalize(name);
        let mut ranked: Vec<&str> = valid.to_vec();
        ranked.sort_by(|a, b| {
            let da = strsim::damerau_levenshtein(&wanted, &crate::normalize(a));
            let db = strsim::damerau_levenshtein(&wanted, &crate::normalize(b));
            da.cmp(&db).then(a.cmp(b))
        });
        ranked.dedup();
        let Some(nearest) = ranked.first() else {
            return err;
        };
        let close = strsim::damerau_levenshtein(&wanted, &crate::normalize(nearest))
            <= (wanted.len() / 3).max(2);
        // Shown as syslog-ng's documentation writes them: keep-hostname, not keep_hostname.
        let nearest = nearest.replace('_', "-");
        let list = ranked
            .iter()
            .map(|n| n.replace('_', "-"))
            .collect::<Vec<_>>()
            .join(", ");
        if close {
            err.with_help(format!("did you mean '{nearest}'? valid {what}s: {list}"))
        } else {
            err.with_help(format!("valid {what}s: {list}"))
        }
    }

    /// A name syslog-ng knows that a later version of sluice will implement.
    pub fn not_supported(pos: Pos, what: &str) -> ConfigError {
        ConfigError::new(pos, format!("{what} is not supported yet"))
            .with_help("sluice recognises it from syslog-ng but cannot honour it yet; remove it or wait for a release that does")
    }

    /// The error as a person reads it: position, the line, a caret and the help.
    pub fn render(&self, map: &SourceMap) -> String {
        let Some(pos) = self.pos else {
            return format!("error: {}", self.message);
        };
        let (file, line_no, text) = map.origin(pos.line);
        let mut out = format!("{file}:{line_no}:{}: {}\n", pos.col + 1, self.message);
        let gutter = line_no.to_string().len();
        let (shown, caret, len) = window(text, pos.col as usize, pos.len.max(1) as usize);
        let _ = writeln!(out, "{line_no:>gutter$} | {shown}");
        let _ = writeln!(
            out,
            "{:gutter$} | {}{}",
            "",
            " ".repeat(caret),
            "^".repeat(len)
        );
        for help in &self.help {
            let _ = writeln!(out, "{:gutter$} = {help}", "");
        }
        out
    }
}

/// How many characters of a line an error shows: a generated or hostile line may be megabytes.
const SHOWN: usize = 160;

/// The part of `line` an error shows around column `col` (characters from 0), tabs as spaces,
/// `…` where it is cut; and where the caret of `len` characters goes in it.
fn window(line: &str, col: usize, len: usize) -> (String, usize, usize) {
    let chars: Vec<char> = line
        .chars()
        .map(|c| if c == '\t' { ' ' } else { c })
        .collect();
    if chars.len() <= SHOWN {
        return (chars.into_iter().collect(), col, len);
    }
    let start = col
        .saturating_sub(SHOWN / 3)
        .min(chars.len().saturating_sub(SHOWN));
    let end = (start + SHOWN).min(chars.len());
    let mut shown: String = chars[start..end].iter().collect();
    let mut caret = col - start.min(col);
    if start > 0 {
        shown.insert(0, '…');
        caret += 1;
    }
    if end < chars.len() {
        shown.push('…');
    }
    let len = len.min((end + 1).saturating_sub(col.max(start)).max(1));
    (shown, caret, len)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_line_is_shown_around_its_caret() {
        let line = format!("{}HERE{}", "a".repeat(1000), "b".repeat(1000));
        let (shown, caret, len) = window(&line, 1000, 4);
        assert_eq!(shown.chars().count(), SHOWN + 2);
        assert!(shown.starts_with('…') && shown.ends_with('…'));
        let at: String = shown.chars().skip(caret).take(len).collect();
        assert_eq!(at, "HERE");
        assert_eq!(window("a\tb", 2, 1), ("a b".to_string(), 2, 1));
    }
}
