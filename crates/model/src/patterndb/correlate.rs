//! Correlation by a pattern database's rules, as syslog-ng 3.38's `db-parser()` does it.
//!
//! A rule with a `context-id` puts each message it matches into a context ([`crate::correlation`]):
//! its `<values>` are then formatted over the context, the message last. Its `<actions>` run
//! when it matches (`trigger="match"`) or when the context ends (`trigger="timeout"`), if
//! their `condition` holds over the context and their `rate` allows: each makes a new message
//! ([`Synthetic`]) or opens a new context (`<create-context>`).
//!
//! Messages made on a match go on in the log path right after the parser, before the message
//! that matched ([`Correlation::matched`]); those made when a context ends are handed to
//! whoever ticks the parser's clock ([`Correlation::ended`]).

use super::{Action, ActionContent, Inherit, PatternDb, Rule, Synthetic, Trigger};
use crate::correlation::{Context, Joined, Key, Scope, State};
use crate::kept::Kept;
use crate::message::{LogMessage, Origin};
use crate::rewrite::Field;
use crate::template::context;
use crate::time::UnixTime;
use crate::values::{name_id, NameId};
use hashbrown::HashMap;
use sluice_protocol::{SyslogFields, Text};
use std::sync::{Arc, Mutex, OnceLock};

/// The correlation state of one `db-parser()` in one place of the configuration: its open
/// contexts (each owned by the index of the rule that last matched), and its actions' rates.
pub struct Correlation {
    pub state: State<RuleRef>,
    rates: Mutex<HashMap<Key, Bucket, foldhash::fast::RandomState>>,
}

/// The rule that last matched a context, in the database it belongs to: a context a reload
/// handed over keeps the rule of the database that made it.
#[derive(Clone, Debug)]
pub struct RuleRef {
    pub db: Arc<PatternDb>,
    pub index: usize,
}

impl RuleRef {
    fn rule(&self) -> Option<&Rule> {
        self.db.rules.get(self.index)
    }

    fn is(&self, db: &Arc<PatternDb>, index: usize) -> bool {
        self.index == index && Arc::ptr_eq(&self.db, db)
    }
}

/// An action's token bucket for one key.
struct Bucket {
    last_check: u64,
    tokens: u32,
}

impl std::fmt::Debug for Correlation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Correlation")
            .field("open", &self.state.open())
            .finish()
    }
}

/// The origin of a message made from nothing (`inherit-mode(none)`): no source, no sender.
pub fn made_here() -> &'static Origin {
    static ORIGIN: OnceLock<Origin> = OnceLock::new();
    ORIGIN.get_or_init(|| Origin::without_peer("", u16::MAX, b"", true))
}

fn context_id_name() -> NameId {
    static ID: OnceLock<NameId> = OnceLock::new();
    *ID.get_or_init(|| name_id(".classifier.context_id"))
}

/// The views of a context's kept messages, oldest first.
fn views(messages: &[Kept]) -> Vec<&LogMessage<'_>> {
    messages.iter().map(Kept::get).collect()
}

impl Correlation {
    pub fn new(max_contexts: usize) -> Correlation {
        Correlation {
            state: State::new(max_contexts),
            rates: Mutex::new(HashMap::default()),
        }
    }

    /// `msg` matched rule `r` of `db` (its fields set): joins the rule's context, sets the
    /// rule's values over it, and runs the rule's match actions. Messages they make are pushed
    /// to `made`, in order.
    pub fn matched<'r>(
        &self,
        db: &Arc<PatternDb>,
        r: usize,
        msg: &mut LogMessage<'r>,
        made: &mut Vec<LogMessage<'r>>,
    ) {
        let rule = &db.rules[r];
        let owner = || RuleRef {
            db: db.clone(),
            index: r,
        };
        let mut opened = Vec::new();
        let Some(spec) = &rule.context else {
            set_values(&rule.values, &[], msg);
            for action in rule.actions.iter().filter(|a| a.trigger == Trigger::Match) {
                self.act(rule, &owner, action, None, &[], msg, made, &mut opened);
            }
            self.open(opened);
            return;
        };
        let mut id = Vec::new();
        spec.id.append(msg, 0, &mut id);
        msg.values.set(context_id_name(), Text::owned(&id));
        let key = Key::of(spec.scope, msg, &id);
        self.state.join(key, spec.timeout, owner, |c| {
            if !c.owner.is(db, r) {
                c.owner = owner();
            }
            let earlier = views(&c.messages);
            set_values(&rule.values, &earlier, msg);
            for action in rule.actions.iter().filter(|a| a.trigger == Trigger::Match) {
                self.act(
                    rule,
                    &owner,
                    action,
                    Some(&c.key),
                    &earlier,
                    msg,
                    made,
                    &mut opened,
                );
            }
            drop(earlier);
            c.messages.push(Kept::of(msg));
            true
        });
        self.open(opened);
    }

    /// Moves the clock by `msg` (every message the parser sees does).
    pub fn advance(&self, msg: &LogMessage) {
        self.state.advance(msg);
    }

    /// The messages the timeout actions of `ended` contexts make, pushed to `made`.
    pub fn ended<'c>(&self, ended: &'c [Context<RuleRef>], made: &mut Vec<LogMessage<'c>>) {
        for c in ended {
            let Some(rule) = c.owner.rule() else {
                continue;
            };
            let owner = || c.owner.clone();
            let view = views(&c.messages);
            let Some((last, earlier)) = view.split_last() else {
                continue;
            };
            let mut opened = Vec::new();
            for action in rule
                .actions
                .iter()
                .filter(|a| a.trigger == Trigger::Timeout)
            {
                self.act(
                    rule,
                    &owner,
                    action,
                    Some(&c.key),
                    earlier,
                    last,
                    made,
                    &mut opened,
                );
            }
            self.open(opened);
        }
    }

    /// Runs `action` of rule `r` over a context (`earlier` messages, then `last`, which
    /// triggered it; a rule without a context has `last` alone) when its condition and rate
    /// allow. A message it makes starts from `last`.
    #[allow(clippy::too_many_arguments)]
    fn act<'a>(
        &self,
        rule: &Rule,
        owner: &dyn Fn() -> RuleRef,
        action: &Action,
        key: Option<&Key>,
        earlier: &[&LogMessage<'_>],
        last: &LogMessage<'a>,
        made: &mut Vec<LogMessage<'a>>,
        opened: &mut Vec<(Key, u64, RuleRef, Kept)>,
    ) {
        let view: Vec<&LogMessage> = earlier.iter().copied().chain([last]).collect();
        if let Some(condition) = &action.condition {
            let holds = context::with(&view, || condition.matches(last, &mut Vec::new()));
            if !holds {
                return;
            }
        }
        if let Some((rate, quantum)) = action.rate {
            let scope = rule.context.as_ref().map_or(Scope::Process, |c| c.scope);
            let index = rule
                .actions
                .iter()
                .position(|a| std::ptr::eq(a, action))
                .unwrap_or(0);
            let id = format!("{}:{index}", rule.id);
            if !self.within_rate(Key::of(scope, last, id.as_bytes()), rate, quantum) {
                return;
            }
        }
        match &action.content {
            ActionContent::Nothing => {}
            ActionContent::Message(synthetic) => made.push(make(synthetic, key, &view, last)),
            ActionContent::CreateContext(spec, synthetic) => {
                let first = make(synthetic, key, &view, last);
                let mut id = Vec::new();
                context::with(&view, || spec.id.append(last, 0, &mut id));
                let timeout = match spec.timeout {
                    0 => rule.context.as_ref().map_or(0, |c| c.timeout),
                    t => t,
                };
                opened.push((
                    Key::of(spec.scope, &first, &id),
                    timeout,
                    owner(),
                    Kept::of(&first),
                ));
            }
        }
    }

    /// Opens the contexts `<create-context>` actions made (once the context that made them
    /// is let go: they may share its shard), each with its first message.
    fn open(&self, opened: Vec<(Key, u64, RuleRef, Kept)>) {
        for (key, timeout, owner, first) in opened {
            let mut first = Some(first);
            let joined = self.state.join(
                key,
                timeout,
                || owner.clone(),
                |c| {
                    c.owner = owner.clone();
                    c.messages.extend(first.take());
                    true
                },
            );
            debug_assert!(matches!(joined, Joined::Open));
        }
    }

    /// syslog-ng's token bucket: `rate` tokens every `quantum` seconds of the clock, one
    /// taken per message made.
    fn within_rate(&self, key: Key, rate: u32, quantum: u32) -> bool {
        let now = self.state.now();
        let mut rates = self.rates.lock().unwrap_or_else(|e| e.into_inner());
        let bucket = rates.entry(key).or_insert(Bucket {
            last_check: 0,
            tokens: 0,
        });
        if bucket.last_check == 0 {
            bucket.last_check = now;
            bucket.tokens = rate;
        } else {
            // Fixed point with an 8-bit fraction, as syslog-ng computes it.
            let per_token = ((u64::from(quantum) << 8) / u64::from(rate)).max(1);
            let new = (now.saturating_sub(bucket.last_check) << 8) / per_token;
            if new > 0 {
                bucket.tokens = (u64::from(bucket.tokens) + new).min(u64::from(rate)) as u32;
                bucket.last_check = now;
            }
        }
        if bucket.tokens > 0 {
            bucket.tokens -= 1;
            true
        } else {
            false
        }
    }
}

/// Sets `values` on `msg`, each formatted over `earlier` and `msg` (last), in order: a value
/// sees the ones set before it.
fn set_values(
    values: &[(Field, crate::Template)],
    earlier: &[&LogMessage<'_>],
    msg: &mut LogMessage<'_>,
) {
    let mut value = Vec::new();
    for (name, template) in values {
        value.clear();
        let kind = if earlier.is_empty() {
            template.append_typed(msg, 0, &mut value)
        } else {
            let view: Vec<&LogMessage> = earlier.iter().copied().chain([&*msg]).collect();
            context::with(&view, || {
                template.append_typed(view[view.len() - 1], 0, &mut value)
            })
        };
        name.set_typed(msg, kind, Text::owned(&value));
    }
}

/// The message `synthetic` makes from a context (`view`, oldest first; its last is `last`,
/// which triggered it) of `key` (none for a rule without a context).
pub(crate) fn make<'a>(
    synthetic: &Synthetic,
    key: Option<&Key>,
    view: &[&LogMessage<'_>],
    last: &LogMessage<'a>,
) -> LogMessage<'a> {
    let mut msg = match synthetic.inherit {
        Inherit::LastMessage | Inherit::Context => last.clone(),
        Inherit::None => LogMessage {
            raw: b"",
            fields: SyslogFields {
                pri: 13,
                local: true,
                ..SyslogFields::default()
            },
            stamp: last.stamp,
            recvd: UnixTime::now(crate::time::Zone::local()),
            origin: made_here(),
            host_is_sender: false,
            tags: Default::default(),
            chained_hostname: false,
            keep_raw: false,
            values: Default::default(),
        },
    };
    if synthetic.inherit == Inherit::Context && key.is_some() {
        // The values of earlier messages the last one lacks, newest first.
        for earlier in view.iter().rev().skip(1) {
            for (name, kind, value) in earlier.values.iter_typed() {
                if msg.values.get(name).is_none() {
                    msg.values
                        .set_typed(name, kind, Text::owned(earlier.text(value)));
                }
            }
        }
    }
    if let Some(key) = key {
        let scoped = key.scoped();
        if let Some(pid) = scoped.pid {
            msg.fields.pid = Some(Text::owned(pid));
            msg.fields.legacy_msghdr = None;
        }
        if let Some(program) = scoped.program {
            msg.fields.program = Some(Text::owned(program));
            msg.fields.legacy_msghdr = None;
        }
        if let Some(host) = scoped.host {
            msg.set_host(Text::owned(host));
        }
    }
    for tag in &synthetic.tags {
        msg.tags.insert(*tag);
    }
    // A context without one is the triggering message alone; the new message is formatted
    // as the context's last (`@0`).
    set_values(&synthetic.values, view, &mut msg);
    msg
}
