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
//! A write that fails (disk full, permissions) is retried with backoff, holding the batch's
//! acknowledgement: readers stop when their window is spent, nothing is dropped.
//!
//! With `disk-buffer()`, readers queue each formatted message with its file name in the
//! buffer instead ([`super::diskq`]), and a feeder thread hands what the buffer holds to the
//! writers in order, recording it as sent once the writers have written it.

use super::diskq::{DiskBufferOptions, DiskQueue};
use super::format::Formatter;
use super::queue::{Batch, BatchQueue};
use super::{Destination, Outbox};
use crate::internal;
use crate::stats::DestCounters;
use crate::window::Ack;
use sluice_model::{LogMessage, Template};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Options of `file()` that govern files and directories.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileOptions {
    pub create_dirs: bool,
    pub perm: Option<u32>,
    pub dir_perm: Option<u32>,
    pub owner: Option<u32>,
    pub group: Option<u32>,
    pub dir_owner: Option<u32>,
    pub dir_group: Option<u32>,
    pub fsync: bool,
    pub time_reap: Duration,
}

/// Files one writer keeps open at most; past that the least recently written is closed.
pub const MAX_OPEN_PER_WRITER: usize = 512;
/// The most a writer gathers before writing, when much has queued: about one read's worth.
/// What it gathers was formatted moments ago on another core; the kernel copies it into the
/// page cache from there. Gathered past the size of a core's cache (4 MiB used to be the
/// limit), the oldest jobs are evicted before the copy and `copy_folio_from_iter` reads them
/// from memory: 30-38 % of sluice's samples in a one-file run instead of 6 %, 0.41-0.51 µs
/// a message instead of 0.28-0.35 (BENCHMARKS.md, fourteenth session). A `writev` of 256 KiB
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

/// Where a destination writes: files named by the template, or standard output.
#[derive(Clone, Copy)]
enum Target {
    Files,
    Stdout,
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
}

impl Job {
    /// Someone waits to see this job written: a RELP sender for its acknowledgement, or a
    /// disk buffer's feeder.
    fn awaited(&self) -> bool {
        self.written.is_some() || self.ack.as_ref().is_some_and(Ack::acknowledged)
    }

    fn new(ack: Option<&Ack>, written: Option<Written>) -> Job {
        Job {
            data: Vec::new(),
            names: Strings::default(),
            name_hashes: Vec::new(),
            runs: Vec::new(),
            messages: 0,
            ack: ack.cloned(),
            written,
        }
    }

    /// Counts the job as queued with its writer (the writer counts it written).
    fn count_queued(&self, counters: &DestCounters) {
        counters
            .queued
            .fetch_add(u64::from(self.messages), Ordering::Relaxed);
        counters
            .memory_usage
            .fetch_add(self.data.len() as u64, Ordering::Relaxed);
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
    Reopen,
    Stop,
}

/// The files of one destination that one reader thread has met, kept from read to read: a
/// file's name is made, hashed and placed with a writer once, when the thread first meets its
/// key, not once in every read that has its messages (a file per host: most reads have a
/// message for most hosts).
#[derive(Default)]
struct KnownFiles {
    /// What each file is known by: the value of the one field its name is made of, or its
    /// name.
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
    path: Option<Template>,
    formatter: Formatter,
    opts: Arc<FileOptions>,
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
struct Written(Arc<(Mutex<usize>, Condvar)>);

impl Drop for Written {
    fn drop(&mut self) {
        let (left, done) = &*self.0;
        *left.lock().expect("feeder count lock") -= 1;
        done.notify_all();
    }
}

/// Hands what a disk buffer holds to the writers in order; records it as sent once written.
fn feed(
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
        let pending = Arc::new((Mutex::new(0usize), Condvar::new()));
        let mut jobs: Vec<Job> = (0..writers.len()).map(|_| Job::new(None, None)).collect();
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
            *pending.0.lock().expect("feeder count lock") += 1;
            // A writer that stopped drops the job, which counts it down all the same.
            let _ = writers[w].send(Msg::Job(job));
        }
        let (left, done) = &*pending;
        let mut left = left.lock().expect("feeder count lock");
        while *left > 0 {
            left = done.wait(left).expect("feeder count lock");
        }
        drop(left);
        buffer.done(&mut batches);
    }
}

impl FileDestination {
    /// A `file()` destination; `path` is the file name template.
    pub fn file(
        name: String,
        path: Template,
        formatter: Formatter,
        opts: FileOptions,
        counters: DestCounters,
    ) -> FileDestination {
        FileDestination::new(name, Some(path), formatter, opts, counters)
    }

    pub fn stdout(
        name: String,
        formatter: Formatter,
        opts: FileOptions,
        counters: DestCounters,
    ) -> FileDestination {
        FileDestination::new(name, None, formatter, opts, counters)
    }

    fn new(
        name: String,
        path: Option<Template>,
        formatter: Formatter,
        opts: FileOptions,
        counters: DestCounters,
    ) -> FileDestination {
        FileDestination {
            name: name.into(),
            path,
            formatter,
            counters,
            opts: Arc::new(opts),
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
                (None, Some(t)) => t.append(msg, 0, &mut batch.data),
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
            let target = if self.path.is_some() {
                Target::Files
            } else {
                Target::Stdout
            };
            let mut threads = self.threads.lock().expect("threads lock");
            (0..n)
                .map(|i| {
                    let (tx, rx) = mpsc::channel();
                    let writer = Writer::new(
                        target,
                        self.opts.clone(),
                        self.opening.clone(),
                        self.name.clone(),
                        self.counters.clone(),
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
            Some(t) => t.literal(),
        }
    }

    /// Formats the messages in one job per writer, each message after the previous one for
    /// its file, and returns the jobs that hold any.
    fn group(&self, msgs: &[LogMessage], which: &[u32], ack: &Ack, writers: usize) -> Vec<Job> {
        let mut jobs: Vec<Job> = (0..writers).map(|_| Job::new(Some(ack), None)).collect();
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
        let template = self.path.as_ref().expect("templated file name");
        // A file name made of one field of the message (`/var/log/${HOST}.log`) is known by
        // that field: the name is formatted when the file is new, not for every message.
        let only = template.only_macro();
        let mut known = self.known.get_or_default().borrow_mut();
        let k = &mut *known;
        k.start_read(writers);
        let mut last: Option<usize> = None;
        let mut name = std::mem::take(&mut k.name);
        for &i in which {
            let msg = &msgs[i as usize];
            let field = only.and_then(|m| m.in_place(msg));
            let key: &[u8] = match field {
                Some(value) => value,
                None => {
                    name.clear();
                    template.append(msg, 0, &mut name);
                    &name
                }
            };
            // Neighbours often share a file: compare with the last file before looking up
            // (by hash first: with a file per host most neighbours differ, and comparing
            // their keys cost more than hashing every key).
            let hash = name_hash(key);
            let at = match last {
                Some(at) if k.files[at].key_hash == hash && k.keys.get(at) == key => at,
                _ => k.find_or_add(key, hash, |made| match field {
                    Some(_) => template.append(msg, 0, made),
                    None => made.extend_from_slice(key),
                }),
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
        for job in self.group(msgs, which, ack, writers.len()) {
            let writer = writers[writer_of(job.name_hashes[0], writers.len())].clone();
            let label = self.name.clone();
            let counters = self.counters.clone();
            outbox.push(move || {
                job.count_queued(&counters);
                if writer.send(Msg::Job(job)).is_err() {
                    internal::error(format!(
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
                && old.fixed_name().is_some() == self.fixed_name().is_some()
                && old.path.is_some() == self.path.is_some();
            if let Some(writers) = old.writers.get().filter(|_| alike) {
                if !old.writers_taken.swap(true, Ordering::SeqCst) {
                    let _ = self.writers.set(writers.clone());
                    let threads = std::mem::take(&mut *old.threads.lock().expect("threads lock"));
                    *self.threads.lock().expect("threads lock") = threads;
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
        let (writers, counters, retire) = (
            self.writers().to_vec(),
            self.counters.clone(),
            self.retire.clone(),
        );
        let handle = std::thread::Builder::new()
            .name("disk-feeder".into())
            .spawn(move || feed(buffer, writers, counters, retire))?;
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
            let _ = w.send(Msg::Reopen);
        }
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// A file a writer knows: its name, its descriptor while open, and what waits to be written
/// to it, in order: pieces of held jobs and runs copied into `copied`.
struct Slot {
    /// The slot is free for reuse (its file was reaped).
    free: bool,
    name: Vec<u8>,
    hash: u64,
    file: Option<File>,
    last_write: Instant,
    pending: Vec<Piece>,
    copied: Vec<u8>,
    pending_bytes: usize,
}

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
    opts: Arc<FileOptions>,
    opening: Arc<Mutex<()>>,
    label: Arc<str>,
    counters: DestCounters,
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
}

impl Writer {
    fn new(
        target: Target,
        opts: Arc<FileOptions>,
        opening: Arc<Mutex<()>>,
        label: Arc<str>,
        counters: DestCounters,
    ) -> Writer {
        Writer {
            target,
            opts,
            opening,
            label,
            counters,
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
        }
    }

    /// Writes what arrives, file by file. A round gathers what has queued (up to
    /// `MAX_GATHER`) and writes each file's share with one `writev`. When one round spreads
    /// over many files (a file per host) the shares are small and the writes cost more than
    /// the copying: then small shares wait for more, until the writer has had nothing new for
    /// `LINGER`, holds `MAX_HELD`, has held a share for `MAX_AGE`, or holds a job someone
    /// waits to see written.
    fn run(mut self, rx: mpsc::Receiver<Msg>) {
        let tick = self.opts.time_reap.min(Duration::from_secs(5));
        let mut last_reap = Instant::now();
        let mut small = false;
        loop {
            if last_reap.elapsed() >= tick {
                self.reap();
                last_reap = Instant::now();
            }
            let wait = if self.dirty.is_empty() { tick } else { LINGER };
            let mut next = match receive(&rx, wait, small) {
                Ok(Msg::Job(job)) => Some(job),
                Ok(Msg::Reopen) => {
                    self.write_all();
                    self.close_all();
                    continue;
                }
                Ok(Msg::Stop) | Err(mpsc::RecvTimeoutError::Disconnected) => {
                    self.write_all();
                    return;
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    self.write_all();
                    continue;
                }
            };
            let mut bytes = 0;
            let mut stop = false;
            let mut reopen = false;
            while let Some(job) = next.take() {
                bytes += job.data.len();
                self.hold(job);
                if bytes < MAX_GATHER {
                    match rx.try_recv() {
                        Ok(Msg::Job(job)) => next = Some(job),
                        // Files are closed once what was gathered before is written.
                        Ok(Msg::Reopen) => reopen = true,
                        Ok(Msg::Stop) => stop = true,
                        Err(_) => {}
                    }
                }
            }
            small = bytes < FILE_CHUNK;
            if stop {
                self.write_all();
                return;
            }
            if reopen {
                self.write_all();
                self.close_all();
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
        }
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
            if slot.pending.is_empty() {
                self.dirty.push(at_slot);
            }
            let len = run.end - start;
            if copy && (len as usize) < COPY_BELOW {
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
            start = run.end;
        }
        self.job_slots = names;
        self.held_since.get_or_insert_with(Instant::now);
        if pieces == 0 {
            // All copied: the job goes, and its credits with it.
            self.free_held.push(at);
            return;
        }
        self.held_bytes += kept;
        if job.awaited() {
            self.held_awaited += 1;
        } else if self.held_bytes < MAX_HELD {
            job.ack = None;
        }
        self.held[at] = Some(Held {
            job,
            left: pieces,
            bytes: kept,
        });
    }

    fn write_all(&mut self) {
        self.write_where(|_| true);
    }

    /// Writes the pending pieces of the dirty files that `due` picks, then lets go of the
    /// jobs whose pieces are all written.
    fn write_where(&mut self, due: impl Fn(&Slot) -> bool) {
        let dirty = std::mem::take(&mut self.dirty);
        let mut still = Vec::with_capacity(dirty.len());
        for at in dirty {
            if due(&self.slots[at]) {
                self.write_with_retry(at);
            } else {
                still.push(at);
            }
        }
        self.dirty = still;
        if self.dirty.is_empty() {
            self.held_since = None;
        }
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

    fn write_with_retry(&mut self, slot: usize) {
        let mut backoff = Duration::from_millis(100);
        loop {
            match self.write(slot) {
                Ok(()) => {
                    let s = &mut self.slots[slot];
                    let mut pieces = std::mem::take(&mut s.pending);
                    let (bytes, copied) = (s.pending_bytes, s.copied.len());
                    s.pending_bytes = 0;
                    s.copied.clear();
                    if s.copied.capacity() > 2 * (FILE_CHUNK + COPY_BELOW) {
                        s.copied = Vec::new(); // a burst's room is not kept
                    }
                    self.held_bytes -= copied;
                    let mut messages = 0;
                    for piece in &pieces {
                        messages += u64::from(piece.messages);
                        if piece.job != COPIED {
                            self.piece_written(piece.job);
                        }
                    }
                    self.counters.written.fetch_add(messages, Ordering::Relaxed);
                    self.counters.queued.fetch_sub(messages, Ordering::Relaxed);
                    self.counters
                        .memory_usage
                        .fetch_sub(bytes as u64, Ordering::Relaxed);
                    pieces.clear();
                    self.slots[slot].pending = pieces; // keeps its room
                    return;
                }
                Err(e) => {
                    let name = String::from_utf8_lossy(&self.slots[slot].name).into_owned();
                    internal::error(format!(
                        "{}: error writing {name}: {e}; retrying in {backoff:?}",
                        self.label
                    ));
                    self.close(slot);
                    std::thread::sleep(backoff);
                    backoff = (backoff * 2).min(Duration::from_secs(60));
                }
            }
        }
    }

    fn write(&mut self, slot: usize) -> std::io::Result<()> {
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
            let s = &self.slots[slot];
            for piece in pieces(&s.pending, &s.copied, &self.held) {
                out.write_all(&piece)?;
            }
            return out.flush();
        }
        if self.slots[slot].file.is_none() {
            if self.open >= MAX_OPEN_PER_WRITER {
                self.close_least_recent();
            }
            let name = &self.slots[slot].name;
            let path =
                Path::new(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(name));
            let file = {
                let _turn = self.opening.lock().expect("opening lock");
                open(path, &self.opts)?
            };
            self.slots[slot].file = Some(file);
            self.open += 1;
        }
        let s = &mut self.slots[slot];
        s.last_write = Instant::now();
        let mut slices = pieces(&s.pending, &s.copied, &self.held);
        let f = s.file.as_mut().expect("opened above");
        let mut slices = &mut slices[..];
        while !slices.is_empty() {
            let upto = slices.len().min(IOV_MAX);
            let n = f.write_vectored(&slices[..upto])?;
            if n == 0 {
                return Err(std::io::ErrorKind::WriteZero.into());
            }
            std::io::IoSlice::advance_slices(&mut slices, n);
        }
        if self.opts.fsync {
            f.sync_data()?;
        }
        Ok(())
    }

    fn close(&mut self, slot: usize) {
        if self.slots[slot].file.take().is_some() {
            self.open -= 1;
        }
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

fn open(path: &Path, opts: &FileOptions) -> std::io::Result<File> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        if !dir.exists() {
            if !opts.create_dirs {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    format!(
                        "directory {} does not exist and create-dirs() is off",
                        dir.display()
                    ),
                ));
            }
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(opts.dir_perm.unwrap_or(0o700))
                .create(dir)?;
            chown(dir, opts.dir_owner, opts.dir_group);
        }
    }
    let perm = opts.perm.unwrap_or(0o600);
    let file = OpenOptions::new()
        .append(true)
        .create(true)
        .mode(perm)
        .open(path)?;
    if opts.perm.is_some() {
        file.set_permissions(std::fs::Permissions::from_mode(perm))?;
    }
    chown(path, opts.owner, opts.group);
    Ok(file)
}

fn chown(path: &Path, uid: Option<u32>, gid: Option<u32>) {
    if uid.is_none() && gid.is_none() {
        return;
    }
    if let Err(e) = std::os::unix::fs::chown(path, uid, gid) {
        internal::warning(format!("cannot change owner of {}: {e}", path.display()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(dir: &Path, runs: &[(&str, &[u8])], written: Option<Written>) -> Job {
        let mut job = Job::new(None, written);
        for &(file, data) in runs {
            let name = dir.join(file).into_os_string().into_encoded_bytes();
            let at = job.name_index(&name, name_hash(&name));
            job.data.extend_from_slice(data);
            job.messages += 1;
            job.close_run(at, 1);
        }
        job
    }

    /// What `group` gives each file for `frames` (as `$PROGRAM $MSG` lines), file by file;
    /// the same for a second read of the same messages, whose files the thread knows.
    fn grouped(path: &str, frames: &[&str]) -> Vec<(String, String)> {
        let formatter = Formatter::new(
            super::super::format::Format::Template(Template::compile("$PROGRAM $MSG\n").unwrap()),
            false,
        );
        let d = FileDestination::file(
            "d".into(),
            Template::compile(path).unwrap(),
            formatter,
            crate::options::Globals::new().file,
            DestCounters::default(),
        );
        let msgs: Vec<LogMessage> = frames.iter().map(sluice_model::testing::message).collect();
        let which: Vec<u32> = (0..msgs.len() as u32).collect();
        let ack = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(crate::window::Window::new(100).take(1));
        let first = files_of(d.group(&msgs, &which, &ack, 2));
        assert_eq!(files_of(d.group(&msgs, &which, &ack, 2)), first);
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

    #[test]
    fn small_runs_are_copied_and_every_file_keeps_its_order() {
        let scratch = tempfile::tempdir().unwrap();
        let dir = scratch.path();
        let opts = crate::options::Globals::new().file;
        let counters = DestCounters::default();
        let mut writer = Writer::new(
            Target::Files,
            Arc::new(opts),
            Arc::default(),
            "d".into(),
            counters.clone(),
        );
        let big = [b'b'; COPY_BELOW * 2];
        let big = [&big[..], b"\n"].concat();
        let pending = Arc::new((Mutex::new(1usize), Condvar::new()));
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
        assert_eq!(*pending.0.lock().unwrap(), 0, "the awaited job was let go");
        assert_eq!(writer.held.iter().flatten().count(), 0);
        assert_eq!(writer.held_bytes, 0);
        assert_eq!(counters.written.load(Ordering::Relaxed), 8);
        assert_eq!(counters.queued.load(Ordering::Relaxed), 0);
        assert_eq!(counters.memory_usage.load(Ordering::Relaxed), 0);
    }
}
