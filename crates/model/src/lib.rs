//! What a message is and what the configuration does to it, with no I/O.
//!
//! - [`message`]: `LogMessage`, its origin and tags.
//! - [`ingest`]: a source's recipe from received frame to message.
//! - [`time`]: instants, zones and date formats.
//! - [`macros`] and [`template`]: `$HOST`-style macros and compiled templates.
//! - [`filter`]: compiled filter expressions.
//! - [`values`]: name-value pairs that rewrite rules and parsers set; [`list`]: syslog-ng's
//!   comma-separated list values.
//! - [`rewrite`]: rewrite rules (`set`, `subst`, `set-tag`, …).
//! - [`memory`]: the memory budget's books, which correlation contexts draw from too.
//! - [`path`]: log paths and the router that decides which destinations a message reaches,
//!   and which version of it (rewritten on the way) each one gets.

pub mod correlation;
pub mod file_name;
pub mod filter;
pub mod find;
pub mod ingest;
pub mod journal;
pub mod kept;
pub mod kmsg;
pub mod list;
pub mod macros;
pub mod memory;
pub mod message;
pub mod parsers;
pub mod path;
pub mod patterndb;
pub mod rewrite;
pub mod str_repr;
pub mod template;
pub mod time;
pub mod values;

pub use filter::Filter;
pub use ingest::Ingest;
pub use message::{Endpoints, LineAsWritten, LogMessage, MessageVec, Origin, Tags};
pub use path::{DestId, LogPath, PathTally, Router, SourceId};
pub use template::Template;
pub use time::{Today, UnixTime, Zone};

/// Builds messages for tests of this crate and of the crates above it.
pub mod testing {
    use crate::{Ingest, LogMessage, Origin, Today, UnixTime, Zone};
    use std::sync::{Arc, OnceLock};

    pub use sluice_protocol::testing::random_values;

    /// A UDP-like origin at 10.1.2.3 called `s_test`.
    pub fn origin() -> &'static Origin {
        static ORIGIN: OnceLock<Origin> = OnceLock::new();
        ORIGIN.get_or_init(|| Origin {
            source_name: Arc::from("s_test"),
            source_id: 0,
            peer: Some("10.1.2.3:514".parse().expect("valid address")),
            host_from: Arc::from(&b"10.1.2.3"[..]),
            local: false,
            pairs: Vec::new(),
            endpoints: Default::default(),
        })
    }

    /// Parses `frame` received at 2025-06-15T12:00:00Z, keeping the sender's hostname; a
    /// frame that starts `<PRI>1 ` is parsed as RFC5424. The message keeps a copy of the frame
    /// for the rest of the test (leaked: a message borrows its frame, and a test's messages are
    /// few and small; a fuzz target calls [`parsed`]).
    pub fn message(frame: impl AsRef<[u8]>) -> LogMessage<'static> {
        parsed(Vec::leak(frame.as_ref().to_vec()))
    }

    /// [`message`] borrowing `frame`.
    pub fn parsed(frame: &[u8]) -> LogMessage<'_> {
        let recvd = UnixTime {
            secs: 1749988800,
            micros: 250_000,
            offset: 0,
        };
        parse(frame, Zone::parse("UTC").expect("UTC exists"), recvd)
    }

    /// Parses `frame` as a source whose local zone is `zone` does when it receives it at
    /// `recvd`, keeping the sender's hostname; a frame that starts `<PRI>1 ` is parsed as
    /// RFC5424. The message keeps a copy of the frame, as [`message`]'s does.
    pub fn received(frame: impl AsRef<[u8]>, zone: Zone, recvd: UnixTime) -> LogMessage<'static> {
        parse(Vec::leak(frame.as_ref().to_vec()), zone, recvd)
    }

    fn parse(frame: &[u8], zone: Zone, recvd: UnixTime) -> LogMessage<'_> {
        let mut ingest = Ingest::new(zone);
        ingest.keep_hostname = true;
        ingest.parse.flags.syslog_protocol =
            memchr::memchr(b'>', frame).is_some_and(|gt| frame[gt + 1..].starts_with(b"1 "));
        let mut msgs = Vec::new();
        ingest.push_message(frame, origin(), recvd, Today::of(recvd), &mut msgs);
        msgs.pop().expect("one message")
    }
}
