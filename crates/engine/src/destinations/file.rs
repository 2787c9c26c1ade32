//! `file()` and `stdout()` destinations.
//!
//! The file name is a template. Readers format their share of a batch into one buffer per
//! distinct file name and hand each buffer to that file's writer: a thread of its own that
//! opens the file on first use, appends whole buffers (several at once when they queue up),
//! `fsync()`s when asked, and closes the file after `time-reap()` seconds without writes.
//! Writers of templated names are forgotten when idle that long.
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
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
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

#[derive(Debug)]
enum Target {
    Path(PathBuf),
    Stdout,
}

struct Job {
    data: Vec<u8>,
    _ack: Ack,
}

struct Writer {
    tx: mpsc::Sender<Job>,
    last_used: AtomicU64,
}

pub struct FileDestination {
    name: String,
    path: Option<Template>,
    format: Format,
    opts: Arc<FileOptions>,
    writers: Mutex<HashMap<Vec<u8>, Arc<Writer>>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    started: Instant,
    last_sweep: AtomicU64,
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
            format,
            opts: Arc::new(opts),
            writers: Mutex::new(HashMap::new()),
            threads: Mutex::new(Vec::new()),
            started: Instant::now(),
            last_sweep: AtomicU64::new(0),
        }
    }

    fn now(&self) -> u64 {
        self.started.elapsed().as_secs()
    }

    fn writer(&self, key: &[u8]) -> Arc<Writer> {
        let mut writers = self.writers.lock().expect("writers lock");
        if let Some(w) = writers.get(key) {
            w.last_used.store(self.now(), Ordering::Relaxed);
            return w.clone();
        }
        let target = match &self.path {
            Some(_) => Target::Path(PathBuf::from(
                <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(key),
            )),
            None => Target::Stdout,
        };
        let (tx, rx) = mpsc::channel();
        let opts = self.opts.clone();
        let label = format!("{} {:?}", self.name, target);
        let handle = std::thread::Builder::new()
            .name(format!("file:{}", String::from_utf8_lossy(key)))
            .spawn(move || write_loop(target, rx, &opts, &label))
            .expect("spawning a file writer thread");
        self.threads.lock().expect("threads lock").push(handle);
        let w = Arc::new(Writer {
            tx,
            last_used: AtomicU64::new(self.now()),
        });
        writers.insert(key.to_vec(), w.clone());
        w
    }

    /// Forgets writers of templated names idle for `time-reap()`; their threads end once
    /// their queues are written.
    fn sweep(&self) {
        let now = self.now();
        let reap = self.opts.time_reap.as_secs().max(1);
        if self.path.as_ref().is_none_or(|p| p.literal().is_some())
            || now < self.last_sweep.load(Ordering::Relaxed) + reap
        {
            return;
        }
        self.last_sweep.store(now, Ordering::Relaxed);
        let mut writers = self.writers.lock().expect("writers lock");
        writers.retain(|_, w| now < w.last_used.load(Ordering::Relaxed) + reap);
        self.threads
            .lock()
            .expect("threads lock")
            .retain(|t| !t.is_finished());
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
                self.format
                    .append(&msgs[i as usize], no_multi_line, &mut data);
            }
            self.send(key, data, ack);
            return;
        }
        let template = self.path.as_ref().expect("templated file name");
        // Few distinct names per batch: a short list beats hashing every message.
        let mut groups: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        let mut name = Vec::with_capacity(128);
        for &i in which {
            let msg = &msgs[i as usize];
            name.clear();
            template.append(msg, &mut name);
            let at = match groups.iter().position(|(n, _)| *n == name) {
                Some(at) => at,
                None => {
                    groups.push((name.clone(), Vec::with_capacity(4096)));
                    groups.len() - 1
                }
            };
            self.format.append(msg, no_multi_line, &mut groups[at].1);
        }
        for (name, data) in groups {
            self.send(&name, data, ack);
        }
        self.sweep();
    }

    fn shutdown(&self) {
        self.writers.lock().expect("writers lock").clear();
        let threads = std::mem::take(&mut *self.threads.lock().expect("threads lock"));
        for t in threads {
            let _ = t.join();
        }
    }
}

impl FileDestination {
    fn send(&self, key: &[u8], data: Vec<u8>, ack: &Ack) {
        let job = Job {
            data,
            _ack: ack.clone(),
        };
        if let Err(mpsc::SendError(job)) = self.writer(key).tx.send(job) {
            // The writer ended between lookup and send (reaped): start a new one.
            self.writers.lock().expect("writers lock").remove(key);
            let _ = self.writer(key).tx.send(job);
        }
    }
}

/// The most a writer gathers into one write when several buffers are queued.
const MAX_GATHER: usize = 4 << 20;

fn write_loop(target: Target, rx: mpsc::Receiver<Job>, opts: &FileOptions, label: &str) {
    let mut file: Option<File> = None;
    let mut pending: Vec<Job> = Vec::new();
    loop {
        let first = match rx.recv_timeout(opts.time_reap) {
            Ok(job) => job,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                file = None;
                continue;
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => return,
        };
        let mut bytes = first.data.len();
        pending.push(first);
        while bytes < MAX_GATHER {
            match rx.try_recv() {
                Ok(job) => {
                    bytes += job.data.len();
                    pending.push(job);
                }
                Err(_) => break,
            }
        }
        let mut backoff = Duration::from_millis(100);
        loop {
            match write_all(&target, &mut file, &pending, opts) {
                Ok(()) => break,
                Err(e) => {
                    internal::error(format!(
                        "error writing {label}: {e}; retrying in {backoff:?}"
                    ));
                    file = None;
                    std::thread::sleep(backoff);
                    backoff = (backoff * 2).min(Duration::from_secs(60));
                }
            }
        }
        pending.clear(); // acknowledges
    }
}

fn write_all(
    target: &Target,
    file: &mut Option<File>,
    jobs: &[Job],
    opts: &FileOptions,
) -> std::io::Result<()> {
    if let Target::Stdout = target {
        let mut out = std::io::stdout().lock();
        for job in jobs {
            out.write_all(&job.data)?;
        }
        return out.flush();
    }
    let Target::Path(path) = target else {
        unreachable!("stdout handled above")
    };
    if file.is_none() {
        *file = Some(open(path, opts)?);
    }
    let f = file.as_mut().expect("opened above");
    if jobs.len() == 1 {
        f.write_all(&jobs[0].data)?;
    } else {
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
    }
    if opts.fsync {
        f.sync_data()?;
    }
    Ok(())
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
