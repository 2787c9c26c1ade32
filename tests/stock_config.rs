//! Debian's own `/etc/syslog-ng/syslog-ng.conf`, unchanged (its `@include "scl.conf"`,
//! `system()`, `usertty()`, `getvirtconsole()`, `pipe("/dev/xconsole")`), runs: `logger`
//! messages reach the files it routes them to, as they do with syslog-ng 3.38 on the same
//! configuration. The servers run in a private mount namespace (`tests/data/stock-config.sh`)
//! so that the host's `/dev/log` and `/var/log` are not touched; that needs root.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

const STOCK: &str = "/etc/syslog-ng/syslog-ng.conf";

/// Whether this machine can run the test: root and a private mount namespace (skipped
/// without, as the other root-only tests are), and the stock configuration (syslog-ng-core,
/// which CI requires).
fn can_run() -> bool {
    if !common::private_mount_namespace("to run a server on /dev/log privately") {
        return false;
    }
    if !Path::new(STOCK).exists() {
        if std::env::var_os("SLUICE_REQUIRE_PEERS").is_some() {
            panic!("{STOCK} is missing: run .ci/install-test-deps.sh (syslog-ng-core)");
        }
        eprintln!("SKIPPED: {STOCK} is missing (syslog-ng-core)");
        return false;
    }
    true
}

/// Runs `server` on the stock configuration; the lines of our messages in each log file,
/// without their timestamps, and with the `[PID]` that `system()` takes from the sender's
/// credentials (logger sends none of its own) as `[PID]`: the two runs' loggers differ.
fn run(server: &[&str]) -> (BTreeMap<String, Vec<String>>, String, usize) {
    let work = tempfile::tempdir().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/stock-config.sh");
    let status = Command::new("unshare")
        .args(["--mount", "--propagation", "private"])
        .arg(script)
        .arg(work.path())
        .args(server)
        .status()
        .unwrap();
    assert!(status.success());
    let mut files = BTreeMap::new();
    for entry in std::fs::read_dir(work.path().join("varlog"))
        .unwrap()
        .flatten()
    {
        let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
        let ours: Vec<String> = text
            .lines()
            .filter(|l| l.contains("stock config:"))
            .map(|l| {
                let l = l.get(16..).unwrap_or(l);
                match (l.find('['), l.find("]:")) {
                    (Some(a), Some(b)) if a < b => format!("{}[PID]{}", &l[..a], &l[b + 1..]),
                    _ => l.to_string(),
                }
            })
            .collect();
        if !ours.is_empty() {
            files.insert(entry.file_name().to_string_lossy().into_owned(), ours);
        }
    }
    let stderr = std::fs::read_to_string(work.path().join("stderr")).unwrap_or_default();
    // The kernel's own records (system() reads /dev/kmsg), routed to kern.log.
    let kernel = std::fs::read_to_string(work.path().join("varlog/kern.log"))
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains(" kernel: "))
        .count();
    (files, stderr, kernel)
}

#[test]
fn debians_stock_configuration_routes_as_syslog_ng_does() {
    if !can_run() {
        return;
    }
    let sluice = common::sluice_bin();
    let (files, stderr, kernel) = run(&[sluice.to_str().unwrap()]);
    assert!(kernel > 0, "no kernel records in kern.log\n{stderr}");
    let has = |file: &str, what: &str| {
        files
            .get(file)
            .is_some_and(|lines| lines.iter().any(|l| l.contains(what)))
    };
    assert!(has("auth.log", "an auth message"), "{files:?}\n{stderr}");
    assert!(has("syslog", "a user message"), "{files:?}\n{stderr}");
    assert!(!has("syslog", "an auth message"), "{files:?}");
    assert!(has("mail.log", "a mail error"), "{files:?}");
    assert!(has("error", "a mail error"), "{files:?}");
    if let Some(syslog_ng) = common::syslog_ng() {
        let (theirs, _, _) = run(&[syslog_ng.to_str().unwrap(), "--no-caps"]);
        assert_eq!(files, theirs);
    }
}
