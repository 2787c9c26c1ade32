//! sluice's own messages: startup, shutdown, errors, refused connections.
//!
//! [`emit`] is callable from any thread. Messages go to the `internal()` source when the
//! configuration has one, and to standard error when running in the foreground (errors and
//! warnings always, the rest with `-v`). The queue to `internal()` is bounded; when it is full
//! the message still reaches standard error and the drop is counted.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use tokio::sync::mpsc;

pub const ERR: u8 = 3;
pub const WARNING: u8 = 4;
pub const NOTICE: u8 = 5;
pub const INFO: u8 = 6;
pub const DEBUG: u8 = 7;

/// One internal message: severity and text.
#[derive(Clone, Debug)]
pub struct Event {
    pub severity: u8,
    pub text: String,
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
    let guard = channel().lock().expect("internal channel lock");
    if let Some(tx) = guard.as_ref() {
        if tx.try_send(Event { severity, text }).is_err() {
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
