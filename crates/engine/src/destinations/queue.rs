//! A destination's queue: formatted batches between the readers that queue them and the
//! destination's sender thread. [`BatchQueue`] is what both sides see; [`Queue`] keeps the
//! batches in memory with syslog-ng's `log-fifo-size()` semantics, and
//! [`super::diskq::DiskQueue`] keeps them in a disk buffer.
//!
//! A batch from a path with `flags(flow-control)` holds its reader's acknowledgement until it
//! is sent, so the reader stops when its window is spent; such batches do not count against
//! `log-fifo-size()` (as in syslog-ng 3.38). A batch from any other path lets its reader go on
//! at once; its messages count against the limit, and what does not fit is dropped (the newest
//! messages, as syslog-ng drops from the incoming batch) and counted.

use crate::stats::{DestCounters, DropReason};
use crate::window::Ack;
use std::collections::VecDeque;
use std::sync::atomic::Ordering;
#[cfg(test)]
use std::sync::Arc;
use std::sync::{Condvar, Mutex};
use std::time::Duration;

/// Formatted messages queued together: `data[ends[i-1]..ends[i]]` is message `i`.
pub struct Batch {
    pub data: Vec<u8>,
    pub ends: Vec<u32>,
    /// Held until the batch is sent when its path asked for flow control.
    pub ack: Option<Ack>,
    /// When a destination's queue took the batch, seconds since the epoch (0 before):
    /// `oldest_queued_since`.
    pub queued_at: u64,
}

impl Batch {
    pub fn new(ack: Option<Ack>) -> Batch {
        Batch {
            data: Vec::new(),
            ends: Vec::new(),
            ack,
            queued_at: 0,
        }
    }

    /// Marks the end of a message appended to `data`.
    pub fn end_message(&mut self) {
        self.ends.push(self.data.len() as u32);
    }

    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Where message `i` starts.
    pub fn start(&self, i: usize) -> usize {
        if i == 0 {
            0
        } else {
            self.ends[i - 1] as usize
        }
    }

    /// Keeps the first `n` messages.
    pub fn truncate(&mut self, n: usize) {
        let end = self.start(n);
        self.data.truncate(end);
        self.ends.truncate(n);
    }

    /// Counts against `log-fifo-size()`: nobody waits for it.
    pub fn counted(&self) -> bool {
        self.ack.is_none()
    }
}

/// What readers and a sender do with a destination's queue.
pub trait BatchQueue: Send + Sync {
    /// Queues `batch` (from a reader, in commit order). Never blocks.
    fn push(&self, batch: Batch);
    /// Waits up to `timeout` for batches and moves those queued (up to about `max_bytes`) to
    /// `into`, in order. Returns whether the queue is stopping and nothing more will come
    /// once what is queued is taken.
    fn take(&self, timeout: Duration, max_bytes: usize, into: &mut Vec<Batch>) -> bool;
    /// The sender has sent `batches` (the oldest it took): they leave the queue and their
    /// acknowledgements are dropped.
    fn done(&self, batches: &mut Vec<Batch>);
    /// Stopping with no server to send to: gives up `batches` (taken, not sent) and what is
    /// still queued, and says what became of them.
    fn abandon(&self, batches: &mut Vec<Batch>) -> String;
    /// A sender that stops for another to take over gives back `batches` (the last it took,
    /// not sent): they go to the front of the queue, in order.
    fn put_back(&self, batches: &mut Vec<Batch>);
    fn is_stopping(&self) -> bool;
    /// Tells the queue to finish: the sender takes what is left, then stops.
    fn stop(&self);
    fn counters(&self) -> &DestCounters;
    /// Whether anything written before this start waits to be sent (a disk buffer that is
    /// replayed): the sender starts at once instead of at the first message.
    fn has_backlog(&self) -> bool {
        false
    }
}

#[derive(Default)]
struct State {
    batches: VecDeque<Batch>,
    /// When each batch the sender took and has not finished was queued, oldest first.
    taken: VecDeque<u64>,
    /// Messages of queued batches that count against `log-fifo-size()`, including batches
    /// the sender took and has not finished.
    counted: usize,
    stopping: bool,
}

impl State {
    /// `oldest_queued_since`: of the batches the sender holds, else of those waiting.
    fn show_oldest(&self, counters: &DestCounters) {
        let waiting = self.batches.front().map(|b| b.queued_at);
        counters.oldest_queued(self.taken.front().copied().or(waiting).unwrap_or(0));
    }
}

pub struct Queue {
    state: Mutex<State>,
    ready: Condvar,
    fifo_size: usize,
    counters: DestCounters,
}

impl Queue {
    pub fn new(fifo_size: usize, counters: DestCounters) -> Queue {
        Queue {
            state: Mutex::default(),
            ready: Condvar::new(),
            fifo_size: fifo_size.max(1),
            counters,
        }
    }

    /// Queues `batch`; returns how many of its messages did not fit and were dropped.
    fn push_counting(&self, mut batch: Batch) -> usize {
        let mut dropped = 0;
        if batch.counted() && crate::memory::budget().tight() {
            // Without flow control past three quarters of memory-limit(): the newest go.
            self.counters
                .drop(DropReason::MemoryLimit, batch.len() as u64);
            crate::memory::say_dropping(|| self.counters.label());
            return batch.len();
        }
        let mut state = self.state.lock().expect("queue lock");
        if batch.counted() {
            let room = self.fifo_size.saturating_sub(state.counted);
            if batch.len() > room {
                dropped = batch.len() - room;
                batch.truncate(room);
            }
            state.counted += batch.len();
        }
        self.counters.drop(DropReason::QueueFull, dropped as u64);
        if !batch.is_empty() {
            self.counters
                .queued
                .fetch_add(batch.len() as u64, Ordering::Relaxed);
            self.counters.hold(batch.data.len() as u64);
            batch.queued_at = crate::clock::unix_now();
            state.batches.push_back(batch);
            state.show_oldest(&self.counters);
            self.ready.notify_one();
        }
        dropped
    }

    /// Messages waiting, not counting what the sender holds.
    fn waiting(&self) -> usize {
        let state = self.state.lock().expect("queue lock");
        state.batches.iter().map(Batch::len).sum()
    }
}

impl BatchQueue for Queue {
    fn push(&self, batch: Batch) {
        self.push_counting(batch);
    }

    fn take(&self, timeout: Duration, max_bytes: usize, into: &mut Vec<Batch>) -> bool {
        let mut state = self.state.lock().expect("queue lock");
        if state.batches.is_empty() && !state.stopping {
            state = self
                .ready
                .wait_timeout(state, timeout)
                .expect("queue lock")
                .0;
        }
        let (mut bytes, mut messages) = (0, 0);
        while bytes < max_bytes {
            let Some(b) = state.batches.pop_front() else {
                break;
            };
            state.taken.push_back(b.queued_at);
            bytes += b.data.len();
            messages += b.len();
            into.push(b);
        }
        if bytes > 0 {
            state.show_oldest(&self.counters);
            self.counters.in_flight(messages as u64, 0);
        }
        state.stopping
    }

    fn done(&self, batches: &mut Vec<Batch>) {
        let counted: usize = batches.iter().filter(|b| b.counted()).map(Batch::len).sum();
        let messages: usize = batches.iter().map(Batch::len).sum();
        let bytes: usize = batches.iter().map(|b| b.data.len()).sum();
        self.counters.in_flight(0, messages as u64);
        self.counters
            .queued
            .fetch_sub(messages as u64, Ordering::Relaxed);
        self.counters.release(bytes as u64);
        let mut state = self.state.lock().expect("queue lock");
        state.counted -= counted;
        let n = batches.len().min(state.taken.len());
        state.taken.drain(..n);
        state.show_oldest(&self.counters);
        drop(state);
        batches.clear();
    }

    fn abandon(&self, batches: &mut Vec<Batch>) -> String {
        let lost = batches.iter().map(Batch::len).sum::<usize>() + self.waiting();
        loop {
            // Not delivered: whoever waits for that is not told it was.
            for b in batches.iter() {
                if let Some(ack) = &b.ack {
                    ack.fail();
                }
            }
            let messages: usize = batches.iter().map(Batch::len).sum();
            self.done(batches);
            self.counters.drop(DropReason::Stopped, messages as u64);
            self.take(Duration::ZERO, usize::MAX, batches);
            if batches.is_empty() {
                break;
            }
        }
        format!("{lost} messages not delivered: no server accepts them")
    }

    fn put_back(&self, batches: &mut Vec<Batch>) {
        let mut state = self.state.lock().expect("queue lock");
        let messages: usize = batches.iter().map(Batch::len).sum();
        self.counters.in_flight(0, messages as u64);
        for b in batches.drain(..).rev() {
            state.taken.pop_back();
            state.batches.push_front(b);
        }
        state.show_oldest(&self.counters);
        self.ready.notify_one();
    }

    fn is_stopping(&self) -> bool {
        self.state.lock().expect("queue lock").stopping
    }

    fn stop(&self) {
        self.state.lock().expect("queue lock").stopping = true;
        self.ready.notify_all();
    }

    fn counters(&self) -> &DestCounters {
        &self.counters
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(n: usize, ack: Option<Ack>) -> Batch {
        let mut b = Batch::new(ack);
        for i in 0..n {
            b.data.extend_from_slice(format!("m{i}\n").as_bytes());
            b.end_message();
        }
        b
    }

    #[test]
    fn paths_without_flow_control_drop_what_exceeds_the_fifo() {
        let q = Queue::new(5, DestCounters::default());
        assert_eq!(q.push_counting(batch(3, None)), 0);
        assert_eq!(q.push_counting(batch(4, None)), 2);
        assert_eq!(q.counters.dropped.load(Ordering::Relaxed), 2);
        assert_eq!(q.counters.dropped_for(DropReason::QueueFull), 2);
        let mut taken = Vec::new();
        q.take(Duration::ZERO, usize::MAX, &mut taken);
        assert_eq!(taken[1].data, b"m0\nm1\n");
        // Still counted until done.
        assert_eq!(q.push_counting(batch(1, None)), 1);
        q.done(&mut taken);
        assert_eq!(q.push_counting(batch(1, None)), 0);
        // Stopping with no server: what was taken and what waits are dropped as stopped.
        q.push_counting(batch(2, None));
        let mut taken = Vec::new();
        q.take(Duration::ZERO, 1, &mut taken);
        q.abandon(&mut taken);
        assert_eq!(q.counters.dropped_for(DropReason::Stopped), 3);
        assert_eq!(q.counters.queued.load(Ordering::Relaxed), 0);
        assert_eq!(
            q.counters.dropped.load(Ordering::Relaxed),
            q.counters.dropped_for(DropReason::QueueFull) + 3
        );
    }

    #[tokio::test]
    async fn flow_controlled_batches_are_never_dropped() {
        let w = crate::window::Window::new(100);
        let q = Queue::new(1, DestCounters::default());
        let ack = w.take(10).await;
        assert_eq!(q.push_counting(batch(10, Some(ack.clone()))), 0);
        assert_eq!(q.push_counting(batch(1, None)), 0);
        assert_eq!(q.waiting(), 11);
    }

    #[tokio::test]
    async fn the_memory_queue_keeps_the_queue_contract() {
        contract::check(contract::Acks::WhenSent, &|_| {
            Arc::new(Queue::new(1000, DestCounters::default()))
        })
        .await;
    }
}

/// What every [`BatchQueue`] does, whatever keeps its batches: run over the memory queue here
/// and over the disk buffer in `diskq.rs`.
#[cfg(test)]
pub(crate) mod contract {
    use super::*;
    use std::path::Path;
    use std::sync::Arc;
    use tokio::sync::oneshot;

    /// When a flow-controlled batch's acknowledgement may go (its reader's credits return).
    pub enum Acks {
        /// Once it is sent ([`BatchQueue::done`]).
        WhenSent,
        /// Once it is stored (a reliable disk buffer), and never before it is stored.
        WhenStored,
    }

    fn batch(tag: &str, n: usize, ack: Option<Ack>) -> Batch {
        let mut b = Batch::new(ack);
        for i in 0..n {
            b.data.extend_from_slice(format!("{tag}.{i}\n").as_bytes());
            b.end_message();
        }
        b
    }

    fn text(batches: &[Batch]) -> String {
        batches
            .iter()
            .map(|b| String::from_utf8_lossy(&b.data).into_owned())
            .collect()
    }

    /// Takes until `n` batches are in `into`.
    fn take_n(q: &dyn BatchQueue, n: usize, max_bytes: usize, into: &mut Vec<Batch>) {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while into.len() < n {
            assert!(
                std::time::Instant::now() < deadline,
                "{} of {n} batches",
                into.len()
            );
            q.take(Duration::from_millis(100), max_bytes, into);
        }
    }

    /// Runs the contract over queues `make` opens in a directory of their own.
    pub async fn check(acks: Acks, make: &dyn Fn(&Path) -> Arc<dyn BatchQueue>) {
        let dir = tempfile::tempdir().unwrap();
        let q = make(dir.path());
        let queued = || q.counters().queued.load(Ordering::Relaxed);

        // In order; a take moves at least one batch, however small `max_bytes`.
        for tag in ["a", "b", "c", "d"] {
            q.push(batch(tag, 2, None));
        }
        assert_eq!(queued(), 8);
        let mut taken = Vec::new();
        take_n(&*q, 1, 1, &mut taken);
        assert_eq!(taken.len(), 1, "a take of 1 byte moves one batch");
        take_n(&*q, 4, usize::MAX, &mut taken);
        assert_eq!(text(&taken), "a.0\na.1\nb.0\nb.1\nc.0\nc.1\nd.0\nd.1\n");

        // What the sender gives back comes first again, in order.
        let mut back = taken.split_off(2);
        q.put_back(&mut back);
        assert!(back.is_empty());
        q.push(batch("e", 1, None));
        take_n(&*q, 5, usize::MAX, &mut taken);
        assert_eq!(text(&taken[2..]), "c.0\nc.1\nd.0\nd.1\ne.0\n");

        // What was sent leaves the count.
        q.done(&mut taken);
        assert!(taken.is_empty());
        assert_eq!(queued(), 0);

        // A flow-controlled batch keeps its reader waiting until it is sent (or stored).
        let window = crate::window::Window::new(10);
        let (delivered, mut acknowledged) = oneshot::channel();
        let ack = window.take_acknowledged(2, delivered).await;
        q.push(batch("f", 2, Some(ack)));
        take_n(&*q, 1, usize::MAX, &mut taken);
        match acks {
            Acks::WhenSent => {
                assert!(
                    acknowledged.try_recv().is_err(),
                    "acknowledged before it was sent"
                );
                q.done(&mut taken);
            }
            Acks::WhenStored => q.done(&mut taken),
        }
        tokio::time::timeout(Duration::from_secs(5), &mut acknowledged)
            .await
            .expect("acknowledged once sent")
            .expect("the acknowledgement is dropped, not lost");

        // Stopping: everything queued before the stop is still taken, then the queue says
        // nothing more comes.
        q.push(batch("g", 3, None));
        q.push(batch("h", 1, None));
        q.stop();
        assert!(q.is_stopping());
        let mut finished = false;
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !(finished && taken.len() == 2) {
            assert!(std::time::Instant::now() < deadline, "{}", text(&taken));
            finished = q.take(Duration::from_millis(100), usize::MAX, &mut taken);
        }
        assert_eq!(text(&taken), "g.0\ng.1\ng.2\nh.0\n");
        q.done(&mut taken);
        assert_eq!(queued(), 0);
    }
}
