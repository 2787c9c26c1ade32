//! `elasticsearch-http()` and `opensearch()` against a real OpenSearch node (2.19;
//! `tests/common/opensearch.rs` starts one per run of the binary): every document arrives once
//! in the index its template names, a document the cluster refuses is dropped and counted
//! alone, a cluster that answers 429 is waited for, a dead node is failed over, and the
//! documents are those syslog-ng 3.38's `elasticsearch-http()` indexes.

use crate::common::opensearch::{opensearch, OpenSearch};
use crate::common::{free_port, send_tcp, stat, Framing, Running, Server};
use std::collections::HashMap;
use std::time::Duration;

/// A server that reads RFC3164 lines on a TCP port and indexes them with `destination`, on a
/// flow-controlled path.
fn start(kind: Server, destination: &str) -> (Running, u16) {
    start_reading(kind, "", destination)
}

/// As [`start`], the source with `flags`.
fn start_reading(kind: Server, flags: &str, destination: &str) -> (Running, u16) {
    let port = free_port();
    let mut s = Running::start(
        kind,
        &format!(
            r#"@version: 3.38
@include "scl.conf"
            options {{ keep-hostname(yes); }};
            source s {{ tcp(ip(127.0.0.1) port({port}) log-iw-size(100000) {flags}); }};
            destination d {{ {destination}; }};
            log {{ source(s); destination(d); flags(flow-control); }};"#
        ),
    );
    s.wait_tcp(port);
    (s, port)
}

/// `n` messages from `hosts` hosts, numbered from `from`: `... host<h> app: seq=<i>`.
fn messages(from: usize, n: usize, hosts: usize) -> Vec<u8> {
    (from..from + n)
        .map(|i| format!("<13>Nov 24 10:00:00 host{} app: seq={i}\n", i % hosts))
        .collect::<String>()
        .into_bytes()
}

/// How many times each `seq=` number is among `values` (MESSAGE fields).
fn counted(values: &[serde_json::Value]) -> HashMap<usize, usize> {
    let mut seen = HashMap::new();
    for v in values {
        let text = v.as_str().unwrap_or_default();
        let n: usize = text
            .strip_prefix("seq=")
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("not a test document: {v}"));
        *seen.entry(n).or_default() += 1;
    }
    seen
}

/// Asserts that the documents of `index` hold each of `0..n` once.
fn each_once(os: &OpenSearch, index: &str, n: usize, s: &Running) {
    let got = os.wait_count(index, n as u64);
    let seen = counted(&os.field_of_all(index, "MESSAGE"));
    let missing = (0..n).filter(|i| !seen.contains_key(i)).count();
    let twice = seen.values().filter(|&&c| c > 1).count();
    assert_eq!(
        (missing, twice, got),
        (0, 0, n as u64),
        "missing, twice, count\n{}",
        s.stderr()
    );
}

#[test]
fn every_document_arrives_once_in_the_index_its_template_names() {
    let Some(os) = opensearch() else { return };
    let _alone = crate::alone();
    let (s, port) = start(
        Server::Sluice,
        &format!(
            r#"elasticsearch-http(url("{}/_bulk") index("every-${{HOST}}") type("")
               batch-lines(1000) workers(4))"#,
            os.url
        ),
    );
    const N: usize = 1_000_000;
    let started = std::time::Instant::now();
    std::thread::scope(|t| {
        for c in 0..4 {
            t.spawn(move || {
                send_tcp(port, &messages(c * N / 4, N / 4, 2), Framing::Newline);
            });
        }
    });
    each_once(os, "every-*", N, &s);
    eprintln!(
        "{N} documents indexed in {:.1}s",
        started.elapsed().as_secs_f64()
    );
    assert_eq!(os.count("every-host0"), N as u64 / 2);
    let written = "dst.elasticsearch-http;d#0;elasticsearch-http,".to_string();
    assert!(crate::common::wait_until(Duration::from_secs(10), || stat(
        &s,
        &format!("{written}{}/_bulk;a;written", os.url)
    ) == N
        as u64));
}

#[test]
fn a_document_the_cluster_refuses_is_dropped_and_counted_alone() {
    let Some(os) = opensearch() else { return };
    let _alone = crate::alone();
    os.create_index("typed", r#"{"properties":{"n":{"type":"long"}}}"#);
    // The first node is down: the second takes the documents.
    let dead = format!("http://127.0.0.1:{}/_bulk", free_port());
    let (s, port) = start(
        Server::Sluice,
        &format!(
            r#"opensearch(url("{dead}" "{}/_bulk") index("typed")
               template("$(format-json n=$MSG)") batch-lines(10) workers(1))"#,
            os.url
        ),
    );
    let lines: String = (0..100)
        .map(|i| {
            let n = if i == 42 {
                "poison".to_string()
            } else {
                i.to_string()
            };
            format!("<13>Nov 24 10:00:00 host app: {n}\n")
        })
        .collect();
    send_tcp(port, lines.as_bytes(), Framing::Newline);
    assert_eq!(os.wait_count("typed", 99), 99, "{}", s.stderr());
    let dropped = format!("dst.opensearch;d#0;opensearch,{dead};a;dropped");
    assert!(
        crate::common::wait_until(Duration::from_secs(10), || stat(&s, &dropped) == 1),
        "{}\n{}",
        s.stderr(),
        crate::common::ctl(&s, &["stats"]).1
    );
    let stderr = s.stderr();
    assert!(
        stderr.contains(
            "refused 1 of 10 documents for good (the first: HTTP 400: mapper_parsing_exception"
        ),
        "{stderr}"
    );
}

/// A line end in a sender's value cannot add a bulk action (issue 55): with
/// `template("${v}")` and `v` holding `{…}\n{"index":{"_index":"injected"}}\n{…}` (a JSON
/// escape the parser decodes), the document stays one line — the cluster refuses it as JSON,
/// dropped and counted — and no `injected` index is made.
#[test]
fn a_line_end_in_a_value_cannot_add_a_bulk_action() {
    let Some(os) = opensearch() else { return };
    let _alone = crate::alone();
    let port = free_port();
    let mut s = Running::start(
        Server::Sluice,
        &format!(
            r#"@version: 3.38
            source s {{ network(ip(127.0.0.1) port({port}) transport(tcp) flags(no-parse)); }};
            parser p {{ json-parser(prefix(".j.")); }};
            destination d {{ opensearch(url("{}/_bulk") index("framed") template("${{.j.v}}")
                batch-lines(10) workers(1)); }};
            log {{ source(s); parser(p); destination(d); flags(flow-control); }};"#,
            os.url
        ),
    );
    s.wait_tcp(port);
    let lines = concat!(
        r#"{"v":"{\"a\":1}\n{\"index\":{\"_index\":\"injected\"}}\n{\"b\":2}"}"#,
        "\n",
        r#"{"v":"{\"c\":3}"}"#,
        "\n"
    );
    send_tcp(port, lines.as_bytes(), Framing::Newline);
    assert_eq!(os.wait_count("framed", 1), 1, "{}", s.stderr());
    let dropped = format!("dst.opensearch;d#0;opensearch,{}/_bulk;a;dropped", os.url);
    assert!(
        crate::common::wait_until(Duration::from_secs(10), || stat(&s, &dropped) == 1),
        "{}",
        s.stderr()
    );
    assert_eq!(os.count("injected"), 0);
}

#[test]
fn a_cluster_that_answers_429_is_waited_for_and_nothing_is_lost() {
    let Some(os) = opensearch() else { return };
    let _alone = crate::alone();
    // Requests of more than a kilobyte are refused with 429 (circuit_breaking_exception)
    // until the limit is lifted.
    let limit = |v: &str| {
        let body = format!(r#"{{"transient":{{"network.breaker.inflight_requests.limit":{v}}}}}"#);
        let (status, answer) = os.request("PUT", "/_cluster/settings", Some(&body));
        assert_eq!(status, 200, "{answer}");
    };
    limit(r#""1kb""#);
    let (s, port) = start(
        Server::Sluice,
        &format!(
            r#"elasticsearch-http(url("{}/_bulk") index("busy") batch-lines(100)
               retries(1000) time-reopen(1))"#,
            os.url
        ),
    );
    const N: usize = 10_000;
    send_tcp(port, &messages(0, N, 1), Framing::Newline);
    assert!(
        crate::common::wait_until(Duration::from_secs(30), || s
            .stderr()
            .contains("answered HTTP 429")),
        "{}",
        s.stderr()
    );
    assert_eq!(os.count("busy"), 0);
    limit("null");
    each_once(os, "busy", N, &s);
}

#[test]
fn documents_are_those_syslog_ngs_elasticsearch_http_indexes() {
    let Some(os) = opensearch() else { return };
    let _alone = crate::alone();
    if crate::common::syslog_ng().is_none() {
        return;
    }
    let mut documents = Vec::new();
    for (kind, index) in [
        (Server::SyslogNg, "by-syslog-ng"),
        (Server::Sluice, "by-sluice"),
    ] {
        let (s, port) = start_reading(
            kind,
            "flags(syslog-protocol)",
            &format!(
                r#"elasticsearch-http(url("{}/_bulk") index("{index}") type("")
                   custom-id("${{HOST}}-${{MSGID}}-${{PID}}") batch-lines(10))"#,
                os.url
            ),
        );
        let lines: String = (0..50)
            .map(|i| {
                format!(
                    "<{}>1 2026-11-24T10:00:{:02}.{i:03}+01:00 host{} app{} {} ID{} [m@1 k=\"v{i}\"] seq={i}\n",
                    8 + i % 16,
                    i % 60,
                    i % 3,
                    i % 2,
                    1000 + i,
                    i % 5
                )
            })
            .collect();
        send_tcp(port, lines.as_bytes(), Framing::Newline);
        assert_eq!(os.wait_count(index, 50), 50, "{kind:?}: {}", s.stderr());
        let (_, answer) = os.request("GET", &format!("/{index}/_search?size=100"), None);
        let v: serde_json::Value = serde_json::from_str(&answer).unwrap();
        let mut hits: Vec<(String, serde_json::Value)> = v["hits"]["hits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| (h["_id"].as_str().unwrap().to_string(), h["_source"].clone()))
            .collect();
        hits.sort_by(|a, b| a.0.cmp(&b.0));
        documents.push(hits);
    }
    assert_eq!(documents[0].len(), 50);
    for (ng, ours) in documents[0].iter().zip(&documents[1]) {
        assert_eq!(ng, ours);
    }
}

#[test]
fn compressed_bulk_requests_and_answers() {
    let Some(os) = opensearch() else { return };
    let _alone = crate::alone();
    let (s, port) = start(
        Server::Sluice,
        &format!(
            r#"opensearch(url("{}/_bulk") index("compressed") batch-lines(100)
               content-compression("gzip") accept-encoding("gzip"))"#,
            os.url
        ),
    );
    const N: usize = 1000;
    send_tcp(port, &messages(0, N, 2), Framing::Newline);
    each_once(os, "compressed", N, &s);
    // Each document's result was read from the compressed answers.
    let written = format!("dst.opensearch;d#0;opensearch,{}/_bulk;a;written", os.url);
    assert!(
        crate::common::wait_until(Duration::from_secs(10), || stat(&s, &written) == N as u64),
        "{}",
        s.stderr()
    );
}
