//! Wall-clock time in whole seconds since the epoch: what the gauges of times hold
//! (`paused_since`, `oldest_queued_since`, `expires_at`), and what rate limits of sluice's own
//! messages compare. Below everything that counts or charges, so both can read it.

use std::time::{SystemTime, UNIX_EPOCH};

/// Now, in seconds since the epoch (0 on a clock set before it).
pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
