//! The `relp()` destination's wire: a forwarding destination ([`super`]) whose
//! connection ([`crate::destinations::link`]) speaks RELP as rsyslog's `imrelp` expects it.
//!
//! On connecting, the sender opens a session (`open` with RELP version 0 and the `syslog`
//! command; the server must answer `200` and offer `syslog`). Each message then goes as a
//! `syslog` frame with the next transaction number; up to [`WINDOW`] frames wait for their
//! `rsp` at once. A batch counts as sent only when every one of its messages has its
//! `200 OK`, so when a connection breaks the sender opens a new one and sends again from the
//! first message without one: nothing is lost, and what the server had stored but not yet
//! acknowledged arrives twice (RELP is at-least-once).

use crate::destinations::link::{stalled, Failure, GiveUp, Link, Position, Protocol, STOP_GRACE};
use crate::destinations::queue::Batch;
use sluice_protocol::relp::{self, Command};
use std::collections::VecDeque;
use std::io::ErrorKind;
use std::time::{Duration, Instant};

/// Frames sent and not yet acknowledged, at most (librelp's default window is 128).
const WINDOW: usize = 1024;
/// How much is written at once.
const CHUNK: usize = 64 << 10;

/// A RELP session on a connection: the next transaction number.
pub struct Session {
    next_txnr: u32,
}

impl Session {
    fn txnr(&mut self) -> u32 {
        let t = self.next_txnr;
        // Transaction numbers wrap after 999,999,999 to 1, as librelp's do.
        self.next_txnr = if t >= 999_999_999 { 1 } else { t + 1 };
        t
    }
}

fn protocol_error(what: impl Into<String>) -> std::io::Error {
    std::io::Error::new(ErrorKind::InvalidData, what.into())
}

/// Opens a RELP session on a fresh connection.
pub(super) fn open(link: &mut Link, timeout: Duration) -> std::io::Result<Session> {
    let offers = format!(
        "relp_version=0\nrelp_software=sluice,{},https://github.com/sluice\ncommands=syslog",
        env!("CARGO_PKG_VERSION")
    );
    let mut out = Vec::new();
    relp::write(&mut out, 1, "open", offers.as_bytes());
    // Bounded: a server that takes not even the open is given up after the grace.
    link.write_all(&out, &|| true)?;
    let mut input = Vec::new();
    let deadline = Instant::now() + timeout;
    let (frame, used) = loop {
        if let Some(found) = relp::parse(&input).map_err(|e| protocol_error(e.to_string()))? {
            break found;
        }
        if Instant::now() >= deadline {
            return Err(std::io::Error::new(
                ErrorKind::TimedOut,
                "the RELP server did not answer open",
            ));
        }
        read_more(link, &mut input)?;
    };
    let data = &input[frame.data.clone()];
    match (frame.txnr, &frame.command, relp::response(data)) {
        (1, Command::Rsp, Some((200, _))) => {}
        (_, Command::Rsp, Some((code, text))) => {
            return Err(protocol_error(format!(
                "the RELP server refused the session: {code} {}",
                String::from_utf8_lossy(text)
            )))
        }
        _ => {
            return Err(protocol_error(
                "the RELP server's answer to open is not a response",
            ))
        }
    }
    let commands = relp::offer(
        &data[data
            .iter()
            .position(|&b| b == b'\n')
            .map_or(data.len(), |i| i + 1)..],
        "commands",
    )
    .unwrap_or_default();
    if !commands.contains(&&b"syslog"[..]) {
        return Err(protocol_error(
            "the RELP server does not offer the syslog command",
        ));
    }
    if used != input.len() {
        return Err(protocol_error(
            "the RELP server sent more than its answer to open",
        ));
    }
    Ok(Session { next_txnr: 2 })
}

/// Reads what the connection has into `input`; EOF is an error (the server went away).
fn read_more(link: &mut Link, input: &mut Vec<u8>) -> std::io::Result<()> {
    let mut chunk = [0u8; 16 << 10];
    match link.read(&mut chunk) {
        Ok(0) => Err(std::io::Error::new(
            ErrorKind::UnexpectedEof,
            "the RELP server closed the connection",
        )),
        Ok(n) => {
            input.extend_from_slice(&chunk[..n]);
            Ok(())
        }
        Err(e) => Err(e),
    }
}

/// Sends the batches from `pos` as `syslog` frames and waits for every `rsp`; `pos` follows
/// the first message not yet acknowledged. A server that acknowledges nothing once the sender
/// gives up gets `grace`.
fn send(
    link: &mut Link,
    session: &mut Session,
    batches: &[Batch],
    pos: &mut Position,
    give_up: GiveUp,
    grace: Duration,
) -> std::io::Result<()> {
    // (transaction number, where the message after this one starts)
    let mut unacked: VecDeque<(u32, Position)> = VecDeque::new();
    let mut next = *pos;
    // The index of the message at `next` in its batch: searched for once per batch.
    let mut index = None;
    let mut out = Vec::with_capacity(CHUNK + 1024);
    let mut input: Vec<u8> = Vec::new();
    let mut waiting_since: Option<Instant> = None;
    loop {
        // Fill the window.
        while unacked.len() < WINDOW && next.batch < batches.len() && out.len() < CHUNK {
            let b = &batches[next.batch];
            let i =
                *index.get_or_insert_with(|| b.ends.partition_point(|&e| e as usize <= next.byte));
            if i >= b.len() {
                next = Position {
                    batch: next.batch + 1,
                    byte: 0,
                    ..next
                };
                index = None;
                continue;
            }
            let end = b.ends[i] as usize;
            let mut message = &b.data[b.start(i)..end];
            if let [rest @ .., b'\n'] = message {
                message = rest;
            }
            let txnr = session.txnr();
            relp::write(&mut out, txnr, "syslog", message);
            next.byte = end;
            index = Some(i + 1);
            unacked.push_back((txnr, next));
        }
        if !out.is_empty() {
            link.write_all(&out, give_up)?;
            out.clear();
            continue;
        }
        if unacked.is_empty() {
            return Ok(());
        }
        // Read responses.
        match read_more(link, &mut input) {
            Ok(()) => waiting_since = None,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                stalled(&mut waiting_since, give_up, grace)?;
                continue;
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
        let mut at = 0;
        while let Some((frame, used)) =
            relp::parse(&input[at..]).map_err(|e| protocol_error(e.to_string()))?
        {
            let data = &input[at + frame.data.start..at + frame.data.end];
            match frame.command {
                Command::Rsp => match relp::response(data) {
                    Some((200, _)) => {
                        if let Some(i) = unacked.iter().position(|(t, _)| *t == frame.txnr) {
                            // Everything up to this frame is acknowledged (responses come in
                            // order; one out of order acknowledges only itself).
                            if i == 0 {
                                let (_, after) = unacked.pop_front().expect("found");
                                *pos = after;
                            } else {
                                unacked[i].0 = 0;
                            }
                            while unacked.front().is_some_and(|(t, _)| *t == 0) {
                                let (_, after) = unacked.pop_front().expect("checked");
                                *pos = after;
                            }
                        }
                    }
                    Some((code, text)) => {
                        return Err(protocol_error(format!(
                            "the RELP server answered {code} {}",
                            String::from_utf8_lossy(text)
                        )))
                    }
                    None => return Err(protocol_error("a response without a status")),
                },
                Command::ServerClose => {
                    return Err(std::io::Error::new(
                        ErrorKind::ConnectionAborted,
                        "the RELP server closes the session (serverclose)",
                    ))
                }
                _ => return Err(protocol_error("the RELP server sent a command")),
            }
            at += used;
        }
        input.drain(..at);
    }
}

impl Protocol for Session {
    fn send(
        &mut self,
        link: &mut Link,
        batches: &[Batch],
        pos: &mut Position,
        give_up: GiveUp,
    ) -> Result<(), Failure> {
        Ok(send(link, self, batches, pos, give_up, STOP_GRACE)?)
    }

    /// Looks without reading: the server sends only responses, and `serverclose`, which ends
    /// the session too.
    fn closed(&self, link: &Link) -> bool {
        link.peer_closed_peeking()
    }

    /// Ends the session with `close`, best effort and without waiting: the TLS records go out
    /// with the link's close_notify.
    fn close(&mut self, link: &mut Link) {
        use std::io::Write;
        let mut out = Vec::new();
        relp::write(&mut out, self.txnr(), "close", b"");
        let _ = match &mut link.tls {
            Some(tls) => tls.writer().write_all(&out),
            None => (&link.sock).write(&out).map(drop),
        };
    }
}
