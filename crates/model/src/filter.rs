//! Filters compiled from syslog-ng filter expressions.
//!
//! Facility and severity tests become bit masks; `program()`, `host()`, `message()` and
//! `match()` compile their pattern once (`type(pcre)` by default, `string`, `glob`).
//! References to named filters (`filter(f_name)`) are inlined when compiling.
//!
//! PCRE patterns run on the `regex` crate, which has no look-around or back-references; a
//! pattern that needs them is a configuration error that says so.

use crate::message::{facility_by_name, severity_by_name, tag_id, LogMessage, TagId};
use crate::template::{Names, Template, ValueRef};
use regex::bytes::{Regex, RegexBuilder};
use sluice_config::declared::{self, read, Declared, Options};
use sluice_config::text_file;
use sluice_config::{ConfigError, Expr, Node, Pos, Value};
use std::path::Path;
use std::sync::Arc;

#[derive(Clone, Debug)]
pub enum Filter {
    /// Bit `n` set: facility `n` passes.
    Facility(u128),
    /// Bit `n` set: severity `n` passes.
    Severity(u8),
    Match {
        subject: Subject,
        matcher: Matcher,
        /// `flags(store-matches)`: a regular expression that matches sets `$0`, `$1`….
        store: bool,
    },
    And(Box<Filter>, Box<Filter>),
    Or(Box<Filter>, Box<Filter>),
    Not(Box<Filter>),
    /// A named filter used by reference.
    Named(Arc<Filter>),
    /// `tags("a", "b")`: the message has any of these tags.
    Tags(Vec<TagId>),
    /// `"$PID" == "42"`, `"$HOST" eq "x"`, `"$A" === "$B"`: two templates compared.
    Compare(Box<Comparison>),
    /// `source(s_net)`: the message came from the source statement with this name.
    Source(Arc<str>),
    /// `netmask("10.0.0.0/8")`: the sender's address is in the network (local messages count
    /// as 127.0.0.1; an IPv4-mapped IPv6 address, `::ffff:10.1.2.3`, as its IPv4 address).
    Netmask(Network),
    /// `netmask6("2001:db8::/32")`: the sender's IPv6 address in the network (local messages
    /// count as ::1).
    Netmask6(Network),
    /// `rate-limit(template("$HOST") rate(100))`: at most `rate` messages a second per key.
    RateLimit(Arc<RateLimit>),
    /// `in-list("/etc/list" value("PROGRAM"))`: the value is one of the file's lines.
    InList {
        value: ValueRef,
        lines: Arc<std::collections::HashSet<Vec<u8>>>,
    },
}

/// A comparison of two templates, as syslog-ng 3.38 makes it for a configuration of
/// `@version` 3.x: `lt le eq ne ge gt` compare bytes, `< <= == != >= >` compare the integers the
/// texts start with (C's `atoi`: `"abc"` and `""` are 0), and `===`/`!==` compare bytes (every
/// template value is a string before 4.0's typing).
#[derive(Clone, Debug)]
pub struct Comparison {
    left: Template,
    right: Template,
    numeric: bool,
    /// Which orderings pass: less, equal, greater.
    less: bool,
    equal: bool,
    greater: bool,
}

impl Comparison {
    fn compile(
        left: &Value,
        op: &Value,
        right: &Value,
        names: &Names,
    ) -> Result<Comparison, ConfigError> {
        let (numeric, less, equal, greater) = match op.text.as_str() {
            "lt" => (false, true, false, false),
            "le" => (false, true, true, false),
            "eq" | "===" => (false, false, true, false),
            "ne" | "!==" => (false, true, false, true),
            "ge" => (false, false, true, true),
            "gt" => (false, false, false, true),
            "<" => (true, true, false, false),
            "<=" => (true, true, true, false),
            "==" => (true, false, true, false),
            "!=" => (true, true, false, true),
            ">=" => (true, false, true, true),
            ">" => (true, false, false, true),
            other => {
                return Err(ConfigError::unknown(
                    op.pos,
                    "comparison operator",
                    other,
                    "",
                    &[
                        "eq", "ne", "lt", "le", "gt", "ge", "==", "!=", "<", "<=", ">", ">=",
                        "===", "!==",
                    ],
                ))
            }
        };
        let template = |v: &Value| {
            Template::compile_in(&v.text, names).map_err(|e| ConfigError::new(v.pos, e))
        };
        Ok(Comparison {
            left: template(left)?,
            right: template(right)?,
            numeric,
            less,
            equal,
            greater,
        })
    }

    fn matches(&self, msg: &LogMessage, scratch: &mut Vec<u8>) -> bool {
        scratch.clear();
        self.left.append(msg, 0, scratch);
        let split = scratch.len();
        self.right.append(msg, 0, scratch);
        let (left, right) = scratch.split_at(split);
        let ordering = if self.numeric {
            atoi(left).cmp(&atoi(right))
        } else {
            left.cmp(right)
        };
        match ordering {
            std::cmp::Ordering::Less => self.less,
            std::cmp::Ordering::Equal => self.equal,
            std::cmp::Ordering::Greater => self.greater,
        }
    }
}

/// C's `atoi` as glibc has it: leading white space, a sign, the digits that follow (0 when
/// there are none), clamped to 64 bits and then cut to an `int`.
fn atoi(text: &[u8]) -> i32 {
    let text = text.trim_ascii_start();
    let (negative, digits) = match text.first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let mut value: i64 = 0;
    for &d in digits.iter().take_while(|d| d.is_ascii_digit()) {
        let d = i64::from(d - b'0');
        value = match value.checked_mul(10).and_then(|v| {
            if negative {
                v.checked_sub(d)
            } else {
                v.checked_add(d)
            }
        }) {
            Some(v) => v,
            None if negative => i64::MIN,
            None => i64::MAX,
        };
        if value == i64::MIN || value == i64::MAX {
            break;
        }
    }
    value as i32
}

/// What a matching filter reads.
#[derive(Clone, Debug)]
pub enum Subject {
    Program,
    Host,
    Message,
    /// `match()` without `value()`: `$MSGHDR$MSG`, as syslog-ng 3.x does.
    HeaderAndMessage,
    Value(ValueRef),
    Template(Template),
}

#[derive(Clone, Debug)]
pub enum Matcher {
    Regex(Regex),
    /// `type(string)`: the whole value, a prefix or a substring.
    String {
        needle: Vec<u8>,
        mode: StringMode,
        ignore_case: bool,
    },
    Glob(Regex),
    /// `type(string) flags(substring)`: a searcher made once.
    Substring(Substring),
}

#[derive(Clone, Debug)]
pub enum Substring {
    Exact(Box<memchr::memmem::Finder<'static>>),
    /// `flags(ignore-case)`: the needle as a case-insensitive literal pattern.
    IgnoreCase(Regex),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StringMode {
    Exact,
    Prefix,
    Substring,
}

impl Matcher {
    /// `type(string)` matching of `needle` as the whole value, a prefix or a substring.
    pub fn string(needle: &[u8], mode: StringMode, ignore_case: bool) -> Matcher {
        match (mode, ignore_case) {
            (StringMode::Substring, false) => Matcher::Substring(Substring::Exact(Box::new(
                memchr::memmem::Finder::new(needle).into_owned(),
            ))),
            (StringMode::Substring, true) => {
                let literal: String = needle.iter().map(|&b| format!("\\x{b:02x}")).collect();
                Matcher::Substring(Substring::IgnoreCase(
                    regex(&literal, true).expect("an escaped literal is a valid pattern"),
                ))
            }
            _ => Matcher::String {
                needle: needle.to_vec(),
                mode,
                ignore_case,
            },
        }
    }

    /// syslog-ng's globs: `*` any run, `?` one character, all else literal; the whole value
    /// matches.
    pub fn glob(pattern: &str, ignore_case: bool) -> Result<Matcher, String> {
        regex(&glob_to_regex(pattern), ignore_case).map(Matcher::Glob)
    }

    pub fn is_match(&self, subject: &[u8]) -> bool {
        match self {
            Matcher::Regex(re) | Matcher::Glob(re) => re.is_match(subject),
            Matcher::String {
                needle,
                mode,
                ignore_case,
            } => {
                let eq = |a: &[u8], b: &[u8]| {
                    if *ignore_case {
                        a.eq_ignore_ascii_case(b)
                    } else {
                        a == b
                    }
                };
                match mode {
                    StringMode::Exact => eq(subject, needle),
                    StringMode::Prefix | StringMode::Substring => {
                        subject.len() >= needle.len() && eq(&subject[..needle.len()], needle)
                    }
                }
            }
            Matcher::Substring(Substring::Exact(finder)) => finder.find(subject).is_some(),
            Matcher::Substring(Substring::IgnoreCase(re)) => re.is_match(subject),
        }
    }
}

impl Filter {
    pub fn matches(&self, msg: &LogMessage, scratch: &mut Vec<u8>) -> bool {
        self.eval(msg, scratch, &mut None)
    }

    /// Whether a part of the filter stores what it matched (`flags(store-matches)`): the router
    /// then evaluates it with [`Filter::matches_storing`] on its own copy of the message.
    pub fn stores_matches(&self) -> bool {
        match self {
            Filter::Match { store, .. } => *store,
            Filter::And(a, b) | Filter::Or(a, b) => a.stores_matches() || b.stores_matches(),
            Filter::Not(a) => a.stores_matches(),
            Filter::Named(f) => f.stores_matches(),
            _ => false,
        }
    }

    /// As [`Filter::matches`], also giving the groups of the last storing expression that
    /// matched, for the caller to set as `$0`, `$1`….
    pub fn matches_storing(
        &self,
        msg: &LogMessage,
        scratch: &mut Vec<u8>,
        captured: &mut Option<crate::values::Matches>,
    ) -> bool {
        self.eval(msg, scratch, captured)
    }

    fn eval(
        &self,
        msg: &LogMessage,
        scratch: &mut Vec<u8>,
        captured: &mut Option<crate::values::Matches>,
    ) -> bool {
        match self {
            Filter::Facility(mask) => msg.facility() < 128 && mask & (1u128 << msg.facility()) != 0,
            Filter::Severity(mask) => mask & (1 << msg.severity()) != 0,
            Filter::Match {
                subject,
                matcher,
                store,
            } => {
                let text: &[u8] = match subject {
                    Subject::Program => msg.program(),
                    Subject::Host => msg.host(),
                    Subject::Message => msg.message(),
                    Subject::HeaderAndMessage => {
                        scratch.clear();
                        crate::macros::msghdr(msg, false, scratch);
                        scratch.extend_from_slice(msg.message());
                        scratch
                    }
                    Subject::Value(v) => {
                        scratch.clear();
                        v.append(msg, scratch);
                        scratch
                    }
                    Subject::Template(t) => {
                        scratch.clear();
                        t.append(msg, 0, scratch);
                        scratch
                    }
                };
                match matcher {
                    Matcher::Regex(re) if *store => match re.captures(text) {
                        Some(groups) => {
                            *captured = Some(crate::values::matches_of(&groups));
                            true
                        }
                        None => false,
                    },
                    _ => matcher.is_match(text),
                }
            }
            Filter::And(a, b) => a.eval(msg, scratch, captured) && b.eval(msg, scratch, captured),
            Filter::Or(a, b) => a.eval(msg, scratch, captured) || b.eval(msg, scratch, captured),
            Filter::Not(a) => !a.eval(msg, scratch, captured),
            Filter::Named(f) => f.eval(msg, scratch, captured),
            Filter::Tags(tags) => tags.iter().any(|t| msg.tags.contains(*t)),
            Filter::Compare(c) => c.matches(msg, scratch),
            Filter::Source(name) => *msg.origin.source_name == **name,
            Filter::Netmask(network) => network.contains(
                msg.origin
                    .peer
                    .map_or(std::net::Ipv4Addr::LOCALHOST.into(), |p| p.ip()),
            ),
            Filter::Netmask6(network) => network.contains(
                msg.origin
                    .peer
                    .map_or(std::net::Ipv6Addr::LOCALHOST.into(), |p| p.ip()),
            ),
            Filter::RateLimit(limit) => {
                scratch.clear();
                if let Some(t) = &limit.key {
                    t.append(msg, 0, scratch);
                }
                limit.take(scratch, std::time::Instant::now())
            }
            Filter::InList { value, lines } => {
                scratch.clear();
                value.append(msg, scratch);
                lines.contains(scratch.as_slice())
            }
        }
    }
}

/// A filter function as syslog-ng names it: the names it answers to (`key()` spelling), the
/// options it reads, a valid use of it (for its table test) and how it is compiled.
struct FilterFunction {
    names: &'static [&'static str],
    /// What it does, for the configuration reference.
    about: &'static str,
    options: &'static [Declared],
    sample: &'static str,
    build: fn(&Node, &mut Options, &Names, &mut NamedFilters) -> Result<Filter, ConfigError>,
}

const MATCH_TYPE: Declared =
    read("type", "type(string)").about("how the pattern matches: `pcre`, `string`, `glob`", "pcre");
const MATCH_FLAGS: Declared = read("flags", "flags(ignore-case)").about(
    "how the pattern matches: `ignore-case`, `utf8`, `store-matches`…",
    "none",
);

/// The filter functions of this version.
static FUNCTIONS: &[FilterFunction] = &[
    FilterFunction {
        names: &["facility"],
        about: "Messages of these facilities.",
        options: &[],
        sample: "facility(local0)",
        build: |node, _, _, _| {
            let mut mask = 0u128;
            for v in range_words(node.words()?) {
                for n in range(&v, |s| facility_by_name(s).map(u32::from))? {
                    mask |= 1 << n;
                }
            }
            Ok(Filter::Facility(mask))
        },
    },
    FilterFunction {
        names: &["level", "severity", "priority"],
        about: "Messages of these severities (a list or a range).",
        options: &[],
        sample: "level(err..emerg)",
        build: |node, _, _, _| {
            let mut mask = 0u8;
            for v in range_words(node.words()?) {
                for n in range(&v, |s| severity_by_name(s).map(u32::from))? {
                    mask |= 1 << n;
                }
            }
            Ok(Filter::Severity(mask))
        },
    },
    FilterFunction {
        names: &["program", "host", "message"],
        about: "Messages whose program (host, text) a regular expression (or string, glob) matches.",
        options: &[MATCH_TYPE, MATCH_FLAGS],
        sample: "program(\"app\")",
        build: |node, o, names, _| matcher_filter(node, o, names),
    },
    FilterFunction {
        names: &["match"],
        about: "Messages in which a regular expression matches a template (`value()`) or the whole line.",
        options: &[
            MATCH_TYPE,
            MATCH_FLAGS,
            read("value", "value(\"HOST\")").about("a rewrite rule: the field or pair it writes", "MESSAGE"),
            read("template", "template(\"$HOST\")").about("what the filter counts or compares, a template", "$MSG"),
        ],
        sample: "match(\"app\")",
        build: |node, o, names, _| matcher_filter(node, o, names),
    },
    FilterFunction {
        names: &["tags"],
        about: "Messages with one of these tags.",
        options: &[],
        sample: "tags(\"a\")",
        build: |node, _, _, _| {
            let tags: Vec<TagId> = node.values().map(|v| tag_id(&v.text)).collect();
            if tags.is_empty() {
                return Err(ConfigError::new(
                    node.pos,
                    "tags() takes tag names: tags(\"a\", \"b\")",
                ));
            }
            Ok(Filter::Tags(tags))
        },
    },
    FilterFunction {
        names: &["source"],
        about: "Messages from this source statement.",
        options: &[],
        sample: "source(\"s\")",
        build: |node, _, _, _| Ok(Filter::Source(Arc::from(node.value()?.text.as_str()))),
    },
    FilterFunction {
        names: &["netmask"],
        about: "Messages from senders in this IPv4 network.",
        options: &[],
        sample: "netmask(\"10.0.0.0/8\")",
        build: |node, _, _, _| netmask(node.value()?),
    },
    FilterFunction {
        names: &["netmask6"],
        about: "Messages from senders in this IPv6 network.",
        options: &[],
        sample: "netmask6(\"2001:db8::/32\")",
        build: |node, _, _, _| netmask6(node.value()?),
    },
    FilterFunction {
        names: &["in_list"],
        about: "Messages whose field is a line of a file.",
        options: &[read("value", "value(\"HOST\")").about("a rewrite rule: the field or pair it writes", "MESSAGE")],
        sample: "in-list(\"/etc/hostname\" value(\"HOST\"))",
        build: |node, o, _, _| in_list(node, o),
    },
    FilterFunction {
        names: &["rate_limit", "throttle"],
        about: "At most so many messages a second, per key.",
        options: &[
            read("rate", "rate(10)").about("messages per second let through, for each value of `template()`", "required"),
            read("template", "template(\"$HOST\")").about("what the filter counts or compares, a template", "$MSG"),
        ],
        sample: "rate-limit(rate(5))",
        build: |node, o, names, _| rate_limit(node, o, names),
    },
    FilterFunction {
        names: &["filter"],
        about: "What the named filter statement matches.",
        options: &[],
        sample: "filter(f_other)",
        build: |node, _, _, named| {
            let v = node.value()?;
            Ok(Filter::Named(named(&v.text, v.pos)?))
        },
    },
];

/// Resolves `filter(name)` references while compiling.
pub type NamedFilters<'a> = dyn FnMut(&str, Pos) -> Result<Arc<Filter>, ConfigError> + 'a;

/// Compiles an expression; its templates refer to `names`, and `named` resolves
/// `filter(name)` references.
pub fn compile(
    expr: &Expr,
    names: &Names,
    named: &mut NamedFilters,
) -> Result<Filter, ConfigError> {
    let mut sub = |e: &Expr| compile(e, names, named).map(Box::new);
    Ok(match expr {
        Expr::And(a, b) => Filter::And(sub(a)?, sub(b)?),
        Expr::Or(a, b) => Filter::Or(sub(a)?, sub(b)?),
        Expr::Not(a) => Filter::Not(sub(a)?),
        Expr::Compare { left, op, right } => {
            Filter::Compare(Box::new(Comparison::compile(left, op, right, names)?))
        }
        Expr::Call(node) => call(node, names, named)?,
    })
}

fn call(node: &Node, names: &Names, named: &mut NamedFilters) -> Result<Filter, ConfigError> {
    let function = declared::find(
        node,
        ("filter function", "filter function"),
        FUNCTIONS,
        |f| f.names,
        &[],
    )?;
    let mut o = Options::check(node, function.options)?;
    let filter = (function.build)(node, &mut o, names, named)?;
    o.finish()?;
    Ok(filter)
}

/// Token buckets per key, as syslog-ng's `rate-limit()` keeps them: each key starts with `rate`
/// tokens, gains `rate` a second (counted in whole tokens) up to `rate`, and a message passes
/// when it can take one.
/// The most keys a `rate-limit()` keeps buckets for.
pub const MAX_BUCKETS: usize = 10_000;

pub struct RateLimit {
    key: Option<Template>,
    rate: i64,
    buckets: std::sync::Mutex<std::collections::HashMap<Vec<u8>, (i64, std::time::Instant)>>,
}

impl std::fmt::Debug for RateLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.debug_struct("RateLimit")
            .field("rate", &self.rate)
            .finish()
    }
}

impl RateLimit {
    /// Whether a message with `key`, arriving `now`, is within the rate.
    ///
    /// Keys are what senders send (`$HOST`), so the buckets are bounded: past
    /// [`MAX_BUCKETS`], those untouched for a second are forgotten (one refills in a second at
    /// most, so it is as a new one); if all are busier, a new key is let through as a new
    /// bucket would be, without being kept.
    pub fn take(&self, key: &[u8], now: std::time::Instant) -> bool {
        let mut buckets = self.buckets.lock().expect("rate-limit lock");
        if !buckets.contains_key(key) {
            if buckets.len() >= MAX_BUCKETS {
                let second = std::time::Duration::from_secs(1);
                buckets.retain(|_, (_, last)| now.saturating_duration_since(*last) < second);
            }
            if buckets.len() >= MAX_BUCKETS {
                return true;
            }
            buckets.insert(key.to_vec(), (self.rate, now));
        }
        let (tokens, last) = buckets.get_mut(key).expect("inserted above");
        let elapsed = now.saturating_duration_since(*last).as_micros() as i64;
        let new = elapsed.saturating_mul(self.rate) / 1_000_000;
        if new > 0 {
            *tokens = (*tokens + new).min(self.rate);
            *last = now;
        }
        if *tokens >= 1 {
            *tokens -= 1;
            true
        } else {
            false
        }
    }
}

fn rate_limit(node: &Node, o: &mut Options, names: &Names) -> Result<Filter, ConfigError> {
    let key = match o.last("template") {
        Some(opt) => {
            let v = opt.value()?;
            Some(Template::compile_in(&v.text, names).map_err(|e| ConfigError::new(v.pos, e))?)
        }
        None => None,
    };
    let rate = match o.last("rate") {
        Some(opt) => {
            let n = opt.u64()?;
            if n == 0 {
                return Err(ConfigError::new(
                    opt.pos,
                    "rate() must be a positive number",
                ));
            }
            Some(i64::try_from(n).unwrap_or(i64::MAX))
        }
        None => None,
    };
    let rate = rate.ok_or_else(|| {
        ConfigError::new(node.pos, "rate-limit() needs rate(messages per second)")
    })?;
    Ok(Filter::RateLimit(Arc::new(RateLimit {
        key,
        rate,
        buckets: Default::default(),
    })))
}

/// An IPv4 or IPv6 network: what `netmask()` and `netmask6()` match, and what lists of
/// trusted peers (`trusted-proxies()`) hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Network {
    V4 { address: u32, mask: u32 },
    V6 { address: u128, prefix: u32 },
}

impl Network {
    /// Whether `ip` is in the network. An IPv4-mapped IPv6 address (`::ffff:10.1.2.3`, as a
    /// dual-stack listener sees IPv4 clients) is its IPv4 address.
    pub fn contains(&self, ip: std::net::IpAddr) -> bool {
        use std::net::IpAddr;
        match (*self, ip) {
            (Network::V4 { address, mask }, IpAddr::V4(ip)) => u32::from(ip) & mask == address,
            (Network::V4 { .. }, IpAddr::V6(ip)) => ip
                .to_ipv4_mapped()
                .is_some_and(|v4| self.contains(v4.into())),
            (Network::V6 { address, prefix }, IpAddr::V6(ip)) => {
                u128::from(ip) & mask6(prefix) == address
            }
            (Network::V6 { .. }, IpAddr::V4(_)) => false,
        }
    }

    /// An IPv4 network as `netmask()` reads it (`address/bits`, `address/dotted-mask`, a bare
    /// address), else an IPv6 one as `netmask6()` does.
    pub fn parse(text: &str) -> Option<Network> {
        ipv4_network(text).or_else(|| ipv6_network(text))
    }
}

/// `address/bits`, `address/dotted-mask` or a bare address (a /32), as syslog-ng reads them.
fn ipv4_network(text: &str) -> Option<Network> {
    let ip = |s: &str| s.parse::<std::net::Ipv4Addr>().ok().map(u32::from);
    let (address, mask) = match text.split_once('/') {
        None => (ip(text)?, u32::MAX),
        Some((a, m)) if m.contains('.') => (ip(a)?, ip(m)?),
        Some((a, bits)) => {
            let bits: u32 = bits.parse().ok().filter(|&b| b <= 32)?;
            (
                ip(a)?,
                if bits == 0 {
                    0
                } else {
                    u32::MAX << (32 - bits)
                },
            )
        }
    };
    Some(Network::V4 {
        address: address & mask,
        mask,
    })
}

/// `address/prefix` or a bare address (a /128).
fn ipv6_network(text: &str) -> Option<Network> {
    let (a, prefix) = match text.split_once('/') {
        Some((a, p)) => (a, p.parse::<u32>().ok().filter(|&p| p <= 128)?),
        None => (text, 128),
    };
    let address = u128::from(a.parse::<std::net::Ipv6Addr>().ok()?);
    Some(Network::V6 {
        address: address & mask6(prefix),
        prefix,
    })
}

/// The mask of an IPv6 prefix length.
fn mask6(prefix: u32) -> u128 {
    if prefix == 0 {
        0
    } else {
        u128::MAX << (128 - prefix.min(128))
    }
}

fn netmask(v: &Value) -> Result<Filter, ConfigError> {
    ipv4_network(&v.text).map(Filter::Netmask).ok_or_else(|| {
        ConfigError::new(
            v.pos,
            format!(
                "netmask() needs an IPv4 network such as \"10.0.0.0/8\", not \"{}\"",
                v.text
            ),
        )
    })
}

fn netmask6(v: &Value) -> Result<Filter, ConfigError> {
    ipv6_network(&v.text).map(Filter::Netmask6).ok_or_else(|| {
        ConfigError::new(
            v.pos,
            format!(
                "netmask6() needs an IPv6 network such as \"2001:db8::/32\", not \"{}\"",
                v.text
            ),
        )
    })
}

/// `in-list("file" value("NAME"))`: the file's lines, each without its last byte (its line
/// end), as syslog-ng reads them; empty lines are left out.
fn in_list(node: &Node, o: &mut Options) -> Result<Filter, ConfigError> {
    let file = node.first_value().ok_or_else(|| {
        ConfigError::new(
            node.pos,
            "in-list() needs a file: in-list(\"/etc/syslog-ng/hosts.list\" value(\"HOST\"))",
        )
    })?;
    let value = match o.last("value") {
        Some(opt) => {
            let v = opt.value()?;
            Some(
                ValueRef::parse(v.text.trim_start_matches('$'))
                    .map_err(|e| ConfigError::new(v.pos, e))?,
            )
        }
        None => None,
    };
    let value = value.ok_or_else(|| {
        ConfigError::new(
            node.pos,
            "in-list() needs value(\"NAME\"): which value to look up",
        )
    })?;
    let text =
        text_file::read_bytes(Path::new(&file.text), text_file::DATA_LIMIT).map_err(|e| {
            ConfigError::new(
                file.pos,
                format!("in-list() cannot read {}: {e}", file.text),
            )
        })?;
    let lines = text
        .split_inclusive(|&b| b == b'\n')
        .map(|l| &l[..l.len() - 1])
        .filter(|l| !l.is_empty())
        .map(<[u8]>::to_vec)
        .collect();
    Ok(Filter::InList {
        value,
        lines: Arc::new(lines),
    })
}

/// The words of `level()`/`facility()` with ranges written apart (`crit .. emerg`,
/// `crit ..emerg`, `crit.. emerg`, as syslog-ng's lexer reads `..` as a token) joined into one
/// `crit..emerg`.
fn range_words(words: Vec<&Value>) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::with_capacity(words.len());
    let mut open = false; // the last word ended in `..`: the next one completes it
    for w in words {
        match out.last_mut() {
            Some(last) if open || w.text.starts_with("..") => {
                last.text.push_str(&w.text);
            }
            _ => out.push(w.clone()),
        }
        open = out.last().is_some_and(|l| l.text.ends_with(".."));
    }
    out
}

/// `a`, `a..b` (either order) of names or numbers.
fn range(
    v: &Value,
    lookup: impl Fn(&str) -> Option<u32>,
) -> Result<std::ops::RangeInclusive<u32>, ConfigError> {
    let get =
        |s: &str| lookup(s).ok_or_else(|| ConfigError::new(v.pos, format!("unknown name '{s}'")));
    match v.text.split_once("..") {
        Some((a, b)) => {
            let (a, b) = (get(a)?, get(b)?);
            Ok(a.min(b)..=a.max(b))
        }
        None => {
            let n = get(&v.text)?;
            Ok(n..=n)
        }
    }
}

/// `program()`, `host()`, `message()` and `match()`: a pattern against a part of the message.
fn matcher_filter(node: &Node, o: &mut Options, names: &Names) -> Result<Filter, ConfigError> {
    let key = node.key();
    let pattern = node
        .first_value()
        .ok_or_else(|| ConfigError::new(node.pos, format!("{}() needs a pattern", node.name)))?;
    let kind = match o.last("type") {
        Some(opt) => opt.string()?,
        None => "pcre".to_string(),
    };
    let mut flags: Vec<&Value> = Vec::new();
    for opt in o.all("flags") {
        flags.extend(opt.words()?);
    }
    let subject = match key.as_str() {
        "program" => Subject::Program,
        "host" => Subject::Host,
        "message" => Subject::Message,
        _ => match o.last_of(&["value", "template"]) {
            Some(opt) if opt.key() == "value" => {
                let v = opt.value()?;
                Subject::Value(
                    ValueRef::parse(v.text.trim_start_matches('$'))
                        .map_err(|e| ConfigError::new(v.pos, e))?,
                )
            }
            Some(opt) => {
                let v = opt.value()?;
                Subject::Template(
                    Template::compile_in(&v.text, names).map_err(|e| ConfigError::new(v.pos, e))?,
                )
            }
            None => Subject::HeaderAndMessage,
        },
    };
    let mut ignore_case = false;
    let mut store = false;
    let mut mode = StringMode::Exact;
    for f in &flags {
        match sluice_config::normalize(&f.text).as_str() {
            "ignore_case" => ignore_case = true,
            "prefix" => mode = StringMode::Prefix,
            "substring" => mode = StringMode::Substring,
            "utf8" | "disable_jit" => {}
            "store_matches" => store = true,
            "dont_store_matches" => store = false,
            // Only `subst()` replaces more than once; a filter matches or not.
            "global" => {}
            _ => {
                return Err(ConfigError::unknown(
                    f.pos,
                    "flag",
                    &f.text,
                    &format!(" in {}()", node.name),
                    &[
                        "ignore-case",
                        "prefix",
                        "substring",
                        "utf8",
                        "store-matches",
                        "global",
                    ],
                ))
            }
        }
    }
    let matcher = match kind.as_str() {
        "pcre" | "posix" => Matcher::Regex(
            regex(&pattern.text, ignore_case).map_err(|e| ConfigError::new(pattern.pos, e))?,
        ),
        "string" => Matcher::string(pattern.text.as_bytes(), mode, ignore_case),
        "glob" => Matcher::glob(&pattern.text, ignore_case)
            .map_err(|e| ConfigError::new(pattern.pos, e))?,
        other => {
            let pos = node
                .options()
                .find(|o| o.key() == "type")
                .map_or(node.pos, |o| o.pos);
            return Err(ConfigError::unknown(
                pos,
                "matcher type",
                other,
                "",
                &["pcre", "string", "glob", "posix"],
            ));
        }
    };
    Ok(Filter::Match {
        subject,
        matcher,
        store,
    })
}

pub fn regex(pattern: &str, ignore_case: bool) -> Result<Regex, String> {
    RegexBuilder::new(pattern)
        .case_insensitive(ignore_case)
        .unicode(false)
        .build()
        .map_err(|e| {
            let hint = if pattern.contains("(?=") || pattern.contains("(?!") || pattern.contains("(?<") || pattern.contains("\\1") {
                " (look-around and back-references are PCRE features sluice's regex engine does not have)"
            } else {
                ""
            };
            format!("invalid regular expression{hint}: {e}")
        })
}

fn glob_to_regex(glob: &str) -> String {
    let mut re = String::from("^(?s:");
    for c in glob.chars() {
        match c {
            '*' => re.push_str(".*"),
            '?' => re.push('.'),
            c => re.push_str(&regex::escape(&c.to_string())),
        }
    }
    re.push_str(")$");
    re
}

/// Every driver of this registry, for the configuration reference.
pub fn reference() -> Vec<sluice_config::declared::Entry> {
    FUNCTIONS
        .iter()
        .map(|f| sluice_config::declared::Entry {
            names: f.names.to_vec(),
            about: f.about,
            sample: f.sample,
            options: vec![f.options],
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each filter function is compiled once with each option its table declares: an option
    /// is accepted exactly when the function reads it.
    #[test]
    fn every_filter_function_reads_every_option_it_declares() {
        for function in FUNCTIONS {
            sluice_config::declared::every_option_is_read(
                function.sample,
                function.options,
                |call| {
                    let text = format!("filter f {{ {call}; }};");
                    let config =
                        sluice_config::load_str("t.conf", &text).map_err(|e| e.render())?;
                    let sluice_config::Body::Filter(expr) = &config.statements[0].body else {
                        unreachable!("a filter statement")
                    };
                    compile(expr, &Names::default(), &mut |name, pos| {
                        Ok(Arc::new(Filter::Source(Arc::from(format!(
                            "{name}@{pos:?}"
                        )))))
                    })
                    .map(drop)
                    .map_err(|e| e.render(&config.map))
                },
            );
        }
    }

    #[test]
    fn rate_limit_gives_each_key_its_rate_a_second() {
        let limit = RateLimit {
            key: None,
            rate: 2,
            buckets: Default::default(),
        };
        let t0 = std::time::Instant::now();
        let at = |ms| t0 + std::time::Duration::from_millis(ms);
        assert!(limit.take(b"a", at(0)) && limit.take(b"a", at(0)));
        assert!(!limit.take(b"a", at(100)), "two a second, both taken");
        assert!(limit.take(b"b", at(100)), "another key has its own bucket");
        assert!(
            limit.take(b"a", at(600)),
            "half a second later, one token is back"
        );
        assert!(!limit.take(b"a", at(700)));
        assert!(limit.take(b"a", at(5000)) && limit.take(b"a", at(5000)));
        assert!(
            !limit.take(b"a", at(5000)),
            "the bucket holds at most the rate"
        );
    }

    #[test]
    fn numeric_comparisons_read_numbers_as_atoi_does() {
        // Checked by hand against syslog-ng 3.38: `"$PID" == " +12abc"` holds for PID 12, and
        // `"$PID" == "4294967308"` too (the value is cut to 32 bits).
        for (text, want) in [
            (&b"12"[..], 12),
            (b" +12abc", 12),
            (b"-5", -5),
            (b"", 0),
            (b"abc", 0),
            (b"4294967308", 12),
            (b"99999999999999999999", -1),
        ] {
            assert_eq!(atoi(text), want, "{}", String::from_utf8_lossy(text));
        }
    }

    fn filter(text: &str) -> Filter {
        let config = sluice_config::load_str("t.conf", &format!("filter f {{ {text} }};"))
            .unwrap_or_else(|e| panic!("{}", e.render()));
        let sluice_config::Body::Filter(expr) = &config.statements[0].body else {
            panic!("a filter statement")
        };
        compile(expr, &Names::default(), &mut |name, pos| {
            Err(ConfigError::new(pos, format!("no filter {name}")))
        })
        .unwrap_or_else(|e| panic!("{}", e.render(&config.map)))
    }

    #[test]
    fn level_ranges_may_be_written_with_spaces() {
        // Each accepted by syslog-ng 3.38 (`syslog-ng -s`), which lexes `..` as a token.
        let crit_up = 0b111; // emerg 0, alert 1, crit 2
        for text in [
            "level(crit..emerg)",
            "level(crit .. emerg)",
            "level(crit ..emerg)",
            "level(crit.. emerg)",
        ] {
            match filter(text) {
                Filter::Severity(mask) => assert_eq!(mask, crit_up, "{text}"),
                _ => panic!("{text}: a severity filter"),
            }
        }
        match filter("level(err .. emerg, debug)") {
            Filter::Severity(mask) => assert_eq!(mask, 0b1000_1111),
            _ => panic!("a severity filter"),
        }
        match filter("facility(kern .. mail)") {
            Filter::Facility(mask) => assert_eq!(mask, 0b111),
            _ => panic!("a facility filter"),
        }
    }

    #[test]
    fn networks_take_ipv4_mapped_addresses_as_ipv4() {
        let ten = Network::parse("10.0.0.0/8").unwrap();
        let ip = |s: &str| s.parse::<std::net::IpAddr>().unwrap();
        assert!(ten.contains(ip("10.9.9.9")));
        assert!(ten.contains(ip("::ffff:10.9.9.9")));
        assert!(!ten.contains(ip("::ffff:11.9.9.9")));
        assert!(!ten.contains(ip("2001:db8::1")));
        assert_eq!(
            Network::parse("10.1.2.3/255.255.0.0"),
            Network::parse("10.1.0.0/16")
        );
        let v6 = Network::parse("2001:db8::/32").unwrap();
        assert!(v6.contains(ip("2001:db8:1::5")));
        assert!(!v6.contains(ip("10.0.0.1")));
        assert_eq!(Network::parse("10.0.0.0/33"), None);
        assert_eq!(Network::parse("host.example"), None);
    }

    #[test]
    fn rate_limit_buckets_stay_bounded_whatever_the_keys() {
        let limit = RateLimit {
            key: None,
            rate: 2,
            buckets: Default::default(),
        };
        let start = std::time::Instant::now();
        for i in 0..MAX_BUCKETS + 500 {
            assert!(limit.take(i.to_string().as_bytes(), start));
        }
        assert_eq!(limit.buckets.lock().unwrap().len(), MAX_BUCKETS);
        // A second later the idle buckets go when a new key comes.
        let later = start + std::time::Duration::from_secs(2);
        assert!(limit.take(b"new", later));
        assert_eq!(limit.buckets.lock().unwrap().len(), 1);
        // A kept key is still limited.
        assert!(limit.take(b"new", later));
        assert!(!limit.take(b"new", later));
    }
}
