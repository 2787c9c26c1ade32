//! The source drivers, as syslog-ng names them: each one declaration — its names, its option
//! table, a valid use of it, and its build.
//!
//! [`build`] finds a statement's driver in [`DRIVERS`], holds the node against the driver's
//! table (the options every source has, [`SourceOptions::DECLARED`], then its own), builds it
//! and refuses an option it declared and did not read. A driver syslog-ng has and sluice does
//! not is in [`NOT_YET`]. To add a source: write its runtime beside this file, its
//! declaration here, and a line in `every_source_reads_every_option_it_declares`'s samples.

use super::datagram::{Bind, DatagramSource};
use super::file::FileSource;
use super::group::{DatagramGroup, Grouping};
use super::internal::InternalSource;
#[cfg(feature = "journal")]
use super::journal::JournalSource;
#[cfg(feature = "kafka")]
use super::kafka::{KafkaSource, Topics};
use super::program::{PipeSource, ProgramSource};
use super::stdin::StdinSource;
use super::stream::{Listen, Proxied, StreamSource};
use super::wildcard::WildcardSource;
use super::Local;
use super::{ReaderSpec, SourceCounters, UnixSocket, READ_BUDGET};
use crate::dns::NameOptions;
use crate::options::{self, Globals, SourceOptions, MULTI_LINE};
use crate::stats::Registry;
use crate::tls::TlsOptions;
use crate::window::{Flow, ReadBudget};
use sluice_config::declared::{self, not_yet, read, Declared, Options};
use sluice_config::{ConfigError, Node};
use sluice_model::path::SourceId;
use sluice_model::Ingest;
#[cfg(feature = "journal")]
use sluice_model::{ingest::Format, journal::JournalFields};
use sluice_protocol::framing::Framing;
use sluice_protocol::multiline::MultiLine;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

/// A source driver: the names it answers to, its options, and how it is made from them.
pub struct SourceDriver {
    /// As `Node::key` gives them (`unix_stream`); the first is the driver's own.
    pub names: &'static [&'static str],
    /// Its own options, in parts; every source also has [`SourceOptions::DECLARED`].
    pub options: &'static [&'static [Declared]],
    /// A valid use, for the table test.
    pub sample: &'static str,
    pub build: fn(&Node, &mut Options, Common) -> Result<Built, ConfigError>,
}

/// What a source driver makes.
pub type Built = Arc<dyn super::Source>;

/// What a source driver is built in: the global options, the counters, and the source
/// statement it stands in (`source s_net { tcp(); udp(); };`: `tcp()` is driver 0 of `s_net`).
pub struct SourceContext<'a> {
    pub globals: &'a Globals,
    pub stats: &'a Arc<Registry>,
    pub name: &'a Arc<str>,
    pub id: SourceId,
    /// The driver's place in its statement.
    pub n: usize,
}

/// The drivers of this version.
pub static DRIVERS: &[SourceDriver] = &[
    SourceDriver {
        names: &["network", "syslog", "tcp", "tcp6", "udp", "udp6", "relp"],
        options: &[NETWORK, MULTI_LINE],
        sample: "network(port(0))",
        build: network,
    },
    SourceDriver {
        names: &["unix_stream", "unix_dgram"],
        options: &[UNIX, MULTI_LINE],
        sample: "unix-stream(\"/nonexistent/sluice-table-test\")",
        build: unix,
    },
    SourceDriver {
        names: &["udp_balancer"],
        options: &[UDP_BALANCER],
        sample: "udp-balancer(port(0) listeners(2))",
        build: udp_balancer,
    },
    SourceDriver {
        names: &["system"],
        options: &[],
        sample: "system()",
        build: system,
    },
    #[cfg(feature = "journal")]
    SourceDriver {
        names: &["systemd_journal"],
        options: &[SYSTEMD_JOURNAL],
        sample: "systemd-journal(prefix(\".j.\") matches(\"_COMM\" => \"sshd\"))",
        build: systemd_journal,
    },
    #[cfg(feature = "kafka")]
    SourceDriver {
        names: &["kafka"],
        options: &[KAFKA],
        sample: "kafka(bootstrap-servers(\"127.0.0.1:9\") topic(\"logs\"))",
        build: kafka,
    },
    SourceDriver {
        names: &["file"],
        options: &[FILE, MULTI_LINE],
        sample: "file(\"/nonexistent/sluice-table-test\")",
        build: file,
    },
    SourceDriver {
        names: &["wildcard_file"],
        options: &[WILDCARD_FILE, MULTI_LINE],
        sample: "wildcard-file(base-dir(\"/nonexistent\") filename-pattern(\"*.log\"))",
        build: wildcard_file,
    },
    SourceDriver {
        names: &["program"],
        options: &[PROGRAM, MULTI_LINE],
        sample: "program(\"true\")",
        build: program,
    },
    SourceDriver {
        names: &["pipe"],
        options: &[PIPE, options::MAKE_FILE, MULTI_LINE],
        sample: "pipe(\"/nonexistent/sluice-table-test\")",
        build: pipe,
    },
    SourceDriver {
        names: &["stdin"],
        options: &[MULTI_LINE],
        sample: "stdin()",
        build: stdin,
    },
    SourceDriver {
        names: &["internal"],
        options: &[],
        sample: "internal()",
        build: internal,
    },
];

/// Source drivers of syslog-ng that sluice does not have yet.
pub const NOT_YET: &[&str] = &[
    #[cfg(not(feature = "journal"))]
    "systemd_journal",
    "systemd_syslog",
    "python",
    "python_fetcher",
    "snmptrap",
    "linux_audit",
    "sun_streams",
    "java",
    #[cfg(not(feature = "kafka"))]
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

/// Builds the source driver `node` stands for.
pub fn build(node: &Node, cx: &SourceContext) -> Result<Built, ConfigError> {
    let driver = declared::find(
        node,
        ("source", "source driver"),
        DRIVERS,
        |d| d.names,
        NOT_YET,
    )?;
    let parts: Vec<&[Declared]> = std::iter::once(SourceOptions::DECLARED)
        .chain(driver.options.iter().copied())
        .collect();
    let mut o = Options::check_parts(node, &parts)?;
    let mut opts = SourceOptions::new(cx.globals);
    o.apply(SourceOptions::DECLARED, |opt| opts.apply(opt))?;
    // Drivers that read streams of lines declare these.
    let first = |p: &[Declared]| p.first().map(|d| d.name);
    if driver.options.iter().any(|p| first(p) == first(MULTI_LINE)) {
        o.apply(MULTI_LINE, |opt| opts.apply(opt))?;
    }
    let multi_line = opts.multi_line.build()?;
    let built = (driver.build)(
        node,
        &mut o,
        Common {
            cx,
            opts,
            multi_line,
        },
    )?;
    o.finish()?;
    Ok(built)
}

/// What every source driver builds from: its context and the options every source has.
pub struct Common<'a> {
    cx: &'a SourceContext<'a>,
    opts: SourceOptions,
    /// `multi-line-mode()`, built.
    multi_line: Option<(Arc<MultiLine>, Duration)>,
}

impl Common<'_> {
    fn names(&self) -> NameOptions {
        NameOptions {
            use_dns: self.opts.use_dns,
            use_fqdn: self.opts.use_fqdn,
            normalize: self.opts.normalize_hostnames,
            cache_expire: self.cx.globals.dns_cache_expire,
            hosts: match self.opts.dns_cache {
                true => self.cx.globals.dns_cache_hosts.clone(),
                false => None,
            },
        }
    }

    /// The driver's statistics component: `src.network`, `src.unix-stream`.
    fn component(node: &Node) -> String {
        format!("src.{}", node.key().replace('_', "-"))
    }

    /// A counter of the listener, named as syslog-ng names it by its address:
    /// `src.network;s_net;afsocket_sd.(stream,AF_INET(127.0.0.1:514));a;connections`.
    fn counter(
        &self,
        node: &Node,
        listener: &str,
        what: &'static str,
    ) -> Arc<std::sync::atomic::AtomicU64> {
        self.cx
            .stats
            .counter(&Self::component(node), self.cx.name, listener, what)
    }

    /// How the driver's readers read: `instance` names the driver in syslog-ng's counters
    /// (`src.network;s_net#0;tcp,127.0.0.1`).
    fn reader(
        &self,
        node: &Node,
        ingest: &Arc<Ingest>,
        instance: &str,
        framing: Framing,
        window: u32,
        listener: &str,
    ) -> ReaderSpec {
        let cx = self.cx;
        // `pad-size()`: records of that many bytes instead of lines.
        let framing = match (framing, self.opts.pad_size) {
            (Framing::Newline, Some(size)) => Framing::Padded(size),
            (framing, _) => framing,
        };
        ReaderSpec {
            framing,
            encoding: self.opts.encoding,
            log_msg_size: self.opts.log_msg_size,
            trim_large_messages: self.opts.trim_large_messages,
            window,
            keep_empty: self.opts.empty_lines,
            multi_line: self.multi_line.clone(),
            budget: ReadBudget::new(READ_BUDGET),
            ingest: ingest.clone(),
            listener: Arc::from(listener),
            counted: SourceCounters {
                driver: cx.stats.counter(
                    &Self::component(node),
                    &format!("{}#{}", cx.name, cx.n),
                    instance,
                    "processed",
                ),
                source: cx.stats.counter("source", cx.name, "", "processed"),
                oversized: self.counter(node, listener, "oversized_messages"),
                framing_errors: self.counter(node, listener, "framing_errors"),
                empty: self.counter(node, listener, "empty_messages"),
                flow: Flow {
                    in_use: self.counter(node, listener, "window_in_use"),
                    paused: self.counter(node, listener, "paused_readers"),
                    paused_since: self.counter(node, listener, "paused_since"),
                },
            },
        }
    }

    /// The window of each of `max_connections` readers: `log-iw-size()` shared among them, at
    /// least `min-iw-size-per-reader()`.
    fn per_reader(&self, max_connections: usize) -> u32 {
        (self.opts.log_iw_size / max_connections.max(1) as u32)
            .max(self.cx.globals.min_iw_size_per_reader)
    }

    fn ingest(&self) -> Arc<Ingest> {
        Arc::new(self.opts.ingest(self.cx.name, self.cx.globals))
    }

    /// A stream listener with what every one has; the driver sets the rest.
    fn stream(
        &self,
        node: &Node,
        listen: Listen,
        reader: ReaderSpec,
        max_connections: usize,
        listen_backlog: Option<u32>,
    ) -> StreamSource {
        let listener = reader.listener.clone();
        StreamSource {
            listen,
            pass_credentials: false,
            reader,
            max_connections,
            names: self.names(),
            source_name: self.cx.name.clone(),
            source_id: self.cx.id,
            so_rcvbuf: None,
            so_reuseport: false,
            keep_alive: false,
            listen_backlog: listen_backlog.unwrap_or(DEFAULT_LISTEN_BACKLOG),
            connections: self.counter(node, &listener, "connections"),
            proxied: Proxied::No,
            trusted_proxies: Vec::new(),
            handshake_timeout: HANDSHAKE_TIMEOUT,
            unauthenticated: Arc::default(),
            tls: None,
            tls_failures: self.counter(node, &listener, "tls_handshake_failures"),
            rejected: self.counter(node, &listener, "rejected_connections"),
            relp: false,
            tls_fingerprints: false,
        }
    }

    /// A datagram socket's reader: `listener` names its counters.
    fn datagram(
        &self,
        node: &Node,
        listener: &str,
        bind: Bind,
        reader: ReaderSpec,
        so_rcvbuf: Option<usize>,
    ) -> Result<DatagramSource, ConfigError> {
        let unix = matches!(bind, Bind::Unix(_));
        if self.multi_line.is_some() {
            return Err(ConfigError::new(
                node.pos,
                format!(
                    "multi-line-mode() joins the lines of a stream; in {}() each datagram is one message",
                    node.name
                ),
            ));
        }
        Ok(DatagramSource {
            bind,
            reader,
            names: self.names(),
            source_name: self.cx.name.clone(),
            source_id: self.cx.id,
            so_rcvbuf,
            so_reuseport: false,
            pass_credentials: unix && self.cx.globals.pass_unix_credentials,
            kernel_dropped: self.counter(node, listener, "socket_receive_dropped"),
        })
    }
}

/// Connections a stream listener lets wait for `accept()`. syslog-ng's default is 256; a burst
/// of thousands of clients (a relay restarting, a fleet reconnecting) overflows that, and every
/// connection the kernel drops waits a second for its SYN to be sent again. The kernel caps it
/// at `net.core.somaxconn` (4096 on current kernels).
const DEFAULT_LISTEN_BACKLOG: u32 = 4096;
/// `handshake-timeout()` not given: how long a connection may take to finish its TLS
/// handshake or PROXY header. syslog-ng waits for ever for a PROXY header.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// RELP has no assigned port; rsyslog's examples use 2514.
pub const RELP_PORT: u16 = 2514;

/// Options of `network()`, `syslog()`, `tcp()`, `udp()` and `relp()`.
const NETWORK: &[Declared] = &[
    read("ip", "ip(\"127.0.0.1\")"),
    read("localip", "localip(\"::1\")"),
    read("port", "port(0)"),
    read("localport", "localport(0)"),
    read("transport", "transport(udp)"),
    read("ip_protocol", "ip-protocol(6)"),
    read("max_connections", "max-connections(100)"),
    read("so_rcvbuf", "so-rcvbuf(1048576)"),
    read("so_reuseport", "so-reuseport(yes)"),
    read("keep_alive", "keep-alive(yes)"),
    read("so_keepalive", "so-keepalive(yes)"),
    read("listen_backlog", "listen-backlog(100)"),
    read(
        "tls",
        "transport(tls) tls(key-file(\"/k\") cert-file(\"/c\") peer-verify(optional-untrusted))",
    ),
    read(
        "trusted_proxies",
        "transport(proxied-tcp) trusted-proxies(\"10.0.0.0/8\")",
    ),
    read("handshake_timeout", "handshake-timeout(5)"),
    not_yet("so_broadcast"),
    not_yet("so_sndbuf"),
    not_yet("ip_ttl"),
    not_yet("ip_tos"),
    not_yet("dynamic_window_size"),
    not_yet("dynamic_window_stats_freq"),
    not_yet("dynamic_window_realloc_ticks"),
    not_yet("interface"),
    not_yet("failover"),
    not_yet("idle_timeout"),
];

/// The transports a network source speaks: (datagrams, TLS, where the PROXY header is).
const TRANSPORTS: &[(&str, bool, bool, Proxied)] = &[
    ("udp", true, false, Proxied::No),
    ("tcp", false, false, Proxied::No),
    ("framed", false, false, Proxied::No),
    ("text", false, false, Proxied::No),
    ("tls", false, true, Proxied::No),
    ("proxied-tcp", false, false, Proxied::First),
    ("proxied-tls", false, true, Proxied::InsideTls),
    // A proxy that passes TLS through says who connected, then the client's handshake follows.
    ("proxied-tls-passthrough", false, true, Proxied::First),
];

/// `network()`, `syslog()`, `tcp()`, `tcp6()`, `udp()`, `udp6()`, `relp()`: a stream
/// listener or a datagram socket, by transport.
fn network(node: &Node, o: &mut Options, common: Common) -> Result<Built, ConfigError> {
    let key = node.key();
    if let Some(v) = node.first_value() {
        return Err(ConfigError::new(
            v.pos,
            format!(
                "{}() takes no positional value; did you mean ip(\"{}\")?",
                node.name, v.text
            ),
        ));
    }
    let (transport, tpos) = match o.last("transport") {
        Some(opt) => (
            opt.string()?.to_ascii_lowercase().replace('_', "-"),
            opt.value()?.pos,
        ),
        None => (
            if key.starts_with("udp") { "udp" } else { "tcp" }.to_string(),
            node.pos,
        ),
    };
    let ip_protocol = match o.last("ip_protocol") {
        Some(opt) => Some(ip_protocol(opt)?),
        None => None,
    };
    let ipv6 = key.ends_with('6') || ip_protocol == Some(6);
    let (ip, ip_option) = listen_ip(o, ipv6)?;
    // The driver's counter name shows the transport and address as written (syslog-ng's).
    let instance = format!(
        "{transport},{}",
        ip_option.map_or("0.0.0.0", |v| v.text.as_str())
    );
    let Some(&(_, udp, tls, proxied)) = TRANSPORTS.iter().find(|t| t.0 == transport) else {
        if transport == "auto" {
            return Err(ConfigError::not_supported(
                tpos,
                &format!("transport({transport})"),
            ));
        }
        let names: Vec<&str> = TRANSPORTS.iter().map(|t| t.0).collect();
        return Err(ConfigError::unknown(
            tpos,
            "transport",
            &transport,
            "",
            &names,
        ));
    };
    let tls_options = match o.last("tls") {
        Some(opt) => Some(TlsOptions::parse(opt)?),
        None => None,
    };
    // tcp(), tcp6() and relp() speak TLS when they have a tls() block.
    let tls = tls || (matches!(key.as_str(), "tcp" | "tcp6" | "relp") && tls_options.is_some());
    if key == "relp" && (udp || proxied != Proxied::No) {
        return Err(ConfigError::new(
            tpos,
            "relp() runs over TCP, or TLS with a tls() block",
        ));
    }
    let server_tls = match (tls, &tls_options) {
        (true, Some(t)) => Some(t.server()?),
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
    let default_port = match (key.as_str(), udp, &server_tls, proxied) {
        ("relp", ..) => RELP_PORT,
        ("syslog", false, Some(_), Proxied::No) => 6514,
        ("syslog", false, _, _) => 601,
        _ => 514,
    };
    let port = match o.last_of(&["port", "localport"]) {
        Some(opt) => port_number(opt)?,
        None => default_port,
    };
    let addr = SocketAddr::new(ip, port);
    let so_rcvbuf = so_rcvbuf(o)?;
    let so_reuseport = o.yes_no("so_reuseport", false)?;
    let max_connections = max_connections(o)?;
    let listen_backlog = listen_backlog(o)?;
    let keep_alive = o
        .last_of(&["keep_alive", "so_keepalive"])
        .map(Node::bool)
        .transpose()?
        .unwrap_or(false);
    let mut trusted_proxies = Vec::new();
    for opt in o.all("trusted_proxies") {
        for v in opt.words()? {
            trusted_proxies.push(sluice_model::filter::Network::parse(&v.text).ok_or_else(|| {
                ConfigError::new(
                    v.pos,
                    format!(
                        "trusted-proxies() takes addresses and networks such as \"10.0.0.5\", \"10.0.0.0/24\" or \"2001:db8::/32\", not \"{}\"",
                        v.text
                    ),
                )
            })?);
        }
    }
    let handshake_timeout = match o.last("handshake_timeout") {
        Some(opt) => Duration::from_secs(opt.u64()?.max(1)),
        None => HANDSHAKE_TIMEOUT,
    };

    let mut common = common;
    if key == "syslog" {
        common.opts.flags.syslog_protocol = true;
    }
    let ingest = common.ingest();
    let family = if addr.is_ipv6() {
        "AF_INET6"
    } else {
        "AF_INET"
    };
    let listener = |kind: &str| format!("afsocket_sd.({kind},{family}({addr}))");
    if udp {
        let listener = listener("dgram");
        let window = common.opts.log_iw_size;
        let reader = common.reader(
            node,
            &ingest,
            &instance,
            Framing::Newline,
            window,
            &listener,
        );
        let mut s = common.datagram(node, &listener, Bind::Udp(addr), reader, so_rcvbuf)?;
        s.so_reuseport = so_reuseport;
        return Ok(Arc::new(s));
    }
    let framing = if key == "syslog" || transport == "framed" {
        Framing::OctetCounted
    } else {
        Framing::Newline
    };
    let max = max_connections.unwrap_or(10);
    let listener = listener("stream");
    let reader = common.reader(
        node,
        &ingest,
        &instance,
        framing,
        common.per_reader(max),
        &listener,
    );
    let mut s = common.stream(node, Listen::Tcp(addr), reader, max, listen_backlog);
    s.so_rcvbuf = so_rcvbuf;
    s.so_reuseport = so_reuseport;
    s.keep_alive = keep_alive;
    s.proxied = proxied;
    s.trusted_proxies = trusted_proxies;
    s.handshake_timeout = handshake_timeout;
    s.tls_fingerprints = tls_options
        .as_ref()
        .is_some_and(|t| !t.trusted_keys.is_empty());
    s.tls = server_tls;
    s.relp = key == "relp";
    Ok(Arc::new(s))
}

/// Options of `unix-stream()` and `unix-dgram()`.
const UNIX: &[Declared] = &[
    read("owner", "owner(\"root\")"),
    read("group", "group(\"root\")"),
    read("perm", "perm(0600)"),
    read("max_connections", "max-connections(100)"),
    // syslog-ng keeps a unix-stream connection open across a reload when this is on; sluice
    // keeps every connection of a source that stays.
    read("keep_alive", "keep-alive(yes)"),
    // The socket is sluice's to make: a missing directory is created, so both are moot.
    read("optional", "optional(yes)"),
    read("create_dirs", "create-dirs(yes)"),
    read("so_rcvbuf", "so-rcvbuf(1048576)"),
    read("listen_backlog", "listen-backlog(100)"),
    read("pass_unix_credentials", "pass-unix-credentials(no)"),
];

/// `unix-stream("/dev/log")`, `unix-dgram("/dev/log")`: the local syslog() sockets.
fn unix(node: &Node, o: &mut Options, common: Common) -> Result<Built, ConfigError> {
    let path = node.first_value().ok_or_else(|| {
        ConfigError::new(
            node.pos,
            format!(
                "{}() needs a socket path: {}(\"/dev/log\")",
                node.name, node.name
            ),
        )
    })?;
    let unix = UnixSocket {
        path: path.text.clone().into(),
        perm: match o.last("perm") {
            Some(opt) => options::mode(opt)?,
            None => 0o666,
        },
        owner: o.last("owner").map(options::user).transpose()?,
        group: o.last("group").map(options::group).transpose()?,
    };
    for name in ["keep_alive", "optional", "create_dirs"] {
        o.last(name).map(Node::bool).transpose()?;
    }
    // As syslog-ng 3.38: on unless turned off, here or in options {}.
    let pass_credentials = o.yes_no(
        "pass_unix_credentials",
        common.cx.globals.pass_unix_credentials,
    )?;
    let so_rcvbuf = so_rcvbuf(o)?;
    let max_connections = max_connections(o)?;
    let listen_backlog = listen_backlog(o)?;
    let mut common = common;
    common.opts.flags.local = true;
    // syslog-ng expects no hostname on unix sockets, whatever flags() says: local syslog()
    // calls do not write one.
    common.opts.flags.expect_hostname = false;
    let ingest = common.ingest();
    let instance = path.text.as_str();
    let shown = unix.path.display().to_string();
    if node.key() == "unix_stream" {
        let max = max_connections.unwrap_or(256);
        let listener = format!("afsocket_sd.(stream,AF_UNIX({shown}))");
        let window = common.per_reader(max);
        let reader = common.reader(node, &ingest, instance, Framing::Newline, window, &listener);
        let mut s = common.stream(node, Listen::Unix(unix), reader, max, listen_backlog);
        s.so_rcvbuf = so_rcvbuf;
        s.pass_credentials = pass_credentials;
        Ok(Arc::new(s))
    } else {
        let listener = format!("afsocket_sd.(dgram,AF_UNIX({shown}))");
        let window = common.opts.log_iw_size;
        let reader = common.reader(node, &ingest, instance, Framing::Newline, window, &listener);
        let mut d = common.datagram(node, &listener, Bind::Unix(unix), reader, so_rcvbuf)?;
        d.pass_credentials = pass_credentials;
        Ok(Arc::new(d))
    }
}

/// The address a listener binds: `ip()` (or `localip()`), else every address of the family;
/// and the option as written, for the counters' names.
fn listen_ip<'n>(
    o: &mut Options<'n>,
    ipv6: bool,
) -> Result<(IpAddr, Option<&'n sluice_config::Value>), ConfigError> {
    let written = o.last_of(&["ip", "localip"]).map(Node::value).transpose()?;
    let ip = match written {
        Some(v) => v
            .text
            .parse()
            .map_err(|_| ConfigError::new(v.pos, format!("'{}' is not an IP address", v.text)))?,
        None if ipv6 => IpAddr::from(std::net::Ipv6Addr::UNSPECIFIED),
        None => IpAddr::from(std::net::Ipv4Addr::UNSPECIFIED),
    };
    Ok((ip, written))
}

/// The options of `udp-balancer()`: where it listens, its buffers, how many sockets.
const UDP_BALANCER: &[Declared] = &[
    read("ip", "ip(\"127.0.0.1\")"),
    read("localip", "localip(\"127.0.0.1\")"),
    read("port", "port(0)"),
    read("localport", "localport(0)"),
    read("ip_protocol", "ip-protocol(4)"),
    read("so_rcvbuf", "so-rcvbuf(1048576)"),
    read("listeners", "listeners(4)"),
];

/// `udp-balancer(port(514) listeners(4))`, syslog-ng PE's: `listeners()` UDP sockets on one
/// port, each read on its own, the datagrams spread evenly over them whatever their sender.
fn udp_balancer(node: &Node, o: &mut Options, common: Common) -> Result<Built, ConfigError> {
    if let Some(v) = node.first_value() {
        return Err(ConfigError::new(
            v.pos,
            format!(
                "udp-balancer() takes no positional value; did you mean ip(\"{}\")?",
                v.text
            ),
        ));
    }
    let ipv6 = o.last("ip_protocol").map(ip_protocol).transpose()? == Some(6);
    let (ip, ip_option) = listen_ip(o, ipv6)?;
    let port = match o.last_of(&["port", "localport"]) {
        Some(opt) => port_number(opt)?,
        None => 514,
    };
    let listeners = match o.last("listeners") {
        Some(opt) => {
            let v = opt.value()?;
            let n = v.as_u64()?;
            if !(1..=256).contains(&n) {
                return Err(ConfigError::new(v.pos, "listeners() is between 1 and 256"));
            }
            n as usize
        }
        None => std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    let so_rcvbuf = so_rcvbuf(o)?;
    let addr = SocketAddr::new(ip, port);
    let ingest = common.ingest();
    let family = if addr.is_ipv6() {
        "AF_INET6"
    } else {
        "AF_INET"
    };
    let window = common.opts.log_iw_size;
    let shown = ip_option.map_or("0.0.0.0", |v| v.text.as_str());
    let sockets = (0..listeners)
        .map(|k| {
            // Each listener is counted on its own: `…;udp,0.0.0.0#2;a;processed`.
            let listener = format!("afsocket_sd.(dgram,{family}({addr}))#{k}");
            let reader = common.reader(
                node,
                &ingest,
                &format!("udp,{shown}#{k}"),
                Framing::Newline,
                window,
                &listener,
            );
            let mut s = common.datagram(node, &listener, Bind::Udp(addr), reader, so_rcvbuf)?;
            s.so_reuseport = true;
            Ok(Arc::new(s))
        })
        .collect::<Result<_, ConfigError>>()?;
    Ok(Arc::new(DatagramGroup {
        sockets,
        grouping: Grouping::Balanced,
    }))
}

/// `system()`: the host's own log. Under systemd, its journal from this boot, as syslog-ng's
/// `system()` reads it (`systemd-journal(match-boot(yes))`); elsewhere — or where libsystemd
/// cannot be loaded, said — its syslog socket (`/dev/log`, or where journald forwards when
/// `/dev/log` is journald's: `/run/systemd/journal/syslog`) and the kernel's (`/dev/kmsg`,
/// read as syslog-ng's `linux-kmsg` format, program `kernel`).
fn system(node: &Node, _: &mut Options, common: Common) -> Result<Built, ConfigError> {
    if let Some(v) = node.first_value() {
        return Err(ConfigError::new(v.pos, "system() takes no value"));
    }
    // systemd's own test of whether it runs this host (`sd_booted()`).
    #[cfg(feature = "journal")]
    if std::path::Path::new("/run/systemd/system").is_dir() {
        match super::sd_journal::available() {
            Ok(()) => {
                return Ok(Arc::new(JournalSource {
                    local: journal_local(node, common, ".journald.", 64 * 1024),
                    namespace: "*".into(),
                    matches: Vec::new(),
                    match_boot: true,
                    read_old_records: true,
                    max_field_size: 64 * 1024,
                }))
            }
            Err(why) => crate::own_log::warning(format!(
                "system(): this host runs systemd, but its journal cannot be read ({why}); reading /dev/log and /dev/kmsg instead"
            )),
        }
    }
    let mut common = common;
    common.opts.flags.local = true;
    let ingest = common.ingest();
    let window = common.opts.log_iw_size;
    let journald = std::fs::symlink_metadata("/dev/log").is_ok_and(|m| m.file_type().is_symlink())
        && std::path::Path::new("/run/systemd/journal").is_dir();
    let socket = if journald {
        "/run/systemd/journal/syslog"
    } else {
        "/dev/log"
    };
    let unix = UnixSocket {
        path: socket.into(),
        perm: 0o666,
        owner: None,
        group: None,
    };
    let listener = format!("afunix_sd.(dgram,{socket})");
    // A message without a PID gets its sender's, as syslog-ng's system() gives it.
    let mut local = (*ingest).clone();
    local.pid_from_sender = true;
    let reader = common.reader(
        node,
        &Arc::new(local),
        socket,
        Framing::Newline,
        window,
        &listener,
    );
    let syslog = common.datagram(node, &listener, Bind::Unix(unix), reader, None)?;
    // The kernel's records, as syslog-ng's system() reads them: program-override("kernel"),
    // keep-timestamp(no).
    let mut kernel = (*ingest).clone();
    kernel.format = sluice_model::ingest::Format::Kmsg;
    kernel.program_override = Some(Arc::from(&b"kernel"[..]));
    kernel.keep_timestamp = false;
    let kernel = Arc::new(kernel);
    let listener = "afile_sd.(/dev/kmsg)";
    let reader = common.reader(
        node,
        &kernel,
        "/dev/kmsg",
        Framing::Newline,
        window,
        listener,
    );
    let kmsg = common.datagram(node, listener, Bind::Kmsg("/dev/kmsg".into()), reader, None)?;
    Ok(Arc::new(DatagramGroup {
        sockets: vec![Arc::new(syslog), Arc::new(kmsg)],
        grouping: Grouping::System,
    }))
}

/// The options of `systemd-journal()`.
#[cfg(feature = "journal")]
const SYSTEMD_JOURNAL: &[Declared] = &[
    read("prefix", "prefix(\".journald.\")"),
    read("max_field_size", "max-field-size(65536)"),
    read("namespace", "namespace(\"*\")"),
    read("matches", "matches(\"PRIORITY\" => \"3\")"),
    read("match_boot", "match-boot(yes)"),
    read("read_old_records", "read-old-records(no)"),
];

/// `systemd-journal()`: this machine's journal.
#[cfg(feature = "journal")]
fn systemd_journal(node: &Node, o: &mut Options, common: Common) -> Result<Built, ConfigError> {
    no_value(node)?;
    let prefix = o.last("prefix").map(|n| n.string()).transpose()?;
    let max_field_size = match o.last("max_field_size") {
        Some(n) => match n.u64()? {
            0 => return Err(ConfigError::new(n.pos, "max-field-size() is at least 1")),
            size => size as usize,
        },
        None => 64 * 1024,
    };
    let namespace = o.last("namespace").map(|n| n.string()).transpose()?;
    let mut matches = Vec::new();
    for m in o.all("matches") {
        matches.extend(journal_matches(m)?);
    }
    let match_boot = o.last("match_boot").map(|n| n.bool()).transpose()?;
    let read_old_records = o.last("read_old_records").map(|n| n.bool()).transpose()?;
    Ok(Arc::new(JournalSource {
        local: journal_local(
            node,
            common,
            prefix.as_deref().unwrap_or(".journald."),
            max_field_size,
        ),
        namespace: namespace.unwrap_or_else(|| "*".into()),
        matches,
        match_boot: match_boot.unwrap_or(false),
        read_old_records: read_old_records.unwrap_or(true),
        max_field_size,
    }))
}

/// `matches("_COMM" => "sshd" "PRIORITY" => "3")`: `FIELD=value`, each.
#[cfg(feature = "journal")]
fn journal_matches(node: &Node) -> Result<Vec<String>, ConfigError> {
    let values: Vec<&sluice_config::Value> = node.words()?;
    let bad = |pos| {
        ConfigError::new(
            pos,
            "matches() takes pairs of a field and its value: matches(\"_COMM\" => \"sshd\")",
        )
    };
    let mut matches = Vec::new();
    let mut rest = values.as_slice();
    while let [field, arrow, value, more @ ..] = rest {
        let name_ok = !field.text.is_empty()
            && field
                .text
                .bytes()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_');
        if arrow.text != "=>" || !name_ok {
            return Err(bad(field.pos));
        }
        matches.push(format!("{}={}", field.text, value.text));
        rest = more;
    }
    match rest.first() {
        Some(v) => Err(bad(v.pos)),
        None => Ok(matches),
    }
}

/// How a journal source reads: entries in the journal's export format, each field a pair
/// behind `prefix`; the priority without one local0.notice, as in syslog-ng.
#[cfg(feature = "journal")]
fn journal_local(node: &Node, common: Common, prefix: &str, max_field_size: usize) -> Local {
    let mut common = common;
    common.opts.flags.local = true;
    let mut ingest = common.opts.ingest(common.cx.name, common.cx.globals);
    ingest.format = Format::Journal(JournalFields {
        prefix: Arc::from(prefix.as_bytes()),
        max_field_size,
    });
    ingest.parse.default_pri = Some(
        common.opts.default_facility.unwrap_or(16) * 8
            + u16::from(common.opts.default_severity.unwrap_or(5)),
    );
    let ingest = Arc::new(ingest);
    let window = common.opts.log_iw_size;
    Local {
        reader: common.reader(node, &ingest, "journal", Framing::Newline, window, ""),
        names: common.names(),
        source_name: common.cx.name.clone(),
        source_id: common.cx.id,
    }
}

/// The options of `kafka()`.
#[cfg(feature = "kafka")]
const KAFKA: &[Declared] = &[
    read("bootstrap_servers", "bootstrap-servers(\"127.0.0.1:9092\")"),
    read("topic", "topic(\"logs\" => \"-1\")"),
    read("config", "config(\"group.id\" => \"central\")"),
    read("poll_timeout", "poll-timeout(100)"),
    read("kafka_logging", "kafka-logging(disabled)"),
    read("store_metadata", "store-metadata(no)"),
    read("disable_bookmarks", "disable-bookmarks(yes)"),
    read("persist_store", "persist-store(remote)"),
    read("strategy_hint", "strategy-hint(subscribe)"),
    read("ignore_saved_bookmarks", "ignore-saved-bookmarks(yes)"),
    read("workers", "workers(3)"),
    read("separated_worker_queues", "separated-worker-queues(yes)"),
];

/// `kafka(bootstrap-servers("10.0.0.1:9092") topic("logs"))`: a member of a consumer group.
#[cfg(feature = "kafka")]
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
            super::kafka::OURS,
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
#[cfg(feature = "kafka")]
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

/// The options of `file()`.
/// (Multi-line modes, `pad-size()` and encodings are every source's, in
/// [`SourceOptions::DECLARED`].)
const FILE: &[Declared] = &[read("follow_freq", "follow-freq(0.5)")];

/// `file("/var/log/app.log")`: follows a file as it grows, across rotations.
fn file(node: &Node, o: &mut Options, common: Common) -> Result<Built, ConfigError> {
    let path = node.first_value().ok_or_else(|| {
        ConfigError::new(
            node.pos,
            "file() needs a file name: file(\"/var/log/app.log\")",
        )
    })?;
    if !path.text.starts_with('/') {
        return Err(ConfigError::new(
            path.pos,
            format!(
                "file(\"{}\"): give the file's whole path, from /",
                path.text
            ),
        ));
    }
    let follow_freq = follow_freq(o)?;
    Ok(Arc::new(FileSource {
        path: path.text.clone().into(),
        local: local(node, common, &path.text),
        follow_freq,
    }))
}

/// The options of `wildcard-file()`.
const WILDCARD_FILE: &[Declared] = &[
    read("base_dir", "base-dir(\"/nonexistent\")"),
    read("filename_pattern", "filename-pattern(\"*.log\")"),
    read("exclude_pattern", "exclude-pattern(\"*.gz\")"),
    read("recursive", "recursive(yes)"),
    read("max_files", "max-files(1000)"),
    read("follow_freq", "follow-freq(0.5)"),
    read("monitor_method", "monitor-method(poll)"),
];

/// `wildcard-file(base-dir("/var/log/apps") filename-pattern("*.log"))`: every matching file.
fn wildcard_file(node: &Node, o: &mut Options, common: Common) -> Result<Built, ConfigError> {
    if let Some(v) = node.first_value() {
        return Err(ConfigError::new(
            v.pos,
            "wildcard-file() takes base-dir() and filename-pattern(): wildcard-file(base-dir(\"/var/log\") filename-pattern(\"*.log\"))",
        ));
    }
    let needed = |o: &mut Options, name: &str, example: &str| {
        o.last(name)
            .map(Node::value)
            .transpose()?
            .cloned()
            .ok_or_else(|| ConfigError::new(node.pos, format!("wildcard-file() needs {example}")))
    };
    let base_dir = needed(o, "base_dir", "base-dir(\"/var/log\")")?;
    if !base_dir.text.starts_with('/') {
        return Err(ConfigError::new(
            base_dir.pos,
            format!(
                "base-dir(\"{}\"): give the directory's whole path, from /",
                base_dir.text
            ),
        ));
    }
    let pattern = |v: &sluice_config::Value| {
        glob::Pattern::new(&v.text).map_err(|e| {
            ConfigError::new(
                v.pos,
                format!("'{}' is not a file name pattern: {e}", v.text),
            )
        })
    };
    let filename = needed(o, "filename_pattern", "filename-pattern(\"*.log\")")?;
    let exclude = o.last("exclude_pattern").map(Node::value).transpose()?;
    let recursive = o.yes_no("recursive", false)?;
    let max_files = o
        .last("max_files")
        .map(Node::u64)
        .transpose()?
        .unwrap_or(100)
        .max(1) as usize;
    // Change notices (inotify) unless monitor-method(poll).
    let notices = match o.last("monitor_method") {
        Some(opt) => {
            let v = opt.value()?;
            match v.text.as_str() {
                "auto" | "inotify" => true,
                "poll" => false,
                _ => {
                    return Err(ConfigError::unknown(
                        v.pos,
                        "monitor-method",
                        &v.text,
                        "",
                        &["auto", "inotify", "poll"],
                    ))
                }
            }
        }
        None => true,
    };
    let follow_freq = follow_freq(o)?;
    let (stats, counted_as) = (
        common.cx.stats.clone(),
        format!("{}#{}", common.cx.name, common.cx.n),
    );
    Ok(Arc::new(WildcardSource {
        base_dir: base_dir.text.clone().into(),
        pattern: pattern(&filename)?,
        exclude: exclude.map(pattern).transpose()?,
        recursive,
        max_files,
        local: local(node, common, &base_dir.text),
        follow_freq,
        notices,
        stats,
        counted_as,
    }))
}

/// `follow-freq()`, in seconds (1 when not given).
fn follow_freq(o: &mut Options) -> Result<Duration, ConfigError> {
    let Some(opt) = o.last("follow_freq") else {
        return Ok(Duration::from_secs(1));
    };
    let v = opt.value()?;
    let secs: f64 = v.text.parse().map_err(|_| {
        ConfigError::new(
            v.pos,
            format!("follow-freq({}) is not a number of seconds", v.text),
        )
    })?;
    if !(secs > 0.0 && secs <= 3600.0) {
        return Err(ConfigError::new(
            v.pos,
            "follow-freq() is more than 0 and at most 3600 seconds (sluice always follows)",
        ));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// The options of `program()`.
const PROGRAM: &[Declared] = &[read("inherit_environment", "inherit-environment(no)")];

/// `program("/usr/bin/tail -F /var/log/x")`: what a program writes.
fn program(node: &Node, o: &mut Options, common: Common) -> Result<Built, ConfigError> {
    let (command, inherit_environment) =
        options::program_command(node, o, "/usr/local/bin/events")?;
    Ok(Arc::new(ProgramSource {
        command: command.text.clone(),
        inherit_environment,
        local: local(node, common, &command.text),
    }))
}

/// The options of `pipe()` besides how a missing pipe is made ([`options::MAKE_FILE`]):
/// `optional()` is moot, the pipe is sluice's to make.
const PIPE: &[Declared] = &[read("optional", "optional(yes)")];

/// `pipe("/var/run/app.pipe")`: a named pipe.
fn pipe(node: &Node, o: &mut Options, common: Common) -> Result<Built, ConfigError> {
    let path = node.first_value().ok_or_else(|| {
        ConfigError::new(node.pos, "pipe() needs a path: pipe(\"/var/run/app.pipe\")")
    })?;
    if !path.text.starts_with('/') {
        return Err(ConfigError::new(
            path.pos,
            format!(
                "pipe(\"{}\"): give the pipe's whole path, from /",
                path.text
            ),
        ));
    }
    o.last("optional").map(Node::bool).transpose()?;
    let mut rules = common.cx.globals.file.clone();
    o.apply(options::MAKE_FILE, |opt| {
        options::apply_file_option(&mut rules, opt)
    })?;
    Ok(Arc::new(PipeSource {
        path: path.text.clone().into(),
        rules,
        local: local(node, common, &path.text),
    }))
}

/// What reads a local program or pipe: `instance` names it in the counters.
fn local(node: &Node, common: Common, instance: &str) -> Local {
    let mut common = common;
    common.opts.flags.local = true;
    let ingest = common.ingest();
    let window = common.opts.log_iw_size;
    Local {
        reader: common.reader(node, &ingest, instance, Framing::Newline, window, ""),
        names: common.names(),
        source_name: common.cx.name.clone(),
        source_id: common.cx.id,
    }
}

/// `stdin()`: what sluice is given on its standard input, to its end.
fn stdin(node: &Node, _: &mut Options, common: Common) -> Result<Built, ConfigError> {
    no_value(node)?;
    let mut local = local(node, common, "");
    // Its reader outlives a reload that changes the source: it finds its new parsing options
    // under this name.
    local.reader.listener = Arc::from("stdin()");
    Ok(Arc::new(StdinSource { local }))
}

/// `internal()`: sluice's own messages.
fn internal(node: &Node, _: &mut Options, common: Common) -> Result<Built, ConfigError> {
    no_value(node)?;
    let mut common = common;
    common.opts.flags.local = true;
    let ingest = common.ingest();
    let window = common.opts.log_iw_size;
    Ok(Arc::new(InternalSource {
        ingest: ingest.clone(),
        window,
        source_name: common.cx.name.clone(),
        source_id: common.cx.id,
        use_fqdn: common.opts.use_fqdn,
        counted: common
            .reader(node, &ingest, "", Framing::Newline, window, "")
            .counted,
    }))
}

fn no_value(node: &Node) -> Result<(), ConfigError> {
    match node.first_value() {
        Some(v) => Err(ConfigError::new(
            v.pos,
            format!(
                "{}() takes no positional value; did you mean ip(\"{}\")?",
                node.name, v.text
            ),
        )),
        None => Ok(()),
    }
}

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

fn so_rcvbuf(o: &mut Options) -> Result<Option<usize>, ConfigError> {
    Ok(o.last("so_rcvbuf")
        .map(Node::u64)
        .transpose()?
        .map(|n| n as usize))
}

fn max_connections(o: &mut Options) -> Result<Option<usize>, ConfigError> {
    Ok(o.last("max_connections")
        .map(Node::u64)
        .transpose()?
        .map(|n| n.max(1) as usize))
}

fn listen_backlog(o: &mut Options) -> Result<Option<u32>, ConfigError> {
    Ok(o.last("listen_backlog")
        .map(Node::u64)
        .transpose()?
        .map(|n| n.clamp(1, 65535) as u32))
}

/// Every driver of this registry, for the configuration reference.
pub fn reference() -> Vec<sluice_config::declared::Entry> {
    DRIVERS
        .iter()
        .map(|f| sluice_config::declared::Entry {
            names: f.names.to_vec(),
            sample: f.sample,
            options: std::iter::once(SourceOptions::DECLARED)
                .chain(f.options.iter().copied())
                .collect(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each source driver is built once with each option it and every source declare: an
    /// option is accepted exactly when the driver reads it.
    #[test]
    fn every_source_reads_every_option_it_declares() {
        let dir = tempfile::tempdir().unwrap();
        let (key, cert) = (dir.path().join("k.pem"), dir.path().join("c.pem"));
        let made = std::process::Command::new("openssl")
            .args([
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
            ])
            .args(["-nodes", "-subj", "/CN=sluice", "-days", "1", "-keyout"])
            .arg(&key)
            .arg("-out")
            .arg(&cert)
            .output()
            .expect("openssl makes the test's certificate");
        assert!(made.status.success(), "{made:?}");
        for driver in DRIVERS {
            let sample = driver.sample;
            let parts: Vec<&[Declared]> = std::iter::once(SourceOptions::DECLARED)
                .chain(driver.options.iter().copied())
                .collect();
            sluice_config::declared::every_option_is_read_in(sample, &parts, |text| {
                let text = text
                    .replace("\"/k\"", &format!("\"{}\"", key.display()))
                    .replace("\"/c\"", &format!("\"{}\"", cert.display()));
                sluice_config::declared::build_one("source", &text, |node| {
                    let cx = SourceContext {
                        globals: &Globals::new(),
                        stats: &Arc::default(),
                        name: &Arc::from("s"),
                        id: 0,
                        n: 0,
                    };
                    build(node, &cx).map(drop)
                })
            });
        }
    }

    /// A driver name is found once: no two declarations claim it, and none is also "not yet".
    #[test]
    fn every_driver_name_is_declared_once() {
        let names = DRIVERS.iter().flat_map(|d| d.names.iter().copied());
        sluice_config::declared::each_name_once(names, NOT_YET);
    }
}
