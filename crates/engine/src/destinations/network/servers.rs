//! Forwarding destinations: `network()`, `syslog()`, `tcp()`, `tcp6()`, `udp()`, `udp6()`,
//! `unix-stream()`, `unix-dgram()` and `relp()`.
//!
//! Readers format their share of a batch (syslog-ng's network format, RFC5424 or a template;
//! octet-counted for `syslog()` over a stream) and queue it in the destination's [`Queue`] or
//! disk buffer. A [`Sender`](crate::destinations::sender) thread takes it from there; this file says where
//! it sends ([`Servers`] for [`NetworkOptions`]: addresses or socket paths, the connection's
//! options, TLS) and what it speaks (a [`Wire`]: octets on a stream, a datagram a message, or
//! RELP), and hands the queue and the connection over to a reload's destination.
//!
//! With `transport(tls)` (or a `tls()` block in `tcp()`) the connection is TLS: the handshake
//! is done when it connects, and rustls is handed a chunk of what is queued at a time
//! ([`crate::destinations::link`]).
//!
//! Plain TCP cannot say what the peer received: what sat in the kernel's buffers when a
//! connection died is lost (RELP and disk buffers are the remedies).

use crate::destinations::delivery::{Delivered, Delivers, Delivery, Lanes};
use crate::destinations::diskq::DiskBufferOptions;
use crate::destinations::format::Formatter;
use crate::destinations::link::TICK;
use crate::destinations::link::{dial, Connected, Datagrams, Dial, Link, Octets, OnLink};
use crate::destinations::sender::{Batching, Failback, Pacing, Servers};
use crate::stats::DestCounters;
use sluice_model::LogMessage;
use socket2::{Domain, SockAddr, Socket, Type};
use std::cell::RefCell;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

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
    pub tls: Option<Arc<crate::tls::Reloading<rustls::ClientConfig>>>,
    /// `relp()`: RELP over the stream ([`super::relp`]).
    pub relp: bool,
}

thread_local! {
    /// One formatted message before its octet count is known.
    static SCRATCH: RefCell<Vec<u8>> = RefCell::default();
}

/// A destination that writes a stream of messages to a server (or a program, [`crate::destinations::program`]):
/// formatted in the readers' threads, queued in one lane, sent by its sender.
pub struct NetworkDestination {
    formatter: Formatter,
    /// RFC6587 octet counting: `LEN ` before each message.
    octet_counting: bool,
    /// Its queue and sender: one lane.
    delivery: Delivery,
}

impl NetworkDestination {
    pub fn new(
        label: String,
        formatter: Formatter,
        opts: NetworkOptions,
        counters: DestCounters,
    ) -> Delivered<NetworkDestination> {
        let pacing = Pacing {
            time_reopen: opts.time_reopen,
            failback: opts.failback.clone(),
            retries: 1,
            batch: Batching::default(),
            log_fifo_size: opts.log_fifo_size,
        };
        let (octet_counting, disk_buffer) = (opts.octet_counting, opts.disk_buffer.clone());
        NetworkDestination::to(
            label,
            formatter,
            Arc::new(opts),
            pacing,
            disk_buffer,
            octet_counting,
            counters,
        )
    }

    /// One that sends to `servers`, paced by `pacing`.
    pub(in crate::destinations) fn to(
        label: String,
        formatter: Formatter,
        servers: Arc<dyn Servers>,
        pacing: Pacing,
        disk_buffer: Option<(DiskBufferOptions, String)>,
        octet_counting: bool,
        counters: DestCounters,
    ) -> Delivered<NetworkDestination> {
        let delivery = Delivery::new(label.into(), servers, pacing, counters, disk_buffer, 1);
        Delivered(NetworkDestination {
            formatter,
            octet_counting,
            delivery,
        })
    }

    fn append(&self, msg: &LogMessage, out: &mut Vec<u8>) {
        if !self.octet_counting {
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

impl Delivers for NetworkDestination {
    fn delivery(&self) -> &Delivery {
        &self.delivery
    }

    fn sized_by(&self) -> &Formatter {
        &self.formatter
    }

    fn numbers_local(&self) -> bool {
        self.formatter.numbers_local()
    }

    fn format(&self, msgs: &[LogMessage], which: &[u32], lanes: &mut Lanes) {
        for &i in which {
            let msg = &msgs[i as usize];
            let batch = lanes.batch_for(msg);
            self.append(msg, &mut batch.data);
            batch.end_message();
        }
    }
}

/// A forwarding destination's servers: TCP or UDP addresses, or unix socket paths.
impl Servers for NetworkOptions {
    /// Opens a connection to server `i`, with its TLS handshake done if it speaks TLS, and
    /// the wire the destination speaks on it (a RELP session opened).
    fn open(&self, i: usize) -> std::io::Result<Connected> {
        let mut link = self.open_tls(i)?;
        Ok(if self.relp {
            link.sock.set_read_timeout(Some(TICK))?;
            let session =
                super::relp::open(&mut link, crate::destinations::link::HANDSHAKE_TIMEOUT)?;
            OnLink::connected(link, session)
        } else if self.transport.is_stream() {
            OnLink::connected(link, Octets)
        } else {
            let udp = self.transport == Transport::Udp;
            OnLink::connected(link, Datagrams { udp })
        })
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
        match &self.tls {
            Some(config) => Link::secure(sock, &config.current(), &self.servers[i]),
            None => Ok(Link { sock, tls: None }),
        }
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
        dial(
            name,
            o.port,
            ty,
            &Dial {
                ip_protocol: o.ip_protocol,
                local: o.local,
                so_sndbuf: o.so_sndbuf,
                so_keepalive: o.so_keepalive,
            },
        )
    }
}

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
