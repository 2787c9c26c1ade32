//! Statistics: counters named as syslog-ng names them, read by `sluice ctl stats|query`, the
//! Prometheus endpoint and the periodic `Log statistics;` internal message.
//!
//! A counter is an `Arc<AtomicU64>` that the code counting holds directly; the [`Registry`]
//! only lists them with their names (component, id, instance, type — syslog-ng's
//! `SourceName;SourceId;SourceInstance;…;Type`). Counting costs one relaxed atomic add per
//! read or per batch, never a lookup.

use sluice_model::LogMessage;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

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
        [self.component.as_str(), &self.id, &self.instance, self.kind]
            .iter()
            .filter(|p| !p.is_empty())
            .copied()
            .collect::<Vec<_>>()
            .join(".")
    }

    /// Gauges show a state (how much is queued now); counters only grow until reset.
    fn is_gauge(&self) -> bool {
        matches!(
            self.kind,
            "queued" | "memory_usage" | "connections" | "contexts"
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
}

impl Default for Counters {
    fn default() -> Counters {
        Counters {
            list: Vec::new(),
            index: HashMap::new(),
            dynamic: 0,
            max_dynamic: STATS_MAX_DYNAMICS,
        }
    }
}

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
}

thread_local! {
    /// A batch's dynamic counts before they are added to the registry under one lock.
    static DYNAMIC: std::cell::RefCell<HashMap<(&'static str, Vec<u8>), u64>> =
        std::cell::RefCell::default();
}

/// What a destination driver counts.
#[derive(Clone, Debug, Default)]
pub struct DestCounters {
    /// Messages routed to it.
    pub processed: Arc<AtomicU64>,
    /// Messages it delivered (written to a file, sent to a server).
    pub written: Arc<AtomicU64>,
    /// Messages it dropped (a full queue on a path without flow control).
    pub dropped: Arc<AtomicU64>,
    /// Messages waiting in its queue.
    pub queued: Arc<AtomicU64>,
    /// Bytes waiting in its queue.
    pub memory_usage: Arc<AtomicU64>,
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
                if dynamic && all.dynamic >= all.max_dynamic {
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
    /// new hosts, senders or programs past it are dropped and counted.
    pub fn set_max_dynamics(&self, max: usize) {
        self.counters.lock().expect("stats lock").max_dynamic = max;
    }

    /// The counters of destination driver `id` (`d_file#0`) of kind `component` (`dst.file`).
    pub fn destination(&self, component: &str, id: &str, instance: &str) -> DestCounters {
        DestCounters {
            processed: self.counter(component, id, instance, "processed"),
            written: self.counter(component, id, instance, "written"),
            dropped: self.counter(component, id, instance, "dropped"),
            queued: self.counter(component, id, instance, "queued"),
            memory_usage: self.counter(component, id, instance, "memory_usage"),
        }
    }

    fn snapshot(&self) -> Vec<(Counter, u64)> {
        let all = self.counters.lock().expect("stats lock");
        all.list
            .iter()
            .map(|c| (c.clone(), c.value.load(Ordering::Relaxed)))
            .collect()
    }

    /// Sets every counter that only grows back to zero (gauges keep their state).
    pub fn reset(&self) {
        for c in self.counters.lock().expect("stats lock").list.iter() {
            if !c.is_gauge() {
                c.value.store(0, Ordering::Relaxed);
            }
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
                c.component, c.id, c.instance, c.kind
            );
        }
        out
    }

    /// One `name=value` line per counter, the names `query` lists.
    pub fn kv(&self) -> String {
        let mut out = String::new();
        for (c, v) in self.snapshot() {
            let _ = writeln!(out, "{}={v}", c.query_name());
        }
        out
    }

    /// The Prometheus text format: `sluice_<type>[_total]{component,id,instance}`.
    pub fn prometheus(&self) -> String {
        let mut rows = self.snapshot();
        rows.sort_by(|a, b| a.0.kind.cmp(b.0.kind));
        let mut out = String::new();
        let mut last = "";
        for (c, v) in &rows {
            let (name, kind) = if c.is_gauge() {
                let unit = if c.kind == "memory_usage" {
                    "_bytes"
                } else {
                    ""
                };
                (format!("sluice_{}{unit}", c.kind), "gauge")
            } else {
                (format!("sluice_{}_total", c.kind), "counter")
            };
            if c.kind != last {
                let _ = writeln!(out, "# TYPE {name} {kind}");
                last = c.kind;
            }
            let _ = writeln!(
                out,
                "{name}{{component=\"{}\",id=\"{}\",instance=\"{}\"}} {v}",
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
            let _ = writeln!(out, "{}={v}", c.query_name());
        }
        out
    }

    /// The periodic internal message (`stats-freq()`), as syslog-ng words it.
    pub fn log_line(&self) -> String {
        let parts: Vec<String> = self
            .snapshot()
            .into_iter()
            .map(|(c, v)| {
                let what = [c.id.as_str(), &c.instance]
                    .iter()
                    .filter(|p| !p.is_empty())
                    .copied()
                    .collect::<Vec<_>>()
                    .join(",");
                format!("{}='{}({what})={v}'", c.kind, c.component)
            })
            .collect();
        format!("Log statistics; {}", parts.join(", "))
    }
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
        let r = Registry::default();
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
        r.reset();
        assert_eq!(r.get("*.processed", true), "0\n");
        assert_eq!(r.get("*.queued", true), "2\n");
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
}
