//! What a source driver is ([`SourceDriver`]), what it is built in ([`SourceContext`]), and
//! what every driver builds with ([`Common`]: the options every source has, its readers,
//! listeners and datagram sockets, its counters) — plus the option readers several drivers
//! share. The drivers are the folders beside this file; `registry.rs` lists them.

use super::datagram::{Bind, DatagramSource};
use super::stream::{Listen, Proxied, StreamSource};
use super::Local;
use super::{ReaderSpec, SourceCounters, READ_BUDGET};
use crate::dns::NameOptions;
use crate::options::{Globals, SourceOptions};
use crate::stats::Registry;
use crate::window::{Flow, ReadBudget};
use sluice_config::declared::{Declared, Options};
use sluice_config::{ConfigError, Node};
use sluice_model::path::SourceId;
use sluice_model::Ingest;
use sluice_protocol::framing::Framing;
use sluice_protocol::multiline::MultiLine;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

/// A source driver: the names it answers to, its options, and how it is made from them.
pub struct SourceDriver {
    /// As `Node::key` gives them (`unix_stream`); the first is the driver's own.
    pub names: &'static [&'static str],
    /// What it does, for the configuration reference.
    pub about: &'static str,
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

/// What every source driver builds from: its context and the options every source has.
pub struct Common<'a> {
    pub(super) cx: &'a SourceContext<'a>,
    pub(super) opts: SourceOptions,
    /// `multi-line-mode()`, built.
    pub(super) multi_line: Option<(Arc<MultiLine>, Duration)>,
}

impl Common<'_> {
    pub(super) fn names(&self) -> NameOptions {
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
    pub(super) fn component(node: &Node) -> String {
        format!("src.{}", node.key().replace('_', "-"))
    }

    /// A counter of the listener, named as syslog-ng names it by its address:
    /// `src.network;s_net;afsocket_sd.(stream,AF_INET(127.0.0.1:514));a;connections`.
    pub(super) fn counter(
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
    pub(super) fn reader(
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
    pub(super) fn per_reader(&self, max_connections: usize) -> u32 {
        (self.opts.log_iw_size / max_connections.max(1) as u32)
            .max(self.cx.globals.min_iw_size_per_reader)
    }

    pub(super) fn ingest(&self) -> Arc<Ingest> {
        Arc::new(self.opts.ingest(self.cx.name, self.cx.globals))
    }

    /// A stream listener with what every one has; the driver sets the rest.
    pub(super) fn stream(
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
    pub(super) fn datagram(
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
pub(super) const DEFAULT_LISTEN_BACKLOG: u32 = 4096;
/// `handshake-timeout()` not given: how long a connection may take to finish its TLS
/// handshake or PROXY header. syslog-ng waits for ever for a PROXY header.
pub(super) const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// The address a listener binds: `ip()` (or `localip()`), else every address of the family;
/// and the option as written, for the counters' names.
pub(super) fn listen_ip<'n>(
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
/// What reads a local program or pipe: `instance` names it in the counters.
pub(super) fn local(node: &Node, common: Common, instance: &str) -> Local {
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
pub(super) fn no_value(node: &Node) -> Result<(), ConfigError> {
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

pub(super) fn so_rcvbuf(o: &mut Options) -> Result<Option<usize>, ConfigError> {
    Ok(o.last("so_rcvbuf")
        .map(Node::u64)
        .transpose()?
        .map(|n| n as usize))
}

pub(super) fn max_connections(o: &mut Options) -> Result<Option<usize>, ConfigError> {
    Ok(o.last("max_connections")
        .map(Node::u64)
        .transpose()?
        .map(|n| n.max(1) as usize))
}

pub(super) fn listen_backlog(o: &mut Options) -> Result<Option<u32>, ConfigError> {
    Ok(o.last("listen_backlog")
        .map(Node::u64)
        .transpose()?
        .map(|n| n.clamp(1, 65535) as u32))
}
