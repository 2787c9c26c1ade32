//! What a destination driver is ([`DestinationDriver`]), what it is built in
//! ([`DestinationContext`]), and the option parts several drivers share with the code that
//! reads them: how messages are formatted ([`FormatOptions`]), queued ([`Queue`], disk
//! buffers), sent by lanes and batches ([`Threaded`]), and over sockets. The drivers are the
//! folders beside this file; `registry.rs` lists them.

use super::diskq::DiskBufferOptions;
use super::format::{Format, Formatter};
use super::sender::Batching;
use super::terminal::{Reach, TerminalDestination};
use super::Destination;
use crate::options::{DefaultTemplate, Globals};
use crate::stats::Registry;
use sluice_config::declared::{not_yet, read, Declared, Options};
use sluice_config::{ConfigError, Node};
use sluice_model::macros::DateOptions;
use sluice_model::template::Names;
use sluice_model::Template;
use std::sync::Arc;
use std::time::Duration;

/// A destination driver: the names it answers to, its options, and how it is made from them.
pub struct DestinationDriver {
    /// As `Node::key` gives them (`unix_stream`).
    pub names: &'static [&'static str],
    /// What it does, for the configuration reference.
    pub about: &'static str,
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
    pub(super) fn label(&self) -> String {
        format!("destination {}", self.name)
    }

    /// The driver as syslog-ng's statistics name it: `dst.file` and `d_file#0`.
    pub(super) fn counted_as(&self, node: &Node) -> (String, String) {
        self.counted_as_driver(&node.key())
    }

    /// As [`Self::counted_as`], for a driver counted under another driver's name (`key`):
    /// `graylog2()` is a `network()` in syslog-ng's library.
    pub(super) fn counted_as_driver(&self, key: &str) -> (String, String) {
        (
            format!("dst.{}", key.replace('_', "-")),
            format!("{}#{}", self.name, self.n),
        )
    }
}

/// How a destination formats messages: read by [`FormatOptions::apply`].
pub(super) const FORMAT: &[Declared] = &[
    read("template", "template(\"$MSG\\n\")").about("how the destination writes a message: a template statement's name or template text", "syslog-ng's file format (`file()`, `program()`, `pipe()`), its wire format (network destinations), or `options {}`'s `file-template()` / `proto-template()`"),
    read("template_escape", "template-escape(yes)").about("quotes and backslashes in values escaped", "no"),
    read("ts_format", "ts-format(iso)").about("the format of written timestamps: `rfc3164`, `rfc3339`, `iso`, `unix`", "rfc3164"),
    read("frac_digits", "frac-digits(3)").about("digits of the fraction of a second in written timestamps", "0"),
    read("time_zone", "time-zone(\"UTC\")").about("the time zone of stamps read or written (`date-parser()`: of the text)", "the machine's"),
    read("send_time_zone", "send-time-zone(\"+01:00\")").about("the time zone written stamps are in", "the message's"),
    read("flags", "flags(no-multi-line)").about("`no-multi-line` (line ends in a message become spaces), `syslog-protocol` (RFC5424)", "none"),
];

/// The dates of a destination's templates, read by [`FormatOptions::apply`].
#[cfg_attr(not(any(feature = "http", feature = "kafka")), allow(dead_code))]
pub(super) const DATES: &[Declared] = &[
    read("template_escape", "template-escape(yes)")
        .about("quotes and backslashes in values escaped", "no"),
    read("ts_format", "ts-format(iso)").about(
        "the format of written timestamps: `rfc3164`, `rfc3339`, `iso`, `unix`",
        "rfc3164",
    ),
    read("frac_digits", "frac-digits(3)").about(
        "digits of the fraction of a second in written timestamps",
        "0",
    ),
    read("time_zone", "time-zone(\"UTC\")").about(
        "the time zone of stamps read or written (`date-parser()`: of the text)",
        "the machine's",
    ),
    read("send_time_zone", "send-time-zone(\"+01:00\")")
        .about("the time zone written stamps are in", "the message's"),
];

/// syslog-ng's options of threaded destinations (`http()`, and those to come): lanes and
/// batches, read by [`Threaded::read`].
#[cfg_attr(not(any(feature = "http", feature = "kafka")), allow(dead_code))]
pub(super) const THREADED: &[Declared] = &[
    read("workers", "workers(2)").about("senders the destination runs in parallel, each with its queue (or disk buffer) and connection", "1; 4 (elasticsearch-http, opensearch)"),
    read("worker_partition_key", "worker-partition-key(\"$HOST\")").about("the template that keeps messages of a key on one worker", "none"),
    read("batch_lines", "batch-lines(100)").about("the most messages a sender puts in one batch or request", "what is queued; 100 (elasticsearch-http, opensearch)"),
    read("batch_bytes", "batch-bytes(524288)").about("the most bytes a sender puts in one batch or request", "driver's"),
    read("batch_timeout", "batch-timeout(500)").about("milliseconds a sender waits to fill a batch", "0 (send at once)"),
    read("retries", "retries(5)").about("times a batch is sent again before it is dropped", "3"),
];

/// How a destination queues what it has not written.
pub(super) const QUEUE: &[Declared] = &[
    read("log_fifo_size", "log-fifo-size(1000)").about(
        "messages a destination queues in memory on paths without flow control",
        "10000",
    ),
    // syslog-ng writes in batches of this many; sluice writes what a read brought as one.
    read("flush_lines", "flush-lines(100)").about(
        "accepted: sluice writes what a read brought in one write (docs/compatibility.md)",
        "",
    ),
    read("flush_timeout", "flush-timeout(10)").about("accepted, as `flush-lines()`", ""),
    read("time_reopen", "time-reopen(1)").about(
        "seconds before a failed connection or file is tried again",
        "60",
    ),
    read("persist_name", "persist-name(\"p\")").about(
        "the name a driver keeps its state under, instead of one made from its options",
        "made",
    ),
];

/// A queue on disk, read by [`Queue::disk_buffer`].
pub(super) const DISK_BUFFER: &[Declared] = &[read(
    "disk_buffer",
    "disk-buffer(reliable(yes) disk-buf-size(1048576))",
).about("a forwarding destination's queue on disk: `reliable()`, `disk-buf-size()`, `mem-buf-length()`, `mem-buf-size()`, `dir()`", "none: a queue in memory")];

/// syslog-ng's options of every destination that sluice does not have yet.
pub(super) const EVERY_LATER: &[Declared] = &[
    not_yet("mark_mode"),
    not_yet("mark_freq"),
    not_yet("suppress"),
    not_yet("throttle"),
    not_yet("local_time_zone"),
    not_yet("on_error"),
];

/// Batches of syslog-ng's newer versions for destinations that are not threaded in sluice.
pub(super) const BATCH_LATER: &[Declared] = &[not_yet("batch_lines"), not_yet("batch_timeout")];

/// The socket options of every forwarding destination.
pub(super) const SOCKET: &[Declared] = &[
    read("so_sndbuf", "so-sndbuf(1048576)")
        .about("the socket's send buffer, in bytes", "the kernel's"),
    read("so_keepalive", "so-keepalive(yes)").about("TCP keepalives on connections", "no"),
    // A connection is kept open and re-opened whatever these say.
    read("keep_alive", "keep-alive(yes)")
        .about("connections and programs are kept over a reload", "yes"),
    read("close_on_input", "close-on-input(no)").about(
        "a `program()` destination is closed when the program writes to its output",
        "yes",
    ),
];

/// The options that say how a destination formats messages ([`FORMAT`]).
pub(super) struct FormatOptions {
    pub(super) dates: DateOptions,
    pub(super) template: Option<Template>,
    pub(super) escape: Option<bool>,
    pub(super) syslog_protocol: bool,
    pub(super) no_multi_line: bool,
}

impl FormatOptions {
    pub(super) fn read(
        o: &mut Options,
        cx: &DestinationContext,
    ) -> Result<FormatOptions, ConfigError> {
        FormatOptions::read_part(o, cx, FORMAT)
    }

    /// Reads the options of `part` (of [`FORMAT`]).
    pub(super) fn read_part(
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
    pub(super) fn apply(&mut self, opt: &Node, names: &Names) -> Result<bool, ConfigError> {
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
    pub(super) fn or_global(mut self, global: &DefaultTemplate) -> FormatOptions {
        if self.template.is_none() && !self.syslog_protocol {
            self.template = global.template.clone();
        }
        self
    }

    /// The formatter these options make: RFC5424 with `flags(syslog-protocol)` (the template,
    /// if any, as its message part), else the template, else the driver's `default`.
    pub(super) fn formatter(self, default: Format) -> Formatter {
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
pub(super) struct Queue {
    pub(super) log_fifo_size: usize,
    pub(super) time_reopen: Duration,
    pub(super) persist_name: Option<String>,
}

impl Queue {
    pub(super) fn read(o: &mut Options, g: &Globals) -> Result<Queue, ConfigError> {
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
    pub(super) fn disk_buffer(
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
pub(super) struct Threaded {
    pub(super) workers: usize,
    pub(super) partition_key: Option<Template>,
    pub(super) batch: Batching,
    pub(super) retries: u32,
}

#[cfg_attr(not(any(feature = "http", feature = "kafka")), allow(dead_code))]
impl Threaded {
    /// How a sender of these lanes paces itself: the queue's `time-reopen()` and
    /// `log-fifo-size()`, these `retries()` (at least one) and batches, no failback.
    pub(super) fn pacing(&self, queue: &Queue) -> super::sender::Pacing {
        super::sender::Pacing {
            time_reopen: queue.time_reopen,
            failback: None,
            retries: self.retries.max(1),
            batch: self.batch,
            log_fifo_size: queue.log_fifo_size,
        }
    }

    pub(super) fn read(o: &mut Options, cx: &DestinationContext) -> Result<Threaded, ConfigError> {
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

/// The directory of a disk buffer named `name`: `sluice-<name>.rdq` (reliable) or `.dq`, with
/// anything but letters, digits and `-_.` replaced.
pub(super) fn buffer_dir_name(name: &str, reliable: bool) -> String {
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
pub(super) fn disk_buffer_options(opt: &Node) -> Result<DiskBufferOptions, ConfigError> {
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

/// `usertty()` and `pipe()`: a terminal destination with what its driver read.
pub(super) fn terminal(
    node: &Node,
    cx: &DestinationContext,
    format: FormatOptions,
    reach: Reach,
    instance: &str,
    held: usize,
) -> Result<Built, ConfigError> {
    let dates = format.dates.clone();
    let formatter = format.formatter(Format::File(dates));
    let (component, id) = cx.counted_as(node);
    let counters = cx.stats.destination(&component, &id, instance);
    Ok(Arc::new(TerminalDestination::new(
        cx.label(),
        formatter,
        reach,
        counters,
        held,
    )))
}
