//! Turning a received frame into a [`LogMessage`] the way a syslog-ng source does: parse it,
//! then apply the source's options in syslog-ng's order (`keep-timestamp`, hostname
//! mangling with `keep-hostname`/`chain-hostnames`, `program-override`, `host-override`, tags).

use crate::journal::JournalFields;
use crate::message::{LogMessage, Origin, Tags};
use crate::time::{self, Today, UnixTime, Zone};
use crate::values::Values;
use sluice_protocol::{ParseOptions, SyslogFields, Text};
use std::sync::Arc;

/// A source's recipe for messages; built once from its configuration.
#[derive(Clone, Debug)]
pub struct Ingest {
    pub parse: ParseOptions,
    /// `flags(no-parse)`: the whole frame is the message.
    pub no_parse: bool,
    pub keep_hostname: bool,
    pub chain_hostnames: bool,
    pub keep_timestamp: bool,
    pub host_override: Option<Arc<[u8]>>,
    pub program_override: Option<Arc<[u8]>>,
    /// `time-zone()` of the source: the zone of timestamps that do not name one.
    pub zone: Option<Zone>,
    pub local_zone: Zone,
    /// `.source.<name>` and the source's `tags()`.
    pub tags: Tags,
    pub store_raw_message: bool,
    /// What a frame is: a syslog line, a kernel record, a journal entry.
    pub format: Format,
    /// `system()`'s syslog socket: a message without a PID gets its sender's (`.unix.pid`,
    /// from the socket's credentials), as syslog-ng's `system()` gives it.
    pub pid_from_sender: bool,
}

/// What the frames of a source are.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Format {
    /// Syslog lines, RFC3164 or RFC5424.
    #[default]
    Syslog,
    /// `format("linux-kmsg")`: records of `/dev/kmsg`.
    Kmsg,
    /// Entries of the systemd journal (`systemd-journal()`), in its export format.
    Journal(JournalFields),
    /// `format(json)`: a JSON object a record ([`json_record`]).
    Json,
}

impl Ingest {
    pub fn new(local_zone: Zone) -> Ingest {
        Ingest {
            parse: ParseOptions::default(),
            no_parse: false,
            keep_hostname: false,
            chain_hostnames: false,
            keep_timestamp: true,
            host_override: None,
            program_override: None,
            zone: None,
            local_zone,
            tags: Tags::default(),
            store_raw_message: false,
            format: Format::Syslog,
            pid_from_sender: false,
        }
    }

    /// Parses `raw` (one frame without framing) into a message from `origin` at the end of
    /// `msgs`; the message borrows both. (The message is written straight into its slot of the
    /// batch: `Vec::push` built it on the stack and copied its 344 bytes, and the empty fields
    /// were copied twice more before that — 2.4 % of the instructions of
    /// `bench/allocations.rs`.)
    pub fn push_message<'r>(
        &self,
        raw: &'r [u8],
        origin: &'r Origin,
        recvd: UnixTime,
        today: Today,
        msgs: &mut Vec<LogMessage<'r>>,
    ) {
        msgs.reserve(1);
        let slot = msgs
            .spare_capacity_mut()
            .first_mut()
            .expect("reserved above");
        let msg = slot.write(LogMessage {
            raw,
            fields: SyslogFields::EMPTY,
            stamp: recvd,
            recvd,
            origin,
            host_is_sender: false,
            tags: self.tags.clone(),
            chained_hostname: false,
            keep_raw: self.store_raw_message,
            values: Values::default(),
        });
        for (name, value) in &origin.pairs {
            msg.values.set(*name, value.clone());
        }
        let (raw, fields) = (msg.raw, &mut msg.fields);
        let mut journal_time = None;
        if self.no_parse {
            let len = raw
                .iter()
                .rposition(|&b| b != b'\n' && b != 0)
                .map_or(0, |i| i + 1);
            fields.message = Text::Span(sluice_protocol::Span::new(0, len));
            fields.pri = self
                .parse
                .default_pri
                .unwrap_or(sluice_protocol::DEFAULT_PRI);
        } else {
            match &self.format {
                Format::Syslog => sluice_protocol::parse(raw, &self.parse, fields),
                Format::Kmsg => {
                    let values = &mut msg.values;
                    if !crate::kmsg::parse(raw, fields, |name, value| values.set(name, value)) {
                        // Not a record of /dev/kmsg: kept whole.
                        fields.message = Text::Span(sluice_protocol::Span::new(0, raw.len()));
                        fields.pri = self
                            .parse
                            .default_pri
                            .unwrap_or(sluice_protocol::DEFAULT_PRI);
                    }
                }
                Format::Json => {
                    fields.pri = self
                        .parse
                        .default_pri
                        .unwrap_or(sluice_protocol::DEFAULT_PRI);
                    json_record(raw, fields, &mut msg.values);
                }
                Format::Journal(journal) => {
                    fields.pri = self
                        .parse
                        .default_pri
                        .unwrap_or(sluice_protocol::DEFAULT_PRI);
                    let values = &mut msg.values;
                    journal_time = crate::journal::parse(raw, journal, fields, |name, value| {
                        values.set(name, value)
                    });
                }
            }
        }
        if self.pid_from_sender && fields.pid.is_none() {
            static UNIX_PID: std::sync::OnceLock<crate::values::NameId> =
                std::sync::OnceLock::new();
            let sender = *UNIX_PID.get_or_init(|| crate::values::name_id(".unix.pid"));
            if let Some((_, pid)) = origin.pairs.iter().find(|(n, _)| *n == sender) {
                fields.pid = Some(pid.clone());
                // The header as written has no PID: it is formatted from the fields.
                fields.legacy_msghdr = None;
            }
        }
        let (stamp, as_written) = match (journal_time, &fields.stamp, self.keep_timestamp) {
            (Some(usec), _, true) => {
                let zone = self.zone.as_ref().unwrap_or(&self.local_zone);
                (UnixTime::from_micros(usec, zone), false)
            }
            (None, Some(wc), true) => {
                time::resolve_exact(wc, self.zone.as_ref(), &self.local_zone, today, recvd)
            }
            _ => match &self.zone {
                Some(zone) => (recvd.in_offset(zone.offset_at(recvd.secs)), false),
                None => (recvd, false),
            },
        };
        if !as_written {
            fields.stamp_text = None;
        }
        msg.stamp = stamp;
        for tag in msg.fields.tags.iter() {
            msg.tags.insert(tag as u32);
        }
        self.mangle_hostname(msg);
        if let Some(program) = &self.program_override {
            msg.fields.program = Some(Text::Shared(program.clone()));
            msg.fields.legacy_msghdr = None;
        }
        if let Some(host) = &self.host_override {
            msg.set_host(Text::Shared(host.clone()));
        }
        // SAFETY: the slot after the last message was initialised above (a panic before this
        // leaks that one message, never exposes an uninitialised one).
        unsafe { msgs.set_len(msgs.len() + 1) };
    }

    fn mangle_hostname(&self, msg: &mut LogMessage<'_>) {
        let has_host = !msg.host().is_empty();
        if self.keep_hostname && has_host {
            return;
        }
        if !self.chain_hostnames {
            msg.host_is_sender = true;
            return;
        }
        let from = &msg.origin.host_from;
        msg.chained_hostname = true;
        let mut chain = Vec::new();
        if msg.is_local() {
            chain.extend_from_slice(msg.origin.source_name.as_bytes());
            chain.push(b'@');
            chain.extend_from_slice(from);
        } else {
            chain.extend_from_slice(if has_host { msg.host() } else { from });
            chain.push(b'/');
            chain.extend_from_slice(from);
        }
        msg.set_host(Text::Owned(chain.into_boxed_slice()));
    }
}

/// `format(json)`: a record that is a JSON object. Its members become name-value pairs as
/// `json-parser()` makes them (nested objects as `outer.inner`), but for the names of a
/// message's own fields, which set them — what `$(format-json --scope rfc5424)` writes
/// reads back whole: `MESSAGE` (or `message`), `HOST`, `PROGRAM`, `PID`, `MSGID`, `FACILITY`
/// and `PRIORITY` (or `SEVERITY`, `LEVEL`; names or numbers), and the time from `ISODATE`,
/// `DATE`, `@timestamp` or `timestamp` (ISO 8601 or BSD, as a syslog header's). A record that
/// is not a JSON object is the message whole.
fn json_record(raw: &[u8], fields: &mut SyslogFields, values: &mut Values) {
    use crate::parsers::json::{self, Found, Name};
    use sluice_protocol::Span;
    let opts = json::Options {
        prefix: "",
        key_delimiter: '.',
        extract_prefix: None,
    };
    let mut name = Vec::new();
    let (mut facility, mut severity) = (None, None);
    let whole = json::parse(raw, &opts, &mut |found, value, kind| {
        let Name::Pair(full) = found else {
            return;
        };
        let bytes = match &value {
            Found::In(r) => &raw[r.clone()],
            Found::Made(b) => b,
        };
        let text = || match &value {
            Found::In(r) => Text::Span(Span::new(r.start, r.end)),
            Found::Made(b) => Text::owned(b),
        };
        let as_str = || std::str::from_utf8(bytes).unwrap_or("");
        match full {
            "MESSAGE" | "message" => fields.message = text(),
            "HOST" | "host" => fields.host = Some(text()),
            "PROGRAM" | "program" => fields.program = Some(text()),
            "PID" | "pid" => fields.pid = Some(text()),
            "MSGID" | "msgid" => fields.msgid = Some(text()),
            "FACILITY" | "facility" => facility = crate::message::facility_by_name(as_str()),
            "PRIORITY" | "SEVERITY" | "LEVEL" | "priority" | "severity" | "level" => {
                severity = crate::message::severity_by_name(as_str())
            }
            "ISODATE" | "DATE" | "@timestamp" | "timestamp" => {
                match sluice_protocol::timestamp::scan_rfc3164(bytes) {
                    Some((stamp, used)) if used == bytes.len() => fields.stamp = Some(stamp),
                    _ => values.set_typed(
                        crate::values::name_id_of(b"", full.as_bytes(), &mut name),
                        kind,
                        text(),
                    ),
                }
            }
            _ => values.set_typed(
                crate::values::name_id_of(b"", full.as_bytes(), &mut name),
                kind,
                text(),
            ),
        }
    });
    if !whole {
        // Not a JSON object: the record is the message.
        let len = raw
            .iter()
            .rposition(|&b| b != b'\n' && b != b'\r')
            .map_or(0, |i| i + 1);
        fields.message = Text::Span(Span::new(0, len));
        return;
    }
    if facility.is_some() || severity.is_some() {
        let (f, s) = (fields.pri >> 3, fields.pri & 7);
        fields.pri = facility.map_or(f, u16::from) * 8 + severity.map_or(s, u16::from);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::LineAsWritten;
    use crate::testing;

    fn ingested<'r>(ingest: &Ingest, frame: &'r [u8]) -> LogMessage<'r> {
        let recvd = UnixTime::now(&ingest.local_zone);
        let mut msgs = Vec::new();
        ingest.push_message(frame, testing::origin(), recvd, Today::of(recvd), &mut msgs);
        msgs.pop().expect("one message")
    }

    #[test]
    fn without_keep_hostname_the_host_is_the_senders_until_something_sets_one() {
        let mut ingest = Ingest::new(Zone::parse("UTC").expect("UTC exists"));
        let frame = b"<13>Jan  5 13:56:09 myhost prog[1]: text";
        let mut msg = ingested(&ingest, frame);
        assert_eq!(msg.host(), b"10.1.2.3");
        // The frame's host is not the line's: the line is copied around the sender's name.
        assert_eq!(
            msg.line_as_written(),
            Some(LineAsWritten::AroundHost(
                b"Jan  5 13:56:09",
                b"prog[1]: text"
            ))
        );
        msg.set_host(Text::owned(b"rewritten"));
        assert_eq!(msg.host(), b"rewritten");

        ingest.keep_hostname = true;
        let msg = ingested(&ingest, frame);
        assert_eq!(msg.host(), b"myhost");
        assert_eq!(
            msg.line_as_written(),
            Some(LineAsWritten::Whole(&frame[4..]))
        );

        ingest.host_override = Some(Arc::from(&b"relay-1"[..]));
        assert_eq!(ingested(&ingest, frame).host(), b"relay-1");
        ingest.keep_hostname = false;
        assert_eq!(ingested(&ingest, frame).host(), b"relay-1");
    }

    #[test]
    fn a_json_record_sets_the_fields_it_names_and_pairs_for_the_rest() {
        let mut ingest = Ingest::new(Zone::parse("UTC").expect("UTC exists"));
        ingest.format = Format::Json;
        ingest.keep_hostname = true;
        let frame = br#"{"HOST":"web1","PROGRAM":"sshd","PID":"42","MESSAGE":"Accepted","FACILITY":"auth","PRIORITY":"warning","ISODATE":"2026-11-27T10:00:00+01:00","user":{"name":"root"},"n":7}"#;
        let msg = ingested(&ingest, frame);
        assert_eq!(
            (msg.host(), msg.program(), msg.pid(), msg.message()),
            (&b"web1"[..], &b"sshd"[..], &b"42"[..], &b"Accepted"[..])
        );
        assert_eq!((msg.facility(), msg.severity()), (4, 4));
        assert_eq!(msg.stamp.secs, 1_795_770_000);
        let pair = |n: &str| {
            msg.values
                .get(crate::values::name_id(n))
                .map(|t| t.of(msg.raw).to_vec())
        };
        assert_eq!(pair("user.name"), Some(b"root".to_vec()));
        assert_eq!(pair("n"), Some(b"7".to_vec()));
        // The fields are not pairs too.
        assert_eq!(pair("HOST"), None);

        let msg = ingested(&ingest, b"not json\n");
        assert_eq!(msg.message(), b"not json");
    }
}
