//! `sluice logstore grep FILTER FILE…`: the records a syslog-ng filter expression matches, in
//! a time range, decrypting only the chunks that can hold them.
//!
//! Each chunk's index is decrypted first (a few kilobytes); the chunk is skipped when its
//! stamps fall outside `--from`/`--to`, or when the expression cannot match it: `host()` and
//! `program()` are tried on the chunk's table of hosts and programs, and the literals a
//! `message()` pattern requires must all be possible by the chunk's trigram bitmap
//! (`Index::may_hold`; `and` needs both sides possible, `or` either; anything else is taken
//! as possible). The chunks left are decrypted and every record is matched by the filter
//! itself, as a message made of the record's fields: the answer is exactly what `cat` and the
//! filter would give.

use super::output::{print, Output};
use super::{at, keys_of, walk_files, KeyArgs};
use clap::Args;
use regex_syntax::hir::{Hir, HirKind};
use sluice_logstore::chunk::{Index, Record};
use sluice_logstore::{Item, Severity};
use sluice_model::filter::{Filter, Matcher, Subject, Substring};
use sluice_model::template::Names;
use sluice_model::{LogMessage, Origin, UnixTime};
use sluice_protocol::{Span, SyslogFields, Text};
use std::io::Write;
use std::ops::ControlFlow;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct GrepArgs {
    #[command(flatten)]
    keys: KeyArgs,
    /// Only messages stamped at or after this time (`2026-11-24T18:00:00`, local time unless
    /// an offset is given).
    #[arg(long)]
    from: Option<String>,
    /// Only messages stamped before this time.
    #[arg(long)]
    to: Option<String>,
    /// How each message is printed: the line as stored, a JSON object, or RFC5424.
    #[arg(long, value_enum, default_value_t = Output::Text)]
    format: Output,
    /// Say on standard error how many chunks were decrypted and skipped.
    #[arg(long)]
    stats: bool,
    /// A syslog-ng filter expression: `host("fw0") and message("denied")`.
    filter: String,
    /// Archive files.
    #[arg(required = true)]
    files: Vec<PathBuf>,
}

/// The filter expression `text`, compiled as a `filter` statement's.
fn compile(text: &str) -> Result<Filter, String> {
    let config = sluice_config::load_str("grep", &format!("filter f {{ {text}; }};"))
        .map_err(|e| e.render())?;
    let sluice_config::Body::Filter(expr) = &config.statements[0].body else {
        return Err("not a filter expression".into());
    };
    sluice_model::filter::compile(expr, &Names::default(), &mut |name, pos| {
        Err(sluice_config::ConfigError::new(
            pos,
            format!("filter({name}): grep has no named filters"),
        ))
    })
    .map_err(|e| e.render(&config.map))
}

/// A time as the options give it, in microseconds since the epoch.
fn instant(text: &str) -> Result<i64, String> {
    if let Ok(t) = text.parse::<jiff::Timestamp>() {
        return Ok(t.as_microsecond());
    }
    let civil: jiff::civil::DateTime = text
        .parse()
        .map_err(|e| format!("{text}: not a time (2026-11-24T18:00:00): {e}"))?;
    civil
        .to_zoned(jiff::tz::TimeZone::system())
        .map(|z| z.timestamp().as_microsecond())
        .map_err(|e| format!("{text}: {e}"))
}

/// The literals a regular expression cannot match without: runs of literal text joined by
/// concatenation, inside groups and repetitions of at least one.
fn required(hir: &Hir, out: &mut Vec<Vec<u8>>) {
    match hir.kind() {
        HirKind::Literal(l) => out.push(l.0.to_vec()),
        HirKind::Concat(parts) => {
            let mut run = Vec::new();
            for part in parts {
                match part.kind() {
                    HirKind::Literal(l) => run.extend_from_slice(&l.0),
                    _ => {
                        if !run.is_empty() {
                            out.push(std::mem::take(&mut run));
                        }
                        required(part, out);
                    }
                }
            }
            if !run.is_empty() {
                out.push(run);
            }
        }
        HirKind::Capture(c) => required(&c.sub, out),
        HirKind::Repetition(r) if r.min >= 1 => required(&r.sub, out),
        _ => {}
    }
}

/// The literals every text a matcher accepts holds.
fn literals(matcher: &Matcher) -> Vec<Vec<u8>> {
    let pattern = match matcher {
        Matcher::String { needle, .. } => return vec![needle.clone()],
        Matcher::Substring(Substring::Exact(finder)) => return vec![finder.needle().to_vec()],
        Matcher::Substring(Substring::IgnoreCase(re)) | Matcher::Regex(re) | Matcher::Glob(re) => {
            re.as_str()
        }
    };
    let mut out = Vec::new();
    if let Ok(hir) = regex_syntax::ParserBuilder::new()
        .utf8(false)
        .build()
        .parse(pattern)
    {
        required(&hir, &mut out);
    }
    out
}

/// Whether a chunk with `index` can hold a message `filter` matches.
fn may_match(filter: &Filter, index: &Index) -> bool {
    match filter {
        Filter::And(a, b) => may_match(a, index) && may_match(b, index),
        Filter::Or(a, b) => may_match(a, index) || may_match(b, index),
        Filter::Named(f) => may_match(f, index),
        Filter::Match {
            subject, matcher, ..
        } => match subject {
            Subject::Host => index.hosts.iter().any(|h| matcher.is_match(h)),
            Subject::Program => index.programs.iter().any(|p| matcher.is_match(p)),
            Subject::Message => literals(matcher).iter().all(|l| index.may_hold(l)),
            _ => true,
        },
        _ => true,
    }
}

fn unix(micros: i64, offset: i32) -> UnixTime {
    UnixTime {
        secs: micros.div_euclid(1_000_000),
        micros: micros.rem_euclid(1_000_000) as u32,
        offset,
    }
}

/// The message a record stands for: its host, program, priority, text and times.
fn message<'r>(r: &Record<'r>, origin: &'r Origin) -> LogMessage<'r> {
    LogMessage {
        raw: r.text,
        fields: SyslogFields {
            pri: u16::from(r.pri),
            host: Some(Text::owned(r.host)),
            program: (!r.program.is_empty()).then(|| Text::owned(r.program)),
            message: Text::Span(Span::new(0, r.text.len())),
            ..SyslogFields::default()
        },
        stamp: unix(r.stamp, r.offset),
        recvd: unix(r.recvd, r.offset),
        origin,
        host_is_sender: false,
        tags: Default::default(),
        chained_hostname: false,
        keep_raw: false,
        values: Default::default(),
    }
}

pub fn run(a: &GrepArgs) -> i32 {
    let filter = match compile(&a.filter) {
        Ok(f) => f,
        Err(e) => return super::fail(&e),
    };
    let (from, to) = match (
        a.from.as_deref().map(instant).transpose(),
        a.to.as_deref().map(instant).transpose(),
    ) {
        (Ok(f), Ok(t)) => (f.unwrap_or(i64::MIN), t.unwrap_or(i64::MAX)),
        (Err(e), _) | (_, Err(e)) => return super::fail(&e),
    };
    let held = match keys_of(&a.keys) {
        Ok(k) => k,
        Err(e) => return super::fail(&e),
    };
    let keys = held.keys();
    let origin = Origin::without_peer("logstore", 0, b"", false);
    let mut out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
    let (mut chunks, mut by_time, mut by_index, mut matched) = (0u64, 0u64, 0u64, 0u64);
    let mut scratch = Vec::new();
    let ok = walk_files(&a.files, keys, &mut |file, walk| {
        let mut ok = true;
        for item in walk {
            let c = match item {
                Item::Chunk(c) => c,
                Item::Problem(p) => {
                    eprintln!("{}: {}: {}", file.display(), at(p.at), p.what);
                    ok &= p.severity == Severity::Notice;
                    continue;
                }
                Item::Segment(_) | Item::Close { .. } | Item::Timestamp { .. } => continue,
            };
            chunks += 1;
            let index = match c.index() {
                Ok(i) => i,
                Err(e) => {
                    eprintln!("{}: chunk at {}: {e}", file.display(), at(c.at));
                    ok = false;
                    continue;
                }
            };
            if index.stamp.1 < from || index.stamp.0 >= to {
                by_time += 1;
                continue;
            }
            if !may_match(&filter, &index) {
                by_index += 1;
                continue;
            }
            let data = match c.data() {
                Ok(d) => d,
                Err(e) => {
                    eprintln!("{}: chunk at {}: {e}", file.display(), at(c.at));
                    ok = false;
                    continue;
                }
            };
            for r in index.records(&data) {
                let r = match r {
                    Ok(r) => r,
                    Err(e) => {
                        eprintln!("{}: chunk at {}: records: {e}", file.display(), at(c.at));
                        ok = false;
                        break;
                    }
                };
                if r.stamp < from || r.stamp >= to {
                    continue;
                }
                if filter.matches(&message(&r, &origin), &mut scratch) {
                    matched += 1;
                    if print(&mut out, a.format, &r).is_err() {
                        return ControlFlow::Break(()); // standard output closed: grep | head
                    }
                }
            }
        }
        ControlFlow::Continue(ok)
    });
    let _ = out.flush();
    if a.stats {
        eprintln!(
            "chunks: {chunks}; skipped by time: {by_time}; skipped by index: {by_index}; decrypted: {}; messages matched: {matched}",
            chunks - by_time - by_index
        );
    }
    i32::from(!ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lits(pattern: &str) -> Vec<String> {
        let re = regex::bytes::Regex::new(pattern).unwrap();
        literals(&Matcher::Regex(re))
            .into_iter()
            .map(|l| String::from_utf8(l).unwrap())
            .collect()
    }

    #[test]
    fn a_pattern_requires_its_literal_runs_and_nothing_from_alternatives() {
        assert_eq!(lits("denied"), ["denied"]);
        assert_eq!(
            lits("Failed (password|key) for [a-z]+ from"),
            ["Failed ", " for ", " from"]
        );
        assert_eq!(lits("(abc)+x"), ["abc", "x"]);
        assert!(lits("abc|def").is_empty());
        assert!(lits("(abc)?def").contains(&"def".to_string()));
        assert!(!lits("(abc)?def").contains(&"abc".to_string()));
    }
}
