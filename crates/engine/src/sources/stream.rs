//! Stream listeners: `tcp()`, `tcp6()`, `network(transport(tcp))`, `syslog(transport(tcp))`
//! and `unix-stream()`. Each accepted connection gets its own task, window and origin;
//! connections past `max-connections()` are refused, logged and counted.

use super::{read_stream, Context, ReaderSpec, UnixSocket};
use crate::dns::{self, NameOptions};
use crate::internal as log;
use crate::window::Window;
use sluice_model::Origin;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::net::{TcpListener, UnixListener};
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
}

/// A bound listener, ready to serve. Binding happens before sluice reports it started, so
/// a port in use is a startup error.
pub enum Bound {
    Tcp(TcpListener),
    Unix(UnixListener),
}

impl StreamSource {
    pub fn bind(&self) -> std::io::Result<Bound> {
        match &self.listen {
            Listen::Tcp(addr) => {
                let socket = if addr.is_ipv4() {
                    tokio::net::TcpSocket::new_v4()?
                } else {
                    tokio::net::TcpSocket::new_v6()?
                };
                socket.set_reuseaddr(true)?;
                if self.so_reuseport {
                    socket.set_reuseport(true)?;
                }
                if let Some(size) = self.so_rcvbuf {
                    socket.set_recv_buffer_size(size as u32)?;
                }
                socket.bind(*addr)?;
                Ok(Bound::Tcp(socket.listen(1024)?))
            }
            Listen::Unix(unix) => {
                unix.prepare()?;
                let listener = UnixListener::bind(&unix.path)?;
                unix.apply_permissions()?;
                Ok(Bound::Unix(listener))
            }
        }
    }

    pub async fn serve(self: Arc<Self>, bound: Bound, ctx: Context) {
        let active = Arc::new(AtomicUsize::new(0));
        let mut connections = JoinSet::new();
        let mut shutdown = ctx.shutdown.clone();
        loop {
            let accepted = tokio::select! {
                _ = shutdown.wait_for(|stop| *stop) => break,
                Some(_) = connections.join_next(), if !connections.is_empty() => continue,
                accepted = accept(&bound) => accepted,
            };
            let (stream, peer) = match accepted {
                Ok(ok) => ok,
                Err(e) => {
                    log::error(format!(
                        "accepting a connection on {:?} failed: {e}",
                        self.listen
                    ));
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    continue;
                }
            };
            if active.load(Ordering::Relaxed) >= self.max_connections {
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
            active.fetch_add(1, Ordering::Relaxed);
            let me = self.clone();
            let ctx = ctx.clone();
            let active = active.clone();
            connections.spawn(async move {
                me.connection(stream, peer, &ctx).await;
                active.fetch_sub(1, Ordering::Relaxed);
            });
        }
        while connections.join_next().await.is_some() {}
        if let Listen::Unix(unix) = &self.listen {
            unix.remove();
        }
    }

    async fn connection(&self, stream: Stream, peer: Option<SocketAddr>, ctx: &Context) {
        let names = self.names.clone();
        let host_from =
            tokio::task::spawn_blocking(move || dns::host_from(peer.map(|p| p.ip()), &names))
                .await
                .expect("name lookups do not panic");
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
                read_stream(s, origin, &self.reader, &window, ctx, &label).await
            }
            Stream::Unix(s) => read_stream(s, origin, &self.reader, &window, ctx, &label).await,
        }
        log::emit(log::DEBUG, format!("connection from {label} closed"));
    }
}

enum Stream {
    Tcp(tokio::net::TcpStream),
    Unix(tokio::net::UnixStream),
}

async fn accept(bound: &Bound) -> std::io::Result<(Stream, Option<SocketAddr>)> {
    match bound {
        Bound::Tcp(l) => {
            let (s, peer) = l.accept().await?;
            let _ = s.set_nodelay(true);
            Ok((Stream::Tcp(s), Some(peer)))
        }
        Bound::Unix(l) => {
            let (s, _) = l.accept().await?;
            Ok((Stream::Unix(s), None))
        }
    }
}
