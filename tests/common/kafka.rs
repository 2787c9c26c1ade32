//! A Kafka broker for the tests of one test binary: Kafka 3.9 in KRaft mode (one node, no
//! ZooKeeper), its jars fetched from Maven Central by `.ci/install-test-deps.sh`. Started at
//! the first test that asks, shared by the binary's tests, and killed when the binary exits
//! ([`Service`]). Tests can kill it with SIGKILL and start it again on the same data.

use super::free_port;
use super::pki::Pki;
use super::service::{installed, Service};
use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Where `.ci/install-test-deps.sh` puts the broker's jars.
const LIB: &str = "/opt/sluice-test/kafka/lib";

pub struct Kafka {
    /// `127.0.0.1:PORT`, for bootstrap-servers().
    pub bootstrap: String,
    /// A listener that takes SASL/PLAIN, user `sluice`, password `secret`.
    pub sasl_bootstrap: String,
    /// A TLS listener, its certificate (`localhost`, 127.0.0.1) signed by `pki`'s CA.
    pub ssl_bootstrap: String,
    pub pki: Pki,
    broker: Service,
    _dir: tempfile::TempDir,
}

/// The broker, started if it was not; `None` (said) where its jars are missing and the
/// peers are not required.
pub fn kafka() -> Option<&'static Kafka> {
    static BROKER: OnceLock<Option<Kafka>> = OnceLock::new();
    BROKER.get_or_init(Kafka::start).as_ref()
}

impl Kafka {
    fn start() -> Option<Kafka> {
        if !installed(LIB, "the Kafka broker's jars") {
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let (port, controller, sasl, ssl) = (free_port(), free_port(), free_port(), free_port());
        // The broker reads its key and certificate chain from one PEM file.
        let pki = Pki::new();
        let server = pki.identity("server");
        let bundle = dir.path().join("server-bundle.pem");
        std::fs::write(
            &bundle,
            [
                std::fs::read(&server.key).unwrap(),
                std::fs::read(&server.cert).unwrap(),
                std::fs::read(pki.ca()).unwrap(),
            ]
            .concat(),
        )
        .unwrap();
        let props = dir.path().join("server.properties");
        std::fs::write(
            &props,
            format!(
                "process.roles=broker,controller\nnode.id=1\n\
                 controller.quorum.voters=1@127.0.0.1:{controller}\n\
                 listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller},SASL_PLAINTEXT://127.0.0.1:{sasl},SSL://127.0.0.1:{ssl}\n\
                 advertised.listeners=PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{sasl},SSL://127.0.0.1:{ssl}\n\
                 controller.listener.names=CONTROLLER\ninter.broker.listener.name=PLAINTEXT\n\
                 listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,SSL:SSL\n\
                 ssl.keystore.type=PEM\nssl.keystore.location={}\n\
                 sasl.enabled.mechanisms=PLAIN\n\
                 listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_sluice=\"secret\";\n\
                 log.dirs={}\nnum.partitions=1\nauto.create.topics.enable=false\n\
                 offsets.topic.replication.factor=1\ntransaction.state.log.replication.factor=1\n\
                 transaction.state.log.min.isr=1\ngroup.initial.rebalance.delay.ms=0\n",
                bundle.display(),
                dir.path().join("data").display()
            ),
        )
        .unwrap();
        let log4j = dir.path().join("log4j.properties");
        std::fs::write(
            &log4j,
            "log4j.rootLogger=WARN, stderr\nlog4j.appender.stderr=org.apache.log4j.ConsoleAppender\n\
             log4j.appender.stderr.Target=System.err\n\
             log4j.appender.stderr.layout=org.apache.log4j.PatternLayout\n\
             log4j.appender.stderr.layout.ConversionPattern=[%d] %p %m (%c)%n\n",
        )
        .unwrap();
        let java = |dir: &Path| {
            let mut c = Command::new("java");
            c.arg(format!("-Dlog4j.configuration=file:{}", log4j.display()))
                .arg("-cp")
                .arg(format!("{LIB}/*"))
                .current_dir(dir);
            c
        };
        let formatted = java(dir.path())
            .args(["-Xmx256m", "kafka.tools.StorageTool", "format", "-t"])
            .arg("sluice-tests-kraft-0001")
            .arg("-c")
            .arg(&props)
            .output()
            .unwrap();
        assert!(
            formatted.status.success(),
            "formatting the broker's storage: {}",
            String::from_utf8_lossy(&formatted.stderr)
        );
        let mut broker = java(dir.path());
        broker
            .args(["-Xms512m", "-Xmx512m", "-XX:+UseG1GC", "kafka.Kafka"])
            .arg(&props);
        let kafka = Kafka {
            bootstrap: format!("127.0.0.1:{port}"),
            sasl_bootstrap: format!("127.0.0.1:{sasl}"),
            ssl_bootstrap: format!("127.0.0.1:{ssl}"),
            pki,
            broker: Service::new("kafka broker", broker, dir.path().join("kafka.out")),
            _dir: dir,
        };
        kafka.restart();
        Some(kafka)
    }

    /// `kill -9` of the broker.
    pub fn kill_9(&self) {
        self.broker.kill_9();
    }

    /// Starts the broker (again, on its data), and waits until it answers.
    pub fn restart(&self) {
        self.broker.start();
        self.wait_ready();
    }

    /// Waits until the broker lists itself in its metadata.
    fn wait_ready(&self) {
        use rdkafka::consumer::{BaseConsumer, Consumer};
        let started = Instant::now();
        let consumer: BaseConsumer = rdkafka::ClientConfig::new()
            .set("bootstrap.servers", &self.bootstrap)
            .set("log_level", "0")
            .create()
            .unwrap();
        while started.elapsed() < Duration::from_secs(120) {
            if consumer
                .fetch_metadata(None, Duration::from_secs(2))
                .is_ok_and(|m| !m.brokers().is_empty())
            {
                return;
            }
            std::thread::sleep(Duration::from_millis(300));
        }
        panic!("the Kafka broker did not answer within 120 s");
    }

    /// Creates `topic` with `partitions`.
    pub fn create_topic(&self, topic: &str, partitions: i32) {
        use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
        let admin: AdminClient<rdkafka::client::DefaultClientContext> =
            rdkafka::ClientConfig::new()
                .set("bootstrap.servers", &self.bootstrap)
                .create()
                .unwrap();
        let topics = [NewTopic::new(topic, partitions, TopicReplication::Fixed(1))];
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let results = rt
            .block_on(admin.create_topics(&topics, &AdminOptions::new()))
            .unwrap();
        for r in results {
            r.unwrap_or_else(|(t, e)| panic!("creating topic {t}: {e}"));
        }
    }

    /// The records in partition 0 of `topic` so far (its high watermark).
    pub fn end_offset(&self, topic: &str) -> i64 {
        use rdkafka::consumer::{BaseConsumer, Consumer};
        let consumer: BaseConsumer = rdkafka::ClientConfig::new()
            .set("bootstrap.servers", &self.bootstrap)
            .create()
            .unwrap();
        consumer
            .fetch_watermarks(topic, 0, Duration::from_secs(5))
            .map_or(0, |(_, high)| high)
    }

    /// Every record of `topic` (all its partitions, from the start) until `want` were read
    /// or nothing more came for 10 s: `(key, value)` pairs.
    pub fn records(&self, topic: &str, want: usize) -> Vec<(Option<Vec<u8>>, Vec<u8>)> {
        self.records_with_partitions(topic, want)
            .into_iter()
            .map(|(_, key, value)| (key, value))
            .collect()
    }

    /// As [`Kafka::records`], each with its partition: `(partition, key, value)`.
    #[allow(clippy::type_complexity)]
    pub fn records_with_partitions(
        &self,
        topic: &str,
        want: usize,
    ) -> Vec<(i32, Option<Vec<u8>>, Vec<u8>)> {
        use rdkafka::consumer::{BaseConsumer, Consumer};
        use rdkafka::{Message, Offset, TopicPartitionList};
        let consumer: BaseConsumer = rdkafka::ClientConfig::new()
            .set("bootstrap.servers", &self.bootstrap)
            .set("group.id", format!("sluice-tests-{topic}"))
            .set("enable.auto.commit", "false")
            .create()
            .unwrap();
        let meta = consumer
            .fetch_metadata(Some(topic), Duration::from_secs(10))
            .unwrap();
        let mut list = TopicPartitionList::new();
        for p in meta.topics()[0].partitions() {
            list.add_partition_offset(topic, p.id(), Offset::Beginning)
                .unwrap();
        }
        consumer.assign(&list).unwrap();
        let mut got = Vec::new();
        let mut last = Instant::now();
        while got.len() < want && last.elapsed() < Duration::from_secs(10) {
            if let Some(m) = consumer.poll(Duration::from_millis(200)) {
                let m = m.unwrap();
                got.push((
                    m.partition(),
                    m.key().map(<[u8]>::to_vec),
                    m.payload().unwrap_or_default().to_vec(),
                ));
                last = Instant::now();
            }
        }
        got
    }
}

impl Kafka {
    /// Produces `records` (`(key, value)`) into `topic`, each acknowledged by the broker.
    pub fn produce(&self, topic: &str, records: impl Iterator<Item = (Vec<u8>, Vec<u8>)>) {
        use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
        let producer: BaseProducer = rdkafka::ClientConfig::new()
            .set("bootstrap.servers", &self.bootstrap)
            .set("linger.ms", "5")
            .create()
            .unwrap();
        for (key, value) in records {
            let mut record = BaseRecord::to(topic).key(&key[..]).payload(&value[..]);
            loop {
                match producer.send(record) {
                    Ok(()) => break,
                    Err((_, back)) => {
                        record = back;
                        producer.poll(Duration::from_millis(10));
                    }
                }
            }
            producer.poll(Duration::ZERO);
        }
        producer.flush(Duration::from_secs(60)).unwrap();
    }
}
