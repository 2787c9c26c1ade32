//! Statistics: counters named as syslog-ng names them, read by `sluice ctl stats|query`, the
//! Prometheus endpoint and the periodic `Log statistics;` internal message.
//!
//! A counter is an `Arc<AtomicU64>` that the code counting holds directly; the [`Registry`]
//! only lists them with their names (component, id, instance, type — syslog-ng's
//! `SourceName;SourceId;SourceInstance;…;Type`). Counting costs one relaxed atomic add per
//! read or per batch, never a lookup.

use crate::memory::Charge;
use sluice_model::LogMessage;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// The default of `stats-max-dynamics()`. syslog-ng's is no limit (it forgets counters unused
/// for `stats-lifetime()`); a sender that makes up host names would grow them without end.
pub const STATS_MAX_DYNAMICS: usize = 10_000;

/// One counter and its name.
#[derive(Clone, Debug)]
pub struct Counter {
    /// `src.network`, `dst.file`, `center`, `source`, `destination`.
    pub component: String,
    /// `s_net#0`, or the statement's name for `source`/`destination`.
    pub id: String,
    /// `tcp,127.0.0.1`, a file name, `received`…
    pub instance: String,
    /// `processed`, `written`, `dropped`, `queued`, `memory_usage`, `connections`.
    pub kind: &'static str,
    pub value: Arc<AtomicU64>,
    /// Made for what the messages carry (a host, a program: `stats-level(2)` and up) rather
    /// than for a part of the configuration; syslog-ng shows these with the state `d`.
    pub dynamic: bool,
}

impl Counter {
    /// The name `query` lists: the non-empty parts joined with dots.
    pub fn query_name(&self) -> String {
        joined(&[&self.component, &self.id, &self.instance, self.kind], ".")
    }

    /// Gauges show a state (how much is queued now); counters only grow until reset.
    fn is_gauge(&self) -> bool {
        matches!(
            self.kind,
            "queued"
                | "memory_usage"
                | "connections"
                | "contexts"
                | "window_in_use"
                | "paused_readers"
                | "paused_since"
                | "memory_limit"
                | "expires_at"
                | "oldest_queued_since"
                | "in_flight"
        )
    }
}

/// The counters of a running configuration (and of those it was reloaded from).
#[derive(Debug, Default)]
pub struct Registry {
    counters: Mutex<Counters>,
}

#[derive(Debug)]
struct Counters {
    list: Vec<Counter>,
    /// (component, id, instance, type) → place in `list`.
    index: HashMap<(String, String, String, &'static str), usize>,
    /// Dynamic counters made, and the most that may be (`stats-max-dynamics()`). Counts
    /// that found no counter past the limit go to `global;dynamic_counters;;a;dropped`, made
    /// when the first is refused.
    dynamic: usize,
    max_dynamic: usize,
    /// What the counters hold, charged to the memory budget; while it is tight, no dynamic
    /// counter is made either.
    charge: Charge,
}

impl Default for Counters {
    fn default() -> Counters {
        Counters {
            list: Vec::new(),
            index: HashMap::new(),
            dynamic: 0,
            max_dynamic: STATS_MAX_DYNAMICS,
            charge: Charge::default(),
        }
    }
}

/// What a counter holds besides its names (held twice, in the list and in the index): the
/// counter and its value, its place in the index, the names' allocations and what the
/// allocator rounds them to. Measured (`bench/memory_limit.py counters`): 229,513 host
/// counters grew the resident set by ~670 bytes each, while 400 were charged.
const COUNTER_BYTES: u64 = 640;

impl Counters {
    fn get(
        &mut self,
        component: &str,
        id: &str,
        instance: &str,
        kind: &'static str,
        dynamic: bool,
    ) -> Arc<AtomicU64> {
        let key = (
            component.to_string(),
            id.to_string(),
            instance.to_string(),
            kind,
        );
        if let Some(&at) = self.index.get(&key) {
            return self.list[at].value.clone();
        }
        if dynamic {
            self.dynamic += 1;
        }
        self.charge
            .add(COUNTER_BYTES + 2 * (component.len() + id.len() + instance.len()) as u64);
        let value = Arc::new(AtomicU64::new(0));
        self.index.insert(key, self.list.len());
        self.list.push(Counter {
            component: component.to_string(),
            id: id.to_string(),
            instance: instance.to_string(),
            kind,
            value: value.clone(),
            dynamic,
        });
        value
    }

    /// Whether no dynamic counter is to be made: `stats-max-dynamics()` are, or the memory
    /// budget is tight.
    fn dynamics_full(&self) -> bool {
        self.dynamic >= self.max_dynamic || self.charge.budget().tight()
    }
}

thread_local! {
    /// A batch's dynamic counts before they are added to the registry under one lock.
    static DYNAMIC: std::cell::RefCell<HashMap<(&'static str, Vec<u8>), u64>> =
        std::cell::RefCell::default();
}

/// What a destination driver counts. Its books balance: every message routed to it
/// (`processed`) is `written`, `dropped` (for one of the [`DropReason`]s) or still `queued`
/// (which includes those a sender has in flight); `sluice ctl ledger` checks it.
#[derive(Clone, Debug, Default)]
pub struct DestCounters {
    /// Messages routed to it (and those it took back from its disk buffer at start).
    pub processed: Arc<AtomicU64>,
    /// Messages it delivered (written to a file, sent to a server).
    pub written: Arc<AtomicU64>,
    /// Messages it dropped, for any reason: syslog-ng's total. Count through
    /// [`DestCounters::drop`], which counts the reason too.
    pub dropped: Arc<AtomicU64>,
    /// Messages waiting in its queue.
    pub queued: Arc<AtomicU64>,
    /// Bytes waiting in its queue.
    pub memory_usage: Arc<AtomicU64>,
    /// The drops by reason and the age of the queue, each made at its first use.
    pub made_on_use: Arc<MadeOnUse>,
}

/// Why a destination dropped messages. Filtering and `flags(final)` are routing, not drops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropReason {
    /// Its queue (`log-fifo-size()`) was full, on a path without flow control.
    QueueFull,
    /// Its disk buffer was full, on a path without flow control.
    DiskBufferFull,
    /// The server refused them for good (an HTTP 4xx, a document's mapping error, a topic
    /// the broker does not take).
    Refused,
    /// Sent `retries()` times without being taken.
    RetriesExhausted,
    /// A file name from a template that the path rules refuse.
    FileNameRefused,
    /// A file that cannot be opened (no permission, a directory in the way).
    Unwritable,
    /// Written at once or not at all, with no one to take them (a terminal, a pipe's reader).
    Unavailable,
    /// Still queued at a stop with no server taking them (and no disk buffer to keep them).
    Stopped,
    /// Past three quarters of `memory-limit()`, on a path without flow control.
    MemoryLimit,
}

impl DropReason {
    pub const ALL: [DropReason; 9] = [
        DropReason::QueueFull,
        DropReason::DiskBufferFull,
        DropReason::Refused,
        DropReason::RetriesExhausted,
        DropReason::FileNameRefused,
        DropReason::Unwritable,
        DropReason::Unavailable,
        DropReason::Stopped,
        DropReason::MemoryLimit,
    ];

    /// The counter's type: `dropped_` and the reason.
    pub fn kind(self) -> &'static str {
        match self {
            DropReason::QueueFull => "dropped_queue_full",
            DropReason::DiskBufferFull => "dropped_disk_buffer_full",
            DropReason::Refused => "dropped_refused",
            DropReason::RetriesExhausted => "dropped_retries_exhausted",
            DropReason::FileNameRefused => "dropped_file_name_refused",
            DropReason::Unwritable => "dropped_unwritable",
            DropReason::Unavailable => "dropped_unavailable",
            DropReason::Stopped => "dropped_stopped",
            DropReason::MemoryLimit => "dropped_memory_limit",
        }
    }
}

/// A destination's counters that are listed in the registry at their first use — its drops
/// by reason, the age of its queue — so that the statistics of a destination that never
/// dropped or queued stay as syslog-ng's.
#[derive(Debug, Default)]
pub struct MadeOnUse {
    /// Where the counters are listed, and under which name; none in unit tests.
    listed: Option<(Arc<Registry>, [String; 3])>,
    reasons: [OnceLock<Arc<AtomicU64>>; DropReason::ALL.len()],
    oldest: OnceLock<Arc<AtomicU64>>,
    in_flight: OnceLock<Arc<AtomicU64>>,
}

impl MadeOnUse {
    fn make(&self, kind: &'static str) -> Arc<AtomicU64> {
        match &self.listed {
            Some((registry, [component, id, instance])) => {
                registry.counter(component, id, instance, kind)
            }
            None => Arc::default(),
        }
    }

    fn reason(&self, reason: DropReason) -> &Arc<AtomicU64> {
        self.reasons[reason as usize].get_or_init(|| self.make(reason.kind()))
    }
}

impl DestCounters {
    /// Counts `messages` dropped for `reason` (in the total and the reason's counter). The
    /// caller takes them off `queued` if they were queued.
    pub fn drop(&self, reason: DropReason, messages: u64) {
        if messages == 0 {
            return;
        }
        self.dropped.fetch_add(messages, Ordering::Relaxed);
        self.made_on_use
            .reason(reason)
            .fetch_add(messages, Ordering::Relaxed);
    }

    /// Messages a sender took from the queue and has not finished with (`in_flight`, part of
    /// `queued`): `taken` more, `finished` fewer.
    pub fn in_flight(&self, taken: u64, finished: u64) {
        let gauge = self
            .made_on_use
            .in_flight
            .get_or_init(|| self.made_on_use.make("in_flight"));
        gauge.fetch_add(taken, Ordering::Relaxed);
        gauge.fetch_sub(finished, Ordering::Relaxed);
    }

    /// How many it dropped for `reason`.
    pub fn dropped_for(&self, reason: DropReason) -> u64 {
        self.made_on_use.reasons[reason as usize]
            .get()
            .map_or(0, |c| c.load(Ordering::Relaxed))
    }

    /// Sets `oldest_queued_since`: when the oldest message not yet sent (waiting in its
    /// queue or held by its sender) was queued, in seconds since the epoch; 0 when none
    /// waits.
    pub fn oldest_queued(&self, since: u64) {
        self.made_on_use
            .oldest
            .get_or_init(|| self.made_on_use.make("oldest_queued_since"))
            .store(since, Ordering::Relaxed);
    }

    /// The destination's name in the statistics, for what sluice says of it.
    pub fn label(&self) -> String {
        match &self.made_on_use.listed {
            Some((_, [component, id, instance])) => format!("{component} {id} {instance}"),
            None => "a destination".into(),
        }
    }

    /// Counts `bytes` more held in its queue, drawn from the memory budget.
    pub fn hold(&self, bytes: u64) {
        self.memory_usage.fetch_add(bytes, Ordering::Relaxed);
        crate::memory::budget().hold(bytes);
    }

    /// Gives `bytes` held in its queue back to the memory budget.
    pub fn release(&self, bytes: u64) {
        self.memory_usage.fetch_sub(bytes, Ordering::Relaxed);
        crate::memory::budget().release(bytes);
    }
}

impl Registry {
    /// The counter named so, made on first use.
    pub fn counter(
        &self,
        component: &str,
        id: &str,
        instance: &str,
        kind: &'static str,
    ) -> Arc<AtomicU64> {
        self.counters
            .lock()
            .expect("stats lock")
            .get(component, id, instance, kind, false)
    }

    /// Lists `value`, counted by someone else (a parser's correlation state), under this
    /// name, in place of what was listed under it before (a reload's predecessor).
    pub fn register(
        &self,
        component: &str,
        id: &str,
        instance: &str,
        kind: &'static str,
        value: Arc<AtomicU64>,
    ) {
        let mut counters = self.counters.lock().expect("stats lock");
        counters.get(component, id, instance, kind, false);
        let key = (
            component.to_string(),
            id.to_string(),
            instance.to_string(),
            kind,
        );
        let at = counters.index[&key];
        counters.list[at].value = value;
    }

    /// syslog-ng's counters by what messages carry: `src.host` and `src.sender` (`$HOST`,
    /// `$HOST_FROM`) from `stats-level(2)`, `src.program`, `src.facility`, `src.severity` from
    /// level 3. Counted per batch, then added under one lock.
    pub fn count_messages(&self, level: u8, msgs: &[LogMessage]) {
        if level < 2 || msgs.is_empty() {
            return;
        }
        DYNAMIC.with_borrow_mut(|counts| {
            counts.clear();
            for m in msgs {
                *counts.entry(("src.host", m.host().to_vec())).or_default() += 1;
                *counts
                    .entry(("src.sender", m.origin.host_from.to_vec()))
                    .or_default() += 1;
                if level >= 3 {
                    *counts
                        .entry(("src.program", m.program().to_vec()))
                        .or_default() += 1;
                    let facility = m.facility();
                    let facility = if facility < 24 {
                        facility.to_string()
                    } else {
                        "other".to_string()
                    };
                    *counts
                        .entry(("src.facility", facility.into_bytes()))
                        .or_default() += 1;
                    *counts
                        .entry(("src.severity", m.severity().to_string().into_bytes()))
                        .or_default() += 1;
                }
            }
            let mut all = self.counters.lock().expect("stats lock");
            for ((component, instance), n) in counts.iter() {
                let dynamic = matches!(*component, "src.host" | "src.sender" | "src.program");
                if dynamic && all.dynamics_full() {
                    let known = all.index.contains_key(&(
                        component.to_string(),
                        String::new(),
                        String::from_utf8_lossy(instance).into_owned(),
                        "processed",
                    ));
                    if !known {
                        all.get("global", "dynamic_counters", "", "dropped", false)
                            .fetch_add(*n, Ordering::Relaxed);
                        continue;
                    }
                }
                all.get(
                    component,
                    "",
                    &String::from_utf8_lossy(instance),
                    "processed",
                    dynamic,
                )
                .fetch_add(*n, Ordering::Relaxed);
            }
        });
    }

    /// `stats-max-dynamics()`: the most counters [`Registry::count_messages`] makes; counts for
    /// new hosts, senders or programs past it (or while the memory budget is tight) are
    /// dropped and counted.
    pub fn set_max_dynamics(&self, max: usize) {
        self.counters.lock().expect("stats lock").max_dynamic = max;
    }

    /// The counters of destination driver `id` (`d_file#0`) of kind `component` (`dst.file`).
    pub fn destination(
        self: &Arc<Self>,
        component: &str,
        id: &str,
        instance: &str,
    ) -> DestCounters {
        let made_on_use = MadeOnUse {
            listed: Some((self.clone(), [component.into(), id.into(), instance.into()])),
            ..MadeOnUse::default()
        };
        DestCounters {
            processed: self.counter(component, id, instance, "processed"),
            written: self.counter(component, id, instance, "written"),
            dropped: self.counter(component, id, instance, "dropped"),
            queued: self.counter(component, id, instance, "queued"),
            memory_usage: self.counter(component, id, instance, "memory_usage"),
            made_on_use: Arc::new(made_on_use),
        }
    }

    /// Every counter, not read yet.
    pub(crate) fn handles(&self) -> Vec<Counter> {
        self.counters.lock().expect("stats lock").list.clone()
    }

    /// The counters of type `kind`, read now.
    fn of_kind(&self, kind: &str) -> Vec<(Counter, u64)> {
        let all = self.counters.lock().expect("stats lock");
        all.list
            .iter()
            .filter(|c| c.kind == kind)
            .map(|c| (c.clone(), c.value.load(Ordering::Relaxed)))
            .collect()
    }

    pub(crate) fn snapshot(&self) -> Vec<(Counter, u64)> {
        let all = self.counters.lock().expect("stats lock");
        all.list
            .iter()
            .map(|c| (c.clone(), c.value.load(Ordering::Relaxed)))
            .collect()
    }

    /// Sets every counter that only grows back to zero (gauges keep their state), but a
    /// destination's `processed` to what it has queued: its books still balance.
    pub fn reset(&self) {
        let all = self.counters.lock().expect("stats lock");
        for c in all.list.iter() {
            if c.is_gauge() {
                continue;
            }
            let queued = (c.kind == "processed")
                .then(|| {
                    let key = (
                        c.component.clone(),
                        c.id.clone(),
                        c.instance.clone(),
                        "queued",
                    );
                    all.index.get(&key)
                })
                .flatten()
                .map_or(0, |&at| all.list[at].value.load(Ordering::Relaxed));
            c.value.store(queued, Ordering::Relaxed);
        }
    }

    /// `syslog-ng-ctl stats`: `SourceName;SourceId;SourceInstance;State;Type;Number`.
    pub fn csv(&self) -> String {
        let mut out = String::from("SourceName;SourceId;SourceInstance;State;Type;Number\n");
        for (c, v) in self.snapshot() {
            let state = if c.dynamic { 'd' } else { 'a' };
            let _ = writeln!(
                out,
                "{};{};{};{state};{};{v}",
                c.component,
                csv_field(&c.id),
                csv_field(&c.instance),
                c.kind
            );
        }
        out
    }

    /// One `name=value` line per counter, the names `query` lists.
    pub fn kv(&self) -> String {
        let mut out = String::new();
        for (c, v) in self.snapshot() {
            let _ = writeln!(out, "{}={v}", escaped(&c.query_name()));
        }
        out
    }

    /// The Prometheus text format: `sluice_<type>[_total]{component,id,instance}`; drops by
    /// reason as `sluice_dropped_reason_total{…,reason}`.
    pub fn prometheus(&self) -> String {
        let mut rows: Vec<(String, &'static str, Option<&str>, Counter, u64)> = Vec::new();
        for (c, v) in self.snapshot() {
            let (name, kind, reason) = if let Some(reason) = c.kind.strip_prefix("dropped_") {
                (
                    "sluice_dropped_reason_total".to_string(),
                    "counter",
                    Some(reason),
                )
            } else if c.is_gauge() {
                let unit = if matches!(c.kind, "memory_usage" | "memory_limit") {
                    "_bytes"
                } else {
                    ""
                };
                (format!("sluice_{}{unit}", c.kind), "gauge", None)
            } else {
                (format!("sluice_{}_total", c.kind), "counter", None)
            };
            rows.push((name, kind, reason, c, v));
        }
        rows.sort_by(|a, b| a.0.cmp(&b.0));
        let mut out = String::new();
        let mut last = "";
        for (name, kind, reason, c, v) in &rows {
            if name != last {
                let _ = writeln!(out, "# TYPE {name} {kind}");
                last = name;
            }
            let reason = reason.map_or(String::new(), |r| format!(",reason=\"{r}\""));
            let _ = writeln!(
                out,
                "{name}{{component=\"{}\",id=\"{}\",instance=\"{}\"{reason}}} {v}",
                label(&c.component),
                label(&c.id),
                label(&c.instance)
            );
        }
        out
    }

    /// `query list PATTERN`: the names that match a glob (`*`, `?`).
    pub fn list(&self, pattern: &str) -> String {
        let mut out = String::new();
        for (c, _) in self.snapshot() {
            let name = c.query_name();
            if glob_match(pattern, &name) {
                out.push_str(&name);
                out.push('\n');
            }
        }
        out
    }

    /// `query get [--sum] PATTERN`.
    pub fn get(&self, pattern: &str, sum: bool) -> String {
        let matching = self
            .snapshot()
            .into_iter()
            .filter(|(c, _)| glob_match(pattern, &c.query_name()));
        if sum {
            return format!("{}\n", matching.map(|(_, v)| v).sum::<u64>());
        }
        let mut out = String::new();
        for (c, v) in matching {
            let _ = writeln!(out, "{}={v}", escaped(&c.query_name()));
        }
        out
    }

    /// The periodic internal message (`stats-freq()`), as syslog-ng words it.
    pub fn log_line(&self) -> String {
        let parts: Vec<String> = self
            .snapshot()
            .into_iter()
            .map(|(c, v)| {
                let what = joined(&[&c.id, &c.instance], ",");
                format!("{}='{}({what})={v}'", c.kind, c.component)
            })
            .collect();
        format!("Log statistics; {}", parts.join(", "))
    }
}

/// A tick every `period` for a watcher: one that runs late is not made up for.
pub fn every(period: Duration) -> tokio::time::Interval {
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick
}

/// How long flow control may pause a source's reading before sluice says so.
pub const PAUSE_WARNING: Duration = Duration::from_secs(10);

/// Says through `internal()` when flow control has paused a source (some reader of it
/// waiting for credits, `paused_since`) for longer than `after`, once, and when it reads
/// again: a source that silently stops reading is what operators of other log servers
/// find out about last (syslog-ng #3531).
pub async fn watch_pauses(stats: Arc<Registry>, after: Duration) {
    let mut said: HashMap<String, u64> = HashMap::new();
    let mut tick = every(Duration::from_secs(1));
    loop {
        tick.tick().await;
        let now = crate::clock::unix_now();
        for (c, since) in stats.of_kind("paused_since") {
            if since == 0 && said.is_empty() {
                continue;
            }
            let name = format!("source {} ({}, {})", c.id, c.component, c.instance);
            if let Some(&was) = said.get(&name) {
                if since != was {
                    crate::own_log::notice(format!(
                        "{name}: reading again after {}s paused by flow control",
                        now.saturating_sub(was)
                    ));
                    said.remove(&name);
                }
                continue;
            }
            if since > 0 && now.saturating_sub(since) >= after.as_secs() {
                let credits = stats
                    .counter(&c.component, &c.id, &c.instance, "window_in_use")
                    .load(Ordering::Relaxed);
                crate::own_log::warning(format!(
                    "{name}: flow control has paused reading for {}s: its destinations have not yet delivered what it read (window_in_use {credits}); it reads again as they deliver",
                    now.saturating_sub(since)
                ));
                said.insert(name, since);
            }
        }
    }
}

/// The kernel's `TcpExt` counters of connections refused because a listener's accept queue
/// was full (`ListenOverflows`) or dropped before being accepted (`ListenDrops`), for every
/// listener of the machine: Linux keeps no count per socket.
fn listen_drops(netstat: &str) -> Option<(u64, u64)> {
    let mut lines = netstat.lines().filter(|l| l.starts_with("TcpExt:"));
    let (names, values) = (lines.next()?, lines.next()?);
    let find = |name: &str| -> Option<u64> {
        let at = names.split_whitespace().position(|n| n == name)?;
        values.split_whitespace().nth(at)?.parse().ok()
    };
    Some((find("ListenOverflows")?, find("ListenDrops")?))
}

/// Keeps `global;tcp_listen;;a;overflows` and `…;drops` at what the kernel counted since
/// sluice started (every 10 s): connections the syslog ports' accept queues had no room for.
pub async fn watch_listen_drops(stats: Arc<Registry>) {
    let read = || {
        std::fs::read_to_string("/proc/net/netstat")
            .ok()
            .and_then(|t| listen_drops(&t))
    };
    let Some(mut last) = read() else {
        return;
    };
    let overflows = stats.counter("global", "tcp_listen", "", "overflows");
    let drops = stats.counter("global", "tcp_listen", "", "drops");
    let mut tick = every(Duration::from_secs(10));
    loop {
        tick.tick().await;
        if let Some((o, d)) = read() {
            overflows.fetch_add(o.saturating_sub(last.0), Ordering::Relaxed);
            drops.fetch_add(d.saturating_sub(last.1), Ordering::Relaxed);
            last = (o, d);
        }
    }
}

/// The non-empty parts of a counter's name, joined with `separator`.
pub(crate) fn joined(parts: &[&str], separator: &str) -> String {
    parts
        .iter()
        .filter(|p| !p.is_empty())
        .copied()
        .collect::<Vec<_>>()
        .join(separator)
}

/// `s` with control characters and backslashes escaped (`\n`, `\x1b`, `\\`): a sender's
/// host name or program in a counter's name cannot start a line of its own.
fn escaped(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.chars().any(|c| c.is_control() || c == '\\') {
        return s.into();
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.into()
}

/// A field of a `stats` CSV line as syslog-ng writes it: control characters escaped, and
/// quoted (`"` inside as `\"`) when it holds `;` or `"`.
fn csv_field(s: &str) -> std::borrow::Cow<'_, str> {
    let s = escaped(s);
    if !s.contains([';', '"']) {
        return s;
    }
    format!("\"{}\"", s.replace('"', "\\\"")).into()
}

/// A Prometheus label value, escaped.
fn label(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// GLib's simple pattern match, as `syslog-ng-ctl query` uses: `*` any run, `?` one character.
pub fn glob_match(pattern: &str, name: &str) -> bool {
    let (p, n): (Vec<char>, Vec<char>) = (pattern.chars().collect(), name.chars().collect());
    let (mut pi, mut ni) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == n[ni]) {
            pi += 1;
            ni += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ni));
            pi += 1;
        } else if let Some((sp, sn)) = star {
            pi = sp + 1;
            ni = sn + 1;
            star = Some((sp, sn + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_formats_are_syslog_ngs() {
        let r = Arc::new(Registry::default());
        r.counter("center", "", "received", "processed")
            .fetch_add(2, Ordering::Relaxed);
        let d = r.destination("dst.network", "d_fwd#0", "tcp,127.0.0.1:7302");
        d.processed.fetch_add(2, Ordering::Relaxed);
        d.queued.fetch_add(2, Ordering::Relaxed);
        assert!(r
            .csv()
            .contains("dst.network;d_fwd#0;tcp,127.0.0.1:7302;a;processed;2\n"));
        assert!(r.csv().contains("center;;received;a;processed;2\n"));
        assert_eq!(
            r.get("dst.*.processed", false),
            "dst.network.d_fwd#0.tcp,127.0.0.1:7302.processed=2\n"
        );
        assert_eq!(r.get("*.processed", true), "4\n");
        assert!(r.list("center*").contains("center.received.processed\n"));
        assert!(r.prometheus().contains(
            "sluice_processed_total{component=\"dst.network\",id=\"d_fwd#0\",instance=\"tcp,127.0.0.1:7302\"} 2"
        ));
        d.drop(DropReason::QueueFull, 1);
        assert!(r.prometheus().contains(
            "# TYPE sluice_dropped_reason_total counter\nsluice_dropped_reason_total{component=\"dst.network\",id=\"d_fwd#0\",instance=\"tcp,127.0.0.1:7302\",reason=\"queue_full\"} 1\n"
        ));
        assert!(r
            .csv()
            .contains("dst.network;d_fwd#0;tcp,127.0.0.1:7302;a;dropped_queue_full;1\n"));
        r.reset();
        assert_eq!(r.get("center.*.processed", true), "0\n");
        assert_eq!(r.get("*.dropped*", true), "0\n");
        // A destination's processed starts again from what it holds, so its books balance.
        assert_eq!(r.get("dst.*.processed", true), "2\n");
        assert_eq!(r.get("*.queued", true), "2\n");
    }

    #[test]
    fn the_kernels_listen_drops_are_read() {
        let netstat = "TcpExt: SyncookiesSent ListenOverflows ListenDrops\nTcpExt: 1 7 9\nIpExt: A\nIpExt: 2\n";
        assert_eq!(listen_drops(netstat), Some((7, 9)));
        assert_eq!(listen_drops("IpExt: A\nIpExt: 2\n"), None);
        let here = std::fs::read_to_string("/proc/net/netstat").unwrap();
        assert!(listen_drops(&here).is_some());
    }

    #[test]
    fn a_senders_host_name_cannot_forge_a_line() {
        let r = Registry::default();
        let frame = "<13>1 2026-11-24T10:00:00Z evil\ncenter;;x;a;processed;999 app - - - m";
        let msgs = [sluice_model::testing::message(frame)];
        r.count_messages(2, &msgs);
        let csv = r.csv();
        assert!(!csv.contains("\ncenter;;x"), "{csv}");
        assert!(
            csv.contains("src.host;;\"evil\\ncenter;;x;a;processed;999\";d;processed;1\n"),
            "{csv}"
        );
        assert!(!r.kv().contains("\ncenter"), "{}", r.kv());
        assert_eq!(csv_field("a\"b"), "\"a\\\"b\"");
        assert_eq!(escaped("tab\there\x1b\\"), "tab\\there\\x1b\\\\");
    }

    #[test]
    fn glob_patterns() {
        assert!(glob_match("*", ""));
        assert!(glob_match("dst.*.written", "dst.file.d#0./x.written"));
        assert!(!glob_match("dst.*.written", "dst.file.d#0./x.dropped"));
        assert!(glob_match("s?c*", "src.network"));
    }

    #[test]
    fn dynamic_counters_stop_at_the_limit_and_what_they_miss_is_counted() {
        let r = Registry::default();
        r.set_max_dynamics(4);
        let frames: Vec<String> = (0..100)
            .map(|i| format!("<13>Nov 24 10:00:00 host{i} app: m"))
            .collect();
        let msgs: Vec<LogMessage> = frames.iter().map(sluice_model::testing::message).collect();
        r.count_messages(3, &msgs);
        // The first batch's hosts in whatever order the batch's table gives: four counters,
        // $HOST's and the sender's (one sender: 10.1.2.3) and the program's among them.
        let dynamic = r.snapshot().iter().filter(|(c, _)| c.dynamic).count();
        assert_eq!(dynamic, 4);
        let refused = r.get("global.dynamic_counters.dropped", false);
        let refused: u64 = refused.trim().rsplit('=').next().unwrap().parse().unwrap();
        assert!(refused >= 96, "{refused}");
        // Counters that exist go on counting.
        let before = r.get("*.processed", true);
        r.count_messages(3, &msgs);
        assert_ne!(r.get("*.processed", true), before);
        assert_eq!(r.snapshot().iter().filter(|(c, _)| c.dynamic).count(), 4);
    }

    #[test]
    fn counters_are_charged_and_no_dynamic_one_is_made_while_the_budget_is_tight() {
        let budget: &'static crate::memory::Budget =
            Box::leak(Box::new(crate::memory::Budget::new(1 << 40)));
        let r = Registry {
            counters: Mutex::new(Counters {
                charge: Charge::new(budget),
                ..Counters::default()
            }),
        };
        let message = |i: usize| format!("<13>Nov 24 10:00:00 host{i} app: m");
        let frames: Vec<String> = (0..10).map(message).collect();
        let msgs: Vec<LogMessage> = frames.iter().map(sluice_model::testing::message).collect();
        r.count_messages(2, &msgs);
        // Ten hosts and one sender.
        let held = budget.used.load(Ordering::Relaxed);
        assert!(held > 11 * COUNTER_BYTES, "{held}");
        budget.set_limit(held);
        let frames: Vec<String> = (10..110).map(message).collect();
        let more: Vec<LogMessage> = frames.iter().map(sluice_model::testing::message).collect();
        r.count_messages(2, &more);
        r.count_messages(2, &msgs);
        let refused = r.get("global.dynamic_counters.dropped", false);
        assert!(refused.trim().ends_with("=100"), "{refused}");
        assert_eq!(r.snapshot().iter().filter(|(c, _)| c.dynamic).count(), 11);
        assert!(r
            .get("src.host.host0.processed", false)
            .trim()
            .ends_with("=2"));
        drop(r);
        assert_eq!(budget.used.load(Ordering::Relaxed), 0);
    }
}
