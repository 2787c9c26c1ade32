//! From a parsed configuration to the parts that run: sources, destinations, the router.
//!
//! Every statement is built, referenced or not, so that every error in the file is found
//! before anything starts; only sources that a log path uses are started. Driver options are
//! checked here against the names each driver knows: an unknown name is an error listing the
//! valid ones, a name syslog-ng knows that sluice does not implement yet is refused as such.

use crate::destinations::diskq::DiskBufferOptions;
use crate::destinations::file::{FileDestination, FileOptions};
use crate::destinations::file_open::NameReports;
use crate::destinations::format::{Format, Formatter};
use crate::destinations::network::{Failback, NetworkDestination, NetworkOptions, Transport};
use crate::destinations::{Destination, Group};
use crate::dispatch::{DispatchCounters, Dispatcher};
use crate::dns::NameOptions;
use crate::options::{self, Globals, SourceOptions};
use crate::sources::datagram::{Bind, DatagramSource};
use crate::sources::internal::InternalSource;
use crate::sources::stdin::StdinSource;
use crate::sources::stream::{Listen, Proxied, StreamSource};
use crate::sources::{ReaderSpec, SourceCounters, UnixSocket, READ_BUDGET};
use crate::stats::Registry;
use crate::tls::TlsOptions;
use crate::window::ReadBudget;
use sluice_config::{Body, Condition, Config, ConfigError, Expr, Node, Pos, Statement};
use sluice_model::filter::{self, Filter};
use sluice_model::message::tag_id;
use sluice_model::parsers::Parsers;
use sluice_model::path::{DestId, LogPath, PathContext, SourceId, Tally};
use sluice_model::rewrite::Rewrite;
use sluice_model::template::functions;
use sluice_model::{Router, Template};
use sluice_protocol::framing::Framing;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Everything a configuration starts.
pub struct Pipeline {
    pub globals: Globals,
    pub streams: Vec<Arc<StreamSource>>,
    pub datagrams: Vec<Arc<DatagramSource>>,
    pub stdin: Option<Arc<StdinSource>>,
    pub internal: Option<Arc<InternalSource>>,
    pub dispatcher: Arc<Dispatcher>,
    /// The counters `sluice ctl stats` shows.
    pub stats: Arc<Registry>,
    /// The configuration as read (`sluice ctl config`).
    pub config_text: Arc<str>,
    /// What a reload compares to keep what did not change: each named source's and
    /// destination's statement, and everything they depend on (`options {}`, templates).
    pub fingerprints: Fingerprints,
    /// Warnings about the configuration (unused objects, skipped includes).
    pub notes: Vec<String>,
}

/// What a reload compares (see [`Pipeline::fingerprints`]).
#[derive(Clone, Debug, Default)]
pub struct Fingerprints {
    /// `options {}` and template statements, in order.
    pub shared: Vec<String>,
    /// Named sources: name → statement fingerprint.
    pub sources: HashMap<String, String>,
    /// Every destination by id: its name and, for named statements, its fingerprint (inline
    /// destinations have none and are never kept).
    pub destinations: Vec<(String, Option<String>)>,
}

/// Source drivers of syslog-ng that sluice does not have yet.
const SOURCES_NOT_YET: &[&str] = &[
    "file",
    "wildcard_file",
    "system",
    "systemd_journal",
    "systemd_syslog",
    "program",
    "pipe",
    "udp_balancer",
    "python",
    "python_fetcher",
    "snmptrap",
    "linux_audit",
    "sun_streams",
    "java",
    "kafka",
    "mqtt",
    "opentelemetry",
    "http",
    "osquery",
    "default_network_drivers",
    "syslog_ng",
    "pacct",
    "mbox",
    "nodejs",
    "darwin_oslog",
    "hypr_audit_trail",
    "hypr_app_audit_trail",
    "network_load_balancer",
    "example_msg_generator",
    "example_random_generator",
];
const SOURCES: &[&str] = &[
    "network",
    "syslog",
    "tcp",
    "tcp6",
    "udp",
    "udp6",
    "relp",
    "unix_stream",
    "unix_dgram",
    "stdin",
    "internal",
];

const DESTINATIONS_NOT_YET: &[&str] = &[
    "program",
    "pipe",
    "sql",
    "mongodb",
    "kafka",
    "kafka_c",
    "elasticsearch_http",
    "elasticsearch",
    "opensearch",
    "http",
    "logstore",
    "usertty",
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
const DESTINATIONS: &[&str] = &[
    "file",
    "stdout",
    "network",
    "syslog",
    "tcp",
    "tcp6",
    "udp",
    "udp6",
    "unix_stream",
    "unix_dgram",
    "relp",
];

/// Options of forwarding destinations besides the format options.
const NETWORK_DEST_OPTIONS: &[&str] = &[
    "port",
    "destport",
    "localip",
    "localport",
    "transport",
    "ip_protocol",
    "failover",
    "so_sndbuf",
    "so_keepalive",
    "keep_alive",
    "close_on_input",
    "time_reopen",
    "log_fifo_size",
    "flush_lines",
    "flush_timeout",
    "persist_name",
    "disk_buffer",
    "template",
    "template_escape",
    "ts_format",
    "frac_digits",
    "time_zone",
    "send_time_zone",
    "flags",
];
const NETWORK_DEST_NOT_YET: &[&str] = &[
    "so_broadcast",
    "so_rcvbuf",
    "ip_ttl",
    "ip_tos",
    "spoof_source",
    "spoof_source_max_msglen",
    "mark_mode",
    "mark_freq",
    "suppress",
    "throttle",
    "local_time_zone",
    "on_error",
    "batch_lines",
    "batch_timeout",
    "truncate_size",
];

/// Options of network sources.
const NETWORK_OPTIONS: &[&str] = &[
    "ip",
    "localip",
    "port",
    "localport",
    "transport",
    "ip_protocol",
    "max_connections",
    "so_rcvbuf",
    "so_reuseport",
    "keep_alive",
    "so_keepalive",
    "listen_backlog",
    "tls",
    "trusted_proxies",
    "handshake_timeout",
];
/// Options of syslog-ng's network sources that sluice does not honour yet: refused, never
/// accepted and ignored.
const NETWORK_NOT_YET: &[&str] = &[
    "so_broadcast",
    "so_sndbuf",
    "ip_ttl",
    "ip_tos",
    "dynamic_window_size",
    "dynamic_window_stats_freq",
    "dynamic_window_realloc_ticks",
    "interface",
    "failover",
    "idle_timeout",
];
const UNIX_OPTIONS: &[&str] = &[
    "owner",
    "group",
    "perm",
    "max_connections",
    "keep_alive",
    "optional",
    "create_dirs",
    "so_rcvbuf",
    "pass_unix_credentials",
    "listen_backlog",
];

const FILE_OPTIONS: &[&str] = &[
    "disk_buffer",
    "template",
    "template_escape",
    "ts_format",
    "frac_digits",
    "time_zone",
    "send_time_zone",
    "create_dirs",
    "perm",
    "dir_perm",
    "owner",
    "group",
    "dir_owner",
    "dir_group",
    "fsync",
    "time_reap",
    "flush_lines",
    "flush_timeout",
    "log_fifo_size",
    "persist_name",
    "flags",
    "time_reopen",
];
const FILE_NOT_YET: &[&str] = &[
    "mark_mode",
    "mark_freq",
    "suppress",
    "pad_size",
    "overwrite_if_older",
    "throttle",
    "logrotate",
    "local_time_zone",
    "on_error",
    "batch_lines",
    "batch_timeout",
    "multi_line_mode",
];

struct Builder<'a> {
    globals: Globals,
    statements: HashMap<(&'static str, String), &'a Statement>,
    templates: HashMap<String, Template>,
    filters: HashMap<String, Arc<Filter>>,
    filters_building: Vec<String>,
    rewrites: HashMap<String, Arc<Rewrite>>,
    parsers: HashMap<String, Arc<Parsers>>,
    source_ids: HashMap<String, SourceId>,
    dest_ids: HashMap<String, DestId>,
    destinations: Vec<Arc<dyn Destination>>,
    /// `destination;NAME;;a;processed` of each destination, indexed like `destinations`.
    dest_counted: Vec<Arc<std::sync::atomic::AtomicU64>>,
    stats: Arc<Registry>,
    streams: Vec<(SourceId, Arc<StreamSource>)>,
    datagrams: Vec<(SourceId, Arc<DatagramSource>)>,
    stdin: Option<(SourceId, Arc<StdinSource>)>,
    internal: Option<(SourceId, Arc<InternalSource>)>,
    anon: usize,
}

/// Registers the tag names the configuration writes (`tags()` of sources and filters,
/// `set-tag()`, `clear-tag()`) in the order they stand, before the sources' `.source.NAME`:
/// `$TAGS` lists tags in the order their names were registered, and syslog-ng registers these
/// while parsing, the sources' when it starts them.
fn register_tag_names(config: &Config) {
    fn node(n: &Node) {
        if matches!(n.key().as_str(), "tags" | "set_tag" | "clear_tag") {
            for v in n.values() {
                tag_id(&v.text);
            }
        }
        for opt in n.options() {
            node(opt);
        }
        if let Some(b) = &n.block {
            body(b);
        }
    }
    fn expr(e: &Expr) {
        match e {
            Expr::And(a, b) | Expr::Or(a, b) => {
                expr(a);
                expr(b);
            }
            Expr::Not(a) => expr(a),
            Expr::Call(n) => node(n),
            Expr::Compare { .. } => {}
        }
    }
    fn body(b: &Body) {
        match b {
            Body::Nodes(nodes) => nodes.iter().for_each(node),
            Body::Filter(e) => expr(e),
            Body::Text(_) => {}
            Body::If(arms) => {
                for arm in arms {
                    if let Condition::Filter(e) = &arm.condition {
                        expr(e);
                    }
                    arm.body.iter().for_each(node);
                }
            }
        }
    }
    for s in &config.statements {
        body(&s.body);
    }
}

pub fn build(config: &Config) -> Result<Pipeline, ConfigError> {
    build_with(config, Arc::default(), 0)
}

/// Builds configuration number `generation` (a reload's), counting into `stats` (the running
/// one's, so that counters of what the reload keeps go on).
pub fn build_with(
    config: &Config,
    stats: Arc<Registry>,
    generation: u64,
) -> Result<Pipeline, ConfigError> {
    register_tag_names(config);
    let mut b = Builder {
        globals: Globals::new(),
        statements: HashMap::new(),
        templates: HashMap::new(),
        filters: HashMap::new(),
        rewrites: HashMap::new(),
        parsers: HashMap::new(),
        filters_building: Vec::new(),
        source_ids: HashMap::new(),
        dest_ids: HashMap::new(),
        destinations: Vec::new(),
        dest_counted: Vec::new(),
        stats,
        streams: Vec::new(),
        datagrams: Vec::new(),
        stdin: None,
        internal: None,
        anon: 0,
    };
    for s in &config.statements {
        if s.kind == "options" {
            let Body::Nodes(nodes) = &s.body else {
                continue;
            };
            for opt in nodes {
                if opt.block.is_some() || !b.globals.apply(opt)? {
                    return Err(ConfigError::unknown(
                        opt.pos,
                        "global option",
                        &opt.name,
                        "",
                        Globals::NAMES,
                    ));
                }
            }
        }
    }
    for s in &config.statements {
        let kind: &'static str = match s.kind.as_str() {
            "source" => "source",
            "destination" => "destination",
            "filter" => "filter",
            "template" => "template",
            "rewrite" => "rewrite",
            "parser" => "parser",
            _ => continue,
        };
        let (name, pos) = s
            .name
            .clone()
            .expect("the parser requires names on these statements");
        if b.statements.insert((kind, name.clone()), s).is_some() {
            return Err(ConfigError::new(pos, format!("duplicate {kind} '{name}'")));
        }
    }
    // Templates first: destinations refer to them, by name or with `$(template name)`.
    functions::forget_named();
    for s in config.statements.iter().filter(|s| s.kind == "filter") {
        if let (Some((name, _)), Body::Filter(expr)) = (&s.name, &s.body) {
            functions::define_filter(name, expr);
        }
    }
    for s in config.statements.iter().filter(|s| s.kind == "template") {
        let (name, _) = s.name.clone().expect("named");
        let t = b.template_statement(s)?;
        functions::define_named(&name, &t);
        b.templates.insert(name, t);
    }
    for s in config.statements.iter().filter(|s| s.kind == "source") {
        let (name, pos) = s.name.clone().expect("named");
        b.source(&name, pos)?;
    }
    for s in config.statements.iter().filter(|s| s.kind == "destination") {
        let (name, pos) = s.name.clone().expect("named");
        b.destination(&name, pos)?;
    }
    for s in config.statements.iter().filter(|s| s.kind == "filter") {
        let (name, pos) = s.name.clone().expect("named");
        b.filter(&name, pos)?;
    }
    for s in config.statements.iter().filter(|s| s.kind == "rewrite") {
        let (name, pos) = s.name.clone().expect("named");
        b.rewrite(&name, pos)?;
    }
    for s in config.statements.iter().filter(|s| s.kind == "parser") {
        let (name, pos) = s.name.clone().expect("named");
        b.parser(&name, pos)?;
    }
    let mut paths = Vec::new();
    for s in config.statements.iter().filter(|s| s.kind == "log") {
        let Body::Nodes(nodes) = &s.body else {
            continue;
        };
        paths.push(LogPath::build(nodes, true, &mut b)?);
    }
    let router = Router::new(paths);
    if b.globals.stats_level >= 3 {
        // Level 3 shows every facility and severity, counted or not, as syslog-ng does.
        let facilities = (0..24).map(|f| f.to_string()).chain(["other".to_string()]);
        for f in facilities {
            b.stats.counter("src.facility", "", &f, "processed");
        }
        for s in 0..8 {
            b.stats
                .counter("src.severity", "", &s.to_string(), "processed");
        }
    }
    let mut notes = config.map.notes.clone();
    notes.extend(version_note(config));
    let used = |id: SourceId, name: &str, notes: &mut Vec<String>| {
        let used = router.is_used(id);
        if !used {
            notes.push(format!(
                "source '{name}' is not used by any log path; it is not started"
            ));
        }
        used
    };
    let streams = b
        .streams
        .iter()
        .filter(|(id, s)| used(*id, &s.source_name, &mut notes))
        .map(|(_, s)| s.clone())
        .collect();
    let datagrams = b
        .datagrams
        .iter()
        .filter(|(id, s)| used(*id, &s.source_name, &mut notes))
        .map(|(_, s)| s.clone())
        .collect();
    let stdin = b
        .stdin
        .as_ref()
        .filter(|(id, s)| used(*id, &s.source_name, &mut notes))
        .map(|(_, s)| s.clone());
    let internal = b
        .internal
        .as_ref()
        .filter(|(id, _)| router.is_used(*id))
        .map(|(_, s)| s.clone());
    Ok(Pipeline {
        globals: b.globals.clone(),
        streams,
        datagrams,
        stdin,
        internal,
        fingerprints: Fingerprints {
            shared: config
                .statements
                .iter()
                .filter(|s| matches!(s.kind.as_str(), "options" | "template"))
                .map(|s| s.fingerprint())
                .collect(),
            sources: config
                .statements
                .iter()
                .filter(|s| s.kind == "source")
                .filter_map(|s| Some((s.name.clone()?.0, s.fingerprint())))
                .collect(),
            destinations: (0..b.destinations.len())
                .map(|id| {
                    let name = b
                        .dest_ids
                        .iter()
                        .find(|(_, &d)| d as usize == id)
                        .map_or("", |(n, _)| n.as_str());
                    let print = config
                        .statements
                        .iter()
                        .find(|s| {
                            s.kind == "destination"
                                && s.name.as_ref().is_some_and(|(n, _)| n == name)
                        })
                        .map(Statement::fingerprint);
                    (name.to_string(), print)
                })
                .collect(),
        },
        dispatcher: Arc::new(Dispatcher {
            router,
            generation,
            numbering: b
                .destinations
                .iter()
                .any(|d| d.numbers_local())
                .then(Mutex::default),
            ingests: b
                .streams
                .iter()
                .map(|(_, s)| &s.reader)
                .chain(b.datagrams.iter().map(|(_, s)| &s.reader))
                .map(|r| (r.listener.clone(), r.ingest.clone()))
                .collect(),
            source_ids: b
                .source_ids
                .iter()
                .map(|(n, &id)| (Arc::from(n.as_str()), id))
                .collect(),
            destinations: b.destinations,
            counted: DispatchCounters {
                level: b.globals.stats_level,
                registry: b.stats.clone(),
                received: b.stats.counter("center", "", "received", "processed"),
                queued: b.stats.counter("center", "", "queued", "processed"),
                destinations: b.dest_counted,
            },
        }),
        stats: b.stats,
        config_text: Arc::from(config.map.text.as_str()),
        notes,
    })
}

/// What to say of the configuration's `@version`: syslog-ng 3.38 refuses a file without one
/// (an empty file too), runs an older one in a compatibility mode and a 4.x one with
/// experimental behaviours; sluice reads each as 3.38's language and says so.
fn version_note(config: &Config) -> Option<String> {
    const READ_AS: (u32, u32) = (3, 38);
    let Some(version) = &config.version else {
        return Some(if config.statements.is_empty() {
            "the configuration is empty: nothing is received or written (syslog-ng 3.38 \
             refuses an empty file)"
                .to_string()
        } else {
            "the configuration has no @version: it is read as syslog-ng 3.38's language \
             (syslog-ng 3.38 refuses it); put '@version: 3.38' on its first line"
                .to_string()
        });
    };
    let number = |s: Option<&str>| s.and_then(|s| s.trim().parse::<u32>().ok());
    let mut parts = version.split('.');
    let (major, minor) = (number(parts.next())?, number(parts.next()).unwrap_or(0));
    match (major, minor).cmp(&READ_AS) {
        std::cmp::Ordering::Equal => None,
        std::cmp::Ordering::Greater => Some(format!(
            "the configuration is written for syslog-ng {version}: sluice reads syslog-ng \
             3.38's language, so what later versions changed may be refused or read the 3.38 way \
             (see docs/compatibility.md)"
        )),
        std::cmp::Ordering::Less => Some(format!(
            "the configuration is written for syslog-ng {version}: sluice reads it as syslog-ng \
             3.38 does and has no compatibility mode for older versions; review what changed \
             since {version}, then change @version to 3.38"
        )),
    }
}

/// The error for a driver name that is not implemented: not supported yet when syslog-ng has
/// it, otherwise unknown with the valid names.
fn driver_error(node: &Node, kind: &str, implemented: &[&str], not_yet: &[&str]) -> ConfigError {
    if not_yet.contains(&node.key().as_str()) {
        return ConfigError::not_supported(node.pos, &format!("the {}() {kind}", node.name));
    }
    let mut all: Vec<&str> = implemented.to_vec();
    all.extend_from_slice(not_yet);
    ConfigError::unknown(node.pos, &format!("{kind} driver"), &node.name, "", &all)
}

impl Builder<'_> {
    fn statement(
        &self,
        kind: &'static str,
        name: &str,
        pos: Pos,
    ) -> Result<&Statement, ConfigError> {
        self.statements
            .get(&(kind, name.to_string()))
            .copied()
            .ok_or_else(|| {
                let known: Vec<&str> = self
                    .statements
                    .keys()
                    .filter(|(k, _)| *k == kind)
                    .map(|(_, n)| n.as_str())
                    .collect();
                let err = ConfigError::new(pos, format!("{kind} '{name}' is not defined"));
                match ConfigError::unknown(pos, kind, name, "", &known)
                    .help
                    .first()
                {
                    Some(help) if !known.is_empty() => err.with_help(help.clone()),
                    _ => err,
                }
            })
    }

    fn template_statement(&self, s: &Statement) -> Result<Template, ConfigError> {
        match &s.body {
            Body::Text(v) => Template::compile(&v.text).map_err(|e| ConfigError::new(v.pos, e)),
            Body::Nodes(nodes) => {
                let mut template = None;
                let mut escape = false;
                for n in nodes {
                    match n.key().as_str() {
                        "template" => {
                            let v = n.value()?;
                            template = Some(
                                Template::compile(&v.text)
                                    .map_err(|e| ConfigError::new(v.pos, e))?,
                            );
                        }
                        "template_escape" => escape = n.bool()?,
                        _ => {
                            return Err(ConfigError::unknown(
                                n.pos,
                                "template option",
                                &n.name,
                                "",
                                &["template", "template_escape"],
                            ))
                        }
                    }
                }
                let mut t = template.ok_or_else(|| {
                    ConfigError::new(s.pos, "a template statement needs template(\"…\")")
                })?;
                t.escape = escape;
                Ok(t)
            }
            Body::Filter(_) | Body::If(_) => {
                unreachable!("filter and if bodies belong to filter statements and log paths")
            }
        }
    }

    /// Builds every driver of a source body under the name `name`.
    fn source_body(&mut self, name: &str, body: &Body, pos: Pos) -> Result<SourceId, ConfigError> {
        let Body::Nodes(nodes) = body else {
            return Err(ConfigError::new(
                pos,
                "a source body holds drivers such as tcp() or udp()",
            ));
        };
        let id = self.source_ids.len() as SourceId;
        let source_name: Arc<str> = Arc::from(name);
        self.source_ids.insert(name.to_string(), id);
        for (n, node) in nodes.iter().enumerate() {
            self.source_driver(node, id, &source_name, n)?;
        }
        Ok(id)
    }

    fn source_driver(
        &mut self,
        node: &Node,
        id: SourceId,
        name: &Arc<str>,
        n: usize,
    ) -> Result<(), ConfigError> {
        let key = node.key();
        let g = &self.globals;
        let mut opts = SourceOptions::new(g);
        let mut net = NetOptions::default();
        let (extra, not_yet): (&[&str], &[&str]) = match key.as_str() {
            "network" | "syslog" | "tcp" | "tcp6" | "udp" | "udp6" | "relp" => {
                (NETWORK_OPTIONS, NETWORK_NOT_YET)
            }
            "unix_stream" | "unix_dgram" => (UNIX_OPTIONS, &["pass_unix_credentials"]),
            "stdin" | "internal" => (&[], &[]),
            _ => return Err(driver_error(node, "source", SOURCES, SOURCES_NOT_YET)),
        };
        for opt in node.options() {
            let k = opt.key();
            if not_yet.contains(&k.as_str()) {
                return Err(ConfigError::not_supported(
                    opt.pos,
                    &format!("{}() in {}()", opt.name, node.name),
                ));
            }
            if opts.apply(opt)? {
                continue;
            }
            if !extra.contains(&k.as_str()) || !net.apply(opt)? {
                let mut valid: Vec<&str> = SourceOptions::NAMES.to_vec();
                valid.extend_from_slice(extra);
                return Err(ConfigError::unknown(
                    opt.pos,
                    "option",
                    &opt.name,
                    &format!(" in {}()", node.name),
                    &valid,
                ));
            }
        }
        let path = node.first_value().map(|v| v.text.clone());
        if path.is_some() && !matches!(key.as_str(), "unix_stream" | "unix_dgram") {
            let v = node.first_value().expect("checked");
            return Err(ConfigError::new(
                v.pos,
                format!(
                    "{}() takes no positional value; did you mean ip(\"{}\")?",
                    node.name, v.text
                ),
            ));
        }
        let names = NameOptions {
            use_dns: opts.use_dns,
            use_fqdn: opts.use_fqdn,
            normalize: opts.normalize_hostnames,
            cache_expire: self.globals.dns_cache_expire,
        };
        let local = matches!(
            key.as_str(),
            "unix_stream" | "unix_dgram" | "stdin" | "internal"
        );
        if local {
            opts.flags.local = true;
        }
        // syslog-ng expects no hostname on unix sockets, whatever flags() says: local
        // syslog() calls do not write one.
        if matches!(key.as_str(), "unix_stream" | "unix_dgram") {
            opts.flags.expect_hostname = false;
        }
        if key == "syslog" {
            opts.flags.syslog_protocol = true;
        }
        let ingest = Arc::new(opts.ingest(name, g));
        // syslog-ng's names: `src.network;s_net#0;tcp,127.0.0.1` and `source;s_net`.
        let instance = match key.as_str() {
            "stdin" | "internal" => String::new(),
            "unix_stream" | "unix_dgram" => path.clone().unwrap_or_default(),
            _ => format!(
                "{},{}",
                net.transport
                    .as_ref()
                    .map_or(if key.starts_with("udp") { "udp" } else { "tcp" }, |t| t
                        .0
                        .as_str()),
                net.ip.as_ref().map_or("0.0.0.0", |ip| ip.0.as_str())
            ),
        };
        // A listener's counters are named as syslog-ng names them, by its address:
        // `src.network;s_net;afsocket_sd.(stream,AF_INET(127.0.0.1:514));a;connections`.
        let counter = |listener: &str, what: &'static str| {
            self.stats.counter(
                &format!("src.{}", key.replace('_', "-")),
                name,
                listener,
                what,
            )
        };
        let reader = |framing: Framing, window: u32, listener: &str| ReaderSpec {
            framing,
            log_msg_size: opts.log_msg_size,
            trim_large_messages: opts.trim_large_messages,
            window,
            keep_empty: opts.empty_lines,
            budget: ReadBudget::new(READ_BUDGET),
            ingest: ingest.clone(),
            listener: Arc::from(listener),
            counted: SourceCounters {
                driver: self.stats.counter(
                    &format!("src.{}", key.replace('_', "-")),
                    &format!("{name}#{n}"),
                    &instance,
                    "processed",
                ),
                source: self.stats.counter("source", name, "", "processed"),
                oversized: counter(listener, "oversized_messages"),
                framing_errors: counter(listener, "framing_errors"),
                empty: counter(listener, "empty_messages"),
            },
        };
        let per_reader = |max_conn: usize| {
            (opts.log_iw_size / max_conn.max(1) as u32).max(g.min_iw_size_per_reader)
        };
        match key.as_str() {
            "stdin" => {
                if self.stdin.is_some() {
                    return Err(ConfigError::new(
                        node.pos,
                        "only one stdin() source can be used",
                    ));
                }
                let s = StdinSource {
                    reader: reader(Framing::Newline, opts.log_iw_size, ""),
                    names,
                    source_name: name.clone(),
                    source_id: id,
                };
                self.stdin = Some((id, Arc::new(s)));
            }
            "internal" => {
                if self.internal.is_some() {
                    return Err(ConfigError::new(
                        node.pos,
                        "only one internal() source can be used",
                    ));
                }
                let s = InternalSource {
                    ingest: ingest.clone(),
                    window: opts.log_iw_size,
                    source_name: name.clone(),
                    source_id: id,
                    use_fqdn: opts.use_fqdn,
                    counted: reader(Framing::Newline, opts.log_iw_size, "").counted,
                };
                self.internal = Some((id, Arc::new(s)));
            }
            "unix_stream" | "unix_dgram" => {
                let path = path.ok_or_else(|| {
                    ConfigError::new(
                        node.pos,
                        format!(
                            "{}() needs a socket path: {}(\"/dev/log\")",
                            node.name, node.name
                        ),
                    )
                })?;
                let unix = UnixSocket {
                    path: path.into(),
                    perm: net.perm.unwrap_or(0o666),
                    owner: net.owner,
                    group: net.group,
                };
                if key == "unix_stream" {
                    let max = net.max_connections.unwrap_or(256);
                    let listener = format!("afsocket_sd.(stream,AF_UNIX({}))", unix.path.display());
                    let listen = Listen::Unix(unix.clone());
                    let s = StreamSource {
                        listen,
                        reader: reader(Framing::Newline, per_reader(max), &listener),
                        max_connections: max,
                        names,
                        source_name: name.clone(),
                        source_id: id,
                        so_rcvbuf: net.so_rcvbuf,
                        so_reuseport: false,
                        keep_alive: false,
                        listen_backlog: net.listen_backlog.unwrap_or(DEFAULT_LISTEN_BACKLOG),
                        connections: counter(&listener, "connections"),
                        proxied: Proxied::No,
                        trusted_proxies: Vec::new(),
                        handshake_timeout: HANDSHAKE_TIMEOUT,
                        unauthenticated: Arc::default(),
                        tls: None,
                        tls_failures: Arc::default(),
                        rejected: counter(&listener, "rejected_connections"),
                        relp: false,
                        tls_fingerprints: false,
                    };
                    self.streams.push((id, Arc::new(s)));
                } else {
                    let bind = Bind::Unix(unix.clone());
                    let listener = format!("afsocket_sd.(dgram,AF_UNIX({}))", unix.path.display());
                    let s = DatagramSource {
                        bind,
                        reader: reader(Framing::Newline, opts.log_iw_size, &listener),
                        names,
                        source_name: name.clone(),
                        source_id: id,
                        so_rcvbuf: net.so_rcvbuf,
                        so_reuseport: false,
                    };
                    self.datagrams.push((id, Arc::new(s)));
                }
            }
            _ => {
                let (transport, tpos) = net.transport.clone().unwrap_or_else(|| {
                    let t = match key.as_str() {
                        "udp" | "udp6" => "udp",
                        _ => "tcp",
                    };
                    (t.to_string(), node.pos)
                });
                let ipv6 = key.ends_with('6') || net.ip_protocol == Some(6);
                let ip: IpAddr = match &net.ip {
                    Some((text, pos)) => text.parse().map_err(|_| {
                        ConfigError::new(*pos, format!("'{text}' is not an IP address"))
                    })?,
                    None if ipv6 => "::".parse().expect("valid"),
                    None => "0.0.0.0".parse().expect("valid"),
                };
                // (datagrams, TLS, where the PROXY header is)
                let (udp, tls, proxied) = match transport.replace('_', "-").as_str() {
                    "udp" => (true, false, Proxied::No),
                    "tcp" | "framed" | "text" => (false, false, Proxied::No),
                    "proxied-tcp" => (false, false, Proxied::First),
                    "tls" => (false, true, Proxied::No),
                    "proxied-tls" => (false, true, Proxied::InsideTls),
                    "proxied-tls-passthrough" => (false, true, Proxied::First),
                    "auto" => {
                        return Err(ConfigError::not_supported(
                            tpos,
                            &format!("transport({transport})"),
                        ))
                    }
                    other => {
                        return Err(ConfigError::unknown(
                            tpos,
                            "transport",
                            other,
                            "",
                            &[
                                "tcp",
                                "udp",
                                "framed",
                                "text",
                                "tls",
                                "proxied-tcp",
                                "proxied-tls",
                                "proxied-tls-passthrough",
                            ],
                        ))
                    }
                };
                // tcp(), tcp6() and relp() speak TLS when they have a tls() block.
                let tls =
                    tls || (matches!(key.as_str(), "tcp" | "tcp6" | "relp") && net.tls.is_some());
                if key == "relp" && (udp || proxied != Proxied::No) {
                    return Err(ConfigError::new(
                        tpos,
                        "relp() runs over TCP, or TLS with a tls() block",
                    ));
                }
                let tls = match (tls, &net.tls) {
                    (true, Some(t)) => Some(t.server_config()?),
                    (true, None) => {
                        return Err(ConfigError::new(
                            tpos,
                            format!("transport({transport}) needs a tls() block: tls(key-file(\"…\") cert-file(\"…\") ca-file(\"…\"))"),
                        ))
                    }
                    (false, Some(t)) => {
                        return Err(ConfigError::new(
                            t.pos,
                            format!("tls() is for transport(tls), not transport({transport})"),
                        ))
                    }
                    (false, None) => None,
                };
                let default_port = match (key.as_str(), udp, &tls, proxied) {
                    ("relp", ..) => RELP_PORT,
                    ("syslog", false, Some(_), Proxied::No) => 6514,
                    ("syslog", false, _, _) => 601,
                    _ => 514,
                };
                let addr = SocketAddr::new(ip, net.port.unwrap_or(default_port));
                let family = if addr.is_ipv6() {
                    "AF_INET6"
                } else {
                    "AF_INET"
                };
                let listener = |kind: &str| format!("afsocket_sd.({kind},{family}({addr}))");
                if udp {
                    let s = DatagramSource {
                        bind: Bind::Udp(addr),
                        reader: reader(Framing::Newline, opts.log_iw_size, &listener("dgram")),
                        names,
                        source_name: name.clone(),
                        source_id: id,
                        so_rcvbuf: net.so_rcvbuf,
                        so_reuseport: net.so_reuseport,
                    };
                    self.datagrams.push((id, Arc::new(s)));
                } else {
                    let framing = if key == "syslog" || transport == "framed" {
                        Framing::OctetCounted
                    } else {
                        Framing::Newline
                    };
                    let max = net.max_connections.unwrap_or(10);
                    let listener = listener("stream");
                    let s = StreamSource {
                        listen: Listen::Tcp(addr),
                        reader: reader(framing, per_reader(max), &listener),
                        max_connections: max,
                        names,
                        source_name: name.clone(),
                        source_id: id,
                        so_rcvbuf: net.so_rcvbuf,
                        so_reuseport: net.so_reuseport,
                        keep_alive: net.keep_alive,
                        listen_backlog: net.listen_backlog.unwrap_or(DEFAULT_LISTEN_BACKLOG),
                        connections: counter(&listener, "connections"),
                        proxied,
                        trusted_proxies: net.trusted_proxies.clone(),
                        handshake_timeout: net.handshake_timeout.unwrap_or(HANDSHAKE_TIMEOUT),
                        unauthenticated: Arc::default(),
                        tls,
                        tls_failures: counter(&listener, "tls_handshake_failures"),
                        rejected: counter(&listener, "rejected_connections"),
                        relp: key == "relp",
                        tls_fingerprints: net
                            .tls
                            .as_ref()
                            .is_some_and(|t| !t.trusted_keys.is_empty()),
                    };
                    self.streams.push((id, Arc::new(s)));
                }
            }
        }
        Ok(())
    }

    fn destination_body(
        &mut self,
        name: &str,
        body: &Body,
        pos: Pos,
    ) -> Result<DestId, ConfigError> {
        let Body::Nodes(nodes) = body else {
            return Err(ConfigError::new(
                pos,
                "a destination body holds drivers such as file()",
            ));
        };
        let mut drivers: Vec<Arc<dyn Destination>> = Vec::new();
        for (n, node) in nodes.iter().enumerate() {
            drivers.push(self.destination_driver(node, name, n)?);
        }
        let id = self.destinations.len() as DestId;
        self.dest_counted
            .push(self.stats.counter("destination", name, "", "processed"));
        let dest: Arc<dyn Destination> = if drivers.len() == 1 {
            drivers.pop().expect("one driver")
        } else {
            Arc::new(Group(drivers))
        };
        self.destinations.push(dest);
        self.dest_ids.insert(name.to_string(), id);
        Ok(id)
    }

    fn destination_driver(
        &mut self,
        node: &Node,
        name: &str,
        n: usize,
    ) -> Result<Arc<dyn Destination>, ConfigError> {
        let label = format!("destination {name}");
        // Counted as syslog-ng counts: `dst.file;d_file#0;/var/log/messages`.
        let driver = DriverName {
            component: format!("dst.{}", node.key().replace('_', "-")),
            id: format!("{name}#{n}"),
        };
        match node.key().as_str() {
            "file" | "stdout" => self.file_destination(node, label, driver),
            "network" | "syslog" | "tcp" | "tcp6" | "udp" | "udp6" | "unix_stream"
            | "unix_dgram" | "relp" => self.network_destination(node, label, driver),
            _ => Err(driver_error(
                node,
                "destination",
                DESTINATIONS,
                DESTINATIONS_NOT_YET,
            )),
        }
    }

    fn file_destination(
        &mut self,
        node: &Node,
        label: String,
        driver: DriverName,
    ) -> Result<Arc<dyn Destination>, ConfigError> {
        let mut file: FileOptions = self.globals.file.clone();
        file.log_fifo_size = self.globals.log_fifo_size;
        file.time_reopen = self.globals.time_reopen;
        let mut format = FormatOptions::new(&self.globals);
        let mut persist_name: Option<String> = None;
        let mut disk_buffer: Option<DiskBufferOptions> = None;
        for opt in node.options() {
            let k = opt.key();
            if FILE_NOT_YET.contains(&k.as_str()) {
                return Err(ConfigError::not_supported(
                    opt.pos,
                    &format!("{}() in {}()", opt.name, node.name),
                ));
            }
            match k.as_str() {
                "flush_lines" | "flush_timeout" => {
                    opt.u64()?;
                }
                "log_fifo_size" => file.log_fifo_size = opt.u64()?.max(1) as usize,
                "time_reopen" => file.time_reopen = Duration::from_secs(opt.u64()?.max(1)),
                "persist_name" => persist_name = Some(opt.string()?),
                "disk_buffer" => disk_buffer = Some(disk_buffer_options(opt)?),
                _ if format.apply(opt, &self.templates)? => {}
                _ if options::apply_file_option(&mut file, opt)? => {}
                _ => {
                    let valid: Vec<&str> =
                        FILE_OPTIONS.iter().chain(FILE_NOT_YET).copied().collect();
                    return Err(ConfigError::unknown(
                        opt.pos,
                        "option",
                        &opt.name,
                        &format!(" in {}()", node.name),
                        &valid,
                    ));
                }
            }
        }
        let dates = format.dates.clone();
        let formatter = format.formatter(Format::File(dates.clone()));
        if node.key() == "stdout" {
            if disk_buffer.is_some() {
                return Err(ConfigError::not_supported(
                    node.pos,
                    "disk-buffer() in stdout()",
                ));
            }
            if let Some(v) = node.first_value() {
                return Err(ConfigError::new(
                    v.pos,
                    "stdout() takes no positional value",
                ));
            }
            let counters = self.stats.destination(&driver.component, &driver.id, "");
            return Ok(Arc::new(FileDestination::stdout(
                label, formatter, file, counters,
            )));
        }
        let path = node.first_value().ok_or_else(|| {
            ConfigError::new(
                node.pos,
                "file() needs a file name: file(\"/var/log/messages\")",
            )
        })?;
        let mut path_template =
            Template::compile(&path.text).map_err(|e| ConfigError::new(path.pos, e))?;
        path_template.dates = DateOptions {
            ts_format: dates.ts_format,
            frac_digits: 0,
            zone: dates.zone.clone(),
        };
        let counters = self
            .stats
            .destination(&driver.component, &driver.id, &path.text);
        let reports = NameReports::new(
            label.as_str().into(),
            self.stats
                .counter(&driver.component, &driver.id, &path.text, "names_rewritten"),
            self.stats
                .counter(&driver.component, &driver.id, &path.text, "names_refused"),
        );
        let mut dest = FileDestination::file(
            label.clone(),
            path_template,
            formatter,
            file,
            counters,
            reports,
        );
        if let Some(d) = disk_buffer {
            // Named after the destination and its file name (hashed: a template can be long).
            let name = persist_name.unwrap_or_else(|| {
                format!(
                    "{}-file-{:08x}",
                    label.trim_start_matches("destination "),
                    crc32fast::hash(path.text.as_bytes())
                )
            });
            let dir = buffer_dir_name(&name, d.reliable);
            dest = dest.with_disk_buffer(d, dir);
        }
        Ok(Arc::new(dest))
    }

    /// `network()`, `syslog()`, `tcp()`, `tcp6()`, `udp()`, `udp6()`, `unix-stream()`,
    /// `unix-dgram()`.
    fn network_destination(
        &mut self,
        node: &Node,
        label: String,
        driver: DriverName,
    ) -> Result<Arc<dyn Destination>, ConfigError> {
        let key = node.key();
        let mut format = FormatOptions::new(&self.globals);
        let mut opts = NetworkOptions {
            transport: match key.as_str() {
                "udp" | "udp6" => Transport::Udp,
                "unix_stream" => Transport::UnixStream,
                "unix_dgram" => Transport::UnixDgram,
                _ => Transport::Tcp,
            },
            servers: Vec::new(),
            port: 0,
            ip_protocol: key.ends_with('6').then_some(6),
            local: None,
            octet_counting: false,
            failback: None,
            time_reopen: self.globals.time_reopen,
            so_sndbuf: None,
            so_keepalive: false,
            log_fifo_size: self.globals.log_fifo_size,
            disk_buffer: None,
            tls: None,
            relp: key == "relp",
        };
        let unix = matches!(key.as_str(), "unix_stream" | "unix_dgram");
        // tcp() and tcp6() speak TLS when they have a tls() block.
        let mut want_tls: Option<Pos> = None;
        let mut tls_options: Option<TlsOptions> = None;
        let mut persist_name: Option<String> = None;
        let mut disk_buffer: Option<DiskBufferOptions> = None;
        let mut port = None;
        let (mut local_ip, mut local_port) = (None, None);
        for opt in node.options() {
            let k = opt.key();
            if NETWORK_DEST_NOT_YET.contains(&k.as_str()) {
                return Err(ConfigError::not_supported(
                    opt.pos,
                    &format!("{}() in {}()", opt.name, node.name),
                ));
            }
            let network_only = || -> Result<(), ConfigError> {
                if unix {
                    return Err(ConfigError::new(
                        opt.pos,
                        format!("{}() has no {}() option", node.name, opt.name),
                    ));
                }
                Ok(())
            };
            match k.as_str() {
                "port" | "destport" => {
                    network_only()?;
                    port = Some(port_number(opt)?);
                }
                "localport" => {
                    network_only()?;
                    local_port = Some(port_number(opt)?);
                }
                "localip" => {
                    network_only()?;
                    let v = opt.value()?;
                    local_ip = Some(v.text.parse::<IpAddr>().map_err(|_| {
                        ConfigError::new(v.pos, format!("'{}' is not an IP address", v.text))
                    })?);
                }
                "transport" if matches!(key.as_str(), "network" | "syslog") => {
                    let v = opt.value()?;
                    opts.transport = match v.text.to_ascii_lowercase().as_str() {
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
                "ip_protocol" => {
                    network_only()?;
                    let v = opt.value()?;
                    opts.ip_protocol = match v.as_u64()? {
                        4 => Some(4),
                        6 => Some(6),
                        _ => return Err(ConfigError::new(v.pos, "ip-protocol() is 4 or 6")),
                    };
                }
                "failover" => {
                    network_only()?;
                    failover(opt, &mut opts)?;
                }
                "so_sndbuf" => opts.so_sndbuf = Some(opt.u64()? as usize),
                "so_keepalive" => opts.so_keepalive = opt.bool()?,
                "keep_alive" | "close_on_input" => {
                    opt.bool()?;
                }
                "tls" => {
                    network_only()?;
                    tls_options = Some(TlsOptions::parse(opt)?);
                    if matches!(key.as_str(), "tcp" | "tcp6" | "relp") {
                        want_tls = Some(opt.pos);
                    }
                }
                "time_reopen" => opts.time_reopen = Duration::from_secs(opt.u64()?.max(1)),
                "log_fifo_size" => opts.log_fifo_size = opt.u64()?.max(1) as usize,
                "flush_lines" | "flush_timeout" => {
                    opt.u64()?;
                }
                "persist_name" => persist_name = Some(opt.string()?),
                "disk_buffer" => disk_buffer = Some(disk_buffer_options(opt)?),
                _ if format.apply(opt, &self.templates)? => {}
                _ => {
                    let valid: Vec<&str> = NETWORK_DEST_OPTIONS
                        .iter()
                        .chain(NETWORK_DEST_NOT_YET)
                        .copied()
                        .collect();
                    return Err(ConfigError::unknown(
                        opt.pos,
                        "option",
                        &opt.name,
                        &format!(" in {}()", node.name),
                        &valid,
                    ));
                }
            }
        }
        let server = node.first_value().ok_or_else(|| {
            let example = if unix { "\"/dev/log\"" } else { "\"10.0.0.1\"" };
            ConfigError::new(
                node.pos,
                format!("{}() needs a server: {}({example})", node.name, node.name),
            )
        })?;
        opts.servers.insert(0, server.text.clone());
        opts.tls = match (want_tls, &tls_options) {
            (Some(_), Some(t)) => Some(t.client_config()?),
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
        let stream = matches!(opts.transport, Transport::Tcp | Transport::UnixStream);
        opts.octet_counting = key == "syslog" && stream;
        opts.port = port.unwrap_or(match (key.as_str(), opts.transport, &opts.tls) {
            ("relp", ..) => RELP_PORT,
            ("syslog", Transport::Tcp, Some(_)) => 6514,
            ("syslog", Transport::Tcp, None) => 601,
            _ => 514,
        });
        if local_ip.is_some() || local_port.is_some() {
            let ip = local_ip.unwrap_or(if opts.ip_protocol == Some(6) {
                IpAddr::from(std::net::Ipv6Addr::UNSPECIFIED)
            } else {
                IpAddr::from(std::net::Ipv4Addr::UNSPECIFIED)
            });
            opts.local = Some(SocketAddr::new(ip, local_port.unwrap_or(0)));
        }
        if let Some(d) = disk_buffer {
            // The buffer's directory is named after what it feeds, so that a restart with the
            // same configuration finds it: persist-name(), or destination, driver and server.
            let name = persist_name.unwrap_or_else(|| {
                format!(
                    "{}-{key}-{}-{}",
                    label.trim_start_matches("destination "),
                    server.text,
                    opts.port
                )
            });
            let dir = buffer_dir_name(&name, d.reliable);
            opts.disk_buffer = Some((d, dir));
        }
        if key == "syslog" {
            format.syslog_protocol = true;
        }
        let proto = Format::Proto(format.dates.clone());
        let formatter = format.formatter(proto);
        let instance = match opts.transport {
            Transport::Tcp => format!("tcp,{}:{}", server.text, opts.port),
            Transport::Udp => format!("udp,{}:{}", server.text, opts.port),
            Transport::UnixStream | Transport::UnixDgram => server.text.clone(),
        };
        let counters = self
            .stats
            .destination(&driver.component, &driver.id, &instance);
        Ok(Arc::new(NetworkDestination::new(
            label, formatter, opts, counters,
        )))
    }

    fn anon(&mut self, kind: &str) -> String {
        let n = self.anon;
        self.anon += 1;
        format!("#anon-{kind}{n}")
    }
}

use sluice_model::macros::DateOptions;

/// Connections a stream listener lets wait for `accept()`. syslog-ng's default is 256; a burst
/// of thousands of clients (a relay restarting, a fleet reconnecting) overflows that, and every
/// connection the kernel drops waits a second for its SYN to be sent again. The kernel caps it
/// at `net.core.somaxconn` (4096 on current kernels).
const DEFAULT_LISTEN_BACKLOG: u32 = 4096;
/// `handshake-timeout()` not given: how long a connection may take to finish its TLS
/// handshake or PROXY header. syslog-ng waits for ever for a PROXY header.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// RELP has no assigned port; rsyslog's examples use 2514.
const RELP_PORT: u16 = 2514;

/// Options only network and unix sources have.
#[derive(Default)]
struct NetOptions {
    ip: Option<(String, Pos)>,
    port: Option<u16>,
    transport: Option<(String, Pos)>,
    ip_protocol: Option<u8>,
    max_connections: Option<usize>,
    so_rcvbuf: Option<usize>,
    so_reuseport: bool,
    keep_alive: bool,
    listen_backlog: Option<u32>,
    perm: Option<u32>,
    owner: Option<u32>,
    group: Option<u32>,
    tls: Option<TlsOptions>,
    /// `trusted-proxies()`: the peers whose PROXY headers are believed.
    trusted_proxies: Vec<sluice_model::filter::Network>,
    handshake_timeout: Option<Duration>,
}

impl NetOptions {
    fn apply(&mut self, opt: &Node) -> Result<bool, ConfigError> {
        match opt.key().as_str() {
            "ip" | "localip" => self.ip = Some((opt.string()?, opt.value()?.pos)),
            "port" | "localport" => self.port = Some(port_number(opt)?),
            "transport" => {
                self.transport = Some((opt.string()?.to_ascii_lowercase(), opt.value()?.pos))
            }
            "ip_protocol" => {
                let v = opt.value()?;
                match v.as_u64()? {
                    4 => self.ip_protocol = Some(4),
                    6 => self.ip_protocol = Some(6),
                    _ => return Err(ConfigError::new(v.pos, "ip-protocol() is 4 or 6")),
                }
            }
            "max_connections" => self.max_connections = Some(opt.u64()?.max(1) as usize),
            "so_rcvbuf" => self.so_rcvbuf = Some(opt.u64()? as usize),
            "so_reuseport" => self.so_reuseport = opt.bool()?,
            "keep_alive" | "so_keepalive" => self.keep_alive = opt.bool()?,
            "listen_backlog" => self.listen_backlog = Some(opt.u64()?.clamp(1, 65535) as u32),
            "perm" => self.perm = Some(options::mode(opt)?),
            "owner" => self.owner = Some(options::user(opt)?),
            "group" => self.group = Some(options::group(opt)?),
            "tls" => self.tls = Some(TlsOptions::parse(opt)?),
            "trusted_proxies" => {
                for v in opt.words()? {
                    let network = sluice_model::filter::Network::parse(&v.text).ok_or_else(|| {
                        ConfigError::new(
                            v.pos,
                            format!(
                                "trusted-proxies() takes addresses and networks such as \"10.0.0.5\", \"10.0.0.0/24\" or \"2001:db8::/32\", not \"{}\"",
                                v.text
                            ),
                        )
                    })?;
                    self.trusted_proxies.push(network);
                }
            }
            "handshake_timeout" => {
                self.handshake_timeout = Some(Duration::from_secs(opt.u64()?.max(1)))
            }
            "optional" | "create_dirs" => {
                opt.bool()?;
            }
            _ => return Ok(false),
        }
        Ok(true)
    }
}

/// The options that say how a destination formats messages: `template()`,
/// `template-escape()`, the date options and the format flags.
struct FormatOptions {
    dates: DateOptions,
    template: Option<Template>,
    escape: Option<bool>,
    syslog_protocol: bool,
    no_multi_line: bool,
}

impl FormatOptions {
    fn new(g: &Globals) -> FormatOptions {
        FormatOptions {
            dates: g.dates.clone(),
            template: None,
            escape: None,
            syslog_protocol: false,
            no_multi_line: false,
        }
    }

    fn apply(
        &mut self,
        opt: &Node,
        templates: &HashMap<String, Template>,
    ) -> Result<bool, ConfigError> {
        match opt.key().as_str() {
            "template" => {
                let v = opt.value()?;
                self.template = Some(match templates.get(&v.text) {
                    Some(t) => t.clone(),
                    None => Template::compile(&v.text).map_err(|e| ConfigError::new(v.pos, e))?,
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

/// How statistics name a destination driver: `dst.file` and `d_file#0`.
struct DriverName {
    component: String,
    id: String,
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

/// A `port()` value.
fn port_number(opt: &Node) -> Result<u16, ConfigError> {
    let v = opt.value()?;
    let port = v.as_u64()?;
    u16::try_from(port).map_err(|_| ConfigError::new(v.pos, format!("port {port} is out of range")))
}

/// `failover(servers("a", "b") failback(tcp-probe-interval(60) successful-probes-required(3)))`.
fn failover(opt: &Node, opts: &mut NetworkOptions) -> Result<(), ConfigError> {
    for o in opt.options() {
        match o.key().as_str() {
            "servers" => opts.servers.extend(o.values().map(|v| v.text.clone())),
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
                opts.failback = Some(fb);
            }
            _ => return Err(o.unknown_in(opt, &["servers", "failback"])),
        }
    }
    if opts.servers.is_empty() {
        return Err(ConfigError::new(
            opt.pos,
            "failover() needs servers(): failover(servers(\"10.0.0.2\"))",
        ));
    }
    Ok(())
}

impl PathContext for Builder<'_> {
    fn source(&mut self, name: &str, pos: Pos) -> Result<SourceId, ConfigError> {
        if let Some(id) = self.source_ids.get(name) {
            return Ok(*id);
        }
        let s = self.statement("source", name, pos)?;
        let body = s.body.clone();
        self.source_body(name, &body, pos)
    }

    fn inline_source(&mut self, body: &Body, pos: Pos) -> Result<SourceId, ConfigError> {
        let name = self.anon("source");
        self.source_body(&name, body, pos)
    }

    fn destination(&mut self, name: &str, pos: Pos) -> Result<DestId, ConfigError> {
        if let Some(id) = self.dest_ids.get(name) {
            return Ok(*id);
        }
        let s = self.statement("destination", name, pos)?;
        let body = s.body.clone();
        self.destination_body(name, &body, pos)
    }

    fn inline_destination(&mut self, body: &Body, pos: Pos) -> Result<DestId, ConfigError> {
        let name = self.anon("destination");
        self.destination_body(&name, body, pos)
    }

    fn filter(&mut self, name: &str, pos: Pos) -> Result<Arc<Filter>, ConfigError> {
        if let Some(f) = self.filters.get(name) {
            return Ok(f.clone());
        }
        if self.filters_building.iter().any(|n| n == name) {
            return Err(ConfigError::new(
                pos,
                format!("filter '{name}' refers to itself"),
            ));
        }
        let s = self.statement("filter", name, pos)?;
        let Body::Filter(expr) = &s.body else {
            unreachable!("filter statements have filter bodies")
        };
        let expr = expr.clone();
        self.filters_building.push(name.to_string());
        let compiled = filter::compile(&expr, &mut |n, p| self.filter(n, p));
        self.filters_building.pop();
        let f = Arc::new(compiled?);
        self.filters.insert(name.to_string(), f.clone());
        Ok(f)
    }

    fn rewrite(&mut self, name: &str, pos: Pos) -> Result<Arc<Rewrite>, ConfigError> {
        if let Some(r) = self.rewrites.get(name) {
            return Ok(r.clone());
        }
        let s = self.statement("rewrite", name, pos)?;
        let (body, pos) = (s.body.clone(), s.pos);
        let r = Arc::new(Rewrite::compile(&body, pos, &mut |n, p| self.filter(n, p))?);
        self.rewrites.insert(name.to_string(), r.clone());
        Ok(r)
    }

    /// From `stats-level(1)` on, named filters count `matched`/`not_matched` and named parsers
    /// `discarded`, under syslog-ng's names.
    fn tally(&mut self, kind: &str, name: &str) -> Option<Arc<Tally>> {
        if self.globals.stats_level < 1 {
            return None;
        }
        Some(Arc::new(match kind {
            "filter" => Tally {
                passed: Some(self.stats.counter("filter", name, "", "matched")),
                stopped: self.stats.counter("filter", name, "", "not_matched"),
            },
            _ => Tally {
                passed: None,
                stopped: self.stats.counter("parser", name, "", "discarded"),
            },
        }))
    }

    fn parser(&mut self, name: &str, pos: Pos) -> Result<Arc<Parsers>, ConfigError> {
        if let Some(p) = self.parsers.get(name) {
            return Ok(p.clone());
        }
        let s = self.statement("parser", name, pos)?;
        let p = Arc::new(Parsers::compile(&s.body, s.pos)?);
        self.parsers.insert(name.to_string(), p.clone());
        Ok(p)
    }
}
