//! The grace of a stop. Everything that waits on a destination while sluice stops — readers
//! waiting for credits, file writers retrying failing files, senders whose peer takes nothing
//! — shares one [`GRACE`], counted from when the stop began, not one grace after another.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// How long a stopping sluice waits for destinations that take nothing.
pub const GRACE: Duration = Duration::from_secs(10);

static BEGAN: OnceLock<Instant> = OnceLock::new();

/// The stop begins now (the first call counts).
pub fn begin() {
    BEGAN.get_or_init(Instant::now);
}

/// Whence a wait that gives up at `now` counts its grace: the start of the stop, or `now`
/// when sluice is not stopping (a reload's hand-over).
pub fn since(now: Instant) -> Instant {
    BEGAN.get().copied().unwrap_or(now)
}

/// Whether sluice is stopping.
pub fn began() -> bool {
    BEGAN.get().is_some()
}

/// Whether sluice is stopping and its grace is spent: nothing should start waiting anew.
pub fn grace_spent() -> bool {
    BEGAN.get().is_some_and(|t| t.elapsed() >= GRACE)
}
