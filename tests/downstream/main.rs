//! Past one machine, against the real services, each started once for this binary: Kafka
//! (`kafka-c()`, `kafka()`), OpenSearch (`elasticsearch-http()`, `opensearch()`), and the two
//! together in the scaled-out topology `docs/scaling.md` describes. One binary, so that each
//! JVM starts once per run.

#[path = "../common/mod.rs"]
mod common;

mod elasticsearch;
mod kafka;
mod scaled_out;

/// Each test of this binary runs alone: some stop the broker or change the cluster's settings
/// (the 429 test), and the rest would see it. Held for the whole test.
pub fn alone() -> std::sync::MutexGuard<'static, ()> {
    static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());
    TURN.lock().unwrap_or_else(|e| e.into_inner())
}
