//! `unix-stream()`, `unix-dgram()` destinations: messages to a local syslog socket, sent as
//! every forwarding destination sends ([`super::network::forward`]).

use super::driver::{Built, DestinationContext, DestinationDriver};
use super::driver::{BATCH_LATER, DISK_BUFFER, EVERY_LATER, FORMAT, QUEUE, SOCKET};
use super::network::servers::Transport;
use super::network::{forward, server_of};
use sluice_config::declared::Options;
use sluice_config::{ConfigError, Node};

/// The declaration: the names it answers to, its options, a valid use, its build.
pub static DRIVER: DestinationDriver = DestinationDriver {
    names: &["unix_stream", "unix_dgram"],
    about: "A unix socket: a stream or datagrams.",
    options: &[FORMAT, QUEUE, DISK_BUFFER, SOCKET, EVERY_LATER, BATCH_LATER],
    sample: "unix-stream(\"/nonexistent/sluice-table-test\")",
    build: unix,
};

/// `unix-stream("/dev/log")`, `unix-dgram("/dev/log")`: to a local syslog socket.
fn unix(node: &Node, o: &mut Options, cx: &DestinationContext) -> Result<Built, ConfigError> {
    let transport = if node.key() == "unix_stream" {
        Transport::UnixStream
    } else {
        Transport::UnixDgram
    };
    let server = server_of(node)?;
    forward(node, &node.key(), &server.text, o, cx, None, |opts| {
        opts.transport = transport
    })
}
