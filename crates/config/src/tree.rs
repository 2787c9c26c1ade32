//! The parsed configuration: statements holding nodes, values and filter expressions.
//!
//! Every statement has the shape `kind [name] { body };` (or `template name "text";`). A body is
//! a list of nodes; a node is `name(args)` — a driver, an option or a reference such as
//! `source(s_net)` — or `name { body }`, an inline object or nested path in a `log`. The body of
//! a `filter` is a boolean expression instead. Values keep their kind (quoted string or bare
//! word) and position; their meaning (a port, a size, a boolean) is read by the consumer through
//! the `Value::as_*` helpers, which give positioned errors.
//!
//! `block` statements never reach the tree: the parser keeps their text and, where one is used,
//! replaces the reference with that text, its arguments filled in (`Parser::block_reference`).

use crate::error::{ConfigError, Pos};
use crate::lexer::{tokenize, Tok, Token};
use crate::source::SourceMap;
use std::collections::HashMap;

#[derive(Clone, Debug)]
pub struct Config {
    pub version: Option<String>,
    pub statements: Vec<Statement>,
    pub map: SourceMap,
}

#[derive(Clone, Debug)]
pub struct Statement {
    /// `source`, `destination`, `filter`, `template`, `log`, `options`, …
    pub kind: String,
    pub name: Option<(String, Pos)>,
    pub body: Body,
    pub pos: Pos,
}

#[derive(Clone, Debug)]
pub enum Body {
    Nodes(Vec<Node>),
    Filter(Expr),
    /// `template t "text";`
    Text(Value),
    /// `if (…) {…} elif (…) {…} else {…};` in a log path: the arms in order.
    If(Vec<IfArm>),
}

/// One arm of an `if` chain.
#[derive(Clone, Debug)]
pub struct IfArm {
    pub condition: Condition,
    pub body: Vec<Node>,
    pub pos: Pos,
}

#[derive(Clone, Debug)]
pub enum Condition {
    /// `if (filter expression) {…}` or `elif (…) {…}`.
    Filter(Expr),
    /// `if {…}` or `elif {…}`: the block itself decides (it matched when no filter or
    /// parser in it rejected the message).
    Block,
    /// `else {…}`.
    Else,
}

#[derive(Clone, Debug)]
pub struct Node {
    pub name: String,
    pub pos: Pos,
    pub args: Vec<Arg>,
    /// `name { … }`: an inline object or nested log path.
    pub block: Option<Box<Body>>,
}

#[derive(Clone, Debug)]
pub enum Arg {
    Value(Value),
    Option(Node),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueKind {
    /// Quoted.
    Str,
    /// Bare: identifiers, numbers, paths.
    Word,
}

#[derive(Clone, Debug)]
pub struct Value {
    pub text: String,
    pub kind: ValueKind,
    pub pos: Pos,
}

#[derive(Clone, Debug)]
pub enum Expr {
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
    Not(Box<Expr>),
    /// `facility(kern)`, `filter(f_name)`, `message("x" type(pcre))`, …
    Call(Node),
    /// `"$HOST" eq "x"`
    Compare {
        left: Value,
        op: Value,
        right: Value,
    },
}

impl Statement {
    /// The statement as text without positions: two statements with the same fingerprint
    /// mean the same, wherever they stand in the file. A reload keeps what did not change.
    pub fn fingerprint(&self) -> String {
        let mut out = format!("{} ", self.kind);
        if let Some((name, _)) = &self.name {
            out.push_str(name);
        }
        body_fingerprint(&self.body, &mut out);
        out
    }
}

fn body_fingerprint(body: &Body, out: &mut String) {
    match body {
        Body::Nodes(nodes) => {
            out.push('{');
            for n in nodes {
                node_fingerprint(n, out);
            }
            out.push('}');
        }
        Body::Text(v) => value_fingerprint(v, out),
        // Filters and if-chains: their debug text (positions included, which only makes a
        // reload rebuild a little more than it must).
        other => out.push_str(&format!("{other:?}")),
    }
}

fn node_fingerprint(n: &Node, out: &mut String) {
    out.push_str(&n.key());
    out.push('(');
    for a in &n.args {
        match a {
            Arg::Value(v) => value_fingerprint(v, out),
            Arg::Option(o) => node_fingerprint(o, out),
        }
    }
    if let Some(b) = &n.block {
        body_fingerprint(b, out);
    }
    out.push(')');
}

fn value_fingerprint(v: &Value, out: &mut String) {
    out.push_str(&format!("{:?}{:?} ", v.kind, v.text));
}

impl Node {
    /// The name with `-` read as `_`.
    /// The option's name with `_` for `-`, and syslog-ng's obsolete names as their new ones
    /// (syslog-ng 3.38 reads them with a warning): `long_hostnames` is `chain_hostnames`.
    pub fn key(&self) -> String {
        let key = crate::normalize(&self.name);
        match key.as_str() {
            "long_hostnames" => "chain_hostnames".to_string(),
            _ => key,
        }
    }

    pub fn values(&self) -> impl Iterator<Item = &Value> {
        self.args.iter().filter_map(|a| match a {
            Arg::Value(v) => Some(v),
            Arg::Option(_) => None,
        })
    }

    pub fn options(&self) -> impl Iterator<Item = &Node> {
        self.args.iter().filter_map(|a| match a {
            Arg::Option(n) => Some(n),
            Arg::Value(_) => None,
        })
    }

    /// The error for this option, unknown inside `within` (a driver, parser or rule), listing
    /// the `valid` ones.
    pub fn unknown_in(&self, within: &Node, valid: &[&str]) -> ConfigError {
        ConfigError::unknown(
            self.pos,
            "option",
            &self.name,
            &format!(" in {}()", within.name),
            valid,
        )
    }

    /// The one value of an option such as `port(514)`.
    pub fn value(&self) -> Result<&Value, ConfigError> {
        let mut values = self.values();
        match (values.next(), values.next(), self.options().next()) {
            (Some(v), None, None) => Ok(v),
            _ => Err(ConfigError::new(
                self.pos,
                format!("{}() takes exactly one value", self.name),
            )),
        }
    }

    /// The first positional value, if any (`file("/path" …)`).
    pub fn first_value(&self) -> Option<&Value> {
        self.values().next()
    }

    pub fn bool(&self) -> Result<bool, ConfigError> {
        self.value()?.as_bool()
    }

    pub fn u64(&self) -> Result<u64, ConfigError> {
        self.value()?.as_u64()
    }

    pub fn string(&self) -> Result<String, ConfigError> {
        Ok(self.value()?.text.clone())
    }

    /// Values given as a list, `flags(a, b)` or `flags(a b)`.
    pub fn words(&self) -> Result<Vec<&Value>, ConfigError> {
        if let Some(opt) = self.options().next() {
            return Err(ConfigError::new(
                opt.pos,
                format!("{}() takes a list of values", self.name),
            ));
        }
        Ok(self.values().collect())
    }
}

impl Value {
    pub fn as_bool(&self) -> Result<bool, ConfigError> {
        match self.text.to_ascii_lowercase().as_str() {
            "yes" | "on" | "true" | "1" => Ok(true),
            "no" | "off" | "false" | "0" => Ok(false),
            _ => Err(ConfigError::new(
                self.pos,
                format!("expected yes or no, found '{}'", self.text),
            )),
        }
    }

    /// An integer, with syslog-ng's size suffixes: `k`/`M`/`G` (×1000) and `KiB`/`MiB`/`GiB`
    /// (×1024), with or without a trailing `B`. A leading `0` means octal (`perm(0644)`).
    pub fn as_u64(&self) -> Result<u64, ConfigError> {
        parse_number(&self.text).ok_or_else(|| {
            ConfigError::new(
                self.pos,
                format!("expected a number, found '{}'", self.text),
            )
        })
    }
}

fn parse_number(text: &str) -> Option<u64> {
    let digits = text.chars().take_while(char::is_ascii_digit).count();
    if digits == 0 {
        return None;
    }
    let (num, suffix) = text.split_at(digits);
    let base: u64 = if num.len() > 1 && num.starts_with('0') && suffix.is_empty() {
        return u64::from_str_radix(num, 8).ok();
    } else {
        num.parse().ok()?
    };
    let mult: u64 = match suffix.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" => 1000,
        "m" | "mb" => 1_000_000,
        "g" | "gb" => 1_000_000_000,
        "kib" => 1 << 10,
        "mib" => 1 << 20,
        "gib" => 1 << 30,
        _ => return None,
    };
    base.checked_mul(mult)
}

/// The statement kinds of syslog-ng's top level.
pub const STATEMENTS: &[&str] = &[
    "source",
    "destination",
    "filter",
    "parser",
    "rewrite",
    "template",
    "log",
    "options",
    "block",
    "template_function",
    "python",
    "python_fetcher",
];

pub fn parse(mut map: SourceMap) -> Result<Config, Box<crate::LoadError>> {
    let mut expansions = Vec::new();
    let parsed = tokenize(&map.text).and_then(|toks| {
        let mut p = Parser {
            toks,
            at: 0,
            map: &map,
            expansions: Vec::new(),
            blocks: HashMap::new(),
            depth: 0,
        };
        let mut statements = Vec::new();
        let mut read = || {
            while p.peek() != &Tok::End {
                statements.extend(p.statement()?);
            }
            Ok(())
        };
        let read = read();
        expansions = std::mem::take(&mut p.expansions);
        read.map(|()| statements)
    });
    // Expanded blocks become texts of the map, so that an error in one shows it.
    for e in expansions {
        map.add_generated(e.name, &e.text);
    }
    match parsed {
        Ok(statements) => Ok(Config {
            version: map.version.clone(),
            statements,
            map,
        }),
        Err(e) => Err(crate::LoadError::new(e, map)),
    }
}

/// Where a block may be used, named as in `block source name() {…}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Context {
    Root,
    Source,
    Destination,
    Parser,
    Rewrite,
    Filter,
    Log,
    Options,
}

impl Context {
    const NAMES: [(&'static str, Context); 8] = [
        ("root", Context::Root),
        ("source", Context::Source),
        ("destination", Context::Destination),
        ("parser", Context::Parser),
        ("rewrite", Context::Rewrite),
        ("filter", Context::Filter),
        ("log", Context::Log),
        ("options", Context::Options),
    ];

    /// The context of a statement's or an inline object's body.
    fn of(kind: &str) -> Context {
        Context::NAMES
            .iter()
            .find(|(name, _)| *name == kind)
            .map_or(Context::Log, |&(_, c)| c)
    }
}

/// `block CONTEXT NAME(param(default) … [...]) { content };`: text that a reference
/// `NAME(param(value) …)` in the same context is replaced with, its backticks filled in.
#[derive(Debug)]
struct Block {
    context: Context,
    name: String,
    /// Parameter names (normalized) and defaults; `None` for a mandatory one: `param()`.
    params: Vec<(String, Option<String>)>,
    /// `...`: arguments that are not parameters go into `` `__VARARGS__` `` as `name(value) `.
    varargs: bool,
    content: String,
    /// Where the content starts in the definition, for errors in filling it in.
    at: Pos,
}

impl Block {
    /// Where a position in the block's content is in the configuration.
    fn place(&self, p: Pos) -> Pos {
        Pos {
            line: self.at.line + p.line,
            col: if p.line == 0 {
                self.at.col + p.col
            } else {
                p.col
            },
            len: p.len,
        }
    }
}

/// A block as it was expanded where it is used.
struct Expansion {
    /// `file:line (block b())`, where it was used: the name under which the text joins the
    /// source map.
    name: String,
    text: String,
    /// The index its first line has in the source map (after the files' lines and those of
    /// earlier expansions).
    first_line: u32,
}

/// syslog-ng's limit on nested includes, which also bounds blocks used within blocks.
const MAX_BLOCK_DEPTH: u8 = 15;

struct Parser<'m> {
    toks: Vec<Token>,
    at: usize,
    map: &'m SourceMap,
    /// The texts blocks were expanded into; token text `n` is `expansions[n - 1]`.
    expansions: Vec<Expansion>,
    blocks: HashMap<String, Block>,
    /// How deep the parser is in bodies, options and filter expressions now.
    depth: usize,
}

/// How deep bodies (`log { log { … } }`, `if`), options (`a(b(c()))`) and filter expressions
/// (`not`, parentheses) may nest. syslog-ng 3.38 reads 10,000 and crashes further on; no
/// configuration needs more than a few dozen, and every recursive step after reading (building,
/// matching each message, dropping) stays far inside a thread's stack at this depth.
pub const MAX_NESTING: usize = 256;

impl Parser<'_> {
    /// Runs `read` one level deeper, refusing to go past [`MAX_NESTING`].
    fn nested<T>(
        &mut self,
        read: impl FnOnce(&mut Self) -> Result<T, ConfigError>,
    ) -> Result<T, ConfigError> {
        if self.depth >= MAX_NESTING {
            return Err(ConfigError::new(
                self.pos(),
                format!("nested more than {MAX_NESTING} deep"),
            ));
        }
        self.depth += 1;
        let read = read(self);
        self.depth -= 1;
        read
    }

    fn peek(&self) -> &Tok {
        &self.toks[self.at].tok
    }

    fn peek_at(&self, n: usize) -> &Tok {
        &self.toks[(self.at + n).min(self.toks.len() - 1)].tok
    }

    fn pos(&self) -> Pos {
        self.toks[self.at].pos
    }

    fn next(&mut self) -> Token {
        let t = self.toks[self.at].clone();
        if self.at < self.toks.len() - 1 {
            self.at += 1;
        }
        t
    }

    fn describe(tok: &Tok) -> String {
        match tok {
            Tok::Open => "'{'".into(),
            Tok::Close => "'}'".into(),
            Tok::LParen => "'('".into(),
            Tok::RParen => "')'".into(),
            Tok::Semi => "';'".into(),
            Tok::Comma => "','".into(),
            Tok::Word(w) => format!("'{w}'"),
            Tok::Str(s) => format!("\"{s}\""),
            Tok::End => "the end of the configuration".into(),
        }
    }

    fn expect(&mut self, want: Tok, context: &str) -> Result<(), ConfigError> {
        if *self.peek() == want {
            self.next();
            return Ok(());
        }
        Err(ConfigError::new(
            self.pos(),
            format!(
                "expected {} {context}, found {}",
                Self::describe(&want),
                Self::describe(self.peek())
            ),
        ))
    }

    fn word(&mut self, context: &str) -> Result<(String, Pos), ConfigError> {
        let t = self.next();
        match t.tok {
            Tok::Word(w) => Ok((w, t.pos)),
            other => Err(ConfigError::new(
                t.pos,
                format!(
                    "expected a name {context}, found {}",
                    Self::describe(&other)
                ),
            )),
        }
    }

    /// The text a token was read from.
    fn text_of(&self, token: &Token) -> &str {
        match token.text {
            0 => &self.map.text,
            n => &self.expansions[n as usize - 1].text,
        }
    }

    /// `file:line` of a position, in a file or in a block expanded before.
    fn origin(&self, pos: Pos) -> String {
        if pos.line < self.map.line_count() {
            let (file, line, _) = self.map.origin(pos.line);
            return format!("{file}:{line}");
        }
        match self
            .expansions
            .iter()
            .rev()
            .find(|e| e.first_line <= pos.line)
        {
            Some(e) => format!("{}, line {}", e.name, pos.line - e.first_line + 1),
            None => "?".into(),
        }
    }

    /// At `(`: the text up to the matching `)` as written, after which parsing goes on.
    /// `()` (only white space) is `None`; `("")` and `('')` are the empty string.
    fn raw_parens(&mut self) -> Result<Option<String>, ConfigError> {
        let raw = self.raw_between(Tok::LParen, Tok::RParen)?;
        Ok(match raw.trim() {
            "" => None,
            "\"\"" | "''" => Some(String::new()),
            _ => Some(raw),
        })
    }

    /// At an opening `open`: the text up to the matching `close` as written, after which
    /// parsing goes on.
    fn raw_between(&mut self, open: Tok, close: Tok) -> Result<String, ConfigError> {
        let first = self.next();
        debug_assert_eq!(first.tok, open);
        let mut depth = 1;
        let last = loop {
            let t = self.next();
            match &t.tok {
                t_ if *t_ == open => depth += 1,
                t_ if *t_ == close && depth == 1 => break t,
                t_ if *t_ == close => depth -= 1,
                Tok::End => {
                    return Err(ConfigError::new(
                        first.pos,
                        format!("unclosed {}", Self::describe(&open)),
                    ))
                }
                _ => {}
            }
        };
        if first.text != last.text {
            // An expanded block opened it and the text after the block closes it (or the
            // other way round): there is no one text to take.
            return Err(ConfigError::new(
                first.pos,
                format!(
                    "{} and its closing {} must be written in the same block or file",
                    Self::describe(&open),
                    Self::describe(&close)
                ),
            ));
        }
        Ok(self.text_of(&first)[first.offset as usize + 1..last.offset as usize].to_string())
    }

    /// `block CONTEXT NAME(params) { content };` after `block`: remembers the block.
    fn block_definition(&mut self) -> Result<(), ConfigError> {
        let (context_name, context_pos) = self.word("naming the context the block is used in")?;
        let context = Context::NAMES
            .iter()
            .find(|(name, _)| *name == context_name)
            .map(|&(_, c)| c)
            .ok_or_else(|| {
                let valid: Vec<&str> = Context::NAMES.iter().map(|(n, _)| *n).collect();
                ConfigError::unknown(context_pos, "block context", &context_name, "", &valid)
            })?;
        let (name, name_pos) = self.word("naming the block")?;
        let key = crate::normalize(&name);
        if let Some(first) = self.blocks.get(&key) {
            let first = self.origin(first.at);
            return Err(ConfigError::new(
                name_pos,
                format!("block '{name}' is defined twice; the first is at {first}"),
            ));
        }
        self.expect(
            Tok::LParen,
            &format!("to open the parameters of block {name}"),
        )?;
        let mut params = Vec::new();
        let mut varargs = false;
        loop {
            match self.peek() {
                Tok::RParen => break,
                Tok::Word(w) if w == "..." => {
                    self.next();
                    varargs = true;
                }
                Tok::Word(_) if *self.peek_at(1) == Tok::LParen => {
                    let (param, _) = self.word("")?;
                    params.push((crate::normalize(&param), self.raw_parens()?));
                }
                other => {
                    return Err(ConfigError::new(
                        self.pos(),
                        format!(
                            "expected a parameter such as port(514), '...' or ')', found {}",
                            Self::describe(other)
                        ),
                    ))
                }
            }
        }
        self.next();
        if *self.peek() != Tok::Open {
            return Err(ConfigError::new(
                self.pos(),
                format!(
                    "expected '{{' to open the body of block {name}, found {}",
                    Self::describe(self.peek())
                ),
            ));
        }
        let open_pos = self.pos();
        let content = self.raw_between(Tok::Open, Tok::Close)?;
        self.expect(Tok::Semi, "after the block statement")?;
        let at = Pos {
            col: open_pos.col + 1,
            ..open_pos
        };
        self.blocks.insert(
            key,
            Block {
                context,
                name,
                params,
                varargs,
                content,
                at,
            },
        );
        Ok(())
    }

    /// At a reference to a block of this context, `NAME(arg(value) …)`: replaces the reference
    /// with the block's content and says so, or says that this is no block reference.
    fn block_reference(&mut self, context: Context) -> Result<bool, ConfigError> {
        let key = match (self.peek(), self.peek_at(1)) {
            (Tok::Word(w), Tok::LParen) => crate::normalize(w),
            _ => return Ok(false),
        };
        if self.blocks.get(&key).is_none_or(|b| b.context != context) {
            return Ok(false);
        }
        let start = self.at;
        let reference = self.next();
        self.next();
        let mut args: Vec<(String, String, Pos)> = Vec::new();
        loop {
            match self.peek() {
                Tok::RParen => break,
                Tok::Comma => {
                    self.next();
                }
                Tok::Word(_) if *self.peek_at(1) == Tok::LParen => {
                    let (arg, pos) = self.word("")?;
                    if let Some(value) = self.raw_parens()? {
                        args.push((crate::normalize(&arg), value, pos));
                    }
                }
                other => {
                    return Err(ConfigError::new(
                        self.pos(),
                        format!(
                            "expected an argument such as port(514) or ')' in a reference to a block, found {}",
                            Self::describe(other)
                        ),
                    ))
                }
            }
        }
        self.next();
        let block = &self.blocks[&key];
        let what = format!("block {}()", block.name);
        for (arg, _, pos) in &args {
            if !block.varargs && !block.params.iter().any(|(p, _)| p == arg) {
                let valid: Vec<&str> = block.params.iter().map(|(p, _)| p.as_str()).collect();
                return Err(ConfigError::unknown(
                    *pos,
                    "argument",
                    arg,
                    &format!(" to {what}"),
                    &valid,
                ));
            }
        }
        for (param, default) in &block.params {
            if default.is_none() && !args.iter().any(|(a, ..)| a == param) {
                return Err(ConfigError::new(
                    reference.pos,
                    format!("{what} needs {param}(…)"),
                ));
            }
        }
        if reference.depth >= MAX_BLOCK_DEPTH {
            return Err(ConfigError::new(
                reference.pos,
                format!(
                    "{what} is used within itself, or blocks nest more than {MAX_BLOCK_DEPTH} deep"
                ),
            ));
        }
        let varargs: String = args
            .iter()
            .filter(|(a, ..)| !block.params.iter().any(|(p, _)| p == a))
            .map(|(a, v, _)| format!("{a}({v}) "))
            .collect();
        let lookup = |name: &str| {
            let name = crate::normalize(name);
            if block.varargs && name == "__VARARGS__" {
                return Some(varargs.clone());
            }
            args.iter()
                .find(|(a, ..)| *a == name)
                .map(|(_, v, _)| v.clone())
                .or_else(|| {
                    block
                        .params
                        .iter()
                        .find(|(p, _)| *p == name)
                        .and_then(|(_, d)| d.clone())
                })
                .or_else(|| self.map.global(&name))
        };
        let text = crate::subst::substitute(&block.content, lookup).map_err(|e| {
            let before = &block.content[..e.offset()];
            let line = before.matches('\n').count() as u32;
            let col = (e.offset() - before.rfind('\n').map_or(0, |i| i + 1)) as u32;
            let len = e.len() as u32;
            ConfigError::new(
                block.place(Pos { line, col, len }),
                e.message(
                    "neither an argument of the block, an @define nor an environment variable",
                ),
            )
        })?;
        let first_line = self.expansions.last().map_or(self.map.line_count(), |e| {
            e.first_line + e.text.matches('\n').count() as u32 + 1
        });
        let name = format!("{} (block {}())", self.origin(reference.pos), block.name);
        let here = |p: Pos| Pos {
            line: first_line + p.line,
            ..p
        };
        let mut generated = tokenize(&text).map_err(|mut e| {
            e.pos = e.pos.map(here);
            e
        })?;
        generated.pop();
        let id = self.expansions.len() as u32 + 1;
        for t in &mut generated {
            t.pos = here(t.pos);
            t.text = id;
            t.depth = reference.depth + 1;
        }
        self.expansions.push(Expansion {
            name,
            text,
            first_line,
        });
        self.toks.splice(start..self.at, generated);
        self.at = start;
        Ok(true)
    }

    fn statement(&mut self) -> Result<Option<Statement>, ConfigError> {
        if *self.peek() == Tok::Semi {
            self.next();
            return Ok(None);
        }
        if self.block_reference(Context::Root)? {
            return Ok(None);
        }
        let (kind, pos) = self.word("at the start of a statement")?;
        let key = crate::normalize(&kind);
        if !STATEMENTS.contains(&key.as_str()) {
            return Err(ConfigError::unknown(
                pos,
                "statement",
                &kind,
                "",
                &[
                    "source",
                    "destination",
                    "filter",
                    "parser",
                    "rewrite",
                    "template",
                    "log",
                    "options",
                    "block",
                ],
            ));
        }
        if key == "block" {
            self.block_definition()?;
            return Ok(None);
        }
        if matches!(
            key.as_str(),
            "template_function" | "python" | "python_fetcher"
        ) {
            return Err(ConfigError::not_supported(
                pos,
                &format!("the '{kind}' statement"),
            ));
        }
        let name = match self.peek() {
            Tok::Word(_) if !matches!(key.as_str(), "options" | "log") => Some(self.word("")?),
            Tok::Str(_) if !matches!(key.as_str(), "options" | "log") => {
                let t = self.next();
                let Tok::Str(s) = t.tok else {
                    unreachable!("peeked a string")
                };
                Some((s, t.pos))
            }
            _ => None,
        };
        if matches!(
            key.as_str(),
            "source" | "destination" | "filter" | "parser" | "rewrite" | "template"
        ) && name.is_none()
        {
            return Err(ConfigError::new(
                self.pos(),
                format!("a top-level {kind} needs a name: {kind} NAME {{ … }};"),
            ));
        }
        let body = if key == "template" && matches!(self.peek(), Tok::Str(_)) {
            Body::Text(self.value()?)
        } else {
            self.expect(Tok::Open, &format!("to open the body of {kind}"))?;
            let body = if key == "filter" {
                Body::Filter(self.filter_body()?)
            } else {
                Body::Nodes(self.nodes(Context::of(&key))?)
            };
            self.expect(Tok::Close, &format!("to close the body of {kind}"))?;
            body
        };
        self.expect(Tok::Semi, &format!("after the {kind} statement"))?;
        Ok(Some(Statement {
            kind: key,
            name,
            body,
            pos,
        }))
    }

    /// Nodes up to the closing brace, in a body of the given context.
    fn nodes(&mut self, context: Context) -> Result<Vec<Node>, ConfigError> {
        self.nested(|p| p.nodes_here(context))
    }

    fn nodes_here(&mut self, context: Context) -> Result<Vec<Node>, ConfigError> {
        let mut nodes = Vec::new();
        loop {
            if self.block_reference(context)? {
                continue;
            }
            match self.peek() {
                Tok::Close => return Ok(nodes),
                Tok::Semi => {
                    self.next();
                }
                Tok::Word(_) => nodes.push(self.node()?),
                other => {
                    return Err(ConfigError::new(
                        self.pos(),
                        format!(
                            "expected a driver, option or '}}', found {}",
                            Self::describe(other)
                        ),
                    ))
                }
            }
        }
    }

    /// `name(args);` or `name { body };`.
    fn node(&mut self) -> Result<Node, ConfigError> {
        let (name, pos) = self.word("")?;
        let key = crate::normalize(&name);
        if key == "if" {
            return self.if_chain(name, pos);
        }
        if matches!(key.as_str(), "elif" | "else") {
            return Err(ConfigError::new(
                pos,
                format!("'{name}' must follow the closing brace of an if or elif block"),
            ));
        }
        let node = match self.peek() {
            Tok::LParen => {
                self.next();
                let args = self.args()?;
                Node {
                    name,
                    pos,
                    args,
                    block: None,
                }
            }
            Tok::Open => {
                self.next();
                let body = if key == "filter" {
                    Body::Filter(self.filter_body()?)
                } else {
                    Body::Nodes(self.nodes(Context::of(&key))?)
                };
                self.expect(Tok::Close, &format!("to close {name} {{ … }}"))?;
                Node {
                    name,
                    pos,
                    args: Vec::new(),
                    block: Some(Box::new(body)),
                }
            }
            other => {
                return Err(ConfigError::new(
                    self.pos(),
                    format!(
                        "expected '(' or '{{' after '{name}', found {}",
                        Self::describe(other)
                    ),
                ))
            }
        };
        // syslog-ng requires the `;` after every item of a body, nested blocks included.
        let what = if node.block.is_some() {
            format!("{} {{ … }}", node.name)
        } else {
            format!("{}(…)", node.name)
        };
        self.expect(Tok::Semi, &format!("after {what}"))?;
        Ok(node)
    }

    /// `if (…) {…}` followed by any `elif (…) {…}` and an optional `else {…}`, then `;`.
    /// `if` has been read.
    fn if_chain(&mut self, name: String, pos: Pos) -> Result<Node, ConfigError> {
        let mut arms = Vec::new();
        let mut arm_pos = pos;
        let mut is_else = false;
        loop {
            let condition = if is_else {
                Condition::Else
            } else if *self.peek() == Tok::LParen {
                self.next();
                let expr = self.or_expr()?;
                self.expect(Tok::RParen, "to close the condition")?;
                Condition::Filter(expr)
            } else {
                Condition::Block
            };
            self.expect(Tok::Open, "to open the block of if/elif/else")?;
            let body = self.nodes(Context::Log)?;
            self.expect(Tok::Close, "to close the block of if/elif/else")?;
            arms.push(IfArm {
                condition,
                body,
                pos: arm_pos,
            });
            if is_else {
                break;
            }
            match self.peek() {
                Tok::Word(w) if w.eq_ignore_ascii_case("elif") => {}
                Tok::Word(w) if w.eq_ignore_ascii_case("else") => is_else = true,
                _ => break,
            }
            arm_pos = self.pos();
            self.next();
        }
        self.expect(Tok::Semi, "after the if/elif/else chain")?;
        Ok(Node {
            name,
            pos,
            args: Vec::new(),
            block: Some(Box::new(Body::If(arms))),
        })
    }

    /// Arguments up to and including the closing parenthesis.
    fn args(&mut self) -> Result<Vec<Arg>, ConfigError> {
        let mut args = Vec::new();
        loop {
            match self.peek() {
                Tok::RParen => {
                    self.next();
                    return Ok(args);
                }
                Tok::Comma => {
                    self.next();
                }
                Tok::Word(_) if *self.peek_at(1) == Tok::LParen => {
                    let (name, pos) = self.word("")?;
                    self.next();
                    // A rewrite rule's `condition()` and `grouping-by()`'s `where()`,
                    // `having()` and `trigger()` hold a filter expression.
                    let key = crate::normalize(&name);
                    if matches!(key.as_str(), "condition" | "where" | "having" | "trigger") {
                        let expr = self.or_expr()?;
                        self.expect(Tok::RParen, &format!("to close {name}(…)"))?;
                        args.push(Arg::Option(Node {
                            name,
                            pos,
                            args: Vec::new(),
                            block: Some(Box::new(Body::Filter(expr))),
                        }));
                        continue;
                    }
                    let inner = self.nested(Self::args)?;
                    args.push(Arg::Option(Node {
                        name,
                        pos,
                        args: inner,
                        block: None,
                    }));
                }
                Tok::Word(_) | Tok::Str(_) => args.push(Arg::Value(self.value()?)),
                other => {
                    return Err(ConfigError::new(
                        self.pos(),
                        format!(
                            "expected a value, an option or ')', found {}",
                            Self::describe(other)
                        ),
                    ))
                }
            }
        }
    }

    /// One string or word. Strings side by side are separate values (`rename("a" "b")`);
    /// syslog-ng 3.38 does not join them either.
    fn value(&mut self) -> Result<Value, ConfigError> {
        let t = self.next();
        match t.tok {
            Tok::Word(w) => Ok(Value {
                text: w,
                kind: ValueKind::Word,
                pos: t.pos,
            }),
            Tok::Str(s) => Ok(Value {
                text: s,
                kind: ValueKind::Str,
                pos: t.pos,
            }),
            other => Err(ConfigError::new(
                t.pos,
                format!("expected a value, found {}", Self::describe(&other)),
            )),
        }
    }

    /// `expr; expr; …` — several expressions in one filter must all hold.
    fn filter_body(&mut self) -> Result<Expr, ConfigError> {
        let mut expr: Option<Expr> = None;
        while *self.peek() != Tok::Close {
            if *self.peek() == Tok::Semi {
                self.next();
                continue;
            }
            let e = self.or_expr()?;
            expr = Some(match expr {
                Some(prev) => Expr::And(Box::new(prev), Box::new(e)),
                None => e,
            });
            if *self.peek() != Tok::Close {
                self.expect(Tok::Semi, "after a filter expression")?;
            }
        }
        expr.ok_or_else(|| ConfigError::new(self.pos(), "a filter needs an expression"))
    }

    fn keyword(&self, kw: &str) -> bool {
        matches!(self.peek(), Tok::Word(w) if w.eq_ignore_ascii_case(kw))
    }

    fn or_expr(&mut self) -> Result<Expr, ConfigError> {
        let mut left = self.and_expr()?;
        while self.keyword("or") {
            self.next();
            let right = self.and_expr()?;
            left = Expr::Or(Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    fn and_expr(&mut self) -> Result<Expr, ConfigError> {
        let mut left = self.not_expr()?;
        while self.keyword("and") {
            self.next();
            let right = self.not_expr()?;
            left = Expr::And(Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    fn not_expr(&mut self) -> Result<Expr, ConfigError> {
        if self.keyword("not") {
            self.next();
            return Ok(Expr::Not(Box::new(self.nested(Self::not_expr)?)));
        }
        self.primary()
    }

    fn primary(&mut self) -> Result<Expr, ConfigError> {
        // A filter block's text stands where it is used, exactly as written: `not f()` with
        // `f` being `a or b` reads `not a or b`, as in syslog-ng.
        if self.block_reference(Context::Filter)? {
            return self.primary();
        }
        match self.peek().clone() {
            Tok::LParen => {
                self.next();
                let e = self.nested(Self::or_expr)?;
                self.expect(Tok::RParen, "to close the parenthesised filter")?;
                Ok(e)
            }
            Tok::Word(_) if *self.peek_at(1) == Tok::LParen => {
                let (name, pos) = self.word("")?;
                self.next();
                let args = self.args()?;
                Ok(Expr::Call(Node {
                    name,
                    pos,
                    args,
                    block: None,
                }))
            }
            Tok::Word(_) | Tok::Str(_) => {
                let left = self.value()?;
                let op = self.value()?;
                let right = self.value()?;
                Ok(Expr::Compare { left, op, right })
            }
            other => Err(ConfigError::new(
                self.pos(),
                format!(
                    "expected a filter such as facility(kern), found {}",
                    Self::describe(&other)
                ),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(text: &str) -> Config {
        crate::load_str("t.conf", text).unwrap_or_else(|e| panic!("{}", e.render()))
    }

    fn err(text: &str) -> String {
        crate::load_str("t.conf", text).unwrap_err().render()
    }

    #[test]
    fn statements_nodes_and_options() {
        let c = cfg(r#"
            @version: 3.38
            options { chain-hostnames(no); };
            source s_net { tcp(ip(0.0.0.0) port(514) flags(no-parse, store-raw-message)); udp(); };
            destination d { file("/var/log/$HOST-x" create_dirs(yes)); };
            template t "${ISODATE} ${MSG}\n";
            log { source(s_net); log { destination(d); flags(final); }; };
        "#);
        assert_eq!(c.version.as_deref(), Some("3.38"));
        let kinds: Vec<&str> = c.statements.iter().map(|s| s.kind.as_str()).collect();
        assert_eq!(
            kinds,
            ["options", "source", "destination", "template", "log"]
        );
        let Body::Nodes(src) = &c.statements[1].body else {
            panic!()
        };
        assert_eq!(src.len(), 2);
        let opts: Vec<String> = src[0].options().map(Node::key).collect();
        assert_eq!(opts, ["ip", "port", "flags"]);
        assert_eq!(src[0].options().nth(1).unwrap().u64().unwrap(), 514);
        let flags = src[0].options().nth(2).unwrap().words().unwrap();
        assert_eq!(flags.len(), 2);
        let Body::Nodes(dst) = &c.statements[2].body else {
            panic!()
        };
        assert_eq!(dst[0].first_value().unwrap().text, "/var/log/$HOST-x");
        let Body::Text(t) = &c.statements[3].body else {
            panic!()
        };
        assert_eq!(t.text, "${ISODATE} ${MSG}\n");
    }

    #[test]
    fn filter_precedence() {
        let c = cfg("filter f { facility(kern) or not level(debug) and program(\"x\"); };");
        let Body::Filter(Expr::Or(_, right)) = &c.statements[0].body else {
            panic!()
        };
        assert!(matches!(**right, Expr::And(_, _)));
    }

    /// The statements of a configuration, printed back as text, to compare expansions.
    fn printed(c: &Config) -> Vec<String> {
        fn node(n: &Node) -> String {
            let args: Vec<String> = n
                .args
                .iter()
                .map(|a| match a {
                    Arg::Value(v) if v.kind == ValueKind::Str => format!("{:?}", v.text),
                    Arg::Value(v) => v.text.clone(),
                    Arg::Option(o) => node(o),
                })
                .collect();
            match n.block.as_deref() {
                Some(Body::Nodes(inner)) => {
                    let inner: Vec<String> = inner.iter().map(node).collect();
                    format!("{} {{ {} }}", n.name, inner.join("; "))
                }
                Some(other) => format!("{} {other:?}", n.name),
                None => format!("{}({})", n.name, args.join(" ")),
            }
        }
        c.statements
            .iter()
            .map(|s| match &s.body {
                Body::Nodes(nodes) => {
                    let nodes: Vec<String> = nodes.iter().map(node).collect();
                    let name = s.name.as_ref().map_or("", |(n, _)| n.as_str());
                    format!("{} {name} {{ {} }}", s.kind, nodes.join("; "))
                }
                other => format!("{} {other:?}", s.kind),
            })
            .collect()
    }

    #[test]
    fn blocks_expand_where_they_are_used() {
        let c = cfg(r#"
            @define logdir "/var/log"
            block source net(port(514) ip("0.0.0.0")) {
                tcp(ip(`ip`) port(`port`));
                udp(port(`port`));
            };
            block destination to_file(name() ...) { file("`logdir`/`name`.log" `__VARARGS__`); };
            block root pair(dir()) {
                destination d_pair { to_file(name("`dir`/pair")); };
                log { source(s); destination(d_pair); };
            };
            source s { net(port(601)); unix-stream("/dev/log"); };
            destination d { to_file(name('x "y"') perm(0600) create-dirs(yes)); };
            pair(dir(sub));
        "#);
        assert_eq!(
            printed(&c),
            [
                r#"source s { tcp(ip("0.0.0.0") port(601)); udp(port(601)); unix-stream("/dev/log") }"#,
                r#"destination d { file("/var/log/x \"y\".log" perm(0600) create_dirs(yes)) }"#,
                r#"destination d_pair { file("/var/log/sub/pair.log") }"#,
                "log  { source(s); destination(d_pair) }",
            ]
        );
    }

    #[test]
    fn filter_and_log_blocks_are_text_in_place() {
        let c = cfg(r#"
            block filter prog(name()) { program("`name`") or program("`name`d") };
            block log to(d()) { destination(`d`); flags(final); };
            filter f { not prog(name(ssh)) and level(err); };
            log { source(s); filter { prog(name(cron)) }; to(d(d1)); };
        "#);
        // `not a or b and c`, as the text reads after expansion.
        let Body::Filter(Expr::Or(left, right)) = &c.statements[0].body else {
            panic!("{:?}", c.statements[0].body)
        };
        assert!(matches!(**left, Expr::Not(_)));
        assert!(matches!(**right, Expr::And(_, _)));
        let printed = printed(&c);
        assert!(
            printed[1].starts_with("log  { source(s); filter Filter(Or(")
                && printed[1].ends_with("destination(d1); flags(final) }"),
            "{printed:?}"
        );
    }

    #[test]
    fn block_errors_say_what_is_wrong() {
        let text = err("block source b(port()) { tcp(port(`port`)); };\nsource s { b(); };\n");
        assert!(
            text.contains("t.conf:2:12: block b() needs port(…)"),
            "{text}"
        );
        let text = err("block source b(port(1)) { tcp(); };\nsource s { b(prt(2)); };\n");
        assert!(
            text.contains("unknown argument 'prt' to block b()"),
            "{text}"
        );
        assert!(text.contains("did you mean 'port'?"), "{text}");
        let text = err("block source b() {\n  tcp(port(`nope`));\n};\nsource s { b(); };\n");
        assert!(
            text.contains("t.conf:2:12: `nope` is neither an argument of the block"),
            "{text}"
        );
        let text = err("block root r() { r(); };\nr();\n");
        assert!(text.contains("block r() is used within itself"), "{text}");
        let text = err("block source b() { tcp(); };\nblock source b() { udp(); };\n");
        assert!(
            text.contains("block 'b' is defined twice; the first is at t.conf:1"),
            "{text}"
        );
        // An error in the expanded text shows that text, and where the block was used.
        let text =
            err("block source b(p()) {\n  tcp(port(`p`) prot(2);\n};\nsource s { b(p(601)); };\n");
        assert!(
            text.starts_with("t.conf:4 (block b()):2:24: expected a value"),
            "{text}"
        );
        assert!(text.contains("tcp(port(601) prot(2);"), "{text}");
        let text = err("block root r() { block source b(p( };\nr();\n1)) { tcp(); };\n");
        assert!(
            text.contains("must be written in the same block or file"),
            "{text}"
        );
        let text = err("block sorce b() { tcp(); };\n");
        assert!(text.contains("did you mean 'source'?"), "{text}");
    }

    #[test]
    fn numbers_with_suffixes() {
        for (text, want) in [
            ("10", 10),
            ("1k", 1000),
            ("1KiB", 1024),
            ("2GiB", 2 << 30),
            ("0644", 0o644),
            ("3MB", 3_000_000),
        ] {
            assert_eq!(parse_number(text), Some(want), "{text}");
        }
        assert_eq!(parse_number("x1"), None);
    }

    #[test]
    fn errors_point_at_the_token() {
        let text = err("source s {\n  tcp(port(514);\n};\n");
        assert!(
            text.starts_with("t.conf:2:16: expected a value, an option or ')', found ';'"),
            "{text}"
        );
        assert!(
            text.contains("2 |   tcp(port(514);\n  |                ^"),
            "{text}"
        );
        let text = err("sorce s { };");
        assert!(text.contains("did you mean 'source'?"), "{text}");
    }
}
