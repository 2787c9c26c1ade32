//! `sluice loggen`: a load generator with syslog-ng's `loggen` command line, and `--check`, which
//! reads what a destination wrote and reports lost, duplicated and out-of-order messages.
//!
//! Every connection renders its message once and then only rewrites the sequence digits in
//! place, so sending costs a copy per message; messages go out in large writes, paced by a
//! per-connection rate. Connections are shared out over at most [`THREADS`] threads, each
//! sending a batch on each of its connections in turn: a thread per connection cost the
//! sender more CPU than the server it measured once there were a thousand of them. Each
//! message carries `seq: NNNNNNNNNN, thread: TTTT` (as syslog-ng's loggen writes it; the
//! "thread" is the connection's number), which is what `--check` counts.

use clap::Args;
use std::io::{BufRead, Read, Write};
use std::net::{TcpStream, UdpSocket};
use std::os::unix::net::{UnixDatagram, UnixStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Args, Debug)]
pub struct LoggenArgs {
    /// Messages per second per active connection (0: as fast as possible).
    #[arg(short = 'r', long = "rate", default_value_t = 1000)]
    rate: u64,
    /// Size of each message in bytes (at least the size of its header and counters).
    #[arg(short = 's', long = "size", default_value_t = 256)]
    size: usize,
    /// Seconds to run (when no count is given).
    #[arg(short = 'I', long = "interval", default_value_t = 10)]
    interval: u64,
    /// Messages to send per active connection (stops before the interval ends).
    #[arg(short = 'n', long = "number")]
    number: Option<u64>,
    /// Use an IP socket (the default).
    #[arg(short = 'i', long = "inet")]
    inet: bool,
    /// Use a unix socket; the target is its path.
    #[arg(short = 'x', long = "unix")]
    unix: bool,
    /// Stream socket (the default).
    #[arg(short = 'S', long = "stream")]
    stream: bool,
    /// Datagram socket.
    #[arg(short = 'D', long = "dgram")]
    dgram: bool,
    /// RFC5424 messages, octet-counted on stream sockets unless --no-framing.
    #[arg(short = 'P', long = "syslog-proto")]
    syslog_proto: bool,
    /// No octet-counting framing for RFC5424 on streams: newline-terminated instead.
    #[arg(short = 'F', long = "no-framing")]
    no_framing: bool,
    /// Connections that send.
    #[arg(long = "active-connections", default_value_t = 1)]
    active_connections: usize,
    /// Connections that are opened and then stay idle.
    #[arg(long = "idle-connections", default_value_t = 0)]
    idle_connections: usize,
    /// Send the lines of this file instead of generated messages.
    #[arg(short = 'R', long = "read-file", value_name = "FILE")]
    read_file: Option<std::path::PathBuf>,
    /// With --read-file: start over at the end of the file.
    #[arg(short = 'l', long = "loop-reading")]
    loop_reading: bool,
    /// With --read-file: send the lines as they are (sluice always does; accepted for loggen's command line).
    #[arg(short = 'd', long = "dont-parse")]
    dont_parse: bool,
    /// TLS over TCP (the server's certificate is not checked, as loggen's is not).
    #[arg(short = 'U', long = "use-ssl")]
    use_ssl: bool,
    /// Begin every stream connection with a PROXY protocol v1 header (inside TLS with -U).
    #[arg(short = 'H', long = "proxied")]
    proxied: bool,
    /// With -U -H: the PROXY header before the TLS handshake, as a proxy that passes TLS
    /// through sends it.
    #[arg(long = "proxied-tls-passthrough")]
    proxied_tls_passthrough: bool,
    /// Source address announced in the PROXY header.
    #[arg(long = "proxy-src-ip", default_value = "192.168.1.1")]
    proxy_src_ip: String,
    /// Destination address announced in the PROXY header.
    #[arg(long = "proxy-dst-ip", default_value = "192.168.1.2")]
    proxy_dst_ip: String,
    /// Source port announced in the PROXY header.
    #[arg(long = "proxy-src-port", default_value_t = 3333)]
    proxy_src_port: u16,
    /// Destination port announced in the PROXY header.
    #[arg(long = "proxy-dst-port", default_value_t = 4444)]
    proxy_dst_port: u16,
    /// Print no progress, only the final line.
    #[arg(short = 'Q', long = "quiet")]
    quiet: bool,
    /// Progress and result as CSV.
    #[arg(short = 'C', long = "csv")]
    csv: bool,
    /// Instead of sending: read FILE (what a destination wrote) and report lost, duplicated and
    /// out-of-order messages per connection. Exits 1 when any are found.
    #[arg(long = "check", value_name = "FILE")]
    check: Option<std::path::PathBuf>,
    /// Host name or address (or socket path with --unix).
    target: Option<String>,
    /// Port.
    port: Option<u16>,
}

/// Runs the generator or the checker; the process exit code.
pub fn run(args: &LoggenArgs) -> i32 {
    if let Some(file) = &args.check {
        return match check(file) {
            Ok(report) => {
                print!("{}", report.text);
                i32::from(!report.clean)
            }
            Err(e) => {
                eprintln!("sluice loggen: cannot check {}: {e}", file.display());
                2
            }
        };
    }
    match generate(args) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("sluice loggen: {e}");
            2
        }
    }
}

/// Where messages go.
#[derive(Clone, Debug)]
enum Target {
    Tcp(String),
    Udp(String),
    UnixStream(std::path::PathBuf),
    UnixDgram(std::path::PathBuf),
}

enum Conn {
    Tcp(TcpStream),
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>),
    Udp(UdpSocket),
    UnixStream(UnixStream),
    UnixDgram(UnixDatagram),
}

impl Conn {
    fn open(target: &Target) -> std::io::Result<Conn> {
        Ok(match target {
            Target::Tcp(addr) => {
                let s = TcpStream::connect(addr)?;
                s.set_nodelay(true)?;
                Conn::Tcp(s)
            }
            Target::Udp(addr) => {
                let s = UdpSocket::bind(if addr.starts_with('[') {
                    "[::]:0"
                } else {
                    "0.0.0.0:0"
                })?;
                s.connect(addr)?;
                Conn::Udp(s)
            }
            Target::UnixStream(p) => Conn::UnixStream(UnixStream::connect(p)?),
            Target::UnixDgram(p) => {
                let s = UnixDatagram::unbound()?;
                s.connect(p)?;
                Conn::UnixDgram(s)
            }
        })
    }

    fn is_stream(&self) -> bool {
        matches!(self, Conn::Tcp(_) | Conn::Tls(_) | Conn::UnixStream(_))
    }

    /// Goes on over TLS (a TCP connection; others stay as they are).
    fn into_tls(self, host: &str) -> std::io::Result<Conn> {
        let Conn::Tcp(sock) = self else {
            return Ok(self);
        };
        let name = rustls::pki_types::ServerName::try_from(host.to_string())
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
        let mut tls = rustls::ClientConnection::new(sluice_engine::tls::unverified_client(), name)
            .map_err(std::io::Error::other)?;
        let mut sock = sock;
        while tls.is_handshaking() {
            tls.complete_io(&mut sock)?;
        }
        Ok(Conn::Tls(Box::new(rustls::StreamOwned::new(tls, sock))))
    }

    /// Ends a connection so that the server reads everything before it: over TLS, the
    /// close_notify, then the end of sending, then what the server sent read until it closes
    /// (closing with unread data would reset the connection).
    fn finish(self) {
        let (mut sock, tls) = match self {
            Conn::Tls(s) => {
                let rustls::StreamOwned { mut conn, sock } = *s;
                conn.send_close_notify();
                (sock, Some(conn))
            }
            _ => return,
        };
        if let Some(mut conn) = tls {
            while conn.wants_write() {
                if conn.write_tls(&mut sock).is_err() {
                    return;
                }
            }
        }
        let _ = sock.shutdown(std::net::Shutdown::Write);
        let _ = sock.set_read_timeout(Some(Duration::from_secs(10)));
        let mut sink = [0u8; 4096];
        while matches!(sock.read(&mut sink), Ok(n) if n > 0) {}
    }

    /// Writes a run of framed messages (streams) or one message (datagrams).
    fn send(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        match self {
            Conn::Tcp(s) => s.write_all(bytes),
            // `rustls::Stream` (not `StreamOwned`) passes vectored writes on whole.
            Conn::Tls(s) => sluice_engine::tls::write_plaintext(
                &mut rustls::Stream::new(&mut s.conn, &mut s.sock),
                bytes,
            ),
            Conn::UnixStream(s) => s.write_all(bytes),
            Conn::Udp(s) => s.send(bytes).map(|_| ()),
            Conn::UnixDgram(s) => s.send(bytes).map(|_| ()),
        }
    }
}

/// How each message is made.
#[derive(Clone)]
enum Source {
    /// loggen's message: a header and counters, padded to the size.
    Generated { size: usize, rfc5424: bool },
    /// Lines of a file, in order, once or in a loop.
    File {
        lines: Arc<Vec<Vec<u8>>>,
        looping: bool,
    },
}

fn generate(args: &LoggenArgs) -> Result<(), String> {
    let target = target(args)?;
    let source = match &args.read_file {
        Some(path) => {
            let text =
                std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            let lines: Vec<Vec<u8>> = text
                .split(|b| *b == b'\n')
                .filter(|l| !l.is_empty())
                .map(<[u8]>::to_vec)
                .collect();
            if lines.is_empty() {
                return Err(format!("{} holds no lines", path.display()));
            }
            Source::File {
                lines: Arc::new(lines),
                looping: args.loop_reading,
            }
        }
        None => Source::Generated {
            size: args.size,
            rfc5424: args.syslog_proto,
        },
    };
    let framed = args.syslog_proto && !args.no_framing;
    let deadline = Instant::now() + Duration::from_secs(args.interval);
    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicU64::new(0));
    let bytes = Arc::new(AtomicU64::new(0));
    let runid = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let host = args.target.as_deref().unwrap_or("localhost");
    let idle: Vec<Conn> = (0..args.idle_connections)
        .map(|_| match Conn::open(&target) {
            Ok(c) if args.use_ssl => c.into_tls(host),
            other => other,
        })
        .collect::<Result<_, _>>()
        .map_err(|e| format!("cannot open an idle connection: {e}"))?;
    let started = Instant::now();
    // Connections go to the threads as they open, so sending starts with the first.
    let (mut threads, mut handoff) = (Vec::new(), Vec::new());
    for _ in 0..args.active_connections.clamp(1, THREADS) {
        let (give, take) = std::sync::mpsc::channel::<Sender>();
        handoff.push(give);
        threads.push(std::thread::spawn(move || drive(take)));
    }
    for thread in 0..args.active_connections {
        let mut conn =
            Conn::open(&target).map_err(|e| format!("cannot connect to {target:?}: {e}"))?;
        let header = format!(
            "PROXY TCP4 {} {} {} {}\r\n",
            args.proxy_src_ip, args.proxy_dst_ip, args.proxy_src_port, args.proxy_dst_port
        );
        let proxied = args.proxied && conn.is_stream();
        if proxied && (!args.use_ssl || args.proxied_tls_passthrough) {
            conn.send(header.as_bytes())
                .map_err(|e| format!("cannot send the PROXY header: {e}"))?;
        }
        if args.use_ssl {
            conn = conn
                .into_tls(host)
                .map_err(|e| format!("TLS handshake with {target:?} failed: {e}"))?;
            if proxied && !args.proxied_tls_passthrough {
                conn.send(header.as_bytes())
                    .map_err(|e| format!("cannot send the PROXY header: {e}"))?;
            }
        }
        let job = Job {
            thread,
            runid,
            source: source.clone(),
            framed,
            rate: args.rate,
            number: args.number,
            deadline,
            stop: stop.clone(),
            sent: sent.clone(),
            bytes: bytes.clone(),
        };
        let sender = Sender::new(job, conn);
        // A thread that stopped on an error keeps it for the report below.
        let _ = handoff[thread % handoff.len()].send(sender);
    }
    drop(handoff);
    // Progress once a second.
    let mut last = (Instant::now(), 0u64);
    if args.csv && !args.quiet {
        println!("Time;Count;Rate");
    }
    while threads.iter().any(|t| !t.is_finished()) {
        std::thread::sleep(Duration::from_millis(50));
        if last.0.elapsed() >= Duration::from_secs(1) {
            let now = sent.load(Ordering::Relaxed);
            let rate = (now - last.1) as f64 / last.0.elapsed().as_secs_f64();
            if !args.quiet {
                if args.csv {
                    println!("{:.6};{now};{rate:.2}", started.elapsed().as_secs_f64());
                } else {
                    eprintln!("count={now}, rate = {rate:.2} msg/sec");
                }
            }
            last = (Instant::now(), now);
        }
    }
    let mut error = None;
    for t in threads {
        if let Ok(Err(e)) = t.join() {
            error = Some(e);
        }
    }
    drop(idle);
    let time = started.elapsed().as_secs_f64();
    let count = sent.load(Ordering::Relaxed);
    let size = bytes
        .load(Ordering::Relaxed)
        .checked_div(count)
        .unwrap_or(0);
    let rate = count as f64 / time.max(f64::EPSILON);
    let bandwidth = bytes.load(Ordering::Relaxed) as f64 / 1024.0 / time.max(f64::EPSILON);
    if args.csv {
        println!("{time:.6};{count};{rate:.2};{size};{bandwidth:.2}");
    }
    eprintln!("average rate = {rate:.2} msg/sec, count={count}, time={time:.6}, (average) msg size={size}, bandwidth={bandwidth:.2} kB/sec");
    match error {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

fn target(args: &LoggenArgs) -> Result<Target, String> {
    let host = args
        .target
        .clone()
        .ok_or("a target is required: sluice loggen [OPTIONS] HOST PORT (or --unix PATH)")?;
    if args.unix {
        return Ok(if args.dgram {
            Target::UnixDgram(host.into())
        } else {
            Target::UnixStream(host.into())
        });
    }
    let port = args.port.ok_or("a port is required after the host")?;
    let addr = if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    };
    Ok(if args.dgram {
        Target::Udp(addr)
    } else {
        Target::Tcp(addr)
    })
}

/// What one connection sends, and the counters all connections share.
struct Job {
    /// The connection's number, written in each message as `thread: TTTT` like syslog-ng's
    /// loggen does.
    thread: usize,
    runid: u64,
    source: Source,
    framed: bool,
    rate: u64,
    number: Option<u64>,
    deadline: Instant,
    stop: Arc<AtomicBool>,
    sent: Arc<AtomicU64>,
    bytes: Arc<AtomicU64>,
}

/// Messages written per send on stream sockets.
const BATCH: u64 = 256;

/// Threads that send, at most: each takes its share of the connections.
const THREADS: usize = 16;

/// Sends on the connections handed to this thread, a batch on each in turn, until all are
/// done; waits only when none of them is due to send.
fn drive(incoming: std::sync::mpsc::Receiver<Sender>) -> Result<(), String> {
    use std::sync::mpsc::TryRecvError;
    let mut senders: Vec<Sender> = Vec::new();
    let mut opening = true;
    // A connection that fails ends alone, as one of loggen's threads does; the first error
    // is the thread's report.
    let mut failed = None;
    loop {
        while opening {
            match incoming.try_recv() {
                Ok(sender) => senders.push(sender),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => opening = false,
            }
        }
        if senders.is_empty() {
            // Nothing to send until the next connection opens; none will once all have.
            match incoming.recv() {
                Ok(sender) => senders.push(sender),
                Err(_) => return failed.map_or(Ok(()), Err),
            }
        }
        let (mut sent, mut wait) = (false, Duration::MAX);
        let mut i = 0;
        while i < senders.len() {
            match senders[i].step() {
                Ok(Step::Sent) => sent = true,
                Ok(Step::Due(after)) => wait = wait.min(after),
                Ok(Step::Done) => {
                    senders.swap_remove(i).conn.finish();
                    continue;
                }
                Err(e) => {
                    senders.swap_remove(i);
                    failed.get_or_insert(e);
                    continue;
                }
            }
            i += 1;
        }
        if !sent && wait < Duration::MAX {
            std::thread::sleep(wait);
        }
    }
}

/// What one [`Sender::step`] did.
enum Step {
    Sent,
    /// Nothing yet: the rate allows the next message after this long.
    Due(Duration),
    /// The count was sent, the time is up, or the file ran out.
    Done,
}

/// One connection and where its job stands.
struct Sender {
    job: Job,
    conn: Conn,
    message: Message,
    buf: Vec<u8>,
    seq: u64,
    started: Instant,
}

impl Sender {
    fn new(job: Job, conn: Conn) -> Sender {
        Sender {
            message: Message::new(&job),
            job,
            conn,
            buf: Vec::with_capacity(1 << 16),
            seq: 0,
            started: Instant::now(),
        }
    }

    /// Sends the messages that are due, at most a batch.
    fn step(&mut self) -> Result<Step, String> {
        let job = &self.job;
        if job.stop.load(Ordering::Relaxed) || Instant::now() >= job.deadline {
            return Ok(Step::Done);
        }
        let remaining = job.number.map_or(u64::MAX, |n| n.saturating_sub(self.seq));
        if remaining == 0 {
            return Ok(Step::Done);
        }
        // Pace: how many messages the rate allows by now.
        let allowed = if job.rate == 0 {
            BATCH
        } else {
            let due = (self.started.elapsed().as_secs_f64() * job.rate as f64) as u64 + 1;
            if due <= self.seq {
                return Ok(Step::Due(Duration::from_micros(
                    (1_000_000 / job.rate).clamp(50, 10_000),
                )));
            }
            (due - self.seq).min(BATCH)
        };
        let stream = self.conn.is_stream();
        let n = allowed.min(remaining);
        let mut batch_bytes = 0;
        let mut batch_count = 0;
        for _ in 0..n {
            let Some(body) = self.message.next(self.seq) else {
                job.stop.store(true, Ordering::Relaxed);
                break;
            };
            batch_bytes += body.len() as u64;
            if stream {
                if job.framed {
                    self.buf
                        .extend_from_slice(itoa::Buffer::new().format(body.len()).as_bytes());
                    self.buf.push(b' ');
                    self.buf.extend_from_slice(body);
                } else {
                    self.buf.extend_from_slice(body);
                    self.buf.push(b'\n');
                }
            } else {
                self.conn
                    .send(body)
                    .map_err(|e| format!("thread {}: send failed: {e}", job.thread))?;
            }
            self.seq += 1;
            batch_count += 1;
        }
        if stream && !self.buf.is_empty() {
            self.conn
                .send(&self.buf)
                .map_err(|e| format!("thread {}: send failed: {e}", job.thread))?;
            self.buf.clear();
        }
        job.sent.fetch_add(batch_count, Ordering::Relaxed);
        job.bytes.fetch_add(batch_bytes, Ordering::Relaxed);
        Ok(Step::Sent)
    }
}

/// A message rendered once; `next` rewrites the sequence digits in place.
struct Message {
    text: Vec<u8>,
    /// Where the ten sequence digits are.
    seq_at: Option<usize>,
    file: Option<(Arc<Vec<Vec<u8>>>, bool)>,
}

impl Message {
    fn new(job: &Job) -> Message {
        match &job.source {
            Source::File { lines, looping } => Message {
                text: Vec::new(),
                seq_at: None,
                file: Some((lines.clone(), *looping)),
            },
            Source::Generated { size, rfc5424 } => {
                let host = sluice_engine::dns::local_name(false);
                let host = String::from_utf8_lossy(&host).into_owned();
                let stamp = jiff::Timestamp::now()
                    .strftime("%Y-%m-%dT%H:%M:%S")
                    .to_string();
                let program = format!("prg{:05}", job.thread);
                let header = if *rfc5424 {
                    format!("<38>1 {stamp} {host} {program} 1234 - [meta sequenceId=\"1\"] ")
                } else {
                    format!("<38>{stamp} {host} {program}[1234]: ")
                };
                let counters = format!(
                    "seq: 0000000000, thread: {:04}, runid: {}, stamp: {stamp} ",
                    job.thread, job.runid
                );
                let mut text = format!("{header}{counters}").into_bytes();
                let seq_at = header.len() + "seq: ".len();
                while text.len() < *size {
                    text.push(b'P');
                }
                Message {
                    text,
                    seq_at: Some(seq_at),
                    file: None,
                }
            }
        }
    }

    fn next(&mut self, seq: u64) -> Option<&[u8]> {
        if let Some((lines, looping)) = &self.file {
            let n = lines.len() as u64;
            if !looping && seq >= n {
                return None;
            }
            return Some(&lines[(seq % n) as usize]);
        }
        let at = self.seq_at.expect("generated messages have counters");
        let mut v = seq % 10_000_000_000;
        for i in (0..10).rev() {
            self.text[at + i] = b'0' + (v % 10) as u8;
            v /= 10;
        }
        Some(&self.text)
    }
}

/// What `--check` found.
pub struct Report {
    pub text: String,
    pub clean: bool,
}

/// Per connection: which sequence numbers arrived, how often, and in what order.
#[derive(Default)]
struct Seen {
    bits: Vec<u64>,
    received: u64,
    duplicated: u64,
    out_of_order: u64,
    highest: Option<u64>,
}

impl Seen {
    fn record(&mut self, seq: u64) {
        self.received += 1;
        let (word, bit) = ((seq / 64) as usize, seq % 64);
        if word >= self.bits.len() {
            self.bits.resize(word + 1, 0);
        }
        if self.bits[word] & (1 << bit) != 0 {
            self.duplicated += 1;
        }
        self.bits[word] |= 1 << bit;
        match self.highest {
            Some(h) if seq < h => self.out_of_order += 1,
            _ => self.highest = Some(seq),
        }
    }

    /// Numbers below the highest seen that never arrived.
    fn lost(&self) -> u64 {
        let Some(h) = self.highest else { return 0 };
        let distinct: u64 = self.bits.iter().map(|w| u64::from(w.count_ones())).sum();
        h + 1 - distinct
    }
}

/// Reads a destination's file and counts, per loggen run and thread, lost, duplicated and
/// out-of-order sequence numbers (lost: missing below the highest number that arrived). Runs
/// are told apart by their `runid`, so an earlier run's messages in the same file are not
/// duplicates. A file with no loggen message is not clean: there was nothing to check.
pub fn check(path: &std::path::Path) -> std::io::Result<Report> {
    let file = std::io::BufReader::with_capacity(1 << 20, std::fs::File::open(path)?);
    let mut threads: std::collections::BTreeMap<(u64, u64), Seen> =
        std::collections::BTreeMap::new();
    let mut other = 0u64;
    for line in file.split(b'\n') {
        let line = line?;
        match counters(&line) {
            Some((seq, thread, run)) => threads.entry((run, thread)).or_default().record(seq),
            None => other += 1,
        }
    }
    let mut text = String::new();
    let mut clean = !threads.is_empty();
    if threads.is_empty() {
        text.push_str("no loggen messages found (seq: …, thread: …): nothing to check\n");
    }
    for ((run, thread), seen) in &threads {
        let lost = seen.lost();
        clean &= lost == 0 && seen.duplicated == 0 && seen.out_of_order == 0;
        text.push_str(&format!(
            "run {run}, thread {thread:04}: received={}, lost={lost}, duplicated={}, out-of-order={}\n",
            seen.received, seen.duplicated, seen.out_of_order
        ));
    }
    let total = |f: fn(&Seen) -> u64| threads.values().map(f).sum::<u64>();
    let runs: std::collections::BTreeSet<u64> = threads.keys().map(|(run, _)| *run).collect();
    text.push_str(&format!(
        "total: runs={}, connections={}, received={}, lost={}, duplicated={}, out-of-order={}, other lines={other}\n",
        runs.len(),
        threads.len(),
        total(|s| s.received),
        total(Seen::lost),
        total(|s| s.duplicated),
        total(|s| s.out_of_order)
    ));
    Ok(Report { text, clean })
}

/// `seq: NNNNNNNNNN, thread: TTTT[, runid: R]` in a line: the number, the thread and the run
/// (0 for a loggen that writes no run id).
fn counters(line: &[u8]) -> Option<(u64, u64, u64)> {
    let at = memchr::memmem::find(line, b"seq: ")? + 5;
    let seq_end = at + line[at..].iter().take_while(|b| b.is_ascii_digit()).count();
    let seq: u64 = std::str::from_utf8(&line[at..seq_end]).ok()?.parse().ok()?;
    let rest = &line[seq_end..];
    let t = memchr::memmem::find(rest, b"thread: ")? + 8;
    let t_end = t + rest[t..].iter().take_while(|b| b.is_ascii_digit()).count();
    let thread: u64 = std::str::from_utf8(&rest[t..t_end]).ok()?.parse().ok()?;
    let rest = &rest[t_end..];
    let run = rest
        .strip_prefix(b", runid: ")
        .and_then(|r| {
            let end = r.iter().take_while(|b| b.is_ascii_digit()).count();
            std::str::from_utf8(&r[..end]).ok()?.parse().ok()
        })
        .unwrap_or(0);
    Some((seq, thread, run))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_counts_lost_duplicated_and_reordered() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.log");
        let line = |seq: u64, thread: u64| {
            format!("Jan  1 00:00:00 h prg: seq: {seq:010}, thread: {thread:04}, runid: 1, stamp: x PPP\n")
        };
        let mut text = String::new();
        for seq in [0, 1, 2, 4, 3, 5, 5] {
            text.push_str(&line(seq, 0));
        }
        for seq in 0..10 {
            text.push_str(&line(seq, 1));
        }
        text.push_str("a line from elsewhere\n");
        std::fs::write(&path, text).unwrap();
        let report = check(&path).unwrap();
        assert!(!report.clean);
        assert!(
            report
                .text
                .contains("thread 0000: received=7, lost=0, duplicated=1, out-of-order=1"),
            "{}",
            report.text
        );
        assert!(
            report
                .text
                .contains("thread 0001: received=10, lost=0, duplicated=0, out-of-order=0"),
            "{}",
            report.text
        );
        std::fs::write(&path, format!("{}{}", line(0, 0), line(3, 0))).unwrap();
        assert!(check(&path).unwrap().text.contains("lost=2"));
        // Two runs in one file are two runs, not duplicates.
        let second = line(0, 0).replace("runid: 1", "runid: 2")
            + &line(1, 0).replace("runid: 1", "runid: 2");
        std::fs::write(&path, format!("{}{}{second}", line(0, 0), line(1, 0))).unwrap();
        let report = check(&path).unwrap();
        assert!(report.clean, "{}", report.text);
        assert!(report.text.contains("runs=2"), "{}", report.text);
        // No loggen line at all: nothing was checked, so not clean.
        std::fs::write(&path, "a line from elsewhere\n").unwrap();
        let report = check(&path).unwrap();
        assert!(
            !report.clean && report.text.contains("nothing to check"),
            "{}",
            report.text
        );
    }
}
