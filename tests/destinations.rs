//! The file destination end to end: permissions and ownership, directories, standard output,
//! and backpressure when the destination cannot keep up.

mod common;

use common::{free_port, rss_kib, wait_lines, Running, Server};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::time::{Duration, Instant};

fn line(i: usize) -> String {
    format!("<13>Jan  5 13:56:09 host{} prog: message {i:08}\n", i % 3)
}

#[test]
fn files_and_directories_get_the_configured_modes_and_owner() {
    let port = free_port();
    let mut s = Running::start(
        Server::Sluice,
        &format!(
            r#"source s {{ tcp(ip(127.0.0.1) port({port}) keep-hostname(yes)); }};
            destination d {{ file("@OUT@/by-host/${{HOST}}/messages.log" create-dirs(yes) perm(0640) dir-perm(0750) owner(65534) group(65534)); }};
            log {{ source(s); destination(d); }};"#
        ),
    );
    s.wait_tcp(port);
    let input: String = (0..30).map(line).collect();
    common::send_tcp(port, input.as_bytes(), common::Framing::Newline);
    assert_eq!(wait_lines(&s.out, 30, Duration::from_secs(10)), 30);
    s.terminate();
    for host in ["host0", "host1", "host2"] {
        let dir = s.out.join("by-host").join(host);
        let file = dir.join("messages.log");
        let (dm, fm) = (
            std::fs::metadata(&dir).unwrap(),
            std::fs::metadata(&file).unwrap(),
        );
        assert_eq!(dm.permissions().mode() & 0o777, 0o750, "{}", dir.display());
        assert_eq!(fm.permissions().mode() & 0o777, 0o640, "{}", file.display());
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            assert_eq!((fm.uid(), fm.gid()), (65534, 65534));
        }
        assert_eq!(std::fs::read_to_string(&file).unwrap().lines().count(), 10);
    }
}

#[test]
fn a_missing_directory_without_create_dirs_holds_messages_until_it_exists() {
    let port = free_port();
    let mut s = Running::start(
        Server::Sluice,
        &format!(
            r#"source s {{ tcp(ip(127.0.0.1) port({port})); }};
            destination d {{ file("@OUT@/later/all.log"); }};
            log {{ source(s); destination(d); }};"#
        ),
    );
    s.wait_tcp(port);
    let input: String = (0..50).map(line).collect();
    common::send_tcp(port, input.as_bytes(), common::Framing::Newline);
    std::thread::sleep(Duration::from_millis(500));
    assert!(!s.out.join("later/all.log").exists());
    std::fs::create_dir(s.out.join("later")).unwrap();
    assert_eq!(
        wait_lines(&s.out, 50, Duration::from_secs(15)),
        50,
        "written once the directory exists"
    );
    s.terminate();
    assert!(
        s.stderr().contains("create-dirs() is off"),
        "{}",
        s.stderr()
    );
}

#[test]
fn stdout_destination_writes_to_standard_output() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("c.conf");
    std::fs::write(&conf, "source s { stdin(); };\ndestination d { stdout(template(\"$HOST|$MSG\\n\")); };\nlog { source(s); destination(d); };\n").unwrap();
    let mut child = std::process::Command::new(common::sluice_bin())
        .args(["-F", "-f"])
        .arg(&conf)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"<13>Jan  5 13:56:09 a p: one\n<13>Jan  5 13:56:09 b p: two\n")
        .unwrap();
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    assert!(child.wait().unwrap().success());
    // stdin() is a local source: without keep-hostname, $HOST is this machine.
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let host = host.trim().split('.').next().unwrap().to_string();
    assert_eq!(out, format!("{host}|one\n{host}|two\n"));
}

/// A FIFO in a directory of its own, and a reader of it that reads nothing: a file
/// destination writing to it fills the pipe's buffer and then waits, until the test reads.
/// (A FIFO without any reader is refused at once: its open never waits, issue 55.)
fn stalled_fifo() -> (tempfile::TempDir, std::path::PathBuf, std::fs::File) {
    use std::os::unix::fs::OpenOptionsExt;
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("pipe");
    let c = std::ffi::CString::new(fifo.to_string_lossy().as_bytes()).unwrap();
    // SAFETY: mkfifo with a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let idle = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&fifo)
        .unwrap();
    (dir, fifo, idle)
}

#[test]
fn a_stalled_destination_stops_the_reader_and_loses_nothing() {
    let port = free_port();
    let (_fifo_dir, fifo, _idle) = stalled_fifo();
    let mut s = Running::start(
        Server::Sluice,
        &format!(
            r#"source s {{ tcp(ip(127.0.0.1) port({port}) log-iw-size(1000) max-connections(1)); }};
            destination d {{ file("{}"); }};
            log {{ source(s); destination(d); }};"#,
            fifo.display()
        ),
    );
    s.wait_tcp(port);
    std::thread::sleep(Duration::from_millis(100));
    let total = 1_000_000;
    let sender = std::thread::spawn(move || {
        let mut conn = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let mut batch = String::new();
        for i in 0..total {
            batch.push_str(&line(i));
            if batch.len() > 1 << 16 {
                conn.write_all(batch.as_bytes()).unwrap();
                batch.clear();
            }
        }
        conn.write_all(batch.as_bytes()).unwrap();
    });
    // While the destination is stalled, sluice stops reading: its memory stays flat and the
    // sender cannot finish.
    std::thread::sleep(Duration::from_secs(2));
    let pid = s.child.id();
    let before = rss_kib(pid);
    std::thread::sleep(Duration::from_secs(2));
    let after = rss_kib(pid);
    assert!(
        !sender.is_finished(),
        "the sender should be blocked by backpressure"
    );
    assert!(
        after < 64 * 1024 && after <= before + 8 * 1024,
        "memory grew while stalled: {before} KiB → {after} KiB"
    );
    // Now read the FIFO: every message arrives, in order.
    let mut reader = std::fs::File::open(&fifo).unwrap();
    let collector = std::thread::spawn(move || {
        let mut all = Vec::new();
        reader.read_to_end(&mut all).unwrap();
        all
    });
    sender.join().unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    std::thread::sleep(Duration::from_secs(1));
    s.terminate();
    assert!(Instant::now() < deadline);
    let all = collector.join().unwrap();
    let text = String::from_utf8(all).unwrap();
    let mut count = 0;
    for (i, l) in text.lines().enumerate() {
        assert!(l.ends_with(&format!("message {i:08}")), "line {i}: {l}");
        count += 1;
    }
    assert_eq!(count, total);
}

/// Many busy connections against a stalled destination: each connection's reads wait for
/// its window, and all of them together for the source's read budget, so memory stays at
/// tens of megabytes instead of every connection holding its largest reads (500
/// connections held 124 MB without the budget, 64 MB with it). Nothing is lost once the
/// destination moves.
#[test]
fn many_busy_connections_against_a_stalled_destination_hold_bounded_memory() {
    let port = free_port();
    let (_fifo_dir, fifo, _idle) = stalled_fifo();
    let mut s = Running::start(
        Server::Sluice,
        &format!(
            r#"source s {{ tcp(ip(127.0.0.1) port({port}) max-connections(1000) log-iw-size(1000000)); }};
            destination d {{ file("{}" template("$MSG\n")); }};
            log {{ source(s); destination(d); }};"#,
            fifo.display()
        ),
    );
    s.wait_tcp(port);
    const CONNS: usize = 500;
    const PER_CONN: usize = 6_000; // 330 KB of 55-byte lines
    let senders: Vec<_> = (0..CONNS)
        .map(|c| {
            let mut conn = TcpStream::connect(("127.0.0.1", port)).unwrap();
            std::thread::spawn(move || {
                let text: String = (0..PER_CONN)
                    .map(|i| format!("<13>Jan  5 13:56:09 h prog: conn {c:04} message {i:08}\n"))
                    .collect();
                conn.write_all(text.as_bytes()).unwrap();
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs(3));
    let rss = rss_kib(s.child.id());
    assert!(
        rss < 96 * 1024,
        "{CONNS} connections against a stalled destination hold {rss} KiB"
    );
    let mut reader = std::fs::File::open(&fifo).unwrap();
    let lines = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let collector = std::thread::spawn({
        let lines = lines.clone();
        move || {
            let mut all = Vec::new();
            let mut chunk = vec![0; 1 << 16];
            loop {
                let n = reader.read(&mut chunk).unwrap();
                if n == 0 {
                    return all;
                }
                let newlines = chunk[..n].iter().filter(|&&b| b == b'\n').count();
                lines.fetch_add(newlines, std::sync::atomic::Ordering::Relaxed);
                all.extend_from_slice(&chunk[..n]);
            }
        }
    });
    for sender in senders {
        sender.join().unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    while lines.load(std::sync::atomic::Ordering::Relaxed) < CONNS * PER_CONN
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(100));
    }
    s.terminate();
    let mut next = vec![0usize; CONNS];
    let all = collector.join().unwrap();
    for l in String::from_utf8(all).unwrap().lines() {
        let (conn, seq) = l
            .strip_prefix("conn ")
            .and_then(|r| r.split_once(" message "))
            .unwrap_or_else(|| panic!("unexpected line {l}"));
        let (conn, seq): (usize, usize) = (conn.parse().unwrap(), seq.parse().unwrap());
        assert_eq!(seq, next[conn], "connection {conn}: out of order or lost");
        next[conn] += 1;
    }
    assert!(
        next.iter().all(|&n| n == PER_CONN),
        "lost messages: {next:?}"
    );
}

#[test]
fn idle_files_are_closed_after_time_reap() {
    let port = free_port();
    let mut s = Running::start(
        Server::Sluice,
        &format!(
            r#"source s {{ tcp(ip(127.0.0.1) port({port}) keep-hostname(yes)); }};
            destination d {{ file("@OUT@/${{HOST}}.log" time-reap(1)); }};
            log {{ source(s); destination(d); }};"#
        ),
    );
    s.wait_tcp(port);
    let mut conn = TcpStream::connect(("127.0.0.1", port)).unwrap();
    conn.write_all(line(0).as_bytes()).unwrap();
    assert_eq!(wait_lines(&s.out, 1, Duration::from_secs(10)), 1);
    // logrotate-style: move the file away. A writer that still held it open would keep
    // appending to the moved file; after time-reap() it reopens by name and creates a new one.
    std::fs::rename(s.out.join("host0.log"), s.out.join("host0.log.1")).unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    conn.write_all(line(3).as_bytes()).unwrap();
    drop(conn);
    let fresh = s.out.join("host0.log");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !fresh.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    s.terminate();
    assert_eq!(
        std::fs::read_to_string(s.out.join("host0.log.1"))
            .unwrap()
            .lines()
            .count(),
        1
    );
    assert!(std::fs::read_to_string(&fresh)
        .unwrap()
        .ends_with("message 00000003\n"));
}

/// A file per host: 300 hosts share every batch, so the writers hold small shares back to
/// write more per call. Every file still gets all its lines in order, and a message that
/// arrives alone is written at once (within the writer's linger, not at some later flush).
#[test]
fn a_file_per_host_gets_every_line_in_order_and_a_lone_message_promptly() {
    let port = free_port();
    let mut s = Running::start(
        Server::Sluice,
        &format!(
            r#"source s {{ tcp(ip(127.0.0.1) port({port}) keep-hostname(yes) log-iw-size(100000)); }};
            destination d {{ file("@OUT@/${{HOST}}.log"); }};
            log {{ source(s); destination(d); }};"#
        ),
    );
    s.wait_tcp(port);
    const HOSTS: usize = 300;
    const PER_HOST: usize = 400;
    let senders: Vec<_> = (0..2)
        .map(|c| {
            std::thread::spawn(move || {
                let mut text = String::new();
                for i in 0..PER_HOST / 2 {
                    for h in 0..HOSTS {
                        let seq = i * 2 + c;
                        text.push_str(&format!("<13>Jan  5 13:56:09 h{h}-c{c} prog: n {seq:06}\n"));
                    }
                }
                let mut conn = TcpStream::connect(("127.0.0.1", port)).unwrap();
                conn.write_all(text.as_bytes()).unwrap();
            })
        })
        .collect();
    for t in senders {
        t.join().unwrap();
    }
    assert_eq!(
        wait_lines(&s.out, HOSTS * PER_HOST, Duration::from_secs(60)),
        HOSTS * PER_HOST
    );
    let started = Instant::now();
    let mut conn = TcpStream::connect(("127.0.0.1", port)).unwrap();
    conn.write_all(b"<13>Jan  5 13:56:09 lone prog: alone\n")
        .unwrap();
    let lone = s.out.join("lone.log");
    while !lone.exists() && started.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "a lone message took {:?} to be written",
        started.elapsed()
    );
    s.terminate();
    for h in 0..HOSTS {
        for c in 0..2 {
            let text = std::fs::read_to_string(s.out.join(format!("h{h}-c{c}.log"))).unwrap();
            let seqs: Vec<usize> = text
                .lines()
                .map(|l| l.rsplit(' ').next().unwrap().parse().unwrap())
                .collect();
            let want: Vec<usize> = (0..PER_HOST / 2).map(|i| i * 2 + c).collect();
            assert_eq!(seqs, want, "h{h}-c{c}.log");
        }
    }
}
