//! From a batch of parsed messages to destination queues.
//!
//! Every reader calls [`Dispatcher::dispatch`] with the messages of one read. The router
//! decides per message which destinations it reaches; each destination then gets the whole
//! batch's share at once (one format pass, one queue operation) together with the batch's
//! [`Ack`]. Destinations format in the reader's thread, so formatting uses every core that
//! reads; writer threads only write.

use crate::destinations::Destination;
use crate::window::{Ack, Window};
use sluice_model::{LogMessage, Router};
use std::sync::Arc;

/// What all readers share: the routing graph and the destinations it names.
pub struct Dispatcher {
    pub router: Router,
    pub destinations: Vec<Arc<dyn Destination>>,
}

/// Per-reader buffers reused from batch to batch.
#[derive(Default)]
pub struct Scratch {
    routed: Vec<Vec<u32>>,
    filter: Vec<u8>,
}

impl Dispatcher {
    /// Routes `msgs` and queues them with their destinations, taking credits from `window`
    /// first (waiting for them when the destinations are behind).
    ///
    /// A batch larger than the window takes the whole window and goes out at once: its
    /// messages are already parsed and in memory, so cutting it into window-sized pieces would
    /// only make the reader wait for the writer once per piece. The reader still reads nothing
    /// more until the batch is written, so memory stays bounded by one read per reader.
    pub async fn dispatch(&self, msgs: &[LogMessage], window: &Window, scratch: &mut Scratch) {
        let ack = window.take(msgs.len() as u32).await;
        self.dispatch_now(msgs, &ack, scratch);
    }

    /// Routes and queues `msgs` under an acknowledgement the caller already holds.
    pub fn dispatch_now(&self, msgs: &[LogMessage], ack: &Ack, scratch: &mut Scratch) {
        scratch
            .routed
            .resize_with(self.destinations.len(), Vec::new);
        for (i, msg) in msgs.iter().enumerate() {
            let routed = &mut scratch.routed;
            self.router.route(msg, &mut scratch.filter, &mut |dest| {
                routed[dest as usize].push(i as u32)
            });
        }
        for (dest, indices) in self.destinations.iter().zip(scratch.routed.iter_mut()) {
            if !indices.is_empty() {
                dest.deliver(msgs, indices, ack);
                indices.clear();
            }
        }
    }
}
