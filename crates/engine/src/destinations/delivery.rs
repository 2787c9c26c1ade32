//! The queues and senders of a destination that talks to servers: `workers()` lanes, each a
//! queue (in memory, or its own disk buffer) and a [`Sender`] thread with its own connection.
//! A destination formats messages in the readers' threads and pushes them into a lane: by
//! `worker-partition-key()` or in turn ([`Delivery::lanes`], `http()`, `kafka-c()`), or the
//! one lane of `network()` ([`Delivery::queue`]).
//!
//! On a reload, a destination of the same name and kind takes over the lanes when they are
//! kept in the same places (the same number, in memory or in the same disk buffers): each
//! sender puts back what it took and gives up its connection, and the new destination's
//! senders go on with both.
//!
//! A destination on this layer says only how it formats messages into its lanes' batches
//! ([`Delivers`]); [`Delivered`] makes it a [`Destination`]: counting, lanes, room for the
//! batch, queueing, start and hand-over, shutdown.

use super::diskq::{DiskBufferOptions, DiskQueue};
use super::format::Formatter;
use super::queue::{Batch, BatchQueue, Queue};
use super::sender::{Connection, Pacing, Sender, Servers};
use super::{Destination, Outbox};
use crate::stats::DestCounters;
use crate::window::Ack;
use sluice_model::LogMessage;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::Instant;

/// What a destination's senders share: where they send, how they pace themselves, how their
/// queues are kept.
pub(super) struct Delivery {
    label: Arc<str>,
    servers: Arc<dyn Servers>,
    pacing: Pacing,
    counters: DestCounters,
    /// `disk-buffer()`, and the name of the first lane's buffer directory.
    disk_buffer: Option<(DiskBufferOptions, String)>,
    workers: usize,
    /// Made when the server starts ([`Delivery::start`]): disk buffers are opened then.
    lanes: OnceLock<Vec<Lane>>,
    /// Tells the senders to give their batches back and stop: a reload's new destination of
    /// the same name takes over the lanes.
    retire: Arc<AtomicBool>,
    handed_over: AtomicBool,
    /// Drops said so far, by any of the senders.
    reported_drops: Arc<AtomicU64>,
    /// The lane of the next delivery without a partition key.
    next_lane: AtomicUsize,
}

/// What a destination on the delivery layer knows of itself: its lanes and how it formats.
pub(super) trait Delivers: Send + Sync + 'static {
    /// Its lanes, queues and senders.
    fn delivery(&self) -> &Delivery;
    /// The formatter whose sizes make room for a delivery's batches and learn from them.
    fn sized_by(&self) -> &Formatter;
    /// `worker-partition-key()`: messages with the same key go to the same lane, in order.
    fn partition_key(&self) -> Option<&Formatter> {
        None
    }
    /// Its formats number local messages (`$SEQNUM`): see [`Destination::numbers_local`].
    fn numbers_local(&self) -> bool;
    /// Formats `msgs[i]` for every `i` in `which`, in that order, into its lane's batch.
    fn format(&self, msgs: &[LogMessage], which: &[u32], lanes: &mut Lanes);
}

/// A destination on the delivery layer ([`Delivers`]), as the router sees it.
pub struct Delivered<D>(pub(super) D);

impl<D: Delivers> Destination for Delivered<D> {
    fn numbers_local(&self) -> bool {
        self.0.numbers_local()
    }

    fn start(
        &self,
        state_dir: &Path,
        previous: Option<&Arc<dyn Destination>>,
    ) -> std::io::Result<()> {
        self.0
            .delivery()
            .start_after(state_dir, previous, |d: &Delivered<D>| d.0.delivery())
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
        let delivery = self.0.delivery();
        delivery
            .counters
            .processed
            .fetch_add(which.len() as u64, Ordering::Relaxed);
        let mut lanes = delivery.lanes(ack, flow_control, self.0.partition_key());
        let sized = self.0.sized_by();
        lanes.reserve(sized.size_hint(which.len()), which.len());
        self.0.format(msgs, which, &mut lanes);
        sized.learn_size(lanes.bytes(), which.len());
        lanes.push(outbox);
    }

    fn shutdown(&self) {
        self.0.delivery().shutdown();
    }
}

/// One delivery's batches, a lane each ([`Delivery::lanes`]).
pub(super) struct Lanes<'d> {
    batches: Vec<Batch>,
    delivery: &'d Delivery,
    /// Present with more than one lane.
    partition_key: Option<&'d Formatter>,
    /// The lane of every message when there is no partition key.
    turn: usize,
    /// A message's partition key, made again for each.
    key: Vec<u8>,
}

impl Lanes<'_> {
    /// The batch `msg` goes into.
    pub(super) fn batch_for(&mut self, msg: &LogMessage) -> &mut Batch {
        let lane = match self.partition_key {
            Some(key) => {
                self.key.clear();
                key.append(msg, &mut self.key);
                crc32fast::hash(&self.key) as usize % self.delivery.workers
            }
            None => self.turn,
        };
        &mut self.batches[lane]
    }

    /// Makes room for `messages` of `bytes` in all, so that formatting them does not grow the
    /// batches by copying: in the lane they all go to, or spread over the lanes by a
    /// partition key.
    pub(super) fn reserve(&mut self, bytes: usize, messages: usize) {
        let lanes = match self.partition_key {
            Some(_) => &mut self.batches[..],
            None => std::slice::from_mut(&mut self.batches[self.turn]),
        };
        let n = lanes.len();
        for batch in lanes {
            batch.data.reserve(bytes / n);
            batch.ends.reserve(messages / n);
        }
    }

    /// The bytes of messages in the lanes' batches.
    pub(super) fn bytes(&self) -> usize {
        self.batches.iter().map(|b| b.data.len()).sum()
    }

    /// Queues each lane's batch that has messages, when the delivery commits.
    pub(super) fn push(self, outbox: &mut Outbox) {
        for (i, batch) in self.batches.into_iter().enumerate() {
            if !batch.is_empty() {
                let queue = self.delivery.queue(i).clone();
                outbox.push(move || queue.push(batch));
            }
        }
    }
}

/// What a lane hands over on a reload: its queue and its connection.
type Handover = (Arc<dyn BatchQueue>, Option<Connection>);

/// One worker: its queue and its sender.
struct Lane {
    queue: Arc<dyn BatchQueue>,
    /// The disk buffer's directory; `None`: the queue is in memory.
    dir: Option<PathBuf>,
    /// Started on the lane's first batch, or at once when its disk buffer has messages from
    /// before or it was taken over.
    sender: OnceLock<()>,
    thread: Mutex<Option<JoinHandle<Option<Connection>>>>,
    /// The connection of the lane this one took over, for its sender to go on with.
    inherited: Mutex<Option<Connection>>,
}

impl Delivery {
    pub(super) fn new(
        label: Arc<str>,
        servers: Arc<dyn Servers>,
        pacing: Pacing,
        counters: DestCounters,
        disk_buffer: Option<(DiskBufferOptions, String)>,
        workers: usize,
    ) -> Delivery {
        Delivery {
            label,
            servers,
            pacing,
            counters,
            disk_buffer,
            workers: workers.max(1),
            lanes: OnceLock::new(),
            retire: Arc::default(),
            handed_over: AtomicBool::new(false),
            reported_drops: Arc::default(),
            next_lane: AtomicUsize::new(0),
        }
    }

    /// The batches of one delivery, a lane each, for messages that go to the lane of their
    /// `partition_key` (`worker-partition-key()`: the same key, the same lane, in order) or,
    /// without one, all to one lane, the next in turn.
    #[cfg_attr(not(any(feature = "http", feature = "kafka")), allow(dead_code))]
    pub(super) fn lanes<'d>(
        &'d self,
        ack: &Ack,
        flow_control: bool,
        partition_key: Option<&'d Formatter>,
    ) -> Lanes<'d> {
        let batches = (0..self.workers)
            .map(|_| Batch::new(flow_control.then(|| ack.clone())))
            .collect();
        let partition_key = partition_key.filter(|_| self.workers > 1);
        let turn = match partition_key {
            None if self.workers > 1 => {
                self.next_lane.fetch_add(1, Ordering::Relaxed) % self.workers
            }
            _ => 0,
        };
        Lanes {
            batches,
            delivery: self,
            partition_key,
            turn,
            key: Vec::new(),
        }
    }

    /// Starts the lanes of a destination of kind `D`, taking over those of `previous` when it
    /// is one too (the destination of the same name before a reload): `delivery_of` finds them.
    pub(super) fn start_after<D: 'static>(
        &self,
        state_dir: &Path,
        previous: Option<&Arc<dyn Destination>>,
        delivery_of: fn(&D) -> &Delivery,
    ) -> std::io::Result<()> {
        let previous = previous.and_then(|p| p.as_any().downcast_ref::<D>());
        self.start(state_dir, previous.map(delivery_of))
    }

    /// Opens the lanes' queues, or takes over those of `previous` (the destination of the
    /// same name before a reload) when they are kept in the same places.
    pub(super) fn start(
        &self,
        state_dir: &Path,
        previous: Option<&Delivery>,
    ) -> std::io::Result<()> {
        let dirs: Vec<Option<PathBuf>> = (0..self.workers)
            .map(|i| {
                self.disk_buffer.as_ref().map(|(opts, name)| {
                    opts.dir
                        .as_deref()
                        .unwrap_or(state_dir)
                        .join(lane_dir_name(name, i))
                })
            })
            .collect();
        let inherited = previous.and_then(|old| old.hand_over(&dirs));
        let taken_over = inherited.is_some();
        let mut inherited = inherited.map(Vec::into_iter);
        let mut lanes = Vec::with_capacity(self.workers);
        for dir in dirs {
            let (queue, conn): (Arc<dyn BatchQueue>, _) = match (inherited.as_mut(), &dir) {
                (Some(old), _) => old.next().expect("as many lanes"),
                (None, None) => (
                    Arc::new(Queue::new(self.pacing.log_fifo_size, self.counters.clone())),
                    None,
                ),
                (None, Some(dir)) => (
                    DiskQueue::open(
                        self.label.clone(),
                        dir.clone(),
                        self.disk_buffer.as_ref().expect("a buffer").0.clone(),
                        self.counters.clone(),
                    )
                    .map_err(|e| {
                        std::io::Error::new(e.kind(), format!("disk buffer {}: {e}", dir.display()))
                    })?,
                    None,
                ),
            };
            lanes.push(Lane {
                queue,
                dir,
                sender: OnceLock::new(),
                thread: Mutex::new(None),
                inherited: Mutex::new(conn),
            });
        }
        if self.lanes.set(lanes).is_err() {
            return Ok(()); // started already
        }
        for i in 0..self.workers {
            if taken_over || self.lane(i).queue.has_backlog() {
                self.start_sender(i);
            }
        }
        Ok(())
    }

    /// Lane `i`'s queue, its sender started.
    pub(super) fn queue(&self, i: usize) -> &Arc<dyn BatchQueue> {
        self.start_sender(i);
        &self.lane(i).queue
    }

    fn lane(&self, i: usize) -> &Lane {
        &self
            .lanes
            .get()
            .expect("a destination is started before it is given messages")[i]
    }

    /// Gives the lanes to a reload's destination when it keeps them in the same places
    /// (`dirs`): each sender puts back what it holds and stops; what readers still deliver
    /// here goes on into the same queues.
    fn hand_over(&self, dirs: &[Option<PathBuf>]) -> Option<Vec<Handover>> {
        let lanes = self.lanes.get()?;
        if lanes.len() != dirs.len() || lanes.iter().zip(dirs).any(|(l, d)| &l.dir != d) {
            return None;
        }
        self.retire.store(true, Ordering::SeqCst);
        let taken = lanes
            .iter()
            .map(|lane| {
                let thread = lane.thread.lock().expect("thread lock").take();
                let conn = thread.and_then(|t| t.join().ok().flatten());
                (lane.queue.clone(), conn)
            })
            .collect();
        self.handed_over.store(true, Ordering::SeqCst);
        Some(taken)
    }

    fn start_sender(&self, i: usize) {
        let lane = self.lane(i);
        lane.sender.get_or_init(|| {
            // A connection taken over goes on if it reaches one of this destination's
            // servers; a new one starts at the lane's share of them.
            let count = self.servers.count();
            let inherited = lane.inherited.lock().expect("conn lock").take();
            let (conn, server) = inherited
                .and_then(|c| {
                    let at = (0..count).find(|&s| self.servers.name(s) == c.to)?;
                    Some((Some(c.link), at))
                })
                .unwrap_or((None, i % count));
            let sender = Sender {
                label: self.label.clone(),
                servers: self.servers.clone(),
                gather: self.servers.gather(),
                pacing: self.pacing.clone(),
                queue: lane.queue.clone(),
                conn,
                server,
                good_probes: 0,
                last_probe: Instant::now(),
                reported_drops: self.reported_drops.clone(),
                failing: None,
                retire: self.retire.clone(),
            };
            let handle = std::thread::Builder::new()
                .name("sender".into())
                .spawn(move || sender.run())
                .expect("spawning a sender thread");
            *lane.thread.lock().expect("thread lock") = Some(handle);
        });
    }

    /// Sends what is queued and stops the senders, unless a reload's destination took the
    /// lanes over.
    pub(super) fn shutdown(&self) {
        if self.handed_over.load(Ordering::SeqCst) {
            return; // the queues live on with the destination that took them over
        }
        let Some(lanes) = self.lanes.get() else {
            return;
        };
        for lane in lanes {
            lane.queue.stop();
        }
        for lane in lanes {
            let thread = lane.thread.lock().expect("thread lock").take();
            if let Some(t) = thread {
                let _ = t.join();
            }
        }
    }
}

/// The disk buffer directory of lane `i`: the first lane's is `name` (as with one worker),
/// the others' are numbered: `sluice-d.rdq`, `sluice-d-1.rdq`, …
fn lane_dir_name(name: &str, i: usize) -> String {
    match (i, name.rsplit_once('.')) {
        (0, _) => name.to_string(),
        (_, Some((stem, ext))) => format!("{stem}-{i}.{ext}"),
        (_, None) => format!("{name}-{i}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_lane_keeps_the_buffer_name_of_one_worker() {
        assert_eq!(lane_dir_name("sluice-d.rdq", 0), "sluice-d.rdq");
        assert_eq!(lane_dir_name("sluice-d.rdq", 2), "sluice-d-2.rdq");
    }
}
