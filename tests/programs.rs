//! `program()` and `pipe()` sources: a program's output, the program started again when it
//! exits (not in a busy loop when it fails at once), a named pipe made when missing and read
//! across writers, and the same output as syslog-ng's.

mod common;

use common::{wait_until, Running, Server};
use std::io::Write;
use std::process::Command;
use std::time::{Duration, Instant};

fn lines(r: &Running) -> Vec<String> {
    std::fs::read_to_string(r.out.join("all.log"))
        .unwrap_or_default()
        .lines()
        .map(String::from)
        .collect()
}

fn config(source: &str) -> String {
    format!(
        r#"@version: 3.38
        source s {{ {source}; }};
        destination d {{ file("@OUT@/all.log" template("$PROGRAM $MSG\n")); }};
        log {{ source(s); destination(d); }};"#
    )
}

#[test]
fn a_programs_lines_are_read_and_it_is_started_again() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    // Says which run it is, then exits.
    let command = format!(
        "echo x >> {0}; echo \"app: run $(wc -l < {0})\"",
        runs.display()
    );
    let r = Running::start(Server::Sluice, &config(&format!("program({command:?})")));
    wait_until(Duration::from_secs(10), || lines(&r).len() >= 2);
    assert_eq!(lines(&r)[..2], ["app run 1", "app run 2"], "{}", r.stderr());
    assert!(
        r.stderr().contains("starting it again in 1s"),
        "{}",
        r.stderr()
    );
}

#[test]
fn a_program_that_fails_at_once_waits_longer_each_time() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let command = format!("echo x >> {}; exit 3", runs.display());
    let r = Running::start(Server::Sluice, &config(&format!("program({command:?})")));
    let started = Instant::now();
    std::thread::sleep(Duration::from_secs(5));
    let count = std::fs::read_to_string(&runs)
        .unwrap_or_default()
        .lines()
        .count();
    // 0 s, 1 s, 3 s (waits of 1 and 2 s): 3 runs in 5 s, not thousands.
    assert!(
        (2..=4).contains(&count),
        "{count} runs in {:?}",
        started.elapsed()
    );
    assert!(r.stderr().contains("exit status: 3"), "{}", r.stderr());
}

#[test]
fn a_named_pipe_is_made_and_read_across_writers() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.pipe");
    let r = Running::start(
        Server::Sluice,
        &config(&format!("pipe(\"{}\")", path.display())),
    );
    wait_until(Duration::from_secs(10), || path.exists());
    for i in 0..3 {
        let mut w = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        writeln!(w, "app: writer {i}").unwrap();
    }
    wait_until(Duration::from_secs(10), || lines(&r).len() >= 3);
    assert_eq!(lines(&r), ["app writer 0", "app writer 1", "app writer 2"]);
}

#[test]
fn program_reads_as_syslog_ngs() {
    if common::syslog_ng().is_none() {
        return;
    }
    let source = r#"program("printf '<13>Nov 24 10:00:00 h1 app[1]: one\nplain two\n'; sleep 30")"#;
    let text = format!(
        r#"@version: 3.38
        options {{ keep-hostname(yes); }};
        source s {{ {source}; }};
        destination d {{ file("@OUT@/all.log" template("$HOST|$PROGRAM|$PRIORITY|$MSG\n")); }};
        log {{ source(s); destination(d); }};"#
    );
    let mut outputs = Vec::new();
    for kind in [Server::SyslogNg, Server::Sluice] {
        let r = Running::start(kind, &text);
        wait_until(Duration::from_secs(10), || lines(&r).len() >= 2);
        outputs.push(lines(&r));
    }
    assert_eq!(outputs[0], outputs[1]);
}

/// A sluice with a TCP source on `port` and `destination`.
fn relay(destination: &str) -> (Running, u16) {
    let port = common::free_port();
    let mut r = Running::start(
        Server::Sluice,
        &format!(
            r#"@version: 3.38
            options {{ keep-hostname(yes); }};
            source s {{ tcp(ip(127.0.0.1) port({port})); }};
            destination d {{ {destination}; }};
            log {{ source(s); destination(d); flags(flow-control); }};"#
        ),
    );
    r.wait_tcp(port);
    (r, port)
}

fn file_lines(path: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(String::from)
        .collect()
}

#[test]
fn a_program_destination_gets_every_message_on_its_input() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("got");
    let (r, port) = relay(&format!(
        r#"program("cat >> {}" template("$MSG\n"))"#,
        out.display()
    ));
    let input: String = (0..2000)
        .map(|i| format!("<13>Nov 24 10:00:00 h app: m{i}\n"))
        .collect();
    common::send_tcp(port, input.as_bytes(), common::Framing::Newline);
    wait_until(Duration::from_secs(20), || file_lines(&out).len() >= 2000);
    let want: Vec<String> = (0..2000).map(|i| format!("m{i}")).collect();
    assert_eq!(file_lines(&out), want, "{}", r.stderr());
}

#[test]
fn a_program_destination_that_exits_is_started_again() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("got");
    // Takes one line at a time and exits after two.
    let (r, port) = relay(&format!(
        r#"program("n=0; while read -r l; do echo \"$l\" >> {}; n=$((n+1)); [ $n -ge 2 ] && exit 0; done" template("$MSG\n"))"#,
        out.display()
    ));
    for i in 0..2 {
        common::send_tcp(
            port,
            format!("<13>Nov 24 10:00:00 h app: first{i}\n").as_bytes(),
            common::Framing::Newline,
        );
    }
    wait_until(Duration::from_secs(10), || file_lines(&out).len() >= 2);
    std::thread::sleep(Duration::from_millis(300));
    common::send_tcp(
        port,
        b"<13>Nov 24 10:00:00 h app: after\n",
        common::Framing::Newline,
    );
    wait_until(Duration::from_secs(10), || file_lines(&out).len() >= 3);
    assert_eq!(
        file_lines(&out),
        ["first0", "first1", "after"],
        "{}",
        r.stderr()
    );
}

#[test]
fn a_program_destination_writes_what_syslog_ngs_writes() {
    if common::syslog_ng().is_none() {
        return;
    }
    let mut outputs = Vec::new();
    for kind in [Server::SyslogNg, Server::Sluice] {
        let port = common::free_port();
        let mut r = Running::start(
            kind,
            &format!(
                r#"@version: 3.38
                options {{ keep-hostname(yes); }};
                source s {{ tcp(ip(127.0.0.1) port({port})); }};
                destination d {{ program("cat >> @OUT@/prog.log"); }};
                log {{ source(s); destination(d); }};"#
            ),
        );
        r.wait_tcp(port);
        common::send_tcp(
            port,
            b"<13>Nov 24 10:00:00 h1 app[7]: one\n<30>Nov 24 10:00:01 h2 sshd: two\n",
            common::Framing::Newline,
        );
        let file = r.out.join("prog.log");
        wait_until(Duration::from_secs(10), || file_lines(&file).len() >= 2);
        outputs.push(file_lines(&file));
    }
    assert_eq!(outputs[0], outputs[1]);
}

#[test]
fn pipe_and_usertty_destinations_tell_whoever_is_there_and_drop_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("console");
    rustix_mkfifo(&fifo);
    let (r, port) = relay(&format!(
        r#"pipe("{}" template("$MSG\n")); usertty("nobody-logged-in")"#,
        fifo.display()
    ));
    // No reader yet: dropped, said once.
    common::send_tcp(
        port,
        b"<13>Nov 24 10:00:00 h app: unread\n",
        common::Framing::Newline,
    );
    wait_until(Duration::from_secs(10), || {
        r.stderr().contains("nothing reads")
    });
    // A reader: the message arrives, with its control bytes made harmless.
    let reader = std::thread::spawn({
        let fifo = fifo.clone();
        move || {
            let mut text = String::new();
            let mut f = std::fs::File::open(&fifo).unwrap();
            std::io::Read::read_to_string(&mut f, &mut text).unwrap();
            text
        }
    });
    std::thread::sleep(Duration::from_millis(300));
    common::send_tcp(
        port,
        b"<13>Nov 24 10:00:00 h app: \x1b[31mred\x07\n",
        common::Framing::Newline,
    );
    std::thread::sleep(Duration::from_millis(500));
    drop(r);
    let got = reader.join().unwrap();
    assert_eq!(got, "?[31mred?\n");
}

fn rustix_mkfifo(path: &std::path::Path) {
    let status = Command::new("mkfifo").arg(path).status().unwrap();
    assert!(status.success());
}

/// A `pipe()` source or destination whose pipe is missing makes it (the source when it
/// starts, the destination when a message comes) as syslog-ng does: its directories with
/// `create-dirs(yes)` and `dir-perm()`, the pipe with `perm()` (not narrowed by the umask).
#[test]
fn a_missing_pipe_is_made_as_syslog_ng_makes_it() {
    pipe_made("source", (0o640, 0o750));
    pipe_made("destination", (0o604, 0o751));
}

/// The modes a `pipe()` of `kind` gives the pipe and the directory it made, the same for
/// sluice and syslog-ng.
fn pipe_made(kind: &str, want: (u32, u32)) {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    let (perm, dir_perm) = want;
    let mut modes = Vec::new();
    for server in [Server::Sluice, Server::SyslogNg] {
        if server == Server::SyslogNg && common::syslog_ng().is_none() {
            break;
        }
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("made/console");
        let port = common::free_port();
        let options =
            format!("create-dirs(yes) dir-perm({dir_perm:#o}) perm({perm:#o})").replace("0o", "0");
        let (source, destination) = match kind {
            "source" => (
                format!(r#"pipe("{}" {options})"#, fifo.display()),
                r#"file("/dev/null")"#.to_string(),
            ),
            _ => (
                "internal()".to_string(),
                format!(r#"pipe("{}" {options} template("$MSG\n"))"#, fifo.display()),
            ),
        };
        let mut r = Running::start(
            server,
            &format!(
                r#"@version: 3.38
                source s {{ tcp(ip(127.0.0.1) port({port})); {source}; }};
                destination d {{ {destination}; }};
                log {{ source(s); destination(d); }};"#
            ),
        );
        r.wait_tcp(port);
        common::send_tcp(
            port,
            b"<13>Nov 24 10:00:00 h app: make it\n",
            common::Framing::Newline,
        );
        assert!(
            wait_until(Duration::from_secs(10), || fifo.exists()),
            "{server:?} made no pipe for its {kind}"
        );
        let pipe = std::fs::metadata(&fifo).unwrap();
        let made = std::fs::metadata(fifo.parent().unwrap()).unwrap();
        assert!(pipe.file_type().is_fifo(), "{server:?} {kind}");
        modes.push((
            pipe.permissions().mode() & 0o7777,
            made.permissions().mode() & 0o7777,
        ));
        drop(r);
    }
    assert_eq!(modes[0], want, "{kind}");
    if let [ours, theirs] = &modes[..] {
        assert_eq!(ours, theirs, "{kind}: sluice (left) and syslog-ng (right)");
    }
}

/// The processes a `program()` destination starts (here a `sleep` in the background, as
/// `yes &` in a script would be) end with it when sluice stops (issue 55): the program has a
/// process group of its own, and the group is ended.
#[test]
fn a_program_destinations_children_end_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("got");
    // A duration nothing else on the machine sleeps, to find the process by.
    let marker = "987.654321";
    let (mut r, port) = relay(&format!(
        r#"program("sleep {marker} & cat >> {}" template("$MSG\n"))"#,
        out.display()
    ));
    common::send_tcp(
        port,
        b"<13>Nov 24 10:00:00 h app: m0\n",
        common::Framing::Newline,
    );
    wait_until(Duration::from_secs(20), || file_lines(&out).len() == 1);
    let sleeping = || {
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
            .filter(|c| {
                c.starts_with(b"sleep\0") && c.windows(marker.len()).any(|w| w == marker.as_bytes())
            })
            .count()
    };
    assert_eq!(sleeping(), 1, "the program's child runs");
    r.terminate();
    assert!(
        wait_until(Duration::from_secs(5), || sleeping() == 0),
        "the program's child outlived sluice"
    );
}
