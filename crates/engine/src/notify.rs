//! systemd's service notifications (`sd_notify(3)`), for a `Type=notify` unit: `READY=1` once
//! every listener is bound and the configuration runs, `RELOADING=1` and `READY=1` around a
//! reload, `STOPPING=1` when a stop begins, and `WATCHDOG=1` at half the unit's
//! `WatchdogSec=` from the running server's own loop, so a server that stops turning is
//! restarted. Without `NOTIFY_SOCKET` (not started by systemd) nothing is sent.

use std::time::Duration;

use sd_notify::NotifyState;

fn send(states: &[NotifyState]) {
    // A notification that cannot be sent changes nothing the server does.
    let _ = sd_notify::notify(false, states);
}

/// The server runs: everything listens.
pub fn ready(status: &str) {
    send(&[NotifyState::Ready, NotifyState::Status(status)]);
}

/// A reload begins.
pub fn reloading() {
    match NotifyState::monotonic_usec_now() {
        Ok(now) => send(&[NotifyState::Reloading, now]),
        Err(_) => send(&[NotifyState::Reloading]),
    }
}

/// A stop begins.
pub fn stopping() {
    send(&[NotifyState::Stopping, NotifyState::Status("stopping")]);
}

/// How often to tell systemd the server is alive: half the unit's `WatchdogSec=`, or `None`
/// without a watchdog for this process.
pub fn watchdog_every() -> Option<Duration> {
    let mut usec = 0;
    sd_notify::watchdog_enabled(false, &mut usec).then(|| Duration::from_micros(usec / 2))
}

/// The server is alive.
pub fn alive() {
    send(&[NotifyState::Watchdog]);
}
