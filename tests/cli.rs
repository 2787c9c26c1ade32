//! The `sluice` command end to end: configuration errors, `check-config`, `stdin()`, signals,
//! detaching, `max-connections()`, and the embedded default configuration.

mod common;

use common::{free_port, sluice_bin, wait_lines, Running, Server};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;

fn check_config(text: &str) -> (i32, String) {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("bad.conf");
    std::fs::write(&conf, text).unwrap();
    let out = Command::new(sluice_bin())
        .arg("check-config")
        .arg(&conf)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).replace(&*conf.to_string_lossy(), "bad.conf");
    (out.status.code().unwrap_or(-1), stderr)
}

#[test]
fn unknown_option_points_at_it_and_suggests_the_nearest() {
    let (code, err) = check_config("@version: 3.38\nsource s {\n    network(prot(514));\n};\n");
    assert_eq!(code, 1, "{err}");
    assert!(
        err.starts_with("bad.conf:3:13: unknown option 'prot' in network()"),
        "{err}"
    );
    assert!(
        err.contains("3 |     network(prot(514));\n  |             ^^^^\n"),
        "{err}"
    );
    assert!(err.contains("did you mean 'port'?"), "{err}");
}

#[test]
fn unknown_driver_lists_the_valid_ones() {
    let (code, err) = check_config("source s { tpc(); };\n");
    assert_eq!(code, 1);
    assert!(
        err.contains("unknown source driver 'tpc'") && err.contains("did you mean 'tcp'?"),
        "{err}"
    );
}

#[test]
fn undefined_references_are_errors() {
    let (code, err) =
        check_config("source s { stdin(); };\nlog { source(s); destination(d_missing); };\n");
    assert_eq!(code, 1);
    assert!(
        err.contains("bad.conf:2:30: destination 'd_missing' is not defined"),
        "{err}"
    );
    let (code, err) = check_config(
        "filter f { filter(f); };\nsource s { stdin(); };\nlog { source(s); filter(f); };\n",
    );
    assert_eq!(code, 1);
    assert!(err.contains("refers to itself"), "{err}");
}

#[test]
fn later_features_are_refused_by_name() {
    for (text, what) in [
        (
            "destination d { kafka(topic(\"logs\")); };",
            "the kafka() destination is not supported yet",
        ),
        (
            "source s { network(transport(auto)); };",
            "transport(auto) is not supported yet",
        ),
        (
            "source s { systemd-syslog(); };",
            "the systemd-syslog() source is not supported yet",
        ),
        (
            "parser p { xml(); };",
            "the xml() parser is not supported yet",
        ),
        (
            "destination d { file(\"/x\" template(\"$(format-cim)\")); };",
            "the template function $(format-cim) is not supported yet",
        ),
        (
            "destination d { stdout(disk-buffer(reliable(yes))); };",
            "disk-buffer() in stdout() is not supported yet",
        ),
        (
            "template_function t \"x\";",
            "the 'template_function' statement is not supported yet",
        ),
        (
            "parser p { group-lines(key(\"$HOST\")); };",
            "the group-lines() parser is not supported yet",
        ),
        (
            "parser p { add-contextual-data(selector(\"$HOST\")); };",
            "the add-contextual-data() parser is not supported yet",
        ),
        (
            "parser p { geoip2(\"$SOURCEIP\"); };",
            "the geoip2() parser is not supported yet",
        ),
        (
            "parser p { panos-parser(); sudo-parser(); };",
            "the panos-parser() parser is not supported yet",
        ),
        (
            "destination d { riemann(server(\"x\")); };",
            "the riemann() destination is not supported yet",
        ),
        (
            "source s { network(so-broadcast(yes)); };",
            "so-broadcast() in network() is not supported yet",
        ),
    ] {
        let (code, err) = check_config(text);
        assert_eq!(code, 1, "{text}: {err}");
        assert!(err.contains(what), "{text}: {err}");
        assert!(err.contains('^'), "{text}: no caret in {err}");
    }
}

/// An option a driver does not act on is refused, as syslog-ng refuses it, never accepted
/// and ignored.
#[test]
fn options_a_driver_does_not_read_are_refused() {
    for (text, valid) in [
        (
            "parser p { date-parser(prefix(\"x.\")); };",
            "valid options: ",
        ),
        ("parser p { tags-parser(prefix(\"x.\")); };", "template"),
        (
            "parser p { syslog-parser(prefix(\"x.\")); };",
            "drop-invalid",
        ),
        (
            "parser p { csv-parser(columns(a) marker(\"@\")); };",
            "columns",
        ),
        ("parser p { kv-parser(marker(\"@\")); };", "value-separator"),
        ("rewrite r { set-tag(\"x\" value(\"X\")); };", "condition"),
        (
            "rewrite r { rename(\"a\" \"b\" value(\"X\")); };",
            "condition",
        ),
    ] {
        let (code, err) = check_config(text);
        assert_eq!(code, 1, "{text}: {err}");
        assert!(
            err.contains("unknown option") && err.contains(valid),
            "{text}: {err}"
        );
        // syslog-ng 3.38 refuses each as well.
        if let Some(ng) = common::syslog_ng() {
            let dir = tempfile::tempdir().unwrap();
            let conf = dir.path().join("ng.conf");
            std::fs::write(&conf, format!("@version: 3.38\n{text}\n")).unwrap();
            let out = Command::new(ng)
                .arg("-s")
                .arg("-f")
                .arg(&conf)
                .output()
                .unwrap();
            assert!(!out.status.success(), "syslog-ng accepts {text}");
        }
    }
    let (code, err) = check_config("source s { apache-accesslog-parser(); };");
    assert_eq!(code, 1);
    assert!(
        err.contains("unknown source driver")
            && err
                .lines()
                .any(|l| l.contains("valid source drivers") && !l.contains("accesslog")),
        "a parser is not offered as a source: {err}"
    );
}

/// syslog-ng refuses a file without `@version` (and an empty one), and warns of versions other
/// than its own; sluice reads each as 3.38 and warns.
#[test]
fn versions_other_than_3_38_are_warned_of() {
    for (text, warning) in [
        ("", "the configuration is empty"),
        ("source s { stdin(); };", "has no @version"),
        (
            "@version: 4.2\nsource s { stdin(); };",
            "written for syslog-ng 4.2",
        ),
        (
            "@version: 3.20\nsource s { stdin(); };",
            "no compatibility mode",
        ),
    ] {
        let (code, err) = check_config(text);
        assert_eq!(code, 0, "{text}: {err}");
        assert!(err.contains(warning), "{text}: {err}");
    }
}

#[test]
fn syntax_errors_and_includes_keep_their_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("inc.conf"),
        "\n\ndestination d { file(\"/tmp/x\") };\n",
    )
    .unwrap();
    let main = dir.path().join("main.conf");
    std::fs::write(&main, "@version: 3.38\n@include \"inc.conf\"\n").unwrap();
    let out = Command::new(sluice_bin())
        .arg("-s")
        .arg("-f")
        .arg(&main)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert!(err.contains("inc.conf:3:32: expected ';'"), "{err}");
}

#[test]
fn valid_configurations_and_the_default_check_clean() {
    let (code, err) = check_config("@version: 3.38\nsource s { network(port(5514)); };\ndestination d { file(\"/tmp/x\"); };\nlog { source(s); destination(d); };\n");
    assert_eq!((code, err.as_str()), (0, ""));
    let default = Command::new(sluice_bin())
        .arg("--print-default-config")
        .output()
        .unwrap();
    assert!(default.status.success());
    let (code, err) = check_config(&String::from_utf8_lossy(&default.stdout));
    assert_eq!((code, err.as_str()), (0, ""));
    let version = Command::new(sluice_bin()).arg("-V").output().unwrap();
    assert!(String::from_utf8_lossy(&version.stdout).starts_with("sluice "));
}

#[test]
fn stdin_source_exits_once_everything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.log");
    let conf = dir.path().join("c.conf");
    std::fs::write(&conf, format!("source s {{ stdin(); }};\ndestination d {{ file(\"{}\" template(\"$PROGRAM $MSG\\n\")); }};\nlog {{ source(s); destination(d); }};\n", out.display())).unwrap();
    let mut child = Command::new(sluice_bin())
        .args(["-F", "-f"])
        .arg(&conf)
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = String::new();
    for i in 0..20_000 {
        input.push_str(&format!(
            "<13>Jan  5 13:56:09 host prog{}: line {i}\n",
            i % 7
        ));
    }
    input.push_str("<13>Jan  5 13:56:09 host last: line without newline");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let status = child.wait().unwrap();
    assert!(status.success());
    let text = std::fs::read_to_string(&out).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 20_001);
    assert_eq!(lines[19_999], "prog0 line 19999");
    assert_eq!(lines[20_000], "last line without newline");
}

#[test]
fn sigterm_writes_everything_that_was_read() {
    let port = free_port();
    let mut server = Running::start(
        Server::Sluice,
        &format!("source s {{ tcp(ip(127.0.0.1) port({port})); }};\ndestination d {{ file(\"@OUT@/all.log\"); }};\nlog {{ source(s); destination(d); }};\n"),
    );
    server.wait_tcp(port);
    let mut input = Vec::new();
    for i in 0..100_000 {
        input.extend_from_slice(format!("<13>Jan  5 13:56:09 host prog: message {i}\n").as_bytes());
    }
    common::send_tcp(port, &input, common::Framing::Newline);
    server.terminate();
    let lines = std::fs::read_to_string(server.out.join("all.log"))
        .unwrap()
        .lines()
        .count();
    assert_eq!(lines, 100_000);
}

#[test]
fn max_connections_refuses_the_excess() {
    let port = free_port();
    let mut server = Running::start(
        Server::Sluice,
        &format!("source s {{ tcp(ip(127.0.0.1) port({port}) max-connections(2)); }};\ndestination d {{ file(\"@OUT@/all.log\"); }};\nlog {{ source(s); destination(d); }};\n"),
    );
    server.wait_tcp(port);
    std::thread::sleep(Duration::from_millis(200)); // the probe connection of wait_tcp has closed
    let mut a = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let mut b = TcpStream::connect(("127.0.0.1", port)).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut buf = [0u8; 1];
    assert_eq!(
        c.read(&mut buf).unwrap_or(0),
        0,
        "the third connection is closed by the server"
    );
    a.write_all(b"<13>Jan  5 13:56:09 host prog: from a\n")
        .unwrap();
    b.write_all(b"<13>Jan  5 13:56:09 host prog: from b\n")
        .unwrap();
    assert_eq!(wait_lines(&server.out, 2, Duration::from_secs(10)), 2);
    let (ok, stats) = common::ctl(&server, &["stats"]);
    assert!(
        ok && stats
            .lines()
            .any(|l| l.ends_with(";rejected_connections;1")),
        "{stats}"
    );
    server.terminate();
    assert!(
        server.stderr().contains("max-connections(2) reached"),
        "{}",
        server.stderr()
    );
}

#[test]
fn detaches_writes_a_pid_file_and_fails_visibly_on_a_busy_port() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let conf = dir.path().join("c.conf");
    let pidfile = dir.path().join("sluice.pid");
    std::fs::write(&conf, format!("@version: 3.38\nsource s {{ tcp(ip(127.0.0.1) port({port})); }};\ndestination d {{ file(\"{}/out.log\"); }};\nlog {{ source(s); destination(d); }};\n", dir.path().display())).unwrap();
    // The host's syslog socket: no log path reads internal(), so sluice's own messages go
    // there once it detaches.
    let dev_log = dir.path().join("dev-log");
    let host_log = std::os::unix::net::UnixDatagram::bind(&dev_log).unwrap();
    host_log
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let first = Command::new(sluice_bin())
        .arg("-f")
        .arg(&conf)
        .arg("-p")
        .arg(&pidfile)
        .env("SLUICE_DEV_LOG", &dev_log)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&first.stderr);
    assert!(
        first.status.success(),
        "the launcher exits 0 once the daemon listens: {said}"
    );
    assert_eq!(
        said,
        format!(
            "sluice: its own messages go to {} (no log path reads internal())\n",
            dev_log.display()
        )
    );
    let mut buf = [0u8; 1024];
    let n = host_log.recv(&mut buf).unwrap();
    let line = String::from_utf8_lossy(&buf[..n]).into_owned();
    assert!(
        line.starts_with("<45>") && line.contains(" sluice[") && line.contains("starting up"),
        "{line}"
    );
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(TcpStream::connect(("127.0.0.1", port)).is_ok());
    // A second instance cannot bind the same port: the launcher reports it and fails.
    let second = Command::new(sluice_bin())
        .arg("-f")
        .arg(&conf)
        .output()
        .unwrap();
    assert!(!second.status.success());
    let said = String::from_utf8_lossy(&second.stderr);
    assert_eq!(
        said.matches("cannot listen").count(),
        1,
        "said once: {said}"
    );
    assert!(
        said.contains(&format!("127.0.0.1:{port}/tcp")),
        "an address as an operator writes it: {said}"
    );
    // SAFETY: kill(2) on the daemon's pid read from its pid file.
    unsafe {
        libc::kill(pid, libc::SIGTERM);
    }
    for _ in 0..100 {
        if !pidfile.exists() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        !pidfile.exists(),
        "the daemon removes its pid file when it stops"
    );
    let n = host_log.recv(&mut buf).unwrap();
    let line = String::from_utf8_lossy(&buf[..n]).into_owned();
    assert!(line.contains("shutting down"), "{line}");
}

#[test]
fn embedded_default_runs_unprivileged_on_high_ports() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 || Command::new("setpriv").arg("--version").output().is_err()
    {
        eprintln!("SKIPPED: needs root and setpriv to run sluice as an unprivileged user");
        return;
    }
    if std::net::UdpSocket::bind("127.0.0.1:5514").is_err()
        || std::net::TcpListener::bind("127.0.0.1:5601").is_err()
    {
        eprintln!("SKIPPED: ports 5514/5601 are in use");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let mut child = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(sluice_bin())
        .arg("-F")
        .current_dir(dir.path())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut up = false;
    for _ in 0..100 {
        if TcpStream::connect(("127.0.0.1", 5601)).is_ok() {
            up = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(up, "the default listens on 5601 when not root");
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.send_to(
        b"<13>Jan  5 13:56:09 webhost prog: over udp",
        ("127.0.0.1", 5514),
    )
    .unwrap();
    let mut tcp = TcpStream::connect(("127.0.0.1", 5601)).unwrap();
    let frame = "<13>1 2025-01-05T13:56:09Z webhost app - - - over syslog";
    tcp.write_all(format!("{} {frame}", frame.len()).as_bytes())
        .unwrap();
    drop(tcp);
    let logs = dir.path().join("sluice-logs/webhost");
    assert!(wait_lines(&logs, 2, Duration::from_secs(10)) >= 2);
    // SAFETY: kill(2) on our child.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let _ = child.wait();
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(stderr.contains("not running as root"), "{stderr}");
}

/// Detached, sluice's own messages follow internal() across reloads: to the file that reads
/// it while a log path does, to the host's syslog socket once a reload removes it.
#[test]
fn detached_own_messages_go_to_the_host_log_once_a_reload_removes_internal() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let conf = dir.path().join("c.conf");
    let pidfile = dir.path().join("sluice.pid");
    let ctl_path = dir.path().join("ctl");
    let config = |internal: bool| {
        let mut text = format!(
            "@version: 3.38\nsource s {{ tcp(ip(127.0.0.1) port({port})); }};\ndestination d {{ file(\"{}/out.log\"); }};\nlog {{ source(s); destination(d); }};\n",
            dir.path().display()
        );
        if internal {
            text.push_str(&format!(
                "source s_int {{ internal(); }};\ndestination di {{ file(\"{}/own.log\"); }};\nlog {{ source(s_int); destination(di); }};\n",
                dir.path().display()
            ));
        }
        text
    };
    std::fs::write(&conf, config(true)).unwrap();
    let dev_log = dir.path().join("dev-log");
    let host_log = std::os::unix::net::UnixDatagram::bind(&dev_log).unwrap();
    host_log
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let started = Command::new(sluice_bin())
        .arg("-f")
        .arg(&conf)
        .arg("-p")
        .arg(&pidfile)
        .arg("-c")
        .arg(&ctl_path)
        .env("SLUICE_DEV_LOG", &dev_log)
        .output()
        .unwrap();
    assert!(
        started.status.success(),
        "{}",
        String::from_utf8_lossy(&started.stderr)
    );
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let stop = Defer(move || {
        // SAFETY: kill(2) on the daemon's pid read from its pid file.
        unsafe {
            libc::kill(pid, libc::SIGTERM);
        }
    });
    let ctl = |args: &[&str]| {
        let out = Command::new(sluice_bin())
            .arg("ctl")
            .arg("-c")
            .arg(&ctl_path)
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    };
    // internal() is read: the reload's notice goes to its file, not to the host.
    ctl(&["reload"]);
    let own = dir.path().join("own.log");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !std::fs::read_to_string(&own)
        .unwrap_or_default()
        .contains("configuration reloaded")
    {
        assert!(
            std::time::Instant::now() < deadline,
            "no reload notice in own.log"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    host_log
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut buf = [0u8; 1024];
    assert!(host_log.recv(&mut buf).is_err(), "nothing for the host");
    // Removed: the next notice reaches the host's syslog socket.
    std::fs::write(&conf, config(false)).unwrap();
    ctl(&["reload"]);
    host_log
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let n = host_log.recv(&mut buf).unwrap();
    let line = String::from_utf8_lossy(&buf[..n]).into_owned();
    assert!(line.contains("configuration reloaded"), "{line}");
    drop(stop);
}

/// Runs a closure when dropped, also when a test fails.
struct Defer<F: FnMut()>(F);

impl<F: FnMut()> Drop for Defer<F> {
    fn drop(&mut self) {
        (self.0)()
    }
}

/// The manual pages are written from the command-line definitions (and `sluice.conf(5)` from
/// the drivers' tables) and render (`man -l`); each shell's completions are there.
#[test]
fn manual_pages_render_and_completions_are_written() {
    let dir = tempfile::tempdir().unwrap();
    let made = std::process::Command::new(common::sluice_bin())
        .arg("manpages")
        .arg(dir.path())
        .status()
        .unwrap();
    assert!(made.success());
    let mut pages: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    pages.sort();
    for page in [
        "sluice.8",
        "sluice.conf.5",
        "sluice-ctl.1",
        "sluice-loggen.1",
        "sluice-diskq.1",
        "sluice-pdbtool.1",
    ] {
        assert!(
            pages.iter().any(|p| p == page),
            "{page} missing from {pages:?}"
        );
    }
    // sluice.conf(5) is the configuration reference: every driver is in it.
    let conf = std::fs::read_to_string(dir.path().join("sluice.conf.5")).unwrap();
    for driver in [
        "network(), syslog()",
        "db\\-parser()",
        "grouping\\-by()",
        "file()",
    ] {
        assert!(conf.contains(driver), "{driver} not in sluice.conf(5)");
    }
    if std::process::Command::new("man")
        .arg("--version")
        .output()
        .is_ok()
    {
        for page in &pages {
            let out = std::process::Command::new("man")
                .arg("-l")
                .arg(dir.path().join(page))
                .env("MANPAGER", "cat")
                .env("MANWIDTH", "80")
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success() && text.contains("NAME"),
                "{page}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    for shell in ["bash", "zsh", "fish"] {
        let out = std::process::Command::new(common::sluice_bin())
            .args(["completions", shell])
            .output()
            .unwrap();
        assert!(out.status.success() && out.stdout.len() > 1000, "{shell}");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("pdbtool"),
            "{shell}"
        );
    }
}

/// `docs/reference.md` is what the drivers' option tables say: an option added to a table
/// and not to the reference (or the other way) fails here.
#[test]
fn the_reference_is_what_the_drivers_tables_say() {
    let out = std::process::Command::new(common::sluice_bin())
        .arg("reference")
        .output()
        .unwrap();
    assert!(out.status.success());
    let written = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/reference.md"),
    )
    .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout) == written,
        "docs/reference.md differs from the drivers' tables: write it again with `sluice reference > docs/reference.md`"
    );
}
