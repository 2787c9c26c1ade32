//! The scaled-out topology of `docs/scaling.md`, every part a real process: collectors (sluice,
//! TCP in, `kafka-c()` out, keyed by host) → a Kafka topic of 4 partitions → a consumer group
//! of two sluices (`kafka()`) → OpenSearch (`opensearch()`, each document's id its record's
//! partition and offset) and files. One consumer is killed with SIGKILL mid-run: the group
//! gives its partitions to the other, which reads on from the last commit — nothing is lost,
//! and what is read twice lands on the same document ids.

use crate::common::kafka::{kafka, Kafka};
use crate::common::opensearch::{opensearch, OpenSearch};
use crate::common::{free_port, sluice_bin, InDir};
use std::collections::HashMap;
use std::io::Write;
use std::net::TcpStream;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const TOPIC: &str = "scaled";
const INDEX: &str = "scaled";
const HOSTS: usize = 8;

/// A collector: RFC3164 over TCP on `port`, produced into the topic keyed by host, the
/// message as a syslog line again.
fn collector(dir: &Path, k: &Kafka, port: u16) -> InDir {
    let config = format!(
        r#"options {{ keep-hostname(yes); }};
        source s {{ network(ip(127.0.0.1) port({port}) transport(tcp) log-iw-size(10000)); }};
        destination k {{ kafka-c(bootstrap-servers("{}") topic("{TOPIC}") key("$HOST")
            message("<$PRI>$ISODATE $HOST $MSGHDR$MSG")); }};
        log {{ source(s); destination(k); flags(flow-control); }};"#,
        k.bootstrap
    );
    let s = InDir::start(Command::new(sluice_bin()), dir, &config);
    let started = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{}",
            s.stderr()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    s
}

/// A member of the consumer group: into OpenSearch (ids from the records' places, so a record
/// read twice is one document) and into `out.log`.
fn consumer(dir: &Path, k: &Kafka, os: &OpenSearch) -> InDir {
    let config = format!(
        r#"source s {{ kafka(bootstrap-servers("{}") topic("{TOPIC}")
            config("group.id" => "central" "session.timeout.ms" => "6000"
                   "heartbeat.interval.ms" => "1000")); }};
        destination search {{ opensearch(url("{}/_bulk") index("{INDEX}")
            custom-id("${{.kafka.partition}}-${{.kafka.offset}}") batch-lines(500) workers(2)); }};
        destination f {{ file("@DIR@/out.log" template("$HOST $MSG\n")); }};
        log {{ source(s); destination(search); destination(f); }};"#,
        k.bootstrap, os.url
    );
    InDir::start(Command::new(sluice_bin()), dir, &config)
}

/// Sends `seq N` for `from..to` (every `step`-th) from hosts `host0`..`host7` over one
/// connection.
fn send(port: u16, from: usize, to: usize, step: usize) {
    let mut conn = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let mut buf = Vec::new();
    for i in (from..to).step_by(step) {
        writeln!(buf, "<14>Nov 27 10:00:00 host{} app[1]: seq {i}", i % HOSTS).unwrap();
        if buf.len() > 1 << 16 {
            conn.write_all(&buf).unwrap();
            buf.clear();
        }
    }
    conn.write_all(&buf).unwrap();
}

/// How many times each sequence number is in the consumers' `out.log`s; each line's host
/// is checked against its number.
fn in_files(dirs: &[&Path]) -> HashMap<usize, usize> {
    let mut seen = HashMap::new();
    for dir in dirs {
        let text = std::fs::read_to_string(dir.join("out.log")).unwrap_or_default();
        for line in text.lines() {
            let Some((host, n)) = line
                .split_once(" seq ")
                .and_then(|(h, n)| Some((h, n.parse::<usize>().ok()?)))
            else {
                continue;
            };
            assert_eq!(host, format!("host{}", n % HOSTS), "{line}");
            *seen.entry(n).or_default() += 1;
        }
    }
    seen
}

#[test]
fn collectors_kafka_a_consumer_group_and_opensearch_lose_nothing_when_a_consumer_dies() {
    let (Some(k), Some(os)) = (kafka(), opensearch()) else {
        return;
    };
    let _alone = crate::alone();
    k.create_topic(TOPIC, 4);
    let dirs: Vec<tempfile::TempDir> = (0..4).map(|_| tempfile::tempdir().unwrap()).collect();
    let (a_dir, b_dir) = (dirs[2].path(), dirs[3].path());
    let ports = [free_port(), free_port()];
    let mut collectors = [
        collector(dirs[0].path(), k, ports[0]),
        collector(dirs[1].path(), k, ports[1]),
    ];
    let mut a = consumer(a_dir, k, os);
    let mut b = consumer(b_dir, k, os);
    const N: usize = 100_000;
    let started = Instant::now();
    let senders: Vec<_> = ports
        .iter()
        .enumerate()
        .map(|(c, &port)| std::thread::spawn(move || send(port, c, N, 2)))
        .collect();
    // Consumer a dies once it has written its share of a part of the load.
    let mut at = 0;
    while at < N / 8 {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "consumer a wrote {at}\n{}",
            a.stderr()
        );
        std::thread::sleep(Duration::from_millis(20));
        at = in_files(&[a_dir]).len();
    }
    a.kill_9();
    let killed_at = in_files(&[a_dir, b_dir]).len();
    for s in senders {
        s.join().unwrap();
    }
    let limit = Instant::now() + Duration::from_secs(180);
    let mut seen = in_files(&[a_dir, b_dir]);
    while seen.len() < N && Instant::now() < limit {
        std::thread::sleep(Duration::from_millis(200));
        seen = in_files(&[a_dir, b_dir]);
    }
    let documents = os.wait_count(INDEX, N as u64);
    let in_index = os.field_of_all(INDEX, "MESSAGE");
    let elapsed = started.elapsed();
    b.stop();
    for c in &mut collectors {
        c.stop();
    }
    let said = format!("consumer b:\n{}", b.stderr());
    crate::kafka::none_lost(&seen, N, &said);
    let mut indexed: HashMap<usize, usize> = HashMap::new();
    for v in &in_index {
        let n = v
            .as_str()
            .and_then(|t| t.strip_prefix("seq ")?.parse().ok());
        *indexed.entry(n.expect("a test document")).or_default() += 1;
    }
    let twice = indexed.values().filter(|&&c| c > 1).count();
    assert_eq!(
        (documents, indexed.len(), twice),
        (N as u64, N, 0),
        "documents, distinct, twice\nconsumer b:\n{}",
        b.stderr()
    );
    let again: usize = seen.values().map(|c| c - 1).sum();
    eprintln!(
        "{N} messages through 2 collectors, Kafka (4 partitions), 2 consumers (one killed -9 \
         with {killed_at} in the files): 0 lost; {again} written to a file twice; {documents} \
         documents, each once; {:.1}s",
        elapsed.as_secs_f64()
    );
}
