//! TLS end to end, with real senders and receivers: syslog-ng's `loggen -U`, syslog-ng and
//! rsyslog forwarding over TLS, sluice relays with mutual authentication; refused peers; the
//! peer certificate's names as macros; PROXY headers around TLS.

mod common;

use common::pki::Pki;
use common::{
    assert_delivered, free_port, loggen_start, loggen_wait, syslog_ng, wait_for_text, wait_lines,
    Running, Server,
};
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

/// A sluice with a TLS source on `port` (with `tls` as its `tls()` block), writing to
/// `file` with `template`.
fn tls_receiver(port: u16, driver: &str, tls: &str, file: &str, template: &str) -> Running {
    let mut s = Running::start(
        Server::Sluice,
        &format!(
            r#"options {{ keep-hostname(yes); use-dns(no); }};
            source s {{ {driver}(ip(127.0.0.1) port({port}) transport(tls) {tls} log-iw-size(100000)); }};
            destination d {{ file("@OUT@/{file}" template("{template}")); }};
            log {{ source(s); destination(d); }};"#
        ),
    );
    s.wait_tcp(port);
    s
}

/// A sluice relay: plain TCP in on `port_in`, `destination` out.
fn relay(port_in: u16, destination: &str) -> Running {
    let mut s = Running::start(
        Server::Sluice,
        &format!(
            r#"options {{ keep-hostname(yes); }};
            source s {{ network(ip(127.0.0.1) port({port_in}) log-iw-size(100000)); }};
            destination d {{ {destination}; }};
            log {{ source(s); destination(d); flags(flow-control); }};"#
        ),
    );
    s.wait_tcp(port_in);
    s
}

fn syslog_loggen(args: &[&str], port: u16) -> String {
    let out = Command::new("loggen")
        .args(args)
        .args(["127.0.0.1", &port.to_string()])
        .output()
        .expect("syslog-ng's loggen");
    let text = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "loggen {args:?}: {text}");
    text
}

/// syslog-ng's `loggen -U` (TLS without a client certificate) into `network()` and, RFC5425
/// framed (`-P`), into `syslog()`.
#[test]
fn loggen_over_tls_reaches_the_file() {
    if syslog_ng().is_none() {
        return;
    }
    let pki = Pki::new();
    let tls = pki.tls("server", "peer-verify(optional-untrusted)");
    for (driver, extra) in [("network", vec![]), ("syslog", vec!["-P"])] {
        let port = free_port();
        let s = tls_receiver(port, driver, &tls, "all.log", "$MSG\\n");
        let mut args = vec!["-U", "-n", "5000", "-r", "100000", "-I", "60"];
        args.extend(extra);
        syslog_loggen(&args, port);
        assert_eq!(
            wait_lines(&s.out, 5000, Duration::from_secs(30)),
            5000,
            "{driver}(transport(tls)): {}",
            s.stderr()
        );
    }
}

/// Client → sluice relay → (syslog() over TLS, both sides authenticated) → sluice server,
/// which names the file after the client certificate's CN and writes its O and OU: every
/// message arrives, in order.
#[test]
fn mutual_tls_between_sluice_servers_names_the_peer() {
    let pki = Pki::new();
    let port = free_port();
    let server = tls_receiver(
        port,
        "syslog",
        &pki.tls("server", "peer-verify(required-trusted)"),
        "${.tls.x509_cn}.log",
        "${.tls.x509_o}|${.tls.x509_ou}|$MSG\\n",
    );
    let port_in = free_port();
    let r = relay(
        port_in,
        &format!(
            r#"syslog("localhost" port({port}) transport(tls) {})"#,
            pki.tls("client", "")
        ),
    );
    let loggen = loggen_start(port_in, 2, 20_000, 0);
    let report = loggen_wait(loggen);
    assert!(report.ok, "{}", report.text);
    assert_eq!(
        wait_lines(&server.out, 40_000, Duration::from_secs(60)),
        40_000,
        "{}\n{}",
        server.stderr(),
        r.stderr()
    );
    let text = std::fs::read_to_string(server.out.join("client1.log")).unwrap();
    assert!(
        text.lines().all(|l| l.starts_with("Example Inc|Logging|")),
        "{}",
        text.lines().next().unwrap_or_default()
    );
    // The same messages without the certificate's names, for the sequence check.
    let stripped: String = text
        .lines()
        .map(|l| format!("{}\n", l.splitn(3, '|').nth(2).unwrap()))
        .collect();
    let file = server.out.join("stripped.log");
    std::fs::write(&file, stripped).unwrap();
    let check = common::check(&file);
    assert!(check.clean(40_000), "{}", check.text);
}

/// A client whose certificate another CA signed, and one without a certificate, are refused
/// during the handshake: said once each with the peer's address and the reason, and counted
/// in `tls_handshake_failures`; a trusted client sending meanwhile loses nothing.
#[test]
fn untrusted_clients_are_refused_and_counted_without_disturbing_others() {
    let pki = Pki::new();
    let port = free_port();
    let server = tls_receiver(port, "syslog", &pki.tls("server", ""), "all.log", "$MSG\\n");
    let port_in = free_port();
    let _good = relay(
        port_in,
        &format!(
            r#"syslog("127.0.0.1" port({port}) transport(tls) {})"#,
            pki.tls("client", "")
        ),
    );
    let loggen = loggen_start(port_in, 1, 20_000, 20_000);
    let rogue = pki.identity("rogue");
    for cert in [
        vec![
            "-cert".to_string(),
            rogue.cert.display().to_string(),
            "-key".to_string(),
            rogue.key.display().to_string(),
        ],
        vec![],
    ] {
        let mut child = Command::new("openssl")
            .args([
                "s_client",
                "-connect",
                &format!("127.0.0.1:{port}"),
                "-quiet",
            ])
            .args(&cert)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let _ = child
            .stdin
            .take()
            .unwrap()
            .write_all(b"<13>Jan  1 00:00:00 rogue x: must not arrive\n");
        let _ = child.wait();
    }
    let report = loggen_wait(loggen);
    assert!(report.ok, "{}", report.text);
    assert_delivered(&server.out, "all.log", 20_000);
    let log = server.stderr();
    let refusals: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("TLS handshake failed"))
        .collect();
    assert_eq!(refusals.len(), 2, "{log}");
    assert!(
        refusals.iter().all(|l| l.contains("from 127.0.0.1:")),
        "{log}"
    );
    // Each a sentence: the certificate, why, what to do.
    assert!(
        refusals[0].contains("its certificate 'CN=rogue, O=Elsewhere' is not signed by a CA in ca-file() or ca-dir(): add the CA that signed it"),
        "{log}"
    );
    assert!(
        refusals[1].contains("it sent no certificate and peer-verify(required-…) asks for one"),
        "{log}"
    );
    let (ok, stats) = common::ctl(&server, &["stats"]);
    assert!(ok, "{stats}");
    assert!(
        stats
            .lines()
            .any(|l| l.ends_with(";tls_handshake_failures;2")),
        "{stats}"
    );
}

/// `trusted-dn()` and `trusted-keys()` narrow the clients the CA vouches for.
#[test]
fn trusted_dn_and_trusted_keys_narrow_the_trusted_clients() {
    let pki = Pki::new();
    let cases = [
        (
            r#"trusted-dn("*, OU=Logging, O=Example Inc, C=HU")"#.to_string(),
            true,
        ),
        (r#"trusted-dn("*, O=Other Org, *")"#.to_string(), false),
        (
            format!(r#"trusted-keys("{}")"#, pki.fingerprint("client")),
            true,
        ),
        (
            format!(r#"trusted-keys("{}")"#, pki.fingerprint("other-client")),
            false,
        ),
    ];
    for (constraint, accepted) in cases {
        let port = free_port();
        let server = tls_receiver(
            port,
            "syslog",
            &pki.tls("server", &constraint),
            "all.log",
            "${.tls.x509_fp}|$MSG\\n",
        );
        let port_in = free_port();
        let _r = relay(
            port_in,
            &format!(
                r#"syslog("127.0.0.1" port({port}) transport(tls) time-reopen(60) {})"#,
                pki.tls("client", "")
            ),
        );
        let loggen = loggen_start(port_in, 1, 10, 0);
        assert!(loggen_wait(loggen).ok);
        let lines = wait_lines(
            &server.out,
            10,
            Duration::from_secs(if accepted { 30 } else { 3 }),
        );
        assert_eq!(
            lines,
            if accepted { 10 } else { 0 },
            "{constraint}: {}",
            server.stderr()
        );
        // The fingerprint trusted-keys() matched, as syslog-ng sets it.
        if accepted {
            let text = std::fs::read_to_string(server.out.join("all.log")).unwrap();
            let fp = if constraint.starts_with("trusted-keys") {
                pki.fingerprint("client")
            } else {
                String::new()
            };
            assert!(
                text.lines().all(|l| l.starts_with(&format!("{fp}|"))),
                "{constraint}: {text}"
            );
        }
        if !accepted {
            assert!(
                server.stderr().contains("TLS handshake failed"),
                "{}",
                server.stderr()
            );
        }
    }
}

/// syslog-ng forwards to sluice over TLS with its client certificate, and sluice forwards to
/// syslog-ng over TLS: both ways, everything arrives in order.
#[test]
fn tls_with_syslog_ng_both_ways() {
    if syslog_ng().is_none() {
        return;
    }
    let pki = Pki::new();
    // syslog-ng → sluice
    let port = free_port();
    let sluice = tls_receiver(port, "syslog", &pki.tls("server", ""), "all.log", "$MSG\\n");
    let port_in = free_port();
    let mut ng = Running::start(
        Server::SyslogNg,
        &format!(
            r#"@version: 3.38
            options {{ keep-hostname(yes); }};
            source s {{ network(ip(127.0.0.1) port({port_in}) log-iw-size(100000)); }};
            destination d {{ syslog("localhost" port({port}) transport(tls) {}); }};
            log {{ source(s); destination(d); flags(flow-control); }};"#,
            pki.tls("client", "")
        ),
    );
    ng.wait_tcp(port_in);
    assert!(loggen_wait(loggen_start(port_in, 1, 20_000, 0)).ok);
    assert_delivered(&sluice.out, "all.log", 20_000);
    drop(ng);
    // sluice → syslog-ng
    let port = free_port();
    let mut ng = Running::start(
        Server::SyslogNg,
        &format!(
            r#"@version: 3.38
            options {{ keep-hostname(yes); }};
            source s {{ syslog(ip(127.0.0.1) port({port}) transport(tls) {} log-iw-size(100000)); }};
            destination d {{ file("@OUT@/all.log" template("$MSG\n")); }};
            log {{ source(s); destination(d); }};"#,
            pki.tls("server", "peer-verify(required-trusted)")
        ),
    );
    ng.wait_tcp(port);
    let port_in = free_port();
    let _r = relay(
        port_in,
        &format!(
            r#"syslog("localhost" port({port}) transport(tls) {})"#,
            pki.tls("client", "")
        ),
    );
    assert!(loggen_wait(loggen_start(port_in, 1, 20_000, 0)).ok);
    assert_delivered(&ng.out, "all.log", 20_000);
}

/// A self-signed certificate (`openssl req -x509`, which marks itself a CA) trusted as its own
/// CA, and an X.509 v1 client certificate a trusted CA signed: syslog-ng (OpenSSL) accepts
/// both, and so does sluice, as server and as client, against syslog-ng and against itself.
/// A certificate it does refuse is named in a sentence that says what to do.
#[test]
fn self_signed_and_v1_certificates_are_accepted_as_syslog_ng_accepts_them() {
    let pki = Pki::new();
    let server = pki.self_signed("self-server", "/CN=localhost");
    let client_v1 = pki.v1_leaf("v1-client", "/O=Old Fleet/CN=v1client");
    let client_self = pki.self_signed("self-client", "/CN=selfclient");
    let (ss, ca) = (server.cert.display(), pki.ca());
    let ca = ca.display();
    let v1 = format!(
        r#"cert-file("{}") key-file("{}")"#,
        client_v1.cert.display(),
        client_v1.key.display()
    );
    let server_tls = format!(
        r#"tls(cert-file("{ss}") key-file("{}") ca-file("{ca}") peer-verify(required-trusted))"#,
        server.key.display()
    );
    let forward = |port: u16, tls: &str| {
        format!(r#"syslog("localhost" port({port}) transport(tls) tls({tls}))"#)
    };
    let receive = |port: u16| {
        tls_receiver(
            port,
            "syslog",
            &server_tls,
            "all.log",
            "${.tls.x509_cn} $MSG\n",
        )
    };

    // sluice → sluice: the client trusts the self-signed server; the server the v1 client.
    let port = free_port();
    let s = receive(port);
    let port_in = free_port();
    let r = relay(port_in, &forward(port, &format!(r#"ca-file("{ss}") {v1}"#)));
    assert!(loggen_wait(loggen_start(port_in, 1, 2_000, 0)).ok);
    assert_delivered(&s.out, "all.log", 2_000);
    let text = std::fs::read_to_string(s.out.join("all.log")).unwrap();
    assert!(
        text.starts_with("v1client "),
        "{}\n{}",
        text.lines().next().unwrap_or_default(),
        r.stderr()
    );
    drop((s, r));

    // A self-signed client trusted as its own CA.
    let port = free_port();
    let s = tls_receiver(
        port,
        "syslog",
        &format!(
            r#"tls(cert-file("{ss}") key-file("{}") ca-file("{}") peer-verify(required-trusted))"#,
            server.key.display(),
            client_self.cert.display()
        ),
        "all.log",
        "${.tls.x509_cn} $MSG\n",
    );
    let port_in = free_port();
    let _r = relay(
        port_in,
        &forward(
            port,
            &format!(
                r#"ca-file("{ss}") cert-file("{}") key-file("{}")"#,
                client_self.cert.display(),
                client_self.key.display()
            ),
        ),
    );
    assert!(loggen_wait(loggen_start(port_in, 1, 2_000, 0)).ok);
    assert_delivered(&s.out, "all.log", 2_000);
    drop(s);

    // A client that trusts only the test CA refuses the self-signed server, and says why.
    let port = free_port();
    let s = tls_receiver(port, "syslog", &server_tls, "all.log", "$MSG\n");
    let port_in = free_port();
    let r = relay(port_in, &forward(port, &format!(r#"ca-file("{ca}") {v1}"#)));
    common::send_tcp(
        port_in,
        b"<13>Jan  5 13:56:09 host prog: hello\n",
        common::Framing::Newline,
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !r.stderr().contains("TLS handshake failed") && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let said = r.stderr();
    assert!(
        said.contains("its certificate 'CN=localhost' is a CA certificate (basicConstraints CA:TRUE) that is not itself in ca-file()"),
        "{said}"
    );
    drop((s, r));

    if syslog_ng().is_none() {
        return;
    }
    // syslog-ng → sluice: syslog-ng trusts the self-signed sluice, sluice its v1 certificate.
    let port = free_port();
    let s = receive(port);
    let port_in = free_port();
    let mut ng = Running::start(
        Server::SyslogNg,
        &format!(
            r#"@version: 3.38
            source s {{ network(ip(127.0.0.1) port({port_in}) log-iw-size(100000)); }};
            destination d {{ {}; }};
            log {{ source(s); destination(d); flags(flow-control); }};"#,
            forward(port, &format!(r#"ca-file("{ss}") {v1}"#))
        ),
    );
    ng.wait_tcp(port_in);
    assert!(loggen_wait(loggen_start(port_in, 1, 2_000, 0)).ok);
    assert_delivered(&s.out, "all.log", 2_000);
    drop((s, ng));
    // sluice → syslog-ng, the same certificates the other way.
    let port = free_port();
    let mut ng = Running::start(
        Server::SyslogNg,
        &format!(
            r#"@version: 3.38
            source s {{ syslog(ip(127.0.0.1) port({port}) transport(tls) {server_tls} log-iw-size(100000)); }};
            destination d {{ file("@OUT@/all.log" template("$MSG\n")); }};
            log {{ source(s); destination(d); }};"#
        ),
    );
    ng.wait_tcp(port);
    let port_in = free_port();
    let _r = relay(port_in, &forward(port, &format!(r#"ca-file("{ss}") {v1}"#)));
    assert!(loggen_wait(loggen_start(port_in, 1, 2_000, 0)).ok);
    assert_delivered(&ng.out, "all.log", 2_000);
}

/// rsyslog (8.2302, unpacked under /opt/rsyslog by .ci/install-test-deps.sh) forwards over
/// TLS with its OpenSSL and GnuTLS drivers, authenticating with its certificate, RFC5425
/// framed.
#[test]
fn rsyslog_forwards_over_tls() {
    if common::rsyslog().is_none() {
        return;
    }
    let pki = Pki::new();
    for driver in ["ossl", "gtls"] {
        let port = free_port();
        let sluice = tls_receiver(
            port,
            "syslog",
            &pki.tls("server", ""),
            "all.log",
            "${.tls.x509_cn}|$MSG\\n",
        );
        let port_in = free_port();
        let lib = common::RSYSLOG_LIB;
        let client = pki.identity("client");
        let conf = format!(
            r#"global(DefaultNetstreamDriverCAFile="{ca}" DefaultNetstreamDriverCertFile="{cert}" DefaultNetstreamDriverKeyFile="{key}")
module(load="{lib}/rsyslog/imtcp.so")
input(type="imtcp" port="{port_in}" address="127.0.0.1")
action(type="omfwd" target="127.0.0.1" port="{port}" protocol="tcp" TCP_Framing="octet-counted"
  StreamDriver="{driver}" StreamDriverMode="1" StreamDriverAuthMode="x509/name" StreamDriverPermittedPeers="localhost"
  template="RSYSLOG_SyslogProtocol23Format"
  queue.type="LinkedList" queue.size="100000" action.resumeRetryCount="-1")
"#,
            ca = pki.ca().display(),
            cert = client.cert.display(),
            key = client.key.display(),
        );
        let mut rs = common::Rsyslog::start(&conf);
        rs.wait_tcp(port_in);
        assert!(loggen_wait(loggen_start(port_in, 1, 10_000, 0)).ok);
        let lines = wait_lines(&sluice.out, 10_000, Duration::from_secs(60));
        assert_eq!(
            lines,
            10_000,
            "{driver}: {}\nrsyslog: {}",
            sluice.stderr(),
            rs.stderr()
        );
        let text = std::fs::read_to_string(sluice.out.join("all.log")).unwrap();
        assert!(text.lines().all(|l| l.starts_with("client1|")), "{driver}");
    }
}

/// `transport(proxied-tls)` reads the PROXY header inside TLS (`loggen -U -H`);
/// `proxied-tls-passthrough` before the handshake (`loggen -U -H --proxied-tls-passthrough`).
/// Either way the announced client is `$SOURCEIP`.
#[test]
fn proxy_headers_around_tls() {
    if syslog_ng().is_none() {
        return;
    }
    let pki = Pki::new();
    for (transport, extra) in [
        ("proxied-tls", vec![]),
        ("proxied-tls-passthrough", vec!["--proxied-tls-passthrough"]),
    ] {
        let port = free_port();
        let mut s = Running::start(
            Server::Sluice,
            &format!(
                r#"options {{ use-dns(no); }};
                source s {{ network(ip(127.0.0.1) port({port}) transport("{transport}") {}); }};
                destination d {{ file("@OUT@/all.log" template("$SOURCEIP|$MSG\n")); }};
                log {{ source(s); destination(d); }};"#,
                pki.tls("server", "peer-verify(optional-untrusted)")
            ),
        );
        s.wait_tcp(port);
        let mut args = vec![
            "-U",
            "-H",
            "--proxy-src-ip",
            "203.0.113.9",
            "-n",
            "100",
            "-r",
            "10000",
            "-I",
            "30",
        ];
        args.extend(extra);
        // loggen counts its PROXY header as one of the messages (when it sends it inside TLS,
        // one fewer message goes out).
        let report = syslog_loggen(&args, port);
        let sent: usize = report
            .rsplit("count=")
            .next()
            .and_then(|t| t.split(',').next())
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or_else(|| panic!("no count in loggen's report: {report}"));
        assert!(sent >= 99, "{report}");
        let got = wait_lines(&s.out, sent, Duration::from_secs(20));
        common::wait_stable(&s.out, Duration::from_millis(500), Duration::from_secs(10));
        let got = got.max(wait_lines(&s.out, 0, Duration::ZERO));
        assert!(
            got == sent || got == 100,
            "{transport}: {got} of {sent}: {}",
            s.stderr()
        );
        assert!(!s.stderr().contains("error"), "{transport}: {}", s.stderr());
        let text = std::fs::read_to_string(s.out.join("all.log")).unwrap();
        assert!(
            text.lines().all(|l| l.starts_with("203.0.113.9|")),
            "{transport}: {text}"
        );
    }
}

/// Configuration mistakes are told at startup, with the place.
#[test]
fn tls_configuration_errors_are_clear() {
    let pki = Pki::new();
    let cases = [
        ("source s { network(port(6514) transport(tls)); };", "needs a tls() block"),
        (
            "source s { network(port(6514) transport(tls) tls(cert-file(\"/nonexistent.pem\") key-file(\"/nonexistent.key\"))); };",
            "/nonexistent.pem",
        ),
        (
            "source s { network(port(6514) transport(tcp) tls(peer-verify(optional-untrusted))); };",
            "tls() is for transport(tls)",
        ),
        (
            &format!(
                "source s {{ network(port(6514) transport(tls) tls(cert-file(\"{}\") key-file(\"{}\"))); }};",
                pki.identity("server").cert.display(),
                pki.identity("server").key.display()
            ),
            "ca-file() or ca-dir()",
        ),
        (
            "destination d { network(\"h\" transport(tls) tls(peer-verify(sometimes))); };",
            "unknown peer-verify() mode 'sometimes'",
        ),
        (
            "destination d { network(\"h\" transport(tls) tls(cipher-suite(\"HIGH:!aNULL\"))); };",
            "OpenSSL cipher-list keyword",
        ),
    ];
    for (config, expected) in cases {
        let dir = tempfile::tempdir().unwrap();
        let conf = dir.path().join("s.conf");
        std::fs::write(&conf, config).unwrap();
        let out = Command::new(common::sluice_bin())
            .args(["--syntax-only", "-f"])
            .arg(&conf)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{config}");
        assert!(text.contains(expected), "{config}: {text}");
    }
}

/// `pkcs12-file()` gives a side its key, its certificate and the CA to trust, in one file:
/// a relay and a server both configured that way authenticate each other.
#[test]
fn pkcs12_files_hold_key_certificate_and_ca() {
    let pki = Pki::new();
    let port = free_port();
    let server = tls_receiver(
        port,
        "syslog",
        &format!(
            r#"tls(pkcs12-file("{}") peer-verify(required-trusted))"#,
            pki.pkcs12("server").display()
        ),
        "${.tls.x509_cn}.log",
        "$MSG\\n",
    );
    let port_in = free_port();
    let r = relay(
        port_in,
        &format!(
            r#"syslog("localhost" port({port}) transport(tls) tls(pkcs12-file("{}")))"#,
            pki.pkcs12("client").display()
        ),
    );
    assert!(loggen_wait(loggen_start(port_in, 1, 1_000, 0)).ok);
    assert_eq!(
        wait_lines(&server.out, 1_000, Duration::from_secs(30)),
        1_000,
        "{}\n{}",
        server.stderr(),
        r.stderr()
    );
    assert!(server.out.join("client1.log").exists());
}

/// `openssl s_client` connected to a TLS source: what it sends goes in, and its standard
/// error names the certificate the server offered (`-brief`).
fn s_client(port: u16, ca: &std::path::Path) -> std::process::Child {
    Command::new("openssl")
        .args([
            "s_client",
            "-brief",
            "-connect",
            &format!("127.0.0.1:{port}"),
        ])
        .arg("-CAfile")
        .arg(ca)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("openssl s_client")
}

/// A TLS source's certificate is read again when its files change, without dropping a
/// connection: one made before goes on sending, a new one is offered the new certificate.
/// Its end of validity is a gauge, and one within 30 days is warned about.
#[test]
fn certificates_are_read_again_without_dropping_connections() {
    let pki = Pki::new();
    let renewed = pki.server("renewed", "/CN=localhost/O=Renewed", 10);
    let live = tempfile::tempdir().unwrap();
    let (cert, key) = (live.path().join("cert.pem"), live.path().join("key.pem"));
    let first = pki.identity("server");
    std::fs::copy(&first.cert, &cert).unwrap();
    std::fs::copy(&first.key, &key).unwrap();
    let port = free_port();
    let mut s = Running::start(
        Server::Sluice,
        &format!(
            r#"source s {{ network(ip(127.0.0.1) port({port}) transport(tls)
                   tls(cert-file("{}") key-file("{}") peer-verify(optional-untrusted))); }};
            source s_int {{ internal(); }};
            destination d {{ file("@OUT@/all.log" template("$MSG\n")); }};
            destination d_int {{ file("@DIR@/internal.log"); }};
            log {{ source(s); destination(d); }};
            log {{ source(s_int); destination(d_int); }};"#,
            cert.display(),
            key.display()
        ),
    );
    s.wait_tcp(port);
    let mut before = s_client(port, &pki.ca());
    let mut to_before = before.stdin.take().unwrap();
    writeln!(to_before, "<13>Nov 27 10:00:00 host app: before").unwrap();
    assert_eq!(wait_lines(&s.out, 1, Duration::from_secs(10)), 1);

    // The renewed certificate replaces the files (the key first, as an operator would).
    std::fs::copy(&renewed.key, live.path().join("key.new")).unwrap();
    std::fs::copy(&renewed.cert, live.path().join("cert.new")).unwrap();
    std::fs::rename(live.path().join("key.new"), &key).unwrap();
    std::fs::rename(live.path().join("cert.new"), &cert).unwrap();
    let internal = s.dir.path().join("internal.log");
    let limit = Duration::from_secs(15);
    wait_for_text(&internal, "read again; new connections use them", limit);
    // The connection made before goes on.
    writeln!(to_before, "<13>Nov 27 10:00:01 host app: still here").unwrap();
    assert_eq!(wait_lines(&s.out, 2, Duration::from_secs(10)), 2);
    // A new one is offered the renewed certificate.
    let mut after = s_client(port, &pki.ca());
    let mut to_after = after.stdin.take().unwrap();
    writeln!(to_after, "<13>Nov 27 10:00:02 host app: after").unwrap();
    assert_eq!(wait_lines(&s.out, 3, Duration::from_secs(10)), 3);
    drop((to_before, to_after));
    let said = |c: std::process::Child| {
        let out = c.wait_with_output().unwrap();
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let (before, after) = (said(before), said(after));
    assert!(
        before.contains("O = Sluice Tests") && !before.contains("Renewed"),
        "{before}"
    );
    assert!(after.contains("O = Renewed"), "{after}");
    assert_eq!(
        std::fs::read_to_string(s.out.join("all.log")).unwrap(),
        "before\nstill here\nafter\n"
    );
    // Ten days left: a gauge, and a warning.
    let at = common::counted(&s, "tls.*.expires_at");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    assert!(at > now + 9 * 86400 && at <= now + 10 * 86400 + 60, "{at}");
    wait_for_text(&internal, "expires in 9 days", limit);
}

/// The CAs peers are checked against are read again too, on both ends: a relay's
/// destination trusts its server once its `ca-file()` holds the right CA and it reloads;
/// the server accepts the relay's certificate once its own `ca-file()` changes on disk (no
/// reload). The message that waited meanwhile arrives once.
#[test]
fn trusted_cas_are_read_again_on_both_ends() {
    let pki = Pki::new();
    let live = tempfile::tempdir().unwrap();
    let (server_ca, relay_ca) = (
        live.path().join("server-ca.pem"),
        live.path().join("relay-ca.pem"),
    );
    let rogue_ca = pki.dir.path().join("rogue-ca.pem");
    std::fs::copy(&rogue_ca, &server_ca).unwrap();
    std::fs::copy(&rogue_ca, &relay_ca).unwrap();
    let (server_id, client_id) = (pki.identity("server"), pki.identity("client"));
    let port = free_port();
    let mut server = Running::start(
        Server::Sluice,
        &format!(
            r#"source s {{ network(ip(127.0.0.1) port({port}) transport(tls)
                   tls(ca-file("{}") cert-file("{}") key-file("{}") peer-verify(required-trusted))); }};
            source s_int {{ internal(); }};
            destination d {{ file("@OUT@/all.log" template("$MSG\n")); }};
            destination d_int {{ file("@DIR@/internal.log"); }};
            log {{ source(s); destination(d); }};
            log {{ source(s_int); destination(d_int); }};"#,
            server_ca.display(),
            server_id.cert.display(),
            server_id.key.display()
        ),
    );
    server.wait_tcp(port);
    let port_in = free_port();
    let relay = relay(
        port_in,
        &format!(
            r#"network("127.0.0.1" port({port}) transport(tls) time-reopen(1)
                tls(ca-file("{}") cert-file("{}") key-file("{}")))"#,
            relay_ca.display(),
            client_id.cert.display(),
            client_id.key.display()
        ),
    );
    common::send_tcp(
        port_in,
        b"<13>Nov 27 10:00:00 host app: waited\n",
        common::Framing::Newline,
    );
    // The relay refuses the server's certificate: the message waits.
    let limit = Duration::from_secs(15);
    assert!(common::wait_until(limit, || common::counted(
        &relay,
        "dst.*.queued"
    ) == 1));
    assert!(
        common::wait_until(limit, || relay.stderr().contains("not signed by a CA")),
        "{}",
        relay.stderr()
    );

    // The relay's CA file gets the right CA, and the relay reloads: it trusts the server now,
    // and the server refuses the relay's certificate.
    std::fs::copy(pki.ca(), &relay_ca).unwrap();
    let (ok, said) = common::ctl(&relay, &["reload"]);
    assert!(ok, "{said}");
    assert!(
        common::wait_until(limit, || common::stat(&server, "tls_handshake_failures")
            >= 1),
        "{}",
        server.stderr()
    );
    // In TLS 1.3 the refusal comes after the relay's handshake is over: the relay waits for
    // the verdict before it sends, and the message stays queued.
    assert!(
        common::wait_until(limit, || relay
            .stderr()
            .contains("the peer refused sluice's certificate")),
        "{}",
        relay.stderr()
    );
    assert_eq!(common::counted(&relay, "dst.*.queued"), 1);
    assert_eq!(
        common::wait_lines(&server.out, 1, Duration::from_millis(500)),
        0
    );

    // The server's CA file changes on disk: read within seconds, without a reload.
    std::fs::copy(pki.ca(), live.path().join("ca.new")).unwrap();
    std::fs::rename(live.path().join("ca.new"), &server_ca).unwrap();
    wait_for_text(
        &server.dir.path().join("internal.log"),
        "read again; new connections use them",
        limit,
    );
    assert_eq!(
        common::wait_lines(&server.out, 1, Duration::from_secs(20)),
        1,
        "{}\n{}\n{}",
        common::ctl(&relay, &["stats"]).1,
        relay.stderr(),
        server.stderr()
    );
    assert_eq!(
        std::fs::read_to_string(server.out.join("all.log")).unwrap(),
        "waited\n"
    );
}
