//! Correlation state: the open contexts of a pattern database's rules or of a
//! `grouping-by()`, each a list of messages under a key, ended by a timer.
//!
//! Semantics are syslog-ng 3.38's:
//! - A context's key is its id (a template's value) within a scope: the same process
//!   (`$HOST`, `$PROGRAM`, `$PID`), program, host, or everything (`global`).
//! - Time follows the messages: each message moves the clock to its own time, never past the
//!   time it was received and never back, so logs replayed from a file correlate in the time
//!   they were written. While no message comes, the clock follows the wall clock ([`State::tick`]).
//! - A context ends once the clock is past `timeout` seconds after its last message (at the
//!   next second, as syslog-ng's timer wheel ends it).
//!
//! For every core: contexts are sharded by key, each shard under its own lock, so readers on
//! different cores rarely wait on each other, and the messages of one context still join it
//! in the order they arrive. The number of open contexts is bounded: past the bound, the
//! context nearest its end is ended early ([`State::evicted`] counts them), its timeout
//! actions fired like any other's, so a flood of unique keys cannot exhaust memory.
//! What contexts hold is charged to the memory budget ([`crate::memory`]); while the budget
//! is tight, each message that joins a context first ends the one of its shard nearest its
//! end the same way, so long contexts cannot exhaust it either.

use crate::kept::Kept;
use crate::memory::{Budget, Charge};
use crate::message::LogMessage;
use hashbrown::HashTable;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Where messages made with `inject-mode(internal)` go: the engine's `internal()` source
/// ([`set_internal`]); dropped until one is set.
type InternalSink = Box<dyn Fn(Kept) + Send + Sync>;

fn internal_sink() -> &'static std::sync::RwLock<Option<InternalSink>> {
    static SINK: std::sync::OnceLock<std::sync::RwLock<Option<InternalSink>>> =
        std::sync::OnceLock::new();
    SINK.get_or_init(|| std::sync::RwLock::new(None))
}

/// Sends messages made with `inject-mode(internal)` to `sink` (the `internal()` source).
pub fn set_internal(sink: InternalSink) {
    *internal_sink().write().unwrap_or_else(|e| e.into_inner()) = Some(sink);
}

/// Hands `made` to the `internal()` source, as syslog-ng posts a message made with
/// `inject-mode(internal)`.
pub fn post_internal(made: &[LogMessage]) {
    if made.is_empty() {
        return;
    }
    if let Some(sink) = &*internal_sink().read().unwrap_or_else(|e| e.into_inner()) {
        for msg in made {
            sink(Kept::of(msg));
        }
    }
}

/// Which messages share a context id: syslog-ng's `context-scope()`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    Process,
    Program,
    Host,
    Global,
}

impl Scope {
    pub fn parse(name: &str) -> Option<Scope> {
        Some(match name.to_ascii_lowercase().as_str() {
            "process" => Scope::Process,
            "program" => Scope::Program,
            "host" => Scope::Host,
            "global" => Scope::Global,
            _ => return None,
        })
    }

    /// How many of host, program and pid the key holds.
    fn parts(self) -> usize {
        match self {
            Scope::Process => 3,
            Scope::Program => 2,
            Scope::Host => 1,
            Scope::Global => 0,
        }
    }
}

/// A context's key: its scope, the parts of the message the scope names, and its id, in one
/// allocation.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Key(Box<[u8]>);

impl Key {
    /// The key of `msg`'s context `id` in `scope`.
    pub fn of(scope: Scope, msg: &LogMessage, id: &[u8]) -> Key {
        let parts: [&[u8]; 3] = [msg.host(), msg.program(), msg.pid()];
        let parts = &parts[..scope.parts()];
        let mut key =
            Vec::with_capacity(1 + 4 * 4 + id.len() + parts.iter().map(|p| p.len()).sum::<usize>());
        key.push(scope as u8);
        for part in parts.iter().chain([&id]) {
            key.extend_from_slice(&(part.len() as u32).to_le_bytes());
            key.extend_from_slice(part);
        }
        Key(key.into_boxed_slice())
    }

    fn scope(&self) -> Scope {
        [Scope::Process, Scope::Program, Scope::Host, Scope::Global][self.0[0] as usize]
    }

    /// The host, program and pid the scope takes, then the id.
    fn parts(&self) -> impl Iterator<Item = &[u8]> {
        let mut rest = &self.0[1..];
        std::iter::from_fn(move || {
            let (len, tail) = rest.split_first_chunk::<4>()?;
            let (part, tail) = tail.split_at(u32::from_le_bytes(*len) as usize);
            rest = tail;
            Some(part)
        })
    }

    /// The context's id (the value of its template).
    pub fn id(&self) -> &[u8] {
        self.parts().last().unwrap_or_default()
    }

    /// The host, program and pid of the key's scope, as a message of the context had them:
    /// a message the context makes carries them (syslog-ng sets them so).
    pub fn scoped(&self) -> Scoped<'_> {
        let mut parts = self.parts().take(self.scope().parts());
        Scoped {
            host: parts.next(),
            program: parts.next(),
            pid: parts.next(),
        }
    }
}

/// What a key's scope took from its messages ([`Key::scoped`]).
#[derive(Debug, PartialEq, Eq)]
pub struct Scoped<'k> {
    pub host: Option<&'k [u8]>,
    pub program: Option<&'k [u8]>,
    pub pid: Option<&'k [u8]>,
}

/// An open context: its messages, oldest first, and what its owner keeps with it (the rule
/// that last matched, for a pattern database).
#[derive(Debug)]
pub struct Context<T> {
    pub key: Key,
    pub messages: Vec<Kept>,
    pub owner: T,
    /// When it ends, in the clock's seconds, and its place among the shard's deadlines.
    deadline: (u64, u64),
    /// What its key and messages hold, charged to the memory budget until it is dropped.
    charge: Charge,
}

/// What a context holds besides its key and messages: the context itself, and its share of
/// its shard's table (which doubles as it fills), of the list of deadlines and of what the
/// allocator keeps around each allocation. Measured with the system allocator
/// (`measure_contexts`), a million contexts of one message each grow the resident set by 715
/// to 1,611 bytes a context (messages of 25 to 925 bytes), 248 bytes besides the context,
/// key and message; in the daemon (mimalloc, contexts ended early and made again while the
/// budget is tight, `bench/memory_limit.py contexts`) by ~400 bytes more.
fn context_bytes<T>() -> u64 {
    640 + std::mem::size_of::<Context<T>>() as u64
}

/// The contexts whose keys hash to one shard. Each key is stored once, in its context; the
/// deadlines find their context by its hash.
struct Shard<T> {
    contexts: HashTable<Context<T>>,
    /// Each context's deadline with its key's hash, in order: what ends first is found first.
    deadlines: BTreeMap<(u64, u64), u64>,
}

/// The hash of a key, for its shard and its place in the shard's table.
fn hash_of(key: &Key) -> u64 {
    use std::hash::BuildHasher;
    static HASHER: std::sync::OnceLock<foldhash::fast::FixedState> = std::sync::OnceLock::new();
    HASHER
        .get_or_init(foldhash::fast::FixedState::default)
        .hash_one(key)
}

impl<T> Shard<T> {
    fn get_mut(&mut self, hash: u64, key: &Key) -> Option<&mut Context<T>> {
        self.contexts.find_mut(hash, |c| c.key == *key)
    }

    fn remove(&mut self, hash: u64, key: &Key) -> Option<Context<T>> {
        let (context, _) = self
            .contexts
            .find_entry(hash, |c| c.key == *key)
            .ok()?
            .remove();
        self.deadlines.remove(&context.deadline);
        Some(context)
    }

    /// Schedules the end of context `key` at `at`; `next` sets contexts that end in the
    /// same second apart, in the order they were last joined (as syslog-ng ends them).
    fn schedule(&mut self, hash: u64, key: &Key, (at, next): (u64, u64)) {
        let Some(context) = self.contexts.find_mut(hash, |c| c.key == *key) else {
            return;
        };
        let old = std::mem::replace(&mut context.deadline, (at, next));
        self.deadlines.remove(&old);
        self.deadlines.insert((at, next), hash);
    }

    /// The context that ends first, when `clock` is past its end (any, when `clock` is
    /// `u64::MAX`).
    fn pop_due(&mut self, clock: u64) -> Option<Context<T>> {
        let (&deadline, _) = self.deadlines.first_key_value()?;
        if deadline.0 >= clock && clock != u64::MAX {
            return None;
        }
        let (_, hash) = self.deadlines.pop_first()?;
        let entry = self
            .contexts
            .find_entry(hash, |c| c.deadline == deadline)
            .ok()?;
        Some(entry.remove().0)
    }
}

const SHARDS: usize = 64;

/// A state's counters, each with its name in the statistics ([`State::counters`]).
pub type Counters = [(&'static str, Arc<AtomicU64>); 3];

/// What a message did to its context ([`State::join`]).
pub enum Joined<T> {
    /// It is open, with the message's `timeout` from now.
    Open,
    /// The caller ended it (`grouping-by()`'s `trigger()`): here it is.
    Closed(Context<T>),
}

impl<T> std::fmt::Debug for State<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("State").field("open", &self.open()).finish()
    }
}

/// The open contexts of one parser.
pub struct State<T> {
    shards: Box<[Mutex<Shard<T>>]>,
    /// Seconds since the epoch, as the messages tell them.
    clock: AtomicU64,
    /// When (µs of the wall clock) a message last moved or kept the clock, or a tick moved it.
    last_tick: AtomicI64,
    /// Contexts found ended while a message looked for them, or ended early, to be handed to
    /// [`State::tick`]'s caller.
    due: Mutex<Vec<Context<T>>>,
    limit_per_shard: usize,
    /// What contexts are charged to: the process's.
    budget: &'static Budget,
    /// Contexts joined so far: their order, for contexts that end in the same second.
    joined: AtomicU64,
    open: Arc<AtomicU64>,
    ended: Arc<AtomicU64>,
    evicted: Arc<AtomicU64>,
}

impl<T> State<T> {
    /// State for at most `max_contexts` open contexts.
    pub fn new(max_contexts: usize) -> State<T> {
        State::with_budget(max_contexts, crate::memory::budget())
    }

    /// State whose contexts draw from `budget` (for tests: the process has one).
    pub fn with_budget(max_contexts: usize, budget: &'static Budget) -> State<T> {
        State {
            shards: (0..SHARDS)
                .map(|_| {
                    Mutex::new(Shard {
                        contexts: HashTable::new(),
                        deadlines: BTreeMap::new(),
                    })
                })
                .collect(),
            clock: AtomicU64::new(0),
            last_tick: AtomicI64::new(0),
            due: Mutex::new(Vec::new()),
            limit_per_shard: max_contexts.div_ceil(SHARDS).max(1),
            budget,
            joined: AtomicU64::new(0),
            open: Arc::default(),
            ended: Arc::default(),
            evicted: Arc::default(),
        }
    }

    fn shard(&self, hash: u64) -> std::sync::MutexGuard<'_, Shard<T>> {
        self.shards[(hash >> 58) as usize % SHARDS]
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// The next number of the order contexts are joined in (from 1: a context not scheduled
    /// yet has 0).
    fn order(&self) -> u64 {
        self.joined.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// The clock, in seconds since the epoch.
    pub fn now(&self) -> u64 {
        self.clock.load(Ordering::Relaxed)
    }

    /// Moves the clock to `msg`'s time (its stamp, never later than when it was received,
    /// never back).
    pub fn advance(&self, msg: &LogMessage) {
        let received = msg.recvd.secs.max(0) as u64;
        let to = (msg.stamp.secs.max(0) as u64).min(received);
        if to > self.clock.load(Ordering::Relaxed) {
            self.clock.fetch_max(to, Ordering::Relaxed);
        }
        // The wall clock moves the correlation clock only while no message comes: kept
        // fresh to a quarter second, so busy readers rarely write to it.
        let at = msg.recvd.secs * 1_000_000 + i64::from(msg.recvd.micros);
        if at > self.last_tick.load(Ordering::Relaxed) + 250_000 {
            self.last_tick.fetch_max(at, Ordering::Relaxed);
        }
    }

    /// Finds or opens (`open` makes its owner) the context `key`, lets `f` add to it, and
    /// schedules its end `timeout` seconds from now, unless `f` closed it. A context that has
    /// ended by the clock is not joined: it goes to the ended ones and a new one opens.
    pub fn join(
        &self,
        key: Key,
        timeout: u64,
        open: impl FnOnce() -> T,
        f: impl FnOnce(&mut Context<T>) -> bool,
    ) -> Joined<T> {
        let clock = self.now();
        let hash = hash_of(&key);
        let mut shard = self.shard(hash);
        let mut ended = Vec::new();
        if shard
            .get_mut(hash, &key)
            .is_some_and(|c| c.deadline.0 < clock)
        {
            ended.extend(shard.remove(hash, &key));
        }
        if self.budget.tight() {
            if let Some(oldest) = shard.pop_due(u64::MAX) {
                self.evicted.fetch_add(1, Ordering::Relaxed);
                ended.push(oldest);
            }
        }
        if shard.get_mut(hash, &key).is_none() {
            while shard.contexts.len() >= self.limit_per_shard {
                match shard.pop_due(u64::MAX) {
                    Some(oldest) => {
                        self.evicted.fetch_add(1, Ordering::Relaxed);
                        ended.push(oldest);
                    }
                    None => break,
                }
            }
            let mut charge = Charge::new(self.budget);
            charge.add(context_bytes::<T>() + key.0.len() as u64);
            let context = Context {
                key: key.clone(),
                messages: Vec::new(),
                owner: open(),
                deadline: (0, 0),
                charge,
            };
            shard
                .contexts
                .insert_unique(hash, context, |c| hash_of(&c.key));
            self.open.fetch_add(1, Ordering::Relaxed);
        }
        let context = shard.get_mut(hash, &key).expect("opened above");
        let had = context.messages.len();
        let keep = f(context);
        let added: u64 = context.messages[had.min(context.messages.len())..]
            .iter()
            .map(Kept::held_bytes)
            .sum();
        context.charge.add(added);
        let joined = if keep {
            shard.schedule(hash, &key, (clock.saturating_add(timeout), self.order()));
            Joined::Open
        } else {
            let closed = shard.remove(hash, &key).expect("open above");
            self.open.fetch_sub(1, Ordering::Relaxed);
            Joined::Closed(closed)
        };
        drop(shard);
        if !ended.is_empty() {
            self.open.fetch_sub(ended.len() as u64, Ordering::Relaxed);
            self.due
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .extend(ended);
        }
        joined
    }

    /// Ends `context` now (its owner closed it): [`State::tick`] hands it over next.
    pub fn end(&self, context: Context<T>) {
        self.due
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(context);
    }

    /// Moves the clock by the wall clock (`now_micros`) when no message has for over a second,
    /// and returns the contexts that ended, in the order they ended.
    pub fn tick(&self, now_micros: i64) -> Vec<Context<T>> {
        let last = self.last_tick.load(Ordering::Relaxed);
        let idle = now_micros - last;
        if last == 0 {
            self.last_tick.store(now_micros, Ordering::Relaxed);
        } else if idle >= 1_250_000 {
            let secs = idle / 1_000_000;
            if self
                .last_tick
                .compare_exchange(
                    last,
                    last + secs * 1_000_000,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
                .is_ok()
            {
                self.clock.fetch_add(secs as u64, Ordering::Relaxed);
            }
        } else if idle < -1_000_000 {
            // The wall clock went back: wait from here.
            self.last_tick.store(now_micros, Ordering::Relaxed);
        }
        self.expire(self.now())
    }

    /// Takes over the contexts of `old` (the same parser in the configuration a reload
    /// replaced), with its clock: a context both have keeps `old`'s messages first and the
    /// later end.
    pub fn adopt(&self, old: &State<T>) {
        self.clock.fetch_max(old.now(), Ordering::Relaxed);
        self.last_tick
            .fetch_max(old.last_tick.load(Ordering::Relaxed), Ordering::Relaxed);
        let mut moved = 0;
        for shard in old.shards.iter() {
            let contexts = {
                let mut shard = shard.lock().unwrap_or_else(|e| e.into_inner());
                shard.deadlines.clear();
                std::mem::take(&mut shard.contexts)
            };
            for mut context in contexts {
                moved += 1;
                let hash = hash_of(&context.key);
                let key = context.key.clone();
                let mut shard = self.shard(hash);
                let at = match shard.get_mut(hash, &key) {
                    Some(newer) => {
                        context.messages.append(&mut newer.messages);
                        newer.messages = std::mem::take(&mut context.messages);
                        newer.charge.absorb(&mut context.charge);
                        newer.deadline.0.max(context.deadline.0)
                    }
                    None => {
                        // Scheduled anew in this state's order of deadlines.
                        let at = std::mem::take(&mut context.deadline).0;
                        shard
                            .contexts
                            .insert_unique(hash, context, |c| hash_of(&c.key));
                        self.open.fetch_add(1, Ordering::Relaxed);
                        at
                    }
                };
                shard.schedule(hash, &key, (at, self.order()));
            }
        }
        old.open.fetch_sub(moved, Ordering::Relaxed);
        let due = std::mem::take(&mut *old.due.lock().unwrap_or_else(|e| e.into_inner()));
        self.due
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(due);
    }

    /// Ends every context, as if its time had come (a stop, a reload that drops the parser).
    pub fn end_all(&self) -> Vec<Context<T>> {
        self.expire(u64::MAX)
    }

    fn expire(&self, clock: u64) -> Vec<Context<T>> {
        let mut ended = std::mem::take(&mut *self.due.lock().unwrap_or_else(|e| e.into_inner()));
        let mut count = 0;
        for shard in self.shards.iter() {
            let mut shard = shard.lock().unwrap_or_else(|e| e.into_inner());
            while let Some(context) = shard.pop_due(clock) {
                ended.push(context);
                count += 1;
            }
        }
        self.open.fetch_sub(count, Ordering::Relaxed);
        ended.sort_by_key(|c| c.deadline);
        self.ended.fetch_add(ended.len() as u64, Ordering::Relaxed);
        ended
    }

    /// The counters for the statistics: contexts open now (`contexts`), ended
    /// (`contexts_ended`) and ended early (`contexts_evicted`).
    pub fn counters(&self) -> Counters {
        [
            ("contexts", self.open.clone()),
            ("contexts_ended", self.ended.clone()),
            ("contexts_evicted", self.evicted.clone()),
        ]
    }

    /// Contexts open now.
    pub fn open(&self) -> u64 {
        self.open.load(Ordering::Relaxed)
    }

    /// Contexts ended so far, by their time or early.
    pub fn ended(&self) -> u64 {
        self.ended.load(Ordering::Relaxed)
    }

    /// Contexts ended early because too many were open or the memory budget was tight.
    pub fn evicted(&self) -> u64 {
        self.evicted.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::message;
    use crate::UnixTime;

    fn at(frame: &str, secs: i64) -> LogMessage<'static> {
        let mut msg = message(frame);
        msg.stamp = UnixTime {
            secs,
            micros: 0,
            offset: 0,
        };
        msg.recvd = UnixTime {
            secs: 2_000_000_000,
            micros: 0,
            offset: 0,
        };
        msg
    }

    fn add(state: &State<()>, msg: &LogMessage, scope: Scope, id: &str, timeout: u64) -> usize {
        state.advance(msg);
        let mut n = 0;
        state.join(
            Key::of(scope, msg, id.as_bytes()),
            timeout,
            || (),
            |c| {
                c.messages.push(Kept::of(msg));
                n = c.messages.len();
                true
            },
        );
        n
    }

    #[test]
    fn contexts_are_charged_and_end_early_while_the_budget_is_tight() {
        let budget: &'static Budget = Box::leak(Box::new(Budget::new(1 << 40)));
        let state = State::<()>::with_budget(1_000_000, budget);
        let msg = at(
            "<13>Jan  1 00:00:00 h1 sshd[1]: a message of some length",
            100,
        );
        for i in 0..1000 {
            add(&state, &msg, Scope::Global, &format!("{i:04}"), 60);
        }
        let held = budget.used.load(Ordering::Relaxed);
        assert!(
            held > 1000 * (context_bytes::<()>() + msg.raw.len() as u64),
            "{held}"
        );
        assert_eq!(state.evicted(), 0);
        // Tight from here: each join ends the context of its shard nearest its end, so what
        // the contexts hold stays where it was.
        budget.set_limit(held);
        for i in 1000..2000 {
            add(&state, &msg, Scope::Global, &format!("{i:04}"), 60);
        }
        assert_eq!((state.evicted(), state.open()), (1000, 1000));
        let ended = state.tick(2_000_000_000_000_000);
        assert_eq!(ended.len(), 1000);
        drop(ended);
        assert_eq!(budget.used.load(Ordering::Relaxed), held);
        drop(state.end_all());
        assert_eq!(budget.used.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn scopes_decide_which_messages_share_a_context() {
        let a = at("<13>Jan  1 00:00:00 h1 sshd[1]: x", 100);
        let b = at("<13>Jan  1 00:00:00 h1 sshd[2]: x", 100);
        let c = at("<13>Jan  1 00:00:00 h2 sshd[1]: x", 100);
        let cases = [
            (Scope::Process, [1, 1, 1]),
            (Scope::Program, [1, 2, 1]),
            (Scope::Host, [1, 2, 1]),
            (Scope::Global, [1, 2, 3]),
        ];
        for (scope, want) in cases {
            let state = State::new(100);
            let got = [&a, &b, &c].map(|m| add(&state, m, scope, "id", 10));
            assert_eq!(got, want, "{scope:?}");
        }
        let key = Key::of(Scope::Program, &a, b"the id");
        assert_eq!(key.id(), b"the id");
        let scoped = Scoped {
            host: Some(b"h1"),
            program: Some(b"sshd"),
            pid: None,
        };
        assert_eq!(key.scoped(), scoped);
    }

    #[test]
    fn contexts_end_by_the_messages_clock_and_by_the_wall_clock_when_idle() {
        let state = State::new(100);
        add(
            &state,
            &at("<13>Jan  1 00:00:00 h p: x", 100),
            Scope::Global,
            "a",
            10,
        );
        add(
            &state,
            &at("<13>Jan  1 00:00:00 h p: x", 105),
            Scope::Global,
            "b",
            10,
        );
        // A message from the past moves nothing.
        add(
            &state,
            &at("<13>Jan  1 00:00:00 h p: x", 50),
            Scope::Global,
            "c",
            30,
        );
        assert_eq!(state.now(), 105);
        assert!(state.tick(2_000_000_000_000_000).is_empty());
        // `a` ended at 110: a message of 112 opens a new one (`c` ends at 105 + 30).
        assert_eq!(
            add(
                &state,
                &at("<13>Jan  1 00:00:00 h p: x", 112),
                Scope::Global,
                "a",
                10
            ),
            1
        );
        let ids = |ended: Vec<Context<()>>| {
            ended
                .iter()
                .map(|c| c.key.id().to_vec())
                .collect::<Vec<_>>()
        };
        assert_eq!(ids(state.tick(2_000_000_000_000_000)), [b"a".to_vec()]);
        // Idle: the wall clock takes over after a second.
        let ended = state.tick(2_000_000_000_000_000 + 5_000_000);
        assert_eq!(state.now(), 117);
        assert_eq!(ids(ended), [b"b".to_vec()]);
        assert_eq!((state.open(), state.ended(), state.evicted()), (2, 2, 0));
        assert_eq!(ids(state.end_all()), [b"a".to_vec(), b"c".to_vec()]);
    }

    #[test]
    fn a_reload_takes_the_contexts_over() {
        let old = State::new(100);
        add(
            &old,
            &at("<13>Jan  1 00:00:00 h p: x", 100),
            Scope::Global,
            "a",
            10,
        );
        add(
            &old,
            &at("<13>Jan  1 00:00:00 h p: x", 101),
            Scope::Global,
            "b",
            10,
        );
        let new = State::new(100);
        // A message that reached the new parser before the old one was let go.
        add(
            &new,
            &at("<13>Jan  1 00:00:00 h p: y", 102),
            Scope::Global,
            "b",
            20,
        );
        new.adopt(&old);
        assert_eq!((old.open(), new.open(), new.now()), (0, 2, 102));
        let ended = new.end_all();
        let b = ended.iter().find(|c| c.key.id() == b"b").unwrap();
        let texts: Vec<&[u8]> = b.messages.iter().map(|m| m.get().message()).collect();
        assert_eq!(texts, [&b"x"[..], b"y"]);
        assert_eq!(ended.len(), 2);
    }

    #[test]
    fn too_many_contexts_end_the_nearest_first() {
        let state = State::new(SHARDS);
        let mut ids = Vec::new();
        for i in 0..1000 {
            let id = format!("k{i}");
            add(
                &state,
                &at("<13>Jan  1 00:00:00 h p: x", 100 + i),
                Scope::Global,
                &id,
                10,
            );
            ids.push(id);
        }
        assert!(state.open() <= SHARDS as u64);
        assert_eq!(state.open() + state.evicted(), 1000);
        let ended = state.tick(0);
        // The ones still open are the newest.
        assert!(ended.iter().all(|c| c.key.id() != b"k999"));
        assert!(state.end_all().iter().any(|c| c.key.id() == b"k999"));
        assert_eq!(state.open(), 0);
    }

    /// Not a test: prints what contexts really take against what they are charged
    /// (`cargo test -p sluice-model --release measure_contexts -- --ignored --nocapture`).
    #[test]
    #[ignore]
    fn measure_contexts() {
        let rss = || {
            let s = std::fs::read_to_string("/proc/self/status").unwrap();
            let l = s.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
            l.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 1024
        };
        let budget: &'static Budget = Box::leak(Box::new(Budget::new(1 << 40)));
        let state = State::<()>::with_budget(10_000_000, budget);
        let msg = at(
            &std::env::var("MEASURE_FRAME")
                .unwrap_or("<13>Jan  1 00:00:00 h1 app: 00000000 login".into()),
            100,
        );
        let before = rss();
        let n = 1_000_000;
        for i in 0..n {
            add(&state, &msg, Scope::Global, &format!("{i:08}"), 3600);
        }
        let grew = rss() - before;
        let charged = budget.used.load(Ordering::Relaxed);
        eprintln!(
            "{n} contexts: resident grew {} B/context, charged {} B/context, Context<()> is {} B",
            grew / n as u64,
            charged / n as u64,
            std::mem::size_of::<Context<()>>()
        );
    }
}
