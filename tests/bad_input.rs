//! What bad input gets (SPEC §6), end to end: a bad octet-counted frame closes only its own
//! connection with one error naming the peer; lines longer than `log-msg-size()` are split or
//! trimmed as configured and the connection stays open; malformed lines are kept whole. Each
//! is counted where `sluice ctl stats` shows it.

mod common;

use common::{free_port, send_udp_until_written, wait_lines, Running, Server};

/// The value of the counter of `kind` in `sluice ctl stats`, which lists every counter.
fn counter(s: &Running, kind: &str) -> u64 {
    let (ok, stats) = common::ctl(s, &["stats"]);
    assert!(ok, "{stats}");
    let wanted = format!(";{kind};");
    let line = stats
        .lines()
        .find(|l| l.contains(&wanted))
        .unwrap_or_else(|| panic!("no {kind} counter in\n{stats}"));
    line.rsplit(';').next().unwrap().parse().unwrap()
}
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

#[test]
fn a_bad_frame_closes_only_its_connection() {
    let port = free_port();
    let mut s = Running::start(
        Server::Sluice,
        &format!(
            r#"source s {{ syslog(ip(127.0.0.1) port({port}) transport(tcp) log-msg-size(1000)); }};
            destination d {{ file("@OUT@/all.log" template("$MSG\n")); }};
            log {{ source(s); destination(d); }};"#
        ),
    );
    s.wait_tcp(port);
    let frame = |text: &str| {
        let body = format!("<13>1 2025-01-05T13:56:09Z host app - - - {text}");
        format!("{} {body}", body.len())
    };
    let mut good = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let mut bad = TcpStream::connect(("127.0.0.1", port)).unwrap();
    good.write_all(frame("before").as_bytes()).unwrap();
    // A good frame, then one that is not octet counted, in one write: the good one is kept
    // and the connection closed.
    bad.write_all(format!("{}<13>this is not octet counted\n", frame("kept")).as_bytes())
        .unwrap();
    bad.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut buf = [0u8; 16];
    assert_eq!(
        bad.read(&mut buf).unwrap_or(0),
        0,
        "the bad connection is closed"
    );
    // An announced frame larger than log-msg-size() is refused the same way.
    let mut big = TcpStream::connect(("127.0.0.1", port)).unwrap();
    big.write_all(b"5000 <13>1 - h a - - - x").unwrap();
    big.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    assert_eq!(
        big.read(&mut buf).unwrap_or(0),
        0,
        "the oversized frame's connection is closed"
    );
    // The other connection goes on.
    good.write_all(frame("after").as_bytes()).unwrap();
    drop(good);
    assert_eq!(wait_lines(&s.out, 3, Duration::from_secs(10)), 3);
    assert_eq!(counter(&s, "framing_errors"), 2);
    s.terminate();
    let text = std::fs::read_to_string(s.out.join("all.log")).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines.sort_unstable();
    assert_eq!(lines, ["after", "before", "kept"]);
    let err = s.stderr();
    assert_eq!(
        err.matches("invalid octet-counting frame header").count(),
        1,
        "{err}"
    );
    assert!(err.contains("closing connection from 127.0.0.1:"), "{err}");
    assert!(err.contains("larger than log-msg-size(1000)"), "{err}");
}

#[test]
fn long_lines_are_split_or_trimmed_and_the_connection_stays() {
    for (trim, want) in [
        ("no", vec!["[aaaaaaaaaa]", "[bbbbbbbbbb]", "[cc]", "[next]"]),
        ("yes", vec!["[aaaaaaaaaa]", "[next]"]),
    ] {
        let port = free_port();
        let mut s = Running::start(
            Server::Sluice,
            &format!(
                r#"source s {{ tcp(ip(127.0.0.1) port({port}) log-msg-size(10) trim-large-messages({trim}) flags(no-parse)); }};
                destination d {{ file("@OUT@/all.log" template("[$MSG]\n")); }};
                log {{ source(s); destination(d); }};"#
            ),
        );
        s.wait_tcp(port);
        common::send_tcp(
            port,
            b"aaaaaaaaaabbbbbbbbbbcc\nnext\n",
            common::Framing::Newline,
        );
        assert_eq!(
            wait_lines(&s.out, want.len(), Duration::from_secs(10)),
            want.len()
        );
        // Split: two pieces of ten; trimmed: one, the rest of the line dropped.
        let oversized = if trim == "no" { 2 } else { 1 };
        assert_eq!(counter(&s, "oversized_messages"), oversized);
        s.terminate();
        let got = std::fs::read_to_string(s.out.join("all.log")).unwrap();
        assert_eq!(
            got.lines().collect::<Vec<_>>(),
            want,
            "trim-large-messages({trim})"
        );
    }
}

#[test]
fn malformed_lines_are_kept_whole() {
    let port = free_port();
    let mut s = Running::start(
        Server::Sluice,
        &format!(
            r#"source s {{ tcp(ip(127.0.0.1) port({port}) keep-hostname(yes)); }};
            destination d {{ file("@OUT@/all.log" template("$PRI|$HOST|$PROGRAM|$MSG|$TAGS\n")); }};
            log {{ source(s); destination(d); }};"#
        ),
    );
    s.wait_tcp(port);
    let input = b"<1x3>Jan  5 13:56:09 host prog: bad pri\nno header at all\n\xff\xfe binary \x01 junk\n<13>\n";
    common::send_tcp(port, input, common::Framing::Newline);
    assert_eq!(wait_lines(&s.out, 4, Duration::from_secs(10)), 4);
    s.terminate();
    let got = String::from_utf8_lossy(&std::fs::read(s.out.join("all.log")).unwrap()).into_owned();
    let lines: Vec<&str> = got.lines().collect();
    assert_eq!(
        lines[0],
        "13|localhost||<1x3>Jan  5 13:56:09 host prog: bad pri|syslog.invalid_pri,.source.s"
    );
    assert!(lines[1].ends_with("|no|header at all|syslog.missing_pri,syslog.missing_timestamp,syslog.rfc3164_missing_header,.source.s"), "{}", lines[1]);
    assert!(lines[2].contains("binary"), "{}", lines[2]);
    assert!(lines[3].starts_with("13|localhost|||"), "{}", lines[3]);
}

#[test]
fn long_datagrams_are_cut_at_log_msg_size() {
    let port = common::free_udp_port();
    let mut s = Running::start(
        Server::Sluice,
        &format!(
            r#"source s {{ udp(ip(127.0.0.1) port({port}) log-msg-size(40) flags(no-parse)); }};
            destination d {{ file("@OUT@/all.log" template("[$MSG]\n")); }};
            log {{ source(s); destination(d); }};"#
        ),
    );
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let long = "x".repeat(100);
    send_udp_until_written(&udp, port, long.as_bytes(), &s.out);
    assert!(counter(&s, "oversized_messages") >= 1);
    s.terminate();
    let text = std::fs::read_to_string(s.out.join("all.log")).unwrap();
    assert_eq!(
        text.lines().next().unwrap(),
        format!("[{}]", "x".repeat(40))
    );
}
