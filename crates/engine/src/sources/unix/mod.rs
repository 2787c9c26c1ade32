//! `unix-stream()` and `unix-dgram()`: the local syslog() sockets, read by the socket sources'
//! runtime ([`super::stream`], [`super::datagram`]).

use super::datagram::Bind;
use super::driver::{listen_backlog, max_connections, so_rcvbuf};
use super::driver::{Built, Common, SourceDriver};
use super::stream::Listen;
use super::UnixSocket;
use crate::options::{self, MULTI_LINE};
use sluice_config::declared::{read, Declared, Options};
use sluice_config::{ConfigError, Node};
use sluice_protocol::framing::Framing;
use std::sync::Arc;

/// The declaration: the names it answers to, its options, a valid use, its build.
pub static DRIVER: SourceDriver = SourceDriver {
    names: &["unix_stream", "unix_dgram"],
    about: "Messages on a unix socket (`/dev/log`): a stream or datagrams, with the sender's credentials.",
    options: &[UNIX, MULTI_LINE],
    sample: "unix-stream(\"/nonexistent/sluice-table-test\")",
    build: unix,
};

/// Options of `unix-stream()` and `unix-dgram()`.
const UNIX: &[Declared] = &[
    read("owner", "owner(\"root\")").about(
        "the owner of files a destination creates (and of a unix socket)",
        "the process's",
    ),
    read("group", "group(\"root\")").about(
        "the group of files a destination creates (and of a unix socket)",
        "the process's",
    ),
    read("perm", "perm(0600)").about(
        "the mode of files a destination creates (and of a unix socket)",
        "0600 (sockets: 0666)",
    ),
    read("max_connections", "max-connections(100)").about(
        "connections a source accepts at once",
        "10 (unix sockets: 256)",
    ),
    // syslog-ng keeps a unix-stream connection open across a reload when this is on; sluice
    // keeps every connection of a source that stays.
    read("keep_alive", "keep-alive(yes)")
        .about("connections and programs are kept over a reload", "yes"),
    // The socket is sluice's to make: a missing directory is created, so both are moot.
    read("optional", "optional(yes)").about(
        "a source that cannot open its file or device is said and left out",
        "no",
    ),
    read("create_dirs", "create-dirs(yes)").about(
        "file destinations create the directories of their paths",
        "no",
    ),
    read("so_rcvbuf", "so-rcvbuf(1048576)")
        .about("the socket's receive buffer, in bytes", "the kernel's"),
    read("listen_backlog", "listen-backlog(100)").about(
        "the kernel's queue of connections waiting to be accepted",
        "4096",
    ),
    read("pass_unix_credentials", "pass-unix-credentials(no)")
        .about("unix sockets take the sender's pid, uid and gid", "yes"),
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
