//! Real clients deliver to sluice: util-linux `logger` (UDP, TCP, RFC3164, RFC5424, octet
//! counting, unix sockets), syslog-ng's `loggen`, and Python's `logging.handlers.SysLogHandler`.

mod common;

use common::{free_port, free_udp_port, send_udp_until_written, wait_lines, Running, Server};
use std::process::Command;
use std::time::Duration;

/// A server with one source body and a file destination writing `$PROGRAM|$MSG`.
fn server(source: &str) -> Running {
    Running::start(
        Server::Sluice,
        &format!(
            "source s {{ {source} }};\ndestination d {{ file(\"@OUT@/all.log\" template(\"$PROGRAM|$PID|$MSGID|$SDATA|$MSG\\n\")); }};\nlog {{ source(s); destination(d); }};\n"
        ),
    )
}

fn have(tool: &str) -> bool {
    let found = Command::new(tool).arg("--version").output().is_ok()
        || Command::new(tool).arg("--help").output().is_ok();
    if !found {
        if std::env::var_os("SLUICE_REQUIRE_PEERS").is_some() {
            panic!("{tool} is not installed: run .ci/install-test-deps.sh");
        }
        eprintln!("SKIPPED: {tool} is not installed");
    }
    found
}

fn logger(args: &[&str]) {
    let status = Command::new("logger")
        .args(args)
        .status()
        .expect("run logger");
    assert!(status.success(), "logger {args:?} failed");
}

#[test]
fn logger_over_udp_and_tcp_in_both_formats() {
    if !have("logger") {
        return;
    }
    let (tcp, udp, framed) = (free_port(), free_udp_port(), free_port());
    let mut s = server(&format!(
        "network(ip(127.0.0.1) port({tcp}) transport(tcp)); network(ip(127.0.0.1) port({udp}) transport(udp)); syslog(ip(127.0.0.1) port({framed}) transport(tcp));"
    ));
    s.wait_tcp(tcp);
    s.wait_tcp(framed);
    let (tcp, udp, framed) = (tcp.to_string(), udp.to_string(), framed.to_string());
    logger(&[
        "-n",
        "127.0.0.1",
        "-P",
        &udp,
        "--udp",
        "--rfc3164",
        "-t",
        "udp3164",
        "hello udp 3164",
    ]);
    logger(&[
        "-n",
        "127.0.0.1",
        "-P",
        &tcp,
        "--tcp",
        "--rfc3164",
        "-t",
        "tcp3164",
        "hello tcp 3164",
    ]);
    logger(&[
        "-n",
        "127.0.0.1",
        "-P",
        &framed,
        "--tcp",
        "--octet-count",
        "--rfc5424",
        "-t",
        "framed5424",
        "--msgid",
        "ID7",
        "--sd-id",
        "x@1",
        "--sd-param",
        "k=\"v\"",
        "hello octet 5424",
    ]);
    assert!(wait_lines(&s.out, 3, Duration::from_secs(10)) >= 3);
    let out = s.settle_and_stop();
    let mut lines = out.lines("all.log");
    lines.sort();
    assert_eq!(lines.len(), 3, "{lines:?}");
    // logger adds its own timeQuality element before the one asked for.
    assert!(
        lines[0].starts_with("framed5424||ID7|[timeQuality "),
        "{lines:?}"
    );
    assert!(
        lines[0].ends_with("[x@1 k=\"v\"]|hello octet 5424"),
        "{lines:?}"
    );
    assert_eq!(lines[1], "tcp3164||||hello tcp 3164", "{lines:?}");
    assert_eq!(lines[2], "udp3164||||hello udp 3164", "{lines:?}");
}

#[test]
fn logger_over_unix_sockets() {
    if !have("logger") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let dgram = dir.path().join("dev-log");
    let stream = dir.path().join("stream-log");
    let s = server(&format!(
        "unix-dgram(\"{}\"); unix-stream(\"{}\");",
        dgram.display(),
        stream.display()
    ));
    for _ in 0..100 {
        if dgram.exists() && stream.exists() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    logger(&[
        "--socket",
        &dgram.to_string_lossy(),
        "--socket-errors=on",
        "-t",
        "dgram",
        "over unix-dgram",
    ]);
    logger(&[
        "--socket",
        &stream.to_string_lossy(),
        "--socket-errors=on",
        "--tcp",
        "-t",
        "stream",
        "over unix-stream",
    ]);
    assert!(wait_lines(&s.out, 2, Duration::from_secs(10)) >= 2);
    let mut lines = s.settle_and_stop().lines("all.log");
    lines.sort();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(
        lines[0].starts_with("dgram|") && lines[0].ends_with("|over unix-dgram"),
        "{lines:?}"
    );
    assert!(
        lines[1].starts_with("stream|") && lines[1].ends_with("|over unix-stream"),
        "{lines:?}"
    );
}

#[test]
fn loggen_delivers_every_message() {
    if common::syslog_ng().is_none() || !have("loggen") {
        return;
    }
    let (tcp, framed, udp) = (free_port(), free_port(), free_udp_port());
    let mut s = server(&format!(
        "network(ip(127.0.0.1) port({tcp})); syslog(ip(127.0.0.1) port({framed})); network(ip(127.0.0.1) port({udp}) transport(udp) so-rcvbuf(8388608));"
    ));
    s.wait_tcp(tcp);
    s.wait_tcp(framed);
    let run = |args: &[&str]| {
        let out = Command::new("loggen")
            .args(args)
            .output()
            .expect("run loggen");
        assert!(
            out.status.success(),
            "loggen {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    run(&[
        "-i",
        "-S",
        "-n",
        "5000",
        "-r",
        "100000",
        "--active-connections",
        "4",
        "127.0.0.1",
        &tcp.to_string(),
    ]);
    run(&[
        "-i",
        "-S",
        "-P",
        "-n",
        "5000",
        "-r",
        "100000",
        "127.0.0.1",
        &framed.to_string(),
    ]);
    run(&[
        "-i",
        "-D",
        "-n",
        "1000",
        "-r",
        "5000",
        "127.0.0.1",
        &udp.to_string(),
    ]);
    // `-n` counts per connection: 4 × 5,000 over TCP, 5,000 framed, 1,000 over UDP.
    let got = wait_lines(&s.out, 26_000, Duration::from_secs(30));
    assert_eq!(got, 26_000);
    let lines = s.settle_and_stop().lines("all.log");
    assert!(
        lines.iter().all(|l| l.contains("seq: ")),
        "every line carries loggen's payload"
    );
}

#[test]
fn python_syslog_handler_over_udp_and_tcp() {
    if !have("python3") {
        return;
    }
    let (tcp, udp) = (free_port(), free_udp_port());
    let mut s = server(&format!(
        "network(ip(127.0.0.1) port({tcp})); network(ip(127.0.0.1) port({udp}) transport(udp));"
    ));
    s.wait_tcp(tcp);
    let script = format!(
        r#"
import logging, logging.handlers, socket
for name, sock in (("pyudp", socket.SOCK_DGRAM), ("pytcp", socket.SOCK_STREAM)):
    port = {udp} if sock == socket.SOCK_DGRAM else {tcp}
    handler = logging.handlers.SysLogHandler(address=("127.0.0.1", port), socktype=sock)
    handler.setFormatter(logging.Formatter(name + "[42]: %(message)s"))
    log = logging.getLogger(name)
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    for i in range(100):
        log.warning("python message %d", i)
    handler.close()
"#
    );
    let status = Command::new("python3")
        .arg("-c")
        .arg(script)
        .status()
        .unwrap();
    assert!(status.success());
    assert!(wait_lines(&s.out, 200, Duration::from_secs(10)) >= 200);
    let lines = s.settle_and_stop().lines("all.log");
    // TCP SysLogHandler ends each message with NUL instead of a newline: both are line ends.
    for name in ["pyudp", "pytcp"] {
        let mine: Vec<&String> = lines.iter().filter(|l| l.starts_with(name)).collect();
        assert_eq!(mine.len(), 100, "{name}: {lines:?}");
        assert_eq!(mine[99], &format!("{name}|42|||python message 99"));
    }
}

/// `transport(proxied-tcp)`: the PROXY header of syslog-ng's `loggen -H` (version 1) and of a
/// version 2 sender announce the client, which becomes `$SOURCEIP`; a connection without a
/// header is refused with an error, and the others go on.
#[test]
fn proxied_tcp_takes_the_announced_client() {
    let port = free_port();
    let mut s = Running::start(
        Server::Sluice,
        &format!(
            r#"options {{ use-dns(no); }};
            source s {{ network(ip(127.0.0.1) port({port}) transport("proxied-tcp")); }};
            destination d {{ file("@OUT@/all.log" template("$SOURCEIP|$HOST_FROM|$MSG\n")); }};
            destination e {{ file("@OUT@/endpoints.log" template("$SOURCEIP $SOURCEPORT $PEERIP $DESTIP $DESTPORT $PROTO\n")); }};
            log {{ source(s); destination(d); destination(e); }};"#
        ),
    );
    s.wait_tcp(port);
    let loggen = common::sluice_bin();
    let out = Command::new(loggen)
        .args([
            "loggen",
            "-H",
            "--proxy-src-ip",
            "203.0.113.7",
            "-n",
            "3",
            "-r",
            "100",
        ])
        .args(["-Q", "127.0.0.1", &port.to_string()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Version 2, IPv6, then data in the same packet.
    let mut v2 = b"\r\n\r\n\0\r\nQUIT\n".to_vec();
    v2.extend_from_slice(&[0x21, 0x21, 0, 36]);
    v2.extend_from_slice(
        &"2001:db8::7"
            .parse::<std::net::Ipv6Addr>()
            .unwrap()
            .octets(),
    );
    v2.extend_from_slice(
        &"2001:db8::1"
            .parse::<std::net::Ipv6Addr>()
            .unwrap()
            .octets(),
    );
    v2.extend_from_slice(&[0x0d, 0x05, 0x02, 0x02]);
    v2.extend_from_slice(b"<13>Jan  5 13:56:09 h p: over version 2\n");
    common::send_raw_tcp(port, &v2);
    common::send_raw_tcp(port, b"<13>Jan  5 13:56:09 h p: no header\n");
    assert_eq!(wait_lines(&s.out, 8, Duration::from_secs(10)), 8);
    let out = s.settle_and_stop();
    // The announced client and destination; the proxy (here loggen itself) is $PEERIP.
    let endpoints = out.lines("endpoints.log");
    assert_eq!(
        endpoints[0], "203.0.113.7 3333 127.0.0.1 192.168.1.2 4444 6",
        "{endpoints:?}"
    );
    assert!(
        endpoints.contains(&"2001:db8::7 3333 127.0.0.1 2001:db8::1 514 6".to_string()),
        "{endpoints:?}"
    );
    let lines = out.lines("all.log");
    assert_eq!(
        lines
            .iter()
            .filter(|l| l.starts_with("203.0.113.7|203.0.113.7|seq: "))
            .count(),
        3,
        "{lines:?}"
    );
    assert!(
        lines.contains(&"2001:db8::7|2001:db8::7|over version 2".to_string()),
        "{lines:?}"
    );
    assert!(
        out.stderr.contains("bad PROXY protocol header"),
        "{}",
        out.stderr
    );
}

/// Datagrams from several senders, interleaved and read in one batch, each keep their own
/// sender: the source looks an origin up once per run of one sender's datagrams.
#[test]
fn interleaved_udp_senders_keep_their_own_addresses() {
    let port = free_udp_port();
    let mut s = Running::start(
        Server::Sluice,
        &format!(
            "source s {{ udp(ip(0.0.0.0) port({port})); }};\ndestination d {{ file(\"@OUT@/all.log\" template(\"$SOURCEIP $MSG\\n\")); }};\nlog {{ source(s); destination(d); }};\n"
        ),
    );
    let senders: Vec<std::net::UdpSocket> = ["127.0.0.2", "127.0.0.3"]
        .iter()
        .map(|ip| std::net::UdpSocket::bind((*ip, 0)).expect("bind a loopback address"))
        .collect();
    let mut seen =
        send_udp_until_written(&senders[0], port, b"<13>Jan  5 13:56:09 h p: probe", &s.out);
    assert!(seen >= 1, "no datagram arrived");
    seen = wait_lines(&s.out, seen, Duration::from_millis(300));
    let order = [0, 0, 1, 0, 1, 1, 0, 1];
    for (i, &who) in order.iter().enumerate() {
        let text = format!("<13>Jan  5 13:56:09 h p: from{who} n{i}");
        senders[who]
            .send_to(text.as_bytes(), ("127.0.0.1", port))
            .unwrap();
    }
    assert!(wait_lines(&s.out, seen + order.len(), Duration::from_secs(10)) >= seen + order.len());
    s.terminate();
    let text = std::fs::read_to_string(s.out.join("all.log")).unwrap();
    let lines: Vec<&str> = text.lines().filter(|l| !l.ends_with("probe")).collect();
    assert_eq!(lines.len(), order.len(), "{text}");
    for (i, &who) in order.iter().enumerate() {
        assert_eq!(lines[i], format!("127.0.0.{} from{who} n{i}", who + 2));
    }
}

/// A unix-dgram source names its senders as syslog-ng does: `.unix.pid`, `.unix.uid` and
/// `.unix.gid` from the socket's credentials; `$PID` stays what the message says.
#[test]
fn unix_datagram_senders_are_named_by_their_credentials() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("log.sock");
    let r = Running::start(
        Server::Sluice,
        &format!(
            r#"@version: 3.38
            source s {{ unix-dgram("{}"); }};
            destination d {{ file("@OUT@/all.log" template("pid=[$PID] upid=[${{.unix.pid}}] uid=[${{.unix.uid}}] gid=[${{.unix.gid}}] $MSG\n")); }};
            destination c {{ file("@OUT@/cmdline.log" template("${{.unix.cmdline}}\n")); }};
            log {{ source(s); destination(c); }};
            log {{ source(s); destination(d); }};"#,
            sock.display()
        ),
    );
    common::wait_until(std::time::Duration::from_secs(10), || sock.exists());
    let client = std::os::unix::net::UnixDatagram::unbound().unwrap();
    client
        .send_to(b"<13>Nov 24 10:00:00 app: no pid", &sock)
        .unwrap();
    client
        .send_to(b"<13>Nov 24 10:00:00 app[99]: with pid", &sock)
        .unwrap();
    let file = r.out.join("all.log");
    common::wait_until(std::time::Duration::from_secs(10), || {
        std::fs::read_to_string(&file).is_ok_and(|t| t.lines().count() >= 2)
    });
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    let me = std::process::id();
    // Our command line, its arguments joined by spaces, as syslog-ng gives it.
    let mine: String = std::fs::read("/proc/self/cmdline")
        .unwrap()
        .iter()
        .map(|&b| if b < 0x20 { ' ' } else { b as char })
        .collect();
    let cmdline = r.out.join("cmdline.log");
    common::wait_until(std::time::Duration::from_secs(10), || cmdline.exists());
    assert_eq!(
        std::fs::read_to_string(&cmdline).unwrap().lines().next(),
        Some(mine.as_str())
    );
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        format!(
            "pid=[] upid=[{me}] uid=[{uid}] gid=[{gid}] no pid\npid=[99] upid=[{me}] uid=[{uid}] gid=[{gid}] with pid\n"
        )
    );
}

/// A unix-stream connection is named by its peer's credentials too; with
/// `pass-unix-credentials(no)` neither kind of unix socket asks for them — given on the
/// source, or in `options {}` for every source that does not say otherwise.
#[test]
fn unix_stream_credentials_and_turning_them_off() {
    let me = std::process::id();
    let cases = [
        (
            "",
            "",
            "pass-unix-credentials(no)",
            [me.to_string(), String::new()],
        ),
        (
            "options { pass-unix-credentials(no); };",
            "",
            "pass-unix-credentials(yes)",
            [String::new(), me.to_string()],
        ),
    ];
    for (options, stream_option, dgram_option, [stream_pid, dgram_pid]) in cases {
        let dir = tempfile::tempdir().unwrap();
        let (stream, dgram) = (dir.path().join("s.sock"), dir.path().join("d.sock"));
        let r = Running::start(
            Server::Sluice,
            &format!(
                r#"@version: 3.38
                {options}
                source s {{ unix-stream("{}" {stream_option}); unix-dgram("{}" {dgram_option}); }};
                destination d {{ file("@OUT@/all.log" template("upid=[${{.unix.pid}}] $MSG\n")); }};
                log {{ source(s); destination(d); }};"#,
                stream.display(),
                dgram.display()
            ),
        );
        common::wait_until(Duration::from_secs(10), || {
            stream.exists() && dgram.exists()
        });
        common::send_unix(&stream, b"<13>Nov 24 10:00:00 app: over a stream\n");
        std::os::unix::net::UnixDatagram::unbound()
            .unwrap()
            .send_to(b"<13>Nov 24 10:00:00 app: a datagram", &dgram)
            .unwrap();
        let file = r.out.join("all.log");
        common::wait_until(Duration::from_secs(10), || {
            std::fs::read_to_string(&file).is_ok_and(|t| t.lines().count() >= 2)
        });
        let mut got: Vec<String> = std::fs::read_to_string(&file)
            .unwrap()
            .lines()
            .map(String::from)
            .collect();
        got.sort();
        let mut want = [
            format!("upid=[{dgram_pid}] a datagram"),
            format!("upid=[{stream_pid}] over a stream"),
        ];
        want.sort();
        assert_eq!(got, want, "{options}");
    }
}
