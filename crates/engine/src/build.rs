//! From a parsed configuration to the parts that run: sources, destinations, the router.
//!
//! Every statement is built, referenced or not, so that every error in the file is found
//! before anything starts; only sources that a log path uses are started. Driver options are
//! checked here against the names each driver knows: an unknown name is an error listing the
//! valid ones, a name syslog-ng knows that sluice does not implement yet is refused as such.

use crate::destinations::driver::DestinationContext;
use crate::destinations::{registry as destination_registry, Destination, Group};
use crate::dispatch::{DispatchCounters, Dispatcher};
use crate::options::Globals;
use crate::sources::{driver::SourceContext, registry};
use crate::sources::{internal, Source};
use crate::stats::Registry;
use sluice_config::{Body, Condition, Config, ConfigError, Expr, Node, Pos, Statement};
use sluice_model::filter::{self, Filter};
use sluice_model::message::tag_id;
use sluice_model::parsers::Parsers;
use sluice_model::path::{DestId, LogPath, PathContext, SourceId, Tally};
use sluice_model::rewrite::Rewrite;
use sluice_model::template::Names;
use sluice_model::{Router, Template};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Everything a configuration starts.
pub struct Pipeline {
    pub globals: Globals,
    /// The sources a log path reads, one per driver (a source statement with `tcp()` and
    /// `udp()` has two).
    pub sources: Vec<Arc<dyn Source>>,
    pub dispatcher: Arc<Dispatcher>,
    /// The counters `sluice ctl stats` shows.
    pub stats: Arc<Registry>,
    /// The configuration as read, its passwords hidden (`sluice ctl config`).
    pub config_text: Arc<str>,
    /// What a reload compares to keep what did not change: each named source's and
    /// destination's statement, and everything they depend on (`options {}`, templates).
    pub fingerprints: Fingerprints,
    /// Warnings about the configuration (unused objects, skipped includes).
    pub notes: Vec<String>,
    /// What it was built from, and the files it read besides (pattern databases): when one
    /// changes, the running configuration is built again from the same text.
    pub read: ReadFiles,
}

/// The files a configuration read besides its text, as they were when it did.
#[derive(Clone, Debug)]
pub struct ReadFiles {
    pub config: Arc<Config>,
    pub paths: Vec<std::path::PathBuf>,
    pub state: Vec<FileState>,
}

/// What tells a changed file: its inode, size and time of change (a directory: of every
/// pattern file in it).
pub type FileState = (std::path::PathBuf, u64, u64, Option<std::time::SystemTime>);

impl ReadFiles {
    /// The state of `paths` now.
    pub fn state_of(paths: &[std::path::PathBuf]) -> Vec<FileState> {
        use std::os::unix::fs::MetadataExt;
        let mut state = Vec::new();
        let mut add = |path: &std::path::Path| {
            if let Ok(m) = std::fs::metadata(path) {
                state.push((path.to_path_buf(), m.ino(), m.size(), m.modified().ok()));
            }
        };
        for path in paths {
            add(path);
            if path.is_dir() {
                let mut files = Vec::new();
                files_under(path, &mut files);
                files.sort();
                files.iter().for_each(|f| add(f));
            }
        }
        state
    }

    /// Whether a file changed since the configuration read it; `self` then knows it as it is.
    pub fn changed(&mut self) -> bool {
        let now = ReadFiles::state_of(&self.paths);
        let changed = now != self.state;
        self.state = now;
        changed
    }
}

fn files_under(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files_under(&path, out);
        } else {
            out.push(path);
        }
    }
}

/// What a reload compares (see [`Pipeline::fingerprints`]).
#[derive(Clone, Debug, Default)]
pub struct Fingerprints {
    /// `options {}` and template statements, in order.
    pub shared: Vec<String>,
    /// Named sources: name → statement fingerprint.
    pub sources: HashMap<String, String>,
    /// Every destination by id: its name and, for named statements, its fingerprint (inline
    /// destinations have none and are never kept).
    pub destinations: Vec<(String, Option<String>)>,
}

struct Builder<'a> {
    globals: Globals,
    statements: HashMap<(&'static str, String), &'a Statement>,
    /// The named templates and filters everything compiled refers to.
    names: Arc<Names>,
    filters: HashMap<String, Arc<Filter>>,
    filters_building: Vec<String>,
    rewrites: HashMap<String, Arc<Rewrite>>,
    parsers: HashMap<String, Arc<Parsers>>,
    source_ids: HashMap<String, SourceId>,
    dest_ids: HashMap<String, DestId>,
    destinations: Vec<Arc<dyn Destination>>,
    /// `destination;NAME;;a;processed` of each destination, indexed like `destinations`.
    dest_counted: Vec<Arc<std::sync::atomic::AtomicU64>>,
    stats: Arc<Registry>,
    sources: Vec<(SourceId, Arc<dyn Source>)>,
    anon: usize,
}

/// Registers the tag names the configuration writes (`tags()` of sources and filters,
/// `set-tag()`, `clear-tag()`) in the order they stand, before the sources' `.source.NAME`:
/// `$TAGS` lists tags in the order their names were registered, and syslog-ng registers these
/// while parsing, the sources' when it starts them.
fn register_tag_names(config: &Config) {
    fn node(n: &Node) {
        if matches!(n.key().as_str(), "tags" | "set_tag" | "clear_tag") {
            for v in n.values() {
                tag_id(&v.text);
            }
        }
        for opt in n.options() {
            node(opt);
        }
        if let Some(b) = &n.block {
            body(b);
        }
    }
    fn expr(e: &Expr) {
        match e {
            Expr::And(a, b) | Expr::Or(a, b) => {
                expr(a);
                expr(b);
            }
            Expr::Not(a) => expr(a),
            Expr::Call(n) => node(n),
            Expr::Compare { .. } => {}
        }
    }
    fn body(b: &Body) {
        match b {
            Body::Nodes(nodes) => nodes.iter().for_each(node),
            Body::Filter(e) => expr(e),
            Body::Text(_) => {}
            Body::If(arms) => {
                for arm in arms {
                    if let Condition::Filter(e) = &arm.condition {
                        expr(e);
                    }
                    arm.body.iter().for_each(node);
                }
            }
        }
    }
    for s in &config.statements {
        body(&s.body);
    }
}

pub fn build(config: &Config) -> Result<Pipeline, ConfigError> {
    build_with(config, Arc::default(), 0)
}

/// Builds configuration number `generation` (a reload's), counting into `stats` (the running
/// one's, so that counters of what the reload keeps go on).
pub fn build_with(
    config: &Config,
    stats: Arc<Registry>,
    generation: u64,
) -> Result<Pipeline, ConfigError> {
    register_tag_names(config);
    let mut b = Builder {
        globals: Globals::new(),
        statements: HashMap::new(),
        names: Arc::default(),
        filters: HashMap::new(),
        rewrites: HashMap::new(),
        parsers: HashMap::new(),
        filters_building: Vec::new(),
        source_ids: HashMap::new(),
        dest_ids: HashMap::new(),
        destinations: Vec::new(),
        dest_counted: Vec::new(),
        stats,
        sources: Vec::new(),
        anon: 0,
    };
    for s in &config.statements {
        if s.kind == "options" {
            let Body::Nodes(nodes) = &s.body else {
                continue;
            };
            for opt in nodes {
                if opt.block.is_some() || !b.globals.apply(opt)? {
                    return Err(ConfigError::unknown(
                        opt.pos,
                        "global option",
                        &opt.name,
                        "",
                        Globals::NAMES,
                    ));
                }
            }
        }
    }
    for s in &config.statements {
        let kind: &'static str = match s.kind.as_str() {
            "source" => "source",
            "destination" => "destination",
            "filter" => "filter",
            "template" => "template",
            "rewrite" => "rewrite",
            "parser" => "parser",
            _ => continue,
        };
        let (name, pos) = s
            .name
            .clone()
            .expect("the parser requires names on these statements");
        if b.statements.insert((kind, name.clone()), s).is_some() {
            return Err(ConfigError::new(pos, format!("duplicate {kind} '{name}'")));
        }
    }
    // Names first: templates refer to filters (in conditions) and to the templates before
    // them; destinations, rewrites and parsers to both.
    let mut names = Names::default();
    for s in config.statements.iter().filter(|s| s.kind == "filter") {
        if let (Some((name, _)), Body::Filter(expr)) = (&s.name, &s.body) {
            names.filters.insert(name.clone(), expr.clone());
        }
    }
    for s in config.statements.iter().filter(|s| s.kind == "template") {
        let (name, _) = s.name.clone().expect("named");
        let t = template_statement(s, &names)?;
        names.templates.insert(name, t);
    }
    b.globals.file_template.resolve("file-template", &names)?;
    b.globals.proto_template.resolve("proto-template", &names)?;
    b.names = Arc::new(names);
    for s in config.statements.iter().filter(|s| s.kind == "source") {
        let (name, pos) = s.name.clone().expect("named");
        b.source(&name, pos)?;
    }
    for s in config.statements.iter().filter(|s| s.kind == "destination") {
        let (name, pos) = s.name.clone().expect("named");
        b.destination(&name, pos)?;
    }
    for s in config.statements.iter().filter(|s| s.kind == "filter") {
        let (name, pos) = s.name.clone().expect("named");
        b.filter(&name, pos)?;
    }
    for s in config.statements.iter().filter(|s| s.kind == "rewrite") {
        let (name, pos) = s.name.clone().expect("named");
        b.rewrite(&name, pos)?;
    }
    for s in config.statements.iter().filter(|s| s.kind == "parser") {
        let (name, pos) = s.name.clone().expect("named");
        b.parser(&name, pos)?;
    }
    let mut paths = Vec::new();
    // Each top-level path's books (`sluice ctl ledger`): `path;log#N;FILE:LINE;a;processed`
    // (offered to it) and `…;routed` (went through it).
    let mut path_counters = Vec::new();
    for s in config.statements.iter().filter(|s| s.kind == "log") {
        let Body::Nodes(nodes) = &s.body else {
            continue;
        };
        paths.push(LogPath::build(nodes, true, &mut b)?);
        let (file, line, _) = config.map.origin(s.pos.line);
        let (id, at) = (format!("log#{}", paths.len()), format!("{file}:{line}"));
        path_counters.push((
            b.stats.counter("path", &id, &at, "processed"),
            b.stats.counter("path", &id, &at, "routed"),
        ));
    }
    let router = Router::new(paths);
    // Correlation contexts (open, ended, ended early) of each stateful parser, numbered in
    // the order the log paths name them: `parser;db-parser#0;;contexts`.
    let mut numbered = 0;
    for stateful in router.stateful() {
        for (parser, counters) in stateful.counters() {
            for (kind, value) in counters {
                b.stats
                    .register("parser", &format!("{parser}#{numbered}"), "", kind, value);
            }
            numbered += 1;
        }
    }
    if b.globals.stats_level >= 3 {
        // Level 3 shows every facility and severity, counted or not, as syslog-ng does.
        let facilities = (0..24).map(|f| f.to_string()).chain(["other".to_string()]);
        for f in facilities {
            b.stats.counter("src.facility", "", &f, "processed");
        }
        for s in 0..8 {
            b.stats
                .counter("src.severity", "", &s.to_string(), "processed");
        }
    }
    let read = std::mem::take(&mut *b.names.read.lock().expect("read lock"));
    let mut notes: Vec<String> = version_note(config).into_iter().collect();
    notes.append(&mut b.names.notes.lock().expect("notes lock"));
    let mut sources = Vec::new();
    for (id, source) in &b.sources {
        if router.is_used(*id) {
            sources.push(source.clone());
            continue;
        }
        let note = format!(
            "source '{}' is not used by any log path; it is not started",
            source.source_name()
        );
        // Not said of `internal()`, which a configuration may hold for later use.
        if source.place().kind != internal::KIND && !notes.contains(&note) {
            notes.push(note);
        }
    }
    Ok(Pipeline {
        globals: b.globals.clone(),
        sources,
        fingerprints: Fingerprints {
            shared: config
                .statements
                .iter()
                .filter(|s| matches!(s.kind.as_str(), "options" | "template"))
                .map(|s| s.fingerprint())
                .collect(),
            sources: config
                .statements
                .iter()
                .filter(|s| s.kind == "source")
                .filter_map(|s| Some((s.name.clone()?.0, s.fingerprint())))
                .collect(),
            destinations: (0..b.destinations.len())
                .map(|id| {
                    let name = b
                        .dest_ids
                        .iter()
                        .find(|(_, &d)| d as usize == id)
                        .map_or("", |(n, _)| n.as_str());
                    let print = config
                        .statements
                        .iter()
                        .find(|s| {
                            s.kind == "destination"
                                && s.name.as_ref().is_some_and(|(n, _)| n == name)
                        })
                        .map(Statement::fingerprint);
                    (name.to_string(), print)
                })
                .collect(),
        },
        dispatcher: Arc::new(Dispatcher {
            router,
            generation,
            numbering: b
                .destinations
                .iter()
                .any(|d| d.numbers_local())
                .then(Mutex::default),
            ingests: b
                .sources
                .iter()
                .filter_map(|(_, s)| s.reader())
                .filter(|r| !r.listener.is_empty())
                .map(|r| (r.listener.clone(), r.ingest.clone()))
                .collect(),
            source_ids: b
                .source_ids
                .iter()
                .map(|(n, &id)| (Arc::from(n.as_str()), id))
                .collect(),
            destinations: b.destinations,
            counted: DispatchCounters {
                level: b.globals.stats_level,
                registry: b.stats.clone(),
                received: b.stats.counter("center", "", "received", "processed"),
                unrouted: b.stats.counter("center", "", "unrouted", "processed"),
                queued: b.stats.counter("center", "", "queued", "processed"),
                destinations: b.dest_counted,
                paths: path_counters,
            },
        }),
        stats: b.stats,
        config_text: Arc::from(sluice_config::without_secrets(&config.map.text)),
        notes,
        read: ReadFiles {
            config: Arc::new(config.clone()),
            state: ReadFiles::state_of(&read),
            paths: read,
        },
    })
}

/// What to say of the configuration's `@version`: syslog-ng 3.38 refuses a file without one
/// (an empty file too), runs an older one in a compatibility mode and a 4.x one with
/// experimental behaviours; sluice reads each as 3.38's language and says so.
fn version_note(config: &Config) -> Option<String> {
    const READ_AS: (u32, u32) = (3, 38);
    let Some(version) = &config.version else {
        return Some(if config.statements.is_empty() {
            "the configuration is empty: nothing is received or written (syslog-ng 3.38 \
             refuses an empty file)"
                .to_string()
        } else {
            "the configuration has no @version: it is read as syslog-ng 3.38's language \
             (syslog-ng 3.38 refuses it); put '@version: 3.38' on its first line"
                .to_string()
        });
    };
    let number = |s: Option<&str>| s.and_then(|s| s.trim().parse::<u32>().ok());
    let mut parts = version.split('.');
    let (major, minor) = (number(parts.next())?, number(parts.next()).unwrap_or(0));
    match (major, minor).cmp(&READ_AS) {
        std::cmp::Ordering::Equal => None,
        std::cmp::Ordering::Greater => Some(format!(
            "the configuration is written for syslog-ng {version}: sluice reads syslog-ng \
             3.38's language, so what later versions changed may be refused or read the 3.38 way \
             (see docs/compatibility.md)"
        )),
        std::cmp::Ordering::Less => Some(format!(
            "the configuration is written for syslog-ng {version}: sluice reads it as syslog-ng \
             3.38 does and has no compatibility mode for older versions; review what changed \
             since {version}, then change @version to 3.38"
        )),
    }
}

impl Builder<'_> {
    fn statement(
        &self,
        kind: &'static str,
        name: &str,
        pos: Pos,
    ) -> Result<&Statement, ConfigError> {
        self.statements
            .get(&(kind, name.to_string()))
            .copied()
            .ok_or_else(|| {
                let known: Vec<&str> = self
                    .statements
                    .keys()
                    .filter(|(k, _)| *k == kind)
                    .map(|(_, n)| n.as_str())
                    .collect();
                let err = ConfigError::new(pos, format!("{kind} '{name}' is not defined"));
                match ConfigError::unknown(pos, kind, name, "", &known)
                    .help
                    .first()
                {
                    Some(help) if !known.is_empty() => err.with_help(help.clone()),
                    _ => err,
                }
            })
    }
}

/// A `template` statement, referring to the templates before it and the filters.
fn template_statement(s: &Statement, names: &Names) -> Result<Template, ConfigError> {
    {
        match &s.body {
            Body::Text(v) => {
                Template::compile_in(&v.text, names).map_err(|e| ConfigError::new(v.pos, e))
            }
            Body::Nodes(nodes) => {
                let mut template = None;
                let mut escape = false;
                for n in nodes {
                    match n.key().as_str() {
                        "template" => {
                            let v = n.value()?;
                            template = Some(
                                Template::compile_in(&v.text, names)
                                    .map_err(|e| ConfigError::new(v.pos, e))?,
                            );
                        }
                        "template_escape" => escape = n.bool()?,
                        _ => {
                            return Err(ConfigError::unknown(
                                n.pos,
                                "template option",
                                &n.name,
                                "",
                                &["template", "template_escape"],
                            ))
                        }
                    }
                }
                let mut t = template.ok_or_else(|| {
                    ConfigError::new(s.pos, "a template statement needs template(\"…\")")
                })?;
                t.escape = escape;
                Ok(t)
            }
            Body::Filter(_) | Body::If(_) => {
                unreachable!("filter and if bodies belong to filter statements and log paths")
            }
        }
    }
}

impl Builder<'_> {
    /// Builds every driver of a source body under the name `name`.
    fn source_body(&mut self, name: &str, body: &Body, pos: Pos) -> Result<SourceId, ConfigError> {
        let Body::Nodes(nodes) = body else {
            return Err(ConfigError::new(
                pos,
                "a source body holds drivers such as tcp() or udp()",
            ));
        };
        let id = self.source_ids.len() as SourceId;
        let source_name: Arc<str> = Arc::from(name);
        self.source_ids.insert(name.to_string(), id);
        for (n, node) in nodes.iter().enumerate() {
            self.source_driver(node, id, &source_name, n)?;
        }
        Ok(id)
    }

    fn source_driver(
        &mut self,
        node: &Node,
        id: SourceId,
        name: &Arc<str>,
        n: usize,
    ) -> Result<(), ConfigError> {
        let cx = SourceContext {
            globals: &self.globals,
            stats: &self.stats,
            name,
            id,
            n,
        };
        let source = registry::build(node, &cx)?;
        let place = source.place();
        // Listeners at one address fail to bind; stdin() and internal() would be read twice.
        if source.one_per_configuration() && self.sources.iter().any(|(_, s)| s.place() == place) {
            return Err(ConfigError::new(
                node.pos,
                format!("only one {}() source can be used", node.name),
            ));
        }
        self.sources.push((id, source));
        Ok(())
    }

    fn destination_body(
        &mut self,
        name: &str,
        body: &Body,
        pos: Pos,
    ) -> Result<DestId, ConfigError> {
        let Body::Nodes(nodes) = body else {
            return Err(ConfigError::new(
                pos,
                "a destination body holds drivers such as file()",
            ));
        };
        let mut drivers: Vec<Arc<dyn Destination>> = Vec::new();
        for (n, node) in nodes.iter().enumerate() {
            drivers.push(self.destination_driver(node, name, n)?);
        }
        let id = self.destinations.len() as DestId;
        self.dest_counted
            .push(self.stats.counter("destination", name, "", "processed"));
        let dest: Arc<dyn Destination> = if drivers.len() == 1 {
            drivers.pop().expect("one driver")
        } else {
            Arc::new(Group(drivers))
        };
        self.destinations.push(dest);
        self.dest_ids.insert(name.to_string(), id);
        Ok(id)
    }

    fn destination_driver(
        &mut self,
        node: &Node,
        name: &str,
        n: usize,
    ) -> Result<Arc<dyn Destination>, ConfigError> {
        let cx = DestinationContext {
            globals: &self.globals,
            names: &self.names,
            stats: &self.stats,
            name,
            n,
        };
        destination_registry::build(node, &cx)
    }

    fn anon(&mut self, kind: &str) -> String {
        let n = self.anon;
        self.anon += 1;
        format!("#anon-{kind}{n}")
    }
}

impl PathContext for Builder<'_> {
    fn names(&self) -> Arc<Names> {
        self.names.clone()
    }

    fn source(&mut self, name: &str, pos: Pos) -> Result<SourceId, ConfigError> {
        if let Some(id) = self.source_ids.get(name) {
            return Ok(*id);
        }
        let s = self.statement("source", name, pos)?;
        let body = s.body.clone();
        self.source_body(name, &body, pos)
    }

    fn inline_source(&mut self, body: &Body, pos: Pos) -> Result<SourceId, ConfigError> {
        let name = self.anon("source");
        self.source_body(&name, body, pos)
    }

    fn destination(&mut self, name: &str, pos: Pos) -> Result<DestId, ConfigError> {
        if let Some(id) = self.dest_ids.get(name) {
            return Ok(*id);
        }
        let s = self.statement("destination", name, pos)?;
        let body = s.body.clone();
        self.destination_body(name, &body, pos)
    }

    fn inline_destination(&mut self, body: &Body, pos: Pos) -> Result<DestId, ConfigError> {
        let name = self.anon("destination");
        self.destination_body(&name, body, pos)
    }

    fn filter(&mut self, name: &str, pos: Pos) -> Result<Arc<Filter>, ConfigError> {
        if let Some(f) = self.filters.get(name) {
            return Ok(f.clone());
        }
        if self.filters_building.iter().any(|n| n == name) {
            return Err(ConfigError::new(
                pos,
                format!("filter '{name}' refers to itself"),
            ));
        }
        let s = self.statement("filter", name, pos)?;
        let Body::Filter(expr) = &s.body else {
            unreachable!("filter statements have filter bodies")
        };
        let expr = expr.clone();
        self.filters_building.push(name.to_string());
        let names = self.names.clone();
        let compiled = filter::compile(&expr, &names, &mut |n, p| self.filter(n, p));
        self.filters_building.pop();
        let f = Arc::new(compiled?);
        self.filters.insert(name.to_string(), f.clone());
        Ok(f)
    }

    fn rewrite(&mut self, name: &str, pos: Pos) -> Result<Arc<Rewrite>, ConfigError> {
        if let Some(r) = self.rewrites.get(name) {
            return Ok(r.clone());
        }
        let s = self.statement("rewrite", name, pos)?;
        let (body, pos) = (s.body.clone(), s.pos);
        let names = self.names.clone();
        let r = Arc::new(Rewrite::compile(&body, pos, &names, &mut |n, p| {
            self.filter(n, p)
        })?);
        self.rewrites.insert(name.to_string(), r.clone());
        Ok(r)
    }

    /// From `stats-level(1)` on, named filters count `matched`/`not_matched` and named parsers
    /// `discarded`, under syslog-ng's names.
    fn tally(&mut self, kind: &str, name: &str) -> Option<Arc<Tally>> {
        if self.globals.stats_level < 1 {
            return None;
        }
        Some(Arc::new(match kind {
            "filter" => Tally {
                passed: Some(self.stats.counter("filter", name, "", "matched")),
                stopped: self.stats.counter("filter", name, "", "not_matched"),
            },
            _ => Tally {
                passed: None,
                stopped: self.stats.counter("parser", name, "", "discarded"),
            },
        }))
    }

    fn parser(&mut self, name: &str, pos: Pos) -> Result<Arc<Parsers>, ConfigError> {
        if let Some(p) = self.parsers.get(name) {
            return Ok(p.clone());
        }
        let s = self.statement("parser", name, pos)?;
        let p = Arc::new(Parsers::compile(&s.body, s.pos, &self.names)?);
        self.parsers.insert(name.to_string(), p.clone());
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn built(text: &str) -> Result<Pipeline, String> {
        let config = sluice_config::load_str("t.conf", text).map_err(|e| e.render())?;
        build(&config).map_err(|e| e.render(&config.map))
    }

    /// Named templates and filters belong to the configuration that defines them, whatever
    /// thread builds it and whatever was built before (a reload builds on another thread).
    #[test]
    fn names_belong_to_their_configuration() {
        let defines = r#"@version: 3.38
            filter f_app { program("app"); };
            template t_a { template("$(if (filter(f_app)) A B) $MSG\n"); };
            destination d { file("/nonexistent/x" template("$(template t_a)")); };"#;
        built(defines).unwrap();
        let refers = r#"@version: 3.38
            destination d { file("/nonexistent/x" template("$(template t_a)")); };"#;
        let elsewhere = std::thread::spawn(move || built(refers).map(drop));
        for result in [built(refers).map(drop), elsewhere.join().unwrap()] {
            let e = result.unwrap_err();
            assert!(e.contains("no template statement has that name"), "{e}");
        }
    }

    /// A template refers to the templates before it, not to those after.
    #[test]
    fn a_template_refers_to_the_templates_before_it() {
        built(
            r#"@version: 3.38
            template t_a { template("a"); };
            template t_b { template("$(template t_a)b"); };"#,
        )
        .unwrap();
        let e = built(
            r#"@version: 3.38
            template t_b { template("$(template t_a)b"); };
            template t_a { template("a"); };"#,
        )
        .map(drop)
        .unwrap_err();
        assert!(e.contains("t_a"), "{e}");
    }

    /// `file-template()` and `proto-template()` name template statements, wherever they
    /// stand; a name no statement has is refused at its place. syslog-ng's other MARK
    /// modes would send messages sluice does not make yet: refused, not ignored.
    #[test]
    fn global_templates_name_statements_and_mark_modes_that_send_nothing_are_read() {
        built(
            r#"@version: 3.38
            options { file-template(t_f); proto-template(t_p); mark-freq(3600); mark-mode(internal); };
            template t_f { template("$MSG\n"); };
            template t_p { template("$MSG\n"); };"#,
        )
        .unwrap();
        let e = built(
            r#"@version: 3.38
            options { file-template("$MSG\n"); };"#,
        )
        .map(drop)
        .unwrap_err();
        assert!(
            e.contains("file-template() names a template statement"),
            "{e}"
        );
        assert!(e.contains("^"), "the error shows where: {e}");
        let e = built(
            r#"@version: 3.38
            options { mark-mode(dst-idle); };"#,
        )
        .map(drop)
        .unwrap_err();
        assert!(e.contains("mark-mode(dst-idle)"), "{e}");
        let e = built(
            r#"@version: 3.38
            options { mark-mode(sometimes); };"#,
        )
        .map(drop)
        .unwrap_err();
        assert!(e.contains("unknown mark mode 'sometimes'"), "{e}");
    }
}
