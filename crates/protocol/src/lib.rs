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
pub mod multiline;
pub mod proxy;
pub mod relp;
mod scan;
pub mod syslog;
mod text;
pub mod timestamp;

/// Asks the CPU to bring the cache line holding `buf[at]` closer, if `at` is inside `buf`.
#[inline(always)]
pub fn prefetch(buf: &[u8], at: usize) {
    #[cfg(target_arch = "x86_64")]
    if let Some(b) = buf.get(at) {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: SSE is part of x86_64; a prefetch only hints and never faults, and the
        // pointer comes from a live reference.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(std::ptr::from_ref(b).cast()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (buf, at);
}

pub use syslog::{
    parse, HostnameFilter, ParseFlags, ParseOptions, ParseTag, ParseTags, SdPair, SdParam,
    SyslogFields,
};
pub use text::{Span, Text};
pub use timestamp::WallClock;

/// Inputs for tests of this crate and of the crates above it.
pub mod testing {
    /// The same pseudo-random numbers every run (xorshift from a fixed seed): inputs for
    /// checking a fast routine against a plain one.
    pub struct Xorshift(u64);

    impl Default for Xorshift {
        fn default() -> Xorshift {
            Xorshift(0x9e37_79b9_7f4a_7c15)
        }
    }

    impl Iterator for Xorshift {
        type Item = u64;

        fn next(&mut self) -> Option<u64> {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            Some(self.0)
        }
    }

    /// `count` values of up to `max_len - 1` bytes drawn from `alphabet`, the same every run.
    pub fn random_values(alphabet: &[u8], max_len: u64, count: usize) -> Vec<Vec<u8>> {
        let mut random = Xorshift::default();
        let mut next = move || random.next().expect("endless");
        (0..count)
            .map(|_| {
                let len = next() % max_len;
                (0..len)
                    .map(|_| alphabet[(next() % alphabet.len() as u64) as usize])
                    .collect()
            })
            .collect()
    }
}

/// Facility and severity packed as on the wire: `facility * 8 + severity`.
pub type Pri = u16;

/// syslog-ng's default priority for messages without a `<PRI>`: user.notice.
pub const DEFAULT_PRI: Pri = 8 + 5;
