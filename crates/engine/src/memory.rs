//! The memory budget (`options { memory-limit() }`): the bytes of messages sluice holds on
//! their way in and out — sources' large reads, destination queues, a disk buffer's cache,
//! files' pending writes — what each open connection holds (its buffers, its TLS state and
//! socket buffer), the statistics' counters and the messages of correlation contexts, drawn
//! from one process-wide budget, so that no number of connections, senders, host names or
//! dead servers makes memory grow without end. Its books are kept in
//! [`sluice_model::memory`], below the engine, where correlation contexts charge theirs.
//!
//! Connections may take at most half of the limit: past it a new connection is refused
//! ([`Budget::admit`]), while those open go on. Then two marks for everything together:
//! - past three quarters of the limit, messages on paths without flow control are dropped at
//!   their destination's queue, counted as `dropped_memory_limit`: a dead server on such a
//!   path can never take the room the flow-controlled paths need; no new dynamic counter is
//!   made (what it would have counted goes to `global;dynamic_counters;;a;dropped`); each
//!   message that joins a correlation context first ends the context of its shard nearest
//!   its end (counted in `contexts_evicted`), its timeout actions fired as at its time; a
//!   TLS connection reads its socket through a 16 KiB buffer instead of 128 KiB;
//! - past the limit, the readers of every source wait before they take credits for the next
//!   read (shown as paused, [`crate::window::Flow`]): flow-controlled paths slow their senders
//!   down instead of losing anything.
//!
//! A reader's buffer beyond its first read — the unfinished frame of a slow sender, up to
//! `log-msg-size()` — is charged as connections are ([`Unfinished`]): a frame that cannot grow
//! within the connections' half waits to be read further until there is room.
//!
//! What a destination holds is charged through [`crate::stats::DestCounters::hold`] and
//! [`crate::stats::DestCounters::release`], beside its own `memory_usage` gauge. The use and
//! the limit are gauges too: `global;memory;;a;memory_usage`, `…;memory_limit`, and of the
//! use what connections hold, `…;connections_memory`.

pub use sluice_model::memory::{budget, Budget, Charge, Held};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The limit when `memory-limit()` is not given: a quarter of the machine's memory — or of
/// the container's, when its control group has a smaller limit — at least 256 MiB.
pub fn default_limit() -> u64 {
    // SAFETY: sysconf(3) has no preconditions.
    let (pages, page) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    let physical = (pages.max(0) as u64).saturating_mul(page.max(0) as u64);
    let contained = [
        "/sys/fs/cgroup/memory.max", // cgroup v2 (a container's root)
        "/sys/fs/cgroup/memory/memory.limit_in_bytes", // cgroup v1
    ]
    .iter()
    .filter_map(|p| std::fs::read_to_string(p).ok()?.trim().parse::<u64>().ok())
    .min()
    .unwrap_or(u64::MAX);
    (physical.min(contained) / 4).max(256 << 20)
}

/// Says that a destination (named by `destination()`, made only when said) drops for the
/// budget: at most once a minute for all.
pub fn say_dropping(destination: impl FnOnce() -> String) {
    /// When it was said last, in seconds since the epoch.
    static SAID: AtomicU64 = AtomicU64::new(0);
    let now = crate::clock::unix_now();
    let last = SAID.load(Ordering::Relaxed);
    if now >= last + 60
        && SAID
            .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    {
        crate::own_log::error(format!(
            "{}: three quarters of memory-limit({}) in use; messages of paths without flow control are dropped (counted as dropped_memory_limit) until less is held",
            destination(),
            budget().limit.load(Ordering::Relaxed)
        ));
    }
}

/// What a reader's buffer holds of an unfinished frame, beyond the room its first read takes
/// (which an admitted connection's charge covers): 10,000 slow connections each with a
/// partial line of 64 KiB would otherwise hold 640 MB outside any budget.
pub struct Unfinished {
    held: Held,
}

impl Default for Unfinished {
    /// Nothing yet, of the process's budget.
    fn default() -> Unfinished {
        Unfinished::of(budget())
    }
}

impl Unfinished {
    pub fn of(budget: &'static Budget) -> Unfinished {
        Unfinished {
            held: budget.nothing(),
        }
    }

    /// Makes room in `buf` for a read of `read` bytes. A buffer holding an unfinished frame is
    /// charged for all it holds past `2 × read`; one that must grow (doubling) does so only
    /// once the budget has room, and meanwhile this waits, looking every 10 ms. False when
    /// `stop` comes first.
    pub async fn room(
        &mut self,
        buf: &mut bytes::BytesMut,
        read: usize,
        stop: &mut tokio::sync::watch::Receiver<bool>,
    ) -> bool {
        if buf.is_empty() {
            // Nothing unfinished: a read buffer of the first size, charged with the reader.
            if buf.capacity() > 2 * read {
                *buf = bytes::BytesMut::new();
            }
            self.held.resize(0);
            buf.reserve(read);
            return true;
        }
        // Room for the frame and a read: grown by doubling, kept while at most twice that,
        // and cut down when larger (a large read that ended inside a frame).
        let need = buf.len() + read;
        let want = match buf.capacity() {
            have if have < need => need.max(2 * buf.len()),
            have if have <= 2 * need => have,
            _ => need,
        };
        let fit = |buf: &mut bytes::BytesMut| {
            let mut fitted = bytes::BytesMut::with_capacity(want);
            fitted.extend_from_slice(buf);
            *buf = fitted;
        };
        if want < buf.capacity() {
            fit(buf);
        }
        let beyond = want.saturating_sub(2 * read) as u64;
        while !self.held.resize(beyond) {
            tokio::select! {
                biased;
                _ = stop.wait_for(|stop| *stop) => return false,
                _ = tokio::time::sleep(Duration::from_millis(10)) => {}
            }
        }
        if want > buf.capacity() {
            fit(buf);
        }
        true
    }
}

impl Unfinished {
    /// Charges what `buf` holds after a read that may have been large (a frame cut short at
    /// its end), whether or not there is room: the bytes are there. A buffer much larger
    /// than its unfinished frame is cut down first. Large reads are made only while the
    /// connections' half has room for them ([`Unfinished::may_read`]), so this passes the
    /// half by at most the large reads under way when it fills.
    pub fn keep(&mut self, buf: &mut bytes::BytesMut, read: usize) {
        let need = buf.len() + read;
        if !buf.is_empty() && buf.capacity() > 2 * need {
            let mut fitted = bytes::BytesMut::with_capacity(need);
            fitted.extend_from_slice(buf);
            *buf = fitted;
        }
        let beyond = match buf.is_empty() {
            true => 0,
            false => buf.capacity().saturating_sub(2 * read) as u64,
        };
        self.held.force(beyond);
    }

    /// Whether a read of `more` bytes beyond the first may be made now: the connections'
    /// half has room for them, should they stay as an unfinished frame.
    pub fn may_read(&self, more: usize) -> bool {
        self.held.budget().connections_have_room(more as u64)
    }
}

/// Waits while the budget is spent. Looked at every 10 ms, and only while it is: the common
/// case costs two atomic loads.
pub async fn room() {
    while budget().spent() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// `memory-limit(64M)`: bytes, or kibi-, mebi-, gibibytes with `K`, `M`, `G`.
pub fn parse_size(text: &str) -> Option<u64> {
    let t = text.trim();
    let (digits, unit) = match t.as_bytes().last()? {
        b'k' | b'K' => (&t[..t.len() - 1], 1u64 << 10),
        b'm' | b'M' => (&t[..t.len() - 1], 1 << 20),
        b'g' | b'G' => (&t[..t.len() - 1], 1 << 30),
        _ => (t, 1),
    };
    digits.parse::<u64>().ok()?.checked_mul(unit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_unfinished_frame_grows_within_the_connections_half() {
        let (_stop_tx, mut stop) = tokio::sync::watch::channel(false);
        let b: &'static Budget = Box::leak(Box::new(Budget::new(64 << 10)));
        let connections = || b.connections.load(Ordering::Relaxed);
        let before = connections();
        let mut buf = bytes::BytesMut::new();
        let mut unfinished = Unfinished::of(b);
        assert!(unfinished.room(&mut buf, 4096, &mut stop).await);
        assert!(buf.capacity() >= 4096);
        buf.extend_from_slice(&[b'x'; 4096]);
        assert!(unfinished.room(&mut buf, 4096, &mut stop).await);
        assert_eq!(connections(), before, "two reads' room is the reader's own");
        buf.extend_from_slice(&[b'x'; 4096]);
        assert!(unfinished.room(&mut buf, 4096, &mut stop).await);
        assert_eq!(buf.capacity(), 16384);
        assert_eq!(connections() - before, 8192);
        // The half (32 KiB) has no room for the next doubling: it waits, until the stop.
        buf.extend_from_slice(&[b'x'; 8192]);
        let mut other = Unfinished::of(b);
        let mut held = bytes::BytesMut::from(&[b'y'; 12288][..]);
        assert!(other.room(&mut held, 4096, &mut stop).await);
        let (stop_tx, mut stopping) = tokio::sync::watch::channel(false);
        stop_tx.send(true).unwrap();
        assert!(!unfinished.room(&mut buf, 4096, &mut stopping).await);
        drop(other);
        assert!(unfinished.room(&mut buf, 4096, &mut stop).await);
        buf.clear();
        assert!(unfinished.room(&mut buf, 4096, &mut stop).await);
        assert_eq!(connections(), before);
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_size("64M"), Some(64 << 20));
        assert_eq!(parse_size("2g"), Some(2 << 30));
        assert_eq!(parse_size("1K"), Some(1024));
        assert_eq!(parse_size("M"), None);
        assert_eq!(parse_size("-1"), None);
        assert!(default_limit() >= 256 << 20);
    }
}
