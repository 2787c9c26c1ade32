//! The sender of a destination that talks to a server: one thread that takes what readers
//! queued (a [`BatchQueue`]: in memory, or a disk buffer), keeps a connection to one of its
//! [`Servers`], and sends through the connection's [`Wire`](super::link::Wire).
//!
//! A connection that fails is opened again through the servers in turn (the primary, then the
//! `failover()` ones), waiting `time-reopen()` after each round that fails; batches wait in
//! the queue meanwhile and are sent again from the first message the failed write did not
//! finish. With `failback()` the sender probes the primary while it uses a failover server,
//! and returns to it after `successful-probes-required()` probes in a row. Stopping, a peer
//! that takes nothing is given [`STOP_GRACE`](super::link::STOP_GRACE); handing over to a
//! reload's destination, the sender puts back what it took and gives up its connection.
//!
//! What a destination adds is its [`Servers`]: how many, their names, and how to open a
//! connection with its wire to one ([`super::network`] for TCP, UDP, TLS, unix sockets and
//! RELP).

use super::link::{Connected, Failure, Position, TICK};
use super::queue::{Batch, BatchQueue};
use crate::own_log;
use crate::stats::DropReason;
use std::io::ErrorKind;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A streak of failed connects: the first failure is reported, then once a minute, and each
/// new reason (of each server) when it first happens.
pub(super) struct Failing {
    since: Instant,
    said_at: Option<Instant>,
    said: Vec<String>,
}

impl Failing {
    fn new() -> Failing {
        Failing {
            since: Instant::now(),
            said_at: None,
            said: Vec::new(),
        }
    }

    /// Whether `why` is to be reported now.
    fn worth_saying(&mut self, why: String) -> bool {
        if self.said_at.is_none_or(|at| at.elapsed() >= REPORT_AGAIN) {
            self.said_at = Some(Instant::now());
            self.said.clear();
        } else if self.said.contains(&why) {
            return false;
        }
        self.said.push(why);
        true
    }
}

/// What became of batches handed over, once the sender waited for them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Settled {
    Yes,
    /// The wire failed, and they were sent again on another connection.
    SentAgain,
    /// Stopping or handing over, and no server took them: still held.
    Not,
}

/// Whether a sender gives up what it waits for: sluice stops (`stopping`, or the queue was
/// told to), or a reload's destination takes over (`retire`).
fn giving_up(stopping: bool, queue: &dyn BatchQueue, retire: &AtomicBool) -> bool {
    stopping || queue.is_stopping() || retire.load(Ordering::SeqCst)
}

/// The most a sender gathers for one write, unless its servers say less
/// ([`Servers::gather`]).
pub(super) const MAX_GATHER: usize = 4 << 20;

/// Where a sender sends: its servers, and how to open a connection to one.
pub(super) trait Servers: Send + Sync + 'static {
    /// How many: the primary, then the failover ones.
    fn count(&self) -> usize;
    /// How messages name server `i`: `tcp:10.0.0.1:514`.
    fn name(&self, i: usize) -> String;
    /// Opens a connection to server `i`, with the wire the destination speaks on it.
    fn open(&self, i: usize) -> std::io::Result<Connected>;
    /// Whether server `i` answers again (a failback probe).
    fn probe(&self, i: usize) -> bool;
    /// Whether a sender opens its connection when it starts rather than with its first
    /// messages: a client library that connects in the background (Kafka's, whose idempotent
    /// producer takes a second to get its producer id) gets that second before the load.
    fn connect_at_start(&self) -> bool {
        false
    }
    /// The most a sender gathers for one send (the bytes of its messages, at least one).
    fn gather(&self) -> usize {
        MAX_GATHER
    }
}

/// How a sender paces itself: `time-reopen()`, `failback()`, `retries()`, how long it
/// waits to fill a batch, and the `log-fifo-size()` its drop reports name.
#[derive(Clone, Debug)]
pub(super) struct Pacing {
    pub(super) time_reopen: Duration,
    pub(super) failback: Option<Failback>,
    /// How many times messages a server asked for again later are sent before they are
    /// dropped (`retries()`, at least 1).
    pub(super) retries: u32,
    pub(super) batch: Batching,
    pub(super) log_fifo_size: usize,
}

/// syslog-ng's `batch-lines()`, `batch-bytes()` and `batch-timeout()`: how much a request
/// carries, and how long a sender waits for that much.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Batching {
    /// Messages a request carries at most; 0: no limit.
    pub lines: usize,
    /// Bytes of messages a request carries at most (at least one message); 0: no limit.
    pub bytes: usize,
    /// How long a sender with less than a full batch waits for more; zero: it sends what
    /// there is.
    pub timeout: Duration,
}

impl Batching {
    /// Whether `messages` of `bytes` fill a batch.
    fn full(&self, messages: usize, bytes: usize) -> bool {
        (self.lines > 0 && messages >= self.lines) || (self.bytes > 0 && bytes >= self.bytes)
    }
}

/// `failback()`: return to the primary server once it answers again.
#[derive(Clone, Debug)]
pub struct Failback {
    pub probe_interval: Duration,
    pub successful_probes: u32,
}

/// The thread that owns a destination's connection.
pub(super) struct Sender {
    pub(super) label: Arc<str>,
    /// Where it sends.
    pub(super) servers: Arc<dyn Servers>,
    /// The most it gathers for one send: [`Servers::gather`].
    pub(super) gather: usize,
    pub(super) pacing: Pacing,
    pub(super) queue: Arc<dyn BatchQueue>,
    pub(super) conn: Option<Connected>,
    /// The server in use (or tried next): an index into [`Servers`].
    pub(super) server: usize,
    /// Probes of the primary server that connected in a row, while on a failover server.
    pub(super) good_probes: u32,
    pub(super) last_probe: Instant,
    /// Drops said so far, shared by the senders of one destination (its workers).
    pub(super) reported_drops: Arc<AtomicU64>,
    /// Since when no server accepts connections, and what was said of it.
    pub(super) failing: Option<Failing>,
    pub(super) retire: Arc<AtomicBool>,
}

/// How often a server that stays unreachable is reported again.
const REPORT_AGAIN: Duration = Duration::from_secs(60);

impl Sender {
    /// Sends until the queue stops; when retired for a reload's destination, returns the
    /// connection (and the server it goes to) for that one to go on with.
    ///
    /// A wire that can hand batches over without waiting for the server's answer
    /// ([`Wire::hand_over`](super::link::Wire::hand_over): Kafka's) gets the next batches
    /// while the server answers for the previous ones: the sender hands the new ones over,
    /// then settles the old ones (their acknowledgements dropped only then), so two sends are
    /// in flight at most and the answers' wait overlaps the next send's work.
    pub(super) fn run(mut self) -> Option<Connection> {
        let mut batches: Vec<Batch> = Vec::new();
        // Handed over and not settled: taken before `batches`.
        let mut handed: Vec<Batch> = Vec::new();
        if self.conn.is_none() && self.servers.connect_at_start() {
            self.connect(false);
        }
        loop {
            let stopping = if handed.is_empty() {
                self.take(&mut batches)
            } else {
                // The server is answering for what was handed over: take only what is there.
                self.queue.take(Duration::ZERO, self.gather, &mut batches)
            };
            if self.retire.load(Ordering::SeqCst) {
                if self.finish_handed(&mut handed, stopping) == Settled::Not {
                    self.queue.put_back(&mut batches);
                    self.queue.put_back(&mut handed);
                    return self.give_connection();
                }
                self.queue.put_back(&mut batches);
                return self.give_connection();
            }
            self.report_drops();
            if handed.is_empty() {
                self.failback();
            }
            if batches.is_empty() {
                if !handed.is_empty() {
                    if self.finish_handed(&mut handed, stopping) == Settled::Not {
                        return self.give_up(&mut handed, &mut batches);
                    }
                    continue;
                }
                if stopping {
                    return None;
                }
                if self.conn.as_ref().is_some_and(|c| c.closed()) {
                    self.conn = None;
                }
                continue;
            }
            if !stopping && self.hand_over(&batches) {
                match self.finish_handed(&mut handed, stopping) {
                    Settled::Yes => {
                        handed = std::mem::take(&mut batches);
                        continue;
                    }
                    Settled::Not => return self.give_up(&mut handed, &mut batches),
                    // Sent again on another connection: what was just handed over went with
                    // the old one, and is sent the ordinary way below.
                    Settled::SentAgain => {}
                }
            } else if self.finish_handed(&mut handed, stopping) == Settled::Not {
                return self.give_up(&mut handed, &mut batches);
            }
            match self.send(&batches, stopping) {
                Some(pos) => self.delivered(&mut batches, &pos),
                None => return self.give_up(&mut handed, &mut batches),
            }
        }
    }

    /// `batches` are sent, but for the messages `at` counts as refused for good or given up
    /// after `retries()`.
    fn delivered(&mut self, batches: &mut Vec<Batch>, at: &Position) {
        let messages: usize = batches.iter().map(Batch::len).sum();
        let dropped = (at.refused + at.exhausted) as u64;
        // Off the queue first, then counted: the ledger reads outcomes before the queue.
        self.queue.done(batches);
        let counters = self.queue.counters();
        // Said when refused, not as a full queue's drops.
        self.reported_drops.fetch_add(dropped, Ordering::Relaxed);
        counters.drop(DropReason::Refused, at.refused as u64);
        counters.drop(DropReason::RetriesExhausted, at.exhausted as u64);
        counters
            .written
            .fetch_add(messages as u64 - dropped, Ordering::Relaxed);
    }

    /// Stopping or handing over with no server that takes `handed` (older) and `batches`: a
    /// reload's destination takes them over, else they are given up.
    fn give_up(&mut self, handed: &mut Vec<Batch>, batches: &mut Vec<Batch>) -> Option<Connection> {
        if self.retire.load(Ordering::SeqCst) {
            self.queue.put_back(batches);
            self.queue.put_back(handed);
            return self.give_connection();
        }
        handed.append(batches);
        let what = self.queue.abandon(handed);
        own_log::error(format!("{}: stopping with {what}", self.label));
        None
    }

    /// Hands `batches` over to a wire that sends without waiting; `false`: the wire cannot
    /// (or there is none, or it failed: then it is closed, and what it held is sent again).
    fn hand_over(&mut self, batches: &[Batch]) -> bool {
        let Some(conn) = self.conn.as_mut() else {
            return false;
        };
        let (queue, retire) = (&*self.queue, &*self.retire);
        match conn.hand_over(batches, &|| giving_up(false, queue, retire)) {
            Ok(handed) => handed,
            Err(_) => {
                self.conn = None;
                false
            }
        }
    }

    /// Waits until the server answered for `handed` and counts them; when the wire fails,
    /// sends them again on another connection.
    fn finish_handed(&mut self, handed: &mut Vec<Batch>, stopping: bool) -> Settled {
        if handed.is_empty() {
            return Settled::Yes;
        }
        let (queue, retire) = (&*self.queue, &*self.retire);
        let settled = self.conn.as_mut().map(|conn| {
            let mut pos = Position::default();
            conn.settle(handed, &mut pos, &|| giving_up(stopping, queue, retire))
                .map(|()| pos)
        });
        let why = match settled {
            Some(Ok(pos)) => {
                self.delivered(handed, &pos);
                return Settled::Yes;
            }
            Some(Err(Failure::Broken(e))) => {
                format!("error sending to {}: {e}", self.servers.name(self.server))
            }
            Some(Err(Failure::Later { why, .. })) => why,
            None => "no connection".into(),
        };
        // What the wire held went with it: sent again on another connection, unless the
        // sender is giving up (then the reload's destination takes them, or they are lost).
        self.conn = None;
        if giving_up(stopping, queue, retire) {
            own_log::error(format!("{}: {why}", self.label));
            return Settled::Not;
        }
        own_log::error(format!("{}: {why}; sending again", self.label));
        match self.send(handed, stopping) {
            Some(pos) => {
                self.delivered(handed, &pos);
                Settled::SentAgain
            }
            None => Settled::Not,
        }
    }

    /// The connection in use, for the sender that takes over: going on with it keeps the
    /// messages in order at the server (a second connection would be read beside the first).
    fn give_connection(&mut self) -> Option<Connection> {
        let link = self.conn.take()?;
        Some(Connection {
            link,
            to: self.servers.name(self.server),
        })
    }

    /// Takes what is queued; with a `batch-timeout()`, waits that long for a full batch.
    /// Returns whether the queue is stopping.
    fn take(&mut self, batches: &mut Vec<Batch>) -> bool {
        let mut stopping = self.queue.take(TICK, self.gather, batches);
        let batch = self.pacing.batch;
        if batch.timeout.is_zero() || batches.is_empty() {
            return stopping;
        }
        let until = Instant::now() + batch.timeout;
        loop {
            let messages = batches.iter().map(Batch::len).sum();
            let bytes: usize = batches.iter().map(|b| b.data.len()).sum();
            let left = until.saturating_duration_since(Instant::now());
            if stopping || left.is_zero() || bytes >= self.gather || batch.full(messages, bytes) {
                return stopping;
            }
            stopping = self.queue.take(left, self.gather - bytes, batches);
        }
    }

    /// Sends `batches` until the servers answered for all of them, reconnecting as needed;
    /// returns where it ended, with how many of their messages were refused for good or
    /// given up after `retries()`. `None`: stopping (or
    /// handing over to a reload's destination) and no server takes them — a server that
    /// stalls then gets two grace periods, not one per reconnection.
    fn send(&mut self, batches: &[Batch], stopping: bool) -> Option<Position> {
        let mut pos = Position::default();
        let mut failed_while_giving_up = false;
        // Where a server last asked for messages again, and how many times in a row.
        let mut later: Option<(usize, usize, u32)> = None;
        loop {
            if self.conn.as_ref().is_some_and(|c| c.closed()) {
                self.conn = None;
            }
            if self.conn.is_none() && !self.connect(stopping) {
                return None;
            }
            let conn = self.conn.as_mut().expect("connected");
            // Asked again at every stall: a stop or a hand-over may come while a write waits.
            let (queue, retire) = (&*self.queue, &*self.retire);
            let result = conn.send(batches, &mut pos, &|| giving_up(stopping, queue, retire));
            let giving_up = giving_up(stopping, queue, retire);
            match result {
                Ok(()) => return Some(pos),
                Err(Failure::Later {
                    why,
                    messages,
                    again,
                }) => {
                    let tries = match later {
                        Some((batch, byte, n)) if (batch, byte) == (pos.batch, pos.byte) => n + 1,
                        _ => 1,
                    };
                    later = Some((pos.batch, pos.byte, tries));
                    let server = self.servers.name(self.server);
                    if tries >= self.pacing.retries {
                        own_log::error(format!(
                            "{}: {server} answered {why} to {again} messages {tries} times; dropping them (retries({}))",
                            self.label, self.pacing.retries
                        ));
                        pos.skip_messages(batches, messages);
                        pos.exhausted += again;
                        continue;
                    }
                    // Sooner for the first tries, at most time-reopen() apart.
                    let wait = (Duration::from_millis(100) * (1 << tries.min(16)))
                        .min(self.pacing.time_reopen);
                    own_log::warning(format!(
                        "{}: {server} answered {why}; sending {again} messages again in {:.1}s",
                        self.label,
                        wait.as_secs_f64()
                    ));
                    if giving_up || self.stop_requested_within(wait) {
                        return None;
                    }
                }
                Err(Failure::Broken(e)) => {
                    self.conn = None;
                    // Stopping or handing over: one more connection, not one per failure;
                    // none after a peer that took nothing for the grace (it is still there,
                    // taking nothing).
                    let again = !(giving_up
                        && (e.kind() == ErrorKind::TimedOut
                            || std::mem::replace(&mut failed_while_giving_up, true)));
                    own_log::error(format!(
                        "{}: error sending to {}: {e}{}",
                        self.label,
                        self.servers.name(self.server),
                        if again { "; reconnecting" } else { "" }
                    ));
                    if !again {
                        return None;
                    }
                    // The message the failed write was in is sent again whole.
                    pos.back_to_message_start(batches);
                }
            }
        }
    }

    /// Connects to the current server or, failing that, the next ones in turn; waits
    /// `time-reopen()` after a round in which none connects. Returns `false` when stopping
    /// and a whole round failed.
    fn connect(&mut self, mut stopping: bool) -> bool {
        let n = self.servers.count();
        loop {
            for _ in 0..n {
                // A stop whose grace is spent tries no more servers.
                if stopping && crate::stopping::grace_spent() {
                    return false;
                }
                match self.servers.open(self.server) {
                    Ok(sock) => {
                        if self.server != 0 {
                            own_log::warning(format!(
                                "{}: connected to failover server {}",
                                self.label,
                                self.servers.name(self.server)
                            ));
                        }
                        if let Some(Failing { since, .. }) = self.failing.take() {
                            own_log::notice(format!(
                                "{}: connected to {} after {:.0}s without a server",
                                self.label,
                                self.servers.name(self.server),
                                since.elapsed().as_secs_f64()
                            ));
                        }
                        self.conn = Some(sock);
                        self.good_probes = 0;
                        self.last_probe = Instant::now();
                        return true;
                    }
                    Err(e) => {
                        let why = format!("{} {e}", self.server);
                        let report = self
                            .failing
                            .get_or_insert_with(Failing::new)
                            .worth_saying(why);
                        if report {
                            own_log::error(format!(
                                "{}: cannot connect to {}: {e}; trying every {}s",
                                self.label,
                                self.servers.name(self.server),
                                self.pacing.time_reopen.as_secs()
                            ));
                        }
                        self.server = (self.server + 1) % n;
                    }
                }
            }
            if stopping {
                return false;
            }
            // Told to stop while waiting: one last round.
            stopping = self.stop_requested_within(self.pacing.time_reopen);
        }
    }

    /// Sleeps `wait` in small steps; returns whether the queue was told to stop meanwhile.
    fn stop_requested_within(&mut self, wait: Duration) -> bool {
        let until = Instant::now() + wait;
        while let Some(left) = until.checked_duration_since(Instant::now()) {
            self.report_drops();
            if giving_up(false, &*self.queue, &self.retire) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(100).min(left));
        }
        giving_up(false, &*self.queue, &self.retire)
    }

    /// While on a failover server, probes the primary every `tcp-probe-interval()` and
    /// returns to it after enough probes in a row connect.
    fn failback(&mut self) {
        let Some(fb) = &self.pacing.failback else {
            return;
        };
        if self.server == 0 || self.conn.is_none() || self.last_probe.elapsed() < fb.probe_interval
        {
            return;
        }
        self.last_probe = Instant::now();
        if self.servers.probe(0) {
            self.good_probes += 1;
        } else {
            self.good_probes = 0;
        }
        if self.good_probes >= fb.successful_probes {
            own_log::notice(format!(
                "{}: the primary server {} answers again; failing back to it",
                self.label,
                self.servers.name(0)
            ));
            self.conn = None;
            self.server = 0;
            self.good_probes = 0;
        }
    }

    /// Says once a tick how many messages a full queue dropped since it last said so.
    fn report_drops(&mut self) {
        let dropped = self.queue.counters().dropped.load(Ordering::Relaxed);
        let before = self.reported_drops.fetch_max(dropped, Ordering::Relaxed);
        if dropped > before {
            own_log::warning(format!(
                "{}: destination queue full (log-fifo-size({})); dropped {} messages",
                self.label,
                self.pacing.log_fifo_size,
                dropped - before
            ));
        }
    }
}

/// A sender's open connection, handed to the sender of a reload's destination: `to` is the
/// server it reaches ([`server_name`]).
pub struct Connection {
    pub(super) link: Connected,
    pub(super) to: String,
}
