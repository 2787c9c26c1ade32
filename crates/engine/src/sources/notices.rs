//! Change notices for followed files, from inotify: one instance for the process, one watch
//! per directory that holds a followed file (directories, not files: a watch per file would
//! run out of `max_user_watches` with thousands of files). An event names a file in its
//! directory; its follower — or the directory's, a `wildcard-file()` looking for new files —
//! is woken. Followers still look again every while without one (a file system that sends no
//! events, an event missed), so a notice makes them quick, never correct.

use inotify::{EventMask, Inotify, WatchDescriptor, WatchMask, Watches};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use tokio::sync::Notify;

pub struct Notices {
    watches: Mutex<Watches>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Each watched directory: its watch and how many subscriptions are in it.
    dirs: HashMap<PathBuf, (WatchDescriptor, usize)>,
    by_watch: HashMap<WatchDescriptor, PathBuf>,
    /// Who is woken for a path (a file, or a directory itself), and how many subscriptions
    /// share it.
    waiting: HashMap<PathBuf, (Arc<Notify>, usize)>,
}

/// What wakes a file's (or a directory's) follower; unsubscribes when dropped.
pub struct Subscription {
    notices: &'static Notices,
    path: PathBuf,
    dir: PathBuf,
    pub notify: Arc<Notify>,
}

/// The process's notices, started on first use in the runtime; `None` where inotify cannot
/// be had (the followers look again every `follow-freq()` then).
pub fn notices() -> Option<&'static Notices> {
    static NOTICES: OnceLock<Option<Notices>> = OnceLock::new();
    NOTICES
        .get_or_init(|| {
            let inotify = Inotify::init().ok()?;
            let watches = inotify.watches();
            let stream = inotify.into_event_stream(vec![0u8; 64 << 10]).ok()?;
            tokio::spawn(deliver(stream));
            Some(Notices {
                watches: Mutex::new(watches),
                state: Mutex::default(),
            })
        })
        .as_ref()
}

/// Wakes the follower of each path an event names, and of its directory.
async fn deliver(mut stream: inotify::EventStream<Vec<u8>>) {
    use inotify::StreamExt;
    while let Some(Ok(event)) = stream.next().await {
        let Some(notices) = notices() else { return };
        let state = notices.state.lock().expect("notices lock");
        if event.mask.contains(EventMask::Q_OVERFLOW) {
            // Events were lost: everyone looks.
            state.waiting.values().for_each(|(n, _)| n.notify_one());
            continue;
        }
        let Some(dir) = state.by_watch.get(&event.wd) else {
            continue;
        };
        if let Some(name) = &event.name {
            if let Some((n, _)) = state.waiting.get(&dir.join(name)) {
                n.notify_one();
            }
        }
        if let Some((n, _)) = state.waiting.get(dir) {
            n.notify_one();
        }
    }
}

impl Notices {
    /// Wakes the returned subscription when something happens to `path` (a file in a
    /// directory, or with `is_dir`, the directory's entries); `None` when its directory
    /// cannot be watched.
    pub fn subscribe(&'static self, path: &Path, is_dir: bool) -> Option<Subscription> {
        self.subscribe_with(path, is_dir, None)
    }

    /// As [`Notices::subscribe`], waking `notify` (one for several paths: a
    /// `wildcard-file()`'s directories) instead of the path's own.
    pub fn subscribe_with(
        &'static self,
        path: &Path,
        is_dir: bool,
        notify: Option<Arc<Notify>>,
    ) -> Option<Subscription> {
        let dir = if is_dir {
            path.to_path_buf()
        } else {
            path.parent()?.to_path_buf()
        };
        let mut state = self.state.lock().expect("notices lock");
        match state.dirs.get_mut(&dir) {
            Some((_, count)) => *count += 1,
            None => {
                let mask = WatchMask::MODIFY
                    | WatchMask::CREATE
                    | WatchMask::DELETE
                    | WatchMask::MOVED_FROM
                    | WatchMask::MOVED_TO
                    | WatchMask::ATTRIB;
                let wd = self
                    .watches
                    .lock()
                    .expect("watches lock")
                    .add(&dir, mask)
                    .ok()?;
                state.by_watch.insert(wd.clone(), dir.clone());
                state.dirs.insert(dir.clone(), (wd, 1));
            }
        }
        let (notify, count) = state
            .waiting
            .entry(path.to_path_buf())
            .or_insert_with(|| (notify.unwrap_or_default(), 0));
        *count += 1;
        let notify = notify.clone();
        Some(Subscription {
            notices: self,
            path: path.to_path_buf(),
            dir,
            notify,
        })
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let mut state = self.notices.state.lock().expect("notices lock");
        if let Some((_, count)) = state.waiting.get_mut(&self.path) {
            *count -= 1;
            if *count == 0 {
                state.waiting.remove(&self.path);
            }
        }
        let last = match state.dirs.get_mut(&self.dir) {
            Some((_, count)) => {
                *count -= 1;
                *count == 0
            }
            None => false,
        };
        if last {
            if let Some((wd, _)) = state.dirs.remove(&self.dir) {
                state.by_watch.remove(&wd);
                let _ = self
                    .notices
                    .watches
                    .lock()
                    .expect("watches lock")
                    .remove(wd);
            }
        }
    }
}
