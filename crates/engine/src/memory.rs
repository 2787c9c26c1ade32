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
