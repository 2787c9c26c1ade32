//! Sources: where messages enter. Each driver runs as tokio tasks — one per listener, one per
//! connection, one per datagram socket — and every task follows the same loop:
//!
//! read a buffer → cut frames ([`FrameDecoder`]) → take window credits → parse each frame into
//! a `LogMessage` that borrows from the buffer → route and queue the batch → read again
//! (datagram sockets parse before they take credits).
//!
//! [`read_stream`] is that loop for byte streams (TCP, unix-stream, stdin); datagram sockets
//! have theirs in [`datagram`].

// The machinery drivers share: socket listeners, datagram sockets, RELP sessions, groups of
// sockets, change notices; what a driver is, and the registry of them.
pub mod datagram;
pub mod driver;
pub mod group;
pub mod notices;
pub mod registry;
pub mod relp;
pub mod stream;

// The drivers, a folder each; `registry::DRIVERS` lists them.
pub mod file;
pub mod internal;
#[cfg(feature = "kafka")]
pub mod kafka;
pub mod network;
pub mod pipe;
pub mod program;
#[cfg(feature = "sql")]
pub mod sql;
pub mod stdin;
pub mod system;
#[cfg(feature = "journal")]
pub mod systemd_journal;
pub mod udp_balancer;
pub mod unix;
pub mod wildcard_file;

use crate::destinations::Outbox;
use crate::dispatch::{Current, Dispatcher};
use crate::own_log as log;
use crate::window::{Ack, Delivered, Flow, Loan, ReadBudget, Window};
use bytes::{BufMut, Bytes, BytesMut};
use sluice_model::{Ingest, MessageVec, Origin, Today, UnixTime};
use sluice_protocol::framing::{Frame, FrameDecoder, Framing};
use sluice_protocol::multiline::MultiLine;
use std::cell::RefCell;
use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::{oneshot, watch};

/// A unix socket a source listens on: its path and who may write to it.
#[derive(Clone, Debug)]
pub struct UnixSocket {
    pub path: std::path::PathBuf,
    pub perm: u32,
    pub owner: Option<u32>,
    pub group: Option<u32>,
}

impl UnixSocket {
    /// Makes room for the socket: its directory exists, a stale socket is gone. Anything
    /// else at the path (a file, a directory, a link) is left and refused.
    pub fn make_room(&self) -> std::io::Result<()> {
        use std::os::unix::fs::FileTypeExt;
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        match std::fs::symlink_metadata(&self.path) {
            Ok(meta) if meta.file_type().is_socket() => std::fs::remove_file(&self.path),
            Ok(_) => Err(std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                "something that is not a socket is there; sluice does not remove it",
            )),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Gives the bound socket its mode and owner.
    pub fn apply_permissions(&self) -> std::io::Result<()> {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&self.path, std::fs::Permissions::from_mode(self.perm))?;
        if self.owner.is_some() || self.group.is_some() {
            std::os::unix::fs::chown(&self.path, self.owner, self.group)?;
        }
        Ok(())
    }

    /// Removes the socket file when the source stops.
    pub fn remove(&self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// How one reader cuts, parses and paces its input.
#[derive(Clone, Debug)]
pub struct ReaderSpec {
    pub framing: Framing,
    pub log_msg_size: usize,
    pub trim_large_messages: bool,
    /// `encoding()` other than UTF-8: messages are made UTF-8 before they are parsed.
    pub encoding: Option<crate::encoding::Charset>,
    /// Credits of one reader (`log-iw-size()` shared among `max-connections()`).
    pub window: u32,
    /// `flags(empty-lines)`: keep empty frames as messages.
    pub keep_empty: bool,
    /// `multi-line-mode()`: lines joined into records, and how long the last one waits for
    /// more before it is a record (`multi-line-timeout()`).
    pub multi_line: Option<(Arc<MultiLine>, Duration)>,
    /// What the source's readers may hold in large reads, all connections together.
    pub budget: ReadBudget,
    pub ingest: Arc<Ingest>,
    pub counted: SourceCounters,
    /// The listener's name in the statistics (`afsocket_sd.(stream,AF_INET(…))`): a
    /// connection kept across a reload parses with the options the new configuration gives
    /// the listener of this name ([`Dispatcher::ingest_of`]). Empty for stdin and internal.
    pub listener: Arc<str>,
}

impl ReaderSpec {
    /// A reader's window of credits, shown in its source's flow gauges.
    pub fn window(&self) -> Window {
        Window::watched(self.window, self.counted.flow.clone())
    }
}

/// A source as start, reload and shutdown see it: every kind alike (a stream or datagram
/// listener, `stdin()`, `internal()`). It gets ready first ([`Source::bind`]: binding, which
/// can fail the start or reload before anything changed), then runs until it is retired or
/// sluice stops.
pub trait Source: Send + Sync + 'static {
    /// The source statement it belongs to.
    fn source_name(&self) -> &Arc<str>;
    /// What it reads. At a reload, a new source at the place of a retiring one takes over
    /// what that one holds there.
    fn place(&self) -> Place;
    /// Gets ready to run: binds, or takes over `held` (what its predecessor at the same
    /// place handed over, [`Ready::hand_over`]).
    fn bind(self: Arc<Self>, held: Option<Held>) -> std::io::Result<Box<dyn Ready>>;
    /// How its readers read, when they read bytes: a reload gives the readers that outlive
    /// their source (connections, `stdin()`) the parsing options of its successor.
    fn reader(&self) -> Option<&ReaderSpec> {
        None
    }
    /// The unix socket it makes, if any.
    fn unix_path(&self) -> Option<&std::path::Path> {
        None
    }
    /// The descriptors it holds while it runs (its sockets and their copies, files).
    fn descriptors(&self) -> usize {
        1
    }
    /// The most connections it may hold besides, each a descriptor (`max-connections()`).
    fn connections(&self) -> usize {
        0
    }
    /// A configuration may hold one source of its kind (`stdin()`, `internal()`).
    fn one_per_configuration(&self) -> bool {
        false
    }
}

/// A source bound and ready to run.
pub trait Ready: Send {
    /// Second descriptors of what it holds (its sockets), kept for a successor after a
    /// reload; none for a source that holds nothing a successor could take.
    fn hand_over(&self) -> Vec<OwnedFd> {
        Vec::new()
    }
    /// Runs until `retire` says how to stop accepting (or `ctx` stops everything); what it
    /// accepted (connections) goes on until `ctx` stops them or their peers close.
    fn run(
        self: Box<Self>,
        ctx: Context,
        retire: watch::Receiver<Retire>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;
}

/// What a source retiring at a reload hands the new source at its place.
pub struct Held {
    /// Second descriptors of its sockets (at least one).
    pub sockets: Vec<OwnedFd>,
    /// Both belong to a source statement of this name: what the retiring one accepted
    /// (connections, a reader of stdin) goes on under the new one.
    pub same_source: bool,
}

/// Where a source reads: its kind (`stream`, `dgram`, `stdin`, `internal`) and address, as
/// people write it (`0.0.0.0:514/tcp`, a socket's path).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Place {
    pub kind: &'static str,
    pub address: String,
}

impl std::fmt::Display for Place {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.address)
    }
}

/// How a listener stops accepting, at a reload that changed or removed its source.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Retire {
    Serving,
    /// A successor serves the same socket: leave it open (and a unix socket's path).
    HandOver,
    /// Nothing listens there any more: close the socket (and remove a unix socket's path).
    Close,
}

impl Retire {
    /// Waits until the listener is to stop: how, `Close` when everything stops.
    pub async fn wait(
        retire: &mut watch::Receiver<Retire>,
        shutdown: &mut watch::Receiver<bool>,
    ) -> Retire {
        tokio::select! {
            _ = shutdown.wait_for(|stop| *stop) => Retire::Close,
            how = retire.wait_for(|r| *r != Retire::Serving) => how.map_or(Retire::Close, |r| *r),
        }
    }
}

/// What a source driver counts: its own `processed` and its source statement's, and the bad
/// input its readers met (SPEC §6: counted, and shown by `sluice ctl stats`).
#[derive(Clone, Debug, Default)]
pub struct SourceCounters {
    pub driver: Arc<AtomicU64>,
    pub source: Arc<AtomicU64>,
    /// Messages longer than `log-msg-size()`, split or cut: `oversized_messages`.
    pub oversized: Arc<AtomicU64>,
    /// Connections closed for a frame or PROXY header that cannot be read: `framing_errors`.
    pub framing_errors: Arc<AtomicU64>,
    /// Empty lines, lone NULs and zero-length frames dropped: `empty_messages`.
    pub empty: Arc<AtomicU64>,
    /// The readers' credits and waits: `window_in_use`, `paused_readers`, `paused_since`.
    pub flow: Flow,
}

impl SourceCounters {
    pub fn add(&self, n: usize) {
        self.driver.fetch_add(n as u64, Ordering::Relaxed);
        self.source.fetch_add(n as u64, Ordering::Relaxed);
    }
}

/// What every reader needs from the running engine.
#[derive(Clone)]
pub struct Context {
    /// The configuration's routing now: a reader takes it once per read.
    pub dispatcher: Arc<Current>,
    /// Becomes `true` when sluice is stopping: readers stop reading and return.
    pub shutdown: watch::Receiver<bool>,
    /// A source that read all there is to read asks sluice to stop here (`stdin()` at the
    /// end of its input).
    pub finished: tokio::sync::mpsc::Sender<()>,
}

/// A reader's origin kept in step with reloads: a source keeps its name across configurations,
/// not necessarily its id.
pub struct Routed {
    origin: Arc<Origin>,
    generation: u64,
    /// The parsing options of the reader's listener in configuration `.0` (see
    /// [`Routed::ingest`]).
    ingest: Option<(u64, Arc<Ingest>)>,
}

impl Routed {
    pub fn new(origin: Arc<Origin>) -> Routed {
        Routed {
            origin,
            generation: u64::MAX,
            ingest: None,
        }
    }

    /// How a reader of `spec` parses under `d`: its listener's options in `d`'s
    /// configuration, looked up once per configuration (a connection kept across a reload
    /// takes the new ones), else the ones it started with.
    pub fn ingest(&mut self, d: &Dispatcher, spec: &ReaderSpec) -> Arc<Ingest> {
        match &self.ingest {
            Some((generation, ingest)) if *generation == d.generation => ingest.clone(),
            _ => {
                let ingest = d.ingest_of(&spec.listener).unwrap_or(&spec.ingest).clone();
                self.ingest = Some((d.generation, ingest.clone()));
                ingest
            }
        }
    }

    /// The origin to dispatch with under `d`; `None` when `d`'s configuration has no source of
    /// this name any more (the reader should stop).
    pub fn origin(&mut self, d: &Dispatcher) -> Option<&Arc<Origin>> {
        if d.generation != self.generation {
            let id = d.source_id(&self.origin.source_name)?;
            if id != self.origin.source_id {
                self.origin = Arc::new(Origin {
                    source_id: id,
                    ..(*self.origin).clone()
                });
            }
            self.generation = d.generation;
        }
        Some(&self.origin)
    }
}

/// How long a reader of a stopping server waits for a destination to take what it read (a
/// flow-controlled path to a server that is down, a full disk) before giving it up.
pub const STOP_GRACE: Duration = crate::stopping::GRACE;

impl Context {
    /// Takes `n` credits of `window`, waiting while destinations are behind. Once the server
    /// is stopping it waits at most [`STOP_GRACE`]; `None` then: what was read cannot be
    /// queued, and `peer`'s `n` messages are reported as lost.
    pub async fn credits(&self, window: &Window, n: u32, peer: &str) -> Option<Ack> {
        self.credits_from(window.take(n), n, peer).await
    }

    /// As [`Context::credits`], for a source that acknowledges to its sender
    /// ([`Window::take_acknowledged`]).
    pub async fn credits_acknowledged(
        &self,
        window: &Window,
        n: u32,
        peer: &str,
        delivered: oneshot::Sender<Delivered>,
    ) -> Option<Ack> {
        self.credits_from(window.take_acknowledged(n, delivered), n, peer)
            .await
    }

    async fn credits_from(
        &self,
        take: impl std::future::Future<Output = Ack>,
        n: u32,
        peer: &str,
    ) -> Option<Ack> {
        let ack = self.within_grace(take).await;
        if ack.is_none() {
            log::error(format!(
                "stopping: {n} messages read from {peer} were not queued: a destination with flow control took nothing for {}s",
                STOP_GRACE.as_secs()
            ));
        }
        ack
    }

    /// The end of a reader that keeps where it got to (a file, the journal): waits for what
    /// it read to be written and for `keeper` to keep the last position — once stopping, at
    /// most the grace, after which a later reader repeats those messages and none is lost —
    /// then writes the persist file.
    pub async fn keep_last(&self, window: &Window, keeper: tokio::task::JoinHandle<()>) {
        self.drained(window).await;
        let aborter = keeper.abort_handle();
        if self.within_grace(keeper).await.is_none() {
            aborter.abort();
        }
        crate::persist::sync();
    }

    /// Waits until `window` has every credit back (all its messages written), or, once the
    /// server is stopping, at most [`STOP_GRACE`].
    pub async fn drained(&self, window: &Window) {
        let _ = self.within_grace(window.drained()).await;
    }

    /// Waits for `wait`; once the server is stopping, at most [`STOP_GRACE`] more (`None`
    /// then).
    pub async fn within_grace<F: std::future::Future>(&self, wait: F) -> Option<F::Output> {
        let mut stop = self.shutdown.clone();
        tokio::select! {
            biased;
            done = wait => Some(done),
            _ = async {
                let _ = stop.wait_for(|s| *s).await;
                tokio::time::sleep(STOP_GRACE).await;
            } => None,
        }
    }
}

/// The smallest and largest read a stream reader asks for. A reader always waits for data
/// with the smallest, so idle connections cost little; once that fills, it reads up to its
/// read size more of what is there, borrowed from the read budget. The read size starts at
/// the largest (a new connection with 150 KB waiting takes it in one read, not four growing
/// ones), halves while reads bring less than a quarter of it, and quadruples while they
/// fill it.
const MIN_READ: usize = 4 << 10;
const MAX_READ: usize = 256 << 10;
/// Reads at least this large are parsed by a task of their own, in parallel with the next
/// read; smaller ones, when nothing is ahead of them, in the reader's task.
const PARALLEL_READ: usize = 64 << 10;
/// A source's [`ReadBudget`]: enough for a hundred connections' largest reads in flight, far
/// more than two cores need to keep busy.
pub const READ_BUDGET: usize = 32 << 20;

/// Reads `input` until end of stream, a framing error or shutdown, dispatching what it reads.
/// Returns once everything read has been queued (not necessarily written: wait on
/// `window.drained()` for that).
///
/// The reader only reads and cuts frames. A large read's frames are parsed, routed and
/// formatted by a task of their own, so a busy connection keeps two reads in flight (the
/// window lends each at most half its credits) and uses two cores; the tasks queue their
/// output in the order of the reads. A small read with no read ahead of it is handled in
/// place.
pub async fn read_stream<R: AsyncRead + Unpin>(
    mut input: R,
    origin: Arc<Origin>,
    spec: &ReaderSpec,
    window: &Window,
    ctx: &Context,
    peer: &str,
    mut positions: Option<&mut dyn Positions>,
) {
    let mut shutdown = ctx.shutdown.clone();
    let mut routed = Routed::new(origin);
    let mut decoder = FrameDecoder::new(spec.framing, spec.log_msg_size, spec.trim_large_messages);
    let mut buf = BytesMut::new();
    let mut read_size = MAX_READ;
    let mut frames = Vec::new();
    // Completes when the last read handed to a task has been queued.
    let mut queued: Option<oneshot::Receiver<()>> = None;
    // Bytes of the input the reads so far took (whole frames).
    let mut taken: u64 = 0;
    // With multi-line records: the lines cut, and when the open record is one anyway.
    let mut lines = Vec::new();
    let mut open_until: Option<tokio::time::Instant> = None;
    // What an unfinished frame holds past two small reads, from the memory budget.
    let mut unfinished = crate::memory::Unfinished::default();
    loop {
        // Wait for data with the smallest buffer; borrow the rest of a large read from the
        // source's budget once the small one filled, and take only what is there already.
        if !unfinished.room(&mut buf, MIN_READ, &mut shutdown).await {
            break;
        }
        let mut small = (&mut buf).limit(MIN_READ);
        let read = tokio::select! {
            biased;
            _ = shutdown.wait_for(|stop| *stop) => break,
            read = input.read_buf(&mut small) => Some(bytes_read(read, peer)),
            // The open multi-line record waited long enough.
            _ = tokio::time::sleep_until(open_until.unwrap_or_else(tokio::time::Instant::now)),
                if open_until.is_some() => None,
        };
        let flush = read.is_none();
        let mut n = read.unwrap_or(0);
        let mut loan = Loan::default();
        if n == MIN_READ && read_size > MIN_READ && unfinished.may_read(read_size - MIN_READ) {
            let more = read_size - MIN_READ;
            // Once sluice is stopping, what was read goes on without the rest of a large
            // read (and is queued, or reported lost, as any read).
            let lent = tokio::select! {
                biased;
                _ = shutdown.wait_for(|stop| *stop) => None,
                loan = spec.budget.lend(more) => Some(loan),
            };
            if let Some(lent) = lent {
                loan = lent;
                buf.reserve(more);
                let got = read_ready(&mut input, &mut buf, more, peer);
                loan.keep(got);
                n += got;
            }
        }
        let eof = n == 0 && !flush;
        if n == read_size && read_size < MAX_READ {
            read_size = (read_size * 4).min(MAX_READ);
        } else if n < read_size / 4 && read_size > MIN_READ {
            read_size /= 2;
        }
        // Empty lines, lone NULs and zero-length frames are no messages (as in syslog-ng),
        // unless `flags(empty-lines)`.
        let mut empty = 0;
        let keep = |f: Frame| {
            if f.range.is_empty() && !spec.keep_empty {
                empty += 1;
            } else {
                frames.push(f);
            }
        };
        let decoded = match &spec.multi_line {
            None => decoder.decode(&buf, eof, keep),
            Some((multi, wait)) => {
                lines.clear();
                decoder
                    .decode(&buf, eof, |f| lines.push(f))
                    .map(|consumed| {
                        let open = multi.join(&buf, &lines, eof || flush, spec.log_msg_size, keep);
                        // The open record is read again with what follows it.
                        open_until = open.map(|_| tokio::time::Instant::now() + *wait);
                        open.unwrap_or(consumed)
                    })
            }
        };
        if empty > 0 {
            spec.counted.empty.fetch_add(empty, Ordering::Relaxed);
        }
        // A framing error ends the connection, but the frames cut before it were accepted.
        let (consumed, failed) = match decoded {
            Ok(consumed) => (consumed, false),
            Err(e) => {
                spec.counted.framing_errors.fetch_add(1, Ordering::Relaxed);
                log::error(format!("closing connection from {peer}: {e}"));
                (frames.last().map_or(0, |f| f.range.end), true)
            }
        };
        if !frames.is_empty() {
            let big = consumed >= PARALLEL_READ;
            let chunk = buf.split_to(consumed).freeze();
            if buf.capacity() - buf.len() > MIN_READ {
                // The rest of a large read's buffer would keep all of it alive while the
                // connection waits: the unfinished frame moves to a buffer of its own.
                buf = BytesMut::from(&buf[..]);
            }
            let mut frames = take_frames(&mut frames);
            let chunk = match spec.encoding {
                Some(charset) => crate::encoding::frames(&chunk, &mut frames, charset),
                None => chunk,
            };
            let Some(read) = Read::new(chunk, frames, &mut routed, spec, ctx, peer) else {
                break;
            };
            taken += consumed as u64;
            let n = read.frames() as u32;
            let credits = match positions.as_mut() {
                Some(p) => {
                    let delivered = p.read_ends_at(taken);
                    ctx.credits_acknowledged(window, n, peer, delivered).await
                }
                None => ctx.credits(window, n, peer).await,
            };
            let Some(mut ack) = credits else {
                break;
            };
            ack.carry(loan);
            // A read before this one may still be on its way.
            let in_flight = queued
                .as_mut()
                .is_some_and(|q| q.try_recv() == Err(oneshot::error::TryRecvError::Empty));
            if !in_flight {
                queued = None;
            }
            if big || in_flight {
                let (done, next) = oneshot::channel();
                let after = queued.replace(next);
                tokio::spawn(read.dispatch(ack, after, done));
            } else {
                // A small read with nothing ahead of it: a task of its own would cost more
                // than it saves (thousands of quiet connections).
                read.parse_route_and_commit(&ack);
            }
        } else if consumed > 0 {
            taken += consumed as u64;
            let _ = buf.split_to(consumed);
        }
        // What is left is an unfinished frame: held, and charged, until the rest comes.
        unfinished.keep(&mut buf, MIN_READ);
        if eof || failed {
            break;
        }
    }
    if let Some(last) = queued {
        let _ = last.await;
    }
}

/// A reader of something on this host (a file, a program, a pipe, standard input): how it
/// parses, and the origin its messages carry.
#[derive(Clone, Debug)]
pub struct Local {
    pub reader: ReaderSpec,
    pub names: crate::dns::NameOptions,
    pub source_name: Arc<str>,
    pub source_id: u16,
}

impl Local {
    /// The origin of its messages: this host, with `pairs` (`$FILE_NAME`).
    pub fn origin(
        &self,
        pairs: Vec<(sluice_model::values::NameId, sluice_protocol::Text)>,
    ) -> Arc<Origin> {
        Arc::new(Origin {
            source_name: self.source_name.clone(),
            source_id: self.source_id,
            peer: None,
            host_from: crate::dns::local_name(self.names.use_fqdn),
            local: true,
            pairs,
            endpoints: Default::default(),
        })
    }
}

/// One reader per persist key (a file's path, a journal's namespace) at a time: a reload's
/// new source waits until the old one kept its last position.
pub(crate) fn turn(key: &str) -> Arc<tokio::sync::Mutex<()>> {
    static TURNS: Mutex<Option<HashMap<String, Arc<tokio::sync::Mutex<()>>>>> = Mutex::new(None);
    let mut turns = TURNS.lock().expect("turns lock");
    turns
        .get_or_insert_with(HashMap::new)
        .entry(key.to_string())
        .or_default()
        .clone()
}

/// A context whose readers stop when sluice stops or `retire` says so; and the task that
/// watches for that.
pub(crate) fn until_retired(
    ctx: &Context,
    mut retire: watch::Receiver<Retire>,
) -> (Context, tokio::task::JoinHandle<()>) {
    let (stop, stopped) = watch::channel(false);
    let mut shutdown = ctx.shutdown.clone();
    let watcher = tokio::spawn(async move {
        let _ = Retire::wait(&mut retire, &mut shutdown).await;
        let _ = stop.send(true);
    });
    let reading = Context {
        shutdown: stopped,
        ..ctx.clone()
    };
    (reading, watcher)
}

/// A batch a source's own reading thread hands on: the journal's entries, Kafka's records.
#[cfg_attr(not(any(feature = "journal", feature = "kafka")), allow(dead_code))]
pub(super) trait ThreadBatch: Send + 'static {
    /// What is kept once every destination delivered the batch: a cursor, offsets.
    type Place: Send + 'static;
    /// How many messages it holds (the credits it takes).
    fn len(&self) -> usize;
    /// Parses the batch into `msgs`, as `spec` and `ingest` say.
    fn messages<'a>(
        &'a self,
        spec: &ReaderSpec,
        ingest: &Ingest,
        origin: &'a Origin,
        recvd: UnixTime,
        msgs: &mut Vec<sluice_model::LogMessage<'a>>,
    );
    /// Where the input stands after the batch.
    fn place(&self) -> Self::Place;
}

/// Who parses and dispatches a reading thread's batches: the source's task alone (one), or
/// `tasks` tasks in parallel (`kafka(workers())`, less its reading thread), all taking from
/// one queue or each from a queue of its own that batches are dealt to in turn
/// (`separated-worker-queues(yes)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Workers {
    pub tasks: usize,
    pub separated: bool,
}

impl Workers {
    pub const ONE: Workers = Workers {
        tasks: 1,
        separated: false,
    };
}

/// A batch on its way to a worker, with the credits it holds.
#[cfg_attr(not(any(feature = "journal", feature = "kafka")), allow(dead_code))]
type Dealt<B> = (B, Ack);

/// Dispatches the batches a reading thread sends on `batches` until `ctx` stops (or the
/// thread ends). Each batch takes credits of `window`, held until every destination
/// delivered it, and its place goes to `kept` with the news of its delivery — both in the
/// order the batches were read, before a worker parses it, so that the keeper (which stores
/// places in that order, and only then gives the credits back) never waits for a batch
/// that waits for credits. `peer` names the source in what is said of a stop.
#[cfg_attr(not(any(feature = "journal", feature = "kafka")), allow(dead_code))]
pub(super) async fn dispatch_batches<B: ThreadBatch>(
    ctx: &Context,
    local: &Local,
    peer: &str,
    window: &Window,
    batches: &mut tokio::sync::mpsc::Receiver<B>,
    kept: &tokio::sync::mpsc::UnboundedSender<(B::Place, oneshot::Receiver<Delivered>)>,
    workers: Workers,
) {
    let mut routed = Routed::new(local.origin(Vec::new()));
    let mut queues = Vec::new();
    let mut tasks = tokio::task::JoinSet::new();
    if workers.tasks > 1 {
        let queue_count = if workers.separated { workers.tasks } else { 1 };
        let mut receivers = Vec::new();
        for _ in 0..queue_count {
            let (tx, rx) = tokio::sync::mpsc::channel::<Dealt<B>>(1);
            queues.push(tx);
            receivers.push(Arc::new(tokio::sync::Mutex::new(rx)));
        }
        for i in 0..workers.tasks {
            let queue = receivers[i % receivers.len()].clone();
            let (ctx, local) = (ctx.clone(), local.clone());
            tasks.spawn(async move {
                let mut routed = Routed::new(local.origin(Vec::new()));
                loop {
                    let next = queue.lock().await.recv().await;
                    let Some((batch, ack)) = next else {
                        break;
                    };
                    if !dispatch_batch(&ctx, &local, &mut routed, &batch, &ack) {
                        break;
                    }
                }
            });
        }
    }
    let mut shutdown = ctx.shutdown.clone();
    for turn in 0.. {
        let next = tokio::select! {
            biased;
            _ = shutdown.wait_for(|s| *s) => None,
            b = batches.recv() => b,
        };
        let Some(batch) = next else {
            break;
        };
        let (delivered, done) = oneshot::channel();
        let n = batch.len().min(u32::MAX as usize) as u32;
        let Some(ack) = ctx.credits_acknowledged(window, n, peer, delivered).await else {
            break;
        };
        let _ = kept.send((batch.place(), done));
        let dispatched = if queues.is_empty() {
            dispatch_batch(ctx, local, &mut routed, &batch, &ack)
        } else {
            match queues[turn % queues.len()].send((batch, ack)).await {
                Ok(()) => true,
                // Its worker stopped: the batch was not delivered, whatever the credits do.
                Err(returned) => {
                    (returned.0).1.fail();
                    false
                }
            }
        };
        if !dispatched {
            break;
        }
    }
    // The workers dispatch what they were dealt, and end.
    drop(queues);
    while tasks.join_next().await.is_some() {}
}

/// Parses `batch` and dispatches its messages, holding `ack`; `false` when the source is
/// not in the configuration any more: the batch is not delivered, and `ack` says so (its
/// credits go back without the keeper being told of a delivery).
#[cfg_attr(not(any(feature = "journal", feature = "kafka")), allow(dead_code))]
fn dispatch_batch<B: ThreadBatch>(
    ctx: &Context,
    local: &Local,
    routed: &mut Routed,
    batch: &B,
    ack: &Ack,
) -> bool {
    let dispatcher = ctx.dispatcher.get();
    let ingest = routed.ingest(&dispatcher, &local.reader);
    let Some(origin) = routed.origin(&dispatcher).cloned() else {
        ack.fail();
        return false;
    };
    let recvd = UnixTime::now(&ingest.local_zone);
    let mut msgs = Vec::new();
    batch.messages(&local.reader, &ingest, &origin, recvd, &mut msgs);
    local.reader.counted.add(msgs.len());
    dispatcher.dispatch(&mut msgs, ack);
    true
}

/// A reader whose place in its input is kept once what it read is delivered (a file): told
/// where each read ends, it gives the acknowledgement the read's messages hold until every
/// destination wrote them, as on a flow-controlled path.
pub trait Positions: Send {
    /// A read ends `end` bytes into the input.
    fn read_ends_at(&mut self, end: u64) -> oneshot::Sender<Delivered>;
}

/// Reads at most `max` more bytes of `input` into `buf` if they are there now, without
/// waiting: 0 when nothing is (the caller's next read waits).
fn read_ready<R: AsyncRead + Unpin>(
    input: &mut R,
    buf: &mut BytesMut,
    max: usize,
    peer: &str,
) -> usize {
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    let mut room = buf.limit(max);
    let read = std::pin::pin!(input.read_buf(&mut room));
    match std::future::Future::poll(read, &mut cx) {
        std::task::Poll::Ready(read) => bytes_read(read, peer),
        std::task::Poll::Pending => 0,
    }
}

/// What a read of `peer`'s connection brought: 0 at its end, or when it failed (said).
fn bytes_read(read: std::io::Result<usize>, peer: &str) -> usize {
    match read {
        Ok(n) => n,
        // A TLS peer that closes without close_notify has still closed.
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => 0,
        Err(e) => {
            log::info(format!("connection from {peer} closed with an error: {e}"));
            0
        }
    }
}

/// The frames a reader cut, for its read to take; the reader's next vector starts at this
/// one's size instead of growing again from nothing.
pub fn take_frames(frames: &mut Vec<Frame>) -> Vec<Frame> {
    let next = Vec::with_capacity(frames.len());
    std::mem::replace(frames, next)
}

/// One read's frames on their way to the destinations.
pub struct Read {
    chunk: Bytes,
    frames: Vec<Frame>,
    recvd: UnixTime,
    origin: Arc<Origin>,
    ingest: Arc<Ingest>,
    counted: SourceCounters,
    dispatcher: Arc<Dispatcher>,
}

thread_local! {
    /// The messages of the read being parsed and routed on this thread.
    static MESSAGES: RefCell<MessageVec> = RefCell::default();
}

impl Read {
    /// A read of `chunk` cut into `frames`, to dispatch with the configuration now in force;
    /// `None` (said) when that configuration no longer has the reader's source.
    fn new(
        chunk: Bytes,
        frames: Vec<Frame>,
        routed: &mut Routed,
        spec: &ReaderSpec,
        ctx: &Context,
        peer: &str,
    ) -> Option<Read> {
        let dispatcher = ctx.dispatcher.get();
        let Some(origin) = routed.origin(&dispatcher).cloned() else {
            log::warning(format!(
                "closing connection from {peer}: its source is gone from the configuration"
            ));
            return None;
        };
        let ingest = routed.ingest(&dispatcher, spec);
        Some(Read::of(chunk, frames, origin, ingest, spec, dispatcher))
    }

    /// A read of `chunk` cut into `frames`, from `origin`, received now, to parse with
    /// `ingest` and dispatch with `dispatcher`.
    pub fn of(
        chunk: Bytes,
        frames: Vec<Frame>,
        origin: Arc<Origin>,
        ingest: Arc<Ingest>,
        spec: &ReaderSpec,
        dispatcher: Arc<Dispatcher>,
    ) -> Read {
        Read {
            chunk,
            frames,
            recvd: UnixTime::now(&ingest.local_zone),
            origin,
            ingest,
            counted: spec.counted.clone(),
            dispatcher,
        }
    }

    /// How many frames the read holds: the credits it needs.
    pub fn frames(&self) -> usize {
        self.frames.len()
    }

    /// Parses, routes and formats the read on a task of its own; queues the result once the
    /// read before it (`after`) is queued; then says so on `done`.
    async fn dispatch(
        self,
        ack: Ack,
        after: Option<oneshot::Receiver<()>>,
        done: oneshot::Sender<()>,
    ) {
        if self.numbered() {
            if let Some(after) = after {
                let _ = after.await;
            }
            self.parse_route_and_commit(&ack);
        } else {
            let mut outbox = self.parse_and_route(&ack);
            if let Some(after) = after {
                let _ = after.await;
            }
            outbox.commit();
        }
        let _ = done.send(());
    }

    /// Some destination numbers this read's messages (see [`Dispatcher::in_order`]).
    fn numbered(&self) -> bool {
        self.origin.local && self.dispatcher.numbering.is_some()
    }

    /// Parses, routes, formats and queues the read: for a read nothing before it waits for.
    pub fn parse_route_and_commit(&self, ack: &Ack) {
        let _numbered = self.dispatcher.in_order(self.origin.local);
        self.parse_and_route(ack).commit();
    }

    /// Parses, routes and formats the read; the result waits in the outbox.
    pub fn parse_and_route(&self, ack: &Ack) -> Outbox {
        let mut outbox = Outbox::default();
        MESSAGES.with_borrow_mut(|kept| {
            // The messages borrow the read's buffer and origin: no reference count a message.
            let mut msgs = kept.lend();
            let today = Today::of(self.recvd);
            for f in &self.frames {
                if f.oversized {
                    self.counted.oversized.fetch_add(1, Ordering::Relaxed);
                }
                let raw = &self.chunk[f.range.clone()];
                self.ingest
                    .push_message(raw, &self.origin, self.recvd, today, &mut msgs);
            }
            self.counted.add(msgs.len());
            self.dispatcher.route(&mut msgs, ack, &mut outbox);
            kept.give_back(msgs);
        });
        outbox
    }
}
