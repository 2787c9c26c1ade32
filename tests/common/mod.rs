//! Helpers for end-to-end tests: start real servers (sluice, syslog-ng), send them real
//! traffic over loopback, wait for their output, compare trees of files.
#![allow(dead_code)]

pub mod ferretdb;
pub mod http;
pub mod kafka;
pub mod mariadb;
pub mod opensearch;
pub mod pki;
pub mod postgres;
pub mod service;
pub mod tsa;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub fn sluice_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_sluice"))
}

/// syslog-ng, when installed. CI sets `SLUICE_REQUIRE_PEERS=1`, so a missing peer fails there
/// instead of skipping.
pub fn syslog_ng() -> Option<PathBuf> {
    let found = ["/usr/sbin/syslog-ng", "/usr/bin/syslog-ng"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists());
    if found.is_none() {
        if std::env::var_os("SLUICE_REQUIRE_PEERS").is_some() {
            panic!("syslog-ng is not installed: run .ci/install-test-deps.sh");
        }
        eprintln!("SKIPPED: syslog-ng is not installed (run .ci/install-test-deps.sh to compare against it)");
    }
    found
}

/// Whether this machine can run a server in a private mount namespace (root and `unshare
/// --mount`); says why not (the test is then skipped, as other root-only tests are).
pub fn private_mount_namespace(why: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let can = root
        && Command::new("unshare")
            .args(["--mount", "--propagation", "private", "true"])
            .status()
            .is_ok_and(|s| s.success());
    if !can {
        eprintln!("SKIPPED: needs root and unshare --mount {why}");
    }
    can
}

/// A file of `../shared/corpus`, when this checkout sits beside it.
pub fn corpus(name: &str) -> Option<PathBuf> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/corpus")
        .join(name);
    if path.exists() {
        Some(path)
    } else {
        eprintln!("SKIPPED part: corpus file {} is absent (it lives in ../shared/corpus beside the project)", path.display());
        None
    }
}

pub fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

/// A free port no other test was given, in this process or another test binary running at
/// the same time (`.ci/test.py` runs two): below the kernel's ephemeral range (32768–60999
/// here), where neither `bind(…:0)` nor an outgoing connection takes one, and claimed by a
/// file named after it in `$TMPDIR/sluice-test-ports` holding the claiming process's id (a
/// claim of a process that is gone is taken over). `free` says whether the port can be bound.
fn unused_port(free: impl Fn(u16) -> bool) -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    const LOW: u32 = 10_000;
    const SPAN: u32 = 22_000;
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let dir = std::env::temp_dir().join("sluice-test-ports");
    std::fs::create_dir_all(&dir).expect("the test ports' directory");
    let me = std::process::id();
    // Each process starts at its own place, so that two rarely meet.
    let start = me.wrapping_mul(2_654_435_761) % SPAN;
    loop {
        let port = (LOW + (start + NEXT.fetch_add(1, Ordering::Relaxed)) % SPAN) as u16;
        let claim = dir.join(port.to_string());
        let claimed = match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&claim)
        {
            Ok(mut f) => f.write_all(me.to_string().as_bytes()).is_ok(),
            Err(_) => {
                // Taken over when the process that claimed it is gone.
                let owner = std::fs::read_to_string(&claim).unwrap_or_default();
                let gone = owner
                    .trim()
                    .parse::<u32>()
                    .is_ok_and(|pid| pid != me && !Path::new(&format!("/proc/{pid}")).exists());
                gone && std::fs::write(&claim, me.to_string()).is_ok()
            }
        };
        if claimed && free(port) {
            return port;
        }
    }
}

pub fn free_port() -> u16 {
    unused_port(|port| TcpListener::bind(("127.0.0.1", port)).is_ok())
}

pub fn free_udp_port() -> u16 {
    unused_port(|port| std::net::UdpSocket::bind(("127.0.0.1", port)).is_ok())
}

/// Raises this process's open-file limit to the hard limit; servers started from here inherit
/// it. Per-host file names over the corpus open some 20,000 files, and syslog-ng keeps each
/// open until `time-reap()`.
fn raise_open_file_limit() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit with a valid pointer to an rlimit we own.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && limit.rlim_cur < limit.rlim_max
        {
            limit.rlim_cur = limit.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Server {
    Sluice,
    SyslogNg,
}

/// A server process running one configuration in a scratch directory.
pub struct Running {
    pub child: Child,
    pub dir: tempfile::TempDir,
    pub out: PathBuf,
    pub kind: Server,
}

impl Running {
    /// Writes `config` (with `@OUT@` replaced by the output directory) and starts the server.
    pub fn start(kind: Server, config: &str) -> Running {
        Running::start_reading(kind, config, None)
    }

    /// As [`Running::start`], with `flags` on the server's command line; with `-u`, the
    /// scratch directory is open to every user (the server writes there after it drops root).
    pub fn start_with_flags(kind: Server, config: &str, flags: &[&str]) -> Running {
        Running::launch(kind, config, false, flags)
    }

    /// As [`Running::start`], with `input` as the server's standard input (for `stdin()`).
    pub fn start_reading(kind: Server, config: &str, input: Option<&[u8]>) -> Running {
        let mut running = Running::launch(kind, config, input.is_some(), &[]);
        if let (Some(bytes), Some(mut pipe)) = (input, running.child.stdin.take()) {
            let bytes = bytes.to_vec();
            std::thread::spawn(move || {
                use std::io::Write;
                let _ = pipe.write_all(&bytes);
            });
        }
        running
    }

    /// As [`Running::start`], with the server's standard input a pipe the test writes to
    /// (`child.stdin`) and closes when it likes.
    pub fn start_with_stdin(kind: Server, config: &str) -> Running {
        Running::launch(kind, config, true, &[])
    }

    fn launch(kind: Server, config: &str, piped: bool, flags: &[&str]) -> Running {
        raise_open_file_limit();
        let dir = tempfile::tempdir().expect("temporary directory");
        let out = dir.path().join("out");
        std::fs::create_dir(&out).expect("output directory");
        if flags.contains(&"-u") {
            open_to_all(dir.path());
            open_to_all(&out);
        }
        let text = config
            .replace("@OUT@", &out.to_string_lossy())
            .replace("@DIR@", &dir.path().to_string_lossy());
        let conf = dir.path().join("server.conf");
        std::fs::write(&conf, text).expect("write the configuration");
        let d = dir.path();
        let mut cmd = match kind {
            Server::Sluice => Command::new(sluice_bin()),
            Server::SyslogNg => {
                let mut c = Command::new(syslog_ng().expect("syslog-ng checked by the caller"));
                c.arg("--no-caps");
                c
            }
        };
        cmd.arg("-F")
            .arg("-f")
            .arg(&conf)
            .arg("-R")
            .arg(d.join("persist"))
            .arg("-p")
            .arg(d.join("pid"))
            .arg("-c")
            .arg(d.join("ctl"))
            .args(flags)
            // A pipe, as syslog-ng cannot poll a regular file on its standard input.
            .stdin(if piped { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(d.join("stderr")).expect("stderr file"));
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("starting {kind:?}: {e}"));
        Running {
            child,
            dir,
            out,
            kind,
        }
    }

    pub fn stderr(&self) -> String {
        self.stderr_of(self.dir.path())
    }

    fn stderr_of(&self, dir: &Path) -> String {
        std::fs::read_to_string(dir.join("stderr")).unwrap_or_default()
    }

    /// Waits until `port` accepts TCP connections.
    pub fn wait_tcp(&mut self, port: u16) {
        self.wait_until(&format!("port {port}"), || {
            TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
    }

    /// Waits until the unix socket `path` accepts connections.
    pub fn wait_unix(&mut self, path: &Path) {
        self.wait_until(&path.display().to_string(), || {
            std::os::unix::net::UnixStream::connect(path).is_ok()
        });
    }

    /// Polls `listening` until it holds, failing if the server exits or 20 s pass.
    fn wait_until(&mut self, what: &str, listening: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if listening() {
                return;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "{:?} exited with {status} before listening on {what}:\n{}",
                    self.kind,
                    self.stderr()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!(
            "{:?} did not listen on {what}:\n{}",
            self.kind,
            self.stderr()
        );
    }

    /// Waits until the server exits by itself (`stdin()` at the end of its input), at most 60 s.
    pub fn wait_exit(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!(
            "{:?} did not stop at the end of its input:\n{}",
            self.kind,
            self.stderr()
        );
    }

    /// Waits until the output stops changing for a while, then stops the server with SIGTERM.
    pub fn settle_and_stop(self) -> Output {
        self.settle_and_stop_after(0)
    }

    /// As [`Running::settle_and_stop`], once the output holds at least `bytes` (at most
    /// 60 s): a server that has not read its input yet when the quiet time is up — two
    /// loaded cores — is not taken for one that wrote nothing.
    pub fn settle_and_stop_after(mut self, bytes: u64) -> Output {
        let limit = Duration::from_secs(60);
        let start = Instant::now();
        while tree_size(&self.out) < bytes && start.elapsed() < limit {
            std::thread::sleep(Duration::from_millis(50));
        }
        wait_stable(&self.out, Duration::from_millis(800), limit);
        let pid = self.child.id();
        self.terminate();
        let dir = std::mem::replace(
            &mut self.dir,
            tempfile::tempdir().expect("temporary directory"),
        );
        Output {
            files: read_tree(&self.out),
            pid,
            stderr: self.stderr_of(dir.path()),
            _dir: dir,
        }
    }

    pub fn terminate(&mut self) {
        self.terminate_within(Duration::from_secs(20));
    }

    /// Sends SIGTERM and waits for the server to exit, at most `limit`; returns how long it
    /// took.
    pub fn terminate_within(&mut self, limit: Duration) -> Duration {
        let started = Instant::now();
        // SAFETY: kill(2) on the pid of a child we spawned and have not reaped.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        while started.elapsed() < limit {
            if let Ok(Some(_)) = self.child.try_wait() {
                return started.elapsed();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        panic!(
            "{:?} did not stop within {limit:?} of SIGTERM:\n{}",
            self.kind,
            self.stderr()
        );
    }
}

impl Drop for Running {
    /// Stops the server; a sluice still running must first show books that balance
    /// (`sluice ctl ledger`): every test, fault tests above all, ends with every message
    /// accounted for.
    fn drop(&mut self) {
        let running = matches!(self.child.try_wait(), Ok(None));
        let unbalanced =
            (matches!(self.kind, Server::Sluice) && running && !std::thread::panicking())
                .then(|| ctl(self, &["ledger"]))
                .filter(|(_, text)| text.contains("the books do not balance"));
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some((_, ledger)) = unbalanced {
            panic!("sluice's books do not balance at the end of the test:\n{ledger}");
        }
    }
}

/// A server run in `dir` — its configuration (`@DIR@` in it replaced by `dir`), persist file,
/// control socket, pid file and stderr there — that can be killed and started again in the
/// same place (its persist file kept).
pub struct InDir {
    pub child: Child,
    pub dir: PathBuf,
}

impl InDir {
    /// Starts `server` (the server's command, maybe behind a wrapper that execs it) on
    /// `config`, with `-F -f -R -c -p` in `dir`.
    pub fn start(mut server: Command, dir: &Path, config: &str) -> InDir {
        let conf = dir.join("server.conf");
        let config = config.replace("@DIR@", &dir.display().to_string());
        std::fs::write(&conf, format!("@version: 3.38\n{config}")).unwrap();
        let stderr = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("stderr"))
            .unwrap();
        let child = server
            .arg("-F")
            .arg("-f")
            .arg(&conf)
            .arg("-R")
            .arg(dir.join("persist"))
            .arg("-c")
            .arg(dir.join("ctl"))
            .arg("-p")
            .arg(dir.join("pid"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .unwrap();
        InDir {
            child,
            dir: dir.to_path_buf(),
        }
    }

    pub fn kill_9(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    pub fn stop(&mut self) {
        // SAFETY: kill(2) on a child we spawned and have not reaped (a wrapper execs the
        // server, so this is the server).
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        self.child.wait().unwrap();
    }

    pub fn stderr(&self) -> String {
        std::fs::read_to_string(self.dir.join("stderr")).unwrap_or_default()
    }
}

impl Drop for InDir {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub struct Output {
    /// Relative path → contents.
    pub files: BTreeMap<String, Vec<u8>>,
    pub stderr: String,
    /// The server's process id (it shows in texts the server makes, such as parse errors).
    pub pid: u32,
    _dir: tempfile::TempDir,
}

impl Output {
    pub fn lines(&self, file: &str) -> Vec<String> {
        let bytes = self
            .files
            .get(file)
            .unwrap_or_else(|| panic!("no output file {file}; have {:?}", self.files.keys()));
        String::from_utf8_lossy(bytes)
            .lines()
            .map(str::to_string)
            .collect()
    }
}

/// Sum of file sizes under `dir`.
fn tree_size(dir: &Path) -> u64 {
    read_tree(dir).values().map(|v| v.len() as u64).sum()
}

pub fn wait_stable(dir: &Path, quiet: Duration, limit: Duration) {
    let start = Instant::now();
    let mut last = (u64::MAX, Instant::now());
    while start.elapsed() < limit {
        let size = tree_size(dir);
        if size != last.0 {
            last = (size, Instant::now());
        } else if last.1.elapsed() >= quiet {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits until the files under `dir` hold `lines` lines in all.
pub fn wait_lines(dir: &Path, lines: usize, limit: Duration) -> usize {
    let start = Instant::now();
    let mut have = 0;
    while start.elapsed() < limit {
        have = read_tree(dir)
            .values()
            .map(|v| v.iter().filter(|b| **b == b'\n').count())
            .sum();
        if have >= lines {
            return have;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    have
}

/// Sends `datagram` from `udp` to a UDP source on `port` until a line shows up under `out`:
/// the source may not be bound yet when the first datagram leaves. Returns the lines seen.
pub fn send_udp_until_written(
    udp: &std::net::UdpSocket,
    port: u16,
    datagram: &[u8],
    out: &Path,
) -> usize {
    let mut seen = 0;
    for _ in 0..50 {
        udp.send_to(datagram, ("127.0.0.1", port)).unwrap();
        seen = wait_lines(out, 1, Duration::from_millis(100));
        if seen >= 1 {
            break;
        }
    }
    seen
}

pub fn read_tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if let Ok(bytes) = std::fs::read(&p) {
                out.insert(
                    p.strip_prefix(dir)
                        .expect("under dir")
                        .to_string_lossy()
                        .into_owned(),
                    bytes,
                );
            }
        }
    }
    out
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    Newline,
    OctetCounted,
    /// Octet counting with a space before each header (`␠43 <13>1 …`), which syslog-ng reads
    /// as an empty frame before each message.
    OctetCountedSpaced,
}

/// Sends every line of `input` over one unix-stream connection and closes it.
pub fn send_unix(path: &Path, input: &[u8]) {
    let mut s = std::os::unix::net::UnixStream::connect(path).expect("connect");
    s.write_all(input).expect("send");
    s.shutdown(std::net::Shutdown::Write).expect("shutdown");
    let mut sink = [0u8; 64];
    let _ = s.set_read_timeout(Some(Duration::from_secs(30)));
    let _ = std::io::Read::read(&mut s, &mut sink);
}

/// Sends every line of `input` over one TCP connection and closes it.
pub fn send_tcp(port: u16, input: &[u8], framing: Framing) {
    let mut buf = Vec::with_capacity(input.len() + input.len() / 8);
    for line in input.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        match framing {
            Framing::Newline => {
                buf.extend_from_slice(line);
                buf.push(b'\n');
            }
            Framing::OctetCounted | Framing::OctetCountedSpaced => {
                if framing == Framing::OctetCountedSpaced {
                    buf.push(b' ');
                }
                buf.extend_from_slice(format!("{} ", line.len()).as_bytes());
                buf.extend_from_slice(line);
            }
        }
    }
    send_raw_tcp(port, &buf);
}

/// Sends `bytes` as they are over one TCP connection, closes it and waits until the server
/// closes its side (it has read everything, or refused the connection).
pub fn send_raw_tcp(port: u16, bytes: &[u8]) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.write_all(bytes).expect("send");
    let _ = s.shutdown(std::net::Shutdown::Write);
    // Wait for the server to close its side: it has read everything.
    let mut sink = [0u8; 64];
    let _ = s.set_read_timeout(Some(Duration::from_secs(30)));
    let _ = std::io::Read::read(&mut s, &mut sink);
}

/// Differences between two trees of files, as a readable report (empty when equal).
pub fn diff_trees(
    want: &BTreeMap<String, Vec<u8>>,
    got: &BTreeMap<String, Vec<u8>>,
    want_name: &str,
    got_name: &str,
) -> String {
    let mut report = String::new();
    for name in want
        .keys()
        .chain(got.keys())
        .collect::<std::collections::BTreeSet<_>>()
    {
        match (want.get(name), got.get(name)) {
            (Some(a), Some(b)) if a == b => {}
            (Some(a), Some(b)) => {
                let (al, bl): (Vec<&[u8]>, Vec<&[u8]>) = (
                    a.split(|c| *c == b'\n').collect(),
                    b.split(|c| *c == b'\n').collect(),
                );
                let mut shown = 0;
                report.push_str(&format!(
                    "file {name}: {} lines from {want_name}, {} from {got_name}\n",
                    al.len() - 1,
                    bl.len() - 1
                ));
                for i in 0..al.len().max(bl.len()) {
                    let (x, y) = (al.get(i), bl.get(i));
                    if x != y {
                        report.push_str(&format!(
                            "  line {}:\n    {want_name}: {}\n    {got_name}: {}\n",
                            i + 1,
                            x.map_or("<none>".into(), |l| String::from_utf8_lossy(l).into_owned()),
                            y.map_or("<none>".into(), |l| String::from_utf8_lossy(l).into_owned())
                        ));
                        shown += 1;
                        if shown == 8 {
                            report.push_str("  …\n");
                            break;
                        }
                    }
                }
            }
            (Some(_), None) => {
                report.push_str(&format!("file {name}: written by {want_name} only\n"))
            }
            (None, Some(_)) => {
                report.push_str(&format!("file {name}: written by {got_name} only\n"))
            }
            (None, None) => unreachable!("name came from one of the maps"),
        }
    }
    report
}

/// `sluice loggen` in the background: `count` sequence-numbered messages on each of `conns`
/// connections to 127.0.0.1:`port`, `rate` a second per connection (0: as fast as it can),
/// with time enough to send them all.
pub fn loggen_start(port: u16, conns: u32, count: u64, rate: u64) -> Child {
    loggen_start_with(&[], port, conns, count, rate)
}

/// As [`loggen_start`], with loggen's `extra` options (`-D`: datagrams).
pub fn loggen_start_with(extra: &[&str], port: u16, conns: u32, count: u64, rate: u64) -> Child {
    Command::new(sluice_bin())
        .arg("loggen")
        .args(extra)
        .args(["-I", "600", "-r", &rate.to_string()])
        .args(["--active-connections", &conns.to_string()])
        .args([
            "-n",
            &count.to_string(),
            "-Q",
            "127.0.0.1",
            &port.to_string(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start sluice loggen")
}

/// What a loggen run reported.
pub struct LoggenReport {
    /// It exited successfully (no connection was reset).
    pub ok: bool,
    /// Messages it wrote to its sockets.
    pub sent: u64,
    pub text: String,
}

/// Waits for a loggen started by [`loggen_start`].
pub fn loggen_wait(mut child: Child) -> LoggenReport {
    let status = child.wait().expect("wait for loggen");
    let mut text = String::new();
    child
        .stderr
        .take()
        .expect("piped")
        .read_to_string(&mut text)
        .expect("loggen's report");
    let sent = text
        .split("count=")
        .last()
        .and_then(|t| t.split(',').next())
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no count in loggen's report: {text}"));
    LoggenReport {
        ok: status.success(),
        sent,
        text,
    }
}

/// What `sluice loggen --check FILE` found, over all connections.
#[derive(Debug)]
pub struct Check {
    pub received: u64,
    pub lost: u64,
    pub duplicated: u64,
    pub out_of_order: u64,
    pub text: String,
}

impl Check {
    /// Received `n`, nothing lost, duplicated or out of order.
    pub fn clean(&self, n: u64) -> bool {
        (self.received, self.lost, self.duplicated, self.out_of_order) == (n, 0, 0, 0)
    }
}

pub fn check(file: &Path) -> Check {
    let out = Command::new(sluice_bin())
        .arg("loggen")
        .arg("--check")
        .arg(file)
        .output()
        .expect("run sluice loggen --check");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let total = text
        .lines()
        .find(|l| l.starts_with("total:"))
        .unwrap_or_else(|| panic!("no total in: {text}"))
        .to_string();
    let field = |name: &str| -> u64 {
        total
            .split(&format!("{name}="))
            .nth(1)
            .and_then(|t| t.split(',').next())
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {name} in: {total}"))
    };
    Check {
        received: field("received"),
        lost: field("lost"),
        duplicated: field("duplicated"),
        out_of_order: field("out-of-order"),
        text,
    }
}

/// Resident memory of a process in KiB (0 once it is gone).
pub fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// `sluice ctl -c <the server's socket> ARGS`: whether it succeeded, and what it printed.
pub fn ctl(server: &Running, args: &[&str]) -> (bool, String) {
    let out = Command::new(sluice_bin())
        .arg("ctl")
        .arg("-c")
        .arg(server.dir.path().join("ctl"))
        .args(args)
        .output()
        .expect("run sluice ctl");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

/// The sum of the counters whose names match `pattern` (`sluice ctl query get --sum`).
pub fn counted(s: &Running, pattern: &str) -> u64 {
    let (_, text) = ctl(s, &["query", "get", "--sum", pattern]);
    text.trim()
        .parse()
        .unwrap_or_else(|_| panic!("{pattern}: {text}"))
}

/// Waits until `file` holds `text`, at most `limit`; fails the test with what it holds.
pub fn wait_for_text(file: &Path, text: &str, limit: Duration) {
    let read = || std::fs::read_to_string(file).unwrap_or_default();
    assert!(
        wait_until(limit, || read().contains(text)),
        "no {text:?} in {} within {limit:?}:\n{}",
        file.display(),
        read()
    );
}

/// A counter of `sluice ctl stats`, by the end of its name.
pub fn stat(s: &Running, name: &str) -> u64 {
    let (_, text) = ctl(s, &["stats"]);
    text.lines()
        .find(|l| l.rsplit_once(';').is_some_and(|(k, _)| k.ends_with(name)))
        .and_then(|l| l.rsplit(';').next()?.parse().ok())
        .unwrap_or_else(|| panic!("no counter {name} in:\n{text}"))
}

/// The receiving end of a relay: a sluice with a syslog() source on `port` writing every
/// message to `all.log`, with `template` when given.
pub fn receiver(port: u16, template: Option<&str>) -> Running {
    let template = template.map_or(String::new(), |t| format!(" template(\"{t}\")"));
    let mut s = Running::start(
        Server::Sluice,
        &format!(
            r#"options {{ keep-hostname(yes); }};
            source s {{ syslog(ip(127.0.0.1) port({port}) log-iw-size(100000)); }};
            destination d {{ file("@OUT@/all.log"{template}); }};
            log {{ source(s); destination(d); }};"#
        ),
    );
    s.wait_tcp(port);
    s
}

/// Waits until `file` under `out` holds `n` lines, then checks that they are loggen's `n`
/// messages, none lost, duplicated or out of order.
pub fn assert_delivered(out: &Path, file: &str, n: u64) {
    assert_eq!(
        wait_lines(out, n as usize, Duration::from_secs(60)),
        n as usize,
        "lines under {}",
        out.display()
    );
    let report = check(&out.join(file));
    assert!(report.clean(n), "{}", report.text);
}

/// rsyslog 8.2302, unpacked under /opt/rsyslog by `.ci/install-test-deps.sh` (Debian's
/// package conflicts with syslog-ng-core). `None` (and a SKIPPED note) when it is absent,
/// unless CI requires the peers.
pub fn rsyslog() -> Option<PathBuf> {
    let path = PathBuf::from("/opt/rsyslog/usr/sbin/rsyslogd");
    if path.exists() {
        return Some(path);
    }
    if std::env::var_os("SLUICE_REQUIRE_PEERS").is_some() {
        panic!("rsyslog is not unpacked under /opt/rsyslog: run .ci/install-test-deps.sh");
    }
    eprintln!("SKIPPED: rsyslog is not unpacked under /opt/rsyslog (run .ci/install-test-deps.sh)");
    None
}

/// Where rsyslog's libraries and modules are.
pub const RSYSLOG_LIB: &str = "/opt/rsyslog/usr/lib/x86_64-linux-gnu";

/// A running rsyslogd with a configuration of its own, in a scratch directory (`@DIR@` in
/// the configuration).
pub struct Rsyslog {
    pub child: Child,
    pub dir: tempfile::TempDir,
}

impl Rsyslog {
    pub fn start(config: &str) -> Rsyslog {
        let dir = tempfile::tempdir().expect("temporary directory");
        let text = format!(
            "global(workDirectory=\"{d}\" maxMessageSize=\"64k\")\n{}",
            config.replace("@DIR@", &dir.path().to_string_lossy()),
            d = dir.path().display()
        );
        let conf = dir.path().join("rsyslog.conf");
        std::fs::write(&conf, text).expect("write rsyslog.conf");
        let child = Command::new("/opt/rsyslog/usr/sbin/rsyslogd")
            .args(["-n", "-f"])
            .arg(&conf)
            .arg("-i")
            .arg(dir.path().join("pid"))
            .args(["-M", &format!("{RSYSLOG_LIB}/rsyslog")])
            .env("LD_LIBRARY_PATH", RSYSLOG_LIB)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("stderr")).expect("stderr file"))
            .spawn()
            .expect("start rsyslogd");
        Rsyslog { child, dir }
    }

    pub fn stderr(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("stderr")).unwrap_or_default()
    }

    /// Waits until `port` accepts TCP connections.
    pub fn wait_tcp(&mut self, port: u16) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("rsyslogd exited with {status}:\n{}", self.stderr());
            }
            assert!(
                Instant::now() < deadline,
                "rsyslogd did not listen on {port}:\n{}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Rsyslog {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Who a test runs sluice as: its own user, and, when the tests run as root, started as root
/// with `-u nobody -g nogroup` as a packaged service runs (keeping a log daemon's
/// capabilities, `cap_dac_read_search` among them): the flags of each.
pub fn users() -> Vec<&'static [&'static str]> {
    let mut users: Vec<&'static [&'static str]> = vec![&[]];
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        users.push(&["-u", "nobody", "-g", "nogroup"]);
    } else {
        eprintln!("SKIPPED in part: not root, so sluice is not also run as nobody");
    }
    users
}

/// Lets every user read, write and enter `path` (a directory or file a test made).
pub fn open_to_all(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o777)).expect("chmod 0777");
}

/// Waits until `done` holds, at most `limit`; returns whether it does.
pub fn wait_until(limit: Duration, done: impl Fn() -> bool) -> bool {
    let started = Instant::now();
    while !done() {
        if started.elapsed() > limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    true
}

/// A tmpfs of `size` mounted at `at` for the test, unmounted when dropped; `None` (with a
/// word on standard error) where this process may not mount.
pub struct SmallDisk(PathBuf);

impl SmallDisk {
    pub fn mount(at: &Path, size: &str) -> Option<SmallDisk> {
        std::fs::create_dir_all(at).unwrap();
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(at)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            eprintln!("skipping: cannot mount a tmpfs here (needs root)");
            return None;
        }
        Some(SmallDisk(at.to_path_buf()))
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

/// Block size and free blocks of the file system holding `path`.
pub fn free_space_of(path: &Path) -> (u64, u64) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: statvfs(3) with a valid C string and a zeroed struct it fills.
    unsafe {
        let mut st: libc::statvfs = std::mem::zeroed();
        assert_eq!(libc::statvfs(c.as_ptr(), &mut st), 0);
        (st.f_bsize, st.f_bavail)
    }
}

/// The registered drivers no contract entry names (by their first name): `registered` are the
/// names of each driver of a registry, `covered` the drivers a contract test's kinds are
/// written with (`tcp("127.0.0.1" …)`) and the names it lists as run elsewhere.
pub fn without_contract<'a>(
    registered: impl Iterator<Item = &'a [&'a str]>,
    covered: impl Iterator<Item = String>,
) -> Vec<&'a str> {
    let covered: Vec<String> = covered
        .map(|text| match text.find('(') {
            Some(at) => text[..at].replace('-', "_"),
            None => text,
        })
        .collect();
    registered
        .filter(|names| !names.iter().any(|n| covered.iter().any(|c| c == n)))
        .map(|names| names[0])
        .collect()
}

/// Waits until `path` exists (a socket or pipe a server makes), at most 10 s.
pub fn wait_for_path(path: &Path) {
    assert!(
        wait_until(Duration::from_secs(10), || path.exists()),
        "{} did not appear",
        path.display()
    );
}
