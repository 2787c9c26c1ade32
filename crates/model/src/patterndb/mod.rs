//! PatternDB: syslog-ng's pattern databases, read unchanged and matched as syslog-ng 3.38's
//! `db-parser()` matches them.
//!
//! A database ([`PatternDb`], loaded by [`load`]) is a tree of program patterns
//! ([`radix::Radix`]), each leading to its ruleset: a tree of message patterns leading to
//! rules. [`PatternDb::classify`] finds the rule of a message — its program first (rulesets
//! without a program pattern serve the programs no pattern names), then its text — and what
//! the pattern's fields took. It is stateless: one compiled database is shared read-only by
//! every reader.

pub mod correlate;
mod fields;
mod load;
pub mod patternize;
pub mod radix;

pub use load::{load, load_texts, merge, Example, Loaded};

use crate::correlation::Scope;
use crate::filter::Filter;
use crate::message::TagId;
use crate::rewrite::Field;
use crate::template::Template;
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
    /// Its place in [`PatternDb::rules`].
    pub index: usize,
    pub id: String,
    pub class: Option<String>,
    /// `.classifier.rule_id` and `.classifier.class` (`system` without a class), set on every
    /// message the rule matches: interned ([`intern`]), so a message refers to them without a
    /// reference count (two cores counting on one were a tenth of a run at 90 % matching).
    pub id_value: &'static [u8],
    pub class_value: &'static [u8],
    /// `<tags>`, and `.classifier.CLASS`.
    pub tags: Vec<TagId>,
    /// `<values>`: templates over the message (and its context), evaluated after the fields
    /// are set; a value named as a header field (`MESSAGE`, `PROGRAM`…) sets that field.
    pub values: Vec<(Field, Template)>,
    /// `context-id`, `context-scope`, `context-timeout`: the messages it matches are
    /// correlated.
    pub context: Option<ContextSpec>,
    pub actions: Vec<Action>,
    /// Where its first pattern is written (`file:line:column`).
    pub location: String,
}

/// `text` kept for the rest of the process, once for each distinct text: rule ids and
/// classes, which every message a rule matches refers to. Bounded by the ids and classes of
/// the databases ever loaded, not by how often they are loaded.
pub fn intern(text: &str) -> &'static [u8] {
    use std::collections::HashSet;
    use std::sync::{Mutex, OnceLock};
    static TEXTS: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
    let mut texts = TEXTS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(t) = texts.get(text) {
        return t.as_bytes();
    }
    let kept: &'static str = Box::leak(text.into());
    texts.insert(kept);
    kept.as_bytes()
}

/// The context a rule's messages join, or an action opens.
#[derive(Debug)]
pub struct ContextSpec {
    /// Its id, formatted from the message (`context-id`).
    pub id: Template,
    /// `context-scope`: `process` unless said.
    pub scope: Scope,
    /// `context-timeout`, in seconds.
    pub timeout: u64,
}

/// What a rule does when it matches (`trigger="match"`) or when its context ends
/// (`trigger="timeout"`).
#[derive(Debug)]
pub struct Action {
    pub trigger: Trigger,
    /// `condition`: a filter over the context's messages (the last one, for what looks at one
    /// message).
    pub condition: Option<Filter>,
    /// `rate="N/M"`: at most N messages in M seconds, per rule, action and key of the
    /// rule's scope, as a token bucket.
    pub rate: Option<(u32, u32)>,
    pub content: ActionContent,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trigger {
    Match,
    Timeout,
}

#[derive(Debug)]
pub enum ActionContent {
    /// An action with nothing in it.
    Nothing,
    /// `<message>`: a new message.
    Message(Synthetic),
    /// `<create-context>`: a new context, with a new message as its first.
    CreateContext(ContextSpec, Synthetic),
}

/// A message an action makes: what it starts from and what it sets.
#[derive(Debug, Default)]
pub struct Synthetic {
    pub inherit: Inherit,
    pub tags: Vec<TagId>,
    /// Templates over the context, the new message last (`@0`).
    pub values: Vec<(Field, Template)>,
}

/// What a new message starts from: `inherit-mode` (or `inherit-properties`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Inherit {
    /// An empty local message with the time of the message that triggered it.
    #[default]
    None,
    /// A copy of the last message of the context.
    LastMessage,
    /// A copy of the last message with the values of every message of the context it lacks.
    Context,
}

impl Inherit {
    pub fn parse(mode: &str) -> Option<Inherit> {
        Some(match mode.to_ascii_lowercase().as_str() {
            "none" => Inherit::None,
            "last-message" => Inherit::LastMessage,
            "context" => Inherit::Context,
            _ => return None,
        })
    }

    /// `inherit-properties`: `context`, or a boolean (syslog-ng looks at the first letter).
    pub fn of_properties(text: &str) -> Option<Inherit> {
        if text.eq_ignore_ascii_case("context") {
            return Some(Inherit::Context);
        }
        match text.bytes().next()? {
            b'T' | b't' | b'1' => Some(Inherit::LastMessage),
            b'F' | b'f' | b'0' => Some(Inherit::None),
            _ => None,
        }
    }
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
    /// Whether some rule correlates or acts: a parser then keeps state.
    pub fn correlates(&self) -> bool {
        self.rules
            .iter()
            .any(|r| r.context.is_some() || !r.actions.is_empty())
    }

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

    /// The tree of program patterns as `pdbtool dump -T` prints it.
    pub fn dump_programs(&self) -> String {
        let mut out = String::new();
        self.programs.dump(&|_| "RULES".into(), &mut out);
        out
    }

    /// The tree of the ruleset `program` leads to, as `pdbtool dump -P` prints it; `None`
    /// when no ruleset serves the program.
    pub fn dump_ruleset(&self, program: &[u8]) -> Option<String> {
        let &r = self.programs.find(program, &mut Vec::new())?;
        let mut out = String::new();
        self.rulesets[r].dump(
            &|&rule| format!("rule_id='{}'", self.rules[rule].id),
            &mut out,
        );
        Some(out)
    }

    /// What `pdbtool dictionary` prints: the names fields set and the names of rules' values
    /// (with `tags`, the rules' tags instead), one a line, in the order of a walk of the
    /// program tree (or of `program`'s ruleset alone) — a name once for every place it is set.
    pub fn dictionary(&self, program: Option<&[u8]>, tags: bool) -> String {
        let mut out = Vec::new();
        let ruleset = |r: usize, out: &mut Vec<String>| {
            self.rulesets[r].walk(&mut |field, rule| {
                if let (Some(name), false) = (field, tags) {
                    out.push(crate::values::name_of(name).to_string());
                }
                let Some(&rule) = rule else {
                    return;
                };
                let rule = &self.rules[rule];
                match tags {
                    false => out.extend(rule.values.iter().map(|(f, _)| f.name())),
                    true => out.extend(
                        rule.tags
                            .iter()
                            .map(|&t| crate::message::tag_name(t).to_string()),
                    ),
                }
            });
        };
        match program {
            Some(program) => {
                if let Some(&r) = self.programs.find(program, &mut Vec::new()) {
                    ruleset(r, &mut out);
                }
            }
            None => self.programs.walk(&mut |field, r| {
                if let (Some(name), false) = (field, tags) {
                    out.push(crate::values::name_of(name).to_string());
                }
                if let Some(&r) = r {
                    ruleset(r, &mut out);
                }
            }),
        }
        out.iter().map(|l| format!("{l}\n")).collect()
    }

    /// The steps of the walk that classifies `message` of `program` in its ruleset (none
    /// when no ruleset serves the program), for `pdbtool match --debug-pattern`.
    pub fn trace(&self, program: &[u8], message: &[u8]) -> Vec<radix::Step> {
        let mut trace = Vec::new();
        if let Some(&r) = self.programs.find(program, &mut Vec::new()) {
            self.rulesets[r].find_traced(message, &mut Vec::new(), Some(&mut trace));
        }
        trace
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
