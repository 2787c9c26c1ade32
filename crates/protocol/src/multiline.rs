//! Messages of several lines (`multi-line-mode()`): a stack trace, an indented block. The
//! lines [`FrameDecoder`](crate::framing::FrameDecoder) cut are joined into records, each one
//! range of the buffer with its inner line ends kept.
//!
//! - `indented`: a line that starts with a space or a tab continues the record before it.
//! - `prefix-garbage` (and `regexp`): a line where `multi-line-prefix()` matches starts a
//!   record; `multi-line-garbage()` ends one where it matches (it is looked for first), and
//!   what it matched to the end of its line is left out.
//! - `prefix-suffix`: a line where `multi-line-prefix()` matches starts a record;
//!   `multi-line-suffix()` ends one after what it matched.
//!
//! Lines before the first record starts are records of their own. The last record stays open
//! until a line starts the next one, or the caller flushes it (the end of the input, or a
//! while with nothing new): [`MultiLine::join`] says where the open record starts, and the
//! caller keeps those bytes for its next call.

use crate::framing::Frame;
use regex::bytes::Regex;

/// How lines are joined into records.
#[derive(Clone, Debug)]
pub enum MultiLine {
    Indented,
    PrefixGarbage {
        prefix: Regex,
        garbage: Option<Regex>,
    },
    PrefixSuffix {
        prefix: Regex,
        suffix: Regex,
    },
}

/// What becomes of a line.
enum Line {
    /// It starts a record.
    Starts,
    /// It goes on with the open record, if there is one.
    Continues,
    /// It ends the open record, up to (not including) this many bytes into the line; with no
    /// record open, it is a record of its own.
    Ends(usize),
}

impl MultiLine {
    fn classify(&self, line: &[u8]) -> Line {
        match self {
            MultiLine::Indented => match line.first() {
                Some(b' ' | b'\t') => Line::Continues,
                _ => Line::Starts,
            },
            // The garbage first, as syslog-ng looks: a line with both ends the open record.
            MultiLine::PrefixGarbage { prefix, garbage } => {
                if let Some(m) = garbage.as_ref().and_then(|g| g.find(line)) {
                    return Line::Ends(m.start());
                }
                if prefix.is_match(line) {
                    Line::Starts
                } else {
                    Line::Continues
                }
            }
            MultiLine::PrefixSuffix { prefix, suffix } => {
                if prefix.is_match(line) {
                    return Line::Starts;
                }
                match suffix.find(line) {
                    Some(m) => Line::Ends(m.end()),
                    None => Line::Continues,
                }
            }
        }
    }

    /// Joins `lines` (the frames cut from `buf`, in order) into records, handed to `out`.
    /// Returns where the record still open starts, when one is (its bytes are to be given
    /// again with what follows them); with `flush`, none is: the open record is a record.
    /// A record longer than `max_size` is handed over as it stands.
    pub fn join(
        &self,
        buf: &[u8],
        lines: &[Frame],
        flush: bool,
        max_size: usize,
        mut out: impl FnMut(Frame),
    ) -> Option<usize> {
        // The open record: where it starts and ends.
        let mut open: Option<(usize, usize)> = None;
        // A record longer than `max_size` is cut there, as the decoder cuts a line.
        let close = |open: &mut Option<(usize, usize)>, out: &mut dyn FnMut(Frame)| {
            if let Some((start, end)) = open.take() {
                out(Frame {
                    range: start..end.min(start + max_size),
                    oversized: end - start > max_size,
                });
            }
        };
        for line in lines {
            let text = &buf[line.range.clone()];
            match self.classify(text) {
                Line::Starts => {
                    close(&mut open, &mut out);
                    open = Some((line.range.start, line.range.end));
                }
                Line::Continues => match &mut open {
                    Some((_, end)) => *end = line.range.end,
                    // Before any record: a record of its own, which may go on.
                    None => open = Some((line.range.start, line.range.end)),
                },
                Line::Ends(at) => {
                    let start = open.map_or(line.range.start, |(s, _)| s);
                    open = Some((start, line.range.start + at));
                    close(&mut open, &mut out);
                }
            }
            if let Some((start, end)) = open {
                if end - start > max_size {
                    out(Frame {
                        range: start..start + max_size,
                        oversized: true,
                    });
                    open = None;
                }
            }
        }
        match open {
            Some(_) if flush => {
                close(&mut open, &mut out);
                None
            }
            Some((start, _)) => Some(start),
            None => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The records of `text` (lines ending in `\n`) and where the open one starts.
    fn records(mode: &MultiLine, text: &str, flush: bool) -> (Vec<String>, Option<usize>) {
        let buf = text.as_bytes();
        let mut lines = Vec::new();
        let mut at = 0;
        for (i, b) in buf.iter().enumerate() {
            if *b == b'\n' {
                lines.push(Frame {
                    range: at..i,
                    oversized: false,
                });
                at = i + 1;
            }
        }
        let mut out = Vec::new();
        let open = mode.join(buf, &lines, flush, 1 << 16, |f| {
            out.push(String::from_utf8_lossy(&buf[f.range]).into_owned())
        });
        (out, open)
    }

    #[test]
    fn indented_lines_continue_the_record_before_them() {
        let text = "Exception in main\n\tat a.B(C.java:1)\n\tat d.E(F.java:2)\nnext one\n  more\n";
        let (out, open) = records(&MultiLine::Indented, text, false);
        assert_eq!(
            out,
            ["Exception in main\n\tat a.B(C.java:1)\n\tat d.E(F.java:2)"]
        );
        assert_eq!(open, text.find("next one"));
        let (out, open) = records(&MultiLine::Indented, text, true);
        assert_eq!(out.len(), 2);
        assert_eq!(out[1], "next one\n  more");
        assert_eq!(open, None);
    }

    #[test]
    fn a_prefix_starts_a_record_and_garbage_ends_it() {
        let mode = MultiLine::PrefixGarbage {
            prefix: Regex::new("^[0-9]{4}-").unwrap(),
            garbage: Some(Regex::new("--END--").unwrap()),
        };
        let text = "orphan\n2026-11-24 one\n  two\n2026-11-24 three --END-- junk\nafter\n2026-11-24 four\n";
        let (out, open) = records(&mode, text, false);
        // As syslog-ng 3.38 joins them: a line with garbage ends the record it is in.
        assert_eq!(
            out,
            [
                "orphan",
                "2026-11-24 one\n  two\n2026-11-24 three ",
                "after"
            ]
        );
        assert_eq!(open, text.find("2026-11-24 four"));
    }

    #[test]
    fn a_prefix_starts_a_record_and_a_suffix_ends_it() {
        let mode = MultiLine::PrefixSuffix {
            prefix: Regex::new("^<record>").unwrap(),
            suffix: Regex::new("</record>").unwrap(),
        };
        let text = "<record>a\nb</record> tail\n<record>c\nd\n";
        let (out, open) = records(&mode, text, false);
        assert_eq!(out, ["<record>a\nb</record>"]);
        assert_eq!(open, text.find("<record>c"));
    }

    #[test]
    fn a_record_ended_by_garbage_past_the_limit_is_cut() {
        // Found by the multiline fuzz target: a record closed by its garbage was not cut.
        let mode = MultiLine::PrefixGarbage {
            prefix: Regex::new("^1").unwrap(),
            garbage: Some(Regex::new("--").unwrap()),
        };
        let buf = b"1abc\ndefgh--\n";
        let lines = [
            Frame {
                range: 0..4,
                oversized: false,
            },
            Frame {
                range: 5..12,
                oversized: false,
            },
        ];
        let mut out = Vec::new();
        mode.join(buf, &lines, true, 6, |f| out.push((f.range, f.oversized)));
        assert_eq!(out, [(0..6, true)]);
    }

    #[test]
    fn a_record_longer_than_the_limit_is_cut() {
        let buf = b"start\n more\n more\n";
        let lines = [
            Frame {
                range: 0..5,
                oversized: false,
            },
            Frame {
                range: 6..11,
                oversized: false,
            },
            Frame {
                range: 12..17,
                oversized: false,
            },
        ];
        let mut out = Vec::new();
        MultiLine::Indented.join(buf, &lines, true, 8, |f| out.push((f.range, f.oversized)));
        assert_eq!(out, [(0..8, true), (12..17, false)]);
    }
}
