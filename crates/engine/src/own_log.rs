//! sluice's own messages: startup, shutdown, errors, refused connections.
//!
//! [`emit`] is callable from any thread. Messages go to the `internal()` source when the
//! configuration has one, and to standard error when running in the foreground (errors and
//! warnings always, the rest with `-v`). The queue to `internal()` is bounded; when it is full
//! the message still reaches standard error and the drop is counted. A detached sluice whose
//! configuration reads no `internal()` sends them to the host's syslog socket instead
//! ([`host_log_socket`], [`send_to_host_log`]), where an administrator looks for them.

use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use tokio::sync::mpsc;

pub const ERR: u8 = 3;
pub const WARNING: u8 = 4;
pub const NOTICE: u8 = 5;
pub const INFO: u8 = 6;
pub const DEBUG: u8 = 7;

/// One internal message: severity and text.
#[derive(Debug)]
pub struct Event {
    pub severity: u8,
    pub text: String,
    /// A message a correlating parser made with `inject-mode(internal)`: it goes as it is.
    pub made: Option<sluice_model::kept::Kept>,
}

static TO_STDERR: AtomicBool = AtomicBool::new(true);
static VERBOSE: AtomicBool = AtomicBool::new(false);
static DEBUG_ON: AtomicBool = AtomicBool::new(false);
static DROPPED: AtomicU64 = AtomicU64::new(0);

fn channel() -> &'static Mutex<Option<mpsc::Sender<Event>>> {
    static TX: OnceLock<Mutex<Option<mpsc::Sender<Event>>>> = OnceLock::new();
    TX.get_or_init(|| Mutex::new(None))
}

/// Where internal messages go: `stderr` in the foreground, `verbose` (`-v`) and `debug` (`-d`)
/// for the lower severities.
pub fn configure(stderr: bool, verbose: bool, debug: bool) {
    TO_STDERR.store(stderr, Ordering::Relaxed);
    VERBOSE.store(verbose || debug, Ordering::Relaxed);
    DEBUG_ON.store(debug, Ordering::Relaxed);
}

/// `sluice ctl verbose --set on|off`: informational messages on standard error or not.
pub fn set_verbose(on: bool) {
    VERBOSE.store(on, Ordering::Relaxed);
}

pub fn verbose() -> bool {
    VERBOSE.load(Ordering::Relaxed)
}

/// `sluice ctl debug --set on|off`.
pub fn set_debug(on: bool) {
    DEBUG_ON.store(on, Ordering::Relaxed);
    if on {
        VERBOSE.store(true, Ordering::Relaxed);
    }
}

pub fn debug() -> bool {
    DEBUG_ON.load(Ordering::Relaxed)
}

/// Connects the `internal()` source: returns the receiving end of the queue.
pub fn subscribe(capacity: usize) -> mpsc::Receiver<Event> {
    let (tx, rx) = mpsc::channel(capacity.max(16));
    *channel().lock().expect("internal channel lock") = Some(tx);
    rx
}

/// Disconnects the `internal()` source (at shutdown).
pub fn unsubscribe() {
    *channel().lock().expect("internal channel lock") = None;
}

/// The host's syslog socket (`/run/systemd/journal/dev-log`, else `/dev/log`; the
/// environment's `SLUICE_DEV_LOG` names another) when it is a socket none of `own` (the
/// configuration's unix listeners, which may replace it) names.
pub fn host_log_socket(own: &[&Path]) -> Option<PathBuf> {
    let candidates: Vec<PathBuf> = match std::env::var_os("SLUICE_DEV_LOG") {
        Some(p) => vec![PathBuf::from(p)],
        None => vec![
            PathBuf::from("/run/systemd/journal/dev-log"),
            PathBuf::from("/dev/log"),
        ],
    };
    let real = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    candidates.into_iter().find(|p| {
        std::fs::metadata(p).is_ok_and(|m| m.file_type().is_socket())
            && !own.iter().any(|o| real(o) == real(p))
    })
}

/// From now on, messages of severity notice and above (all but debug with `-v`) also go to
/// the unix datagram socket at `path`, as `<PRI>Mmm dd hh:mm:ss sluice[PID]: text`.
pub fn send_to_host_log(path: &Path) -> std::io::Result<()> {
    let socket = UnixDatagram::unbound()?;
    socket.connect(path)?;
    socket.set_nonblocking(true)?;
    *host_log().lock().expect("host log lock") = Some(HostLog {
        socket,
        path: path.to_path_buf(),
    });
    Ok(())
}

/// Stops sending to the host's syslog socket (a reload added `internal()`).
pub fn stop_host_log() {
    *host_log().lock().expect("host log lock") = None;
}

/// Whether sluice's own messages go to the host's syslog socket.
pub fn sends_to_host_log() -> bool {
    host_log().lock().expect("host log lock").is_some()
}

struct HostLog {
    socket: UnixDatagram,
    path: PathBuf,
}

fn host_log() -> &'static Mutex<Option<HostLog>> {
    static LOG: OnceLock<Mutex<Option<HostLog>>> = OnceLock::new();
    LOG.get_or_init(|| Mutex::new(None))
}

/// Sends one message to the host's syslog socket, if sluice sends there; a socket the log
/// daemon made anew (after its restart) is connected again once.
fn to_host_log(severity: u8, text: &str) {
    let mut guard = host_log().lock().expect("host log lock");
    let Some(log) = guard.as_mut() else { return };
    let stamp = jiff::Zoned::now().strftime("%b %e %H:%M:%S");
    // Facility syslog (5), as syslog-ng's own messages.
    let line = format!(
        "<{}>{stamp} sluice[{}]: {text}",
        5 * 8 + u32::from(severity),
        std::process::id()
    );
    if log.socket.send(line.as_bytes()).is_err()
        && (log.socket.connect(&log.path).is_err() || log.socket.send(line.as_bytes()).is_err())
    {
        DROPPED.fetch_add(1, Ordering::Relaxed);
    }
}

pub fn dropped() -> u64 {
    DROPPED.load(Ordering::Relaxed)
}

/// Says `text()` at debug level, calling it only when debugging is on: per-connection lines
/// are formatted for nothing otherwise, thousands of times a second on a busy server.
pub fn emit_debug(text: impl FnOnce() -> String) {
    if debug() {
        emit(DEBUG, text());
    }
}

pub fn emit(severity: u8, text: impl Into<String>) {
    let text = text.into();
    if severity == DEBUG && !DEBUG_ON.load(Ordering::Relaxed) {
        return;
    }
    if TO_STDERR.load(Ordering::Relaxed) && (severity <= WARNING || VERBOSE.load(Ordering::Relaxed))
    {
        let label = match severity {
            0..=3 => "error",
            4 => "warning",
            5 => "notice",
            6 => "info",
            _ => "debug",
        };
        eprintln!("sluice: {label}: {text}");
    }
    if severity <= NOTICE || VERBOSE.load(Ordering::Relaxed) {
        to_host_log(severity, &text);
    }
    let guard = channel().lock().expect("internal channel lock");
    if let Some(tx) = guard.as_ref() {
        if tx
            .try_send(Event {
                severity,
                text,
                made: None,
            })
            .is_err()
        {
            DROPPED.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Hands a message a correlating parser made with `inject-mode(internal)` to the
/// `internal()` source, as syslog-ng posts it; dropped (counted) when no source reads them.
pub fn post_made(made: sluice_model::kept::Kept) {
    let guard = channel().lock().expect("internal channel lock");
    let event = Event {
        severity: made.get().severity(),
        text: String::new(),
        made: Some(made),
    };
    match guard.as_ref() {
        Some(tx) if tx.try_send(event).is_ok() => {}
        _ => {
            DROPPED.fetch_add(1, Ordering::Relaxed);
        }
    }
}

pub fn error(text: impl Into<String>) {
    emit(ERR, text)
}

pub fn warning(text: impl Into<String>) {
    emit(WARNING, text)
}

pub fn notice(text: impl Into<String>) {
    emit(NOTICE, text)
}

pub fn info(text: impl Into<String>) {
    emit(INFO, text)
}
