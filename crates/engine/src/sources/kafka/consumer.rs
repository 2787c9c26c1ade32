//! `kafka()`: records of Kafka topics, read as a member of a consumer group, each offset
//! committed only once every destination of the path delivered its record.
//!
//! A thread of the source's own polls a librdkafka consumer (the `rdkafka` crate; its poll
//! blocks) and hands batches of records on; the source's task parses each record's value as
//! the source's `format()` says into a message carrying `.kafka.topic`, `.kafka.partition`,
//! `.kafka.offset` and `.kafka.key`, and dispatches them — or, with `workers(N)` past 2, N − 1
//! tasks do in parallel (one queue, or `separated-worker-queues(yes)` one each, dealt to in
//! turn), as syslog-ng's worker 0 fetches and the others process. A full window stops the
//! tasks, a full channel the thread: topics are read no faster than destinations write.
//! With several workers, batches may reach destinations out of the order they were read;
//! their offsets are still stored in that order.
//!
//! Offsets: librdkafka stores no offset by itself (`enable.auto.offset.store=false`). Each
//! batch's acknowledgement comes back when every destination wrote its messages (as on a
//! flow-controlled path, whatever the path's flags); the last offset of each partition in it
//! is then stored, in order, and librdkafka commits what is stored every
//! `auto.commit.interval.ms` (one second unless `config()` says otherwise) and when the
//! consumer leaves its group. A `kill -9` repeats what was read after the last commit; it
//! loses nothing. A partition taken away by a rebalance while its records are in flight is
//! read again by its new owner: duplicates, never a gap.
//!
//! Topics: `topic("logs")` (or `"logs" => "-1"`, or a `^regex`) subscribes, and the group
//! shares the topics' partitions among its members; `topic("logs" => "0,1")` reads those
//! partitions only, still committing under the group.

use crate::kafka::Said;
use crate::own_log as log;
use crate::sources::{Context, Local, Retire};
use crate::window::Delivered;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, Rebalance, RebalanceProtocol};
use rdkafka::error::KafkaError;
use rdkafka::types::RDKafkaRespErr;
use rdkafka::{Message, Offset, TopicPartitionList};
use sluice_model::values::{name_id, NameId};
use sluice_model::{Ingest, LogMessage, Origin, Today, UnixTime};
use sluice_protocol::Text;
use std::collections::HashSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, watch};

/// The kind of place a Kafka source reads.
pub const KIND: &str = "kafka";

/// What sluice sets unless `config()` says otherwise: a new group reads what the topics
/// hold, and what is delivered is committed within a second.
const DEFAULTS: &[(&str, &str)] = &[
    ("auto.offset.reset", "earliest"),
    ("auto.commit.interval.ms", "1000"),
];

/// What is sluice's alone: where the brokers are, and that offsets are stored only after
/// delivery and committed by librdkafka.
pub const OURS: &[&str] = &[
    "bootstrap.servers",
    "metadata.broker.list",
    "enable.auto.offset.store",
    "enable.auto.commit",
    "auto.commit.enable",
];

/// The most records in a batch.
const BATCH: usize = 1024;

/// What a `kafka()` source reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Topics {
    /// Topic names and `^regex` patterns, shared among the group's members.
    Subscribe(Vec<String>),
    /// These partitions of these topics.
    Assign(Vec<(String, i32)>),
}

#[derive(Debug)]
pub struct KafkaSource {
    /// How its records are parsed and counted.
    pub local: Local,
    /// `bootstrap-servers()`.
    pub bootstrap_servers: String,
    pub topics: Topics,
    /// `group.id`: from `config()`, else `sluice-<source name>`.
    pub group_id: String,
    /// `config()`: librdkafka properties, over [`DEFAULTS`].
    pub config: Vec<(String, String)>,
    /// `poll-timeout()`: the longest one poll waits for records.
    pub poll_timeout: Duration,
    /// `kafka-logging()`: what of librdkafka's own log reaches sluice's.
    pub logging: crate::kafka::KafkaLogging,
    /// `store-metadata()`: messages carry `.kafka.topic` and the rest (yes).
    pub store_metadata: bool,
    /// `disable-bookmarks(yes)`: no offset is stored, so none is committed: the group's
    /// next member starts where `auto.offset.reset` says, or at the last commit before.
    pub disable_bookmarks: bool,
    /// `ignore-saved-bookmarks(yes)`: each partition starts where `auto.offset.reset` says,
    /// not at the group's committed offset, the first time it is given after a start.
    pub ignore_saved_bookmarks: bool,
    /// `workers()`, less the reading thread, and `separated-worker-queues()`: the tasks that
    /// parse and dispatch its batches.
    pub workers: crate::sources::Workers,
}

impl KafkaSource {
    /// librdkafka's configuration: [`DEFAULTS`], `config()`, then what is sluice's.
    pub fn client_config(&self) -> ClientConfig {
        let mut c = ClientConfig::new();
        for (k, v) in DEFAULTS {
            c.set(*k, *v);
        }
        for (k, v) in &self.config {
            c.set(k, v);
        }
        c.set("bootstrap.servers", &self.bootstrap_servers)
            .set("group.id", &self.group_id)
            .set("enable.auto.offset.store", "false")
            .set("enable.auto.commit", "true");
        c
    }

    fn label(&self) -> Arc<str> {
        format!("source {}: kafka()", self.local.source_name).into()
    }

    /// Makes the consumer; it joins its group when it subscribes.
    pub fn consumer(&self) -> Result<BaseConsumer<Consuming>, KafkaError> {
        let config = self.client_config();
        // Where `auto.offset.reset` (of `config()`, else sluice's default) starts a partition.
        let reset = match config.get("auto.offset.reset") {
            Some("latest" | "largest" | "end") => Offset::End,
            _ => Offset::Beginning,
        };
        config.create_with_context(Consuming {
            said: Said::new(self.label(), self.logging),
            ignore_saved: self
                .ignore_saved_bookmarks
                .then(|| (reset, Mutex::default())),
        })
    }
}

impl crate::sources::Source for KafkaSource {
    fn source_name(&self) -> &Arc<str> {
        &self.local.source_name
    }

    fn place(&self) -> crate::sources::Place {
        crate::sources::Place {
            kind: KIND,
            address: format!(
                "{}/{}/{:?}",
                self.bootstrap_servers, self.group_id, self.topics
            ),
        }
    }

    /// Makes the consumer (its properties were checked when the configuration was read).
    fn bind(
        self: Arc<Self>,
        _: Option<crate::sources::Held>,
    ) -> std::io::Result<Box<dyn crate::sources::Ready>> {
        let consumer = self
            .consumer()
            .map_err(|e| std::io::Error::other(format!("kafka(): librdkafka: {e}")))?;
        Ok(Box::new(Ready {
            source: self,
            consumer,
        }))
    }

    fn reader(&self) -> Option<&crate::sources::ReaderSpec> {
        Some(&self.local.reader)
    }

    fn descriptors(&self) -> usize {
        // A connection to each broker, and librdkafka's wake-up pipes.
        16
    }
}

/// A consumer's context: what librdkafka says goes to sluice's log, and so do the
/// partitions a rebalance gives and takes.
pub struct Consuming {
    said: Said,
    /// `ignore-saved-bookmarks(yes)`: where a partition given for the first time since the
    /// start is read from instead of the group's committed offset (`auto.offset.reset`'s
    /// end), and the partitions given so far.
    ignore_saved: Option<(Offset, Mutex<Given>)>,
}

/// Partitions given to a consumer so far: `(topic, partition)`.
type Given = HashSet<(String, i32)>;

impl Consuming {
    /// With `ignore-saved-bookmarks(yes)`, sets the start of each partition in `list` given
    /// for the first time to `auto.offset.reset`'s end.
    fn ignore_saved(&self, list: &mut TopicPartitionList) {
        let Some((from, seen)) = &self.ignore_saved else {
            return;
        };
        let mut seen = seen.lock().expect("partitions lock");
        let given: Vec<(String, i32)> = list
            .elements()
            .iter()
            .map(|e| (e.topic().to_string(), e.partition()))
            .filter(|place| seen.insert(place.clone()))
            .collect();
        for (topic, partition) in given {
            // A topic and partition of the list itself: this cannot fail.
            let _ = list.set_partition_offset(&topic, partition, *from);
        }
    }

    fn said_rebalance(&self, rebalance: &Rebalance<'_>) {
        let list = |l: &TopicPartitionList| {
            l.elements()
                .iter()
                .map(|e| format!("{}[{}]", e.topic(), e.partition()))
                .collect::<Vec<_>>()
                .join(" ")
        };
        match rebalance {
            Rebalance::Assign(l) => log::info(format!("{}: reading {}", self.said.label, list(l))),
            Rebalance::Revoke(l) => log::info(format!(
                "{}: no longer reading {}",
                self.said.label,
                list(l)
            )),
            Rebalance::Error(e) => self.said.say(format!("rebalancing failed: {e}")),
        }
    }
}

crate::kafka::client_context_says!(Consuming);

impl ConsumerContext for Consuming {
    /// rdkafka's own handling (take what is given, let go of what is taken away, by the
    /// group's protocol), with the start of newly given partitions set first when the saved
    /// offsets are to be ignored.
    fn rebalance(
        &self,
        consumer: &BaseConsumer<Self>,
        err: RDKafkaRespErr,
        list: &mut TopicPartitionList,
    ) {
        let cooperative = matches!(
            consumer.rebalance_protocol(),
            RebalanceProtocol::Cooperative
        );
        let done = match err {
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS => {
                self.ignore_saved(list);
                let done = if cooperative {
                    consumer.incremental_assign(list)
                } else {
                    consumer.assign(list)
                };
                self.said_rebalance(&Rebalance::Assign(list));
                done
            }
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS => {
                let done = if cooperative {
                    consumer.incremental_unassign(list)
                } else {
                    consumer.unassign()
                };
                self.said_rebalance(&Rebalance::Revoke(list));
                done
            }
            other => {
                let code: rdkafka::error::RDKafkaErrorCode = other.into();
                self.said_rebalance(&Rebalance::Error(KafkaError::Rebalance(code)));
                consumer.unassign()
            }
        };
        if let Err(e) = done {
            self.said.say(format!("rebalancing failed: {e}"));
        }
    }
}

struct Ready {
    source: Arc<KafkaSource>,
    consumer: BaseConsumer<Consuming>,
}

impl crate::sources::Ready for Ready {
    fn run(
        self: Box<Self>,
        ctx: Context,
        retire: watch::Receiver<Retire>,
    ) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        Box::pin(async move {
            let (reading, watcher) = crate::sources::until_retired(&ctx, retire);
            self.source.clone().serve(self.consumer, &reading).await;
            watcher.abort();
        })
    }
}

/// Records read together.
#[derive(Default)]
struct Batch {
    /// Each record's value, one after another.
    values: Vec<u8>,
    records: Vec<Record>,
    /// The topics of the records.
    topics: Vec<Arc<[u8]>>,
    /// The last offset of each partition in the batch: `(topic, partition, offset)`.
    last: Vec<(usize, i32, i64)>,
    /// Each partition's number as its messages' `.kafka.partition`, shared by them.
    partitions: Vec<(i32, Arc<[u8]>)>,
    /// `store-metadata()`: the messages carry their record's place as pairs.
    metadata: bool,
}

/// One record of a [`Batch`].
struct Record {
    /// Where its value ends in `values`.
    end: usize,
    topic: usize,
    partition: i32,
    offset: i64,
    /// Shared by its message's `.kafka.key`.
    key: Option<Arc<[u8]>>,
}

impl Batch {
    /// Adds record `m`, cut to `log-msg-size()` and made UTF-8 from `encoding()`, as the
    /// readers of streams do.
    fn push(&mut self, m: &impl Message, spec: &crate::sources::ReaderSpec) {
        let counted = &spec.counted;
        let log_msg_size = spec.log_msg_size;
        let topic = m.topic().as_bytes();
        let t = match self.topics.iter().position(|t| **t == *topic) {
            Some(t) => t,
            None => {
                self.topics.push(Arc::from(topic));
                self.topics.len() - 1
            }
        };
        let (partition, offset) = (m.partition(), m.offset());
        match self
            .last
            .iter_mut()
            .find(|(lt, lp, _)| *lt == t && *lp == partition)
        {
            Some(last) => last.2 = offset,
            None => self.last.push((t, partition, offset)),
        }
        if !self.partitions.iter().any(|(p, _)| *p == partition) {
            let number = partition.to_string();
            self.partitions
                .push((partition, Arc::from(number.as_bytes())));
        }
        let value = m.payload().unwrap_or_default();
        if value.is_empty() {
            // A tombstone, or an empty record: nothing to log, but its offset is passed.
            counted
                .empty
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            return;
        }
        let value = if value.len() > log_msg_size {
            counted
                .oversized
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            &value[..log_msg_size]
        } else {
            value
        };
        match spec.encoding {
            Some(charset) => self
                .values
                .extend_from_slice(&crate::encoding::message(value, charset)),
            None => self.values.extend_from_slice(value),
        }
        self.records.push(Record {
            end: self.values.len(),
            topic: t,
            partition,
            offset,
            key: m.key().map(Arc::from),
        });
    }

    /// The offsets to store once the batch is delivered: the next one to read of each
    /// partition.
    fn offsets(&self) -> TopicPartitionList {
        let mut list = TopicPartitionList::with_capacity(self.last.len());
        for &(t, partition, offset) in &self.last {
            let topic = String::from_utf8_lossy(&self.topics[t]);
            // Topic names are ASCII, and a list takes any partition: this cannot fail.
            let _ = list.add_partition_offset(&topic, partition, Offset::Offset(offset + 1));
        }
        list
    }
}

impl crate::sources::ThreadBatch for Batch {
    type Place = TopicPartitionList;

    fn len(&self) -> usize {
        self.records.len()
    }

    /// Each record's value parsed, with its place as pairs.
    fn messages<'a>(
        &'a self,
        _: &crate::sources::ReaderSpec,
        ingest: &Ingest,
        origin: &'a Origin,
        recvd: UnixTime,
        msgs: &mut Vec<LogMessage<'a>>,
    ) {
        let today = Today::of(recvd);
        let names = names();
        msgs.reserve(self.records.len());
        let mut start = 0;
        for r in &self.records {
            ingest.push_message(&self.values[start..r.end], origin, recvd, today, msgs);
            start = r.end;
            if !self.metadata {
                continue;
            }
            let msg = msgs.last_mut().expect("a message was pushed");
            msg.values
                .set(names.topic, Text::Shared(self.topics[r.topic].clone()));
            if let Some((_, number)) = self.partitions.iter().find(|(p, _)| *p == r.partition) {
                msg.values
                    .set(names.partition, Text::Shared(number.clone()));
            }
            // The offset's digits in one allocation, the message's own.
            let mut digits = [0u8; 20];
            let mut rest = &mut digits[..];
            let _ = std::io::Write::write_fmt(&mut rest, format_args!("{}", r.offset));
            let len = 20 - rest.len();
            msg.values.set(names.offset, Text::owned(&digits[..len]));
            if let Some(key) = &r.key {
                msg.values.set(names.key, Text::Shared(key.clone()));
            }
        }
    }

    /// The offsets to store: the next one to read of each partition.
    fn place(&self) -> TopicPartitionList {
        self.offsets()
    }
}

/// The names of a record's pairs.
struct Names {
    topic: NameId,
    partition: NameId,
    offset: NameId,
    key: NameId,
}

fn names() -> &'static Names {
    static NAMES: OnceLock<Names> = OnceLock::new();
    NAMES.get_or_init(|| Names {
        topic: name_id(".kafka.topic"),
        partition: name_id(".kafka.partition"),
        offset: name_id(".kafka.offset"),
        key: name_id(".kafka.key"),
    })
}

impl KafkaSource {
    /// Reads records until `ctx` stops; then waits for what was read to be delivered, stores
    /// its offsets, and leaves the group (committing them). A reload's new consumer waits
    /// for the old one to have left.
    async fn serve(self: Arc<Self>, consumer: BaseConsumer<Consuming>, ctx: &Context) {
        let turn = crate::sources::turn(&format!(
            "kafka:{}:{}",
            self.local.source_name, self.group_id
        ));
        let _turn = turn.lock().await;
        let label = self.label();
        if let Err(e) = self.start(&consumer) {
            log::error(format!("{label}: {e}"));
            return;
        }
        let consumer = Arc::new(consumer);
        let (batches_tx, mut batches) = mpsc::channel::<Batch>(1);
        let reader = self.clone();
        let polled = consumer.clone();
        let most = BATCH.min((self.local.reader.window as usize / 2).max(1));
        let thread = std::thread::Builder::new()
            .name("kafka".into())
            .spawn(move || reader.consume(&polled, most, &batches_tx));
        let thread = match thread {
            Ok(t) => t,
            Err(e) => {
                log::error(format!("{label}: {e}"));
                return;
            }
        };
        let (kept_tx, kept_rx) = mpsc::unbounded_channel();
        let keeper = tokio::spawn(keep_offsets(
            consumer.clone(),
            kept_rx,
            !self.disable_bookmarks,
        ));
        let window = self.local.reader.window();
        crate::sources::dispatch_batches(
            ctx,
            &self.local,
            "kafka()",
            &window,
            &mut batches,
            &kept_tx,
            self.workers,
        )
        .await;
        // The thread ends at its next poll or batch.
        drop(batches);
        drop(kept_tx);
        ctx.keep_last(&window, keeper).await;
        // Leaving the group commits the offsets stored; it waits for the broker.
        let left = tokio::task::spawn_blocking(move || {
            let _ = thread.join();
            drop(consumer);
        });
        let _ = left.await;
    }

    /// Subscribes to the topics, or takes the partitions given.
    fn start(&self, consumer: &BaseConsumer<Consuming>) -> Result<(), KafkaError> {
        match &self.topics {
            Topics::Subscribe(topics) => {
                let topics: Vec<&str> = topics.iter().map(String::as_str).collect();
                consumer.subscribe(&topics)
            }
            Topics::Assign(partitions) => {
                let mut list = TopicPartitionList::new();
                for (topic, partition) in partitions {
                    // From the group's committed offset (else `auto.offset.reset`).
                    list.add_partition_offset(topic, *partition, Offset::Stored)?;
                }
                consumer.context().ignore_saved(&mut list);
                consumer.assign(&list)
            }
        }
    }

    /// Polls records into batches of at most `most` and sends them, until `batches` closes.
    fn consume(
        &self,
        consumer: &BaseConsumer<Consuming>,
        most: usize,
        batches: &mpsc::Sender<Batch>,
    ) {
        let spec = &self.local.reader;
        while !batches.is_closed() {
            let mut batch = Batch {
                metadata: self.store_metadata,
                ..Batch::default()
            };
            let mut wait = self.poll_timeout;
            for _ in 0..most {
                match consumer.poll(wait) {
                    Some(Ok(m)) => batch.push(&m, spec),
                    Some(Err(e)) => {
                        consumer.context().said.say(format!("reading: {e}"));
                        break;
                    }
                    None => break,
                }
                wait = Duration::ZERO;
            }
            if batch.last.is_empty() {
                continue;
            }
            if batches.blocking_send(batch).is_err() {
                return;
            }
        }
    }
}

/// Stores each batch's offsets once it is delivered, in order, and only then gives the
/// batch's credits back. A batch that was not delivered (lost at a stop) ends the storing:
/// the group's next member repeats from the last offsets committed.
/// Without `store` (`disable-bookmarks(yes)`), only the credits.
async fn keep_offsets(
    consumer: Arc<BaseConsumer<Consuming>>,
    mut kept: mpsc::UnboundedReceiver<(TopicPartitionList, oneshot::Receiver<Delivered>)>,
    store: bool,
) {
    while let Some((offsets, done)) = kept.recv().await {
        let Ok(credits) = done.await else {
            return;
        };
        // A partition a rebalance took away is refused: its new owner reads it again.
        if store {
            let _ = consumer.store_offsets(&offsets);
        }
        drop(credits);
    }
}
