//! `network()`, `syslog()`, `tcp()`, `tcp6()`, `udp()`, `udp6()`, `relp()`: a stream listener
//! or a datagram socket, by transport. The listener's runtime is shared with the other socket
//! sources: [`super::stream`] (TCP, TLS, PROXY), [`super::datagram`], [`super::relp`].

use super::datagram::Bind;
use super::driver::{listen_backlog, listen_ip, max_connections, so_rcvbuf, HANDSHAKE_TIMEOUT};
use super::driver::{Built, Common, SourceDriver};
use super::stream::{Listen, Proxied};
use crate::options::MULTI_LINE;
use crate::options::{ip_protocol, port_number, RELP_PORT};
use crate::tls::TlsOptions;
use sluice_config::declared::{not_yet, read, Declared, Options};
use sluice_config::{ConfigError, Node};
use sluice_protocol::framing::Framing;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// The declaration: the names it answers to, its options, a valid use, its build.
pub static DRIVER: SourceDriver = SourceDriver {
    names: &["network", "syslog", "tcp", "tcp6", "udp", "udp6", "relp"],
    about: "Syslog messages over TCP, UDP or TLS: RFC3164 and RFC5424 (`syslog()`: RFC6587 framing, port 601), RELP (`relp()`).",
    options: &[NETWORK, MULTI_LINE],
    sample: "network(port(0))",
    build: network,
};

/// Options of `network()`, `syslog()`, `tcp()`, `udp()` and `relp()`.
const NETWORK: &[Declared] = &[
    read("ip", "ip(\"127.0.0.1\")").about(
        "the address it listens on (`localip()` too)",
        "every address of the family (0.0.0.0, ::)",
    ),
    read("localip", "localip(\"::1\")").about(
        "the address it listens on (`ip()` too)",
        "every address of the family",
    ),
    read("port", "port(0)").about(
        "the port it listens on (`localport()` too)",
        "514 (`syslog()`: 601 over TCP, 6514 with TLS; `relp()`: 2514)",
    ),
    read("localport", "localport(0)").about("the port it listens on (`port()` too)", "as `port()`"),
    read("transport", "transport(udp)").about(
        "`tcp`, `udp`, `tls`, `proxied-tcp`, `proxied-tls`…",
        "tcp (`network()`)",
    ),
    read("ip_protocol", "ip-protocol(6)").about("4 or 6: the family of the address", "4"),
    read("max_connections", "max-connections(100)").about(
        "connections a source accepts at once",
        "10 (unix sockets: 256)",
    ),
    read("so_rcvbuf", "so-rcvbuf(1048576)")
        .about("the socket's receive buffer, in bytes", "the kernel's"),
    read("so_reuseport", "so-reuseport(yes)").about("SO_REUSEPORT on the listening socket", "no"),
    read("keep_alive", "keep-alive(yes)")
        .about("connections and programs are kept over a reload", "yes"),
    read("so_keepalive", "so-keepalive(yes)").about("TCP keepalives on connections", "no"),
    read("listen_backlog", "listen-backlog(100)").about(
        "the kernel's queue of connections waiting to be accepted",
        "4096",
    ),
    read(
        "tls",
        "transport(tls) tls(key-file(\"/k\") cert-file(\"/c\") peer-verify(optional-untrusted))",
    )
    .about(
        "TLS: `key-file()`, `cert-file()`, `ca-file()`, `ca-dir()`, `peer-verify()`…",
        "none",
    ),
    read(
        "trusted_proxies",
        "transport(proxied-tcp) trusted-proxies(\"10.0.0.0/8\")",
    )
    .about("addresses whose PROXY headers are believed", "any"),
    read("handshake_timeout", "handshake-timeout(5)")
        .about("seconds a TLS handshake or PROXY header may take", "10"),
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
