//! What a driver reads, declared once: its option table.
//!
//! A driver (a source, destination, parser or rewrite rule) lists its options in a static
//! table of [`Declared`] entries. [`Options::check`] holds a node against that table — an
//! option it does not list is "unknown" (with the valid names and the nearest one), one
//! marked [`Support::NotYet`] is "not supported yet" — and the driver then reads its options
//! through [`Options`], which records what it asked for. [`Options::finish`] refuses an option
//! that was given and declared but never read, so an option is accepted exactly when its
//! driver reads it; each driver's table test ([`every_option_is_read`]) builds it once with
//! every declared option to prove the table and the code agree.

use crate::{ConfigError, Node};

/// What a driver does with an option it declares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Support {
    /// It reads the option and acts on it.
    Read,
    /// syslog-ng has it; sluice refuses it as not supported yet.
    NotYet,
}

/// One option of a driver's table.
#[derive(Clone, Copy, Debug)]
pub struct Declared {
    /// As `Node::key` gives it: `-` written `_`.
    pub name: &'static str,
    pub support: Support,
    /// The option written out with a valid value, for the table test: `value("HOST")`.
    pub example: &'static str,
}

/// An option the driver reads; `example` shows it with a valid value.
pub const fn read(name: &'static str, example: &'static str) -> Declared {
    Declared {
        name,
        support: Support::Read,
        example,
    }
}

/// An option of syslog-ng's that the driver does not have yet.
pub const fn not_yet(name: &'static str) -> Declared {
    Declared {
        name,
        support: Support::NotYet,
        example: "",
    }
}

/// A node's options, checked against its driver's table, read through it.
pub struct Options<'n> {
    node: &'n Node,
    table: &'static [Declared],
    /// Per table entry: the driver asked for it.
    asked: Vec<bool>,
}

impl<'n> Options<'n> {
    /// Refuses an option of `node` that `table` does not list (unknown, with the valid names)
    /// or lists as not yet supported.
    pub fn check(node: &'n Node, table: &'static [Declared]) -> Result<Options<'n>, ConfigError> {
        for opt in node.options() {
            match table.iter().find(|d| d.name == opt.key()) {
                Some(d) if d.support == Support::Read => {}
                Some(_) => {
                    return Err(ConfigError::not_supported(
                        opt.pos,
                        &format!("{}() in {}()", opt.name, node.name),
                    ))
                }
                None => {
                    let valid: Vec<&str> = table
                        .iter()
                        .filter(|d| d.support == Support::Read)
                        .map(|d| d.name)
                        .collect();
                    return Err(opt.unknown_in(node, &valid));
                }
            }
        }
        Ok(Options {
            node,
            table,
            asked: vec![false; table.len()],
        })
    }

    /// Every option named `name`, in the order written.
    pub fn all(&mut self, name: &str) -> impl Iterator<Item = &'n Node> + use<'n> {
        let at = self
            .table
            .iter()
            .position(|d| d.name == name)
            .unwrap_or_else(|| {
                panic!(
                    "{}() reads {name}(), which its table does not declare",
                    self.node.name
                )
            });
        self.asked[at] = true;
        let name = name.to_string();
        self.node.options().filter(move |o| o.key() == name)
    }

    /// The option named `name`, the last one when it is written more than once (as syslog-ng
    /// takes it).
    pub fn last(&mut self, name: &str) -> Option<&'n Node> {
        self.all(name).last()
    }

    /// Refuses an option that was given, declared as read, and never asked for: the table and
    /// the driver's code disagree.
    pub fn finish(self) -> Result<(), ConfigError> {
        for opt in self.node.options() {
            let unread = self
                .table
                .iter()
                .zip(&self.asked)
                .any(|(d, &asked)| d.name == opt.key() && !asked);
            if unread {
                return Err(ConfigError::new(
                    opt.pos,
                    format!(
                        "{}() in {}() is accepted but not read: a bug in sluice, please report it",
                        opt.name, self.node.name
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// The table test of a driver: builds `sample` (a valid use of the driver, ending in `)`)
/// once with each option its `table` reads written into it, and fails naming the option
/// whose build fails (an option declared and not read, or a wrong example).
pub fn every_option_is_read(
    sample: &str,
    table: &[Declared],
    build: impl Fn(&str) -> Result<(), String>,
) {
    let open = sample.strip_suffix(')').expect("a sample ends in ')'");
    for d in table.iter().filter(|d| d.support == Support::Read) {
        let text = format!("{open} {})", d.example);
        if let Err(e) = build(&text) {
            panic!("{text}: {e}");
        }
    }
}
