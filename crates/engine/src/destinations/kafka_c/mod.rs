//! The declaration of `kafka-c()` (its runtime is [`crate::destinations::kafka`]):
//! syslog-ng's options, read into the producers' configuration and the record templates.

pub mod producer;

use super::driver::{Built, DestinationContext, DestinationDriver, FormatOptions, Queue, Threaded};
use super::driver::{DATES, DISK_BUFFER, EVERY_LATER, QUEUE, THREADED};
use crate::destinations::format::{Format, Formatter};
use crate::kafka::{config_pairs, valid_topic};
use producer::{KafkaDestination, KafkaOptions, KafkaQueueing, KafkaTemplates};
use sluice_config::declared::{not_yet, read, Declared, Options};
use sluice_config::{ConfigError, Node};
use sluice_model::Template;
use std::time::Duration;

/// The declaration: the names it answers to, its options, a valid use, its build.
pub static DRIVER: DestinationDriver = DestinationDriver {
    names: &["kafka_c"],
    about: "Kafka records through librdkafka, idempotent, acknowledged once the broker has them.",
    options: &[
        DATES,
        QUEUE,
        DISK_BUFFER,
        THREADED,
        OPTIONS,
        LATER,
        EVERY_LATER,
    ],
    sample: "kafka-c(bootstrap-servers(\"127.0.0.1:9\") topic(\"logs\"))",
    build,
};

/// The options of `kafka-c()` itself.
pub(super) const OPTIONS: &[Declared] = &[
    read(
        "bootstrap_servers",
        "bootstrap-servers(\"127.0.0.1:9092,127.0.0.2:9092\")",
    ).about("the brokers it first connects to, `host:port,host:port`", "required"),
    read("topic", "topic(\"logs-${HOST}\")").about("the template of a record's topic", "required"),
    read("key", "key(\"$HOST\")").about("the template of a record's key", "none"),
    read("message", "message(\"$ISODATE $HOST $MSG\")").about("the template of a record's value", "$ISODATE $HOST $MSGHDR$MSG"),
    read(
        "config",
        "config(\"linger.ms\" => \"10\", \"compression.type\" => \"lz4\")",
    ).about("librdkafka's producer properties, `\"name\" => \"value\"` (TLS, SASL, `linger.ms`…)", "none"),
    read("fallback_topic", "fallback-topic(\"logs\")").about("where a record goes whose topic the broker refuses or is no topic name", "none: dropped"),
    read("sync_send", "sync-send(yes)").about("one record at a time, each waiting for the broker", "no"),
    read("poll_timeout", "poll-timeout(100)").about("milliseconds one poll for delivery reports waits at most", "1000"),
    read(
        "flush_timeout_on_shutdown",
        "flush-timeout-on-shutdown(5000)",
    ).about("milliseconds a stop waits for the brokers to take what sluice holds", "60000"),
    read("flush_timeout_on_reload", "flush-timeout-on-reload(500)").about("milliseconds a reload waits for the brokers to take the records in flight before the new destination produces them again", "1000"),
    read("kafka_logging", "kafka-logging(disabled)").about("what of librdkafka's own log reaches sluice's: `disabled`, `kafka` (all of it at its severities), `trace` (all of it as debug messages)", "warnings and worse, as errors"),
];

/// syslog-ng's options of `kafka-c()` that sluice does not have yet.
pub(super) const LATER: &[Declared] = &[not_yet("properties_file")];

/// syslog-ng's `message()` unless it is given: as its `kafka-c()` has it.
const DEFAULT_MESSAGE: &str = "$ISODATE $HOST $MSGHDR$MSG";

/// librdkafka properties that are sluice's to set: `bootstrap-servers()` says where, and the
/// reports are what a sender waits for.
const OURS: &[&str] = &[
    "bootstrap.servers",
    "metadata.broker.list",
    "dr_msg_cb",
    "dr_cb",
];

/// `kafka-c(bootstrap-servers("10.0.0.1:9092") topic("logs"))`.
pub(super) fn build(
    node: &Node,
    o: &mut Options,
    cx: &DestinationContext,
) -> Result<Built, ConfigError> {
    let format = FormatOptions::read_part(o, cx, DATES)?;
    let queue = Queue::read(o, cx.globals)?;
    let threaded = Threaded::read(o, cx)?;
    let bootstrap_servers = crate::kafka::bootstrap_servers(node, o, "kafka-c")?;
    let needed = |name: &str, example: &str| {
        ConfigError::new(
            node.pos,
            format!("kafka-c() needs {name}: kafka-c({example})"),
        )
    };
    let dates = format.dates.clone();
    let template = |o: &mut Options, name: &str| -> Result<Option<Formatter>, ConfigError> {
        let Some(opt) = o.last(name) else {
            return Ok(None);
        };
        let v = opt.value()?;
        let mut t =
            Template::compile_in(&v.text, cx.names).map_err(|e| ConfigError::new(v.pos, e))?;
        t.dates = dates.clone();
        Ok(Some(Formatter::new(Format::Template(t), false)))
    };
    let topic_text = match o.last("topic") {
        Some(opt) => {
            let v = opt.value()?;
            if !v.text.contains('$') && !valid_topic(v.text.as_bytes()) {
                return Err(ConfigError::new(
                    v.pos,
                    format!(
                        "'{}' is not a Kafka topic name: 1 to 249 of a-z, A-Z, 0-9, '.', '_', '-'",
                        v.text
                    ),
                ));
            }
            v.text.clone()
        }
        None => {
            return Err(needed(
                "topic()",
                "bootstrap-servers(\"10.0.0.1:9092\") topic(\"logs\")",
            ))
        }
    };
    let topic = template(o, "topic")?.expect("topic() is there");
    let key = template(o, "key")?;
    let message = template(o, "message")?.unwrap_or_else(|| {
        let mut t = Template::compile_in(DEFAULT_MESSAGE, cx.names).expect("a valid template");
        t.dates = dates.clone();
        Formatter::new(Format::Template(t), false)
    });
    let mut config = Vec::new();
    for opt in o.all("config") {
        config_pairs(
            opt,
            OURS,
            "give the brokers in bootstrap-servers()",
            &mut config,
        )?;
    }
    let fallback_topic = match o.last("fallback_topic") {
        Some(opt) => {
            let v = opt.value()?;
            if !valid_topic(v.text.as_bytes()) {
                return Err(ConfigError::new(
                    v.pos,
                    format!("fallback-topic(\"{}\") is not a Kafka topic name", v.text),
                ));
            }
            Some(v.text.clone())
        }
        None => None,
    };
    let sync_send = o.yes_no("sync_send", false)?;
    let poll_timeout = Duration::from_millis(
        o.last("poll_timeout")
            .map(Node::u64)
            .transpose()?
            .unwrap_or(1000)
            .max(1),
    );
    let millis = |o: &mut Options, name: &str, default: u64| -> Result<Duration, ConfigError> {
        Ok(Duration::from_millis(
            o.last(name).map(Node::u64).transpose()?.unwrap_or(default),
        ))
    };
    let flush_timeout_on_shutdown = millis(o, "flush_timeout_on_shutdown", 60_000)?;
    let flush_timeout_on_reload = millis(o, "flush_timeout_on_reload", 1000)?;
    let pacing = threaded.pacing(&queue);
    let partition_key = threaded.partition_key.map(|mut key| {
        key.dates = format.dates.clone();
        Formatter::new(Format::Template(key), false)
    });
    let opts = KafkaOptions {
        label: cx.label().into(),
        bootstrap_servers: bootstrap_servers.clone(),
        config,
        fallback_topic,
        sync_send,
        poll_timeout,
        flush_timeout_on_shutdown,
        flush_timeout_on_reload,
        logging: crate::kafka::logging(o)?,
    };
    // librdkafka checks the properties' names and values now: a wrong one is a
    // configuration error, not a producer that fails at its first message. (Without making
    // a client: a syntax check connects to no broker.)
    opts.client_config()
        .create_native_config()
        .map_err(|e| ConfigError::new(node.pos, format!("kafka-c(): {e}")))?;
    let disk_buffer = queue.disk_buffer(o, || {
        let all = format!("{bootstrap_servers},{topic_text}");
        format!("{}-kafka-{:08x}", cx.name, crc32fast::hash(all.as_bytes()))
    })?;
    let (component, id) = cx.counted_as(node);
    let counters = cx
        .stats
        .destination(&component, &id, &format!("kafka,{topic_text}"));
    Ok(std::sync::Arc::new(KafkaDestination::new(
        KafkaTemplates {
            topic,
            key,
            message,
            partition_key,
        },
        opts,
        KafkaQueueing {
            workers: threaded.workers,
            pacing,
            disk_buffer,
        },
        counters,
    )))
}
