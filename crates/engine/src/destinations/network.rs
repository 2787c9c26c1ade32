//! Forwarding destinations: `network()`, `syslog()`, `tcp()`, `tcp6()`, `udp()`, `udp6()`,
//! `unix-stream()`, `unix-dgram()` and `relp()`.
//!
//! Readers format their share of a batch (syslog-ng's network format, RFC5424 or a template;
//! octet-counted for `syslog()` over a stream) and queue it in the destination's [`Queue`] or
//! disk buffer. A [`Sender`](super::sender) thread takes it from there; this file says where
//! it sends ([`Servers`] for [`NetworkOptions`]: addresses or socket paths, the connection's
//! options, TLS) and what it speaks (a [`Wire`]: octets on a stream, a datagram a message, or
//! RELP), and hands the queue and the connection over to a reload's destination.
//!
//! With `transport(tls)` (or a `tls()` block in `tcp()`) the connection is TLS: the handshake
//! is done when it connects, and rustls is handed a chunk of what is queued at a time
//! ([`super::link`]).
//!
//! Plain TCP cannot say what the peer received: what sat in the kernel's buffers when a
//! connection died is lost (RELP and disk buffers are the remedies).

use super::diskq::{DiskBufferOptions, DiskQueue};
use super::format::Formatter;
use super::link::{Connected, Datagrams, Link, Octets, Wire};
use super::queue::{Batch, BatchQueue, Queue};
use super::sender::{Connection, Failback, Pacing, Sender, Servers, TICK};
use super::{Destination, Outbox};
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
                servers: self.opts.clone(),
                pacing: Pacing {
                    time_reopen: self.opts.time_reopen,
                    failback: self.opts.failback.clone(),
                    log_fifo_size: self.opts.log_fifo_size,
                },
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

/// A forwarding destination's servers: TCP or UDP addresses, or unix socket paths.
impl Servers for NetworkOptions {
    /// Opens a connection to server `i`, with its TLS handshake done if it speaks TLS, and
    /// the wire the destination speaks on it (a RELP session opened).
    fn open(&self, i: usize) -> std::io::Result<Connected> {
        let mut link = self.open_tls(i)?;
        let wire: Box<dyn Wire> = if self.relp {
            link.sock.set_read_timeout(Some(TICK))?;
            Box::new(super::relp::open(&mut link, HANDSHAKE_TIMEOUT)?)
        } else if self.transport.is_stream() {
            Box::new(Octets)
        } else {
            Box::new(Datagrams {
                udp: self.transport == Transport::Udp,
            })
        };
        Ok(Connected { link, wire })
    }

    fn name(&self, i: usize) -> String {
        server_name(self, i)
    }

    fn count(&self) -> usize {
        self.servers.len()
    }

    fn probe(&self, i: usize) -> bool {
        self.open_socket(i).is_ok()
    }
}

impl NetworkOptions {
    /// Opens the connection to server `i`, with its TLS handshake done if it speaks TLS.
    fn open_tls(&self, i: usize) -> std::io::Result<Link> {
        let sock = self.open_socket(i)?;
        let Some(config) = &self.tls else {
            return Ok(Link { sock, tls: None });
        };
        let name = rustls::pki_types::ServerName::try_from(self.servers[i].clone())
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
        let o = self;
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
