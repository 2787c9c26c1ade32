//! `kafka()` source: its declaration (`topic()`'s forms, `config()`) and build; the polling
//! thread is [`consumer`]. What it shares with `kafka-c()` is [`crate::kafka`].

mod consumer;

use consumer::{KafkaSource, Topics};

use super::driver::{Built, Common, SourceDriver};
use super::Local;
use sluice_config::declared::{read, Declared, Options};
use sluice_config::{ConfigError, Node};
use sluice_protocol::framing::Framing;
use std::sync::Arc;
use std::time::Duration;

/// The declaration: the names it answers to, its options, a valid use, its build.
pub static DRIVER: SourceDriver = SourceDriver {
    names: &["kafka"],
    about: "Records of Kafka topics, as a member of a consumer group; offsets committed once delivered.",
    options: &[KAFKA],
    sample: "kafka(bootstrap-servers(\"127.0.0.1:9\") topic(\"logs\"))",
    build: kafka,
};

/// The options of `kafka()`.
const KAFKA: &[Declared] = &[
    read("bootstrap_servers", "bootstrap-servers(\"127.0.0.1:9092\")").about("the brokers it first connects to, `host:port,host:port`", "required"),
    read("topic", "topic(\"logs\" => \"-1\")").about("the topics it reads: `\"logs\"`, `\"^pattern\"`, `\"logs\" => \"0,1\"` for those partitions, `\"-1\"` for all", "required"),
    read("config", "config(\"group.id\" => \"central\")").about("librdkafka's consumer properties, `\"name\" => \"value\"` (TLS, SASL, `group.id`)", "group.id sluice-SOURCE"),
    read("poll_timeout", "poll-timeout(100)").about("milliseconds one poll for records waits at most", "100"),
    read("kafka_logging", "kafka-logging(disabled)").about("what of librdkafka's own log reaches sluice's: `disabled`, `kafka` (all of it at its severities), `trace` (all of it as debug messages)", "warnings and worse, as errors"),
    read("store_metadata", "store-metadata(no)").about("messages carry `.kafka.topic`, `.kafka.partition`, `.kafka.offset` and `.kafka.key`", "yes"),
    read("disable_bookmarks", "disable-bookmarks(yes)").about("store no offsets, so the group commits none: the next start reads from where `auto.offset.reset` says", "no"),
    read("persist_store", "persist-store(remote)").about("where offsets are kept: `remote` (the consumer group, committed once delivered) is the only place sluice keeps them", "remote"),
    read("strategy_hint", "strategy-hint(subscribe)").about("`assign` reads listed partitions themselves, `subscribe` their whole topics, shared by the group", "assign"),
    read("ignore_saved_bookmarks", "ignore-saved-bookmarks(yes)").about("each partition starts where `auto.offset.reset` says the first time it is given after a start, not at the group's committed offset", "no"),
    read("workers", "workers(3)").about("the reading thread and the tasks that parse and dispatch what it reads: N − 1 tasks (syslog-ng's worker 0 fetches, the others process)", "2 (a thread and a task)"),
    read("separated_worker_queues", "separated-worker-queues(yes)").about("each of its `workers()` takes batches from a queue of its own, dealt to in turn (`no`: all take from one)", "no"),
];

/// `kafka(bootstrap-servers("10.0.0.1:9092") topic("logs"))`: a member of a consumer group.
fn kafka(node: &Node, o: &mut Options, common: Common) -> Result<Built, ConfigError> {
    let example = "kafka(bootstrap-servers(\"10.0.0.1:9092\") topic(\"logs\"))";
    let bootstrap_servers = crate::kafka::bootstrap_servers(node, o, "kafka")?;
    // syslog-ng 4: listed partitions are assigned unless `strategy-hint(subscribe)`, which
    // subscribes to their whole topics (the group shares them).
    let subscribe = match o.last("strategy_hint") {
        None => false,
        Some(opt) => match opt.string()?.as_str() {
            "assign" => false,
            "subscribe" => true,
            other => {
                return Err(ConfigError::unknown(
                    opt.pos,
                    "strategy-hint",
                    other,
                    "",
                    &["assign", "subscribe"],
                ))
            }
        },
    };
    if let Some(opt) = o.last("persist_store") {
        match opt.string()?.as_str() {
            "remote" => {}
            "local" => return Err(ConfigError::new(
                opt.pos,
                "persist-store(local): sluice keeps a kafka() source's offsets in its consumer group, committed once delivered (persist-store(remote)); a local file would be a second truth beside the group's",
            )),
            other => {
                return Err(ConfigError::unknown(
                    opt.pos,
                    "persist-store",
                    other,
                    "",
                    &["remote", "local"],
                ))
            }
        }
    }
    let topics = match o.last("topic") {
        Some(t) => match kafka_topics(t)? {
            Topics::Assign(parts) if subscribe => {
                let mut whole: Vec<String> = parts.into_iter().map(|(t, _)| t).collect();
                whole.sort_unstable();
                whole.dedup();
                Topics::Subscribe(whole)
            }
            topics => topics,
        },
        None => {
            return Err(ConfigError::new(
                node.pos,
                format!("kafka() needs topic(): {example}"),
            ))
        }
    };
    let mut config = Vec::new();
    for opt in o.all("config") {
        crate::kafka::config_pairs(
            opt,
            consumer::OURS,
            "offsets are stored once delivered, and committed by librdkafka",
            &mut config,
        )?;
    }
    let group_id = match config.iter().rposition(|(k, _)| k == "group.id") {
        Some(i) => config.remove(i).1,
        None => format!("sluice-{}", common.cx.name),
    };
    config.retain(|(k, _)| k != "group.id");
    let poll_timeout = Duration::from_millis(
        o.last("poll_timeout")
            .map(Node::u64)
            .transpose()?
            .unwrap_or(100)
            .clamp(1, 10_000),
    );
    let mut common = common;
    // The host a record names is the machine that logged it, not the one that read Kafka.
    if !node.options().any(|opt| opt.key() == "keep_hostname") {
        common.opts.keep_hostname = true;
    }
    let ingest = common.ingest();
    let window = common.opts.log_iw_size;
    let listener = format!("kafka,{bootstrap_servers}");
    let source = KafkaSource {
        local: Local {
            reader: common.reader(node, &ingest, "kafka", Framing::Newline, window, &listener),
            names: common.names(),
            source_name: common.cx.name.clone(),
            source_id: common.cx.id,
        },
        bootstrap_servers,
        topics,
        group_id,
        config,
        poll_timeout,
        logging: crate::kafka::logging(o)?,
        store_metadata: o.yes_no("store_metadata", true)?,
        disable_bookmarks: o.yes_no("disable_bookmarks", false)?,
        ignore_saved_bookmarks: o.yes_no("ignore_saved_bookmarks", false)?,
        // syslog-ng's worker 0 fetches, the others process: two (its default) is the
        // reading thread and one task.
        workers: super::Workers {
            tasks: o
                .last("workers")
                .map(Node::u64)
                .transpose()?
                .unwrap_or(2)
                .clamp(2, 64) as usize
                - 1,
            separated: o.yes_no("separated_worker_queues", false)?,
        },
    };
    // librdkafka checks the properties' names and values now: a wrong one is a
    // configuration error, not a consumer that fails when it starts. (Without making a
    // client: a syntax check connects to no broker.)
    source
        .client_config()
        .create_native_config()
        .map_err(|e| ConfigError::new(node.pos, format!("kafka(): {e}")))?;
    Ok(Arc::new(source))
}

/// `topic("logs")`, `topic("logs" => "-1" "^audit-.*" => "-1")` (whole topics, their
/// partitions shared by the group), or `topic("logs" => "0,1")` (those partitions).
fn kafka_topics(node: &Node) -> Result<Topics, ConfigError> {
    let words: Vec<&sluice_config::Value> = node.words()?;
    let mut subscribe = Vec::new();
    let mut assign = Vec::new();
    let mut rest = words.as_slice();
    while let [name, more @ ..] = rest {
        let (partitions, more) = match more {
            [arrow, partitions, more @ ..] if arrow.text == "=>" => (Some(*partitions), more),
            _ => (None, more),
        };
        let pattern = name.text.starts_with('^');
        if pattern {
            regex::Regex::new(&name.text).map_err(|e| {
                ConfigError::new(
                    name.pos,
                    format!("'{}' is not a topic pattern: {e}", name.text),
                )
            })?;
        } else if !crate::kafka::valid_topic(name.text.as_bytes()) {
            return Err(ConfigError::new(
                name.pos,
                format!(
                    "'{}' is not a Kafka topic name (1 to 249 of a-z, A-Z, 0-9, '.', '_', '-'), nor a pattern starting with ^",
                    name.text
                ),
            ));
        }
        match partitions.map(|p| p.text.trim()) {
            None | Some("-1") => subscribe.push(name.text.clone()),
            Some(_) if pattern => return Err(ConfigError::new(
                name.pos,
                "a topic pattern reads every partition of the topics it matches: give it \"-1\"",
            )),
            Some(list) => {
                for p in list.split(',') {
                    let p: i32 = p.trim().parse().ok().filter(|p| *p >= 0).ok_or_else(|| {
                        ConfigError::new(
                            partitions.expect("partitions given").pos,
                            format!(
                                "'{list}' is not a list of partitions: \"0,1\", or \"-1\" for all"
                            ),
                        )
                    })?;
                    assign.push((name.text.clone(), p));
                }
            }
        }
        rest = more;
    }
    match (subscribe.is_empty(), assign.is_empty()) {
        (true, true) => Err(ConfigError::new(
            node.pos,
            "topic() needs a topic: topic(\"logs\")",
        )),
        (false, false) => Err(ConfigError::new(
            node.pos,
            "kafka() reads either whole topics, their partitions shared by its group (\"-1\"), or given partitions, not both: use two kafka() sources",
        )),
        (false, true) => Ok(Topics::Subscribe(subscribe)),
        (true, false) => Ok(Topics::Assign(assign)),
    }
}
