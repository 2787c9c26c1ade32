//! The log message as it travels from reader to writer.
//!
//! A `LogMessage<'r>` borrows its received frame from the read `'r` that carried it and records
//! its fields as spans into it; it allocates only for what parsing or rewriting had to change.
//! What all messages of one connection share (source name, peer address, resolved peer name)
//! is one [`Origin`], borrowed too. A message never outlives its read: destinations format it
//! (or copy what they keep) before the read's buffer goes, so a message costs no reference
//! count (a `Bytes` slice and an `Arc` cost four atomic operations a message, ~30 ns).

use crate::time::UnixTime;
use crate::values::Values;
use sluice_protocol::{ParseTag, SyslogFields, Text};
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock, RwLock};

/// Where a message came from: shared by every message of a connection or datagram socket.
#[derive(Clone, Debug, PartialEq)]
pub struct Origin {
    /// The `source` statement's name: `$SOURCE`.
    pub source_name: Arc<str>,
    /// Index of the source statement, for `source()` filters and log-path routing.
    pub source_id: u16,
    /// The sender's address: `$SOURCEIP`. `None` for local sources.
    pub peer: Option<SocketAddr>,
    /// The sender's name (resolved with `use-dns()`) or address: `$HOST_FROM`.
    pub host_from: Arc<[u8]>,
    /// The message was produced on this machine (`unix-*`, `stdin`, `internal`).
    pub local: bool,
    /// Name-value pairs every message of the connection starts with: what a TLS peer's
    /// certificate says (`.tls.x509_cn`, …). Usually empty.
    pub pairs: Vec<(crate::values::NameId, Text)>,
    pub endpoints: Endpoints,
}

impl Origin {
    /// The origin of messages that no peer sent: a tool's (`pdbtool`, `sluice logstore grep`)
    /// or ones sluice makes itself.
    pub fn without_peer(
        source_name: &str,
        source_id: u16,
        host_from: &[u8],
        local: bool,
    ) -> Origin {
        Origin {
            source_name: Arc::from(source_name),
            source_id,
            peer: None,
            host_from: Arc::from(host_from),
            local,
            pairs: Vec::new(),
            endpoints: Endpoints::default(),
        }
    }
}

/// Where a connection's messages arrived, and through whom.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Endpoints {
    /// The address they were sent to (`$DESTIP`, `$DESTPORT`); with a PROXY header, the one it
    /// announces.
    pub dest: Option<SocketAddr>,
    /// The proxy that announced `peer` in a PROXY header (`$PEERIP`, `$PEERPORT`).
    pub proxy: Option<SocketAddr>,
    /// The IP protocol: 6 (TCP), 17 (UDP), 0 for local sources (`$PROTO`).
    pub proto: u8,
}

/// The tags of one message: ids below 64 in a bit set, others in a list that is usually empty.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tags {
    bits: u64,
    more: Vec<TagId>,
}

pub type TagId = u32;

impl Tags {
    /// What the tags past the first 64 hold on the heap.
    pub fn heap_bytes(&self) -> usize {
        self.more.capacity() * std::mem::size_of::<TagId>()
    }

    pub fn insert(&mut self, tag: TagId) {
        if tag < 64 {
            self.bits |= 1 << tag;
        } else if !self.more.contains(&tag) {
            self.more.push(tag);
            self.more.sort_unstable();
        }
    }

    pub fn remove(&mut self, tag: TagId) {
        if tag < 64 {
            self.bits &= !(1 << tag);
        } else {
            self.more.retain(|t| *t != tag);
        }
    }

    pub fn contains(&self, tag: TagId) -> bool {
        if tag < 64 {
            self.bits & (1 << tag) != 0
        } else {
            self.more.contains(&tag)
        }
    }

    /// Tag ids in ascending order.
    pub fn iter(&self) -> impl Iterator<Item = TagId> + '_ {
        (0..64)
            .filter(move |i| self.bits & (1 << i) != 0)
            .chain(self.more.iter().copied())
    }

    pub fn is_empty(&self) -> bool {
        self.bits == 0 && self.more.is_empty()
    }
}

/// Process-wide names of tags. The parser's tags are registered first, so their ids equal
/// their position in [`ParseTag::ALL`]; then the classifier's, which syslog-ng registers
/// when its modules load (so `$TAGS`, in id order, lists them before a source's tag).
struct TagRegistry {
    names: Vec<Arc<str>>,
}

fn registry() -> &'static RwLock<TagRegistry> {
    static REGISTRY: OnceLock<RwLock<TagRegistry>> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        RwLock::new(TagRegistry {
            names: ParseTag::ALL
                .iter()
                .map(|t| t.name())
                .chain([".classifier.system", ".classifier.unknown"])
                .map(Arc::from)
                .collect(),
        })
    })
}

/// The id of a tag name, registering it on first use. Call this while building the
/// configuration, not per message.
pub fn tag_id(name: &str) -> TagId {
    let mut reg = registry().write().expect("tag registry lock");
    if let Some(i) = reg.names.iter().position(|n| &**n == name) {
        return i as TagId;
    }
    reg.names.push(Arc::from(name));
    (reg.names.len() - 1) as TagId
}

/// The name of tag `id` (empty for an id never given).
pub fn tag_name(id: TagId) -> Arc<str> {
    let reg = registry().read().expect("tag registry lock");
    reg.names
        .get(id as usize)
        .cloned()
        .unwrap_or_else(|| "".into())
}

/// Calls `f` with the name of every tag of `tags`, in id order, under one read of the
/// registry (not one lock and name copy per tag).
pub fn for_each_tag_name(tags: &Tags, mut f: impl FnMut(&str)) {
    if tags.is_empty() {
        return;
    }
    let reg = registry().read().expect("tag registry lock");
    for id in tags.iter() {
        f(reg.names.get(id as usize).map_or("", |n| n));
    }
}

#[derive(Clone, Debug)]
pub struct LogMessage<'r> {
    /// The frame as received, without its framing: a slice of the read that carried it.
    pub raw: &'r [u8],
    /// Header fields and message text; spans point into `raw`.
    pub fields: SyslogFields,
    /// The header's timestamp, or the receive time when it had none: `$DATE`, `$ISODATE`…
    /// Changed after parsing only with [`LogMessage::set_stamp`].
    pub stamp: UnixTime,
    /// When sluice read the message: `$R_DATE`…
    pub recvd: UnixTime,
    pub origin: &'r Origin,
    /// `$HOST` is the sender's name, `origin.host_from` (`keep-hostname(no)`, or a header
    /// without a host), whatever `fields.host` holds: no copy or reference count a message.
    /// [`LogMessage::set_host`] gives the message a host of its own.
    pub host_is_sender: bool,
    pub tags: Tags,
    /// `chain-hostnames()` made `$HOST` a `host/relay` chain; `$HOST` shows the first part.
    pub chained_hostname: bool,
    /// `store-raw-message`: `$RAWMSG` is the received frame.
    pub keep_raw: bool,
    /// Name-value pairs set by rewrite rules and parsers.
    pub values: Values,
}

impl LogMessage<'_> {
    /// The header's timestamp as a BSD stamp shows it in the offset it was written in
    /// (`Jan  5 13:56:09`), without formatting the time again, which every message of the
    /// default file format would: the header's own 15 bytes when they read exactly so, made from
    /// the fields as written otherwise (an ISO stamp, a day padded with a zero). `None` when the
    /// instant does not show as written (a field rolled over, a DST gap, no stamp).
    #[inline]
    pub fn bsd_stamp_as_written(&self) -> Option<[u8; 15]> {
        // Ingest keeps `stamp_text` only for a stamp that shows as written.
        let at = self.fields.stamp_text? as usize;
        match self.stamp_written_at(at) {
            Some(text) => Some(*text),
            None => Some(crate::time::bsd_text_of(self.fields.stamp.as_ref()?)),
        }
    }

    /// The header's timestamp as an ISO stamp without fractions shows it in the offset it was
    /// written in (`$ISODATE`), when the header's own bytes read exactly so: copied instead of
    /// formatting the time again.
    #[inline]
    pub fn iso_stamp_as_written(&self) -> Option<&[u8; 25]> {
        // Ingest keeps `stamp_text` only for a stamp that shows as written.
        let at = self.fields.stamp_text? as usize;
        let text = self.raw.get(at..at + 25)?.try_into().ok()?;
        let written = self.fields.stamp.as_ref()?;
        sluice_protocol::timestamp::is_canonical_iso(text, written).then_some(text)
    }

    /// The BSD stamp at `at`, when it is written exactly as a BSD stamp of its time is formatted.
    #[inline]
    fn stamp_written_at(&self, at: usize) -> Option<&[u8; 15]> {
        let text = self.raw.get(at..at + 15)?.try_into().ok()?;
        let written = self.fields.stamp.as_ref()?;
        sluice_protocol::timestamp::is_canonical_bsd(text, written).then_some(text)
    }

    /// The file line syslog-ng's format writes (`$STAMP $HOST $MSGHDR$MSG`, the stamp as
    /// written) in the frame's own bytes, when they read exactly as that line: the stamp
    /// written as a BSD stamp of its time is formatted, and the program's header right before
    /// the message, both still spans of the frame. With the host too a span of the frame, one space
    /// after the stamp and one before the header, the line is one piece of the frame
    /// ([`LineAsWritten::Whole`]); otherwise (the sender's name, `keep-hostname(no)`; a
    /// rewritten host) the host goes between two pieces ([`LineAsWritten::AroundHost`]).
    #[inline]
    pub fn line_as_written(&self) -> Option<LineAsWritten<'_>> {
        let at = self.fields.stamp_text? as usize;
        let (Some(Text::Span(header)), Text::Span(message)) =
            (&self.fields.legacy_msghdr, &self.fields.message)
        else {
            return None;
        };
        if header.is_empty() || message.start != header.end {
            return None;
        }
        let raw = self.raw;
        // In this order the bytes looked at lie before spans that are in the frame.
        let host_follows = match (&self.fields.host, self.host_is_sender) {
            (Some(Text::Span(host)), false) => {
                host.start as usize == at + 16
                    && raw[at + 15] == b' '
                    && header.start == host.end + 1
                    && raw[host.end as usize] == b' '
            }
            _ => false,
        };
        let stamp = self.stamp_written_at(at)?;
        Some(if host_follows {
            LineAsWritten::Whole(&raw[at..message.end as usize])
        } else {
            LineAsWritten::AroundHost(stamp, &raw[header.start as usize..message.end as usize])
        })
    }

    /// Replaces the message's timestamp (a date parser's): the header's text no longer shows it.
    pub fn set_stamp(&mut self, t: UnixTime) {
        self.stamp = t;
        self.fields.stamp_text = None;
    }

    /// The bytes of a field value.
    #[inline]
    pub fn text<'a>(&'a self, t: &'a Text) -> &'a [u8] {
        t.of(self.raw)
    }

    fn opt<'a>(&'a self, t: &'a Option<Text>) -> &'a [u8] {
        t.as_ref().map_or(b"", |t| t.of(self.raw))
    }

    pub fn host(&self) -> &[u8] {
        if self.host_is_sender {
            &self.origin.host_from
        } else {
            self.opt(&self.fields.host)
        }
    }

    /// Makes `host` the message's `$HOST`.
    pub fn set_host(&mut self, host: Text) {
        self.fields.host = Some(host);
        self.host_is_sender = false;
    }

    pub fn program(&self) -> &[u8] {
        self.opt(&self.fields.program)
    }

    pub fn pid(&self) -> &[u8] {
        self.opt(&self.fields.pid)
    }

    pub fn msgid(&self) -> &[u8] {
        self.opt(&self.fields.msgid)
    }

    pub fn message(&self) -> &[u8] {
        self.fields.message.of(self.raw)
    }

    pub fn legacy_msghdr(&self) -> &[u8] {
        self.opt(&self.fields.legacy_msghdr)
    }

    /// Produced on this machine: a local source, or an error text sluice made.
    pub fn is_local(&self) -> bool {
        self.origin.local || self.fields.local
    }

    /// `.SDATA.meta.sequenceId` read as syslog-ng reads it (leading digits), or 0.
    pub fn sequence_id(&self) -> u32 {
        let Some(v) = self.sdata(b"meta", b"sequenceId") else {
            return 0;
        };
        let digits = v.iter().take_while(|b| b.is_ascii_digit()).count();
        std::str::from_utf8(&v[..digits])
            .ok()
            .and_then(|d| d.parse().ok())
            .unwrap_or(0)
    }

    pub fn facility(&self) -> u16 {
        (self.fields.pri & 0x03f8) >> 3
    }

    pub fn severity(&self) -> u8 {
        (self.fields.pri & 7) as u8
    }

    /// The value of `.SDATA.<id>.<name>` (`name` empty for a parameterless element); the last
    /// one wins when a parameter was written twice.
    pub fn sdata(&self, id: &[u8], name: &[u8]) -> Option<&[u8]> {
        self.fields
            .sd_params(self.raw)
            .filter(|p| p.id == id && p.name.unwrap_or_default() == name)
            .last()
            .map(|p| p.value)
    }
}

/// A file line as pieces of the frame it came from: see [`LogMessage::line_as_written`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LineAsWritten<'a> {
    /// The whole line.
    Whole(&'a [u8]),
    /// The stamp, and the program's header with the message; the line is the stamp, a space,
    /// `$HOST`, a space and the rest.
    AroundHost(&'a [u8; 15], &'a [u8]),
}

/// The vector a reader builds its reads' messages in, kept from read to read so a read costs
/// no allocation. Between reads it holds no message (a message cannot outlive its read), and
/// its allocation is lent to each read's lifetime in turn.
#[derive(Default)]
pub struct MessageVec(Vec<LogMessage<'static>>);

impl MessageVec {
    /// The empty vector, for messages of a read that lives `'r`.
    pub fn lend<'r>(&mut self) -> Vec<LogMessage<'r>> {
        relabel(std::mem::take(&mut self.0))
    }

    /// Takes the vector back after the read, dropping what it still holds.
    pub fn give_back(&mut self, msgs: Vec<LogMessage<'_>>) {
        self.0 = relabel(msgs);
    }
}

/// Empties `msgs` and gives its allocation to messages of another lifetime: collecting an
/// emptied vector's iterator into a vector of a same-sized type reuses its allocation.
fn relabel<'b>(mut msgs: Vec<LogMessage<'_>>) -> Vec<LogMessage<'b>> {
    msgs.clear();
    msgs.into_iter()
        .map(|_| unreachable!("the vector was emptied"))
        .collect()
}

/// Facility names as syslog-ng 3.38 spells them, indexed by number.
pub const FACILITY_NAMES: [&str; 24] = [
    "kern",
    "user",
    "mail",
    "daemon",
    "auth",
    "syslog",
    "lpr",
    "news",
    "uucp",
    "cron",
    "authpriv",
    "ftp",
    "ntp",
    "security",
    "console",
    "solaris-cron",
    "local0",
    "local1",
    "local2",
    "local3",
    "local4",
    "local5",
    "local6",
    "local7",
];

pub const SEVERITY_NAMES: [&str; 8] = [
    "emerg", "alert", "crit", "err", "warning", "notice", "info", "debug",
];

/// A facility number from a name (any of syslog-ng's aliases) or a number.
pub fn facility_by_name(name: &str) -> Option<u16> {
    let lower = name.to_ascii_lowercase();
    if lower == "megasafe" {
        return Some(10);
    }
    if let Some(i) = FACILITY_NAMES.iter().position(|n| *n == lower) {
        return Some(i as u16);
    }
    lower.parse().ok().filter(|n: &u16| *n < 128)
}

/// A severity number from a name (any of syslog-ng's aliases) or a number.
pub fn severity_by_name(name: &str) -> Option<u8> {
    let s = match name.to_ascii_lowercase().as_str() {
        "emerg" | "emergency" | "panic" => 0,
        "alert" => 1,
        "crit" | "critical" => 2,
        "err" | "error" => 3,
        "warning" | "warn" => 4,
        "notice" => 5,
        "info" | "informational" => 6,
        "debug" => 7,
        other => return other.parse().ok().filter(|n: &u8| *n < 8),
    };
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_vector_keeps_its_allocation_from_read_to_read() {
        let mut kept = MessageVec::default();
        let mut allocation = None;
        for read in 0..3 {
            // Each read's frame lives shorter than the vector.
            let frame = format!("<13>Jan  5 13:56:09 host prog: read {read}").into_bytes();
            let mut msgs = kept.lend();
            assert!(msgs.is_empty());
            msgs.reserve(100);
            let at = (msgs.as_ptr() as usize, msgs.capacity());
            assert_eq!(*allocation.get_or_insert(at), at, "read {read}");
            msgs.push(crate::testing::parsed(&frame));
            assert_eq!(msgs[0].message(), format!("read {read}").as_bytes());
            kept.give_back(msgs);
        }
    }
}
