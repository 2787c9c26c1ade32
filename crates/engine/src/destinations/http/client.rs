//! `http()`: messages as HTTP requests, as syslog-ng's `http()` destination sends them — the
//! `body()` template of each message, `batch-lines()` of them in one request between
//! `body-prefix()` and `body-suffix()`, joined by `delimiter()`.
//!
//! Readers format the bodies and queue them in one of `workers()` lanes (by
//! `worker-partition-key()`, or in turn); each lane's sender ([`crate::destinations::sender`]) keeps an
//! HTTP/1.1 connection to one of the `url()`s (the lanes start on different ones, and a lane
//! whose server fails goes on to the next) and sends its requests one at a time through
//! [`Requests`], the wire. The answer's status says what became of a request's messages:
//! 2xx delivered; 4xx refused for good (dropped and counted), but 408 and 429; everything else
//! asked again later, at most `retries()` times; `response-action()` says otherwise per status.
//!
//! Responses are read with `httparse`; bodies by `Content-Length`, chunked, or to the end of
//! the connection. A server's answer never picks anything but the fate of its request.

use crate::destinations::delivery::{Delivered, Delivers, Delivery, Lanes};
use crate::destinations::diskq::DiskBufferOptions;
use crate::destinations::elasticsearch::bulk;
use crate::destinations::format::Formatter;
use crate::destinations::link::Protocol;
use crate::destinations::link::{
    dial, stalled, Connected, Dial, Failure, GiveUp, Link, OnLink, Position,
};
use crate::destinations::link::{STOP_GRACE, TICK};
use crate::destinations::queue::Batch;
use crate::destinations::sender::{Batching, Pacing, Servers};
use crate::own_log;
use crate::stats::DestCounters;
use sluice_model::LogMessage;
use socket2::Type;
use std::io::ErrorKind;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The most of a response sluice reads: a server that answers more is not a log receiver.
const MAX_RESPONSE: usize = 16 << 20;
/// How much of a refusing server's answer sluice's own messages quote.
const QUOTED: usize = 200;

/// What a status says of a request's messages (`response-action()`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Success,
    Retry,
    Drop,
    Disconnect,
}

impl Action {
    pub const NAMES: &'static [&'static str] = &["success", "retry", "drop", "disconnect"];

    pub fn named(name: &str) -> Option<Action> {
        Some(match name {
            "success" => Action::Success,
            "retry" => Action::Retry,
            "drop" => Action::Drop,
            "disconnect" => Action::Disconnect,
            _ => return None,
        })
    }

    /// What a status means unless `response-action()` says otherwise: 2xx delivered; 4xx
    /// refused for good, as syslog-ng has it, except 408 (timeout) and 429 (too many
    /// requests), which say "later"; everything else later.
    fn of(status: u16) -> Action {
        match status {
            200..=299 => Action::Success,
            408 | 429 => Action::Retry,
            400..=499 => Action::Drop,
            _ => Action::Retry,
        }
    }
}

/// One `url()`: where a connection goes and what a request names.
#[derive(Clone, Debug)]
pub struct Target {
    /// As configured: how sluice's messages and statistics name it.
    pub url: String,
    pub host: String,
    pub port: u16,
    pub tls: bool,
    /// The request line and the headers every request to it has, up to `Content-Length`.
    pub head: Vec<u8>,
}

/// How requests are made and answers read: shared by the wires of every lane.
#[derive(Debug)]
pub struct Requests {
    pub targets: Vec<Target>,
    pub body_prefix: Vec<u8>,
    pub body_suffix: Vec<u8>,
    pub delimiter: Vec<u8>,
    pub batch: Batching,
    /// `timeout()`: how long a server may take to answer; `None`: as long as it takes.
    pub timeout: Option<Duration>,
    /// `response-action()`: what a status means where it differs from [`Action::of`].
    pub actions: Vec<(u16, Action)>,
    /// The server speaks Elasticsearch's `_bulk`: a successful answer says what became of
    /// each message ([`crate::destinations::elasticsearch::bulk`]).
    pub bulk: bool,
    /// `content-compression()`: how request bodies are compressed (their
    /// `Content-Encoding`); `None`: as they are.
    pub compression: Option<Coding>,
}

/// A `Content-Encoding` sluice writes (`content-compression()`) and reads (answers to
/// `accept-encoding()`): zlib's formats, through `flate2`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Coding {
    Gzip,
    /// HTTP's `deflate`: the zlib format.
    Deflate,
}

impl Coding {
    /// As HTTP names it.
    pub fn name(self) -> &'static str {
        match self {
            Coding::Gzip => "gzip",
            Coding::Deflate => "deflate",
        }
    }

    pub fn by_name(name: &str) -> Option<Coding> {
        match name.trim().to_ascii_lowercase().as_str() {
            "gzip" | "x-gzip" => Some(Coding::Gzip),
            "deflate" => Some(Coding::Deflate),
            _ => None,
        }
    }

    /// Compresses `input` to the end of `out`, at zlib's fastest level: a batch of log lines
    /// still shrinks to a fifth or less, at three times the speed of the default level.
    fn encode(self, input: &[u8], out: &mut Vec<u8>) {
        use std::io::Write;
        let level = flate2::Compression::fast();
        let written = match self {
            Coding::Gzip => {
                let mut e = flate2::write::GzEncoder::new(out, level);
                e.write_all(input).and_then(|()| e.finish().map(drop))
            }
            Coding::Deflate => {
                let mut e = flate2::write::ZlibEncoder::new(out, level);
                e.write_all(input).and_then(|()| e.finish().map(drop))
            }
        };
        written.expect("compressing into memory does not fail");
    }

    /// Decompresses an answer's body, up to [`MAX_RESPONSE`] bytes.
    fn decode(self, input: &[u8]) -> std::io::Result<Vec<u8>> {
        use std::io::Read;
        let mut out = Vec::new();
        let limit = MAX_RESPONSE as u64 + 1;
        match self {
            Coding::Gzip => flate2::read::GzDecoder::new(input)
                .take(limit)
                .read_to_end(&mut out)?,
            Coding::Deflate => flate2::read::ZlibDecoder::new(input)
                .take(limit)
                .read_to_end(&mut out)?,
        };
        if out.len() > MAX_RESPONSE {
            return Err(std::io::Error::new(
                ErrorKind::InvalidData,
                format!("an answer of more than {MAX_RESPONSE} bytes, decompressed"),
            ));
        }
        Ok(out)
    }
}

impl Requests {
    fn action(&self, status: u16) -> Action {
        self.actions
            .iter()
            .find(|(s, _)| *s == status)
            .map_or_else(|| Action::of(status), |(_, a)| *a)
    }
}

/// The options of an `http()` destination.
#[derive(Debug)]
pub struct HttpOptions {
    pub requests: Arc<Requests>,
    pub tls: Option<Arc<crate::tls::Reloading<rustls::ClientConfig>>>,
    pub workers: usize,
    pub retries: u32,
    pub time_reopen: Duration,
    pub log_fifo_size: usize,
    pub disk_buffer: Option<(DiskBufferOptions, String)>,
    /// `proxy()`: every connection goes through it.
    pub proxy: Option<Proxy>,
}

/// An HTTP proxy (`proxy("http://[user:password@]host:port")`): `http://` requests go to it
/// naming the whole URL; `https://` ones through a tunnel it opens (`CONNECT`).
#[derive(Clone, Debug)]
pub struct Proxy {
    pub host: String,
    pub port: u16,
    /// `Basic …` of the URL's user and password.
    pub authorization: Option<String>,
}

/// The most of a proxy's answer to `CONNECT` sluice reads.
const MAX_PROXY_ANSWER: usize = 16 << 10;
/// How long a proxy has to open a tunnel.
const TUNNEL_TIMEOUT: Duration = Duration::from_secs(30);

impl Proxy {
    /// Asks the proxy behind `sock` for a tunnel to `host:port`; fails with what it answered.
    fn tunnel(&self, sock: &socket2::Socket, host: &str, port: u16) -> std::io::Result<()> {
        use std::io::{Read, Write};
        let authority = if host.contains(':') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        let authorization = self
            .authorization
            .as_ref()
            .map_or(String::new(), |a| format!("Proxy-Authorization: {a}\r\n"));
        let mut stream: &socket2::Socket = sock;
        stream.write_all(
            format!("CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n{authorization}\r\n")
                .as_bytes(),
        )?;
        // Byte by byte up to the blank line: what follows it is the server's TLS.
        let (mut answer, deadline) = (Vec::new(), Instant::now() + TUNNEL_TIMEOUT);
        let mut byte = [0u8; 1];
        while !answer.ends_with(b"\r\n\r\n") {
            match stream.read(&mut byte) {
                Ok(0) => return Err(std::io::Error::other("the proxy closed the connection")),
                Ok(_) => answer.push(byte[0]),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                Err(e) => return Err(e),
            }
            if answer.len() > MAX_PROXY_ANSWER || Instant::now() > deadline {
                return Err(std::io::Error::other("the proxy did not answer CONNECT"));
            }
        }
        let status = answer.split(|&b| b == b'\r').next().unwrap_or_default();
        let status = String::from_utf8_lossy(&status[..status.len().min(QUOTED)]);
        if status
            .split(' ')
            .nth(1)
            .is_some_and(|code| code.starts_with('2'))
        {
            Ok(())
        } else {
            Err(std::io::Error::other(format!(
                "the proxy {}:{} refused a tunnel to {authority}: {status}",
                self.host, self.port
            )))
        }
    }
}

pub struct HttpDestination {
    body: Formatter,
    /// Each message is a `_bulk` action and its document, which must stay on one line.
    bulk: bool,
    /// `worker-partition-key()`: messages with the same key go to the same lane, in order.
    partition_key: Option<Formatter>,
    delivery: Delivery,
}

impl HttpDestination {
    pub fn new(
        label: String,
        body: Formatter,
        partition_key: Option<Formatter>,
        opts: HttpOptions,
        counters: DestCounters,
    ) -> Delivered<HttpDestination> {
        let pacing = Pacing {
            time_reopen: opts.time_reopen,
            failback: None,
            retries: opts.retries.max(1),
            batch: opts.requests.batch,
            log_fifo_size: opts.log_fifo_size,
        };
        let workers = opts.workers;
        let bulk = opts.requests.bulk;
        let disk_buffer = opts.disk_buffer.clone();
        let delivery = Delivery::new(
            label.into(),
            Arc::new(opts),
            pacing,
            counters,
            disk_buffer,
            workers,
        );
        Delivered(HttpDestination {
            body,
            bulk,
            partition_key,
            delivery,
        })
    }
}

impl Delivers for HttpDestination {
    fn delivery(&self) -> &Delivery {
        &self.delivery
    }

    fn sized_by(&self) -> &Formatter {
        &self.body
    }

    fn partition_key(&self) -> Option<&Formatter> {
        self.partition_key.as_ref()
    }

    fn numbers_local(&self) -> bool {
        self.body.numbers_local()
    }

    fn format(&self, msgs: &[LogMessage], which: &[u32], lanes: &mut Lanes) {
        for &i in which {
            let msg = &msgs[i as usize];
            let batch = lanes.batch_for(msg);
            let start = batch.data.len();
            self.body.append(msg, &mut batch.data);
            if self.bulk {
                bulk::keep_document_on_one_line(&mut batch.data, start);
            }
            batch.end_message();
        }
    }
}

impl Servers for HttpOptions {
    fn count(&self) -> usize {
        self.requests.targets.len()
    }

    fn name(&self, i: usize) -> String {
        self.requests.targets[i].url.clone()
    }

    /// Connects to `url()` number `i`, with the TLS handshake done for `https://`.
    fn open(&self, i: usize) -> std::io::Result<Connected> {
        let target = &self.requests.targets[i];
        let sock = match &self.proxy {
            Some(p) => {
                let sock = dial(&p.host, p.port, Type::STREAM, &Dial::default())?;
                sock.set_read_timeout(Some(TICK))?;
                if target.tls {
                    p.tunnel(&sock, &target.host, target.port)?;
                }
                sock
            }
            None => dial(&target.host, target.port, Type::STREAM, &Dial::default())?,
        };
        sock.set_read_timeout(Some(TICK))?;
        let link = match (&self.tls, target.tls) {
            (Some(config), true) => Link::secure(sock, &config.current(), &target.host)?,
            _ => Link { sock, tls: None },
        };
        link.sock.set_read_timeout(Some(TICK))?;
        let exchange = Exchange {
            requests: self.requests.clone(),
            target: i,
            input: Vec::new(),
            server_closes: false,
            partial: None,
        };
        Ok(OnLink::connected(link, exchange))
    }

    fn probe(&self, i: usize) -> bool {
        let target = &self.requests.targets[i];
        let (host, port) = match &self.proxy {
            Some(p) => (p.host.as_str(), p.port),
            None => (target.host.as_str(), target.port),
        };
        dial(host, port, Type::STREAM, &Dial::default()).is_ok()
    }
}

/// The wire of an HTTP/1.1 connection: a request, then its answer, in turn.
struct Exchange {
    requests: Arc<Requests>,
    /// The `url()` the connection goes to.
    target: usize,
    /// What the server sent and was not read yet.
    input: Vec<u8>,
    /// The server said it closes the connection after its answer.
    server_closes: bool,
    /// The `_bulk` request at the position, where the server took some of its messages.
    partial: Option<Partial>,
}

/// A server's answer: its status and its body.
struct Answer {
    status: u16,
    body: Vec<u8>,
}

/// A `_bulk` request the server took in part: where it starts, and which of its messages are
/// settled (taken, or refused for good). Sent again, it carries only the others. A wire keeps
/// it while its connection lasts: after a reconnection the whole request goes again, and a
/// document taken the first time is indexed twice (once, under a `custom-id()`).
struct Partial {
    at: (usize, usize),
    settled: Vec<bool>,
}

impl Protocol for Exchange {
    fn send(
        &mut self,
        link: &mut Link,
        batches: &[Batch],
        pos: &mut Position,
        give_up: GiveUp,
    ) -> Result<(), Failure> {
        let r = self.requests.clone();
        let mut request: Vec<u8> = Vec::new();
        let mut body: Vec<u8> = Vec::new();
        let mut compressed: Vec<u8> = Vec::new();
        pos.advance(batches, 0);
        while pos.batch < batches.len() {
            let settled = self
                .partial
                .take()
                .filter(|p| p.at == (pos.batch, pos.byte))
                .map(|p| p.settled);
            let (after, messages) = self.body(batches, *pos, settled.as_deref(), &mut body);
            let sent = match r.compression {
                Some(coding) => {
                    compressed.clear();
                    coding.encode(&body, &mut compressed);
                    &compressed
                }
                None => &body,
            };
            request.clear();
            request.extend_from_slice(&r.targets[self.target].head);
            request.extend_from_slice(b"Content-Length: ");
            sluice_model::time::push_num(&mut request, sent.len() as u32);
            request.extend_from_slice(b"\r\n\r\n");
            link.write_all(&request, give_up)?;
            link.write_all(sent, give_up)?;
            let answer = self.answer(link, give_up)?;
            let why = || format!("HTTP {}{}", answer.status, quoted(&answer.body));
            let unsettled = settled
                .as_ref()
                .map_or(messages, |s| s.iter().filter(|d| !**d).count());
            match r.action(answer.status) {
                Action::Success if r.bulk => {
                    let settled = settled.unwrap_or_else(|| vec![false; messages]);
                    match self.documents(&answer.body, settled, pos) {
                        // Past the request, with the refusals counted.
                        Ok(()) => (pos.batch, pos.byte) = (after.batch, after.byte),
                        Err((why, again)) => {
                            return Err(Failure::Later {
                                why,
                                messages,
                                again,
                            })
                        }
                    }
                }
                Action::Success => *pos = after,
                Action::Drop => {
                    own_log::error(format!(
                        "{} refused {unsettled} messages for good: {}; dropped",
                        r.targets[self.target].url,
                        why()
                    ));
                    *pos = after;
                    pos.refused += unsettled;
                }
                Action::Retry => {
                    self.partial = settled.map(|settled| Partial {
                        at: (pos.batch, pos.byte),
                        settled,
                    });
                    return Err(Failure::Later {
                        why: why(),
                        messages,
                        again: unsettled,
                    });
                }
                Action::Disconnect => {
                    self.server_closes = true;
                    return Err(Failure::Broken(std::io::Error::new(
                        ErrorKind::ConnectionAborted,
                        format!("{}; disconnecting (response-action)", why()),
                    )));
                }
            }
        }
        Ok(())
    }

    fn closed(&self, link: &Link) -> bool {
        self.server_closes || link.peer_closed()
    }
}

impl Exchange {
    /// The body of the request that starts at `pos`: the prefix, as many messages as a
    /// request takes joined by the delimiter, the suffix; of a request sent before, its
    /// messages not `settled`. Returns where the request ends and how many messages it spans.
    fn body(
        &self,
        batches: &[Batch],
        mut pos: Position,
        settled: Option<&[bool]>,
        body: &mut Vec<u8>,
    ) -> (Position, usize) {
        let r = &self.requests;
        // Without batch-lines() and batch-bytes(), one message a request.
        let single = r.batch.lines == 0 && r.batch.bytes == 0;
        body.clear();
        body.extend_from_slice(&r.body_prefix);
        let mut messages = 0;
        let mut written = false;
        while pos.batch < batches.len() {
            let b = &batches[pos.batch];
            let i = pos.message(batches);
            let message = &b.data[pos.byte..b.ends[i] as usize];
            match settled {
                Some(settled) if messages == settled.len() => break,
                Some(settled) if settled[messages] => {
                    messages += 1;
                    pos.skip_messages(batches, 1);
                    continue;
                }
                Some(_) => {}
                None if messages > 0 => {
                    let bytes =
                        body.len() + r.delimiter.len() + message.len() + r.body_suffix.len();
                    if single
                        || (r.batch.lines > 0 && messages >= r.batch.lines)
                        || (r.batch.bytes > 0 && bytes > r.batch.bytes)
                    {
                        break;
                    }
                }
                None => {}
            }
            if written {
                body.extend_from_slice(&r.delimiter);
            }
            body.extend_from_slice(message);
            written = true;
            messages += 1;
            pos.skip_messages(batches, 1);
        }
        body.extend_from_slice(&r.body_suffix);
        (pos, messages)
    }

    /// Reads what a `_bulk` answer says of each message not `settled` before: those refused
    /// for good are counted in `pos` and said; those asked for again are kept as a
    /// [`Partial`] and make the error, which says why and how many they are.
    fn documents(
        &mut self,
        answer: &[u8],
        mut settled: Vec<bool>,
        pos: &mut Position,
    ) -> Result<(), (String, usize)> {
        let url = &self.requests.targets[self.target].url;
        let sent: Vec<usize> = (0..settled.len()).filter(|&i| !settled[i]).collect();
        let outcomes = match bulk::outcomes(answer, sent.len()) {
            Ok(outcomes) => outcomes,
            Err(why) => {
                self.partial = Some(Partial {
                    at: (pos.batch, pos.byte),
                    settled,
                });
                let again = sent.len();
                return Err((format!("HTTP 200 with {why}"), again));
            }
        };
        let (mut refused, mut later) = (0, 0);
        let (mut first_refusal, mut first_later) = (None, None);
        for (&i, outcome) in sent.iter().zip(outcomes) {
            match outcome {
                bulk::Outcome::Taken => settled[i] = true,
                bulk::Outcome::Refused(status, why) => {
                    settled[i] = true;
                    refused += 1;
                    first_refusal.get_or_insert((status, why));
                }
                bulk::Outcome::Later(status) => {
                    later += 1;
                    first_later.get_or_insert(status);
                }
            }
        }
        if let Some((status, why)) = first_refusal {
            own_log::error(format!(
                "{url} refused {refused} of {} documents for good (the first: HTTP {status}: {}); dropped",
                sent.len(),
                quoted_line(&why)
            ));
            pos.refused += refused;
        }
        match first_later {
            None => Ok(()),
            Some(status) => {
                self.partial = Some(Partial {
                    at: (pos.batch, pos.byte),
                    settled,
                });
                let why = format!("HTTP {status} for {later} of {} documents", sent.len());
                Err((why, later))
            }
        }
    }

    /// Reads the answer to the request just sent. A server that says nothing for
    /// `timeout()` has failed; one that says nothing while the sender gives up gets the
    /// stop's grace.
    fn answer(&mut self, link: &mut Link, give_up: GiveUp) -> std::io::Result<Answer> {
        let started = Instant::now();
        let mut waiting_since = None;
        loop {
            match parse(&self.input)? {
                Parsed::Whole {
                    status,
                    used,
                    body,
                    closes,
                    coding,
                } => {
                    self.input.drain(..used);
                    self.server_closes |= closes;
                    // 1xx are interim: the answer follows.
                    if (100..200).contains(&status) {
                        continue;
                    }
                    let body = decoded(coding, body)?;
                    return Ok(Answer { status, body });
                }
                Parsed::ToTheEnd {
                    status,
                    head,
                    coding,
                } if self.server_closes_now(link)? => {
                    let body = decoded(coding, self.input[head..].to_vec())?;
                    self.input.clear();
                    self.server_closes = true;
                    return Ok(Answer { status, body });
                }
                Parsed::ToTheEnd { .. } | Parsed::Partial => {}
            }
            if self.input.len() > MAX_RESPONSE {
                return Err(std::io::Error::new(
                    ErrorKind::InvalidData,
                    format!("an answer of more than {MAX_RESPONSE} bytes"),
                ));
            }
            let mut chunk = [0u8; 16 << 10];
            match link.read(&mut chunk) {
                Ok(0) => {
                    return Err(std::io::Error::new(
                        ErrorKind::UnexpectedEof,
                        "the server closed the connection before it answered",
                    ))
                }
                Ok(n) => {
                    self.input.extend_from_slice(&chunk[..n]);
                    waiting_since = None;
                }
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    if let Some(t) = self.requests.timeout {
                        if started.elapsed() > t {
                            return Err(std::io::Error::new(
                                ErrorKind::TimedOut,
                                format!("no answer within timeout({})", t.as_secs()),
                            ));
                        }
                    }
                    stalled(&mut waiting_since, give_up, STOP_GRACE)?;
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Whether the server has closed the connection after an answer that runs to its end:
    /// reads what is left when it has not.
    fn server_closes_now(&mut self, link: &mut Link) -> std::io::Result<bool> {
        let mut chunk = [0u8; 16 << 10];
        match link.read(&mut chunk) {
            Ok(0) => Ok(true),
            Ok(n) => {
                self.input.extend_from_slice(&chunk[..n]);
                Ok(false)
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => Ok(false),
            Err(e) if e.kind() == ErrorKind::Interrupted => Ok(false),
            Err(e) => Err(e),
        }
    }
}

/// What the start of `input` holds.
enum Parsed {
    /// Not a whole answer yet.
    Partial,
    /// A whole answer of `used` bytes.
    Whole {
        status: u16,
        used: usize,
        body: Vec<u8>,
        closes: bool,
        /// Its `Content-Encoding`, when it is one sluice reads.
        coding: Option<Coding>,
    },
    /// An answer whose body runs to the end of the connection, from `head` on.
    ToTheEnd {
        status: u16,
        head: usize,
        coding: Option<Coding>,
    },
}

/// An answer's body as it was before its `Content-Encoding`.
fn decoded(coding: Option<Coding>, body: Vec<u8>) -> std::io::Result<Vec<u8>> {
    match coding {
        Some(c) if !body.is_empty() => c.decode(&body),
        _ => Ok(body),
    }
}

/// Parses the answer at the start of `input`: its head with `httparse`, its body by
/// `Content-Length`, chunked, or to the end of the connection.
fn parse(input: &[u8]) -> std::io::Result<Parsed> {
    let invalid = |what: String| std::io::Error::new(ErrorKind::InvalidData, what);
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut response = httparse::Response::new(&mut headers);
    let head = match response.parse(input) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(Parsed::Partial),
        Err(e) => return Err(invalid(format!("not an HTTP answer: {e}"))),
    };
    let status = response.code.unwrap_or(0);
    let mut length = None;
    let mut chunked = false;
    let mut coding = None;
    let mut closes = response.version == Some(0);
    for h in response.headers.iter() {
        let value = std::str::from_utf8(h.value).unwrap_or("").trim();
        if h.name.eq_ignore_ascii_case("content-length") {
            length = Some(
                value
                    .parse::<usize>()
                    .map_err(|_| invalid(format!("Content-Length: {value}")))?,
            );
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            chunked = value.to_ascii_lowercase().ends_with("chunked");
        } else if h.name.eq_ignore_ascii_case("content-encoding") {
            coding = Coding::by_name(value);
        } else if h.name.eq_ignore_ascii_case("connection") {
            let value = value.to_ascii_lowercase();
            closes = value.contains("close") || (closes && !value.contains("keep-alive"));
        }
    }
    // No body: 1xx, 204, 304.
    if (100..200).contains(&status) || status == 204 || status == 304 {
        length = Some(0);
    }
    let whole = |used: usize, body: &[u8]| Parsed::Whole {
        status,
        used,
        body: body.to_vec(),
        closes,
        coding,
    };
    if chunked {
        let mut at = head;
        let mut body = Vec::new();
        loop {
            let (start, size) = match httparse::parse_chunk_size(&input[at..]) {
                Ok(httparse::Status::Complete((n, size))) => (at + n, size as usize),
                Ok(httparse::Status::Partial) => return Ok(Parsed::Partial),
                Err(_) => return Err(invalid("a chunk size that is not one".into())),
            };
            if size == 0 {
                // The last chunk; trailers (rare) up to an empty line.
                let rest = &input[start..];
                return match memchr::memmem::find(rest, b"\r\n") {
                    Some(0) => Ok(whole(start + 2, &body)),
                    _ => match memchr::memmem::find(rest, b"\r\n\r\n") {
                        Some(end) => Ok(whole(start + end + 4, &body)),
                        None => Ok(Parsed::Partial),
                    },
                };
            }
            if input.len() < start + size + 2 {
                return Ok(Parsed::Partial);
            }
            body.extend_from_slice(&input[start..start + size]);
            at = start + size + 2;
        }
    }
    match length {
        Some(n) if input.len() >= head + n => Ok(whole(head + n, &input[head..head + n])),
        Some(_) => Ok(Parsed::Partial),
        None => Ok(Parsed::ToTheEnd {
            status,
            head,
            coding,
        }),
    }
}

/// `: what the server said`, shortened, on one line; nothing when it said nothing.
fn quoted(body: &[u8]) -> String {
    let line = quoted_line(&String::from_utf8_lossy(
        &body[..body.len().min(QUOTED * 4)],
    ));
    if line.is_empty() {
        String::new()
    } else {
        format!(": {line}")
    }
}

/// `text` shortened, on one line.
fn quoted_line(text: &str) -> String {
    let line: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(QUOTED)
        .collect();
    line.trim().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn whole(input: &[u8]) -> (u16, usize, String, bool) {
        match parse(input).expect("an answer") {
            Parsed::Whole {
                status,
                used,
                body,
                closes,
                ..
            } => (status, used, String::from_utf8(body).unwrap(), closes),
            Parsed::Partial => panic!("partial"),
            Parsed::ToTheEnd { .. } => panic!("to the end"),
        }
    }

    #[test]
    fn answers_are_read_by_length_chunks_or_to_the_end() {
        let a = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokNEXT";
        assert_eq!(whole(a), (200, a.len() - 4, "ok".into(), false));
        let c = b"HTTP/1.1 400 Bad\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
        assert_eq!(whole(c), (400, c.len(), "abcde".into(), false));
        let closes = b"HTTP/1.1 503 Busy\r\nConnection: close\r\nContent-Length: 0\r\n\r\n";
        assert!(whole(closes).3);
        assert!(matches!(
            parse(b"HTTP/1.0 200 OK\r\n\r\nto the end").unwrap(),
            Parsed::ToTheEnd {
                status: 200,
                head: 19,
                coding: None
            }
        ));
        for partial in [
            &b"HTTP/1.1 200 OK\r\nContent-Len"[..],
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nab",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nab",
        ] {
            assert!(matches!(parse(partial).unwrap(), Parsed::Partial));
        }
        assert!(parse(b"SSH-2.0-OpenSSH\r\n\r\n").is_err());
        assert!(parse(b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n").is_err());
    }

    #[test]
    fn compressed_bodies_and_answers_read_back_as_they_were() {
        let lines: Vec<u8> = (0..1000)
            .flat_map(|i| format!("<13>Nov 27 10:00:00 host app: seq {i}\n").into_bytes())
            .collect();
        for coding in [Coding::Gzip, Coding::Deflate] {
            let mut out = Vec::new();
            coding.encode(&lines, &mut out);
            assert!(out.len() < lines.len() / 5, "{coding:?}: {}", out.len());
            assert_eq!(coding.decode(&out).unwrap(), lines);
            let mut answer = format!(
                "HTTP/1.1 200 OK\r\nContent-Encoding: {}\r\nContent-Length: {}\r\n\r\n",
                coding.name(),
                out.len()
            )
            .into_bytes();
            answer.extend_from_slice(&out);
            match parse(&answer).unwrap() {
                Parsed::Whole {
                    body, coding: c, ..
                } => {
                    assert_eq!(decoded(c, body).unwrap(), lines)
                }
                _ => panic!("whole"),
            }
        }
        // A bomb: more than an answer may be, once decompressed.
        let mut bomb = Vec::new();
        Coding::Gzip.encode(&vec![b'a'; MAX_RESPONSE + 10], &mut bomb);
        assert!(Coding::Gzip.decode(&bomb).is_err());
        assert!(Coding::Deflate.decode(b"not zlib").is_err());
    }

    #[test]
    fn statuses_mean_what_syslog_ng_says_unless_configured() {
        let r = Requests {
            targets: Vec::new(),
            body_prefix: Vec::new(),
            body_suffix: Vec::new(),
            delimiter: Vec::new(),
            batch: Batching::default(),
            timeout: None,
            actions: vec![(404, Action::Retry), (500, Action::Drop)],
            bulk: false,
            compression: None,
        };
        let seen: Vec<Action> = [200, 204, 301, 400, 404, 408, 429, 500, 503, 999]
            .iter()
            .map(|&s| r.action(s))
            .collect();
        use Action::*;
        assert_eq!(
            seen,
            [Success, Success, Retry, Drop, Retry, Retry, Retry, Drop, Retry, Retry]
        );
    }

    #[test]
    fn a_request_takes_as_many_messages_as_its_batch_allows() {
        let mut batch = Batch::new(None);
        for m in ["aa", "bbb", "c", "dddd"] {
            batch.data.extend_from_slice(m.as_bytes());
            batch.end_message();
        }
        let batches = [batch];
        let exchange = |lines, bytes| Exchange {
            requests: Arc::new(Requests {
                targets: Vec::new(),
                body_prefix: b"[".to_vec(),
                body_suffix: b"]".to_vec(),
                delimiter: b",".to_vec(),
                batch: Batching {
                    lines,
                    bytes,
                    timeout: Duration::ZERO,
                },
                timeout: None,
                actions: Vec::new(),
                bulk: false,
                compression: None,
            }),
            target: 0,
            input: Vec::new(),
            server_closes: false,
            partial: None,
        };
        let requests = |e: Exchange| {
            let mut pos = Position::default();
            let mut out = Vec::new();
            let mut body = Vec::new();
            while pos.batch < batches.len() {
                let (after, n) = e.body(&batches, pos, None, &mut body);
                out.push((String::from_utf8(body.clone()).unwrap(), n));
                pos = after;
            }
            out
        };
        let s = |b: &str, n| (b.to_string(), n);
        assert_eq!(
            requests(exchange(0, 0)),
            [s("[aa]", 1), s("[bbb]", 1), s("[c]", 1), s("[dddd]", 1)]
        );
        assert_eq!(
            requests(exchange(3, 0)),
            [s("[aa,bbb,c]", 3), s("[dddd]", 1)]
        );
        // At most 9 bytes a body, but at least one message.
        assert_eq!(
            requests(exchange(0, 9)),
            [s("[aa,bbb]", 2), s("[c,dddd]", 2)]
        );
        assert_eq!(
            requests(exchange(0, 2)),
            [s("[aa]", 1), s("[bbb]", 1), s("[c]", 1), s("[dddd]", 1)]
        );
    }

    #[test]
    fn a_bulk_request_taken_in_part_is_sent_again_without_what_was_settled() {
        let mut batch = Batch::new(None);
        for m in ["a", "b", "c", "d"] {
            batch.data.extend_from_slice(m.as_bytes());
            batch.end_message();
        }
        let batches = [batch];
        let mut e = Exchange {
            requests: Arc::new(Requests {
                targets: vec![Target {
                    url: "http://127.0.0.1:9200/_bulk".into(),
                    host: "127.0.0.1".into(),
                    port: 9200,
                    tls: false,
                    head: Vec::new(),
                }],
                body_prefix: Vec::new(),
                body_suffix: b"\n".to_vec(),
                delimiter: b"\n".to_vec(),
                batch: Batching {
                    lines: 100,
                    bytes: 0,
                    timeout: Duration::ZERO,
                },
                timeout: None,
                actions: Vec::new(),
                bulk: true,
                compression: None,
            }),
            target: 0,
            input: Vec::new(),
            server_closes: false,
            partial: None,
        };
        let mut pos = Position::default();
        let mut body = Vec::new();
        let (after, n) = e.body(&batches, pos, None, &mut body);
        assert_eq!((body.as_slice(), n), (&b"a\nb\nc\nd\n"[..], 4));
        // a taken, b refused for good, c and d asked for again.
        let answer = br#"{"errors":true,"items":[{"index":{"status":201}},
            {"index":{"status":400,"error":{"type":"mapper_parsing_exception"}}},
            {"index":{"status":429}},{"index":{"status":503}}]}"#;
        let (why, again) = e.documents(answer, vec![false; 4], &mut pos).unwrap_err();
        assert_eq!(
            (why.as_str(), again, pos.refused),
            ("HTTP 429 for 2 of 4 documents", 2, 1)
        );
        // Sent again: c and d alone, over the same span.
        let settled = e.partial.take().map(|p| p.settled).unwrap();
        let (again_after, n) = e.body(&batches, pos, Some(&settled), &mut body);
        assert_eq!((body.as_slice(), n), (&b"c\nd\n"[..], 4));
        assert_eq!(
            (again_after.batch, again_after.byte),
            (after.batch, after.byte)
        );
        // d taken now, c again later; then c.
        let answer =
            br#"{"errors":true,"items":[{"index":{"status":429}},{"index":{"status":201}}]}"#;
        assert_eq!(e.documents(answer, settled, &mut pos).unwrap_err().1, 1);
        let settled = e.partial.take().map(|p| p.settled).unwrap();
        e.body(&batches, pos, Some(&settled), &mut body);
        assert_eq!(body, b"c\n");
        let answer = br#"{"took":1,"errors":false,"items":[{"index":{"status":201}}]}"#;
        assert!(e.documents(answer, settled, &mut pos).is_ok());
        assert_eq!(pos.refused, 1);
    }
}
