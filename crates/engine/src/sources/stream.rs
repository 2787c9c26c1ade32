//! Stream listeners: `tcp()`, `tcp6()`, `network(transport(tcp))`, `syslog(transport(tcp))`
//! and `unix-stream()`. Each accepted connection gets its own task, window and origin;
//! connections past `max-connections()` are refused, logged and counted.

use super::{read_stream, Context, ReaderSpec, UnixSocket};
use crate::dns::{self, NameOptions};
use crate::internal as log;
use crate::window::Window;
use sluice_model::Origin;
use sluice_protocol::proxy::{self, ProxyHeader};
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tokio::io::AsyncReadExt;
use tokio::sync::mpsc;
use tokio::task::JoinSet;

#[derive(Clone, Debug)]
pub enum Listen {
    Tcp(SocketAddr),
    Unix(UnixSocket),
}

#[derive(Clone, Debug)]
pub struct StreamSource {
    pub listen: Listen,
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
    /// `transport(proxied-tcp)`: every connection starts with a PROXY protocol header; the
    /// client it announces is the messages' `$SOURCEIP`.
    pub proxied: bool,
}

/// A bound listener, ready to serve. Binding happens before sluice reports it started, so
/// a port in use is a startup error.
pub struct Bound(socket2::Socket);

impl StreamSource {
    pub fn bind(&self) -> std::io::Result<Bound> {
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
                socket.bind(&SockAddr::from(*addr))?;
                socket
            }
            Listen::Unix(unix) => {
                unix.prepare()?;
                let socket = Socket::new(Domain::UNIX, Type::STREAM, None)?;
                socket.bind(&SockAddr::unix(&unix.path)?)?;
                unix.apply_permissions()?;
                socket
            }
        };
        socket.listen(self.listen_backlog as i32)?;
        Ok(Bound(socket))
    }

    /// Accepts connections until shutdown, then waits for every connection to finish.
    ///
    /// A thread of its own accepts, so that a burst of thousands of connections is taken
    /// from the kernel's queue at once instead of waiting behind the tasks that read; the
    /// connections then go to the runtime.
    pub async fn serve(self: Arc<Self>, bound: Bound, ctx: Context) {
        let listener = Arc::new(bound.0);
        let (tx, mut incoming) = mpsc::unbounded_channel();
        let stopping = Arc::new(AtomicBool::new(false));
        let acceptor = {
            let (listener, stopping, me) = (listener.clone(), stopping.clone(), self.clone());
            std::thread::Builder::new()
                .name("acceptor".into())
                .spawn(move || me.accept_loop(&listener, &tx, &stopping))
                .expect("spawning an acceptor thread")
        };
        let active = self.connections.clone();
        let mut connections = JoinSet::new();
        let mut shutdown = ctx.shutdown.clone();
        loop {
            let (socket, peer) = tokio::select! {
                _ = shutdown.wait_for(|stop| *stop) => break,
                Some(_) = connections.join_next(), if !connections.is_empty() => continue,
                accepted = incoming.recv() => match accepted {
                    Some(accepted) => accepted,
                    None => break,
                },
            };
            if active.load(Ordering::Relaxed) as usize >= self.max_connections {
                ctx.counters
                    .refused_connections
                    .fetch_add(1, Ordering::Relaxed);
                log::warning(format!(
                    "refusing connection from {}: max-connections({}) reached on source {}",
                    peer.map_or("a local client".to_string(), |p| p.to_string()),
                    self.max_connections,
                    self.source_name
                ));
                continue;
            }
            let stream = match Stream::from_accepted(socket, &self.listen) {
                Ok(stream) => stream,
                Err(e) => {
                    log::error(format!(
                        "taking a connection on {:?} failed: {e}",
                        self.listen
                    ));
                    continue;
                }
            };
            active.fetch_add(1, Ordering::Relaxed);
            let me = self.clone();
            let ctx = ctx.clone();
            let active = active.clone();
            connections.spawn(async move {
                me.connection(stream, peer, &ctx).await;
                active.fetch_sub(1, Ordering::Relaxed);
            });
        }
        // Wake the acceptor from accept() and let it go.
        stopping.store(true, Ordering::SeqCst);
        // SAFETY: the listener's descriptor stays open while `listener` lives; shutting a
        // listening socket down only makes a blocked accept() return.
        unsafe {
            libc::shutdown(listener.as_raw_fd(), libc::SHUT_RDWR);
        }
        let _ = tokio::task::spawn_blocking(move || acceptor.join()).await;
        while connections.join_next().await.is_some() {}
        if let Listen::Unix(unix) = &self.listen {
            unix.remove();
        }
    }

    fn accept_loop(
        &self,
        listener: &socket2::Socket,
        to_runtime: &mpsc::UnboundedSender<(socket2::Socket, Option<SocketAddr>)>,
        stopping: &AtomicBool,
    ) {
        loop {
            match listener.accept() {
                Ok((socket, peer)) => {
                    if to_runtime.send((socket, peer.as_socket())).is_err() {
                        return;
                    }
                }
                Err(_) if stopping.load(Ordering::SeqCst) => return,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    // Out of descriptors, most likely: wait for connections to close.
                    log::error(format!(
                        "accepting a connection on {:?} failed: {e}",
                        self.listen
                    ));
                    std::thread::sleep(std::time::Duration::from_millis(100));
                }
            }
        }
    }

    async fn connection(&self, stream: Stream, peer: Option<SocketAddr>, ctx: &Context) {
        let (stream, leftover, peer) = match (stream, self.proxied) {
            (Stream::Tcp(mut s), true) => match read_proxy_header(&mut s).await {
                Ok((header, leftover)) => (Stream::Tcp(s), leftover, header.source.or(peer)),
                Err(e) => {
                    ctx.counters.framing_errors.fetch_add(1, Ordering::Relaxed);
                    log::error(format!(
                        "closing connection from {}: {e}",
                        peer.map_or("a local client".into(), |p| p.to_string())
                    ));
                    return;
                }
            },
            (stream, _) => (stream, Vec::new(), peer),
        };
        let host_from = dns::name_of(peer.map(|p| p.ip()), &self.names).await;
        let origin = Arc::new(Origin {
            source_name: self.source_name.clone(),
            source_id: self.source_id,
            peer,
            host_from,
            local: peer.is_none(),
        });
        let label = peer.map_or_else(|| format!("{:?}", self.listen), |p| p.to_string());
        log::emit(
            log::DEBUG,
            format!(
                "connection accepted from {label} on source {}",
                self.source_name
            ),
        );
        let window = Window::new(self.reader.window);
        match stream {
            Stream::Tcp(s) => {
                if self.keep_alive {
                    let _ = socket2::SockRef::from(&s).set_keepalive(true);
                }
                // What came after the PROXY header in its read is read first.
                let s = std::io::Cursor::new(leftover).chain(s);
                read_stream(s, origin, &self.reader, &window, ctx, &label).await
            }
            Stream::Unix(s) => read_stream(s, origin, &self.reader, &window, ctx, &label).await,
        }
        log::emit(log::DEBUG, format!("connection from {label} closed"));
    }
}

/// Reads a connection's PROXY protocol header; returns it and the bytes read after it.
async fn read_proxy_header(
    s: &mut tokio::net::TcpStream,
) -> Result<(ProxyHeader, Vec<u8>), String> {
    let mut buf = Vec::with_capacity(256);
    loop {
        let mut chunk = [0u8; 512];
        let n = s.read(&mut chunk).await.map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("the connection closed before its PROXY header ended".into());
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some((header, used)) = proxy::parse(&buf).map_err(|e| e.to_string())? {
            return Ok((header, buf.split_off(used)));
        }
    }
}

enum Stream {
    Tcp(tokio::net::TcpStream),
    Unix(tokio::net::UnixStream),
}

impl Stream {
    /// A connection the acceptor took, handed to the runtime.
    fn from_accepted(socket: socket2::Socket, listen: &Listen) -> std::io::Result<Stream> {
        socket.set_nonblocking(true)?;
        Ok(match listen {
            Listen::Tcp(_) => {
                let _ = socket.set_tcp_nodelay(true);
                Stream::Tcp(tokio::net::TcpStream::from_std(socket.into())?)
            }
            Listen::Unix(_) => Stream::Unix(tokio::net::UnixStream::from_std(socket.into())?),
        })
    }
}
