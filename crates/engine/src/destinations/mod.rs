//! Destinations: where messages leave. A destination formats the messages routed to it in the
//! caller's (the reader's) thread and queues the bytes with a writer of its own; it holds the
//! batch's [`Ack`] until they are written.

pub mod file;
pub mod format;

use crate::window::Ack;
use sluice_model::LogMessage;
use std::sync::Arc;

pub trait Destination: Send + Sync {
    /// Queues `msgs[i]` for every `i` in `which`, in that order. Must not block: queues are
    /// bounded by the readers' windows, not here.
    fn deliver(&self, msgs: &[LogMessage], which: &[u32], ack: &Ack);

    /// Writes everything queued and stops the writers.
    fn shutdown(&self);
}

/// A `destination` statement with several drivers: every message goes to each of them.
pub struct Group(pub Vec<Arc<dyn Destination>>);

impl Destination for Group {
    fn deliver(&self, msgs: &[LogMessage], which: &[u32], ack: &Ack) {
        for d in &self.0 {
            d.deliver(msgs, which, ack);
        }
    }

    fn shutdown(&self) {
        for d in &self.0 {
            d.shutdown();
        }
    }
}
