//! `sluice loggen` against sluice: every mode delivers what it says it sent, `--check` proves
//! nothing was lost, duplicated or reordered, and the report lines look like syslog-ng's loggen.

mod common;

use common::{free_port, free_udp_port, sluice_bin, wait_lines, Running, Server};
use std::io::Read;
use std::process::Command;
use std::time::Duration;

fn loggen(args: &[&str]) -> String {
    let out = Command::new(sluice_bin())
        .arg("loggen")
        .args(args)
        .output()
        .expect("run sluice loggen");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "loggen {args:?}: {stderr}");
    stderr
}

fn check(file: &std::path::Path) -> (bool, String) {
    let out = Command::new(sluice_bin())
        .arg("loggen")
        .arg("--check")
        .arg(file)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn every_mode_delivers_everything_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("log.sock");
    let (tcp, framed, udp) = (free_port(), free_port(), free_udp_port());
    let mut s = Running::start(
        Server::Sluice,
        &format!(
            r#"source s {{
                network(ip(127.0.0.1) port({tcp}) max-connections(50));
                syslog(ip(127.0.0.1) port({framed}));
                network(ip(127.0.0.1) port({udp}) transport(udp) so-rcvbuf(8388608));
                unix-stream("{}");
            }};
            destination tcp {{ file("@OUT@/tcp.log"); }};
            destination rest {{ file("@OUT@/rest-${{SOURCEIP}}.log"); }};
            log {{ source(s); destination(tcp); }};"#,
            sock.display()
        ),
    );
    s.wait_tcp(tcp);
    s.wait_tcp(framed);
    let report = loggen(&[
        "-r",
        "0",
        "-n",
        "20000",
        "--active-connections",
        "3",
        "-Q",
        "127.0.0.1",
        &tcp.to_string(),
    ]);
    assert!(
        report.starts_with("average rate = ")
            && report.contains("msg/sec, count=60000, time=")
            && report.contains(", (average) msg size=256, bandwidth="),
        "{report}"
    );
    assert_eq!(wait_lines(&s.out, 60_000, Duration::from_secs(30)), 60_000);
    let (clean, text) = check(&s.out.join("tcp.log"));
    assert!(clean, "{text}");
    assert!(
        text.contains(
            "total: runs=1, connections=3, received=60000, lost=0, duplicated=0, out-of-order=0"
        ),
        "{text}"
    );

    // RFC5424 with octet counting, UDP, and a unix stream each deliver everything too.
    loggen(&[
        "-P",
        "-r",
        "0",
        "-n",
        "5000",
        "-s",
        "300",
        "-Q",
        "127.0.0.1",
        &framed.to_string(),
    ]);
    loggen(&[
        "-D",
        "-r",
        "20000",
        "-n",
        "2000",
        "-Q",
        "127.0.0.1",
        &udp.to_string(),
    ]);
    loggen(&["-x", "-r", "0", "-n", "3000", "-Q", &sock.to_string_lossy()]);
    assert_eq!(wait_lines(&s.out, 70_000, Duration::from_secs(30)), 70_000);
    let out = s.settle_and_stop();
    let all = out.lines("tcp.log");
    let framed_lines = all
        .iter()
        .filter(|l| l.contains("prg00000[1234]: seq:") || l.contains("prg00000 1234"))
        .count();
    assert_eq!(all.len(), 70_000);
    assert!(framed_lines > 0);
}

/// Connections are shared out over a few threads: with more connections than threads, each
/// still sends all of its messages, in order, at no more than its rate.
#[test]
fn many_connections_share_threads_and_keep_their_pace() {
    let tcp = free_port();
    let mut s = Running::start(
        Server::Sluice,
        &format!(
            r#"source s {{ network(ip(127.0.0.1) port({tcp}) max-connections(100)); }};
            destination d {{ file("@OUT@/all.log"); }};
            log {{ source(s); destination(d); }};"#
        ),
    );
    s.wait_tcp(tcp);
    let started = std::time::Instant::now();
    loggen(&[
        "-r",
        "2000",
        "-n",
        "300",
        "--active-connections",
        "40",
        "-Q",
        "127.0.0.1",
        &tcp.to_string(),
    ]);
    // 300 messages at 2,000 a second take 150 ms on each connection, however many share a
    // thread.
    assert!(started.elapsed() >= Duration::from_millis(145));
    assert_eq!(wait_lines(&s.out, 12_000, Duration::from_secs(30)), 12_000);
    let (clean, text) = check(&s.out.join("all.log"));
    assert!(clean, "{text}");
    assert!(
        text.contains(
            "total: runs=1, connections=40, received=12000, lost=0, duplicated=0, out-of-order=0"
        ),
        "{text}"
    );
}

/// A single connection's reads are parsed and formatted by parallel tasks; what they queue must
/// still reach each file in the order it was sent, for a fixed name and a templated one.
#[test]
fn one_busy_connection_stays_in_order() {
    let tcp = free_port();
    let mut s = Running::start(
        Server::Sluice,
        &format!(
            r#"source s {{ network(ip(127.0.0.1) port({tcp})); }};
            destination d {{ file("@OUT@/one.log"); file("@OUT@/by-host-${{HOST}}.log"); }};
            log {{ source(s); destination(d); }};"#
        ),
    );
    s.wait_tcp(tcp);
    loggen(&[
        "-r",
        "0",
        "-n",
        "400000",
        "-Q",
        "127.0.0.1",
        &tcp.to_string(),
    ]);
    assert_eq!(
        wait_lines(&s.out, 800_000, Duration::from_secs(60)),
        800_000
    );
    for file in std::fs::read_dir(&s.out).unwrap() {
        let (clean, text) = check(&file.unwrap().path());
        assert!(clean, "{text}");
        assert!(
            text.contains("received=400000, lost=0, duplicated=0, out-of-order=0"),
            "{text}"
        );
    }
    s.settle_and_stop();
}

#[test]
fn replaying_a_file_in_a_loop() {
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.log");
    std::fs::write(&input, "<13>Jan  5 13:56:09 host a: one\n<13>Jan  5 13:56:09 host b: two\n<13>Jan  5 13:56:09 host c: three\n").unwrap();
    let mut s = Running::start(
        Server::Sluice,
        &format!("source s {{ network(ip(127.0.0.1) port({port}) keep-hostname(yes)); }};\ndestination d {{ file(\"@OUT@/all.log\" template(\"$PROGRAM $MSG\\n\")); }};\nlog {{ source(s); destination(d); }};\n"),
    );
    s.wait_tcp(port);
    let input = input.to_string_lossy().into_owned();
    loggen(&[
        "-R",
        &input,
        "-d",
        "-r",
        "0",
        "-n",
        "7",
        "-l",
        "-Q",
        "127.0.0.1",
        &port.to_string(),
    ]);
    loggen(&[
        "-R",
        &input,
        "-r",
        "0",
        "-Q",
        "127.0.0.1",
        &port.to_string(),
    ]);
    assert_eq!(wait_lines(&s.out, 10, Duration::from_secs(10)), 10);
    let lines = s.settle_and_stop().lines("all.log");
    assert_eq!(
        lines,
        [
            "a one", "b two", "c three", "a one", "b two", "c three", "a one", "a one", "b two",
            "c three"
        ]
    );
}

#[test]
fn proxy_header_and_csv_output() {
    // A plain listener shows what goes on the wire.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let reader = std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().unwrap();
        let mut all = String::new();
        conn.read_to_string(&mut all).unwrap();
        all
    });
    let out = Command::new(sluice_bin())
        .args([
            "loggen",
            "-H",
            "-C",
            "-r",
            "0",
            "-n",
            "3",
            "-s",
            "200",
            "127.0.0.1",
            &port.to_string(),
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let wire = reader.join().unwrap();
    assert!(
        wire.starts_with("PROXY TCP4 192.168.1.1 192.168.1.2 3333 4444\r\n"),
        "{wire}"
    );
    let mut lines = wire.lines();
    lines.next();
    let messages: Vec<&str> = lines.collect();
    assert_eq!(messages.len(), 3);
    assert!(
        messages
            .iter()
            .all(|m| m.len() == 200 && m.starts_with("<38>")),
        "{messages:?}"
    );
    assert!(messages[2].contains("seq: 0000000002, thread: 0000"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.starts_with("Time;Count;Rate\n"), "{stdout}");
    assert!(
        stdout.lines().last().unwrap().split(';').nth(1) == Some("3"),
        "{stdout}"
    );
}

/// A connection the server resets ends alone: the connections that share its thread go on and
/// send everything, and loggen reports the failure.
#[test]
fn a_reset_connection_ends_alone() {
    use std::io::BufRead;
    const CONNS: usize = 32; // two per loggen thread
    const EACH: usize = 250;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = std::thread::spawn(move || {
        let mut readers = Vec::new();
        for i in 0..CONNS {
            let (conn, _) = listener.accept().unwrap();
            if i == 0 {
                // SO_LINGER 0: the close is a reset, and the next send fails.
                use std::os::fd::AsRawFd;
                let linger = libc::linger {
                    l_onoff: 1,
                    l_linger: 0,
                };
                // SAFETY: setsockopt on an open socket with a valid linger struct.
                let set = unsafe {
                    libc::setsockopt(
                        conn.as_raw_fd(),
                        libc::SOL_SOCKET,
                        libc::SO_LINGER,
                        (&linger as *const libc::linger).cast(),
                        std::mem::size_of::<libc::linger>() as libc::socklen_t,
                    )
                };
                assert_eq!(set, 0);
                drop(conn);
                continue;
            }
            readers.push(std::thread::spawn(move || {
                std::io::BufReader::new(conn).lines().count()
            }));
        }
        readers
            .into_iter()
            .map(|r| r.join().unwrap())
            .collect::<Vec<_>>()
    });
    let out = Command::new(sluice_bin())
        .args(["loggen", "-r", "500", "-n", &EACH.to_string(), "-Q"])
        .args(["--active-connections", &CONNS.to_string()])
        .args(["127.0.0.1", &port.to_string()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("send failed"), "{stderr}");
    let counts = server.join().unwrap();
    assert_eq!(counts, vec![EACH; CONNS - 1], "{stderr}");
}
