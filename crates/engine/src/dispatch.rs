//! From a batch of parsed messages to destination queues.
//!
//! Every reader hands the messages of one read to [`Dispatcher::route`]. The router decides
//! per message which destinations it reaches; each destination then formats the whole batch's
//! share at once, in the caller's thread, and leaves the queue operations in an [`Outbox`]
//! together with the batch's [`Ack`]. The reader commits the outbox when every earlier read of
//! the same connection has been committed, so reads of one connection may be parsed and
//! formatted on different cores and still reach each file in order.

use crate::destinations::{Destination, Outbox};
use crate::window::Ack;
use sluice_model::path::{PathTally, SourceId, Stateful};
use sluice_model::{LogMessage, Router};
use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

/// What all readers share: the routing graph and the destinations it names.
pub struct Dispatcher {
    pub router: Router,
    pub destinations: Vec<Arc<dyn Destination>>,
    pub counted: DispatchCounters,
    /// Which configuration this is: 0 at start, one more with each reload.
    pub generation: u64,
    /// The id this configuration gives each source name (readers that outlive a reload look
    /// theirs up again).
    pub source_ids: Vec<(Arc<str>, SourceId)>,
    /// Held while a read of a local source is routed and committed, when some destination
    /// numbers local messages; `None` when none does.
    pub numbering: Option<Mutex<()>>,
    /// How each listener (by its name in the statistics) parses: connections that outlive a
    /// reload take their listener's new options from here.
    pub ingests: Vec<(Arc<str>, Arc<sluice_model::Ingest>)>,
}

/// The dispatcher readers use now. A reload replaces it; a reader takes it once per read.
pub struct Current(RwLock<Arc<Dispatcher>>);

impl Current {
    pub fn new(d: Arc<Dispatcher>) -> Current {
        Current(RwLock::new(d))
    }

    pub fn get(&self) -> Arc<Dispatcher> {
        self.0.read().expect("dispatcher lock").clone()
    }

    /// Puts `d` in place and returns the one it replaces.
    pub fn replace(&self, d: Arc<Dispatcher>) -> Arc<Dispatcher> {
        std::mem::replace(&mut *self.0.write().expect("dispatcher lock"), d)
    }
}

/// syslog-ng's `center` counters, and each destination statement's `processed`.
#[derive(Default)]
pub struct DispatchCounters {
    /// `stats-level()`: from 2 on, messages are also counted by host, sender and program.
    pub level: u8,
    pub registry: Arc<crate::stats::Registry>,
    pub received: Arc<AtomicU64>,
    /// Received messages that reached no destination: filtered out, stopped by a parser or
    /// `flags(final)` before any, or from a source no log path reads (`center;;unrouted`).
    /// Routing, not a drop: `sluice ctl ledger` counts them apart.
    pub unrouted: Arc<AtomicU64>,
    pub queued: Arc<AtomicU64>,
    /// Indexed like `destinations`.
    pub destinations: Vec<Arc<AtomicU64>>,
    /// Per top-level log path, in the configuration's order: the messages offered to it
    /// (`path;log#N;FILE:LINE;a;processed`) and those that went through it (`…;routed`).
    pub paths: Vec<(Arc<AtomicU64>, Arc<AtomicU64>)>,
}

/// Per-thread buffers reused from batch to batch.
#[derive(Default)]
struct Scratch {
    routed: Vec<Vec<u32>>,
    /// Per destination: some message of the batch reached it on a flow-controlled path (the
    /// whole share is then delivered flow-controlled: mixed shares are rare, and this way
    /// nothing a flow-controlled path carries can be dropped).
    flow_control: Vec<bool>,
    filter: Vec<u8>,
    /// What each top-level path did with the batch, counted once per batch.
    paths: Vec<PathTally>,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::default();
}

impl Dispatcher {
    /// The parsing options of the listener `listener` (see [`Dispatcher::ingests`]).
    pub fn ingest_of(&self, listener: &str) -> Option<&Arc<sluice_model::Ingest>> {
        if listener.is_empty() {
            return None;
        }
        self.ingests
            .iter()
            .find(|(name, _)| &**name == listener)
            .map(|(_, ingest)| ingest)
    }

    pub fn source_id(&self, name: &str) -> Option<SourceId> {
        self.source_ids
            .iter()
            .find(|(n, _)| &**n == name)
            .map(|(_, id)| *id)
    }

    /// A destination numbers local messages as they are queued (syslog-ng's writer numbers
    /// them as written): a read of a local source takes its numbers and queues its messages
    /// while holding this, after every earlier read of its connection is queued, so that the
    /// numbers follow each other in the order written. `None` when no numbers are needed:
    /// reads are then formatted in parallel.
    pub fn in_order(&self, local: bool) -> Option<MutexGuard<'_, ()>> {
        let numbering = self.numbering.as_ref().filter(|_| local)?;
        Some(numbering.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Routes `msgs` and queues them with their destinations at once, under credits the
    /// caller took. For readers with one batch in flight at a time.
    pub fn dispatch(&self, msgs: &mut Vec<LogMessage>, ack: &Ack) {
        let _numbered = self.in_order(msgs.first().is_some_and(|m| m.origin.local));
        let mut outbox = Outbox::default();
        self.route(msgs, ack, &mut outbox);
        outbox.commit();
    }

    /// Routes and formats `msgs` under an acknowledgement the caller already holds; what is
    /// to be queued waits in `outbox` until the caller commits it. Rewrite rules on the way
    /// append their versions of messages to `msgs`.
    pub fn route(&self, msgs: &mut Vec<LogMessage>, ack: &Ack, outbox: &mut Outbox) {
        self.counted
            .received
            .fetch_add(msgs.len() as u64, Ordering::Relaxed);
        self.counted
            .registry
            .count_messages(self.counted.level, msgs);
        self.route_and_deliver(msgs, None, ack, outbox);
    }

    /// Routes `msgs`, made by parser `by` of `stateful` when its contexts ended, from that
    /// parser on, and queues them with their destinations at once.
    pub fn resume(&self, stateful: &Stateful, by: usize, msgs: &mut Vec<LogMessage>, ack: &Ack) {
        let mut outbox = Outbox::default();
        self.route_and_deliver(msgs, Some((stateful, by)), ack, &mut outbox);
        outbox.commit();
    }

    /// Routes each message, from the top of the log paths or from a parser (`from`), and
    /// hands each destination its share.
    fn route_and_deliver(
        &self,
        msgs: &mut Vec<LogMessage>,
        from: Option<(&Stateful, usize)>,
        ack: &Ack,
        outbox: &mut Outbox,
    ) {
        SCRATCH.with_borrow_mut(|scratch| {
            let n = self.destinations.len();
            scratch.routed.resize_with(n, Vec::new);
            scratch.flow_control.resize(n, false);
            scratch
                .paths
                .resize(self.router.path_count(), PathTally::default());
            let source = msgs.first().map(|m| m.origin.source_id);
            let fixed = source
                .and_then(|s| self.router.fixed_route(s))
                .filter(|_| from.is_none())
                .filter(|_| msgs.iter().all(|m| Some(m.origin.source_id) == source));
            let mut unrouted = 0;
            if let Some(fixed) = fixed {
                // Every message goes the same way: no need to ask per message.
                let route = &fixed.destinations;
                for &p in &fixed.paths {
                    scratch.paths[p].offered += msgs.len() as u64;
                    scratch.paths[p].routed += msgs.len() as u64;
                }
                for &(dest, flow_control) in route {
                    scratch.routed[dest as usize].extend(0..msgs.len() as u32);
                    scratch.flow_control[dest as usize] |= flow_control;
                }
                if route.is_empty() {
                    unrouted = msgs.len();
                }
            } else {
                // Rewrites append versions of a message to `msgs`: only those received are
                // looked at, each with all its versions.
                for i in 0..msgs.len() {
                    let (routed, flow) = (&mut scratch.routed, &mut scratch.flow_control);
                    let mut reached = false;
                    let out = &mut |dest: u32, version, flow_control| {
                        routed[dest as usize].push(version);
                        flow[dest as usize] |= flow_control;
                        reached = true;
                    };
                    match from {
                        None => {
                            self.router
                                .route(msgs, i, &mut scratch.filter, out, &mut scratch.paths)
                        }
                        Some((stateful, by)) => {
                            self.router
                                .resume(stateful, by, msgs, i, &mut scratch.filter, out)
                        }
                    }
                    unrouted += usize::from(!reached);
                }
            }
            if unrouted > 0 && from.is_none() {
                self.counted
                    .unrouted
                    .fetch_add(unrouted as u64, Ordering::Relaxed);
            }
            for (tally, (offered, routed)) in scratch.paths.iter_mut().zip(&self.counted.paths) {
                if tally.offered > 0 {
                    // Offered first: the ledger reads `routed` before it, so that a reading
                    // under load never shows more routed than offered.
                    offered.fetch_add(tally.offered, Ordering::Relaxed);
                    routed.fetch_add(tally.routed, Ordering::Relaxed);
                    *tally = PathTally::default();
                }
            }
            for (d, dest) in self.destinations.iter().enumerate() {
                let indices = &mut scratch.routed[d];
                if !indices.is_empty() {
                    let routed = indices.len() as u64;
                    self.counted.queued.fetch_add(routed, Ordering::Relaxed);
                    if let Some(c) = self.counted.destinations.get(d) {
                        c.fetch_add(routed, Ordering::Relaxed);
                    }
                    // A source that acknowledges to its sender (RELP) holds every path to
                    // flow control's guarantee.
                    let flow_control = scratch.flow_control[d] || ack.acknowledged();
                    dest.deliver(msgs, indices, ack, flow_control, outbox);
                    indices.clear();
                    scratch.flow_control[d] = false;
                }
            }
        });
    }
}
