//! Options shared by `options {}` and the drivers, read from configuration nodes.
//!
//! syslog-ng lets many options be set globally and overridden per driver (`keep-hostname()`,
//! `log-msg-size()`, `perm()` …). [`Globals`] holds the global values with syslog-ng's
//! defaults; [`SourceOptions`] and the `file()` options start from them and read the
//! driver's own. Each `apply` returns `Ok(false)` for a name it does not know, so the caller
//! can report it with the list of valid names.

use crate::file_open::FileOptions;
use regex::bytes::Regex;
use sluice_config::declared::{not_yet, read, Declared};
use sluice_config::{ConfigError, Node, Value};
use sluice_model::macros::DateOptions;
use sluice_model::message::{facility_by_name, severity_by_name, tag_id};
use sluice_model::time::TsFormat;
use sluice_model::{Ingest, Tags, Zone};
use sluice_protocol::multiline::MultiLine;
use sluice_protocol::ParseFlags;
use std::sync::Arc;
use std::time::Duration;

#[derive(Clone, Debug)]
pub struct Globals {
    pub keep_hostname: bool,
    pub chain_hostnames: bool,
    pub use_dns: bool,
    pub use_fqdn: bool,
    pub dns_cache: bool,
    pub dns_cache_expire: Duration,
    /// `dns-cache-hosts()`: names for addresses before DNS is asked.
    pub dns_cache_hosts: Option<Arc<crate::dns::Hosts>>,
    pub normalize_hostnames: bool,
    pub check_hostname: bool,
    pub bad_hostname: Option<Regex>,
    pub keep_timestamp: bool,
    pub log_msg_size: usize,
    pub log_iw_size: u32,
    pub log_fetch_limit: u32,
    pub min_iw_size_per_reader: u32,
    pub trim_large_messages: bool,
    pub recv_time_zone: Option<Zone>,
    /// Messages a destination queues from paths without flow control before it drops.
    pub log_fifo_size: usize,
    /// How long a destination waits before connecting again after a failure.
    pub time_reopen: Duration,
    pub dates: DateOptions,
    pub file: FileOptions,
    pub local_zone: Zone,
    /// `stats-level()`, `stats(level())`: 0 to 3.
    pub stats_level: u8,
    /// `stats-freq()`, `stats(freq())`: seconds between `Log statistics;` messages; 0: none.
    pub stats_freq: u64,
    /// `stats(prometheus-listen("ADDR:PORT"))`: serve the counters to Prometheus there.
    pub prometheus_listen: Option<std::net::SocketAddr>,
    /// `stats-max-dynamics()`, `stats(max-dynamics())`: the most counters made for what
    /// messages carry (hosts, senders, programs); `-1` is no limit.
    pub stats_max_dynamics: usize,
    /// `memory-limit()`: the bytes of messages held on their way out ([`crate::memory`]);
    /// `None`: a quarter of the machine's memory.
    pub memory_limit: Option<u64>,
    /// `pass-unix-credentials()`: unix sources read their senders' credentials unless a
    /// source says otherwise.
    pub pass_unix_credentials: bool,
    /// `file-template()`: what file-like destinations (`file()`, `pipe()`, `program()`,
    /// `stdout()`, `logstore()`) format with when they have no `template()` of their own.
    pub file_template: DefaultTemplate,
    /// `proto-template()`: the same for destinations that send BSD syslog lines
    /// (`network()`, `tcp()`, `udp()`, `unix-*()`; not `syslog()`, whose template is the
    /// RFC5424 message part).
    pub proto_template: DefaultTemplate,
}

/// `file-template(name)` or `proto-template(name)`: the name of a template statement, read
/// with the other global options, and the template once the statements are compiled.
#[derive(Clone, Debug, Default)]
pub struct DefaultTemplate {
    pub name: Option<Value>,
    pub template: Option<sluice_model::Template>,
}

impl DefaultTemplate {
    /// Finds the named template statement; a name that none has is a configuration error
    /// (syslog-ng says "Error resolving file template" and formats as if it had none).
    pub fn resolve(
        &mut self,
        option: &str,
        names: &sluice_model::template::Names,
    ) -> Result<(), ConfigError> {
        if let Some(v) = &self.name {
            let t = names.templates.get(&v.text).ok_or_else(|| {
                ConfigError::new(
                    v.pos,
                    format!(
                        "{option}() names a template statement, and none is named '{}'",
                        v.text
                    ),
                )
            })?;
            self.template = Some(t.clone());
        }
        Ok(())
    }
}

impl Globals {
    pub fn new() -> Globals {
        Globals {
            keep_hostname: false,
            chain_hostnames: false,
            use_dns: true,
            use_fqdn: false,
            dns_cache: true,
            dns_cache_expire: Duration::from_secs(3600),
            dns_cache_hosts: None,
            normalize_hostnames: false,
            check_hostname: false,
            bad_hostname: None,
            keep_timestamp: true,
            log_msg_size: 65536,
            log_iw_size: 100_000,
            log_fetch_limit: 10,
            min_iw_size_per_reader: 100,
            trim_large_messages: false,
            recv_time_zone: None,
            log_fifo_size: 10_000,
            time_reopen: Duration::from_secs(60),
            dates: DateOptions::default(),
            file: FileOptions {
                create_dirs: false,
                perm: None,
                dir_perm: None,
                owner: None,
                group: None,
                dir_owner: None,
                dir_group: None,
                fsync: false,
                time_reap: Duration::from_secs(60),
                log_fifo_size: 10_000,
                time_reopen: Duration::from_secs(60),
                readable: false,
            },
            local_zone: Zone::local().clone(),
            stats_level: 0,
            stats_freq: 600,
            prometheus_listen: None,
            stats_max_dynamics: crate::stats::STATS_MAX_DYNAMICS,
            memory_limit: None,
            pass_unix_credentials: true,
            file_template: DefaultTemplate::default(),
            proto_template: DefaultTemplate::default(),
        }
    }

    /// Names `options {}` accepts.
    pub const NAMES: &'static [&'static str] = &[
        "keep_hostname",
        "chain_hostnames",
        "use_dns",
        "use_fqdn",
        "dns_cache",
        "dns_cache_expire",
        "dns_cache_expire_failed",
        "dns_cache_size",
        "dns_cache_hosts",
        "normalize_hostnames",
        "check_hostname",
        "bad_hostname",
        "keep_timestamp",
        "log_msg_size",
        "log_iw_size",
        "log_fetch_limit",
        "min_iw_size_per_reader",
        "trim_large_messages",
        "recv_time_zone",
        "time_zone",
        "send_time_zone",
        "ts_format",
        "frac_digits",
        "create_dirs",
        "perm",
        "dir_perm",
        "owner",
        "group",
        "dir_owner",
        "dir_group",
        "file_template",
        "proto_template",
        "fsync",
        "time_reap",
        "flush_lines",
        "flush_timeout",
        "log_fifo_size",
        "threaded",
        "stats_freq",
        "stats_level",
        "stats_max_dynamics",
        "stats",
        "memory_limit",
        "mark_freq",
        "mark_mode",
        "time_reopen",
        "time_sleep",
        "suppress",
        "use_time_recvd",
        "local_time_zone",
        "log_level",
        "use_uniqid",
        "on_error",
        "persist_only",
        "pass_unix_credentials",
    ];

    /// Applies one `options {}` entry.
    pub fn apply(&mut self, opt: &Node) -> Result<bool, ConfigError> {
        match opt.key().as_str() {
            "keep_hostname" => self.keep_hostname = opt.bool()?,
            "chain_hostnames" => self.chain_hostnames = opt.bool()?,
            "use_dns" => self.use_dns = use_dns(opt)?,
            "use_fqdn" => self.use_fqdn = opt.bool()?,
            "dns_cache" => self.dns_cache = opt.bool()?,
            "dns_cache_expire" => self.dns_cache_expire = Duration::from_secs(opt.u64()?),
            "dns_cache_expire_failed" | "dns_cache_size" => {
                opt.u64()?;
            }
            "dns_cache_hosts" => {
                let v = opt.value()?;
                let hosts = crate::dns::Hosts::open(std::path::Path::new(&v.text))
                    .map_err(|e| ConfigError::new(v.pos, format!("{}: {e}", v.text)))?;
                self.dns_cache_hosts = Some(Arc::new(hosts));
            }
            "normalize_hostnames" => self.normalize_hostnames = opt.bool()?,
            "check_hostname" => self.check_hostname = opt.bool()?,
            "bad_hostname" => {
                let v = opt.value()?;
                self.bad_hostname = Some(
                    sluice_model::filter::regex(&v.text, false)
                        .map_err(|e| ConfigError::new(v.pos, e))?,
                );
            }
            "keep_timestamp" => self.keep_timestamp = opt.bool()?,
            "log_msg_size" => self.log_msg_size = positive(opt)? as usize,
            "log_iw_size" => self.log_iw_size = positive(opt)? as u32,
            "log_fetch_limit" => self.log_fetch_limit = positive(opt)? as u32,
            "min_iw_size_per_reader" => self.min_iw_size_per_reader = positive(opt)? as u32,
            "trim_large_messages" => self.trim_large_messages = opt.bool()?,
            "pass_unix_credentials" => self.pass_unix_credentials = opt.bool()?,
            "recv_time_zone" => self.recv_time_zone = Some(zone(opt)?),
            "time_zone" | "send_time_zone" => self.dates.zone = Some(zone(opt)?),
            "local_time_zone" => self.local_zone = zone(opt)?,
            "ts_format" => self.dates.ts_format = ts_format(opt)?,
            "frac_digits" => self.dates.frac_digits = frac_digits(opt)?,
            "log_fifo_size" => self.log_fifo_size = positive(opt)? as usize,
            "time_reopen" => self.time_reopen = Duration::from_secs(positive(opt)?),
            "flush_lines" | "flush_timeout" | "time_sleep" | "log_level" => {
                opt.value()?;
            }
            "threaded" => {
                opt.bool()?;
            }
            "stats_freq" => self.stats_freq = opt.u64()?,
            "stats_level" => self.stats_level = stats_level(opt)?,
            "stats_max_dynamics" => self.stats_max_dynamics = max_dynamics(opt)?,
            "memory_limit" => {
                let v = opt.value()?;
                let bytes = crate::memory::parse_size(&v.text)
                    .filter(|b| *b >= 1 << 20)
                    .ok_or_else(|| {
                        ConfigError::new(
                            v.pos,
                            format!(
                                "memory-limit({}) is not a size of at least 1M: bytes, or a number with K, M or G (memory-limit(512M))",
                                v.text
                            ),
                        )
                    })?;
                self.memory_limit = Some(bytes);
            }
            "stats" => {
                for o in opt.options() {
                    match o.key().as_str() {
                        "level" => self.stats_level = stats_level(o)?,
                        "freq" => self.stats_freq = o.u64()?,
                        "prometheus_listen" => {
                            let v = o.value()?;
                            self.prometheus_listen = Some(v.text.parse().map_err(|_| {
                                ConfigError::new(
                                    v.pos,
                                    format!(
                                        "'{}' is not an address and port such as 127.0.0.1:9577",
                                        v.text
                                    ),
                                )
                            })?);
                        }
                        "max_dynamics" => self.stats_max_dynamics = max_dynamics(o)?,
                        "lifetime" | "syslog_stats" | "healthcheck_freq" => {
                            o.value()?;
                        }
                        _ => {
                            return Err(o.unknown_in(
                                opt,
                                &[
                                    "level",
                                    "freq",
                                    "prometheus-listen",
                                    "lifetime",
                                    "max-dynamics",
                                    "syslog-stats",
                                    "healthcheck-freq",
                                ],
                            ))
                        }
                    }
                }
            }
            // syslog-ng 3.38 sends no MARK message for these (docs/compatibility.md).
            "mark_freq" => {
                opt.u64()?;
            }
            "mark_mode" => {
                let v = opt.value()?;
                match sluice_config::normalize(&v.text).as_str() {
                    "internal" | "none" => {}
                    "dst_idle" | "host_idle" | "periodical" => {
                        return Err(ConfigError::not_supported(
                            v.pos,
                            &format!("mark-mode({}) for every destination", v.text),
                        ))
                    }
                    _ => {
                        return Err(ConfigError::unknown(
                            v.pos,
                            "mark mode",
                            &v.text,
                            "",
                            &["internal", "dst-idle", "host-idle", "periodical", "none"],
                        ))
                    }
                }
            }
            "file_template" => self.file_template.name = Some(opt.value()?.clone()),
            "proto_template" => self.proto_template.name = Some(opt.value()?.clone()),
            "use_time_recvd" => {
                if opt.bool()? {
                    return Err(ConfigError::not_supported(opt.pos, "use-time-recvd(yes)"));
                }
            }
            "suppress" | "use_uniqid" | "on_error" | "persist_only" => {
                return Err(ConfigError::not_supported(
                    opt.pos,
                    &format!("the global option {}()", opt.name),
                ))
            }
            _ => return apply_file_option(&mut self.file, opt),
        }
        Ok(true)
    }

    /// Per-driver date options (`ts-format()`, `frac-digits()`, `time-zone()`).
    pub fn apply_dates(dates: &mut DateOptions, opt: &Node) -> Result<bool, ConfigError> {
        match opt.key().as_str() {
            "ts_format" => dates.ts_format = ts_format(opt)?,
            "frac_digits" => dates.frac_digits = frac_digits(opt)?,
            "time_zone" | "send_time_zone" => dates.zone = Some(zone(opt)?),
            _ => return Ok(false),
        }
        Ok(true)
    }
}

/// How a file, or a named pipe, and its directories are made (read by
/// [`apply_file_option`]): declared by `file()`, `logstore()` and both `pipe()` drivers.
pub static MAKE_FILE: &[Declared] = &[
    read("create_dirs", "create-dirs(yes)").about(
        "file destinations create the directories of their paths",
        "no",
    ),
    read("perm", "perm(0600)").about(
        "the mode of files a destination creates (and of a unix socket)",
        "0600 (sockets: 0666)",
    ),
    read("dir_perm", "dir-perm(0700)")
        .about("the mode of directories a file destination creates", "0700"),
    read("owner", "owner(\"root\")").about(
        "the owner of files a destination creates (and of a unix socket)",
        "the process's",
    ),
    read("group", "group(\"root\")").about(
        "the group of files a destination creates (and of a unix socket)",
        "the process's",
    ),
    read("dir_owner", "dir-owner(\"root\")").about(
        "the owner of directories a file destination creates",
        "the process's",
    ),
    read("dir_group", "dir-group(\"root\")").about(
        "the group of directories a file destination creates",
        "the process's",
    ),
];

/// Options of files and their directories, valid both globally and on `file()`.
pub fn apply_file_option(f: &mut FileOptions, opt: &Node) -> Result<bool, ConfigError> {
    match opt.key().as_str() {
        "create_dirs" => f.create_dirs = opt.bool()?,
        "perm" => f.perm = Some(mode(opt)?),
        "dir_perm" => f.dir_perm = Some(mode(opt)?),
        "owner" => f.owner = Some(user(opt)?),
        "group" => f.group = Some(group(opt)?),
        "dir_owner" => f.dir_owner = Some(user(opt)?),
        "dir_group" => f.dir_group = Some(group(opt)?),
        "fsync" => f.fsync = opt.bool()?,
        "time_reap" => f.time_reap = Duration::from_secs(positive(opt)?),
        _ => return Ok(false),
    }
    Ok(true)
}

impl Default for Globals {
    fn default() -> Globals {
        Globals::new()
    }
}

fn stats_level(opt: &Node) -> Result<u8, ConfigError> {
    let v = opt.value()?;
    match v.as_u64()? {
        n @ 0..=3 => Ok(n as u8),
        _ => Err(ConfigError::new(v.pos, "stats level is 0, 1, 2 or 3")),
    }
}

/// A number of counters, or `-1` for no limit.
fn max_dynamics(opt: &Node) -> Result<usize, ConfigError> {
    let v = opt.value()?;
    if v.text.trim() == "-1" {
        return Ok(usize::MAX);
    }
    Ok(v.as_u64()? as usize)
}

fn positive(opt: &Node) -> Result<u64, ConfigError> {
    let v = opt.u64()?;
    if v == 0 {
        return Err(ConfigError::new(
            opt.value()?.pos,
            format!("{}() must be greater than 0", opt.name),
        ));
    }
    Ok(v)
}

fn use_dns(opt: &Node) -> Result<bool, ConfigError> {
    let v = opt.value()?;
    match v.text.as_str() {
        "persist_only" | "persist-only" => {
            Err(ConfigError::not_supported(v.pos, "use-dns(persist_only)"))
        }
        _ => v.as_bool(),
    }
}

fn zone(opt: &Node) -> Result<Zone, ConfigError> {
    let v = opt.value()?;
    Zone::parse(&v.text).map_err(|e| ConfigError::new(v.pos, e))
}

fn ts_format(opt: &Node) -> Result<TsFormat, ConfigError> {
    let v = opt.value()?;
    TsFormat::parse(&v.text).ok_or_else(|| {
        ConfigError::unknown(
            v.pos,
            "timestamp format",
            &v.text,
            "",
            &["rfc3164", "bsd", "rfc3339", "iso", "full", "unix"],
        )
    })
}

fn frac_digits(opt: &Node) -> Result<u8, ConfigError> {
    let n = opt.u64()?;
    if n > 6 {
        return Err(ConfigError::new(
            opt.value()?.pos,
            "frac-digits() is at most 6",
        ));
    }
    Ok(n as u8)
}

/// A file mode such as `0644`; `-1` (syslog-ng's "leave as is") is refused as unsupported.
pub(crate) fn mode(opt: &Node) -> Result<u32, ConfigError> {
    let v = opt.value()?;
    if v.text == "-1" {
        return Err(ConfigError::not_supported(
            v.pos,
            &format!("{}(-1)", opt.name),
        ));
    }
    let text = if v.text.starts_with('0') {
        v.text.clone()
    } else {
        format!("0{}", v.text)
    };
    let octal = Value { text, ..v.clone() };
    octal.as_u64().map(|n| n as u32)
}

pub(crate) fn user(opt: &Node) -> Result<u32, ConfigError> {
    let v = opt.value()?;
    if let Ok(n) = v.text.parse() {
        return Ok(n);
    }
    lookup_id(&v.text, true)
        .ok_or_else(|| ConfigError::new(v.pos, format!("unknown user '{}'", v.text)))
}

pub(crate) fn group(opt: &Node) -> Result<u32, ConfigError> {
    let v = opt.value()?;
    if let Ok(n) = v.text.parse() {
        return Ok(n);
    }
    lookup_id(&v.text, false)
        .ok_or_else(|| ConfigError::new(v.pos, format!("unknown group '{}'", v.text)))
}

/// A user or group id from `/etc/passwd` / `/etc/group` (name:x:id:…).
fn lookup_id(name: &str, user: bool) -> Option<u32> {
    let file = if user { "/etc/passwd" } else { "/etc/group" };
    std::fs::read_to_string(file)
        .ok()?
        .lines()
        .find_map(|line| {
            let mut fields = line.split(':');
            (fields.next()? == name).then(|| fields.nth(1)?.parse().ok())?
        })
}

/// A source's reading and parsing options.
#[derive(Clone, Debug)]
pub struct SourceOptions {
    pub flags: ParseFlags,
    pub no_parse: bool,
    /// `flags(empty-lines)`: empty messages are kept (by default they are dropped, counted).
    pub empty_lines: bool,
    pub store_raw_message: bool,
    pub keep_hostname: bool,
    pub chain_hostnames: bool,
    pub use_dns: bool,
    /// `dns-cache()`: whether `dns-cache-hosts()` names the source's senders.
    pub dns_cache: bool,
    pub use_fqdn: bool,
    pub normalize_hostnames: bool,
    pub keep_timestamp: bool,
    pub log_msg_size: usize,
    pub log_iw_size: u32,
    pub log_fetch_limit: u32,
    pub trim_large_messages: bool,
    pub host_override: Option<Arc<[u8]>>,
    pub program_override: Option<Arc<[u8]>>,
    pub default_facility: Option<u16>,
    pub default_severity: Option<u8>,
    pub time_zone: Option<Zone>,
    pub tags: Vec<String>,
    pub bad_hostname: Option<Regex>,
    /// `multi-line-mode()` and its `multi-line-*()` options, as given.
    pub multi_line: MultiLineOptions,
    /// `encoding()` other than UTF-8.
    pub encoding: Option<crate::encoding::Charset>,
    /// `pad-size()`: the input is records of this many bytes.
    pub pad_size: Option<usize>,
    /// `format(json)`: each record a JSON object.
    pub json: bool,
}

/// `multi-line-mode()`, `multi-line-prefix()`, `multi-line-garbage()`, `multi-line-suffix()`
/// and `multi-line-timeout()`, as given; [`MultiLineOptions::build`] checks them together.
#[derive(Clone, Debug, Default)]
pub struct MultiLineOptions {
    mode: Option<Value>,
    prefix: Option<Value>,
    garbage: Option<Value>,
    suffix: Option<Value>,
    timeout: Option<Duration>,
}

/// How long the last record of a stream waits for more lines without `multi-line-timeout()`.
const MULTI_LINE_TIMEOUT: Duration = Duration::from_secs(10);

impl MultiLineOptions {
    /// The lines' joining, and how long the last record waits; `None` without a mode (or
    /// with `none`).
    pub fn build(&self) -> Result<Option<(Arc<MultiLine>, Duration)>, ConfigError> {
        let Some(mode) = &self.mode else {
            let given = [&self.prefix, &self.garbage, &self.suffix];
            return match given.into_iter().flatten().next() {
                Some(v) => Err(ConfigError::new(
                    v.pos,
                    "this goes with multi-line-mode(): multi-line-mode(prefix-garbage) multi-line-prefix(\"^[0-9]{4}-\")",
                )),
                None => Ok(None),
            };
        };
        let regex = |v: &Option<Value>, name: &str| -> Result<Regex, ConfigError> {
            let v = v.as_ref().ok_or_else(|| {
                ConfigError::new(
                    mode.pos,
                    format!(
                        "multi-line-mode({}) needs {name}(\"regular expression\")",
                        mode.text
                    ),
                )
            })?;
            Regex::new(&v.text).map_err(|e| ConfigError::new(v.pos, format!("{name}(): {e}")))
        };
        let multi = match sluice_config::normalize(&mode.text).as_str() {
            "none" => return Ok(None),
            "indented" => MultiLine::Indented,
            "regexp" | "prefix_garbage" => MultiLine::PrefixGarbage {
                prefix: regex(&self.prefix, "multi-line-prefix")?,
                garbage: self
                    .garbage
                    .is_some()
                    .then(|| regex(&self.garbage, "multi-line-garbage"))
                    .transpose()?,
            },
            "prefix_suffix" => MultiLine::PrefixSuffix {
                prefix: regex(&self.prefix, "multi-line-prefix")?,
                suffix: regex(&self.suffix, "multi-line-suffix")?,
            },
            _ => {
                return Err(ConfigError::unknown(
                    mode.pos,
                    "multi-line-mode",
                    &mode.text,
                    "",
                    &[
                        "indented",
                        "regexp",
                        "prefix-garbage",
                        "prefix-suffix",
                        "none",
                    ],
                ))
            }
        };
        Ok(Some((
            Arc::new(multi),
            self.timeout.unwrap_or(MULTI_LINE_TIMEOUT),
        )))
    }
}

/// Flags a source accepts in `flags()`.
pub const SOURCE_FLAGS: &[&str] = &[
    "no-parse",
    "syslog-protocol",
    "no-hostname",
    "expect-hostname",
    "check-hostname",
    "store-raw-message",
    "validate-utf8",
    "sanitize-utf8",
    "assume-utf8",
    "no-multi-line",
    "store-legacy-msghdr",
    "no-header",
    "kernel",
    "empty-lines",
    "dont-store-legacy-msghdr",
    "threaded",
    "no-rfc3164-fallback",
    "guess-timezone",
];

/// The options of sources that read streams of lines (not datagrams), read by
/// [`SourceOptions::apply`] too.
pub static MULTI_LINE: &[Declared] = &[
    read("multi_line_mode", "multi-line-mode(indented)").about(
        "how lines join into records: `indented`, `regexp`, `prefix-garbage`, `prefix-suffix`",
        "none",
    ),
    read(
        "multi_line_prefix",
        "multi-line-prefix(\"^x\") multi-line-mode(regexp)",
    )
    .about("the regular expression that starts a record", "none"),
    read(
        "multi_line_garbage",
        "multi-line-garbage(\"^x\") multi-line-prefix(\"^y\") multi-line-mode(prefix-garbage)",
    )
    .about(
        "`multi-line-mode(prefix-garbage)`: what is not part of a record",
        "none",
    ),
    read(
        "multi_line_suffix",
        "multi-line-suffix(\"^x\") multi-line-prefix(\"^y\") multi-line-mode(prefix-suffix)",
    )
    .about("the regular expression that ends a record", "none"),
    read("multi_line_timeout", "multi-line-timeout(5)").about(
        "seconds the last record waits for the line that ends it",
        "10",
    ),
];

impl SourceOptions {
    pub fn new(g: &Globals) -> SourceOptions {
        SourceOptions {
            flags: ParseFlags {
                check_hostname: g.check_hostname,
                ..ParseFlags::default()
            },
            no_parse: false,
            empty_lines: false,
            store_raw_message: false,
            keep_hostname: g.keep_hostname,
            chain_hostnames: g.chain_hostnames,
            use_dns: g.use_dns,
            dns_cache: g.dns_cache,
            use_fqdn: g.use_fqdn,
            normalize_hostnames: g.normalize_hostnames,
            keep_timestamp: g.keep_timestamp,
            log_msg_size: g.log_msg_size,
            log_iw_size: g.log_iw_size,
            log_fetch_limit: g.log_fetch_limit,
            trim_large_messages: g.trim_large_messages,
            host_override: None,
            program_override: None,
            default_facility: None,
            default_severity: None,
            time_zone: g.recv_time_zone.clone(),
            tags: Vec::new(),
            bad_hostname: g.bad_hostname.clone(),
            multi_line: MultiLineOptions::default(),
            encoding: None,
            pad_size: None,
            json: false,
        }
    }

    /// The options every source has, read by [`SourceOptions::apply`].
    pub const DECLARED: &'static [Declared] = &[
        read("flags", "flags(no-parse)").about("how a source reads: `no-parse`, `syslog-protocol`, `no-multi-line`, `validate-utf8`, `empty-lines`, `expect-hostname`…", "none"),
        read("keep_hostname", "keep-hostname(yes)").about("`$HOST` is the header's host name rather than the sender's", "no"),
        read("chain_hostnames", "chain-hostnames(yes)").about("`$HOST` becomes `host/relay` when a message passes this server", "no"),
        read("use_dns", "use-dns(no)").about("resolves senders' addresses to names", "yes"),
        read("use_fqdn", "use-fqdn(yes)").about("host names with their domain", "no"),
        read("normalize_hostnames", "normalize-hostnames(yes)").about("host names in lower case", "no"),
        read("keep_timestamp", "keep-timestamp(no)").about("`$DATE` is the header's time rather than the time received", "yes"),
        read("log_msg_size", "log-msg-size(8192)").about("the longest message read; longer ones are cut or split", "65536"),
        read("log_iw_size", "log-iw-size(1000)").about("a source's window: messages in flight before it stops reading, shared among its `max-connections()`", "100000 (syslog-ng: 100)"),
        read("log_fetch_limit", "log-fetch-limit(10)").about("accepted: a reader takes what one read brings", "10"),
        read("trim_large_messages", "trim-large-messages(yes)").about("a message longer than `log-msg-size()` is cut (not split)", "no"),
        read("host_override", "host-override(\"h\")").about("`$HOST` of every message of the source", "the message's"),
        read("program_override", "program-override(\"p\")").about("`$PROGRAM` of every message of the source", "the message's"),
        read("default_facility", "default-facility(local0)").about("the facility of messages whose header has none", "user"),
        read("default_priority", "default-priority(info)").about("the severity of messages whose header has none", "notice"),
        read("default_level", "default-level(info)").about("the severity of messages whose header has none (syslog-ng's older name)", "notice"),
        read("default_severity", "default-severity(info)").about("the severity of messages whose header has none", "notice"),
        read("time_zone", "time-zone(\"+01:00\")").about("the time zone of stamps read or written (`date-parser()`: of the text)", "the machine's"),
        read("recv_time_zone", "recv-time-zone(\"UTC\")").about("the time zone of stamps that name none", "the machine's"),
        read("tags", "tags(\"a,b\")").about("tags every message of the source gets", "none"),
        read("check_hostname", "check-hostname(yes)").about("refuses host names with characters a host name cannot have", "no"),
        // syslog-ng's cache of names; sluice always keeps one (`dns-cache-expire()`).
        read("dns_cache", "dns-cache(yes)").about("keeps resolved names of senders; `no`: `dns-cache-hosts()` does not name them either", "yes"),
        read("format", "format(json)").about("how a record is read: `syslog`, or `json` (each record a JSON object, docs/compatibility.md)", "syslog"),
        read("encoding", "encoding(\"utf-8\")").about("the character set of the input, converted to UTF-8", "UTF-8 (as is)"),
        // Names what syslog-ng keeps across restarts; sluice keeps no source state.
        read("persist_name", "persist-name(\"p\")").about("the name a driver keeps its state under, instead of one made from its options", "made"),
        not_yet("log_prefix"),
        read("pad_size", "pad-size(2048)").about("records of this many bytes instead of lines", "0 (lines)"),
        not_yet("hook_commands"),
        not_yet("use_syslogng_pid"),
        not_yet("ebpf"),
    ];

    pub fn apply(&mut self, opt: &Node) -> Result<bool, ConfigError> {
        match opt.key().as_str() {
            "flags" => {
                for f in opt.words()? {
                    self.flag(f)?;
                }
            }
            "multi_line_mode" => self.multi_line.mode = Some(opt.value()?.clone()),
            "multi_line_prefix" => self.multi_line.prefix = Some(opt.value()?.clone()),
            "multi_line_garbage" => self.multi_line.garbage = Some(opt.value()?.clone()),
            "multi_line_suffix" => self.multi_line.suffix = Some(opt.value()?.clone()),
            "multi_line_timeout" => {
                let v = opt.value()?;
                let secs: f64 =
                    v.text
                        .parse()
                        .ok()
                        .filter(|s: &f64| *s > 0.0)
                        .ok_or_else(|| {
                            ConfigError::new(
                                v.pos,
                                "multi-line-timeout() is a number of seconds above 0",
                            )
                        })?;
                self.multi_line.timeout = Some(Duration::from_secs_f64(secs));
            }
            "keep_hostname" => self.keep_hostname = opt.bool()?,
            "chain_hostnames" => self.chain_hostnames = opt.bool()?,
            "use_dns" => self.use_dns = use_dns(opt)?,
            "use_fqdn" => self.use_fqdn = opt.bool()?,
            "normalize_hostnames" => self.normalize_hostnames = opt.bool()?,
            "check_hostname" => self.flags.check_hostname = opt.bool()?,
            "dns_cache" => self.dns_cache = opt.bool()?,
            "keep_timestamp" => self.keep_timestamp = opt.bool()?,
            "log_msg_size" => self.log_msg_size = positive(opt)? as usize,
            "log_iw_size" => self.log_iw_size = positive(opt)? as u32,
            "log_fetch_limit" => self.log_fetch_limit = positive(opt)? as u32,
            "trim_large_messages" => self.trim_large_messages = opt.bool()?,
            "host_override" => self.host_override = Some(Arc::from(opt.string()?.as_bytes())),
            "program_override" => self.program_override = Some(Arc::from(opt.string()?.as_bytes())),
            "default_facility" => {
                let v = opt.value()?;
                self.default_facility = Some(facility_by_name(&v.text).ok_or_else(|| {
                    ConfigError::new(v.pos, format!("unknown facility '{}'", v.text))
                })?);
            }
            "default_priority" | "default_level" | "default_severity" => {
                let v = opt.value()?;
                self.default_severity = Some(severity_by_name(&v.text).ok_or_else(|| {
                    ConfigError::new(v.pos, format!("unknown severity '{}'", v.text))
                })?);
            }
            "time_zone" | "recv_time_zone" => self.time_zone = Some(zone(opt)?),
            "tags" => {
                for v in opt.words()? {
                    self.tags.extend(
                        v.text
                            .split(',')
                            .map(str::trim)
                            .filter(|t| !t.is_empty())
                            .map(String::from),
                    );
                }
            }
            "format" => {
                let v = opt.value()?;
                match v.text.as_str() {
                    "syslog" => self.json = false,
                    "json" => self.json = true,
                    other => {
                        return Err(ConfigError::not_supported(
                            v.pos,
                            &format!("format({other})"),
                        ))
                    }
                }
            }
            "encoding" => {
                let v = opt.value()?;
                self.encoding =
                    crate::encoding::lookup(&v.text).map_err(|why| ConfigError::new(v.pos, why))?;
            }
            "pad_size" => {
                let size = opt.u64()?;
                if !(1..=1 << 20).contains(&size) {
                    return Err(ConfigError::new(
                        opt.pos,
                        "pad-size() is a record's size in bytes, from 1 to 1048576",
                    ));
                }
                self.pad_size = Some(size as usize);
            }
            "persist_name" => {
                opt.string()?;
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    fn flag(&mut self, f: &Value) -> Result<(), ConfigError> {
        let name = sluice_config::normalize(&f.text);
        if self.flags.set(&name) {
            return Ok(());
        }
        match name.as_str() {
            "no_parse" => self.no_parse = true,
            "empty_lines" => self.empty_lines = true,
            "store_raw_message" => self.store_raw_message = true,
            "kernel" => self.flags.local = true,
            "threaded" => {}
            "no_rfc3164_fallback" | "guess_timezone" => {
                return Err(ConfigError::not_supported(
                    f.pos,
                    &format!("flags({})", f.text),
                ))
            }
            _ => {
                return Err(ConfigError::unknown(
                    f.pos,
                    "source flag",
                    &f.text,
                    "",
                    SOURCE_FLAGS,
                ))
            }
        }
        Ok(())
    }

    /// The recipe for messages of the source named `source_name`.
    pub fn ingest(&self, source_name: &str, g: &Globals) -> Ingest {
        let mut ingest = Ingest::new(g.local_zone.clone());
        ingest.parse.flags = self.flags;
        ingest.parse.default_pri = match (self.default_facility, self.default_severity) {
            (None, None) => None,
            (f, s) => Some(f.unwrap_or(1) * 8 + u16::from(s.unwrap_or(5))),
        };
        if let Some(re) = self.bad_hostname.clone() {
            ingest.parse.bad_hostname = Some(sluice_protocol::HostnameFilter(Arc::new(
                move |h: &[u8]| re.is_match(h),
            )));
        }
        ingest.no_parse = self.no_parse;
        ingest.keep_hostname = self.keep_hostname;
        ingest.chain_hostnames = self.chain_hostnames;
        ingest.keep_timestamp = self.keep_timestamp;
        ingest.host_override = self.host_override.clone();
        ingest.program_override = self.program_override.clone();
        ingest.zone = self.time_zone.clone();
        ingest.store_raw_message = self.store_raw_message;
        if self.json {
            ingest.format = sluice_model::ingest::Format::Json;
        }
        let mut tags = Tags::default();
        tags.insert(tag_id(&format!(".source.{source_name}")));
        for t in &self.tags {
            tags.insert(tag_id(t));
        }
        ingest.tags = tags;
        ingest
    }
}

/// What `program()` runs, source and destination alike: its command (the driver's value, with
/// `example` in the error when it is missing) and `inherit-environment()` (on by default).
pub fn program_command<'a>(
    node: &'a Node,
    o: &mut sluice_config::declared::Options<'_>,
    example: &str,
) -> Result<(&'a Value, bool), ConfigError> {
    let command = node.first_value().ok_or_else(|| {
        ConfigError::new(
            node.pos,
            format!("program() needs a command: program(\"{example}\")"),
        )
    })?;
    let inherit_environment = o.yes_no("inherit_environment", true)?;
    Ok((command, inherit_environment))
}

/// RELP has no assigned port; rsyslog's examples use 2514.
pub const RELP_PORT: u16 = 2514;

/// A `port()` value.
pub fn port_number(opt: &Node) -> Result<u16, ConfigError> {
    let v = opt.value()?;
    let port = v.as_u64()?;
    u16::try_from(port).map_err(|_| ConfigError::new(v.pos, format!("port {port} is out of range")))
}

/// `ip-protocol(4)` or `ip-protocol(6)`.
pub fn ip_protocol(opt: &Node) -> Result<u8, ConfigError> {
    let v = opt.value()?;
    match v.as_u64()? {
        4 => Ok(4),
        6 => Ok(6),
        _ => Err(ConfigError::new(v.pos, "ip-protocol() is 4 or 6")),
    }
}
