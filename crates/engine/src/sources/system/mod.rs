//! `system()`: the host's own log — its journal under systemd ([`super::systemd_journal`]),
//! else its syslog socket and the kernel's, read as datagrams ([`super::group`]).

use super::datagram::Bind;
use super::driver::{Built, Common, SourceDriver};
use super::group::{DatagramGroup, Grouping};
#[cfg(feature = "journal")]
use super::systemd_journal::{journal_local, JournalSource};
use super::UnixSocket;
use sluice_config::declared::Options;
use sluice_config::{ConfigError, Node};
use sluice_protocol::framing::Framing;
use std::sync::Arc;

/// The declaration: the names it answers to, its options, a valid use, its build.
pub static DRIVER: SourceDriver = SourceDriver {
    names: &["system"],
    about: "This machine's messages: the journal under systemd, else `/dev/log` and `/dev/kmsg`.",
    options: &[],
    sample: "system()",
    build: system,
};

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
        match super::systemd_journal::sd_journal::available() {
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
