//! Entries of the systemd journal, as `systemd-journal()` hands them on: one entry in
//! systemd's Journal Export Format, without the blank line that ends it —
//!
//! ```text
//! __REALTIME_TIMESTAMP=1700000000000000
//! _HOSTNAME=web1
//! MESSAGE=hello
//! ```
//!
//! a field per line, `KEY=value`, or `KEY`, a newline, the value's length as a little-endian
//! 64-bit number, the value and a newline for a value with a newline in it ([`push_field`]).
//! [`parse`] reads one as syslog-ng's `systemd-journal()` reads an entry: `MESSAGE` is `$MSG`,
//! `_HOSTNAME` `$HOST`, `_PID` `$PID`, `SYSLOG_FACILITY` and `PRIORITY` the priority's parts,
//! `SYSLOG_IDENTIFIER` (or else `_COMM`) `$PROGRAM`, and every field also a name-value pair
//! under the source's `prefix()` (`.journald.MESSAGE`), at most `max-field-size()` bytes of
//! it. Fields whose names start with `__` are the journal's own (`__REALTIME_TIMESTAMP`: the
//! entry's time) and are not pairs. Every value borrows from the entry.

use crate::values::{name_id_of, NameId};
use sluice_protocol::{Span, SyslogFields, Text};
use std::sync::Arc;

/// How a source reads journal entries into pairs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JournalFields {
    /// `prefix()`: what each field's name is put behind (`.journald.`).
    pub prefix: Arc<[u8]>,
    /// `max-field-size()`: the most bytes of a value that are kept.
    pub max_field_size: usize,
}

/// The time the journal gave an entry, in microseconds since the epoch.
pub type Realtime = i64;

/// Appends a field as enumerated from the journal (`KEY=value`) to `entry`, in the export
/// format: as it is, or, when the value has a newline, `KEY`, newline, length, value. A field
/// without `=` is not one and is left out.
pub fn push_field(entry: &mut Vec<u8>, field: &[u8]) {
    let Some(eq) = memchr::memchr(b'=', field) else {
        return;
    };
    let (key, value) = (&field[..eq], &field[eq + 1..]);
    if memchr::memchr(b'\n', value).is_none() {
        entry.extend_from_slice(field);
    } else {
        entry.extend_from_slice(key);
        entry.push(b'\n');
        entry.extend_from_slice(&(value.len() as u64).to_le_bytes());
        entry.extend_from_slice(value);
    }
    entry.push(b'\n');
}

/// Appends the entry's time (`__REALTIME_TIMESTAMP`) to `entry`.
pub fn push_realtime(entry: &mut Vec<u8>, usec: u64) {
    entry.extend_from_slice(b"__REALTIME_TIMESTAMP=");
    entry.extend_from_slice(usec.to_string().as_bytes());
    entry.push(b'\n');
}

/// Reads `entry` into `fields` and hands its pairs to `set`; the entry's time, if it has one.
/// A field cut short (a length past the end) ends the entry; what came before it is kept.
pub fn parse(
    entry: &[u8],
    journal: &JournalFields,
    fields: &mut SyslogFields,
    mut set: impl FnMut(NameId, Text),
) -> Option<Realtime> {
    let mut name = Vec::with_capacity(64);
    let mut realtime = None;
    let (mut identifier, mut comm) = (None, None);
    let mut at = 0;
    while at < entry.len() {
        let rest = &entry[at..];
        let Some(end) = memchr::memchr2(b'=', b'\n', rest) else {
            break;
        };
        let key = &rest[..end];
        let (value, next) = if rest[end] == b'=' {
            let len = memchr::memchr(b'\n', &rest[end + 1..]).unwrap_or(rest.len() - end - 1);
            (at + end + 1..at + end + 1 + len, at + end + 1 + len + 1)
        } else {
            let Some(len) = rest.get(end + 1..end + 9) else {
                break;
            };
            let len = u64::from_le_bytes(len.try_into().expect("8 bytes"));
            let start = at + end + 9;
            match usize::try_from(len).ok().and_then(|l| start.checked_add(l)) {
                Some(stop) if stop <= entry.len() => (start..stop, stop + 1),
                _ => break,
            }
        };
        at = next;
        if key.is_empty() {
            continue;
        }
        if key.starts_with(b"__") {
            if key == b"__REALTIME_TIMESTAMP" {
                realtime = leading_number(&entry[value]).and_then(|n| Realtime::try_from(n).ok());
            }
            continue;
        }
        let value = value.start
            ..value
                .end
                .min(value.start.saturating_add(journal.max_field_size));
        let text = Text::Span(Span::new(value.start, value.end));
        let bytes = &entry[value.clone()];
        match key {
            b"MESSAGE" => fields.message = text.clone(),
            b"_HOSTNAME" => fields.host = Some(text.clone()),
            b"_PID" => fields.pid = Some(text.clone()),
            b"SYSLOG_IDENTIFIER" => identifier = Some(text.clone()).filter(|_| !bytes.is_empty()),
            b"_COMM" => comm = Some(text.clone()).filter(|_| !bytes.is_empty()),
            // A number out of the priority's range leaves what was there.
            b"SYSLOG_FACILITY" => {
                if let Some(f) = leading_number(bytes).filter(|f| *f < 24) {
                    fields.pri = (fields.pri & 7) | (f as u16) << 3;
                }
            }
            b"PRIORITY" => {
                if let Some(s) = leading_number(bytes).filter(|s| *s < 8) {
                    fields.pri = (fields.pri & !7) | s as u16;
                }
            }
            _ => {}
        }
        set(name_id_of(&journal.prefix, key, &mut name), text);
    }
    if let Some(program) = identifier.or(comm) {
        fields.program = Some(program);
    }
    realtime
}

/// The number at the start of `text` (as C's `atoi` reads it, without a sign); `None` when
/// it starts with no digit or does not fit.
fn leading_number(text: &[u8]) -> Option<u64> {
    let digits = text.iter().take_while(|b| b.is_ascii_digit()).count();
    std::str::from_utf8(&text[..digits]).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::values::name_of;

    fn journal() -> JournalFields {
        JournalFields {
            prefix: Arc::from(&b".journald."[..]),
            max_field_size: 64 * 1024,
        }
    }

    fn entry(fields: &[&[u8]]) -> Vec<u8> {
        let mut e = Vec::new();
        push_realtime(&mut e, 1_700_000_000_123_456);
        for f in fields {
            push_field(&mut e, f);
        }
        e
    }

    type Read = (SyslogFields, Vec<(String, Vec<u8>)>, Option<Realtime>);

    fn read(e: &[u8], journal: &JournalFields) -> Read {
        let mut fields = SyslogFields {
            pri: 16 * 8 + 5,
            ..SyslogFields::default()
        };
        let mut pairs = Vec::new();
        let t = parse(e, journal, &mut fields, |n, v| {
            pairs.push((name_of(n).to_string(), v.of(e).to_vec()))
        });
        (fields, pairs, t)
    }

    #[test]
    fn an_entry_is_read_as_syslog_ng_reads_it() {
        let e = entry(&[
            b"_HOSTNAME=web1",
            b"MESSAGE=hello",
            b"PRIORITY=3",
            b"SYSLOG_FACILITY=4",
            b"_COMM=sshd",
            b"SYSLOG_IDENTIFIER=sshd-session",
            b"_PID=42",
        ]);
        let (f, pairs, t) = read(&e, &journal());
        assert_eq!(t, Some(1_700_000_000_123_456));
        assert_eq!(f.message.of(&e), b"hello");
        assert_eq!(f.host.unwrap().of(&e), b"web1");
        assert_eq!(f.pid.unwrap().of(&e), b"42");
        assert_eq!(f.program.unwrap().of(&e), b"sshd-session");
        assert_eq!(f.pri, 4 * 8 + 3);
        assert_eq!(pairs.len(), 7);
        assert_eq!(pairs[1], (".journald.MESSAGE".into(), b"hello".to_vec()));
    }

    #[test]
    fn the_program_is_the_command_without_an_identifier() {
        let e = entry(&[b"SYSLOG_IDENTIFIER=", b"_COMM=cron", b"MESSAGE=x"]);
        let (f, _, _) = read(&e, &journal());
        assert_eq!(f.program.unwrap().of(&e), b"cron");
        // Neither: no program; the defaults of the priority stay.
        let (f, _, _) = read(&entry(&[b"MESSAGE=x"]), &journal());
        assert!(f.program.is_none());
        assert_eq!(f.pri, 16 * 8 + 5);
    }

    #[test]
    fn a_value_with_newlines_goes_whole_and_long_values_are_cut() {
        let e = entry(&[b"MESSAGE=line 1\nline 2\n", b"OTHER=abcdef", b"NOEQUALS"]);
        assert!(e.windows(8).any(|w| w == b"MESSAGE\n"));
        let (f, pairs, _) = read(&e, &journal());
        assert_eq!(f.message.of(&e), b"line 1\nline 2\n");
        assert_eq!(pairs.len(), 2);
        let short = JournalFields {
            prefix: Arc::from(&b""[..]),
            max_field_size: 3,
        };
        let (f, pairs, _) = read(&e, &short);
        assert_eq!(f.message.of(&e), b"lin");
        assert_eq!(pairs[1], ("OTHER".into(), b"abc".to_vec()));
    }

    #[test]
    fn hostile_entries_keep_what_came_before_the_damage() {
        // A priority out of range, a length past the end.
        let mut e = entry(&[
            b"MESSAGE=kept",
            b"PRIORITY=99",
            b"SYSLOG_FACILITY=99999999999999999999",
        ]);
        e.extend_from_slice(b"BIG\n");
        e.extend_from_slice(&u64::MAX.to_le_bytes());
        e.extend_from_slice(b"x\nAFTER=lost\n");
        let (f, pairs, _) = read(&e, &journal());
        assert_eq!(f.message.of(&e), b"kept");
        assert_eq!(f.pri, 16 * 8 + 5);
        assert_eq!(pairs.len(), 3);
        // Not an entry at all.
        let (f, pairs, t) = read(b"\n\n==\n\x00\x01", &journal());
        assert!(f.message.of(b"").is_empty() && t.is_none());
        assert_eq!(pairs.len(), 0);
    }
}
