//! The Debian package: built with `packaging/deb.sh` (cargo-deb), checked by `lintian`,
//! installed with `dpkg -i` and removed again, and the files it placed checked.
//!
//! It packages the binary the suite has already built (`SLUICE_PACKAGE_PROFILE=dev`): what
//! is checked is the packaging, and a fat-LTO release build would add ~13 minutes to every
//! run. `.ci/release` runs it with `SLUICE_PACKAGE_PROFILE=release`, the shipped binary. Needs root,
//! `cargo deb` and `lintian` (`.ci/install-test-deps.sh` installs both); skipped without.
//!
//! The package declares the conflicts rsyslog and syslog-ng declare, and this machine keeps
//! syslog-ng for the differential tests: the test installs with `--force-conflicts` and puts
//! nothing of syslog-ng's out of place (the package's files are its own).

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Whether `tool args…` runs and succeeds. (`cargo deb` alone would build a release package:
/// ask for its version.)
fn have(tool: &str, args: &[&str]) -> bool {
    Command::new(tool)
        .args(args)
        .output()
        .is_ok_and(|o| o.status.success())
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{cmd:?} failed:\n{text}");
    text
}

#[test]
fn the_package_builds_passes_lintian_installs_and_removes() {
    // SAFETY: geteuid has no preconditions.
    let is_root = unsafe { libc::geteuid() } == 0;
    if !is_root || !have("cargo", &["deb", "--version"]) || !have("lintian", &["--version"]) {
        if std::env::var_os("SLUICE_REQUIRE_PEERS").is_some() && is_root {
            panic!("cargo-deb or lintian is missing: run .ci/install-test-deps.sh");
        }
        eprintln!("SKIPPED: needs root, cargo-deb and lintian (.ci/install-test-deps.sh)");
        return;
    }
    let profile = std::env::var("SLUICE_PACKAGE_PROFILE").unwrap_or_else(|_| "dev".into());
    run(Command::new("sh")
        .arg(root().join("packaging/deb.sh"))
        .env("SLUICE_PACKAGE_PROFILE", &profile));
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root().join("target"), PathBuf::from);
    let debs: Vec<PathBuf> = std::fs::read_dir(target.join("debian"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "deb"))
        .collect();
    let deb = debs
        .iter()
        .max_by_key(|p| p.metadata().unwrap().modified().unwrap())
        .unwrap();
    let size = deb.metadata().unwrap().len();
    eprintln!("{}: {size} bytes", deb.display());
    // Stripped, the package is ~6 MiB (librdkafka and OpenSSL inside), ~9 MiB unoptimized;
    // either binary with its debug information is over 100 MiB.
    let bound = if profile == "release" {
        8 << 20
    } else {
        16 << 20
    };
    assert!(
        size <= bound,
        "the package is {size} bytes: is the binary stripped?"
    );
    // lintian: no errors (warnings are said).
    let lint = Command::new("lintian")
        .args(["--tag-display-limit", "0"])
        .arg(deb)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&lint.stdout);
    eprintln!("{said}");
    assert!(
        !said.lines().any(|l| l.starts_with("E:")),
        "lintian errors:\n{said}"
    );
    // What it declares.
    let fields = run(Command::new("dpkg-deb").arg("--field").arg(deb));
    assert!(
        fields.contains("Provides: system-log-daemon, linux-kernel-log-daemon"),
        "{fields}"
    );
    assert!(
        fields.contains("Conflicts: system-log-daemon, linux-kernel-log-daemon"),
        "{fields}"
    );
    // Installed and removed again.
    run(Command::new("dpkg")
        .args(["-i", "--force-conflicts"])
        .arg(deb));
    let placed = [
        "/usr/sbin/sluice",
        "/etc/sluice/sluice.conf",
        "/etc/logrotate.d/sluice",
        "/lib/systemd/system/sluice.service",
        "/usr/share/man/man8/sluice.8.gz",
        "/usr/share/man/man5/sluice.conf.5.gz",
        "/usr/share/man/man1/sluice-ctl.1.gz",
        "/usr/share/bash-completion/completions/sluice",
        "/var/lib/sluice",
    ];
    let missing: Vec<&str> = placed
        .iter()
        .copied()
        .filter(|p| !Path::new(p).exists())
        .collect();
    let check = Command::new("/usr/sbin/sluice")
        .arg("--syntax-only")
        .arg("-f")
        .arg("/etc/sluice/sluice.conf")
        .status();
    run(Command::new("dpkg").args(["--purge", "sluice"]));
    assert!(missing.is_empty(), "not placed: {missing:?}");
    assert!(
        check.is_ok_and(|s| s.success()),
        "the installed configuration does not check"
    );
    assert!(!Path::new("/usr/sbin/sluice").exists());
}
