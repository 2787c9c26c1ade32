//! The `file()` source: a growing file followed, its last line held until it ends, rotation by
//! rename (the old file read to its end) and by copy and truncate, a file that appears late,
//! positions kept in the persist file across `kill -9`, a corrupt persist file, and the same
//! output as syslog-ng's `file()` source.

mod common;

use common::{sluice_bin, wait_until, InDir, Running, Server};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// A sluice run in `dir` with its persist file there, restarted in the same place.
struct Sluice;

impl Sluice {
    fn start(dir: &Path, config: &str) -> InDir {
        Sluice::start_as(dir, config, None)
    }

    /// As [`Sluice::start`], as the user and group `uid` when given.
    fn start_as(dir: &Path, config: &str, uid: Option<u32>) -> InDir {
        let mut cmd = Command::new(sluice_bin());
        if let Some(uid) = uid {
            use std::os::unix::process::CommandExt;
            // std drops root's supplementary groups with the user.
            cmd.uid(uid).gid(uid);
        }
        InDir::start(cmd, dir, config)
    }
}

fn append(path: &Path, text: &str) {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    f.write_all(text.as_bytes()).unwrap();
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(String::from)
        .collect()
}

/// Waits until `path` has `n` lines; returns them.
fn wait_lines(path: &Path, n: usize) -> Vec<String> {
    wait_until(Duration::from_secs(30), || lines(path).len() >= n);
    lines(path)
}

/// A source of one file, written as `$MSG` lines to `out.log`.
fn config(dir: &Path, files: &[&str]) -> String {
    let sources: String = files
        .iter()
        .map(|f| format!(r#"file("{}" follow-freq(0.1)); "#, dir.join(f).display()))
        .collect();
    format!(
        r#"source s {{ {sources} }};
        destination d {{ file("{}" template("$MSG\n")); }};
        log {{ source(s); destination(d); }};"#,
        dir.join("out.log").display()
    )
}

#[test]
fn a_growing_file_is_followed_and_its_last_line_waits_for_its_newline() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    append(&d.join("app.log"), "app: one\napp: two\n");
    let s = Sluice::start(d, &config(d, &["app.log"]));
    assert_eq!(wait_lines(&d.join("out.log"), 2), ["one", "two"]);
    append(&d.join("app.log"), "app: thr");
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(lines(&d.join("out.log")).len(), 2, "{}", s.stderr());
    append(&d.join("app.log"), "ee\napp: four\n");
    assert_eq!(
        wait_lines(&d.join("out.log"), 4),
        ["one", "two", "three", "four"]
    );
}

#[test]
fn a_file_renamed_away_is_read_to_its_end_before_the_new_one() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let log = d.join("app.log");
    append(&log, "app: a1\n");
    let s = Sluice::start(d, &config(d, &["app.log"]));
    wait_lines(&d.join("out.log"), 1);
    // logrotate's rename and create; the writer goes on in the old file a moment, and its
    // last line there has no newline.
    let mut old = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
    std::fs::rename(&log, d.join("app.log.1")).unwrap();
    append(&log, "app: b1\napp: b2\n");
    old.write_all(b"app: a2\napp: a3").unwrap();
    drop(old);
    let got = wait_lines(&d.join("out.log"), 5);
    assert_eq!(got, ["a1", "a2", "a3", "b1", "b2"], "{}", s.stderr());
}

#[test]
fn a_truncated_file_is_read_again_from_its_start() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let log = d.join("app.log");
    append(&log, "app: a1\napp: a2\n");
    let s = Sluice::start(d, &config(d, &["app.log"]));
    wait_lines(&d.join("out.log"), 2);
    // logrotate's copytruncate.
    std::fs::copy(&log, d.join("app.log.1")).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(&log)
        .unwrap();
    append(&log, "app: b1\n");
    let got = wait_lines(&d.join("out.log"), 3);
    assert_eq!(got, ["a1", "a2", "b1"], "{}", s.stderr());
}

/// A file sluice may not read (the new file after a rotation is root's) is said once and
/// tried again, and read from its start once it may. Needs root, to run sluice as nobody.
#[test]
fn a_file_that_cannot_be_read_is_said_once_and_read_once_it_can() {
    use std::os::unix::fs::PermissionsExt;
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED: needs root to run sluice as another user");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mode =
        |p: &Path, m: u32| std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap();
    mode(d, 0o777);
    let log = d.join("app.log");
    append(&log, "app: one\n");
    mode(&log, 0o644);
    let nobody = 65534;
    let s = Sluice::start_as(d, &config(d, &["app.log"]), Some(nobody));
    let out = d.join("out.log");
    assert_eq!(wait_lines(&out, 1), ["one"], "{}", s.stderr());
    std::fs::rename(&log, d.join("app.log.1")).unwrap();
    append(&log, "app: two\n");
    mode(&log, 0o600);
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(lines(&out), ["one"]);
    mode(&log, 0o644);
    assert_eq!(wait_lines(&out, 2), ["one", "two"], "{}", s.stderr());
    let said = s.stderr().matches("Permission denied").count();
    assert_eq!(said, 1, "{}", s.stderr());
}

#[test]
fn a_file_that_appears_later_is_read_from_its_start() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let s = Sluice::start(d, &config(d, &["late.log"]));
    std::thread::sleep(Duration::from_millis(500));
    append(&d.join("late.log"), "app: here\n");
    assert_eq!(wait_lines(&d.join("out.log"), 1), ["here"]);
    assert!(s.stderr().contains("not there (yet)"), "{}", s.stderr());
}

#[test]
fn a_restart_goes_on_where_the_last_run_delivered() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let log = d.join("app.log");
    append(&log, "app: 1\napp: 2\n");
    let mut s = Sluice::start(d, &config(d, &["app.log"]));
    wait_lines(&d.join("out.log"), 2);
    s.stop();
    append(&log, "app: 3\n");
    let _s = Sluice::start(d, &config(d, &["app.log"]));
    assert_eq!(wait_lines(&d.join("out.log"), 3), ["1", "2", "3"]);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(lines(&d.join("out.log")).len(), 3);
}

#[test]
fn a_file_rotated_while_sluice_was_stopped_is_finished_first() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let log = d.join("app.log");
    append(&log, "app: 1\n");
    let mut s = Sluice::start(d, &config(d, &["app.log"]));
    wait_lines(&d.join("out.log"), 1);
    s.stop();
    append(&log, "app: 2\n");
    std::fs::rename(&log, d.join("app.log.1")).unwrap();
    append(&log, "app: 3\n");
    let s = Sluice::start(d, &config(d, &["app.log"]));
    assert_eq!(
        wait_lines(&d.join("out.log"), 3),
        ["1", "2", "3"],
        "{}",
        s.stderr()
    );
}

#[test]
fn a_corrupt_persist_file_is_set_aside_and_files_start_at_their_end() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let log = d.join("app.log");
    append(&log, "app: old\n");
    std::fs::write(d.join("persist"), vec![7u8; 512]).unwrap();
    let s = Sluice::start(d, &config(d, &["app.log"]));
    wait_until(Duration::from_secs(10), || s.stderr().contains("corrupt"));
    std::thread::sleep(Duration::from_millis(300));
    append(&log, "app: new\n");
    assert_eq!(wait_lines(&d.join("out.log"), 1), ["new"], "{}", s.stderr());
    assert!(d.join("persist.corrupt").exists());
    assert!(s.stderr().contains("set aside"), "{}", s.stderr());
}

/// Three files grow while sluice is killed twice: one is rotated by rename, one copied and
/// truncated (once sluice read it: copytruncate loses what a follower had not read). Every
/// line arrives; a restart repeats at most the reads in flight.
#[test]
fn kill_9_twice_while_files_grow_and_rotate_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_path_buf();
    let names = ["a.log", "b.log", "c.log"];
    let conf = config(&d, &names);
    let out = d.join("out.log");
    let mut s = Sluice::start(&d, &conf);
    let mut written = [0usize; 3];
    let write = |written: &mut [usize; 3], k: usize, n: usize| {
        let mut text = String::new();
        for _ in 0..n {
            text.push_str(&format!("app: f{k} seq={}\n", written[k]));
            written[k] += 1;
        }
        append(&d.join(names[k]), &text);
    };
    for round in 0..6 {
        for _ in 0..20 {
            for k in 0..3 {
                write(&mut written, k, 50);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        match round {
            1 | 4 => {
                s.kill_9();
                for k in 0..3 {
                    write(&mut written, k, 100);
                }
                s = Sluice::start(&d, &conf);
            }
            2 => {
                std::fs::rename(d.join("a.log"), d.join("a.log.1")).unwrap();
            }
            3 => {
                // Once sluice has all of c.log so far.
                let want = written[2];
                wait_until(Duration::from_secs(30), || {
                    lines(&out).iter().filter(|l| l.starts_with("f2 ")).count() >= want
                });
                std::fs::OpenOptions::new()
                    .write(true)
                    .truncate(true)
                    .open(d.join("c.log"))
                    .unwrap();
            }
            _ => {}
        }
    }
    let total: usize = written.iter().sum();
    wait_until(Duration::from_secs(60), || {
        let mut seen: BTreeMap<String, ()> = BTreeMap::new();
        for l in lines(&out) {
            seen.insert(l, ());
        }
        seen.len() >= total
    });
    let got = lines(&out);
    let mut count: BTreeMap<&str, usize> = BTreeMap::new();
    for l in &got {
        *count.entry(l.as_str()).or_default() += 1;
    }
    for (k, &n) in written.iter().enumerate() {
        for i in 0..n {
            let line = format!("f{k} seq={i}");
            assert!(
                count.contains_key(line.as_str()),
                "{line} lost\n{}",
                s.stderr()
            );
        }
    }
    let repeated = got.len() - count.len();
    // Two restarts, each repeating at most what was in flight: a window of 100 per file.
    assert!(repeated <= 2 * 3 * 100 + 300, "{repeated} lines repeated");
    eprintln!("{total} lines, {repeated} repeated");
}

#[test]
fn file_reads_as_syslog_ngs_file_source() {
    if common::syslog_ng().is_none() {
        return;
    }
    let input = tempfile::tempdir().unwrap();
    let log = input.path().join("app.log");
    append(
        &log,
        "<13>Nov 24 10:00:00 h1 app[1]: with a priority\n\
         Nov 24 10:00:01 h2 sshd[22]: without one\n\
         just text\n\
         \n\
         <30>1 2026-11-24T10:00:02Z h3 app - - - RFC5424\n",
    );
    let config = format!(
        r#"@version: 3.38
        options {{ keep-hostname(yes); }};
        source s {{ file("{}" follow-freq(1)); }};
        destination d {{ file("@OUT@/all.log" template("$FILE_NAME|$HOST|$PROGRAM|$PRIORITY|$FACILITY|$MSG\n")); }};
        log {{ source(s); destination(d); }};"#,
        log.display()
    );
    let [syslog_ng, sluice] = through_both(&config, 4);
    assert_eq!(syslog_ng, sluice);
}

#[test]
fn a_reload_that_changes_the_source_goes_on_where_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let log = d.join("app.log");
    let s = Sluice::start(d, &config(d, &["app.log"]));
    wait_until(Duration::from_secs(10), || d.join("ctl").exists());
    let mut n = 0;
    for round in 0..5 {
        for _ in 0..200 {
            append(&log, &format!("app: seq={n}\n"));
            n += 1;
        }
        // follow-freq() changes, so the source is a new one at the same path.
        let conf = config(d, &["app.log"])
            .replace("follow-freq(0.1)", &format!("follow-freq(0.{})", round + 2));
        std::fs::write(d.join("sluice.conf"), format!("@version: 3.38\n{conf}")).unwrap();
        let out = Command::new(sluice_bin())
            .args(["ctl", "-c"])
            .arg(d.join("ctl"))
            .arg("reload")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let got = wait_lines(&d.join("out.log"), n);
    std::thread::sleep(Duration::from_millis(500));
    let got_now = lines(&d.join("out.log"));
    assert_eq!(got_now.len(), n, "repeated lines\n{}", s.stderr());
    let want: Vec<String> = (0..n).map(|i| format!("seq={i}")).collect();
    assert_eq!(got, want);
}

/// A `wildcard-file()` source over `dir/logs`, written as `$FILE_NAME $MSG` lines.
fn wildcard_config(dir: &Path, options: &str) -> String {
    format!(
        r#"source s {{ wildcard-file(base-dir("{}") filename-pattern("*.log") follow-freq(0.1) {options}); }};
        destination d {{ file("{}" template("$FILE_NAME $MSG\n")); }};
        log {{ source(s); destination(d); }};"#,
        dir.join("logs").display(),
        dir.join("out.log").display()
    )
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

#[test]
fn wildcard_file_reads_every_matching_file_and_those_that_appear() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let logs = d.join("logs");
    std::fs::create_dir_all(logs.join("sub")).unwrap();
    append(&logs.join("a.log"), "app: a1\n");
    append(&logs.join("sub/b.log"), "app: b1\n");
    append(&logs.join("x.txt"), "app: not matched\n");
    append(&logs.join("skip.log"), "app: excluded\n");
    let s = Sluice::start(
        d,
        &wildcard_config(d, r#"recursive(yes) exclude-pattern("skip*")"#),
    );
    let l = |name: &str, msg: &str| format!("{} {msg}", logs.join(name).display());
    assert_eq!(
        sorted(wait_lines(&d.join("out.log"), 2)),
        [l("a.log", "a1"), l("sub/b.log", "b1")]
    );
    append(&logs.join("c.log"), "app: c1\n");
    append(&logs.join("a.log"), "app: a2\n");
    assert_eq!(
        sorted(wait_lines(&d.join("out.log"), 4)),
        [
            l("a.log", "a1"),
            l("a.log", "a2"),
            l("c.log", "c1"),
            l("sub/b.log", "b1")
        ]
    );
    wait_until(Duration::from_secs(10), || d.join("ctl").exists());
    let stats = Command::new(sluice_bin())
        .args(["ctl", "-c"])
        .arg(d.join("ctl"))
        .arg("stats")
        .output()
        .unwrap();
    let stats = String::from_utf8_lossy(&stats.stdout);
    let counter = format!(
        "src.file;s#0;{};a;processed;2",
        logs.join("a.log").display()
    );
    assert!(
        stats.lines().any(|x| x == counter),
        "{counter} not in\n{stats}\n{}",
        s.stderr()
    );
}

#[test]
fn max_files_holds_the_rest_until_a_file_is_gone() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let logs = d.join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    for i in 0..4 {
        append(&logs.join(format!("f{i}.log")), &format!("app: m{i}\n"));
    }
    let s = Sluice::start(d, &wildcard_config(d, "max-files(2)"));
    wait_lines(&d.join("out.log"), 2);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(lines(&d.join("out.log")).len(), 2);
    assert!(
        s.stderr()
            .contains("max-files(2) reached; 2 more files wait"),
        "{}",
        s.stderr()
    );
    // A file whose name is gone is read to its end (its last line too) and left.
    let read: Vec<String> = lines(&d.join("out.log"));
    let first = read[0].split(' ').next().unwrap().to_string();
    append(Path::new(&first), "app: last words");
    std::fs::remove_file(&first).unwrap();
    let got = wait_lines(&d.join("out.log"), 4);
    assert!(got.contains(&format!("{first} last words")), "{got:?}");
}

/// A file whose name is not UTF-8 is read like any other (issue 55: it was skipped, silently),
/// under its own bytes.
#[test]
fn wildcard_file_reads_a_file_whose_name_is_not_utf8() {
    use std::os::unix::ffi::OsStrExt;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let logs = d.join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    let name = std::ffi::OsStr::from_bytes(b"caf\xe9.log");
    append(&logs.join(name), "app: latin1 name\n");
    let _s = Sluice::start(d, &wildcard_config(d, ""));
    let out = d.join("out.log");
    let mut expected = logs.join(name).as_os_str().as_bytes().to_vec();
    expected.extend_from_slice(b" latin1 name\n");
    assert!(wait_until(Duration::from_secs(10), || std::fs::read(&out)
        .is_ok_and(|b| b == expected)));
}

#[test]
fn wildcard_file_reads_as_syslog_ngs_wildcard_file() {
    if common::syslog_ng().is_none() {
        return;
    }
    let input = tempfile::tempdir().unwrap();
    let logs = input.path().join("logs");
    std::fs::create_dir_all(logs.join("sub")).unwrap();
    append(
        &logs.join("a.log"),
        "<13>Nov 24 10:00:00 h1 app[1]: one\nplain two\n",
    );
    append(
        &logs.join("sub/b.log"),
        "Nov 24 10:00:01 h2 sshd[22]: three\n",
    );
    append(&logs.join("c.txt"), "not read\n");
    let config = format!(
        r#"@version: 3.38
        options {{ keep-hostname(yes); }};
        source s {{ wildcard-file(base-dir("{}") filename-pattern("*.log") recursive(yes) follow-freq(1)); }};
        destination d {{ file("@OUT@/all.log" template("$FILE_NAME|$HOST|$PROGRAM|$PRIORITY|$MSG\n")); }};
        log {{ source(s); destination(d); }};"#,
        logs.display()
    );
    let [syslog_ng, sluice] = through_both(&config, 3);
    assert_eq!(sorted(syslog_ng), sorted(sluice));
}

/// `encoding()` and `pad-size()` on the same files as syslog-ng's `file()`.
#[test]
fn encodings_and_padded_records_read_as_syslog_ngs() {
    if common::syslog_ng().is_none() {
        return;
    }
    let input = tempfile::tempdir().unwrap();
    let latin2 = input.path().join("latin2.log");
    std::fs::write(
        &latin2,
        b"<13>Nov 24 10:00:00 h1 app: \xa3\xf3d\xbc za\xbf\xf3\xb3\xe6\nplain \xa9koda\n",
    )
    .unwrap();
    let cp1251 = input.path().join("cp1251.log");
    std::fs::write(&cp1251, b"app: \xcf\xf0\xe8\xe2\xe5\xf2\n").unwrap();
    let padded = input.path().join("padded.log");
    let mut records = Vec::new();
    for text in ["app: one\n", "app: two", "app: three\nnot read"] {
        let mut r = text.as_bytes().to_vec();
        r.resize(32, 0);
        records.extend(r);
    }
    std::fs::write(&padded, records).unwrap();
    let config = format!(
        r#"@version: 3.38
        options {{ keep-hostname(yes); }};
        source s {{
            file("{}" follow-freq(1) encoding("iso-8859-2"));
            file("{}" follow-freq(1) encoding("windows-1251"));
            file("{}" follow-freq(1) pad-size(32));
        }};
        destination d {{ file("@OUT@/all.log" template("$FILE_NAME|$PROGRAM|$MSG\n")); }};
        log {{ source(s); destination(d); }};"#,
        latin2.display(),
        cp1251.display(),
        padded.display()
    );
    let [syslog_ng, sluice] = through_both(&config, 6);
    assert_eq!(sorted(syslog_ng), sorted(sluice.clone()));
    assert!(
        sluice.iter().any(|l| l.ends_with("|app|Łódź zażółć")),
        "{sluice:?}"
    );
}

/// `config` run by syslog-ng, then by sluice: the lines of `@OUT@/all.log` once it holds `n`
/// of them (and half a second more).
fn through_both(config: &str, n: usize) -> [Vec<String>; 2] {
    [Server::SyslogNg, Server::Sluice].map(|kind| {
        let r = Running::start(kind, config);
        let file = r.out.join("all.log");
        wait_until(Duration::from_secs(20), || lines(&file).len() >= n);
        std::thread::sleep(Duration::from_millis(500));
        lines(&file)
    })
}

#[test]
fn multi_line_records_are_joined_and_the_last_waits_its_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let log = d.join("app.log");
    append(
        &log,
        "app: Exception in thread main\n\tat a.B(C.java:1)\n\tat d.E(F.java:2)\napp: next\n  more\n",
    );
    let conf = config(d, &["app.log"]).replace(
        "follow-freq(0.1)",
        "follow-freq(0.1) multi-line-mode(indented) multi-line-timeout(1)",
    );
    let conf = conf.replace(r#"template("$MSG\n")"#, r#"template("$MSG\n--\n")"#);
    let s = Sluice::start(d, &conf);
    let out = d.join("out.log");
    wait_until(Duration::from_secs(10), || lines(&out).len() >= 4);
    assert_eq!(
        lines(&out),
        [
            "Exception in thread main",
            "\tat a.B(C.java:1)",
            "\tat d.E(F.java:2)",
            "--"
        ],
        "{}",
        s.stderr()
    );
    // The last record is one after multi-line-timeout(), without a line after it.
    let all = wait_lines(&out, 7);
    assert_eq!(all[4..], ["next", "  more", "--"]);
}

#[test]
fn multi_line_reads_as_syslog_ngs() {
    if common::syslog_ng().is_none() {
        return;
    }
    let input = tempfile::tempdir().unwrap();
    let cases = [
        ("indented", "multi-line-mode(indented)"),
        (
            "prefix-garbage",
            r#"multi-line-mode(prefix-garbage) multi-line-prefix("^[0-9]{4}-") multi-line-garbage("--END--")"#,
        ),
        (
            "prefix-suffix",
            r#"multi-line-mode(prefix-suffix) multi-line-prefix("^<rec>") multi-line-suffix("</rec>")"#,
        ),
    ];
    let text = "2026-11-24 start one\n  cont a\n\tcont b\n2026-11-24 two --END-- junk\nloose line\n<rec>x\ny</rec> tail\n2026-11-24 three\n  c\nlast line\n";
    for (name, options) in cases {
        let log = input.path().join(format!("{name}.log"));
        append(&log, text);
        let config = format!(
            r#"@version: 3.38
            source s {{ file("{}" follow-freq(1) flags(no-parse) {options}); }};
            destination d {{ file("@OUT@/all.log" template("[$MSG]\n")); }};
            log {{ source(s); destination(d); }};"#,
            log.display()
        );
        let mut outputs = Vec::new();
        for kind in [Server::SyslogNg, Server::Sluice] {
            let r = Running::start(kind, &config);
            let file = r.out.join("all.log");
            std::thread::sleep(Duration::from_millis(2500));
            outputs.push(std::fs::read_to_string(&file).unwrap_or_default());
            drop(r);
        }
        assert_eq!(outputs[0], outputs[1], "{name}");
    }
}

/// With change notices (inotify), a line is read when it is written, not follow-freq() later;
/// a file that appears in a wildcard-file() directory too.
#[test]
fn changes_are_noticed_without_waiting_for_follow_freq() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir_all(d.join("logs")).unwrap();
    append(&d.join("app.log"), "app: first\n");
    let conf = format!(
        r#"source s {{ file("{}" follow-freq(60)); wildcard-file(base-dir("{}") filename-pattern("*.log") follow-freq(60)); }};
        destination d {{ file("{}" template("$MSG\n")); }};
        log {{ source(s); destination(d); }};"#,
        d.join("app.log").display(),
        d.join("logs").display(),
        d.join("out.log").display()
    );
    let s = Sluice::start(d, &conf);
    wait_lines(&d.join("out.log"), 1);
    // Past the first look, which found nothing new.
    std::thread::sleep(Duration::from_millis(500));
    let started = std::time::Instant::now();
    append(&d.join("app.log"), "app: second\n");
    append(&d.join("logs/new.log"), "app: in a new file\n");
    let got = wait_lines(&d.join("out.log"), 3);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "noticed after {:?}: {got:?}\n{}",
        started.elapsed(),
        s.stderr()
    );
}

/// A directory of 20,000 files under `max-files(100)`: 100 are read, the rest wait, and that
/// is said once.
#[test]
fn max_files_holds_a_crowded_directory() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let logs = d.join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    for i in 0..20_000 {
        std::fs::write(logs.join(format!("f{i:05}.log")), format!("app: m{i}\n")).unwrap();
    }
    let s = Sluice::start(d, &wildcard_config(d, "max-files(100)"));
    wait_lines(&d.join("out.log"), 100);
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(lines(&d.join("out.log")).len(), 100);
    let said = s.stderr().matches("max-files(100) reached").count();
    assert_eq!(said, 1, "{}", s.stderr());
}

/// A binary file: every line becomes a message (NULs end lines too, as syslog-ng cuts them),
/// bytes that are not UTF-8 are kept as they are, and nothing stops the reader.
#[test]
fn a_binary_file_is_read_through() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut bytes: Vec<u8> = (0..=255u8).cycle().take(64 << 10).collect();
    bytes.extend_from_slice(b"\napp: after the binary part\n");
    std::fs::write(d.join("app.log"), &bytes).unwrap();
    let conf =
        config(d, &["app.log"]).replace(r#"template("$MSG\n")"#, r#"template("$MSG|$TAGS\n")"#);
    let s = Sluice::start(d, &conf);
    let out = d.join("out.log");
    wait_until(Duration::from_secs(20), || {
        std::fs::read(&out).is_ok_and(|b| b.windows(20).any(|w| w == b"after the binary par"))
    });
    let text = String::from_utf8_lossy(&std::fs::read(&out).unwrap()).into_owned();
    assert!(text.contains("after the binary part|"), "{}", s.stderr());
    assert!(
        text.contains("message.utf8_sanitized") || text.contains('\u{fffd}') || !text.is_empty()
    );
}

/// Lines that a stop could not deliver (their server was down) are not counted as read: the
/// next start reads them again and they arrive.
#[test]
fn lines_a_stop_could_not_deliver_are_read_again() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let log = d.join("app.log");
    let text: String = (0..50).map(|i| format!("app: m{i}\n")).collect();
    append(&log, &text);
    let port = common::free_port();
    let conf = format!(
        r#"source s {{ file("{}" follow-freq(0.1)); }};
        destination d {{ syslog("127.0.0.1" port({port}) time-reopen(1)); }};
        log {{ source(s); destination(d); }};"#,
        log.display()
    );
    let mut s = Sluice::start(d, &conf);
    std::thread::sleep(Duration::from_millis(1500));
    s.stop();
    assert!(s.stderr().contains("not delivered"), "{}", s.stderr());
    let receiver = common::receiver(port, Some("$MSG\\n"));
    let _s = Sluice::start(d, &conf);
    let got = wait_lines(&receiver.out.join("all.log"), 50);
    let want: Vec<String> = (0..50).map(|i| format!("m{i}")).collect();
    assert_eq!(got, want);
}

/// Rotation by rename while the writer still writes to the old file for a while, as with
/// syslog-ng 3.38: sluice reads every line of both files (the old one is read for late lines
/// for a minute); syslog-ng, which leaves the old file once it was quiet, loses the lines
/// written there after that — whatever it wrote, sluice wrote too, in the same order.
#[test]
fn rotation_compared_with_syslog_ng() {
    if common::syslog_ng().is_none() {
        return;
    }
    let mut outputs = Vec::new();
    for kind in [Server::SyslogNg, Server::Sluice] {
        let input = tempfile::tempdir().unwrap();
        let log = input.path().join("app.log");
        append(&log, "app: a1\napp: a2\n");
        let r = Running::start(
            kind,
            &format!(
                r#"@version: 3.38
                source s {{ file("{}" follow-freq(1)); }};
                destination d {{ file("@OUT@/all.log" template("$MSG\n")); }};
                log {{ source(s); destination(d); }};"#,
                log.display()
            ),
        );
        let out = r.out.join("all.log");
        wait_until(Duration::from_secs(20), || lines(&out).len() >= 2);
        let mut old = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
        std::fs::rename(&log, input.path().join("app.log.1")).unwrap();
        append(&log, "app: b1\n");
        // The writer is slow to reopen: two more lines go to the old file.
        std::thread::sleep(Duration::from_millis(1500));
        old.write_all(b"app: a3\napp: a4\n").unwrap();
        drop(old);
        std::thread::sleep(Duration::from_millis(1500));
        append(&log, "app: b2\n");
        wait_until(Duration::from_secs(15), || lines(&out).len() >= 6);
        std::thread::sleep(Duration::from_millis(1000));
        outputs.push(lines(&out));
    }
    let (theirs, ours) = (&outputs[0], &outputs[1]);
    // In the order they were written: the old file's late lines after b1.
    assert_eq!(
        ours,
        &["a1", "a2", "b1", "a3", "a4", "b2"],
        "syslog-ng: {theirs:?}"
    );
    let mut rest = ours.iter();
    assert!(
        theirs.iter().all(|l| rest.any(|o| o == l)),
        "syslog-ng's lines are not in sluice's order: {theirs:?} / {ours:?}"
    );
}
