//! Parsers, compiled from syslog-ng's `parser` statements: `kv-parser()`, `json-parser()`,
//! `csv-parser()`, `regexp-parser()`, `date-parser()`, `tags-parser()` and `syslog-parser()`.
//!
//! A parser reads a template (`$MSG` unless `template()` says otherwise) and sets name-value
//! pairs on the message. One that fails (`json-parser()` on text that is not a JSON object)
//! drops the message from its log path only, as in syslog-ng, and counts it in `failed`. Like a
//! rewrite, a parser changes the router's private copy of the message (see [`crate::path`]).
//!
//! Each parser is one [`ParserDriver`] in [`DRIVERS`]: its name, the options it reads (a
//! [`sluice_config::declared`] table, from which option errors come) and its build function.
//!
//! When the input is the received message text itself, values that stand as they were written
//! are stored as spans of the received frame: parsing copies only what escapes changed.

pub mod csv;
pub mod db;
pub mod grouping;
pub mod json;
pub mod kv;

use crate::message::LogMessage;
use crate::template::{Names, Template};
use crate::values::{name_id, name_id_of};
use sluice_config::declared::{self, read, Declared, Options};
use sluice_config::{Body, ConfigError, Node, Pos};
use sluice_protocol::{Span, Text};
use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};

/// The parsers of one `parser` statement (or inline `parser { … }`), applied in order.
#[derive(Debug)]
pub struct Parsers {
    pub parsers: Vec<std::sync::Arc<Parser>>,
}

/// Messages parsers made (correlation actions), each with the index of the parser that made
/// it in its [`Parsers`]: it goes on from the parser after that one.
pub type Made<'r> = Vec<(usize, LogMessage<'r>)>;

#[derive(Debug)]
pub struct Parser {
    kind: Kind,
    /// `template()`: what to parse; `$MSG` when absent.
    template: Option<Template>,
    prefix: String,
    /// Messages this parser dropped from their path.
    pub failed: AtomicU64,
}

#[derive(Debug)]
enum Kind {
    Kv {
        value_separator: u8,
        pair_separator: Vec<u8>,
        stray_words_into: Option<crate::values::NameId>,
    },
    Json {
        marker: Option<String>,
        extract_prefix: Option<String>,
        key_delimiter: char,
    },
    /// `regexp-parser(patterns(…))`: the first pattern that matches sets `$0`, `$1`… and a
    /// pair `<prefix><name>` for each named group.
    Regexp(Vec<NamedGroups>),
    /// `date-parser(format(…) time-zone(…) time-stamp(stamp|recvd))`: the first format that
    /// reads the whole input sets the message's time.
    Date {
        formats: Vec<String>,
        zone: Option<crate::time::Zone>,
        received: bool,
    },
    /// `tags-parser()`: the input is a list of tags to set.
    Tags,
    /// `syslog-parser(flags(…) drop-invalid())`: the input parsed as a syslog message; what it
    /// holds replaces the message's header fields and text.
    Syslog {
        options: Box<sluice_protocol::ParseOptions>,
        drop_invalid: bool,
    },
    Csv {
        options: csv::Options,
        /// The pair each column sets (`prefix` + column name).
        names: Vec<crate::values::NameId>,
        drop_invalid: bool,
    },
    /// `db-parser(file(…))`: classification by a pattern database.
    Db(db::DbParser),
    /// `grouping-by(key(…) timeout(…) aggregate(…))`.
    Grouping(Box<grouping::GroupingBy>),
}

/// A compiled pattern with the pair each named group sets.
type NamedGroups = (regex::bytes::Regex, Vec<(usize, crate::values::NameId)>);

/// A parser as syslog-ng names it: the options it reads, a valid use of it (for its table
/// test) and how it is made from them. Every parser reads `template()`.
struct ParserDriver {
    name: &'static str,
    /// What it does, for the configuration reference.
    about: &'static str,
    options: &'static [Declared],
    sample: &'static str,
    build: fn(&Node, &mut Options, &Names) -> Result<Built, ConfigError>,
}

/// What a parser's build makes: its kind, and the prefix of the pairs it sets.
struct Built {
    kind: Kind,
    prefix: String,
}

const TEMPLATE: Declared =
    read("template", "template(\"$MSG\")").about("the parser's input, a template", "$MSG");
const PREFIX: Declared = read("prefix", "prefix(\".p.\")").about(
    "a parser: what the names of the pairs it sets start with",
    "driver's",
);

/// The parsers of this version; others syslog-ng has are refused as not yet supported.
static DRIVERS: &[ParserDriver] = &[
    ParserDriver {
        name: "kv_parser",
        about: "`key=value` pairs of a message into name-value pairs.",
        options: &[
            TEMPLATE,
            PREFIX,
            read("value_separator", "value-separator(\":\")").about("what separates a key from its value", "="),
            read("pair_separator", "pair-separator(\";\")").about("what separates pairs", "space"),
            read(
                "extract_stray_words_into",
                "extract-stray-words-into(\"stray\")",
            ).about("the pair that gets the words that are not `key=value`", "none"),
        ],
        sample: "kv-parser()",
        build: kv_parser,
    },
    ParserDriver {
        name: "json_parser",
        about: "A JSON object into name-value pairs.",
        options: &[
            TEMPLATE,
            PREFIX,
            read("marker", "marker(\"@cee:\")").about("the text before the JSON (`@cee:`)", "none"),
            read("extract_prefix", "extract-prefix(\"a.b\")").about("the part of the object (a dotted path) to take", "the whole object"),
            read("key_delimiter", "key-delimiter(\"/\")").about("what joins the names of nested members", "."),
        ],
        sample: "json-parser()",
        build: json_parser,
    },
    ParserDriver {
        name: "csv_parser",
        about: "Columns (separated and quoted) into name-value pairs.",
        options: &[
            TEMPLATE,
            PREFIX,
            read("columns", "columns(\"b\")").about("the names of the columns, a pair each", "required"),
            read("delimiters", "delimiters(chars(\",\"))").about("the characters (`chars()`) or strings (`strings()`) that end a column", "space"),
            read("quotes", "quotes(\"'\")").about("characters that quote a column", "\" and '"),
            read("quote_pairs", "quote-pairs(\"[]\")").about("pairs of characters that quote a column", "none"),
            read("null", "null(\"-\")").about("the column text that means no value", "none"),
            read("flags", "flags(greedy)").about("`greedy` (the last column takes the rest), `strip-whitespace`, `escape-backslash`, `drop-invalid`…", "none"),
            read("dialect", "dialect(escape-backslash)").about("how quotes inside a column are escaped", "escape-none"),
            read("drop_invalid", "drop-invalid(yes)").about("a parser drops messages it cannot parse instead of passing them", "no"),
        ],
        sample: "csv-parser(columns(\"a\"))",
        build: csv_parser,
    },
    ParserDriver {
        name: "regexp_parser",
        about: "Named groups of the first regular expression that matches into name-value pairs.",
        options: &[
            TEMPLATE,
            PREFIX,
            read("patterns", "patterns(\"(?<y>b)\")").about("regular expressions tried in order, named groups set pairs", "required"),
            read("type", "type(pcre)").about("how the pattern matches: `pcre`, `string`, `glob`", "pcre"),
            read("flags", "flags(ignore-case)").about("how the pattern matches: `ignore-case`, `utf8`…", "none"),
        ],
        sample: "regexp-parser(patterns(\"(?<x>a)\"))",
        build: regexp_parser,
    },
    ParserDriver {
        name: "date_parser",
        about: "A time written in the message into its timestamp.",
        options: &[
            TEMPLATE,
            read("format", "format(\"%d/%b/%Y:%H:%M:%S %z\")").about("the strptime formats tried in order", "%FT%T%z"),
            read("time_zone", "time-zone(\"UTC\")").about("the time zone of stamps read or written (`date-parser()`: of the text)", "the machine's"),
            read("time_stamp", "time-stamp(recvd)").about("the stamp it sets, `stamp` or `recvd`", "stamp"),
            read("flags", "flags()").about("`guess-timezone`: a stamp without a zone takes the one that puts it nearest now", "none"),
        ],
        sample: "date-parser()",
        build: date_parser,
    },
    ParserDriver {
        name: "tags_parser",
        about: "A list of tags into the message's tags.",
        options: &[TEMPLATE],
        sample: "tags-parser()",
        build: |_, _, _| {
            Ok(Built {
                kind: Kind::Tags,
                prefix: String::new(),
            })
        },
    },
    ParserDriver {
        name: "db_parser",
        about: "Classifies messages with a pattern database (PatternDB) and correlates them.",
        options: &[
            TEMPLATE,
            PREFIX,
            read("file", "file(\"/tmp/sluice-table-test-patterndb.xml\")").about("the pattern database (a file or a directory of them)", "/var/lib/syslog-ng/patterndb.xml"),
            read("drop_unmatched", "drop-unmatched(yes)").about("`db-parser()` drops messages no rule matches", "no"),
            read("program_template", "program-template(\"$HOST\")").about("the program that chooses the ruleset", "$PROGRAM"),
            read("message_template", "message-template(\"$MSG\")").about("the text to classify", "$MSG"),
            read("inject_mode", "inject-mode(pass-through)").about("where a correlating parser's messages go: `pass-through`, `aggregate-only`, `internal`", "pass-through"),
            read("max_contexts", "max-contexts(1000)").about("correlation contexts a parser keeps open; past it the one nearest its end ends early", "1000000"),
        ],
        // The table test writes this file first.
        sample: "db-parser(file(\"/tmp/sluice-table-test-patterndb.xml\"))",
        build: db_parser,
    },
    ParserDriver {
        name: "grouping_by",
        about: "Groups messages by a key into contexts and makes one message of each.",
        options: &[
            TEMPLATE,
            read("key", "key(\"$HOST\")").about("the template that names a message's context", "required"),
            read("sort_key", "sort-key(\"$SEQNUM\")").about("the order of a context's messages when it ends", "arrival"),
            read("scope", "scope(host)").about("which messages share a key: `process`, `program`, `host`, `global`", "global"),
            read("timeout", "timeout(10)").about("seconds a context stays open after its last message", "required"),
            read("trigger", "trigger(message(\"end\"))").about("a filter over a context; when it holds the context ends at once", "none"),
            read("where", "where(program(\"sshd\"))").about("only messages this filter matches are grouped", "every message"),
            read("having", "having(\"$(context-length)\" > \"1\")").about("a filter over a context's messages; its aggregate is made only when it holds", "always"),
            read("aggregate", "aggregate(value(\"MESSAGE\" \"$(context-length)\") tags(\"t\") inherit-mode(last-message))").about("the message a context makes when it ends: `value(NAME TEMPLATE)`, `tags()`, `inherit-mode()`", "required"),
            read("inject_mode", "inject-mode(aggregate-only)").about("where a correlating parser's messages go: `pass-through`, `aggregate-only`, `internal`", "pass-through"),
            read("max_contexts", "max-contexts(1000)").about("correlation contexts a parser keeps open; past it the one nearest its end ends early", "1000000"),
        ],
        sample: "grouping-by(key(\"$PID\") timeout(5) aggregate(value(\"MESSAGE\" \"x\")))",
        build: grouping_by,
    },
    ParserDriver {
        name: "syslog_parser",
        about: "A syslog message written in a message (or a template) into its fields.",
        options: &[
            TEMPLATE,
            read("flags", "flags(no-hostname)").about("how the message is read, as a source's `flags()`: `no-hostname`, `syslog-protocol`, `assume-utf8`…", "none"),
            read("drop_invalid", "drop-invalid(yes)").about("a parser drops messages it cannot parse instead of passing them", "no"),
        ],
        sample: "syslog-parser()",
        build: syslog_parser,
    },
];
/// syslog-ng's parsers (modules and SCL, 3.38 and a few of 4.x) that sluice has not yet.
const NOT_YET: &[&str] = &[
    "xml",
    "linux_audit_parser",
    "apache_accesslog_parser",
    "checkpoint_parser",
    "cisco_parser",
    "python",
    "group_lines",
    "map_value_pairs",
    "add_contextual_data",
    "geoip2",
    "geoip",
    "panos_parser",
    "sudo_parser",
    "iptables_parser",
    "ewmm_parser",
    "snmptrapd_parser",
    "websense_parser",
    "fortigate_parser",
    "netskope_parser",
    "mariadb_audit_parser",
    "windows_eventlog_xml_parser",
    "extract_solaris_msghdr",
    "osquery",
    "metrics_probe",
    "example_parser",
];

thread_local! {
    /// The rendered template input and the names being built, reused from message to message.
    static SCRATCH: RefCell<(Vec<u8>, Vec<u8>)> = RefCell::default();
}

impl Parsers {
    pub fn compile(body: &Body, pos: Pos, names: &Names) -> Result<Parsers, ConfigError> {
        let Body::Nodes(nodes) = body else {
            return Err(ConfigError::new(
                pos,
                "a parser holds drivers such as kv-parser()",
            ));
        };
        if nodes.is_empty() {
            return Err(ConfigError::new(
                pos,
                "a parser needs a driver such as kv-parser()",
            ));
        }
        let parsers = nodes
            .iter()
            .map(|n| Parser::compile(n, names).map(std::sync::Arc::new))
            .collect::<Result<_, _>>()?;
        Ok(Parsers { parsers })
    }

    /// Runs the parsers from the `from`th on, in order; `false` as soon as one fails.
    /// Messages they make are pushed to `made`.
    pub fn apply_from<'r>(
        &self,
        from: usize,
        msg: &mut LogMessage<'r>,
        made: &mut Made<'r>,
    ) -> bool {
        let mut new = Vec::new();
        for (i, p) in self.parsers.iter().enumerate().skip(from) {
            let parsed = p.apply(msg, &mut new);
            made.extend(new.drain(..).map(|m| (i, m)));
            if !parsed {
                return false;
            }
        }
        true
    }

    /// Whether a parser keeps state from message to message (a correlating `db-parser()`,
    /// `grouping-by()`):
    /// each place in the configuration that names it then needs an [`Parsers::instance`].
    pub fn is_stateful(&self) -> bool {
        self.parsers.iter().any(|p| p.is_stateful())
    }

    /// The same parsers, with a state of their own for those that keep one.
    pub fn instance(&self) -> Parsers {
        let parsers = self
            .parsers
            .iter()
            .map(|p| {
                let kind = match &p.kind {
                    Kind::Db(db) if db.correlation.is_some() => Kind::Db(db.instance()),
                    Kind::Grouping(g) => Kind::Grouping(Box::new(g.instance())),
                    _ => return p.clone(),
                };
                std::sync::Arc::new(Parser {
                    kind,
                    template: p.template.clone(),
                    prefix: p.prefix.clone(),
                    failed: AtomicU64::new(0),
                })
            })
            .collect();
        Parsers { parsers }
    }

    /// The correlation counters of the parsers that keep state, each with the parser's name
    /// (`db-parser`, `grouping-by`).
    pub fn counters(&self) -> Vec<(&'static str, crate::correlation::Counters)> {
        self.parsers
            .iter()
            .filter_map(|p| match &p.kind {
                Kind::Db(db) => db
                    .correlation
                    .as_ref()
                    .map(|c| ("db-parser", c.state.counters())),
                Kind::Grouping(g) => Some(("grouping-by", g.state.counters())),
                _ => None,
            })
            .collect()
    }

    /// Takes over the open contexts of `old`'s parsers (a reload's predecessor) that are
    /// the same as these (`identity`), each predecessor once: `taken` marks them.
    pub fn adopt(&self, old: &[&Parsers], taken: &mut Vec<bool>) {
        let olds: Vec<&Parser> = old
            .iter()
            .flat_map(|p| p.parsers.iter().map(|p| &**p))
            .filter(|p| p.is_stateful())
            .collect();
        taken.resize(olds.len(), false);
        for new in self.parsers.iter().filter(|p| p.is_stateful()) {
            let found = olds
                .iter()
                .zip(taken.iter_mut())
                .find(|(o, t)| !**t && o.identity() == new.identity());
            let Some((old, taken)) = found else {
                continue;
            };
            match (&new.kind, &old.kind) {
                (Kind::Db(n), Kind::Db(o)) => {
                    if let (Some(n), Some(o)) = (&n.correlation, &o.correlation) {
                        n.state.adopt(&o.state);
                    }
                }
                (Kind::Grouping(n), Kind::Grouping(o)) => n.state.adopt(&o.state),
                _ => continue,
            }
            *taken = true;
        }
    }

    /// Moves the clocks of the parsers that keep state by the wall clock (µs; `None`: ends
    /// every context); `f` gets what the contexts that ended made, with the index of the
    /// parser that made them.
    pub fn tick(
        &self,
        now_micros: Option<i64>,
        f: &mut dyn FnMut(usize, &mut Vec<LogMessage<'_>>),
    ) {
        for (i, p) in self.parsers.iter().enumerate() {
            match &p.kind {
                Kind::Db(db) => db.tick(now_micros, &mut |made| f(i, made)),
                Kind::Grouping(g) => g.tick(now_micros, &mut |made| f(i, made)),
                _ => {}
            }
        }
    }
}

impl Parser {
    fn compile(node: &Node, names: &Names) -> Result<Parser, ConfigError> {
        let driver = declared::find(
            node,
            ("parser", "parser"),
            DRIVERS,
            |d| std::slice::from_ref(&d.name),
            NOT_YET,
        )?;
        if let Some(v) = node.values().next() {
            return Err(ConfigError::new(
                v.pos,
                format!(
                    "{}() takes options only, such as prefix(\".kv.\")",
                    node.name
                ),
            ));
        }
        let mut o = Options::check(node, driver.options)?;
        let template = match o.last("template") {
            Some(opt) => {
                let v = opt.value()?;
                Some(Template::compile_in(&v.text, names).map_err(|e| ConfigError::new(v.pos, e))?)
            }
            None => None,
        };
        let Built { kind, prefix } = (driver.build)(node, &mut o, names)?;
        o.finish()?;
        Ok(Parser {
            kind,
            template,
            prefix,
            failed: AtomicU64::new(0),
        })
    }

    /// What a reload's parser must be to take this one's state over.
    fn identity(&self) -> Option<&str> {
        match &self.kind {
            Kind::Db(db) => Some(&db.identity),
            Kind::Grouping(g) => Some(&g.identity),
            _ => None,
        }
    }

    /// Whether the parser keeps state from message to message.
    fn is_stateful(&self) -> bool {
        match &self.kind {
            Kind::Db(db) => db.correlation.is_some(),
            Kind::Grouping(_) => true,
            _ => false,
        }
    }

    /// Parses `msg`'s input into pairs on `msg`; `false` (and counted) when the parser fails.
    /// Messages it makes are pushed to `made`.
    pub fn apply<'r>(&self, msg: &mut LogMessage<'r>, made: &mut Vec<LogMessage<'r>>) -> bool {
        match &self.kind {
            Kind::Db(db) => return db.apply(self.template.as_ref(), msg, made),
            Kind::Grouping(g) => return g.apply(msg),
            _ => {}
        }
        SCRATCH.with_borrow_mut(|(rendered, name)| {
            // Where the input is: the received text itself (values can be spans of it), or a
            // rendering of the template.
            let in_frame = match (&self.template, &msg.fields.message) {
                (None, Text::Span(span)) => Some(*span),
                _ => None,
            };
            let input: &[u8] = match (&self.template, in_frame) {
                (_, Some(span)) => span.of(msg.raw),
                (Some(t), None) => {
                    rendered.clear();
                    t.append(msg, 0, rendered);
                    rendered
                }
                (None, None) => {
                    rendered.clear();
                    rendered.extend_from_slice(msg.message());
                    rendered
                }
            };
            let text_of = |range: std::ops::Range<usize>| match in_frame {
                Some(span) => Text::Span(Span::new(
                    span.start as usize + range.start,
                    span.start as usize + range.end,
                )),
                None => Text::owned(&input[range]),
            };
            // A parser that fails part way leaves pairs on the router's copy of the message,
            // which its path then drops.
            let values = &mut msg.values;
            values.reserve(16);
            let ok = match &self.kind {
                Kind::Kv {
                    value_separator,
                    pair_separator,
                    stray_words_into,
                } => {
                    let mut scanner = kv::Scanner::new(
                        input,
                        *value_separator,
                        pair_separator,
                        stray_words_into.is_some(),
                    );
                    while let Some((key, value)) = scanner.next_pair() {
                        let id = name_id_of(self.prefix.as_bytes(), &input[key], name);
                        let value = match value {
                            kv::Piece::In(r) => text_of(r),
                            kv::Piece::Decoded(d) => Text::Owned(d.into_boxed_slice()),
                        };
                        values.set(id, value);
                    }
                    if let (Some(id), Some(stray)) = (stray_words_into, scanner.stray) {
                        values.set(*id, Text::Owned(stray.into_boxed_slice()));
                    }
                    true
                }
                Kind::Json {
                    marker,
                    extract_prefix,
                    key_delimiter,
                } => {
                    let mut body = input;
                    let mut offset = 0;
                    if let Some(m) = marker {
                        match body.strip_prefix(m.as_bytes()) {
                            Some(rest) => {
                                let skipped =
                                    rest.iter().take_while(|b| b.is_ascii_whitespace()).count();
                                offset = m.len() + skipped;
                                body = &rest[skipped..];
                            }
                            None => body = b"",
                        }
                    }
                    let opts = json::Options {
                        prefix: &self.prefix,
                        key_delimiter: *key_delimiter,
                        extract_prefix: extract_prefix.as_deref(),
                    };
                    (marker.is_none() || !body.is_empty())
                        && json::parse(body, &opts, &mut |found, value, kind| {
                            let value = match value {
                                json::Found::In(r) => text_of(offset + r.start..offset + r.end),
                                json::Found::Made(b) => Text::owned(b),
                            };
                            let id = match found {
                                json::Name::Pair(full) => name_id_of(b"", full.as_bytes(), name),
                                json::Name::Matches => return values.clear_matches(),
                                json::Name::Match(i) => crate::values::match_id(i),
                            };
                            values.set_typed(id, kind, value);
                        })
                }
                Kind::Date { .. }
                | Kind::Tags
                | Kind::Syslog { .. }
                | Kind::Db(_)
                | Kind::Grouping(_) => true,
                Kind::Csv {
                    options,
                    names,
                    drop_invalid,
                } => {
                    let complete = csv::scan(input, options, &mut |i, piece| {
                        let value = match piece {
                            csv::Piece::In(r) => text_of(r),
                            csv::Piece::Decoded(d) => Text::Owned(d.into_boxed_slice()),
                        };
                        values.set(names[i], value);
                    });
                    complete || !drop_invalid
                }
                Kind::Regexp(patterns) => {
                    let hit = patterns
                        .iter()
                        .find_map(|(re, names)| re.captures(input).map(|c| (c, names)));
                    match hit {
                        Some((groups, names)) => {
                            values.clear_matches();
                            let groups: Vec<_> =
                                groups.iter().take(crate::values::MATCHES).collect();
                            for (i, g) in groups.iter().enumerate() {
                                if let Some(g) = g {
                                    values.set(crate::values::match_id(i), text_of(g.range()));
                                }
                            }
                            for (i, id) in names {
                                if let Some(Some(g)) = groups.get(*i) {
                                    values.set(*id, text_of(g.range()));
                                }
                            }
                            true
                        }
                        None => false,
                    }
                }
            };
            // Parsers that change the message itself rather than its pairs.
            let ok = ok
                && match &self.kind {
                    Kind::Date {
                        formats,
                        zone,
                        received,
                    } => {
                        let text = String::from_utf8_lossy(input).into_owned();
                        match parse_date(&text, formats, zone.as_ref(), msg) {
                            Some(t) if *received => {
                                msg.recvd = t;
                                true
                            }
                            Some(t) => {
                                msg.set_stamp(t);
                                true
                            }
                            None => false,
                        }
                    }
                    Kind::Syslog {
                        options,
                        drop_invalid,
                    } => {
                        let mut parsed = sluice_protocol::SyslogFields::default();
                        let text = input.to_vec();
                        sluice_protocol::parse(&text, options, &mut parsed);
                        let invalid = parsed
                            .tags
                            .contains(sluice_protocol::ParseTag::Rfc5424Unparseable)
                            || parsed.tags.contains(sluice_protocol::ParseTag::InvalidPri);
                        if invalid && *drop_invalid {
                            false
                        } else {
                            take_syslog(msg, parsed, &text);
                            true
                        }
                    }
                    Kind::Tags => {
                        let list = crate::list::items(&[input]);
                        for tag in list {
                            msg.tags
                                .insert(crate::message::tag_id(&String::from_utf8_lossy(&tag)));
                        }
                        true
                    }
                    _ => true,
                };
            if !ok {
                self.failed.fetch_add(1, Ordering::Relaxed);
            }
            ok
        })
    }
}

/// What `syslog-parser()` found, on the message: parts the text holds replace the message's, the
/// others stay (syslog-ng parses into the message it has). Values are copied out of `text`.
fn take_syslog(msg: &mut LogMessage, parsed: sluice_protocol::SyslogFields, text: &[u8]) {
    let own = |t: Text| match t {
        Text::Span(s) => Text::owned(s.of(text)),
        other => other,
    };
    let sdata: Vec<sluice_protocol::SdParam> = parsed
        .sd_params(text)
        .map(|p| sluice_protocol::SdParam {
            id: Text::owned(p.id),
            name: p.name.map(Text::owned),
            value: Text::owned(p.value),
        })
        .collect();
    if let Some(host) = parsed.host {
        msg.set_host(own(host));
    }
    let f = &mut msg.fields;
    f.pri = parsed.pri;
    for (slot, new) in [
        (&mut f.program, parsed.program),
        (&mut f.pid, parsed.pid),
        (&mut f.msgid, parsed.msgid),
    ] {
        if let Some(v) = new {
            *slot = Some(own(v));
        }
    }
    if let Some(h) = parsed.legacy_msghdr {
        f.legacy_msghdr = Some(own(h));
    }
    f.sdata = sdata;
    f.sd_in_place = None;
    f.message = own(parsed.message);
    f.utf8 = parsed.utf8;
    f.rfc5424 = parsed.rfc5424;
    // An error text made for an unparseable frame counts as produced here.
    f.local |= parsed.local;
    for tag in parsed.tags.iter() {
        msg.tags.insert(tag as u32);
    }
    if let Some(wc) = parsed.stamp {
        let today = crate::time::Today::of(msg.recvd);
        msg.set_stamp(crate::time::resolve(
            &wc,
            None,
            crate::time::Zone::local(),
            today,
            msg.recvd,
        ));
    }
}

/// `date-parser()`: the time in `text` by the first of `formats` (strftime's `%` codes) that
/// reads all of it. Parts the format leaves out come as syslog-ng guesses them: the date from
/// the time the message was received (the year as for RFC3164 stamps), the time as midnight,
/// the zone from `time-zone()` or this machine's.
fn parse_date(
    text: &str,
    formats: &[String],
    zone: Option<&crate::time::Zone>,
    msg: &LogMessage,
) -> Option<crate::time::UnixTime> {
    // syslog-ng's `%z` also reads `Z` and `+hh:mm`.
    let read = |f: &str| {
        use jiff::fmt::strtime::parse;
        parse(f, text).ok().or_else(|| {
            if !f.contains("%z") {
                return None;
            }
            parse(f.replace("%z", "%:z").as_str(), text)
                .ok()
                .or_else(|| {
                    let mut tm = parse(f.replace("%z", "Z").as_str(), text).ok()?;
                    tm.set_offset(Some(jiff::tz::Offset::UTC));
                    Some(tm)
                })
        })
    };
    let tm = formats.iter().find_map(|f| read(f))?;
    let recvd = msg.recvd;
    let today = crate::time::Today::of(recvd);
    let now = recvd.civil();
    let wc = sluice_protocol::WallClock {
        year: tm.year().map(i32::from),
        month: tm.month().map_or(now.month, |m| m as u8),
        day: tm.day().map_or(now.day, |d| d as u8),
        hour: tm.hour().unwrap_or(0) as u8,
        minute: tm.minute().unwrap_or(0) as u8,
        second: tm.second().unwrap_or(0) as u8,
        micros: tm.subsec_nanosecond().map_or(0, |n| (n / 1000) as u32),
        offset: tm.offset().map(|o| o.seconds()),
    };
    Some(crate::time::resolve(
        &wc,
        zone,
        crate::time::Zone::local(),
        today,
        recvd,
    ))
}

/// `prefix()`: what the pairs a parser sets start with.
fn prefix(o: &mut Options) -> Result<String, ConfigError> {
    o.last("prefix").map_or(Ok(String::new()), Node::string)
}

/// The text of the last option named `name`, if given.
fn text(o: &mut Options, name: &str) -> Result<Option<String>, ConfigError> {
    o.last(name).map(Node::string).transpose()
}

/// `db-parser(file("/etc/syslog-ng/patterndb.xml"))`: a database read now; a file that
/// cannot be read or is not a pattern database refuses the configuration (a reload keeps the
/// running one).
/// `grouping-by()`: `key()`, `timeout()` and `aggregate()` are required, as in syslog-ng.
fn grouping_by(node: &Node, o: &mut Options, names: &Names) -> Result<Built, ConfigError> {
    let template = |name: &str, o: &mut Options| -> Result<Option<Template>, ConfigError> {
        let Some(opt) = o.last(name) else {
            return Ok(None);
        };
        let v = opt.value()?;
        Template::compile_in(&v.text, names)
            .map(Some)
            .map_err(|e| ConfigError::new(v.pos, e))
    };
    let filter =
        |name: &str, o: &mut Options| -> Result<Option<crate::filter::Filter>, ConfigError> {
            let Some(opt) = o.last(name) else {
                return Ok(None);
            };
            let Some(Body::Filter(expr)) = opt.block.as_deref() else {
                return Err(ConfigError::new(
                    opt.pos,
                    format!("{}() takes a filter expression", opt.name),
                ));
            };
            let compiled = crate::filter::compile(expr, names, &mut |name, pos| {
                crate::template::functions::named_filter(name, pos, names, &mut Vec::new())
            })?;
            Ok(Some(compiled))
        };
    let required = |what: &str| {
        ConfigError::new(
            node.pos,
            format!("grouping-by() needs {what}, as in syslog-ng"),
        )
    };
    let key_text = match o.last("key") {
        Some(opt) => opt.value()?.text.clone(),
        None => String::new(),
    };
    let key = template("key", o)?.ok_or_else(|| required("key()"))?;
    let sort_key = template("sort_key", o)?;
    let scope = match o.last("scope") {
        None => crate::correlation::Scope::Global,
        Some(opt) => {
            let v = opt.value()?;
            crate::correlation::Scope::parse(&v.text).ok_or_else(|| {
                ConfigError::unknown(
                    v.pos,
                    "scope",
                    &v.text,
                    "",
                    &["process", "program", "host", "global"],
                )
            })?
        }
    };
    let timeout = match o.last("timeout") {
        None => return Err(required("timeout() of at least 1 second")),
        Some(opt) => match opt.u64()? {
            0 => {
                return Err(ConfigError::new(
                    opt.pos,
                    "timeout() needs to be at least 1 second",
                ))
            }
            t => t,
        },
    };
    let trigger = filter("trigger", o)?;
    let where_ = filter("where", o)?;
    let having = filter("having", o)?;
    let aggregate = match o.last("aggregate") {
        None => return Err(required("aggregate()")),
        Some(opt) => aggregate(opt, names)?,
    };
    let inject = inject_mode(o)?;
    let max_contexts = max_contexts(o)?;
    Ok(Built {
        kind: Kind::Grouping(Box::new(grouping::GroupingBy {
            key,
            sort_key,
            scope,
            timeout,
            trigger,
            where_,
            having,
            aggregate: std::sync::Arc::new(aggregate),
            inject,
            max_contexts,
            state: std::sync::Arc::new(crate::correlation::State::new(max_contexts)),
            identity: format!("grouping-by({key_text},{scope:?})"),
        })),
        prefix: String::new(),
    })
}

/// `aggregate(value("NAME" "template") tags("tag") inherit-mode(mode))`: the message a
/// context makes; it inherits the context unless said.
fn aggregate(opt: &Node, names: &Names) -> Result<crate::patterndb::Synthetic, ConfigError> {
    use crate::patterndb::{Inherit, Synthetic};
    let mut message = Synthetic {
        inherit: Inherit::Context,
        ..Synthetic::default()
    };
    for inner in opt.options() {
        match inner.key().as_str() {
            "value" => {
                let values: Vec<&sluice_config::Value> = inner.values().collect();
                let [name, template] = values.as_slice() else {
                    return Err(ConfigError::new(
                        inner.pos,
                        "value() takes a name and a template: value(\"MESSAGE\" \"$(context-length) messages\")",
                    ));
                };
                let template = Template::compile_in(&template.text, names)
                    .map_err(|e| ConfigError::new(template.pos, e))?;
                message
                    .values
                    .push((crate::rewrite::Field::named(&name.text), template));
            }
            "tags" => {
                for tag in inner.values() {
                    message.tags.push(crate::message::tag_id(&tag.text));
                }
            }
            "inherit_mode" => {
                let v = inner.value()?;
                message.inherit = Inherit::parse(&v.text).ok_or_else(|| {
                    ConfigError::unknown(
                        v.pos,
                        "inherit-mode",
                        &v.text,
                        "",
                        &["none", "last-message", "context"],
                    )
                })?;
            }
            _ => return Err(inner.unknown_in(opt, &["value", "tags", "inherit-mode"])),
        }
    }
    Ok(message)
}

/// Where the messages a correlating parser makes go: `inject-mode()`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Inject {
    /// On in the path, after the parser (the default).
    #[default]
    PassThrough,
    /// The same, and the messages the parser sees go no further.
    AggregateOnly,
    /// To the `internal()` source, as sluice's own messages.
    Internal,
}

impl Inject {
    /// Sends `made` where it goes: to `internal()` (then `made` is left empty), or on.
    pub fn send<'r>(self, made: &mut Vec<LogMessage<'r>>) {
        if self == Inject::Internal {
            crate::correlation::post_internal(made);
            made.clear();
        }
    }
}

fn inject_mode(o: &mut Options) -> Result<Inject, ConfigError> {
    let Some(opt) = o.last("inject_mode") else {
        return Ok(Inject::PassThrough);
    };
    let v = opt.value()?;
    match v.text.replace('_', "-").to_ascii_lowercase().as_str() {
        "pass-through" => Ok(Inject::PassThrough),
        "aggregate-only" => Ok(Inject::AggregateOnly),
        "internal" => Ok(Inject::Internal),
        _ => Err(ConfigError::unknown(
            v.pos,
            "inject mode",
            &v.text,
            "",
            &["pass-through", "aggregate-only", "internal"],
        )),
    }
}

/// `max-contexts()` (sluice's): how many correlation contexts may be open at once.
fn max_contexts(o: &mut Options) -> Result<usize, ConfigError> {
    match o.last("max_contexts") {
        None => Ok(DEFAULT_MAX_CONTEXTS),
        Some(opt) => {
            let v = opt.value()?;
            match v.text.parse::<usize>() {
                Ok(n) if n > 0 => Ok(n),
                _ => Err(ConfigError::new(
                    v.pos,
                    format!(
                        "max-contexts() takes a number of contexts above 0, not {}",
                        v.text
                    ),
                )),
            }
        }
    }
}

/// The bound of open correlation contexts when `max-contexts()` does not say.
pub const DEFAULT_MAX_CONTEXTS: usize = 1_000_000;

fn db_parser(_: &Node, o: &mut Options, names: &Names) -> Result<Built, ConfigError> {
    let prefix = o
        .last("prefix")
        .map(Node::string)
        .transpose()?
        .unwrap_or_default();
    let (path, pos) = match o.last("file") {
        Some(opt) => {
            let v = opt.value()?;
            (v.text.clone(), v.pos)
        }
        None => (DEFAULT_PATTERNDB.to_string(), Pos::default()),
    };
    names.read(std::path::Path::new(&path));
    let loaded = crate::patterndb::load(std::path::Path::new(&path), names, &prefix)
        .map_err(|e| ConfigError::new(pos, format!("db-parser(): {e}")))?;
    for warning in &loaded.warnings {
        names.note(format!("db-parser(): {warning}"));
    }
    for shadowed in loaded.shadowed() {
        names.note(format!("db-parser(): {shadowed}"));
    }
    let drop_unmatched = o.yes_no("drop_unmatched", false)?;
    let compile = |opt: Option<&Node>| -> Result<Option<Template>, ConfigError> {
        let Some(opt) = opt else {
            return Ok(None);
        };
        let v = opt.value()?;
        Template::compile_in(&v.text, names)
            .map(Some)
            .map_err(|e| ConfigError::new(v.pos, e))
    };
    let program_template = compile(o.last("program_template"))?;
    // syslog-ng 3.38's name of template().
    let message_template = compile(o.last("message_template"))?;
    let inject = inject_mode(o)?;
    let max_contexts = max_contexts(o)?;
    let correlation = loaded
        .db
        .correlates()
        .then(|| std::sync::Arc::new(crate::patterndb::correlate::Correlation::new(max_contexts)));
    Ok(Built {
        kind: Kind::Db(db::DbParser {
            db: std::sync::Arc::new(loaded.db),
            drop_unmatched,
            program_template,
            message_template,
            inject,
            max_contexts,
            correlation,
            identity: format!("db-parser({path})"),
        }),
        prefix,
    })
}

/// Where syslog-ng looks for its pattern database without `file()`.
const DEFAULT_PATTERNDB: &str = "/var/lib/syslog-ng/patterndb.xml";

fn kv_parser(_: &Node, o: &mut Options, _: &Names) -> Result<Built, ConfigError> {
    let mut value_separator = b'=';
    if let Some(opt) = o.last("value_separator") {
        match opt.string()?.as_bytes() {
            [b] if !matches!(b, b' ' | b'\'' | b'"') => value_separator = *b,
            _ => {
                return Err(ConfigError::new(
                    opt.pos,
                    "value-separator() takes one character other than a space or a quote",
                ))
            }
        }
    }
    Ok(Built {
        kind: Kind::Kv {
            value_separator,
            pair_separator: text(o, "pair_separator")?
                .map_or_else(|| b", ".to_vec(), String::into_bytes),
            stray_words_into: text(o, "extract_stray_words_into")?.map(|n| name_id(&n)),
        },
        prefix: prefix(o)?,
    })
}

fn json_parser(_: &Node, o: &mut Options, _: &Names) -> Result<Built, ConfigError> {
    let mut key_delimiter = '.';
    if let Some(opt) = o.last("key_delimiter") {
        let s = opt.string()?;
        let mut chars = s.chars();
        match (chars.next(), chars.next()) {
            (Some(c), None) => key_delimiter = c,
            _ => {
                return Err(ConfigError::new(
                    opt.pos,
                    "key-delimiter() takes one character",
                ))
            }
        }
    }
    Ok(Built {
        kind: Kind::Json {
            marker: text(o, "marker")?,
            extract_prefix: text(o, "extract_prefix")?,
            key_delimiter,
        },
        prefix: prefix(o)?,
    })
}

fn csv_parser(node: &Node, o: &mut Options, _: &Names) -> Result<Built, ConfigError> {
    let mut options = csv::Options {
        columns: 0,
        delimiters: b" ".to_vec(),
        string_delimiters: Vec::new(),
        quotes_start: b"\"'".to_vec(),
        quotes_end: b"\"'".to_vec(),
        null: None,
        dialect: csv::Dialect::EscapeNone,
        strip_whitespace: true,
        greedy: false,
    };
    let mut drop_invalid = match o.last("drop_invalid") {
        Some(opt) => opt.bool()?,
        None => false,
    };
    let columns: Vec<String> = o
        .all("columns")
        .flat_map(|opt| opt.values().map(|v| v.text.clone()))
        .collect();
    for opt in o.all("delimiters") {
        if let Some(v) = opt.first_value() {
            options.delimiters = v.text.as_bytes().to_vec();
        }
        for d in opt.options() {
            match d.key().as_str() {
                "chars" => options.delimiters = d.string()?.into_bytes(),
                "strings" => {
                    options.string_delimiters =
                        d.values().map(|v| v.text.as_bytes().to_vec()).collect()
                }
                _ => return Err(d.unknown_in(opt, &["chars", "strings"])),
            }
        }
    }
    if let Some(q) = text(o, "quotes")? {
        options.quotes_start = q.clone().into_bytes();
        options.quotes_end = q.into_bytes();
    }
    if let Some(pairs) = text(o, "quote_pairs")? {
        let pairs = pairs.into_bytes();
        options.quotes_start = pairs.chunks_exact(2).map(|p| p[0]).collect();
        options.quotes_end = pairs.chunks_exact(2).map(|p| p[1]).collect();
    }
    if let Some(n) = text(o, "null")? {
        options.null = (!n.is_empty()).then(|| n.into_bytes());
    }
    if let Some(opt) = o.last("dialect") {
        let name = opt.string()?;
        options.dialect = csv_dialect(&name).ok_or_else(|| {
            ConfigError::unknown(
                opt.pos,
                "dialect() argument",
                &name,
                " in csv-parser()",
                CSV_DIALECTS,
            )
        })?;
    }
    for opt in o.all("flags") {
        // Flags replace the defaults: strip-whitespace only when named.
        options.strip_whitespace = false;
        let mut dialect = None;
        for f in opt.words()? {
            let flag = f.text.replace('_', "-");
            match flag.as_str() {
                "strip-whitespace" => options.strip_whitespace = true,
                "greedy" => options.greedy = true,
                "drop-invalid" => drop_invalid = true,
                other => match csv_dialect(other) {
                    Some(d) if dialect.is_none() => dialect = Some(d),
                    Some(_) => {
                        return Err(ConfigError::new(
                            f.pos,
                            "only one escape style can be used in the flags argument",
                        ))
                    }
                    None => {
                        return Err(ConfigError::unknown(
                            f.pos,
                            "csv-parser() flag",
                            &f.text,
                            "",
                            &[
                                "escape-none",
                                "escape-backslash",
                                "escape-double-char",
                                "strip-whitespace",
                                "greedy",
                                "drop-invalid",
                            ],
                        ))
                    }
                },
            }
        }
        if let Some(d) = dialect {
            options.dialect = d;
        }
    }
    if columns.is_empty() {
        return Err(ConfigError::new(
            node.pos,
            "csv-parser() needs columns(\"name\" …)",
        ));
    }
    options.columns = columns.len();
    let prefix = prefix(o)?;
    Ok(Built {
        kind: Kind::Csv {
            options,
            names: columns
                .iter()
                .map(|c| name_id(&format!("{prefix}{c}")))
                .collect(),
            drop_invalid,
        },
        prefix,
    })
}

fn regexp_parser(node: &Node, o: &mut Options, _: &Names) -> Result<Built, ConfigError> {
    let patterns: Vec<&sluice_config::Value> = o.all("patterns").flat_map(|p| p.values()).collect();
    if let Some(opt) = o.last("type") {
        let t = opt.string()?;
        if t != "pcre" {
            return Err(ConfigError::unknown(
                opt.pos,
                "regexp-parser() type",
                &t,
                "",
                &["pcre"],
            ));
        }
    }
    let mut ignore_case = false;
    for opt in o.all("flags") {
        for f in opt.words()? {
            match sluice_config::normalize(&f.text).as_str() {
                "ignore_case" => ignore_case = true,
                "utf8" | "store_matches" | "disable_jit" | "global" => {}
                _ => {
                    return Err(ConfigError::unknown(
                        f.pos,
                        "flag",
                        &f.text,
                        " in regexp-parser()",
                        &["ignore-case", "utf8", "store-matches"],
                    ))
                }
            }
        }
    }
    if patterns.is_empty() {
        return Err(ConfigError::new(
            node.pos,
            "regexp-parser() needs patterns(\"regular expression\" …)",
        ));
    }
    let prefix = prefix(o)?;
    let mut compiled = Vec::new();
    for p in &patterns {
        let re =
            crate::filter::regex(&p.text, ignore_case).map_err(|e| ConfigError::new(p.pos, e))?;
        let names = re
            .capture_names()
            .enumerate()
            .filter_map(|(i, n)| n.map(|n| (i, name_id(&format!("{prefix}{n}")))))
            .collect();
        compiled.push((re, names));
    }
    Ok(Built {
        kind: Kind::Regexp(compiled),
        prefix,
    })
}

fn date_parser(_: &Node, o: &mut Options, _: &Names) -> Result<Built, ConfigError> {
    let mut formats: Vec<String> = o
        .all("format")
        .flat_map(|opt| opt.values().map(|v| v.text.clone()))
        .collect();
    if formats.is_empty() {
        formats.push("%FT%T%z".into());
    }
    let zone = match o.last("time_zone") {
        Some(opt) => {
            let v = opt.value()?;
            Some(crate::time::Zone::parse(&v.text).map_err(|e| ConfigError::new(v.pos, e))?)
        }
        None => None,
    };
    let received = match o.last("time_stamp") {
        Some(opt) => match opt.string()?.as_str() {
            "stamp" => false,
            "recvd" => true,
            other => {
                return Err(ConfigError::unknown(
                    opt.pos,
                    "time-stamp()",
                    other,
                    "",
                    &["stamp", "recvd"],
                ))
            }
        },
        None => false,
    };
    for opt in o.all("flags") {
        if let Some(f) = opt.words()?.first() {
            if sluice_config::normalize(&f.text) != "guess_timezone" {
                return Err(ConfigError::unknown(
                    f.pos,
                    "flag",
                    &f.text,
                    " in date-parser()",
                    &["guess-timezone"],
                ));
            }
            return Err(ConfigError::not_supported(
                f.pos,
                "flags(guess-timezone) in date-parser()",
            ));
        }
    }
    Ok(Built {
        kind: Kind::Date {
            formats,
            zone,
            received,
        },
        prefix: String::new(),
    })
}

fn syslog_parser(_: &Node, o: &mut Options, _: &Names) -> Result<Built, ConfigError> {
    let mut options = sluice_protocol::ParseOptions::default();
    for opt in o.all("flags") {
        for f in opt.words()? {
            if !options.flags.set(&sluice_config::normalize(&f.text)) {
                return Err(ConfigError::unknown(
                    f.pos,
                    "flag",
                    &f.text,
                    " in syslog-parser()",
                    &[
                        "syslog-protocol",
                        "no-hostname",
                        "check-hostname",
                        "assume-utf8",
                        "validate-utf8",
                        "sanitize-utf8",
                        "no-multi-line",
                        "no-header",
                    ],
                ));
            }
        }
    }
    let drop_invalid = match o.last("drop_invalid") {
        Some(opt) => opt.bool()?,
        None => false,
    };
    Ok(Built {
        kind: Kind::Syslog {
            options: Box::new(options),
            drop_invalid,
        },
        prefix: String::new(),
    })
}

const CSV_DIALECTS: &[&str] = &["escape-none", "escape-backslash", "escape-double-char"];

fn csv_dialect(name: &str) -> Option<csv::Dialect> {
    match name.replace('_', "-").as_str() {
        "escape-none" => Some(csv::Dialect::EscapeNone),
        "escape-backslash" => Some(csv::Dialect::EscapeBackslash),
        "escape-double-char" => Some(csv::Dialect::EscapeDoubleChar),
        _ => None,
    }
}

/// Every driver of this registry, for the configuration reference.
pub fn reference() -> Vec<sluice_config::declared::Entry> {
    DRIVERS
        .iter()
        .map(|f| sluice_config::declared::Entry {
            names: vec![f.name],
            about: f.about,
            sample: f.sample,
            options: vec![f.options],
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::message;

    fn parsers(body: &str) -> Parsers {
        let text = format!("parser p {{ {body} }};");
        let config =
            sluice_config::load_str("t.conf", &text).unwrap_or_else(|e| panic!("{}", e.render()));
        let s = &config.statements[0];
        Parsers::compile(&s.body, s.pos, &Names::default())
            .unwrap_or_else(|e| panic!("{}", e.render(&config.map)))
    }

    /// Each parser is built once with each option its table declares: an option is accepted
    /// exactly when the parser reads it.
    #[test]
    fn every_parser_reads_every_option_it_declares() {
        // db-parser()'s sample reads this database.
        std::fs::write(
            "/tmp/sluice-table-test-patterndb.xml",
            "<patterndb version='4'><ruleset><rules><rule id='r'><patterns><pattern>x</pattern></patterns></rule></rules></ruleset></patterndb>",
        )
        .unwrap();
        for driver in DRIVERS {
            sluice_config::declared::every_option_is_read(driver.sample, driver.options, |p| {
                let text = format!("parser p {{ {p}; }};");
                let config = sluice_config::load_str("t.conf", &text).map_err(|e| e.render())?;
                let s = &config.statements[0];
                Parsers::compile(&s.body, s.pos, &Names::default())
                    .map(drop)
                    .map_err(|e| e.render(&config.map))
            });
        }
    }

    fn pair(msg: &LogMessage, name: &str) -> String {
        let v = msg
            .values
            .get(name_id(name))
            .map_or(&b""[..], |v| v.of(msg.raw));
        String::from_utf8_lossy(v).into_owned()
    }

    #[test]
    fn csv_dialect_is_honoured() {
        // syslog-ng 3.38 ignores dialect() (its grammar drops the value); sluice applies it.
        let p =
            parsers(r#"csv-parser(columns("a" "b") delimiters(",") dialect(escape-backslash));"#);
        let mut msg = message(r#"<13>Jan  5 13:56:09 h app: "x\"y",z"#);
        assert!(p.apply_from(0, &mut msg, &mut Vec::new()));
        assert_eq!(
            (pair(&msg, "a"), pair(&msg, "b")),
            (r#"x"y"#.to_string(), "z".to_string())
        );
    }

    #[test]
    fn a_failing_parser_is_counted() {
        let p = parsers(r#"json-parser(); csv-parser(columns("a") drop-invalid(yes));"#);
        let mut msg = message("<13>Jan  5 13:56:09 h app: not json");
        assert!(!p.apply_from(0, &mut msg, &mut Vec::new()));
        assert_eq!(p.parsers[0].failed.load(Ordering::Relaxed), 1);
        let mut msg = message(r#"<13>Jan  5 13:56:09 h app: {"a": 1}"#);
        assert!(
            !p.apply_from(0, &mut msg, &mut Vec::new()),
            "one column, and input left over"
        );
        assert_eq!(p.parsers[1].failed.load(Ordering::Relaxed), 1);
    }
}
