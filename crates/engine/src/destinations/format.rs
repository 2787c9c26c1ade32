//! How a destination turns a message into bytes (before any transport framing): a template,
//! or syslog-ng's built-in formats when none is given; and [`Formatter`], which numbers local
//! messages and sizes output buffers for a destination.

use sluice_logstore::EntryWriter;
use sluice_model::macros::{format_sdata, msghdr, write_msg_stamp, DateOptions};
use sluice_model::time::{self, TsFormat, UnixTime};
use sluice_model::{LineAsWritten, LogMessage, Template};
use std::sync::atomic::{AtomicU32, Ordering};

#[derive(Clone, Debug)]
pub enum Format {
    Template(Template),
    /// syslog-ng's file format: `$STAMP $HOST $MSGHDR$MSG\n` with the destination's
    /// `ts-format()`, `frac-digits()` and `time-zone()`.
    File(DateOptions),
    /// syslog-ng's legacy network format (`network()`, `tcp()`, `udp()`): `<$PRI>` and a BSD
    /// stamp (whatever `ts-format()` says; `frac-digits()` applies), then `$HOST $MSGHDR$MSG\n`.
    Proto(DateOptions),
    /// `flags(syslog-protocol)`: an RFC5424 line, the message or `template()` as its text.
    Rfc5424(DateOptions, Option<Template>),
}

impl Format {
    /// Whether the output shows the destination's sequence number (so it must be counted).
    pub fn uses_seq(&self) -> bool {
        match self {
            Format::Template(t) => t.uses_seq(),
            Format::File(_) | Format::Proto(_) => false,
            Format::Rfc5424(..) => true,
        }
    }

    /// Appends `msg` formatted; `seq` is the destination's sequence number for it.
    pub fn append(&self, msg: &LogMessage, seq: u32, no_multi_line: bool, out: &mut Vec<u8>) {
        let start = out.len();
        match self {
            Format::Template(t) => t.append(msg, seq, out),
            Format::File(dates) | Format::Proto(dates) => {
                let ts_format = if let Format::Proto(_) = self {
                    out.push(b'<');
                    time::push_num(out, msg.fields.pri);
                    out.push(b'>');
                    TsFormat::Bsd
                } else {
                    dates.ts_format
                };
                // Most received lines read exactly as this format writes them: one copy. The
                // line is looked at only when the options show stamps as written.
                let line = if dates.shows_as_written(ts_format) {
                    msg.line_as_written()
                } else {
                    None
                };
                match line {
                    Some(LineAsWritten::Whole(line)) => out.extend_from_slice(line),
                    Some(LineAsWritten::AroundHost(stamp, rest)) => {
                        out.extend_from_slice(stamp);
                        out.push(b' ');
                        out.extend_from_slice(msg.host());
                        out.push(b' ');
                        out.extend_from_slice(rest);
                    }
                    None => file_line(msg, ts_format, dates, out),
                }
                out.push(b'\n');
            }
            Format::Rfc5424(dates, body) => {
                out.push(b'<');
                time::push_num(out, msg.fields.pri);
                out.extend_from_slice(b">1 ");
                write_msg_stamp(msg, TsFormat::Iso, dates, out);
                out.push(b' ');
                for field in [msg.host(), msg.program(), msg.pid(), msg.msgid()] {
                    out.extend_from_slice(if field.is_empty() { b"-" } else { field });
                    out.push(b' ');
                }
                let sd_start = out.len();
                format_sdata(msg, seq, out);
                if out.len() == sd_start {
                    out.push(b'-');
                }
                match body {
                    Some(t) => {
                        out.push(b' ');
                        if msg.fields.utf8 {
                            out.extend_from_slice(b"\xEF\xBB\xBF");
                        }
                        t.append(msg, seq, out);
                    }
                    None => {
                        out.push(b' ');
                        let text = msg.message();
                        if !text.is_empty() {
                            if msg.fields.utf8 {
                                out.extend_from_slice(b"\xEF\xBB\xBF");
                            }
                            out.extend_from_slice(text);
                        }
                    }
                }
                out.push(b'\n');
            }
        }
        if no_multi_line && out.len() > start + 1 {
            let end = out.len() - 1;
            for b in &mut out[start..end] {
                if matches!(*b, b'\r' | b'\n') {
                    *b = b' ';
                }
            }
        }
    }
}

/// `$STAMP $HOST $MSGHDR$MSG`, formatted field by field.
fn file_line(msg: &LogMessage, ts_format: TsFormat, dates: &DateOptions, out: &mut Vec<u8>) {
    write_msg_stamp(msg, ts_format, dates, out);
    out.push(b' ');
    out.extend_from_slice(msg.host());
    out.push(b' ');
    msghdr(msg, false, out);
    out.extend_from_slice(msg.message());
}

/// A destination's [`Format`] with what formatting needs to remember across batches: the
/// sequence number of the next local message, and how long formatted messages were lately.
#[derive(Debug)]
pub struct Formatter {
    pub format: Format,
    /// `flags(no-multi-line)`: line breaks inside a message become spaces.
    pub no_multi_line: bool,
    /// The sequence number of the next local message (syslog-ng's writer `seq_num`).
    next_seq: AtomicU32,
    /// The format shows sequence numbers.
    counts_seq: bool,
    /// Bytes a formatted message took lately, with some room: an output buffer is sized from
    /// it, so that it is not grown (and copied) while formatting.
    bytes_per_message: AtomicU32,
    /// `logstore()`: each formatted line goes in an archive entry with the fields a search
    /// asks about ([`sluice_logstore::entry`]).
    entries: bool,
}

impl Formatter {
    pub fn new(format: Format, no_multi_line: bool) -> Formatter {
        Formatter {
            counts_seq: format.uses_seq(),
            format,
            no_multi_line,
            next_seq: AtomicU32::new(1),
            bytes_per_message: AtomicU32::new(256),
            entries: false,
        }
    }

    /// Formats archive entries (`logstore()`) instead of bare lines.
    pub fn into_entries(mut self) -> Formatter {
        self.entries = true;
        self
    }

    /// The format shows local messages' sequence numbers.
    pub fn numbers_local(&self) -> bool {
        self.counts_seq
    }

    /// Appends `msg` formatted.
    pub fn append(&self, msg: &LogMessage, out: &mut Vec<u8>) {
        if !self.entries {
            return self
                .format
                .append(msg, self.seq(msg), self.no_multi_line, out);
        }
        let micros = |t: &UnixTime| t.secs * 1_000_000 + i64::from(t.micros);
        let entry = EntryWriter::begin(
            out,
            micros(&msg.recvd),
            micros(&msg.stamp),
            msg.stamp.offset,
            msg.fields.pri.min(255) as u8,
            msg.host(),
            msg.program(),
        );
        self.format
            .append(msg, self.seq(msg), self.no_multi_line, out);
        entry.finish(out, msg.message());
    }

    /// Local messages are numbered per destination; others carry their `meta.sequenceId`.
    /// Formats that do not show it skip the work.
    fn seq(&self, msg: &LogMessage) -> u32 {
        if !self.counts_seq {
            0
        } else if msg.is_local() {
            self.next_seq.fetch_add(1, Ordering::Relaxed)
        } else {
            msg.sequence_id()
        }
    }

    /// The bytes `messages` formatted messages probably take.
    pub fn size_hint(&self, messages: usize) -> usize {
        messages * self.bytes_per_message.load(Ordering::Relaxed) as usize
    }

    /// Remembers that `messages` took `bytes`, with an eighth more for variation.
    pub fn learn_size(&self, bytes: usize, messages: usize) {
        if messages >= 16 {
            let per = bytes / messages;
            self.bytes_per_message
                .store((per + per / 8).clamp(64, 1 << 16) as u32, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_model::testing::message;

    fn fmt(f: &Format, frame: &str) -> String {
        let mut out = Vec::new();
        f.append(&message(frame), 0, false, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn syslog_ng_file_format() {
        let f = Format::File(DateOptions::default());
        assert_eq!(
            fmt(&f, "<13>Jan  5 13:56:09 host prog[1]: text"),
            "Jan  5 13:56:09 host prog[1]: text\n"
        );
        assert_eq!(
            fmt(&f, "<13>1 2025-01-05T13:56:09Z host prog 1 - - text"),
            "Jan  5 13:56:09 host prog[1]: text\n"
        );
    }

    #[test]
    fn a_line_is_copied_only_when_it_reads_as_formatted() {
        let dates = DateOptions::default();
        // How the line is copied, if it is: checked against formatting it field by field.
        let copied = |msg: &LogMessage| {
            let mut formatted = Vec::new();
            file_line(msg, TsFormat::Bsd, &dates, &mut formatted);
            let (how, line) = match msg.line_as_written()? {
                LineAsWritten::Whole(line) => ("whole", line.to_vec()),
                LineAsWritten::AroundHost(stamp, rest) => {
                    let host = [&b" "[..], msg.host(), b" "].concat();
                    ("around the host", [&stamp[..], &host, rest].concat())
                }
            };
            assert_eq!(
                String::from_utf8_lossy(&line),
                String::from_utf8_lossy(&formatted),
                "{:?}",
                String::from_utf8_lossy(msg.raw)
            );
            Some(how)
        };
        let whole = Some("whole");
        assert_eq!(
            copied(&message("<13>Jan  5 13:56:09 host prog[1]: text")),
            whole
        );
        assert_eq!(
            copied(&message(
                "<13>Dec 31 23:59:59 host prog: text  with  spaces "
            )),
            whole
        );
        assert_eq!(copied(&message("<13>Jan 15 01:02:03 host prog[1]:")), whole);
        // One word after the host is the program (`$MSGHDR` is `text`, the message empty).
        assert_eq!(copied(&message("<13>Jan  5 13:56:09 host text")), whole);
        // No space after the colon: `$MSGHDR` is the header as written.
        assert_eq!(
            copied(&message("<13>Jan  5 13:56:09 host prog[1]:text")),
            whole
        );
        let around = Some("around the host");
        assert_eq!(
            copied(&message("<13>Jan  5 13:56:09 host  prog[1]: text")),
            around
        );
        assert_eq!(
            copied(&message("<13>Jan  5 13:56:09: host prog[1]: text")),
            around
        );
        // A fraction the format does not show.
        assert_eq!(
            copied(&message("<13>Jan  5 13:56:09.123 host prog: text")),
            around
        );
        let mut renamed = message("<13>Jan  5 13:56:09 host prog[1]: text");
        renamed.set_host(sluice_protocol::Text::owned(b"renamed"));
        assert_eq!(copied(&renamed), around);
        for frame in [
            "<13>Jan 05 13:56:09 host prog[1]: text", // the day padded with 0
            "<13>jan  5 13:56:09 host prog[1]: text", // the month in lower case
            "<13>2025-01-05T13:56:09Z host prog: text", // ISO
            "<13>1 2025-01-05T13:56:09Z host prog 1 - - text",
            "<13>prog[1]: text",
        ] {
            assert_eq!(copied(&message(frame)), None, "{frame}");
        }
    }

    #[test]
    fn syslog_ng_network_format() {
        let f = Format::Proto(DateOptions::default());
        assert_eq!(
            fmt(&f, "<13>Jan  5 13:56:09 host prog[1]: text"),
            "<13>Jan  5 13:56:09 host prog[1]: text\n"
        );
    }

    #[test]
    fn rfc5424_format() {
        let f = Format::Rfc5424(DateOptions::default(), None);
        assert_eq!(
            fmt(
                &f,
                "<13>1 2025-01-05T13:56:09Z host prog - ID1 [a b=\"c\"] text"
            ),
            "<13>1 2025-01-05T13:56:09+00:00 host prog - ID1 [a b=\"c\"] text\n"
        );
    }
}
