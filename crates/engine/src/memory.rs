//! The memory budget (`options { memory-limit() }`): the bytes of messages sluice holds on
//! their way in and out — sources' large reads, destination queues, a disk buffer's cache,
//! files' pending writes — and what each open connection holds (its buffers, its TLS state),
//! drawn from one process-wide budget, so that no number of connections, senders or dead
//! servers makes memory grow without end.
//!
//! Connections may take at most half of the limit: past it a new connection is refused
//! ([`Budget::admit`]), while those open go on. Then two marks for everything together:
//! - past three quarters of the limit, messages on paths without flow control are dropped at
//!   their destination's queue, counted as `dropped_memory_limit`: a dead server on such a
//!   path can never take the room the flow-controlled paths need;
//! - past the limit, the readers of every source wait before they take credits for the next
//!   read (shown as paused, [`crate::window::Flow`]): flow-controlled paths slow their senders
//!   down instead of losing anything.
//!
//! What a destination holds is charged through [`crate::stats::DestCounters::hold`] and
//! [`crate::stats::DestCounters::release`], beside its own `memory_usage` gauge. The use and
//! the limit are gauges too: `global;memory;;a;memory_usage`, `…;memory_limit`, and of the
//! use what connections hold, `…;connections_memory`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};
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

/// The process's budget.
#[derive(Debug)]
pub struct Budget {
    pub used: Arc<AtomicU64>,
    pub limit: Arc<AtomicU64>,
    /// Of `used`, what open connections hold.
    pub connections: Arc<AtomicU64>,
    /// When the last drop for the budget was said, in seconds since the epoch.
    said: AtomicU64,
}

static BUDGET: LazyLock<Budget> = LazyLock::new(|| Budget {
    used: Arc::default(),
    limit: Arc::new(AtomicU64::new(default_limit())),
    connections: Arc::default(),
    said: AtomicU64::new(0),
});

/// The budget of this process.
pub fn budget() -> &'static Budget {
    &BUDGET
}

impl Budget {
    pub fn set_limit(&self, bytes: u64) {
        self.limit.store(bytes.max(1), Ordering::Relaxed);
    }

    pub fn hold(&self, bytes: u64) {
        self.used.fetch_add(bytes, Ordering::Relaxed);
    }

    pub fn release(&self, bytes: u64) {
        self.used.fetch_sub(bytes, Ordering::Relaxed);
    }

    /// Charges what a connection holds while it is open (`bytes`), unless the connections
    /// would then hold more than half of the limit: `None`, the connection is to be refused.
    pub fn admit(&'static self, bytes: u64) -> Option<Held> {
        let half = self.limit.load(Ordering::Relaxed) / 2;
        self.connections
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |held| {
                (held + bytes <= half).then_some(held + bytes)
            })
            .ok()?;
        self.hold(bytes);
        Some(Held {
            budget: self,
            bytes,
        })
    }

    /// Past three quarters of the limit: paths without flow control drop.
    pub fn tight(&self) -> bool {
        let limit = self.limit.load(Ordering::Relaxed);
        self.used.load(Ordering::Relaxed) >= limit - limit / 4
    }

    /// Past the limit: readers wait.
    pub fn spent(&self) -> bool {
        self.used.load(Ordering::Relaxed) >= self.limit.load(Ordering::Relaxed)
    }

    /// Says that a destination (named by `destination()`, made only when said) drops for the
    /// budget: at most once a minute for all.
    pub fn say_dropping(&self, destination: impl FnOnce() -> String) {
        let now = crate::stats::unix_now();
        let last = self.said.load(Ordering::Relaxed);
        if now >= last + 60
            && self
                .said
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            crate::own_log::error(format!(
                "{}: three quarters of memory-limit({}) in use; messages of paths without flow control are dropped (counted as dropped_memory_limit) until less is held",
                destination(),
                self.limit.load(Ordering::Relaxed)
            ));
        }
    }

    /// Waits while the budget is spent. Looked at every 10 ms, and only while it is: the
    /// common case costs two atomic loads.
    pub async fn room(&self) {
        while self.spent() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// What an open connection holds of the budget; given back when it is dropped.
#[derive(Debug)]
pub struct Held {
    budget: &'static Budget,
    bytes: u64,
}

impl Drop for Held {
    fn drop(&mut self) {
        self.budget
            .connections
            .fetch_sub(self.bytes, Ordering::Relaxed);
        self.budget.release(self.bytes);
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

    #[test]
    fn connections_take_half_at_most() {
        let b: &'static Budget = Box::leak(Box::new(Budget {
            used: Arc::default(),
            limit: Arc::new(AtomicU64::new(100)),
            connections: Arc::default(),
            said: AtomicU64::new(0),
        }));
        let first = b.admit(30).expect("room");
        let second = b.admit(20).expect("room up to half");
        assert!(b.admit(1).is_none());
        assert_eq!(b.used.load(Ordering::Relaxed), 50);
        drop(first);
        assert_eq!(b.used.load(Ordering::Relaxed), 20);
        let third = b.admit(30).expect("room again");
        assert_eq!(b.connections.load(Ordering::Relaxed), 50);
        drop((second, third));
        assert_eq!(b.used.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn marks() {
        let b = Budget {
            used: Arc::default(),
            limit: Arc::new(AtomicU64::new(100)),
            connections: Arc::default(),
            said: AtomicU64::new(0),
        };
        b.hold(74);
        assert!(!b.tight());
        b.hold(1);
        assert!(b.tight() && !b.spent());
        b.hold(25);
        assert!(b.spent());
        b.release(1);
        assert!(!b.spent());
    }
}
