//! Reading pattern database files: syslog-ng's patterndb XML, versions 2 to 5 (the ones
//! 3.38 reads), element by element as its loader reads them, with the same refusals — an
//! element out of place, a rule without an id — as `file:line:column: reason`.
//!
//! A directory is every `*.xml` file under it, in path order, read into one database as
//! `pdbtool merge` would join them: rulesets of the same program share one tree.

use super::radix::{Radix, Refused};
use super::{Action, ActionContent, ContextSpec, Inherit, PatternDb, Rule, Synthetic, Trigger};
use crate::correlation::Scope;
use crate::message::tag_id;
use crate::rewrite::Field;
use crate::template::{Names, Template};
use crate::values::name_id;
use roxmltree::{Document, Node};
use sluice_config::text_file;
use std::cell::Cell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// A database read from its files, with what was said about them and their examples.
#[derive(Debug, Default)]
pub struct Loaded {
    pub db: PatternDb,
    /// Patterns left out (duplicates, malformed fields), each with where it is written.
    pub warnings: Vec<String>,
    /// Every rule's `<examples>`.
    pub examples: Vec<Example>,
}

impl Loaded {
    /// What the rules' test messages show of rules that shadow each other: a test message
    /// that several rules match in full, or that another rule takes (its rule may never
    /// match), each said with the rules it names.
    pub fn shadowed(&self) -> Vec<String> {
        let mut said = Vec::new();
        let mut taken = super::Taken::default();
        for e in &self.examples {
            let Some(program) = &e.program else {
                continue;
            };
            let (program, message) = (program.as_bytes(), e.message.as_bytes());
            let all = self.db.applicable(program, message);
            if all.len() > 1 {
                let ids: Vec<&str> = all.iter().map(|r| r.id.as_str()).collect();
                said.push(format!(
                    "{}: rules {} all match the test message {:?} of rule {}; the first is taken",
                    e.location,
                    ids.join(", "),
                    e.message,
                    e.rule_id
                ));
            }
            if let super::Classified::Rule(rule) = self.db.classify(program, message, &mut taken) {
                if rule.id != e.rule_id {
                    said.push(format!(
                        "{}: the test message {:?} of rule {} is classified by rule {} ({}): rule {} may never match",
                        e.location, e.message, e.rule_id, rule.id, rule.location, e.rule_id
                    ));
                }
            }
        }
        said
    }
}

/// A rule's test message and the values it should give.
#[derive(Debug, Clone)]
pub struct Example {
    pub rule_id: String,
    pub program: Option<String>,
    pub message: String,
    pub values: Vec<(String, String)>,
    pub location: String,
}

/// Reads the database at `path` (a file, or a directory of `*.xml` files); templates of
/// values compile in `names`; the values of fields are named `prefix` and their name.
pub fn load(path: &Path, names: &Names, prefix: &str) -> Result<Loaded, String> {
    let files = if path.is_dir() {
        let mut found = Vec::new();
        xml_files(path, &mut found).map_err(|e| format!("{}: {e}", path.display()))?;
        found.sort();
        found
    } else {
        vec![path.to_path_buf()]
    };
    let mut texts = Vec::with_capacity(files.len());
    for file in files {
        let text = read(&file)?;
        texts.push((file, text));
    }
    load_texts(&texts, names, prefix)
}

/// Reads a database from the texts of its files, each with the name errors show.
pub fn load_texts(
    files: &[(PathBuf, String)],
    names: &Names,
    prefix: &str,
) -> Result<Loaded, String> {
    // Names in the order syslog-ng registers them, which is the order its pdbtool lists a
    // message's pairs in: the classifier's when the module loads, the fields' as patterns go
    // into the tree, the names of rules' values when a message first sets them (here: once
    // every file is read).
    name_id(".classifier.context_id");
    name_id(".classifier.class");
    name_id(".classifier.rule_id");
    let mut loader = Loader {
        loaded: Loaded::default(),
        programs: HashMap::new(),
        names,
        prefix,
        value_names: Vec::new(),
        ruleset_at: HashMap::new(),
    };
    loader.loaded.db.empty = true;
    loader.loaded.db.rulesets.push(Radix::default());
    let _ = loader.loaded.db.programs.set_root(0, "");
    for (file, text) in files {
        loader.file(file, text)?;
    }
    for (rule, value, name) in loader.value_names {
        loader.loaded.db.rules[rule].values[value].0 = Field::named(&name);
    }
    Ok(loader.loaded)
}

/// The `<ruleset>`s of `files`, as written, in one database (`pdbtool merge`).
pub fn merge(files: &[PathBuf]) -> Result<String, String> {
    let mut out = String::from("<?xml version='1.0' encoding='UTF-8'?>\n<patterndb version='4'>\n");
    for file in files {
        let text = read(file)?;
        let doc = parse(&file.display().to_string(), &text)?;
        for ruleset in doc
            .root_element()
            .children()
            .filter(|n| n.has_tag_name("ruleset"))
        {
            out.push_str("  ");
            out.push_str(&text[ruleset.range()]);
            out.push('\n');
        }
    }
    out.push_str("</patterndb>\n");
    Ok(out)
}

/// The text of a database file: a regular file of at most [`text_file::DATA_LIMIT`] bytes.
fn read(file: &Path) -> Result<String, String> {
    text_file::read_text(file, text_file::DATA_LIMIT)
        .map_err(|e| format!("{}: cannot read: {e}", file.display()))
}

/// The XML of the database file `name`. A `<!DOCTYPE>` is read, but entities it declares are
/// refused, as syslog-ng refuses them: one entity referenced many times makes gigabytes of
/// a small file. (Elements nested deep are read without recursion and then refused by the
/// grammar, which allows a few levels.)
fn parse<'i>(name: &str, text: &'i str) -> Result<Document<'i>, String> {
    let options = roxmltree::ParsingOptions {
        allow_dtd: true,
        ..Default::default()
    };
    if let Some(at) = entity_declaration(text) {
        let line = text[..at].matches('\n').count() + 1;
        return Err(format!(
            "{name}:{line}: entity declarations are refused: a pattern database needs none"
        ));
    }
    Document::parse_with_options(text, options).map_err(|e| format!("{name}: {e}"))
}

/// Where the first `<!ENTITY` of the document type declaration is, if it has one.
fn entity_declaration(text: &str) -> Option<usize> {
    let doctype = text.find("<!DOCTYPE")?;
    // Declarations are in the internal subset, `[…]>`, if the type has one.
    let subset = &text[doctype..];
    if subset
        .find(['[', '>'])
        .is_none_or(|at| subset.as_bytes()[at] == b'>')
    {
        return None;
    }
    let end = subset.find("]>").map_or(subset.len(), |end| end + 2);
    subset[..end].find("<!ENTITY").map(|at| doctype + at)
}

fn xml_files(dir: &Path, found: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        // A link to a directory is not followed: a loop of links would never end.
        if entry.file_type()?.is_dir() {
            xml_files(&path, found)?;
        } else if path.extension().is_some_and(|e| e == "xml") {
            found.push(path);
        }
    }
    Ok(())
}

struct Loader<'n> {
    loaded: Loaded,
    /// Each program pattern's ruleset.
    programs: HashMap<String, usize>,
    names: &'n Names,
    prefix: &'n str,
    /// The name of each rule's value (rule, value, name), given its id once all is read.
    value_names: Vec<(usize, usize, String)>,
    /// Where syslog-ng says each ruleset's program is (`pdbtool dump -T`).
    ruleset_at: HashMap<usize, String>,
}

/// Where a node is, and an error there.
struct File<'a> {
    name: &'a str,
    text: &'a str,
    /// Where each line starts: a node's line is found without counting from the top.
    lines: Vec<usize>,
    /// The last place a column was counted to (offset, characters from its line's start):
    /// nodes come in order, so a database written on one line is counted once, not once a rule.
    counted: Cell<(usize, usize)>,
}

impl File<'_> {
    /// The line (from 1) of `offset`, and how many characters precede it on that line.
    fn place(&self, offset: usize) -> (usize, usize) {
        let row = self.lines.partition_point(|&start| start <= offset);
        let start = self.lines[row - 1];
        let (from, before) = match self.counted.get() {
            (counted, chars) if (start..=offset).contains(&counted) => (counted, chars),
            _ => (start, 0),
        };
        let chars = before + self.text[from..offset].chars().count();
        self.counted.set((offset, chars));
        (row, chars)
    }

    fn at(&self, node: Node) -> String {
        let (row, chars) = self.place(node.range().start);
        format!("{}:{row}:{}", self.name, chars + 1)
    }

    /// Where syslog-ng's loader (GMarkup) says it is when it reads the text of `node`: the
    /// `<` of its closing tag, counted as GMarkup counts (columns from 1 on the first line,
    /// from 2 on the others).
    fn syslog_ng_at(&self, node: Node) -> String {
        let closing = format!("</{}>", node.tag_name().name());
        let (row, chars) = self.place(node.range().end.saturating_sub(closing.len()));
        format!("{}:{row}:{}", self.name, chars + 1 + usize::from(row > 1))
    }

    fn error(&self, node: Node, what: impl std::fmt::Display) -> String {
        format!("{}: {what}", self.at(node))
    }

    /// Refuses an element other than `allowed` among `parent`'s children, and text that is
    /// not whitespace.
    fn children<'a, 'i>(
        &self,
        parent: Node<'a, 'i>,
        allowed: &[&str],
    ) -> Result<Vec<Node<'a, 'i>>, String> {
        let mut out = Vec::new();
        for child in parent.children() {
            if child.is_text() && !child.text().unwrap_or_default().trim().is_empty() {
                return Err(self.error(
                    child,
                    format!("unexpected text in <{}>", parent.tag_name().name()),
                ));
            }
            if child.is_element() {
                let name = child.tag_name().name();
                if !allowed.contains(&name) {
                    let mut expected: Vec<String> =
                        allowed.iter().map(|a| format!("<{a}>")).collect();
                    let last = expected.pop().unwrap_or_default();
                    let expected = match expected.is_empty() {
                        true => last,
                        false => format!("{} or {last}", expected.join(", ")),
                    };
                    return Err(self.error(
                        child,
                        format!("unexpected <{name}> tag, expected {expected}"),
                    ));
                }
                out.push(child);
            }
        }
        Ok(out)
    }
}

/// The text of an element (entities and CDATA read), refusing elements inside it.
fn text_of(file: &File, node: Node) -> Result<String, String> {
    let mut text = String::new();
    for child in node.children() {
        if child.is_element() {
            return Err(file.error(
                child,
                format!(
                    "unexpected <{}> tag inside <{}>",
                    child.tag_name().name(),
                    node.tag_name().name()
                ),
            ));
        }
        if let Some(t) = child.text() {
            text.push_str(t);
        }
    }
    Ok(text)
}

impl Loader<'_> {
    fn file(&mut self, path: &Path, text: &str) -> Result<(), String> {
        let name = path.display().to_string();
        let doc = parse(&name, text)?;
        let lines = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        let file = File {
            name: &name,
            text,
            lines,
            counted: Cell::new((0, 0)),
        };
        let root = doc.root_element();
        if root.tag_name().name() != "patterndb" {
            return Err(file.error(
                root,
                format!(
                    "unexpected <{}> tag, expected a <patterndb>",
                    root.tag_name().name()
                ),
            ));
        }
        let version = root.attribute("version").unwrap_or("4");
        let number: i64 = version.trim().parse().unwrap_or(0);
        if number < 2 {
            return Err(file.error(root, "patterndb version too old: versions 3 to 5 are read (pdbtool convert upgrades older ones)"));
        }
        if number > 5 {
            return Err(file.error(
                root,
                format!("patterndb version {version} is too new: versions 3 to 5 are read"),
            ));
        }
        self.loaded.db.version = version.to_string();
        for ruleset in file.children(root, &["ruleset"])? {
            self.ruleset(&file, ruleset)?;
        }
        Ok(())
    }

    fn ruleset(&mut self, file: &File, node: Node) -> Result<(), String> {
        self.loaded.db.empty = false;
        let children = file.children(
            node,
            &["rules", "urls", "url", "description", "patterns", "pattern"],
        )?;
        // The program patterns: the ruleset they name (the first one's, made if new); the
        // others must lead to the same one.
        let mut ruleset = None;
        let mut patterns = Vec::new();
        for child in &children {
            match child.tag_name().name() {
                "pattern" => patterns.push(*child),
                "patterns" => patterns.extend(file.children(*child, &["pattern"])?),
                "urls" => {
                    file.children(*child, &["url"])?;
                }
                _ => {}
            }
        }
        for p in patterns {
            let program = text_of(file, p)?;
            match (ruleset, self.programs.get(&program)) {
                (None, Some(&r)) => ruleset = Some(r),
                (None, None) => {
                    let r = self.loaded.db.rulesets.len();
                    self.loaded.db.rulesets.push(Radix::default());
                    self.program(file, p, program, r);
                    ruleset = Some(r);
                }
                (Some(r), None) => self.program(file, p, program, r),
                (Some(r), Some(&other)) if other != r => {
                    return Err(file.error(p, format!("joining rulesets with mismatching program name sets, program={program}")));
                }
                (Some(_), Some(_)) => {}
            }
        }
        let ruleset = ruleset.unwrap_or(0);
        for rules in children.iter().filter(|c| c.tag_name().name() == "rules") {
            for rule in file.children(*rules, &["rule"])? {
                self.rule(file, rule, ruleset)?;
            }
        }
        Ok(())
    }

    /// The program pattern `program` (written at `node`) leads to ruleset `r`.
    fn program(&mut self, file: &File, node: Node, program: String, r: usize) {
        let at = file.at(node);
        // Where syslog-ng says the program is: the pattern that made its ruleset.
        let written_at = self
            .ruleset_at
            .entry(r)
            .or_insert_with(|| file.syslog_ng_at(node))
            .clone();
        let inserted =
            self.loaded
                .db
                .programs
                .insert(program.as_bytes(), r, (&at, &written_at), self.prefix);
        if let Err(Refused::Malformed(why)) = inserted {
            self.loaded
                .warnings
                .push(format!("{at}: program pattern {program:?} left out: {why}"));
        }
        self.programs.insert(program, r);
    }

    fn rule(&mut self, file: &File, node: Node, ruleset: usize) -> Result<(), String> {
        let Some(id) = node.attribute("id") else {
            return Err(file.error(node, "no id attribute for rule element"));
        };
        let class = node.attribute("class").map(str::to_string);
        let mut rule = Rule {
            index: self.loaded.db.rules.len(),
            id: id.to_string(),
            class: class.clone(),
            id_value: super::intern(id),
            class_value: super::intern(class.as_deref().unwrap_or("system")),
            tags: Vec::new(),
            values: Vec::new(),
            context: self.context(file, node, id, "")?,
            actions: Vec::new(),
            location: file.at(node),
        };
        if let Some(class) = &class {
            // syslog-ng makes this tag's name in a buffer of 32 bytes.
            let mut tag = format!(".classifier.{class}");
            while tag.len() > 31 {
                tag.pop();
            }
            rule.tags.push(tag_id(&tag));
        }
        let children = file.children(
            node,
            &[
                "patterns",
                "pattern",
                "tags",
                "tag",
                "values",
                "value",
                "description",
                "urls",
                "url",
                "actions",
                "examples",
            ],
        )?;
        let mut patterns = Vec::new();
        let index = self.loaded.db.rules.len();
        for child in &children {
            match child.tag_name().name() {
                "pattern" => patterns.push(*child),
                "patterns" => patterns.extend(file.children(*child, &["pattern"])?),
                "tags" => {
                    for t in file.children(*child, &["tag"])? {
                        rule.tags.push(tag_id(&text_of(file, t)?));
                    }
                }
                "tag" => rule.tags.push(tag_id(&text_of(file, *child)?)),
                "values" => {
                    for v in file.children(*child, &["value"])? {
                        let (name, template) = self.value(file, v, id)?;
                        self.value_names.push((index, rule.values.len(), name));
                        rule.values.push((Field::Message, template));
                    }
                }
                "value" => {
                    let (name, template) = self.value(file, *child, id)?;
                    self.value_names.push((index, rule.values.len(), name));
                    rule.values.push((Field::Message, template));
                }
                "examples" => {
                    for e in file.children(*child, &["example"])? {
                        self.example(file, e, id)?;
                    }
                }
                "actions" => {
                    for a in file.children(*child, &["action"])? {
                        rule.actions.push(self.action(file, a, id)?);
                    }
                }
                "urls" => {
                    file.children(*child, &["url"])?;
                }
                _ => {}
            }
        }
        self.loaded.db.rules.push(rule);
        for p in patterns {
            let pattern = text_of(file, p)?;
            let at = format!("{} (rule {id})", file.at(p));
            let written_at = file.syslog_ng_at(p);
            match self.loaded.db.rulesets[ruleset].insert(
                pattern.as_bytes(),
                index,
                (&at, &written_at),
                self.prefix,
            ) {
                Ok(()) => {}
                Err(Refused::Duplicate(_, other)) => self.loaded.warnings.push(format!(
                    "{at}: the pattern {pattern:?} is also {other}'s; that one is kept"
                )),
                Err(Refused::Malformed(why)) => self
                    .loaded
                    .warnings
                    .push(format!("{at}: the pattern {pattern:?} is left out: {why}")),
            }
        }
        Ok(())
    }

    /// The context `node`'s `context-id`, `context-scope` and `context-timeout` attributes
    /// describe (`None` without an id); `what` names `node` in errors.
    fn context(
        &self,
        file: &File,
        node: Node,
        rule: &str,
        what: &str,
    ) -> Result<Option<ContextSpec>, String> {
        let Some(id) = node.attribute("context-id") else {
            return Ok(None);
        };
        let id = Template::compile_in(id, self.names).map_err(|e| {
            file.error(
                node,
                format!(
                    "error compiling {what}context-id, rule={rule}, context-id={id}, error={e}"
                ),
            )
        })?;
        let scope = match node.attribute("context-scope") {
            None => Scope::Process,
            Some(s) => Scope::parse(s).ok_or_else(|| {
                file.error(
                    node,
                    format!(
                        "unknown context scope: {s}; the scopes are process, program, host, global"
                    ),
                )
            })?,
        };
        let timeout = match node.attribute("context-timeout") {
            None => 0,
            Some(t) => t.trim().parse().map_err(|_| {
                file.error(
                    node,
                    format!("context-timeout is a number of seconds, not {t:?}"),
                )
            })?,
        };
        Ok(Some(ContextSpec { id, scope, timeout }))
    }

    /// An `<action>` of rule `rule`.
    fn action(&self, file: &File, node: Node, rule: &str) -> Result<Action, String> {
        let trigger = match node.attribute("trigger").unwrap_or("match") {
            "match" => Trigger::Match,
            "timeout" => Trigger::Timeout,
            other => {
                return Err(file.error(
                    node,
                    format!("unknown trigger type: {other}; the triggers are match and timeout"),
                ))
            }
        };
        let condition = match node.attribute("condition") {
            Some(text) => Some(
                crate::template::functions::compile_condition(
                    &format!("rule {rule}: <action>"),
                    text,
                    self.names,
                )
                .map_err(|e| file.error(node, e))?,
            ),
            None => None,
        };
        let rate = node.attribute("rate").map(|text| {
            // As syslog-ng reads it: `N` or `N/M`, numbers as atoi reads them.
            let number = |t: &str| -> u32 {
                let digits: String = t
                    .trim_start()
                    .chars()
                    .take_while(char::is_ascii_digit)
                    .collect();
                digits.parse().unwrap_or(0)
            };
            let (n, m) = text.split_once('/').unwrap_or((text, "1"));
            (number(n), number(m).max(1))
        });
        let mut content = ActionContent::Nothing;
        for child in file.children(node, &["message", "create-context"])? {
            content = match child.tag_name().name() {
                "message" => ActionContent::Message(self.synthetic(file, child, rule)?),
                _ => {
                    let Some(spec) = self.context(file, child, rule, "create-context ")? else {
                        return Err(file.error(
                            child,
                            format!("context-id attribute is missing from <create-context>, rule={rule}"),
                        ));
                    };
                    let mut message = Synthetic::default();
                    for m in file.children(child, &["message"])? {
                        message = self.synthetic(file, m, rule)?;
                    }
                    ActionContent::CreateContext(spec, message)
                }
            };
        }
        Ok(Action {
            trigger,
            condition,
            rate: rate.filter(|(n, _)| *n > 0),
            content,
        })
    }

    /// A `<message>`: its inheritance, tags and values.
    fn synthetic(&self, file: &File, node: Node, rule: &str) -> Result<Synthetic, String> {
        let mut message = Synthetic::default();
        if let Some(p) = node.attribute("inherit-properties") {
            message.inherit = Inherit::of_properties(p)
                .ok_or_else(|| file.error(node, format!("unknown inherit-properties: {p}")))?;
        }
        if let Some(m) = node.attribute("inherit-mode") {
            message.inherit = Inherit::parse(m).ok_or_else(|| {
                file.error(
                    node,
                    format!("unknown inherit mode {m}; the modes are none, last-message, context"),
                )
            })?;
        }
        for child in file.children(node, &["values", "value", "tags", "tag"])? {
            let (values, tags) = match child.tag_name().name() {
                "values" => (file.children(child, &["value"])?, Vec::new()),
                "value" => (vec![child], Vec::new()),
                "tags" => (Vec::new(), file.children(child, &["tag"])?),
                _ => (Vec::new(), vec![child]),
            };
            for v in values {
                let (name, template) = self.value(file, v, rule)?;
                message.values.push((Field::named(&name), template));
            }
            for t in tags {
                message.tags.push(tag_id(&text_of(file, t)?));
            }
        }
        Ok(message)
    }

    fn value(&self, file: &File, node: Node, rule: &str) -> Result<(String, Template), String> {
        let Some(name) = node.attribute("name") else {
            return Err(file.error(
                node,
                format!("<value> misses name attribute in rule {rule}"),
            ));
        };
        let text = text_of(file, node)?;
        let template = Template::compile_in(&text, self.names).map_err(|e| {
            file.error(node, format!("error compiling value template, rule={rule}, name={name}, value={text}, error={e}"))
        })?;
        Ok((name.to_string(), template))
    }

    fn example(&mut self, file: &File, node: Node, rule: &str) -> Result<(), String> {
        let mut example = Example {
            rule_id: rule.to_string(),
            program: None,
            message: String::new(),
            values: Vec::new(),
            location: file.at(node),
        };
        for child in file.children(node, &["test_message", "test_values"])? {
            if child.tag_name().name() == "test_message" {
                example.program = child.attribute("program").map(str::to_string);
                example.message = text_of(file, child)?;
            } else {
                for v in file.children(child, &["test_value"])? {
                    let Some(name) = v.attribute("name") else {
                        return Err(file.error(v, "<test_value> misses name attribute"));
                    };
                    example.values.push((name.to_string(), text_of(file, v)?));
                }
            }
        }
        self.loaded.examples.push(example);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::patterndb::Classified;

    const SSHD: &str = r#"<?xml version='1.0' encoding='UTF-8'?>
<patterndb version='4' pub_date='2010-10-17'>
  <ruleset name='sshd' id='1'>
    <patterns><pattern>sshd</pattern></patterns>
    <rules>
      <rule provider='me' id='r1' class='system'>
        <patterns>
          <pattern>Accepted @ESTRING:usracct.authmethod: @for @ESTRING:usracct.username: @from @IPvANY:usracct.device@ port @NUMBER:usracct.port@ @ANYSTRING:usracct.service@</pattern>
        </patterns>
        <tags><tag>usracct</tag><tag>secevt</tag></tags>
        <values><value name='usracct.type'>login</value></values>
        <examples>
          <example>
            <test_message program='sshd'>Accepted password for bob from 10.50.0.247 port 42156 ssh2</test_message>
            <test_values><test_value name='usracct.username'>bob</test_value></test_values>
          </example>
        </examples>
      </rule>
    </rules>
  </ruleset>
  <ruleset name='any' id='2'>
    <rules>
      <rule id='r2'><patterns><pattern>hello @STRING:who@</pattern></patterns></rule>
    </rules>
  </ruleset>
</patterndb>"#;

    fn loaded(text: &str) -> Result<Loaded, String> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.xml");
        std::fs::write(&path, text).unwrap();
        load(&path, &Names::default(), "")
    }

    #[test]
    fn rulesets_rules_and_examples_are_read() {
        let l = loaded(SSHD).unwrap();
        assert!(l.warnings.is_empty(), "{:?}", l.warnings);
        assert_eq!(l.examples.len(), 1);
        assert_eq!(
            l.examples[0].values,
            [("usracct.username".to_string(), "bob".to_string())]
        );
        let msg = b"Accepted password for bob from 10.50.0.247 port 42156 ssh2";
        let mut taken = crate::patterndb::Taken::default();
        match l.db.classify(b"sshd", msg, &mut taken) {
            Classified::Rule(rule) => {
                assert_eq!(rule.id, "r1");
                assert_eq!(rule.tags.len(), 3);
                assert_eq!(taken.message.len(), 5);
            }
            other => panic!("{other:?}"),
        }
        // Another program: the ruleset without a program pattern.
        let rule = match l.db.classify(b"cron", b"hello world", &mut taken) {
            Classified::Rule(rule) => rule.id.as_str(),
            _ => "",
        };
        assert_eq!(rule, "r2");
        assert!(matches!(
            l.db.classify(b"sshd", b"hello world", &mut taken),
            Classified::Unknown
        ));
    }

    #[test]
    fn errors_name_the_place_and_the_reason() {
        let e = loaded("<patterndb version='4'><ruleset><rules><rule class='x'/></rules></ruleset></patterndb>").unwrap_err();
        assert!(e.contains("p.xml:1:40: no id attribute"), "{e}");
        let e = loaded("<patterndb version='4'>\n<rulez/></patterndb>").unwrap_err();
        assert!(
            e.contains("p.xml:2:1: unexpected <rulez> tag, expected <ruleset>"),
            "{e}"
        );
        let e = loaded("<patterndb version='6'/>").unwrap_err();
        assert!(e.contains("too new"), "{e}");
        assert!(loaded("<patterndb>").unwrap_err().contains("p.xml"));
    }

    #[test]
    fn elements_nested_deep_are_refused_not_a_crash() {
        let deep = 100_000;
        let text = format!(
            "<patterndb version='4'><ruleset name='r' id='r'><rules><rule id='x'>\
             <patterns><pattern>a</pattern></patterns><tags><tag>{}{}</tag></tags>\
             </rule></rules></ruleset></patterndb>",
            "<x>".repeat(deep),
            "</x>".repeat(deep)
        );
        let e = loaded(&text).unwrap_err();
        assert!(e.contains("unexpected <x> tag inside <tag>"), "{e}");
    }

    #[test]
    fn entities_a_document_type_declares_are_refused() {
        let bomb = format!(
            "<?xml version='1.0'?>\n<!DOCTYPE patterndb [<!ENTITY big '{}'>]>\n\
             <patterndb version='4'><ruleset name='r' id='r'><rules><rule id='x'>\
             <patterns><pattern>a</pattern></patterns><description>{}</description>\
             </rule></rules></ruleset></patterndb>",
            "A".repeat(1 << 20),
            "&big;".repeat(4000)
        );
        let e = loaded(&bomb).unwrap_err();
        assert!(
            e.contains("p.xml:2: entity declarations are refused"),
            "{e}"
        );
        // A document type without declarations is read; nothing outside is fetched.
        let plain = SSHD.replacen(
            "<patterndb",
            "<!DOCTYPE patterndb SYSTEM 'patterndb.dtd'>\n<patterndb",
            1,
        );
        assert!(loaded(&plain).is_ok(), "{:?}", loaded(&plain).err());
    }

    #[test]
    fn places_on_one_long_line_are_counted_from_the_last_one() {
        let rules: String = (0..3)
            .map(|i| format!("<rule id='r{i}'><patterns><pattern>é{i} @NUMBER:n@</pattern></patterns></rule>"))
            .collect();
        let text = format!("<patterndb version='4'><ruleset name='r' id='r'><rules>{rules}</rules></ruleset></patterndb>");
        let l = loaded(&text).unwrap();
        let at: Vec<&str> =
            l.db.rules
                .iter()
                .map(|r| r.location.rsplit_once("p.xml:").unwrap().1)
                .collect();
        assert_eq!(at, ["1:56", "1:130", "1:204"]);
    }

    #[test]
    fn rules_that_shadow_each_other_are_said() {
        let l = loaded(
            "<patterndb version='4'><ruleset><pattern>p</pattern><rules>
               <rule id='wide'><patterns><pattern>user @ANYSTRING:u@</pattern></patterns></rule>
               <rule id='narrow'><patterns><pattern>user @STRING:u@ logged in</pattern></patterns>
                 <examples><example><test_message program='p'>user bob logged in</test_message></example></examples></rule>
               <rule id='lit'><patterns><pattern>user admin logged in</pattern></patterns>
                 <examples><example><test_message program='p'>user admin logged in</test_message></example></examples></rule>
             </rules></ruleset></patterndb>",
        )
        .unwrap();
        let said = l.shadowed();
        // "user bob logged in": both match, and wide's @ANYSTRING@, added first, is tried
        // first: narrow never matches (syslog-ng's pdbtool match agrees). "user admin logged
        // in": the literal is taken.
        assert_eq!(said.len(), 3, "{said:#?}");
        assert!(
            said[0].contains("rules wide, narrow all match"),
            "{}",
            said[0]
        );
        assert!(
            said[1].contains("is classified by rule wide"),
            "{}",
            said[1]
        );
        assert!(
            said[1].contains("rule narrow may never match"),
            "{}",
            said[1]
        );
        assert!(
            said[2].contains("rules lit, wide, narrow all match"),
            "{}",
            said[2]
        );
    }

    #[test]
    fn duplicate_and_malformed_patterns_are_said() {
        let l = loaded(
            "<patterndb version='4'><ruleset><rules>
               <rule id='a'><patterns><pattern>x @NUMBER:n@</pattern></patterns></rule>
               <rule id='b'><patterns><pattern>x @NUMBER:n@</pattern><pattern>y @BAD:n@</pattern></patterns></rule>
             </rules></ruleset></patterndb>",
        )
        .unwrap();
        assert_eq!(l.warnings.len(), 2, "{:?}", l.warnings);
        assert!(
            l.warnings[0].contains("rule b") && l.warnings[0].contains("rule a"),
            "{}",
            l.warnings[0]
        );
        assert!(l.warnings[1].contains("not a parser"), "{}", l.warnings[1]);
    }
}
