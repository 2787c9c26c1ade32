//! `logstore()` end to end: messages over TCP into `file()` and `logstore()` side by side, read
//! back with `sluice logstore cat` byte for byte; nothing of the text visible in the archive;
//! `verify` with and without keys; tampering found by the tool; a server killed with SIGKILL
//! under RELP load twice loses nothing it acknowledged.

mod common;

use common::{check, free_port, loggen_start, loggen_wait, sluice_bin, InDir};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

fn testdata(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("crates/logstore/testdata")
        .join(name)
        .display()
        .to_string()
}

fn logstore(args: &[&str]) -> Output {
    Command::new(sluice_bin())
        .arg("logstore")
        .args(args)
        .output()
        .expect("run sluice logstore")
}

/// A sealing key and its verification key in `dir`.
fn keygen(dir: &Path) -> (String, String) {
    let (seal, verify) = (dir.join("seal.key"), dir.join("verify.key"));
    let out = logstore(&[
        "keygen",
        "--seal-key",
        &seal.display().to_string(),
        "--verify-key",
        &verify.display().to_string(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (seal.display().to_string(), verify.display().to_string())
}

/// RFC3164 lines: the corpus when it is beside the project, else lines made here.
fn input() -> Vec<u8> {
    if let Some(path) = common::corpus("loghub-rfc3164.log") {
        let text = std::fs::read(path).unwrap();
        let end = text
            .iter()
            .enumerate()
            .filter(|(_, &c)| c == b'\n')
            .nth(39_999)
            .map_or(text.len(), |(i, _)| i + 1);
        return text[..end].to_vec();
    }
    // Words enough that the test of what the archive's bytes show has something to look for.
    const WORDS: [&str; 24] = [
        "authentication",
        "connection",
        "session",
        "opened",
        "closed",
        "refused",
        "accepted",
        "invalid",
        "publickey",
        "keyboard",
        "interactive",
        "disconnect",
        "received",
        "preauth",
        "listener",
        "timeout",
        "network",
        "firewall",
        "kernel",
        "segfault",
        "systemd",
        "started",
        "stopped",
        "restart",
    ];
    let mut out = Vec::new();
    for n in 0..40_000 {
        out.extend_from_slice(
            format!(
                "<38>Nov 25 06:{:02}:{:02} host{} sshd[{}]: Failed password for user{} from 10.0.{}.{} port {}: {} {}\n",
                n / 60 % 60,
                n % 60,
                n % 7,
                1000 + n % 50,
                n % 13,
                n % 256,
                n / 256 % 256,
                40000 + n,
                WORDS[n % 24],
                WORDS[n / 24 % 24]
            )
            .as_bytes(),
        );
    }
    out
}

fn wait_until(limit: Duration, what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < deadline, "waited {limit:?} for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn lines_in(path: &Path) -> usize {
    std::fs::read(path).map_or(0, |b| b.iter().filter(|&&c| c == b'\n').count())
}

fn files_under(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    out.sort();
    out
}

#[test]
fn the_archive_reads_back_as_the_file_and_shows_nothing_without_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (seal, verify) = keygen(d);
    let port = free_port();
    let cert = testdata("reader.pem");
    let config = format!(
        r#"options {{ keep-hostname(yes); }};
        source s {{ tcp(ip(127.0.0.1) port({port}) log-iw-size(100000)); }};
        destination plain {{ file("@DIR@/plain/all.log" create-dirs(yes)); }};
        destination byhost {{ file("@DIR@/plain/${{HOST}}.log"); }};
        destination one {{ logstore("@DIR@/archive/all.lgs" create-dirs(yes)
            encrypt-certificate("{cert}") seal-key("{seal}") chunk-time(1)); }};
        destination each {{ logstore("@DIR@/archive/${{HOST}}.lgs"
            encrypt-certificate("{cert}") seal-key("{seal}") chunk-time(1)); }};
        log {{ source(s); destination(plain); destination(byhost); destination(one); destination(each); }};"#
    );
    let mut server = InDir::start(Command::new(sluice_bin()), d, &config);
    common::wait_until(Duration::from_secs(20), || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    let input = input();
    let n = input.iter().filter(|&&c| c == b'\n').count();
    common::send_tcp(port, &input, common::Framing::Newline);
    let all = d.join("plain/all.log");
    wait_until(Duration::from_secs(60), "the plain file", || {
        lines_in(&all) == n
    });
    server.stop();
    let stderr = server.stderr();

    // One archive: every line as the file has it.
    let key = testdata("reader.key");
    let archive = d.join("archive/all.lgs");
    let out = logstore(&["cat", "--key", &key, &archive.display().to_string()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stdout == std::fs::read(&all).unwrap(),
        "cat differs from the file\n{stderr}"
    );

    // An archive per host, as the files per host (every tenth of them is read).
    let archives = files_under(&d.join("archive"), "lgs");
    let plain = files_under(&d.join("plain"), "log");
    assert_eq!(archives.len(), plain.len(), "{archives:?} {plain:?}");
    assert!(archives.len() > 2);
    for (a, p) in archives.iter().zip(&plain).step_by(10) {
        if a.ends_with("all.lgs") {
            continue;
        }
        let out = logstore(&["cat", "--key", &key, &a.display().to_string()]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            out.stdout == std::fs::read(p).unwrap(),
            "{} differs",
            a.display()
        );
    }

    // Nothing of the text in the archive's bytes: no word of six letters or more.
    let bytes = std::fs::read(&archive).unwrap();
    let text = std::fs::read(&all).unwrap();
    let mut words: Vec<&[u8]> = text
        .split(|c| !c.is_ascii_alphabetic())
        .filter(|w| w.len() >= 6)
        .collect();
    words.sort();
    words.dedup();
    assert!(words.len() > 20);
    for w in &words {
        assert!(
            memchr::memmem::find(&bytes, w).is_none(),
            "{} is visible in the archive",
            String::from_utf8_lossy(w)
        );
    }

    // verify: with the verification key, and without any key.
    let a = archive.display().to_string();
    for args in [vec!["verify", "-V", &verify, &a], vec!["verify", &a]] {
        let out = logstore(&args);
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{args:?}: {said}");
        assert!(said.contains("intact; 0 notices"), "{said}");
    }
    // info: the hosts, with the key.
    let out = logstore(&["info", "--key", &key, &a]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains(&format!("records: {n}")), "{said}");
    assert!(said.contains("hosts ("), "{said}");
    eprintln!("{said}");
}

#[test]
fn tampering_is_reported_by_verify_and_cat_reads_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (seal, verify) = keygen(d);
    let port = free_port();
    let cert = testdata("reader.pem");
    let config = format!(
        r#"source s {{ tcp(ip(127.0.0.1) port({port})); }};
        destination a {{ logstore("@DIR@/a.lgs" encrypt-certificate("{cert}")
            seal-key("{seal}") chunk-size(8192)); }};
        destination f {{ file("@DIR@/a.log"); }};
        log {{ source(s); destination(a); destination(f); }};"#
    );
    let mut server = InDir::start(Command::new(sluice_bin()), d, &config);
    common::wait_until(Duration::from_secs(20), || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    let lines: String = (0..2000)
        .map(|n| format!("<13>Nov 25 06:00:00 h p: line {n}\n"))
        .collect();
    common::send_tcp(port, lines.as_bytes(), common::Framing::Newline);
    wait_until(Duration::from_secs(30), "the file", || {
        lines_in(&d.join("a.log")) == 2000
    });
    server.stop();
    let archive = d.join("a.lgs");
    let mut bytes = std::fs::read(&archive).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 1;
    let tampered = d.join("t.lgs");
    std::fs::write(&tampered, &bytes).unwrap();
    let t = tampered.display().to_string();
    let out = logstore(&["verify", "-V", &verify, &t]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("TAMPERING"), "{said}");
    assert!(said.contains("bytes are no intact frame"), "{said}");
    let out = logstore(&["cat", "--key", &testdata("reader.key"), &t]);
    assert_eq!(out.status.code(), Some(1));
    let read = out.stdout.iter().filter(|&&c| c == b'\n').count();
    assert!(
        read > 1500 && read < 2000,
        "{read} lines read around the damage"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("offset"), "{err}");

    // The wrong key, a non-archive: clear errors.
    let out = logstore(&[
        "cat",
        "--key",
        &testdata("other.key"),
        &archive.display().to_string(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not encrypted for the given key"));
    let out = logstore(&["cat", &d.join("a.log").display().to_string()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a sluice logstore archive"));
}

#[test]
fn a_wrong_certificate_or_sealing_key_is_a_configuration_error() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("s.conf");
    for (option, said) in [
        (
            format!("encrypt-certificate(\"{}\")", testdata("reader.key")),
            "no certificate in the file",
        ),
        (
            "encrypt-certificate(\"/nonexistent/cert.pem\")".to_string(),
            "No such file",
        ),
        (
            format!("seal-key(\"{}\")", testdata("reader.pem")),
            "not a logstore sealing key",
        ),
    ] {
        std::fs::write(
            &conf,
            format!(
                "@version: 3.38\nsource s {{ stdin(); }};\ndestination d {{ logstore(\"/tmp/x.lgs\" {option}); }};\nlog {{ source(s); destination(d); }};\n"
            ),
        )
        .unwrap();
        let out = Command::new(sluice_bin())
            .arg("check-config")
            .arg(&conf)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{option}: {err}");
        assert!(err.contains(said), "{option}: {err}");
    }
}

/// loggen → a relay (`tcp()` in, `relp()` out with a reliable disk buffer) → the archive
/// server (`relp()` in, `logstore()` out), which is killed with SIGKILL twice under load. The
/// server acknowledges a RELP window once its chunk is sealed and written, so every message
/// is in the archive at the end (duplicates — what was sealed but not yet acknowledged — are
/// counted, not forbidden); the archive verifies, the torn tails named as such.
#[test]
fn kill_9_under_relp_load_loses_nothing_acknowledged() {
    const TOTAL: u64 = 200_000;
    let server_dir = tempfile::tempdir().unwrap();
    let relay_dir = tempfile::tempdir().unwrap();
    let (seal, verify) = keygen(server_dir.path());
    let (server_port, relay_port) = (free_port(), free_port());
    let cert = testdata("reader.pem");
    let server_conf = format!(
        r#"options {{ keep-hostname(yes); }};
        source s {{ relp(ip(127.0.0.1) port({server_port}) log-iw-size(100000)); }};
        destination d {{ logstore("@DIR@/all.lgs" encrypt-certificate("{cert}")
            seal-key("{seal}") chunk-time(1)); }};
        log {{ source(s); destination(d); }};"#
    );
    let relay_conf = format!(
        r#"options {{ keep-hostname(yes); }};
        source s {{ tcp(ip(127.0.0.1) port({relay_port}) log-iw-size(100000)); }};
        destination d {{ relp("127.0.0.1" port({server_port}) time-reopen(1)
            disk-buffer(reliable(yes) dir("@DIR@") disk-buf-size(1000000000))); }};
        log {{ source(s); destination(d); flags(flow-control); }};"#
    );
    let port_open = |port: u16| {
        common::wait_until(Duration::from_secs(20), || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        })
    };
    let sd = server_dir.path();
    let mut server = InDir::start(Command::new(sluice_bin()), sd, &server_conf);
    port_open(server_port);
    let _relay = InDir::start(Command::new(sluice_bin()), relay_dir.path(), &relay_conf);
    port_open(relay_port);
    let load = loggen_start(relay_port, 2, TOTAL / 2, 20_000);
    let archive = sd.join("all.lgs");
    let size = || std::fs::metadata(&archive).map_or(0, |m| m.len());
    // What this run of the server took into chunks (its `written`): a kill after a quarter
    // of the load each time, however well the chunks compress.
    let written = || {
        let out = Command::new(sluice_bin())
            .args(["ctl", "-c"])
            .arg(sd.join("ctl"))
            .args(["query", "get", "--sum", "dst.logstore.*.written"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse::<u64>()
            .unwrap_or(0)
    };
    for kill in 0..2 {
        wait_until(Duration::from_secs(60), "a quarter of the load", || {
            written() >= TOTAL / 4
        });
        eprintln!("killing the server ({} bytes written)", size());
        server.kill_9();
        if kill == 0 {
            // A frame cut short, as a crash in the middle of a write leaves it.
            let mut f = std::fs::OpenOptions::new()
                .append(true)
                .open(&archive)
                .unwrap();
            std::io::Write::write_all(&mut f, b"SLS\x01\x02\0\0\0\xff\xff\0\0partial").unwrap();
        }
        server = InDir::start(Command::new(sluice_bin()), sd, &server_conf);
        port_open(server_port);
    }
    let report = loggen_wait(load);
    assert!(report.ok, "{}", report.text);
    let cat = sd.join("cat.log");
    let read_back = || {
        let out = logstore(&[
            "cat",
            "--key",
            &testdata("reader.key"),
            &archive.display().to_string(),
        ]);
        std::fs::write(&cat, &out.stdout).unwrap();
        check(&cat)
    };
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let c = read_back();
        if c.received - c.duplicated >= TOTAL && c.lost == 0 {
            eprintln!("{}", c.text.lines().last().unwrap_or_default());
            break;
        }
        assert!(Instant::now() < deadline, "{}\n{}", c.text, server.stderr());
        std::thread::sleep(Duration::from_millis(500));
    }
    server.stop();
    let out = logstore(&["verify", "-V", &verify, &archive.display().to_string()]);
    let said = String::from_utf8_lossy(&out.stdout);
    eprintln!("{said}");
    assert!(out.status.success(), "{said}");
    assert!(said.contains("torn by a crash"), "{said}");
    assert!(!said.contains("TAMPERING"), "{said}");
}

/// A month of archives, a file per host and day (20 hosts, 30 days, 72,000 messages, small
/// chunks): `grep` for
/// one host's denials in one evening hour gives exactly what `cat` and the same filter give,
/// and decrypts only the chunks of that host and day that can hold them.
#[test]
fn grep_over_a_month_answers_as_cat_and_the_filter_and_decrypts_little() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let port = free_port();
    let cert = testdata("reader.pem");
    let config = format!(
        r#"options {{ keep-hostname(yes); }};
        source s {{ syslog(ip(127.0.0.1) port({port}) log-iw-size(100000)); }};
        destination a {{ logstore("@DIR@/archive/${{HOST}}/${{YEAR}}${{MONTH}}${{DAY}}.lgs"
            create-dirs(yes) encrypt-certificate("{cert}") chunk-size(8192)
            template("$UNIXTIME $HOST $PROGRAM $MSG\n")); }};
        destination f {{ file("@DIR@/all.log"); }};
        log {{ source(s); destination(a); destination(f); }};"#
    );
    let mut server = InDir::start(Command::new(sluice_bin()), d, &config);
    common::wait_until(Duration::from_secs(20), || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    let mut input = Vec::new();
    let mut n = 0;
    for day in 1..=30 {
        for host in 0..20 {
            for i in 0..120 {
                let (hour, minute) = (i / 5, (i % 5) * 12 + host % 12);
                let text = if (i + host) % 3 == 0 {
                    format!("connection from 10.0.{host}.{i} denied by rule {}", i % 3)
                } else {
                    format!("connection from 10.0.{host}.{i} accepted")
                };
                input.extend_from_slice(
                    format!("<38>1 2026-11-{day:02}T{hour:02}:{minute:02}:00Z host{host} fw - - - {text}\n")
                        .as_bytes(),
                );
                n += 1;
            }
        }
    }
    common::send_tcp(port, &input, common::Framing::OctetCounted);
    wait_until(Duration::from_secs(60), "the plain file", || {
        lines_in(&d.join("all.log")) == n
    });
    server.stop();
    let mut archives = Vec::new();
    for host in std::fs::read_dir(d.join("archive")).unwrap().flatten() {
        archives.extend(files_under(&host.path(), "lgs"));
    }
    assert_eq!(archives.len(), 20 * 30);
    let names: Vec<String> = archives.iter().map(|p| p.display().to_string()).collect();
    let key = testdata("reader.key");

    // What cat and the filter give.
    let (from, to) = (1_794_333_600i64, 1_794_337_200i64); // 2026-11-10 18:00 and 19:00 UTC
    let mut args = vec!["cat", "--key", &key];
    args.extend(names.iter().map(String::as_str));
    let all = logstore(&args);
    assert!(all.status.success());
    let mut want: Vec<String> = String::from_utf8_lossy(&all.stdout)
        .lines()
        .filter(|l| {
            let f: Vec<&str> = l.splitn(4, ' ').collect();
            let t: i64 = f[0].parse().unwrap();
            f[1] == "host8" && f[3].contains("denied") && (from..to).contains(&t)
        })
        .map(str::to_string)
        .collect();
    assert_eq!(String::from_utf8_lossy(&all.stdout).lines().count(), n);
    assert!(!want.is_empty());

    let mut args = vec![
        "grep",
        "--key",
        &key,
        "--stats",
        "--from",
        "2026-11-10T18:00:00Z",
        "--to",
        "2026-11-10T19:00:00Z",
        "host(\"^host8$\") and message(\"denied\")",
    ];
    args.extend(names.iter().map(String::as_str));
    let out = logstore(&args);
    let stats = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stats}");
    let mut got: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    got.sort();
    want.sort();
    assert_eq!(got, want);
    eprintln!("{stats}");
    let count = |name: &str| -> u64 {
        stats
            .split(&format!("{name}: "))
            .nth(1)
            .and_then(|t| t.split(';').next())
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("{name} in {stats}"))
    };
    let (chunks, decrypted) = (count("chunks"), count("decrypted"));
    assert!(chunks >= 600, "{stats}");
    assert!(decrypted <= 2, "{stats}");
}

/// `tail -n 3 -f`: the last three lines of what the server sealed, then each line sealed
/// after them as the server goes on writing, in order.
#[test]
fn tail_follows_the_archive_as_the_server_seals_chunks() {
    use std::io::{BufRead, BufReader};
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let port = free_port();
    let cert = testdata("reader.pem");
    let config = format!(
        r#"source s {{ syslog(ip(127.0.0.1) port({port})); }};
        destination a {{ logstore("@DIR@/a.lgs" encrypt-certificate("{cert}") chunk-time(1)
            template("$MSG\n")); }};
        log {{ source(s); destination(a); }};"#
    );
    let mut server = InDir::start(Command::new(sluice_bin()), d, &config);
    common::wait_until(Duration::from_secs(20), || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    let batch = |from: usize, to: usize| -> Vec<u8> {
        (from..to)
            .flat_map(|n| format!("<13>1 - h p - - - line {n}\n").into_bytes())
            .collect()
    };
    common::send_tcp(port, &batch(0, 50), common::Framing::OctetCounted);
    let archive = d.join("a.lgs");
    let key = testdata("reader.key");
    wait_until(Duration::from_secs(20), "the first chunk", || {
        String::from_utf8_lossy(
            &logstore(&["cat", "--key", &key, &archive.display().to_string()]).stdout,
        )
        .lines()
        .count()
            == 50
    });
    let mut tail = Command::new(sluice_bin())
        .args([
            "logstore", "tail", "-n", "3", "-f", "-s", "0.1", "--key", &key,
        ])
        .arg(&archive)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (lines_tx, lines) = std::sync::mpsc::channel();
    let stdout = tail.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            if lines_tx.send(line.unwrap()).is_err() {
                break;
            }
        }
    });
    let next = || {
        lines
            .recv_timeout(Duration::from_secs(20))
            .expect("a line from tail -f")
    };
    assert_eq!([next(), next(), next()], ["line 47", "line 48", "line 49"]);
    for round in 1..=3 {
        common::send_tcp(
            port,
            &batch(round * 50, round * 50 + 50),
            common::Framing::OctetCounted,
        );
        for n in round * 50..round * 50 + 50 {
            assert_eq!(next(), format!("line {n}"));
        }
    }
    tail.kill().unwrap();
    tail.wait().unwrap();
    server.stop();
    // The same records as JSON objects and as RFC5424 lines.
    let archive = archive.display().to_string();
    let out = logstore(&["cat", "--key", &key, "--format", "json", &archive]);
    let text = String::from_utf8_lossy(&out.stdout);
    let first: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(
        (
            &first["message"],
            &first["host"],
            &first["program"],
            &first["pri"]
        ),
        (
            &"line 0".into(),
            &"localhost".into(),
            &"p".into(),
            &13.into()
        )
    );
    assert_eq!(text.lines().count(), 200);
    let out = logstore(&["cat", "--key", &key, "--format", "rfc5424", &archive]);
    let text = String::from_utf8_lossy(&out.stdout);
    let last = text.lines().last().unwrap();
    assert!(
        last.starts_with("<13>1 ") && last.ends_with(" localhost p - - - line 199"),
        "{last}"
    );
}

/// `timestamp-url()`: RFC 3161 tokens from an authority (`openssl ts -reply` behind HTTP,
/// its certificate an ECDSA one of the test CA) over the chain head as chunks are sealed.
/// The authority is down at first: the archive is written all the same, the failure said
/// once, and the newest head stamped once it answers. `verify` checks every token against
/// the CA given, and says when that CA did not issue the authority's certificate.
#[test]
fn chunks_are_timestamped_by_an_authority_and_verify_checks_the_tokens() {
    use std::sync::atomic::Ordering;
    let tsa = common::tsa::Authority::start();
    tsa.up.store(false, Ordering::SeqCst);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (seal, verify_key) = keygen(d);
    let port = free_port();
    let cert = testdata("reader.pem");
    let config = format!(
        r#"source s {{ syslog(ip(127.0.0.1) port({port})); }};
        destination a {{ logstore("@DIR@/a.lgs" encrypt-certificate("{cert}") seal-key("{seal}")
            chunk-time(1) timestamp-url("{}") timestamp-policy("1.2.3.4.1")
            template("$MSG\n")); }};
        log {{ source(s); destination(a); }};"#,
        tsa.url()
    );
    let mut server = InDir::start(Command::new(sluice_bin()), d, &config);
    common::wait_until(Duration::from_secs(20), || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    let archive = d.join("a.lgs").display().to_string();
    let key = testdata("reader.key");
    let lines = |n: usize| -> bool {
        String::from_utf8_lossy(&logstore(&["cat", "--key", &key, &archive]).stdout)
            .lines()
            .count()
            == n
    };
    let batch = |round: usize| -> Vec<u8> {
        (0..20)
            .flat_map(|n| format!("<13>1 - h p - - - round {round} line {n}\n").into_bytes())
            .collect()
    };
    common::send_tcp(port, &batch(0), common::Framing::OctetCounted);
    wait_until(Duration::from_secs(20), "the first chunk", || lines(20));
    wait_until(Duration::from_secs(20), "the failure said", || {
        server.stderr().contains("timestamping authority")
    });
    assert_eq!(tsa.served.load(Ordering::SeqCst), 0);
    tsa.up.store(true, Ordering::SeqCst);
    wait_until(Duration::from_secs(30), "the waiting head stamped", || {
        tsa.served.load(Ordering::SeqCst) >= 1
    });
    for round in 1..=3 {
        common::send_tcp(port, &batch(round), common::Framing::OctetCounted);
        wait_until(Duration::from_secs(20), "a chunk", || {
            lines(20 * (round + 1))
        });
    }
    wait_until(Duration::from_secs(20), "the last chunk stamped", || {
        tsa.served.load(Ordering::SeqCst) >= 4
    });
    server.stop();
    let said = server.stderr();
    assert!(said.contains("answers again"), "{said}");
    let ca = tsa.ca().display().to_string();

    let out = logstore(&[
        "verify",
        "--verify-key",
        &verify_key,
        "--tsa-ca",
        &ca,
        &archive,
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    eprintln!("{text}");
    assert!(text.contains("; intact;"), "{text}");
    assert!(
        text.contains("each signed by a trusted authority"),
        "{text}"
    );
    assert!(text.contains("CN=sluice test TSA"), "{text}");
    let stamps: usize = text
        .split(" timestamps")
        .next()
        .and_then(|t| t.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{text}"));
    assert!((4..=5).contains(&stamps), "{text}");

    // Without the CA, the signatures are checked and the trust is not; with another CA,
    // the tokens are not trusted.
    let out = logstore(&["verify", &archive]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("not checked against an authority's certificate"),
        "{text}"
    );
    let out = logstore(&["verify", "--tsa-ca", &cert, &archive]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{text}");
    assert!(text.contains("is not trusted"), "{text}");
    let out = logstore(&["info", "--key", &key, "--tsa-ca", &ca, &archive]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("timestamps, the last over seq"));
}

/// A full disk under a flow-controlled path: the archive's writes fail and are said, the
/// source is held back, and once there is room every line is in the archive, once, in order;
/// `verify` finds it intact (no frame torn or written twice).
#[test]
fn a_full_disk_holds_the_archive_back_and_leaves_no_torn_chunk() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let small = d.join("small");
    let Some(_disk) = common::SmallDisk::mount(&small, "1m") else {
        return;
    };
    let port = free_port();
    let cert = testdata("reader.pem");
    let config = format!(
        r#"source s {{ network(ip(127.0.0.1) port({port}) transport(tcp) log-iw-size(100000)); }};
        destination a {{ logstore("@DIR@/small/a.lgs" encrypt-certificate("{cert}") compress(0)
            chunk-size(16384) chunk-time(1) time-reopen(1) template("$MSG\n")); }};
        log {{ source(s); destination(a); flags(flow-control); }};"#
    );
    let mut server = InDir::start(Command::new(sluice_bin()), d, &config);
    common::wait_until(Duration::from_secs(20), || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    let filler = small.join("filler");
    let (block, free) = common::free_space_of(&small);
    std::fs::write(&filler, vec![b'f'; (block * free - 200 * 1024) as usize]).unwrap();
    let n = 5000;
    let sender = std::thread::spawn(move || {
        let input: Vec<u8> = (0..n)
            .flat_map(|i| {
                format!(
                    "<13>Nov 24 12:00:00 host app: message {i:05} {}\n",
                    "x".repeat(40)
                )
                .into_bytes()
            })
            .collect();
        common::send_raw_tcp(port, &input);
    });
    wait_until(Duration::from_secs(20), "a failed write", || {
        server.stderr().contains("error writing")
    });
    std::fs::remove_file(&filler).unwrap();
    sender.join().unwrap();
    let archive = small.join("a.lgs").display().to_string();
    let key = testdata("reader.key");
    let cat = || logstore(&["cat", "--key", &key, &archive]);
    let got = || String::from_utf8_lossy(&cat().stdout).lines().count();
    let deadline = Instant::now() + Duration::from_secs(30);
    while got() < n && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(
        got(),
        n,
        "{}\n{}",
        server.stderr(),
        String::from_utf8_lossy(&cat().stderr)
    );
    server.stop();
    let out = cat();
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), n);
    for (i, line) in lines.iter().enumerate() {
        assert_eq!(*line, format!("message {i:05} {}", "x".repeat(40)));
    }
    let out = logstore(&["verify", &archive]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("; intact; 0 notices"), "{said}");
}

/// Key rotation: a reload that names another certificate starts a new segment of the same
/// archive with a data key wrapped for the new certificate only; each private key reads its
/// own lines and says which chunks are not for it; the chain goes on across the reload.
#[test]
fn a_new_certificate_on_reload_encrypts_what_follows_for_it_alone() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let port = free_port();
    let config = |cert: &str| {
        format!(
            r#"source s {{ syslog(ip(127.0.0.1) port({port})); }};
            destination a {{ logstore("@DIR@/a.lgs" encrypt-certificate("{}") chunk-time(1)
                template("$MSG\n")); }};
            log {{ source(s); destination(a); }};"#,
            testdata(cert)
        )
    };
    let mut server = InDir::start(Command::new(sluice_bin()), d, &config("reader.pem"));
    common::wait_until(Duration::from_secs(20), || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    let archive = d.join("a.lgs").display().to_string();
    let cat = |key: &str| logstore(&["cat", "--key", &testdata(key), &archive]);
    let batch = |from: usize| -> Vec<u8> {
        (from..from + 10)
            .flat_map(|n| format!("<13>1 - h p - - - line {n}\n").into_bytes())
            .collect()
    };
    common::send_tcp(port, &batch(0), common::Framing::OctetCounted);
    wait_until(Duration::from_secs(20), "the first lines", || {
        String::from_utf8_lossy(&cat("reader.key").stdout)
            .lines()
            .count()
            == 10
    });
    let text = config("other.pem").replace("@DIR@", &d.display().to_string());
    std::fs::write(d.join("server.conf"), format!("@version: 3.38\n{text}")).unwrap();
    let reload = Command::new(sluice_bin())
        .args(["ctl", "-c"])
        .arg(d.join("ctl"))
        .arg("reload")
        .output()
        .unwrap();
    assert!(reload.status.success(), "{reload:?}");
    common::send_tcp(port, &batch(10), common::Framing::OctetCounted);
    let deadline = Instant::now() + Duration::from_secs(20);
    while String::from_utf8_lossy(&cat("other.key").stdout)
        .lines()
        .count()
        < 10
    {
        assert!(
            Instant::now() < deadline,
            "the lines after the reload: {}\n{}\n{}",
            String::from_utf8_lossy(&cat("other.key").stderr),
            String::from_utf8_lossy(&cat("reader.key").stdout),
            server.stderr()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    server.stop();
    let lines = |out: &Output| -> Vec<String> {
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_string)
            .collect()
    };
    let (old, new) = (cat("reader.key"), cat("other.key"));
    let want = |from: usize| {
        (from..from + 10)
            .map(|n| format!("line {n}"))
            .collect::<Vec<_>>()
    };
    assert_eq!(lines(&old), want(0));
    assert_eq!(lines(&new), want(10));
    for out in [&old, &new] {
        assert!(!out.status.success());
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(said.contains("not encrypted for the given key"), "{said}");
    }
    let out = logstore(&["verify", &archive]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("; intact; 0 notices"), "{said}");
}
