//! What a driver reads, declared once: its option table.
//!
//! A driver (a source, destination, parser or rewrite rule) lists its options in a static
//! table of [`Declared`] entries: each one's name, a valid use of it, and — for the
//! configuration reference (`docs/reference.md`, `sluice.conf(5)`) — what it does for this
//! driver and its default ([`Declared::about`]). [`Options::check`] holds a node against that table — an
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

/// A driver as the configuration reference (`sluice reference`, `docs/reference.md`) lists it:
/// the names it answers to, a valid use of it, and its options in parts.
#[derive(Clone, Debug)]
pub struct Entry {
    pub names: Vec<&'static str>,
    /// What the driver does, a sentence or two.
    pub about: &'static str,
    pub sample: &'static str,
    pub options: Vec<&'static [Declared]>,
}

/// One option of a driver's table.
#[derive(Clone, Copy, Debug)]
pub struct Declared {
    /// As `Node::key` gives it: `-` written `_`.
    pub name: &'static str,
    pub support: Support,
    /// The option written out with a valid value, for the table test: `value("HOST")`.
    pub example: &'static str,
    /// What it does for this driver, for the reference (empty for [`Support::NotYet`]).
    pub about: &'static str,
    /// Its default as the reference shows it (`required`, `none`, `5`).
    pub default: &'static str,
}

/// An option the driver reads; `example` shows it with a valid value. Its table gives it
/// [`Declared::about`] too: a test of the reference fails for an option that says nothing.
pub const fn read(name: &'static str, example: &'static str) -> Declared {
    Declared {
        name,
        support: Support::Read,
        example,
        about: "",
        default: "",
    }
}

/// An option of syslog-ng's that the driver does not have yet.
pub const fn not_yet(name: &'static str) -> Declared {
    Declared {
        name,
        support: Support::NotYet,
        example: "",
        about: "",
        default: "",
    }
}

impl Declared {
    /// What the option does for this driver and its default: `read("port", "port(514)")
    /// .about("the port it listens on", "514")`.
    pub const fn about(self, about: &'static str, default: &'static str) -> Declared {
        Declared {
            about,
            default,
            ..self
        }
    }
}

/// A node's options, checked against its driver's table, read through it.
pub struct Options<'n> {
    node: &'n Node,
    /// The driver's table: the parts it is declared in (options every source has, then the
    /// driver's own), flattened.
    table: Vec<&'static Declared>,
    /// Per table entry: the driver asked for it.
    asked: Vec<bool>,
}

impl<'n> Options<'n> {
    /// Refuses an option of `node` that `table` does not list (unknown, with the valid names)
    /// or lists as not yet supported.
    pub fn check(node: &'n Node, table: &'static [Declared]) -> Result<Options<'n>, ConfigError> {
        Options::check_parts(node, &[table])
    }

    /// [`Options::check`] against a table declared in parts.
    pub fn check_parts(
        node: &'n Node,
        parts: &[&'static [Declared]],
    ) -> Result<Options<'n>, ConfigError> {
        let table: Vec<&'static Declared> = parts.iter().flat_map(|p| p.iter()).collect();
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
        let asked = vec![false; table.len()];
        Ok(Options { node, table, asked })
    }

    /// Marks `name` as read; panics when the table does not declare it (a bug the driver's
    /// table test finds).
    fn ask(&mut self, name: &str) {
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
    }

    /// Every option named `name`, in the order written.
    pub fn all(&mut self, name: &str) -> impl Iterator<Item = &'n Node> + use<'n> {
        self.ask(name);
        let name = name.to_string();
        self.node.options().filter(move |o| o.key() == name)
    }

    /// The option named `name`, the last one when it is written more than once (as syslog-ng
    /// takes it).
    pub fn last(&mut self, name: &str) -> Option<&'n Node> {
        self.all(name).last()
    }

    /// The yes/no option `name` (the last one written), `default` when it is not.
    pub fn yes_no(&mut self, name: &str, default: bool) -> Result<bool, ConfigError> {
        Ok(self
            .last(name)
            .map(Node::bool)
            .transpose()?
            .unwrap_or(default))
    }

    /// The last option written under any of `names`: one option with several names
    /// (`port()` and `localport()`).
    pub fn last_of(&mut self, names: &[&str]) -> Option<&'n Node> {
        for name in names {
            self.ask(name);
        }
        self.node
            .options()
            .filter(|o| names.contains(&o.key().as_str()))
            .last()
    }

    /// Hands each option `part` declares as read to `apply`, in the order written, for a set
    /// of options read by one function (the options every source has). `apply` answers
    /// whether it knew the option; one it did not know is a bug in sluice, refused as such.
    pub fn apply(
        &mut self,
        part: &'static [Declared],
        mut apply: impl FnMut(&'n Node) -> Result<bool, ConfigError>,
    ) -> Result<(), ConfigError> {
        for d in part.iter().filter(|d| d.support == Support::Read) {
            self.ask(d.name);
        }
        for opt in self.node.options() {
            let declared = part
                .iter()
                .any(|d| d.support == Support::Read && d.name == opt.key());
            if declared && !apply(opt)? {
                return Err(self.unread(opt));
            }
        }
        Ok(())
    }

    fn unread(&self, opt: &Node) -> ConfigError {
        ConfigError::new(
            opt.pos,
            format!(
                "{}() in {}() is accepted but not read: a bug in sluice, please report it",
                opt.name, self.node.name
            ),
        )
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
                return Err(self.unread(opt));
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
    every_option_is_read_in(sample, &[table], build)
}

/// [`every_option_is_read`] for a table declared in parts; also fails when two parts declare
/// the same name (the first would hide the second).
pub fn every_option_is_read_in(
    sample: &str,
    parts: &[&[Declared]],
    build: impl Fn(&str) -> Result<(), String>,
) {
    let open = sample.strip_suffix(')').expect("a sample ends in ')'");
    let table: Vec<&Declared> = parts.iter().flat_map(|p| p.iter()).collect();
    for (i, d) in table.iter().enumerate() {
        assert!(
            table[..i].iter().all(|e| e.name != d.name),
            "{sample}: {}() is declared twice",
            d.name
        );
    }
    for d in table.iter().filter(|d| d.support == Support::Read) {
        let text = format!("{open} {})", d.example);
        if let Err(e) = build(&text) {
            panic!("{text}: {e}");
        }
    }
}

/// The table test's other half: `sample` with an option no table of its driver declares
/// is refused by `build`, and the refusal names the option. Returns the refusal, for what
/// the caller checks of it.
pub fn an_undeclared_option_is_refused(
    sample: &str,
    build: impl Fn(&str) -> Result<(), String>,
) -> String {
    let at = sample.rfind(')').expect("a sample ends with ')'");
    let text = format!("{} no-such-option(1){}", &sample[..at], &sample[at..]);
    let refused = build(&text).expect_err(&text);
    assert!(refused.contains("no-such-option"), "{text}: {refused}");
    refused
}

/// The registry test of a kind of driver: no two declarations claim a name, and no name is
/// both implemented and "not yet".
pub fn each_name_once<'a>(implemented: impl Iterator<Item = &'a str>, not_yet: &[&'a str]) {
    let mut seen: Vec<&str> = not_yet.to_vec();
    for name in implemented {
        assert!(!seen.contains(&name), "{name} is declared twice");
        seen.push(name);
    }
}

/// For a table test: loads `text` as the one driver of a `kind` statement
/// (`source s { tcp(port(0)); };`) and hands its node to `build`; an error comes back
/// rendered with its line.
pub fn build_one(
    kind: &str,
    text: &str,
    build: impl FnOnce(&Node) -> Result<(), ConfigError>,
) -> Result<(), String> {
    let config =
        crate::load_str("t.conf", &format!("{kind} x {{ {text}; }};")).map_err(|e| e.render())?;
    let crate::Body::Nodes(nodes) = &config.statements[0].body else {
        return Err(format!("{text}: not a {kind} driver"));
    };
    build(&nodes[0]).map_err(|e| e.render(&config.map))
}

/// The driver of `drivers` (a kind's registry; `names` gives each one's names) that `node`
/// names. A name that is not there is refused as "the x() `kind`" not supported yet when
/// `not_yet` has it (syslog-ng has it), otherwise as an unknown `noun` with the names that are
/// valid here.
pub fn find<'d, D>(
    node: &Node,
    (kind, noun): (&str, &str),
    drivers: &'d [D],
    names: impl Fn(&'d D) -> &'d [&'static str],
    not_yet: &[&str],
) -> Result<&'d D, ConfigError> {
    let key = node.key();
    if let Some(driver) = drivers.iter().find(|d| names(d).contains(&key.as_str())) {
        return Ok(driver);
    }
    if not_yet.contains(&key.as_str()) {
        return Err(ConfigError::not_supported(
            node.pos,
            &format!("the {}() {kind}", node.name),
        ));
    }
    let valid: Vec<&str> = drivers
        .iter()
        .flat_map(|d| names(d).iter().copied())
        .collect();
    Err(ConfigError::unknown(node.pos, noun, &node.name, "", &valid))
}
