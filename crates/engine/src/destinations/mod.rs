//! Destinations: where messages leave. A destination formats the messages routed to it in the
//! caller's (the reader's) thread and leaves in an [`Outbox`] the operations that queue the
//! bytes with a writer of its own; the writer holds the batch's [`Ack`] until they are written.

// The machinery drivers share: formatting, queues and disk buffers, the delivery layer (lanes,
// senders, links), terminals; what a driver is, and the registry of them.
mod delivery;
pub mod diskq;
pub mod driver;
#[cfg(any(feature = "sql", feature = "mongodb"))]
pub mod fallback;
pub mod format;
mod link;
pub mod queue;
pub mod registry;
mod sender;
mod terminal;

// The drivers, a folder each; `registry::DRIVERS` lists them.
#[cfg(feature = "http")]
pub mod elasticsearch;
pub mod file;
pub mod graylog2;
#[cfg(feature = "http")]
pub mod http;
#[cfg(feature = "kafka")]
pub mod kafka_c;
pub mod logstore;
#[cfg(feature = "mongodb")]
pub mod mongodb;
pub mod network;
pub mod pipe;
pub mod program;
#[cfg(feature = "sql")]
pub mod sql;
pub mod stdout;
pub mod unix;
pub mod usertty;

use crate::window::Ack;
use sluice_model::LogMessage;
use std::path::Path;
use std::sync::Arc;

pub trait Destination: Send + Sync {
    /// Called once when the server starts, before any delivery: opens what the destination
    /// keeps across restarts (disk buffers, under `state_dir` unless configured elsewhere).
    /// After a reload, `previous` is the destination of the same name in the configuration
    /// before, when its definition changed: the new one may take over its queue.
    fn start(
        &self,
        _state_dir: &Path,
        _previous: Option<&Arc<dyn Destination>>,
    ) -> std::io::Result<()> {
        Ok(())
    }

    /// For taking over a previous destination of the same kind.
    fn as_any(&self) -> &dyn std::any::Any;

    /// Formats `msgs[i]` for every `i` in `which`, in that order, and puts in `outbox` what
    /// queues them. Must not block. `flow_control` says that a path on the way asked for
    /// `flags(flow-control)`: the messages must then hold `ack` until written (the reader
    /// waits for them); otherwise a destination may let the reader go on and drop what does
    /// not fit its queue (`log-fifo-size()`), counting it.
    fn deliver(
        &self,
        msgs: &[LogMessage],
        which: &[u32],
        ack: &Ack,
        flow_control: bool,
        outbox: &mut Outbox,
    );

    /// Writes everything queued and stops the writers.
    fn shutdown(&self);

    /// `sluice ctl reopen`, SIGUSR1: closes files so that the next write opens them again
    /// (after logrotate moved them away).
    fn reopen(&self) {}

    /// The destination's format numbers local messages (`meta sequenceId`, `$SEQNUM`): their
    /// reads must then be formatted in the order they are queued (see
    /// [`crate::dispatch::Dispatcher::in_order`]).
    fn numbers_local(&self) -> bool {
        false
    }
}

/// A `destination` statement with several drivers: every message goes to each of them.
pub struct Group(pub Vec<Arc<dyn Destination>>);

impl Destination for Group {
    fn start(
        &self,
        state_dir: &Path,
        previous: Option<&Arc<dyn Destination>>,
    ) -> std::io::Result<()> {
        // Drivers take over the drivers in the same place of a previous group.
        let before = previous.and_then(|p| p.as_any().downcast_ref::<Group>());
        for (i, d) in self.0.iter().enumerate() {
            d.start(state_dir, before.and_then(|g| g.0.get(i)))?;
        }
        Ok(())
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn deliver(
        &self,
        msgs: &[LogMessage],
        which: &[u32],
        ack: &Ack,
        flow_control: bool,
        outbox: &mut Outbox,
    ) {
        for d in &self.0 {
            d.deliver(msgs, which, ack, flow_control, outbox);
        }
    }

    fn shutdown(&self) {
        for d in &self.0 {
            d.shutdown();
        }
    }

    fn reopen(&self) {
        for d in &self.0 {
            d.reopen();
        }
    }

    fn numbers_local(&self) -> bool {
        self.0.iter().any(|d| d.numbers_local())
    }
}

/// The queue operations of deliveries formatted but not yet queued, done in order by [`Outbox::commit`]. A reader
/// commits a batch's outbox only after the outboxes of its earlier batches, which keeps each
/// connection's messages in order while batches are formatted in parallel.
#[derive(Default)]
pub struct Outbox(Vec<Box<dyn FnOnce() + Send>>);

impl Outbox {
    pub fn push(&mut self, queue: impl FnOnce() + Send + 'static) {
        self.0.push(Box::new(queue));
    }

    pub fn commit(&mut self) {
        for queue in self.0.drain(..) {
            queue();
        }
    }
}
