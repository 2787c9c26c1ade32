//! The contract every source keeps (`docs/driver-contract.md`), run over every source driver
//! sluice registers (`sources::registry::DRIVERS`): a sluice with the source under test
//! writes what it reads into a file, and numbered messages are fed to it the way its driver
//! reads them — over a connection, datagrams, a file it follows, a program, a pipe, standard
//! input, or a second sluice that sends RELP.
//!
//! - What it read is delivered once (and in order, where its input has one), counted under
//!   its source statement's name.
//! - It stops within the stop's grace.
//!
//! A driver that cannot run here the same way names, in [`ELSEWHERE`], the test that holds it
//! to its contract against its real input; `every_registered_source_has_a_contract_entry`
//! fails for a registered driver that is in neither list.

mod common;

use common::{ctl, free_port, free_udp_port, send_tcp, send_unix, Framing, Running, Server};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Where a source reads: its ports and the directory of its files and sockets.
struct Feed {
    port: u16,
    udp_port: u16,
    dir: tempfile::TempDir,
}

impl Feed {
    fn new() -> Feed {
        Feed {
            port: free_port(),
            udp_port: free_udp_port(),
            dir: tempfile::tempdir().expect("temporary directory"),
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

/// How the numbered messages reach a source: what is kept alive until they are delivered.
type Fed = Box<dyn std::any::Any>;

/// A source under the contract.
struct Kind {
    name: &'static str,
    /// The source driver as a configuration writes it.
    source: fn(&Feed) -> String,
    /// Prepares what the source reads before the server starts (a file to follow).
    before: fn(&Feed, &[u8]),
    /// Sends the messages once the server runs.
    feed: fn(&Feed, &mut Running, &[u8]) -> Fed,
    /// The input has an order the source keeps (one connection, one file, one socket).
    ordered: bool,
    /// How more messages reach it after a reload.
    after_reload: AfterReload,
}

/// How more messages reach a source after a reload changed it.
enum AfterReload {
    /// Fed as the first ones were: a new connection, datagrams, a pipe written again.
    FedAgain,
    /// Appended to the file it follows (in the feed's directory).
    Appended(&'static str),
    /// A reload starts its program again, which prints its input again (as syslog-ng's
    /// `program()` does): nothing to check beyond the first run.
    Restarts,
}

use AfterReload::{Appended, FedAgain, Restarts};

fn nothing_before(_: &Feed, _: &[u8]) {}

fn nothing(_: &Feed, _: &mut Running, _: &[u8]) -> Fed {
    Box::new(())
}

const KINDS: &[Kind] = &[
    Kind {
        name: "network",
        source: |f| format!("network(ip(127.0.0.1) port({}))", f.port),
        before: nothing_before,
        feed: |f, s, input| {
            s.wait_tcp(f.port);
            send_tcp(f.port, input, Framing::Newline);
            Box::new(())
        },
        ordered: true,
        after_reload: FedAgain,
    },
    Kind {
        name: "syslog",
        source: |f| format!("syslog(ip(127.0.0.1) port({}))", f.port),
        before: nothing_before,
        feed: |f, s, input| {
            s.wait_tcp(f.port);
            send_tcp(f.port, &rfc5424(input), Framing::OctetCounted);
            Box::new(())
        },
        ordered: true,
        after_reload: FedAgain,
    },
    Kind {
        name: "udp",
        source: |f| format!("udp(ip(127.0.0.1) port({}) so-rcvbuf(8388608))", f.udp_port),
        before: nothing_before,
        feed: |f, s, input| {
            bound(s);
            send_datagrams(f.udp_port, input);
            Box::new(())
        },
        ordered: true,
        after_reload: FedAgain,
    },
    Kind {
        name: "udp-balancer",
        source: |f| {
            format!(
                "udp-balancer(ip(127.0.0.1) port({}) listeners(2) so-rcvbuf(8388608))",
                f.udp_port
            )
        },
        before: nothing_before,
        feed: |f, s, input| {
            bound(s);
            send_datagrams(f.udp_port, input);
            Box::new(())
        },
        // Spread over its sockets whatever the sender: each is read on its own.
        ordered: false,
        after_reload: FedAgain,
    },
    Kind {
        name: "relp",
        source: |f| format!("relp(ip(127.0.0.1) port({}))", f.port),
        before: nothing_before,
        feed: |f, s, input| {
            s.wait_tcp(f.port);
            // rsyslog's omrelp is not always here; sluice's relp() speaks as it does
            // (tests/relp.rs runs both against each other).
            let port = free_port();
            let mut sender = Running::start(
                Server::Sluice,
                &format!(
                    r#"@version: 3.38
                    options {{ keep-hostname(yes); }};
                    source s {{ network(ip(127.0.0.1) port({port})); }};
                    destination d {{ relp("127.0.0.1" port({})); }};
                    log {{ source(s); destination(d); flags(flow-control); }};"#,
                    f.port
                ),
            );
            sender.wait_tcp(port);
            send_tcp(port, input, Framing::Newline);
            Box::new(sender)
        },
        ordered: true,
        after_reload: FedAgain,
    },
    Kind {
        name: "unix-stream",
        source: |f| format!(r#"unix-stream("{}")"#, f.path("stream.sock").display()),
        before: nothing_before,
        feed: |f, s, input| {
            s.wait_unix(&f.path("stream.sock"));
            send_unix(&f.path("stream.sock"), input);
            Box::new(())
        },
        ordered: true,
        after_reload: FedAgain,
    },
    Kind {
        name: "unix-dgram",
        source: |f| {
            format!(
                r#"unix-dgram("{}" so-rcvbuf(8388608))"#,
                f.path("dgram.sock").display()
            )
        },
        before: nothing_before,
        feed: |f, _, input| {
            let path = f.path("dgram.sock");
            common::wait_for_path(&path);
            let socket = std::os::unix::net::UnixDatagram::unbound().unwrap();
            for line in lines(input) {
                // A full receive buffer: wait and send again.
                while socket.send_to(line, &path).is_err() {
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
            Box::new(())
        },
        ordered: true,
        after_reload: FedAgain,
    },
    Kind {
        name: "file",
        source: |f| format!(r#"file("{}")"#, f.path("app.log").display()),
        before: |f, input| std::fs::write(f.path("app.log"), &input[..input.len() / 2]).unwrap(),
        feed: |f, _, input| {
            // Half was there when it started; the rest is appended as it follows the file.
            std::thread::sleep(Duration::from_millis(300));
            append(&f.path("app.log"), &input[input.len() / 2..]);
            Box::new(())
        },
        ordered: true,
        after_reload: Appended("app.log"),
    },
    Kind {
        name: "wildcard-file",
        source: |f| {
            format!(
                r#"wildcard-file(base-dir("{}") filename-pattern("*.log"))"#,
                f.dir.path().display()
            )
        },
        before: |f, input| std::fs::write(f.path("a.log"), &input[..input.len() / 2]).unwrap(),
        feed: |f, _, input| {
            std::thread::sleep(Duration::from_millis(300));
            append(&f.path("a.log"), &input[input.len() / 2..]);
            Box::new(())
        },
        ordered: true,
        after_reload: Appended("a.log"),
    },
    Kind {
        name: "program",
        // The program prints the messages once and stays: one that exits is started again.
        source: |f| {
            format!(
                r#"program("cat {}; exec sleep 3600")"#,
                f.path("input").display()
            )
        },
        before: |f, input| std::fs::write(f.path("input"), input).unwrap(),
        feed: nothing,
        ordered: true,
        after_reload: Restarts,
    },
    Kind {
        name: "pipe",
        source: |f| format!(r#"pipe("{}")"#, f.path("app.pipe").display()),
        before: nothing_before,
        feed: |f, _, input| {
            let path = f.path("app.pipe");
            common::wait_for_path(&path);
            let mut pipe = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
            pipe.write_all(input).unwrap();
            Box::new(())
        },
        ordered: true,
        after_reload: FedAgain,
    },
];

/// Registered sources whose contract runs in another test, against what they really read.
const ELSEWHERE: &[(&str, &str)] = &[
    (
        "system",
        "tests/stock_config.rs: the host's /dev/log, /dev/kmsg or journal, with logger",
    ),
    (
        "systemd_journal",
        "tests/journal.rs: journal files written by systemd-journal-remote, in a mount namespace",
    ),
    (
        "kafka",
        "tests/downstream/kafka.rs: a real broker started once per run; every record once, a consumer killed, a reload mid-stream",
    ),
    (
        "sql",
        "tests/sql.rs: tables of SQLite and of the PostgreSQL and MariaDB servers the tests start, followed across a restart: each row once, in order",
    ),
    (
        "internal",
        "tests/control.rs and every end-to-end test's internal.log: its messages are sluice's own, not an input",
    ),
    (
        "stdin",
        "stdin_delivers_what_it_read_once_in_order_and_stops below: sluice stops at its end",
    ),
];

/// `<13>Jan  1 00:00:00 host app: m1` as RFC5424: `<13>1 - host app - - - m1`.
fn rfc5424(input: &[u8]) -> Vec<u8> {
    lines(input)
        .flat_map(|l| {
            let msg = String::from_utf8_lossy(l);
            let text = msg.rsplit(' ').next().unwrap_or_default().to_string();
            format!("<13>1 - host app - - - {text}\n").into_bytes()
        })
        .collect()
}

fn lines(input: &[u8]) -> impl Iterator<Item = &[u8]> {
    input.split(|b| *b == b'\n').filter(|l| !l.is_empty())
}

/// One datagram a message, paced so that no socket buffer overflows.
fn send_datagrams(port: u16, input: &[u8]) {
    let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    for (i, line) in lines(input).enumerate() {
        socket.send_to(line, ("127.0.0.1", port)).unwrap();
        if i % 200 == 199 {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// Waits until the server answers on its control socket: its sources are bound by then.
fn bound(s: &Running) {
    assert!(
        common::wait_until(Duration::from_secs(10), || ctl(s, &["stats"]).0),
        "the server did not start:\n{}",
        s.stderr()
    );
}

fn append(path: &Path, bytes: &[u8]) {
    let mut f = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    f.write_all(bytes).unwrap();
}

/// Messages `m0`…`m{n-1}`.
fn messages(n: usize) -> Vec<u8> {
    messages_from(0, n)
}

/// Messages `m{from}`…`m{to-1}`.
fn messages_from(from: usize, to: usize) -> Vec<u8> {
    (from..to)
        .flat_map(|i| format!("<13>Jan  1 00:00:00 host app: m{i}\n").into_bytes())
        .collect()
}

/// The receiving sluice: the source under test into one file, `$MSG` a line.
fn config(source: &str) -> String {
    format!(
        r#"@version: 3.38
        options {{ keep-hostname(yes); stats-level(1); }};
        source s {{ {source}; }};
        destination d {{ file("@OUT@/all.log" template("$MSG\n")); }};
        log {{ source(s); destination(d); }};"#
    )
}

/// The messages' last words (`m17`): local sockets read `host` as no hostname, as syslog-ng
/// does, and keep it in the message.
fn delivered(out: &Path) -> Vec<String> {
    std::fs::read_to_string(out.join("all.log"))
        .unwrap_or_default()
        .lines()
        .map(|l| l.rsplit(' ').next().unwrap_or_default().to_string())
        .collect()
}

/// Waits until `n` messages are in the file, then checks they are `m0`…, each once (in that
/// order when `ordered`).
fn assert_delivered(name: &str, s: &Running, n: usize, ordered: bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut got = delivered(&s.out);
    while got.len() < n && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        got = delivered(&s.out);
    }
    let want: Vec<String> = (0..n).map(|i| format!("m{i}")).collect();
    if !ordered {
        got.sort_by_key(|m| m[1..].parse::<usize>().unwrap_or(usize::MAX));
    }
    assert!(
        got == want,
        "{name}: {} of {n} delivered, first difference at {:?}\n{}",
        got.len(),
        got.iter().zip(&want).position(|(a, b)| a != b),
        s.stderr()
    );
}

#[test]
fn every_source_delivers_what_it_read_once_counted_and_stops_in_its_grace() {
    let n = 2000;
    let input = messages(n);
    for kind in KINDS {
        let feed = Feed::new();
        (kind.before)(&feed, &input);
        let mut s = Running::start(Server::Sluice, &config(&(kind.source)(&feed)));
        let _fed = (kind.feed)(&feed, &mut s, &input);
        assert_delivered(kind.name, &s, n, kind.ordered);
        let (ok, stats) = ctl(&s, &["stats"]);
        assert!(ok, "{stats}");
        let line = format!("source;s;;a;processed;{n}");
        assert!(
            stats.lines().any(|l| l == line),
            "{}: {line} not in\n{stats}",
            kind.name
        );
        let took = s.terminate_within(Duration::from_secs(40));
        assert!(
            took < Duration::from_secs(15),
            "{}: the stop took {took:?}\n{}",
            kind.name,
            s.stderr()
        );
    }
}

/// A reload that changes a source (its `log-iw-size()`) after it read hands over its
/// listener, connections or position: what it read is not read again, and what comes after
/// the reload is read once.
#[test]
fn a_reload_that_changes_a_source_repeats_nothing_and_reads_on() {
    let n = 1000;
    let first = messages(n);
    let second = messages_from(n, 2 * n);
    for kind in KINDS {
        let feed = Feed::new();
        (kind.before)(&feed, &first);
        let source = (kind.source)(&feed);
        let with_window = |w: u32| {
            let at = source.rfind(')').expect("a driver ends with ')'");
            config(&format!(
                "{} log-iw-size({w}){}",
                &source[..at],
                &source[at..]
            ))
        };
        let mut s = Running::start(Server::Sluice, &with_window(1000));
        let fed = (kind.feed)(&feed, &mut s, &first);
        assert_delivered(kind.name, &s, n, kind.ordered);
        drop(fed);
        let text = with_window(2000).replace("@OUT@", &s.out.to_string_lossy());
        std::fs::write(s.dir.path().join("server.conf"), text).unwrap();
        let (ok, said) = ctl(&s, &["reload"]);
        assert!(ok, "{}: {said}", kind.name);
        let _fed = match kind.after_reload {
            FedAgain => (kind.feed)(&feed, &mut s, &second),
            Appended(name) => {
                append(&feed.path(name), &second);
                Box::new(())
            }
            Restarts => continue,
        };
        assert_delivered(kind.name, &s, 2 * n, kind.ordered);
        // Nothing comes twice, late: the file holds the 2n messages once, a moment later.
        std::thread::sleep(Duration::from_millis(500));
        assert_delivered(kind.name, &s, 2 * n, kind.ordered);
    }
}

/// `stdin()` reads to the end of its input, waits for it to be written and stops sluice.
#[test]
fn stdin_delivers_what_it_read_once_in_order_and_stops() {
    let n = 2000;
    let mut s = Running::start_reading(Server::Sluice, &config("stdin()"), Some(&messages(n)));
    let started = Instant::now();
    s.wait_exit();
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "stdin(): the stop took {:?}",
        started.elapsed()
    );
    assert_delivered("stdin", &s, n, true);
}

/// Every registered source driver is a kind above, or says where its contract runs.
#[test]
fn every_registered_source_has_a_contract_entry() {
    let feed = Feed::new();
    let missing = common::without_contract(
        sluice_engine::sources::registry::DRIVERS
            .iter()
            .map(|d| d.names),
        KINDS
            .iter()
            .map(|k| (k.source)(&feed))
            .chain(ELSEWHERE.iter().map(|(name, _)| name.to_string())),
    );
    assert!(
        missing.is_empty(),
        "source drivers with no contract entry in tests/source_contract.rs: {missing:?}"
    );
}
