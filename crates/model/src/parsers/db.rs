//! `db-parser()`: classifies each message with a pattern database ([`crate::patterndb`]) as
//! syslog-ng 3.38 does, and sets what the rule says:
//!
//! - a match: `.classifier.class` (the rule's class, `system` without one),
//!   `.classifier.rule_id`, the values the pattern's fields took (typed: `@NUMBER@` an
//!   integer, `@FLOAT@` a double), the rule's tags (and `.classifier.CLASS`, or
//!   `.classifier.system` without a class), then the rule's `<values>`, templates over the
//!   message as it is by then;
//! - no rule for it: `.classifier.class` `unknown` and the tag `.classifier.unknown`; the
//!   message goes on unless `drop-unmatched(yes)`.
//!
//! The program is `$PROGRAM` (or `program-template()`), the text `$MSG` (or `template()`).
//! Values the fields took from the received text are spans of it, not copies; the rule id
//! and class are interned texts, with no reference count to touch.
//!
//! A database whose rules correlate ([`crate::patterndb::correlate`]) gives each place the
//! parser stands in the configuration a state of its own: messages its match actions make
//! are handed back to the log path, which runs them through what follows the parser.

use crate::message::{tag_id, LogMessage, TagId};
use crate::patterndb::correlate::Correlation;
use crate::patterndb::radix::Capture;
use crate::patterndb::{Classified, PatternDb, Taken};
use crate::template::Template;
use crate::values::{name_id, NameId};
use sluice_protocol::{Span, Text};
use std::cell::RefCell;
use std::sync::{Arc, OnceLock};

/// A compiled `db-parser()`.
#[derive(Debug)]
pub struct DbParser {
    pub db: Arc<PatternDb>,
    pub drop_unmatched: bool,
    pub program_template: Option<Template>,
    /// `message-template()`, syslog-ng 3.38's name of `template()`.
    pub message_template: Option<Template>,
    /// `inject-mode()`: where what its actions make goes, and whether the messages it sees
    /// go on (not with `aggregate-only`).
    pub inject: super::Inject,
    /// `max-contexts()`: the bound of open contexts (see [`crate::correlation`]).
    pub max_contexts: usize,
    /// The open contexts, when a rule correlates; each place the parser stands has its own
    /// ([`DbParser::instance`]).
    pub correlation: Option<Arc<Correlation>>,
    /// What a reload's parser must be to take the open contexts over: `db-parser(FILE)`, as
    /// syslog-ng names its state.
    pub identity: String,
}

impl DbParser {
    /// The parser for another place in the configuration: the same database, a state of
    /// its own.
    pub fn instance(&self) -> DbParser {
        DbParser {
            db: self.db.clone(),
            drop_unmatched: self.drop_unmatched,
            program_template: self.program_template.clone(),
            message_template: self.message_template.clone(),
            inject: self.inject,
            max_contexts: self.max_contexts,
            correlation: self
                .correlation
                .as_ref()
                .map(|_| Arc::new(Correlation::new(self.max_contexts))),
            identity: self.identity.clone(),
        }
    }

    /// Moves the correlation clock by the wall clock (µs; `None`: ends every context) and
    /// hands what the timeout actions of the contexts that ended make to `f`, all at once.
    pub fn tick(&self, now_micros: Option<i64>, f: &mut dyn FnMut(&mut Vec<LogMessage<'_>>)) {
        let Some(correlation) = &self.correlation else {
            return;
        };
        let ended = match now_micros {
            Some(now) => correlation.state.tick(now),
            None => correlation.state.end_all(),
        };
        if ended.is_empty() {
            return;
        }
        let mut made = Vec::new();
        correlation.ended(&ended, &mut made);
        self.inject.send(&mut made);
        if !made.is_empty() {
            f(&mut made);
        }
    }
}

/// The names and tags every classification sets.
struct Marks {
    class: NameId,
    rule_id: NameId,
    system: TagId,
    unknown: TagId,
}

fn marks() -> &'static Marks {
    static MARKS: OnceLock<Marks> = OnceLock::new();
    MARKS.get_or_init(|| Marks {
        class: name_id(".classifier.class"),
        rule_id: name_id(".classifier.rule_id"),
        system: tag_id(".classifier.system"),
        unknown: tag_id(".classifier.unknown"),
    })
}

/// What a classification needs from message to message: the program, the rendered input,
/// a value being rendered, what the fields took.
#[derive(Default)]
struct Scratch {
    program: Vec<u8>,
    rendered: Vec<u8>,
    value: Vec<u8>,
    taken: Taken,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::default();
}

impl DbParser {
    /// Classifies `msg` (its text, or `template` rendered); `false` when it should leave its
    /// path (unmatched with `drop-unmatched(yes)`, or `inject-mode(aggregate-only)`).
    /// Messages the rule's match actions make are pushed to `made`.
    pub fn apply<'r>(
        &self,
        template: Option<&Template>,
        msg: &mut LogMessage<'r>,
        made: &mut Vec<LogMessage<'r>>,
    ) -> bool {
        let before = made.len();
        let passed = self.classify(template, msg, made);
        if self.inject == super::Inject::Internal && made.len() > before {
            let mut new = made.split_off(before);
            self.inject.send(&mut new);
        }
        passed && self.inject != super::Inject::AggregateOnly
    }

    fn classify<'r>(
        &self,
        template: Option<&Template>,
        msg: &mut LogMessage<'r>,
        made: &mut Vec<LogMessage<'r>>,
    ) -> bool {
        let template = template.or(self.message_template.as_ref());
        SCRATCH.with_borrow_mut(|scratch| {
            let Scratch {
                program,
                rendered,
                value,
                taken,
            } = scratch;
            program.clear();
            match &self.program_template {
                Some(t) => t.append(msg, 0, program),
                None => program.extend_from_slice(msg.program()),
            }
            // The text to match: the received text itself when it can be (values are then
            // spans of it), else a rendering.
            let raw = msg.raw;
            let in_frame = match (template, &msg.fields.message) {
                (None, Text::Span(span)) => Some(*span),
                _ => None,
            };
            rendered.clear();
            let input: &[u8] = match (in_frame, template) {
                (Some(span), _) => span.of(raw),
                (None, Some(t)) => {
                    t.append(msg, 0, rendered);
                    rendered
                }
                (None, None) => {
                    rendered.extend_from_slice(msg.message());
                    rendered
                }
            };
            let m = marks();
            if let Some(c) = &self.correlation {
                c.advance(msg);
            }
            match self.db.classify(program, input, taken) {
                Classified::Empty => !self.drop_unmatched,
                Classified::Unknown => {
                    set(msg, &taken.program, |c| {
                        Text::owned(&program[c.start..c.end])
                    });
                    msg.values.set(m.class, Text::Static(b"unknown"));
                    msg.tags.insert(m.unknown);
                    !self.drop_unmatched
                }
                Classified::Rule(rule) => {
                    set(msg, &taken.program, |c| {
                        Text::owned(&program[c.start..c.end])
                    });
                    msg.values.set(m.class, Text::Static(rule.class_value));
                    msg.values.set(m.rule_id, Text::Static(rule.id_value));
                    set(msg, &taken.message, |c| match in_frame {
                        Some(span) => Text::Span(Span::new(
                            span.start as usize + c.start,
                            span.start as usize + c.end,
                        )),
                        None => Text::owned(&input[c.start..c.end]),
                    });
                    if rule.class.is_none() {
                        msg.tags.insert(m.system);
                    }
                    msg.tags.remove(m.unknown);
                    for tag in &rule.tags {
                        msg.tags.insert(*tag);
                    }
                    match &self.correlation {
                        Some(c) => c.matched(&self.db, rule.index, msg, made),
                        None => {
                            for (name, template) in &rule.values {
                                value.clear();
                                let kind = template.append_typed(msg, 0, value);
                                name.set_typed(msg, kind, Text::owned(value));
                            }
                        }
                    }
                    true
                }
            }
        })
    }
}

/// Sets the values fields took, in the order of the pattern (a name taken twice keeps the
/// last).
fn set(msg: &mut LogMessage, taken: &[Capture], text: impl Fn(&Capture) -> Text) {
    for c in taken {
        msg.values.set_typed(c.name, c.kind, text(c));
    }
}
