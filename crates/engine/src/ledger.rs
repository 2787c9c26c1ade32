//! `sluice ctl ledger`: where every message went, from the counters alone.
//!
//! Books that must balance:
//! - the center: what the source statements read is what the center received, and each
//!   received message either reached a destination or reached none (`unrouted`: filtered
//!   out, stopped by a parser or `flags(final)`, or no log path reads its source — routing,
//!   not a drop);
//! - every top-level log path (`log#N`, in the configuration's order, with its file and
//!   line): what its sources offered it went through it (`routed`: on to its destinations)
//!   or was filtered in it (a filter, a parser, a `final` inside);
//! - every destination driver: what was routed to it (`processed`) is `written`, `dropped`
//!   (by reason, [`crate::stats::DropReason`]) or still `queued` (in memory, on disk, or in
//!   flight to a server).
//!
//! The counters move independently. A message leaves one state before it enters the next
//! (`queued` down, then `written` up), and the books are read from the last state back
//! (`written`, `dropped`, then `queued`, then `processed`), so a message in motion is
//! counted in none of them, never in two: books read under load are off by at most what is
//! in motion, and only upwards. [`settled`] reads them again until they balance or a
//! deadline passes; a `processed` that stays above its outcomes is a loss.

use crate::stats::{Counter, Registry};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

/// One destination driver's books.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Books {
    pub processed: u64,
    pub written: u64,
    pub dropped: u64,
    pub queued: u64,
    /// Of `queued`, what a sender took and has not finished with.
    pub in_flight: u64,
    /// `dropped` by reason (`queue_full`), those that happened.
    pub reasons: BTreeMap<&'static str, u64>,
}

impl Books {
    /// What `processed` is off from the outcomes; zero when the books balance.
    pub fn off(&self) -> i128 {
        self.processed as i128 - (self.written + self.dropped + self.queued) as i128
    }

    /// Whether the reasons add up to the total `dropped`.
    fn reasons_add_up(&self) -> bool {
        self.reasons.values().sum::<u64>() == self.dropped
    }
}

/// The books of the whole server at one reading.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Ledger {
    /// What the source statements read (`source;NAME;;processed`, summed).
    pub read: u64,
    pub received: u64,
    pub unrouted: u64,
    /// Readers waiting for credits (`paused_readers`, summed): what they read and hold is
    /// read and not yet received.
    pub paused: u64,
    /// By destination driver: `component id instance` (`dst.file d_file#0 /var/log/x`).
    pub destinations: BTreeMap<String, Books>,
    /// By top-level log path, in the configuration's order.
    pub paths: Vec<PathBooks>,
}

/// One top-level log path's books.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PathBooks {
    /// `log#N`, 1 for the first `log {}` statement.
    pub number: u32,
    /// Where the statement is: `FILE:LINE`.
    pub at: String,
    pub offered: u64,
    pub routed: u64,
}

impl Ledger {
    /// The books as the counters say now.
    pub fn read(registry: &Registry) -> Ledger {
        let mut handles = registry.handles();
        // The last state first (see the module's notes).
        let rank = |c: &Counter| match c.kind {
            "processed" if c.component.starts_with("dst.") => 2,
            "processed" if c.component == "path" => 1,
            "queued" => 1,
            _ => 0,
        };
        handles.sort_by_key(rank);
        let read: Vec<(Counter, u64)> = handles
            .into_iter()
            .map(|c| {
                let v = c.value.load(std::sync::atomic::Ordering::Relaxed);
                (c, v)
            })
            .collect();
        let mut ledger = Ledger::default();
        for (c, v) in read {
            match (c.component.as_str(), c.instance.as_str(), c.kind) {
                ("source", _, "processed") => ledger.read += v,
                ("center", "received", "processed") => ledger.received = v,
                ("center", "unrouted", "processed") => ledger.unrouted = v,
                (_, _, "paused_readers") => ledger.paused += v,
                ("path", at, kind @ ("processed" | "routed")) => {
                    let Some(number) = c.id.strip_prefix("log#").and_then(|n| n.parse().ok())
                    else {
                        continue;
                    };
                    // A reload that moved a path leaves its old counters beside the new.
                    let same = |p: &PathBooks| p.number == number && p.at == at;
                    let i = match ledger.paths.iter().position(same) {
                        Some(i) => i,
                        None => {
                            ledger.paths.push(PathBooks {
                                number,
                                at: at.to_string(),
                                ..PathBooks::default()
                            });
                            ledger.paths.len() - 1
                        }
                    };
                    match kind {
                        "processed" => ledger.paths[i].offered = v,
                        _ => ledger.paths[i].routed = v,
                    }
                }
                (component, _, kind) if component.starts_with("dst.") => {
                    let books = ledger.destinations.entry(name(&c)).or_default();
                    match kind {
                        "processed" => books.processed = v,
                        "written" => books.written = v,
                        "dropped" => books.dropped = v,
                        "queued" => books.queued = v,
                        "in_flight" => books.in_flight = v,
                        kind => {
                            if let Some(reason) = kind.strip_prefix("dropped_") {
                                books.reasons.insert(reason, v);
                            }
                        }
                    }
                }
                _ => {}
            }
        }
        ledger
            .paths
            .sort_by(|a, b| (a.number, &a.at).cmp(&(b.number, &b.at)));
        ledger
    }

    /// Whether what the sources read was received, but for what paused readers hold.
    fn center_balances(&self) -> bool {
        self.read == self.received || (self.read > self.received && self.paused > 0)
    }

    /// Whether every set of books balances.
    pub fn balanced(&self) -> bool {
        self.center_balances()
            && self.unrouted <= self.received
            && self.paths.iter().all(|p| p.routed <= p.offered)
            && self
                .destinations
                .values()
                .all(|b| b.off() == 0 && b.reasons_add_up())
    }

    /// The books as `sluice ctl ledger` prints them, ending with whether they balance.
    pub fn text(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "center: read {} by the sources, received {}: {} reached a destination, {} reached none (filtered, parsed away, final){}",
            self.read,
            self.received,
            self.received.saturating_sub(self.unrouted),
            self.unrouted,
            match (self.read == self.received, self.center_balances()) {
                (true, _) => String::new(),
                (false, true) => format!(
                    "; {} read and held by {} paused readers",
                    self.read - self.received,
                    self.paused
                ),
                (false, false) => "  <- read != received".into(),
            }
        );
        for p in &self.paths {
            let verdict = if p.routed <= p.offered {
                ""
            } else {
                "  <- routed more than offered"
            };
            let _ = writeln!(
                out,
                "log#{} {}: offered {} = routed {} + filtered {}{verdict}",
                p.number,
                p.at,
                p.offered,
                p.routed,
                p.offered.saturating_sub(p.routed)
            );
        }
        for (name, b) in &self.destinations {
            let reasons: Vec<String> = b
                .reasons
                .iter()
                .filter(|(_, n)| **n > 0)
                .map(|(r, n)| format!("{r} {n}"))
                .collect();
            let reasons = if reasons.is_empty() {
                String::new()
            } else {
                format!(" ({})", reasons.join(", "))
            };
            let verdict = match (b.off(), b.reasons_add_up()) {
                (0, true) => String::new(),
                (0, false) => "  <- the reasons do not add up to dropped".into(),
                (off, _) if off > 0 => {
                    format!("  <- {off} not accounted for (lost, or in motion at every reading)")
                }
                (off, _) => format!("  <- {} counted twice", -off),
            };
            let in_flight = if b.in_flight > 0 {
                format!(" ({} in flight)", b.in_flight)
            } else {
                String::new()
            };
            let _ = writeln!(
                out,
                "{name}: processed {} = written {} + dropped {}{reasons} + queued {}{in_flight}{verdict}",
                b.processed, b.written, b.dropped, b.queued
            );
        }
        out.push_str(if self.balanced() {
            "balanced\n"
        } else {
            "NOT BALANCED\n"
        });
        out
    }
}

/// A destination driver's name in the ledger.
fn name(c: &Counter) -> String {
    crate::stats::joined(&[&c.component, &c.id, &c.instance], " ")
}

/// How long [`settled`] reads the books again while they do not balance.
pub const SETTLE: Duration = Duration::from_secs(1);

/// The books, read again every 50 ms until they balance or `within` has passed: messages in
/// motion between two counters are not an imbalance, books that stay off are.
pub async fn settled(registry: &Registry, within: Duration) -> Ledger {
    let deadline = Instant::now() + within;
    loop {
        let ledger = Ledger::read(registry);
        if ledger.balanced() || Instant::now() >= deadline {
            return ledger;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::DropReason;
    use std::sync::atomic::Ordering;
    use std::sync::Arc;

    #[test]
    fn each_log_path_has_books_of_its_own_even_after_it_moved() {
        let r = Arc::new(Registry::default());
        let path = |id: &str, at: &str, offered: u64, routed: u64| {
            r.counter("path", id, at, "processed")
                .fetch_add(offered, Ordering::Relaxed);
            r.counter("path", id, at, "routed")
                .fetch_add(routed, Ordering::Relaxed);
        };
        path("log#2", "s.conf:9", 10, 4);
        path("log#1", "s.conf:5", 10, 10);
        // A reload moved log#2: its old counters stay beside the new ones.
        path("log#2", "s.conf:12", 3, 3);
        let ledger = Ledger::read(&r);
        assert!(ledger.balanced(), "{}", ledger.text());
        let text = ledger.text();
        let lines: Vec<&str> = text.lines().skip(1).take(3).collect();
        assert_eq!(
            lines,
            [
                "log#1 s.conf:5: offered 10 = routed 10 + filtered 0",
                "log#2 s.conf:12: offered 3 = routed 3 + filtered 0",
                "log#2 s.conf:9: offered 10 = routed 4 + filtered 6",
            ]
        );
    }

    #[test]
    fn books_balance_when_every_message_is_accounted_for() {
        let r = Arc::new(Registry::default());
        r.counter("source", "s", "", "processed")
            .fetch_add(10, Ordering::Relaxed);
        r.counter("center", "", "received", "processed")
            .fetch_add(10, Ordering::Relaxed);
        r.counter("center", "", "unrouted", "processed")
            .fetch_add(2, Ordering::Relaxed);
        let d = r.destination("dst.file", "d#0", "/x");
        d.processed.fetch_add(8, Ordering::Relaxed);
        d.written.fetch_add(5, Ordering::Relaxed);
        d.drop(DropReason::QueueFull, 2);
        d.queued.fetch_add(1, Ordering::Relaxed);
        let ledger = Ledger::read(&r);
        assert!(ledger.balanced(), "{}", ledger.text());
        assert!(ledger.text().contains(
            "dst.file d#0 /x: processed 8 = written 5 + dropped 2 (queue_full 2) + queued 1\n"
        ));
        assert!(ledger.text().ends_with("balanced\n"));

        // A message that went nowhere it is counted.
        d.processed.fetch_add(1, Ordering::Relaxed);
        let ledger = Ledger::read(&r);
        assert!(!ledger.balanced());
        assert!(
            ledger.text().contains("<- 1 not accounted for"),
            "{}",
            ledger.text()
        );
        assert!(ledger.text().ends_with("NOT BALANCED\n"));
    }

    #[test]
    fn a_reset_keeps_the_books_balanced() {
        let r = Arc::new(Registry::default());
        let d = r.destination("dst.network", "d#0", "tcp,h:1");
        d.processed.fetch_add(10, Ordering::Relaxed);
        d.written.fetch_add(4, Ordering::Relaxed);
        d.drop(DropReason::Refused, 1);
        d.queued.fetch_add(5, Ordering::Relaxed);
        r.reset();
        let books = &Ledger::read(&r).destinations["dst.network d#0 tcp,h:1"];
        assert_eq!((books.processed, books.written, books.queued), (5, 0, 5));
        assert!(Ledger::read(&r).balanced());
    }
}
