//! `graylog2()`: messages to Graylog as GELF documents, as syslog-ng 3.38 sends them — its
//! library's block (`scl/graylog2/plugin.conf`) is `network()` to `host()` on port 12201
//! over TCP with the template `$(format-gelf)` (a GELF 1.1 document ended by a NUL), and
//! every other option of `network()` passed on. So is this driver: it sends as `network()`
//! does ([`super::network::send`]) and is counted as the `network()` it is in syslog-ng.

use super::driver::{Built, DestinationContext, DestinationDriver};
use super::driver::{BATCH_LATER, DISK_BUFFER, EVERY_LATER, FORMAT, QUEUE, SOCKET};
use super::network::servers::Transport;
use super::network::{send, Over, ADDRESS, NETWORK_LATER, TLS_BY_TRANSPORT, TRANSPORT};
use sluice_config::declared::{read, Declared, Options};
use sluice_config::{ConfigError, Node};

/// The declaration: the names it answers to, its options, a valid use, its build.
pub static DRIVER: DestinationDriver = DestinationDriver {
    names: &["graylog2"],
    about: "Graylog: GELF 1.1 documents ended by a NUL, over TCP (or UDP), as syslog-ng's `graylog2()` sends them.",
    options: &[
        HOST,
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
    sample: "graylog2(host(\"127.0.0.1\") port(12201))",
    build,
};

/// Where it sends: syslog-ng's block takes the server as `host()`, not as a value.
const HOST: &[Declared] =
    &[read("host", "host(\"127.0.0.1\")")
        .about("the Graylog server's name or address", "127.0.0.1")];

/// The port of Graylog's GELF input.
const PORT: u16 = 12201;

fn build(node: &Node, o: &mut Options, cx: &DestinationContext) -> Result<Built, ConfigError> {
    if let Some(v) = node.first_value() {
        return Err(ConfigError::new(
            v.pos,
            format!(
                "graylog2() takes its server as host(): graylog2(host(\"{}\"))",
                v.text
            ),
        ));
    }
    let host = o
        .last("host")
        .map(Node::string)
        .transpose()?
        .unwrap_or_else(|| "127.0.0.1".to_string());
    let over = Over {
        port: PORT,
        transport: Transport::Tcp,
        template: "$(format-gelf)",
    };
    send(node, o, cx, &host, Some(over))
}
