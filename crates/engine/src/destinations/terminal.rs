//! Destinations that tell someone now, and keep nothing: `usertty()` writes to the terminals
//! of logged-in users, `pipe()` to a named pipe whose reader may come and go (Debian's
//! `/dev/xconsole`). A writer thread of their own takes what readers formatted; what it
//! cannot write at once (no such user logged in, no reader on the pipe, a terminal that does
//! not take it) is dropped and counted, never waited for: these are notices, not the log.
//!
//! A message on a terminal is text a sender chose: control bytes (an escape sequence could
//! rewrite the screen or the terminal's settings) are written as `?`.

use super::format::Formatter;
use super::{Destination, Outbox};
use crate::file_open::FileOptions;
use crate::own_log;
use crate::stats::{DestCounters, DropReason};
use crate::window::Ack;
use sluice_model::LogMessage;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// Where the writer writes.
#[derive(Clone, Debug)]
pub enum Reach {
    /// `usertty("root")`: the terminals of that user (`*`: of every user).
    Users(String),
    /// `pipe("/dev/xconsole")`: a named pipe, when something reads it; made when it is
    /// missing, as its options say (`perm()`, `owner()`, `group()`, `create-dirs()`…).
    Pipe(PathBuf, FileOptions),
}

pub struct TerminalDestination {
    label: Arc<str>,
    formatter: Formatter,
    reach: Reach,
    counters: DestCounters,
    /// Messages the writer holds at most (`log-fifo-size()`); more are dropped.
    held: usize,
    /// The writer's queue and thread, made on first use.
    queue: Mutex<Option<WriterThread>>,
}

type WriterThread = (SyncSender<Vec<u8>>, JoinHandle<()>);

impl TerminalDestination {
    pub fn new(
        label: String,
        formatter: Formatter,
        reach: Reach,
        counters: DestCounters,
        held: usize,
    ) -> TerminalDestination {
        TerminalDestination {
            label: label.into(),
            formatter,
            reach,
            counters,
            held,
            queue: Mutex::new(None),
        }
    }

    /// The writer's queue, the writer started on first use.
    fn sender(&self) -> SyncSender<Vec<u8>> {
        let mut queue = self.queue.lock().expect("queue lock");
        let (tx, _) = queue.get_or_insert_with(|| {
            let (tx, rx) = sync_channel(self.held);
            let writer = Writer {
                label: self.label.clone(),
                reach: self.reach.clone(),
                counters: self.counters.clone(),
                said: None,
            };
            let thread = std::thread::Builder::new()
                .name("terminal".into())
                .spawn(move || writer.run(rx))
                .expect("spawning a terminal writer");
            (tx, thread)
        });
        tx.clone()
    }
}

impl Destination for TerminalDestination {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    /// Formats each message with control bytes made `?`; queues it, or drops it when the
    /// writer holds `held` already. Never holds the reader: nothing here is flow-controlled.
    fn deliver(&self, msgs: &[LogMessage], which: &[u32], _: &Ack, _: bool, outbox: &mut Outbox) {
        self.counters
            .processed
            .fetch_add(which.len() as u64, Ordering::Relaxed);
        let mut texts = Vec::with_capacity(which.len());
        for &i in which {
            let mut text = Vec::new();
            self.formatter.append(&msgs[i as usize], &mut text);
            let last = text.len().saturating_sub(1);
            for (k, b) in text.iter_mut().enumerate() {
                let newline_at_end = *b == b'\n' && k == last;
                if (*b < 0x20 && *b != b'\t' && !newline_at_end) || *b == 0x7f {
                    *b = b'?';
                }
            }
            texts.push(text);
        }
        let tx = self.sender();
        let counters = self.counters.clone();
        outbox.push(move || {
            for text in texts {
                // Counted as queued before the writer can take it off.
                counters.queued.fetch_add(1, Ordering::Relaxed);
                if let Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) =
                    tx.try_send(text)
                {
                    counters.queued.fetch_sub(1, Ordering::Relaxed);
                    counters.drop(DropReason::QueueFull, 1);
                }
            }
        });
    }

    fn shutdown(&self) {
        let queue = self.queue.lock().expect("queue lock").take();
        if let Some((tx, thread)) = queue {
            drop(tx);
            let _ = thread.join();
        }
    }
}

struct Writer {
    label: Arc<str>,
    reach: Reach,
    counters: DestCounters,
    /// Why the last message could not be written, said once until it changes.
    said: Option<String>,
}

impl Writer {
    fn run(mut self, rx: Receiver<Vec<u8>>) {
        for text in rx {
            self.counters.queued.fetch_sub(1, Ordering::Relaxed);
            let result = match &self.reach {
                Reach::Users(user) => to_terminals(user, &text),
                Reach::Pipe(path, rules) => to_pipe(path, rules, &text),
            };
            match result {
                Ok(()) => {
                    self.counters.written.fetch_add(1, Ordering::Relaxed);
                    self.said = None;
                }
                Err(NotWritten { why, ordinary }) => {
                    self.counters.drop(DropReason::Unavailable, 1);
                    if self.said.as_deref() != Some(why.as_str()) {
                        let said = format!("{}: {why}; messages are dropped meanwhile", self.label);
                        match ordinary {
                            true => own_log::info(said),
                            false => own_log::warning(said),
                        }
                        self.said = Some(why);
                    }
                }
            }
        }
    }
}

/// Why a message was not written, and whether that is ordinary (nobody logged in, nothing
/// reading the pipe: said as information) or someone's doing (something else put at the
/// pipe's name: said as a warning).
struct NotWritten {
    why: String,
    ordinary: bool,
}

impl NotWritten {
    fn ordinary(why: String) -> NotWritten {
        NotWritten {
            why,
            ordinary: true,
        }
    }
}

/// Writes `text` to the terminal of every session of `user` (`*`: of everyone) in utmp.
fn to_terminals(user: &str, text: &[u8]) -> Result<(), NotWritten> {
    let lines = sessions(user);
    if lines.is_empty() {
        return Err(NotWritten::ordinary(format!("{user} is not logged in")));
    }
    for line in lines {
        // A name from utmp: a terminal under /dev, nothing else.
        if line.contains('/') && !line.starts_with("pts/") || line.contains("..") {
            continue;
        }
        let tty = std::path::Path::new("/dev").join(&line);
        let _ = write_now(&tty, text, Takes::Terminal);
    }
    Ok(())
}

/// The terminals (`pts/0`, `tty1`) of the sessions of `user` (`*`: of everyone).
fn sessions(user: &str) -> Vec<String> {
    static UTMP: Mutex<()> = Mutex::new(());
    let _only_one = UTMP.lock().expect("utmp lock");
    let mut lines = Vec::new();
    // SAFETY: getutxent's entries are read before the next call, under the lock above (the
    // functions keep state of their own).
    unsafe {
        libc::setutxent();
        loop {
            let entry = libc::getutxent();
            if entry.is_null() {
                break;
            }
            let e = &*entry;
            if e.ut_type != libc::USER_PROCESS {
                continue;
            }
            let text = |field: &[libc::c_char]| {
                let bytes: Vec<u8> = field
                    .iter()
                    .take_while(|&&c| c != 0)
                    .map(|&c| c as u8)
                    .collect();
                String::from_utf8_lossy(&bytes).into_owned()
            };
            if user == "*" || text(&e.ut_user) == user {
                lines.push(text(&e.ut_line));
            }
        }
        libc::endutxent();
    }
    lines
}

/// Writes `text` to a named pipe, if something reads it now; makes the pipe first when it
/// is missing.
fn to_pipe(path: &Path, rules: &FileOptions, text: &[u8]) -> Result<(), NotWritten> {
    let written = match write_now(path, text, Takes::PipeOrTerminal) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            crate::file_open::make_pipe(path, rules)
                .and_then(|()| write_now(path, text, Takes::PipeOrTerminal))
        }
        written => written,
    };
    written.map_err(|e| match e.raw_os_error() {
        Some(libc::ENXIO) => NotWritten::ordinary(format!("nothing reads {}", path.display())),
        Some(libc::ELOOP) => NotWritten {
            why: format!(
                "{} is a symbolic link; sluice writes to a pipe, not through a link",
                path.display()
            ),
            ordinary: false,
        },
        // `write_now` refuses what is neither a pipe nor a terminal as InvalidInput.
        _ => NotWritten {
            why: format!("{}: {e}", path.display()),
            ordinary: e.kind() != std::io::ErrorKind::InvalidInput,
        },
    })
}

/// What a terminal destination writes to at a path.
#[derive(Clone, Copy, PartialEq)]
enum Takes {
    /// `pipe()`: a named pipe, or a terminal (`pipe("/dev/console")`).
    PipeOrTerminal,
    /// `usertty()`: a terminal.
    Terminal,
}

/// Opens `path` for writing without waiting, following a link or becoming its controlling
/// process, and writes `text` if it is taken at once — only when the path is what `takes`
/// names: whoever can write in its directory cannot make sluice write into a file instead
/// (a link to `/etc/passwd`, a regular file put in place of the pipe).
fn write_now(path: &std::path::Path, text: &[u8], takes: Takes) -> std::io::Result<()> {
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_NOFOLLOW)
        .open(path)?;
    let kind = f.metadata()?.file_type();
    if !(kind.is_char_device() || takes == Takes::PipeOrTerminal && kind.is_fifo()) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            match takes {
                Takes::PipeOrTerminal => {
                    "it is neither a named pipe nor a terminal; sluice does not write into it"
                }
                Takes::Terminal => "it is not a terminal; sluice does not write into it",
            },
        ));
    }
    f.write_all(text)
}
