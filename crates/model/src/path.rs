//! Log paths: which destinations a message from a source reaches.
//!
//! The semantics are syslog-ng's:
//! - Top-level `log` statements are tried in order for every message from one of their
//!   sources (`flags(catchall)`: from any source).
//! - A path *matches* when none of its filters rejected the message; the message then reaches
//!   the path's destinations and nested paths in the order they are written.
//! - `flags(final)`: a matching path ends the search among its siblings.
//! - `flags(fallback)`: the path sees only messages that no non-fallback sibling matched.
//! - `junction { channel {…}; channel {…}; };` forks the path: what follows the junction runs
//!   once for every channel that matched, with the message as that channel left it.
//! - A rewrite changes the message for what follows it in its path only: the router copies
//!   the message before the first rule that applies (copy on write), so destinations earlier
//!   in the path, sibling paths and the parent path keep the version they saw. Copies are
//!   appended to the batch, and destinations are told which version (an index) to write.

use crate::filter::{self, Filter};
use crate::message::LogMessage;
use crate::parsers::Parsers;
use crate::rewrite::Rewrite;
use crate::template::Names;
use sluice_config::{Body, Condition, ConfigError, Node, Pos};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

pub type SourceId = u16;
pub type DestId = u32;

#[derive(Clone, Debug, Default)]
pub struct PathFlags {
    pub final_: bool,
    pub fallback: bool,
    pub catchall: bool,
    pub flow_control: bool,
    /// `flags(drop-unmatched)`: a message the path rejects counts as matched, so that
    /// `final` stops it and `fallback` siblings do not get it: it is dropped.
    pub drop_unmatched: bool,
}

#[derive(Clone, Debug, Default)]
pub struct LogPath {
    pub sources: Vec<SourceId>,
    pub flags: PathFlags,
    pub elements: Vec<Element>,
}

/// What a named filter or parser counts for the statistics (`filter;f_x;;a;matched`,
/// `parser;p_x;;a;discarded`), when `stats-level()` asks for it.
#[derive(Debug, Default)]
pub struct Tally {
    /// Messages a filter passed (`matched`); parsers do not count these.
    pub passed: Option<Arc<AtomicU64>>,
    /// Messages a filter rejected (`not_matched`) or a parser failed on (`discarded`).
    pub stopped: Arc<AtomicU64>,
}

impl Tally {
    fn count(&self, passed: bool) {
        if passed {
            if let Some(p) = &self.passed {
                p.fetch_add(1, Ordering::Relaxed);
            }
        } else {
            self.stopped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

#[derive(Clone, Debug)]
pub enum Element {
    Filter(Arc<Filter>, Option<Arc<Tally>>),
    /// A filter with `flags(store-matches)` somewhere in it: it sets `$0`… on the router's copy.
    /// Told apart when the path is built, not per message.
    StoringFilter(Arc<Filter>, Option<Arc<Tally>>),
    Rewrite(Arc<Rewrite>),
    /// A parser that fails ends the path for the message, as a filter does.
    Parser(Arc<Parsers>, Option<Arc<Tally>>),
    /// A destination, and whether a path on the way to it asked for `flags(flow-control)`
    /// (worked out once the whole path is built: a parent's flag covers its children).
    Destination(DestId, bool),
    /// Nested `log {}` statements written next to each other: siblings for final/fallback.
    Nested(Vec<LogPath>),
    Junction(Vec<LogPath>),
    /// `if (…) {…} elif (…) {…} else {…};`: the first arm whose condition holds takes the
    /// message; what follows the chain gets it as that arm left it.
    If(Vec<Arm>),
}

/// One arm of an `if` chain.
#[derive(Clone, Debug)]
pub struct Arm {
    pub condition: ArmCondition,
    pub body: LogPath,
}

#[derive(Clone, Debug)]
pub enum ArmCondition {
    /// `if (filter)`: once it holds, a message the body rejects is dropped (syslog-ng's
    /// `drop-unmatched` on the arm), not passed to the next arm.
    Filter(Arc<Filter>),
    /// `if {…}`: the body is the condition; a message it rejects tries the next arm.
    Block,
    /// `else {…}`: a message its body rejects goes no further in the path.
    Else,
}

/// Resolves the names and inline objects a log path refers to.
pub trait PathContext {
    /// The configuration's named templates and filters, for what a path compiles in place.
    fn names(&self) -> Arc<Names>;
    fn source(&mut self, name: &str, pos: Pos) -> Result<SourceId, ConfigError>;
    fn inline_source(&mut self, body: &Body, pos: Pos) -> Result<SourceId, ConfigError>;
    fn destination(&mut self, name: &str, pos: Pos) -> Result<DestId, ConfigError>;
    fn inline_destination(&mut self, body: &Body, pos: Pos) -> Result<DestId, ConfigError>;
    fn filter(&mut self, name: &str, pos: Pos) -> Result<Arc<Filter>, ConfigError>;
    fn rewrite(&mut self, name: &str, pos: Pos) -> Result<Arc<Rewrite>, ConfigError>;
    fn parser(&mut self, name: &str, pos: Pos) -> Result<Arc<Parsers>, ConfigError>;
    /// The statistics a named filter or parser (`kind` is `filter` or `parser`) counts into,
    /// if any.
    fn tally(&mut self, _kind: &str, _name: &str) -> Option<Arc<Tally>> {
        None
    }
}

/// The element names a log path may hold.
const ELEMENTS: &[&str] = &[
    "source",
    "filter",
    "destination",
    "log",
    "junction",
    "flags",
    "parser",
    "rewrite",
];

impl LogPath {
    /// Builds a path from the nodes of a `log { … }` body; `top` allows `source()`.
    pub fn build(
        nodes: &[Node],
        top: bool,
        ctx: &mut dyn PathContext,
    ) -> Result<LogPath, ConfigError> {
        let mut path = LogPath::default();
        for node in nodes {
            let key = node.key();
            match (key.as_str(), node.block.as_deref()) {
                ("source", None) if top => path
                    .sources
                    .push(ctx.source(&node.value()?.text, node.value()?.pos)?),
                ("source", Some(body)) if top => {
                    path.sources.push(ctx.inline_source(body, node.pos)?)
                }
                ("source", _) => {
                    return Err(ConfigError::new(
                        node.pos,
                        "source() is allowed only in a top-level log path",
                    ))
                }
                ("filter", None) => {
                    let v = node.value()?;
                    let f = ctx.filter(&v.text, v.pos)?;
                    path.elements
                        .push(filter_element(f, ctx.tally("filter", &v.text)));
                }
                ("filter", Some(Body::Filter(expr))) => {
                    let names = ctx.names();
                    let compiled =
                        filter::compile(expr, &names, &mut |name, pos| ctx.filter(name, pos))?;
                    path.elements.push(filter_element(Arc::new(compiled), None));
                }
                ("destination", None) => {
                    let v = node.value()?;
                    path.elements.push(Element::Destination(
                        ctx.destination(&v.text, v.pos)?,
                        false,
                    ));
                }
                ("destination", Some(body)) => path.elements.push(Element::Destination(
                    ctx.inline_destination(body, node.pos)?,
                    false,
                )),
                ("log", Some(Body::Nodes(inner))) => {
                    let child = LogPath::build(inner, false, ctx)?;
                    match path.elements.last_mut() {
                        Some(Element::Nested(siblings)) => siblings.push(child),
                        _ => path.elements.push(Element::Nested(vec![child])),
                    }
                }
                ("if", Some(Body::If(arms))) => {
                    let mut built = Vec::new();
                    for arm in arms {
                        let condition = match &arm.condition {
                            Condition::Filter(expr) => {
                                let names = ctx.names();
                                ArmCondition::Filter(Arc::new(filter::compile(
                                    expr,
                                    &names,
                                    &mut |name, pos| ctx.filter(name, pos),
                                )?))
                            }
                            Condition::Block => ArmCondition::Block,
                            Condition::Else => ArmCondition::Else,
                        };
                        built.push(Arm {
                            condition,
                            body: LogPath::build(&arm.body, false, ctx)?,
                        });
                    }
                    path.elements.push(Element::If(built));
                }
                ("junction", Some(Body::Nodes(channels))) => {
                    let mut built = Vec::new();
                    for ch in channels {
                        match (ch.key().as_str(), ch.block.as_deref()) {
                            ("channel", Some(Body::Nodes(inner))) => {
                                built.push(LogPath::build(inner, false, ctx)?)
                            }
                            _ => {
                                return Err(ConfigError::unknown(
                                    ch.pos,
                                    "junction element",
                                    &ch.name,
                                    "",
                                    &["channel"],
                                ))
                            }
                        }
                    }
                    path.elements.push(Element::Junction(built));
                }
                ("flags", None) => {
                    for f in node.words()? {
                        match sluice_config::normalize(&f.text).as_str() {
                            "final" => path.flags.final_ = true,
                            "fallback" => path.flags.fallback = true,
                            "catchall" | "catch_all" => path.flags.catchall = true,
                            "flow_control" => path.flags.flow_control = true,
                            "drop_unmatched" => path.flags.drop_unmatched = true,
                            _ => {
                                return Err(ConfigError::unknown(
                                    f.pos,
                                    "log path flag",
                                    &f.text,
                                    "",
                                    &[
                                        "final",
                                        "fallback",
                                        "catchall",
                                        "flow-control",
                                        "drop-unmatched",
                                    ],
                                ))
                            }
                        }
                    }
                }
                ("rewrite", None) => {
                    let v = node.value()?;
                    path.elements
                        .push(Element::Rewrite(ctx.rewrite(&v.text, v.pos)?));
                }
                ("rewrite", Some(body)) => {
                    let names = ctx.names();
                    let rewrite = Rewrite::compile(body, node.pos, &names, &mut |name, pos| {
                        ctx.filter(name, pos)
                    })?;
                    path.elements.push(Element::Rewrite(Arc::new(rewrite)));
                }
                ("parser", None) => {
                    let v = node.value()?;
                    // A parser that keeps state has a state of its own in each place.
                    let mut parsers = ctx.parser(&v.text, v.pos)?;
                    if parsers.is_stateful() {
                        parsers = Arc::new(parsers.instance());
                    }
                    path.elements
                        .push(Element::Parser(parsers, ctx.tally("parser", &v.text)));
                }
                ("parser", Some(body)) => path.elements.push(Element::Parser(
                    Arc::new(Parsers::compile(body, node.pos, &ctx.names())?),
                    None,
                )),
                _ => {
                    return Err(ConfigError::unknown(
                        node.pos,
                        "log path element",
                        &node.name,
                        "",
                        ELEMENTS,
                    ))
                }
            }
        }
        if top {
            path.mark_flow_control(false);
        }
        Ok(path)
    }

    /// Tells every destination of the path whether `flags(flow-control)` holds for it: set
    /// on the path that names it or on any path that encloses that one.
    fn mark_flow_control(&mut self, inherited: bool) {
        let flow_control = inherited || self.flags.flow_control;
        for e in &mut self.elements {
            match e {
                Element::Destination(_, flag) => *flag = flow_control,
                Element::Nested(v) | Element::Junction(v) => {
                    for p in v {
                        p.mark_flow_control(flow_control);
                    }
                }
                Element::If(arms) => {
                    for a in arms {
                        a.body.mark_flow_control(flow_control);
                    }
                }
                _ => {}
            }
        }
    }

    fn applies_to(&self, source: SourceId) -> bool {
        self.flags.catchall || self.sources.contains(&source)
    }

    /// Runs the path from element `from` on version `at` of a message (an index into
    /// `msgs`, which rewrites extend with copies). `private` says that no destination or
    /// other path will see version `at`, so that rewrites may change it in place. Returns the
    /// version the path ended with, or `None` when a filter rejected the message.
    fn run(
        &self,
        from: usize,
        msgs: &mut Vec<LogMessage>,
        mut at: usize,
        mut private: bool,
        scratch: &mut Vec<u8>,
        out: &mut dyn FnMut(DestId, u32, bool),
    ) -> Option<usize> {
        for (i, element) in self.elements.iter().enumerate().skip(from) {
            match element {
                Element::StoringFilter(f, tally) => {
                    let mut captured = None;
                    let passed = f.matches_storing(&msgs[at], scratch, &mut captured);
                    if let Some(t) = tally {
                        t.count(passed);
                    }
                    if !passed {
                        return None;
                    }
                    if let Some(groups) = captured {
                        if !private {
                            let copy = msgs[at].clone();
                            msgs.push(copy);
                            at = msgs.len() - 1;
                            private = true;
                        }
                        msgs[at].values.set_matches(groups);
                    }
                }
                Element::Filter(f, tally) => {
                    let passed = f.matches(&msgs[at], scratch);
                    if let Some(t) = tally {
                        t.count(passed);
                    }
                    if !passed {
                        return None;
                    }
                }
                Element::Rewrite(r) => {
                    if !private {
                        if !r.applies_to(&msgs[at], scratch) {
                            continue;
                        }
                        let copy = msgs[at].clone();
                        msgs.push(copy);
                        at = msgs.len() - 1;
                        private = true;
                    }
                    r.apply(&mut msgs[at], scratch);
                }
                Element::Parser(p, tally) => {
                    if !private {
                        let copy = msgs[at].clone();
                        msgs.push(copy);
                        at = msgs.len() - 1;
                        private = true;
                    }
                    let mut made = Vec::new();
                    let parsed = p.apply_from(0, &mut msgs[at], &mut made);
                    if let Some(t) = tally {
                        t.count(parsed);
                    }
                    self.run_made(i, p, made, msgs, scratch, out);
                    if !parsed {
                        return None;
                    }
                }
                Element::Destination(d, flow_control) => {
                    out(*d, at as u32, *flow_control);
                    private = false;
                }
                Element::Nested(children) => {
                    run_siblings(children, None, None, msgs, at, scratch, out, None);
                    private = false;
                }
                Element::Junction(channels) => {
                    // Channels are siblings (final, fallback); what follows the junction runs
                    // once for each channel that matched, on that channel's version.
                    let mut any = false;
                    for fallback_pass in [false, true] {
                        if fallback_pass && any {
                            break;
                        }
                        for ch in channels
                            .iter()
                            .filter(|c| c.flags.fallback == fallback_pass)
                        {
                            let version = ch.run(0, msgs, at, false, scratch, out);
                            if let Some(version) = version {
                                self.run(i + 1, msgs, version, false, scratch, out);
                            }
                            if version.is_some() || ch.flags.drop_unmatched {
                                any = true;
                                if ch.flags.final_ {
                                    return Some(at);
                                }
                            }
                        }
                    }
                    return any.then_some(at);
                }
                Element::If(arms) => {
                    let mut taken = None;
                    for arm in arms {
                        match &arm.condition {
                            ArmCondition::Filter(f) => {
                                if f.matches(&msgs[at], scratch) {
                                    taken = Some(arm.body.run(0, msgs, at, false, scratch, out)?);
                                    break;
                                }
                            }
                            ArmCondition::Block => {
                                if let Some(version) =
                                    arm.body.run(0, msgs, at, false, scratch, out)
                                {
                                    taken = Some(version);
                                    break;
                                }
                            }
                            ArmCondition::Else => {
                                taken = Some(arm.body.run(0, msgs, at, false, scratch, out)?);
                            }
                        }
                    }
                    // No arm taken and no else: the message goes on as it was.
                    at = taken.unwrap_or(at);
                    private = false;
                }
            }
        }
        Some(at)
    }
}

impl LogPath {
    /// Runs the messages the parsers of element `i` made (in `made`, each with the index
    /// of the parser that made it) through the rest of the path, as syslog-ng forwards a
    /// message a parser emits to what follows the parser: before the message that made them
    /// goes on.
    fn run_made<'r>(
        &self,
        i: usize,
        parsers: &Parsers,
        made: crate::parsers::Made<'r>,
        msgs: &mut Vec<LogMessage<'r>>,
        scratch: &mut Vec<u8>,
        out: &mut dyn FnMut(DestId, u32, bool),
    ) {
        for (by, msg) in made {
            msgs.push(msg);
            let at = msgs.len() - 1;
            self.resume(i, parsers, by + 1, msgs, at, scratch, out);
        }
    }

    /// Runs `msgs[at]` from parser `from` of element `i` (which holds `parsers`) on.
    #[allow(clippy::too_many_arguments)]
    fn resume<'r>(
        &self,
        i: usize,
        parsers: &Parsers,
        from: usize,
        msgs: &mut Vec<LogMessage<'r>>,
        at: usize,
        scratch: &mut Vec<u8>,
        out: &mut dyn FnMut(DestId, u32, bool),
    ) {
        let mut made = Vec::new();
        let parsed = parsers.apply_from(from, &mut msgs[at], &mut made);
        self.run_made(i, parsers, made, msgs, scratch, out);
        if parsed {
            self.run(i + 1, msgs, at, true, scratch, out);
        }
    }

    /// Every parser that keeps state in this path and the paths in it, with the path from it on.
    fn find_stateful(&self, found: &mut Vec<Stateful>) {
        for (i, element) in self.elements.iter().enumerate() {
            match element {
                Element::Parser(p, _) if p.is_stateful() => found.push(Stateful {
                    parsers: p.clone(),
                    path: LogPath {
                        sources: Vec::new(),
                        flags: PathFlags::default(),
                        elements: self.elements[i..].to_vec(),
                    },
                }),
                Element::Nested(paths) | Element::Junction(paths) => {
                    paths.iter().for_each(|p| p.find_stateful(found))
                }
                Element::If(arms) => arms.iter().for_each(|a| a.body.find_stateful(found)),
                _ => {}
            }
        }
    }
}

/// A parser that keeps state (a correlating `db-parser()`), in its place: what its contexts
/// make when they end goes on from there ([`Router::resume`]).
#[derive(Clone, Debug)]
pub struct Stateful {
    parsers: Arc<Parsers>,
    /// The path from the parser's element on (the parser first).
    path: LogPath,
}

impl Stateful {
    /// The correlation counters of its parsers, each with the parser's name.
    pub fn counters(&self) -> Vec<(&'static str, crate::correlation::Counters)> {
        self.parsers.counters()
    }

    /// Moves the parsers' clocks by the wall clock (µs; `None`: ends every context); `f` gets
    /// what the contexts that ended made, with the index of the parser that made them (for
    /// [`Router::resume`]).
    pub fn tick(
        &self,
        now_micros: Option<i64>,
        f: &mut dyn FnMut(usize, &mut Vec<LogMessage<'_>>),
    ) {
        self.parsers.tick(now_micros, f)
    }
}

fn filter_element(f: Arc<Filter>, tally: Option<Arc<Tally>>) -> Element {
    if f.stores_matches() {
        Element::StoringFilter(f, tally)
    } else {
        Element::Filter(f, tally)
    }
}

/// Tries sibling paths in order with final/fallback on version `at` of a message; `source`
/// is `Some` at the top level. `last` is the last path that may take the message there
/// ([`last_path`]): it may change the message itself rather than a copy when no destination
/// was given it before.
#[allow(clippy::too_many_arguments)]
fn run_siblings(
    paths: &[LogPath],
    source: Option<SourceId>,
    last: Option<usize>,
    msgs: &mut Vec<LogMessage>,
    at: usize,
    scratch: &mut Vec<u8>,
    out: &mut dyn FnMut(DestId, u32, bool),
    mut tally: Option<&mut [PathTally]>,
) -> bool {
    let given = std::cell::Cell::new(false);
    let mut watch = |d: DestId, version: u32, flow_control: bool| {
        given.set(given.get() || version as usize == at);
        out(d, version, flow_control)
    };
    let walked = walk_siblings(paths, source, |i, p| {
        let private = last == Some(i) && !given.get();
        let matched = p.run(0, msgs, at, private, scratch, &mut watch).is_some();
        if let Some(t) = tally.as_deref_mut().and_then(|t| t.get_mut(i)) {
            t.offered += 1;
            t.routed += u64::from(matched);
        }
        Ok::<_, std::convert::Infallible>(matched)
    });
    let Ok(matched) = walked;
    matched
}

/// Sibling paths in syslog-ng's order: those that apply to `source` (`None`: every one, as
/// nested paths), fallback paths only when no other matched, none after a `final` path that
/// matched. `take` runs path `i` and says whether it matched; an error ends the walk.
/// Returns whether any matched (a path with `drop-unmatched` counts as matched).
fn walk_siblings<E>(
    paths: &[LogPath],
    source: Option<SourceId>,
    mut take: impl FnMut(usize, &LogPath) -> Result<bool, E>,
) -> Result<bool, E> {
    let mut matched = false;
    for fallback_pass in [false, true] {
        if fallback_pass && matched {
            break;
        }
        for (i, p) in paths.iter().enumerate() {
            if p.flags.fallback != fallback_pass || !source.is_none_or(|s| p.applies_to(s)) {
                continue;
            }
            if take(i, p)? || p.flags.drop_unmatched {
                matched = true;
                if p.flags.final_ {
                    return Ok(true);
                }
            }
        }
    }
    Ok(matched)
}

/// What one top-level log path did with the messages it was offered: `offered` (its sources'
/// messages that got to it: not stopped by a `final` path before it) = `routed` (through
/// the whole path) + filtered (stopped in it by a filter, a parser, a `final` inside).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PathTally {
    pub offered: u64,
    pub routed: u64,
}

/// The top-level paths every message from `source` goes through when its route is fixed
/// ([`fixed_route`]: every path matches).
fn fixed_paths(paths: &[LogPath], source: SourceId) -> Vec<usize> {
    let mut taken = Vec::new();
    let walked = walk_siblings(paths, Some(source), |i, _| {
        taken.push(i);
        Ok::<_, std::convert::Infallible>(true)
    });
    let Ok(_) = walked;
    taken
}

/// What [`Router::fixed_route`] answers for `source`, worked out once.
fn fixed_route(paths: &[LogPath], source: SourceId) -> Option<Vec<(DestId, bool)>> {
    let mut route = Vec::new();
    fixed_siblings(paths, Some(source), &mut route)?;
    let mut dests: Vec<DestId> = route.iter().map(|&(d, _)| d).collect();
    dests.sort_unstable();
    dests.dedup();
    // A destination reached twice gets each message twice, interleaved: routed one by one.
    (dests.len() == route.len()).then_some(route)
}

/// [`run_siblings`] for paths whose every element is a destination or nested paths of the
/// same kind (so every path matches every message): appends the destinations reached, in
/// order. `None` when an element looks at the message.
fn fixed_siblings(
    paths: &[LogPath],
    source: Option<SourceId>,
    route: &mut Vec<(DestId, bool)>,
) -> Option<()> {
    let walked = walk_siblings(paths, source, |_, p| {
        for element in &p.elements {
            match element {
                Element::Destination(d, flow_control) => route.push((*d, *flow_control)),
                Element::Nested(children) => fixed_siblings(children, None, route).ok_or(())?,
                _ => return Err(()),
            }
        }
        Ok(true)
    });
    walked.ok().map(drop)
}

/// The last of `paths` that a message from `source` may run through: the last fallback path
/// for it, or else the last other one.
fn last_path(paths: &[LogPath], source: SourceId) -> Option<usize> {
    let in_pass = |fallback: bool| {
        paths
            .iter()
            .rposition(|p| p.flags.fallback == fallback && p.applies_to(source))
    };
    in_pass(true).or_else(|| in_pass(false))
}

/// Where every message from one source goes when nothing on its paths looks at it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FixedRoute {
    /// The destinations, with their flow-control flags, in order.
    pub destinations: Vec<(DestId, bool)>,
    /// The top-level paths (by index) the route goes through.
    pub paths: Vec<usize>,
}

/// All top-level log paths of a configuration.
#[derive(Clone, Debug, Default)]
pub struct Router {
    paths: Vec<LogPath>,
    /// [`last_path`] for every source id the paths name (others reach only catch-all paths
    /// and are looked up per message).
    last_paths: Vec<Option<usize>>,
    /// [`fixed_route`] for every source id the paths name.
    fixed_routes: Vec<Option<FixedRoute>>,
    /// The parsers that keep state, in their places.
    stateful: Vec<Stateful>,
}

impl Router {
    pub fn new(paths: Vec<LogPath>) -> Router {
        let named = paths.iter().flat_map(|p| p.sources.iter().copied()).max();
        let last_paths = named.map_or(Vec::new(), |max| {
            (0..=max).map(|s| last_path(&paths, s)).collect()
        });
        let fixed_routes = named.map_or(Vec::new(), |max| {
            (0..=max)
                .map(|s| {
                    Some(FixedRoute {
                        destinations: fixed_route(&paths, s)?,
                        paths: fixed_paths(&paths, s),
                    })
                })
                .collect()
        });
        let mut stateful = Vec::new();
        paths.iter().for_each(|p| p.find_stateful(&mut stateful));
        Router {
            paths,
            last_paths,
            fixed_routes,
            stateful,
        }
    }

    /// Takes over the open correlation contexts of `old`'s stateful parsers (the
    /// configuration a reload replaces): each of these takes those of the first one of the same
    /// identity (`db-parser(FILE)`, `grouping-by(KEY,SCOPE)`) not taken yet, in the order the
    /// log paths name them.
    pub fn adopt_state(&self, old: &Router) {
        let olds: Vec<&Parsers> = old.stateful.iter().map(|s| &*s.parsers).collect();
        let mut taken = Vec::new();
        for s in &self.stateful {
            s.parsers.adopt(&olds, &mut taken);
        }
    }

    /// The parsers that keep state, each in its place; the engine ticks their clocks.
    pub fn stateful(&self) -> &[Stateful] {
        &self.stateful
    }

    /// Calls `out` with each destination `msgs[at]`, made by parser `by` of `stateful` when
    /// a context ended, reaches from there on (as [`Router::route`]).
    pub fn resume(
        &self,
        stateful: &Stateful,
        by: usize,
        msgs: &mut Vec<LogMessage>,
        at: usize,
        scratch: &mut Vec<u8>,
        out: &mut dyn FnMut(DestId, u32, bool),
    ) {
        stateful
            .path
            .resume(0, &stateful.parsers, by + 1, msgs, at, scratch, out);
    }

    /// The destinations, with their flow-control flags, that every message from `source`
    /// reaches when nothing on its paths looks at the message (no filter, rewrite, parser,
    /// junction or `if`) and no destination is reached twice: the caller may then deliver a
    /// whole batch without routing each message. `None` otherwise.
    pub fn fixed_route(&self, source: SourceId) -> Option<&FixedRoute> {
        self.fixed_routes.get(usize::from(source))?.as_ref()
    }

    /// How many top-level log paths there are: the length of a [`PathTally`] slice.
    pub fn path_count(&self) -> usize {
        self.paths.len()
    }

    /// Calls `out` with each destination `msgs[at]` reaches and the version of the message it
    /// gets there: `at` itself, or a rewritten copy the router appended to `msgs`. Once per
    /// arrival: a message that two paths deliver to one destination is written twice, as in
    /// syslog-ng. The third argument says whether the path there asked for flow control.
    /// Each top-level path's [`PathTally`] (by index) counts what it did with the message.
    pub fn route(
        &self,
        msgs: &mut Vec<LogMessage>,
        at: usize,
        scratch: &mut Vec<u8>,
        out: &mut dyn FnMut(DestId, u32, bool),
        tally: &mut [PathTally],
    ) {
        let source = msgs[at].origin.source_id;
        let last = match self.last_paths.get(usize::from(source)) {
            Some(last) => *last,
            None => last_path(&self.paths, source),
        };
        run_siblings(
            &self.paths,
            Some(source),
            last,
            msgs,
            at,
            scratch,
            out,
            Some(tally),
        );
    }

    /// Whether any path from `source` may be reached by its messages.
    pub fn is_used(&self, source: SourceId) -> bool {
        self.paths.iter().any(|p| p.applies_to(source))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(sources: &[SourceId], flags: PathFlags, elements: Vec<Element>) -> LogPath {
        LogPath {
            sources: sources.to_vec(),
            flags,
            elements,
        }
    }

    fn to(d: DestId) -> Element {
        Element::Destination(d, false)
    }

    #[test]
    fn a_route_without_conditions_is_worked_out_once_per_source() {
        let final_ = PathFlags {
            final_: true,
            ..PathFlags::default()
        };
        let fallback = PathFlags {
            fallback: true,
            ..PathFlags::default()
        };
        let nested = Element::Nested(vec![
            path(&[], final_.clone(), vec![to(3)]),
            path(&[], PathFlags::default(), vec![to(4)]),
        ]);
        let router = Router::new(vec![
            path(&[0], PathFlags::default(), vec![to(1), nested]),
            path(&[0, 1], final_, vec![Element::Destination(2, true)]),
            path(&[0, 1, 2], PathFlags::default(), vec![to(5)]),
            path(&[2], fallback, vec![to(6)]),
        ]);
        let fixed = |destinations: &[(DestId, bool)], paths: &[usize]| FixedRoute {
            destinations: destinations.to_vec(),
            paths: paths.to_vec(),
        };
        // The nested `final` path stops its siblings; the top-level one stops the rest.
        assert_eq!(
            router.fixed_route(0),
            Some(&fixed(&[(1, false), (3, false), (2, true)], &[0, 1]))
        );
        assert_eq!(router.fixed_route(1), Some(&fixed(&[(2, true)], &[1])));
        // A fallback path runs only when no other path took the message.
        assert_eq!(router.fixed_route(2), Some(&fixed(&[(5, false)], &[2])));
        assert_eq!(router.fixed_route(7), None);
    }

    #[test]
    fn each_top_level_path_tallies_what_it_was_offered_and_routed() {
        let (final_, drop_unmatched) = (
            PathFlags {
                final_: true,
                ..PathFlags::default()
            },
            PathFlags {
                drop_unmatched: true,
                ..PathFlags::default()
            },
        );
        let none = Arc::new(Filter::Severity(0));
        let router = Router::new(vec![
            // Filters out everything.
            path(
                &[0],
                PathFlags::default(),
                vec![Element::Filter(none.clone(), None), to(1)],
            ),
            path(&[0], final_, vec![to(2)]),
            // After a final path: offered nothing.
            path(&[0], PathFlags::default(), vec![to(3)]),
            path(
                &[1],
                drop_unmatched,
                vec![Element::Filter(none, None), to(4)],
            ),
        ]);
        let mut msgs = vec![crate::testing::message("<13>Jan  1 00:00:00 host app: x")];
        let mut tally = vec![PathTally::default(); router.path_count()];
        let mut reached = Vec::new();
        router.route(
            &mut msgs,
            0,
            &mut Vec::new(),
            &mut |d, _, _| reached.push(d),
            &mut tally,
        );
        assert_eq!(reached, [2]);
        let t = |offered, routed| PathTally { offered, routed };
        assert_eq!(tally, [t(1, 0), t(1, 1), t(0, 0), t(0, 0)]);
    }

    #[test]
    fn a_route_that_looks_at_the_message_or_repeats_a_destination_is_not_fixed() {
        let filter = Arc::new(Filter::Severity(0xff));
        let router = Router::new(vec![
            path(&[0], PathFlags::default(), vec![to(1)]),
            path(
                &[0],
                PathFlags::default(),
                vec![Element::Filter(filter, None), to(2)],
            ),
            path(&[1], PathFlags::default(), vec![to(1)]),
            path(&[1], PathFlags::default(), vec![to(1)]),
        ]);
        assert_eq!(router.fixed_route(0), None);
        assert_eq!(router.fixed_route(1), None);
    }
}
