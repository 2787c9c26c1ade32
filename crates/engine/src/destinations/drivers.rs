//! The destination drivers, as syslog-ng names them: each one declaration — its names, its
//! option table (in parts shared between drivers: how messages are formatted, how they are
//! queued), a valid use of it, and its build.
//!
//! [`build`] finds a statement's driver in [`DRIVERS`], holds the node against the driver's
//! table, builds it and refuses an option it declared and did not read. A driver syslog-ng
//! has and sluice does not is in [`NOT_YET`]. To add a destination: write its runtime beside
//! this file (a [`Destination`]), its declaration here, and its sample in the table test.

use super::diskq::DiskBufferOptions;
use super::file::FileDestination;
use super::format::{Format, Formatter};
use super::network::{NetworkDestination, NetworkOptions, Transport};
use super::program::Program;
use super::sender::{Batching, Failback, Pacing};
use super::terminal::{Reach, TerminalDestination};
use super::Destination;
use crate::file_open::FileOptions;
use crate::file_open::NameReports;
use crate::options::{self, DefaultTemplate, Globals, MAKE_FILE};
use crate::options::{ip_protocol, port_number, RELP_PORT};
use crate::stats::Registry;
use crate::tls::TlsOptions;
use sluice_config::declared::{self, not_yet, read, Declared, Options};
use sluice_config::{ConfigError, Node};
use sluice_model::macros::DateOptions;
use sluice_model::template::Names;
use sluice_model::Template;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

#[cfg(feature = "http")]
mod elasticsearch;
#[cfg(feature = "http")]
mod http;
#[cfg(feature = "kafka")]
mod kafka;
mod logstore;

/// A destination driver: the names it answers to, its options, and how it is made from them.
pub struct DestinationDriver {
    /// As `Node::key` gives them (`unix_stream`).
    pub names: &'static [&'static str],
    /// Its options, in parts.
    pub options: &'static [&'static [Declared]],
    /// A valid use, for the table test.
    pub sample: &'static str,
    pub build: fn(&Node, &mut Options, &DestinationContext) -> Result<Built, ConfigError>,
}

pub type Built = Arc<dyn Destination>;

/// What a destination driver is built in: the global options, the named templates, the
/// counters, and the destination statement it stands in (`destination d { file("…"); };`:
/// `file()` is driver 0 of `d`).
pub struct DestinationContext<'a> {
    pub globals: &'a Globals,
    /// The configuration's named templates and filters.
    pub names: &'a Names,
    pub stats: &'a Arc<Registry>,
    /// The destination statement's name.
    pub name: &'a str,
    /// The driver's place in its statement.
    pub n: usize,
}

impl DestinationContext<'_> {
    /// How sluice's own messages name the destination: `destination d_file`.
    fn label(&self) -> String {
        format!("destination {}", self.name)
    }

    /// The driver as syslog-ng's statistics name it: `dst.file` and `d_file#0`.
    fn counted_as(&self, node: &Node) -> (String, String) {
        (
            format!("dst.{}", node.key().replace('_', "-")),
            format!("{}#{}", self.name, self.n),
        )
    }
}

/// The drivers of this version.
pub static DRIVERS: &[DestinationDriver] = &[
    DestinationDriver {
        names: &["file"],
        options: &[
            FORMAT,
            QUEUE,
            DISK_BUFFER,
            MAKE_FILE,
            FILE,
            LATER,
            BATCH_LATER,
        ],
        sample: "file(\"/nonexistent/sluice-table-test\")",
        build: file,
    },
    DestinationDriver {
        names: &["logstore"],
        options: &[
            FORMAT,
            QUEUE,
            DISK_BUFFER,
            MAKE_FILE,
            FILE,
            logstore::OPTIONS,
            logstore::LATER,
            LATER,
            BATCH_LATER,
        ],
        sample: "logstore(\"/nonexistent/sluice-table-test.lgs\")",
        build: logstore::build,
    },
    DestinationDriver {
        names: &["stdout"],
        options: &[FORMAT, QUEUE, &[not_yet("disk_buffer")], LATER, BATCH_LATER],
        sample: "stdout()",
        build: stdout,
    },
    DestinationDriver {
        names: &["network", "syslog"],
        options: &[
            FORMAT,
            QUEUE,
            DISK_BUFFER,
            SOCKET,
            ADDRESS,
            TRANSPORT,
            TLS_BY_TRANSPORT,
            NETWORK_LATER,
            LATER,
            BATCH_LATER,
        ],
        sample: "network(\"127.0.0.1\")",
        build: network,
    },
    DestinationDriver {
        names: &["tcp", "tcp6", "udp", "udp6", "relp"],
        options: &[
            FORMAT,
            QUEUE,
            DISK_BUFFER,
            SOCKET,
            ADDRESS,
            TLS,
            NETWORK_LATER,
            LATER,
            BATCH_LATER,
        ],
        sample: "tcp(\"127.0.0.1\")",
        build: network,
    },
    DestinationDriver {
        names: &["unix_stream", "unix_dgram"],
        options: &[FORMAT, QUEUE, DISK_BUFFER, SOCKET, LATER, BATCH_LATER],
        sample: "unix-stream(\"/nonexistent/sluice-table-test\")",
        build: unix,
    },
    DestinationDriver {
        names: &["usertty"],
        options: &[FORMAT, LATER],
        sample: "usertty(\"root\")",
        build: terminal,
    },
    DestinationDriver {
        names: &["pipe"],
        options: &[FORMAT, QUEUE, MAKE_FILE, LATER],
        sample: "pipe(\"/nonexistent/sluice-table-test\")",
        build: terminal,
    },
    DestinationDriver {
        names: &["program"],
        options: &[FORMAT, QUEUE, DISK_BUFFER, PROGRAM, LATER, BATCH_LATER],
        sample: "program(\"cat >/dev/null\")",
        build: program,
    },
    #[cfg(feature = "http")]
    DestinationDriver {
        names: &["http"],
        options: &[
            DATES,
            QUEUE,
            DISK_BUFFER,
            THREADED,
            http::OPTIONS,
            http::LATER,
            LATER,
        ],
        sample: "http(url(\"http://127.0.0.1:9200/_bulk\"))",
        build: http::build,
    },
    #[cfg(feature = "http")]
    DestinationDriver {
        names: &["elasticsearch_http", "opensearch"],
        options: &[
            DATES,
            QUEUE,
            DISK_BUFFER,
            THREADED,
            elasticsearch::HTTP_OPTIONS,
            elasticsearch::OPTIONS,
            http::LATER,
            LATER,
        ],
        sample: "elasticsearch-http(url(\"http://127.0.0.1:9200/_bulk\") index(\"logs\"))",
        build: elasticsearch::build,
    },
    #[cfg(feature = "kafka")]
    DestinationDriver {
        names: &["kafka_c"],
        options: &[
            DATES,
            QUEUE,
            DISK_BUFFER,
            THREADED,
            kafka::OPTIONS,
            kafka::LATER,
            LATER,
        ],
        sample: "kafka-c(bootstrap-servers(\"127.0.0.1:9\") topic(\"logs\"))",
        build: kafka::build,
    },
];

/// Destination drivers of syslog-ng that sluice does not have yet.
pub const NOT_YET: &[&str] = &[
    "sql",
    "mongodb",
    "kafka",
    #[cfg(not(feature = "kafka"))]
    "kafka_c",
    "elasticsearch",
    #[cfg(not(feature = "http"))]
    "elasticsearch_http",
    #[cfg(not(feature = "http"))]
    "opensearch",
    #[cfg(not(feature = "http"))]
    "http",
    "riemann",
    "smtp",
    "snmp",
    "hdfs",
    "redis",
    "stomp",
    "amqp",
    "python",
    "java",
    "loggly",
    "logmatic",
    "splunk_hec_event",
    "graphite",
    "mqtt",
    "syslog_ng",
    "bigquery",
    "loki",
    "opentelemetry",
    "s3",
    "graylog2",
    "elasticsearch2",
    "slack",
    "telegram",
    "discord",
    "sumologic_http",
    "sumologic_syslog",
    "collectd",
    "osquery",
    "pubsub",
    "google_pubsub",
    "logscale",
    "openobserve",
];

/// Builds the destination driver `node` stands for.
pub fn build(node: &Node, cx: &DestinationContext) -> Result<Built, ConfigError> {
    let driver = declared::find(
        node,
        ("destination", "destination driver"),
        DRIVERS,
        |d| d.names,
        NOT_YET,
    )?;
    let mut o = Options::check_parts(node, driver.options)?;
    let built = (driver.build)(node, &mut o, cx)?;
    o.finish()?;
    Ok(built)
}

/// How a destination formats messages: read by [`FormatOptions::apply`].
const FORMAT: &[Declared] = &[
    read("template", "template(\"$MSG\\n\")"),
    read("template_escape", "template-escape(yes)"),
    read("ts_format", "ts-format(iso)"),
    read("frac_digits", "frac-digits(3)"),
    read("time_zone", "time-zone(\"UTC\")"),
    read("send_time_zone", "send-time-zone(\"+01:00\")"),
    read("flags", "flags(no-multi-line)"),
];

/// The dates of a destination's templates, read by [`FormatOptions::apply`].
#[cfg_attr(not(any(feature = "http", feature = "kafka")), allow(dead_code))]
const DATES: &[Declared] = &[
    read("template_escape", "template-escape(yes)"),
    read("ts_format", "ts-format(iso)"),
    read("frac_digits", "frac-digits(3)"),
    read("time_zone", "time-zone(\"UTC\")"),
    read("send_time_zone", "send-time-zone(\"+01:00\")"),
];

/// syslog-ng's options of threaded destinations (`http()`, and those to come): lanes and
/// batches, read by [`Threaded::read`].
#[cfg_attr(not(any(feature = "http", feature = "kafka")), allow(dead_code))]
const THREADED: &[Declared] = &[
    read("workers", "workers(2)"),
    read("worker_partition_key", "worker-partition-key(\"$HOST\")"),
    read("batch_lines", "batch-lines(100)"),
    read("batch_bytes", "batch-bytes(524288)"),
    read("batch_timeout", "batch-timeout(500)"),
    read("retries", "retries(5)"),
];

/// How a destination queues what it has not written.
const QUEUE: &[Declared] = &[
    read("log_fifo_size", "log-fifo-size(1000)"),
    // syslog-ng writes in batches of this many; sluice writes what a read brought as one.
    read("flush_lines", "flush-lines(100)"),
    read("flush_timeout", "flush-timeout(10)"),
    read("time_reopen", "time-reopen(1)"),
    read("persist_name", "persist-name(\"p\")"),
];

/// A queue on disk, read by [`Queue::disk_buffer`].
const DISK_BUFFER: &[Declared] = &[read(
    "disk_buffer",
    "disk-buffer(reliable(yes) disk-buf-size(1048576))",
)];

/// syslog-ng's options of every destination that sluice does not have yet.
const LATER: &[Declared] = &[
    not_yet("mark_mode"),
    not_yet("mark_freq"),
    not_yet("suppress"),
    not_yet("throttle"),
    not_yet("local_time_zone"),
    not_yet("on_error"),
];

/// Batches of syslog-ng's newer versions for destinations that are not threaded in sluice.
const BATCH_LATER: &[Declared] = &[not_yet("batch_lines"), not_yet("batch_timeout")];

/// The options of `file()` besides how it is made ([`MAKE_FILE`]), read by
/// [`options::apply_file_option`].
const FILE: &[Declared] = &[
    read("fsync", "fsync(yes)"),
    read("time_reap", "time-reap(60)"),
    not_yet("pad_size"),
    not_yet("overwrite_if_older"),
    not_yet("logrotate"),
    not_yet("multi_line_mode"),
];

/// The socket options of every forwarding destination.
const SOCKET: &[Declared] = &[
    read("so_sndbuf", "so-sndbuf(1048576)"),
    read("so_keepalive", "so-keepalive(yes)"),
    // A connection is kept open and re-opened whatever these say.
    read("keep_alive", "keep-alive(yes)"),
    read("close_on_input", "close-on-input(no)"),
];

/// Where a destination that talks IP sends.
const ADDRESS: &[Declared] = &[
    read("port", "port(1514)"),
    read("destport", "destport(1514)"),
    read("localip", "localip(\"127.0.0.1\")"),
    read("localport", "localport(0)"),
    read("ip_protocol", "ip-protocol(4)"),
    read(
        "failover",
        "failover(servers(\"127.0.0.2\") failback(tcp-probe-interval(5)))",
    ),
];

/// TLS of `tcp()`, `tcp6()` and `relp()`: on when the block is there.
const TLS: &[Declared] = &[read("tls", "tls(peer-verify(optional-untrusted))")];

/// TLS of `network()` and `syslog()`, for `transport(tls)`.
const TLS_BY_TRANSPORT: &[Declared] = &[read(
    "tls",
    "transport(tls) tls(peer-verify(optional-untrusted))",
)];

/// `network()` and `syslog()` choose their transport.
const TRANSPORT: &[Declared] = &[read("transport", "transport(udp)")];

/// syslog-ng's options of forwarding destinations that sluice does not have yet.
const NETWORK_LATER: &[Declared] = &[
    not_yet("so_broadcast"),
    not_yet("so_rcvbuf"),
    not_yet("ip_ttl"),
    not_yet("ip_tos"),
    not_yet("spoof_source"),
    not_yet("spoof_source_max_msglen"),
    not_yet("truncate_size"),
];

/// The options that say how a destination formats messages ([`FORMAT`]).
struct FormatOptions {
    dates: DateOptions,
    template: Option<Template>,
    escape: Option<bool>,
    syslog_protocol: bool,
    no_multi_line: bool,
}

impl FormatOptions {
    fn read(o: &mut Options, cx: &DestinationContext) -> Result<FormatOptions, ConfigError> {
        FormatOptions::read_part(o, cx, FORMAT)
    }

    /// Reads the options of `part` (of [`FORMAT`]).
    fn read_part(
        o: &mut Options,
        cx: &DestinationContext,
        part: &'static [Declared],
    ) -> Result<FormatOptions, ConfigError> {
        let mut f = FormatOptions {
            dates: cx.globals.dates.clone(),
            template: None,
            escape: None,
            syslog_protocol: false,
            no_multi_line: false,
        };
        o.apply(part, |opt| f.apply(opt, cx.names))?;
        Ok(f)
    }

    /// `template()` names a template statement, or is template text.
    fn apply(&mut self, opt: &Node, names: &Names) -> Result<bool, ConfigError> {
        match opt.key().as_str() {
            "template" => {
                let v = opt.value()?;
                self.template = Some(match names.templates.get(&v.text) {
                    Some(t) => t.clone(),
                    None => Template::compile_in(&v.text, names)
                        .map_err(|e| ConfigError::new(v.pos, e))?,
                });
            }
            "template_escape" => self.escape = Some(opt.bool()?),
            "flags" => {
                for f in opt.words()? {
                    match sluice_config::normalize(&f.text).as_str() {
                        "no_multi_line" => self.no_multi_line = true,
                        "syslog_protocol" => self.syslog_protocol = true,
                        _ => {
                            return Err(ConfigError::unknown(
                                f.pos,
                                "destination flag",
                                &f.text,
                                "",
                                &["no-multi-line", "syslog-protocol"],
                            ))
                        }
                    }
                }
            }
            _ => return Globals::apply_dates(&mut self.dates, opt),
        }
        Ok(true)
    }

    /// The destination's own `template()`, else `options {}`'s `file-template()` or
    /// `proto-template()` (`global`); under `flags(syslog-protocol)` neither global one.
    fn or_global(mut self, global: &DefaultTemplate) -> FormatOptions {
        if self.template.is_none() && !self.syslog_protocol {
            self.template = global.template.clone();
        }
        self
    }

    /// The formatter these options make: RFC5424 with `flags(syslog-protocol)` (the template,
    /// if any, as its message part), else the template, else the driver's `default`.
    fn formatter(self, default: Format) -> Formatter {
        let dates = self.dates;
        let template = self.template.map(|mut t| {
            if let Some(e) = self.escape {
                t.escape = e;
            }
            t.dates = dates.clone();
            t
        });
        let format = match (template, self.syslog_protocol) {
            (body, true) => Format::Rfc5424(dates, body),
            (Some(t), false) => Format::Template(t),
            (None, false) => default,
        };
        Formatter::new(format, self.no_multi_line)
    }
}

/// The options of [`QUEUE`].
struct Queue {
    log_fifo_size: usize,
    time_reopen: Duration,
    persist_name: Option<String>,
}

impl Queue {
    fn read(o: &mut Options, g: &Globals) -> Result<Queue, ConfigError> {
        for name in ["flush_lines", "flush_timeout"] {
            o.last(name).map(Node::u64).transpose()?;
        }
        Ok(Queue {
            log_fifo_size: match o.last("log_fifo_size") {
                Some(opt) => opt.u64()?.max(1) as usize,
                None => g.log_fifo_size,
            },
            time_reopen: match o.last("time_reopen") {
                Some(opt) => Duration::from_secs(opt.u64()?.max(1)),
                None => g.time_reopen,
            },
            persist_name: o.last("persist_name").map(Node::string).transpose()?,
        })
    }

    /// The disk buffer's options and its directory: named after `persist-name()`, else
    /// after `fallback` (what the destination feeds), so that a restart with the same
    /// configuration finds it.
    fn disk_buffer(
        &self,
        o: &mut Options,
        fallback: impl FnOnce() -> String,
    ) -> Result<Option<(DiskBufferOptions, String)>, ConfigError> {
        let Some(opt) = o.last("disk_buffer") else {
            return Ok(None);
        };
        let d = disk_buffer_options(opt)?;
        let name = self.persist_name.clone().unwrap_or_else(fallback);
        let dir = buffer_dir_name(&name, d.reliable);
        Ok(Some((d, dir)))
    }
}

/// The options of [`THREADED`].
#[cfg_attr(not(any(feature = "http", feature = "kafka")), allow(dead_code))]
struct Threaded {
    workers: usize,
    partition_key: Option<Template>,
    batch: Batching,
    retries: u32,
}

#[cfg_attr(not(any(feature = "http", feature = "kafka")), allow(dead_code))]
impl Threaded {
    fn read(o: &mut Options, cx: &DestinationContext) -> Result<Threaded, ConfigError> {
        let number = |o: &mut Options, name| o.last(name).map(Node::u64).transpose();
        let workers = match o.last("workers") {
            Some(opt) => {
                let v = opt.value()?;
                let n = v.as_u64()?;
                if !(1..=1024).contains(&n) {
                    return Err(ConfigError::new(v.pos, "workers() is between 1 and 1024"));
                }
                n
            }
            None => 1,
        };
        let partition_key = match o.last("worker_partition_key") {
            Some(opt) => {
                let v = opt.value()?;
                Some(
                    Template::compile_in(&v.text, cx.names)
                        .map_err(|e| ConfigError::new(v.pos, e))?,
                )
            }
            None => None,
        };
        Ok(Threaded {
            workers: workers as usize,
            partition_key,
            batch: Batching {
                lines: number(o, "batch_lines")?.unwrap_or(0) as usize,
                bytes: number(o, "batch_bytes")?.unwrap_or(0) as usize,
                timeout: Duration::from_millis(number(o, "batch_timeout")?.unwrap_or(0)),
            },
            retries: number(o, "retries")?.unwrap_or(3).clamp(1, u32::MAX as u64) as u32,
        })
    }
}

/// `file("/var/log/$HOST/messages")`.
/// The options of files and directories ([`MAKE_FILE`], [`FILE`]) over the global ones.
fn file_options(
    o: &mut Options,
    cx: &DestinationContext,
    queue: &Queue,
) -> Result<FileOptions, ConfigError> {
    let mut file: FileOptions = cx.globals.file.clone();
    for table in [MAKE_FILE, FILE] {
        o.apply(table, |opt| options::apply_file_option(&mut file, opt))?;
    }
    file.log_fifo_size = queue.log_fifo_size;
    file.time_reopen = queue.time_reopen;
    Ok(file)
}

fn file(node: &Node, o: &mut Options, cx: &DestinationContext) -> Result<Built, ConfigError> {
    let format = FormatOptions::read(o, cx)?;
    let queue = Queue::read(o, cx.globals)?;
    let file = file_options(o, cx, &queue)?;
    let path = node.first_value().ok_or_else(|| {
        ConfigError::new(
            node.pos,
            "file() needs a file name: file(\"/var/log/messages\")",
        )
    })?;
    files(node, path, o, cx, format, &queue, file, None)
}

/// The destination of `file()`, and of `logstore()` with `store`: the file name's template,
/// the counters, the writers and the disk buffer (named after the destination and its file
/// name, hashed: a template can be long).
#[allow(clippy::too_many_arguments)]
fn files(
    node: &Node,
    path: &sluice_config::Value,
    o: &mut Options,
    cx: &DestinationContext,
    format: FormatOptions,
    queue: &Queue,
    file: FileOptions,
    store: Option<sluice_logstore::StoreOptions>,
) -> Result<Built, ConfigError> {
    let dates = format.dates.clone();
    let mut formatter = format
        .or_global(&cx.globals.file_template)
        .formatter(Format::File(dates.clone()));
    if store.is_some() {
        formatter = formatter.into_entries();
    }
    let mut path_template =
        Template::compile_in(&path.text, cx.names).map_err(|e| ConfigError::new(path.pos, e))?;
    path_template.dates = DateOptions {
        ts_format: dates.ts_format,
        frac_digits: 0,
        zone: dates.zone.clone(),
    };
    let label = cx.label();
    let (component, id) = cx.counted_as(node);
    let counters = cx.stats.destination(&component, &id, &path.text);
    let reports = NameReports::new(
        label.as_str().into(),
        cx.stats
            .counter(&component, &id, &path.text, "names_rewritten"),
        cx.stats
            .counter(&component, &id, &path.text, "names_refused"),
    );
    let mut dest = FileDestination::file(label, path_template, formatter, file, counters, reports);
    let kind = match store {
        Some(store) => {
            dest = dest.into_store(store);
            "logstore"
        }
        None => "file",
    };
    let buffer = queue.disk_buffer(o, || {
        format!(
            "{}-{kind}-{:08x}",
            cx.name,
            crc32fast::hash(path.text.as_bytes())
        )
    })?;
    Ok(Arc::new(match buffer {
        Some((d, dir)) => dest.with_disk_buffer(d, dir),
        None => dest,
    }))
}

/// `stdout()`.
fn stdout(node: &Node, o: &mut Options, cx: &DestinationContext) -> Result<Built, ConfigError> {
    let format = FormatOptions::read(o, cx)?;
    let queue = Queue::read(o, cx.globals)?;
    if let Some(v) = node.first_value() {
        return Err(ConfigError::new(
            v.pos,
            "stdout() takes no positional value",
        ));
    }
    let mut file: FileOptions = cx.globals.file.clone();
    file.log_fifo_size = queue.log_fifo_size;
    file.time_reopen = queue.time_reopen;
    let dates = format.dates.clone();
    let formatter = format
        .or_global(&cx.globals.file_template)
        .formatter(Format::File(dates));
    let (component, id) = cx.counted_as(node);
    let counters = cx.stats.destination(&component, &id, "");
    Ok(Arc::new(FileDestination::stdout(
        cx.label(),
        formatter,
        file,
        counters,
    )))
}

/// Where an IP destination sends ([`ADDRESS`], [`TLS`]).
#[derive(Default)]
struct Address {
    port: Option<u16>,
    ip_protocol: Option<u8>,
    local: (Option<IpAddr>, Option<u16>),
    failover: Vec<String>,
    failback: Option<Failback>,
    tls: Option<TlsOptions>,
}

impl Address {
    fn read(o: &mut Options) -> Result<Address, ConfigError> {
        let mut a = Address {
            port: o
                .last_of(&["port", "destport"])
                .map(port_number)
                .transpose()?,
            ip_protocol: o.last("ip_protocol").map(ip_protocol).transpose()?,
            ..Address::default()
        };
        a.local.1 = o.last("localport").map(port_number).transpose()?;
        if let Some(opt) = o.last("localip") {
            let v = opt.value()?;
            a.local.0 = Some(v.text.parse::<IpAddr>().map_err(|_| {
                ConfigError::new(v.pos, format!("'{}' is not an IP address", v.text))
            })?);
        }
        for opt in o.all("failover") {
            failover(opt, &mut a)?;
        }
        a.tls = o.last("tls").map(TlsOptions::parse).transpose()?;
        Ok(a)
    }
}

/// `network()`, `syslog()`, `tcp()`, `tcp6()`, `udp()`, `udp6()`, `relp()`.
fn network(node: &Node, o: &mut Options, cx: &DestinationContext) -> Result<Built, ConfigError> {
    let key = node.key();
    let mut address = Address::read(o)?;
    let mut transport = match key.as_str() {
        "udp" | "udp6" => Transport::Udp,
        _ => Transport::Tcp,
    };
    // tcp(), tcp6() and relp() speak TLS when they have a tls() block.
    let mut want_tls = address
        .tls
        .as_ref()
        .filter(|_| matches!(key.as_str(), "tcp" | "tcp6" | "relp"))
        .map(|t| t.pos);
    if matches!(key.as_str(), "network" | "syslog") {
        if let Some(opt) = o.last("transport") {
            let v = opt.value()?;
            transport = match v.text.to_ascii_lowercase().as_str() {
                "tcp" => Transport::Tcp,
                "udp" => Transport::Udp,
                "tls" => {
                    want_tls = Some(v.pos);
                    Transport::Tcp
                }
                "proxied-tcp" | "proxied-tls" | "proxied-tls-passthrough" => {
                    return Err(ConfigError::not_supported(
                        v.pos,
                        &format!("transport({}) in {}()", v.text, node.name),
                    ))
                }
                _ => {
                    return Err(ConfigError::unknown(
                        v.pos,
                        "transport",
                        &v.text,
                        "",
                        &["tcp", "udp", "tls"],
                    ))
                }
            };
        }
    }
    let tls = match (want_tls, &address.tls) {
        (Some(_), Some(t)) => Some(t.client()?),
        (Some(pos), None) => {
            return Err(ConfigError::new(
                pos,
                "transport(tls) needs a tls() block: tls(ca-file(\"…\")), with key-file() and cert-file() if the server asks for a certificate",
            ))
        }
        (None, Some(t)) => {
            return Err(ConfigError::new(
                t.pos,
                format!("tls() is for transport(tls), not this {}() destination's transport", node.name),
            ))
        }
        (None, None) => None,
    };
    if key.ends_with('6') {
        address.ip_protocol = Some(6);
    }
    let port = address
        .port
        .unwrap_or(match (key.as_str(), transport, &tls) {
            ("relp", ..) => RELP_PORT,
            ("syslog", Transport::Tcp, Some(_)) => 6514,
            ("syslog", Transport::Tcp, None) => 601,
            _ => 514,
        });
    let local = match address.local {
        (None, None) => None,
        (ip, port) => Some(SocketAddr::new(
            ip.unwrap_or(if address.ip_protocol == Some(6) {
                IpAddr::from(std::net::Ipv6Addr::UNSPECIFIED)
            } else {
                IpAddr::from(std::net::Ipv4Addr::UNSPECIFIED)
            }),
            port.unwrap_or(0),
        )),
    };
    forward(node, o, cx, |opts| {
        opts.transport = transport;
        opts.port = port;
        opts.ip_protocol = address.ip_protocol;
        opts.local = local;
        opts.servers.extend(address.failover);
        opts.failback = address.failback;
        opts.tls = tls;
    })
}

/// `unix-stream("/dev/log")`, `unix-dgram("/dev/log")`: to a local syslog socket.
fn unix(node: &Node, o: &mut Options, cx: &DestinationContext) -> Result<Built, ConfigError> {
    let transport = if node.key() == "unix_stream" {
        Transport::UnixStream
    } else {
        Transport::UnixDgram
    };
    forward(node, o, cx, |opts| opts.transport = transport)
}

/// `usertty("root")`, `pipe("/dev/xconsole")`: notices for whoever is there now.
fn terminal(node: &Node, o: &mut Options, cx: &DestinationContext) -> Result<Built, ConfigError> {
    let format = FormatOptions::read(o, cx)?;
    let key = node.key();
    // What the writer holds at most (`pipe()`'s `log-fifo-size()`); the rest of the queue's
    // options mean nothing here (every message is written at once or dropped).
    let held = match key.as_str() {
        "pipe" => Queue::read(o, cx.globals)?.log_fifo_size,
        _ => cx.globals.log_fifo_size,
    };
    let value = node.first_value().ok_or_else(|| {
        let example = if key == "usertty" {
            "usertty(\"root\")"
        } else {
            "pipe(\"/dev/xconsole\")"
        };
        ConfigError::new(
            node.pos,
            format!("{}() needs a value: {example}", node.name),
        )
    })?;
    let reach = if key == "usertty" {
        Reach::Users(value.text.clone())
    } else if value.text.starts_with('/') {
        let mut rules = cx.globals.file.clone();
        o.apply(MAKE_FILE, |opt| options::apply_file_option(&mut rules, opt))?;
        Reach::Pipe(value.text.clone().into(), rules)
    } else {
        return Err(ConfigError::new(
            value.pos,
            format!(
                "pipe(\"{}\"): give the pipe's whole path, from /",
                value.text
            ),
        ));
    };
    // A pipe is written as a file is (syslog-ng's usertty() is not a file-like writer).
    let format = match reach {
        Reach::Pipe(..) => format.or_global(&cx.globals.file_template),
        Reach::Users(_) => format,
    };
    let dates = format.dates.clone();
    let formatter = format.formatter(Format::File(dates));
    let (component, id) = cx.counted_as(node);
    let counters = cx.stats.destination(&component, &id, &value.text);
    Ok(Arc::new(TerminalDestination::new(
        cx.label(),
        formatter,
        reach,
        counters,
        held,
    )))
}

/// The options of `program()`.
const PROGRAM: &[Declared] = &[
    read("inherit_environment", "inherit-environment(no)"),
    // The program runs until its connection ends, whatever this says.
    read("keep_alive", "keep-alive(yes)"),
];

/// `program("/usr/local/bin/alert")`: messages on a program's standard input.
fn program(node: &Node, o: &mut Options, cx: &DestinationContext) -> Result<Built, ConfigError> {
    let format = FormatOptions::read(o, cx)?;
    let queue = Queue::read(o, cx.globals)?;
    let (command, inherit_environment) = options::program_command(node, o, "/usr/local/bin/alert")?;
    o.last("keep_alive").map(Node::bool).transpose()?;
    let disk_buffer = queue.disk_buffer(o, || {
        format!(
            "{}-program-{:08x}",
            cx.name,
            crc32fast::hash(command.text.as_bytes())
        )
    })?;
    let dates = format.dates.clone();
    let formatter = format
        .or_global(&cx.globals.file_template)
        .formatter(Format::File(dates));
    let (component, id) = cx.counted_as(node);
    let counters = cx.stats.destination(&component, &id, &command.text);
    // A program that exited is started again as soon as its own delay allows
    // ([`Program`]), unless time-reopen() says to wait longer.
    let time_reopen = match o.last("time_reopen") {
        Some(_) => queue.time_reopen,
        None => Duration::from_secs(1),
    };
    let pacing = Pacing {
        time_reopen,
        failback: None,
        retries: 1,
        batch: Batching::default(),
        log_fifo_size: queue.log_fifo_size,
    };
    Ok(Arc::new(NetworkDestination::to(
        cx.label(),
        formatter,
        Arc::new(Program::new(command.text.clone(), inherit_environment)),
        pacing,
        disk_buffer,
        false,
        counters,
    )))
}

/// What every forwarding destination reads besides where it sends ([`FORMAT`], [`QUEUE`],
/// [`SOCKET`]), then its sender: `set` fills in where.
fn forward(
    node: &Node,
    o: &mut Options,
    cx: &DestinationContext,
    set: impl FnOnce(&mut NetworkOptions),
) -> Result<Built, ConfigError> {
    let key = node.key();
    let mut format = FormatOptions::read(o, cx)?;
    let queue = Queue::read(o, cx.globals)?;
    for name in ["keep_alive", "close_on_input"] {
        o.last(name).map(Node::bool).transpose()?;
    }
    let server = node.first_value().ok_or_else(|| {
        let example = if key.starts_with("unix") {
            "\"/dev/log\""
        } else {
            "\"10.0.0.1\""
        };
        ConfigError::new(
            node.pos,
            format!("{}() needs a server: {}({example})", node.name, node.name),
        )
    })?;
    let mut opts = NetworkOptions {
        transport: Transport::Tcp,
        servers: vec![server.text.clone()],
        port: 0,
        ip_protocol: None,
        local: None,
        octet_counting: false,
        failback: None,
        time_reopen: queue.time_reopen,
        so_sndbuf: o
            .last("so_sndbuf")
            .map(Node::u64)
            .transpose()?
            .map(|n| n as usize),
        so_keepalive: o.yes_no("so_keepalive", false)?,
        log_fifo_size: queue.log_fifo_size,
        disk_buffer: None,
        tls: None,
        relp: key == "relp",
    };
    set(&mut opts);
    let stream = matches!(opts.transport, Transport::Tcp | Transport::UnixStream);
    opts.octet_counting = key == "syslog" && stream;
    opts.disk_buffer = queue.disk_buffer(o, || {
        format!("{}-{key}-{}-{}", cx.name, server.text, opts.port)
    })?;
    if key == "syslog" {
        format.syslog_protocol = true;
    }
    let proto = Format::Proto(format.dates.clone());
    let formatter = format
        .or_global(&cx.globals.proto_template)
        .formatter(proto);
    let instance = match opts.transport {
        Transport::Tcp => format!("tcp,{}:{}", server.text, opts.port),
        Transport::Udp => format!("udp,{}:{}", server.text, opts.port),
        Transport::UnixStream | Transport::UnixDgram => server.text.clone(),
    };
    let (component, id) = cx.counted_as(node);
    let counters = cx.stats.destination(&component, &id, &instance);
    Ok(Arc::new(NetworkDestination::new(
        cx.label(),
        formatter,
        opts,
        counters,
    )))
}

/// The directory of a disk buffer named `name`: `sluice-<name>.rdq` (reliable) or `.dq`, with
/// anything but letters, digits and `-_.` replaced.
fn buffer_dir_name(name: &str, reliable: bool) -> String {
    let safe: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    let suffix = if reliable { "rdq" } else { "dq" };
    format!("sluice-{safe}.{suffix}")
}

/// `disk-buffer(…)` with syslog-ng 3.38's and 4.x's option names.
fn disk_buffer_options(opt: &Node) -> Result<DiskBufferOptions, ConfigError> {
    let mut d = DiskBufferOptions {
        reliable: false,
        dir: None,
        capacity: 1 << 30,
        cache_messages: 10_000,
        prealloc: false,
    };
    for o in opt.options() {
        match o.key().as_str() {
            "reliable" => d.reliable = o.bool()?,
            "dir" => d.dir = Some(o.string()?.into()),
            "disk_buf_size" | "capacity_bytes" => {
                let v = o.value()?;
                let size = v.as_u64()?;
                if size < 1 << 20 {
                    return Err(ConfigError::new(
                        v.pos,
                        format!("{}() is at least 1048576 bytes (1 MiB)", o.name),
                    ));
                }
                d.capacity = size;
            }
            "mem_buf_length" | "qout_size" | "front_cache_size" => {
                d.cache_messages = o.u64()? as usize
            }
            "mem_buf_size" => {
                // Bytes of memory (3.38, reliable buffers): kept as a message count at the
                // size of a typical message.
                d.cache_messages = (o.u64()? / 512).max(1) as usize;
            }
            "prealloc" => d.prealloc = o.bool()?,
            "flow_control_window_size" | "flow_control_window_bytes" | "truncate_size_ratio" => {
                o.value()?;
            }
            _ => {
                return Err(o.unknown_in(
                    opt,
                    &[
                        "reliable",
                        "dir",
                        "disk-buf-size",
                        "capacity-bytes",
                        "mem-buf-length",
                        "mem-buf-size",
                        "qout-size",
                        "front-cache-size",
                        "flow-control-window-size",
                        "flow-control-window-bytes",
                        "truncate-size-ratio",
                        "prealloc",
                    ],
                ))
            }
        }
    }
    Ok(d)
}

/// `failover(servers("a", "b") failback(tcp-probe-interval(60) successful-probes-required(3)))`.
fn failover(opt: &Node, address: &mut Address) -> Result<(), ConfigError> {
    let before = address.failover.len();
    for o in opt.options() {
        match o.key().as_str() {
            "servers" => address.failover.extend(o.values().map(|v| v.text.clone())),
            "failback" => {
                let mut fb = Failback {
                    probe_interval: Duration::from_secs(60),
                    successful_probes: 3,
                };
                for f in o.options() {
                    match f.key().as_str() {
                        "tcp_probe_interval" => {
                            fb.probe_interval = Duration::from_secs(f.u64()?.max(1))
                        }
                        "successful_probes_required" => {
                            fb.successful_probes = f.u64()?.max(1) as u32
                        }
                        _ => {
                            return Err(f.unknown_in(
                                o,
                                &["tcp-probe-interval", "successful-probes-required"],
                            ))
                        }
                    }
                }
                address.failback = Some(fb);
            }
            _ => return Err(o.unknown_in(opt, &["servers", "failback"])),
        }
    }
    if address.failover.len() == before {
        return Err(ConfigError::new(
            opt.pos,
            "failover() needs servers(): failover(servers(\"10.0.0.2\"))",
        ));
    }
    Ok(())
}

/// Every driver of this registry, for the configuration reference.
pub fn reference() -> Vec<sluice_config::declared::Entry> {
    DRIVERS
        .iter()
        .map(|f| sluice_config::declared::Entry {
            names: f.names.to_vec(),
            sample: f.sample,
            options: f.options.to_vec(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each destination driver is built once with each option it declares: an option is
    /// accepted exactly when the driver reads it.
    #[test]
    fn every_destination_reads_every_option_it_declares() {
        for driver in DRIVERS {
            sluice_config::declared::every_option_is_read_in(
                driver.sample,
                driver.options,
                |text| {
                    let mut text = text.to_string();
                    for (example, here) in logstore::EXAMPLE_FILES {
                        text = text.replace(example, here);
                    }
                    sluice_config::declared::build_one("destination", &text, |node| {
                        let cx = DestinationContext {
                            globals: &Globals::new(),
                            names: &Names::default(),
                            stats: &Arc::new(Registry::default()),
                            name: "d",
                            n: 0,
                        };
                        build(node, &cx).map(drop)
                    })
                },
            );
        }
    }

    /// A driver name is found once: no two declarations claim it, and none is also "not yet".
    #[test]
    fn every_driver_name_is_declared_once() {
        let names = DRIVERS.iter().flat_map(|d| d.names.iter().copied());
        sluice_config::declared::each_name_once(names, NOT_YET);
    }
}
