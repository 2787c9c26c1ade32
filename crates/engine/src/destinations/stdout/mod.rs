//! `stdout()`: messages on sluice's standard output, written as a file is (by the file
//! writers, [`super::file::writer`]).

use super::driver::{Built, DestinationContext, DestinationDriver, FormatOptions, Queue};
use super::driver::{BATCH_LATER, EVERY_LATER, FORMAT, QUEUE};
use super::file::writer::FileDestination;
use super::format::Format;
use crate::file_open::FileOptions;
use sluice_config::declared::{not_yet, Options};
use sluice_config::{ConfigError, Node};
use std::sync::Arc;

/// The declaration: the names it answers to, its options, a valid use, its build.
pub static DRIVER: DestinationDriver = DestinationDriver {
    names: &["stdout"],
    about: "sluice's standard output.",
    options: &[
        FORMAT,
        QUEUE,
        &[not_yet("disk_buffer")],
        EVERY_LATER,
        BATCH_LATER,
    ],
    sample: "stdout()",
    build: stdout,
};

/// `stdout()`.
fn stdout(node: &Node, o: &mut Options, cx: &DestinationContext) -> Result<Built, ConfigError> {
    let format = FormatOptions::read(o, cx)?;
    let queue = Queue::read(o, cx.globals)?;
    if let Some(v) = node.first_value() {
        return Err(ConfigError::new(
            v.pos,
            "stdout() takes no positional value",
        ));
    }
    let mut file: FileOptions = cx.globals.file.clone();
    file.log_fifo_size = queue.log_fifo_size;
    file.time_reopen = queue.time_reopen;
    let dates = format.dates.clone();
    let formatter = format
        .or_global(&cx.globals.file_template)
        .formatter(Format::File(dates));
    let (component, id) = cx.counted_as(node);
    let counters = cx.stats.destination(&component, &id, "");
    Ok(Arc::new(FileDestination::stdout(
        cx.label(),
        formatter,
        file,
        counters,
    )))
}
