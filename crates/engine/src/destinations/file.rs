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

use super::format::Format;
use super::Destination;
use crate::internal;
use crate::window::Ack;
use sluice_model::{LogMessage, Template};
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::hash::{Hash, Hasher};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Options of `file()` that govern files and directories.
#[derive(Clone, Debug)]
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
    pub no_multi_line: bool,
}

/// Files one writer keeps open at most; past that the least recently written is closed.
pub const MAX_OPEN_PER_WRITER: usize = 512;
/// The most a writer gathers before writing, when much has queued.
const MAX_GATHER: usize = 4 << 20;

/// Where a destination writes: `Some` file names (templated) or standard output.
enum Target {
    Files,
    Stdout,
}

struct Job {
    /// The file name (unused for standard output).
    key: Vec<u8>,
    data: Vec<u8>,
    _ack: Ack,
}

/// What a writer receives: work, or the order to finish what is queued before it and exit.
enum Msg {
    Job(Job),
    Stop,
}

pub struct FileDestination {
    name: String,
    path: Option<Template>,
    format: Format,
    opts: Arc<FileOptions>,
    /// Started on first delivery, so that building a configuration starts no threads.
    writers: OnceLock<Vec<mpsc::Sender<Msg>>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    stopped: AtomicBool,
    /// The sequence number of the next local message (syslog-ng's writer `seq_num`).
    next_seq: AtomicU32,
    /// The format shows sequence numbers.
    counts_seq: bool,
}

impl FileDestination {
    /// A `file()` destination; `path` is the file name template.
    pub fn file(
        name: String,
        path: Template,
        format: Format,
        opts: FileOptions,
    ) -> FileDestination {
        FileDestination::new(name, Some(path), format, opts)
    }

    pub fn stdout(name: String, format: Format, opts: FileOptions) -> FileDestination {
        FileDestination::new(name, None, format, opts)
    }

    fn new(
        name: String,
        path: Option<Template>,
        format: Format,
        opts: FileOptions,
    ) -> FileDestination {
        FileDestination {
            name,
            path,
            counts_seq: format.uses_seq(),
            format,
            opts: Arc::new(opts),
            writers: OnceLock::new(),
            threads: Mutex::new(Vec::new()),
            stopped: AtomicBool::new(false),
            next_seq: AtomicU32::new(1),
        }
    }

    fn writers(&self) -> &[mpsc::Sender<Msg>] {
        self.writers.get_or_init(|| {
            // A fixed file name or standard output needs one writer; templated names get one per core.
            let fixed = self.path.as_ref().is_none_or(|p| p.literal().is_some());
            let n = if fixed {
                1
            } else {
                std::thread::available_parallelism().map_or(2, |n| n.get())
            };
            let mut threads = self.threads.lock().expect("threads lock");
            (0..n)
                .map(|i| {
                    let (tx, rx) = mpsc::channel();
                    let opts = self.opts.clone();
                    let target = if self.path.is_some() {
                        Target::Files
                    } else {
                        Target::Stdout
                    };
                    let label = self.name.clone();
                    let handle = std::thread::Builder::new()
                        .name(format!("writer-{i}"))
                        .spawn(move || Writer::new(target, opts, label).run(rx))
                        .expect("spawning a file writer thread");
                    threads.push(handle);
                    tx
                })
                .collect()
        })
    }

    /// Local messages are numbered per destination; others carry their `meta.sequenceId`.
    /// Formats that do not show it skip the work.
    fn seq(&self, msg: &LogMessage) -> u32 {
        if !self.counts_seq {
            0
        } else if msg.is_local() {
            self.next_seq.fetch_add(1, Ordering::Relaxed)
        } else {
            msg.sequence_id()
        }
    }

    fn send(&self, key: Vec<u8>, data: Vec<u8>, ack: &Ack) {
        let writers = self.writers();
        let shard = if writers.len() == 1 {
            0
        } else {
            let mut h = std::collections::hash_map::DefaultHasher::new();
            key.hash(&mut h);
            (h.finish() % writers.len() as u64) as usize
        };
        let job = Job {
            key,
            data,
            _ack: ack.clone(),
        };
        if writers[shard].send(Msg::Job(job)).is_err() {
            internal::error(format!(
                "{}: a writer has stopped; a batch could not be queued",
                self.name
            ));
        }
    }
}

impl Destination for FileDestination {
    fn deliver(&self, msgs: &[LogMessage], which: &[u32], ack: &Ack) {
        let no_multi_line = self.opts.no_multi_line;
        let fixed = match &self.path {
            None => Some(&b"-"[..]),
            Some(t) => t.literal(),
        };
        if let Some(key) = fixed {
            let mut data = Vec::with_capacity(which.len() * 256);
            for &i in which {
                let msg = &msgs[i as usize];
                self.format
                    .append(msg, self.seq(msg), no_multi_line, &mut data);
            }
            self.send(key.to_vec(), data, ack);
            return;
        }
        let template = self.path.as_ref().expect("templated file name");
        // Per-host names can be hundreds per batch: index the groups by name. The last
        // message's group is checked first, since neighbours usually share a file.
        let mut groups: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        let mut index: HashMap<Vec<u8>, usize> = HashMap::new();
        let mut name = Vec::with_capacity(128);
        let mut last = usize::MAX;
        for &i in which {
            let msg = &msgs[i as usize];
            name.clear();
            template.append(msg, 0, &mut name);
            let at = if groups.get(last).is_some_and(|(n, _)| *n == name) {
                last
            } else if let Some(&at) = index.get(name.as_slice()) {
                at
            } else {
                groups.push((name.clone(), Vec::with_capacity(4096)));
                index.insert(name.clone(), groups.len() - 1);
                groups.len() - 1
            };
            last = at;
            self.format
                .append(msg, self.seq(msg), no_multi_line, &mut groups[at].1);
        }
        for (name, data) in groups {
            self.send(name, data, ack);
        }
    }

    fn shutdown(&self) {
        if self.stopped.swap(true, Ordering::SeqCst) {
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
}

/// An open file and when it was last written.
struct OpenFile {
    file: File,
    last_write: Instant,
}

/// One writer thread: the files whose names hash to it.
struct Writer {
    target: Target,
    opts: Arc<FileOptions>,
    label: String,
    open: HashMap<Vec<u8>, OpenFile>,
}

impl Writer {
    fn new(target: Target, opts: Arc<FileOptions>, label: String) -> Writer {
        Writer {
            target,
            opts,
            label,
            open: HashMap::new(),
        }
    }

    fn run(mut self, rx: mpsc::Receiver<Msg>) {
        let tick = self.opts.time_reap.min(Duration::from_secs(5));
        let mut pending: Vec<Job> = Vec::new();
        let mut stop = false;
        while !stop {
            let first = match rx.recv_timeout(tick) {
                Ok(Msg::Job(job)) => job,
                Ok(Msg::Stop) | Err(mpsc::RecvTimeoutError::Disconnected) => return,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    self.reap();
                    continue;
                }
            };
            let mut bytes = first.data.len();
            pending.push(first);
            while bytes < MAX_GATHER {
                match rx.try_recv() {
                    Ok(Msg::Job(job)) => {
                        bytes += job.data.len();
                        pending.push(job);
                    }
                    Ok(Msg::Stop) => {
                        stop = true;
                        break;
                    }
                    Err(_) => break,
                }
            }
            // Jobs for one file keep their order; files are written one after another.
            pending.sort_by(|a, b| a.key.cmp(&b.key));
            for group in pending.chunk_by(|a, b| a.key == b.key) {
                self.write_with_retry(group);
            }
            pending.clear(); // acknowledges
            self.reap();
        }
    }

    fn write_with_retry(&mut self, jobs: &[Job]) {
        let mut backoff = Duration::from_millis(100);
        loop {
            match self.write(jobs) {
                Ok(()) => return,
                Err(e) => {
                    let name = String::from_utf8_lossy(&jobs[0].key).into_owned();
                    internal::error(format!(
                        "{}: error writing {name}: {e}; retrying in {backoff:?}",
                        self.label
                    ));
                    self.open.remove(&jobs[0].key);
                    std::thread::sleep(backoff);
                    backoff = (backoff * 2).min(Duration::from_secs(60));
                }
            }
        }
    }

    fn write(&mut self, jobs: &[Job]) -> std::io::Result<()> {
        if let Target::Stdout = self.target {
            let mut out = std::io::stdout().lock();
            for job in jobs {
                out.write_all(&job.data)?;
            }
            return out.flush();
        }
        let key = &jobs[0].key;
        if !self.open.contains_key(key) {
            if self.open.len() >= MAX_OPEN_PER_WRITER {
                self.close_least_recent();
            }
            let path =
                Path::new(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(key));
            let file = open(path, &self.opts)?;
            self.open.insert(
                key.clone(),
                OpenFile {
                    file,
                    last_write: Instant::now(),
                },
            );
        }
        let entry = self.open.get_mut(key).expect("opened above");
        entry.last_write = Instant::now();
        let f = &mut entry.file;
        let mut slices: Vec<std::io::IoSlice> = jobs
            .iter()
            .map(|j| std::io::IoSlice::new(&j.data))
            .collect();
        let mut slices = &mut slices[..];
        while !slices.is_empty() {
            let n = f.write_vectored(slices)?;
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

    /// Closes files not written for `time-reap()`.
    fn reap(&mut self) {
        let reap = self.opts.time_reap;
        self.open.retain(|_, f| f.last_write.elapsed() < reap);
    }

    fn close_least_recent(&mut self) {
        if let Some(oldest) = self
            .open
            .iter()
            .min_by_key(|(_, f)| f.last_write)
            .map(|(k, _)| k.clone())
        {
            self.open.remove(&oldest);
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
