//! `kafka-c()` and `kafka()` against a real Kafka broker (3.9, KRaft; `tests/common/kafka.rs`
//! starts one per run of the binary): every message arrives once, a broker killed with SIGKILL
//! and started again mid-run loses nothing, a topic the broker refuses goes to
//! `fallback-topic()`; a consumer reads every record with its place, and one killed with
//! SIGKILL reads again from its group's last commit, losing nothing.

use crate::common::kafka::{kafka, Kafka};
use crate::common::{free_port, send_tcp, sluice_bin, Framing, InDir, Running, Server};
use std::collections::HashMap;
use std::io::Write;
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

/// The configuration of a sluice that reads RFC3164 over TCP on `port` and produces into
/// Kafka with `kafka_options`.
fn producer_config(port: u16, kafka_options: &str) -> String {
    format!(
        r#"options {{ keep-hostname(yes); }};
        source s {{ network(ip(127.0.0.1) port({port}) transport(tcp) log-iw-size(10000)); }};
        destination k {{ kafka-c({kafka_options}); }};
        log {{ source(s); destination(k); flags(flow-control); }};"#
    )
}

/// A sluice that reads RFC3164 over TCP on `port` and produces into Kafka with `kafka`.
fn sluice(dir: &std::path::Path, port: u16, kafka_options: &str) -> InDir {
    let config = producer_config(port, kafka_options);
    let s = InDir::start(Command::new(sluice_bin()), dir, &config);
    let started = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "sluice did not listen"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    s
}

/// Sends `seq N` messages `from..to` from hosts `web0`..`web3` over one connection.
fn send(port: u16, from: usize, to: usize) {
    let mut conn = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let mut buf = Vec::new();
    for i in from..to {
        // web3's program has a name that makes no Kafka topic.
        let program = if i % 4 == 3 { "a/b" } else { "app" };
        writeln!(
            buf,
            "<14>Nov 27 10:00:00 web{} {program}[1]: seq {i}",
            i % 4
        )
        .unwrap();
        if buf.len() > 1 << 16 {
            conn.write_all(&buf).unwrap();
            buf.clear();
        }
    }
    conn.write_all(&buf).unwrap();
}

/// How many times each sequence number arrived; panics on a record that is not one.
fn counted(records: &[(Option<Vec<u8>>, Vec<u8>)]) -> HashMap<usize, usize> {
    let mut seen = HashMap::new();
    for (_, value) in records {
        let text = String::from_utf8_lossy(value);
        let n: usize = text
            .strip_prefix("seq ")
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("not a test record: {text:?}"));
        *seen.entry(n).or_default() += 1;
    }
    seen
}

/// Asserts that every sequence number below `n` is in `seen`; `said` is shown when not.
pub fn none_lost(seen: &HashMap<usize, usize>, n: usize, said: &str) {
    let missing: Vec<usize> = (0..n).filter(|i| !seen.contains_key(i)).collect();
    assert!(
        missing.is_empty(),
        "lost {} of {n}: {:?}…\n{said}",
        missing.len(),
        &missing[..missing.len().min(10)],
    );
}

fn broker() -> Option<&'static Kafka> {
    kafka()
}

/// The broker with `topic` made (`partitions` of it) and records `0..n` produced into it,
/// the test running alone; `None` without a broker.
fn filled(
    topic: &str,
    partitions: i32,
    n: usize,
) -> Option<(&'static Kafka, std::sync::MutexGuard<'static, ()>)> {
    let k = broker()?;
    let alone = crate::alone();
    k.create_topic(topic, partitions);
    k.produce(topic, produced(0, n));
    Some((k, alone))
}

#[test]
fn every_message_arrives_once_keyed_by_host() {
    let Some(k) = broker() else { return };
    let _alone = crate::alone();
    k.create_topic("every", 4);
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let options = format!(
        r#"bootstrap-servers("{}") topic("every") key("$HOST") message("$MSG")"#,
        k.bootstrap
    );
    let mut s = sluice(dir.path(), port, &options);
    const N: usize = 1_000_000;
    let started = Instant::now();
    send(port, 0, N);
    let records = k.records("every", N);
    eprintln!(
        "{N} messages through kafka-c() read back in {:.1}s",
        started.elapsed().as_secs_f64()
    );
    s.stop();
    let seen = counted(&records);
    let missing = (0..N).filter(|i| !seen.contains_key(i)).count();
    let twice = seen.values().filter(|&&c| c > 1).count();
    assert_eq!((missing, twice, records.len()), (0, 0, N), "{}", s.stderr());
    // The key is the host: each host's messages are in one partition, in order.
    for (key, value) in &records[..100] {
        let n: usize = String::from_utf8_lossy(&value[4..]).parse().unwrap();
        assert_eq!(key.as_deref(), Some(format!("web{}", n % 4).as_bytes()));
    }
}

/// Records without a key go to a partition for a while, then to another: librdkafka's
/// sticky partitioner chooses for the first record of a run, and the run goes whole where it
/// sent that one (`sticky.partitioning.linger.ms`, here 5 ms, says for how long). Until
/// librdkafka knows the partitions' leaders it chooses a partition for every record (each
/// looks unavailable), so the records are sent once the first has arrived.
#[test]
fn keyless_records_go_to_one_partition_at_a_time_and_to_each_in_turn() {
    let Some(k) = broker() else { return };
    let _alone = crate::alone();
    k.create_topic("keyless", 3);
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let options = format!(
        r#"bootstrap-servers("{}") topic("keyless") message("$MSG")
        config("sticky.partitioning.linger.ms" => "5")"#,
        k.bootstrap
    );
    let mut s = sluice(dir.path(), port, &options);
    const N: usize = 300_000;
    send(port, 0, 1);
    assert_eq!(k.records_with_partitions("keyless", 1).len(), 1);
    send(port, 1, N);
    let records = k.records_with_partitions("keyless", N);
    s.stop();
    let mut partition_of = vec![None; N];
    for (partition, key, value) in &records {
        assert_eq!(key, &None);
        let n: usize = String::from_utf8_lossy(&value[4..]).parse().unwrap();
        assert_eq!(partition_of[n].replace(*partition), None, "seq {n} twice");
    }
    let missing = partition_of.iter().filter(|p| p.is_none()).count();
    assert_eq!(missing, 0, "{}", s.stderr());
    // Every partition had its turns; records went in runs, not one by one.
    let mut per_partition = [0usize; 3];
    for p in partition_of.iter().flatten() {
        per_partition[*p as usize] += 1;
    }
    let turns = partition_of.windows(2).filter(|w| w[0] != w[1]).count();
    eprintln!("{N} keyless records: {per_partition:?} by partition, {turns} changes of partition");
    assert!(per_partition.iter().all(|&c| c > 0), "{per_partition:?}");
    assert!(turns < N / 100, "{turns} changes of partition");
}

#[test]
fn a_broker_killed_and_started_again_loses_nothing() {
    let Some(k) = broker() else { return };
    let _alone = crate::alone();
    k.create_topic("restarted", 1);
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let options = format!(
        r#"bootstrap-servers("{}") topic("restarted") message("$MSG")"#,
        k.bootstrap
    );
    let mut s = sluice(dir.path(), port, &options);
    const N: usize = 200_000;
    let sender = std::thread::spawn(move || send(port, 0, N));
    // Killed once some arrived; the rest wait in sluice (flow control holds the sender).
    let started = Instant::now();
    let mut at = 0;
    while at == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "nothing arrived"
        );
        at = k.end_offset("restarted");
    }
    k.kill_9();
    eprintln!("the broker killed with {at} of {N} records in");
    std::thread::sleep(Duration::from_secs(2));
    k.restart();
    sender.join().unwrap();
    let records = k.records("restarted", N);
    s.stop();
    let seen = counted(&records);
    let twice = records.len() - seen.len();
    none_lost(&seen, N, &s.stderr());
    eprintln!("{N} messages through a broker kill -9: 0 lost, {twice} duplicates");
}

#[test]
fn a_broker_down_at_the_start_is_waited_for() {
    let Some(k) = broker() else { return };
    let _alone = crate::alone();
    k.create_topic("late", 1);
    k.kill_9();
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let options = format!(
        r#"bootstrap-servers("{}") topic("late") message("$MSG")"#,
        k.bootstrap
    );
    let mut s = sluice(dir.path(), port, &options);
    const N: usize = 10_000;
    send(port, 0, N);
    std::thread::sleep(Duration::from_secs(3));
    k.restart();
    let started = Instant::now();
    while k.end_offset("late") < N as i64 && started.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(200));
    }
    let records = k.records("late", N);
    s.stop();
    let seen = counted(&records);
    none_lost(&seen, N, &s.stderr());
    assert_eq!(records.len(), N, "{}", s.stderr());
}

#[test]
fn a_topic_the_broker_refuses_goes_to_the_fallback_topic() {
    let Some(k) = broker() else { return };
    let _alone = crate::alone();
    k.create_topic("to-web0-app", 1);
    k.create_topic("to-web2-app", 1);
    k.create_topic("fallback", 1);
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    // web0 and web2 name a topic that is there; web1 one the broker does not have (and
    // does not create), web3 one that is no topic name at all.
    let options = format!(
        r#"bootstrap-servers("{}") topic("to-${{HOST}}-${{PROGRAM}}")
           message("$MSG") fallback-topic("fallback")
           config("topic.metadata.propagation.max.ms" => "1000")"#,
        k.bootstrap
    );
    let mut s = sluice(dir.path(), port, &options);
    const N: usize = 1000;
    send(port, 0, N);
    let mut known = counted(&k.records("to-web0-app", N / 4));
    known.extend(counted(&k.records("to-web2-app", N / 4)));
    let fallback = counted(&k.records("fallback", N / 2));
    s.stop();
    assert_eq!(
        (known.len(), fallback.len()),
        (N / 2, N / 2),
        "{}",
        s.stderr()
    );
    assert!(known.keys().all(|n| n % 2 == 0));
    assert!(fallback.keys().all(|n| n % 2 == 1));
}

/// Records `from..to` as collectors would produce them: keyed by host, RFC3164.
fn produced(from: usize, to: usize) -> impl Iterator<Item = (Vec<u8>, Vec<u8>)> {
    (from..to).map(|i| {
        let host = format!("web{}", i % 4);
        let line = format!("<14>Nov 27 10:00:00 {host} app[1]: seq {i}");
        (host.into_bytes(), line.into_bytes())
    })
}

/// The configuration of a sluice in consumer group `group` reading `topic` (as `topic()`
/// takes it, with `more` options) into `out.log`, each record with its place.
fn consumer_config(k: &Kafka, topic: &str, group: &str, more: &str) -> String {
    format!(
        r#"source s {{ kafka(bootstrap-servers("{}") topic({topic}) {more}
               config("group.id" => "{group}" "session.timeout.ms" => "6000")); }};
        destination f {{ file("@DIR@/out.log" template(
            "${{.kafka.topic}} ${{.kafka.partition}} ${{.kafka.offset}} ${{.kafka.key}} $HOST $PROGRAM $MSG\n")); }};
        log {{ source(s); destination(f); }};"#,
        k.bootstrap
    )
}

fn consumer(dir: &std::path::Path, k: &Kafka, topic: &str, group: &str) -> InDir {
    let config = consumer_config(k, topic, group, "");
    InDir::start(Command::new(sluice_bin()), dir, &config)
}

/// Gives the sluice started in `dir` a new configuration, and waits for its reload.
fn reload(dir: &std::path::Path, config: &str) {
    let config = config.replace("@DIR@", &dir.display().to_string());
    std::fs::write(dir.join("server.conf"), format!("@version: 3.38\n{config}")).unwrap();
    let reloaded = Command::new(sluice_bin())
        .arg("ctl")
        .arg("-c")
        .arg(dir.join("ctl"))
        .arg("reload")
        .output()
        .unwrap();
    assert!(reloaded.status.success(), "{reloaded:?}");
}

/// How many times each sequence number is in `out.log` under `dirs`.
fn consumed(dirs: &[&std::path::Path]) -> HashMap<usize, usize> {
    let mut seen = HashMap::new();
    for dir in dirs {
        let text = std::fs::read_to_string(dir.join("out.log")).unwrap_or_default();
        for line in text.lines() {
            if let Some(n) = line.rsplit_once("seq ").and_then(|(_, n)| n.parse().ok()) {
                *seen.entry(n).or_default() += 1;
            }
        }
    }
    seen
}

/// Waits until every sequence number below `n` was consumed into `dirs`.
fn wait_consumed(dirs: &[&std::path::Path], n: usize, limit: Duration) -> HashMap<usize, usize> {
    let started = Instant::now();
    loop {
        let seen = consumed(dirs);
        if seen.len() >= n || started.elapsed() > limit {
            return seen;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Waits until consumer `s` has written `n` records into `dir`; how many it had then.
fn wait_for_records(s: &InDir, dir: &std::path::Path, n: usize) -> usize {
    let started = Instant::now();
    loop {
        let at = consumed(&[dir]).len();
        if at >= n {
            return at;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "{}",
            s.stderr()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Kills consumer `s` with `kill -9` once `dir` holds `n` records; how many it held then.
fn kill_9_after(mut s: InDir, dir: &std::path::Path, n: usize) -> usize {
    let at = wait_for_records(&s, dir, n);
    s.kill_9();
    at
}

#[test]
fn a_consumer_reads_every_record_once_with_its_place() {
    const N: usize = 100_000;
    let Some((k, _alone)) = filled("collected", 4, N) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut s = consumer(dir.path(), k, r#""collected""#, "readers");
    wait_consumed(&[dir.path()], N, Duration::from_secs(120));
    s.stop();
    // Stopped, the consumer left its group with its offsets committed: the next member
    // reads only what came after.
    k.produce("collected", produced(N, N + 10));
    let mut s = consumer(dir.path(), k, r#""collected""#, "readers");
    let seen = wait_consumed(&[dir.path()], N + 10, Duration::from_secs(60));
    std::thread::sleep(Duration::from_secs(1));
    s.stop();
    let seen_after = consumed(&[dir.path()]);
    assert_eq!(seen.len(), seen_after.len());
    let missing = (0..N + 10).filter(|i| !seen_after.contains_key(i)).count();
    let twice = seen_after.values().filter(|&&c| c > 1).count();
    assert_eq!((missing, twice), (0, 0), "{}", s.stderr());
    // Each record carries its topic, partition, offset and key; the host and program are
    // the collector's, parsed from the record.
    let text = std::fs::read_to_string(dir.path().join("out.log")).unwrap();
    let mut next_offset = HashMap::new();
    for line in text.lines() {
        let f: Vec<&str> = line.splitn(7, ' ').collect();
        let n: usize = f[6].strip_prefix("seq ").unwrap().parse().unwrap();
        let partition: i32 = f[1].parse().unwrap();
        let offset: i64 = f[2].parse().unwrap();
        assert_eq!(f[0], "collected", "{line}");
        assert_eq!(
            (f[3], f[4], f[5]),
            (&*format!("web{}", n % 4), &*format!("web{}", n % 4), "app"),
            "{line}"
        );
        // Offsets of a partition come in order, one after another.
        let next = next_offset.entry(partition).or_insert(offset);
        assert_eq!(*next, offset, "{line}");
        *next += 1;
    }
}

#[test]
fn a_consumer_killed_9_reads_again_from_its_groups_commit_and_loses_nothing() {
    const N: usize = 200_000;
    let Some((k, _alone)) = filled("replayed", 2, N) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let s = consumer(dir.path(), k, r#""replayed" => "-1""#, "replaying");
    let at = kill_9_after(s, dir.path(), N / 4);
    let mut s = consumer(dir.path(), k, r#""replayed" => "-1""#, "replaying");
    let seen = wait_consumed(&[dir.path()], N, Duration::from_secs(120));
    s.stop();
    let again: usize = seen.values().map(|c| c - 1).sum();
    none_lost(&seen, N, &s.stderr());
    eprintln!("{N} records, the consumer killed -9 after {at}: 0 lost, {again} read again");
}

/// `workers()`: batches parsed and dispatched by several tasks, dealt to queues of their own
/// or taken from one, still lose nothing at a `kill -9`: offsets are stored in the order the
/// batches were read, whichever task delivered them first.
#[test]
fn workers_in_parallel_lose_nothing_at_a_kill_9() {
    const N: usize = 200_000;
    let Some((k, _alone)) = filled("worked", 4, N) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let start = |more: &str| {
        let config = consumer_config(k, r#""worked""#, "workers", more);
        InDir::start(Command::new(sluice_bin()), dir.path(), &config)
    };
    let at = kill_9_after(
        start("workers(4) separated-worker-queues(yes)"),
        dir.path(),
        N / 4,
    );
    let mut s = start("workers(3)");
    let seen = wait_consumed(&[dir.path()], N, Duration::from_secs(120));
    s.stop();
    let again: usize = seen.values().map(|c| c - 1).sum();
    none_lost(&seen, N, &s.stderr());
    eprintln!("{N} records by 3 then 2 tasks, killed -9 after {at}: 0 lost, {again} read again");
}

#[test]
fn a_reload_that_changes_the_source_reads_nothing_twice() {
    const N: usize = 100_000;
    let Some((k, _alone)) = filled("reloaded", 2, N) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut s = consumer(dir.path(), k, r#""reloaded""#, "reloading");
    wait_for_records(&s, dir.path(), N / 4);
    // Mid-stream, the source changes: the old consumer leaves the group once what it read is
    // delivered and committed, and the new one reads on from there.
    reload(
        dir.path(),
        &consumer_config(k, r#""reloaded""#, "reloading", "poll-timeout(50)"),
    );
    let at = consumed(&[dir.path()]).len();
    let seen = wait_consumed(&[dir.path()], N, Duration::from_secs(120));
    std::thread::sleep(Duration::from_secs(1));
    s.stop();
    let seen_after = consumed(&[dir.path()]);
    let missing = (0..N).filter(|i| !seen_after.contains_key(i)).count();
    let twice = seen_after.values().filter(|&&c| c > 1).count();
    assert_eq!(
        (missing, twice, seen.len()),
        (0, 0, seen_after.len()),
        "reloaded at {at}\n{}",
        s.stderr()
    );
    eprintln!("{N} records, the source reloaded at {at}: 0 lost, 0 read twice");
}

/// A reload that takes the `kafka()` source out while its workers hold batches read and not
/// yet dispatched: those batches are not told delivered, so their offsets are not committed,
/// and the group's next member (the source put back by the next reload) reads them.
#[test]
fn a_source_removed_mid_batch_leaves_its_records_to_the_group() {
    const N: usize = 200_000;
    let Some((k, _alone)) = filled("removed", 4, N) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let with_source = consumer_config(
        k,
        r#""removed""#,
        "removing",
        "workers(3) separated-worker-queues(yes)",
    );
    let mut s = InDir::start(Command::new(sluice_bin()), dir.path(), &with_source);
    wait_for_records(&s, dir.path(), N / 4);
    let without_source = format!(
        r#"source n {{ tcp(ip(127.0.0.1) port({})); }};
        destination f {{ file("@DIR@/other.log"); }};
        log {{ source(n); destination(f); }};"#,
        free_port()
    );
    reload(dir.path(), &without_source);
    let at = consumed(&[dir.path()]).len();
    // The old member leaves the group (its session ends with it); then the source is back.
    std::thread::sleep(Duration::from_secs(2));
    let between = consumed(&[dir.path()]).len();
    reload(dir.path(), &with_source);
    wait_consumed(&[dir.path()], N, Duration::from_secs(120));
    std::thread::sleep(Duration::from_secs(1));
    s.stop();
    let seen = consumed(&[dir.path()]);
    let missing = (0..N).filter(|i| !seen.contains_key(i)).count();
    let twice = seen.values().filter(|&&c| c > 1).count();
    assert_eq!(
        missing,
        0,
        "removed at {at}, {between} read before it came back\n{}",
        s.stderr()
    );
    eprintln!(
        "{N} records, the source removed at {at} ({between} when it came back): 0 lost, {twice} read twice"
    );
}

#[test]
fn records_are_those_syslog_ngs_kafka_c_produces() {
    let Some(k) = broker() else { return };
    if crate::common::syslog_ng().is_none() {
        return;
    }
    let _alone = crate::alone();
    // Lines of several shapes: RFC3164 with and without a PID, no program, RFC5424 with
    // structured data, a message id and fractions of a second, and text beyond ASCII.
    let lines = |i: usize| {
        match i % 4 {
            0 => format!("<{}>Nov 27 10:00:{:02} web{} sshd[{}]: seq {i} from 10.0.0.{i}\n", 8 + i % 16, i % 60, i % 3, 100 + i),
            1 => format!("<13>Nov 27 10:01:{:02} db{} cron: seq {i} (root) CMD (run-parts)\n", i % 60, i % 2),
            2 => format!(
                "<{}>1 2026-11-27T10:02:{:02}.{i:03}+01:00 app{} svc {} ID{} [m@1 k=\"v{i}\"] seq {i} héllo\n",
                8 + i % 16,
                i % 60,
                i % 3,
                1000 + i,
                i % 5
            ),
            _ => format!("<14>Nov 27 10:03:{:02} edge{} seq {i} without a program\n", i % 60, i % 2),
    }
    };
    // RFC3164 to one source, RFC5424 to another (syslog-ng 3.38 reads one or the other).
    let legacy: String = (0..60).filter(|i| i % 4 != 2).map(lines).collect();
    let ietf: String = (0..60).filter(|i| i % 4 == 2).map(lines).collect();
    let mut produced = Vec::new();
    for (kind, topic) in [
        (Server::SyslogNg, "by-syslog-ng"),
        (Server::Sluice, "by-sluice"),
    ] {
        k.create_topic(topic, 1);
        let (port, ietf_port) = (free_port(), free_port());
        let mut s = Running::start(
            kind,
            &format!(
                r#"@version: 3.38
                options {{ keep-hostname(yes); }};
                source s {{ tcp(ip(127.0.0.1) port({port}));
                    tcp(ip(127.0.0.1) port({ietf_port}) flags(syslog-protocol)); }};
                destination d {{ kafka-c(bootstrap-servers("{}") topic("{topic}") key("$HOST")); }};
                log {{ source(s); destination(d); flags(flow-control); }};"#,
                k.bootstrap
            ),
        );
        s.wait_tcp(port);
        s.wait_tcp(ietf_port);
        send_tcp(port, legacy.as_bytes(), Framing::Newline);
        assert_eq!(k.records(topic, 45).len(), 45, "{kind:?}: {}", s.stderr());
        send_tcp(ietf_port, ietf.as_bytes(), Framing::Newline);
        let records = k.records(topic, 60);
        assert_eq!(records.len(), 60, "{kind:?}: {}", s.stderr());
        produced.push(records);
    }
    for (ng, ours) in produced[0].iter().zip(&produced[1]) {
        assert_eq!(
            (
                ng.0.as_deref().map(String::from_utf8_lossy),
                String::from_utf8_lossy(&ng.1)
            ),
            (
                ours.0.as_deref().map(String::from_utf8_lossy),
                String::from_utf8_lossy(&ours.1)
            )
        );
    }
}

#[test]
fn a_stop_waits_flush_timeout_on_shutdown_for_brokers_that_are_away() {
    // No broker listens here: what sluice holds can only wait.
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let options = format!(
        r#"bootstrap-servers("127.0.0.1:{}") topic("t") flush-timeout-on-shutdown(3000)"#,
        free_port()
    );
    let mut s = sluice(dir.path(), port, &options);
    send(port, 0, 100);
    std::thread::sleep(Duration::from_millis(500));
    let stopping = Instant::now();
    s.stop();
    let took = stopping.elapsed();
    assert!(
        took >= Duration::from_secs(3) && took < Duration::from_secs(30),
        "stopped in {took:?}\n{}",
        s.stderr()
    );
    assert!(s.stderr().contains("stopping with"), "{}", s.stderr());
}

#[test]
fn a_password_the_broker_refuses_is_said_naming_the_destination_and_retried() {
    let Some(k) = broker() else { return };
    let _alone = crate::alone();
    k.create_topic("secured", 1);
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let options = |password: &str| {
        format!(
            r#"bootstrap-servers("{}") topic("secured") message("$MSG")
               config("security.protocol" => "SASL_PLAINTEXT" "sasl.mechanisms" => "PLAIN"
                      "sasl.username" => "sluice" "sasl.password" => "{password}")"#,
            k.sasl_bootstrap
        )
    };
    let mut s = sluice(dir.path(), port, &options("wrong"));
    const N: usize = 1000;
    send(port, 0, N);
    // Refused: said, naming the destination; the messages wait, and sluice goes on.
    let started = Instant::now();
    while !s.stderr().contains("destination k") {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "nothing said:\n{}",
            s.stderr()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(3));
    assert!(s.child.try_wait().unwrap().is_none(), "{}", s.stderr());
    let said = s.stderr();
    assert!(said.contains("Authentication failed"), "{said}");
    let lines = said.lines().filter(|l| l.contains("destination k")).count();
    assert!(lines <= 10, "said {lines} times in 3 s:\n{said}");
    let first = said
        .lines()
        .find(|l| l.contains("destination k"))
        .unwrap_or_default();
    eprintln!("said {lines} times, first: {first}\n{said}");
    assert_eq!(k.end_offset("secured"), 0);
    // The right password, by a reload: what waited is produced.
    reload(dir.path(), &producer_config(port, &options("secret")));
    let records = k.records("secured", N);
    s.stop();
    let seen = counted(&records);
    assert_eq!((seen.len(), records.len()), (N, N), "{}", s.stderr());
}

#[test]
fn json_records_read_back_as_the_collector_had_them() {
    let Some(k) = broker() else { return };
    let _alone = crate::alone();
    k.create_topic("as-json", 2);
    let template = "$ISODATE $HOST $PROGRAM[$PID] $FACILITY.$PRIORITY ${colour} $MSG\\n";
    let collector_dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let collector = format!(
        r#"options {{ keep-hostname(yes); }};
        source s {{ network(ip(127.0.0.1) port({port}) transport(tcp)); }};
        rewrite r {{ set("blue" value("colour")); }};
        destination k {{ kafka-c(bootstrap-servers("{}") topic("as-json") key("$HOST")
            message("$(format-json --scope rfc5424 --scope nv-pairs --key ISODATE)")); }};
        destination f {{ file("@DIR@/direct.log" template("{template}")); }};
        log {{ source(s); rewrite(r); destination(k); destination(f); flags(flow-control); }};"#,
        k.bootstrap
    );
    let mut c = InDir::start(Command::new(sluice_bin()), collector_dir.path(), &collector);
    let started = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{}",
            c.stderr()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let consumer_dir = tempfile::tempdir().unwrap();
    let consumer = format!(
        r#"source s {{ kafka(bootstrap-servers("{}") topic("as-json") format(json)
               config("group.id" => "json-readers")); }};
        destination f {{ file("@DIR@/out.log" template("{template}")); }};
        log {{ source(s); destination(f); }};"#,
        k.bootstrap
    );
    let mut r = InDir::start(Command::new(sluice_bin()), consumer_dir.path(), &consumer);
    let lines: String = (0..200)
        .map(|i| {
            format!(
                "<{}>Nov 27 10:{:02}:{:02} web{} {}[{}]: seq {i} \"quoted\" and \\ back\n",
                8 * (i % 24) + i % 8,
                i / 60,
                i % 60,
                i % 3,
                ["sshd", "cron", "kernel"][i % 3],
                100 + i
            )
        })
        .collect();
    send_tcp(port, lines.as_bytes(), Framing::Newline);
    let out = |dir: &std::path::Path, file: &str| {
        let mut l: Vec<String> = std::fs::read_to_string(dir.join(file))
            .unwrap_or_default()
            .lines()
            .map(String::from)
            .collect();
        l.sort();
        l
    };
    let started = Instant::now();
    while out(consumer_dir.path(), "out.log").len() < 200
        && started.elapsed() < Duration::from_secs(60)
    {
        std::thread::sleep(Duration::from_millis(100));
    }
    r.stop();
    c.stop();
    let direct = out(collector_dir.path(), "direct.log");
    assert_eq!(direct.len(), 200, "{}", c.stderr());
    assert_eq!(
        out(consumer_dir.path(), "out.log"),
        direct,
        "{}",
        r.stderr()
    );
}

#[test]
fn tls_to_the_broker_with_its_certificate_checked() {
    let Some(k) = broker() else { return };
    let _alone = crate::alone();
    k.create_topic("over-tls", 1);
    let tls = |ca: &std::path::Path| {
        format!(
            r#"config("security.protocol" => "SSL" "ssl.ca.location" => "{}")"#,
            ca.display()
        )
    };
    let options = |ca: &std::path::Path| {
        format!(
            r#"bootstrap-servers("{}") topic("over-tls") message("$MSG") {}"#,
            k.ssl_bootstrap,
            tls(ca)
        )
    };
    // Trusting a CA that did not sign the broker's certificate: refused and said, nothing
    // produced, the messages wait.
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let rogue = k.pki.dir.path().join("rogue-ca.pem");
    let mut s = sluice(dir.path(), port, &options(&rogue));
    const N: usize = 1000;
    send(port, 0, N);
    let started = Instant::now();
    while !s.stderr().contains("certificate verify failed") {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "nothing said:\n{}",
            s.stderr()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(s.stderr().contains("destination k"), "{}", s.stderr());
    assert_eq!(k.end_offset("over-tls"), 0);
    // The broker's CA, by a reload: what waited is produced, over TLS.
    reload(dir.path(), &producer_config(port, &options(&k.pki.ca())));
    let started = Instant::now();
    while k.end_offset("over-tls") < N as i64 && started.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(200));
    }
    let records = k.records("over-tls", N);
    let said = s.stderr();
    s.stop();
    assert_eq!(counted(&records).len(), N, "{said}");
    // And read back over TLS by a kafka() source.
    let out = tempfile::tempdir().unwrap();
    let config = format!(
        r#"source s {{ kafka(bootstrap-servers("{}") topic("over-tls") flags(no-parse)
               config("group.id" => "tls-readers") {}); }};
        destination f {{ file("@DIR@/out.log" template("$MSG\n")); }};
        log {{ source(s); destination(f); }};"#,
        k.ssl_bootstrap,
        tls(&k.pki.ca())
    );
    let mut r = InDir::start(Command::new(sluice_bin()), out.path(), &config);
    let seen = wait_consumed(&[out.path()], N, Duration::from_secs(60));
    r.stop();
    assert_eq!(seen.len(), N, "{}", r.stderr());
}

/// `kafka-logging()` decides what of librdkafka's own log reaches sluice's: by default its
/// warnings and errors, with `kafka` all of it, with `disabled` none (its errors about the
/// client, a broker that is away, are said either way). No broker: the bootstrap server is
/// a closed port.
#[test]
fn kafka_logging_says_what_of_librdkafkas_log_is_shown() {
    let dead = free_port();
    let mut said = Vec::new();
    for logging in ["", "kafka-logging(kafka)", "kafka-logging(disabled)"] {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let options = format!(r#"bootstrap-servers("127.0.0.1:{dead}") topic("t") {logging}"#);
        let mut s = sluice(dir.path(), port, &options);
        send(port, 0, 1);
        let started = Instant::now();
        while !s.stderr().contains("brokers are down") {
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "{}",
                s.stderr()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        std::thread::sleep(Duration::from_millis(500));
        s.kill_9();
        said.push(s.stderr());
    }
    assert!(said[0].contains("librdkafka FAIL: "), "{}", said[0]);
    assert!(said[1].contains("librdkafka FAIL: "), "{}", said[1]);
    assert!(!said[2].contains("librdkafka "), "{}", said[2]);
}

/// `store-metadata(no)`: no `.kafka.*` pairs; `disable-bookmarks(yes)`: nothing committed,
/// so the next start reads the topic again from where `auto.offset.reset` says;
/// `strategy-hint(subscribe)` with listed partitions reads the whole topic, as syslog-ng 4
/// does; `persist-store(remote)` is what sluice does anyway.
#[test]
fn a_consumer_without_bookmarks_or_metadata_reads_again_from_the_start() {
    const N: usize = 1_000;
    let Some((k, _alone)) = filled("unmarked", 2, N) else {
        return;
    };
    let more =
        "store-metadata(no) disable-bookmarks(yes) persist-store(remote) strategy-hint(subscribe)";
    let config = consumer_config(k, r#""unmarked" => "0""#, "unmarked-readers", more);
    for round in 1..=2 {
        let dir = tempfile::tempdir().unwrap();
        let mut s = InDir::start(Command::new(sluice_bin()), dir.path(), &config);
        // Both partitions, though the topic named one: subscribed.
        let seen = wait_consumed(&[dir.path()], N, Duration::from_secs(60));
        s.stop();
        assert_eq!(seen.len(), N, "round {round}: {}", s.stderr());
        let text = std::fs::read_to_string(dir.path().join("out.log")).unwrap();
        // The template's four `.kafka.*` fields are empty: the line starts with spaces.
        assert!(
            text.lines().all(|l| l.starts_with("    web")),
            "round {round}: {}",
            &text[..text.len().min(300)]
        );
    }
}

/// `ignore-saved-bookmarks(yes)`: a group that committed everything reads the topic again
/// from `auto.offset.reset`'s end, whether its partitions are shared (subscribed) or named
/// (assigned).
#[test]
fn ignore_saved_bookmarks_reads_from_the_start_again() {
    const N: usize = 1_000;
    let Some((k, _alone)) = filled("rewound", 2, N) else {
        return;
    };
    let first = tempfile::tempdir().unwrap();
    let mut s = consumer(first.path(), k, r#""rewound""#, "rewinders");
    assert_eq!(
        wait_consumed(&[first.path()], N, Duration::from_secs(60)).len(),
        N
    );
    // Stopped: the group committed everything.
    s.stop();
    for topic in [r#""rewound""#, r#""rewound" => "0,1""#] {
        let dir = tempfile::tempdir().unwrap();
        let config = consumer_config(k, topic, "rewinders", "ignore-saved-bookmarks(yes)");
        let mut s = InDir::start(Command::new(sluice_bin()), dir.path(), &config);
        let seen = wait_consumed(&[dir.path()], N, Duration::from_secs(60));
        s.stop();
        assert_eq!(seen.len(), N, "{topic}: {}", s.stderr());
    }
}
