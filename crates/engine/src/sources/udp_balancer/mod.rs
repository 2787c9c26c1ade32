//! `udp-balancer()`, syslog-ng PE's: several UDP sockets on one port, the datagrams spread
//! evenly over them ([`super::group`]).

use super::datagram::Bind;
use super::driver::{listen_ip, so_rcvbuf};
use super::driver::{Built, Common, SourceDriver};
use super::group::{DatagramGroup, Grouping};
use crate::options::{ip_protocol, port_number};
use sluice_config::declared::{read, Declared, Options};
use sluice_config::{ConfigError, Node};
use sluice_protocol::framing::Framing;
use std::net::SocketAddr;
use std::sync::Arc;

/// The declaration: the names it answers to, its options, a valid use, its build.
pub static DRIVER: SourceDriver = SourceDriver {
    names: &["udp_balancer"],
    about: "UDP on one port spread over several sockets (SO_REUSEPORT), every core reading.",
    options: &[UDP_BALANCER],
    sample: "udp-balancer(port(0) listeners(2))",
    build: udp_balancer,
};

/// The options of `udp-balancer()`: where it listens, its buffers, how many sockets.
const UDP_BALANCER: &[Declared] = &[
    read("ip", "ip(\"127.0.0.1\")").about(
        "the address it listens on (`localip()` too)",
        "every address of the family (0.0.0.0, ::)",
    ),
    read("localip", "localip(\"127.0.0.1\")").about(
        "the address it listens on (`ip()` too)",
        "every address of the family",
    ),
    read("port", "port(0)").about("the port it listens on (`localport()` too)", "514"),
    read("localport", "localport(0)").about("the port it listens on (`port()` too)", "as `port()`"),
    read("ip_protocol", "ip-protocol(4)").about("4 or 6: the family of the address", "4"),
    read("so_rcvbuf", "so-rcvbuf(1048576)")
        .about("the socket's receive buffer, in bytes", "the kernel's"),
    read("listeners", "listeners(4)").about("sockets sharing the port", "one per core"),
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
