//! The client of a timestamping authority (`timestamp-url()`): one thread per destination
//! asks for RFC 3161 tokens over the chain heads its archives' writers hand it, so that no
//! writer waits for the network.
//!
//! Each archive has a [`Slot`]. A writer that seals a chunk puts the new chain head in it
//! ([`Authority::ask`]); a head not yet asked for is replaced by a newer one, since a token
//! over a head proves every frame before it: with a slow authority an archive is stamped
//! less often, never behind. Tokens come back in the slot and the writer seals each as a
//! timestamp frame the next time it writes ([`Slot::take`]). A failing authority is said
//! once (and again when it answers), and asked again with a growing pause; meanwhile only
//! the newest head of each archive waits.
//!
//! The wire is HTTP/1.0 POST of `application/timestamp-query`, as RFC 3161 §3.4 gives it:
//! tokens are signed, so authorities serve plain HTTP.

use crate::keys::{random, Secret};
use crate::timestamp;
use der::asn1::ObjectIdentifier;
use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// How long a request may take, connecting, sending and reading.
const TIMEOUT: Duration = Duration::from_secs(10);
/// The most of an answer read: a token is a few kilobytes.
const MAX_ANSWER: u64 = 1 << 20;
/// The longest pause between tries of a failing authority.
const MAX_PAUSE: Duration = Duration::from_secs(60);

/// Where requests go: `http://host[:port]/path`.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Url {
    host: String,
    port: u16,
    path: String,
}

impl Url {
    fn parse(url: &str) -> Result<Url, String> {
        let rest = url.strip_prefix("http://").ok_or_else(|| {
            format!("{url}: an http:// URL (tokens are signed; timestamping authorities serve plain HTTP, and https:// is not supported)")
        })?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        let (host, port) = match authority.rsplit_once(':') {
            Some((h, p)) if !h.ends_with(':') && (h.starts_with('[') || !h.contains(':')) => (
                h,
                p.parse::<u16>()
                    .map_err(|_| format!("{url}: {p} is not a port"))?,
            ),
            _ => (authority, 80),
        };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() {
            return Err(format!("{url}: no host"));
        }
        Ok(Url {
            host: host.to_string(),
            port,
            path: path.to_string(),
        })
    }
}

/// A token that came back: over the head of frame `seq`.
pub struct Token {
    pub seq: u64,
    pub head: Secret,
    pub der: Vec<u8>,
}

#[derive(Default)]
struct SlotState {
    /// The newest head not asked for yet.
    want: Option<(u64, Secret)>,
    /// In the authority's queue or being asked.
    queued: bool,
    ready: Vec<Token>,
}

/// One archive's heads to stamp and tokens that came back.
#[derive(Default)]
pub struct Slot {
    state: Mutex<SlotState>,
    changed: Condvar,
}

impl Slot {
    /// The tokens that came back since the last call.
    pub fn take(&self) -> Vec<Token> {
        std::mem::take(&mut self.state.lock().expect("slot lock").ready)
    }

    /// Whether tokens wait to be taken, and whether a head waits for one.
    pub fn pending(&self) -> (bool, bool) {
        let s = self.state.lock().expect("slot lock");
        (!s.ready.is_empty(), s.queued || s.want.is_some())
    }

    /// Waits up to `limit` for the heads asked for to come back stamped.
    fn settle(&self, limit: Duration) {
        let deadline = Instant::now() + limit;
        let mut s = self.state.lock().expect("slot lock");
        while s.queued || s.want.is_some() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            s = self.changed.wait_timeout(s, left).expect("slot lock").0;
        }
    }
}

/// A timestamping authority and the thread that asks it.
pub struct Authority {
    pub url: String,
    pub policy: Option<ObjectIdentifier>,
    queue: Mutex<mpsc::Sender<Arc<Slot>>>,
    answering: Arc<AtomicBool>,
}

impl std::fmt::Debug for Authority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Authority({})", self.url)
    }
}

impl Authority {
    /// Starts the thread that asks the authority at `url`; `say` reports its failures and
    /// recoveries (with the URL in them).
    pub fn start(
        url: &str,
        policy: Option<ObjectIdentifier>,
        say: Box<dyn Fn(String) + Send>,
    ) -> Result<Arc<Authority>, String> {
        let target = Url::parse(url)?;
        let (tx, rx) = mpsc::channel();
        let answering = Arc::new(AtomicBool::new(true));
        let asker = Asker {
            url: url.to_string(),
            target,
            policy,
            say,
            answering: answering.clone(),
        };
        std::thread::Builder::new()
            .name("logstore-tsa".into())
            .spawn(move || asker.run(rx))
            .map_err(|e| format!("cannot start the timestamping thread: {e}"))?;
        Ok(Arc::new(Authority {
            url: url.to_string(),
            policy,
            queue: Mutex::new(tx),
            answering,
        }))
    }

    /// Asks for a token over `head`, the chain head of frame `seq` of `slot`'s archive.
    pub fn ask(&self, slot: &Arc<Slot>, seq: u64, head: Secret) {
        let mut s = slot.state.lock().expect("slot lock");
        s.want = Some((seq, head));
        if !s.queued {
            s.queued = true;
            drop(s);
            let _ = self.queue.lock().expect("queue lock").send(slot.clone());
        }
    }

    /// Before an archive closes: waits up to `limit` for its last head to be stamped, unless
    /// the authority is failing.
    pub fn settle(&self, slot: &Slot, limit: Duration) {
        if self.answering.load(Ordering::Relaxed) {
            slot.settle(limit);
        }
    }
}

struct Asker {
    url: String,
    target: Url,
    policy: Option<ObjectIdentifier>,
    say: Box<dyn Fn(String) + Send>,
    answering: Arc<AtomicBool>,
}

impl Asker {
    fn run(self, rx: mpsc::Receiver<Arc<Slot>>) {
        let mut queue: VecDeque<Arc<Slot>> = VecDeque::new();
        let mut pause = Duration::ZERO;
        let mut failing_since: Option<Instant> = None;
        loop {
            // New work; while pausing after a failure, only what comes meanwhile.
            let wait = if queue.is_empty() { None } else { Some(pause) };
            let got = match wait {
                None => rx.recv().map_err(|_| mpsc::RecvTimeoutError::Disconnected),
                Some(w) if w.is_zero() => rx.try_recv().map_err(|e| match e {
                    mpsc::TryRecvError::Empty => mpsc::RecvTimeoutError::Timeout,
                    mpsc::TryRecvError::Disconnected => mpsc::RecvTimeoutError::Disconnected,
                }),
                Some(w) => rx.recv_timeout(w),
            };
            match got {
                Ok(slot) => {
                    queue.push_back(slot);
                    continue;
                }
                Err(mpsc::RecvTimeoutError::Disconnected) if pause > Duration::ZERO => return,
                Err(_) => {}
            }
            let Some(slot) = queue.pop_front() else {
                return;
            };
            let Some((seq, head)) = slot.state.lock().expect("slot lock").want.take() else {
                let mut s = slot.state.lock().expect("slot lock");
                s.queued = false;
                slot.changed.notify_all();
                continue;
            };
            let nonce = u64::from_le_bytes(random());
            let asked = post(&self.target, &timestamp::request(&head, self.policy, nonce))
                .and_then(|answer| timestamp::token_of(&answer, &head, nonce));
            let mut s = slot.state.lock().expect("slot lock");
            match asked {
                Ok(der) => {
                    s.ready.push(Token { seq, head, der });
                    pause = Duration::ZERO;
                    if let Some(since) = failing_since.take() {
                        self.answering.store(true, Ordering::Relaxed);
                        (self.say)(format!(
                            "the timestamping authority {} answers again (after {} s)",
                            self.url,
                            since.elapsed().as_secs()
                        ));
                    }
                }
                Err(e) => {
                    // Asked again later, unless a newer head came meanwhile.
                    s.want.get_or_insert((seq, head));
                    pause = (pause * 2).clamp(Duration::from_secs(1), MAX_PAUSE);
                    if failing_since.is_none() {
                        failing_since = Some(Instant::now());
                        self.answering.store(false, Ordering::Relaxed);
                        (self.say)(format!(
                            "the timestamping authority {}: {e}; archives are asked again with pauses up to {} s, their newest chain head waiting",
                            self.url,
                            MAX_PAUSE.as_secs()
                        ));
                    }
                }
            }
            if s.want.is_some() {
                drop(s);
                queue.push_back(slot);
            } else {
                s.queued = false;
                slot.changed.notify_all();
            }
        }
    }
}

/// POSTs a query and returns the answer's body.
fn post(url: &Url, query: &[u8]) -> Result<Vec<u8>, String> {
    let addr = (url.host.as_str(), url.port)
        .to_socket_addrs()
        .map_err(|e| format!("{}: {e}", url.host))?
        .next()
        .ok_or_else(|| format!("{}: no address", url.host))?;
    let mut conn = TcpStream::connect_timeout(&addr, TIMEOUT).map_err(|e| e.to_string())?;
    conn.set_read_timeout(Some(TIMEOUT))
        .and_then(|()| conn.set_write_timeout(Some(TIMEOUT)))
        .map_err(|e| e.to_string())?;
    let head = format!(
        "POST {} HTTP/1.0\r\nHost: {}\r\nContent-Type: application/timestamp-query\r\nAccept: application/timestamp-reply\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        url.path,
        url.host,
        query.len()
    );
    conn.write_all(head.as_bytes())
        .and_then(|()| conn.write_all(query))
        .map_err(|e| format!("sending: {e}"))?;
    let mut answer = Vec::new();
    conn.take(MAX_ANSWER)
        .read_to_end(&mut answer)
        .map_err(|e| format!("reading the answer: {e}"))?;
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut response = httparse::Response::new(&mut headers);
    let start = match response.parse(&answer) {
        Ok(httparse::Status::Complete(n)) => n,
        _ => return Err("not an HTTP answer".into()),
    };
    let status = response.code.unwrap_or(0);
    if status != 200 {
        return Err(format!(
            "HTTP {status} {}",
            response.reason.unwrap_or_default()
        ));
    }
    let length = response
        .headers
        .iter()
        .find(|h| h.name.eq_ignore_ascii_case("content-length"))
        .and_then(|h| {
            std::str::from_utf8(h.value)
                .ok()?
                .trim()
                .parse::<usize>()
                .ok()
        });
    let mut body = answer.split_off(start);
    if let Some(n) = length {
        if body.len() < n {
            return Err("the answer was cut short".into());
        }
        body.truncate(n);
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_name_a_host_a_port_and_a_path() {
        let u = |s: &str| Url::parse(s).map(|u| (u.host, u.port, u.path));
        assert_eq!(
            u("http://tsa.example:8080/tsr"),
            Ok(("tsa.example".into(), 8080, "/tsr".into()))
        );
        assert_eq!(
            u("http://timestamp.digicert.com"),
            Ok(("timestamp.digicert.com".into(), 80, "/".into()))
        );
        assert_eq!(
            u("http://[::1]:3180/"),
            Ok(("::1".into(), 3180, "/".into()))
        );
        assert!(u("https://freetsa.org/tsr")
            .unwrap_err()
            .contains("http://"));
        assert!(u("http://h:port/").is_err());
        assert!(u("http:///x").is_err());
    }
}
