//! Datagram sockets: `udp()`, `udp6()`, `network(transport(udp))`, `syslog(transport(udp))` and
//! `unix-dgram()`. One datagram is one message. A reader drains every datagram the socket has
//! (up to a batch) before dispatching, so a busy socket costs one dispatch per batch. UDP
//! cannot be slowed down: while the window is spent the socket is not read and the kernel
//! drops what overflows its buffer (`so-rcvbuf()` sizes it). Those drops are counted
//! (`socket_receive_dropped`, read from the socket with `SO_MEMINFO` once a second while it
//! receives), and a `so-rcvbuf()` the kernel caps is said at start.

use super::{Context, ReaderSpec, Retire, UnixSocket};
use crate::dns::{self, NameOptions};
use crate::own_log as log;
use bytes::BytesMut;
use sluice_model::values::{name_id, NameId};
use sluice_model::{MessageVec, Origin, Today, UnixTime};
use sluice_protocol::Text;
use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::net::{UdpSocket, UnixDatagram};
use tokio::sync::watch;

#[derive(Clone, Debug)]
pub enum Bind {
    Udp(SocketAddr),
    Unix(UnixSocket),
    /// The kernel's log, `/dev/kmsg`: a read is one record, as a datagram is one message.
    Kmsg(std::path::PathBuf),
}

/// As an operator reads it: `0.0.0.0:514/udp`, `/dev/log`.
impl std::fmt::Display for Bind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Bind::Udp(addr) => write!(f, "{addr}/udp"),
            Bind::Unix(unix) => write!(f, "{}", unix.path.display()),
            Bind::Kmsg(path) => write!(f, "{}", path.display()),
        }
    }
}

#[derive(Clone, Debug)]
pub struct DatagramSource {
    pub bind: Bind,
    pub reader: ReaderSpec,
    pub names: NameOptions,
    pub source_name: Arc<str>,
    pub source_id: u16,
    pub so_rcvbuf: Option<usize>,
    pub so_reuseport: bool,
    /// `pass-unix-credentials()`: a unix socket's senders named by their credentials.
    pub pass_credentials: bool,
    /// What the kernel dropped on the socket because its buffer was full.
    pub kernel_dropped: Arc<AtomicU64>,
}

pub enum Bound {
    Udp(UdpSocket),
    Unix(UnixDatagram),
    Kmsg(tokio::io::unix::AsyncFd<std::fs::File>),
}

/// Who sent a datagram: the peer's address (UDP), or the sending process's credentials on a
/// unix socket (`SO_PASSCRED`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct From {
    peer: Option<SocketAddr>,
    /// pid, uid, gid.
    credentials: Option<(i32, u32, u32)>,
}

/// The most datagrams dispatched as one batch.
const BATCH: usize = 512;
/// The largest datagram: a UDP payload cannot be larger.
const MAX_DATAGRAM: usize = 65536;
/// The most peers whose names a UDP reader remembers.
const PEER_CACHE: usize = 10_000;

impl DatagramSource {
    pub fn bind_socket(&self) -> std::io::Result<Bound> {
        match &self.bind {
            Bind::Udp(addr) => {
                let socket = socket2::Socket::new(
                    socket2::Domain::for_address(*addr),
                    socket2::Type::DGRAM,
                    Some(socket2::Protocol::UDP),
                )?;
                if self.so_reuseport {
                    socket.set_reuse_port(true)?;
                }
                if let Some(size) = self.so_rcvbuf {
                    socket.set_recv_buffer_size(size)?;
                    // Linux doubles what it grants (for its own bookkeeping), up to twice
                    // net.core.rmem_max.
                    let granted = socket.recv_buffer_size()? / 2;
                    if granted < size {
                        log::warning(format!(
                            "source {}: the kernel caps so-rcvbuf({size}) at {granted} bytes on {}: raise net.core.rmem_max (sysctl) to {size} or more, or datagrams are dropped sooner",
                            self.source_name, self.bind
                        ));
                    }
                }
                socket.bind(&(*addr).into())?;
                socket.set_nonblocking(true)?;
                Ok(Bound::Udp(UdpSocket::from_std(socket.into())?))
            }
            Bind::Unix(unix) => {
                unix.make_room()?;
                let socket = UnixDatagram::bind(&unix.path)?;
                if self.pass_credentials {
                    pass_credentials(&socket)?;
                }
                unix.apply_permissions()?;
                Ok(Bound::Unix(socket))
            }
            Bind::Kmsg(path) => {
                use std::os::unix::fs::OpenOptionsExt;
                let file = std::fs::OpenOptions::new()
                    .read(true)
                    .custom_flags(libc::O_NONBLOCK)
                    .open(path)?;
                // SAFETY: the File owns its descriptor, which stays the same while registered.
                Ok(Bound::Kmsg(unsafe {
                    tokio::io::unix::AsyncFd::register(file)?
                }))
            }
        }
    }

    /// Reads datagrams until `retire` (or shutdown). Handed over at a reload, the socket
    /// stays open and what it holds is read by the successor.
    pub async fn serve(
        self: Arc<Self>,
        bound: Bound,
        ctx: Context,
        mut retire: watch::Receiver<Retire>,
    ) {
        let window = self.reader.window();
        let mut shutdown = ctx.shutdown.clone();
        let mut how = Retire::Close;
        let mut origins: HashMap<From, Origin> = HashMap::new();
        let mut buf = BytesMut::new();
        let mut datagrams: Vec<(bytes::Bytes, From)> = Vec::with_capacity(BATCH);
        let mut kept = MessageVec::default();
        let mut generation = u64::MAX;
        let mut source_id = self.source_id;
        // Counted while the reader waits too: a reader whose window is spent does not read.
        let drops = count_kernel_drops(&bound, self.kernel_dropped.clone());
        loop {
            let ready = tokio::select! {
                biased;
                stop = Retire::wait(&mut retire, &mut shutdown) => {
                    how = stop;
                    break;
                }
                ready = readable(&bound) => ready,
            };
            if let Err(e) = ready {
                log::error(format!("reading source {} failed: {e}", self.source_name));
                break;
            }
            while datagrams.len() < BATCH {
                buf.reserve(MAX_DATAGRAM);
                match try_recv(&bound, &mut buf) {
                    Ok((n, from)) => {
                        let mut raw = buf.split_to(n).freeze();
                        if raw.is_empty() && !self.reader.keep_empty {
                            self.reader.counted.empty.fetch_add(1, Ordering::Relaxed);
                            continue;
                        }
                        // A datagram longer than log-msg-size() is cut, as syslog-ng's buffer cuts it.
                        if raw.len() > self.reader.log_msg_size {
                            raw.truncate(self.reader.log_msg_size);
                            self.reader
                                .counted
                                .oversized
                                .fetch_add(1, Ordering::Relaxed);
                        }
                        if let Some(charset) = self.reader.encoding {
                            raw = crate::encoding::message(&raw, charset);
                        }
                        datagrams.push((raw, from));
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    Err(e) => {
                        log::warning(format!(
                            "receiving on source {} failed: {e}",
                            self.source_name
                        ));
                        break;
                    }
                }
            }
            if datagrams.is_empty() {
                continue;
            }
            let dispatcher = ctx.dispatcher.get();
            if dispatcher.generation != generation {
                // A reload: the source's id in the new configuration, or stop.
                let Some(id) = dispatcher.source_id(&self.source_name) else {
                    break;
                };
                (generation, source_id) = (dispatcher.generation, id);
                origins.clear();
            }
            // Every sender of the batch gets its origin first; the messages borrow them.
            if origins.len() + datagrams.len() > PEER_CACHE {
                origins.clear();
            }
            // A busy sender sends runs of datagrams: its origin is looked up once a run.
            let runs = || datagrams.chunk_by(|a, b| a.1 == b.1);
            for run in runs() {
                if let Entry::Vacant(slot) = origins.entry(run[0].1) {
                    slot.insert(self.origin(run[0].1, source_id).await);
                }
            }
            let recvd = UnixTime::now(&self.reader.ingest.local_zone);
            let today = Today::of(recvd);
            let mut msgs = kept.lend();
            for run in runs() {
                let origin = &origins[&run[0].1];
                for (raw, _) in run {
                    self.reader
                        .ingest
                        .push_message(raw, origin, recvd, today, &mut msgs);
                }
            }
            self.reader.counted.add(msgs.len());
            let Some(ack) = ctx
                .credits(&window, msgs.len() as u32, &self.source_name)
                .await
            else {
                break;
            };
            dispatcher.dispatch(&mut msgs, &ack);
            kept.give_back(msgs);
            datagrams.clear();
        }
        if let Some(d) = drops {
            d.abort();
        }
        if let (Bind::Unix(unix), Retire::Close) = (&self.bind, how) {
            unix.remove();
        }
    }

    async fn origin(&self, from: From, source_id: u16) -> Origin {
        let peer = from.peer;
        let host_from = dns::name_of(peer.map(|p| p.ip()), &self.names, dns::DATAGRAM_WAIT).await;
        let pairs = match from.credentials {
            Some((pid, uid, gid)) => credential_pairs(pid, uid, gid),
            None => Vec::new(),
        };
        Origin {
            source_name: self.source_name.clone(),
            source_id,
            peer,
            host_from,
            local: peer.is_none(),
            pairs,
            // The address the socket is bound to (`0.0.0.0` when bound to all of them: the
            // address each datagram was sent to is not asked for yet).
            endpoints: match &self.bind {
                Bind::Udp(addr) => sluice_model::Endpoints {
                    dest: Some(*addr),
                    proxy: None,
                    proto: 17,
                },
                Bind::Unix(_) | Bind::Kmsg(_) => sluice_model::Endpoints::default(),
            },
        }
    }
}

/// Counts into `into`, once a second, the datagrams the kernel dropped on the socket since
/// now (`SO_MEMINFO`'s drops, the count `SO_RXQ_OVFL` reports), on a task of its own; `None`
/// when the socket cannot say.
fn count_kernel_drops(bound: &Bound, into: Arc<AtomicU64>) -> Option<tokio::task::JoinHandle<()>> {
    let fd = bound.as_fd().try_clone_to_owned().ok()?;
    let start = socket_drops(&fd)?;
    Some(tokio::spawn(async move {
        loop {
            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            if let Some(now) = socket_drops(&fd) {
                // Added: a socket taken over at a reload goes on counting where it was.
                let before = into.load(Ordering::Relaxed);
                into.store(
                    before.max(now.wrapping_sub(start) as u64),
                    Ordering::Relaxed,
                );
            }
        }
    }))
}

/// What the kernel dropped on the socket so far.
fn socket_drops(socket: &impl AsFd) -> Option<u32> {
    const SK_MEMINFO_DROPS: usize = 8;
    let mut info = [0u32; 9];
    let mut len = std::mem::size_of_val(&info) as libc::socklen_t;
    // SAFETY: `info` is as long as `len` says, and the descriptor is open.
    let r = unsafe {
        libc::getsockopt(
            std::os::fd::AsRawFd::as_raw_fd(&socket.as_fd()),
            libc::SOL_SOCKET,
            libc::SO_MEMINFO,
            info.as_mut_ptr().cast(),
            &mut len,
        )
    };
    (r == 0 && len as usize > SK_MEMINFO_DROPS * 4).then_some(info[SK_MEMINFO_DROPS])
}

impl AsFd for Bound {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        match self {
            Bound::Udp(s) => s.as_fd(),
            Bound::Unix(s) => s.as_fd(),
            Bound::Kmsg(f) => f.get_ref().as_fd(),
        }
    }
}

/// Spreads the datagrams of a group of `n` sockets bound with `SO_REUSEPORT` evenly over
/// them, whatever their sender: a classic BPF program (`ld rand; mod n; ret a`) attached with
/// `SO_ATTACH_REUSEPORT_CBPF` picks a socket by its place in the group (the order they were
/// bound). Without it the kernel picks by a hash of the sender's address and port, so one busy
/// sender lands on one socket.
pub fn spread_evenly(socket: &impl AsFd, n: u32) -> std::io::Result<()> {
    // SKF_AD_OFF + SKF_AD_RANDOM: a random number.
    const RANDOM: u32 = (-0x1000i32 + 56) as u32;
    let program = [
        // BPF_LD | BPF_W | BPF_ABS
        libc::sock_filter {
            code: 0x20,
            jt: 0,
            jf: 0,
            k: RANDOM,
        },
        // BPF_ALU | BPF_MOD | BPF_K
        libc::sock_filter {
            code: 0x94,
            jt: 0,
            jf: 0,
            k: n,
        },
        // BPF_RET | BPF_A
        libc::sock_filter {
            code: 0x16,
            jt: 0,
            jf: 0,
            k: 0,
        },
    ];
    let fprog = libc::sock_fprog {
        len: program.len() as u16,
        filter: program.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: `fprog` points at `program`, which outlives the call.
    let r = unsafe {
        libc::setsockopt(
            std::os::fd::AsRawFd::as_raw_fd(&socket.as_fd()),
            libc::SOL_SOCKET,
            libc::SO_ATTACH_REUSEPORT_CBPF,
            (&fprog as *const libc::sock_fprog).cast(),
            std::mem::size_of::<libc::sock_fprog>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

async fn readable(bound: &Bound) -> std::io::Result<()> {
    match bound {
        Bound::Udp(s) => s.readable().await,
        Bound::Unix(s) => s.readable().await,
        // Read until it would block once woken: clearing first misses nothing.
        Bound::Kmsg(f) => f.readable().await.map(|mut ready| ready.clear_ready()),
    }
}

fn try_recv(bound: &Bound, buf: &mut BytesMut) -> std::io::Result<(usize, From)> {
    let from = |peer| From {
        peer,
        credentials: None,
    };
    match bound {
        Bound::Udp(s) => s
            .try_recv_buf_from(buf)
            .map(|(n, peer)| (n, from(Some(peer)))),
        Bound::Unix(s) => s.try_io(tokio::io::Interest::READABLE, || {
            recv_with_credentials(s, buf)
        }),
        Bound::Kmsg(f) => loop {
            let room = buf.spare_capacity_mut();
            // SAFETY: reading into the buffer's spare capacity, as long as `room` says.
            let n = unsafe {
                libc::read(
                    std::os::fd::AsRawFd::as_raw_fd(f.get_ref()),
                    room.as_mut_ptr().cast(),
                    room.len(),
                )
            };
            if n >= 0 {
                // SAFETY: the kernel wrote `n` bytes.
                unsafe { buf.set_len(buf.len() + n as usize) };
                return Ok((n as usize, from(None)));
            }
            let e = std::io::Error::last_os_error();
            // Records overwritten before they were read: the next one follows.
            if e.raw_os_error() != Some(libc::EPIPE) {
                return Err(e);
            }
        },
    }
}

/// Receives a datagram on a unix socket with `SO_PASSCRED` on, and the credentials of the
/// process that sent it.
fn recv_with_credentials(s: &UnixDatagram, buf: &mut BytesMut) -> std::io::Result<(usize, From)> {
    let room = buf.spare_capacity_mut();
    let mut iov = libc::iovec {
        iov_base: room.as_mut_ptr().cast(),
        iov_len: room.len(),
    };
    // Room for one SCM_CREDENTIALS message, aligned as cmsg headers are.
    let mut control = [0u64; 8];
    // SAFETY: a zeroed msghdr is valid; its pointers are set below to live buffers.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    // SAFETY: `msg` points at `iov` (the buffer's spare room) and `control`, both alive.
    let n = unsafe { libc::recvmsg(std::os::fd::AsRawFd::as_raw_fd(s), &mut msg, 0) };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: the kernel wrote `n` bytes into the spare room.
    unsafe { buf.set_len(buf.len() + n as usize) };
    let mut credentials = None;
    // SAFETY: walking the control messages the kernel wrote within `msg_controllen`.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_CREDENTIALS {
                let cred = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<libc::ucred>());
                credentials = Some((cred.pid, cred.uid, cred.gid));
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Ok((
        n as usize,
        From {
            peer: None,
            credentials,
        },
    ))
}

/// A sender's credentials as syslog-ng names them, and its command line (`.unix.cmdline`,
/// from `/proc`, its arguments joined by spaces; empty once it has exited).
pub fn credential_pairs(pid: i32, uid: u32, gid: u32) -> Vec<(NameId, Text)> {
    let mut cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    cmdline.truncate(4096);
    // NULs between arguments, and a sender's control bytes, become spaces.
    for b in &mut cmdline {
        if *b < 0x20 || *b == 0x7f {
            *b = b' ';
        }
    }
    let number = |n: String| Text::owned(n.as_bytes());
    vec![
        (name_id(".unix.pid"), number(pid.to_string())),
        (name_id(".unix.uid"), number(uid.to_string())),
        (name_id(".unix.gid"), number(gid.to_string())),
        (name_id(".unix.cmdline"), Text::owned(&cmdline)),
    ]
}

/// Asks the kernel for the credentials of each datagram's sender (`SO_PASSCRED`).
fn pass_credentials(fd: &impl AsFd) -> std::io::Result<()> {
    let on: libc::c_int = 1;
    // SAFETY: setting an int option on an open socket.
    let r = unsafe {
        libc::setsockopt(
            std::os::fd::AsRawFd::as_raw_fd(&fd.as_fd()),
            libc::SOL_SOCKET,
            libc::SO_PASSCRED,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

impl super::Source for DatagramSource {
    fn source_name(&self) -> &Arc<str> {
        &self.source_name
    }

    fn place(&self) -> super::Place {
        super::Place {
            kind: "dgram",
            address: self.bind.to_string(),
        }
    }

    fn bind(self: Arc<Self>, held: Option<super::Held>) -> std::io::Result<Box<dyn super::Ready>> {
        let bound = match held {
            Some(held) => self.adopt(held.sockets.into_iter().next().expect("a socket"))?,
            None => self.bind_socket()?,
        };
        Ok(Box::new((self, bound)))
    }

    fn reader(&self) -> Option<&ReaderSpec> {
        Some(&self.reader)
    }

    fn unix_path(&self) -> Option<&std::path::Path> {
        match &self.bind {
            Bind::Unix(u) => Some(&u.path),
            Bind::Kmsg(_) => None,
            Bind::Udp(_) => None,
        }
    }

    fn descriptors(&self) -> usize {
        DESCRIPTORS
    }
}

/// Descriptors one bound datagram socket holds: the socket, the copy its kernel-drop counter
/// reads, and the copy kept to hand over at a reload (10,000 `unix-dgram()` sources held
/// 30,000; counted as one, they passed the open-file limit unsaid).
pub const DESCRIPTORS: usize = 3;

impl super::Ready for (Arc<DatagramSource>, Bound) {
    fn hand_over(&self) -> Vec<OwnedFd> {
        self.1.as_fd().try_clone_to_owned().into_iter().collect()
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

impl DatagramSource {
    /// Whether `fd` is what this source reads: a socket bound to its address, or the
    /// kernel's log device.
    pub fn holds(&self, fd: &OwnedFd) -> bool {
        use std::os::unix::fs::MetadataExt;
        match &self.bind {
            Bind::Udp(addr) => socket2::SockRef::from(fd)
                .local_addr()
                .is_ok_and(|a| a.as_socket() == Some(*addr)),
            Bind::Unix(unix) => socket2::SockRef::from(fd)
                .local_addr()
                .is_ok_and(|a| a.as_pathname() == Some(unix.path.as_path())),
            Bind::Kmsg(path) => {
                let Ok(dup) = fd.try_clone() else {
                    return false;
                };
                let held = std::fs::File::from(dup).metadata();
                let wanted = std::fs::metadata(path);
                matches!((held, wanted), (Ok(h), Ok(w)) if h.rdev() == w.rdev() && h.dev() == w.dev())
            }
        }
    }

    /// Takes over a predecessor's socket: what the kernel queued for it meanwhile is read
    /// here.
    pub fn adopt(&self, socket: OwnedFd) -> std::io::Result<Bound> {
        match &self.bind {
            Bind::Udp(_) => {
                let socket = std::net::UdpSocket::from(socket);
                socket.set_nonblocking(true)?;
                Ok(Bound::Udp(UdpSocket::from_std(socket)?))
            }
            Bind::Unix(_) => {
                let socket = std::os::unix::net::UnixDatagram::from(socket);
                socket.set_nonblocking(true)?;
                if self.pass_credentials {
                    pass_credentials(&socket)?;
                }
                Ok(Bound::Unix(UnixDatagram::from_std(socket)?))
            }
            // Where a predecessor got to in the kernel's log is its descriptor's.
            // SAFETY: the File owns its descriptor, which stays the same while registered.
            Bind::Kmsg(_) => Ok(Bound::Kmsg(unsafe {
                tokio::io::unix::AsyncFd::register(std::fs::File::from(socket))?
            })),
        }
    }
}
