//! `pipe("/dev/xconsole")` destination: messages into a named pipe, made when it is missing,
//! written without waiting for a reader (the writing is [`super::terminal`]'s, shared with
//! `usertty()`).

use super::driver::{terminal, Built, DestinationContext, DestinationDriver, FormatOptions, Queue};
use super::driver::{EVERY_LATER, FORMAT, QUEUE};
use super::terminal::Reach;
use crate::options::{self, MAKE_FILE};
use sluice_config::declared::Options;
use sluice_config::{ConfigError, Node};

/// The declaration: the names it answers to, its options, a valid use, its build.
pub static DRIVER: DestinationDriver = DestinationDriver {
    names: &["pipe"],
    about: "A named pipe (Debian's `/dev/xconsole`), made when missing: written at once when something reads it, or dropped.",
    options: &[FORMAT, QUEUE, MAKE_FILE, EVERY_LATER],
    sample: "pipe(\"/nonexistent/sluice-table-test\")",
    build: pipe,
};

/// `pipe("/dev/xconsole")`.
fn pipe(node: &Node, o: &mut Options, cx: &DestinationContext) -> Result<Built, ConfigError> {
    let format = FormatOptions::read(o, cx)?;
    // What the writer holds at most (`log-fifo-size()`); the rest of the queue's options mean
    // nothing here (every message is written at once or dropped).
    let held = Queue::read(o, cx.globals)?.log_fifo_size;
    let value = node.first_value().ok_or_else(|| {
        ConfigError::new(
            node.pos,
            format!("{}() needs a value: pipe(\"/dev/xconsole\")", node.name),
        )
    })?;
    if !value.text.starts_with('/') {
        return Err(ConfigError::new(
            value.pos,
            format!(
                "pipe(\"{}\"): give the pipe's whole path, from /",
                value.text
            ),
        ));
    }
    let mut rules = cx.globals.file.clone();
    o.apply(MAKE_FILE, |opt| options::apply_file_option(&mut rules, opt))?;
    // A pipe is written as a file is.
    let format = format.or_global(&cx.globals.file_template);
    let reach = Reach::Pipe(value.text.clone().into(), rules);
    terminal(node, cx, format, reach, &value.text, held)
}
