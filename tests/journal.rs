//! `systemd-journal()` and `system()` on a host that systemd runs, against real journal files
//! written by `systemd-journal-remote` (no running journald needed): entries read as
//! syslog-ng 3.38 reads them, the journal followed as it grows, its cursor kept across
//! `kill -9`, `matches()`, `match-boot()`, `read-old-records()`. The servers run in a private
//! mount namespace where the test's files are this machine's journal
//! (`tests/data/journal-namespace.sh`); that needs root.

mod common;

use common::{sluice_bin, wait_until, InDir};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

const JOURNAL_REMOTE: &str = "/lib/systemd/systemd-journal-remote";

/// This machine's id, when the test can run here: root, a private mount namespace,
/// `systemd-journal-remote` (installed by `.ci/install-test-deps.sh`) and a machine id.
fn machine_id() -> Option<String> {
    if !common::private_mount_namespace("to give a server a journal of its own") {
        return None;
    }
    if !Path::new(JOURNAL_REMOTE).exists() {
        if std::env::var_os("SLUICE_REQUIRE_PEERS").is_some() {
            panic!("{JOURNAL_REMOTE} is missing: run .ci/install-test-deps.sh");
        }
        eprintln!("SKIPPED: {JOURNAL_REMOTE} is missing (systemd-journal-remote)");
        return None;
    }
    let id = std::fs::read_to_string("/etc/machine-id").ok()?;
    Some(id.trim().to_string())
}

fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .unwrap()
        .trim()
        .replace('-', "")
}

/// The journal directory a test gives its servers, and its file.
struct Journal {
    dir: tempfile::TempDir,
    file: PathBuf,
    /// The next entry's time and sequence.
    next: u64,
}

impl Journal {
    fn new(machine_id: &str) -> Journal {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(machine_id)).unwrap();
        let file = dir.path().join(machine_id).join("system.journal");
        Journal { dir, file, next: 0 }
    }

    /// Appends entries, each given as its fields; the journal's own (time, boot) are added
    /// where an entry has none.
    fn write(&mut self, entries: &[Vec<(&str, &[u8])>]) {
        let mut export = Vec::new();
        for fields in entries {
            self.next += 1;
            let t = 1_700_000_000_000_000 + self.next * 1000;
            writeln!(export, "__REALTIME_TIMESTAMP={t}").unwrap();
            writeln!(export, "__MONOTONIC_TIMESTAMP={}", self.next).unwrap();
            if !fields.iter().any(|(k, _)| *k == "_BOOT_ID") {
                writeln!(export, "_BOOT_ID={}", boot_id()).unwrap();
            }
            for (key, value) in fields {
                if value.contains(&b'\n') {
                    writeln!(export, "{key}").unwrap();
                    export.extend_from_slice(&(value.len() as u64).to_le_bytes());
                    export.extend_from_slice(value);
                    export.push(b'\n');
                } else {
                    export.extend_from_slice(key.as_bytes());
                    export.push(b'=');
                    export.extend_from_slice(value);
                    export.push(b'\n');
                }
            }
            export.push(b'\n');
        }
        let mut remote = Command::new(JOURNAL_REMOTE)
            .arg("-o")
            .arg(&self.file)
            .arg("-")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        remote.stdin.take().unwrap().write_all(&export).unwrap();
        let out = remote.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "systemd-journal-remote: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Appends `n` entries `MESSAGE=seq N` from program `app`.
    fn write_numbered(&mut self, from: usize, n: usize) {
        let messages: Vec<Vec<u8>> = (from..from + n)
            .map(|i| format!("seq {i}").into_bytes())
            .collect();
        let entries: Vec<Vec<(&str, &[u8])>> = messages
            .iter()
            .map(|m| vec![("MESSAGE", &m[..]), ("SYSLOG_IDENTIFIER", &b"app"[..])])
            .collect();
        self.write(&entries);
    }
}

/// A server run in `dir` with `journal` as the machine's journal; restarted in the same
/// place.
struct Server;

impl Server {
    fn start(program: &Path, journal: &Journal, dir: &Path, config: &str, systemd: bool) -> InDir {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/journal-namespace.sh");
        let mut cmd = Command::new("unshare");
        cmd.args(["--mount", "--propagation", "private"])
            .arg(script)
            .arg(journal.dir.path());
        if systemd {
            cmd.arg("--systemd");
        }
        cmd.arg(program);
        if program != sluice_bin() {
            cmd.arg("--no-caps");
        }
        InDir::start(cmd, dir, config)
    }

    fn sluice(journal: &Journal, dir: &Path, config: &str) -> InDir {
        Server::start(&sluice_bin(), journal, dir, config, false)
    }
}

/// Waits for `n` lines in the server's `out.log` (at most 30 s); returns the lines there.
fn wait_lines(server: &InDir, n: usize) -> Vec<String> {
    let out = server.dir.join("out.log");
    wait_until(Duration::from_secs(30), || lines(&out).len() >= n);
    lines(&out)
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(String::from)
        .collect()
}

/// `source` written to `out.log` with `template`.
fn config(source: &str, template: &str) -> String {
    format!(
        r#"source s {{ {source} }};
        destination d {{ file("@DIR@/out.log" template("{template}\n")); }};
        log {{ source(s); destination(d); }};"#
    )
}

/// Entries of every shape syslog-ng reads differently: a program from the identifier or the
/// command or none, a facility and a priority or neither, a message with newlines (written in
/// the export format's binary form), a host, a value longer than `max-field-size()`.
fn varied_entries() -> Vec<Vec<(&'static str, &'static [u8])>> {
    vec![
        vec![
            ("_HOSTNAME", b"web1"),
            ("MESSAGE", b"Accepted password for root"),
            ("PRIORITY", b"6"),
            ("SYSLOG_FACILITY", b"10"),
            ("SYSLOG_IDENTIFIER", b"sshd"),
            ("_COMM", b"sshd"),
            ("_PID", b"4242"),
        ],
        vec![
            ("MESSAGE", b"from the command"),
            ("_COMM", b"cron"),
            ("PRIORITY", b"3"),
        ],
        vec![("MESSAGE", b"neither program nor priority")],
        vec![
            ("MESSAGE", b"first line\nsecond line"),
            ("SYSLOG_IDENTIFIER", b"multi"),
            ("CODE_FILE", b"src/main.c"),
        ],
        vec![
            ("MESSAGE", b"a long field"),
            ("SYSLOG_IDENTIFIER", b"long"),
            ("LONG", b"0123456789012345678901234567890123456789"),
        ],
    ]
}

#[test]
fn entries_are_read_as_syslog_ngs_systemd_journal_reads_them() {
    let Some(machine) = machine_id() else {
        return;
    };
    let Some(syslog_ng) = common::syslog_ng() else {
        return;
    };
    let mut journal = Journal::new(&machine);
    journal.write(&varied_entries());
    let template = "$ISODATE|$HOST|$PROGRAM|$PID|$FACILITY.$SEVERITY|$MSG|$MSGHDR|${.journald.MESSAGE}|${.journald._COMM}|${.journald.CODE_FILE}|${.j.LONG}|${.j.MESSAGE}";
    for source in [
        "systemd-journal();",
        "systemd-journal(prefix(\".j.\") max-field-size(20) keep-hostname(yes) default-facility(user) default-level(warning));",
    ] {
        let conf = config(source, template);
        let mut outputs = BTreeMap::new();
        for (name, program) in [("syslog-ng", syslog_ng.clone()), ("sluice", sluice_bin())] {
            let dir = tempfile::tempdir().unwrap();
            let server = Server::start(&program, &journal, dir.path(), &conf, false);
            // Five entries; a message of two lines, shown twice.
            let got = wait_lines(&server, 7);
            std::thread::sleep(Duration::from_millis(300));
            assert!(got.len() >= 7, "{name} with {source}:\n{}", server.stderr());
            outputs.insert(name, std::fs::read_to_string(dir.path().join("out.log")).unwrap());
        }
        assert_eq!(outputs["syslog-ng"], outputs["sluice"], "with {source}");
    }
}

/// The journal grows while sluice is killed twice: every entry arrives, and only those of
/// batches in flight at a kill arrive twice.
#[test]
fn the_journal_is_followed_and_kill_9_loses_nothing() {
    let Some(machine) = machine_id() else {
        return;
    };
    let mut journal = Journal::new(&machine);
    journal.write_numbered(0, 500);
    let dir = tempfile::tempdir().unwrap();
    let conf = config("systemd-journal();", "$MSG");
    let mut total = 500;
    for round in 0..3 {
        let mut s = Server::sluice(&journal, dir.path(), &conf);
        // The first round reads what was there (read-old-records(yes)); each round then
        // follows what is written while it runs, and is killed while entries come.
        let from = total;
        total += 8 * 1000;
        std::thread::scope(|scope| {
            let writer = scope.spawn(|| {
                for k in 0..8 {
                    journal.write_numbered(from + k * 1000, 1000);
                }
            });
            if round < 2 {
                // Killed once some of what is being written arrived.
                wait_lines(&s, from + 1000);
                s.kill_9();
                eprintln!(
                    "killed at {} lines",
                    lines(&dir.path().join("out.log")).len()
                );
            }
            writer.join().unwrap();
        });
        if round == 2 {
            let got = wait_lines(&s, total);
            assert!(
                got.len() >= total,
                "{} of {total}:\n{}",
                got.len(),
                s.stderr()
            );
            s.stop();
        }
    }
    let got = lines(&dir.path().join("out.log"));
    let mut seen = vec![0u32; total];
    for l in &got {
        let n: usize = l.strip_prefix("seq ").unwrap().parse().unwrap();
        seen[n] += 1;
    }
    let missing: Vec<usize> = (0..total).filter(|&i| seen[i] == 0).collect();
    assert!(
        missing.is_empty(),
        "lost {} entries: {:?}…",
        missing.len(),
        &missing[..missing.len().min(10)]
    );
    let repeated = got.len() - total;
    // Each kill repeats at most what was in flight: the window (100) and a batch.
    assert!(repeated <= 2 * 200, "{repeated} entries repeated");
    eprintln!("{total} entries, {repeated} repeated");
}

#[test]
fn matches_and_match_boot_choose_entries_and_read_old_records_no_starts_at_the_end() {
    let Some(machine) = machine_id() else {
        return;
    };
    let mut journal = Journal::new(&machine);
    let other_boot = b"0123456789abcdef0123456789abcdef";
    journal.write(&[
        vec![("MESSAGE", b"keep 1"), ("SYSLOG_IDENTIFIER", b"keep")],
        vec![
            ("MESSAGE", b"other program"),
            ("SYSLOG_IDENTIFIER", b"other"),
        ],
        vec![
            ("MESSAGE", b"other boot"),
            ("SYSLOG_IDENTIFIER", b"keep"),
            ("_BOOT_ID", other_boot),
        ],
        vec![("MESSAGE", b"keep 2"), ("SYSLOG_IDENTIFIER", b"keep")],
    ]);
    let dir = tempfile::tempdir().unwrap();
    let conf = config(
        r#"systemd-journal(matches("SYSLOG_IDENTIFIER" => "keep") match-boot(yes));"#,
        "$MSG",
    );
    let mut s = Server::sluice(&journal, dir.path(), &conf);
    let got = wait_lines(&s, 2);
    std::thread::sleep(Duration::from_millis(300));
    s.stop();
    assert_eq!(
        lines(&dir.path().join("out.log")),
        ["keep 1", "keep 2"],
        "{got:?}"
    );

    // read-old-records(no): what is there at the first start is not read; what comes is.
    let dir = tempfile::tempdir().unwrap();
    let conf = config("systemd-journal(read-old-records(no));", "$MSG");
    let s = Server::sluice(&journal, dir.path(), &conf);
    std::thread::sleep(Duration::from_millis(700));
    journal.write(&[vec![("MESSAGE", b"new"), ("SYSLOG_IDENTIFIER", b"x")]]);
    let got = wait_lines(&s, 1);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(lines(&dir.path().join("out.log")), ["new"], "{got:?}");
}

/// On a host that systemd runs, `system()` is the journal of this boot, as syslog-ng's is.
#[test]
fn system_reads_this_boots_journal_on_a_host_systemd_runs() {
    let Some(machine) = machine_id() else {
        return;
    };
    let mut journal = Journal::new(&machine);
    journal.write(&[
        vec![
            ("MESSAGE", b"before this boot"),
            ("_BOOT_ID", b"0123456789abcdef0123456789abcdef"),
        ],
        vec![
            ("MESSAGE", b"this boot"),
            ("SYSLOG_IDENTIFIER", b"app"),
            ("PRIORITY", b"4"),
        ],
    ]);
    let dir = tempfile::tempdir().unwrap();
    let conf = config(
        "system();",
        "$PROGRAM $LEVEL $MSG ${.journald.SYSLOG_IDENTIFIER}",
    );
    let s = Server::start(&sluice_bin(), &journal, dir.path(), &conf, true);
    let got = wait_lines(&s, 1);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(got, ["app warning this boot app"], "{}", s.stderr());
}
