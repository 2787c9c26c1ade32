//! The declaration of `logstore()`: `file()` whose files are archives
//! ([`sluice_logstore`]). The same writers, file names, directories and failure handling as
//! `file()`; the formatter hands each line over with the fields a search asks about, and each
//! writer keeps an archive's open chunk until it is sealed.

use super::driver::{Built, DestinationContext, DestinationDriver, FormatOptions, Queue};
use super::driver::{BATCH_LATER, DISK_BUFFER, EVERY_LATER, FORMAT, QUEUE};
use super::file::{file_options, files, FILE};
use crate::options::MAKE_FILE;
use sluice_config::declared::{not_yet, read, Declared, Options};
use sluice_config::{ConfigError, Node};
use sluice_logstore::authority::Authority;
use sluice_logstore::timestamp;
use sluice_logstore::{Recipient, SealKey, StoreOptions};
use std::path::Path;
use std::time::Duration;

/// The declaration: the names it answers to, its options, a valid use, its build.
pub static DRIVER: DestinationDriver = DestinationDriver {
    names: &["logstore"],
    about: "A forensic archive: lines compressed in chunks, encrypted for certificates, chained, forward-sealed and timestamped (`sluice logstore cat|grep|tail|verify|info`).",
    options: &[
        FORMAT,
        QUEUE,
        DISK_BUFFER,
        MAKE_FILE,
        FILE,
        OPTIONS,
        LATER,
        EVERY_LATER,
        BATCH_LATER,
    ],
    sample: "logstore(\"/nonexistent/sluice-table-test.lgs\")",
    build,
};

/// The options of `logstore()` itself: syslog-ng PE's names, and `seal-key()`.
pub(super) const OPTIONS: &[Declared] = &[
    read("compress", "compress(5)").about("the zstd level, 0 (none) to 9", "3"),
    read(
        "encrypt_certificate",
        "encrypt-certificate(\"/etc/sluice/archive-reader.pem\")",
    ).about("PEM certificates (RSA) whose keys can read the archives; several for several readers; none writes them unencrypted", "none"),
    read("chunk_size", "chunk-size(65536)").about("a chunk is sealed once its records take this many bytes (sluice reads bytes; 4 KiB to 64 MiB)", "1048576"),
    read("chunk_time", "chunk-time(2)").about("a chunk is sealed this many seconds after its first record", "5"),
    read("seal_key", "seal-key(\"/var/lib/sluice/logstore.seal\")").about("the sealing key `sluice logstore keygen` made; frames are sealed forward-securely", "none (chained, not sealed)"),
    read(
        "timestamp_url",
        "timestamp-url(\"http://127.0.0.1:3180/tsr\")",
    ).about("an RFC 3161 timestamping authority (`http://`) that stamps the chain head as chunks are sealed", "none (no timestamps)"),
    read("timestamp_policy", "timestamp-policy(\"1.2.3.4.1\")").about("the policy OID asked of the timestamping authority", "the authority's"),
];

/// The files the examples of [`OPTIONS`] name, and where the table test finds them.
#[cfg(test)]
pub(super) const EXAMPLE_FILES: &[(&str, &str)] = &[
    (
        "/etc/sluice/archive-reader.pem",
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../logstore/testdata/reader.pem"
        ),
    ),
    (
        "/var/lib/sluice/logstore.seal",
        concat!(env!("CARGO_MANIFEST_DIR"), "/../logstore/testdata/seal.key"),
    ),
];

/// syslog-ng PE's options of `logstore()` that sluice does not have yet.
pub(super) const LATER: &[Declared] = &[not_yet("timestamp_serial"), not_yet("chunk_mark_mode")];

/// A certificate that ends within this many days is said at every start.
const WARN_DAYS: i64 = 30;

/// `logstore("/var/log/archive/${HOST}.lgs" encrypt-certificate("reader.pem") …)`.
pub(super) fn build(
    node: &Node,
    o: &mut Options,
    cx: &DestinationContext,
) -> Result<Built, ConfigError> {
    let format = FormatOptions::read(o, cx)?;
    let queue = Queue::read(o, cx.globals)?;
    let mut file = file_options(o, cx, &queue)?;
    file.readable = true;
    let path = node.first_value().ok_or_else(|| {
        ConfigError::new(
            node.pos,
            "logstore() needs a file name: logstore(\"/var/log/archive/${HOST}.lgs\")",
        )
    })?;
    let mut store = StoreOptions {
        fsync: file.fsync,
        ..StoreOptions::default()
    };
    if let Some(opt) = o.last("compress") {
        let level = opt.u64()?;
        if level > 9 {
            return Err(ConfigError::new(
                opt.value()?.pos,
                "compress() takes 0 (none) to 9 (smallest)",
            ));
        }
        store.level = level as i32;
    }
    if let Some(opt) = o.last("chunk_size") {
        store.chunk_size = (opt.u64()? as usize).clamp(4 << 10, 64 << 20);
    }
    if let Some(opt) = o.last("chunk_time") {
        store.chunk_time = Duration::from_secs(opt.u64()?.max(1));
    }
    for opt in o.all("encrypt_certificate") {
        for v in opt.values() {
            let pem = std::fs::read(&v.text)
                .map_err(|e| ConfigError::new(v.pos, format!("{}: {e}", v.text)))?;
            let found = Recipient::from_pem(&pem)
                .map_err(|e| ConfigError::new(v.pos, format!("{}: {e}", v.text)))?;
            for r in &found {
                say_validity(cx, &v.text, r);
            }
            store.recipients.extend(found);
        }
    }
    if let Some(opt) = o.last("seal_key") {
        let v = opt.value()?;
        let key = SealKey::shared(Path::new(&v.text)).map_err(|e| {
            ConfigError::new(
                v.pos,
                format!(
                    "{e} (make one with: sluice logstore keygen --seal-key {} --verify-key FILE)",
                    v.text
                ),
            )
        })?;
        store.seal = Some(key);
    }
    let policy = match o.last("timestamp_policy") {
        Some(opt) => {
            let v = opt.value()?;
            Some(timestamp::policy(&v.text).map_err(|e| ConfigError::new(v.pos, e))?)
        }
        None => None,
    };
    if let Some(opt) = o.last("timestamp_url") {
        let v = opt.value()?;
        let label = cx.label();
        let say = Box::new(move |what: String| {
            crate::own_log::warning(format!("{label}: {what}"));
        });
        store.authority =
            Some(Authority::start(&v.text, policy, say).map_err(|e| ConfigError::new(v.pos, e))?);
    } else if policy.is_some() {
        crate::own_log::warning(format!(
            "{}: timestamp-policy() without timestamp-url(): no timestamps are asked for",
            cx.label()
        ));
    }
    files(node, path, o, cx, format, &queue, file, Some(store))
}

/// Says a certificate that has ended, or ends soon: archives are still encrypted for it.
fn say_validity(cx: &DestinationContext, file: &str, r: &Recipient) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let days = (r.not_after - now).div_euclid(86_400);
    if days < 0 {
        crate::own_log::warning(format!(
            "{}: the certificate {file} ({}) ended {} days ago; archives are still encrypted for its key",
            cx.label(),
            r.subject,
            -days
        ));
    } else if days < WARN_DAYS {
        crate::own_log::warning(format!(
            "{}: the certificate {file} ({}) ends in {days} days; archives are still encrypted for its key after that, but renew it",
            cx.label(),
            r.subject,
        ));
    }
}
