//! `file()` destination: messages written to files whose names are templates. Its declaration
//! and build; the writers (a pool of threads, a file always on the same one) are [`writer`],
//! which `logstore()` and `stdout()` write with too.

pub mod writer;

use super::driver::{Built, DestinationContext, DestinationDriver, FormatOptions, Queue};
use super::driver::{BATCH_LATER, DISK_BUFFER, EVERY_LATER, FORMAT, QUEUE};
use super::format::Format;
use crate::file_open::{FileOptions, NameReports};
use crate::options::{self, MAKE_FILE};
use sluice_config::declared::{not_yet, read, Declared, Options};
use sluice_config::{ConfigError, Node};
use sluice_model::macros::DateOptions;
use sluice_model::Template;
use std::sync::Arc;
use writer::FileDestination;

/// The declaration: the names it answers to, its options, a valid use, its build.
pub static DRIVER: DestinationDriver = DestinationDriver {
    names: &["file"],
    about: "A file (its name a template: a file per host, per day…), created as asked, written in batches.",
    options: &[
        FORMAT,
        QUEUE,
        DISK_BUFFER,
        MAKE_FILE,
        FILE,
        EVERY_LATER,
        BATCH_LATER,
    ],
    sample: "file(\"/nonexistent/sluice-table-test\")",
    build: file,
};

/// The options of `file()` besides how it is made ([`MAKE_FILE`]), read by
/// [`options::apply_file_option`].
pub(super) const FILE: &[Declared] = &[
    read("fsync", "fsync(yes)").about("a file destination syncs each write to disk", "no"),
    read("time_reap", "time-reap(60)").about("seconds an idle file destination stays open", "60"),
    not_yet("pad_size"),
    not_yet("overwrite_if_older"),
    not_yet("logrotate"),
    not_yet("multi_line_mode"),
];

/// The options of files and directories ([`MAKE_FILE`], [`FILE`]) over the global ones.
pub(super) fn file_options(
    o: &mut Options,
    cx: &DestinationContext,
    queue: &Queue,
) -> Result<FileOptions, ConfigError> {
    let mut file: FileOptions = cx.globals.file.clone();
    for table in [MAKE_FILE, FILE] {
        o.apply(table, |opt| options::apply_file_option(&mut file, opt))?;
    }
    file.log_fifo_size = queue.log_fifo_size;
    file.time_reopen = queue.time_reopen;
    Ok(file)
}

/// `file("/var/log/$HOST/messages")`.
fn file(node: &Node, o: &mut Options, cx: &DestinationContext) -> Result<Built, ConfigError> {
    let format = FormatOptions::read(o, cx)?;
    let queue = Queue::read(o, cx.globals)?;
    let file = file_options(o, cx, &queue)?;
    let path = node.first_value().ok_or_else(|| {
        ConfigError::new(
            node.pos,
            "file() needs a file name: file(\"/var/log/messages\")",
        )
    })?;
    files(node, path, o, cx, format, &queue, file, None)
}

/// The destination of `file()`, and of `logstore()` with `store`: the file name's template,
/// the counters, the writers and the disk buffer (named after the destination and its file
/// name, hashed: a template can be long).
#[allow(clippy::too_many_arguments)]
pub(super) fn files(
    node: &Node,
    path: &sluice_config::Value,
    o: &mut Options,
    cx: &DestinationContext,
    format: FormatOptions,
    queue: &Queue,
    file: FileOptions,
    store: Option<sluice_logstore::StoreOptions>,
) -> Result<Built, ConfigError> {
    let dates = format.dates.clone();
    let mut formatter = format
        .or_global(&cx.globals.file_template)
        .formatter(Format::File(dates.clone()));
    if store.is_some() {
        formatter = formatter.into_entries();
    }
    let mut path_template =
        Template::compile_in(&path.text, cx.names).map_err(|e| ConfigError::new(path.pos, e))?;
    path_template.dates = DateOptions {
        ts_format: dates.ts_format,
        frac_digits: 0,
        zone: dates.zone.clone(),
    };
    let label = cx.label();
    let (component, id) = cx.counted_as(node);
    let counters = cx.stats.destination(&component, &id, &path.text);
    let reports = NameReports::new(
        label.as_str().into(),
        cx.stats
            .counter(&component, &id, &path.text, "names_rewritten"),
        cx.stats
            .counter(&component, &id, &path.text, "names_refused"),
    );
    let mut dest = FileDestination::file(label, path_template, formatter, file, counters, reports);
    let kind = match store {
        Some(store) => {
            dest = dest.into_store(store);
            "logstore"
        }
        None => "file",
    };
    let buffer = queue.disk_buffer(o, || {
        format!(
            "{}-{kind}-{:08x}",
            cx.name,
            crc32fast::hash(path.text.as_bytes())
        )
    })?;
    Ok(Arc::new(match buffer {
        Some((d, dir)) => dest.with_disk_buffer(d, dir),
        None => dest,
    }))
}
