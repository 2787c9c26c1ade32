//! The memory budget's books (`options { memory-limit() }`): one process-wide count of the
//! bytes sluice holds for messages and connections, and the limit it is held under.
//!
//! It lives here, below the engine, because correlation contexts ([`crate::correlation`])
//! hold messages too and must draw from the same budget as sources' reads, destination
//! queues and connections do. What is done when it runs short — readers paused, paths
//! without flow control dropping, connections refused, contexts ended early — is said where
//! it is done; the engine's `memory` module describes the whole.
//!
//! Marks, of the limit: connections may hold half ([`Budget::admit`]); past three quarters the
//! budget is [tight](Budget::tight), past all of it [spent](Budget::spent).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};

/// The process's budget.
#[derive(Debug)]
pub struct Budget {
    pub used: Arc<AtomicU64>,
    /// No limit (`u64::MAX`) until the engine sets one from the configuration.
    pub limit: Arc<AtomicU64>,
    /// Of `used`, what open connections hold.
    pub connections: Arc<AtomicU64>,
}

static BUDGET: LazyLock<Budget> = LazyLock::new(|| Budget::new(u64::MAX));

/// The budget of this process.
pub fn budget() -> &'static Budget {
    &BUDGET
}

impl Budget {
    /// A budget of its own, for tests.
    pub fn new(limit: u64) -> Budget {
        Budget {
            used: Arc::default(),
            limit: Arc::new(AtomicU64::new(limit)),
            connections: Arc::default(),
        }
    }

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

    /// Whether the connections could hold `bytes` more within their half of the limit.
    pub fn connections_have_room(&self, bytes: u64) -> bool {
        let half = self.limit.load(Ordering::Relaxed) / 2;
        self.connections.load(Ordering::Relaxed) + bytes <= half
    }

    /// A hold of nothing yet, to be resized ([`Held::resize`]).
    pub fn nothing(&'static self) -> Held {
        Held {
            budget: self,
            bytes: 0,
        }
    }

    /// Past three quarters of the limit: paths without flow control drop, correlation
    /// contexts end early, no new dynamic counter is made.
    pub fn tight(&self) -> bool {
        let limit = self.limit.load(Ordering::Relaxed);
        self.used.load(Ordering::Relaxed) >= limit - limit / 4
    }

    /// Past the limit: readers wait.
    pub fn spent(&self) -> bool {
        self.used.load(Ordering::Relaxed) >= self.limit.load(Ordering::Relaxed)
    }
}

/// What an open connection holds of the budget; given back when it is dropped.
#[derive(Debug)]
pub struct Held {
    budget: &'static Budget,
    bytes: u64,
}

impl Held {
    /// Holds `bytes` from now on. More is taken as an admission is, within the connections'
    /// half of the limit: when there is no room, nothing changes and the answer is false.
    /// Less gives back the difference.
    pub fn resize(&mut self, bytes: u64) -> bool {
        if bytes == self.bytes {
            return true;
        }
        if bytes < self.bytes {
            let less = self.bytes - bytes;
            self.budget.connections.fetch_sub(less, Ordering::Relaxed);
            self.budget.release(less);
        } else {
            let more = bytes - self.bytes;
            let half = self.budget.limit.load(Ordering::Relaxed) / 2;
            let taken = self.budget.connections.fetch_update(
                Ordering::Relaxed,
                Ordering::Relaxed,
                |held| (held + more <= half).then_some(held + more),
            );
            if taken.is_err() {
                return false;
            }
            self.budget.hold(more);
        }
        self.bytes = bytes;
        true
    }
}

impl Held {
    pub fn budget(&self) -> &'static Budget {
        self.budget
    }

    /// Holds `bytes` from now on, whether or not the connections' half has room: for bytes
    /// already read, which are held whatever the books say.
    pub fn force(&mut self, bytes: u64) {
        if !self.resize(bytes) {
            let more = bytes - self.bytes;
            self.budget.connections.fetch_add(more, Ordering::Relaxed);
            self.budget.hold(more);
            self.bytes = bytes;
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.budget
            .connections
            .fetch_sub(self.bytes, Ordering::Relaxed);
        self.budget.release(self.bytes);
    }
}

/// Bytes charged to a budget by what owns this (a correlation context, the statistics'
/// counters): it may grow and take over another's, and gives all back when dropped.
#[derive(Debug)]
pub struct Charge {
    budget: &'static Budget,
    bytes: u64,
}

impl Charge {
    pub fn new(budget: &'static Budget) -> Charge {
        Charge { budget, bytes: 0 }
    }

    pub fn add(&mut self, bytes: u64) {
        self.budget.hold(bytes);
        self.bytes += bytes;
    }

    /// Takes over what `other` was charged (to the same budget): `other` is left with none.
    pub fn absorb(&mut self, other: &mut Charge) {
        debug_assert!(std::ptr::eq(self.budget, other.budget));
        self.bytes += std::mem::take(&mut other.bytes);
    }

    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    pub fn budget(&self) -> &'static Budget {
        self.budget
    }
}

impl Default for Charge {
    /// Nothing yet, of the process's budget.
    fn default() -> Charge {
        Charge::new(budget())
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        self.budget.release(self.bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_take_half_at_most() {
        let b: &'static Budget = Box::leak(Box::new(Budget::new(100)));
        let first = b.admit(30).expect("room");
        let second = b.admit(20).expect("room up to half");
        assert!(b.admit(1).is_none());
        assert_eq!(b.used.load(Ordering::Relaxed), 50);
        drop(first);
        assert_eq!(b.used.load(Ordering::Relaxed), 20);
        let mut third = b.admit(30).expect("room again");
        assert_eq!(b.connections.load(Ordering::Relaxed), 50);
        assert!(!third.resize(31), "no room to grow");
        assert!(third.resize(10));
        assert!(third.resize(30));
        assert_eq!(b.used.load(Ordering::Relaxed), 50);
        drop((second, third));
        assert_eq!(b.used.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn marks() {
        let b = Budget::new(100);
        b.hold(74);
        assert!(!b.tight());
        b.hold(1);
        assert!(b.tight() && !b.spent());
        b.hold(25);
        assert!(b.spent());
        b.release(1);
        assert!(!b.spent());
    }

    #[test]
    fn charges_are_given_back() {
        let b: &'static Budget = Box::leak(Box::new(Budget::new(100)));
        let mut one = Charge::new(b);
        one.add(10);
        let mut other = Charge::new(b);
        other.add(5);
        one.absorb(&mut other);
        drop(other);
        assert_eq!((one.bytes(), b.used.load(Ordering::Relaxed)), (15, 15));
        drop(one);
        assert_eq!(b.used.load(Ordering::Relaxed), 0);
    }
}
