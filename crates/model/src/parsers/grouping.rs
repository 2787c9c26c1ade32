//! `grouping-by()`: groups messages into contexts by a key and makes one message of each
//! context when it ends, as syslog-ng 3.38 does.
//!
//! A message that `where()` accepts joins the context of its `key()` within `scope()` (and
//! gets `.classifier.context_id`); the context ends `timeout()` seconds after its last
//! message ([`crate::correlation`]'s clock), or at once when `trigger()` holds over it. Then,
//! if `having()` holds over its messages (ordered by `sort-key()` when given), `aggregate()`
//! makes a message from them ([`crate::patterndb::Synthetic`], inheriting the context by
//! default), which goes on in the log path after the parser. With
//! `inject-mode(aggregate-only)` the grouped messages themselves go no further.
//!
//! Contexts end on the correlation clock's tick, off the readers' threads, a trigger's
//! included: the aggregate follows its last message by up to a second.

use crate::correlation::{Context, Joined, Key, Scope, State};
use crate::filter::Filter;
use crate::kept::Kept;
use crate::message::LogMessage;
use crate::patterndb::correlate::make;
use crate::patterndb::Synthetic;
use crate::template::{context, Template};
use crate::values::{name_id, NameId};
use sluice_protocol::Text;
use std::sync::{Arc, OnceLock};

/// A compiled `grouping-by()`.
#[derive(Debug)]
pub struct GroupingBy {
    pub key: Template,
    pub sort_key: Option<Template>,
    pub scope: Scope,
    pub timeout: u64,
    pub trigger: Option<Filter>,
    pub where_: Option<Filter>,
    pub having: Option<Filter>,
    pub aggregate: Arc<Synthetic>,
    /// `inject-mode()`: where aggregates go, and whether grouped messages go on.
    pub inject: super::Inject,
    pub max_contexts: usize,
    pub state: Arc<State<()>>,
    /// What a reload's parser must be to take the open contexts over: its key and scope.
    pub identity: String,
}

fn context_id_name() -> NameId {
    static ID: OnceLock<NameId> = OnceLock::new();
    *ID.get_or_init(|| name_id(".classifier.context_id"))
}

impl GroupingBy {
    /// The parser for another place in the configuration: a state of its own.
    pub fn instance(&self) -> GroupingBy {
        GroupingBy {
            key: self.key.clone(),
            sort_key: self.sort_key.clone(),
            scope: self.scope,
            timeout: self.timeout,
            trigger: self.trigger.clone(),
            where_: self.where_.clone(),
            having: self.having.clone(),
            aggregate: self.aggregate.clone(),
            inject: self.inject,
            max_contexts: self.max_contexts,
            state: Arc::new(State::new(self.max_contexts)),
            identity: self.identity.clone(),
        }
    }

    /// Puts `msg` into its context; `false` when it should leave its path
    /// (`inject-mode(aggregate-only)`).
    pub fn apply(&self, msg: &mut LogMessage) -> bool {
        let mut scratch = Vec::new();
        if self
            .where_
            .as_ref()
            .is_none_or(|w| w.matches(msg, &mut scratch))
        {
            self.state.advance(msg);
            let mut id = Vec::new();
            self.key.append(msg, 0, &mut id);
            msg.values.set(context_id_name(), Text::owned(&id));
            let key = Key::of(self.scope, msg, &id);
            let joined = self.state.join(
                key,
                self.timeout,
                || (),
                |c| {
                    c.messages.push(Kept::of(msg));
                    let Some(trigger) = &self.trigger else {
                        return true;
                    };
                    let view: Vec<&LogMessage> = c.messages.iter().map(Kept::get).collect();
                    let last = view[view.len() - 1];
                    !context::with(&view, || trigger.matches(last, &mut scratch))
                },
            );
            if let Joined::Closed(context) = joined {
                self.state.end(context);
            }
        }
        self.inject != super::Inject::AggregateOnly
    }

    /// The aggregates of `ended` contexts (those whose `having()` holds), pushed to `made`.
    pub fn aggregates<'c>(&self, ended: &'c mut [Context<()>], made: &mut Vec<LogMessage<'c>>) {
        for c in ended.iter_mut() {
            if let Some(sort_key) = &self.sort_key {
                let mut keyed: Vec<(Vec<u8>, Kept)> = c
                    .messages
                    .drain(..)
                    .map(|m| {
                        let mut k = Vec::new();
                        sort_key.append(m.get(), 0, &mut k);
                        (k, m)
                    })
                    .collect();
                keyed.sort_by(|a, b| a.0.cmp(&b.0));
                c.messages = keyed.into_iter().map(|(_, m)| m).collect();
            }
        }
        for c in ended.iter() {
            let view: Vec<&LogMessage> = c.messages.iter().map(Kept::get).collect();
            let Some(&last) = view.last() else {
                continue;
            };
            if let Some(having) = &self.having {
                if !context::with(&view, || having.matches(last, &mut Vec::new())) {
                    continue;
                }
            }
            made.push(make(&self.aggregate, Some(&c.key), &view, last));
        }
    }

    /// Moves the clock by the wall clock (µs; `None`: ends every context) and hands the
    /// aggregates of the contexts that ended to `f`, all at once.
    pub fn tick(&self, now_micros: Option<i64>, f: &mut dyn FnMut(&mut Vec<LogMessage<'_>>)) {
        let mut ended = match now_micros {
            Some(now) => self.state.tick(now),
            None => self.state.end_all(),
        };
        if ended.is_empty() {
            return;
        }
        let mut made = Vec::new();
        self.aggregates(&mut ended, &mut made);
        self.inject.send(&mut made);
        if !made.is_empty() {
            f(&mut made);
        }
    }
}
