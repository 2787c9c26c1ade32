//! `kafka-c()`: messages as Kafka records, produced through librdkafka (the `rdkafka` crate)
//! as syslog-ng's `kafka-c()` produces them — a `topic()`, a `key()` and a `message()`
//! template per record.
//!
//! Readers format each message into a record ([`push_record`]: its topic, key and value, one
//! after another in the batch) and queue it in one of `workers()` lanes; each lane's sender
//! ([`crate::destinations::sender`]) holds a [`Producing`] wire: a librdkafka producer of its own, which
//! keeps its connections to the brokers itself. A wire produces what the sender took, then
//! polls until every record has its delivery report: delivered, or refused for good (a topic
//! the broker does not have goes to `fallback-topic()` once; without one, or refused again,
//! the record is dropped and counted). Only then does the sender drop the batches' Acks, so a
//! flow-controlled path acknowledges its source once the broker did.
//!
//! Records of one topic go to librdkafka a run at a time (at most [`RUN_MOST`]). A run with
//! keys is partitioned by librdkafka record by record; a keyless run goes whole to the
//! partition librdkafka's sticky partitioner chose for the one keyless record that asked
//! ([`Sticky`]).
//!
//! The producer is idempotent (`enable.idempotence`, hence `acks=all`), and records wait in
//! librdkafka for as long as the brokers are away (`message.timeout.ms=0`): librdkafka's own
//! retries never duplicate, and nothing times out into a drop. `config()` passes any other
//! librdkafka property, and may override these.

use crate::destinations::delivery::{Delivered, Delivers, Delivery, Lanes};
use crate::destinations::diskq::DiskBufferOptions;
use crate::destinations::format::Formatter;
use crate::destinations::link::{stalled, Connected, Failure, GiveUp, Position, Wire};
use crate::destinations::queue::Batch;
use crate::destinations::sender::{Pacing, Servers, MAX_GATHER};
use crate::kafka::{valid_topic, Said};
use crate::stats::DestCounters;
use rdkafka::bindings as rdsys;
use rdkafka::config::{ClientConfig, NativeClientConfig};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseRecord, DeliveryResult, Producer, ProducerContext, ThreadedProducer};
use rdkafka::types::RDKafkaRespErr;
use rdkafka::Message;
use sluice_model::LogMessage;
use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::ffi::{c_void, CString};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// What sluice sets unless `config()` says otherwise.
const DEFAULTS: &[(&str, &str)] = &[
    ("enable.idempotence", "true"),
    ("message.timeout.ms", "0"),
    // Delivery reports carry no copy of the payload back.
    ("delivery.report.only.error", "false"),
    // librdkafka waits 5 ms for more records before it sends a partial batch; 50 ms fills
    // more of each request: a third less CPU per record here and less for the broker too
    // (docs/performance.md), and log records can wait that long.
    ("linger.ms", "50"),
];

/// How long a wire waiting for delivery reports, or for room in librdkafka's queue, sleeps
/// at most before it looks at the sender's stop. Reports wake it as they come: a producer's
/// own thread (rdkafka's `ThreadedProducer`) serves them. (Polling in the wire itself was
/// slow: rdkafka's `BaseProducer::poll` serves reports until its timeout has passed, and
/// spins through its last millisecond.)
const POLL: Duration = Duration::from_millis(100);

/// The options of a `kafka-c()` destination that its wires share.
#[derive(Debug)]
pub struct KafkaOptions {
    /// How sluice's messages name the destination.
    pub label: Arc<str>,
    pub bootstrap_servers: String,
    /// `config()`: librdkafka properties, over [`DEFAULTS`].
    pub config: Vec<(String, String)>,
    /// `fallback-topic()`: where a record goes whose topic the broker refuses.
    pub fallback_topic: Option<String>,
    /// `sync-send(yes)`: one record at a time, each waiting for its report.
    pub sync_send: bool,
    /// `poll-timeout()`: the longest one poll for delivery reports waits.
    pub poll_timeout: Duration,
    /// `flush-timeout-on-shutdown()`: how long a stopping sluice waits for the brokers to
    /// take what it holds, from the stop (60 s, as syslog-ng).
    pub flush_timeout_on_shutdown: Duration,
    /// `flush-timeout-on-reload()`: how long a reload waits for them before the new
    /// destination takes the records over and produces them again (1 s, as syslog-ng).
    pub flush_timeout_on_reload: Duration,
    /// `kafka-logging()`: what of librdkafka's own log reaches sluice's.
    pub logging: crate::kafka::KafkaLogging,
}

/// The most a sender hands librdkafka at once, for a producer configured as `conf` says.
/// An idempotent producer keeps at most five requests (each at most `batch.size`, and
/// `message.max.bytes`) in flight to a partition; with more records ready its broker thread
/// wakes over and over without sending (`perf` of a `bench/kafka.py` round with 4 MiB sends:
/// the clock and `poll` at the top of that thread). Two sends of two requests' worth, with
/// their tails, stay within the five.
fn send_size(conf: &NativeClientConfig) -> usize {
    if conf.get("enable.idempotence").ok().as_deref() != Some("true") {
        return MAX_GATHER;
    }
    let number = |key| conf.get(key).ok().and_then(|v| v.parse::<usize>().ok());
    let request = number("batch.size")
        .unwrap_or(1_000_000)
        .min(number("message.max.bytes").unwrap_or(1_000_000));
    (2 * request).clamp(64 << 10, MAX_GATHER)
}

/// Appends one record to `batch`: its topic (a u16 length first), its key (a u32 length, or
/// `u32::MAX` for none) and its value (the rest, up to the message's end), which `value`
/// writes in place.
pub fn push_record(
    batch: &mut Batch,
    topic: &[u8],
    key: Option<&[u8]>,
    value: impl FnOnce(&mut Vec<u8>),
) {
    let topic = &topic[..topic.len().min(u16::MAX as usize)];
    batch
        .data
        .extend_from_slice(&(topic.len() as u16).to_le_bytes());
    batch.data.extend_from_slice(topic);
    match key {
        Some(k) => {
            batch
                .data
                .extend_from_slice(&(k.len() as u32).to_le_bytes());
            batch.data.extend_from_slice(k);
        }
        None => batch.data.extend_from_slice(&u32::MAX.to_le_bytes()),
    }
    value(&mut batch.data);
    batch.end_message();
}

/// A record as [`push_record`] put it in a batch.
#[derive(Clone, Copy)]
struct Record<'a> {
    topic: &'a [u8],
    key: Option<&'a [u8]>,
    value: &'a [u8],
}

impl<'a> Record<'a> {
    fn read(bytes: &'a [u8]) -> Option<Record<'a>> {
        let (len, rest) = bytes.split_first_chunk::<2>()?;
        let (topic, rest) = rest.split_at_checked(u16::from_le_bytes(*len) as usize)?;
        let (len, rest) = rest.split_first_chunk::<4>()?;
        let (key, value) = match u32::from_le_bytes(*len) {
            u32::MAX => (None, rest),
            n => {
                let (k, v) = rest.split_at_checked(n as usize)?;
                (Some(k), v)
            }
        };
        Some(Record { topic, key, value })
    }
}

/// One producer's delivery reports, and what it says of itself. A report is counted, by the
/// send its record belongs to; only a refusal is kept, with its record. The wire is woken when
/// the send it waits for has all its reports, or a refusal comes — not at every report (a
/// wake-up is a system call).
struct Reports {
    /// Reports that came, by send: send `n` counts in slot `n % SLOTS`, emptied when the send
    /// is handed over. Two sends are in flight at most, so a slot is settled before it is used
    /// again.
    reported: [AtomicU64; SLOTS],
    /// The slot the waiting wire waits on, and the count it waits for (`u64::MAX`: none).
    awaited_slot: AtomicUsize,
    awaited: AtomicU64,
    /// Refused records, `(opaque, error)`, as they came: pushed before they are counted.
    refused: Mutex<Vec<(usize, KafkaError)>>,
    /// The partitions librdkafka chose for the records that asked ([`ASK`]), `(opaque,
    /// partition)`, as they came.
    chosen: Mutex<Vec<(usize, i32)>>,
    wake: Mutex<()>,
    arrived: Condvar,
    said: Said,
}

/// The slots of [`Reports::reported`].
const SLOTS: usize = 4;

impl Reports {
    fn new(said: Said) -> Reports {
        Reports {
            reported: Default::default(),
            awaited_slot: AtomicUsize::new(0),
            awaited: AtomicU64::new(u64::MAX),
            refused: Mutex::default(),
            chosen: Mutex::default(),
            wake: Mutex::new(()),
            arrived: Condvar::new(),
            said,
        }
    }

    fn slot(send: u32) -> usize {
        send as usize % SLOTS
    }

    /// The reports of send `send` so far.
    fn reported(&self, send: u32) -> u64 {
        self.reported[Self::slot(send)].load(Ordering::SeqCst)
    }

    /// Send `send` starts: none of its reports came yet.
    fn start(&self, send: u32) {
        self.reported[Self::slot(send)].store(0, Ordering::SeqCst);
    }

    /// Waits at most `at_most` until send `send` has `count` reports, or a refusal came.
    fn wait_for(&self, send: u32, count: u64, at_most: Duration) {
        let woken = self.wake.lock().expect("reports lock");
        self.awaited_slot.store(Self::slot(send), Ordering::SeqCst);
        self.awaited.store(count, Ordering::SeqCst);
        let refused = !self.refused.lock().expect("refusals lock").is_empty();
        let woken = if self.reported(send) < count && !refused {
            self.arrived
                .wait_timeout(woken, at_most)
                .expect("reports lock")
                .0
        } else {
            woken
        };
        self.awaited.store(u64::MAX, Ordering::SeqCst);
        drop(woken);
    }

    /// The refusals that came since the last call.
    fn refusals(&self) -> Vec<(usize, KafkaError)> {
        std::mem::take(&mut *self.refused.lock().expect("refusals lock"))
    }

    /// The partitions chosen for records that asked, since the last call.
    fn chosen(&self) -> Vec<(usize, i32)> {
        std::mem::take(&mut *self.chosen.lock().expect("partitions lock"))
    }
}

crate::kafka::client_context_says!(Reports);

impl ProducerContext for Reports {
    type DeliveryOpaque = usize;

    fn delivery(&self, result: &DeliveryResult<'_>, record: usize) {
        let (asked, record) = (record & ASK != 0, record & !ASK);
        let refused = match result {
            Ok(m) => {
                if asked {
                    let partition = m.partition();
                    self.chosen
                        .lock()
                        .expect("partitions lock")
                        .push((record, partition));
                }
                false
            }
            Err((e, _)) => {
                self.refused
                    .lock()
                    .expect("refusals lock")
                    .push((record, e.clone()));
                true
            }
        };
        let slot = Self::slot((record >> 32) as u32);
        let count = self.reported[slot].fetch_add(1, Ordering::SeqCst) + 1;
        if refused
            || (slot == self.awaited_slot.load(Ordering::SeqCst)
                && count >= self.awaited.load(Ordering::SeqCst))
        {
            let _woken = self.wake.lock().expect("reports lock");
            self.arrived.notify_all();
        }
    }
}

thread_local! {
    /// One message's topic and key, as their templates make them.
    static TOPIC_AND_KEY: RefCell<(Vec<u8>, Vec<u8>)> = RefCell::default();
}

/// A `kafka-c()` destination: its templates, and the lanes its records go out through.
pub struct KafkaDestination {
    topic: Formatter,
    key: Option<Formatter>,
    message: Formatter,
    /// `worker-partition-key()`: messages with the same key go to the same lane, in order.
    partition_key: Option<Formatter>,
    delivery: Delivery,
}

/// How a `kafka-c()` formats its records.
pub struct KafkaTemplates {
    pub topic: Formatter,
    pub key: Option<Formatter>,
    pub message: Formatter,
    pub partition_key: Option<Formatter>,
}

/// How a `kafka-c()` queues and paces its records.
pub(super) struct KafkaQueueing {
    pub(super) workers: usize,
    pub(super) pacing: Pacing,
    pub(super) disk_buffer: Option<(DiskBufferOptions, String)>,
}

impl KafkaDestination {
    pub(super) fn new(
        templates: KafkaTemplates,
        opts: KafkaOptions,
        queueing: KafkaQueueing,
        counters: DestCounters,
    ) -> Delivered<KafkaDestination> {
        let delivery = Delivery::new(
            opts.label.clone(),
            Arc::new(opts),
            queueing.pacing,
            counters,
            queueing.disk_buffer,
            queueing.workers,
        );
        Delivered(KafkaDestination {
            topic: templates.topic,
            key: templates.key,
            message: templates.message,
            partition_key: templates.partition_key,
            delivery,
        })
    }
}

impl Delivers for KafkaDestination {
    fn delivery(&self) -> &Delivery {
        &self.delivery
    }

    /// The message template's size hint learns whole records (topic and key too): it serves
    /// only here.
    fn sized_by(&self) -> &Formatter {
        &self.message
    }

    fn partition_key(&self) -> Option<&Formatter> {
        self.partition_key.as_ref()
    }

    fn numbers_local(&self) -> bool {
        self.message.numbers_local()
            || self.topic.numbers_local()
            || self.key.as_ref().is_some_and(Formatter::numbers_local)
    }

    fn format(&self, msgs: &[LogMessage], which: &[u32], lanes: &mut Lanes) {
        TOPIC_AND_KEY.with_borrow_mut(|(topic, key)| {
            for &i in which {
                let msg = &msgs[i as usize];
                topic.clear();
                self.topic.append(msg, topic);
                key.clear();
                if let Some(k) = &self.key {
                    k.append(msg, key);
                }
                let k = self.key.as_ref().map(|_| &key[..]);
                push_record(lanes.batch_for(msg), topic, k, |value| {
                    self.message.append(msg, value)
                });
            }
        });
    }
}

/// The one "server" of a `kafka-c()`: the cluster its bootstrap servers lead to.
impl Servers for KafkaOptions {
    fn connect_at_start(&self) -> bool {
        true
    }

    /// [`send_size`] of the configuration, as librdkafka reads it (checked when the
    /// destination was built).
    fn gather(&self) -> usize {
        self.client_config()
            .create_native_config()
            .map_or(MAX_GATHER, |conf| send_size(&conf))
    }

    fn count(&self) -> usize {
        1
    }

    fn name(&self, _: usize) -> String {
        format!("kafka:{}", self.bootstrap_servers)
    }

    /// Makes a producer; it connects in the background, and its records wait until it has.
    fn open(&self, _: usize) -> std::io::Result<Connected> {
        let reports = Reports::new(Said::new(self.label.clone(), self.logging));
        let producer: ThreadedProducer<Reports> = self
            .client_config()
            .create_with_context(reports)
            .map_err(|e| std::io::Error::other(format!("librdkafka: {e}")))?;
        Ok(Box::new(Producing {
            topics: TopicHandles::default(),
            stickiness: stickiness(producer.client().native_ptr()),
            producer,
            fallback_topic: self.fallback_topic.clone(),
            sync_send: self.sync_send,
            poll_timeout: self.poll_timeout,
            flush_timeout_on_shutdown: self.flush_timeout_on_shutdown,
            flush_timeout_on_reload: self.flush_timeout_on_reload,
            send: 0,
            handed: VecDeque::new(),
            later: Vec::new(),
        }))
    }

    fn probe(&self, _: usize) -> bool {
        false
    }
}

impl KafkaOptions {
    /// librdkafka's configuration: [`DEFAULTS`], then `bootstrap-servers()`, then `config()`.
    pub fn client_config(&self) -> ClientConfig {
        let mut c = ClientConfig::new();
        for (k, v) in DEFAULTS {
            c.set(*k, *v);
        }
        c.set("bootstrap.servers", &self.bootstrap_servers);
        for (k, v) in &self.config {
            c.set(k, v);
        }
        c
    }
}

/// A lane's producer: the wire of a `kafka-c()` sender.
struct Producing {
    /// Before the producer, so dropped before it.
    topics: TopicHandles,
    /// How long keyless runs go to the partition librdkafka chose for one ([`Sticky`]).
    stickiness: Duration,
    producer: ThreadedProducer<Reports>,
    fallback_topic: Option<String>,
    sync_send: bool,
    poll_timeout: Duration,
    flush_timeout_on_shutdown: Duration,
    flush_timeout_on_reload: Duration,
    /// The number of the last send; in each record's opaque beside its place in the send.
    send: u32,
    /// Sends handed over and not settled yet, oldest first.
    handed: VecDeque<Handed>,
    /// Refusals of records of a send handed over that is not the one being settled.
    later: Vec<(usize, KafkaError)>,
}

/// The most records handed to librdkafka in one call. A send is 2 MB of records, which the
/// readers wrote on other cores: librdkafka copies each record while it is still in this
/// core's cache when a run is this short (`perf` of a warm round: the first read of each
/// record was half of `hand_over_records`' samples, the copy of its payload more).
const RUN_MOST: usize = 256;

/// How many records ahead of the one being read a sender asks the CPU for.
const PREFETCH_AHEAD: usize = 8;

/// `RD_KAFKA_PARTITION_UA`: the partitioner picks (a macro in C, not in the bindings).
const PARTITION_UNASSIGNED: i32 = -1;

/// librdkafka's handles of the topics a wire produces to, by name, each with where its
/// keyless records go; at most [`TopicHandles::MOST`] (topics come from a template), all let
/// go when more are wanted.
#[derive(Default)]
struct TopicHandles {
    by_name: HashMap<Vec<u8>, TopicHandle>,
}

/// One `rd_kafka_topic_t` reference, given back when dropped.
struct TopicHandle {
    rkt: *mut rdsys::rd_kafka_topic_t,
    sticky: Sticky,
}

// SAFETY: librdkafka's topic handles may be used and destroyed from any thread.
unsafe impl Send for TopicHandle {}

impl Drop for TopicHandle {
    fn drop(&mut self) {
        // SAFETY: made by `rd_kafka_topic_new`, given back once; the producer outlives it
        // (`Producing` drops its handles before its producer).
        unsafe { rdsys::rd_kafka_topic_destroy(self.rkt) }
    }
}

impl TopicHandles {
    const MOST: usize = 1000;

    /// The handle of `topic` (a valid topic name), made on first use; `None` when librdkafka
    /// makes none.
    fn handle(
        &mut self,
        client: *mut rdsys::rd_kafka_t,
        topic: &[u8],
    ) -> Option<*mut rdsys::rd_kafka_topic_t> {
        if let Some(h) = self.by_name.get(topic) {
            return Some(h.rkt);
        }
        if self.by_name.len() >= Self::MOST {
            self.by_name.clear();
        }
        let name = CString::new(topic).ok()?;
        // SAFETY: `client` is a live producer; a null configuration takes the defaults.
        let rkt = unsafe { rdsys::rd_kafka_topic_new(client, name.as_ptr(), std::ptr::null_mut()) };
        if rkt.is_null() {
            return None;
        }
        let sticky = Sticky::default();
        self.by_name
            .insert(topic.to_vec(), TopicHandle { rkt, sticky });
        Some(rkt)
    }

    /// Where the keyless records of `topic` (a topic with a handle) go.
    fn sticky(&mut self, topic: &[u8]) -> &mut Sticky {
        &mut self.by_name.get_mut(topic).expect("a topic handle").sticky
    }

    /// Takes the partitions librdkafka chose for records that asked: each topic's runs go to
    /// its partition until `until`.
    fn answered(&mut self, chosen: Vec<(usize, i32)>, until: Instant) {
        for (record, partition) in chosen {
            for h in self.by_name.values_mut() {
                if h.sticky.answer(record, partition, until) {
                    break;
                }
            }
        }
    }
}

/// Where a topic's keyless records go. librdkafka's sticky partitioner sends them all to
/// one partition for `sticky.partitioning.linger.ms`, then to another; but it runs for every
/// record — the partition looked up, its lock taken to see that it has a leader, the clock
/// read: 40 % of the sender thread's CPU. So a wire lets it choose for one record only,
/// learns from that record's delivery report which partition it chose, and sends whole runs
/// there (librdkafka takes a run for one partition in one step) until the stickiness has
/// passed. Then one record asks again, alone, while the runs go on to the partition chosen
/// before until the answer comes (a report comes `linger.ms` later at the soonest): one ask
/// at a time, asked again only if its answer did not come within [`ASK_AGAIN`].
#[derive(Default, Debug)]
struct Sticky {
    /// The opaque of the record that asked where it went, and when it asked.
    asked: Option<(usize, Instant)>,
    /// The partition chosen for it, and until when runs go there.
    chosen: Option<(i32, Instant)>,
}

/// How long an ask waits for its answer before another record asks (a record that was
/// refused has no answer).
const ASK_AGAIN: Duration = Duration::from_secs(1);

impl Sticky {
    /// Where a run produced at `now` goes (`None`: librdkafka's partitioner chooses record by
    /// record), and whether one of its records is to ask librdkafka to choose anew.
    fn partition(&self, now: Instant) -> (Option<i32>, bool) {
        match self.chosen {
            Some((p, until)) if now < until => (Some(p), false),
            chosen => (
                chosen.map(|(p, _)| p),
                self.asked.is_none_or(|(_, at)| now >= at + ASK_AGAIN),
            ),
        }
    }

    /// Record `opaque`'s report is to say where it went.
    fn ask(&mut self, opaque: usize, now: Instant) {
        self.asked = Some((opaque, now));
    }

    /// The partition chosen for record `opaque`: taken when it is this topic's record that
    /// asked (runs go there until `until`); returns whether it was.
    fn answer(&mut self, opaque: usize, partition: i32, until: Instant) -> bool {
        if self.asked.map(|(o, _)| o) != Some(opaque) {
            return false;
        }
        self.asked = None;
        self.chosen = Some((partition, until));
        true
    }

    /// The partition chosen is not there any more (a topic made again with fewer):
    /// librdkafka chooses again.
    fn forget(&mut self) {
        self.chosen = None;
    }
}

/// librdkafka's `sticky.partitioning.linger.ms` as `client` has it (by default twice
/// `linger.ms`); zero when keyless records are to be spread record by record.
fn stickiness(client: *mut rdsys::rd_kafka_t) -> Duration {
    let mut value = [0 as std::ffi::c_char; 32];
    let mut size = value.len();
    // SAFETY: `client` is a live producer, its configuration lives as long; librdkafka
    // writes at most `size` bytes, a C string, into `value`.
    let read = unsafe {
        rdsys::rd_kafka_conf_get(
            rdsys::rd_kafka_conf(client),
            c"sticky.partitioning.linger.ms".as_ptr(),
            value.as_mut_ptr(),
            &mut size,
        )
    };
    if read != rdsys::rd_kafka_conf_res_t::RD_KAFKA_CONF_OK {
        return Duration::ZERO;
    }
    // SAFETY: a C string librdkafka wrote into `value`.
    let text = unsafe { std::ffi::CStr::from_ptr(value.as_ptr()) };
    text.to_str()
        .ok()
        .and_then(|ms| ms.parse().ok())
        .map_or(Duration::ZERO, Duration::from_millis)
}

/// A send handed over to librdkafka.
struct Handed {
    send: u32,
    fates: Vec<Fate>,
    /// Records produced for it (a record gone to `fallback-topic()` twice): when it has as
    /// many reports, every one of its records has one.
    produced: u64,
}

/// A record's opaque: its send, and its place in that send (below 2^31: the bit above is
/// [`ASK`]'s).
fn opaque(send: u32, n: usize) -> usize {
    ((send as usize) << 32) | (n & 0x7fff_ffff)
}

/// In a record's opaque: its report is to say which partition librdkafka chose for it.
const ASK: usize = 1 << 31;

/// The records of `batches` from `from` on, as [`push_record`] put them.
fn records_of(batches: &[Batch], from: Position) -> Vec<&[u8]> {
    let Some(rest) = batches.get(from.batch..) else {
        return Vec::new();
    };
    let mut records = Vec::with_capacity(rest.iter().map(Batch::len).sum());
    let mut first = from.message(batches);
    for b in rest {
        let mut start = b.start(first);
        for &end in &b.ends[first..] {
            records.push(&b.data[start..end as usize]);
            start = end as usize;
        }
        first = 0;
    }
    records
}

/// What became of one record of a send.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Fate {
    /// Not produced yet (`sync-send(yes)`).
    Unsent,
    Waiting,
    /// Produced to `fallback-topic()`, waiting.
    FallingBack,
    Delivered,
    Refused,
}

impl Wire for Producing {
    fn send(
        &mut self,
        batches: &[Batch],
        pos: &mut Position,
        give_up: GiveUp,
    ) -> Result<(), Failure> {
        pos.back_to_message_start(batches);
        let records = records_of(batches, *pos);
        // What an earlier send handed over and did not settle is the sender's to send again.
        self.handed.clear();
        let mut stall = None;
        self.hand_over_records(&records, give_up, &mut stall)?;
        let refused = self.settle_oldest(&records, give_up, &mut stall)?;
        pos.skip_messages(batches, records.len());
        pos.refused += refused;
        Ok(())
    }

    /// Produces the records and returns: librdkafka holds them while their reports come,
    /// and the sender takes its next batches meanwhile. Not with `sync-send(yes)`.
    fn hand_over(&mut self, batches: &[Batch], give_up: GiveUp) -> Result<bool, Failure> {
        if self.sync_send {
            return Ok(false);
        }
        let records = records_of(batches, Position::default());
        self.hand_over_records(&records, give_up, &mut None)?;
        Ok(true)
    }

    fn settle(
        &mut self,
        batches: &[Batch],
        pos: &mut Position,
        give_up: GiveUp,
    ) -> Result<(), Failure> {
        // The records themselves are wanted only to produce one again to `fallback-topic()`.
        let records = match self.fallback_topic {
            Some(_) => records_of(batches, Position::default()),
            None => Vec::new(),
        };
        let messages = self.handed.front().map_or(0, |h| h.fates.len());
        let refused = self.settle_oldest(&records, give_up, &mut None)?;
        pos.skip_messages(batches, messages);
        pos.refused += refused;
        Ok(())
    }

    /// A producer goes on through broker failures by itself; only a fatal error ends it.
    fn closed(&self) -> bool {
        self.producer.context().said.is_fatal()
    }
}

impl Producing {
    /// How long a sender giving up waits for the brokers to take records: a stop's or a
    /// reload's flush timeout.
    fn flush_timeout(&self) -> Duration {
        if crate::stopping::began() {
            self.flush_timeout_on_shutdown
        } else {
            self.flush_timeout_on_reload
        }
    }

    /// Produces `records` as a new send, which waits in [`Producing::handed`] to be settled;
    /// with `sync-send(yes)`, each record is settled before the next is produced.
    fn hand_over_records(
        &mut self,
        records: &[&[u8]],
        give_up: GiveUp,
        stall: &mut Option<Instant>,
    ) -> Result<(), Failure> {
        self.send = self.send.wrapping_add(1);
        self.producer.context().start(self.send);
        let mut handed = Handed {
            send: self.send,
            fates: vec![Fate::Unsent; records.len()],
            produced: 0,
        };
        if self.sync_send {
            for (n, bytes) in records.iter().enumerate() {
                self.produce(&mut handed, n, bytes, false, give_up, stall)?;
                self.wait(&mut handed, records, give_up, stall)?;
            }
        } else {
            // Runs of records for one topic go in one call, at most `RUN_MOST`; a record
            // whose topic is not a topic name (or that is damaged) is decided on its own.
            let mut run: Vec<Record> = Vec::with_capacity(RUN_MOST.min(records.len()));
            let mut first = 0;
            for (n, bytes) in records.iter().enumerate() {
                if let Some(ahead) = records.get(n + PREFETCH_AHEAD) {
                    for at in (0..ahead.len()).step_by(64) {
                        sluice_protocol::prefetch(ahead, at);
                    }
                }
                let record = Record::read(bytes).filter(|r| valid_topic(r.topic));
                if let Some(r) = record {
                    if run.len() < RUN_MOST && run.first().is_some_and(|f| f.topic == r.topic) {
                        run.push(r);
                        continue;
                    }
                }
                self.produce_run(&mut handed, first, &run, give_up, stall)?;
                run.clear();
                first = n;
                match record {
                    Some(r) => run.push(r),
                    None => {
                        self.produce(&mut handed, n, bytes, false, give_up, stall)?;
                        first = n + 1;
                    }
                }
            }
            self.produce_run(&mut handed, first, &run, give_up, stall)?;
        }
        self.handed.push_back(handed);
        Ok(())
    }

    /// Produces `run`, records of one topic numbered from `first` in `handed`, in one call
    /// to librdkafka (`rd_kafka_produce_batch`: the topic found, the clock read and the
    /// topic's lock taken once for the run, not per record as `producev` does), waiting
    /// while its queue is full.
    fn produce_run(
        &mut self,
        handed: &mut Handed,
        first: usize,
        run: &[Record],
        give_up: GiveUp,
        stall: &mut Option<Instant>,
    ) -> Result<(), Failure> {
        let Some(topic) = run.first().map(|r| r.topic) else {
            return Ok(());
        };
        let client = self.producer.client().native_ptr();
        let Some(rkt) = self.topics.handle(client, topic) else {
            let reports = self.producer.context();
            for n in first..first + run.len() {
                handed.fates[n] = Fate::Refused;
            }
            reports.said.say(format!(
                "librdkafka has no handle for topic '{}'; {} records dropped",
                String::from_utf8_lossy(topic),
                run.len()
            ));
            return Ok(());
        };
        // Keyless runs go to the partition librdkafka last chose for one (see [`Sticky`]).
        let keyless = !self.stickiness.is_zero() && run.iter().all(|r| r.key.is_none());
        if keyless {
            let chosen = self.producer.context().chosen();
            if !chosen.is_empty() {
                self.topics
                    .answered(chosen, Instant::now() + self.stickiness);
            }
        }
        let mut pending: Vec<usize> = (0..run.len()).collect();
        loop {
            let sticky = self.topics.sticky(topic);
            let now = Instant::now();
            let (partition, ask) = match keyless {
                true => sticky.partition(now),
                false => (None, false),
            };
            let mut messages: Vec<rdsys::rd_kafka_message_t> = pending
                .iter()
                .map(|&i| {
                    let r = &run[i];
                    let (key, key_len) = r.key.map_or((std::ptr::null_mut(), 0), |k| {
                        (k.as_ptr() as *mut c_void, k.len())
                    });
                    rdsys::rd_kafka_message_t {
                        err: RDKafkaRespErr::RD_KAFKA_RESP_ERR_NO_ERROR,
                        rkt: std::ptr::null_mut(),
                        partition: 0,
                        payload: r.value.as_ptr() as *mut c_void,
                        len: r.value.len(),
                        key,
                        key_len,
                        offset: 0,
                        _private: opaque(handed.send, first + i) as *mut c_void,
                    }
                })
                .collect();
            // The first record asks librdkafka to choose anew (see [`Sticky`]); it goes alone
            // when the rest of the run has a partition to go to.
            let mut alone = 0;
            if ask {
                let asking = opaque(handed.send, first + pending[0]);
                sticky.ask(asking, now);
                messages[0]._private = (asking | ASK) as *mut c_void;
                alone = usize::from(partition.is_some());
            }
            let (asking, rest) = messages.split_at_mut(alone);
            for (part, partition) in [(asking, None), (rest, partition)] {
                if part.is_empty() {
                    continue;
                }
                // SAFETY: `rkt` is a live handle of this producer's; every message points
                // into `run`, which outlives the call, and librdkafka copies what it keeps
                // (F_COPY); the count is the slice's length.
                unsafe {
                    rdsys::rd_kafka_produce_batch(
                        rkt,
                        partition.unwrap_or(PARTITION_UNASSIGNED),
                        rdsys::RD_KAFKA_MSG_F_COPY,
                        part.as_mut_ptr(),
                        part.len() as i32,
                    );
                }
            }
            let reports = self.producer.context();
            let (mut again, mut full, mut gone) = (Vec::new(), false, false);
            for (m, &i) in messages.iter().zip(&pending) {
                match m.err {
                    RDKafkaRespErr::RD_KAFKA_RESP_ERR_NO_ERROR => {
                        handed.produced += 1;
                        handed.fates[first + i] = Fate::Waiting;
                    }
                    RDKafkaRespErr::RD_KAFKA_RESP_ERR__QUEUE_FULL => {
                        full = true;
                        again.push(i);
                    }
                    RDKafkaRespErr::RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION if partition.is_some() => {
                        gone = true;
                        again.push(i);
                    }
                    e => refuse(
                        handed,
                        first + i,
                        &KafkaError::MessageProduction(e.into()),
                        &reports.said,
                    ),
                }
            }
            if again.is_empty() {
                return Ok(());
            }
            pending = again;
            if gone {
                self.topics.sticky(topic).forget();
            }
            if full {
                self.wait_for_room(handed, give_up, stall)?;
            }
        }
    }

    /// Waits until every record of the oldest send handed over has its report; returns how
    /// many were refused for good.
    fn settle_oldest(
        &mut self,
        records: &[&[u8]],
        give_up: GiveUp,
        stall: &mut Option<Instant>,
    ) -> Result<usize, Failure> {
        let mut handed = self.handed.pop_front().expect("a send was handed over");
        self.wait(&mut handed, records, give_up, stall)?;
        Ok(handed.fates.iter().filter(|f| **f == Fate::Refused).count())
    }

    /// Waits while librdkafka's queue is full: room comes with reports, of the oldest send
    /// handed over or of `handed`.
    fn wait_for_room(
        &self,
        handed: &Handed,
        give_up: GiveUp,
        stall: &mut Option<Instant>,
    ) -> Result<(), Failure> {
        let reports = self.producer.context();
        let oldest = self.handed.front().unwrap_or(handed);
        let (send, count) = (oldest.send, reports.reported(oldest.send) + 1);
        reports.wait_for(send, count, POLL.min(Duration::from_millis(10)));
        stalled(stall, give_up, self.flush_timeout())?;
        Ok(())
    }

    /// Produces record `n` of `handed` (to `fallback-topic()` when `fallback`), waiting while
    /// librdkafka's queue is full. A record it refuses at once is decided here.
    fn produce(
        &mut self,
        handed: &mut Handed,
        n: usize,
        bytes: &[u8],
        fallback: bool,
        give_up: GiveUp,
        stall: &mut Option<Instant>,
    ) -> Result<(), Failure> {
        let reports = self.producer.context();
        let Some(record) = Record::read(bytes) else {
            handed.fates[n] = Fate::Refused;
            reports
                .said
                .say("a record in the queue is damaged; dropped".into());
            return Ok(());
        };
        let topic = match (fallback, valid_topic(record.topic)) {
            (false, true) => std::str::from_utf8(record.topic).expect("topic names are ASCII"),
            (false, false) if self.fallback_topic.is_some() => {
                return self.produce(handed, n, bytes, true, give_up, stall);
            }
            (false, false) => {
                handed.fates[n] = Fate::Refused;
                reports.said.say(format!(
                    "'{}' is not a Kafka topic name and there is no fallback-topic(); dropped",
                    String::from_utf8_lossy(&record.topic[..record.topic.len().min(100)])
                ));
                return Ok(());
            }
            (true, _) => self.fallback_topic.as_deref().expect("a fallback topic"),
        };
        let mut r = BaseRecord::<[u8], [u8], usize>::with_opaque_to(topic, opaque(handed.send, n))
            .payload(record.value);
        if let Some(k) = record.key {
            r = r.key(k);
        }
        loop {
            match self.producer.send(r) {
                Ok(()) => {
                    handed.produced += 1;
                    handed.fates[n] = if fallback {
                        Fate::FallingBack
                    } else {
                        Fate::Waiting
                    };
                    return Ok(());
                }
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                    r = back;
                    self.wait_for_room(handed, give_up, stall)?;
                }
                Err((e, _)) => {
                    refuse(handed, n, &e, &reports.said);
                    return Ok(());
                }
            }
        }
    }

    /// Waits until every record `handed` produced has its report; a record whose topic the
    /// broker does not have is produced again to `fallback-topic()` (from `records`, which
    /// only a destination with one needs).
    fn wait(
        &mut self,
        handed: &mut Handed,
        records: &[&[u8]],
        give_up: GiveUp,
        stall: &mut Option<Instant>,
    ) -> Result<(), Failure> {
        loop {
            let reports = self.producer.context();
            let before = reports.reported(handed.send);
            reports.wait_for(handed.send, handed.produced, self.poll_timeout.min(POLL));
            let mut refusals = reports.refusals();
            let progressed = reports.reported(handed.send) > before || !refusals.is_empty();
            refusals.append(&mut self.later);
            for (opaque, e) in refusals {
                let send = (opaque >> 32) as u32;
                if send != handed.send {
                    // A later send's, kept for it; an earlier one's is not anyone's now.
                    if self.handed.iter().any(|h| h.send == send) {
                        self.later.push((opaque, e));
                    }
                    continue;
                }
                let n = opaque & 0xffff_ffff;
                match handed.fates.get(n).copied() {
                    Some(Fate::Waiting) if self.fallback_topic.is_some() && topic_refused(&e) => {
                        self.produce(handed, n, records[n], true, give_up, stall)?;
                    }
                    Some(Fate::Waiting | Fate::FallingBack) => {
                        refuse(handed, n, &e, &self.producer.context().said);
                    }
                    _ => {}
                }
            }
            let reports = self.producer.context();
            let settled = reports.reported(handed.send) >= handed.produced;
            if settled
                && !self
                    .later
                    .iter()
                    .any(|(o, _)| (o >> 32) as u32 == handed.send)
            {
                // Refusals are kept before they are counted: any of this send's came.
                let late = reports.refusals();
                if late.is_empty() {
                    for f in handed.fates.iter_mut() {
                        if matches!(f, Fate::Waiting | Fate::FallingBack) {
                            *f = Fate::Delivered;
                        }
                    }
                    return Ok(());
                }
                self.later.extend(late);
                continue;
            }
            if progressed {
                *stall = None;
            } else {
                stalled(stall, give_up, self.flush_timeout())?;
            }
        }
    }
}

/// Record `n` of `handed` is refused for good: dropped, and said why.
fn refuse(handed: &mut Handed, n: usize, e: &KafkaError, said: &Said) {
    handed.fates[n] = Fate::Refused;
    said.say(format!("a record was refused ({e}); dropped"));
}

/// Whether the broker refused a record for its topic (`fallback-topic()` takes it then).
fn topic_refused(e: &KafkaError) -> bool {
    matches!(
        e.rdkafka_error_code(),
        Some(
            RDKafkaErrorCode::UnknownTopicOrPartition
                | RDKafkaErrorCode::UnknownTopic
                | RDKafkaErrorCode::TopicAuthorizationFailed
                | RDKafkaErrorCode::InvalidTopic
        )
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_idempotent_producer_is_handed_two_requests_worth_a_send() {
        let size = |more: &[(&str, &str)]| {
            let mut c = ClientConfig::new();
            for (k, v) in DEFAULTS.iter().chain(more) {
                c.set(*k, *v);
            }
            send_size(&c.create_native_config().unwrap())
        };
        assert_eq!(size(&[]), 2_000_000);
        assert_eq!(size(&[("batch.size", "300000")]), 600_000);
        assert_eq!(size(&[("message.max.bytes", "500000")]), 1_000_000);
        assert_eq!(size(&[("batch.size", "1000")]), 64 << 10);
        assert_eq!(size(&[("enable.idempotence", "false")]), MAX_GATHER);
    }

    #[test]
    fn keyless_runs_go_where_librdkafka_sent_the_one_that_asked_until_it_is_time() {
        let now = Instant::now();
        let later = now + Duration::from_millis(100);
        let mut s = Sticky::default();
        // Nothing learned yet: librdkafka chooses, and one record asks.
        assert_eq!(s.partition(now), (None, true));
        s.ask(opaque(1, 0), now);
        // One ask at a time: later runs wait for its answer.
        assert_eq!(s.partition(now), (None, false));
        assert!(
            !s.answer(opaque(1, 5), 3, later),
            "not the record that asked"
        );
        assert!(s.answer(opaque(1, 0), 2, later));
        assert_eq!(s.partition(now), (Some(2), false));
        assert!(!s.answer(opaque(1, 0), 0, later), "answered once");
        // Its time over, a record asks again, and runs go on to partition 2 meanwhile.
        assert_eq!(s.partition(later), (Some(2), true));
        s.ask(opaque(3, 0), later);
        assert_eq!(s.partition(later), (Some(2), false));
        let after = later + Duration::from_millis(100);
        assert!(s.answer(opaque(3, 0), 1, after));
        assert_eq!(s.partition(later), (Some(1), false));
        // An ask whose answer never comes (its record refused) is made again.
        s.forget();
        s.ask(opaque(4, 0), after);
        assert_eq!(s.partition(after), (None, false));
        assert_eq!(s.partition(after + ASK_AGAIN), (None, true));
    }

    #[test]
    fn a_record_that_asks_keeps_its_send_and_place() {
        for (send, n) in [(0, 0), (1, 5), (u32::MAX, (1 << 31) - 1)] {
            let o = opaque(send, n);
            assert_eq!(o & ASK, 0);
            let asked = o | ASK;
            assert_eq!(((asked & !ASK) >> 32) as u32, send);
            assert_eq!((asked & !ASK) & 0xffff_ffff, n);
        }
    }

    #[test]
    fn a_record_reads_back_as_it_was_pushed() {
        let mut b = Batch::new(None);
        push_record(&mut b, b"logs", Some(b"web1"), |v| v.extend(b"hello"));
        push_record(&mut b, b"t", None, |_| {});
        let r = Record::read(&b.data[..b.ends[0] as usize]).unwrap();
        assert_eq!(
            (r.topic, r.key, r.value),
            (&b"logs"[..], Some(&b"web1"[..]), &b"hello"[..])
        );
        let r = Record::read(&b.data[b.ends[0] as usize..]).unwrap();
        assert_eq!((r.topic, r.key, r.value), (&b"t"[..], None, &b""[..]));
        assert!(Record::read(&[5, 0, b'a']).is_none());
    }

    #[test]
    fn the_records_of_a_send_start_where_it_is() {
        let mut batches = vec![Batch::new(None), Batch::new(None), Batch::new(None)];
        for (b, values) in batches.iter_mut().zip([&["a", "b", "c"][..], &[], &["d"]]) {
            for v in values {
                push_record(b, b"t", None, |value| value.extend(v.as_bytes()));
            }
        }
        let values = |from: Position| -> Vec<Vec<u8>> {
            records_of(&batches, from)
                .iter()
                .map(|r| Record::read(r).unwrap().value.to_vec())
                .collect()
        };
        assert_eq!(values(Position::default()), [b"a", b"b", b"c", b"d"]);
        let second = Position {
            byte: batches[0].ends[0] as usize,
            ..Position::default()
        };
        assert_eq!(values(second), [b"b", b"c", b"d"]);
        let last = Position {
            batch: 2,
            ..Position::default()
        };
        assert_eq!(values(last), [b"d"]);
        let past = Position {
            batch: 3,
            ..Position::default()
        };
        assert!(values(past).is_empty());
    }
}
