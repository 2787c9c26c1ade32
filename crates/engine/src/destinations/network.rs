//! Forwarding destinations: `network()`, `syslog()`, `tcp()`, `tcp6()`, `udp()`, `udp6()`,
//! `unix-stream()`, `unix-dgram()`.
//!
//! Readers format their share of a batch (syslog-ng's network format, RFC5424 or a template;
//! octet-counted for `syslog()` over a stream) and queue it in the destination's [`Queue`].
//! One sender thread per destination connects, gathers what is queued, and writes it with one
//! `writev` on a stream or one datagram per message. A connection that fails is opened again
//! through the `failover()` servers in turn, waiting `time-reopen()` after each round that
//! fails; messages wait in the queue meanwhile and are written again from the first one the
//! failed write did not finish. With `failback()` the sender probes the primary server while
//! it uses a failover one, and returns to it after `successful-probes-required()` probes in a
//! row connect.
//!
//! With `transport(tls)` (or a `tls()` block in `tcp()`) the connection is TLS: the sender
//! does the handshake when it connects, hands rustls a chunk of what is queued at a time and
//! counts it written once every record of it is on the socket.
//!
//! Plain TCP cannot say what the peer received: what sat in the kernel's buffers when a
//! connection died is lost (RELP and disk buffers are the remedies).

use super::diskq::{DiskBufferOptions, DiskQueue};
use super::format::Formatter;
use super::link::{Connected, Datagrams, Link, Octets, Position, Wire};
use super::queue::{Batch, BatchQueue, Queue};
use super::{Destination, Outbox};
use crate::own_log;
use crate::stats::DestCounters;
use crate::window::Ack;
use sluice_model::LogMessage;
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::cell::RefCell;
use std::io::ErrorKind;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    Tcp,
    Udp,
    UnixStream,
    UnixDgram,
}

impl Transport {
    fn is_stream(self) -> bool {
        matches!(self, Transport::Tcp | Transport::UnixStream)
    }
}

/// `failback()`: return to the primary server once it answers again.
#[derive(Clone, Debug)]
pub struct Failback {
    pub probe_interval: Duration,
    pub successful_probes: u32,
}

#[derive(Clone, Debug)]
pub struct NetworkOptions {
    pub transport: Transport,
    /// The primary server, then the `failover()` ones: host names or addresses, or socket
    /// paths for the unix transports.
    pub servers: Vec<String>,
    pub port: u16,
    /// `ip-protocol(6)` (and `tcp6()`, `udp6()`): IPv6 addresses only; `4`: IPv4 only.
    pub ip_protocol: Option<u8>,
    /// `localip()` / `localport()`: the address to send from.
    pub local: Option<SocketAddr>,
    /// RFC6587 octet counting (`syslog()` over a stream): `LEN ` before each message.
    pub octet_counting: bool,
    pub failback: Option<Failback>,
    pub time_reopen: Duration,
    pub so_sndbuf: Option<usize>,
    pub so_keepalive: bool,
    pub log_fifo_size: usize,
    /// `disk-buffer()`, and the name of the buffer's directory (from the destination's name
    /// and server, or `persist-name()`).
    pub disk_buffer: Option<(DiskBufferOptions, String)>,
    /// TLS over the stream ([`crate::tls`]).
    pub tls: Option<Arc<rustls::ClientConfig>>,
    /// `relp()`: RELP over the stream ([`super::relp`]).
    pub relp: bool,
}

/// The most a sender gathers for one write.
const MAX_GATHER: usize = 4 << 20;
/// How often an idle sender looks at its connection, its drop counter and its failback.
const TICK: Duration = Duration::from_millis(500);
/// How long a connect may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a TLS handshake may take.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

thread_local! {
    /// One formatted message before its octet count is known.
    static SCRATCH: RefCell<Vec<u8>> = RefCell::default();
}

pub struct NetworkDestination {
    label: Arc<str>,
    formatter: Formatter,
    opts: Arc<NetworkOptions>,
    counters: DestCounters,
    /// Made when the server starts ([`Destination::start`]): a disk buffer is opened then.
    queue: OnceLock<Arc<dyn BatchQueue>>,
    /// Started on first delivery, or at once when a disk buffer has messages from before.
    sender: OnceLock<()>,
    thread: Mutex<Option<JoinHandle<Option<Connection>>>>,
    /// The connection of the destination this one took over, for its sender to go on with.
    inherited_conn: Mutex<Option<Connection>>,
    /// The disk buffer's directory (`None`: the queue is in memory), known once started.
    buffer_dir: OnceLock<Option<PathBuf>>,
    /// Tells the sender to give its batches back and stop: a reload's new destination of
    /// the same name takes over the queue.
    retire: Arc<AtomicBool>,
    handed_over: AtomicBool,
}

impl NetworkDestination {
    pub fn new(
        label: String,
        formatter: Formatter,
        opts: NetworkOptions,
        counters: DestCounters,
    ) -> NetworkDestination {
        NetworkDestination {
            label: label.into(),
            formatter,
            counters,
            queue: OnceLock::new(),
            opts: Arc::new(opts),
            sender: OnceLock::new(),
            thread: Mutex::new(None),
            inherited_conn: Mutex::new(None),
            buffer_dir: OnceLock::new(),
            retire: Arc::default(),
            handed_over: AtomicBool::new(false),
        }
    }

    /// Gives the queue to a reload's destination of the same name when both keep it in the
    /// same place (memory, or one disk buffer directory): the sender puts back what it holds
    /// and stops; what readers still deliver here goes on into the same queue.
    fn hand_over(&self, dir: &Option<PathBuf>) -> Option<Handover> {
        if self.buffer_dir.get()? != dir {
            return None;
        }
        let queue = self.queue.get()?.clone();
        self.retire.store(true, Ordering::SeqCst);
        let thread = self.thread.lock().expect("thread lock").take();
        let conn = thread.and_then(|t| t.join().ok().flatten());
        self.handed_over.store(true, Ordering::SeqCst);
        Some((queue, conn))
    }

    fn queue(&self) -> &Arc<dyn BatchQueue> {
        self.queue
            .get()
            .expect("a destination is started before it is given messages")
    }

    fn start_sender(&self) {
        self.sender.get_or_init(|| {
            // A connection taken over goes on if it reaches one of this destination's servers.
            let inherited = self.inherited_conn.lock().expect("conn lock").take();
            let (conn, server) = inherited
                .and_then(|c| {
                    let i = (0..self.opts.servers.len())
                        .find(|&i| server_name(&self.opts, i) == c.to)?;
                    Some((Some(c.link), i))
                })
                .unwrap_or((None, 0));
            let sender = Sender {
                label: self.label.clone(),
                opts: self.opts.clone(),
                queue: self.queue().clone(),
                conn,
                server,
                good_probes: 0,
                last_probe: Instant::now(),
                reported_drops: 0,
                failing: None,
                retire: self.retire.clone(),
            };
            let handle = std::thread::Builder::new()
                .name("sender".into())
                .spawn(move || sender.run())
                .expect("spawning a sender thread");
            *self.thread.lock().expect("thread lock") = Some(handle);
        });
    }

    fn append(&self, msg: &LogMessage, out: &mut Vec<u8>) {
        if !self.opts.octet_counting {
            self.formatter.append(msg, out);
            return;
        }
        SCRATCH.with_borrow_mut(|one| {
            one.clear();
            self.formatter.append(msg, one);
            sluice_model::time::push_num(out, one.len() as u32);
            out.push(b' ');
            out.extend_from_slice(one);
        });
    }
}

impl Destination for NetworkDestination {
    fn numbers_local(&self) -> bool {
        self.formatter.numbers_local()
    }

    fn start(
        &self,
        state_dir: &Path,
        previous: Option<&Arc<dyn Destination>>,
    ) -> std::io::Result<()> {
        let dir = self
            .opts
            .disk_buffer
            .as_ref()
            .map(|(opts, name)| opts.dir.as_deref().unwrap_or(state_dir).join(name));
        let inherited = previous
            .and_then(|p| p.as_any().downcast_ref::<NetworkDestination>())
            .and_then(|old| old.hand_over(&dir));
        let taken_over = inherited.is_some();
        let queue: Arc<dyn BatchQueue> = match (inherited, &dir) {
            (Some((q, conn)), _) => {
                *self.inherited_conn.lock().expect("conn lock") = conn;
                q
            }
            (None, None) => Arc::new(Queue::new(self.opts.log_fifo_size, self.counters.clone())),
            (None, Some(dir)) => DiskQueue::open(
                self.label.clone(),
                dir.clone(),
                self.opts.disk_buffer.as_ref().expect("a buffer").0.clone(),
                self.counters.clone(),
            )
            .map_err(|e| {
                std::io::Error::new(e.kind(), format!("disk buffer {}: {e}", dir.display()))
            })?,
        };
        let backlog = queue.has_backlog();
        if self.queue.set(queue).is_err() {
            return Ok(()); // started already
        }
        let _ = self.buffer_dir.set(dir);
        if backlog || taken_over {
            self.start_sender();
        }
        Ok(())
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn deliver(
        &self,
        msgs: &[LogMessage],
        which: &[u32],
        ack: &Ack,
        flow_control: bool,
        outbox: &mut Outbox,
    ) {
        self.start_sender();
        self.counters
            .processed
            .fetch_add(which.len() as u64, Ordering::Relaxed);
        let mut batch = Batch::new(flow_control.then(|| ack.clone()));
        batch.data.reserve(self.formatter.size_hint(which.len()));
        batch.ends.reserve(which.len());
        for &i in which {
            self.append(&msgs[i as usize], &mut batch.data);
            batch.end_message();
        }
        self.formatter.learn_size(batch.data.len(), which.len());
        let queue = self.queue().clone();
        outbox.push(move || queue.push(batch));
    }

    fn shutdown(&self) {
        if self.handed_over.load(Ordering::SeqCst) {
            return; // the queue lives on with the destination that took it over
        }
        if let Some(q) = self.queue.get() {
            q.stop();
        }
        let thread = self.thread.lock().expect("thread lock").take();
        if let Some(t) = thread {
            let _ = t.join();
        }
    }
}

/// The thread that owns a destination's connection.
struct Sender {
    label: Arc<str>,
    opts: Arc<NetworkOptions>,
    queue: Arc<dyn BatchQueue>,
    conn: Option<Connected>,
    /// The server in use (or tried next): an index into `opts.servers`.
    server: usize,
    /// Probes of the primary server that connected in a row, while on a failover server.
    good_probes: u32,
    last_probe: Instant,
    reported_drops: u64,
    /// Since when no server accepts connections, and when that was last reported.
    failing: Option<(Instant, Instant)>,
    retire: Arc<AtomicBool>,
}

/// How often a server that stays unreachable is reported again.
const REPORT_AGAIN: Duration = Duration::from_secs(60);

impl Sender {
    /// Sends until the queue stops; when retired for a reload's destination, returns the
    /// connection (and the server it goes to) for that one to go on with.
    fn run(mut self) -> Option<Connection> {
        let mut batches: Vec<Batch> = Vec::new();
        loop {
            let stopping = self.queue.take(TICK, MAX_GATHER, &mut batches);
            if self.retire.load(Ordering::SeqCst) {
                self.queue.put_back(&mut batches);
                return self.give_connection();
            }
            self.report_drops();
            self.failback();
            if batches.is_empty() {
                if stopping {
                    return None;
                }
                if self.conn.as_ref().is_some_and(Connected::closed) {
                    self.conn = None;
                }
                continue;
            }
            let sent = self.send(&batches, stopping);
            let messages: usize = batches.iter().map(Batch::len).sum();
            if sent {
                self.queue
                    .counters()
                    .written
                    .fetch_add(messages as u64, Ordering::Relaxed);
                self.queue.done(&mut batches);
            } else if self.retire.load(Ordering::SeqCst) {
                // A reload's destination takes over, and sends these.
                self.queue.put_back(&mut batches);
                return self.give_connection();
            } else {
                // Stopping with the servers unreachable.
                let what = self.queue.abandon(&mut batches);
                own_log::error(format!("{}: stopping with {what}", self.label));
                return None;
            }
        }
    }

    /// The connection in use, for the sender that takes over: going on with it keeps the
    /// messages in order at the server (a second connection would be read beside the first).
    fn give_connection(&mut self) -> Option<Connection> {
        let link = self.conn.take()?;
        Some(Connection {
            link,
            to: server_name(&self.opts, self.server),
        })
    }

    /// Writes `batches` whole, reconnecting as needed. Returns `false` when stopping (or
    /// handing over to a reload's destination) and no server takes them: a server that
    /// stalls then gets two grace periods, not one per reconnection.
    fn send(&mut self, batches: &[Batch], stopping: bool) -> bool {
        let mut pos = Position::default();
        let mut failed_while_giving_up = false;
        loop {
            if self.conn.as_ref().is_some_and(Connected::closed) {
                self.conn = None;
            }
            if self.conn.is_none() && !self.connect(stopping) {
                return false;
            }
            let conn = self.conn.as_mut().expect("connected");
            // Asked again at every stall: a stop or a hand-over may come while a write waits.
            let (queue, retire) = (&self.queue, &self.retire);
            let giving_up = || stopping || queue.is_stopping() || retire.load(Ordering::SeqCst);
            let result = conn
                .wire
                .send(&mut conn.link, batches, &mut pos, &giving_up);
            match result {
                Ok(()) => return true,
                Err(e) => {
                    self.conn = None;
                    // Stopping or handing over: one more connection, not one per failure;
                    // none after a peer that took nothing for the grace (it is still there,
                    // taking nothing).
                    let giving_up =
                        stopping || self.queue.is_stopping() || self.retire.load(Ordering::SeqCst);
                    let again = !(giving_up
                        && (e.kind() == ErrorKind::TimedOut
                            || std::mem::replace(&mut failed_while_giving_up, true)));
                    own_log::error(format!(
                        "{}: error sending to {}: {e}{}",
                        self.label,
                        self.server_name(self.server),
                        if again { "; reconnecting" } else { "" }
                    ));
                    if !again {
                        return false;
                    }
                    // The message the failed write was in is sent again whole.
                    if let Some(b) = batches.get(pos.batch) {
                        let i = b.ends.partition_point(|&e| e as usize <= pos.byte);
                        pos.byte = b.start(i);
                    }
                }
            }
        }
    }

    /// Connects to the current server or, failing that, the next ones in turn; waits
    /// `time-reopen()` after a round in which none connects. Returns `false` when stopping
    /// and a whole round failed.
    fn connect(&mut self, mut stopping: bool) -> bool {
        let n = self.opts.servers.len();
        loop {
            for _ in 0..n {
                match self.open(self.server) {
                    Ok(sock) => {
                        if self.server != 0 {
                            own_log::warning(format!(
                                "{}: connected to failover server {}",
                                self.label,
                                self.server_name(self.server)
                            ));
                        }
                        if let Some((since, _)) = self.failing.take() {
                            own_log::notice(format!(
                                "{}: connected to {} after {:.0}s without a server",
                                self.label,
                                self.server_name(self.server),
                                since.elapsed().as_secs_f64()
                            ));
                        }
                        self.conn = Some(sock);
                        self.good_probes = 0;
                        self.last_probe = Instant::now();
                        return true;
                    }
                    Err(e) => {
                        // The first failure of a streak is reported, then once a minute.
                        let now = Instant::now();
                        let report = match &mut self.failing {
                            None => {
                                self.failing = Some((now, now));
                                true
                            }
                            Some((_, last)) if last.elapsed() >= REPORT_AGAIN => {
                                *last = now;
                                true
                            }
                            Some(_) => false,
                        };
                        if report {
                            own_log::error(format!(
                                "{}: cannot connect to {}: {e}; trying every {}s",
                                self.label,
                                self.server_name(self.server),
                                self.opts.time_reopen.as_secs()
                            ));
                        }
                        self.server = (self.server + 1) % n;
                    }
                }
            }
            if stopping {
                return false;
            }
            // Told to stop while waiting: one last round.
            stopping = self.stop_requested_within(self.opts.time_reopen);
        }
    }

    /// Sleeps `wait` in small steps; returns whether the queue was told to stop meanwhile.
    fn stop_requested_within(&mut self, wait: Duration) -> bool {
        let until = Instant::now() + wait;
        while let Some(left) = until.checked_duration_since(Instant::now()) {
            self.report_drops();
            if self.queue.is_stopping() || self.retire.load(Ordering::SeqCst) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(100).min(left));
        }
        self.queue.is_stopping() || self.retire.load(Ordering::SeqCst)
    }

    /// Opens a connection to server `i`, with its TLS handshake done if it speaks TLS, and
    /// the wire the destination speaks on it (a RELP session opened).
    fn open(&self, i: usize) -> std::io::Result<Connected> {
        let mut link = self.open_tls(i)?;
        let wire: Box<dyn Wire> = if self.opts.relp {
            link.sock.set_read_timeout(Some(TICK))?;
            Box::new(super::relp::open(&mut link, HANDSHAKE_TIMEOUT)?)
        } else if self.opts.transport.is_stream() {
            Box::new(Octets)
        } else {
            Box::new(Datagrams {
                udp: self.opts.transport == Transport::Udp,
            })
        };
        Ok(Connected { link, wire })
    }

    /// Opens the connection to server `i`, with its TLS handshake done if it speaks TLS.
    fn open_tls(&self, i: usize) -> std::io::Result<Link> {
        let sock = self.open_socket(i)?;
        let Some(config) = &self.opts.tls else {
            return Ok(Link { sock, tls: None });
        };
        let name = rustls::pki_types::ServerName::try_from(self.opts.servers[i].clone())
            .map_err(|e| std::io::Error::new(ErrorKind::InvalidInput, e))?;
        let mut tls = rustls::ClientConnection::new(config.clone(), name)
            .map_err(|e| std::io::Error::other(format!("TLS: {e}")))?;
        sock.set_read_timeout(Some(HANDSHAKE_TIMEOUT))?;
        sock.set_write_timeout(Some(HANDSHAKE_TIMEOUT))?;
        while tls.is_handshaking() {
            tls.complete_io(&mut &sock).map_err(|e| {
                let why = crate::tls::explain_io(&e);
                std::io::Error::new(e.kind(), format!("TLS handshake failed: {why}"))
            })?;
        }
        tls.set_buffer_limit(None);
        sock.set_read_timeout(None)?;
        sock.set_write_timeout(Some(TICK))?;
        Ok(Link {
            sock,
            tls: Some(Box::new(tls)),
        })
    }

    /// Opens the socket to server `i`.
    fn open_socket(&self, i: usize) -> std::io::Result<Socket> {
        let o = &self.opts;
        let name = &o.servers[i];
        let ty = if o.transport.is_stream() {
            Type::STREAM
        } else {
            Type::DGRAM
        };
        if matches!(o.transport, Transport::UnixStream | Transport::UnixDgram) {
            let sock = Socket::new(Domain::UNIX, ty, None)?;
            if let Some(size) = o.so_sndbuf {
                sock.set_send_buffer_size(size)?;
            }
            sock.connect(&SockAddr::unix(name)?)?;
            sock.set_write_timeout(Some(TICK))?;
            return Ok(sock);
        }
        let addrs = (name.as_str(), o.port)
            .to_socket_addrs()?
            .filter(|a| o.ip_protocol.is_none_or(|p| (p == 6) == a.is_ipv6()));
        let mut last = std::io::Error::new(ErrorKind::NotFound, "no address of that family");
        for addr in addrs {
            let protocol = if ty == Type::STREAM {
                Protocol::TCP
            } else {
                Protocol::UDP
            };
            let sock = Socket::new(Domain::for_address(addr), ty, Some(protocol))?;
            if let Some(size) = o.so_sndbuf {
                sock.set_send_buffer_size(size)?;
            }
            if o.so_keepalive {
                sock.set_keepalive(true)?;
            }
            if let Some(local) = o.local {
                sock.bind(&local.into())?;
            }
            let connected = if ty == Type::STREAM {
                sock.connect_timeout(&addr.into(), CONNECT_TIMEOUT)
            } else {
                sock.connect(&addr.into())
            };
            match connected {
                Ok(()) => {
                    sock.set_write_timeout(Some(TICK))?;
                    return Ok(sock);
                }
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    fn server_name(&self, i: usize) -> String {
        server_name(&self.opts, i)
    }

    /// While on a failover server, probes the primary every `tcp-probe-interval()` and
    /// returns to it after enough probes in a row connect.
    fn failback(&mut self) {
        let Some(fb) = &self.opts.failback else {
            return;
        };
        if self.server == 0 || self.conn.is_none() || self.last_probe.elapsed() < fb.probe_interval
        {
            return;
        }
        self.last_probe = Instant::now();
        if self.open_socket(0).is_ok() {
            self.good_probes += 1;
        } else {
            self.good_probes = 0;
        }
        if self.good_probes >= fb.successful_probes {
            own_log::notice(format!(
                "{}: the primary server {} answers again; failing back to it",
                self.label,
                self.server_name(0)
            ));
            self.conn = None;
            self.server = 0;
            self.good_probes = 0;
        }
    }

    /// Says once a tick how many messages a full queue dropped since it last said so.
    fn report_drops(&mut self) {
        let dropped = self.queue.counters().dropped.load(Ordering::Relaxed);
        if dropped > self.reported_drops {
            own_log::warning(format!(
                "{}: destination queue full (log-fifo-size({})); dropped {} messages",
                self.label,
                self.opts.log_fifo_size,
                dropped - self.reported_drops
            ));
            self.reported_drops = dropped;
        }
    }
}

/// A sender's open connection, handed to the sender of a reload's destination: `to` is the
/// server it reaches ([`server_name`]).
pub struct Connection {
    link: Connected,
    to: String,
}

/// What a destination hands over on a reload: its queue and its connection.
type Handover = (Arc<dyn BatchQueue>, Option<Connection>);

/// How messages name server `i`: `tcp:10.0.0.1:514`.
fn server_name(opts: &NetworkOptions, i: usize) -> String {
    let name = &opts.servers[i];
    match opts.transport {
        Transport::Tcp if opts.relp => format!("relp:{name}:{}", opts.port),
        Transport::Tcp if opts.tls.is_some() => format!("tls:{name}:{}", opts.port),
        Transport::Tcp => format!("tcp:{name}:{}", opts.port),
        Transport::Udp => format!("udp:{name}:{}", opts.port),
        Transport::UnixStream => format!("unix-stream:{name}"),
        Transport::UnixDgram => format!("unix-dgram:{name}"),
    }
}
