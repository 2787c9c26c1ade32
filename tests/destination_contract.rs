//! The contract every destination keeps (`docs/driver-contract.md`), run over every destination
//! driver sluice registers (`destinations::registry::DRIVERS`): `file()`, `tcp()`, `syslog()`
//! (octet-counted), `tcp()` with TLS, `udp()`, `unix-stream()`, `unix-dgram()`, `relp()`,
//! `http()`, `program()`, `graylog2()`, `pipe()` and `logstore()`. A destination to come adds a [`Kind`]
//! (and, when it needs one, its peer's setup), or a line of [`ELSEWHERE`] naming the test that
//! holds it to the contract against its real peer; `every_registered_destination_has_a_contract_entry`
//! fails for a registered driver in neither.
//!
//! - What it accepted is written once and in order, and counted under syslog-ng's names.
//! - `sluice ctl reopen` (SIGUSR1) leaves it writing.
//! - A reload that changes it, while messages flow, takes over its queue: nothing is lost.
//! - Over a connection: a peer that is down, then up, loses nothing on a flow-controlled path,
//!   and a peer that takes nothing does not hold a stop past its grace.
//!
//! The receiving end is a second sluice with the matching source, writing a file, or for
//! `http()` an HTTP server (`tests/common/http_server.py`).

mod common;

use common::http::HttpServer;
use common::pki::Pki;
use common::{ctl, free_port, free_udp_port, send_tcp, Framing, Running, Server};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Where a destination sends: ports, socket paths and certificates made for one test.
struct Peer {
    port: u16,
    udp_port: u16,
    dir: tempfile::TempDir,
    pki: Pki,
}

impl Peer {
    fn new() -> Peer {
        Peer {
            port: free_port(),
            udp_port: free_udp_port(),
            dir: tempfile::tempdir().expect("temporary directory"),
            pki: Pki::new(),
        }
    }

    fn socket(&self) -> PathBuf {
        self.dir.path().join("peer.sock")
    }

    fn fifo(&self) -> PathBuf {
        self.dir.path().join("console")
    }

    /// A sealing key of the test's own: an archive's writer moves its key forward.
    fn seal_key(&self) -> PathBuf {
        let key = self.dir.path().join("seal.key");
        if !key.exists() {
            let testdata = concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/crates/logstore/testdata/seal.key"
            );
            std::fs::copy(testdata, &key).expect("copy the test's sealing key");
        }
        key
    }
}

/// What receives what a destination sends.
enum Receive {
    /// Nothing: the destination writes a file itself.
    Itself,
    /// A sluice with this source driver.
    Sluice(fn(&Peer) -> String),
    /// A sluice with this source driver, reading GELF documents: what it writes is each
    /// one's `short_message`.
    SluiceGelf(fn(&Peer) -> String),
    /// An HTTP server on the peer's port.
    Http,
    /// A reader of the named pipe `console` in the peer's directory.
    Fifo,
    /// The sender's archive `all.lgs`, read with `sluice logstore cat`.
    Archive,
}

use Receive::{Archive, Fifo, Http, Itself, Sluice, SluiceGelf};

/// A destination under the contract.
struct Kind {
    name: &'static str,
    /// The destination driver (with `@OPTIONS@` where a test adds options).
    driver: fn(&Peer) -> String,
    /// What receives what it sends.
    receive: Receive,
    /// Its counter, as syslog-ng names it, without the value.
    counter: fn(&Peer) -> String,
    /// Sends over a connection: a peer that is down holds messages back.
    connected: bool,
}

const KINDS: &[Kind] = &[
    Kind {
        name: "file",
        driver: |_| r#"file("@OUT@/all.log" @OPTIONS@)"#.to_string(),
        receive: Itself,
        counter: |_| "dst.file;d#0;@OUT@/all.log;a;processed".to_string(),
        connected: false,
    },
    Kind {
        name: "program",
        driver: |_| r#"program("cat >> @OUT@/all.log" @OPTIONS@)"#.to_string(),
        receive: Itself,
        counter: |_| "dst.program;d#0;cat >> @OUT@/all.log;a;processed".to_string(),
        connected: false,
    },
    Kind {
        name: "tcp",
        driver: |p| format!(r#"tcp("127.0.0.1" port({}) @OPTIONS@)"#, p.port),
        receive: Sluice(|p| format!("network(ip(127.0.0.1) port({}))", p.port)),
        counter: |p| format!("dst.tcp;d#0;tcp,127.0.0.1:{};a;processed", p.port),
        connected: true,
    },
    Kind {
        name: "syslog",
        driver: |p| format!(r#"syslog("127.0.0.1" port({}) @OPTIONS@)"#, p.port),
        receive: Sluice(|p| format!("syslog(ip(127.0.0.1) port({}))", p.port)),
        counter: |p| format!("dst.syslog;d#0;tcp,127.0.0.1:{};a;processed", p.port),
        connected: true,
    },
    Kind {
        name: "tls",
        driver: |p| {
            format!(
                r#"tcp("localhost" port({}) {} @OPTIONS@)"#,
                p.port,
                p.pki.tls("client", "")
            )
        },
        receive: Sluice(|p| {
            format!(
                "network(ip(127.0.0.1) port({}) transport(tls) {})",
                p.port,
                p.pki.tls("server", "peer-verify(required-trusted)")
            )
        }),
        counter: |p| format!("dst.tcp;d#0;tcp,localhost:{};a;processed", p.port),
        connected: true,
    },
    Kind {
        name: "udp",
        driver: |p| format!(r#"udp("127.0.0.1" port({}) @OPTIONS@)"#, p.udp_port),
        receive: Sluice(|p| {
            format!(
                "network(ip(127.0.0.1) port({}) transport(udp) so-rcvbuf(8388608))",
                p.udp_port
            )
        }),
        counter: |p| format!("dst.udp;d#0;udp,127.0.0.1:{};a;processed", p.udp_port),
        connected: false,
    },
    Kind {
        name: "unix-stream",
        driver: |p| format!(r#"unix-stream("{}" @OPTIONS@)"#, p.socket().display()),
        receive: Sluice(|p| format!(r#"unix-stream("{}")"#, p.socket().display())),
        counter: |p| format!("dst.unix-stream;d#0;{};a;processed", p.socket().display()),
        connected: true,
    },
    Kind {
        name: "unix-dgram",
        driver: |p| format!(r#"unix-dgram("{}" @OPTIONS@)"#, p.socket().display()),
        receive: Sluice(|p| {
            format!(
                r#"unix-dgram("{}" so-rcvbuf(8388608))"#,
                p.socket().display()
            )
        }),
        counter: |p| format!("dst.unix-dgram;d#0;{};a;processed", p.socket().display()),
        connected: false,
    },
    Kind {
        name: "http",
        driver: |p| {
            format!(
                r#"http(url("http://127.0.0.1:{}/logs") body("$MSG") batch-lines(100) @OPTIONS@)"#,
                p.port
            )
        },
        receive: Http,
        counter: |p| {
            format!(
                "dst.http;d#0;http,http://127.0.0.1:{}/logs;a;processed",
                p.port
            )
        },
        connected: true,
    },
    Kind {
        name: "relp",
        driver: |p| format!(r#"relp("127.0.0.1" port({}) @OPTIONS@)"#, p.port),
        receive: Sluice(|p| format!("relp(ip(127.0.0.1) port({}))", p.port)),
        counter: |p| format!("dst.relp;d#0;tcp,127.0.0.1:{};a;processed", p.port),
        connected: true,
    },
    Kind {
        name: "graylog2",
        driver: |p| format!(r#"graylog2(host("127.0.0.1") port({}) @OPTIONS@)"#, p.port),
        receive: SluiceGelf(|p| format!("network(ip(127.0.0.1) port({}) flags(no-parse))", p.port)),
        counter: |p| format!("dst.network;d#0;tcp,127.0.0.1:{};a;processed", p.port),
        connected: true,
    },
    Kind {
        name: "pipe",
        driver: |p| format!(r#"pipe("{}" @OPTIONS@)"#, p.fifo().display()),
        receive: Fifo,
        counter: |p| format!("dst.pipe;d#0;{};a;processed", p.fifo().display()),
        connected: false,
    },
    Kind {
        name: "logstore",
        driver: |p| {
            format!(
                r#"logstore("@OUT@/all.lgs" seal-key("{}") chunk-time(1) @OPTIONS@)"#,
                p.seal_key().display()
            )
        },
        receive: Archive,
        counter: |_| "dst.logstore;d#0;@OUT@/all.lgs;a;processed".to_string(),
        connected: false,
    },
];

/// Registered destinations whose contract runs in another test, against their real peer.
const ELSEWHERE: &[(&str, &str)] = &[
    (
        "kafka_c",
        "tests/downstream/kafka.rs: a real broker started once per run; every message once, the broker killed and started again mid-run",
    ),
    (
        "elasticsearch_http",
        "tests/downstream/elasticsearch.rs: a real OpenSearch node started once per run; a million documents once each, 429s, failover",
    ),
    (
        "stdout",
        "tests/destinations.rs and tests/cli.rs: the file writers of file(), on sluice's standard output",
    ),
    (
        "usertty",
        "tests/programs.rs: writing to a terminal needs a user logged in on it",
    ),
    (
        "mongodb",
        "tests/mongodb.rs: against FerretDB 1.24 over PostgreSQL, started by the tests: the documents syslog-ng's mongodb() makes; a refused document costs that one alone and is kept; the server killed under load, each document stored once",
    ),
    (
        "sql",
        "tests/sql.rs: against a PostgreSQL server the tests start and syslog-ng's sql(): the same tables, indexes and rows (SQLite too); a refused row costs that row alone; the server killed under load and started again, each row stored once; a reload while rows arrive, each once; a locked table that takes nothing does not hold the stop",
    ),
];

/// The sending sluice: a TCP source on `port`, the destination under test, flow control.
fn sender_config(kind: &Kind, peer: &Peer, port: u16, options: &str) -> String {
    let driver = (kind.driver)(peer).replace("@OPTIONS@", options);
    format!(
        r#"@version: 3.38
        options {{ keep-hostname(yes); stats-level(1); }};
        source s {{ network(ip(127.0.0.1) port({port}) log-iw-size(1000)); }};
        destination d {{ {driver}; }};
        log {{ source(s); destination(d); flags(flow-control); }};"#
    )
}

/// The receiving sluice of `kind`, if it has one (not started).
fn receiver_config(kind: &Kind, peer: &Peer) -> Option<String> {
    let (source, parser, template) = match kind.receive {
        Sluice(source) => (source(peer), "", "$MSG"),
        SluiceGelf(source) => (
            source(peer),
            r#"parser { json-parser(prefix(".gelf.")); };"#,
            "${.gelf.short_message}",
        ),
        _ => return None,
    };
    Some(format!(
        r#"@version: 3.38
        options {{ keep-hostname(yes); }};
        source s {{ {source}; }};
        destination d {{ file("@OUT@/all.log" template("{template}\n")); }};
        log {{ source(s); {parser} destination(d); }};"#
    ))
}

/// A running receiving end.
enum Receiver {
    Sluice(Running),
    Http(HttpServer),
    /// What a reader of the peer's named pipe copied, in this file.
    Fifo(PathBuf),
    /// The sender's archive.
    Archive,
}

fn start_receiver(kind: &Kind, peer: &Peer) -> Option<Receiver> {
    match kind.receive {
        Http => return Some(Receiver::Http(HttpServer::start_on(peer.port, &[]))),
        Fifo => return Some(Receiver::Fifo(read_fifo(&peer.fifo()))),
        Archive => return Some(Receiver::Archive),
        _ => {}
    }
    let config = receiver_config(kind, peer)?;
    let mut r = Running::start(Server::Sluice, &config);
    match kind.name {
        "udp" => std::thread::sleep(Duration::from_millis(300)),
        "unix-stream" => r.wait_unix(&peer.socket()),
        "unix-dgram" => common::wait_for_path(&peer.socket()),
        _ => r.wait_tcp(peer.port),
    }
    Some(Receiver::Sluice(r))
}

/// Makes the named pipe `fifo` and copies what is written into it to a file beside it, on a
/// thread that lives as long as the test binary (opened for reading and writing, it never
/// sees an end). Returns the file.
fn read_fifo(fifo: &Path) -> PathBuf {
    use std::io::{Read, Write};
    let made = std::process::Command::new("mkfifo")
        .arg(fifo)
        .status()
        .unwrap();
    assert!(made.success(), "mkfifo {}", fifo.display());
    let copy = fifo.with_extension("log");
    std::fs::File::create(&copy).unwrap();
    let mut pipe = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(fifo)
        .unwrap();
    let mut out = std::fs::OpenOptions::new()
        .append(true)
        .open(&copy)
        .unwrap();
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 1 << 16];
        while let Ok(n) = pipe.read(&mut buf) {
            if n == 0 || out.write_all(&buf[..n]).is_err() {
                break;
            }
        }
    });
    copy
}

/// What `sluice logstore cat` reads of the sender's archive so far.
fn archived(sender: &Running) -> String {
    let out = std::process::Command::new(common::sluice_bin())
        .args(["logstore", "cat"])
        .arg(sender.out.join("all.lgs"))
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Messages `from..to`, numbered.
fn messages(from: usize, to: usize) -> Vec<u8> {
    (from..to)
        .flat_map(|i| format!("<13>Jan  1 00:00:00 host app: m{i}\n").into_bytes())
        .collect()
}

/// The messages written where `kind` delivers: the receiver's file or the bodies its HTTP
/// server accepted, or the sender's own file.
fn delivered(sender: &Running, receiver: Option<&Receiver>) -> Vec<String> {
    let text = match receiver {
        Some(Receiver::Sluice(r)) => {
            std::fs::read_to_string(r.out.join("all.log")).unwrap_or_default()
        }
        Some(Receiver::Http(server)) => server
            .accepted()
            .iter()
            .map(|r| format!("{}\n", r.body))
            .collect(),
        Some(Receiver::Fifo(copy)) => std::fs::read_to_string(copy).unwrap_or_default(),
        Some(Receiver::Archive) => archived(sender),
        None => std::fs::read_to_string(sender.out.join("all.log")).unwrap_or_default(),
    };
    text.lines()
        .map(|l| {
            let at = l.rfind(' ').map_or(0, |i| i + 1);
            l[at..].to_string()
        })
        .collect()
}

/// Waits until `n` messages are delivered, then checks they are `m0`…, each once, in order.
fn assert_delivered(kind: &Kind, sender: &Running, receiver: Option<&Receiver>, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut got = delivered(sender, receiver);
    while got.len() < n && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        got = delivered(sender, receiver);
    }
    let want: Vec<String> = (0..n).map(|i| format!("m{i}")).collect();
    assert!(
        got == want,
        "{}: {} of {n} delivered, first difference at {:?}\nsender:\n{}",
        kind.name,
        got.len(),
        got.iter().zip(&want).position(|(a, b)| a != b),
        sender.stderr()
    );
}

#[test]
fn every_destination_writes_what_it_accepted_once_in_order_counted_and_after_reopen() {
    for kind in KINDS {
        let peer = Peer::new();
        let receiver = start_receiver(kind, &peer);
        let port = free_port();
        let mut sender = Running::start(Server::Sluice, &sender_config(kind, &peer, port, ""));
        sender.wait_tcp(port);
        send_tcp(port, &messages(0, 2000), Framing::Newline);
        assert_delivered(kind, &sender, receiver.as_ref(), 2000);
        let (ok, stats) = ctl(&sender, &["stats"]);
        assert!(ok, "{stats}");
        let counter = (kind.counter)(&peer).replace("@OUT@", &sender.out.to_string_lossy());
        for line in [
            format!("{counter};2000"),
            "destination;d;;a;processed;2000".to_string(),
        ] {
            assert!(
                stats.lines().any(|l| l == line),
                "{}: {line} not in\n{stats}",
                kind.name
            );
        }
        let (ok, said) = ctl(&sender, &["reopen"]);
        assert!(ok, "{said}");
        send_tcp(port, &messages(2000, 3000), Framing::Newline);
        assert_delivered(kind, &sender, receiver.as_ref(), 3000);
    }
}

#[test]
fn a_reload_that_changes_a_destination_takes_over_its_queue_while_messages_flow() {
    for kind in KINDS {
        let peer = Peer::new();
        let receiver = start_receiver(kind, &peer);
        let port = free_port();
        let config = |n: u32| sender_config(kind, &peer, port, &format!("time-reopen({n})"));
        let mut sender = Running::start(Server::Sluice, &config(1));
        sender.wait_tcp(port);
        let sending = std::thread::spawn(move || {
            for k in 0..20 {
                send_tcp(port, &messages(k * 250, (k + 1) * 250), Framing::Newline);
                std::thread::sleep(Duration::from_millis(25));
            }
        });
        for n in 2..7 {
            std::thread::sleep(Duration::from_millis(80));
            let text = config(n)
                .replace("@OUT@", &sender.out.to_string_lossy())
                .replace("@DIR@", &sender.dir.path().to_string_lossy());
            std::fs::write(sender.dir.path().join("server.conf"), text).unwrap();
            let (ok, said) = ctl(&sender, &["reload"]);
            assert!(ok, "{}: {said}", kind.name);
        }
        sending.join().unwrap();
        assert_delivered(kind, &sender, receiver.as_ref(), 5000);
    }
}

#[test]
fn a_peer_that_is_down_then_up_loses_nothing_on_a_flow_controlled_path() {
    for kind in KINDS.iter().filter(|k| k.connected) {
        let peer = Peer::new();
        let port = free_port();
        let mut sender = Running::start(
            Server::Sluice,
            &sender_config(kind, &peer, port, "time-reopen(1)"),
        );
        sender.wait_tcp(port);
        send_tcp(port, &messages(0, 3000), Framing::Newline);
        std::thread::sleep(Duration::from_millis(1500));
        let receiver = start_receiver(kind, &peer);
        assert_delivered(kind, &sender, receiver.as_ref(), 3000);
    }
}

/// Each kind at once, on threads of their own: the stops take their graces side by side.
#[test]
fn a_peer_that_takes_nothing_does_not_hold_the_stop_past_its_grace() {
    std::thread::scope(|threads| {
        for kind in KINDS.iter().filter(|k| k.connected) {
            threads.spawn(move || stop_with_a_peer_that_takes_nothing(kind));
        }
    });
}

/// A sending sluice whose peer accepts and never reads, answers or finishes a handshake, and
/// a client that writes it `n` messages of 232 bytes (until sluice stops reading; its stop
/// resets the connection). The peer's listeners live as long as the first value.
fn flooded_with_a_peer_that_takes_nothing(kind: &Kind, n: usize) -> (impl Drop, Running) {
    let peer = Peer::new();
    let tcp = std::net::TcpListener::bind(("127.0.0.1", peer.port)).unwrap();
    let unix = std::os::unix::net::UnixListener::bind(peer.socket()).unwrap();
    let port = free_port();
    let mut sender = Running::start(Server::Sluice, &sender_config(kind, &peer, port, ""));
    sender.wait_tcp(port);
    let big: Vec<u8> = (0..n)
        .flat_map(|i| {
            format!("<13>Jan  1 00:00:00 host app: m{i} {}\n", "x".repeat(200)).into_bytes()
        })
        .collect();
    let _ = std::thread::spawn(move || {
        use std::io::Write;
        if let Ok(mut c) = std::net::TcpStream::connect(("127.0.0.1", port)) {
            let _ = c.write_all(&big);
        }
    });
    (Box::new((peer, tcp, unix)), sender)
}

fn stop_with_a_peer_that_takes_nothing(kind: &Kind) {
    // More than the socket buffers hold.
    let (_peer, mut sender) = flooded_with_a_peer_that_takes_nothing(kind, 20_000);
    std::thread::sleep(Duration::from_millis(1000));
    // The readers waiting for the destination and the destination waiting for its peer share
    // one grace of 10 s from the stop.
    let took = sender.terminate_within(Duration::from_secs(40));
    assert!(
        took < Duration::from_secs(15),
        "{}: the stop took {took:?}\n{}",
        kind.name,
        sender.stderr()
    );
}

/// Nothing is acknowledged before it is written: on a flow-controlled path a peer that takes
/// nothing stops the reader once its window is spent. The window (`log-iw-size(1000)`) counts
/// a read's batch at most half the window, so two reads may be in flight beyond it: what was
/// received and not written stays within the window and two reads of 256 KiB, and stops
/// growing.
#[test]
fn a_peer_that_takes_nothing_holds_the_reader_to_its_window() {
    std::thread::scope(|threads| {
        for kind in KINDS.iter().filter(|k| k.connected) {
            threads.spawn(move || window_with_a_peer_that_takes_nothing(kind));
        }
    });
}

fn window_with_a_peer_that_takes_nothing(kind: &Kind) {
    let (_peer, mut sender) = flooded_with_a_peer_that_takes_nothing(kind, 100_000);
    let counted = |suffix: &str| -> u64 {
        let (_, stats) = ctl(&sender, &["stats"]);
        stats
            .lines()
            .find(|l| {
                l.starts_with("dst.")
                    && l.rsplit_once(';').is_some_and(|(k, _)| k.ends_with(suffix))
            })
            .and_then(|l| l.rsplit(';').next()?.parse().ok())
            .unwrap_or_else(|| panic!("{}: no {suffix} in\n{stats}", kind.name))
    };
    std::thread::sleep(Duration::from_secs(3));
    let (processed, written) = (counted(";a;processed"), counted(";a;written"));
    // A message here is 232 bytes: a read of 256 KiB holds 1,130.
    let bound = 1000 + 2 * (256 << 10) / 232;
    assert!(
        processed - written <= bound,
        "{}: {processed} received, {written} written: more than the window and two reads",
        kind.name
    );
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(
        counted(";a;processed"),
        processed,
        "{}: the reader goes on",
        kind.name
    );
    sender.terminate_within(Duration::from_secs(40));
}

/// Every registered destination driver is a kind above, or says where its contract runs.
#[test]
fn every_registered_destination_has_a_contract_entry() {
    let peer = Peer::new();
    let missing = common::without_contract(
        sluice_engine::destinations::registry::DRIVERS
            .iter()
            .map(|d| d.names),
        KINDS
            .iter()
            .map(|k| (k.driver)(&peer))
            .chain(ELSEWHERE.iter().map(|(name, _)| name.to_string())),
    );
    assert!(
        missing.is_empty(),
        "destination drivers with no contract entry in tests/destination_contract.rs: {missing:?}"
    );
}
