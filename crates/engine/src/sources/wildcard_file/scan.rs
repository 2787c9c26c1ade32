//! `wildcard-file()`: every file under `base-dir()` whose name matches `filename-pattern()`
//! (and not `exclude-pattern()`), in its subdirectories too with `recursive(yes)`, is read as
//! `file()` reads one ([`crate::sources::file::follow::read_file`]): followed as it grows, across rotations,
//! its position kept. The directory is looked at again every `follow-freq()`; a file that
//! appears is read from its start, a file whose name is gone is read to its end and left. At
//! most `max-files()` are read at once; the rest wait for a place, and that is said.
//!
//! Each file is counted on its own, as syslog-ng counts it: `src.file;s#0;/var/log/a.log`.

use crate::own_log as log;
use crate::sources::file::follow::{read_file, Following};
use crate::sources::until_retired;
use crate::sources::{Context, Local, ReaderSpec, Retire};
use crate::stats::Registry;
use glob::Pattern;
use std::collections::HashMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// How long a scan with change notices waits without one before it looks anyway.
const UNNOTICED: std::time::Duration = std::time::Duration::from_secs(10);

#[derive(Clone, Debug)]
pub struct WildcardSource {
    pub base_dir: PathBuf,
    /// `filename-pattern()`, matched against a file's name.
    pub pattern: Pattern,
    pub exclude: Option<Pattern>,
    pub recursive: bool,
    pub max_files: usize,
    /// How its files are read: each file gets a counter of its own ([`WildcardSource::local_of`]).
    pub local: Local,
    /// `follow-freq()`: how often the directory and the end of each file are looked at again
    /// without change notices.
    pub follow_freq: std::time::Duration,
    /// `monitor-method(auto|inotify)`: change notices wake the looks; `poll`: none.
    pub notices: bool,
    /// Where each file's counter is made.
    pub stats: Arc<Registry>,
    /// The driver as the counters name it: `s#0`.
    pub counted_as: String,
}

impl crate::sources::Source for WildcardSource {
    fn source_name(&self) -> &Arc<str> {
        &self.local.source_name
    }

    fn place(&self) -> crate::sources::Place {
        crate::sources::Place {
            kind: "wildcard-file",
            address: format!("{}/{}", self.base_dir.display(), self.pattern),
        }
    }

    fn bind(
        self: Arc<Self>,
        _: Option<crate::sources::Held>,
    ) -> std::io::Result<Box<dyn crate::sources::Ready>> {
        Ok(Box::new(Ready { source: self }))
    }

    fn reader(&self) -> Option<&ReaderSpec> {
        Some(&self.local.reader)
    }
}

struct Ready {
    source: Arc<WildcardSource>,
}

impl crate::sources::Ready for Ready {
    fn run(
        self: Box<Self>,
        ctx: Context,
        retire: watch::Receiver<Retire>,
    ) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        Box::pin(async move { self.source.watch(ctx, retire).await })
    }
}

impl WildcardSource {
    /// Looks for files every `follow-freq()` and reads each one it finds, until sluice stops
    /// or a reload retires the source; then waits for its readers to keep their positions.
    async fn watch(self: Arc<Self>, ctx: Context, retire: watch::Receiver<Retire>) {
        let (reading, watcher) = until_retired(&ctx, retire);
        let mut stop = reading.shutdown.clone();
        let mut readers: HashMap<PathBuf, JoinHandle<()>> = HashMap::new();
        let mut said = Said::default();
        // Every directory scanned wakes the next scan when an entry in it changes.
        let notices = self
            .notices
            .then(crate::sources::notices::notices)
            .flatten();
        let changed = Arc::new(tokio::sync::Notify::new());
        let mut watched: HashMap<PathBuf, crate::sources::notices::Subscription> = HashMap::new();
        loop {
            readers.retain(|_, r| !r.is_finished());
            let (found, dirs) = self.scan(&mut said);
            if let Some(n) = notices {
                watched.retain(|d, _| dirs.contains(d));
                for d in dirs {
                    if let std::collections::hash_map::Entry::Vacant(slot) = watched.entry(d) {
                        let sub = n.subscribe_with(slot.key(), true, Some(changed.clone()));
                        if let Some(sub) = sub {
                            slot.insert(sub);
                        }
                    }
                }
            }
            let mut waiting = 0;
            for path in found {
                if readers.contains_key(&path) {
                    continue;
                }
                if readers.len() >= self.max_files {
                    waiting += 1;
                    continue;
                }
                let local = self.local_of(&path);
                let following = Following {
                    follow_freq: self.follow_freq,
                    notices: self.notices,
                    ends_when_gone: true,
                };
                let cx = reading.clone();
                let at = path.clone();
                readers.insert(
                    path,
                    tokio::spawn(async move { read_file(&at, &local, following, &cx).await }),
                );
            }
            said.waiting(&self, waiting);
            let wait = match watched.is_empty() {
                false => UNNOTICED.max(self.follow_freq),
                true => self.follow_freq,
            };
            tokio::select! {
                _ = stop.wait_for(|s| *s) => break,
                _ = tokio::time::sleep(wait) => {}
                _ = changed.notified() => {}
            }
        }
        for (_, r) in readers {
            let _ = r.await;
        }
        watcher.abort();
    }

    /// How one file is read: with its own counter.
    fn local_of(&self, path: &Path) -> Local {
        let mut local = self.local.clone();
        local.reader.counted.driver = self.stats.counter(
            "src.file",
            &self.counted_as,
            &path.display().to_string(),
            "processed",
        );
        local
    }

    /// The files that match, sorted, and the directories read; a directory that cannot be
    /// read is said once.
    fn scan(&self, said: &mut Said) -> (Vec<PathBuf>, Vec<PathBuf>) {
        let mut found = Vec::new();
        let mut read = Vec::new();
        let mut dirs = vec![self.base_dir.clone()];
        while let Some(dir) = dirs.pop() {
            let entries = match std::fs::read_dir(&dir) {
                Ok(e) => {
                    said.readable(&dir);
                    read.push(dir.clone());
                    e
                }
                Err(e) => {
                    said.unreadable(self, &dir, &e);
                    continue;
                }
            };
            for entry in entries.flatten() {
                let Ok(kind) = entry.file_type() else {
                    continue;
                };
                let path = entry.path();
                if kind.is_dir() {
                    if self.recursive {
                        dirs.push(path);
                    }
                    continue;
                }
                // A name that is not UTF-8 is matched as shown (`�` for each bad byte) and
                // read under its own bytes, as syslog-ng reads it.
                let name = entry.file_name();
                let name = name.to_string_lossy();
                let excluded = self.exclude.as_ref().is_some_and(|x| x.matches(&name));
                let regular = kind.is_file() || (kind.is_symlink() && path.is_file());
                if regular && !excluded && self.pattern.matches(&name) {
                    found.push(path);
                }
            }
        }
        found.sort();
        (found, read)
    }
}

/// What was said, so that each thing is said once (and again when it changes).
#[derive(Default)]
struct Said {
    unreadable: HashMap<PathBuf, String>,
    waiting: usize,
}

impl Said {
    fn unreadable(&mut self, source: &WildcardSource, dir: &Path, e: &std::io::Error) {
        let why = e.to_string();
        if self.unreadable.get(dir) != Some(&why) {
            log::warning(format!(
                "wildcard-file({}): directory {}: {why}; looking again every {}s",
                source.base_dir.display(),
                dir.display(),
                source.follow_freq.as_secs_f64()
            ));
            self.unreadable.insert(dir.to_path_buf(), why);
        }
    }

    fn readable(&mut self, dir: &Path) {
        self.unreadable.remove(dir);
    }

    fn waiting(&mut self, source: &WildcardSource, waiting: usize) {
        if waiting > 0 && self.waiting == 0 {
            log::warning(format!(
                "wildcard-file({}): max-files({}) reached; {waiting} more files wait until files read now are gone",
                source.base_dir.display(),
                source.max_files
            ));
        }
        self.waiting = waiting;
    }
}
