//! Wire formats of syslog, with no I/O, threads or configuration in sight.
//!
//! - [`framing`] cuts a byte stream into frames: newline (also `\r\n` and NUL) and RFC6587 octet
//!   counting, with syslog-ng's handling of oversized frames.
//! - [`syslog`] parses one frame as RFC3164 or RFC5424 the way syslog-ng does, including its
//!   forgiving rules for malformed input. A frame is never rejected: what cannot be parsed is kept
//!   whole as the message text and tagged.
//!
//! Everything here borrows: a parse records [`Span`]s into the received bytes and owns memory only
//! for values that had to change (an unescaped SD-PARAM, a sanitized message).

pub mod framing;
pub mod proxy;
pub mod relp;
pub mod syslog;
mod text;
pub mod timestamp;

pub use syslog::{
    parse, HostnameFilter, ParseFlags, ParseOptions, ParseTag, ParseTags, SdPair, SdParam,
    SyslogFields,
};
pub use text::{Span, Text};
pub use timestamp::WallClock;

/// Facility and severity packed as on the wire: `facility * 8 + severity`.
pub type Pri = u16;

/// syslog-ng's default priority for messages without a `<PRI>`: user.notice.
pub const DEFAULT_PRI: Pri = 8 + 5;
