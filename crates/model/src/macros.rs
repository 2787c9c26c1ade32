//! syslog-ng's macros (`$HOST`, `$ISODATE`, `$R_YEAR`, …): looked up by name once when a
//! template is compiled, expanded per message without allocating.

use crate::message::{for_each_tag_name, LogMessage, FACILITY_NAMES, SEVERITY_NAMES};
use crate::time::{self, TsFormat, UnixTime, Zone};
use sluice_protocol::SdPair;
use std::io::Write;

/// Which of a message's times a date macro shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Which {
    /// The header's timestamp (no prefix, or `S_`).
    Stamp,
    /// When sluice received the message (`R_`).
    Recvd,
    /// When the message was processed (`P_`); sluice processes as it receives.
    Processed,
    /// The time of formatting (`C_`).
    Current,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DateField {
    Date,
    FullDate,
    IsoDate,
    Stamp,
    Year,
    YearDay,
    Month,
    MonthWeek,
    MonthAbbrev,
    MonthName,
    Day,
    Hour,
    Hour12,
    Min,
    Sec,
    Msec,
    Usec,
    Ampm,
    WeekDay,
    WeekDayAbbrev,
    WeekDayName,
    Week,
    IsoWeek,
    TzOffset,
    UnixTime,
}

const DATE_FIELDS: &[(&str, DateField)] = &[
    ("DATE", DateField::Date),
    ("FULLDATE", DateField::FullDate),
    ("ISODATE", DateField::IsoDate),
    ("STAMP", DateField::Stamp),
    ("YEAR", DateField::Year),
    ("YEAR_DAY", DateField::YearDay),
    ("MONTH", DateField::Month),
    ("MONTH_WEEK", DateField::MonthWeek),
    ("MONTH_ABBREV", DateField::MonthAbbrev),
    ("MONTH_NAME", DateField::MonthName),
    ("DAY", DateField::Day),
    ("HOUR", DateField::Hour),
    ("HOUR12", DateField::Hour12),
    ("MIN", DateField::Min),
    ("SEC", DateField::Sec),
    ("MSEC", DateField::Msec),
    ("USEC", DateField::Usec),
    ("AMPM", DateField::Ampm),
    ("WEEKDAY", DateField::WeekDayAbbrev),
    ("WEEK_DAY", DateField::WeekDay),
    ("WEEK_DAY_ABBREV", DateField::WeekDayAbbrev),
    ("WEEK_DAY_NAME", DateField::WeekDayName),
    ("WEEK", DateField::Week),
    ("ISOWEEK", DateField::IsoWeek),
    ("TZOFFSET", DateField::TzOffset),
    ("TZ", DateField::TzOffset),
    ("UNIXTIME", DateField::UnixTime),
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Macro {
    Facility,
    FacilityNum,
    Severity,
    SeverityNum,
    /// The priority as two hex digits.
    Tag,
    Tags,
    BsdTag,
    Pri,
    Host,
    FullHost,
    HostFrom,
    Program,
    Pid,
    MsgId,
    Message,
    MsgHdr,
    LegacyMsgHdr,
    Sdata,
    /// The destination's sequence number of local messages, or `meta.sequenceId`.
    SeqNum,
    SourceIp,
    SourcePort,
    DestIp,
    DestPort,
    PeerIp,
    PeerPort,
    Proto,
    Source,
    LogHost,
    RawMsg,
    Date(Which, DateField),
}

const PLAIN: &[(&str, Macro)] = &[
    ("FACILITY", Macro::Facility),
    ("FACILITY_NUM", Macro::FacilityNum),
    ("SEVERITY", Macro::Severity),
    ("SEVERITY_NUM", Macro::SeverityNum),
    ("PRIORITY", Macro::Severity),
    ("LEVEL", Macro::Severity),
    ("LEVEL_NUM", Macro::SeverityNum),
    ("TAG", Macro::Tag),
    ("TAGS", Macro::Tags),
    ("BSDTAG", Macro::BsdTag),
    ("PRI", Macro::Pri),
    ("HOST", Macro::Host),
    ("FULLHOST", Macro::FullHost),
    ("HOST_FROM", Macro::HostFrom),
    ("FULLHOST_FROM", Macro::HostFrom),
    ("PROGRAM", Macro::Program),
    ("PID", Macro::Pid),
    ("MSGID", Macro::MsgId),
    ("MSG", Macro::Message),
    ("MESSAGE", Macro::Message),
    ("MSGONLY", Macro::Message),
    ("MSGHDR", Macro::MsgHdr),
    ("LEGACY_MSGHDR", Macro::LegacyMsgHdr),
    ("SDATA", Macro::Sdata),
    ("SEQNUM", Macro::SeqNum),
    ("SOURCEIP", Macro::SourceIp),
    ("SOURCEPORT", Macro::SourcePort),
    ("DESTIP", Macro::DestIp),
    ("DESTPORT", Macro::DestPort),
    ("PEERIP", Macro::PeerIp),
    ("PEERPORT", Macro::PeerPort),
    ("PROTO", Macro::Proto),
    ("SOURCE", Macro::Source),
    ("LOGHOST", Macro::LogHost),
    ("RAWMSG", Macro::RawMsg),
];

/// Every macro name sluice expands: the plain ones and each date field with each prefix.
pub fn names() -> impl Iterator<Item = String> {
    let dates = ["", "R_", "S_", "P_", "C_"]
        .into_iter()
        .flat_map(|p| DATE_FIELDS.iter().map(move |(n, _)| format!("{p}{n}")));
    PLAIN.iter().map(|(n, _)| n.to_string()).chain(dates)
}

/// Macro names syslog-ng has that sluice does not expand yet; using one is a config error.
pub const NOT_YET: &[&str] = &[
    "CONTEXT_ID",
    "RCPTID",
    "RUNID",
    "HOSTID",
    "UNIQID",
    "SYSUPTIME",
];

impl Macro {
    pub fn lookup(name: &str) -> Option<Macro> {
        if let Some((_, m)) = PLAIN.iter().find(|(n, _)| *n == name) {
            return Some(*m);
        }
        let (which, field) = match name.split_at_checked(2) {
            Some(("R_", rest)) => (Which::Recvd, rest),
            Some(("S_", rest)) => (Which::Stamp, rest),
            Some(("P_", rest)) => (Which::Processed, rest),
            Some(("C_", rest)) => (Which::Current, rest),
            _ => (Which::Stamp, name),
        };
        DATE_FIELDS
            .iter()
            .find(|(n, _)| *n == field)
            .map(|(_, f)| Macro::Date(which, *f))
    }
}

/// How a template formats dates: `ts-format()`, `frac-digits()`, `time-zone()`.
#[derive(Clone, Debug, Default)]
pub struct DateOptions {
    pub ts_format: TsFormat,
    pub frac_digits: u8,
    /// Show times in this zone instead of the zone they were written in.
    pub zone: Option<Zone>,
}

impl DateOptions {
    /// `t` in the offset this template shows times in: `time-zone()`'s, or the one it was
    /// written in.
    fn shown(&self, t: UnixTime) -> UnixTime {
        match &self.zone {
            Some(zone) => t.in_offset(zone.offset_at(t.secs)),
            None => t,
        }
    }

    /// Whether a timestamp shown in `format` reads exactly as a BSD header writes it: a BSD
    /// stamp without fractions, in the zone it was written in.
    pub fn shows_as_written(&self, format: TsFormat) -> bool {
        format == TsFormat::Bsd && self.frac_digits == 0 && self.zone.is_none()
    }
}

/// `msg`'s timestamp (`$S_DATE`, `$S_STAMP`, `$S_ISODATE`, a file's line) in `format`: the
/// stamp as written when it shows so ([`LogMessage::bsd_stamp_as_written`],
/// [`LogMessage::iso_stamp_as_written`]), formatted otherwise.
#[inline]
pub fn write_msg_stamp(msg: &LogMessage, format: TsFormat, opts: &DateOptions, out: &mut Vec<u8>) {
    if opts.shows_as_written(format) {
        if let Some(text) = msg.bsd_stamp_as_written() {
            return out.extend_from_slice(&text);
        }
    } else if format == TsFormat::Iso && opts.frac_digits == 0 && opts.zone.is_none() {
        if let Some(text) = msg.iso_stamp_as_written() {
            return out.extend_from_slice(text);
        }
    }
    time::write_stamp(out, opts.shown(msg.stamp), format, opts.frac_digits);
}

/// This machine's name as the kernel knows it, or only its first label (`fqdn == false`),
/// read once.
pub fn local_hostname(fqdn: bool) -> &'static [u8] {
    static FULL: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let full = FULL.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|s| s.trim().to_string())
            .ok()
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "localhost".into())
    });
    if fqdn {
        full.as_bytes()
    } else {
        full.split('.').next().unwrap_or(full).as_bytes()
    }
}

/// Appends `bytes`; with `escape` (`template-escape(yes)`), `'`, `"` and `\` get a backslash
/// and control characters become `\ooo` octal, as syslog-ng writes them.
#[inline]
pub fn append(out: &mut Vec<u8>, bytes: &[u8], escape: bool) {
    if escape {
        append_escaped(out, bytes);
    } else {
        out.extend_from_slice(bytes);
    }
}

fn append_escaped(out: &mut Vec<u8>, bytes: &[u8]) {
    let special = |b: u8| matches!(b, b'\'' | b'"' | b'\\') || b < b' ';
    if !bytes.iter().any(|&b| special(b)) {
        out.extend_from_slice(bytes);
        return;
    }
    for &b in bytes {
        if b < b' ' {
            let _ = write!(out, "\\{b:03o}");
        } else {
            if special(b) {
                out.push(b'\\');
            }
            out.push(b);
        }
    }
}

/// An address's IP, or `127.0.0.1` for none (local sources), as syslog-ng writes it.
fn ip(out: &mut Vec<u8>, addr: Option<std::net::SocketAddr>) {
    match addr {
        Some(addr) => {
            let _ = write!(out, "{}", addr.ip());
        }
        None => out.extend_from_slice(b"127.0.0.1"),
    }
}

fn append_num(out: &mut Vec<u8>, n: impl itoa::Integer) {
    time::push_num(out, n);
}

impl Macro {
    /// The value of a macro that is a field of the message as it stands (`$HOST`, `$PROGRAM`,
    /// `$PID`, `$MSGID`, `$FULLHOST`, `$HOST_FROM`), unescaped; `None` for the others.
    #[inline]
    pub fn in_place<'m>(self, msg: &'m LogMessage<'_>) -> Option<&'m [u8]> {
        Some(match self {
            Macro::Host if msg.chained_hostname => {
                // A chain `relay@host/relay…` shows its first host.
                let host = msg.host();
                let after_at = memchr::memchr(b'@', host).map_or(host, |i| &host[i + 1..]);
                memchr::memchr(b'/', after_at).map_or(after_at, |i| &after_at[..i])
            }
            Macro::Host | Macro::FullHost => msg.host(),
            Macro::HostFrom => &msg.origin.host_from,
            Macro::Program => msg.program(),
            Macro::Pid => msg.pid(),
            Macro::MsgId => msg.msgid(),
            _ => return None,
        })
    }

    /// Appends the macro's value for `msg`; `seq` is the destination's sequence number for it.
    pub fn expand(
        self,
        msg: &LogMessage,
        dates: &DateOptions,
        escape: bool,
        seq: u32,
        out: &mut Vec<u8>,
    ) {
        match self {
            Macro::Facility => match FACILITY_NAMES.get(msg.facility() as usize) {
                Some(name) => out.extend_from_slice(name.as_bytes()),
                None => {
                    let _ = write!(out, "{:x}", msg.facility());
                }
            },
            Macro::FacilityNum => append_num(out, msg.facility()),
            Macro::Severity => {
                out.extend_from_slice(SEVERITY_NAMES[msg.severity() as usize].as_bytes())
            }
            Macro::SeverityNum => append_num(out, msg.severity()),
            Macro::Tag => {
                let _ = write!(out, "{:02x}", msg.fields.pri);
            }
            Macro::Tags => {
                let mut first = true;
                for_each_tag_name(&msg.tags, |name| {
                    if !first {
                        out.push(b',');
                    }
                    first = false;
                    append(out, name.as_bytes(), escape);
                });
            }
            Macro::BsdTag => {
                append_num(out, msg.severity());
                out.push((msg.facility() as u8).wrapping_add(b'A'));
            }
            Macro::Pri => append_num(out, msg.fields.pri),
            Macro::Host
            | Macro::FullHost
            | Macro::HostFrom
            | Macro::Program
            | Macro::Pid
            | Macro::MsgId => {
                let value = self
                    .in_place(msg)
                    .expect("these macros are values in place");
                append(out, value, escape)
            }
            Macro::Message => append(out, msg.message(), escape),
            Macro::MsgHdr => msghdr(msg, escape, out),
            Macro::LegacyMsgHdr => append(out, msg.legacy_msghdr(), escape),
            Macro::Sdata => {
                if escape {
                    // SD values are always quoted, so escaping always applies: format into a
                    // reused buffer first, not a new one per message.
                    thread_local! {
                        static SDATA: std::cell::RefCell<Vec<u8>> = std::cell::RefCell::default();
                    }
                    SDATA.with_borrow_mut(|sd| {
                        sd.clear();
                        format_sdata(msg, seq, sd);
                        append(out, sd, true);
                    });
                } else {
                    format_sdata(msg, seq, out);
                }
            }
            Macro::SeqNum => {
                if seq != 0 {
                    append_num(out, seq);
                }
            }
            Macro::SourceIp => ip(out, msg.origin.peer),
            Macro::SourcePort => append_num(out, msg.origin.peer.map_or(0, |a| a.port())),
            Macro::DestIp => ip(out, msg.origin.endpoints.dest),
            Macro::DestPort => append_num(out, msg.origin.endpoints.dest.map_or(0, |a| a.port())),
            // The proxy that announced `$SOURCEIP`, else the sender itself.
            Macro::PeerIp => ip(out, msg.origin.endpoints.proxy.or(msg.origin.peer)),
            Macro::PeerPort => append_num(
                out,
                msg.origin
                    .endpoints
                    .proxy
                    .or(msg.origin.peer)
                    .map_or(0, |a| a.port()),
            ),
            Macro::Proto => append_num(out, msg.origin.endpoints.proto),
            Macro::Source => append(out, msg.origin.source_name.as_bytes(), escape),
            Macro::LogHost => append(out, local_hostname(false), escape),
            Macro::RawMsg => {
                if msg.keep_raw {
                    let raw = msg.raw;
                    let len = raw
                        .iter()
                        .rposition(|&b| b != b'\n' && b != 0)
                        .map_or(0, |i| i + 1);
                    append(out, &raw[..len], escape);
                }
            }
            Macro::Date(Which::Stamp, DateField::Date) => {
                write_msg_stamp(msg, TsFormat::Bsd, dates, out)
            }
            Macro::Date(Which::Stamp, DateField::Stamp) => {
                write_msg_stamp(msg, dates.ts_format, dates, out)
            }
            Macro::Date(Which::Stamp, DateField::IsoDate) => {
                write_msg_stamp(msg, TsFormat::Iso, dates, out)
            }
            Macro::Date(which, field) => {
                let t = match which {
                    Which::Stamp => msg.stamp,
                    Which::Recvd | Which::Processed => msg.recvd,
                    Which::Current => UnixTime::now(Zone::local()),
                };
                date(t, field, dates, out);
            }
        }
    }
}

/// `$MSGHDR`: the header as it was written, or `program[pid]: ` rebuilt.
pub fn msghdr(msg: &LogMessage, escape: bool, out: &mut Vec<u8>) {
    let legacy = msg.legacy_msghdr();
    if !legacy.is_empty() {
        append(out, legacy, escape);
        return;
    }
    let program = msg.program();
    if program.is_empty() {
        return;
    }
    append(out, program, escape);
    let pid = msg.pid();
    if !pid.is_empty() {
        out.push(b'[');
        append(out, pid, escape);
        out.push(b']');
    }
    out.extend_from_slice(b": ");
}

/// `$SDATA`: the structured data re-serialised, elements grouped in the order first written.
///
/// A non-zero `seq` (a local message's sequence number) is added as `meta sequenceId` unless the
/// message has one, as syslog-ng does.
///
/// A parameter written twice in one message (`[a x="1" x="2"]`, or again in a later `[a …]`)
/// is shown once, where it first stood, with the value written last: syslog-ng keeps
/// structured data as name-value pairs.
pub fn format_sdata(msg: &LogMessage, seq: u32, out: &mut Vec<u8>) {
    let params = || msg.fields.sd_params(msg.raw);
    if has_repeated_params(params()) {
        append_sdata(msg, seq, once_each(params()).into_iter(), out);
    } else {
        append_sdata(msg, seq, params(), out);
    }
}

/// Some parameter (an id and a name) is written twice. The structured data is read once:
/// up to 16 parameters are kept on the stack and compared pairwise, more go through a set (a
/// sender may write thousands).
fn has_repeated_params<'a>(params: impl Iterator<Item = SdPair<'a>>) -> bool {
    const FEW: usize = 16;
    let mut few: [(&[u8], &[u8]); FEW] = [(&[], &[]); FEW];
    let mut named = params.filter_map(|p| Some((p.id, p.name?)));
    for (n, key) in named.by_ref().enumerate() {
        if few[..n.min(FEW)].contains(&key) {
            return true;
        }
        if n == FEW {
            let mut seen: std::collections::HashSet<(&[u8], &[u8])> = few.into_iter().collect();
            seen.insert(key);
            return named.any(|key| !seen.insert(key));
        }
        few[n] = key;
    }
    false
}

/// The parameters with each id and name once, where it first stood, with its last value.
fn once_each<'a>(params: impl Iterator<Item = SdPair<'a>>) -> Vec<SdPair<'a>> {
    let mut kept: Vec<SdPair<'a>> = Vec::new();
    let mut at: std::collections::HashMap<(&[u8], &[u8]), usize> = Default::default();
    for p in params {
        match p.name {
            Some(name) => match at.entry((p.id, name)) {
                std::collections::hash_map::Entry::Occupied(e) => kept[*e.get()].value = p.value,
                std::collections::hash_map::Entry::Vacant(e) => {
                    e.insert(kept.len());
                    kept.push(p);
                }
            },
            None => kept.push(p),
        }
    }
    kept
}

fn append_sdata<'a>(
    msg: &LogMessage,
    seq: u32,
    params: impl Iterator<Item = SdPair<'a>>,
    out: &mut Vec<u8>,
) {
    let mut has_seq = msg
        .sdata(b"meta", b"sequenceId")
        .is_some_and(|v| !v.is_empty());
    let mut current: Option<&[u8]> = None;
    for p in params {
        let id = p.id;
        if current != Some(id) {
            if current.is_some() {
                out.push(b']');
            }
            out.push(b'[');
            sd_escape_key(out, id);
            current = Some(id);
        }
        if !has_seq && seq != 0 && id == b"meta" && p.name.is_some() {
            let _ = write!(out, " sequenceId=\"{seq}\"");
            has_seq = true;
        }
        if let Some(name) = p.name {
            out.push(b' ');
            sd_escape_key(out, name);
            out.extend_from_slice(b"=\"");
            for &b in p.value {
                if matches!(b, b'"' | b'\\' | b']') {
                    out.push(b'\\');
                }
                out.push(b);
            }
            out.push(b'"');
        }
    }
    if current.is_some() {
        out.push(b']');
    }
    if !has_seq && seq != 0 {
        let _ = write!(out, "[meta sequenceId=\"{seq}\"]");
    }
}

/// SD names may not hold `=`, space, `]` or `"`: syslog-ng writes `_` instead.
fn sd_escape_key(out: &mut Vec<u8>, key: &[u8]) {
    out.extend(key.iter().map(|&b| {
        if matches!(b, b'=' | b' ' | b']' | b'"') {
            b'_'
        } else {
            b
        }
    }));
}

fn date(t: UnixTime, field: DateField, opts: &DateOptions, out: &mut Vec<u8>) {
    let t = opts.shown(t);
    let digits = opts.frac_digits;
    // Worked out only for the fields that need the calendar: whole stamps do not.
    let c = std::cell::LazyCell::new(|| t.civil());
    let two = |out: &mut Vec<u8>, n: u32| {
        time::push_padded(out, u64::from(n), 2, b'0');
    };
    match field {
        DateField::Date => time::write_stamp(out, t, TsFormat::Bsd, digits),
        DateField::FullDate => time::write_stamp(out, t, TsFormat::Full, digits),
        DateField::IsoDate => time::write_stamp(out, t, TsFormat::Iso, digits),
        DateField::Stamp => time::write_stamp(out, t, opts.ts_format, digits),
        DateField::UnixTime => time::write_stamp(out, t, TsFormat::Unix, digits),
        DateField::Year => {
            time::push_padded(out, c.year.max(0) as u64, 4, b'0');
        }
        DateField::YearDay => {
            time::push_padded(out, u64::from(c.yday) + 1, 3, b'0');
        }
        DateField::Month => two(out, u32::from(c.month)),
        DateField::MonthWeek => {
            let week = u32::from(c.day / 7) + u32::from(c.weekday > 0 && (c.day % 7) >= c.weekday);
            append_num(out, week);
        }
        DateField::MonthAbbrev => {
            out.extend_from_slice(time::MONTH_ABBREV[c.month as usize - 1].as_bytes())
        }
        DateField::MonthName => {
            out.extend_from_slice(time::MONTH_NAME[c.month as usize - 1].as_bytes())
        }
        DateField::Day => two(out, u32::from(c.day)),
        DateField::Hour => two(out, u32::from(c.hour)),
        DateField::Hour12 => {
            let h = c.hour % 12;
            two(out, if h == 0 { 12 } else { u32::from(h) });
        }
        DateField::Min => two(out, u32::from(c.minute)),
        DateField::Sec => two(out, u32::from(c.second)),
        DateField::Msec => {
            time::push_padded(out, u64::from(t.micros / 1000), 3, b'0');
        }
        DateField::Usec => {
            time::push_padded(out, u64::from(t.micros), 6, b'0');
        }
        DateField::Ampm => out.extend_from_slice(if c.hour < 12 { b"AM" } else { b"PM" }),
        DateField::WeekDay => append_num(out, c.weekday + 1),
        DateField::WeekDayAbbrev => {
            out.extend_from_slice(time::WEEKDAY_ABBREV[c.weekday as usize].as_bytes())
        }
        DateField::WeekDayName => {
            out.extend_from_slice(time::WEEKDAY_NAME[c.weekday as usize].as_bytes())
        }
        DateField::Week => {
            let week = (i32::from(c.yday) - (i32::from(c.weekday) - 1 + 7) % 7 + 7) / 7;
            two(out, week as u32);
        }
        DateField::IsoWeek => two(out, c.iso_week()),
        DateField::TzOffset => time::write_offset(out, t.offset),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `frame` received on 2026-06-15 by a source in Budapest's zone (DST from 29 March 2026).
    fn received(frame: &str) -> LogMessage<'static> {
        let zone = Zone::parse("Europe/Budapest").expect("zone exists");
        let recvd = UnixTime {
            secs: 1_781_510_400,
            micros: 0,
            offset: 7200,
        };
        crate::testing::received(frame, zone, recvd)
    }

    fn shown(msg: &LogMessage, format: TsFormat, opts: &DateOptions) -> String {
        let mut out = Vec::new();
        write_msg_stamp(msg, format, opts, &mut out);
        String::from_utf8(out).expect("stamps are ASCII")
    }

    #[test]
    fn a_stamp_is_copied_only_when_formatting_it_gives_the_same_bytes() {
        let plain = DateOptions::default();
        // The stamp; whether its bytes are copied; whether it is shown without formatting the
        // time (copied, or made from the fields as written); how it shows.
        for (stamp, copied, as_written, bsd) in [
            ("Jan  5 13:56:09", true, true, "Jan  5 13:56:09"),
            ("Dec 31 23:59:59", true, true, "Dec 31 23:59:59"),
            // A fraction is left out without frac-digits().
            ("Jan  5 13:56:09.123", true, true, "Jan  5 13:56:09"),
            ("Jan 05 13:56:09", false, true, "Jan  5 13:56:09"),
            ("jan  5 13:56:09", false, true, "Jan  5 13:56:09"),
            ("JAN  5 13:56:09", false, true, "Jan  5 13:56:09"),
            ("Jan  5  3:56:09", false, true, "Jan  5 03:56:09"),
            // Rolled over as mktime rolls it: 2026 is a common year; second 60.
            ("Feb 29 10:00:00", false, false, "Mar  1 10:00:00"),
            ("Jan  5 13:56:60", false, false, "Jan  5 13:57:00"),
            // In the DST gap: 02:30 does not exist in Budapest that night.
            ("Mar 29 02:30:00", false, false, "Mar 29 03:30:00"),
            // A year or a zone in the text is not a BSD stamp to copy; its fields show as
            // written in the offset it was written in.
            ("2026-01-05T13:56:09+01:00", false, true, "Jan  5 13:56:09"),
            (
                "2026-07-15T09:05:01.250-05:00",
                false,
                true,
                "Jul 15 09:05:01",
            ),
            ("2026-02-29T10:00:00Z", false, false, "Mar  1 10:00:00"),
            ("2026-03-29T02:30:00", false, false, "Mar 29 03:30:00"),
        ] {
            let msg = received(&format!("<13>{stamp} host prog[1]: text"));
            assert_eq!(msg.line_as_written().is_some(), copied, "{stamp}");
            let made = msg.bsd_stamp_as_written();
            assert_eq!(made.is_some(), as_written, "{stamp}");
            if let Some(made) = made {
                assert_eq!(made, bsd.as_bytes(), "{stamp}");
            }
            assert_eq!(shown(&msg, TsFormat::Bsd, &plain), bsd, "{stamp}");
            let mut formatted = Vec::new();
            time::write_stamp(&mut formatted, msg.stamp, TsFormat::Bsd, 0);
            assert_eq!(formatted, bsd.as_bytes(), "{stamp}");
        }
    }

    #[test]
    fn an_iso_stamp_is_copied_only_when_formatting_it_gives_the_same_bytes() {
        let plain = DateOptions::default();
        // The stamp; whether its bytes are copied; how `$ISODATE` shows it.
        for (stamp, copied, iso) in [
            (
                "2026-01-05T13:56:09+01:00",
                true,
                "2026-01-05T13:56:09+01:00",
            ),
            (
                "2026-07-15T09:05:01-05:30",
                true,
                "2026-07-15T09:05:01-05:30",
            ),
            (
                "2026-01-05T13:56:09+00:00",
                true,
                "2026-01-05T13:56:09+00:00",
            ),
            // A fraction is left out without frac-digits().
            (
                "2026-07-15T09:05:01.250-05:00",
                false,
                "2026-07-15T09:05:01-05:00",
            ),
            ("2026-01-05T13:56:09Z", false, "2026-01-05T13:56:09+00:00"),
            (
                "2026-01-05T13:56:09-00:00",
                false,
                "2026-01-05T13:56:09+00:00",
            ),
            (
                "2026-01-05 13:56:09+01:00",
                false,
                "2026-01-05T13:56:09+01:00",
            ),
            // 75 minutes are an hour and 15.
            (
                "2026-01-05T13:56:09+01:75",
                false,
                "2026-01-05T13:56:09+02:15",
            ),
            ("2026-02-29T10:00:00Z", false, "2026-03-01T10:00:00+00:00"),
            // No offset, or no year: the source's zone (Budapest, UTC+1 in January).
            ("2026-01-05T13:56:09", false, "2026-01-05T13:56:09+01:00"),
            ("Jan  5 13:56:09", false, "2026-01-05T13:56:09+01:00"),
        ] {
            let msg = received(&format!("<13>{stamp} host prog[1]: text"));
            assert_eq!(msg.iso_stamp_as_written().is_some(), copied, "{stamp}");
            assert_eq!(shown(&msg, TsFormat::Iso, &plain), iso, "{stamp}");
            let mut formatted = Vec::new();
            time::write_stamp(&mut formatted, msg.stamp, TsFormat::Iso, 0);
            assert_eq!(formatted, iso.as_bytes(), "{stamp}");
        }
        // With fractions asked for, or another zone, it is formatted.
        let msg = received("<13>2026-01-05T13:56:09+01:00 host prog[1]: text");
        let fraction = DateOptions {
            frac_digits: 3,
            ..DateOptions::default()
        };
        assert_eq!(
            shown(&msg, TsFormat::Iso, &fraction),
            "2026-01-05T13:56:09.000+01:00"
        );
    }

    #[test]
    fn a_stamp_is_formatted_when_the_template_asks_for_more_than_was_written() {
        let msg = received("<13>Jan  5 13:56:09.123 host prog[1]: text");
        assert!(msg.bsd_stamp_as_written().is_some());
        let fraction = DateOptions {
            frac_digits: 3,
            ..DateOptions::default()
        };
        assert_eq!(shown(&msg, TsFormat::Bsd, &fraction), "Jan  5 13:56:09.123");
        let utc = DateOptions {
            zone: Some(Zone::parse("UTC").expect("zone exists")),
            ..DateOptions::default()
        };
        assert_eq!(shown(&msg, TsFormat::Bsd, &utc), "Jan  5 12:56:09");
        let plain = DateOptions::default();
        assert_eq!(
            shown(&msg, TsFormat::Iso, &plain),
            "2026-01-05T13:56:09+01:00"
        );
        // A date parser's time replaces the header's.
        let mut parsed = msg.clone();
        parsed.set_stamp(UnixTime {
            secs: 0,
            micros: 0,
            offset: 0,
        });
        assert_eq!(shown(&parsed, TsFormat::Bsd, &plain), "Jan  1 00:00:00");
    }
}
