//! What `kafka-c()` (producing, [`crate::destinations::kafka_c`]) and `kafka()` (consuming,
//! [`crate::sources::kafka`]) share: librdkafka properties read from `config()`, Kafka's
//! rule for topic names, and how librdkafka's own complaints reach sluice's log.

use crate::own_log;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use sluice_config::declared::Options;
use sluice_config::{ConfigError, Node};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The longest topic name Kafka takes.
const MAX_TOPIC: usize = 249;

/// Whether Kafka takes `topic` as a topic's name: 1 to 249 of `[a-zA-Z0-9._-]`, not `.` or
/// `..`.
pub fn valid_topic(topic: &[u8]) -> bool {
    !topic.is_empty()
        && topic.len() <= MAX_TOPIC
        && topic != b"."
        && topic != b".."
        && topic
            .iter()
            .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-'))
}

/// The brokers of `driver` (`kafka`, `kafka-c`): `bootstrap-servers()`, which it needs, and no
/// positional value.
pub fn bootstrap_servers(
    node: &Node,
    o: &mut Options,
    driver: &str,
) -> Result<String, ConfigError> {
    let example = format!("{driver}(bootstrap-servers(\"10.0.0.1:9092\") topic(\"logs\"))");
    if let Some(v) = node.first_value() {
        return Err(ConfigError::new(
            v.pos,
            format!("{driver}() takes its brokers in bootstrap-servers(): {example}"),
        ));
    }
    o.last("bootstrap_servers")
        .map(Node::string)
        .transpose()?
        .filter(|s| !s.trim().is_empty())
        .ok_or_else(|| {
            ConfigError::new(
                node.pos,
                format!("{driver}() needs bootstrap-servers(): {example}"),
            )
        })
}

/// `config("linger.ms" => "10", "compression.type" => "lz4")`: librdkafka properties, each
/// pushed to `into`; a property in `ours` is sluice's to set, and refused with `why`.
pub fn config_pairs(
    opt: &Node,
    ours: &[&str],
    why: &str,
    into: &mut Vec<(String, String)>,
) -> Result<(), ConfigError> {
    let words: Vec<&sluice_config::Value> = opt.values().collect();
    let example = "config(\"linger.ms\" => \"10\", \"compression.type\" => \"lz4\")";
    if words.is_empty() || words.len() % 3 != 0 {
        return Err(ConfigError::new(opt.pos, format!("write it as {example}")));
    }
    for w in words.chunks(3) {
        if w[1].text != "=>" {
            return Err(ConfigError::new(w[1].pos, format!("write it as {example}")));
        }
        let name = w[0].text.trim();
        if ours.contains(&name) {
            return Err(ConfigError::new(
                w[0].pos,
                format!("{name} is sluice's to set: {why}"),
            ));
        }
        into.push((name.to_string(), w[2].text.clone()));
    }
    Ok(())
}

/// `kafka-logging()`: what of librdkafka's own log reaches sluice's (its errors outside any
/// one record — a broker away, a password refused — always do).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum KafkaLogging {
    /// Not given: warnings and worse, as errors, each text once a minute.
    #[default]
    Warnings,
    /// `disabled`: none of it.
    Disabled,
    /// `kafka`: all of it, at librdkafka's own severities.
    Kafka,
    /// `trace`: all of it, as debug messages (shown with `-d` or `sluice ctl debug on`).
    Trace,
}

/// `kafka-logging(disabled|kafka|trace)`.
pub fn logging(o: &mut Options) -> Result<KafkaLogging, ConfigError> {
    let Some(opt) = o.last("kafka_logging") else {
        return Ok(KafkaLogging::Warnings);
    };
    match opt.string()?.to_ascii_lowercase().as_str() {
        "disabled" => Ok(KafkaLogging::Disabled),
        "kafka" => Ok(KafkaLogging::Kafka),
        "trace" => Ok(KafkaLogging::Trace),
        other => Err(ConfigError::unknown(
            opt.pos,
            "kafka-logging",
            other,
            "",
            &["disabled", "kafka", "trace"],
        )),
    }
}

/// Implements rdkafka's `ClientContext` for a context type with a [`Said`] in its `said`:
/// librdkafka's log and errors are said as `Said` says them.
macro_rules! client_context_says {
    ($context:ty) => {
        impl rdkafka::ClientContext for $context {
            fn log(&self, level: rdkafka::config::RDKafkaLogLevel, fac: &str, text: &str) {
                self.said.log(level, fac, text);
            }

            fn error(&self, error: rdkafka::error::KafkaError, reason: &str) {
                self.said.error(error, reason);
            }
        }
    };
}
pub(crate) use client_context_says;

/// What a librdkafka client says of itself, in sluice's log under its driver's label: the
/// same text at most once a minute (a broker that is away, or a password it refuses, is
/// reported at every retry, and the texts differ only in their numbers: "after 336ms in
/// state AUTH_REQ"), and whether librdkafka called an error fatal.
pub struct Said {
    pub label: Arc<str>,
    logging: KafkaLogging,
    /// What was said lately, without its digits, and when.
    recent: Mutex<Vec<(String, Instant)>>,
    /// librdkafka said the client cannot go on (a fatal idempotence error).
    pub fatal: AtomicBool,
}

impl Said {
    pub fn new(label: Arc<str>, logging: KafkaLogging) -> Said {
        Said {
            label,
            logging,
            recent: Mutex::default(),
            fatal: AtomicBool::new(false),
        }
    }

    pub fn say(&self, text: String) {
        const AGAIN: Duration = Duration::from_secs(60);
        let shape: String = text.chars().filter(|c| !c.is_ascii_digit()).collect();
        let mut recent = self.recent.lock().expect("said lock");
        recent.retain(|(_, at)| at.elapsed() < AGAIN);
        if recent.iter().any(|(said, _)| *said == shape) {
            return;
        }
        own_log::error(format!("{}: {text}", self.label));
        if recent.len() < 64 {
            recent.push((shape, Instant::now()));
        }
    }

    /// One line of librdkafka's log, under the driver's label.
    fn line(&self, fac: &str, text: &str) -> String {
        format!("{}: librdkafka {fac}: {text}", self.label)
    }

    /// librdkafka's log, as `kafka-logging()` says.
    pub fn log(&self, level: RDKafkaLogLevel, fac: &str, text: &str) {
        use RDKafkaLogLevel::*;
        match self.logging {
            KafkaLogging::Disabled => {}
            KafkaLogging::Warnings => {
                if matches!(level, Emerg | Alert | Critical | Error | Warning) {
                    self.say(format!("librdkafka {fac}: {text}"));
                }
            }
            KafkaLogging::Kafka => own_log::emit(level as u8, self.line(fac, text)),
            KafkaLogging::Trace => own_log::emit_debug(|| self.line(fac, text)),
        }
    }

    /// An error librdkafka reports outside any one message (a broker down, authentication).
    pub fn error(&self, error: KafkaError, reason: &str) {
        if error.rdkafka_error_code() == Some(RDKafkaErrorCode::Fatal) {
            self.fatal.store(true, Ordering::SeqCst);
        }
        self.say(format!("{error}: {reason}"));
    }

    pub fn is_fatal(&self) -> bool {
        self.fatal.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_names_are_kafkas() {
        assert!(valid_topic(b"logs-2026.11_a"));
        for bad in [
            &b""[..],
            b".",
            b"..",
            b"a b",
            b"a/b",
            b"caf\xc3\xa9",
            &[b'a'; 250],
        ] {
            assert!(!valid_topic(bad), "{bad:?}");
        }
    }
}
