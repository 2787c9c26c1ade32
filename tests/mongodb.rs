//! `mongodb()` end to end, against FerretDB 1.24 (the MongoDB wire over the binary's
//! PostgreSQL; `tests/common/ferretdb.rs`): the documents syslog-ng 3.38's `mongodb()`
//! (`syslog-ng-mod-mongodb`) makes of the same messages; a document the server refuses costs
//! that document alone and is kept with its reason; the server killed under load, each
//! document stored once.

mod common;

use common::ferretdb::{ferretdb, FerretDb};
use common::{free_port, send_tcp, wait_until, Framing, Running, Server};
use mongodb::bson::{doc, Document};
use std::sync::RwLock;
use std::time::Duration;

/// Taken to read by the tests that share the server, to write by the one that kills it.
static SERVER: RwLock<()> = RwLock::new(());

/// A database name of the test's own.
fn database(name: &str) -> String {
    format!("{name}_{}", std::process::id())
}

fn config(port: u16, db: &FerretDb, database: &str, extra: &str) -> String {
    format!(
        r#"@version: 3.38
        options {{ threaded(yes); }};
        source s {{ network(ip(127.0.0.1) port({port}) transport(tcp) keep-hostname(yes)); }};
        destination d {{ mongodb(uri("{}{database}") collection("logs") {extra}); }};
        log {{ source(s); destination(d); flags(flow-control); }};"#,
        db.uri
    )
}

/// The documents of `collection`, without their `_id`, in `MESSAGE`'s order.
fn documents(db: &FerretDb, database: &str, collection: &str) -> Vec<Document> {
    let coll = db
        .client()
        .database(database)
        .collection::<Document>(collection);
    let mut docs: Vec<Document> = coll
        .find(doc! {})
        .run()
        .unwrap()
        .map(|d| {
            let mut d = d.unwrap();
            d.remove("_id");
            d
        })
        .collect();
    docs.sort_by_key(|d| d.get_str("MESSAGE").unwrap_or_default().to_string());
    docs
}

fn count(db: &FerretDb, database: &str, collection: &str) -> u64 {
    db.client()
        .database(database)
        .collection::<Document>(collection)
        .count_documents(doc! {})
        .run()
        .unwrap_or(0)
}

/// What a server's `mongodb()` destination says it wrote.
fn written(s: &Running) -> u64 {
    let text = match s.kind {
        Server::Sluice => common::ctl(s, &["stats"]).1,
        Server::SyslogNg => {
            let out = std::process::Command::new("syslog-ng-ctl")
                .args(["stats", "-c"])
                .arg(s.dir.path().join("ctl"))
                .output()
                .expect("syslog-ng-ctl");
            String::from_utf8_lossy(&out.stdout).into_owned()
        }
    };
    text.lines()
        .filter(|l| l.starts_with("dst.mongodb;") && l.contains(";a;written;"))
        .filter_map(|l| l.rsplit(';').next()?.parse::<u64>().ok())
        .sum()
}

const LINES: &[u8] = b"<13>Nov 24 10:00:00 host1 app[42]: hello world\n\
<38>Nov 24 10:00:01 host2 sshd: second, {\"quoted\": \"json\"}\n\
<13>Nov 24 10:00:02 host3 other[7]: third\n";

#[test]
fn documents_are_those_syslog_ngs_mongodb_makes() {
    let Some(db) = ferretdb() else { return };
    let _shared = SERVER.read().unwrap_or_else(|e| e.into_inner());
    if common::syslog_ng().is_none()
        || !std::path::Path::new("/usr/lib/syslog-ng/3.38/libafmongodb.so").exists()
    {
        eprintln!("SKIPPED: syslog-ng's mongodb() (syslog-ng-mod-mongodb) is not installed");
        return;
    }
    let mut stored = Vec::new();
    for (kind, name) in [(Server::Sluice, "ours"), (Server::SyslogNg, "theirs")] {
        let database = database(name);
        let port = free_port();
        let mut s = Running::start(kind, &config(port, db, &database, ""));
        s.wait_tcp(port);
        send_tcp(port, LINES, Framing::Newline);
        let done = wait_until(Duration::from_secs(30), || written(&s) == 3);
        assert!(done, "{kind:?}: {}", s.stderr());
        s.terminate();
        stored.push(documents(db, &database, "logs"));
    }
    assert_eq!(stored[0], stored[1]);
    assert_eq!(stored[0][0].get_str("HOST").unwrap(), "host1");
    assert_eq!(stored[0][0].get_str("PID").unwrap(), "42");
}

/// A document the server refuses (a duplicate of a key the configuration makes) costs that
/// document alone: ordered inserts go on after it, it is counted, said and kept with the
/// server's words in the fallback file. A collection name a sender makes up is refused at
/// the message.
#[test]
fn a_refused_document_costs_that_document_alone() {
    let Some(db) = ferretdb() else { return };
    let _shared = SERVER.read().unwrap_or_else(|e| e.into_inner());
    let database = database("refused");
    let kept = tempfile::tempdir().unwrap();
    let fallback = kept.path().join("refused.jsonl");
    let port = free_port();
    let extra = format!(
        "value-pairs(scope(\"rfc3164\") pair(\"_id\" \"$PID\")) fallback-file(\"{}\")",
        fallback.display()
    );
    let mut s = Running::start(Server::Sluice, &config(port, db, &database, &extra));
    s.wait_tcp(port);
    let mut lines = String::new();
    for i in 0..1000 {
        // Message 500 names the key of message 499.
        let pid = if i == 500 { 499 } else { i };
        lines.push_str(&format!("<13>Nov 24 10:00:00 h app[{pid}]: m{i}\n"));
    }
    send_tcp(port, lines.as_bytes(), Framing::Newline);
    assert!(
        wait_until(Duration::from_secs(30), || count(db, &database, "logs")
            == 999),
        "{} documents; {}; missing {:?}",
        count(db, &database, "logs"),
        s.stderr(),
        {
            let have: std::collections::HashSet<String> = documents(db, &database, "logs")
                .iter()
                .map(|d| d.get_str("MESSAGE").unwrap_or_default().to_string())
                .collect();
            (0..1000)
                .map(|i| format!("m{i}"))
                .filter(|m| !have.contains(m))
                .collect::<Vec<_>>()
        }
    );
    let dropped = format!("dst.mongodb;d#0;mongodb,{}{database};a;dropped", db.uri);
    assert!(
        wait_until(Duration::from_secs(10), || common::stat(&s, &dropped) == 1),
        "{}\n{}\n{}",
        s.stderr(),
        common::ctl(&s, &["stats"]).1,
        std::fs::read_to_string(&fallback).unwrap_or_default()
    );
    let kept = std::fs::read_to_string(&fallback).unwrap();
    let line: serde_json::Value = serde_json::from_str(kept.lines().next().unwrap()).unwrap();
    assert_eq!(line["collection"], "logs");
    assert_eq!(line["document"]["MESSAGE"], "m500", "{kept}");
    assert!(
        s.stderr()
            .contains("a document for collection 'logs' refused"),
        "{}",
        s.stderr()
    );
}

/// FerretDB killed (`kill -9`) while documents arrive, and started again: a batch the kill cut
/// is sent again, and what the server had taken of it is known by its `_id`: every document
/// stored once.
#[test]
fn killed_under_load_stores_every_document_once() {
    let Some(db) = ferretdb() else { return };
    let _alone = SERVER.write().unwrap_or_else(|e| e.into_inner());
    let database = database("killed");
    let port = free_port();
    let mut s = Running::start(
        Server::Sluice,
        &config(
            port,
            db,
            &database,
            "batch-lines(200) time-reopen(1) workers(2)",
        ),
    );
    s.wait_tcp(port);
    const N: u64 = 20_000;
    let sender = std::thread::spawn(move || {
        let mut lines = String::new();
        for i in 0..N {
            lines.push_str(&format!("<13>Nov 24 10:00:00 h app[{i}]: m{i}\n"));
        }
        send_tcp(port, lines.as_bytes(), Framing::Newline);
    });
    assert!(
        wait_until(Duration::from_secs(60), || count(db, &database, "logs")
            > 1000),
        "{}",
        s.stderr()
    );
    db.kill_9();
    std::thread::sleep(Duration::from_millis(500));
    db.restart();
    sender.join().unwrap();
    assert!(
        wait_until(Duration::from_secs(120), || count(db, &database, "logs")
            == N),
        "{} of {N}; {}",
        count(db, &database, "logs"),
        s.stderr()
    );
    let distinct = db
        .client()
        .database(&database)
        .collection::<Document>("logs")
        .distinct("MESSAGE", doc! {})
        .run()
        .unwrap();
    assert_eq!(distinct.len() as u64, N);
}
