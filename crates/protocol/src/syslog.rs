//! RFC3164 and RFC5424 parsing with syslog-ng's rules.
//!
//! The promise: [`parse`] accepts any bytes and always yields fields; malformed input is kept
//! whole in the message text and marked with a [`ParseTag`]. The behaviour follows syslog-ng 3.38
//! (`modules/syslogformat/syslog-format.c`) field by field, so that a site sees the same
//! `$HOST`, `$PROGRAM` and `$MSG` it saw before; the tags and the handling of an invalid `<PRI>`
//! follow syslog-ng 4.x, which keeps such a line whole instead of replacing it with an error
//! text (see `docs/compatibility.md`).

use crate::scan;
use crate::text::{Span, Text};
use crate::timestamp::{self, WallClock};
use crate::{Pri, DEFAULT_PRI};

/// How a source parses: syslog-ng's `flags()` of a source and the options that go with them.
#[derive(Clone, Debug)]
pub struct ParseOptions {
    pub flags: ParseFlags,
    /// `default-facility()` | `default-priority()`; `None` means user.notice.
    pub default_pri: Option<Pri>,
    /// Longest SD-PARAM value kept; longer values are cut.
    pub sdata_param_value_max: usize,
    /// The process id written into the error text of an unparseable RFC5424 frame.
    pub pid: u32,
    /// `bad-hostname()`: a word this predicate accepts is not taken as an RFC3164 hostname.
    pub bad_hostname: Option<HostnameFilter>,
}

/// A test applied to a candidate hostname.
pub type HostnamePredicate = dyn Fn(&[u8]) -> bool + Send + Sync;

/// A predicate over candidate hostnames.
#[derive(Clone)]
pub struct HostnameFilter(pub std::sync::Arc<HostnamePredicate>);

impl std::fmt::Debug for HostnameFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HostnameFilter")
    }
}

impl Default for ParseOptions {
    fn default() -> ParseOptions {
        ParseOptions {
            flags: ParseFlags::default(),
            default_pri: None,
            sdata_param_value_max: 65535,
            pid: std::process::id(),
            bad_hostname: None,
        }
    }
}

/// Source flags that change parsing. The defaults are syslog-ng's: expect a hostname and keep
/// the legacy `program[pid]: ` header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParseFlags {
    /// `syslog-protocol`: parse as RFC5424 (falling back to RFC3164 when the frame is not).
    pub syslog_protocol: bool,
    /// `expect-hostname` (default) / `no-hostname`.
    pub expect_hostname: bool,
    /// `check-hostname`: a hostname holds only letters, digits and `-_.:@/`.
    pub check_hostname: bool,
    pub store_legacy_msghdr: bool,
    pub sanitize_utf8: bool,
    pub validate_utf8: bool,
    pub assume_utf8: bool,
    /// `no-header`: only the `<PRI>` is parsed, the rest is the message.
    pub no_header: bool,
    /// The message came from this machine (`unix-*`, `stdin`): kernel messages without a
    /// timestamp get the program name `kernel`.
    pub local: bool,
    /// `no-multi-line`: CR, LF and NUL in the message become spaces.
    pub no_multi_line: bool,
}

impl ParseFlags {
    /// Sets the message-format flag syslog-ng calls `name` (with `-` read as `_`), as sources
    /// and `syslog-parser()` take them; `false` when `name` is not one.
    pub fn set(&mut self, name: &str) -> bool {
        match name {
            "syslog_protocol" => self.syslog_protocol = true,
            "no_hostname" => self.expect_hostname = false,
            "expect_hostname" => self.expect_hostname = true,
            "check_hostname" => self.check_hostname = true,
            "validate_utf8" => self.validate_utf8 = true,
            "sanitize_utf8" => self.sanitize_utf8 = true,
            "assume_utf8" => self.assume_utf8 = true,
            "no_multi_line" => self.no_multi_line = true,
            "store_legacy_msghdr" => self.store_legacy_msghdr = true,
            "dont_store_legacy_msghdr" => self.store_legacy_msghdr = false,
            "no_header" => self.no_header = true,
            _ => return false,
        }
        true
    }
}

impl Default for ParseFlags {
    fn default() -> ParseFlags {
        ParseFlags {
            syslog_protocol: false,
            expect_hostname: true,
            check_hostname: false,
            store_legacy_msghdr: true,
            sanitize_utf8: false,
            validate_utf8: false,
            assume_utf8: false,
            no_header: false,
            local: false,
            no_multi_line: false,
        }
    }
}

/// What the parser noticed about malformed input, with syslog-ng 4's tag names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum ParseTag {
    InvalidPri,
    MissingPri,
    MissingTimestamp,
    InvalidHostname,
    UnexpectedFraming,
    Rfc3164MissingHeader,
    Rfc5424MissingHostname,
    Rfc5424MissingAppName,
    Rfc5424MissingProcid,
    Rfc5424MissingMsgid,
    Rfc5424MissingSdata,
    Rfc5424InvalidSdata,
    Rfc5424MissingMessage,
    Rfc5424Unparseable,
    Utf8Sanitized,
}

impl ParseTag {
    pub const ALL: [ParseTag; 15] = [
        ParseTag::InvalidPri,
        ParseTag::MissingPri,
        ParseTag::MissingTimestamp,
        ParseTag::InvalidHostname,
        ParseTag::UnexpectedFraming,
        ParseTag::Rfc3164MissingHeader,
        ParseTag::Rfc5424MissingHostname,
        ParseTag::Rfc5424MissingAppName,
        ParseTag::Rfc5424MissingProcid,
        ParseTag::Rfc5424MissingMsgid,
        ParseTag::Rfc5424MissingSdata,
        ParseTag::Rfc5424InvalidSdata,
        ParseTag::Rfc5424MissingMessage,
        ParseTag::Rfc5424Unparseable,
        ParseTag::Utf8Sanitized,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ParseTag::InvalidPri => "syslog.invalid_pri",
            ParseTag::MissingPri => "syslog.missing_pri",
            ParseTag::MissingTimestamp => "syslog.missing_timestamp",
            ParseTag::InvalidHostname => "syslog.invalid_hostname",
            ParseTag::UnexpectedFraming => "syslog.unexpected_framing",
            ParseTag::Rfc3164MissingHeader => "syslog.rfc3164_missing_header",
            ParseTag::Rfc5424MissingHostname => "syslog.rfc5424_missing_hostname",
            ParseTag::Rfc5424MissingAppName => "syslog.rfc5424_missing_app_name",
            ParseTag::Rfc5424MissingProcid => "syslog.rfc5424_missing_procid",
            ParseTag::Rfc5424MissingMsgid => "syslog.rfc5424_missing_msgid",
            ParseTag::Rfc5424MissingSdata => "syslog.rfc5424_missing_sdata",
            ParseTag::Rfc5424InvalidSdata => "syslog.rfc5424_invalid_sdata",
            ParseTag::Rfc5424MissingMessage => "syslog.rfc5424_missing_message",
            ParseTag::Rfc5424Unparseable => "syslog.rfc5424_unparseable",
            ParseTag::Utf8Sanitized => "message.utf8_sanitized",
        }
    }
}

/// A small set of [`ParseTag`]s.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ParseTags(u16);

impl ParseTags {
    pub fn insert(&mut self, tag: ParseTag) {
        self.0 |= 1 << tag as u8;
    }

    pub fn contains(self, tag: ParseTag) -> bool {
        self.0 & (1 << tag as u8) != 0
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The tags in the set, in [`ParseTag::ALL`]'s order. Every message asks, and most have
    /// none: the walk visits set bits only.
    pub fn iter(self) -> impl Iterator<Item = ParseTag> {
        let mut bits = self.0;
        std::iter::from_fn(move || {
            if bits == 0 {
                return None;
            }
            let at = bits.trailing_zeros();
            bits &= bits - 1;
            Some(ParseTag::ALL[at as usize])
        })
    }
}

/// One `.SDATA.<id>.<name>` value the parser had to store: an RFC5424 value that was escaped
/// or cut, or a parameter an RFC3164 header implies. An SD-ELEMENT without parameters (`[id]`)
/// has no name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SdParam {
    pub id: Text,
    pub name: Option<Text>,
    pub value: Text,
}

/// One `.SDATA.<id>.<name>` value as [`SyslogFields::sd_params`] reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SdPair<'a> {
    pub id: &'a [u8],
    /// `None` for an SD-ELEMENT without parameters (`[id]`).
    pub name: Option<&'a [u8]>,
    pub value: &'a [u8],
}

/// The fields of one parsed frame. `Text::Span`s point into the frame that was parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyslogFields {
    pub pri: Pri,
    /// The header's timestamp; `None` when there was none (the receive time stands in).
    pub stamp: Option<WallClock>,
    /// Where the header's timestamp starts in the frame, in any dialect. The layer above
    /// drops it when the instant does not show the time as written (a field rolled over), so
    /// that formatting may take the time from the text or the fields as written.
    pub stamp_text: Option<u32>,
    /// `None` when the header named no host (the sender's address stands in).
    pub host: Option<Text>,
    pub program: Option<Text>,
    pub pid: Option<Text>,
    pub msgid: Option<Text>,
    /// `program[pid]: ` as it was written, for `$MSGHDR`.
    pub legacy_msghdr: Option<Text>,
    pub message: Text,
    /// RFC5424 structured data (`[id name="value" …]…`) as written, when the parser found
    /// every value readable in place (nothing escaped or cut): [`SyslogFields::sd_params`] reads
    /// its parameters when asked, so a message whose templates never look costs no copy.
    pub sd_in_place: Option<Span>,
    /// Structured data the parser stored: an RFC5424 section with an escaped or cut value, or
    /// what RFC3164 headers imply (`timeQuality.isSynced`, `meta.sequenceId`).
    pub sdata: Vec<SdParam>,
    pub tags: ParseTags,
    /// The message is known to be valid UTF-8 (BOM, `validate-utf8`, `assume-utf8`).
    pub utf8: bool,
    /// The header was RFC5424.
    pub rfc5424: bool,
    /// The fields were made here rather than parsed (an unparseable frame's error text): the
    /// message counts as produced on this machine, as syslog-ng flags it.
    pub local: bool,
}

impl Default for SyslogFields {
    fn default() -> SyslogFields {
        SyslogFields::EMPTY
    }
}

impl SyslogFields {
    /// No fields: what a message starts from before its frame is parsed. (A constant, so that
    /// a message built in place copies it once rather than building it on the stack first.)
    pub const EMPTY: SyslogFields = SyslogFields {
        pri: 0,
        stamp: None,
        stamp_text: None,
        host: None,
        program: None,
        pid: None,
        msgid: None,
        legacy_msghdr: None,
        message: Text::EMPTY,
        sd_in_place: None,
        sdata: Vec::new(),
        tags: ParseTags(0),
        utf8: false,
        rfc5424: false,
        local: false,
    };

    /// Every structured-data parameter in the order written; `frame` is the parsed frame.
    pub fn sd_params<'a>(&'a self, frame: &'a [u8]) -> impl Iterator<Item = SdPair<'a>> + 'a {
        let in_place = self.sd_in_place.map(|span| InPlaceSd {
            s: span.of(frame),
            at: 0,
            id: b"",
        });
        let stored = self.sdata.iter().map(move |p| SdPair {
            id: p.id.of(frame),
            name: p.name.as_ref().map(|n| n.of(frame)),
            value: p.value.of(frame),
        });
        in_place.into_iter().flatten().chain(stored)
    }
}

/// Reads the parameters of a structured-data section the parser checked and found plain: one
/// space before each name, `="` after it, no escapes in values.
struct InPlaceSd<'a> {
    s: &'a [u8],
    at: usize,
    /// The SD-ID of the element being read.
    id: &'a [u8],
}

impl<'a> Iterator for InPlaceSd<'a> {
    type Item = SdPair<'a>;

    fn next(&mut self) -> Option<SdPair<'a>> {
        let s = self.s;
        loop {
            match *s.get(self.at)? {
                b'[' => {
                    let start = self.at + 1;
                    let end = start + memchr::memchr2(b' ', b']', &s[start..])?;
                    self.id = &s[start..end];
                    self.at = end;
                    if s[end] == b']' {
                        self.at += 1;
                        return Some(SdPair {
                            id: self.id,
                            name: None,
                            value: b"",
                        });
                    }
                }
                b']' => self.at += 1,
                _ => {
                    let name = self.at + 1;
                    let eq = name + memchr::memchr(b'=', &s[name..])?;
                    let value = eq + 2;
                    let end = value + memchr::memchr(b'"', s.get(value..)?)?;
                    self.at = end + 1;
                    return Some(SdPair {
                        id: self.id,
                        name: Some(&s[name..eq]),
                        value: &s[value..end],
                    });
                }
            }
        }
    }
}

/// Parses one frame (without its framing) into fields, never failing.
pub fn parse(frame: &[u8], opts: &ParseOptions, fields: &mut SyslogFields) {
    let len = frame
        .iter()
        .rposition(|&b| b != b'\n' && b != 0)
        .map_or(0, |i| i + 1);
    let mut p = Parser {
        s: &frame[..len],
        at: 0,
        opts,
        f: fields,
    };
    if opts.flags.syslog_protocol {
        p.rfc5424();
    } else {
        p.rfc3164();
    }
    if opts.flags.no_multi_line {
        fields.message = no_multi_line(&fields.message, &frame[..len]);
    }
    if opts.flags.assume_utf8 {
        fields.utf8 = true;
    }
}

struct Parser<'a> {
    s: &'a [u8],
    at: usize,
    opts: &'a ParseOptions,
    f: &'a mut SyslogFields,
}

const AIX_FORWARDED: &[u8] = b"Message forwarded from ";
const REPEATED: &[u8] = b"last message repeated";

impl Parser<'_> {
    fn rest(&self) -> &[u8] {
        &self.s[self.at..]
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.at).copied()
    }

    fn span(&self, start: usize, end: usize) -> Text {
        Text::Span(Span::new(start, end))
    }

    fn skip_spaces(&mut self) {
        while self.peek() == Some(b' ') {
            self.at += 1;
        }
    }

    fn skip_space(&mut self) -> bool {
        let is_space = self.peek() == Some(b' ');
        self.at += usize::from(is_space);
        is_space
    }

    /// `<digits>`; a missing PRI gives the default, a malformed one gives `false`.
    fn pri(&mut self) -> bool {
        if self.peek() != Some(b'<') {
            self.f.pri = self.opts.default_pri.unwrap_or(DEFAULT_PRI);
            self.f.tags.insert(ParseTag::MissingPri);
            return true;
        }
        let mut at = self.at + 1;
        let mut pri: u32 = 0;
        while let Some(&b) = self.s.get(at) {
            if b == b'>' {
                break;
            }
            if !b.is_ascii_digit() {
                return false;
            }
            pri = match pri
                .checked_mul(10)
                .and_then(|p| p.checked_add(u32::from(b - b'0')))
            {
                Some(p) => p,
                None => return false,
            };
            at += 1;
        }
        self.f.pri = pri as Pri;
        self.at = (at + 1).min(self.s.len());
        true
    }

    fn rfc3164(&mut self) {
        if !self.pri() {
            self.f.pri = self.opts.default_pri.unwrap_or(DEFAULT_PRI);
            self.f.tags.insert(ParseTag::InvalidPri);
            self.at = 0;
        } else if !self.opts.flags.no_header {
            self.legacy_header();
        }
        self.message();
    }

    fn legacy_header(&mut self) {
        self.cisco_sequence_id();
        self.skip_spaces();
        self.time_quality();
        let Some((stamp, used)) = timestamp::scan_rfc3164(self.rest()) else {
            self.f.tags.insert(ParseTag::MissingTimestamp);
            if self.f.pri >> 3 == 0 && self.opts.flags.local {
                self.f.program = Some(Text::Static(b"kernel"));
            } else {
                self.f.tags.insert(ParseTag::Rfc3164MissingHeader);
                self.program_name();
            }
            return;
        };
        self.f.stamp_text = Some(self.at as u32);
        self.f.stamp = Some(stamp);
        self.at += used;
        self.skip_spaces();

        let mut host = None;
        if self.rest().starts_with(AIX_FORWARDED) {
            self.at += AIX_FORWARDED.len();
            let start = self.at;
            self.at += memchr::memchr(b':', self.rest()).unwrap_or(self.rest().len());
            host = Some(self.span(start, self.at));
            while matches!(self.peek(), Some(b' ' | b':')) {
                self.at += 1;
            }
        }
        // syslog-ng compares the length with the size of the C string, terminator included.
        let repeated = self.rest().len() > REPEATED.len() && self.rest().starts_with(REPEATED);
        if !repeated {
            if host.is_none() && self.opts.flags.expect_hostname {
                host = self.hostname(true).map(Text::Span);
                self.skip_spaces();
            }
            self.program_name();
        }
        if host.is_some() {
            self.f.host = host;
        }
    }

    /// Cisco's `123: ` sequence number before the timestamp, kept as `.SDATA.meta.sequenceId`.
    fn cisco_sequence_id(&mut self) {
        let digits = self
            .rest()
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
        let colon = self.at + digits;
        if self.s.get(colon) != Some(&b':') || self.s.get(colon + 1) != Some(&b' ') {
            return;
        }
        self.f.sdata.push(SdParam {
            id: Text::Static(b"meta"),
            name: Some(Text::Static(b"sequenceId")),
            value: self.span(self.at, colon),
        });
        self.at = colon + 1;
    }

    /// Cisco's `*` (clock not synchronised) or `.` (synchronised) before the timestamp.
    fn time_quality(&mut self) {
        let synced: &'static [u8] = match self.peek() {
            Some(b'*') => b"0",
            Some(b'.') => b"1",
            _ => return,
        };
        self.f.sdata.push(SdParam {
            id: Text::Static(b"timeQuality"),
            name: Some(Text::Static(b"isSynced")),
            value: Text::Static(synced),
        });
        self.at += 1;
    }

    /// A hostname is a word followed by a space; a `:` ends it unless it looks like IPv6.
    /// `check_bad` applies `bad-hostname()` (RFC3164 headers only, as in syslog-ng).
    ///
    /// The header's readers return a `Span`, which comes back in registers: a `Text` comes
    /// back through memory, and the caller's wide load of it waited for the narrower stores
    /// that wrote it (a failed store forward, a sixth of `rfc3164`'s samples).
    fn hostname(&mut self, check_bad: bool) -> Option<Span> {
        let start = self.at;
        let limit = self.s.len().min(start + 255);
        let mut at = start;
        let mut ipv6 = Ipv6Guess::default();
        let mut fed = start;
        loop {
            at = memchr::memchr3(b' ', b'[', b':', &self.s[at..limit]).map_or(limit, |i| at + i);
            if at == limit || self.s[at] != b':' {
                break;
            }
            // A colon ends the name unless everything up to it still looks like IPv6.
            let still_ipv6 = self.s[fed..=at].iter().all(|&b| ipv6.feed(b));
            fed = at + 1;
            if !still_ipv6 {
                break;
            }
            at += 1;
        }
        if self.opts.flags.check_hostname {
            if let Some(bad) = self.s[start..at]
                .iter()
                .position(|&b| !valid_hostname_byte(b))
            {
                self.f.tags.insert(ParseTag::InvalidHostname);
                at = start + bad;
            }
        }
        let bad = check_bad
            && self
                .opts
                .bad_hostname
                .as_ref()
                .is_some_and(|f| (f.0)(&self.s[start..at]));
        if self.s.get(at) == Some(&b' ') && !bad {
            self.at = at;
            Some(Span::new(start, at))
        } else {
            None
        }
    }

    /// `program[pid]: `, every part optional, as syslog-ng 3.38 splits it.
    fn program_name(&mut self) {
        let start = self.at;
        let s = self.s;
        let mut at = memchr::memchr3(b' ', b'[', b':', &s[start..]).map_or(s.len(), |i| start + i);
        self.f.program = Some(self.span(start, at));
        if s.get(at) == Some(&b'[') {
            let pid_start = at + 1;
            at = memchr::memchr3(b' ', b']', b':', &s[at..]).map_or(s.len(), |i| at + i);
            if at < s.len() {
                self.f.pid = Some(self.span(pid_start, at));
            }
            if s.get(at) == Some(&b']') {
                at += 1;
            }
        }
        if s.get(at) == Some(&b':') {
            at += 1;
        }
        if s.get(at) == Some(&b' ') {
            at += 1;
        }
        if self.opts.flags.store_legacy_msghdr {
            self.f.legacy_msghdr = Some(self.span(start, at));
        }
        self.at = at;
    }

    /// The rest of the frame is the message.
    fn message(&mut self) {
        let rest = self.rest();
        let valid = || std::str::from_utf8(rest).is_ok();
        if self.opts.flags.sanitize_utf8 {
            // With sanitize-utf8, syslog-ng 3.38 marks a message UTF-8 (which shows as the BOM of
            // RFC5424 output) only when it had to sanitize it, even with validate-utf8.
            if !valid() {
                self.f.message = Text::Owned(sanitize_utf8(rest).into_boxed_slice());
                self.f.tags.insert(ParseTag::Utf8Sanitized);
                self.f.utf8 = true;
                return;
            }
        } else if self.opts.flags.validate_utf8 && valid() {
            self.f.utf8 = true;
        }
        self.f.message = self.span(self.at, self.s.len());
    }

    fn rfc5424(&mut self) {
        self.f.rfc5424 = true;
        if !self.pri() || !self.version() {
            self.f.rfc5424 = false;
            *self.f = SyslogFields::default();
            self.at = 0;
            self.rfc3164();
            return;
        }
        if let Err(problem) = self.rfc5424_header() {
            self.unparseable(problem);
        }
    }

    /// `1` followed by a space or the end.
    fn version(&mut self) -> bool {
        let digits = self.rest().iter().take_while(|&&b| b != b' ').count();
        if &self.rest()[..digits] != b"1" {
            return false;
        }
        self.at += digits;
        true
    }

    /// The rest of the RFC5424 header; on error, the position where parsing stopped.
    fn rfc5424_header(&mut self) -> Result<(), usize> {
        let fail = |p: &Self| p.at;
        if !self.skip_space() {
            return Err(fail(self));
        }
        if self.peek() == Some(b'-') {
            self.at += 1;
        } else {
            let (stamp, used) = timestamp::scan_rfc5424(self.rest()).ok_or(self.at)?;
            self.f.stamp_text = Some(self.at as u32);
            self.f.stamp = Some(stamp);
            self.at += used;
        }
        if !self.skip_space() {
            return Err(fail(self));
        }
        let host = self.hostname(false);
        if !self.skip_space() {
            return Err(self.at + 1);
        }
        match host {
            Some(span) if span.of(self.s) == b"-" => {
                self.f.tags.insert(ParseTag::Rfc5424MissingHostname)
            }
            other => self.f.host = other.map(Text::Span),
        }
        self.f.program = self
            .column(48, ParseTag::Rfc5424MissingAppName)
            .map(Text::Span);
        if !self.skip_space() {
            return Err(fail(self));
        }
        self.f.pid = self
            .column(128, ParseTag::Rfc5424MissingProcid)
            .map(Text::Span);
        if !self.skip_space() {
            return Err(fail(self));
        }
        self.f.msgid = self
            .column(32, ParseTag::Rfc5424MissingMsgid)
            .map(Text::Span);
        if !self.skip_space() {
            return Err(fail(self));
        }
        self.structured_data()?;
        if self.at == self.s.len() {
            self.f.tags.insert(ParseTag::Rfc5424MissingMessage);
            self.f.message = Text::EMPTY;
            return Ok(());
        }
        if !self.skip_space() {
            return Err(fail(self));
        }
        if self.rest().starts_with(b"\xEF\xBB\xBF") {
            self.f.utf8 = true;
            self.at += 3;
        } else if self.opts.flags.validate_utf8 && std::str::from_utf8(self.rest()).is_ok() {
            self.f.utf8 = true;
        }
        self.f.message = self.span(self.at, self.s.len());
        Ok(())
    }

    /// A space-delimited header column; `-` is the nil value. Values are cut at `max` bytes.
    fn column(&mut self, max: usize, missing: ParseTag) -> Option<Span> {
        let start = self.at;
        let end = scan::find(self.rest(), b' ').map(|i| start + i);
        let Some(end) = end else {
            // No space follows: syslog-ng consumes the rest without storing it.
            self.at = self.s.len();
            return None;
        };
        self.at = end;
        if end - start == 1 && self.s[start] == b'-' {
            self.f.tags.insert(missing);
            return None;
        }
        Some(Span::new(start, start + (end - start).min(max)))
    }

    /// `-` or one or more `[id name="value" …]` elements: checked, and stored only when a
    /// value cannot be read in place.
    fn structured_data(&mut self) -> Result<(), usize> {
        match self.peek() {
            Some(b'-') => {
                self.at += 1;
                self.f.tags.insert(ParseTag::Rfc5424MissingSdata);
                return Ok(());
            }
            Some(b'[') => {}
            _ => return Ok(()),
        }
        let start = self.at;
        if self.sd_elements(false)? {
            self.f.sd_in_place = Some(Span::new(start, self.at));
        } else {
            self.at = start;
            self.sd_elements(true)?;
        }
        Ok(())
    }

    /// Reads the elements, into `sdata` with `store`; says whether every value could be read
    /// in place.
    fn sd_elements(&mut self, store: bool) -> Result<bool, usize> {
        let mut in_place = true;
        while self.peek() == Some(b'[') {
            self.at += 1;
            let id = self.sd_name(b' ', b']').ok_or(self.at)?;
            if store && self.peek() == Some(b']') {
                self.f.sdata.push(SdParam {
                    id: Text::Span(id),
                    name: None,
                    value: Text::EMPTY,
                });
            }
            while self.peek() != Some(b']') {
                if !self.skip_space() {
                    return Err(self.at);
                }
                let name = self.sd_name(b'=', b'=').ok_or(self.at)?;
                if self.peek() != Some(b'=') {
                    return Err(self.at);
                }
                self.at += 1;
                let (value, as_written) = self.sd_value()?;
                in_place &= as_written;
                if store {
                    self.f.sdata.push(SdParam {
                        id: Text::Span(id),
                        name: Some(Text::Span(name)),
                        value,
                    });
                }
            }
            self.at += 1;
        }
        Ok(in_place)
    }

    /// An SD-ID or PARAM-NAME: ASCII without `=`, space, `]` or `"`, at most 255 bytes, ended by
    /// `end` or `also_end`. On failure `self.at` is where reading stopped. A `Span`, not a
    /// `Text`: it comes back in registers, and the first pass over the elements only checks.
    fn sd_name(&mut self, end: u8, also_end: u8) -> Option<Span> {
        /// The bytes a name is made of, looked up rather than compared one by one.
        const NAME_BYTE: [bool; 256] = {
            let mut table = [false; 256];
            let mut b = 0;
            while b < 128 {
                table[b] = !matches!(b as u8, b'=' | b' ' | b']' | b'"');
                b += 1;
            }
            table
        };
        let start = self.at;
        let rest = &self.s[start..];
        // A name is looked at up to one byte past the longest it may be. A plain loop: the
        // iterator chain (`take`, `position`) cost twice the instructions a byte.
        let limit = rest.len().min(256);
        let mut len = 0;
        while len < limit && NAME_BYTE[usize::from(rest[len])] {
            len += 1;
        }
        if len > 255 {
            self.at = start + 255;
            return None;
        }
        self.at = start + len;
        match rest.get(len) {
            Some(&b) if len > 0 && (b == end || b == also_end) => Some(Span::new(start, self.at)),
            _ => None,
        }
    }

    /// A quoted PARAM-VALUE, with `\"`, `\\` and `\]` unescaped and other backslashes kept;
    /// says whether the value is exactly as written (not unescaped, not cut).
    fn sd_value(&mut self) -> Result<(Text, bool), usize> {
        if self.peek() != Some(b'"') {
            return Err(self.at);
        }
        self.at += 1;
        let start = self.at;
        let max = self.opts.sdata_param_value_max;
        match scan::find3(self.rest(), b'"', b'\\', b']').map(|i| (i, self.s[start + i])) {
            Some((len, b'"')) => {
                self.at = start + len + 1;
                return Ok((self.span(start, start + len.min(max)), len <= max));
            }
            Some((len, b']')) => return Err(start + len + 1),
            Some(_) => {} // an escape: unescaped below
            None => return Err(self.s.len()),
        }
        let mut owned: Option<Vec<u8>> = None;
        let mut escaped = false;
        loop {
            let Some(b) = self.peek() else {
                return Err(self.at);
            };
            self.at += 1;
            if escaped {
                let buf = owned.as_mut().expect("an escape starts the owned copy");
                if !matches!(b, b'"' | b']' | b'\\') {
                    buf.push(b'\\');
                }
                buf.push(b);
                escaped = false;
            } else if b == b'\\' {
                owned.get_or_insert_with(|| self.s[start..self.at - 1].to_vec());
                escaped = true;
            } else if b == b'"' {
                break;
            } else if b == b']' {
                return Err(self.at);
            } else if let Some(buf) = owned.as_mut() {
                buf.push(b);
            }
        }
        Ok(match owned {
            Some(mut buf) => {
                buf.truncate(max);
                (Text::Owned(buf.into_boxed_slice()), false)
            }
            None => {
                let len = self.at - 1 - start;
                (self.span(start, start + len.min(max)), len <= max)
            }
        })
    }

    /// syslog-ng 3.38 replaces an RFC5424 frame it cannot parse with an error text that keeps
    /// the whole frame, marking where parsing stopped with `>@<`.
    fn unparseable(&mut self, problem: usize) {
        let s = self.s;
        let mut text = b"Error processing log message: ".to_vec();
        if problem > 0 {
            let cut = (problem - 1).min(s.len());
            text.extend_from_slice(&s[..cut]);
            text.extend_from_slice(b">@<");
            text.extend_from_slice(&s[cut..]);
        } else {
            text.extend_from_slice(s);
        }
        let tags = self.f.tags;
        *self.f = SyslogFields {
            pri: 5 * 8 + 3, // syslog.err
            host: Some(Text::EMPTY),
            program: Some(Text::Static(b"syslog-ng")),
            pid: Some(Text::owned(self.opts.pid.to_string().as_bytes())),
            message: Text::Owned(text.into_boxed_slice()),
            tags,
            ..SyslogFields::default()
        };
        self.f.tags.insert(ParseTag::Rfc5424Unparseable);
        self.f.local = true;
    }
}

/// syslog-ng's heuristic: a `:` inside a hostname is fine while the word still looks like an
/// IPv6 address (hex digits in groups of at most four, at most eight groups).
#[derive(Default)]
struct Ipv6Guess {
    groups: u8,
    digits: u8,
    failed: bool,
}

impl Ipv6Guess {
    fn feed(&mut self, b: u8) -> bool {
        if self.failed {
            return false;
        }
        if b == b':' {
            self.digits = 0;
            self.groups += 1;
            self.failed = self.groups >= 8;
        } else if b.is_ascii_hexdigit() {
            self.digits += 1;
            self.failed = self.digits > 4;
        } else {
            self.failed = true;
        }
        !self.failed
    }
}

fn valid_hostname_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':' | b'@' | b'/')
}

/// Invalid UTF-8 and control characters escaped as syslog-ng's `sanitize-utf8` does:
/// `\xHH` for bytes that are not UTF-8, `\n`-style escapes for control characters, `\\`.
pub fn sanitize_utf8(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len() + 16);
    escape_binary(bytes, None, &mut out);
    out
}

/// syslog-ng's `append_unsafe_utf8_as_escaped_binary`: `\b \f \n \r \t \\` escapes, other
/// control characters and bytes that are not UTF-8 as `\xHH`, and `unsafe_char` (a quote) with
/// a backslash before it.
pub fn escape_binary(bytes: &[u8], unsafe_char: Option<u8>, out: &mut Vec<u8>) {
    for chunk in bytes.utf8_chunks() {
        for ch in chunk.valid().chars() {
            match ch {
                '\u{8}' => out.extend_from_slice(b"\\b"),
                '\u{c}' => out.extend_from_slice(b"\\f"),
                '\n' => out.extend_from_slice(b"\\n"),
                '\r' => out.extend_from_slice(b"\\r"),
                '\t' => out.extend_from_slice(b"\\t"),
                '\\' => out.extend_from_slice(b"\\\\"),
                c if (c as u32) < 32 => {
                    out.extend_from_slice(format!("\\x{:02x}", c as u32).as_bytes())
                }
                c if unsafe_char.is_some_and(|u| u32::from(u) == c as u32) => {
                    out.push(b'\\');
                    out.push(c as u8);
                }
                c => out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
            }
        }
        for b in chunk.invalid() {
            out.extend_from_slice(format!("\\x{b:02x}").as_bytes());
        }
    }
}

fn no_multi_line(message: &Text, frame: &[u8]) -> Text {
    let bytes = message.of(frame);
    if memchr::memchr3(b'\r', b'\n', 0, bytes).is_none() {
        return message.clone();
    }
    let flat: Vec<u8> = bytes
        .iter()
        .map(|&b| {
            if matches!(b, b'\r' | b'\n' | 0) {
                b' '
            } else {
                b
            }
        })
        .collect();
    Text::Owned(flat.into_boxed_slice())
}

#[cfg(test)]
mod tests;
