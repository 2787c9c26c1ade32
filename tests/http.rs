//! The `http()` destination against a real HTTP/1.1 server (`tests/common/http_server.py`):
//! requests as syslog-ng makes them, batches, what each answer means for the messages in the
//! request (delivered, sent again later, dropped and counted), lanes by
//! `worker-partition-key()`, a server that is down and then up, and HTTPS.

mod common;

use common::http::{HttpServer, Request};
use common::pki::Pki;
use common::{free_port, send_tcp, stat, Framing, Running, Server};
use std::time::Duration;

/// A sluice that reads RFC3164 lines on a TCP port and sends them to `destination` (an
/// `http(…)` driver) on a flow-controlled path.
fn sluice(destination: &str) -> (Running, u16) {
    let port = free_port();
    let mut s = Running::start(
        Server::Sluice,
        &format!(
            r#"options {{ keep-hostname(yes); }};
            source s {{ tcp(ip(127.0.0.1) port({port}) log-iw-size(100000)); }};
            destination d {{ {destination}; }};
            log {{ source(s); destination(d); flags(flow-control); }};"#
        ),
    );
    s.wait_tcp(port);
    (s, port)
}

/// `n` messages numbered from 0: `<13>Nov 24 10:00:00 host<h> app: seq=<i>`, over `hosts`.
fn messages(n: usize, hosts: usize) -> Vec<u8> {
    (0..n)
        .map(|i| format!("<13>Nov 24 10:00:00 host{} app: seq={i}\n", i % hosts))
        .collect::<String>()
        .into_bytes()
}

/// The test server over HTTPS, with the certificate `pki` made for localhost.
fn https_server(pki: &Pki) -> HttpServer {
    let id = pki.identity("server");
    HttpServer::start(&[
        "--cert",
        id.cert.to_str().unwrap(),
        "--key",
        id.key.to_str().unwrap(),
    ])
}

/// The `seq=` numbers in the bodies of `requests`, in order.
fn sequence(requests: &[Request]) -> Vec<usize> {
    requests
        .iter()
        .flat_map(|r| {
            r.body.split("seq=").skip(1).map(|s| {
                s.chars()
                    .take_while(char::is_ascii_digit)
                    .collect::<String>()
                    .parse()
                    .expect("a number")
            })
        })
        .collect()
}

fn count(requests: &[Request]) -> usize {
    sequence(requests).len()
}

#[test]
fn messages_go_out_in_batches_as_syslog_ng_sends_them() {
    let server = HttpServer::start(&[]);
    let (s, port) = sluice(&format!(
        r#"http(url("{}") method("PUT") batch-lines(100)
            body-prefix("[") delimiter(",") body-suffix("]") body("\"$MSG\"")
            headers("Content-Type: application/json", "X-Site: lab") user("ops") password("s3cret"))"#,
        server.url("/ingest?pipeline=logs")
    ));
    send_tcp(port, &messages(1000, 1), Framing::Newline);
    let requests = server.wait_for(Duration::from_secs(30), |r| count(r) >= 1000);
    assert_eq!(sequence(&requests), (0..1000).collect::<Vec<_>>());
    for r in &requests {
        assert_eq!(r.line, "PUT /ingest?pipeline=logs");
        assert!(
            r.body.starts_with("[\"seq=") && r.body.ends_with("\"]"),
            "{}",
            r.body
        );
        assert!(
            r.body.matches(',').count() < 100,
            "at most 100 messages a request"
        );
        for h in [
            "Content-Type: application/json",
            "X-Site: lab",
            // base64("ops:s3cret")
            "Authorization: Basic b3BzOnMzY3JldA==",
        ] {
            assert!(r.headers.contains(h), "{h} in\n{}", r.headers);
        }
    }
    // One connection, kept alive.
    assert!(requests.iter().all(|r| r.client == requests[0].client));
    // Counted once the last answer is in.
    let url = server.url("/ingest?pipeline=logs");
    let written = format!("dst.http;d#0;http,{url};a;written");
    assert!(common::wait_until(Duration::from_secs(10), || stat(
        &s, &written
    ) == 1000));
    assert_eq!(
        stat(&s, &format!("dst.http;d#0;http,{url};a;processed")),
        1000
    );
}

#[test]
fn without_batch_lines_each_message_is_a_request() {
    let server = HttpServer::start(&["--chunked"]);
    let (_s, port) = sluice(&format!(r#"http(url("{}"))"#, server.url("/one")));
    send_tcp(port, &messages(20, 1), Framing::Newline);
    let requests = server.wait_for(Duration::from_secs(30), |r| r.len() >= 20);
    assert_eq!(requests.len(), 20);
    assert_eq!(requests[3].body, "seq=3");
}

#[test]
fn messages_a_server_asks_for_later_are_sent_again() {
    let server = HttpServer::start(&["--answers", "503,429,500", "--close"]);
    let (s, port) = sluice(&format!(
        r#"http(url("{}") batch-lines(10) retries(5) time-reopen(1))"#,
        server.url("/")
    ));
    send_tcp(port, &messages(50, 1), Framing::Newline);
    let requests = server.wait_for(Duration::from_secs(30), |r| count(&accepted(r)) >= 50);
    assert_eq!(sequence(&accepted(&requests)), (0..50).collect::<Vec<_>>());
    // The first batch was refused three times, then taken.
    let statuses: Vec<u16> = requests.iter().take(4).map(|r| r.status).collect();
    assert_eq!(statuses, [503, 429, 500, 200]);
    assert_eq!(requests[0].body, requests[3].body);
    assert!(s.stderr().contains("answered HTTP 503"), "{}", s.stderr());
}

fn accepted(requests: &[Request]) -> Vec<Request> {
    requests
        .iter()
        .filter(|r| r.status == 200)
        .cloned()
        .collect()
}

#[test]
fn a_message_the_server_refuses_is_dropped_and_counted_alone() {
    let server = HttpServer::start(&["--refuse", "poison"]);
    let (s, port) = sluice(&format!(r#"http(url("{}"))"#, server.url("/")));
    let mut input = messages(30, 1);
    input.extend_from_slice(b"<13>Nov 24 10:00:00 host0 app: poison seq=1000\n");
    input.extend_from_slice(&messages(30, 1));
    send_tcp(port, &input, Framing::Newline);
    let requests = server.wait_for(Duration::from_secs(30), |r| r.len() >= 61);
    assert_eq!(count(&accepted(&requests)), 60);
    let url = server.url("/");
    let written = format!("dst.http;d#0;http,{url};a;written");
    assert!(common::wait_until(Duration::from_secs(10), || stat(
        &s, &written
    ) == 60));
    assert_eq!(stat(&s, &format!("dst.http;d#0;http,{url};a;dropped")), 1);
    assert_eq!(
        stat(&s, &format!("dst.http;d#0;http,{url};a;dropped_refused")),
        1
    );
    let stderr = s.stderr();
    assert!(
        stderr.contains("refused 1 messages for good: HTTP 400: {\"error\":\"refused\"}; dropped"),
        "{stderr}"
    );
}

#[test]
fn retries_run_out_and_response_action_decides() {
    // 503 is retried twice, then the request is dropped; 404 means success here.
    let server = HttpServer::start(&["--answers", "503,503,404"]);
    let (s, port) = sluice(&format!(
        r#"http(url("{}") batch-lines(5) retries(2) time-reopen(1) response-action(404 => success))"#,
        server.url("/")
    ));
    send_tcp(port, &messages(10, 1), Framing::Newline);
    let requests = server.wait_for(Duration::from_secs(30), |r| r.len() >= 3);
    let statuses: Vec<u16> = requests.iter().map(|r| r.status).collect();
    assert_eq!(statuses, [503, 503, 404]);
    assert_eq!(sequence(&requests[2..]), [5, 6, 7, 8, 9]);
    let url = server.url("/");
    assert!(common::wait_until(Duration::from_secs(10), || {
        stat(&s, &format!("dst.http;d#0;http,{url};a;written")) == 5
    }));
    assert_eq!(stat(&s, &format!("dst.http;d#0;http,{url};a;dropped")), 5);
    assert_eq!(
        stat(
            &s,
            &format!("dst.http;d#0;http,{url};a;dropped_retries_exhausted")
        ),
        5
    );
    assert!(
        s.stderr().contains("2 times; dropping them (retries(2))"),
        "{}",
        s.stderr()
    );
}

#[test]
fn workers_keep_the_messages_of_a_partition_key_in_order() {
    let server = HttpServer::start(&[]);
    let (_s, port) = sluice(&format!(
        r#"http(url("{}") workers(4) worker-partition-key("$HOST") batch-lines(7))"#,
        server.url("/")
    ));
    let input = messages(2000, 8);
    std::thread::scope(|t| {
        for chunk in input
            .split_inclusive(|&b| b == b'\n')
            .collect::<Vec<_>>()
            .chunks(500)
        {
            let bytes: Vec<u8> = chunk.concat();
            t.spawn(move || send_tcp(port, &bytes, Framing::Newline));
        }
    });
    let requests = server.wait_for(Duration::from_secs(30), |r| count(r) >= 2000);
    assert_eq!(count(&requests), 2000);
    // Each host's messages from one connection arrive in order: a host's messages go out
    // through one lane.
    let seq = sequence(&requests);
    for host in 0..8 {
        for connection in 0..4 {
            let mine: Vec<usize> = seq
                .iter()
                .copied()
                .filter(|i| i % 8 == host && i / 500 == connection)
                .collect();
            assert!(
                mine.len() >= 62,
                "host{host}: {} of connection {connection}",
                mine.len()
            );
            assert!(
                mine.windows(2).all(|w| w[0] < w[1]),
                "host{host} out of order: {mine:?}"
            );
        }
    }
    let connections: std::collections::BTreeSet<u16> = requests.iter().map(|r| r.client).collect();
    assert!(connections.len() > 1, "one connection for 4 workers");
}

#[test]
fn a_server_down_then_up_loses_nothing() {
    let port = free_port();
    let (s, tcp) = sluice(&format!(
        r#"http(url("http://127.0.0.1:{port}/") batch-lines(50) time-reopen(1))"#
    ));
    send_tcp(tcp, &messages(500, 1), Framing::Newline);
    std::thread::sleep(Duration::from_millis(1500));
    let server = HttpServer::start_on(port, &[]);
    let requests = server.wait_for(Duration::from_secs(30), |r| count(r) >= 500);
    assert_eq!(sequence(&requests), (0..500).collect::<Vec<_>>());
    assert!(s.stderr().contains("cannot connect to"), "{}", s.stderr());
}

#[test]
fn https_with_the_servers_certificate_checked() {
    let pki = Pki::new();
    let server = https_server(&pki);
    let (_s, port) = sluice(&format!(
        r#"http(url("https://localhost:{}/secure") tls(ca-file("{}")) batch-lines(10))"#,
        server.port,
        pki.ca().display()
    ));
    send_tcp(port, &messages(25, 1), Framing::Newline);
    let requests = server.wait_for(Duration::from_secs(30), |r| count(r) >= 25);
    assert_eq!(sequence(&requests), (0..25).collect::<Vec<_>>());
}

#[test]
fn bad_http_options_are_refused_with_what_to_write() {
    for (destination, says) in [
        ("http()", "http() needs url()"),
        (
            r#"http(url("ftp://x/"))"#,
            "sluice speaks http:// and https://",
        ),
        (
            r#"http(url("http://u:p@x/"))"#,
            "give the user in user() and password()",
        ),
        (
            r#"http(url("http://x/") proxy("socks5://p:1080"))"#,
            "sluice speaks to HTTP proxies",
        ),
        (
            r#"http(url("http://x/") accept-redirects(yes))"#,
            "sluice does not follow redirects",
        ),
        (
            r#"http(url("http://x/") headers("Bad header"))"#,
            "is not a header",
        ),
        (
            r#"http(url("http://x/") headers("Host: y"))"#,
            "host is sluice's to say",
        ),
        (
            r#"http(url("http://x/") headers("X-Host: ${HOST}"))"#,
            "a template in headers() is not supported yet",
        ),
        (
            r#"http(url("http://x/") method("GET"))"#,
            "unknown method 'GET'",
        ),
        (
            r#"http(url("http://x/") workers(0))"#,
            "workers() is between 1 and 1024",
        ),
        (
            r#"http(url("http://x/") response-action(404 drop))"#,
            "response-action(404 => retry",
        ),
        (
            r#"http(url("http://x/") response-action(404 => maybe))"#,
            "unknown response action 'maybe'",
        ),
    ] {
        let conf = format!(
            "source s {{ stdin(); }}; destination d {{ {destination}; }}; log {{ source(s); destination(d); }};"
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.conf");
        std::fs::write(&path, conf).unwrap();
        let out = std::process::Command::new(common::sluice_bin())
            .args(["--syntax-only", "-f"])
            .arg(&path)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{destination} accepted");
        assert!(text.contains(says), "{destination}: {text}");
    }
}

#[test]
fn requests_carry_what_syslog_ngs_http_sends() {
    if common::syslog_ng().is_none() {
        return;
    }
    let mut seen = Vec::new();
    for kind in [Server::SyslogNg, Server::Sluice] {
        let server = HttpServer::start(&[]);
        let port = free_port();
        let mut s = Running::start(
            kind,
            &format!(
                r#"@version: 3.38
                options {{ keep-hostname(yes); }};
                source s {{ tcp(ip(127.0.0.1) port({port})); }};
                destination d {{ http(url("{}") method("PUT") batch-lines(4)
                    body-prefix("[") delimiter(",") body-suffix("]") body("$PROGRAM:$MSG")
                    headers("X-Site: lab") user("ops") password("pw")); }};
                log {{ source(s); destination(d); }};"#,
                server.url("/in")
            ),
        );
        s.wait_tcp(port);
        send_tcp(port, &messages(30, 3), Framing::Newline);
        let requests = server.wait_for(Duration::from_secs(30), |r| count(r) >= 30);
        assert_eq!(sequence(&requests), (0..30).collect::<Vec<_>>(), "{kind:?}");
        let mut bodies = Vec::new();
        for r in &requests {
            assert_eq!(r.line, "PUT /in", "{kind:?}");
            for h in ["X-Site: lab", "Authorization: Basic b3BzOnB3"] {
                assert!(r.headers.contains(h), "{kind:?}: {h} in\n{}", r.headers);
            }
            let inner = r
                .body
                .strip_prefix('[')
                .and_then(|b| b.strip_suffix(']'))
                .unwrap_or_else(|| panic!("{kind:?}: {}", r.body));
            let these: Vec<String> = inner.split(',').map(String::from).collect();
            assert!(these.len() <= 4, "{kind:?}: {}", r.body);
            bodies.extend(these);
        }
        seen.push(bodies);
    }
    // The same messages, each formatted the same; where one request ends may differ (each
    // sends what it has when its queue is empty).
    assert_eq!(seen[0], seen[1]);
}

#[test]
fn compressed_requests_and_answers() {
    for coding in ["gzip", "deflate"] {
        let server = HttpServer::start(&["--refuse", "poison"]);
        let (s, port) = sluice(&format!(
            r#"http(url("{}") batch-lines(100) content-compression("{coding}") accept-encoding("gzip"))"#,
            server.url("/")
        ));
        let mut input = messages(300, 3);
        input.extend_from_slice(b"<13>Nov 24 10:00:00 host0 app: poison seq=1000\n");
        send_tcp(port, &input, Framing::Newline);
        let requests = server.wait_for(Duration::from_secs(30), |r| count(r) >= 301);
        // The server read each body after its Content-Encoding.
        assert_eq!(count(&accepted(&requests)), 300, "{coding}: {}", s.stderr());
        for r in &requests {
            let headers = r.headers.to_ascii_lowercase();
            assert!(
                headers.contains(&format!("content-encoding: {coding}\n"))
                    && headers.contains("accept-encoding: gzip\n"),
                "{coding}: {}",
                r.headers
            );
        }
        // The refusal's answer came gzip-compressed, and is quoted as the server wrote it.
        let written = "refused 1 messages for good: HTTP 400: {\"error\":\"refused\"}";
        assert!(
            common::wait_until(Duration::from_secs(10), || s.stderr().contains(written)),
            "{}",
            s.stderr()
        );
    }
}

/// tinyproxy (Debian's, installed by `.ci/install-test-deps.sh`) on a port of its own,
/// letting tunnels through to `tunnel_port`; `None` (and a SKIPPED note) when it is absent,
/// unless CI requires the peers.
fn tinyproxy(tunnel_port: u16) -> Option<(std::process::Child, u16, tempfile::TempDir)> {
    if !std::path::Path::new("/usr/bin/tinyproxy").exists() {
        assert!(
            std::env::var_os("SLUICE_REQUIRE_PEERS").is_none(),
            "tinyproxy is not installed: run .ci/install-test-deps.sh"
        );
        eprintln!("SKIPPED: tinyproxy is not installed (run .ci/install-test-deps.sh)");
        return None;
    }
    let (dir, port) = (tempfile::tempdir().unwrap(), free_port());
    let conf = dir.path().join("tinyproxy.conf");
    std::fs::write(
        &conf,
        format!(
            "Port {port}\nListen 127.0.0.1\nTimeout 60\nAllow 127.0.0.1\nMaxClients 20\nLogLevel Connect\nConnectPort {tunnel_port}\n"
        ),
    )
    .unwrap();
    let child = std::process::Command::new("/usr/bin/tinyproxy")
        .args(["-d", "-c"])
        .arg(&conf)
        .stdout(std::fs::File::create(dir.path().join("log")).unwrap())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    assert!(common::wait_until(Duration::from_secs(10), || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    }));
    Some((child, port, dir))
}

/// `proxy()`: plain requests go to the proxy naming the whole URL, HTTPS ones through a
/// tunnel it opens, checked against the server's certificate as without a proxy.
#[test]
fn requests_go_through_an_http_proxy() {
    let pki = Pki::new();
    let secure = https_server(&pki);
    let plain = HttpServer::start(&[]);
    let Some((mut proxy, proxy_port, proxy_dir)) = tinyproxy(secure.port) else {
        return;
    };
    let (_a, a) = sluice(&format!(
        r#"http(url("{}") proxy("http://127.0.0.1:{proxy_port}") batch-lines(10))"#,
        plain.url("/through")
    ));
    let (_b, b) = sluice(&format!(
        r#"http(url("https://localhost:{}/tunnelled") tls(ca-file("{}"))
                proxy("http://127.0.0.1:{proxy_port}") batch-lines(10))"#,
        secure.port,
        pki.ca().display()
    ));
    send_tcp(a, &messages(25, 1), Framing::Newline);
    send_tcp(b, &messages(25, 1), Framing::Newline);
    let got = plain.wait_for(Duration::from_secs(30), |r| count(r) >= 25);
    assert_eq!(sequence(&got), (0..25).collect::<Vec<_>>());
    let tunnelled = secure.wait_for(Duration::from_secs(30), |r| count(r) >= 25);
    assert_eq!(sequence(&tunnelled), (0..25).collect::<Vec<_>>());
    // Both went through the proxy.
    let log = std::fs::read_to_string(proxy_dir.path().join("log")).unwrap();
    let _ = proxy.kill();
    let _ = proxy.wait();
    assert!(log.contains("CONNECT"), "{log}");
    assert!(log.contains("/through"), "{log}");
}
