//! sluice under systemd: the notification protocol a `Type=notify` unit relies on, driven
//! through a socket of the test's own (`NOTIFY_SOCKET`), and the unit file
//! (`packaging/sluice.service`) as `systemd-analyze verify` reads it.

mod common;

use common::{free_port, sluice_bin, InDir};
use std::os::unix::net::UnixDatagram;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// The next notification other than `WATCHDOG=1`, waiting at most 20 s; the watchdog ones
/// seen on the way are counted in `alive`.
fn next(socket: &UnixDatagram, alive: &mut usize) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut buf = [0u8; 4096];
    while Instant::now() < deadline {
        match socket.recv(&mut buf) {
            Ok(n) => {
                // Each state on a line of its own.
                let text = String::from_utf8_lossy(&buf[..n]).trim_end().to_string();
                if text == "WATCHDOG=1" {
                    *alive += 1;
                    continue;
                }
                return text;
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => continue,
            Err(e) => panic!("receiving a notification: {e}"),
        }
    }
    panic!("no notification within 20 s");
}

#[test]
fn ready_reloading_and_stopping_are_told_to_systemd() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notify");
    let socket = UnixDatagram::bind(&path).unwrap();
    socket
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let port = free_port();
    // systemd names the process its watchdog is for: the shell's pid is sluice's once it
    // execs it.
    let mut cmd = Command::new("sh");
    cmd.args(["-c", r#"export WATCHDOG_PID=$$; exec "$0" "$@""#])
        .arg(sluice_bin())
        .env("NOTIFY_SOCKET", &path)
        .env("WATCHDOG_USEC", "200000");
    let mut s = InDir::start(
        cmd,
        dir.path(),
        &format!(
            r#"source s {{ tcp(ip(127.0.0.1) port({port})); }};
            destination d {{ file("@DIR@/out.log"); }};
            log {{ source(s); destination(d); }};"#
        ),
    );
    let mut alive = 0;
    assert_eq!(
        next(&socket, &mut alive),
        "READY=1\nSTATUS=running",
        "{}",
        s.stderr()
    );
    // Ready means listening.
    std::net::TcpStream::connect(("127.0.0.1", port)).expect("listening once ready");
    // The watchdog at half of WATCHDOG_USEC.
    let started = Instant::now();
    while alive < 3 && started.elapsed() < Duration::from_secs(5) {
        let mut buf = [0u8; 64];
        if let Ok(n) = socket.recv(&mut buf) {
            assert_eq!(&buf[..n], b"WATCHDOG=1\n");
            alive += 1;
        }
    }
    assert!(alive >= 3, "{alive} watchdog notifications");
    // SIGHUP: RELOADING=1 (with the time, for Type=notify-reload), then READY=1.
    // SAFETY: kill(2) on a child we spawned and have not reaped.
    unsafe { libc::kill(s.child.id() as i32, libc::SIGHUP) };
    let reloading = next(&socket, &mut alive);
    assert!(
        reloading.starts_with("RELOADING=1\nMONOTONIC_USEC="),
        "{reloading}"
    );
    assert_eq!(next(&socket, &mut alive), "READY=1\nSTATUS=running");
    // SIGTERM: STOPPING=1.
    // SAFETY: as above.
    unsafe { libc::kill(s.child.id() as i32, libc::SIGTERM) };
    assert_eq!(next(&socket, &mut alive), "STOPPING=1\nSTATUS=stopping");
    s.child.wait().unwrap();
}

/// `systemd-analyze verify` accepts the unit (its binary's path pointed at this build).
#[test]
fn the_unit_file_verifies() {
    if Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("SKIPPED: systemd-analyze is not installed (the systemd package)");
        return;
    }
    let unit = Path::new(env!("CARGO_MANIFEST_DIR")).join("packaging/sluice.service");
    let text = std::fs::read_to_string(unit).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let here = dir.path().join("sluice.service");
    std::fs::write(
        &here,
        text.replace("/usr/sbin/sluice", &sluice_bin().display().to_string()),
    )
    .unwrap();
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&here)
        .output()
        .unwrap();
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A port below 1024 nothing listens on, from `from` on (this process is root; tests that
/// run at once look in ranges of their own).
fn privileged_port(from: u16) -> u16 {
    (from..from + 100)
        .find(|p| std::net::TcpListener::bind(("127.0.0.1", *p)).is_ok())
        .expect("a free port below 1024")
}

/// `/proc/PID/status`'s line that starts with `key`, its fields.
fn status(pid: u32, key: &str) -> String {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = text
        .lines()
        .find(|l| l.starts_with(key))
        .unwrap()
        .to_string();
    line[key.len()..]
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// Started as root with `-u nobody -g nogroup` (and `extra` flags): listening on a privileged
/// port, then running as nobody; the server, its port and output file, and what it writes.
fn as_nobody(extra: &[&str], from: u16) -> (tempfile::TempDir, InDir, u16, std::path::PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let port = privileged_port(from);
    let mut cmd = Command::new(sluice_bin());
    cmd.args(["-u", "nobody", "-g", "nogroup", "-e"])
        .args(extra);
    let s = InDir::start(
        cmd,
        dir.path(),
        &format!(
            r#"source s {{ tcp(ip(127.0.0.1) port({port})); }};
            destination d {{ file("@DIR@/out.log" template("$MSG\n")); }};
            log {{ source(s); destination(d); }};"#
        ),
    );
    common::wait_until(Duration::from_secs(10), || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    let pid = s.child.id();
    common::wait_until(Duration::from_secs(10), || {
        status(pid, "Uid:") == "65534 65534 65534 65534"
    });
    assert_eq!(
        status(pid, "Uid:"),
        "65534 65534 65534 65534",
        "{}",
        s.stderr()
    );
    assert_eq!(status(pid, "Gid:"), "65534 65534 65534 65534");
    let out = dir.path().join("out.log");
    (dir, s, port, out)
}

fn send_to(port: u16, text: &str) {
    use std::io::Write;
    let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.write_all(format!("<13>Nov 25 10:00:00 h app: {text}\n").as_bytes())
        .unwrap();
}

/// Adds a listener on a second privileged port to the running configuration and reloads;
/// the port.
fn reload_with_another_privileged_port(dir: &std::path::Path, pid: u32, port: u16) -> u16 {
    let conf = dir.join("server.conf");
    let text = std::fs::read_to_string(&conf).unwrap();
    let other = privileged_port(port + 1);
    std::fs::write(
        &conf,
        text.replace(
            &format!("port({port}));"),
            &format!("port({port})); tcp(ip(127.0.0.1) port({other}));"),
        ),
    )
    .unwrap();
    // SAFETY: kill(2) on a child we spawned and have not reaped.
    unsafe { libc::kill(pid as i32, libc::SIGHUP) };
    other
}

/// Started as root with `-u nobody -g nogroup`: listening on a privileged port, then running as
/// nobody keeping only a log daemon's capabilities (binding ports below 1024, reading the
/// kernel's messages and other users' files), still receiving there and writing its files;
/// a reload that keeps the port works, and so does one that adds a privileged port.
#[test]
fn with_user_it_binds_as_root_then_runs_as_that_user() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED: needs root to start as root and become nobody");
        return;
    }
    let (dir, mut s, port, out) = as_nobody(&[], 700);
    let pid = s.child.id();
    // cap_dac_read_search (2), cap_net_bind_service (10), cap_syslog (34), in every thread.
    let kept = "0000000400000404";
    assert_eq!(status(pid, "CapEff:"), kept);
    assert_eq!(status(pid, "CapPrm:"), kept);
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
    {
        let text = std::fs::read_to_string(task.path().join("status")).unwrap_or_default();
        assert!(
            text.contains(&format!("CapEff:\t{kept}")) && text.contains("Uid:\t65534"),
            "thread {:?}: {text}",
            task.file_name()
        );
    }
    send_to(port, "as nobody");
    common::wait_until(Duration::from_secs(10), || {
        std::fs::read_to_string(&out).is_ok_and(|t| t.contains("as nobody"))
    });
    let meta = std::fs::metadata(&out).unwrap();
    assert_eq!(
        std::os::unix::fs::MetadataExt::uid(&meta),
        65534,
        "the file is nobody's"
    );
    // A reload that keeps the port.
    // SAFETY: kill(2) on a child we spawned and have not reaped.
    unsafe { libc::kill(pid as i32, libc::SIGHUP) };
    common::wait_until(Duration::from_secs(10), || {
        s.stderr().contains("configuration reloaded")
    });
    send_to(port, "after the reload");
    let reloaded = common::wait_until(Duration::from_secs(10), || {
        std::fs::read_to_string(&out).is_ok_and(|t| t.contains("after the reload"))
    });
    assert!(reloaded, "{}", s.stderr());
    // One that adds a privileged port: cap_net_bind_service binds it.
    let other = reload_with_another_privileged_port(dir.path(), pid, port);
    common::wait_until(Duration::from_secs(10), || {
        std::net::TcpStream::connect(("127.0.0.1", other)).is_ok()
    });
    send_to(other, "on the new port");
    let received = common::wait_until(Duration::from_secs(10), || {
        std::fs::read_to_string(&out).is_ok_and(|t| t.contains("on the new port"))
    });
    assert!(received, "{}", s.stderr());
    s.stop();
}

/// With `--no-caps`, nothing privileged is kept: a reload that needs root again (a second
/// privileged port) says why it cannot be done, and the running configuration goes on.
#[test]
fn with_no_caps_a_reload_that_needs_root_says_so() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED: needs root to start as root and become nobody");
        return;
    }
    let (dir, mut s, port, _out) = as_nobody(&["--no-caps"], 850);
    let pid = s.child.id();
    assert_eq!(status(pid, "CapEff:"), "0000000000000000");
    assert_eq!(status(pid, "CapPrm:"), "0000000000000000");
    reload_with_another_privileged_port(dir.path(), pid, port);
    common::wait_until(Duration::from_secs(10), || {
        s.stderr().contains("gave up root")
    });
    assert!(
        s.stderr().contains("Permission denied")
            && s.stderr().contains("a restart adds this listener"),
        "{}",
        s.stderr()
    );
    s.stop();
}

/// `-C DIR -u nobody`: the configuration is read inside the new root, what sluice writes goes
/// there, the user is looked up before, and every thread runs as nobody in it.
#[test]
fn with_chroot_the_configuration_and_files_are_inside_it() {
    use std::os::unix::fs::PermissionsExt;
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED: needs root to change root");
        return;
    }
    let jail = tempfile::tempdir().unwrap();
    std::fs::set_permissions(jail.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = jail.path().join("out");
    std::fs::create_dir(&out).unwrap();
    std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o777)).unwrap();
    let port = common::free_port();
    std::fs::write(
        jail.path().join("sluice.conf"),
        format!(
            r#"@version: 3.38
            source s {{ tcp(ip(127.0.0.1) port({port})); }};
            destination d {{ file("/out/jailed.log" template("$MSG\n")); }};
            log {{ source(s); destination(d); }};"#
        ),
    )
    .unwrap();
    let child = Command::new(sluice_bin())
        .arg("-F")
        .arg("-C")
        .arg(jail.path())
        .args([
            "-f",
            "/sluice.conf",
            "-R",
            "/out/persist",
            "-c",
            "/out/ctl",
            "-p",
            "/out/pid",
        ])
        .args(["-u", "nobody", "-g", "nogroup"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let up = common::wait_until(Duration::from_secs(10), || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    let pid = child.id();
    let root = std::fs::read_link(format!("/proc/{pid}/root")).ok();
    send_to(port, "in the jail");
    let written = common::wait_until(Duration::from_secs(10), || {
        std::fs::read_to_string(out.join("jailed.log")).is_ok_and(|t| t.contains("in the jail"))
    });
    let uid = status(pid, "Uid:");
    // SAFETY: kill(2) on a child we spawned and have not reaped.
    unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    let status = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&status.stderr);
    assert!(up && written, "{stderr}");
    assert_eq!(root.as_deref(), Some(jail.path()), "{stderr}");
    assert_eq!(uid, "65534 65534 65534 65534");
}
