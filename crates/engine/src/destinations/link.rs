//! A forwarding destination's connection and what goes onto it: the [`Link`] (a socket, and
//! TLS over it when the destination speaks TLS), the [`Wire`] a destination speaks over its
//! link (octets on a stream, a datagram a message, RELP in [`super::relp`]), and the writing
//! every wire shares: a [`Position`] in the batches that a broken connection resends from, and
//! stalls that a stop or a reload's hand-over gives up on.
//!
//! The sender ([`super::network`]) connects, fails over, queues and hands over; it knows a
//! wire only through [`Wire`].

use super::queue::Batch;
use socket2::{Domain, Socket, Type};
use std::io::{ErrorKind, IoSlice};
use std::mem::MaybeUninit;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The most buffers one `writev` takes (Linux's `IOV_MAX`).
const IOV_MAX: usize = 1024;
/// While stopping, how long a peer may take no data before the sender gives up on it.
pub(super) const STOP_GRACE: Duration = crate::stopping::GRACE;
/// How long a connect may take.
pub(super) const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a TLS handshake may take.
pub(super) const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How often a sender that waits (to write, for an answer, for batches) looks up: whether to
/// give up, its connection, its drop counter, its failback.
pub(super) const TICK: Duration = Duration::from_millis(500);
/// The most plaintext a TLS sender hands rustls before writing the records out.
const TLS_CHUNK: usize = 256 << 10;

/// What a sender sends through: a connection to a server and what is spoken on it — a
/// [`Protocol`] over a [`Link`] of sluice's own ([`OnLink`]), or a client library that keeps
/// its own connections (Kafka's). Dropping it closes the connection.
pub(super) trait Wire: Send {
    /// Sends `batches` from `pos`, moving `pos` past what the server answered for: taken,
    /// or refused for good (counted in [`Position::refused`]). On a broken connection the
    /// sender opens another and sends again from `pos`; on [`Failure::Later`] it waits and
    /// sends the refused messages again, at most `retries()` times.
    fn send(
        &mut self,
        batches: &[Batch],
        pos: &mut Position,
        give_up: GiveUp,
    ) -> Result<(), Failure>;
    /// Whether the peer closed the connection (or it failed).
    fn closed(&self) -> bool;
    /// Starts sending `batches` (whole) without waiting for the server to answer for them,
    /// where the wire can (a client library that holds what it sends: Kafka's), so that the
    /// sender takes and hands over the next batches meanwhile; [`Wire::settle`] then waits
    /// for the answers, oldest first. `Ok(false)`: this wire cannot, use [`Wire::send`]. After
    /// a failure of either, what was handed over is the sender's to send again.
    fn hand_over(&mut self, _batches: &[Batch], _give_up: GiveUp) -> Result<bool, Failure> {
        Ok(false)
    }
    /// Waits until the server answered for the oldest batches handed over (`batches`, as
    /// they were given), moving `pos` past them as [`Wire::send`] does.
    fn settle(
        &mut self,
        _batches: &[Batch],
        _pos: &mut Position,
        _give_up: GiveUp,
    ) -> Result<(), Failure> {
        unreachable!("settle follows a hand_over that returned true")
    }
}

/// An open connection, as a sender holds it.
pub(super) type Connected = Box<dyn Wire>;

/// What a destination speaks over a link of its own (octets, datagrams, RELP, HTTP).
pub(super) trait Protocol: Send + 'static {
    /// As [`Wire::send`], over `link`.
    fn send(
        &mut self,
        link: &mut Link,
        batches: &[Batch],
        pos: &mut Position,
        give_up: GiveUp,
    ) -> Result<(), Failure>;
    /// Whether the peer closed the connection (or it failed).
    fn closed(&self, link: &Link) -> bool {
        link.peer_closed()
    }
    /// Says goodbye before the link closes, without waiting for an answer.
    fn close(&mut self, _link: &mut Link) {}
}

/// A protocol spoken over a link; dropping it says goodbye as the protocol does, then closes
/// the link.
pub(super) struct OnLink<P: Protocol> {
    link: Link,
    protocol: P,
}

impl<P: Protocol> OnLink<P> {
    pub(super) fn connected(link: Link, protocol: P) -> Connected {
        Box::new(OnLink { link, protocol })
    }
}

impl<P: Protocol> Wire for OnLink<P> {
    fn send(
        &mut self,
        batches: &[Batch],
        pos: &mut Position,
        give_up: GiveUp,
    ) -> Result<(), Failure> {
        self.protocol.send(&mut self.link, batches, pos, give_up)
    }

    fn closed(&self) -> bool {
        self.protocol.closed(&self.link)
    }
}

impl<P: Protocol> Drop for OnLink<P> {
    fn drop(&mut self) {
        self.protocol.close(&mut self.link);
    }
}

/// Why a wire stopped sending.
#[derive(Debug)]
pub(super) enum Failure {
    /// The connection broke (or the peer stalled past the grace): reconnect, send again.
    Broken(std::io::Error),
    /// The server answered, and asked for `again` of the next `messages` from the position
    /// later (HTTP 429 or 5xx; a `_bulk` answer for some of its documents): `why` says what it
    /// answered. Given up on, the `messages` are passed and the `again` counted as dropped.
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    Later {
        why: String,
        messages: usize,
        again: usize,
    },
}

impl From<std::io::Error> for Failure {
    fn from(e: std::io::Error) -> Failure {
        Failure::Broken(e)
    }
}

/// Messages as octets on a stream (TCP, TLS, unix-stream), framed by the formatter.
pub(super) struct Octets;

impl Protocol for Octets {
    fn send(
        &mut self,
        link: &mut Link,
        batches: &[Batch],
        pos: &mut Position,
        give_up: GiveUp,
    ) -> Result<(), Failure> {
        Ok(match &mut link.tls {
            Some(tls) => write_tls(&link.sock, tls, batches, pos, give_up),
            None => write_stream(&link.sock, batches, pos, give_up),
        }?)
    }
}

/// A datagram a message (UDP, unix-dgram).
pub(super) struct Datagrams {
    /// UDP: a refused datagram (the port was closed when an earlier one arrived) is sent again
    /// once.
    pub(super) udp: bool,
}

impl Protocol for Datagrams {
    fn send(
        &mut self,
        link: &mut Link,
        batches: &[Batch],
        pos: &mut Position,
        _: GiveUp,
    ) -> Result<(), Failure> {
        Ok(write_datagrams(&link.sock, batches, pos, self.udp)?)
    }
}

/// Where writing has got to: a batch, and a byte in it; and how many of the messages before
/// it the server refused for good.
#[derive(Clone, Copy, Default)]
pub(super) struct Position {
    pub(super) batch: usize,
    pub(super) byte: usize,
    pub(super) refused: usize,
    /// Messages given up after `retries()` answers that asked for them again.
    pub(super) exhausted: usize,
}

impl Position {
    /// Moves `n` bytes on through `batches`, then past every batch with nothing left (empty
    /// ones too): the position is in a batch with bytes to send, or at the end.
    pub(super) fn advance(&mut self, batches: &[Batch], n: usize) {
        self.byte += n;
        while self.batch < batches.len() && self.byte >= batches[self.batch].data.len() {
            self.byte -= batches[self.batch].data.len();
            self.batch += 1;
        }
    }

    /// The index of the message at the position in its batch.
    pub(super) fn message(&self, batches: &[Batch]) -> usize {
        batches
            .get(self.batch)
            .map_or(0, |b| b.ends.partition_point(|&e| e as usize <= self.byte))
    }

    /// The messages from the position to the end of `batches`, each its bytes: a wire that
    /// takes messages whole (`sql()`'s rows, `mongodb()`'s documents) sends these.
    #[cfg(any(feature = "sql", feature = "mongodb"))]
    pub(super) fn messages_on<'b>(&self, batches: &'b [Batch]) -> Vec<&'b [u8]> {
        let mut out = Vec::new();
        let first = self.message(batches);
        for (b, batch) in batches.iter().enumerate().skip(self.batch) {
            let from = if b == self.batch { first } else { 0 };
            for i in from..batch.len() {
                out.push(&batch.data[batch.start(i)..batch.ends[i] as usize]);
            }
        }
        out
    }

    /// Moves back to the start of the message the position is in.
    pub(super) fn back_to_message_start(&mut self, batches: &[Batch]) {
        if let Some(b) = batches.get(self.batch) {
            self.byte = b.start(self.message(batches));
        }
    }

    /// Moves past the next `n` messages (fewer at the end).
    pub(super) fn skip_messages(&mut self, batches: &[Batch], mut n: usize) {
        while n > 0 && self.batch < batches.len() {
            let b = &batches[self.batch];
            let i = self.message(batches);
            let take = n.min(b.len() - i);
            n -= take;
            if i + take == b.len() {
                self.batch += 1;
                self.byte = 0;
            } else {
                self.byte = b.ends[i + take - 1] as usize;
            }
        }
        self.advance(batches, 0);
    }
}

/// An open connection: its socket, and the TLS session over it when the destination speaks
/// TLS.
pub(super) struct Link {
    pub(super) sock: Socket,
    pub(super) tls: Option<Box<rustls::ClientConnection>>,
}

/// The socket options of a connection to an IP server.
#[derive(Default)]
pub(super) struct Dial {
    /// `6`: IPv6 addresses only; `4`: IPv4 only.
    pub(super) ip_protocol: Option<u8>,
    /// The address to send from.
    pub(super) local: Option<SocketAddr>,
    pub(super) so_sndbuf: Option<usize>,
    pub(super) so_keepalive: bool,
}

/// Opens a socket of type `ty` to `host` (a name or an address) and `port`, trying its
/// addresses in turn.
pub(super) fn dial(host: &str, port: u16, ty: Type, o: &Dial) -> std::io::Result<Socket> {
    let addrs = (host, port)
        .to_socket_addrs()?
        .filter(|a| o.ip_protocol.is_none_or(|p| (p == 6) == a.is_ipv6()));
    let mut last = std::io::Error::new(ErrorKind::NotFound, "no address of that family");
    for addr in addrs {
        let protocol = if ty == Type::STREAM {
            socket2::Protocol::TCP
        } else {
            socket2::Protocol::UDP
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

impl Link {
    /// A TLS connection over `sock` to `server` (its name, for SNI and the certificate's
    /// check), with its handshake done.
    pub(super) fn secure(
        sock: Socket,
        config: &Arc<rustls::ClientConfig>,
        server: &str,
    ) -> std::io::Result<Link> {
        let name = rustls::pki_types::ServerName::try_from(server.to_string())
            .map_err(|e| std::io::Error::new(ErrorKind::InvalidInput, e))?;
        let mut tls = rustls::ClientConnection::new(config.clone(), name)
            .map_err(|e| std::io::Error::other(format!("TLS: {e}")))?;
        // Waits a tick at a time: a stop whose grace is spent ends the wait.
        sock.set_read_timeout(Some(TICK))?;
        sock.set_write_timeout(Some(TICK))?;
        let started = Instant::now();
        while tls.is_handshaking() {
            match tls.complete_io(&mut &sock) {
                Ok(_) => {}
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    if started.elapsed() > HANDSHAKE_TIMEOUT || crate::stopping::grace_spent() {
                        return Err(std::io::Error::new(
                            ErrorKind::TimedOut,
                            "TLS handshake failed: the server did not answer",
                        ));
                    }
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => {
                    let why = crate::tls::explain_io(&e);
                    return Err(std::io::Error::new(
                        e.kind(),
                        format!("TLS handshake failed: {why}"),
                    ));
                }
            }
        }
        if tls.protocol_version() == Some(rustls::ProtocolVersion::TLSv1_3) {
            await_verdict(&sock, &mut tls, started.elapsed())?;
        }
        tls.set_buffer_limit(None);
        sock.set_read_timeout(None)?;
        sock.set_write_timeout(Some(TICK))?;
        Ok(Link {
            sock,
            tls: Some(Box::new(tls)),
        })
    }

    /// Writes all of `data`, through TLS if the link has it. A peer that takes nothing holds
    /// the writer back (backpressure) unless stopping, when it gets [`STOP_GRACE`].
    pub(super) fn write_all(&mut self, mut data: &[u8], give_up: GiveUp) -> std::io::Result<()> {
        use std::io::Write;
        if let Some(tls) = &mut self.tls {
            crate::tls::write_plaintext(&mut tls.writer(), data)?;
            return flush_tls(&self.sock, tls, give_up);
        }
        let sock = &self.sock;
        write_until_done(give_up, || {
            let written = (!data.is_empty()).then(|| (&*sock).write(data))?;
            if let Ok(n) = written {
                data = &data[n..];
            }
            Some(written)
        })
    }

    /// Reads what arrived, through TLS if the link has it: 0 at the end of the stream,
    /// `WouldBlock`/`TimedOut` when nothing came within the socket's read timeout.
    pub(super) fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        use std::io::Read;
        let Some(tls) = &mut self.tls else {
            return (&self.sock).read(buf);
        };
        loop {
            match tls.reader().read(buf) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
            if tls.read_tls(&mut &self.sock)? == 0 {
                return Ok(0);
            }
            tls.process_new_packets()
                .map_err(|e| std::io::Error::new(ErrorKind::InvalidData, e))?;
        }
    }

    /// Whether the peer closed the connection (or it failed). Anything the peer sent is read
    /// and ignored: syslog receivers send nothing. Over TLS that is the server's session
    /// tickets and its close_notify; a session that never reads again has no use for them.
    pub(super) fn peer_closed(&self) -> bool {
        peer_closed(&self.sock)
    }

    /// Whether the peer closed the connection, without reading what it sent.
    pub(super) fn peer_closed_peeking(&self) -> bool {
        let mut buf = [MaybeUninit::<u8>::uninit(); 1];
        match self
            .sock
            .recv_with_flags(&mut buf, libc::MSG_DONTWAIT | libc::MSG_PEEK)
        {
            Err(e) => !matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted),
            Ok(_) => true,
        }
    }
}

/// The shortest and longest wait for a TLS 1.3 server's verdict on the client.
const VERDICT_WAIT: (Duration, Duration) = (Duration::from_millis(50), Duration::from_secs(1));

/// Waits for a TLS 1.3 server's verdict on this client. In TLS 1.3 the server checks the
/// client's certificate (or that it sent none) after the client's last handshake message, so
/// a refusal arrives when the handshake is over on this side: what was written meanwhile
/// would go down with the connection, and go again down with every new one. The verdict is an
/// alert (an error here), a session ticket (a server that sends them sends them once it
/// accepted the client), or silence for twice as long as the handshake took (at least 50 ms,
/// at most 1 s): accepted.
fn await_verdict(
    sock: &Socket,
    tls: &mut rustls::ClientConnection,
    handshake: Duration,
) -> std::io::Result<()> {
    let (least, most) = VERDICT_WAIT;
    sock.set_read_timeout(Some((handshake * 2).clamp(least, most)))?;
    let refused = |why: String| {
        std::io::Error::new(
            ErrorKind::ConnectionRefused,
            format!("TLS handshake failed: {why}"),
        )
    };
    match tls.read_tls(&mut &*sock) {
        Ok(0) => Err(refused(
            "the server closed the connection at the end of the handshake".into(),
        )),
        Ok(_) => match tls.process_new_packets() {
            Ok(_) => Ok(()),
            Err(e) => Err(refused(crate::tls::explain(&e))),
        },
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => Ok(()),
        Err(e) => Err(e),
    }
}

impl Drop for Link {
    /// Closes as TLS asks (close_notify), then says the sender is done (FIN) and reads what
    /// the peer sent (a TLS server's session tickets): closing a socket with unread data
    /// resets the connection, and a reset can make the peer drop what it has not read yet.
    fn drop(&mut self) {
        if let Some(tls) = &mut self.tls {
            tls.send_close_notify();
            while tls.wants_write() {
                if tls.write_tls(&mut &self.sock).is_err() {
                    break;
                }
            }
        }
        let _ = self.sock.shutdown(std::net::Shutdown::Write);
        peer_closed(&self.sock);
    }
}

/// Whether the peer closed a stream connection (or it failed), reading what it sent.
fn peer_closed(sock: &Socket) -> bool {
    let mut buf = [MaybeUninit::<u8>::uninit(); 4096];
    loop {
        match sock.recv_with_flags(&mut buf, libc::MSG_DONTWAIT) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == ErrorKind::WouldBlock => return false,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => return true,
        }
    }
}

/// Writes the batches from `pos` on a stream, advancing `pos`. A peer that takes nothing
/// blocks the writer (backpressure) unless stopping, when it is given [`STOP_GRACE`].
fn write_stream(
    sock: &Socket,
    batches: &[Batch],
    pos: &mut Position,
    give_up: GiveUp,
) -> std::io::Result<()> {
    let mut slices: Vec<IoSlice<'_>> = Vec::with_capacity(batches.len().min(IOV_MAX));
    write_until_done(give_up, || {
        pos.advance(batches, 0);
        if pos.batch == batches.len() {
            return None;
        }
        slices.clear();
        slices.push(IoSlice::new(&batches[pos.batch].data[pos.byte..]));
        for b in batches[pos.batch + 1..].iter().take(IOV_MAX - 1) {
            slices.push(IoSlice::new(&b.data));
        }
        let sent = sock.send_vectored_with_flags(&slices, libc::MSG_NOSIGNAL);
        if let Ok(n) = sent {
            pos.advance(batches, n);
        }
        Some(sent)
    })
}

/// Calls `write` until it has nothing left to write (`None`). A write that took something
/// starts the stall clock afresh; one that could take nothing (`WouldBlock`, or `TimedOut`
/// from the socket's write timeout) waits as [`stalled`] says; one that took 0 bytes means
/// the peer is gone.
fn write_until_done(
    give_up: GiveUp,
    mut write: impl FnMut() -> Option<std::io::Result<usize>>,
) -> std::io::Result<()> {
    let mut stalled_since: Option<Instant> = None;
    while let Some(written) = write() {
        match written {
            Ok(0) => return Err(ErrorKind::WriteZero.into()),
            Ok(_) => stalled_since = None,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                stalled(&mut stalled_since, give_up, STOP_GRACE)?
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Whether a sender gives up on a peer that takes nothing: sluice is stopping, or a reload's
/// destination takes over. Asked at every stall, as either may come while a write waits.
pub(super) type GiveUp<'a> = &'a dyn Fn() -> bool;

/// Runs `work` (a client library's call) on `runtime`, a sender's own, waking every
/// [`TICK`] to give up once sluice has been stopping for the grace, as [`stalled`] says: the
/// wires of `sql()` and `mongodb()` wait through this.
#[cfg(any(feature = "sql", feature = "mongodb"))]
pub(super) fn block_on_giving_up<F: std::future::Future>(
    runtime: &tokio::runtime::Runtime,
    work: F,
    give_up: GiveUp,
) -> std::io::Result<F::Output> {
    runtime.block_on(async {
        tokio::pin!(work);
        let mut since = None;
        loop {
            tokio::select! {
                done = &mut work => return Ok(done),
                _ = tokio::time::sleep(TICK) => stalled(&mut since, give_up, STOP_GRACE)?,
            }
        }
    })
}

/// A write (or a wait for an answer) that got nothing: backpressure, to wait out, unless the
/// sender gives up and the peer has taken nothing for `grace` since then (`since`) — since
/// the stop began, when sluice is stopping ([`crate::stopping`]).
pub(super) fn stalled(
    since: &mut Option<Instant>,
    give_up: GiveUp,
    grace: Duration,
) -> std::io::Result<()> {
    if !give_up() {
        *since = None;
        return Ok(());
    }
    let since = *since.get_or_insert_with(|| crate::stopping::since(Instant::now()));
    if since.elapsed() > grace {
        return Err(std::io::Error::new(
            ErrorKind::TimedOut,
            "the peer took nothing while stopping",
        ));
    }
    Ok(())
}

/// Writes the batches from `pos` over TLS, advancing `pos` past what is on the socket: rustls
/// takes up to [`TLS_CHUNK`] of plaintext, and `pos` moves once all its records are written,
/// so that after an error the messages of that chunk are sent again. Stalls as
/// [`write_stream`].
fn write_tls(
    sock: &Socket,
    tls: &mut rustls::ClientConnection,
    batches: &[Batch],
    pos: &mut Position,
    give_up: GiveUp,
) -> std::io::Result<()> {
    while pos.batch < batches.len() {
        let mut next = *pos;
        let mut taken = 0;
        while next.batch < batches.len() && taken < TLS_CHUNK {
            let data = &batches[next.batch].data;
            let n = (data.len() - next.byte).min(TLS_CHUNK - taken);
            crate::tls::write_plaintext(&mut tls.writer(), &data[next.byte..next.byte + n])?;
            taken += n;
            next.advance(batches, n);
        }
        flush_tls(sock, tls, give_up)?;
        *pos = next;
    }
    Ok(())
}

/// Writes out every TLS record rustls holds; a peer that takes nothing stalls the writer as
/// in [`write_stream`].
fn flush_tls(
    sock: &Socket,
    tls: &mut rustls::ClientConnection,
    give_up: GiveUp,
) -> std::io::Result<()> {
    write_until_done(give_up, || {
        tls.wants_write().then(|| tls.write_tls(&mut &*sock))
    })
}

/// Sends one datagram per message from `pos`, advancing `pos`.
fn write_datagrams(
    sock: &Socket,
    batches: &[Batch],
    pos: &mut Position,
    udp: bool,
) -> std::io::Result<()> {
    while pos.batch < batches.len() {
        let b = &batches[pos.batch];
        let i = b.ends.partition_point(|&e| e as usize <= pos.byte);
        if i >= b.len() {
            pos.batch += 1;
            pos.byte = 0;
            continue;
        }
        let end = b.ends[i] as usize;
        let datagram = &b.data[b.start(i)..end];
        let mut refused = false;
        loop {
            match sock.send_with_flags(datagram, libc::MSG_NOSIGNAL) {
                Ok(_) => break,
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {}
                // A UDP peer's port was closed when an earlier datagram arrived (ICMP): that
                // one is gone; this one is sent again once.
                Err(e) if e.kind() == ErrorKind::ConnectionRefused && udp && !refused => {
                    refused = true
                }
                Err(e) => return Err(e),
            }
        }
        pos.byte = end;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_position_moves_through_batches_and_past_their_ends() {
        let batch = |len: usize| Batch {
            data: vec![b'x'; len],
            ends: vec![len as u32],
            ack: None,
            queued_at: 0,
        };
        let batches = [batch(10), batch(0), batch(5)];
        let mut pos = Position::default();
        pos.advance(&batches, 4);
        assert_eq!((pos.batch, pos.byte), (0, 4));
        // The end of a batch moves it to the next with bytes, past the empty one.
        pos.advance(&batches, 6);
        assert_eq!((pos.batch, pos.byte), (2, 0));
        pos.advance(&batches, 0);
        assert_eq!((pos.batch, pos.byte), (2, 0));
        pos.advance(&batches, 5);
        assert_eq!((pos.batch, pos.byte), (3, 0));
    }
}
