//! RELP end to end: rsyslog's `omrelp` into sluice's `relp()` source, sluice's `relp()`
//! destination into rsyslog's `imrelp`, sluice to sluice over RELP with TLS, and the fault
//! test: rsyslog → sluice relay → sluice server over RELP with both sluice processes killed
//! (`kill -9`) and restarted during the load.

mod common;

use common::pki::Pki;
use common::{
    check, free_port, loggen_start, loggen_wait, rsyslog, wait_lines, Rsyslog, Running, Server,
    RSYSLOG_LIB,
};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A sluice with a `relp()` source on `port` writing every message to `all.log`.
fn relp_server(port: u16, tls: &str) -> Running {
    let mut s = Running::start(
        Server::Sluice,
        &format!(
            r#"options {{ keep-hostname(yes); }};
            source s {{ relp(ip(127.0.0.1) port({port}) {tls} log-iw-size(100000)); }};
            destination d {{ file("@OUT@/all.log"); }};
            log {{ source(s); destination(d); }};"#
        ),
    );
    s.wait_tcp(port);
    s
}

/// rsyslog reading plain TCP on `port_in` and forwarding with `omrelp` to `port`, with a
/// queue that keeps what the server has not acknowledged. (`windowSize`: with librelp's
/// default of 128 frames, rsyslog 8.2302 sends some 700 messages a second on this machine,
/// to its own `imrelp` as to sluice.)
fn rsyslog_omrelp(port_in: u16, port: u16) -> Rsyslog {
    let mut rs = Rsyslog::start(&format!(
        r#"module(load="{RSYSLOG_LIB}/rsyslog/imtcp.so")
module(load="{RSYSLOG_LIB}/rsyslog/omrelp.so")
input(type="imtcp" port="{port_in}" address="127.0.0.1")
action(type="omrelp" target="127.0.0.1" port="{port}" template="RSYSLOG_ForwardFormat" windowSize="1024"
  queue.type="LinkedList" queue.size="2000000" queue.dequeueBatchSize="1024"
  action.resumeRetryCount="-1" action.resumeInterval="1")
"#
    ));
    rs.wait_tcp(port_in);
    rs
}

#[test]
fn rsyslog_omrelp_into_sluice() {
    if rsyslog().is_none() {
        return;
    }
    let port = free_port();
    let server = relp_server(port, "");
    let port_in = free_port();
    let rs = rsyslog_omrelp(port_in, port);
    assert!(loggen_wait(loggen_start(port_in, 2, 20_000, 0)).ok);
    assert_eq!(
        wait_lines(&server.out, 40_000, Duration::from_secs(60)),
        40_000,
        "{}\nrsyslog: {}",
        server.stderr(),
        rs.stderr()
    );
    let report = check(&server.out.join("all.log"));
    assert!(report.clean(40_000), "{}", report.text);
}

#[test]
fn sluice_relp_into_rsyslog_imrelp() {
    if rsyslog().is_none() {
        return;
    }
    let port = free_port();
    let out = tempfile::tempdir().unwrap();
    let file = out.path().join("all.log");
    let mut rs = Rsyslog::start(&format!(
        r#"module(load="{RSYSLOG_LIB}/rsyslog/imrelp.so")
input(type="imrelp" port="{port}" address="127.0.0.1")
template(name="msg" type="string" string="%msg%\n")
action(type="omfile" file="{}" template="msg")
"#,
        file.display()
    ));
    rs.wait_tcp(port);
    let port_in = free_port();
    let mut relay = Running::start(
        Server::Sluice,
        &format!(
            r#"source s {{ network(ip(127.0.0.1) port({port_in}) log-iw-size(100000)); }};
            destination d {{ relp("127.0.0.1" port({port})); }};
            log {{ source(s); destination(d); flags(flow-control); }};"#
        ),
    );
    relay.wait_tcp(port_in);
    assert!(loggen_wait(loggen_start(port_in, 2, 20_000, 0)).ok);
    assert_eq!(
        wait_lines(out.path(), 40_000, Duration::from_secs(60)),
        40_000,
        "{}\nrsyslog: {}",
        relay.stderr(),
        rs.stderr()
    );
    let report = check(&file);
    assert!(report.clean(40_000), "{}", report.text);
}

/// sluice → sluice over RELP in TLS with both sides authenticated.
#[test]
fn relp_over_tls_between_sluice_servers() {
    let pki = Pki::new();
    let port = free_port();
    let server = relp_server(port, &pki.tls("server", "peer-verify(required-trusted)"));
    let port_in = free_port();
    let mut relay = Running::start(
        Server::Sluice,
        &format!(
            r#"source s {{ network(ip(127.0.0.1) port({port_in}) log-iw-size(100000)); }};
            destination d {{ relp("localhost" port({port}) {}); }};
            log {{ source(s); destination(d); flags(flow-control); }};"#,
            pki.tls("client", "")
        ),
    );
    relay.wait_tcp(port_in);
    assert!(loggen_wait(loggen_start(port_in, 2, 20_000, 0)).ok);
    assert_eq!(
        wait_lines(&server.out, 40_000, Duration::from_secs(60)),
        40_000,
        "{}\n{}",
        server.stderr(),
        relay.stderr()
    );
    let report = check(&server.out.join("all.log"));
    assert!(report.clean(40_000), "{}", report.text);
}

/// Something that is not RELP is refused with an error, counted, and costs the other
/// connections nothing.
#[test]
fn what_is_not_relp_is_refused() {
    let port = free_port();
    let server = relp_server(port, "");
    common::send_raw_tcp(port, b"<13>Jan  1 00:00:00 host prog: plain syslog\n");
    common::send_raw_tcp(port, b"1 syslog 5 hello\n");
    let mut conn = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    use std::io::{Read, Write};
    conn.write_all(
        b"1 open 30 relp_version=0\ncommands=syslog\n2 syslog 12 <13>x y: one\n3 close 0\n",
    )
    .unwrap();
    let mut answer = String::new();
    conn.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("1 rsp "), "{answer}");
    assert!(answer.contains("200 OK\nrelp_version=0\n"), "{answer}");
    assert!(
        answer.contains("commands=syslog\n2 rsp 6 200 OK\n3 rsp 0\n"),
        "{answer}"
    );
    assert_eq!(wait_lines(&server.out, 1, Duration::from_secs(10)), 1);
    let log = server.stderr();
    assert!(log.contains("invalid RELP frame"), "{log}");
    assert!(log.contains("a command before open"), "{log}");
}

fn sluice(config: &str, dir: &Path) -> Child {
    let conf = dir.join("sluice.conf");
    std::fs::write(&conf, config).unwrap();
    Command::new(common::sluice_bin())
        .args(["-F", "-f"])
        .arg(&conf)
        .arg("-R")
        .arg(dir.join("persist"))
        .arg("-c")
        .arg(dir.join("ctl"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(dir.join("stderr"))
                .unwrap(),
        )
        .spawn()
        .unwrap()
}

fn wait_port(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "nothing listens on {port}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn kill_9(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// The issue's fault test: 1,000,000 messages from rsyslog (`omrelp`) through a sluice relay
/// (`relp()` in, `relp()` out with a reliable disk buffer) into a sluice server (`relp()` in,
/// a file out); the relay and the server are each killed with SIGKILL and restarted twice
/// during the load. Every message arrives; duplicates (what was stored but not yet
/// acknowledged when a process died) are counted, not forbidden.
#[test]
fn relp_relay_survives_kill_9_of_relay_and_server() {
    if rsyslog().is_none() {
        return;
    }
    const TOTAL: u64 = 1_000_000;
    let server_dir = tempfile::tempdir().unwrap();
    let relay_dir = tempfile::tempdir().unwrap();
    let out = server_dir.path().join("all.log");
    let (server_port, relay_port, rsyslog_port) = (free_port(), free_port(), free_port());
    let server_conf = format!(
        r#"options {{ keep-hostname(yes); }};
        source s {{ relp(ip(127.0.0.1) port({server_port}) log-iw-size(100000)); }};
        destination d {{ file("{}"); }};
        log {{ source(s); destination(d); }};"#,
        out.display()
    );
    let relay_conf = format!(
        r#"options {{ keep-hostname(yes); }};
        source s {{ relp(ip(127.0.0.1) port({relay_port}) log-iw-size(100000)); }};
        destination d {{ relp("127.0.0.1" port({server_port}) time-reopen(1)
            disk-buffer(reliable(yes) dir("{}") disk-buf-size(2000000000))); }};
        log {{ source(s); destination(d); }};"#,
        relay_dir.path().display()
    );
    let mut server = sluice(&server_conf, server_dir.path());
    wait_port(server_port);
    let mut relay = sluice(&relay_conf, relay_dir.path());
    wait_port(relay_port);
    let rs = rsyslog_omrelp(rsyslog_port, relay_port);
    let loggen = loggen_start(rsyslog_port, 4, TOTAL / 4, 50_000);
    let lines =
        || std::fs::read(&out).map_or(0, |b| b.iter().filter(|&&c| c == b'\n').count() as u64);
    let wait_for = |n: u64| {
        let deadline = Instant::now() + Duration::from_secs(120);
        while lines() < n && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    let started = Instant::now();
    for (i, share) in [(0, 150_000), (1, 350_000), (2, 550_000), (3, 750_000)] {
        wait_for(share);
        eprintln!(
            "{:?}: {} lines; killing the {}",
            started.elapsed(),
            lines(),
            if i % 2 == 0 { "relay" } else { "server" }
        );
        if i % 2 == 0 {
            kill_9(&mut relay);
            relay = sluice(&relay_conf, relay_dir.path());
            wait_port(relay_port);
        } else {
            kill_9(&mut server);
            server = sluice(&server_conf, server_dir.path());
            wait_port(server_port);
        }
    }
    let report = loggen_wait(loggen);
    eprintln!("{:?}: loggen done, {} lines", started.elapsed(), lines());
    assert!(report.ok, "{}", report.text);
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let c = check(&out);
        if c.received - c.duplicated >= TOTAL && c.lost == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{}\nserver: {}\nrelay: {}\nrsyslog: {}",
            c.text,
            std::fs::read_to_string(server_dir.path().join("stderr")).unwrap_or_default(),
            std::fs::read_to_string(relay_dir.path().join("stderr")).unwrap_or_default(),
            rs.stderr()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let c = check(&out);
    println!("{}", c.text.lines().last().unwrap_or_default());
    assert_eq!(
        (c.received - c.duplicated, c.lost),
        (TOTAL, 0),
        "{}",
        c.text
    );
    kill_9(&mut relay);
    kill_9(&mut server);
}
