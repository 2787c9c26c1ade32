//! Rewrite rules, compiled from syslog-ng's `rewrite` statements: `set`, `unset`, `rename`,
//! `subst`, `set-tag`, `clear-tag`, `set-facility`, `set-severity` and `set-pri`, each with an
//! optional `condition()` filter and, where it writes a value, `value()` naming which one
//! (`MESSAGE` when absent, as in syslog-ng).
//!
//! Each rule is one [`RuleDriver`] in [`RULES`]: its name, the options it reads (a
//! [`sluice_config::declared`] table, from which "unknown option" and "not supported yet"
//! errors come) and its build. A new rule is one entry there; its table test is the loop in
//! `every_rule_reads_every_option_it_declares`.
//!
//! A rule changes the message in place; the router ([`crate::path`]) hands it a private copy
//! first, so destinations before the rule and sibling paths keep the version they saw.

use crate::filter::{self, Filter, NamedFilters, StringMode};
use crate::find::Finder;
use crate::message::{facility_by_name, severity_by_name, tag_id, LogMessage, TagId};
use crate::template::{Names, Template};
use crate::values::{name_id, NameId};
use sluice_config::declared::{self, read, Declared, Options};
use sluice_config::{Body, ConfigError, Node, Pos, Value};
use sluice_protocol::Text;

/// The rules of one `rewrite` statement (or inline `rewrite { … }`), applied in order.
#[derive(Clone, Debug, Default)]
pub struct Rewrite {
    pub rules: Vec<Rule>,
}

#[derive(Clone, Debug)]
pub struct Rule {
    pub action: Action,
    /// `condition(filter expression)`: the rule applies only to messages it matches.
    pub condition: Option<Filter>,
}

#[derive(Clone, Debug)]
pub enum Action {
    Set(Field, Template),
    Unset(Field),
    Rename(Field, Field),
    Subst {
        field: Field,
        pattern: Pattern,
        replacement: Template,
        global: bool,
    },
    SetTag(TagId),
    ClearTag(TagId),
    SetFacility(Template),
    SetSeverity(Template),
    SetPri(Template),
    /// `set-matches("a,b")`: `$1`, `$2`… from a list.
    SetMatches(Template),
    UnsetMatches,
    /// `groupset("value" values("glob" …))`: every value whose name matches gets the template.
    GroupSet(Template, Vec<glob::Pattern>),
    GroupUnset(Vec<glob::Pattern>),
}

/// What `subst()` looks for.
#[derive(Clone, Debug)]
pub enum Pattern {
    Regex(Finder),
    /// `type(string)`: as the string matcher of filters, the whole value unless
    /// `flags(prefix)` or `flags(substring)` say otherwise.
    String {
        needle: Vec<u8>,
        mode: StringMode,
        ignore_case: bool,
    },
}

impl Pattern {
    /// Where the next match at or after `from` is in `subject` (string patterns).
    fn find(&self, subject: &[u8], from: usize) -> Option<std::ops::Range<usize>> {
        let Pattern::String {
            needle,
            mode,
            ignore_case,
        } = self
        else {
            unreachable!("regex patterns replace with the regex crate")
        };
        let eq = |a: &[u8]| {
            if *ignore_case {
                a.eq_ignore_ascii_case(needle)
            } else {
                a == needle.as_slice()
            }
        };
        let n = needle.len();
        match mode {
            _ if from > 0 && *mode != StringMode::Substring => None,
            StringMode::Exact => eq(subject).then_some(0..subject.len()),
            StringMode::Prefix => (subject.len() >= n && eq(&subject[..n])).then_some(0..n),
            StringMode::Substring => subject
                .get(from..)?
                .windows(n)
                .position(eq)
                .map(|i| from + i..from + i + n),
        }
    }
}

/// A value a rule reads or writes: a header field syslog-ng keeps as a name-value pair, or a
/// pair of the message's own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    Message,
    Host,
    Program,
    Pid,
    Msgid,
    Pair(NameId),
}

impl Field {
    /// A name as `value()` takes it (`MESSAGE`, `$HOST`, `.kv.user`).
    pub fn named(name: &str) -> Field {
        match name.trim_start_matches('$') {
            "MESSAGE" | "MSG" => Field::Message,
            "HOST" => Field::Host,
            "PROGRAM" => Field::Program,
            "PID" => Field::Pid,
            "MSGID" => Field::Msgid,
            other => Field::Pair(name_id(other)),
        }
    }

    /// The name it is written as (`MESSAGE` for `$MSG` too).
    pub fn name(&self) -> String {
        match self {
            Field::Message => "MESSAGE".into(),
            Field::Host => "HOST".into(),
            Field::Program => "PROGRAM".into(),
            Field::Pid => "PID".into(),
            Field::Msgid => "MSGID".into(),
            Field::Pair(n) => crate::values::name_of(*n).to_string(),
        }
    }

    /// The field's bytes in `msg`.
    pub fn get<'a>(&self, msg: &'a LogMessage) -> &'a [u8] {
        match self {
            Field::Message => msg.message(),
            Field::Host => msg.host(),
            Field::Program => msg.program(),
            Field::Pid => msg.pid(),
            Field::Msgid => msg.msgid(),
            Field::Pair(n) => msg.values.get(*n).map_or(b"", |v| v.of(msg.raw)),
        }
    }

    fn is_set(&self, msg: &LogMessage) -> bool {
        match self {
            Field::Pair(n) => msg.values.get(*n).is_some(),
            _ => true,
        }
    }

    pub fn set(&self, msg: &mut LogMessage, value: Text) {
        let f = &mut msg.fields;
        match self {
            Field::Message => f.message = value,
            Field::Host => {
                msg.set_host(value);
                msg.chained_hostname = false;
            }
            // `$MSGHDR` is rebuilt from the new program and pid.
            Field::Program => {
                f.program = Some(value);
                f.legacy_msghdr = None;
            }
            Field::Pid => {
                f.pid = Some(value);
                f.legacy_msghdr = None;
            }
            Field::Msgid => f.msgid = Some(value),
            Field::Pair(n) => msg.values.set(*n, value),
        }
    }

    /// [`Field::set`], a pair with its type.
    pub fn set_typed(&self, msg: &mut LogMessage, kind: crate::values::ValueType, value: Text) {
        match self {
            Field::Pair(n) => msg.values.set_typed(*n, kind, value),
            _ => self.set(msg, value),
        }
    }

    fn unset(&self, msg: &mut LogMessage) {
        match self {
            Field::Pair(n) => {
                msg.values.unset(*n);
            }
            _ => self.set(msg, Text::EMPTY),
        }
    }
}

/// A rewrite rule as syslog-ng names it: the options it reads, a valid use of it (for its
/// table test) and how it is made from its positional values and options.
struct RuleDriver {
    name: &'static str,
    /// What it does, for the configuration reference.
    about: &'static str,
    options: &'static [Declared],
    sample: &'static str,
    build: fn(&Node, &[&Value], &mut Options, &Names) -> Result<Action, ConfigError>,
}

/// Every rule's `condition(filter expression)`: the rule applies to the messages it matches.
const CONDITION: Declared = read("condition", "condition(program(\"app\"))").about(
    "a rewrite rule applies only to messages this filter expression matches",
    "every message",
);
/// The value a rule writes (`MESSAGE` when absent, as in syslog-ng).
const VALUE: Declared = read("value", "value(\"HOST\")")
    .about("a rewrite rule: the field or pair it writes", "MESSAGE");
const VALUES: Declared = read("values", "values(\".secret.*\")")
    .about("a rewrite or parser's pairs (a glob of names)", "none");

/// The rules of this version; others syslog-ng has are refused as not yet supported.
static RULES: &[RuleDriver] = &[
    RuleDriver {
        name: "set",
        about: "Sets a field or name-value pair to a template.",
        options: &[VALUE, CONDITION],
        sample: "set(\"x\")",
        build: |node, values, o, names| {
            want(
                node,
                values,
                1,
                "a template: set(\"text $HOST\" value(\"NAME\"))",
            )?;
            Ok(Action::Set(field(o)?, template(values[0], names)?))
        },
    },
    RuleDriver {
        name: "unset",
        about: "Unsets fields or name-value pairs.",
        options: &[VALUE, CONDITION],
        sample: "unset()",
        build: |node, values, o, _| {
            want(node, values, 0, "no text, only value(\"NAME\")")?;
            Ok(Action::Unset(field(o)?))
        },
    },
    RuleDriver {
        name: "rename",
        about: "Renames a name-value pair.",
        options: &[CONDITION],
        sample: "rename(\"a\" \"b\")",
        build: |node, values, _, _| {
            want(node, values, 2, "two names: rename(\"old\" \"new\")")?;
            Ok(Action::Rename(
                Field::named(&values[0].text),
                Field::named(&values[1].text),
            ))
        },
    },
    RuleDriver {
        name: "subst",
        about: "Replaces what a regular expression (or a string, a glob) matches.",
        options: &[
            VALUE,
            CONDITION,
            read("type", "type(\"string\")")
                .about("how the pattern matches: `pcre`, `string`, `glob`", "pcre"),
            read("flags", "flags(global)")
                .about("`global` (every match), `ignore-case`, `utf8`…", "none"),
        ],
        sample: "subst(\"a\" \"b\")",
        build: subst,
    },
    RuleDriver {
        name: "set_tag",
        about: "Adds a tag.",
        options: &[CONDITION],
        sample: "set-tag(\"t\")",
        build: |node, values, _, _| {
            want(node, values, 1, "a tag name")?;
            Ok(Action::SetTag(tag_id(&values[0].text)))
        },
    },
    RuleDriver {
        name: "clear_tag",
        about: "Removes a tag.",
        options: &[CONDITION],
        sample: "clear-tag(\"t\")",
        build: |node, values, _, _| {
            want(node, values, 1, "a tag name")?;
            Ok(Action::ClearTag(tag_id(&values[0].text)))
        },
    },
    RuleDriver {
        name: "set_facility",
        about: "Sets the facility.",
        options: &[CONDITION],
        sample: "set-facility(\"local0\")",
        build: |node, values, _, names| {
            want(node, values, 1, "a facility name or number (a template)")?;
            Ok(Action::SetFacility(template(values[0], names)?))
        },
    },
    RuleDriver {
        name: "set_severity",
        about: "Sets the severity.",
        options: &[CONDITION],
        sample: "set-severity(\"err\")",
        build: |node, values, _, names| {
            want(node, values, 1, "a severity name or number (a template)")?;
            Ok(Action::SetSeverity(template(values[0], names)?))
        },
    },
    RuleDriver {
        name: "set_pri",
        about: "Sets the priority (facility and severity) from a number.",
        options: &[CONDITION],
        sample: "set-pri(\"13\")",
        build: |node, values, _, names| {
            want(node, values, 1, "a priority number (a template)")?;
            Ok(Action::SetPri(template(values[0], names)?))
        },
    },
    RuleDriver {
        name: "set_matches",
        about: "Sets `$1`… from a list.",
        options: &[CONDITION],
        sample: "set-matches(\"a,b\")",
        build: |node, values, _, names| {
            want(node, values, 1, "a list: set-matches(\"a,b,c\")")?;
            Ok(Action::SetMatches(template(values[0], names)?))
        },
    },
    RuleDriver {
        name: "unset_matches",
        about: "Unsets `$0`…",
        options: &[CONDITION],
        sample: "unset-matches()",
        build: |node, values, _, _| {
            want(node, values, 0, "nothing")?;
            Ok(Action::UnsetMatches)
        },
    },
    RuleDriver {
        name: "groupset",
        about: "Sets every name-value pair a glob selects to a template (`$_` the value).",
        options: &[VALUES, CONDITION],
        sample: "groupset(\"***\" values(\".x.*\"))",
        build: |node, values, o, names| {
            let globs = globs(node, o)?;
            want(
                node,
                values,
                1,
                "a template and values(…): groupset(\"***\" values(\".secret.*\"))",
            )?;
            Ok(Action::GroupSet(template(values[0], names)?, globs))
        },
    },
    RuleDriver {
        name: "groupunset",
        about: "Unsets every name-value pair a glob selects.",
        options: &[VALUES, CONDITION],
        sample: "groupunset(values(\".x.*\"))",
        build: |node, values, o, _| {
            let globs = globs(node, o)?;
            want(node, values, 0, "only values(…)")?;
            Ok(Action::GroupUnset(globs))
        },
    },
];
/// syslog-ng's rules that sluice does not have yet.
const NOT_YET: &[&str] = &[
    "credit_card_mask",
    "credit_card_hash",
    "fix_time_zone",
    "guess_time_zone",
    "set_time_zone",
    "python",
];

/// Refuses a rule given other than `n` positional values, saying what it takes.
fn want(node: &Node, values: &[&Value], n: usize, usage: &str) -> Result<(), ConfigError> {
    if values.len() == n {
        Ok(())
    } else {
        Err(ConfigError::new(
            node.pos,
            format!("{}() takes {usage}", node.name),
        ))
    }
}

fn template(v: &Value, names: &Names) -> Result<Template, ConfigError> {
    Template::compile_in(&v.text, names).map_err(|e| ConfigError::new(v.pos, e))
}

/// The value a rule writes: `value()`, else the message.
fn field(o: &mut Options) -> Result<Field, ConfigError> {
    Ok(match o.last("value") {
        Some(opt) => Field::named(&opt.value()?.text),
        None => Field::Message,
    })
}

/// `values("glob" …)` of groupset() and groupunset(): at least one.
fn globs(node: &Node, o: &mut Options) -> Result<Vec<glob::Pattern>, ConfigError> {
    let mut globs = Vec::new();
    for opt in o.all("values") {
        for v in opt.values() {
            globs.push(
                glob::Pattern::new(&v.text)
                    .map_err(|e| ConfigError::new(v.pos, format!("invalid pattern: {e}")))?,
            );
        }
    }
    if globs.is_empty() {
        return Err(ConfigError::new(
            node.pos,
            format!("{}() needs values(\"pattern\" …)", node.name),
        ));
    }
    Ok(globs)
}

/// `subst("pattern" "replacement" type() flags() value())`.
fn subst(
    node: &Node,
    values: &[&Value],
    o: &mut Options,
    names: &Names,
) -> Result<Action, ConfigError> {
    want(
        node,
        values,
        2,
        "a pattern and a replacement: subst(\"pattern\" \"replacement\")",
    )?;
    let kind = match o.last("type") {
        Some(t) => t.string()?,
        None => "pcre".to_string(),
    };
    let mut flags = Vec::new();
    for opt in o.all("flags") {
        flags.extend(opt.words()?.into_iter().cloned());
    }
    let mut global = false;
    let mut ignore_case = false;
    let mut mode = StringMode::Exact;
    for f in &flags {
        match sluice_config::normalize(&f.text).as_str() {
            "global" => global = true,
            "ignore_case" => ignore_case = true,
            "prefix" => mode = StringMode::Prefix,
            "substring" => mode = StringMode::Substring,
            "utf8" | "disable_jit" | "store_matches" => {}
            _ => {
                return Err(ConfigError::unknown(
                    f.pos,
                    "flag",
                    &f.text,
                    " in subst()",
                    &["global", "ignore-case", "prefix", "substring", "utf8"],
                ))
            }
        }
    }
    let text = &values[0].text;
    let regex =
        |re: &str| filter::regex(re, ignore_case).map_err(|e| ConfigError::new(values[0].pos, e));
    let pattern = match kind.as_str() {
        "pcre" | "posix" => Pattern::Regex(Finder::new(regex(text)?, text, ignore_case)),
        "string" => Pattern::String {
            needle: text.as_bytes().to_vec(),
            mode,
            ignore_case,
        },
        "glob" => {
            return Err(ConfigError::new(
                node.pos,
                "subst() cannot replace what a glob matched (syslog-ng refuses it too): use type(pcre) or type(string)",
            ))
        }
        other => {
            return Err(ConfigError::unknown(
                node.pos,
                "subst() matcher type",
                other,
                "",
                &["pcre", "string", "posix"],
            ))
        }
    };
    if let Pattern::String { needle, .. } = &pattern {
        if needle.is_empty() {
            return Err(ConfigError::new(
                values[0].pos,
                "subst() needs a non-empty string to look for",
            ));
        }
    }
    Ok(Action::Subst {
        field: field(o)?,
        pattern,
        replacement: template(values[1], names)?,
        global,
    })
}

impl Rewrite {
    /// Compiles the rules of a `rewrite` body; their templates refer to `names`, and `named`
    /// resolves `filter(name)` in conditions.
    pub fn compile(
        body: &Body,
        pos: Pos,
        names: &Names,
        named: &mut NamedFilters,
    ) -> Result<Rewrite, ConfigError> {
        let Body::Nodes(nodes) = body else {
            return Err(ConfigError::new(
                pos,
                "a rewrite holds rules such as set(\"text\" value(\"MESSAGE\"))",
            ));
        };
        let rules = nodes
            .iter()
            .map(|n| Rule::compile(n, names, named))
            .collect::<Result<_, _>>()?;
        Ok(Rewrite { rules })
    }

    /// Applies every rule whose condition holds, in order.
    pub fn apply(&self, msg: &mut LogMessage, scratch: &mut Vec<u8>) {
        for rule in &self.rules {
            if rule
                .condition
                .as_ref()
                .is_none_or(|c| c.matches(msg, scratch))
            {
                rule.action.apply(msg, scratch);
            }
        }
    }

    /// Whether any rule would change `msg` (its condition holds): the router copies a message
    /// only for rules that apply.
    pub fn applies_to(&self, msg: &LogMessage, scratch: &mut Vec<u8>) -> bool {
        self.rules
            .iter()
            .any(|r| r.condition.as_ref().is_none_or(|c| c.matches(msg, scratch)))
    }
}

impl Rule {
    fn compile(node: &Node, names: &Names, named: &mut NamedFilters) -> Result<Rule, ConfigError> {
        let driver = declared::find(
            node,
            ("rewrite rule", "rewrite rule"),
            RULES,
            |r| std::slice::from_ref(&r.name),
            NOT_YET,
        )?;
        let mut o = Options::check(node, driver.options)?;
        let condition = match o.last("condition") {
            Some(opt) => {
                let Some(Body::Filter(expr)) = opt.block.as_deref() else {
                    return Err(ConfigError::new(
                        opt.pos,
                        "condition() takes a filter expression",
                    ));
                };
                Some(filter::compile(expr, names, named)?)
            }
            None => None,
        };
        let values: Vec<&Value> = node.values().collect();
        let action = (driver.build)(node, &values, &mut o, names)?;
        o.finish()?;
        Ok(Rule { action, condition })
    }
}

impl Action {
    fn apply(&self, msg: &mut LogMessage, scratch: &mut Vec<u8>) {
        match self {
            Action::Set(field, template) => {
                scratch.clear();
                template.append(msg, 0, scratch);
                field.set(msg, Text::owned(scratch));
            }
            Action::Unset(field) => field.unset(msg),
            Action::Rename(from, to) => {
                if from != to && from.is_set(msg) {
                    let value = Text::owned(from.get(msg));
                    from.unset(msg);
                    to.set(msg, value);
                }
            }
            Action::Subst {
                field,
                pattern,
                replacement,
                global,
            } => {
                if let (Pattern::Regex(finder), None) = (pattern, replacement.literal()) {
                    let re = finder.regex();
                    // The replacement names groups (`$1`): each match sets the match variables
                    // before the replacement is formatted, as in syslog-ng.
                    let subject = field.get(msg).to_vec();
                    let mut out = Vec::with_capacity(subject.len());
                    let mut last = 0;
                    let mut matched = false;
                    let limit = if *global { usize::MAX } else { 1 };
                    for groups in re.captures_iter(&subject).take(limit) {
                        matched = true;
                        let whole = groups.get(0).expect("group 0 is the match");
                        out.extend_from_slice(&subject[last..whole.start()]);
                        msg.values.set_matches(crate::values::matches_of(&groups));
                        scratch.clear();
                        replacement.append(msg, 0, scratch);
                        out.extend_from_slice(scratch);
                        last = whole.end();
                    }
                    if !matched {
                        return;
                    }
                    out.extend_from_slice(&subject[last..]);
                    field.set(msg, Text::Owned(out.into_boxed_slice()));
                    return;
                }
                scratch.clear();
                replacement.append(msg, 0, scratch);
                let subject = field.get(msg);
                let replaced = match pattern {
                    Pattern::Regex(finder) => {
                        let mut out = Vec::with_capacity(subject.len() + scratch.len());
                        let mut last = 0;
                        let mut matched = false;
                        let limit = if *global { usize::MAX } else { 1 };
                        finder.each(subject, limit, |m| {
                            out.extend_from_slice(&subject[last..m.start]);
                            out.extend_from_slice(scratch);
                            last = m.end;
                            matched = true;
                        });
                        if !matched {
                            return;
                        }
                        out.extend_from_slice(&subject[last..]);
                        out
                    }
                    Pattern::String { .. } => {
                        let mut out = Vec::new();
                        let mut at = 0;
                        while let Some(hit) = pattern.find(subject, at) {
                            out.extend_from_slice(&subject[at..hit.start]);
                            out.extend_from_slice(scratch);
                            at = hit.end;
                            if !global || hit.is_empty() {
                                break;
                            }
                        }
                        if at == 0 {
                            return;
                        }
                        out.extend_from_slice(&subject[at..]);
                        out
                    }
                };
                field.set(msg, Text::Owned(replaced.into_boxed_slice()));
            }
            Action::SetTag(tag) => msg.tags.insert(*tag),
            Action::ClearTag(tag) => msg.tags.remove(*tag),
            Action::SetMatches(t) => {
                scratch.clear();
                t.append(msg, 0, scratch);
                let mut groups: crate::values::Matches = vec![None];
                groups.extend(crate::list::items(&[scratch]).into_iter().map(Some));
                groups.truncate(crate::values::MATCHES);
                msg.values.set_matches(groups);
            }
            Action::UnsetMatches => msg.values.clear_matches(),
            Action::GroupSet(t, globs) => {
                for name in group_names(msg, globs) {
                    scratch.clear();
                    t.append(msg, 0, scratch);
                    Field::named(&name).set(msg, Text::owned(scratch));
                }
            }
            Action::GroupUnset(globs) => {
                for name in group_names(msg, globs) {
                    Field::named(&name).unset(msg);
                }
            }
            Action::SetFacility(t) | Action::SetSeverity(t) | Action::SetPri(t) => {
                scratch.clear();
                t.append(msg, 0, scratch);
                let text = String::from_utf8_lossy(scratch);
                let text = text.trim();
                let pri = msg.fields.pri;
                // A value that names nothing leaves the message as it was, as in syslog-ng.
                msg.fields.pri = match self {
                    Action::SetFacility(_) => facility_by_name(text).map(|f| (f << 3) | (pri & 7)),
                    Action::SetSeverity(_) => {
                        severity_by_name(text).map(|s| (pri & !7) | u16::from(s))
                    }
                    _ => text.parse::<u16>().ok().filter(|p| *p < 1024),
                }
                .unwrap_or(pri);
            }
        }
    }
}

/// The names of the message's values that match one of `globs`: its header fields that are
/// set, and its name-value pairs (match variables aside), as syslog-ng's value-pairs sees them.
fn group_names(msg: &LogMessage, globs: &[glob::Pattern]) -> Vec<String> {
    let f = &msg.fields;
    let mut names: Vec<String> = [
        ("HOST", true),
        ("PROGRAM", f.program.is_some()),
        ("PID", f.pid.is_some()),
        ("MSGID", f.msgid.is_some()),
        ("MESSAGE", true),
    ]
    .into_iter()
    .filter(|(_, set)| *set)
    .map(|(n, _)| n.to_string())
    .collect();
    for (id, _) in msg.values.iter() {
        if id as usize >= crate::values::MATCHES {
            names.push(crate::values::name_of(id).to_string());
        }
    }
    names.retain(|n| globs.iter().any(|g| g.matches(n)));
    names
}

/// Every driver of this registry, for the configuration reference.
pub fn reference() -> Vec<sluice_config::declared::Entry> {
    RULES
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

    fn rewrite(rules: &str) -> Rewrite {
        let text = format!("rewrite r {{ {rules} }};");
        let config =
            sluice_config::load_str("t.conf", &text).unwrap_or_else(|e| panic!("{}", e.render()));
        let s = &config.statements[0];
        Rewrite::compile(&s.body, s.pos, &Names::default(), &mut |name, pos| {
            Err(ConfigError::new(pos, format!("no filter {name}")))
        })
        .unwrap_or_else(|e| panic!("{}", e.render(&config.map)))
    }

    fn applied(rules: &str, frame: &str) -> LogMessage<'static> {
        let mut msg = message(frame);
        rewrite(rules).apply(&mut msg, &mut Vec::new());
        msg
    }

    /// Each rule is built once with each option its table declares: an option is accepted
    /// exactly when the rule reads it.
    #[test]
    fn every_rule_reads_every_option_it_declares() {
        for driver in RULES {
            sluice_config::declared::every_option_is_read(driver.sample, driver.options, |rule| {
                let text = format!("rewrite r {{ {rule}; }};");
                let config = sluice_config::load_str("t.conf", &text).map_err(|e| e.render())?;
                let s = &config.statements[0];
                Rewrite::compile(&s.body, s.pos, &Names::default(), &mut |name, pos| {
                    Err(ConfigError::new(pos, format!("no filter {name}")))
                })
                .map(drop)
                .map_err(|e| e.render(&config.map))
            });
        }
    }

    #[test]
    fn an_option_a_rule_does_not_read_is_refused_with_the_ones_it_does() {
        let text = "rewrite r { set-tag(\"x\" value(\"X\")); };";
        let config = sluice_config::load_str("t.conf", text).unwrap();
        let s = &config.statements[0];
        let e = Rewrite::compile(&s.body, s.pos, &Names::default(), &mut |name, pos| {
            Err(ConfigError::new(pos, format!("no filter {name}")))
        })
        .unwrap_err()
        .render(&config.map);
        assert!(
            e.contains("unknown option 'value' in set-tag()")
                && e.contains("valid options: condition"),
            "{e}"
        );
    }

    #[test]
    fn string_subst_follows_the_string_matcher_modes() {
        // What syslog-ng 3.38 writes for "hello a banana A" (checked by hand against it).
        let frame = "<13>Jan  5 13:56:09 host prog: hello a banana A";
        let cases = [
            (r#"subst("a", "A", type(string));"#, "hello a banana A"),
            (
                r#"subst("hello a banana A", "whole", type(string));"#,
                "whole",
            ),
            (
                r#"subst("hello", "X", type(string) flags(prefix global));"#,
                "X a banana A",
            ),
            (
                r#"subst("a", "A", type(string) flags(substring));"#,
                "hello A banana A",
            ),
            (
                r#"subst("a", "A", type(string) flags(substring global));"#,
                "hello A bAnAnA A",
            ),
            (
                r#"subst("A", "x", type(string) flags(substring ignore-case global));"#,
                "hello x bxnxnx x",
            ),
            (
                r#"subst("a", "A", flags(global ignore-case));"#,
                "hello A bAnAnA A",
            ),
        ];
        for (rule, want) in cases {
            let msg = applied(rule, frame);
            assert_eq!(String::from_utf8_lossy(msg.message()), want, "{rule}");
        }
    }

    #[test]
    fn fields_pairs_tags_and_priority() {
        let msg = applied(
            r#"set("$PROGRAM-$HOST", value("my.pair")); rename("my.pair" "other");
               set("new", value("PROGRAM")); unset(value("PID"));
               set-tag("t"); set-tag("u"); clear-tag("t");
               set-facility("local3"); set-severity("err"); set-severity("nonsense");"#,
            "<13>Jan  5 13:56:09 host prog[42]: text",
        );
        assert_eq!(Field::named("other").get(&msg), b"prog-host");
        assert_eq!(Field::named("my.pair").get(&msg), b"");
        assert_eq!((msg.program(), msg.pid()), (&b"new"[..], &b""[..]));
        let mut hdr = Vec::new();
        crate::macros::msghdr(&msg, false, &mut hdr);
        assert_eq!(hdr, b"new: ");
        assert!(msg.tags.contains(tag_id("u")) && !msg.tags.contains(tag_id("t")));
        assert_eq!((msg.facility(), msg.severity()), (19, 3));
        assert_eq!(applied(r#"set-pri("1024");"#, "<13>x").fields.pri, 13);
        assert_eq!(applied(r#"set-pri("165");"#, "<13>x").fields.pri, 165);
    }

    #[test]
    fn conditions_choose_the_messages() {
        let rules = r#"set("yes", value("x") condition(program("sshd") and not level(debug)));"#;
        let hit = applied(rules, "<13>Jan  5 13:56:09 host sshd[1]: a");
        let miss = applied(rules, "<13>Jan  5 13:56:09 host cron[1]: a");
        assert_eq!(Field::named("x").get(&hit), b"yes");
        assert!(miss.values.is_empty());
    }

    #[test]
    fn mistakes_are_named() {
        let text = r#"rewrite r { sett("x"); };"#;
        let config = sluice_config::load_str("t.conf", text).unwrap();
        let s = &config.statements[0];
        let err = Rewrite::compile(&s.body, s.pos, &Names::default(), &mut |_, pos| {
            Err(ConfigError::new(pos, "none"))
        })
        .unwrap_err()
        .render(&config.map);
        assert!(
            err.contains("unknown rewrite rule 'sett'") && err.contains("set"),
            "{err}"
        );
        let text = r#"rewrite r { credit-card-mask(value(".a")); };"#;
        let config = sluice_config::load_str("t.conf", text).unwrap();
        let s = &config.statements[0];
        let err = Rewrite::compile(&s.body, s.pos, &Names::default(), &mut |_, pos| {
            Err(ConfigError::new(pos, "none"))
        })
        .unwrap_err()
        .render(&config.map);
        assert!(err.contains("not supported yet"), "{err}");
    }
}
