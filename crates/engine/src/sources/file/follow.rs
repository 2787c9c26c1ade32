//! `file()`: follows one file as it grows, across rotations, and keeps where it got to.
//!
//! [`Follow`] gives [`read_stream`] the file's bytes as one endless stream: at the end of the
//! file it waits `follow-freq()` and looks again. When the path names another file (rotated by
//! rename and create, or deleted and made again) it reads the old file to its end — until it
//! stayed quiet for one more wait — and goes on with the new one from its start; when the file
//! got shorter than what was read (copied and truncated) it starts again at 0. A last line
//! without a newline waits for its end, or for the rotation that ends it.
//!
//! Positions: every read tells the reader where it ends ([`Positions`]) and holds an
//! acknowledgement until every destination wrote its messages, as on a flow-controlled path;
//! the positions that came back, in order, are kept in the persist file ([`crate::persist`])
//! under the path. A restart goes on from there: with the same file if it is still at the
//! path (and not shorter), with the rotated file first if it is still in the directory under
//! another name, else from the start of what the path holds now. `kill -9` repeats at most
//! the reads that were in flight (one window) and loses nothing.

use crate::file_open;
use crate::own_log as log;
use crate::persist::{self, Found, Position};
use crate::sources::{
    read_stream, turn, until_retired, Context, Local, Positions, ReaderSpec, Retire,
};
use crate::window::Delivered;
use sluice_model::values::name_id;
use sluice_protocol::Text;
use std::collections::VecDeque;
use std::fs::File;
use std::future::Future;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{ready, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, ReadBuf};
use tokio::sync::{mpsc, oneshot, watch};

#[derive(Clone, Debug)]
pub struct FileSource {
    /// The file, as configured.
    pub path: PathBuf,
    pub local: Local,
    /// `follow-freq()`: how often the end of the file is looked at again.
    pub follow_freq: Duration,
}

impl crate::sources::Source for FileSource {
    fn source_name(&self) -> &Arc<str> {
        &self.local.source_name
    }

    fn place(&self) -> crate::sources::Place {
        crate::sources::Place {
            kind: "file",
            address: self.path.display().to_string(),
        }
    }

    /// Nothing to bind: the file is opened when the source runs, after a predecessor at the
    /// same path (a reload) finished what it read.
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
    source: Arc<FileSource>,
}

impl crate::sources::Ready for Ready {
    fn run(
        self: Box<Self>,
        ctx: Context,
        retire: watch::Receiver<Retire>,
    ) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        Box::pin(async move { self.source.follow(ctx, retire).await })
    }
}

impl FileSource {
    /// Reads the file until sluice stops or a reload retires the source.
    async fn follow(&self, ctx: Context, retire: watch::Receiver<Retire>) {
        let (reading, watcher) = until_retired(&ctx, retire);
        let following = Following {
            follow_freq: self.follow_freq,
            notices: true,
            ends_when_gone: false,
        };
        read_file(&self.path, &self.local, following, &reading).await;
        watcher.abort();
    }
}

/// How a file is followed.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Following {
    /// `follow-freq()`: how often the end of the file is looked at again without notices.
    pub(crate) follow_freq: Duration,
    /// Change notices (inotify) wake the wait at the end of the file (`monitor-method()`).
    pub(crate) notices: bool,
    /// `wildcard-file()`: a file whose path is gone is read to its end, then left.
    pub(crate) ends_when_gone: bool,
}

/// Reads the file at `path` until `ctx` stops (or, with `ends_when_gone`, until the path is
/// gone and the file read to its end); then waits for what it read to be delivered and keeps
/// the position. One reader per path at a time: a reload's new source waits for the old.
pub(crate) async fn read_file(path: &Path, local: &Local, following: Following, ctx: &Context) {
    let key = format!("file:{}", path.display());
    let turn = turn(&key);
    let _turn = turn.lock().await;
    let segments = Arc::new(Mutex::new(Segments::default()));
    let (kept_tx, kept_rx) = mpsc::unbounded_channel();
    let keeper = tokio::spawn(keep_positions(key.clone(), segments.clone(), kept_rx));
    let input = Follow::start(path, following, &key, segments);
    let origin = local.origin(vec![(
        name_id("FILE_NAME"),
        Text::Shared(Arc::from(path.as_os_str().as_encoded_bytes())),
    )]);
    let reader = &local.reader;
    let window = reader.window();
    let mut tracker = Tracker { kept: kept_tx };
    let label = path.display().to_string();
    read_stream(
        input,
        origin,
        reader,
        &window,
        ctx,
        &label,
        Some(&mut tracker),
    )
    .await;
    drop(tracker);
    ctx.keep_last(&window, keeper).await;
}

/// Opens a followed path for reading without waiting: a named pipe put where a log file was
/// (rotated into a FIFO) would block the runtime thread that opened it, and with it every
/// reader on that thread and the stop. Files and character devices are read; anything else is
/// refused, said, and looked at again on the next try. A link at the path is followed only
/// when root or sluice's own user made it (`file_open::open_trusting_own_links`).
fn open_to_follow(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::FileTypeExt;
    let flags = rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::NONBLOCK;
    let file = File::from(file_open::open_trusting_own_links(path, flags).map_err(|e| e.error)?);
    let kind = file.metadata()?.file_type();
    if !(kind.is_file() || kind.is_char_device()) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "it is not a file (a named pipe, a socket…); file() follows files",
        ));
    }
    // Read as before: a character device (`/dev/kmsg`) blocks between records.
    let flags = rustix::fs::fcntl_getfl(&file)?;
    rustix::fs::fcntl_setfl(&file, flags - rustix::fs::OFlags::NONBLOCK)?;
    Ok(file)
}

/// Tells the keeper of positions where each read ends, with the acknowledgement to wait for.
struct Tracker {
    kept: mpsc::UnboundedSender<(u64, oneshot::Receiver<Delivered>)>,
}

impl Positions for Tracker {
    fn read_ends_at(&mut self, end: u64) -> oneshot::Sender<Delivered> {
        let (delivered, done) = oneshot::channel();
        let _ = self.kept.send((end, done));
        delivered
    }
}

/// Keeps the position of each read once it is delivered, in order, and only then gives the
/// read's credits back: the reader is never more than a window past the position kept, so
/// `kill -9` repeats at most a window. A read that was not delivered (lost at a stop) ends
/// the keeping: the next start repeats from the last one.
async fn keep_positions(
    key: String,
    segments: Arc<Mutex<Segments>>,
    mut reads: mpsc::UnboundedReceiver<(u64, oneshot::Receiver<Delivered>)>,
) {
    while let Some((end, done)) = reads.recv().await {
        let Ok(credits) = done.await else {
            return;
        };
        let at = segments.lock().expect("segments lock").position(end);
        if let Some(at) = at {
            persist::keep(&key, at);
        }
        drop(credits);
    }
}

/// Which file each stretch of the stream came from.
#[derive(Default)]
struct Segments(VecDeque<Segment>);

struct Segment {
    /// Where in the stream the stretch starts.
    stream: u64,
    dev: u64,
    ino: u64,
    /// Where in the file it starts.
    offset: u64,
}

impl Segments {
    fn push(&mut self, s: Segment) {
        self.0.push_back(s);
    }

    /// The file position of the stream's byte `end`; the stretches before its own are
    /// forgotten (positions come in order).
    fn position(&mut self, end: u64) -> Option<Position> {
        while self.0.len() > 1 && self.0[1].stream <= end {
            self.0.pop_front();
        }
        let s = self.0.front().filter(|s| s.stream <= end)?;
        Some(Position {
            dev: s.dev,
            ino: s.ino,
            offset: s.offset + (end - s.stream),
        })
    }
}

/// The file as an endless stream (see the module's description).
struct Follow {
    path: PathBuf,
    follow_freq: Duration,
    /// The file being read, its identity and where in it.
    file: Option<(File, (u64, u64))>,
    offset: u64,
    /// Bytes given to the reader so far.
    stream: u64,
    /// The last byte given: a file that ends without a newline gets one when it is left.
    last: u8,
    /// A newline is owed before the next file (or the start again).
    newline: bool,
    segments: Arc<Mutex<Segments>>,
    sleep: Pin<Box<tokio::time::Sleep>>,
    waiting: bool,
    /// The path names another file (or, with `ends_when_gone`, none) and the one read stayed
    /// quiet since: leave it next time.
    moved_on: bool,
    /// `wildcard-file()`: a file whose path is gone is read to its end, then left.
    ends_when_gone: bool,
    /// What was said about the path not being there, so it is said once.
    said: Option<String>,
    /// Wakes the wait at the end of the file when the file or its name changes (inotify);
    /// `None`: the end is looked at every `follow-freq()`.
    notices: Option<crate::sources::notices::Subscription>,
    /// The notice being waited for.
    notified: Option<Pin<Box<tokio::sync::futures::OwnedNotified>>>,
    /// The file the path named before a rotation, read for late lines for a while.
    rotated: Option<Rotated>,
    /// The stream goes back to the current file after late lines of the rotated one.
    resegment: bool,
}

/// How long a follower with change notices waits at the end of its file without one before
/// it looks anyway (an event missed, a file system that sends none).
const UNNOTICED: Duration = Duration::from_secs(10);

/// How long a file renamed away is still read for lines its writer adds late (a writer that
/// reopens its file some time after logrotate renamed it).
const LATE_LINES: Duration = Duration::from_secs(60);

/// A file renamed away, kept open for its writer's late lines.
struct Rotated {
    file: File,
    id: (u64, u64),
    offset: u64,
    until: std::time::Instant,
}

impl Follow {
    /// Opens where the persist file says the source got to.
    fn start(
        path: &Path,
        following: Following,
        key: &str,
        segments: Arc<Mutex<Segments>>,
    ) -> Follow {
        let mut f = Follow {
            path: path.to_path_buf(),
            follow_freq: following.follow_freq,
            file: None,
            offset: 0,
            stream: 0,
            last: b'\n',
            newline: false,
            segments,
            sleep: Box::pin(tokio::time::sleep(Duration::ZERO)),
            waiting: false,
            moved_on: false,
            ends_when_gone: following.ends_when_gone,
            said: None,
            notices: following
                .notices
                .then(crate::sources::notices::notices)
                .flatten()
                .and_then(|n| n.subscribe(path, false)),
            notified: None,
            rotated: None,
            resegment: false,
        };
        match persist::find(key) {
            Found::At(at) => f.resume(at),
            Found::New => {}
            Found::Unknown => {
                // The persist file was lost: rather the end than everything again.
                if f.open_path() {
                    if let Some((file, _)) = &mut f.file {
                        f.offset = file.seek(SeekFrom::End(0)).unwrap_or(0);
                        f.restart_segment();
                    }
                }
            }
        }
        f
    }

    /// Goes on from `at`: in the file at the path if it is that file and not shorter, else
    /// in that file under its new name in the same directory (rotated while sluice was
    /// stopped), else from the start of the path.
    fn resume(&mut self, at: Position) {
        let same = |m: &std::fs::Metadata| m.dev() == at.dev && m.ino() == at.ino;
        let found = match std::fs::metadata(&self.path) {
            Ok(m) if same(&m) => Some(self.path.clone()),
            _ => self.path.parent().and_then(|dir| {
                std::fs::read_dir(dir).ok()?.flatten().find_map(|e| {
                    let m = e.metadata().ok()?;
                    (m.is_file() && same(&m)).then(|| e.path())
                })
            }),
        };
        let Some(found) = found else {
            return;
        };
        let Ok(mut file) = open_to_follow(&found) else {
            return;
        };
        let Ok(m) = file.metadata() else {
            return;
        };
        if m.len() < at.offset || file.seek(SeekFrom::Start(at.offset)).is_err() {
            return;
        }
        if found != self.path {
            log::notice(format!(
                "file {}: reading the rest of {} first (rotated while sluice was stopped)",
                self.path.display(),
                found.display()
            ));
        }
        self.file = Some((file, (at.dev, at.ino)));
        self.offset = at.offset;
        self.restart_segment();
    }

    /// Opens the file at the path from its start; says once when it cannot.
    fn open_path(&mut self) -> bool {
        let opened = open_to_follow(&self.path).and_then(|f| {
            let m = f.metadata()?;
            Ok((f, (m.dev(), m.ino())))
        });
        match opened {
            Ok(file) => {
                if self.said.take().is_some() {
                    log::notice(format!("file {}: reading it now", self.path.display()));
                }
                self.file = Some(file);
                self.offset = 0;
                self.restart_segment();
                true
            }
            Err(e) => {
                let why = if persist::missing(&e) {
                    "not there (yet)".to_string()
                } else {
                    e.to_string()
                };
                if self.said.as_deref() != Some(why.as_str()) {
                    log::warning(format!(
                        "file {}: {why}; trying every {}s",
                        self.path.display(),
                        self.follow_freq.as_secs_f64()
                    ));
                    self.said = Some(why);
                }
                false
            }
        }
    }

    /// The stream from here on is the current file from `offset`.
    fn restart_segment(&mut self) {
        if let Some((_, (dev, ino))) = self.file {
            self.segments.lock().expect("segments lock").push(Segment {
                stream: self.stream,
                dev,
                ino,
                offset: self.offset,
            });
        }
    }

    /// At the end of the file: whether the path names another file now, or the file got
    /// shorter than what was read.
    fn look(&mut self) -> Look {
        let Some((file, (dev, ino))) = &self.file else {
            return Look::Same;
        };
        let Ok(now) = std::fs::metadata(&self.path) else {
            // Deleted: `file()` waits for it to come back, reading what is open meanwhile.
            return if self.ends_when_gone {
                Look::Gone
            } else {
                Look::Same
            };
        };
        if (now.dev(), now.ino()) != (*dev, *ino) {
            return Look::Rotated;
        }
        match file.metadata() {
            Ok(m) if m.len() < self.offset => Look::Truncated,
            _ => Look::Same,
        }
    }

    fn owe_newline(&mut self) {
        self.newline = self.last != b'\n';
    }
}

enum Look {
    Same,
    Rotated,
    Truncated,
    Gone,
}

impl AsyncRead for Follow {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let f = self.get_mut();
        loop {
            if f.waiting {
                let noticed = f
                    .notified
                    .as_mut()
                    .is_some_and(|n| n.as_mut().poll(cx).is_ready());
                if !noticed {
                    ready!(f.sleep.as_mut().poll(cx));
                }
                f.waiting = false;
                f.notified = None;
            }
            if f.newline {
                buf.put_slice(b"\n");
                f.newline = false;
                f.last = b'\n';
                f.stream += 1;
                f.restart_segment();
                return Poll::Ready(Ok(()));
            }
            if f.file.is_none() && !f.open_path() {
                f.wait();
                continue;
            }
            if std::mem::take(&mut f.resegment) {
                f.restart_segment();
            }
            let (file, _) = f.file.as_mut().expect("open");
            match file.read(buf.initialize_unfilled()) {
                Ok(n) if n > 0 => {
                    let filled = buf.filled().len();
                    buf.advance(n);
                    f.last = buf.filled()[filled + n - 1];
                    f.offset += n as u64;
                    f.stream += n as u64;
                    f.moved_on = false;
                    return Poll::Ready(Ok(()));
                }
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    log::error(format!("file {}: {e}; reading it again", f.path.display()));
                    f.file = None;
                    f.owe_newline();
                    f.wait();
                    continue;
                }
            }
            // The end of the file: late lines of the file renamed away, between whole lines.
            if f.late_lines(buf) {
                return Poll::Ready(Ok(()));
            }
            match f.look() {
                Look::Rotated if f.moved_on => {
                    // Quiet for a whole wait since the path moved on: the new file next, the
                    // old one still read for late lines.
                    if let Some((file, id)) = f.file.take() {
                        f.rotated = Some(Rotated {
                            file,
                            id,
                            offset: f.offset,
                            until: std::time::Instant::now() + LATE_LINES,
                        });
                    }
                    f.moved_on = false;
                    f.owe_newline();
                    continue;
                }
                // Quiet for a whole wait since the path went: the end (a last line without
                // a newline is a line).
                Look::Gone if f.moved_on => return Poll::Ready(Ok(())),
                Look::Rotated | Look::Gone => f.moved_on = true,
                Look::Truncated => {
                    log::notice(format!(
                        "file {}: it got shorter (truncated); reading it from its start",
                        f.path.display()
                    ));
                    let (file, _) = f.file.as_mut().expect("open");
                    f.offset = file.seek(SeekFrom::Start(0)).unwrap_or(0);
                    f.owe_newline();
                    if !f.newline {
                        f.restart_segment();
                    }
                    continue;
                }
                Look::Same => {}
            }
            f.wait();
        }
    }
}

impl Follow {
    /// Gives the reader what the file renamed away got since, if the stream is between
    /// lines: its own stretch of the stream, then back to the current file (a newline owed
    /// when the late part ends without one). Lets the old file go after [`LATE_LINES`].
    fn late_lines(&mut self, buf: &mut ReadBuf<'_>) -> bool {
        if self.last != b'\n' || self.newline {
            return false;
        }
        let Some(r) = &mut self.rotated else {
            return false;
        };
        if std::time::Instant::now() > r.until {
            self.rotated = None;
            return false;
        }
        let n = match r.file.read(buf.initialize_unfilled()) {
            Ok(n) if n > 0 => n,
            _ => return false,
        };
        self.segments.lock().expect("segments lock").push(Segment {
            stream: self.stream,
            dev: r.id.0,
            ino: r.id.1,
            offset: r.offset,
        });
        let filled = buf.filled().len();
        buf.advance(n);
        r.offset += n as u64;
        self.stream += n as u64;
        self.last = buf.filled()[filled + n - 1];
        // Back to the current file: after a newline owed, or at once.
        self.owe_newline();
        self.resegment = !self.newline;
        true
    }

    /// Waits at the end of the file: for a change notice, or `follow-freq()`. While the
    /// path moves on (a rotation) or the file is missing, every `follow-freq()`: the old
    /// file's last lines and a file that appears are noticed by looking.
    fn wait(&mut self) {
        let noticed = self.file.is_some() && !self.moved_on && self.rotated.is_none();
        let wait = match &self.notices {
            Some(sub) if noticed => {
                self.notified = Some(Box::pin(sub.notify.clone().notified_owned()));
                UNNOTICED.max(self.follow_freq)
            }
            _ => self.follow_freq,
        };
        self.sleep
            .as_mut()
            .reset(tokio::time::Instant::now() + wait);
        self.waiting = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_map_the_stream_to_its_files() {
        let mut s = Segments::default();
        s.push(Segment {
            stream: 0,
            dev: 1,
            ino: 10,
            offset: 100,
        });
        // A newline owed to the first file, then the second from its start.
        s.push(Segment {
            stream: 51,
            dev: 1,
            ino: 11,
            offset: 0,
        });
        let at = |s: &mut Segments, end| s.position(end).map(|p| (p.ino, p.offset));
        assert_eq!(at(&mut s, 20), Some((10, 120)));
        assert_eq!(at(&mut s, 50), Some((10, 150)));
        assert_eq!(at(&mut s, 51), Some((11, 0)));
        assert_eq!(at(&mut s, 80), Some((11, 29)));
        assert_eq!(s.0.len(), 1);
    }
}
