//! `network()`, `syslog()`, `tcp()`, `tcp6()`, `udp()`, `udp6()`, `relp()`: messages to a
//! server over TCP, TLS, UDP or RELP. Their declarations and build, and [`forward`], what every
//! forwarding destination reads (`unix-stream()`, `unix-dgram()` too); the servers it sends to
//! are [`servers`], RELP's wire [`relp`]; the sender, lanes and queues are the delivery layer's.

mod relp;
pub mod servers;

use super::driver::{Built, DestinationContext, DestinationDriver, FormatOptions, Queue};
use super::driver::{BATCH_LATER, DISK_BUFFER, EVERY_LATER, FORMAT, QUEUE, SOCKET};
use super::format::Format;
use super::sender::Failback;
use crate::options::{ip_protocol, port_number, RELP_PORT};
use crate::tls::TlsOptions;
use servers::{NetworkDestination, NetworkOptions, Transport};
use sluice_config::declared::{not_yet, read, Declared, Options};
use sluice_config::{ConfigError, Node};
use sluice_model::Template;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

/// `network()` and `syslog()`: the transport is an option.
pub static DRIVER: DestinationDriver = DestinationDriver {
    names: &["network", "syslog"],
    about: "A syslog server over TCP, UDP or TLS (`syslog()`: RFC5424 with octet counting), with failover and a disk buffer.",
    options: &[
        FORMAT,
        QUEUE,
        DISK_BUFFER,
        SOCKET,
        ADDRESS,
        TRANSPORT,
        TLS_BY_TRANSPORT,
        NETWORK_LATER,
        EVERY_LATER,
        BATCH_LATER,
    ],
    sample: "network(\"127.0.0.1\")",
    build: network,
};

/// `tcp()`, `udp()`, `relp()`…: the transport is in the name.
pub static PER_TRANSPORT: DestinationDriver = DestinationDriver {
    names: &["tcp", "tcp6", "udp", "udp6", "relp"],
    about: "A syslog server over TCP, UDP or TLS (syslog-ng's older drivers), or RELP (`relp()`).",
    options: &[
        FORMAT,
        QUEUE,
        DISK_BUFFER,
        SOCKET,
        ADDRESS,
        TLS,
        NETWORK_LATER,
        EVERY_LATER,
        BATCH_LATER,
    ],
    sample: "tcp(\"127.0.0.1\")",
    build: network,
};

/// Where a destination that talks IP sends.
pub(super) const ADDRESS: &[Declared] = &[
    read("port", "port(1514)").about(
        "the port of the server it sends to (`destport()` too)",
        "514 (`syslog()`: 601 over TCP, 6514 with TLS; `relp()`: 2514; `graylog2()`: 12201)",
    ),
    read("destport", "destport(1514)").about(
        "the port of the server it sends to (`port()` too)",
        "as `port()`",
    ),
    read("localip", "localip(\"127.0.0.1\")").about("the address a destination sends from", "any"),
    read("localport", "localport(0)").about("the port a destination sends from", "any"),
    read("ip_protocol", "ip-protocol(4)").about("4 or 6: the family of the address", "4"),
    read(
        "failover",
        "failover(servers(\"127.0.0.2\") failback(tcp-probe-interval(5)))",
    )
    .about(
        "a forwarding destination's other servers: `servers()`, `failback()`",
        "none",
    ),
];

/// TLS of `tcp()`, `tcp6()` and `relp()`: on when the block is there.
const TLS: &[Declared] = &[read("tls", "tls(peer-verify(optional-untrusted))").about(
    "TLS: `key-file()`, `cert-file()`, `ca-file()`, `ca-dir()`, `peer-verify()`…",
    "none",
)];

/// TLS of `network()` and `syslog()`, for `transport(tls)`.
pub(super) const TLS_BY_TRANSPORT: &[Declared] =
    &[
        read("tls", "transport(tls) tls(peer-verify(optional-untrusted))").about(
            "TLS: `key-file()`, `cert-file()`, `ca-file()`, `ca-dir()`, `peer-verify()`…",
            "none",
        ),
    ];

/// `network()` and `syslog()` choose their transport.
pub(super) const TRANSPORT: &[Declared] = &[read("transport", "transport(udp)").about(
    "`tcp`, `udp`, `tls`, `proxied-tcp`, `proxied-tls`…",
    "tcp (`network()`)",
)];

/// syslog-ng's options of forwarding destinations that sluice does not have yet.
pub(super) const NETWORK_LATER: &[Declared] = &[
    not_yet("so_broadcast"),
    not_yet("so_rcvbuf"),
    not_yet("ip_ttl"),
    not_yet("ip_tos"),
    not_yet("spoof_source"),
    not_yet("spoof_source_max_msglen"),
    not_yet("truncate_size"),
];

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
    let server = server_of(node)?;
    send(node, o, cx, &server.text, None)
}

/// The server a forwarding driver names first: `tcp("10.0.0.1")`.
pub(super) fn server_of(node: &Node) -> Result<&sluice_config::Value, ConfigError> {
    node.first_value().ok_or_else(|| {
        let example = if node.key().starts_with("unix") {
            "\"/dev/log\""
        } else {
            "\"10.0.0.1\""
        };
        ConfigError::new(
            node.pos,
            format!("{}() needs a server: {}({example})", node.name, node.name),
        )
    })
}

/// A driver that is `network()` under another name, as syslog-ng's library defines it
/// (`graylog2()`): its port, transport and template when no option says, and counted as
/// the `network()` it is.
pub(super) struct Over {
    pub(super) port: u16,
    pub(super) transport: Transport,
    pub(super) template: &'static str,
}

/// `network()` and the drivers over it: to `server`, with the options `node` gives.
pub(super) fn send(
    node: &Node,
    o: &mut Options,
    cx: &DestinationContext,
    server: &str,
    over: Option<Over>,
) -> Result<Built, ConfigError> {
    let key = match over {
        Some(_) => "network".to_string(),
        None => node.key(),
    };
    let mut address = Address::read(o)?;
    let mut transport = match (key.as_str(), &over) {
        (_, Some(over)) => over.transport,
        ("udp" | "udp6", None) => Transport::Udp,
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
            _ if over.is_some() => over.as_ref().map_or(514, |o| o.port),
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
    let template = over.map(|o| o.template);
    forward(node, &key, server, o, cx, template, |opts| {
        opts.transport = transport;
        opts.port = port;
        opts.ip_protocol = address.ip_protocol;
        opts.local = local;
        opts.servers.extend(address.failover);
        opts.failback = address.failback;
        opts.tls = tls;
    })
}

/// What every forwarding destination reads besides where it sends ([`FORMAT`], [`QUEUE`],
/// [`SOCKET`]), then its sender: `set` fills in where.
/// `key` is the driver as it is counted, `template` its own when `template()` does not say.
#[allow(clippy::too_many_arguments)]
pub(super) fn forward(
    node: &Node,
    key: &str,
    server: &str,
    o: &mut Options,
    cx: &DestinationContext,
    template: Option<&str>,
    set: impl FnOnce(&mut NetworkOptions),
) -> Result<Built, ConfigError> {
    let mut format = FormatOptions::read(o, cx)?;
    if let (None, Some(text)) = (&format.template, template) {
        format.template =
            Some(Template::compile_in(text, cx.names).map_err(|e| ConfigError::new(node.pos, e))?);
    }
    let queue = Queue::read(o, cx.globals)?;
    for name in ["keep_alive", "close_on_input"] {
        o.last(name).map(Node::bool).transpose()?;
    }
    let mut opts = NetworkOptions {
        transport: Transport::Tcp,
        servers: vec![server.to_string()],
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
    opts.disk_buffer =
        queue.disk_buffer(o, || format!("{}-{key}-{}-{}", cx.name, server, opts.port))?;
    if key == "syslog" {
        format.syslog_protocol = true;
    }
    let proto = Format::Proto(format.dates.clone());
    let formatter = format
        .or_global(&cx.globals.proto_template)
        .formatter(proto);
    let instance = match opts.transport {
        Transport::Tcp => format!("tcp,{server}:{}", opts.port),
        Transport::Udp => format!("udp,{server}:{}", opts.port),
        Transport::UnixStream | Transport::UnixDgram => server.to_string(),
    };
    let (component, id) = cx.counted_as_driver(key);
    let counters = cx.stats.destination(&component, &id, &instance);
    Ok(Arc::new(NetworkDestination::new(
        cx.label(),
        formatter,
        opts,
        counters,
    )))
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
