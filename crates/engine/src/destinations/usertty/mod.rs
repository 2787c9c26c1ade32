//! `usertty("root")`: notices on the terminals of whoever of these users is logged in now
//! (the writing is [`super::terminal`]'s, shared with `pipe()`).

use super::driver::{terminal, Built, DestinationContext, DestinationDriver, FormatOptions};
use super::driver::{EVERY_LATER, FORMAT};
use super::terminal::Reach;
use sluice_config::declared::Options;
use sluice_config::{ConfigError, Node};

/// The declaration: the names it answers to, its options, a valid use, its build.
pub static DRIVER: DestinationDriver = DestinationDriver {
    names: &["usertty"],
    about: "The terminals of a logged-in user (`*`: everyone's): written at once or dropped.",
    options: &[FORMAT, EVERY_LATER],
    sample: "usertty(\"root\")",
    build: usertty,
};

/// `usertty("root")`, `usertty("*")`.
fn usertty(node: &Node, o: &mut Options, cx: &DestinationContext) -> Result<Built, ConfigError> {
    let format = FormatOptions::read(o, cx)?;
    let value = node.first_value().ok_or_else(|| {
        ConfigError::new(
            node.pos,
            format!("{}() needs a value: usertty(\"root\")", node.name),
        )
    })?;
    // syslog-ng's usertty() is not a file-like writer: no file-template().
    let reach = Reach::Users(value.text.clone());
    // What the writer holds at most: every message is written at once or dropped.
    terminal(
        node,
        cx,
        format,
        reach,
        &value.text,
        cx.globals.log_fifo_size,
    )
}
