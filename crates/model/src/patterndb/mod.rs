//! PatternDB: syslog-ng's pattern databases, read unchanged and matched as syslog-ng 3.38's
//! `db-parser()` matches them.
//!
//! A database ([`PatternDb`], loaded by [`load`]) is a tree of program patterns
//! ([`radix::Radix`]), each leading to its ruleset: a tree of message patterns leading to
//! rules. [`PatternDb::classify`] finds the rule of a message — its program first (rulesets
//! without a program pattern serve the programs no pattern names), then its text — and what
//! the pattern's fields took. It is stateless: one compiled database is shared read-only by
//! every reader.

mod fields;
mod load;
pub mod patternize;
pub mod radix;

pub use load::{load, merge, Example, Loaded};

use crate::message::TagId;
use crate::template::Template;
use crate::values::NameId;
use radix::{Capture, Radix};

/// A loaded pattern database.
#[derive(Debug, Default)]
pub struct PatternDb {
    /// Program patterns, each leading to a ruleset; the root is the ruleset of the rulesets
    /// without a program pattern.
    programs: Radix<usize>,
    /// Each ruleset's message patterns, leading to rules.
    rulesets: Vec<Radix<usize>>,
    pub rules: Vec<Rule>,
    /// No `<ruleset>` at all: messages are left as they are.
    pub empty: bool,
    /// `<patterndb version="…">` of the last file read.
    pub version: String,
}

/// A rule: its id, class, and what it sets on the messages it matches.
#[derive(Debug)]
pub struct Rule {
    pub id: String,
    pub class: Option<String>,
    /// `.classifier.rule_id` and `.classifier.class` (`system` without a class), shared by
    /// every message the rule matches.
    pub id_value: std::sync::Arc<[u8]>,
    pub class_value: std::sync::Arc<[u8]>,
    /// `<tags>`, and `.classifier.CLASS`.
    pub tags: Vec<TagId>,
    /// `<values>`: templates over the message, evaluated after the fields are set.
    pub values: Vec<(NameId, Template)>,
    /// Where its first pattern is written (`file:line:column`).
    pub location: String,
}

/// What classifying a message found.
#[derive(Debug)]
pub enum Classified<'db> {
    /// A rule matched.
    Rule(&'db Rule),
    /// The message's ruleset has no rule for it.
    Unknown,
    /// The database has no rulesets.
    Empty,
}

/// What the fields of a classification took: of the program pattern (ranges of the
/// program) and of the message pattern (ranges of the message). Kept by the caller from
/// message to message.
#[derive(Debug, Default)]
pub struct Taken {
    pub program: Vec<Capture>,
    pub message: Vec<Capture>,
}

impl PatternDb {
    /// The rule of a message from `program` with text `message`; what the fields took in
    /// `taken`.
    pub fn classify(&self, program: &[u8], message: &[u8], taken: &mut Taken) -> Classified<'_> {
        taken.program.clear();
        taken.message.clear();
        if self.empty {
            return Classified::Empty;
        }
        let Some(&ruleset) = self.programs.find(program, &mut taken.program) else {
            return Classified::Empty;
        };
        match self.rulesets[ruleset].find(message, &mut taken.message) {
            Some(&rule) => Classified::Rule(&self.rules[rule]),
            None => Classified::Unknown,
        }
    }

    /// Every rule of the message's ruleset whose pattern matches all of it: more than one
    /// are rules that shadow each other (`pdbtool test` says so).
    pub fn applicable(&self, program: &[u8], message: &[u8]) -> Vec<&Rule> {
        let Some(&ruleset) = self.programs.find(program, &mut Vec::new()) else {
            return Vec::new();
        };
        self.rulesets[ruleset]
            .find_all(message)
            .into_iter()
            .map(|&r| &self.rules[r])
            .collect()
    }
}
