//! `file()` and `stdout()` destinations.
//!
//! The file name is a template. Readers format their share of a batch into one buffer per
//! distinct file name and queue each buffer with the writer that owns that name: a destination
//! has a small pool of writer threads (one per core, started on first use) and a file name always
//! maps to the same one, so each file is written in order while different files are written in
//! parallel. A writer opens files on first use, appends whole buffers (gathering what has queued
//! for one file into one `writev`), `fsync()`s when asked, closes files idle for `time-reap()`
//! seconds, and keeps at most [`MAX_OPEN_PER_WRITER`] files open.
//!
//! File names are made by [`FileName`] and opened by [`crate::destinations::file_open`]: beneath the
//! template's root, whatever a sender sent.
//!
//! A failing file is a problem of that file alone; its writer goes on with its other files:
//! - a file that cannot be opened (a name the system refuses, no permission, a link) is said
//!   once with its name and reason, and its messages are dropped and counted until it can be;
//! - a write that fails (disk full) is retried with backoff from the byte where it stopped, so
//!   a line is never torn or written twice. Meanwhile the file keeps what it has and takes
//!   more, up to `log-fifo-size()` messages for the writer's failing files; past that, messages
//!   of paths without `flags(flow-control)` are dropped and counted, while flow-controlled ones
//!   keep their readers' credits (backpressure, as the path asked);
//! - a stopping writer tries its failing files for [`STOP_GRACE`] and then says what it could
//!   not write.
//!
//! With `disk-buffer()`, readers queue each formatted message with its file name in the
//! buffer instead ([`crate::destinations::diskq`]), and a feeder thread hands what the buffer holds to the
//! writers in order, recording it as sent once the writers have written it.

use crate::destinations::diskq::{DiskBufferOptions, DiskQueue};
use crate::destinations::format::Formatter;
use crate::destinations::queue::{Batch, BatchQueue};
use crate::destinations::{Destination, Outbox};
use crate::file_open::{open_beneath, FileOptions, NameReports, OpenError};
use crate::own_log;
use crate::stats::{DestCounters, DropReason};
use crate::window::Ack;
use sluice_logstore::{Store, StoreOptions};
use sluice_model::file_name::FileName;
use sluice_model::{LogMessage, Template};
use std::fs::File;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long a stopping writer keeps trying its failing files.
const STOP_GRACE: Duration = crate::stopping::GRACE;

/// Files one writer keeps open at most; past that the least recently written is closed.
pub const MAX_OPEN_PER_WRITER: usize = 512;
/// The most a writer gathers before writing, when much has queued: about one read's worth.
/// What it gathers was formatted moments ago on another core; the kernel copies it into the
/// page cache from there. Gathered past the size of a core's cache (4 MiB used to be the
/// limit), the oldest jobs are evicted before the copy and `copy_folio_from_iter` reads them
/// from memory: 30-38 % of sluice's samples in a one-file run instead of 6 %, 0.41-0.51 µs
/// a message instead of 0.28-0.35 (BENCHMARKS.md). A `writev` of 256 KiB
/// is ~1,500 messages, so the calls saved by gathering more are worth nothing.
const MAX_GATHER: usize = 256 << 10;
/// A file's share of what a writer gathered that is written at once, however many files wait.
const FILE_CHUNK: usize = 64 << 10;
/// Up to this many files with small shares are written at once (one `writev` each); past it,
/// small shares wait for more (see `Writer::run`).
const FEW_FILES: usize = 8;
/// How long a writer waits for more before it writes the small shares it holds.
const LINGER: Duration = Duration::from_millis(5);
/// The most a writer holds in small shares, and the longest it holds one. Below `MAX_HELD`
/// a held job's credits go back to its reader at once (see `Writer::hold`).
const MAX_HELD: usize = 32 << 20;
const MAX_AGE: Duration = Duration::from_millis(200);
/// Runs shorter than this are copied into their file's buffer when a writer takes a job: the
/// kernel spends more on a `writev` piece than the copy costs (a file per host gives runs of
/// one or two messages).
const COPY_BELOW: usize = 2 << 10;
/// The most buffers one `writev` takes (Linux's `IOV_MAX`).
const IOV_MAX: usize = 1024;

/// Where a destination writes: files named by the template, archives (`logstore()`), or
/// standard output.
#[derive(Clone)]
enum Target {
    Files,
    Stores(Arc<StoreOptions>),
    Stdout,
}

/// A file a writer has open: plain, or an archive that takes entries into chunks.
enum Output {
    Plain(File),
    Store(Box<Store>),
}

/// The hash that places a file name with a writer and finds it in tables. Fixed, so that a
/// name maps to the same writer from every reader.
fn name_hash(name: &[u8]) -> u64 {
    use std::hash::{BuildHasher, Hasher};
    // The bytes alone: `hash_one` would hash the length first, a second round for nothing.
    let mut hasher = foldhash::fast::FixedState::with_seed(0x5_1ce).build_hasher();
    hasher.write(name);
    hasher.finish()
}

/// The writer (of `writers`) that owns the file whose name hashes to `hash`.
fn writer_of(hash: u64, writers: usize) -> usize {
    (hash >> 32) as usize % writers
}

/// Byte strings kept back to back in one buffer, each known by its index: the distinct file
/// names of a job, the keys of a batch's files. No allocation per string; a string is one
/// load of its bounds away (no look at the previous string's end).
#[derive(Default)]
struct Strings {
    bytes: Vec<u8>,
    bounds: Vec<(u32, u32)>,
}

impl Strings {
    /// Adds `s`; returns its index.
    fn push(&mut self, s: &[u8]) -> u32 {
        self.push_with(|bytes| bytes.extend_from_slice(s))
    }

    /// Adds the string `make` appends; returns its index.
    fn push_with(&mut self, make: impl FnOnce(&mut Vec<u8>)) -> u32 {
        let start = self.bytes.len() as u32;
        make(&mut self.bytes);
        self.bounds.push((start, self.bytes.len() as u32));
        (self.bounds.len() - 1) as u32
    }

    fn get(&self, i: usize) -> &[u8] {
        let (start, end) = self.bounds[i];
        &self.bytes[start as usize..end as usize]
    }

    fn len(&self) -> usize {
        self.bounds.len()
    }

    fn clear(&mut self) {
        self.bytes.clear();
        self.bounds.clear();
    }
}

/// One reader's share of a batch for one writer: the formatted messages in one buffer, cut
/// into runs that go to the same file.
struct Job {
    data: Vec<u8>,
    /// The distinct file names of this job.
    names: Strings,
    name_hashes: Vec<u64>,
    /// Consecutive runs of `data`, each for one file; a run starts where the previous one
    /// ended.
    runs: Vec<Run>,
    /// Messages in `data`.
    messages: u32,
    /// The readers' credits: dropped once written, or when the writer holds the job (see
    /// `Writer::hold`).
    ack: Option<Ack>,
    /// The disk buffer feeder's count: dropped once written.
    written: Option<Written>,
    /// The messages came through a path with `flags(flow-control)`: a failing file keeps them
    /// and their credits rather than dropping them.
    flow_control: bool,
}

impl Job {
    /// Someone waits to see this job written: a RELP sender for its acknowledgement, or a
    /// disk buffer's feeder.
    fn awaited(&self) -> bool {
        self.written.is_some() || self.ack.as_ref().is_some_and(Ack::acknowledged)
    }

    fn new(ack: Option<&Ack>, written: Option<Written>, flow_control: bool) -> Job {
        Job {
            data: Vec::new(),
            names: Strings::default(),
            name_hashes: Vec::new(),
            runs: Vec::new(),
            messages: 0,
            ack: ack.cloned(),
            written,
            flow_control,
        }
    }

    /// Counts the job as queued with its writer (the writer counts it written).
    fn count_queued(&self, counters: &DestCounters) {
        counters
            .queued
            .fetch_add(u64::from(self.messages), Ordering::Relaxed);
        counters.hold(self.data.len() as u64);
    }

    /// The index of file `name` in this job, added when new.
    fn name_index(&mut self, name: &[u8], hash: u64) -> u32 {
        match (0..self.names.len()).find(|&i| self.name_hashes[i] == hash && self.name(i) == name) {
            Some(i) => i as u32,
            None => self.add_name(name, hash),
        }
    }

    fn name(&self, i: usize) -> &[u8] {
        self.names.get(i)
    }

    fn add_name(&mut self, name: &[u8], hash: u64) -> u32 {
        self.name_hashes.push(hash);
        self.names.push(name)
    }

    /// Records that `data` up to its current end, `messages` more messages, belongs to file
    /// `name`.
    fn close_run(&mut self, name: u32, messages: u32) {
        let end = self.data.len() as u32;
        match self.runs.last_mut() {
            Some(last) if last.name == name => {
                last.end = end;
                last.messages += messages;
            }
            _ => self.runs.push(Run {
                name,
                end,
                messages,
            }),
        }
    }
}

/// A run of a job's data for one file.
#[derive(Clone, Copy)]
struct Run {
    /// The index of the file's name in the job.
    name: u32,
    /// Where the run ends in the job's data.
    end: u32,
    messages: u32,
}

/// What a writer receives: work, the order to close its files (they are opened again on the
/// next write), or the order to finish what is queued before it and exit.
enum Msg {
    Job(Job),
    /// Close every file (logrotate); archives opened after are written with the options
    /// given (a reload changed them).
    Reopen(Option<Arc<StoreOptions>>),
    Stop,
}

/// The files of one destination that one reader thread has met, kept from read to read: a
/// file's name is made, hashed and placed with a writer once, when the thread first meets its
/// key, not once in every read that has its messages (a file per host: most reads have a
/// message for most hosts).
#[derive(Default)]
struct KnownFiles {
    /// What each file is known by: the value of the one field its name is made of, or its
    /// name as the template formats it before the naming rule (two keys may make one name).
    keys: Strings,
    names: Strings,
    files: Vec<KnownFile>,
    by_key: hashbrown::HashTable<u32>,
    /// The writers the files were placed with.
    writers: usize,
    /// Counts the reads grouped, so that a file knows whether it was met in this one.
    read: u64,
    /// The name formatted for one message, when its file is known by its name.
    name: Vec<u8>,
    /// The files met in this read, in the order first met.
    met: Vec<u32>,
    /// The file of each message of the read, in the read's order.
    file_of: Vec<u32>,
    /// The read's messages, each file's after the previous file's, in their order.
    order: Vec<u32>,
}

/// A file a reader thread knows, and its share of the read being grouped.
struct KnownFile {
    key_hash: u64,
    name_hash: u64,
    writer: u32,
    /// The last read the file was met in, and its messages there.
    read: u64,
    count: u32,
    /// Where the file's next message goes in `order` while the read is sorted; then where
    /// its messages end.
    next: u32,
    /// The index of the file's name in its writer's job for this read.
    local: u32,
}

/// Past this many files a thread forgets the files it knows and meets them again.
const MAX_KNOWN_FILES: usize = 8192;

impl KnownFiles {
    /// Makes ready to group a read for `writers` writers.
    fn start_read(&mut self, writers: usize) {
        if self.files.len() >= MAX_KNOWN_FILES || self.writers != writers {
            self.keys.clear();
            self.names.clear();
            self.files.clear();
            self.by_key.clear();
            self.writers = writers;
        }
        self.read += 1;
        self.met.clear();
        self.file_of.clear();
    }

    /// The file known by `key` (whose `name_hash` is `hash`); when the file is new, `name`
    /// appends its name to the known names.
    fn find_or_add(&mut self, key: &[u8], hash: u64, name: impl FnOnce(&mut Vec<u8>)) -> usize {
        let (files, keys) = (&self.files, &self.keys);
        let found = self.by_key.find(hash, |&at| {
            files[at as usize].key_hash == hash && keys.get(at as usize) == key
        });
        if let Some(&at) = found {
            return at as usize;
        }
        self.keys.push(key);
        let at = self.names.push_with(name);
        // The file's name, not its key, places it with a writer.
        let name_hash = name_hash(self.names.get(at as usize));
        self.files.push(KnownFile {
            key_hash: hash,
            name_hash,
            writer: writer_of(name_hash, self.writers) as u32,
            read: 0,
            count: 0,
            next: 0,
            local: 0,
        });
        let at = self.files.len() - 1;
        let files = &self.files;
        self.by_key
            .insert_unique(hash, at as u32, |&at| files[at as usize].key_hash);
        at
    }

    /// Counts a message of this read for file `at`.
    fn meet(&mut self, at: usize) {
        let file = &mut self.files[at];
        if file.read != self.read {
            file.read = self.read;
            file.count = 0;
            self.met.push(at as u32);
        }
        file.count += 1;
        self.file_of.push(at as u32);
    }
}

pub struct FileDestination {
    name: Arc<str>,
    path: Option<FileName>,
    /// Names rewritten to stay beneath the root, and names refused.
    reports: Arc<NameReports>,
    formatter: Formatter,
    opts: Arc<FileOptions>,
    /// `logstore()`: files are archives.
    store: Option<Arc<StoreOptions>>,
    counters: DestCounters,
    /// Started on first delivery, so that building a configuration starts no threads.
    writers: OnceLock<Vec<mpsc::Sender<Msg>>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    /// Held by a writer while it opens (and perhaps creates) a file. Files of one destination
    /// usually share a directory, and concurrent creates in one directory make the kernel spin
    /// on the directory's lock; taking turns here sleeps instead.
    opening: Arc<Mutex<()>>,
    /// The files each reader thread has met (for templated names).
    known: thread_local::ThreadLocal<std::cell::RefCell<KnownFiles>>,
    stopped: AtomicBool,
    /// `disk-buffer()`, and the name of its directory.
    disk_buffer: Option<(DiskBufferOptions, String)>,
    /// The disk buffer, once started, and the thread that feeds the writers from it.
    buffer: OnceLock<Arc<dyn BatchQueue>>,
    feeder: Mutex<Option<JoinHandle<()>>>,
    buffer_dir: OnceLock<PathBuf>,
    /// Tells the feeder to give back what it holds and stop: a reload's destination of the
    /// same name takes over the buffer.
    retire: Arc<AtomicBool>,
    /// A reload's destination took over the writers, or the buffer: stopping leaves them be.
    writers_taken: AtomicBool,
    buffer_taken: AtomicBool,
}

/// Dropped by a writer with a job it wrote: counts down what a disk buffer's feeder waits for.
struct Written(Arc<Feed>);

/// What a disk buffer's feeder waits for: the jobs of one take not yet written.
#[derive(Default)]
struct Feed {
    left: Mutex<usize>,
    done: Condvar,
    /// A stopping writer gave up on some: the take stays in the buffer.
    lost: AtomicBool,
}

impl Written {
    fn lost(&self) {
        self.0.lost.store(true, Ordering::SeqCst);
    }
}

impl Drop for Written {
    fn drop(&mut self) {
        *self.0.left.lock().expect("feeder count lock") -= 1;
        self.0.done.notify_all();
    }
}

/// Hands what a disk buffer holds to the writers in order; records it as sent once written.
/// Stopping, it waits at most [`STOP_GRACE`] for writers whose files fail; what they did not
/// write stays in the buffer.
fn feed(
    label: Arc<str>,
    buffer: Arc<dyn BatchQueue>,
    writers: Vec<mpsc::Sender<Msg>>,
    counters: DestCounters,
    retire: Arc<AtomicBool>,
) {
    let mut batches: Vec<Batch> = Vec::new();
    loop {
        let finished = buffer.take(Duration::from_millis(500), 4 << 20, &mut batches);
        if retire.load(Ordering::SeqCst) {
            buffer.put_back(&mut batches);
            return;
        }
        if batches.is_empty() {
            if finished {
                return;
            }
            continue;
        }
        let pending = Arc::new(Feed::default());
        let mut jobs: Vec<Job> = (0..writers.len())
            .map(|_| Job::new(None, None, false))
            .collect();
        for b in &batches {
            for i in 0..b.len() {
                // Each message is its file name, a NUL, and the formatted line.
                let m = &b.data[b.start(i)..b.ends[i] as usize];
                let Some(nul) = memchr::memchr(0, m) else {
                    continue;
                };
                let (name, line) = (&m[..nul], &m[nul + 1..]);
                let hash = name_hash(name);
                let job = &mut jobs[writer_of(hash, writers.len())];
                let at = job.name_index(name, hash);
                job.data.extend_from_slice(line);
                job.messages += 1;
                job.close_run(at, 1);
            }
        }
        for (w, mut job) in jobs.into_iter().enumerate() {
            if job.runs.is_empty() {
                continue;
            }
            // The writer takes these off `queued` when written, as it does for readers' jobs.
            job.count_queued(&counters);
            job.written = Some(Written(pending.clone()));
            *pending.left.lock().expect("feeder count lock") += 1;
            // A writer that stopped drops the job, which counts it down all the same.
            let _ = writers[w].send(Msg::Job(job));
        }
        let mut left = pending.left.lock().expect("feeder count lock");
        let mut stopping_since: Option<Instant> = None;
        while *left > 0 {
            left = (pending.done)
                .wait_timeout(left, Duration::from_millis(500))
                .expect("feeder count lock")
                .0;
            let stopping = buffer.is_stopping().then(|| {
                *stopping_since.get_or_insert_with(|| crate::stopping::since(Instant::now()))
            });
            if *left > 0 && stopping.is_some_and(|t| t.elapsed() >= STOP_GRACE) {
                drop(left);
                let said = buffer.abandon(&mut batches);
                own_log::error(format!("{label}: stopping while files fail: {said}"));
                return;
            }
        }
        drop(left);
        if pending.lost.load(Ordering::SeqCst) {
            let said = buffer.abandon(&mut batches);
            own_log::error(format!("{label}: stopping while files fail: {said}"));
            return;
        }
        buffer.done(&mut batches);
    }
}

impl FileDestination {
    /// A `file()` destination; `path` is the file name template; `reports` counts the names
    /// it rewrites or refuses.
    pub fn file(
        name: String,
        path: Template,
        formatter: Formatter,
        opts: FileOptions,
        counters: DestCounters,
        reports: NameReports,
    ) -> FileDestination {
        FileDestination::new(
            name,
            Some(FileName::new(path)),
            formatter,
            opts,
            counters,
            reports,
        )
    }

    pub fn stdout(
        name: String,
        formatter: Formatter,
        opts: FileOptions,
        counters: DestCounters,
    ) -> FileDestination {
        let reports = NameReports::new(name.as_str().into(), Arc::default(), Arc::default());
        FileDestination::new(name, None, formatter, opts, counters, reports)
    }

    fn new(
        name: String,
        path: Option<FileName>,
        formatter: Formatter,
        opts: FileOptions,
        counters: DestCounters,
        reports: NameReports,
    ) -> FileDestination {
        FileDestination {
            name: name.into(),
            path,
            reports: Arc::new(reports),
            formatter,
            counters,
            opts: Arc::new(opts),
            store: None,
            writers: OnceLock::new(),
            threads: Mutex::new(Vec::new()),
            opening: Arc::default(),
            known: thread_local::ThreadLocal::new(),
            stopped: AtomicBool::new(false),
            disk_buffer: None,
            buffer: OnceLock::new(),
            feeder: Mutex::new(None),
            buffer_dir: OnceLock::new(),
            retire: Arc::default(),
            writers_taken: AtomicBool::new(false),
            buffer_taken: AtomicBool::new(false),
        }
    }

    /// Makes the files archives (`logstore()`): the formatter writes entries.
    pub fn into_store(mut self, opts: StoreOptions) -> FileDestination {
        self.store = Some(Arc::new(opts));
        self
    }

    /// Puts a `disk-buffer()` in front of the writers; `name` names its directory.
    pub fn with_disk_buffer(mut self, opts: DiskBufferOptions, name: String) -> FileDestination {
        self.disk_buffer = Some((opts, name));
        self
    }

    /// Formats the messages into one batch for the disk buffer: each is its file name, a NUL
    /// and the formatted line.
    fn buffer_batch(&self, msgs: &[LogMessage], which: &[u32], ack: Option<&Ack>) -> Batch {
        let f = &self.formatter;
        let mut batch = Batch::new(ack.cloned());
        batch
            .data
            .reserve(f.size_hint(which.len()) + which.len() * 32);
        batch.ends.reserve(which.len());
        for &i in which {
            let msg = &msgs[i as usize];
            match (self.fixed_name(), &self.path) {
                (Some(name), _) => batch.data.extend_from_slice(name),
                (None, Some(path)) => {
                    let start = batch.data.len();
                    if path.append(msg, &mut batch.data) {
                        self.rewritten(path, &batch.data[start..], msg);
                    }
                }
                (None, None) => unreachable!("standard output has a fixed name"),
            }
            batch.data.push(0);
            f.append(msg, &mut batch.data);
            batch.end_message();
        }
        f.learn_size(batch.data.len(), which.len());
        batch
    }

    fn writers(&self) -> &[mpsc::Sender<Msg>] {
        self.writers.get_or_init(|| {
            // A fixed file name or standard output needs one writer; templated names get one per core.
            let n = if self.fixed_name().is_some() {
                1
            } else {
                std::thread::available_parallelism().map_or(2, |n| n.get())
            };
            let target = match (&self.path, &self.store) {
                (Some(_), Some(store)) => Target::Stores(store.clone()),
                (Some(_), None) => Target::Files,
                (None, _) => Target::Stdout,
            };
            let mut threads = self.threads.lock().expect("threads lock");
            (0..n)
                .map(|i| {
                    let (tx, rx) = mpsc::channel();
                    let writer = Writer::new(
                        target.clone(),
                        self.root(),
                        self.opts.clone(),
                        self.opening.clone(),
                        self.name.clone(),
                        self.counters.clone(),
                        self.reports.clone(),
                    );
                    let handle = std::thread::Builder::new()
                        .name(format!("writer-{i}"))
                        .spawn(move || writer.run(rx))
                        .expect("spawning a file writer thread");
                    threads.push(handle);
                    tx
                })
                .collect()
        })
    }

    /// The one name every message goes to: standard output, or a file name without macros.
    fn fixed_name(&self) -> Option<&[u8]> {
        match &self.path {
            None => Some(b"-"),
            Some(path) => path.template().literal(),
        }
    }

    /// Where the writers open files from, and whether its names are made from values.
    fn root(&self) -> Root {
        Root {
            dir: self
                .path
                .as_ref()
                .map_or(Arc::default(), |p| p.root().into()),
            templated: self.fixed_name().is_none(),
        }
    }

    /// Says that `name` was made for `msg` instead of what its values would make.
    fn rewritten(&self, path: &FileName, name: &[u8], msg: &LogMessage) {
        let mut as_sent = Vec::new();
        path.append_as_sent(msg, &mut as_sent);
        self.reports.rewritten(name, &as_sent, msg);
    }

    /// Formats the messages in one job per writer, each message after the previous one for
    /// its file, and returns the jobs that hold any.
    fn group(
        &self,
        msgs: &[LogMessage],
        which: &[u32],
        ack: &Ack,
        flow_control: bool,
        writers: usize,
    ) -> Vec<Job> {
        let mut jobs: Vec<Job> = (0..writers)
            .map(|_| Job::new(Some(ack), None, flow_control))
            .collect();
        let f = &self.formatter;
        if let Some(name) = self.fixed_name() {
            let job = &mut jobs[0];
            job.data.reserve(f.size_hint(which.len()));
            let at = job.add_name(name, name_hash(name));
            for &i in which {
                f.append(&msgs[i as usize], &mut job.data);
            }
            job.messages = which.len() as u32;
            job.close_run(at, which.len() as u32);
            f.learn_size(job.data.len(), which.len());
            return jobs;
        }
        let path = self.path.as_ref().expect("templated file name");
        // A file name made of one field of the message (`/var/log/${HOST}.log`) is known by
        // that field: the name is formatted when the file is new, not for every message.
        let only = path.template().only_macro();
        let mut known = self.known.get_or_default().borrow_mut();
        let k = &mut *known;
        k.start_read(writers);
        let mut last: Option<usize> = None;
        let mut name = std::mem::take(&mut k.name);
        for &i in which {
            let msg = &msgs[i as usize];
            // A file is known by what the sender's values make of the template as they are
            // (the one field, or the name formatted plainly); the naming rule that keeps the
            // name beneath the root runs only when the file is new.
            let key: &[u8] = match only.and_then(|m| m.in_place(msg)) {
                Some(value) => value,
                None => {
                    name.clear();
                    path.template().append(msg, 0, &mut name);
                    &name
                }
            };
            // Neighbours often share a file: compare with the last file before looking up
            // (by hash first: with a file per host most neighbours differ, and comparing
            // their keys cost more than hashing every key).
            let hash = name_hash(key);
            let at = match last {
                Some(at) if k.files[at].key_hash == hash && k.keys.get(at) == key => at,
                _ => {
                    let mut rewritten = None;
                    let at = k.find_or_add(key, hash, |made| {
                        rewritten = Some(path.append(msg, made));
                    });
                    if rewritten == Some(true) {
                        self.rewritten(path, k.names.get(at), msg);
                    }
                    at
                }
            };
            last = Some(at);
            k.meet(at);
        }
        k.name = name;
        // Each file's messages one after another (in their order), so that a file gets one
        // piece of each job: fewer, longer pieces for the writer to copy. A counting sort:
        // `next` is where a file's messages start, then where they end.
        let mut start = 0;
        for &at in &k.met {
            let file = &mut k.files[at as usize];
            file.next = start;
            start += file.count;
            let job = &mut jobs[file.writer as usize];
            job.messages += file.count;
            file.local = job.add_name(k.names.get(at as usize), file.name_hash);
        }
        for job in &mut jobs {
            job.data.reserve(f.size_hint(job.messages as usize));
        }
        k.order.resize(which.len(), 0);
        for (&i, &at) in which.iter().zip(&k.file_of) {
            let next = &mut k.files[at as usize].next;
            k.order[*next as usize] = i;
            *next += 1;
        }
        let mut start = 0;
        for &at in &k.met {
            let file = &k.files[at as usize];
            let job = &mut jobs[file.writer as usize];
            let mine = &k.order[start..file.next as usize];
            for &i in mine {
                f.append(&msgs[i as usize], &mut job.data);
            }
            job.close_run(file.local, mine.len() as u32);
            start = file.next as usize;
        }
        jobs.retain(|j| !j.runs.is_empty());
        f.learn_size(jobs.iter().map(|j| j.data.len()).sum(), which.len());
        jobs
    }
}

impl Destination for FileDestination {
    fn numbers_local(&self) -> bool {
        self.formatter.numbers_local()
    }

    /// Files have syslog-ng's *soft* flow control: every message holds its batch's
    /// acknowledgement until written, whether or not its path asked for flow control. With a
    /// disk buffer, as for forwarding destinations: flow-controlled messages hold it until
    /// the buffer has them, the others are dropped when the buffer is full.
    fn deliver(
        &self,
        msgs: &[LogMessage],
        which: &[u32],
        ack: &Ack,
        flow_control: bool,
        outbox: &mut Outbox,
    ) {
        self.counters
            .processed
            .fetch_add(which.len() as u64, Ordering::Relaxed);
        if let Some(buffer) = self.buffer.get() {
            let batch = self.buffer_batch(msgs, which, flow_control.then_some(ack));
            let buffer = buffer.clone();
            outbox.push(move || buffer.push(batch));
            return;
        }
        let writers = self.writers();
        for job in self.group(msgs, which, ack, flow_control, writers.len()) {
            let writer = writers[writer_of(job.name_hashes[0], writers.len())].clone();
            let label = self.name.clone();
            let counters = self.counters.clone();
            outbox.push(move || {
                job.count_queued(&counters);
                if writer.send(Msg::Job(job)).is_err() {
                    own_log::error(format!(
                        "{label}: a writer has stopped; a batch could not be queued"
                    ));
                }
            });
        }
    }

    /// A reload's `file()` of the same name takes over the writers of the one before it when
    /// they would work alike (same file options, same number of writers): what the old one
    /// queued and what the new one queues then reach each file in order.
    fn start(
        &self,
        state_dir: &std::path::Path,
        previous: Option<&Arc<dyn Destination>>,
    ) -> std::io::Result<()> {
        let old = previous.and_then(|p| p.as_any().downcast_ref::<FileDestination>());
        // Writers first: taken over when they would work alike.
        if let Some(old) = old {
            let alike = old.opts == self.opts
                && old.root() == self.root()
                && old.path.is_some() == self.path.is_some();
            if let Some(writers) = old.writers.get().filter(|_| alike) {
                if !old.writers_taken.swap(true, Ordering::SeqCst) {
                    let _ = self.writers.set(writers.clone());
                    let threads = std::mem::take(&mut *old.threads.lock().expect("threads lock"));
                    *self.threads.lock().expect("threads lock") = threads;
                    // Archives with other keys or chunks: the open ones end (what was queued
                    // before is written first), and the next segment takes the new options.
                    if let (Some(was), Some(now)) = (&old.store, &self.store) {
                        if !was.same_as(now) {
                            for w in writers {
                                let _ = w.send(Msg::Reopen(Some(now.clone())));
                            }
                        }
                    }
                }
            }
        }
        let Some((opts, name)) = &self.disk_buffer else {
            return Ok(());
        };
        let dir = opts.dir.as_deref().unwrap_or(state_dir).join(name);
        // Then the buffer: taken over from a predecessor that kept it in the same place.
        let inherited = old
            .filter(|o| o.buffer_dir.get() == Some(&dir))
            .and_then(|o| {
                o.retire.store(true, Ordering::SeqCst);
                let feeder = o.feeder.lock().expect("feeder lock").take();
                if let Some(t) = feeder {
                    let _ = t.join();
                }
                o.buffer_taken.store(true, Ordering::SeqCst);
                o.buffer.get().cloned()
            });
        let buffer: Arc<dyn BatchQueue> = match inherited {
            Some(b) => b,
            None => DiskQueue::open(
                self.name.clone(),
                dir.clone(),
                opts.clone(),
                self.counters.clone(),
            )
            .map_err(|e| {
                std::io::Error::new(e.kind(), format!("disk buffer {}: {e}", dir.display()))
            })?,
        };
        let _ = self.buffer_dir.set(dir);
        let _ = self.buffer.set(buffer.clone());
        let (label, writers, counters, retire) = (
            self.name.clone(),
            self.writers().to_vec(),
            self.counters.clone(),
            self.retire.clone(),
        );
        let handle = std::thread::Builder::new()
            .name("disk-feeder".into())
            .spawn(move || feed(label, buffer, writers, counters, retire))?;
        *self.feeder.lock().expect("feeder lock") = Some(handle);
        Ok(())
    }

    fn shutdown(&self) {
        if self.stopped.swap(true, Ordering::SeqCst) {
            return;
        }
        // A disk buffer first hands everything it holds to the writers (unless a reload's
        // destination took it, and the writers, over).
        if let Some(buffer) = self
            .buffer
            .get()
            .filter(|_| !self.buffer_taken.load(Ordering::SeqCst))
        {
            buffer.stop();
            let feeder = self.feeder.lock().expect("feeder lock").take();
            if let Some(t) = feeder {
                let _ = t.join();
            }
        }
        if self.writers_taken.load(Ordering::SeqCst) {
            return;
        }
        // Readers have stopped: each writer finishes its queue up to Stop, then exits.
        for w in self.writers.get().into_iter().flatten() {
            let _ = w.send(Msg::Stop);
        }
        let threads = std::mem::take(&mut *self.threads.lock().expect("threads lock"));
        for t in threads {
            let _ = t.join();
        }
    }

    fn reopen(&self) {
        for w in self.writers.get().into_iter().flatten() {
            let _ = w.send(Msg::Reopen(None));
        }
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// Where a destination's writers open files: the root every name is beneath, and whether the
/// names are made from values (then only regular files are written).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Root {
    dir: Arc<[u8]>,
    templated: bool,
}

/// A file a writer knows: its name, its descriptor while open, and what waits to be written
/// to it, in order: pieces of held jobs and runs copied into `copied`.
struct Slot {
    /// The slot is free for reuse (its file was reaped).
    free: bool,
    name: Vec<u8>,
    hash: u64,
    file: Option<Output>,
    last_write: Instant,
    pending: Vec<Piece>,
    copied: Vec<u8>,
    pending_bytes: usize,
    pending_messages: usize,
    /// While the file fails: what was said, and when to try again.
    failure: Option<Failure>,
    /// Listed in [`Writer::at_sealers`].
    at_sealers: bool,
}

/// A file that failed to open or to take a write.
struct Failure {
    /// The error as said; said again only when it changes.
    said: String,
    retry_at: Instant,
    backoff: Duration,
}

/// Why a file's pending pieces were not all written.
enum Trouble {
    Open(OpenError),
    Write(std::io::Error),
}

/// Takes `slices` (whole entries) into `store`'s open chunk, seals it when someone waits to
/// see them written (a RELP acknowledgement, a disk buffer's feeder), and writes what was
/// sealed. A store whose earlier frames could not be written takes nothing more, so that the
/// file's messages wait in the writer as a plain file's do.
fn store_write(
    store: &mut Store,
    slices: &[std::io::IoSlice],
    awaited: bool,
) -> (usize, Result<(), Trouble>) {
    if let Err(e) = store.write_ready() {
        return (0, Err(Trouble::Write(e)));
    }
    let mut taken = 0;
    for slice in slices {
        if let Err(e) = store.absorb(slice) {
            let e = std::io::Error::new(std::io::ErrorKind::InvalidData, e);
            return (taken, Err(Trouble::Write(e)));
        }
        taken += slice.len();
    }
    let written = if awaited {
        store.seal_chunk();
        store.flush()
    } else {
        store.write_ready()
    };
    (taken, written.map_err(Trouble::Write))
}

/// Errors of opening that pass (no descriptor, no space, no memory, a directory not made yet
/// with `create-dirs(no)`): the file keeps its messages and is tried again, as after a failed
/// write. Any other error of opening is the file's own (a name too long, no permission, a
/// link): its messages are dropped.
fn passing(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::NotFound
        || matches!(
            e.raw_os_error(),
            Some(
                libc::EMFILE
                    | libc::ENFILE
                    | libc::ENOSPC
                    | libc::EDQUOT
                    | libc::ENOMEM
                    | libc::EIO
                    | libc::EAGAIN
                    | libc::EINTR
            )
        )
}

/// The first wait before a failed file is tried again; it doubles up to `time-reopen()`.
const FIRST_RETRY: Duration = Duration::from_millis(100);

/// How often a writer looks at all of its archives at most ([`Writer::seal_due`]): open
/// chunks are due by `chunk-time()`, in whole seconds, and a file per host makes thousands.
const LOOK_ALL: Duration = Duration::from_millis(50);

/// How soon a writer looks at its archives with chunks at the sealers, to write what came
/// back ([`Writer::at_sealers`]).
const SEALING_LOOK: Duration = Duration::from_millis(2);

/// Bytes `start..end` waiting to be written to a file: of held job `job`, or of the file's
/// `copied` buffer when `job` is `COPIED`.
#[derive(Clone, Copy)]
struct Piece {
    job: u32,
    start: u32,
    end: u32,
    messages: u32,
}

const COPIED: u32 = u32::MAX;

/// A job a writer holds until every piece of it is written: dropping it acknowledges.
struct Held {
    job: Job,
    /// Pieces of the job not yet written.
    left: u32,
    /// The bytes of those pieces when the job was taken (its copied runs not counted).
    bytes: usize,
}

/// The writer's next message, waiting up to `wait`. After a small round (`small`) it lets the
/// readers run once before it sleeps on the channel: a job that arrives meanwhile is taken
/// without the futex wake-up its sender would otherwise pay. With many connections sending a
/// little each, writers slept and were woken for every read; after a large round the wake-up
/// is paid for, and yielding would only keep the writer from its work.
fn receive(
    rx: &mpsc::Receiver<Msg>,
    wait: Duration,
    small: bool,
) -> Result<Msg, mpsc::RecvTimeoutError> {
    if let Ok(msg) = rx.try_recv() {
        return Ok(msg);
    }
    if !small {
        return rx.recv_timeout(wait);
    }
    std::thread::yield_now();
    match rx.try_recv() {
        Ok(msg) => Ok(msg),
        Err(_) => rx.recv_timeout(wait),
    }
}

/// One writer thread: the files whose names hash to it.
struct Writer {
    target: Target,
    root: Root,
    opts: Arc<FileOptions>,
    opening: Arc<Mutex<()>>,
    label: Arc<str>,
    counters: DestCounters,
    reports: Arc<NameReports>,
    slots: Vec<Slot>,
    free: Vec<usize>,
    by_name: hashbrown::HashTable<usize>,
    open: usize,
    /// Jobs with pieces still to write, by the index their pieces name; `None` is free.
    held: Vec<Option<Held>>,
    free_held: Vec<usize>,
    /// The slots of a job's file names, reused from job to job by `hold`.
    job_slots: Vec<usize>,
    /// Slots with pending pieces, and how much those pieces hold.
    dirty: Vec<usize>,
    held_bytes: usize,
    /// Held jobs that someone waits to see written (a RELP acknowledgement, a disk buffer's
    /// feeder): while there are any, nothing is held back.
    held_awaited: usize,
    /// When the oldest piece still held arrived.
    held_since: Option<Instant>,
    /// Messages pending in failing files; past `log-fifo-size()`, those of paths without flow
    /// control are dropped.
    failing_messages: usize,
    /// The drop at `log-fifo-size()` was said (again once the failing files empty).
    said_full: bool,
    /// When every archive is next looked at (`logstore()`, [`Writer::seal_due`]): the first
    /// open chunk due to be sealed, timestamps to write, a failed archive's next try; no
    /// sooner than [`LOOK_ALL`] after the last look.
    store_due: Option<Instant>,
    /// The archives with chunks at the sealers, looked at every [`SEALING_LOOK`] (when
    /// `sealers_due` passes) to write what came back: a few of the thousands a writer may
    /// hold with a file per host.
    at_sealers: Vec<usize>,
    sealers_due: Option<Instant>,
}

impl Writer {
    fn new(
        target: Target,
        root: Root,
        opts: Arc<FileOptions>,
        opening: Arc<Mutex<()>>,
        label: Arc<str>,
        counters: DestCounters,
        reports: Arc<NameReports>,
    ) -> Writer {
        Writer {
            target,
            root,
            opts,
            opening,
            label,
            counters,
            reports,
            slots: Vec::new(),
            free: Vec::new(),
            by_name: hashbrown::HashTable::new(),
            open: 0,
            held: Vec::new(),
            free_held: Vec::new(),
            job_slots: Vec::new(),
            dirty: Vec::new(),
            held_bytes: 0,
            held_awaited: 0,
            held_since: None,
            failing_messages: 0,
            said_full: false,
            store_due: None,
            at_sealers: Vec::new(),
            sealers_due: None,
        }
    }

    /// Writes what arrives, file by file. A round gathers what has queued (up to
    /// `MAX_GATHER`) and writes each file's share with one `writev`. When one round spreads
    /// over many files (a file per host) the shares are small and the writes cost more than
    /// the copying: then small shares wait for more, until the writer has had nothing new for
    /// `LINGER`, holds `MAX_HELD`, has held a share for `MAX_AGE`, or holds a job someone
    /// waits to see written. Failing files are tried when their wait is over.
    fn run(mut self, rx: mpsc::Receiver<Msg>) {
        let tick = self.opts.time_reap.min(Duration::from_secs(5));
        let mut last_reap = Instant::now();
        let mut small = false;
        loop {
            if last_reap.elapsed() >= tick {
                self.reap();
                last_reap = Instant::now();
            }
            let mut next = match receive(&rx, self.wait(tick), small) {
                Ok(Msg::Job(job)) => Some(job),
                Ok(Msg::Reopen(store)) => {
                    self.reopen();
                    self.restore(store);
                    continue;
                }
                Ok(Msg::Stop) | Err(mpsc::RecvTimeoutError::Disconnected) => {
                    self.stop();
                    return;
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    self.write_all();
                    if let Target::Stores(_) = self.target {
                        self.store_due = self.seal_due();
                    }
                    self.look_at_sealers_when_due();
                    continue;
                }
            };
            let mut bytes = 0;
            let mut stop = false;
            let mut reopen = false;
            let mut new_store = None;
            while let Some(job) = next.take() {
                bytes += job.data.len();
                self.hold(job);
                if bytes < MAX_GATHER {
                    match rx.try_recv() {
                        Ok(Msg::Job(job)) => next = Some(job),
                        // Files are closed once what was gathered before is written.
                        Ok(Msg::Reopen(store)) => {
                            reopen = true;
                            new_store = store.or(new_store);
                        }
                        Ok(Msg::Stop) => stop = true,
                        Err(_) => {}
                    }
                }
            }
            small = bytes < FILE_CHUNK;
            if stop {
                self.stop();
                return;
            }
            if reopen {
                self.reopen();
                self.restore(new_store);
                continue;
            }
            let small = self
                .dirty
                .iter()
                .filter(|&&at| self.slots[at].pending_bytes < FILE_CHUNK)
                .count();
            let old = self.held_since.is_some_and(|t| t.elapsed() >= MAX_AGE);
            if small <= FEW_FILES || self.held_bytes >= MAX_HELD || old || self.held_awaited > 0 {
                self.write_all();
            } else {
                self.write_where(|s| s.pending_bytes >= FILE_CHUNK);
            }
            // The archives are looked at when one is due, not after every batch: with a
            // file per host there are thousands.
            if self.store_due.is_some_and(|due| due <= Instant::now()) {
                self.store_due = self.seal_due();
            }
            self.look_at_sealers_when_due();
        }
    }

    /// How long to wait for work: until small shares are due, a failing file's next try, or
    /// the archives' next look.
    fn wait(&self, tick: Duration) -> Duration {
        let now = Instant::now();
        let mut wait = tick;
        for due in self.store_due.into_iter().chain(self.sealers_due) {
            wait = wait.min(due.saturating_duration_since(now));
        }
        for &at in &self.dirty {
            match &self.slots[at].failure {
                None => return LINGER,
                Some(f) => wait = wait.min(f.retry_at.saturating_duration_since(now)),
            }
        }
        wait.max(Duration::from_millis(1))
    }

    /// `ctl reopen`, SIGUSR1: writes what is held, closes every file, and tries failing files
    /// again at once (logrotate moved them; someone made room).
    /// Archives opened from now on are written with `store`, when given.
    fn restore(&mut self, store: Option<Arc<StoreOptions>>) {
        if let (Some(store), Target::Stores(_)) = (store, &self.target) {
            self.target = Target::Stores(store);
        }
    }

    fn reopen(&mut self) {
        let now = Instant::now();
        for slot in &mut self.slots {
            if let Some(f) = &mut slot.failure {
                f.retry_at = now;
            }
        }
        self.write_all();
        self.close_all();
    }

    /// Writes what is queued. Files that fail are tried for [`STOP_GRACE`]; what they still
    /// hold then is said and counted as dropped.
    fn stop(&mut self) {
        let deadline = crate::stopping::since(Instant::now()) + STOP_GRACE;
        loop {
            self.write_all();
            let now = Instant::now();
            if self.dirty.is_empty() || now >= deadline {
                break;
            }
            std::thread::sleep(self.wait(deadline - now).min(deadline - now));
        }
        for at in std::mem::take(&mut self.dirty) {
            let slot = &self.slots[at];
            let buffered: u32 = slot
                .pending
                .iter()
                .filter(|p| p.job != COPIED)
                .filter(|p| {
                    self.held[p.job as usize]
                        .as_ref()
                        .is_some_and(|h| h.job.written.is_some())
                })
                .map(|p| p.messages)
                .sum();
            let said = slot.failure.as_ref().map_or("", |f| f.said.as_str());
            own_log::error(format!(
                "{}: stopping after {}s with {} messages for {} not written ({said}); {}",
                self.label,
                STOP_GRACE.as_secs(),
                slot.pending_messages,
                String::from_utf8_lossy(&slot.name),
                if buffered > 0 {
                    format!("{buffered} of them stay in the disk buffer, the rest are lost")
                } else {
                    "they are lost".to_string()
                },
            ));
            for piece in &slot.pending {
                if let Some(Held { job, .. }) =
                    self.held.get(piece.job as usize).and_then(Option::as_ref)
                {
                    if let Some(w) = &job.written {
                        w.lost();
                    }
                    if let Some(ack) = &job.ack {
                        ack.fail();
                    }
                }
            }
            let bytes = slot.pending_bytes;
            self.consume(at, bytes, Some(DropReason::Stopped));
        }
        // Archives end with their open chunk sealed and a close frame.
        self.close_all();
    }

    /// Takes `job`'s runs into their files' pending pieces: runs under `COPY_BELOW` are copied
    /// into the file's buffer, longer ones keep the job until they are written. A job copied
    /// whole is let go at once.
    ///
    /// While the writer holds less than `MAX_HELD`, the job's credits go back to its reader
    /// now rather than when it is written: with syslog-ng's small per-connection windows
    /// (`min-iw-size-per-reader()`, 100 messages) a reader waits for its previous read to be
    /// written, so holding a share for more would stall the reader instead of saving writes.
    /// Memory stays bounded (by `MAX_HELD`, then by the windows again), and what the writer
    /// holds is in memory either way. Jobs someone waits to see written — a RELP
    /// acknowledgement, a disk buffer's feeder — keep theirs and are written at once.
    ///
    /// A run for a failing file is kept up to `log-fifo-size()` messages in the writer's
    /// failing files, then dropped unless its path is flow-controlled; a flow-controlled job
    /// with a run for a failing file keeps its credits until that file takes it.
    fn hold(&mut self, mut job: Job) {
        let at = match self.free_held.pop() {
            Some(at) => at,
            None => {
                self.held.push(None);
                self.held.len() - 1
            }
        };
        // Beyond `MAX_HELD` jobs keep their credits until written, so nothing is copied.
        let copy = !job.awaited() && self.held_bytes < MAX_HELD;
        let may_drop = !job.awaited() && !job.flow_control;
        // Past three quarters of memory-limit(), a job without flow control is not kept.
        let over_budget = may_drop && crate::memory::budget().tight();
        let mut keep_credits = false;
        let (mut dropped, mut dropped_bytes) = (0u64, 0u64);
        let mut start = 0;
        let mut pieces = 0;
        let mut names = std::mem::take(&mut self.job_slots);
        names.clear();
        for n in 0..job.names.len() {
            names.push(self.slot(job.name(n), job.name_hashes[n]));
        }
        let mut kept = 0;
        for run in &job.runs {
            let at_slot = names[run.name as usize];
            let slot = &mut self.slots[at_slot];
            let len = run.end - start;
            let failing = slot.failure.is_some();
            if over_budget
                || (failing && may_drop && self.failing_messages >= self.opts.log_fifo_size)
            {
                dropped += u64::from(run.messages);
                dropped_bytes += u64::from(len);
                start = run.end;
                continue;
            }
            if slot.pending.is_empty() {
                self.dirty.push(at_slot);
            }
            if failing {
                self.failing_messages += run.messages as usize;
                keep_credits |= job.flow_control;
            }
            if copy && !(failing && job.flow_control) && (len as usize) < COPY_BELOW {
                let from = slot.copied.len() as u32;
                slot.copied
                    .extend_from_slice(&job.data[start as usize..run.end as usize]);
                match slot.pending.last_mut() {
                    Some(last) if last.job == COPIED && last.end == from => {
                        last.end += len;
                        last.messages += run.messages;
                    }
                    _ => slot.pending.push(Piece {
                        job: COPIED,
                        start: from,
                        end: from + len,
                        messages: run.messages,
                    }),
                }
                self.held_bytes += len as usize;
            } else {
                slot.pending.push(Piece {
                    job: at as u32,
                    start,
                    end: run.end,
                    messages: run.messages,
                });
                pieces += 1;
                kept += len as usize;
            }
            slot.pending_bytes += len as usize;
            slot.pending_messages += run.messages as usize;
            start = run.end;
        }
        self.job_slots = names;
        if dropped > 0 {
            self.count_dropped(dropped, dropped_bytes, over_budget);
        }
        self.held_since.get_or_insert_with(Instant::now);
        if pieces == 0 {
            // All copied (or dropped): the job goes, and its credits with it.
            self.free_held.push(at);
            return;
        }
        self.held_bytes += kept;
        if job.awaited() {
            self.held_awaited += 1;
        } else if self.held_bytes < MAX_HELD && !keep_credits {
            job.ack = None;
        }
        self.held[at] = Some(Held {
            job,
            left: pieces,
            bytes: kept,
        });
    }

    /// Runs for failing files dropped at `log-fifo-size()`, or all of a job's past the memory
    /// budget's mark: counted, and said once until the failing files are empty again.
    fn count_dropped(&mut self, messages: u64, bytes: u64, over_budget: bool) {
        let c = &self.counters;
        let reason = if over_budget {
            DropReason::MemoryLimit
        } else {
            DropReason::QueueFull
        };
        // Off the queue first, then counted: the ledger reads outcomes before the queue.
        c.queued.fetch_sub(messages, Ordering::Relaxed);
        c.drop(reason, messages);
        c.release(bytes);
        if over_budget {
            crate::memory::say_dropping(|| self.label.to_string());
        } else if !self.said_full {
            self.said_full = true;
            own_log::error(format!(
                "{}: files that fail hold log-fifo-size({}) messages; dropping what more comes for them on paths without flow-control (counted as dropped)",
                self.label, self.opts.log_fifo_size
            ));
        }
    }

    fn write_all(&mut self) {
        self.write_where(|_| true);
    }

    /// Writes the pending pieces of the dirty files that `due` picks (failing files once
    /// their wait is over), then lets go of the jobs whose pieces are all written.
    fn write_where(&mut self, due: impl Fn(&Slot) -> bool) {
        let dirty = std::mem::take(&mut self.dirty);
        let mut still = Vec::with_capacity(dirty.len());
        let now = Instant::now();
        for at in dirty {
            let slot = &self.slots[at];
            let waiting = slot.failure.as_ref().is_some_and(|f| f.retry_at > now);
            if due(slot) && !waiting {
                self.flush(at);
            }
            if !self.slots[at].pending.is_empty() {
                still.push(at);
            }
        }
        self.dirty = still;
        if self.dirty.is_empty() {
            self.held_since = None;
        }
    }

    /// Writes file `at`'s pending pieces. What was written is let go even when the write
    /// stopped early; the file then fails: see the module's comment.
    fn flush(&mut self, at: usize) {
        let (written, result) = self.write(at);
        self.consume(at, written, None);
        let trouble = match result {
            Ok(()) => return self.recovered(at),
            Err(trouble) => trouble,
        };
        // A plain file is opened again for the next try. An archive stays open: its sealed
        // frames that the write did not take wait in it and go on from the byte where the
        // write stopped, so its chain is not torn and nothing it took is lost.
        let store = matches!(self.slots[at].file, Some(Output::Store(_)));
        if !(store && matches!(trouble, Trouble::Write(_))) {
            self.close(at);
        }
        let name = String::from_utf8_lossy(&self.slots[at].name).into_owned();
        match trouble {
            Trouble::Open(e) if !passing(&e.error) => {
                if e.refused {
                    self.reports.refused(&self.slots[at].name);
                }
                let said = format!(
                    "{}: cannot open {name}: {}; its messages are dropped (counted) until it can be opened",
                    self.label, e.error
                );
                self.failed(at, said, true);
                let bytes = self.slots[at].pending_bytes;
                let reason = if e.refused {
                    DropReason::FileNameRefused
                } else {
                    DropReason::Unwritable
                };
                self.consume(at, bytes, Some(reason));
            }
            Trouble::Open(OpenError { error: e, .. }) | Trouble::Write(e) => {
                let said = format!(
                    "{}: error writing {name}: {e}; its messages are kept and it is tried again, at most every {}s",
                    self.label,
                    self.opts.time_reopen.as_secs()
                );
                self.failed(at, said, false);
            }
        }
    }

    /// File `at` failed: says so unless it was said last time, and sets its next try (at
    /// once when its messages are dropped meanwhile, else after a growing wait).
    fn failed(&mut self, at: usize, said: String, dropping: bool) {
        let now = Instant::now();
        let slot = &mut self.slots[at];
        let backoff = match &slot.failure {
            None => {
                self.failing_messages += slot.pending_messages;
                FIRST_RETRY
            }
            Some(f) => (f.backoff * 2).min(self.opts.time_reopen.max(FIRST_RETRY)),
        };
        if slot.failure.as_ref().is_none_or(|f| f.said != said) {
            own_log::error(said.clone());
        }
        let retry_at = if dropping { now } else { now + backoff };
        if let Target::Stores(_) = self.target {
            self.store_due = self.store_due.into_iter().chain([retry_at]).min();
        }
        slot.failure = Some(Failure {
            said,
            retry_at,
            backoff,
        });
    }

    /// File `at` took a write: if it was failing, say that it works again.
    fn recovered(&mut self, at: usize) {
        let slot = &mut self.slots[at];
        if slot.failure.take().is_some() {
            self.failing_messages -= slot.pending_messages;
            if self.failing_messages == 0 {
                self.said_full = false;
            }
            own_log::notice(format!(
                "{}: {} is written again",
                self.label,
                String::from_utf8_lossy(&slot.name)
            ));
        }
    }

    /// Takes `bytes` off the front of file `at`'s pending pieces, written or dropped: a piece
    /// taken whole lets go of its share of its job, one taken in part starts later (the next
    /// write goes on from the byte where the last stopped, so a line is never torn).
    fn consume(&mut self, at: usize, bytes: usize, dropped: Option<DropReason>) {
        let slot = &mut self.slots[at];
        let mut pieces = std::mem::take(&mut slot.pending);
        let (mut left, mut whole, mut messages) = (bytes, 0, 0u64);
        for piece in &mut pieces {
            let len = (piece.end - piece.start) as usize;
            if len > left {
                piece.start += left as u32;
                left = 0;
                break;
            }
            left -= len;
            whole += 1;
            messages += u64::from(piece.messages);
        }
        let taken = bytes - left;
        slot.pending_bytes -= taken;
        slot.pending_messages -= messages as usize;
        if slot.failure.is_some() {
            self.failing_messages -= messages as usize;
        }
        for piece in pieces.drain(..whole) {
            if piece.job != COPIED {
                self.piece_written(piece.job);
            }
        }
        let slot = &mut self.slots[at];
        slot.pending = pieces; // keeps its room
        if slot.pending.is_empty() {
            self.held_bytes -= slot.copied.len();
            slot.copied.clear();
            if slot.copied.capacity() > 2 * (FILE_CHUNK + COPY_BELOW) {
                slot.copied = Vec::new(); // a burst's room is not kept
            }
        }
        let c = &self.counters;
        // Off the queue first, then counted: the ledger reads outcomes before the queue.
        c.queued.fetch_sub(messages, Ordering::Relaxed);
        match dropped {
            Some(reason) => c.drop(reason, messages),
            None => {
                c.written.fetch_add(messages, Ordering::Relaxed);
            }
        }
        c.release(taken as u64);
    }

    /// The job of a piece just written: one piece less; gone (acknowledged) at none.
    fn piece_written(&mut self, at: u32) {
        let held = self.held[at as usize].as_mut().expect("held job");
        held.left -= 1;
        if held.left > 0 {
            return;
        }
        let Held { job, bytes, .. } = self.held[at as usize].take().expect("held job");
        self.free_held.push(at as usize);
        self.held_bytes -= bytes;
        if job.awaited() {
            self.held_awaited -= 1;
        }
    }

    fn close_all(&mut self) {
        for at in 0..self.slots.len() {
            self.close(at);
        }
    }

    /// The slot of file `name`, made when the name is new.
    fn slot(&mut self, name: &[u8], hash: u64) -> usize {
        let slots = &self.slots;
        if let Some(&at) = self
            .by_name
            .find(hash, |&at| slots[at].hash == hash && slots[at].name == name)
        {
            return at;
        }
        let slot = Slot {
            free: false,
            name: name.to_vec(),
            hash,
            file: None,
            last_write: Instant::now(),
            pending: Vec::new(),
            copied: Vec::new(),
            pending_bytes: 0,
            pending_messages: 0,
            failure: None,
            at_sealers: false,
        };
        let at = match self.free.pop() {
            Some(at) => {
                self.slots[at] = slot;
                at
            }
            None => {
                self.slots.push(slot);
                self.slots.len() - 1
            }
        };
        let slots = &self.slots;
        self.by_name.insert_unique(hash, at, |&at| slots[at].hash);
        at
    }

    /// Writes file `at`'s pending pieces, opening it first if need be; says how many bytes
    /// went out, whatever happened after.
    fn write(&mut self, at: usize) -> (usize, Result<(), Trouble>) {
        fn pieces<'a>(
            pending: &[Piece],
            copied: &'a [u8],
            held: &'a [Option<Held>],
        ) -> Vec<std::io::IoSlice<'a>> {
            pending
                .iter()
                .map(|p| {
                    let data = match p.job {
                        COPIED => copied,
                        job => &held[job as usize].as_ref().expect("held job").job.data,
                    };
                    std::io::IoSlice::new(&data[p.start as usize..p.end as usize])
                })
                .collect()
        }
        if let Target::Stdout = self.target {
            let mut out = std::io::stdout().lock();
            let s = &self.slots[at];
            let mut written = 0;
            for piece in pieces(&s.pending, &s.copied, &self.held) {
                if let Err(e) = out.write_all(&piece) {
                    return (written, Err(Trouble::Write(e)));
                }
                written += piece.len();
            }
            return (written, out.flush().map_err(Trouble::Write));
        }
        if self.slots[at].file.is_none() {
            if self.open >= MAX_OPEN_PER_WRITER {
                self.close_least_recent();
            }
            match self.open_file(at) {
                Ok(output) => self.slots[at].file = Some(output),
                Err(e) => return (0, Err(Trouble::Open(e))),
            }
            self.open += 1;
        }
        let awaited = self.held_awaited > 0;
        let s = &mut self.slots[at];
        s.last_write = Instant::now();
        let slices = pieces(&s.pending, &s.copied, &self.held);
        let f = match s.file.as_mut().expect("opened above") {
            Output::Plain(f) => f,
            Output::Store(store) => {
                let written = store_write(store, &slices, awaited);
                // The next look at the archives is no later than this one's due.
                let due = store.next_due(Instant::now());
                let sealing = store.sealing() > 0;
                self.store_due = self.store_due.into_iter().chain(due).min();
                if sealing {
                    self.list_at_sealers(at);
                }
                return written;
            }
        };
        let mut slices = slices;
        let mut slices = &mut slices[..];
        let mut written = 0;
        while !slices.is_empty() {
            let upto = slices.len().min(IOV_MAX);
            match f.write_vectored(&slices[..upto]) {
                Ok(0) => {
                    return (
                        written,
                        Err(Trouble::Write(std::io::ErrorKind::WriteZero.into())),
                    )
                }
                Ok(n) => {
                    written += n;
                    std::io::IoSlice::advance_slices(&mut slices, n);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return (written, Err(Trouble::Write(e))),
            }
        }
        if self.opts.fsync {
            if let Err(e) = f.sync_data() {
                return (written, Err(Trouble::Write(e)));
            }
        }
        (written, Ok(()))
    }

    /// Opens file `at` beneath the root: as an archive when the destination is a
    /// `logstore()` (its chain continued; a torn tail found is said).
    fn open_file(&mut self, at: usize) -> Result<Output, OpenError> {
        // Every name starts with the root: the template's text before its first macro.
        let name = &self.slots[at].name;
        let rest = name.strip_prefix(&*self.root.dir).unwrap_or(name);
        let file = {
            let _turn = self.opening.lock().expect("opening lock");
            open_beneath(&self.root.dir, rest, &self.opts, self.root.templated)?
        };
        let Target::Stores(opts) = &self.target else {
            return Ok(Output::Plain(file));
        };
        let (store, opened) = Store::open(file, opts.clone()).map_err(|e| OpenError {
            error: std::io::Error::other(e),
            refused: false,
        })?;
        if let Some((offset, len)) = opened.torn {
            own_log::warning(format!(
                "{}: {} ends in {len} bytes at offset {offset} that a crash cut short; they stay there and readers skip them",
                self.label,
                String::from_utf8_lossy(name),
            ));
        }
        if opened.damaged {
            own_log::error(format!(
                "{}: {} holds bytes that are no archive frame before its end; a new chain starts after them (sluice logstore verify says where)",
                self.label,
                String::from_utf8_lossy(name),
            ));
        }
        Ok(Output::Store(Box::new(store)))
    }

    /// Looks at every archive ([`Writer::look_at`]); says when to look again: the soonest
    /// any wants, but no sooner than [`LOOK_ALL`] (a writer may hold thousands).
    fn seal_due(&mut self) -> Option<Instant> {
        let now = Instant::now();
        let next = (0..self.slots.len())
            .filter_map(|at| self.look_at(at, now))
            .min();
        next.map(|t| t.max(now + LOOK_ALL))
    }

    /// Looks at the archives with chunks at the sealers, when it is time.
    fn look_at_sealers_when_due(&mut self) {
        let Some(due) = self.sealers_due else {
            return;
        };
        let now = Instant::now();
        if due > now {
            return;
        }
        self.sealers_due = None;
        let listed = std::mem::take(&mut self.at_sealers);
        for &at in &listed {
            self.slots[at].at_sealers = false;
        }
        for &at in &listed {
            // Listed twice (its slot was reused meanwhile): looked at, and listed again.
            if self.slots[at].at_sealers {
                continue;
            }
            let next = self.look_at(at, now);
            self.store_due = self.store_due.into_iter().chain(next).min();
        }
    }

    /// Lists archive `at` among those with chunks at the sealers; the list is looked at
    /// [`SEALING_LOOK`] after the first was listed (later ones do not put it off).
    fn list_at_sealers(&mut self, at: usize) {
        if !self.slots[at].at_sealers {
            self.slots[at].at_sealers = true;
            self.at_sealers.push(at);
            self.sealers_due
                .get_or_insert_with(|| Instant::now() + SEALING_LOOK);
        }
    }

    /// Looks at archive `at`: seals its open chunk when due (`chunk-time()`), writes the
    /// chunks the sealers finished and the timestamps that came back, tries a failed one
    /// again when it is time, and lists it while chunks are at the sealers. Says when it
    /// wants the next look.
    fn look_at(&mut self, at: usize, now: Instant) -> Option<Instant> {
        let retry_at = self.slots[at].failure.as_ref().map(|f| f.retry_at);
        let Some(Output::Store(store)) = &mut self.slots[at].file else {
            return None;
        };
        if let Some(t) = retry_at.filter(|&t| t > now) {
            return Some(t);
        }
        let chunk_due = store.due();
        let stamps_due = store.stamps_due(now);
        if chunk_due.is_some_and(|due| due <= now) {
            store.seal_chunk();
        } else if store.unwritten() == 0
            && store.sealing() == 0
            && stamps_due.is_none_or(|due| due > now)
        {
            // Nothing to write yet: come back when the chunk or a timestamp is due.
            return chunk_due.into_iter().chain(stamps_due).min();
        }
        let flushed = store.write_ready();
        let mut next = store.next_due(now);
        let sealing = store.sealing() > 0;
        match flushed {
            Ok(()) => self.recovered(at),
            Err(e) => {
                let said = format!(
                    "{}: error writing {}: {e}; its sealed chunks are kept and it is tried again",
                    self.label,
                    String::from_utf8_lossy(&self.slots[at].name)
                );
                self.failed(at, said, false);
                let retry_at = self.slots[at].failure.as_ref().map(|f| f.retry_at);
                next = next.into_iter().chain(retry_at).min();
            }
        }
        if sealing {
            self.list_at_sealers(at);
        }
        next
    }

    fn close(&mut self, slot: usize) {
        match self.slots[slot].file.take() {
            None => return,
            Some(Output::Plain(_)) => {}
            Some(Output::Store(mut store)) => {
                if let Err(e) = store.close() {
                    own_log::error(format!(
                        "{}: closing {}: {e}; its last chunk is lost",
                        self.label,
                        String::from_utf8_lossy(&self.slots[slot].name)
                    ));
                }
            }
        }
        self.open -= 1;
    }

    /// Forgets files not written for `time-reap()` (closing them).
    fn reap(&mut self) {
        let reap = self.opts.time_reap;
        for at in 0..self.slots.len() {
            let s = &self.slots[at];
            if s.free || !s.pending.is_empty() || s.last_write.elapsed() < reap {
                continue;
            }
            self.close(at);
            let hash = self.slots[at].hash;
            if let Ok(entry) = self.by_name.find_entry(hash, |&i| i == at) {
                entry.remove();
            }
            self.slots[at].free = true;
            self.slots[at].name = Vec::new();
            self.slots[at].copied = Vec::new();
            self.slots[at].failure = None;
            self.free.push(at);
        }
    }

    fn close_least_recent(&mut self) {
        let oldest = (0..self.slots.len())
            .filter(|&at| self.slots[at].file.is_some())
            .min_by_key(|&at| self.slots[at].last_write);
        if let Some(at) = oldest {
            self.close(at);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn job(dir: &Path, runs: &[(&str, &[u8])], written: Option<Written>) -> Job {
        let mut job = Job::new(None, written, false);
        for &(file, data) in runs {
            let name = dir.join(file).into_os_string().into_encoded_bytes();
            let at = job.name_index(&name, name_hash(&name));
            job.data.extend_from_slice(data);
            job.messages += 1;
            job.close_run(at, 1);
        }
        job
    }

    /// A writer of files beneath `dir`, whose names are made from values.
    fn writer(dir: &Path, opts: FileOptions, counters: &DestCounters) -> Writer {
        let root = [dir.as_os_str().as_encoded_bytes(), b"/"].concat();
        let root = Root {
            dir: root.into(),
            templated: true,
        };
        writer_at(root, opts, counters)
    }

    fn writer_at(root: Root, opts: FileOptions, counters: &DestCounters) -> Writer {
        Writer::new(
            Target::Files,
            root,
            Arc::new(opts),
            Arc::default(),
            "d".into(),
            counters.clone(),
            Arc::new(NameReports::new("d".into(), Arc::default(), Arc::default())),
        )
    }

    /// What `group` gives each file for `frames` (as `$PROGRAM $MSG` lines), file by file;
    /// the same for a second read of the same messages, whose files the thread knows.
    fn grouped(path: &str, frames: &[&str]) -> Vec<(String, String)> {
        let formatter = Formatter::new(
            crate::destinations::format::Format::Template(
                Template::compile("$PROGRAM $MSG\n").unwrap(),
            ),
            false,
        );
        let d = FileDestination::file(
            "d".into(),
            Template::compile(path).unwrap(),
            formatter,
            crate::options::Globals::new().file,
            DestCounters::default(),
            NameReports::new("d".into(), Arc::default(), Arc::default()),
        );
        let msgs: Vec<LogMessage> = frames.iter().map(sluice_model::testing::message).collect();
        let which: Vec<u32> = (0..msgs.len() as u32).collect();
        let ack = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(crate::window::Window::new(100).take(1));
        let first = files_of(d.group(&msgs, &which, &ack, false, 2));
        assert_eq!(files_of(d.group(&msgs, &which, &ack, false, 2)), first);
        first
    }

    /// The data of `jobs`, file by file.
    fn files_of(jobs: Vec<Job>) -> Vec<(String, String)> {
        let mut files: Vec<(String, String)> = Vec::new();
        for job in jobs {
            let mut start = 0;
            for run in &job.runs {
                let name = String::from_utf8(job.name(run.name as usize).to_vec()).unwrap();
                let data = String::from_utf8(job.data[start..run.end as usize].to_vec()).unwrap();
                match files.iter_mut().find(|(n, _)| *n == name) {
                    Some((_, all)) => all.push_str(&data),
                    None => files.push((name, data)),
                }
                start = run.end as usize;
            }
        }
        files.sort();
        files
    }

    #[test]
    fn messages_are_grouped_by_file_in_order_whether_the_name_is_keyed_or_formatted() {
        let frames = [
            "<13>Jan  5 13:56:09 alpha app[1]: one",
            "<13>Jan  5 13:56:09 beta app[1]: two",
            "<13>Jan  5 13:56:09 alpha other[1]: three",
            "<13>Jan  5 13:56:09 beta app[1]: four",
            "<13>Jan  5 13:56:09 alpha app[1]: five",
        ];
        let by_host = vec![
            (
                "/l/alpha.log".to_string(),
                "app one\nother three\napp five\n".to_string(),
            ),
            ("/l/beta.log".to_string(), "app two\napp four\n".to_string()),
        ];
        // Keyed by $HOST, and formatted per message (a default makes the name no longer a
        // function of the value alone): the same files, each in order.
        assert!(Template::compile("/l/${HOST}.log")
            .unwrap()
            .only_macro()
            .is_some());
        assert!(Template::compile("/l/${HOST:-x}.log")
            .unwrap()
            .only_macro()
            .is_none());
        assert_eq!(grouped("/l/${HOST}.log", &frames), by_host);
        assert_eq!(grouped("/l/${HOST:-x}.log", &frames), by_host);
        // Two values: formatted per message.
        assert!(Template::compile("/l/$HOST-$PROGRAM.log")
            .unwrap()
            .only_macro()
            .is_none());
        assert_eq!(
            grouped("/l/$HOST-$PROGRAM.log", &frames),
            vec![
                (
                    "/l/alpha-app.log".to_string(),
                    "app one\napp five\n".to_string()
                ),
                (
                    "/l/alpha-other.log".to_string(),
                    "other three\n".to_string()
                ),
                (
                    "/l/beta-app.log".to_string(),
                    "app two\napp four\n".to_string()
                ),
            ]
        );
    }

    #[test]
    fn a_thread_forgets_its_files_past_the_most_it_keeps() {
        let mut known = KnownFiles::default();
        known.start_read(2);
        let name = |key: &[u8]| [b"/l/", key].concat();
        let key = |n: usize| n.to_string().into_bytes();
        for n in 0..MAX_KNOWN_FILES {
            let at = known.find_or_add(&key(n), name_hash(&key(n)), |made| {
                made.extend(name(&key(n)))
            });
            known.meet(at);
            assert_eq!(at, n);
        }
        // Found again, not added.
        assert_eq!(
            known.find_or_add(b"7", name_hash(b"7"), |_| unreachable!()),
            7
        );
        assert_eq!(known.names.get(7), b"/l/7");
        assert_eq!(known.met.len(), MAX_KNOWN_FILES);
        known.start_read(2);
        assert!(known.files.is_empty() && known.met.is_empty() && known.file_of.is_empty());
        assert_eq!(
            known.find_or_add(b"7", name_hash(b"7"), |made| made.extend(name(b"7"))),
            0
        );
        // Placed with another number of writers: forgotten too.
        known.start_read(3);
        assert!(known.files.is_empty());
    }

    /// An archive whose chunk went to the sealers has it written within a few milliseconds,
    /// while other archives keep sending theirs (a file per host under load).
    #[test]
    fn archives_at_the_sealers_are_written_while_others_keep_coming() {
        let scratch = tempfile::tempdir().unwrap();
        let dir = scratch.path();
        let counters = DestCounters::default();
        let mut writer = writer(dir, crate::options::Globals::new().file, &counters);
        writer.target = Target::Stores(Arc::new(StoreOptions {
            chunk_size: 4096,
            ..StoreOptions::default()
        }));
        // More than a chunk's worth of entries for each archive.
        let mut entries = Vec::new();
        for n in 0..100 {
            let line = format!("line {n} of an archive, {}\n", "long ".repeat(10));
            let entry = sluice_logstore::EntryWriter::begin(&mut entries, 0, 0, 0, 13, b"h", b"p");
            entries.extend_from_slice(line.as_bytes());
            entry.finish(&mut entries, line.trim_end().as_bytes());
        }
        let first = dir.join("a0.lgs");
        let len = || std::fs::metadata(&first).map_or(0, |m| m.len());
        let mut before = None;
        // Rounds enough for a loaded machine (two test binaries at once): it ends at the
        // first round that finds the chunk written, within a few on an idle one.
        for n in 0..3000 {
            let job = job(dir, &[(&format!("a{n}.lgs"), &entries)], None);
            job.count_queued(&counters);
            writer.hold(job);
            writer.write_all();
            writer.look_at_sealers_when_due();
            if len() > *before.get_or_insert(len()) {
                return;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        panic!("the first archive's chunk was not written in 3000 rounds");
    }

    #[test]
    fn small_runs_are_copied_and_every_file_keeps_its_order() {
        let scratch = tempfile::tempdir().unwrap();
        let dir = scratch.path();
        let counters = DestCounters::default();
        let mut writer = writer(dir, crate::options::Globals::new().file, &counters);
        let big = [b'b'; COPY_BELOW * 2];
        let big = [&big[..], b"\n"].concat();
        let pending = Arc::new(Feed::default());
        *pending.left.lock().unwrap() = 1;
        let jobs = [
            job(dir, &[("a", b"a1\n"), ("b", &big), ("a", b"a2\n")], None),
            job(dir, &[("b", b"b2\n"), ("a", b"a3\n")], None),
            // Someone waits to see this one written: it is held, never copied.
            job(dir, &[("a", b"a4\n")], Some(Written(pending.clone()))),
            job(dir, &[("a", b"a5\n"), ("b", b"b3\n")], None),
        ];
        for job in jobs {
            job.count_queued(&counters);
            writer.hold(job);
        }
        // The first job stays for its long run, the third because it is awaited; the other
        // two were copied whole and let go.
        assert_eq!(writer.held.iter().flatten().count(), 2);
        writer.write_all();
        let read = |f: &str| std::fs::read(dir.join(f)).unwrap();
        assert_eq!(read("a"), b"a1\na2\na3\na4\na5\n");
        assert_eq!(read("b"), [&big[..], b"b2\nb3\n"].concat());
        assert_eq!(
            *pending.left.lock().unwrap(),
            0,
            "the awaited job was let go"
        );
        assert_eq!(writer.held.iter().flatten().count(), 0);
        assert_eq!(writer.held_bytes, 0);
        assert_eq!(counters.written.load(Ordering::Relaxed), 8);
        assert_eq!(counters.queued.load(Ordering::Relaxed), 0);
        assert_eq!(counters.memory_usage.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn a_file_that_cannot_be_opened_loses_its_own_messages_only() {
        let scratch = tempfile::tempdir().unwrap();
        let dir = scratch.path();
        // A name the system refuses to open for writing: a directory is there.
        std::fs::create_dir(dir.join("taken")).unwrap();
        let counters = DestCounters::default();
        let mut writer = writer(dir, crate::options::Globals::new().file, &counters);
        for round in 0..3 {
            let job = job(
                dir,
                &[("good", b"g\n"), ("taken", b"t\n"), ("good", b"g\n")],
                None,
            );
            job.count_queued(&counters);
            writer.hold(job);
            writer.write_all();
            let taken = writer.slot(&root_of(dir, "taken"), name_hash(&root_of(dir, "taken")));
            assert!(writer.slots[taken].failure.is_some(), "round {round}");
            assert!(
                writer.dirty.is_empty(),
                "nothing waits for the file: round {round}"
            );
        }
        assert_eq!(std::fs::read(dir.join("good")).unwrap(), b"g\n".repeat(6));
        assert_eq!(counters.written.load(Ordering::Relaxed), 6);
        assert_eq!(counters.dropped.load(Ordering::Relaxed), 3);
        assert_eq!(counters.queued.load(Ordering::Relaxed), 0);
        assert_eq!(writer.failing_messages, 0);
        // Once it can be opened, it is written again.
        std::fs::remove_dir(dir.join("taken")).unwrap();
        let job = job(dir, &[("taken", b"t\n")], None);
        job.count_queued(&counters);
        writer.hold(job);
        writer.write_all();
        assert_eq!(std::fs::read(dir.join("taken")).unwrap(), b"t\n");
    }

    fn root_of(dir: &Path, file: &str) -> Vec<u8> {
        dir.join(file).into_os_string().into_encoded_bytes()
    }

    #[test]
    fn a_failing_file_keeps_log_fifo_size_then_drops_what_is_not_flow_controlled() {
        // Every write to /dev/full fails with ENOSPC, as on a full disk.
        let counters = DestCounters::default();
        let opts = FileOptions {
            log_fifo_size: 3,
            ..crate::options::Globals::new().file
        };
        let root = Root {
            dir: b"/dev/"[..].into(),
            templated: false,
        };
        let mut writer = writer_at(root, opts, &counters);
        let full = |messages: usize, flow_control: bool| {
            let mut job = Job::new(None, None, flow_control);
            let at = job.name_index(b"/dev/full", name_hash(b"/dev/full"));
            for _ in 0..messages {
                job.data.extend_from_slice(b"line\n");
                job.messages += 1;
                job.close_run(at, 1);
            }
            job.count_queued(&counters);
            job
        };
        writer.hold(full(2, false));
        writer.write_all();
        let slot = writer.slot(b"/dev/full", name_hash(b"/dev/full"));
        assert!(writer.slots[slot].failure.is_some());
        assert_eq!(writer.failing_messages, 2, "kept, to be tried again");
        writer.hold(full(2, false));
        assert_eq!(
            writer.failing_messages, 4,
            "kept: below log-fifo-size when it came"
        );
        writer.hold(full(2, false));
        assert_eq!(counters.dropped.load(Ordering::Relaxed), 2);
        writer.hold(full(2, true));
        assert_eq!(
            writer.failing_messages, 6,
            "a flow-controlled path's are kept"
        );
        assert_eq!(writer.dirty, vec![slot]);
        // Its next try waits; the writer sleeps until then, not on every round.
        assert!(writer.wait(Duration::from_secs(5)) > Duration::from_millis(50));
    }

    #[test]
    fn a_write_that_stopped_goes_on_from_the_byte_where_it_stopped() {
        let scratch = tempfile::tempdir().unwrap();
        let dir = scratch.path();
        let counters = DestCounters::default();
        let mut writer = writer(dir, crate::options::Globals::new().file, &counters);
        let long = [b'x'; COPY_BELOW * 2];
        let long = [&long[..], b"\n"].concat();
        let job = job(
            dir,
            &[
                ("f", b"Nov 24 12:00:00 one\n"),
                ("f", &long),
                ("f", b"three\n"),
            ],
            None,
        );
        job.count_queued(&counters);
        writer.hold(job);
        let slot = writer.slot(&root_of(dir, "f"), name_hash(&root_of(dir, "f")));
        // As if the kernel took the first 6 bytes, then the disk was full: they are in the
        // file, and what follows them is what is still to write.
        std::fs::write(dir.join("f"), b"Nov 24").unwrap();
        writer.consume(slot, 6, None);
        assert_eq!(
            counters.written.load(Ordering::Relaxed),
            0,
            "no line is whole yet"
        );
        writer.write_all();
        let mut expected = b"Nov 24 12:00:00 one\n".to_vec();
        expected.extend_from_slice(&long);
        expected.extend_from_slice(b"three\n");
        assert_eq!(std::fs::read(dir.join("f")).unwrap(), expected);
        assert_eq!(counters.written.load(Ordering::Relaxed), 3);
        assert_eq!(counters.memory_usage.load(Ordering::Relaxed), 0);
        assert_eq!(writer.held_bytes, 0);
    }
}
