//! `sluice ctl` against a running sluice: statistics named and counted as syslog-ng counts
//! them (compared with `syslog-ng-ctl stats` over the same configuration and input), queries,
//! the Prometheus endpoint, `Log statistics;` messages, reopen after logrotate (`ctl reopen`
//! and SIGUSR1), verbose, config and stop.

mod common;

use common::{
    counted, ctl, free_port, send_tcp, syslog_ng, wait_for_text, wait_lines, wait_until, Framing,
    Running, Server,
};
use std::io::{Read, Write};
use std::process::Command;
use std::time::{Duration, Instant};

fn config(port: u16, fwd: u16, extra: &str) -> String {
    format!(
        r#"@version: 3.38
        options {{ keep-hostname(yes); stats-level(1); {extra} }};
        source s_net {{ network(ip(127.0.0.1) port({port})); }};
        filter f_prog {{ program("prog"); }};
        parser p_kv {{ kv-parser(); }};
        destination d_file {{ file("@OUT@/all.log"); }};
        destination d_fwd {{ network("127.0.0.1" port({fwd}) log-fifo-size(5) time-reopen(60)); }};
        destination d_kv {{ file("@OUT@/kv.log"); }};
        log {{ source(s_net); destination(d_file); destination(d_fwd); }};
        log {{ source(s_net); filter(f_prog); parser(p_kv); destination(d_kv); }};"#
    )
}

fn input(n: usize) -> Vec<u8> {
    (0..n)
        .map(|i| {
            let prog = if i % 3 == 0 { "other" } else { "prog" };
            format!("<13>Jan  5 13:56:09 host {prog}[1]: message={i}\n")
        })
        .collect::<String>()
        .into_bytes()
}

/// The CSV lines of the counters both servers keep, from `sluice ctl stats` or
/// `syslog-ng-ctl stats`.
fn shared_counters(csv: &str) -> Vec<String> {
    let mut lines: Vec<String> = csv
        .lines()
        .filter(|l| {
            let kind = l.rsplit(';').nth(1).unwrap_or("");
            // sluice's own: the ledger's messages that reached no destination.
            !l.starts_with("center;;unrouted;")
                && (l.starts_with("src.")
                    || l.starts_with("dst.")
                    || l.starts_with("center;")
                    || l.starts_with("filter;")
                    || l.starts_with("parser;"))
                && matches!(
                    kind,
                    "processed"
                        | "written"
                        | "dropped"
                        | "queued"
                        | "matched"
                        | "not_matched"
                        | "discarded"
                )
        })
        .map(str::to_string)
        .collect();
    lines.sort();
    lines
}

/// `sluice ctl stats` or `syslog-ng-ctl stats`, whichever `s` is.
fn stats_csv(s: &Running) -> String {
    match s.kind {
        Server::Sluice => ctl(s, &["stats"]).1,
        Server::SyslogNg => {
            let out = Command::new("syslog-ng-ctl")
                .arg("stats")
                .arg("-c")
                .arg(s.dir.path().join("ctl"))
                .output()
                .unwrap();
            String::from_utf8_lossy(&out.stdout).into_owned()
        }
    }
}

/// Every listener of a source has counters of its own, named by its address as syslog-ng
/// names them (two TCP listeners of one source once shared theirs).
#[test]
fn each_listener_has_counters_of_its_own() {
    let Some(_) = syslog_ng() else { return };
    let mut listeners = Vec::new();
    for kind in [Server::Sluice, Server::SyslogNg] {
        let (a, b) = (free_port(), free_port());
        let mut s = Running::start(
            kind,
            &format!(
                r#"@version: 3.38
                source s {{ network(ip(127.0.0.1) port({a})); network(ip(127.0.0.1) port({a}) transport(udp));
                    syslog(ip(127.0.0.1) port({b}) transport(tcp)); unix-stream("@DIR@/log.sock"); }};
                destination d {{ file("@OUT@/all.log"); }};
                log {{ source(s); destination(d); }};"#
            ),
        );
        s.wait_tcp(b);
        let _held = std::net::TcpStream::connect(("127.0.0.1", a)).unwrap();
        std::thread::sleep(Duration::from_millis(500));
        let csv = stats_csv(&s)
            .replace(&a.to_string(), "A")
            .replace(&b.to_string(), "B")
            .replace(&*s.dir.path().to_string_lossy(), "DIR");
        let mut lines: Vec<String> = csv
            .lines()
            .filter(|l| l.contains(";connections;"))
            .map(str::to_string)
            .collect();
        lines.sort();
        listeners.push(lines);
    }
    assert_eq!(
        listeners[0],
        [
            "src.network;s;afsocket_sd.(stream,AF_INET(127.0.0.1:A));a;connections;1",
            "src.syslog;s;afsocket_sd.(stream,AF_INET(127.0.0.1:B));a;connections;0",
            "src.unix-stream;s;afsocket_sd.(stream,AF_UNIX(DIR/log.sock));a;connections;0",
        ]
    );
    assert_eq!(listeners[0], listeners[1], "sluice, then syslog-ng");
}

#[test]
fn counters_match_syslog_ngs() {
    let Some(_) = syslog_ng() else { return };
    let mut csvs = Vec::new();
    for kind in [Server::Sluice, Server::SyslogNg] {
        let (port, fwd) = (free_port(), free_port());
        let mut s = Running::start(kind, &config(port, fwd, ""));
        s.wait_tcp(port);
        send_tcp(port, &input(10), Framing::Newline);
        // Ten in all.log, the six from `prog` in kv.log.
        assert_eq!(wait_lines(&s.out, 16, Duration::from_secs(10)), 16);
        std::thread::sleep(Duration::from_millis(500));
        let csv = stats_csv(&s);
        // The forwarding destination's port and the output directory differ between runs.
        let csv = csv
            .replace(&fwd.to_string(), "FWD")
            .replace(&s.out.to_string_lossy().into_owned(), "OUT");
        csvs.push(shared_counters(&csv));
    }
    assert!(
        csvs[0].contains(&"center;;received;a;processed;10".to_string()),
        "{:?}",
        csvs[0]
    );
    assert_eq!(csvs[0], csvs[1], "sluice (left) and syslog-ng (right)");
}

#[test]
fn queries_prometheus_and_log_statistics() {
    let (port, fwd, prom) = (free_port(), free_port(), free_port());
    let mut s = Running::start(
        Server::Sluice,
        &format!(
            "{}\nsource s_int {{ internal(); }};\ndestination d_int {{ file(\"@OUT@/internal.log\"); }};\nlog {{ source(s_int); destination(d_int); }};",
            config(
                port,
                fwd,
                &format!("stats(freq(1) prometheus-listen(\"127.0.0.1:{prom}\"));")
            )
        ),
    );
    s.wait_tcp(port);
    send_tcp(port, &input(10), Framing::Newline);
    wait_lines(&s.out, 10, Duration::from_secs(10));
    std::thread::sleep(Duration::from_millis(300));

    let (ok, sum) = ctl(&s, &["query", "get", "--sum", "*.dropped"]);
    assert!(ok && sum == "5\n", "{sum}");
    let (_, list) = ctl(&s, &["query", "list", "dst.file*"]);
    assert!(list.contains("dst.file.d_file#0."), "{list}");
    assert!(
        list.ends_with(".written\n") || list.contains(".written\n"),
        "{list}"
    );
    let (_, kv) = ctl(&s, &["stats", "--format", "kv", "--reset"]);
    assert!(
        kv.contains("src.network.s_net#0.tcp,127.0.0.1.processed=10\n"),
        "{kv}"
    );
    let (_, after) = ctl(&s, &["query", "get", "src.network.*.processed"]);
    assert_eq!(after, "src.network.s_net#0.tcp,127.0.0.1.processed=0\n");

    // Prometheus reads the counters over HTTP.
    let mut conn = std::net::TcpStream::connect(("127.0.0.1", prom)).unwrap();
    conn.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut reply = String::new();
    conn.read_to_string(&mut reply).unwrap();
    assert!(reply.starts_with("HTTP/1.1 200 OK\r\n"), "{reply}");
    assert!(reply.contains(
        "sluice_dropped_total{component=\"dst.network\",id=\"d_fwd#0\",instance=\"tcp,127.0.0.1:"
    ), "{reply}");
    assert!(reply.contains("# TYPE sluice_queued gauge"), "{reply}");

    // stats(freq(1)): a `Log statistics;` message every second through internal().
    let start = Instant::now();
    loop {
        let text = std::fs::read_to_string(s.out.join("internal.log")).unwrap_or_default();
        if text.contains("Log statistics; processed='src.network(s_net#0,tcp,127.0.0.1)=") {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "{text}");
        std::thread::sleep(Duration::from_millis(100));
    }

    // Open connections of a listener: none now.
    let (_, conns) = ctl(&s, &["query", "get", "src.network.s_net.*.connections"]);
    // Named as syslog-ng names a listener: by its address, distinct per listener.
    assert_eq!(
        conns,
        format!("src.network.s_net.afsocket_sd.(stream,AF_INET(127.0.0.1:{port})).connections=0\n")
    );
    let (ok, health) = ctl(&s, &["healthcheck"]);
    assert!(ok && health.starts_with("OK\n"), "{health}");
    let (ok, text) = ctl(&s, &["config", "--preprocessed"]);
    assert!(ok && text.contains("destination d_fwd"), "{text}");
    let (ok, text) = ctl(&s, &["verbose", "--set", "on"]);
    assert!(ok && text == "OK verbose is on\n", "{text}");
    let (ok, text) = ctl(&s, &["reload"]);
    assert!(ok && text == "OK configuration reloaded\n", "{text}");
    let (ok, _) = ctl(&s, &["stop"]);
    assert!(ok);
    let start = Instant::now();
    while s.child.try_wait().unwrap().is_none() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "ctl stop did not stop sluice"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `sluice ctl ledger`: every message received reached a destination or none, and each
/// destination's processed is written + dropped (by reason) + queued — also after a reset.
#[test]
fn the_ledger_accounts_for_every_message() {
    let (port, fwd, lone) = (free_port(), free_port(), free_port());
    let mut s = Running::start(
        Server::Sluice,
        &format!(
            "{}\nsource s_lone {{ network(ip(127.0.0.1) port({lone})); }};\n\
             log {{ source(s_lone); filter(f_prog); destination(d_kv); }};\n\
             source s_int {{ internal(); }};\ndestination d_int {{ file(\"@OUT@/internal.log\"); }};\n\
             destination d_nowhere {{ file(\"/dev/null/x.log\"); }};\n\
             destination d_by_prog {{ file(\"@OUT@/${{PROGRAM}}/x.log\" create-dirs(yes)); }};\n\
             log {{ source(s_int); destination(d_int); }};\n\
             log {{ source(s_net); destination(d_nowhere); destination(d_by_prog); }};",
            config(port, fwd, "")
        ),
    );
    s.wait_tcp(port);
    // A link where a sender's value would name a directory: the name is refused.
    let elsewhere = s.dir.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, s.out.join("prog")).unwrap();
    s.wait_tcp(lone);
    send_tcp(port, &input(10), Framing::Newline);
    // One `other` filtered out, two from `prog` to kv.log.
    send_tcp(lone, &input(3), Framing::Newline);
    // Ten in all.log, the eight from `prog` in kv.log, the four others in other/x.log.
    wait_lines(&s.out, 22, Duration::from_secs(10));
    std::thread::sleep(Duration::from_millis(500));
    let (ok, ledger) = ctl(&s, &["ledger"]);
    assert!(ok, "{ledger}");
    assert!(ledger.ends_with("balanced\n"), "{ledger}");
    // Each message of s_net reached all.log, and sluice's own reached internal.log; one of
    // s_lone's reached none.
    assert!(
        ledger.contains(" reached a destination, 1 reached none"),
        "{ledger}"
    );
    for line in [
        format!("dst.network d_fwd#0 tcp,127.0.0.1:{fwd}: processed 10 = written 0 + dropped 5 (queue_full 5) + queued 5 (5 in flight)\n"),
        "dst.file d_kv#0 @OUT@/kv.log: processed 8 = written 8 + dropped 0 + queued 0\n".into(),
        "dst.file d_nowhere#0 /dev/null/x.log: processed 10 = written 0 + dropped 10 (unwritable 10) + queued 0\n".into(),
        "dst.file d_by_prog#0 @OUT@/${PROGRAM}/x.log: processed 10 = written 4 + dropped 6 (file_name_refused 6) + queued 0\n".into(),
    ] {
        let line = line.replace("@OUT@", &s.out.to_string_lossy());
        assert!(ledger.contains(&line), "{line} in:\n{ledger}");
    }
    // Each log path: what its sources offered it, routed on or filtered in it; each named
    // by its place in the configuration file.
    for (path, books) in [
        ("log#1", "offered 10 = routed 10 + filtered 0"),
        ("log#2", "offered 10 = routed 6 + filtered 4"),
        ("log#3", "offered 3 = routed 2 + filtered 1"),
        ("log#5", "offered 10 = routed 10 + filtered 0"),
    ] {
        let line = ledger
            .lines()
            .find(|l| l.starts_with(&format!("{path} ")))
            .unwrap_or_else(|| panic!("no {path} in:\n{ledger}"));
        assert!(line.ends_with(&format!(": {books}")), "{line}");
        assert!(line.contains(".conf:"), "{line}");
    }
    let (_, prometheus) = ctl(&s, &["stats", "--format", "prometheus"]);
    assert!(
        prometheus.contains(
            "id=\"d_nowhere#0\",instance=\"/dev/null/x.log\",reason=\"unwritable\"} 10\n"
        ),
        "{prometheus}"
    );
    // A reset starts the books again from what is queued.
    ctl(&s, &["stats", "--reset"]);
    let (ok, ledger) = ctl(&s, &["ledger"]);
    assert!(ok, "{ledger}");
    assert!(
        ledger.contains(&format!("dst.network d_fwd#0 tcp,127.0.0.1:{fwd}: processed 5 = written 0 + dropped 0 + queued 5 (5 in flight)\n")),
        "{ledger}"
    );
}

/// A source paused by flow control shows it (`paused_readers`, `paused_since`,
/// `window_in_use`: credits, of which a read takes at most half the window) and says so
/// through internal() after 10 s, and again when it reads on.
#[test]
fn flow_control_pauses_are_shown_and_said() {
    let (port, fwd) = (free_port(), free_port());
    let mut s = Running::start(
        Server::Sluice,
        &format!(
            r#"@version: 3.38
            options {{ stats-level(1); }};
            source s_net {{ network(ip(127.0.0.1) port({port}) log-iw-size(100) max-connections(1)); }};
            source s_int {{ internal(); }};
            destination d_fwd {{ network("127.0.0.1" port({fwd}) time-reopen(1)); }};
            destination d_int {{ file("@OUT@/internal.log"); }};
            log {{ source(s_net); destination(d_fwd); flags(flow-control); }};
            log {{ source(s_int); destination(d_int); }};"#
        ),
    );
    s.wait_tcp(port);
    // More than one read: the reader takes credits for two and waits for the third.
    let sender = std::thread::spawn(move || send_tcp(port, &input(20_000), Framing::Newline));
    let gauge = |s: &Running, kind: &str| counted(s, &format!("src.network.s_net.*.{kind}"));
    assert!(wait_until(Duration::from_secs(10), || gauge(
        &s,
        "paused_readers"
    ) == 1));
    assert!(gauge(&s, "paused_since") > 1_700_000_000);
    assert_eq!(gauge(&s, "window_in_use"), 100);
    let oldest = |s: &Running| counted(s, "dst.network.d_fwd*.oldest_queued_since");
    assert!(oldest(&s) > 1_700_000_000, "the queue's age is shown");
    let internal = s.out.join("internal.log");
    // Said once the pause passes 10 s, on the watcher's next look: "for 10s" or "for 11s".
    wait_for_text(
        &internal,
        "s: its destinations have not yet delivered what it read (window_in_use 100)",
        Duration::from_secs(20),
    );
    let said = std::fs::read_to_string(&internal).unwrap();
    assert!(
        said.contains("flow control has paused reading for 10s")
            || said.contains("flow control has paused reading for 11s"),
        "{said}"
    );
    // The server comes: everything is delivered, and the source reads again.
    let server = std::net::TcpListener::bind(("127.0.0.1", fwd)).unwrap();
    let reader = std::thread::spawn(move || {
        let (mut conn, _) = server.accept().unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 65536];
        while got.iter().filter(|b| **b == b'\n').count() < 20_000 {
            let n = conn.read(&mut buf).unwrap();
            assert!(
                n > 0,
                "closed after {} lines",
                got.iter().filter(|b| **b == b'\n').count()
            );
            got.extend_from_slice(&buf[..n]);
        }
        conn
    });
    let _conn = reader.join().unwrap();
    sender.join().unwrap();
    wait_for_text(&internal, "reading again after", Duration::from_secs(20));
    assert_eq!(gauge(&s, "paused_readers"), 0);
    assert_eq!(gauge(&s, "paused_since"), 0);
    assert_eq!(gauge(&s, "window_in_use"), 0);
    assert_eq!(oldest(&s), 0);
}

#[test]
fn level_three_counts_hosts_senders_programs_facilities_and_severities() {
    let (port, fwd) = (free_port(), free_port());
    let mut s = Running::start(
        Server::Sluice,
        &config(port, fwd, "").replace("stats-level(1)", "stats-level(3)"),
    );
    s.wait_tcp(port);
    send_tcp(
        port,
        b"<13>Jan  5 13:56:09 web1 nginx[1]: a\n<13>Jan  5 13:56:09 web1 nginx[1]: b\n<165>Jan  5 13:56:09 db2 postgres: c\n",
        Framing::Newline,
    );
    wait_lines(&s.out, 3, Duration::from_secs(10));
    let (_, csv) = ctl(&s, &["stats"]);
    for line in [
        "src.host;;web1;d;processed;2",
        "src.host;;db2;d;processed;1",
        "src.program;;nginx;d;processed;2",
        "src.program;;postgres;d;processed;1",
        "src.facility;;1;a;processed;2",
        "src.facility;;20;a;processed;1",
        "src.facility;;0;a;processed;0",
        "src.severity;;5;a;processed;3",
    ] {
        assert!(csv.contains(&format!("{line}\n")), "{line} not in:\n{csv}");
    }
    assert!(csv.contains("src.sender;;"), "{csv}");
}

#[test]
fn reopen_after_logrotate() {
    let port = free_port();
    let mut s = Running::start(
        Server::Sluice,
        &format!(
            r#"source s {{ network(ip(127.0.0.1) port({port})); }};
            destination d {{ file("@OUT@/all.log"); }};
            log {{ source(s); destination(d); }};"#
        ),
    );
    s.wait_tcp(port);
    let log = s.out.join("all.log");
    let rotated = s.out.join("all.log.1");
    send_tcp(port, &input(3), Framing::Newline);
    wait_lines(&s.out, 3, Duration::from_secs(10));
    for (round, reopen) in [("ctl", true), ("SIGUSR1", false)] {
        std::fs::rename(&log, &rotated).unwrap();
        if reopen {
            assert!(ctl(&s, &["reopen"]).0);
        } else {
            // SAFETY: kill(2) on the pid of a child we spawned.
            unsafe { libc::kill(s.child.id() as i32, libc::SIGUSR1) };
        }
        std::thread::sleep(Duration::from_millis(300));
        send_tcp(port, &input(2), Framing::Newline);
        let start = Instant::now();
        while std::fs::read_to_string(&log).map_or(0, |t| t.lines().count()) < 2 {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "{round}: no new file"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        std::fs::remove_file(&rotated).unwrap();
    }
}

/// A disk buffer shows when its oldest waiting message was queued (`oldest_queued_since`),
/// also for a backlog it finds at the start (counted from that start), and 0 once drained.
#[test]
fn a_disk_buffer_shows_its_oldest_message() {
    let (port, fwd) = (free_port(), free_port());
    let buffer = tempfile::tempdir().unwrap();
    let conf = format!(
        r#"@version: 3.38
        source s_net {{ network(ip(127.0.0.1) port({port})); }};
        destination d_fwd {{ network("127.0.0.1" port({fwd}) time-reopen(1)
            disk-buffer(reliable(yes) disk-buf-size(1048576) dir("{}"))); }};
        log {{ source(s_net); destination(d_fwd); flags(flow-control); }};"#,
        buffer.path().display()
    );
    let now = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
    };
    let oldest = |s: &Running| counted(s, "dst.network.d_fwd*.oldest_queued_since");
    let limit = Duration::from_secs(10);
    let sent_at = now();
    let mut first = Running::start(Server::Sluice, &conf);
    first.wait_tcp(port);
    send_tcp(port, &input(50), Framing::Newline);
    assert!(wait_until(limit, || counted(
        &first,
        "dst.network.d_fwd*.queued"
    ) == 50));
    let at = oldest(&first);
    assert!(at >= sent_at && at <= now(), "{at}");
    first.terminate();
    drop(first);

    // The next start finds the 50 and counts them from itself.
    std::thread::sleep(Duration::from_millis(1100));
    let started_at = now();
    let mut second = Running::start(Server::Sluice, &conf);
    second.wait_tcp(port);
    let at = oldest(&second);
    assert!(
        at >= started_at && at <= now(),
        "{at}, started {started_at}"
    );
    // The server comes: drained, nothing waits.
    let server = std::net::TcpListener::bind(("127.0.0.1", fwd)).unwrap();
    let (mut conn, _) = server.accept().unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 65536];
    while got.iter().filter(|b| **b == b'\n').count() < 50 {
        let n = conn.read(&mut buf).unwrap();
        assert!(n > 0);
        got.extend_from_slice(&buf[..n]);
    }
    assert!(wait_until(limit, || oldest(&second) == 0));
}
