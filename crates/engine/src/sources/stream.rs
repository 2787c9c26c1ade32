//! Stream listeners: `tcp()`, `tcp6()`, `network(transport(tcp|tls|proxied-*))`,
//! `syslog(transport(tcp|tls|proxied-*))` and `unix-stream()`. Each accepted connection gets its
//! own task, window and origin; connections past `max-connections()` are refused, logged and
//! counted, as are those whose TLS handshake or PROXY header fails.

use super::{read_stream, Context, ReaderSpec, Retire, UnixSocket};
use crate::dns::{self, NameOptions};
use crate::memory::Charge;
use crate::own_log as log;
use sluice_model::values::{name_id, NameId};
use sluice_model::{Endpoints, Origin};
use sluice_protocol::proxy;
use sluice_protocol::Text;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;

/// How often a blocked accept() returns to see whether its listener is to stop.
const ACCEPT_WAKE: std::time::Duration = std::time::Duration::from_millis(100);

/// What an open connection holds of the memory budget ([`crate::memory`]): the resident
/// memory 2,000 connections added, each having sent a message (release build, `ps` RSS),
/// 8.4 KiB a plain one and 26.5 KiB a TLS one (rustls's state and buffers; 21 KiB since a
/// TLS socket's read buffer is only held while data is, measured with 4,000). A busy
/// connection's larger reads are charged as they happen ([`crate::window::ReadBudget`],
/// [`SocketBuffer`]).
const CONNECTION_MEMORY: u64 = 8 << 10;
const TLS_CONNECTION_MEMORY: u64 = 28 << 10;

#[derive(Clone, Debug)]
pub enum Listen {
    Tcp(SocketAddr),
    Unix(UnixSocket),
}

/// As an operator reads it: `0.0.0.0:514/tcp`, `/dev/log`.
impl std::fmt::Display for Listen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Listen::Tcp(addr) => write!(f, "{addr}/tcp"),
            Listen::Unix(unix) => write!(f, "{}", unix.path.display()),
        }
    }
}

#[derive(Clone, Debug)]
pub struct StreamSource {
    pub listen: Listen,
    /// `pass-unix-credentials()`: a unix connection's peer named by its credentials
    /// (`.unix.pid`, `.unix.uid`, `.unix.gid`).
    pub pass_credentials: bool,
    pub reader: ReaderSpec,
    pub max_connections: usize,
    pub names: NameOptions,
    pub source_name: Arc<str>,
    pub source_id: u16,
    pub so_rcvbuf: Option<usize>,
    pub so_reuseport: bool,
    pub keep_alive: bool,
    /// `listen-backlog()`: connections waiting to be accepted.
    pub listen_backlog: u32,
    /// Open connections (syslog-ng's `connections` counter of the source).
    pub connections: Arc<std::sync::atomic::AtomicU64>,
    /// `transport(proxied-*)`: where each connection has a PROXY protocol header; the client
    /// it announces is the messages' `$SOURCEIP`.
    pub proxied: Proxied,
    /// `trusted-proxies()`: the peers whose PROXY headers are believed; others are refused.
    /// Empty: every peer's (said when the source starts).
    pub trusted_proxies: Vec<sluice_model::filter::Network>,
    /// `handshake-timeout()`: how long a connection may take for its TLS handshake and its
    /// PROXY header.
    pub handshake_timeout: std::time::Duration,
    /// Connections still in their TLS handshake or PROXY header. They may hold at most half
    /// of `max-connections()`: the other half stays for peers that got through.
    pub unauthenticated: Arc<std::sync::atomic::AtomicUsize>,
    /// `transport(tls)`: connections are TLS ([`crate::tls`]).
    pub tls: Option<Arc<crate::tls::Reloading<rustls::ServerConfig>>>,
    /// Connections closed because their TLS handshake failed (an untrusted peer, no
    /// certificate where one is required, not TLS at all): `tls_handshake_failures`.
    pub tls_failures: Arc<std::sync::atomic::AtomicU64>,
    /// Connections refused because `max-connections()` were open: `rejected_connections`.
    pub rejected: Arc<std::sync::atomic::AtomicU64>,
    /// `relp()`: connections speak RELP ([`super::relp`]).
    pub relp: bool,
    /// `tls(trusted-keys())` chose the peers: their fingerprint is `.tls.x509_fp`.
    pub tls_fingerprints: bool,
}

/// Where a connection's PROXY protocol header is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Proxied {
    No,
    /// Before anything else: `proxied-tcp`, and `proxied-tls-passthrough` (a proxy that passes
    /// TLS through says who connected, then the client's handshake follows).
    First,
    /// The first thing inside TLS: `proxied-tls` (the proxy speaks TLS to sluice itself).
    InsideTls,
}

impl super::Source for StreamSource {
    fn source_name(&self) -> &Arc<str> {
        &self.source_name
    }

    fn place(&self) -> super::Place {
        super::Place {
            kind: "stream",
            address: self.listen.to_string(),
        }
    }

    fn bind(self: Arc<Self>, held: Option<super::Held>) -> std::io::Result<Box<dyn super::Ready>> {
        let bound = match held {
            Some(held) => Bound(held.sockets.into_iter().next().expect("a socket").into()),
            None => self.bind_socket()?,
        };
        Ok(Box::new((self, bound)))
    }

    fn reader(&self) -> Option<&ReaderSpec> {
        Some(&self.reader)
    }

    fn unix_path(&self) -> Option<&std::path::Path> {
        match &self.listen {
            Listen::Unix(u) => Some(&u.path),
            Listen::Tcp(_) => None,
        }
    }

    fn descriptors(&self) -> usize {
        // The listener and the copy kept to hand over at a reload.
        2
    }

    fn connections(&self) -> usize {
        self.max_connections
    }
}

impl super::Ready for (Arc<StreamSource>, Bound) {
    fn hand_over(&self) -> Vec<std::os::fd::OwnedFd> {
        self.1 .0.try_clone().map(Into::into).into_iter().collect()
    }

    fn run(
        self: Box<Self>,
        ctx: Context,
        retire: watch::Receiver<Retire>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> {
        let (source, bound) = *self;
        Box::pin(source.serve(bound, ctx, retire))
    }
}

/// A bound listener, ready to serve. Binding happens before sluice reports it started, so
/// a port in use is a startup error.
pub struct Bound(socket2::Socket);

impl StreamSource {
    pub fn bind_socket(&self) -> std::io::Result<Bound> {
        use socket2::{Domain, SockAddr, Socket, Type};
        let socket = match &self.listen {
            Listen::Tcp(addr) => {
                let socket = Socket::new(Domain::for_address(*addr), Type::STREAM, None)?;
                socket.set_reuse_address(true)?;
                if self.so_reuseport {
                    socket.set_reuse_port(true)?;
                }
                if let Some(size) = self.so_rcvbuf {
                    socket.set_recv_buffer_size(size)?;
                }
                // Accepted connections inherit these from the listener: no call per
                // connection. Nagle's delay would only slow what sluice answers (RELP
                // responses, TLS handshakes).
                socket.set_tcp_nodelay(true)?;
                if self.keep_alive {
                    socket.set_keepalive(true)?;
                }
                socket.bind(&SockAddr::from(*addr))?;
                socket
            }
            Listen::Unix(unix) => {
                unix.make_room()?;
                let socket = Socket::new(Domain::UNIX, Type::STREAM, None)?;
                socket.bind(&SockAddr::unix(&unix.path)?)?;
                unix.apply_permissions()?;
                socket
            }
        };
        socket.listen(self.listen_backlog as i32)?;
        Ok(Bound(socket))
    }

    /// Accepts connections until `retire` (or shutdown), then waits for every connection to
    /// finish: after a reload that changed the source they go on, routed by the new
    /// configuration, until their peers close them.
    ///
    /// A thread of its own accepts, so that a burst of thousands of connections is taken
    /// from the kernel's queue at once instead of waiting behind the tasks that read; the
    /// connections then go to the runtime.
    pub async fn serve(
        self: Arc<Self>,
        bound: Bound,
        ctx: Context,
        mut retire: watch::Receiver<Retire>,
    ) {
        let listener = Arc::new(bound.0);
        reserve_descriptors(listener.as_raw_fd(), self.max_connections);
        // accept() returns every 100 ms to see whether to stop: a listener handed over to a
        // successor cannot be woken by shutting the shared socket down.
        if let Err(e) = listener.set_read_timeout(Some(ACCEPT_WAKE)) {
            log::warning(format!("source {}: {e}", self.source_name));
        }
        let (tx, mut incoming) = mpsc::unbounded_channel();
        let stopping = Arc::new(AtomicBool::new(false));
        let acceptor = {
            let (listener, stopping, me) = (listener.clone(), stopping.clone(), self.clone());
            std::thread::Builder::new()
                .name("acceptor".into())
                .spawn(move || me.accept_loop(&listener, &tx, &stopping))
                .expect("spawning an acceptor thread")
        };
        if self.proxied != Proxied::No && self.trusted_proxies.is_empty() {
            log::warning(format!(
                "source {}: any peer's PROXY header is believed, so any client that reaches {} can claim any address; trusted-proxies() names the proxies to believe",
                self.source_name, self.listen
            ));
        }
        let mut connections = JoinSet::new();
        let mut shutdown = ctx.shutdown.clone();
        let how = loop {
            let (socket, peer) = tokio::select! {
                how = Retire::wait(&mut retire, &mut shutdown) => break how,
                Some(_) = connections.join_next(), if !connections.is_empty() => continue,
                accepted = incoming.recv() => match accepted {
                    Some(accepted) => accepted,
                    None => break Retire::Close,
                },
            };
            self.admit(socket, peer, &ctx, &mut connections);
        };
        stopping.store(true, Ordering::SeqCst);
        if how == Retire::Close {
            // Wake the acceptor from accept() at once.
            // SAFETY: the listener's descriptor stays open while `listener` lives; shutting a
            // listening socket down only makes a blocked accept() return.
            unsafe {
                libc::shutdown(listener.as_raw_fd(), libc::SHUT_RDWR);
            }
        }
        let _ = tokio::task::spawn_blocking(move || acceptor.join()).await;
        // What the acceptor took while stopping is served here, not dropped.
        while let Ok((socket, peer)) = incoming.try_recv() {
            self.admit(socket, peer, &ctx, &mut connections);
        }
        while connections.join_next().await.is_some() {}
        if let (Listen::Unix(unix), Retire::Close) = (&self.listen, how) {
            unix.remove();
        }
    }

    /// Starts serving an accepted connection, unless `max-connections()` are open or half of
    /// them are in their handshake.
    fn admit(
        self: &Arc<Self>,
        socket: socket2::Socket,
        peer: Option<SocketAddr>,
        ctx: &Context,
        connections: &mut JoinSet<()>,
    ) {
        let active = &self.connections;
        {
            if active.load(Ordering::Relaxed) as usize >= self.max_connections {
                self.reject(peer, "max-connections({}) reached");
                return;
            }
            let pending = if self.tls.is_some() || self.proxied != Proxied::No {
                let Some(pending) = Unauthenticated::take(self) else {
                    self.reject(
                        peer,
                        "half of max-connections({}) are in their TLS handshake or PROXY header",
                    );
                    return;
                };
                Some(pending)
            } else {
                None
            };
            let charge = if self.tls.is_some() {
                TLS_CONNECTION_MEMORY
            } else {
                CONNECTION_MEMORY
            };
            let Some(held) = crate::memory::budget().admit(charge) else {
                self.reject(
                    peer,
                    "open connections would hold more than half of memory-limit()",
                );
                return;
            };
            let stream = match Stream::from_accepted(socket, &self.listen) {
                Ok(stream) => stream,
                Err(e) => {
                    log::error(format!(
                        "taking a connection on {} failed: {e}",
                        self.listen
                    ));
                    return;
                }
            };
            active.fetch_add(1, Ordering::Relaxed);
            let me = self.clone();
            let ctx = ctx.clone();
            let active = active.clone();
            connections.spawn(async move {
                me.connection(stream, peer, pending, &ctx).await;
                active.fetch_sub(1, Ordering::Relaxed);
                drop(held);
            });
        }
    }

    /// Refuses an accepted connection (closed when its socket drops): counted, and said with
    /// `why`, whose `{}` is `max-connections()`.
    fn reject(&self, peer: Option<SocketAddr>, why: &str) {
        self.rejected.fetch_add(1, Ordering::Relaxed);
        log::warning(format!(
            "refusing connection from {}: {} on source {}",
            peer.map_or("a local client".to_string(), |p| p.to_string()),
            why.replace("{}", &self.max_connections.to_string()),
            self.source_name
        ));
    }

    fn accept_loop(
        &self,
        listener: &socket2::Socket,
        to_runtime: &mpsc::UnboundedSender<(socket2::Socket, Option<SocketAddr>)>,
        stopping: &AtomicBool,
    ) {
        // Accepting is cheap and cannot wait: a connection the full listen queue drops waits
        // a second for its SYN to be sent again. Behind a few dozen busy threads the acceptor
        // got a few percent of a core and the queue (4,096) overflowed in a burst of 10,000
        // connections; at nice -10 it keeps up. Without the privilege this does nothing.
        // SAFETY: setpriority of this thread (gettid) with plain integers.
        unsafe {
            libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, -10);
        }
        // A busy listener's accept() never times out: look at `stopping` before each.
        while !stopping.load(Ordering::SeqCst) {
            // Non-blocking from the start: the runtime needs it so, and setting it afterwards
            // cost two more system calls a connection.
            match listener.accept4(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC) {
                Ok((socket, peer)) => {
                    if to_runtime.send((socket, peer.as_socket())).is_err() {
                        return;
                    }
                }
                Err(_) if stopping.load(Ordering::SeqCst) => return,
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::Interrupted | std::io::ErrorKind::WouldBlock
                    ) => {}
                Err(e) => {
                    // Out of descriptors, most likely: wait for connections to close.
                    log::error(format!(
                        "accepting a connection on {} failed: {e}",
                        self.listen
                    ));
                    std::thread::sleep(std::time::Duration::from_millis(100));
                }
            }
        }
    }

    /// Serves one connection. `pending` holds its place among the connections still in their
    /// handshake or header; it is let go once they are done.
    async fn connection(
        &self,
        stream: Stream,
        peer: Option<SocketAddr>,
        pending: Option<Unauthenticated>,
        ctx: &Context,
    ) {
        let mut s = match stream {
            Stream::Unix(s) => {
                let local = Endpoints::default();
                let pairs = match s.peer_cred() {
                    Ok(c) if self.pass_credentials => {
                        super::datagram::credential_pairs(c.pid().unwrap_or(0), c.uid(), c.gid())
                    }
                    _ => Vec::new(),
                };
                return self.read(s, peer, local, pairs, ctx).await;
            }
            Stream::Tcp(s) => s,
        };
        let mut peer = peer;
        // A listener on one address takes every connection on it: only a wildcard one needs
        // to ask the kernel which address a connection came to.
        let dest = match &self.listen {
            Listen::Tcp(addr) if !addr.ip().is_unspecified() && addr.port() != 0 => Some(*addr),
            _ => s.local_addr().ok(),
        };
        let mut endpoints = Endpoints {
            dest,
            proxy: None,
            proto: 6,
        };
        if self.proxied != Proxied::No && !self.trusts(peer) {
            return self.refuse(peer, "the peer is not in trusted-proxies()", false);
        }
        let mut leftover = Vec::new();
        if self.proxied == Proxied::First {
            match self.proxy_header(&mut s, &mut peer, &mut endpoints).await {
                Ok(rest) => leftover = rest,
                Err(e) => return self.refuse(peer, &e, false),
            }
        }
        if self.tls.is_none() {
            drop(pending);
            // What came after the PROXY header in its read is read first.
            let s = Prefixed::new(leftover, s);
            return self.read(s, peer, endpoints, Vec::new(), ctx).await;
        };
        // A TLS connection's state (rustls's, the handshake's) is kilobytes: boxed, so that
        // every plain connection's task does not carry room for it (10,000 idle connections
        // held 70 MB more).
        let tls = self.tls_connection(s, leftover, peer, endpoints, pending, ctx);
        Box::pin(tls).await
    }

    /// Whether `peer` may send a PROXY header: `trusted-proxies()` names it, or is empty.
    fn trusts(&self, peer: Option<SocketAddr>) -> bool {
        self.trusted_proxies.is_empty()
            || peer.is_some_and(|p| self.trusted_proxies.iter().any(|n| n.contains(p.ip())))
    }

    /// [`proxy_header`] within `handshake-timeout()`.
    async fn proxy_header<R: AsyncRead + Unpin>(
        &self,
        s: &mut R,
        peer: &mut Option<SocketAddr>,
        endpoints: &mut Endpoints,
    ) -> Result<Vec<u8>, String> {
        tokio::time::timeout(self.handshake_timeout, proxy_header(s, peer, endpoints))
            .await
            .unwrap_or_else(|_| {
                Err(format!(
                    "no PROXY header within {}s (handshake-timeout())",
                    self.handshake_timeout.as_secs()
                ))
            })
    }

    /// The TLS handshake of a connection (after a PROXY header before it, whose unread rest
    /// is `leftover`), then its messages.
    async fn tls_connection(
        &self,
        s: tokio::net::TcpStream,
        leftover: Vec<u8>,
        mut peer: Option<SocketAddr>,
        mut endpoints: Endpoints,
        pending: Option<Unauthenticated>,
        ctx: &Context,
    ) {
        let config = self.tls.as_ref().expect("a TLS source").current();
        let acceptor = tokio_rustls::TlsAcceptor::from(config);
        let buffered = SocketBuffer::new(Prefixed::new(leftover, s));
        let handshake = acceptor.accept(buffered);
        let mut tls = match tokio::time::timeout(self.handshake_timeout, handshake).await {
            Ok(Ok(tls)) => tls,
            // Closed before or during the handshake: a port probe (a load balancer's health
            // check, a monitoring script), not a peer that failed to authenticate.
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                return self.refuse(peer, "", true)
            }
            Ok(Err(e)) => return self.refuse(peer, &crate::tls::explain_io(&e), true),
            Err(_) => {
                let e = format!(
                    "no handshake within {}s (handshake-timeout())",
                    self.handshake_timeout.as_secs()
                );
                return self.refuse(peer, &e, true);
            }
        };
        let pairs = tls
            .get_ref()
            .1
            .peer_certificates()
            .and_then(|chain| chain.first())
            .map(|cert| peer_pairs(cert, self.tls_fingerprints))
            .unwrap_or_default();
        let mut leftover = Vec::new();
        if self.proxied == Proxied::InsideTls {
            match self.proxy_header(&mut tls, &mut peer, &mut endpoints).await {
                Ok(rest) => leftover = rest,
                Err(e) => return self.refuse(peer, &e, false),
            }
        }
        drop(pending);
        let s = Prefixed::new(leftover, Filling(tls));
        self.read(s, peer, endpoints, pairs, ctx).await
    }

    /// Closes a connection that failed its PROXY header or TLS handshake: said once, with
    /// the peer's address and the reason, and counted. A connection closed before it sent
    /// anything (`why` empty) is a port probe: only said when debugging.
    fn refuse(&self, peer: Option<SocketAddr>, why: &str, tls: bool) {
        if why.is_empty() {
            log::emit_debug(|| {
                format!(
                    "connection from {} closed before it sent anything",
                    peer.map_or("a local client".into(), |p| p.to_string())
                )
            });
            return;
        }
        let counter = if tls {
            &self.tls_failures
        } else {
            &self.reader.counted.framing_errors
        };
        counter.fetch_add(1, Ordering::Relaxed);
        let what = if tls {
            "TLS handshake failed"
        } else {
            "bad PROXY header"
        };
        log::error(format!(
            "closing connection from {} on source {}: {what}: {why}",
            peer.map_or("a local client".into(), |p| p.to_string()),
            self.source_name
        ));
    }

    /// Reads a connection's messages until it closes.
    async fn read<S: AsyncRead + AsyncWrite + Unpin>(
        &self,
        input: S,
        peer: Option<SocketAddr>,
        endpoints: Endpoints,
        pairs: Vec<(NameId, Text)>,
        ctx: &Context,
    ) {
        let host_from = dns::name_of(peer.map(|p| p.ip()), &self.names, dns::CONNECTION_WAIT).await;
        let origin = Arc::new(Origin {
            source_name: self.source_name.clone(),
            source_id: self.source_id,
            peer,
            host_from,
            local: peer.is_none(),
            pairs,
            endpoints,
        });
        let label = peer.map_or_else(|| self.listen.to_string(), |p| p.to_string());
        log::emit_debug(|| {
            format!(
                "connection accepted from {label} on source {}",
                self.source_name
            )
        });
        let window = self.reader.window();
        if self.relp {
            // Boxed as the TLS state is: plain connections' tasks stay small.
            Box::pin(super::relp::serve(
                input,
                origin,
                &self.reader,
                &window,
                ctx,
                &label,
            ))
            .await;
        } else {
            read_stream(input, origin, &self.reader, &window, ctx, &label, None).await;
        }
        log::emit_debug(|| format!("connection from {label} closed"));
    }
}

/// Descriptors besides connections that a process may hold open: listeners, files, sockets
/// of destinations.
const OTHER_DESCRIPTORS: usize = 256;

/// Grows this process's descriptor table now to hold `connections` more, within the limit on
/// open files; `open` is a descriptor of ours to copy. The kernel grows the table by doubling
/// it when an `accept` needs a descriptor past its end, and in a process with several threads
/// each doubling waits for an RCU grace period: the acceptor stalled 9–15 ms at descriptors
/// 256 and 512 (`strace -T`), and in a burst of 10,000 connections the listen queue overflowed
/// behind those stalls (a dropped connection waits a second to try again). Grown once at
/// startup, the table stays.
fn reserve_descriptors(open: std::os::fd::RawFd, connections: usize) {
    let Some(limit) = open_files_limit() else {
        return;
    };
    let highest = (connections.saturating_add(OTHER_DESCRIPTORS) as u64)
        .min(limit.saturating_sub(1))
        .min(i32::MAX as u64) as libc::c_int;
    // Duplicating a descriptor to the highest number grows the table to hold it; closing the
    // copy leaves the table as large. A number in use is left alone.
    // SAFETY: fcntl F_GETFD only asks whether `highest` is open; dup2 and close act on a
    // number that was free.
    unsafe {
        if highest > OTHER_DESCRIPTORS as libc::c_int
            && libc::fcntl(highest, libc::F_GETFD) == -1
            && libc::dup2(open, highest) == highest
        {
            libc::close(highest);
        }
    }
}

/// Descriptors sluice needs beside its connections: files (a writer keeps up to 512 open),
/// disk buffers, listeners, the control socket.
const FILES_NEEDED: u64 = 4096;

/// The fewest descriptors the sources' sockets must leave free (for files, destinations, the
/// control socket) for a configuration to start at all.
const FEWEST_FREE: u64 = 64;

/// Raises the soft limit on open files to what the sources hold (`held`: sockets and their
/// copies), the connections they may take (every stream source's `max-connections()`
/// together) and [`FILES_NEEDED`] take, within the hard limit (at the common soft limit of
/// 1,024, a thousand connections left nothing for files). Connections that may never come
/// are warned of; sockets the sources hold for certain are an error when they leave fewer
/// than [`FEWEST_FREE`]: 10,000 `unix-dgram()` sources hit the limit unsaid, files failed with
/// EMFILE and the control socket could take no reload.
pub fn raise_open_files_limit(held: usize, connections: usize) -> Result<(), String> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit fills the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Ok(());
    }
    let need = (held as u64)
        .saturating_add(connections as u64)
        .saturating_add(FILES_NEEDED);
    let raised = need.min(limit.rlim_max).max(limit.rlim_cur);
    if raised > limit.rlim_cur {
        limit.rlim_cur = raised;
        // SAFETY: setrlimit with a soft limit within the hard one.
        unsafe {
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
    let certain = (held as u64).saturating_add(FEWEST_FREE);
    if certain > raised {
        return Err(format!(
            "the sources hold {held} descriptors (each datagram socket 3, each listener 2), more than the open-file limit of {raised} leaves room for with {FEWEST_FREE} for files and destinations: raise it (ulimit -n, LimitNOFILE=) or use fewer sources"
        ));
    }
    if raised < need {
        log::warning(format!(
            "the open-file limit is {raised}, below the {need} that the sources' sockets, max-connections() and files need: raise it (ulimit -n, LimitNOFILE=) or lower max-connections()"
        ));
    }
    Ok(())
}

/// The soft limit on open files (`RLIMIT_NOFILE`).
fn open_files_limit() -> Option<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit fills the struct it is given.
    (unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0).then_some(limit.rlim_cur)
}

/// A connection's place among those still in their TLS handshake or PROXY header; let go
/// when dropped.
struct Unauthenticated(Arc<std::sync::atomic::AtomicUsize>);

impl Unauthenticated {
    /// A place, unless half of the source's `max-connections()` are taken.
    fn take(source: &StreamSource) -> Option<Unauthenticated> {
        let most = (source.max_connections / 2).max(1);
        let count = &source.unauthenticated;
        count
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n < most).then_some(n + 1)
            })
            .ok()?;
        Some(Unauthenticated(count.clone()))
    }
}

impl Drop for Unauthenticated {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// What every message of a TLS connection carries of its peer's certificate, as syslog-ng
/// names it.
/// `.tls.x509_fp` too when `trusted-keys()` chose the peer (its fingerprint is one of them).
fn peer_pairs(
    cert: &rustls::pki_types::CertificateDer<'_>,
    fingerprint: bool,
) -> Vec<(NameId, Text)> {
    let Some(info) = crate::tls::PeerInfo::of(cert) else {
        return Vec::new();
    };
    let shared = |s: &str| Text::Shared(Arc::from(s.as_bytes()));
    let mut pairs = vec![
        (name_id(".tls.x509_cn"), shared(&info.cn)),
        (name_id(".tls.x509_o"), shared(&info.o)),
        (name_id(".tls.x509_ou"), shared(&info.ou)),
    ];
    if fingerprint {
        let fp = crate::tls::fingerprint(cert);
        pairs.push((name_id(".tls.x509_fp"), shared(&fp)));
    }
    pairs
}

/// Reads a connection's PROXY protocol header and takes what it announces: its client becomes
/// the peer (`$SOURCEIP`), the proxy that sent it `$PEERIP`, its destination `$DESTIP`.
/// Returns the bytes read after the header; the error is empty when the connection closed
/// before sending a byte.
async fn proxy_header<R: AsyncRead + Unpin>(
    s: &mut R,
    peer: &mut Option<SocketAddr>,
    endpoints: &mut Endpoints,
) -> Result<Vec<u8>, String> {
    let mut buf = Vec::with_capacity(256);
    loop {
        let mut chunk = [0u8; 512];
        let n = s.read(&mut chunk).await.map_err(|e| e.to_string())?;
        if n == 0 && buf.is_empty() {
            return Err(String::new());
        }
        if n == 0 {
            return Err("the connection closed before its PROXY header ended".into());
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some((header, used)) = proxy::parse(&buf).map_err(|e| e.to_string())? {
            if let Some(source) = header.source {
                endpoints.proxy = *peer;
                *peer = Some(source);
            }
            if let Some(dest) = header.destination {
                endpoints.dest = Some(dest);
            }
            return Ok(buf.split_off(used));
        }
    }
}

/// A TLS stream read as far as it goes without waiting: a TLS stream hands out what one
/// record read decrypted (16 KiB at most), and a reader that took that alone would cut its
/// input into small reads, with the cost of a dispatch each.
struct Filling<S>(S);

impl<S: AsyncRead + Unpin> AsyncRead for Filling<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let start = buf.filled().len();
        loop {
            let before = buf.filled().len();
            match Pin::new(&mut self.0).poll_read(cx, buf) {
                Poll::Ready(Ok(())) if buf.filled().len() > before && buf.remaining() > 0 => {}
                Poll::Ready(result) if buf.filled().len() == start => return Poll::Ready(result),
                // Data is in: an error (or the end) shows again on the next read.
                Poll::Ready(_) => return Poll::Ready(Ok(())),
                Poll::Pending if buf.filled().len() > start => return Poll::Ready(Ok(())),
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

/// Writes to a reading wrapper go straight to the stream it wraps (`field`).
macro_rules! writes_go_through {
    ($wrapper:ident, $field:tt) => {
        impl<S: AsyncWrite + Unpin> AsyncWrite for $wrapper<S> {
            fn poll_write(
                mut self: Pin<&mut Self>,
                cx: &mut TaskContext<'_>,
                buf: &[u8],
            ) -> Poll<std::io::Result<usize>> {
                Pin::new(&mut self.$field).poll_write(cx, buf)
            }

            fn poll_flush(
                mut self: Pin<&mut Self>,
                cx: &mut TaskContext<'_>,
            ) -> Poll<std::io::Result<()>> {
                Pin::new(&mut self.$field).poll_flush(cx)
            }

            fn poll_shutdown(
                mut self: Pin<&mut Self>,
                cx: &mut TaskContext<'_>,
            ) -> Poll<std::io::Result<()>> {
                Pin::new(&mut self.$field).poll_shutdown(cx)
            }
        }
    };
}

writes_go_through!(Filling, 0);

/// A connection whose first bytes were already read (with a PROXY header): they are read
/// again first, here by the TLS handshake. Writes go to the connection.
struct Prefixed<S> {
    first: std::io::Cursor<Vec<u8>>,
    inner: S,
}

impl<S> Prefixed<S> {
    fn new(first: Vec<u8>, inner: S) -> Prefixed<S> {
        Prefixed {
            first: std::io::Cursor::new(first),
            inner,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Prefixed<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let at = self.first.position() as usize;
        let first = self.first.get_ref();
        if at < first.len() {
            let n = (first.len() - at).min(buf.remaining());
            buf.put_slice(&first[at..at + n]);
            self.first.set_position((at + n) as u64);
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

writes_go_through!(Prefixed, inner);

/// A TLS connection's socket, read through a buffer: rustls reads 4 KiB at a time, and from
/// a buffer that is a copy instead of a system call. The buffer is there only while data is:
/// taken when rustls wants to read, given back once it is read out and the socket has no
/// more, so an idle connection holds none of it. While taken it is charged to the memory
/// budget, and while the budget is tight a small one (a TLS record's size) is taken instead.
struct SocketBuffer<S> {
    inner: S,
    buf: Vec<u8>,
    /// How much of `buf` was handed out.
    at: usize,
    charge: Charge,
}

/// The buffer's size, and while the memory budget is tight.
const TLS_READ: usize = 128 << 10;
const TLS_READ_TIGHT: usize = 16 << 10;

impl<S> SocketBuffer<S> {
    fn new(inner: S) -> SocketBuffer<S> {
        SocketBuffer {
            inner,
            buf: Vec::new(),
            at: 0,
            charge: Charge::default(),
        }
    }

    fn give_back(&mut self) {
        self.buf = Vec::new();
        self.at = 0;
        self.charge = Charge::default();
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for SocketBuffer<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        if this.at == this.buf.len() {
            if this.buf.capacity() == 0 {
                let size = if crate::memory::budget().tight() {
                    TLS_READ_TIGHT
                } else {
                    TLS_READ
                };
                this.buf.reserve_exact(size);
                this.charge.add(this.buf.capacity() as u64);
            }
            this.buf.clear();
            this.at = 0;
            let mut read = ReadBuf::uninit(this.buf.spare_capacity_mut());
            match Pin::new(&mut this.inner).poll_read(cx, &mut read) {
                Poll::Ready(Ok(())) if !read.filled().is_empty() => {
                    let n = read.filled().len();
                    // SAFETY: the read initialized the first `n` bytes of the spare capacity
                    // (what `ReadBuf` calls filled), and `n` is within the capacity.
                    unsafe { this.buf.set_len(n) };
                }
                // The end, an error, or nothing there now: nothing is held meanwhile.
                other => {
                    this.give_back();
                    return other;
                }
            }
        }
        let n = (this.buf.len() - this.at).min(out.remaining());
        out.put_slice(&this.buf[this.at..this.at + n]);
        this.at += n;
        Poll::Ready(Ok(()))
    }
}

writes_go_through!(SocketBuffer, inner);

enum Stream {
    Tcp(tokio::net::TcpStream),
    Unix(tokio::net::UnixStream),
}

impl Stream {
    /// A connection the acceptor took (non-blocking, with the listener's socket options),
    /// handed to the runtime.
    fn from_accepted(socket: socket2::Socket, listen: &Listen) -> std::io::Result<Stream> {
        Ok(match listen {
            Listen::Tcp(_) => Stream::Tcp(tokio::net::TcpStream::from_std(socket.into())?),
            Listen::Unix(_) => Stream::Unix(tokio::net::UnixStream::from_std(socket.into())?),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The descriptor table's size, as the kernel reports it.
    fn table_size() -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").expect("/proc is mounted");
        let line = status
            .lines()
            .find_map(|l| l.strip_prefix("FDSize:"))
            .expect("FDSize is reported");
        line.trim().parse().expect("a number")
    }

    #[test]
    fn the_descriptor_table_is_grown_once_for_the_connections_a_source_allows() {
        let limit = open_files_limit().expect("the limit is known");
        let wanted = (3000 + OTHER_DESCRIPTORS as u64).min(limit - 1);
        let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)
            .expect("a socket");
        reserve_descriptors(socket.as_raw_fd(), 3000);
        assert!(table_size() > wanted, "{} <= {wanted}", table_size());
        // The copy that grew it is closed again.
        // SAFETY: F_GETFD only asks whether the number is open.
        assert_eq!(unsafe { libc::fcntl(wanted as i32, libc::F_GETFD) }, -1);
    }
}
