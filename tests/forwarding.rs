//! Forwarding destinations (`network()`, `syslog()`, `tcp()`, `udp()`, `unix-stream()`,
//! `unix-dgram()`) against real sockets: the bytes on the wire are syslog-ng 3.38's, a relay
//! keeps the original host and time, a server that is down or paused loses nothing on a
//! flow-controlled path, a path without flow control drops what exceeds `log-fifo-size()`
//! without holding back other destinations, and failover/failback move between servers.

mod common;

use common::{
    assert_delivered, free_port, free_udp_port, loggen_start, loggen_wait, receiver, send_tcp,
    syslog_ng, wait_lines, Framing, Running, Server,
};
use std::io::Read;
use std::net::{TcpListener, UdpSocket};
use std::os::unix::net::{UnixDatagram, UnixListener};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What a listening socket received: the bytes of every stream connection in the order they
/// were accepted, or every datagram.
#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<Vec<u8>>>>);

impl Capture {
    fn tcp(addr: (&str, u16)) -> Capture {
        let listener = TcpListener::bind(addr).expect("bind the capture port");
        let cap = Capture::default();
        let c = cap.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                c.stream(stream);
            }
        });
        cap
    }

    fn unix_stream(path: &Path) -> Capture {
        let listener = UnixListener::bind(path).expect("bind the capture socket");
        let cap = Capture::default();
        let c = cap.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                c.stream(stream);
            }
        });
        cap
    }

    /// Reads one connection into a new entry, in a thread of its own.
    fn stream(&self, mut s: impl Read + Send + 'static) {
        let at = {
            let mut all = self.0.lock().unwrap();
            all.push(Vec::new());
            all.len() - 1
        };
        let c = self.clone();
        std::thread::spawn(move || {
            let mut buf = vec![0; 65536];
            while let Ok(n) = s.read(&mut buf) {
                if n == 0 {
                    break;
                }
                c.0.lock().unwrap()[at].extend_from_slice(&buf[..n]);
            }
        });
    }

    fn udp(port: u16) -> Capture {
        let sock = UdpSocket::bind(("127.0.0.1", port)).expect("bind the capture port");
        let cap = Capture::default();
        let c = cap.clone();
        std::thread::spawn(move || {
            let mut buf = vec![0; 65536];
            while let Ok(n) = sock.recv(&mut buf) {
                c.0.lock().unwrap().push(buf[..n].to_vec());
            }
        });
        cap
    }

    fn unix_dgram(path: &Path) -> Capture {
        let sock = UnixDatagram::bind(path).expect("bind the capture socket");
        let cap = Capture::default();
        let c = cap.clone();
        std::thread::spawn(move || {
            let mut buf = vec![0; 65536];
            while let Ok(n) = sock.recv(&mut buf) {
                c.0.lock().unwrap().push(buf[..n].to_vec());
            }
        });
        cap
    }

    fn bytes(&self) -> Vec<u8> {
        self.0.lock().unwrap().concat()
    }

    fn entries(&self) -> Vec<Vec<u8>> {
        self.0.lock().unwrap().clone()
    }

    /// Waits until `done` holds for the bytes received, or `limit` passes.
    fn wait(&self, limit: Duration, done: impl Fn(&[u8]) -> bool) -> Vec<u8> {
        let start = Instant::now();
        loop {
            let b = self.bytes();
            if done(&b) || start.elapsed() > limit {
                return b;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

const INPUT: &str = "<13>Jan  5 13:56:09 host prog[1]: hello world\n\
<14>2025-01-05T13:56:09.123+01:00 h2 app[22]: iso stamp\n\
<165>Feb 28 23:59:59 fw01 kernel: line with \"quotes\" and ünïcödé\n\
<30>Mar  1 00:00:00 host2 nopid: x\n";

/// Everything each kind of forwarding destination put on the wire for [`INPUT`], with
/// `globals` in `options {}` and `statements` before the source.
fn wire(server: Server, globals: &str, statements: &str) -> Vec<(&'static str, Vec<Vec<u8>>)> {
    let dir = tempfile::tempdir().unwrap();
    let src = free_port();
    let (tcp, syslog, tmpl, proto, udp, udp5424) = (
        free_port(),
        free_port(),
        free_port(),
        free_port(),
        free_udp_port(),
        free_udp_port(),
    );
    let (ustream, udgram) = (dir.path().join("stream"), dir.path().join("dgram"));
    let caps = [
        ("network tcp", Capture::tcp(("127.0.0.1", tcp))),
        ("syslog tcp", Capture::tcp(("127.0.0.1", syslog))),
        ("syslog template", Capture::tcp(("127.0.0.1", tmpl))),
        (
            "network syslog-protocol",
            Capture::tcp(("127.0.0.1", proto)),
        ),
        ("network udp", Capture::udp(udp)),
        ("syslog udp", Capture::udp(udp5424)),
        ("unix-stream", Capture::unix_stream(&ustream)),
        ("unix-dgram", Capture::unix_dgram(&udgram)),
    ];
    let mut s = Running::start(
        server,
        &format!(
            r#"@version: 3.38
            {statements}
            options {{ keep-hostname(yes); {globals} }};
            source s {{ network(ip(127.0.0.1) port({src})); }};
            destination d {{
                network("127.0.0.1" port({tcp}));
                syslog("127.0.0.1" port({syslog}) transport(tcp));
                syslog("127.0.0.1" port({tmpl}) template("T $MSG"));
                network("127.0.0.1" port({proto}) flags(syslog-protocol) frac-digits(3));
                udp("127.0.0.1" port({udp}));
                syslog("127.0.0.1" port({udp5424}) transport(udp));
                unix-stream("{}");
                unix-dgram("{}");
            }};
            log {{ source(s); destination(d); }};"#,
            ustream.display(),
            udgram.display()
        ),
    );
    s.wait_tcp(src);
    send_tcp(src, INPUT.as_bytes(), Framing::Newline);
    let lines = INPUT.lines().count();
    for (_, c) in &caps {
        c.wait(Duration::from_secs(10), |b| {
            b.iter().filter(|&&c| c == b'\n').count() >= lines
        });
    }
    s.terminate();
    caps.into_iter().map(|(n, c)| (n, c.entries())).collect()
}

#[test]
fn the_wire_format_is_syslog_ngs() {
    same_wire("", "");
}

/// `proto-template()` formats what `network()`, `tcp()`, `udp()` and `unix-*()` send without
/// a `template()` of their own, and not what `syslog()` sends; `file-template()` and the
/// global `mark-freq()`/`mark-mode(internal)` change nothing on the wire.
#[test]
fn a_proto_template_formats_the_bsd_destinations_as_syslog_ngs_does() {
    let ours = same_wire(
        "proto-template(t_proto); file-template(t_file); mark-freq(3600); mark-mode(internal);",
        r#"template t_proto { template("P $PROGRAM|$MSG\n"); };
        template t_file { template("F $MSG\n"); };"#,
    );
    for (name, entries) in ours {
        let templated = entries.iter().all(|e| e.starts_with(b"P "));
        let bsd = matches!(
            name,
            "network tcp" | "network udp" | "unix-stream" | "unix-dgram"
        );
        assert_eq!(templated, bsd, "{name}: {entries:?}");
    }
}

/// What sluice and syslog-ng send for [`INPUT`] is the same, destination by destination;
/// returns sluice's.
fn same_wire(globals: &str, statements: &str) -> Vec<(&'static str, Vec<Vec<u8>>)> {
    let Some(_) = syslog_ng() else {
        return Vec::new();
    };
    let ours = wire(Server::Sluice, globals, statements);
    let theirs = wire(Server::SyslogNg, globals, statements);
    for ((name, a), (_, b)) in ours.iter().zip(&theirs) {
        let show = |v: &Vec<Vec<u8>>| {
            v.iter()
                .map(|e| String::from_utf8_lossy(e).into_owned())
                .collect::<Vec<_>>()
        };
        assert!(!a.concat().is_empty(), "{name}: sluice sent nothing");
        assert_eq!(
            show(a),
            show(b),
            "{name}: sluice (left) and syslog-ng (right) differ"
        );
    }
    ours
}

/// A relay from a network() source on `port` to a syslog() destination at `to` with
/// `dest_options`, and a file destination `local`; `path` is the log path.
fn relay(port: u16, to: u16, dest_options: &str, path: &str) -> Running {
    let mut s = Running::start(
        Server::Sluice,
        &format!(
            r#"options {{ keep-hostname(yes); recv-time-zone("+00:00"); }};
            source s {{ network(ip(127.0.0.1) port({port}) log-iw-size(10000)); }};
            destination fwd {{ syslog("127.0.0.1" port({to}) time-reopen(1) {dest_options}); }};
            destination local {{ file("@OUT@/local.log"); }};
            {path}"#
        ),
    );
    s.wait_tcp(port);
    s
}

#[test]
fn a_relay_keeps_the_original_host_and_time() {
    let (edge, core) = (free_port(), free_port());
    let srv = receiver(core, Some("$ISODATE $HOST $PROGRAM $MSG\\n"));
    let r = relay(
        edge,
        core,
        "",
        "log { source(s); destination(fwd); flags(flow-control); };",
    );
    send_tcp(
        edge,
        b"<13>2024-02-29T23:59:58.123+02:00 web7 nginx[99]: first\n\
<13>Feb 28 10:00:00 db3 postgres[5]: second\n",
        Framing::Newline,
    );
    assert_eq!(wait_lines(&srv.out, 2, Duration::from_secs(10)), 2);
    let out = srv.settle_and_stop();
    let lines = out.lines("all.log");
    assert_eq!(lines[0], "2024-02-29T23:59:58+02:00 web7 nginx first");
    assert!(
        lines[1].ends_with("-02-28T10:00:00+00:00 db3 postgres second"),
        "{}",
        lines[1]
    );
    drop(r);
}

#[test]
fn a_server_that_is_down_then_up_loses_nothing_on_a_flow_controlled_path() {
    let (edge, core) = (free_port(), free_port());
    let _r = relay(
        edge,
        core,
        "",
        "log { source(s); destination(fwd); flags(flow-control); };",
    );
    // The server is down while 100,000 messages are sent: the relay's window fills, it stops
    // reading, and the sender waits.
    let load = loggen_start(edge, 1, 100_000, 0);
    std::thread::sleep(Duration::from_secs(2));
    let srv = receiver(core, Some("$ISODATE $HOST $PROGRAM $MSG\\n"));
    let sent = loggen_wait(load);
    assert!(sent.ok, "{}", sent.text);
    assert_delivered(&srv.out, "all.log", 100_000);
}

#[test]
fn a_paused_server_loses_nothing() {
    let (edge, core) = (free_port(), free_port());
    let _r = relay(
        edge,
        core,
        "",
        "log { source(s); destination(fwd); flags(flow-control); };",
    );
    let srv = receiver(core, Some("$ISODATE $HOST $PROGRAM $MSG\\n"));
    let load = loggen_start(edge, 1, 300_000, 20_000);
    std::thread::sleep(Duration::from_secs(2));
    // Stopped for 30 s in the middle of the load, then running again.
    let pid = srv.child.id() as i32;
    // SAFETY: kill(2) on the pid of a child we spawned.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    std::thread::sleep(Duration::from_secs(30));
    unsafe { libc::kill(pid, libc::SIGCONT) };
    let sent = loggen_wait(load);
    assert!(sent.ok, "{}", sent.text);
    assert_delivered(&srv.out, "all.log", 300_000);
}

#[test]
fn without_flow_control_a_full_queue_drops_and_counts_and_holds_nothing_back() {
    let (edge, core) = (free_port(), free_port());
    let r = relay(
        edge,
        core,
        "log-fifo-size(1000)",
        "log { source(s); destination(local); destination(fwd); };",
    );
    assert!(loggen_wait(loggen_start(edge, 1, 20_000, 0)).ok);
    // The file destination got everything although the server is down.
    assert_eq!(wait_lines(&r.out, 20_000, Duration::from_secs(30)), 20_000);
    std::thread::sleep(Duration::from_millis(1500));
    let srv = receiver(core, Some("$ISODATE $HOST $PROGRAM $MSG\\n"));
    // What the queue held (log-fifo-size) arrives; the rest was dropped and counted.
    assert_eq!(wait_lines(&srv.out, 1000, Duration::from_secs(20)), 1000);
    std::thread::sleep(Duration::from_millis(500));
    let out = r.settle_and_stop();
    assert!(
        out.stderr
            .contains("destination fwd: destination queue full (log-fifo-size(1000)); dropped"),
        "{}",
        out.stderr
    );
    let dropped: u64 = out
        .stderr
        .lines()
        .filter_map(|l| l.split("; dropped ").nth(1))
        .filter_map(|t| t.split(' ').next()?.parse::<u64>().ok())
        .sum();
    assert_eq!(dropped, 19_000, "{}", out.stderr);
    let srv_out = srv.settle_and_stop();
    assert_eq!(srv_out.lines("all.log").len(), 1000);
}

#[test]
fn failover_and_failback() {
    // Two servers on one port, told apart by their loopback address: the primary on
    // 127.0.0.2 is down at first, the failover server on 127.0.0.1 is up.
    let (edge, port) = (free_port(), free_port());
    let mut r = Running::start(
        Server::Sluice,
        &format!(
            r#"options {{ keep-hostname(yes); }};
            source s {{ network(ip(127.0.0.1) port({edge})); }};
            destination fwd {{
                network("127.0.0.2" port({port}) time-reopen(1)
                    failover(servers("127.0.0.1")
                             failback(tcp-probe-interval(1) successful-probes-required(2))));
            }};
            log {{ source(s); destination(fwd); flags(flow-control); }};"#
        ),
    );
    r.wait_tcp(edge);
    let backup = Capture::tcp(("127.0.0.1", port));
    send_tcp(edge, b"<13>Jan  5 13:56:09 h p: one\n", Framing::Newline);
    let got = backup.wait(Duration::from_secs(10), |b| b.ends_with(b"one\n"));
    assert!(
        got.ends_with(b"p: one\n"),
        "{}",
        String::from_utf8_lossy(&got)
    );

    // The primary comes up: after two probes a second apart the relay goes back to it.
    let primary = Capture::tcp(("127.0.0.2", port));
    std::thread::sleep(Duration::from_secs(4));
    send_tcp(edge, b"<13>Jan  5 13:56:10 h p: two\n", Framing::Newline);
    let got = primary.wait(Duration::from_secs(10), |b| b.ends_with(b"two\n"));
    assert!(
        got.ends_with(b"p: two\n"),
        "{}",
        String::from_utf8_lossy(&got)
    );
    assert!(!String::from_utf8_lossy(&backup.bytes()).contains("two"));
    r.terminate();
    let err = r.stderr();
    assert!(
        err.contains("connected to failover server tcp:127.0.0.1:"),
        "{err}"
    );
}
