//! Template functions: `$(name arg …)`, compiled once with their arguments as templates.
//!
//! Arguments are cut as syslog-ng cuts them: white space separates them at the top level,
//! quotes group (and are removed at the top level, kept inside parentheses), `\` takes the
//! next byte as it is, and parentheses nest, so `$(if ("$HOST" eq "gw") "a" "b")` has the
//! filter expression `("$HOST" eq "gw")` as its first argument.

use super::{context, Names, Template};
use crate::filter::{self, Filter};
use crate::message::LogMessage;
use crate::values::ValueType;

/// A compiled call.
#[derive(Clone, Debug)]
pub struct Call {
    func: Func,
    args: Vec<Template>,
}

impl Call {
    /// `$(format-json ARGS)` with its arguments given one by one, as a destination's
    /// `value-pairs()` block names them: no quoting to undo.
    pub(super) fn format_json(args: &[String]) -> Result<Call, String> {
        let f = super::value_pairs::ValuePairs::compile(args, super::value_pairs::Output::Json)?;
        Ok(Call {
            func: Func::ValuePairs(Box::new(f)),
            args: Vec::new(),
        })
    }
}

#[derive(Clone, Debug)]
enum Func {
    Echo,
    Length,
    Substr,
    Strip,
    Sanitize {
        ctrl_chars: bool,
        invalid: Vec<u8>,
        replacement: u8,
    },
    Lowercase,
    Uppercase,
    IndentMultiLine,
    ReplaceDelimiter,
    /// `$(if (filter) "then" "else")`: `args` holds then and else.
    If(Box<Filter>),
    Or,
    Arithmetic(u8),
    /// `$(format-json)`, `$(format-flat-json)`, `$(format-welf)`, `$(names)`, `$(values)`.
    ValuePairs(Box<super::value_pairs::ValuePairs>),
    /// `$(grep [--max-count N] (filter) template…)`: the templates for each message of the
    /// correlation context (or the one formatted) that the filter matches, joined by commas;
    /// `$(context-lookup …)` the same as a list. At most N matching messages (0: all).
    Grep {
        condition: Box<Filter>,
        max_count: usize,
        list: bool,
    },
    /// `$(binary 0x00 …)`: these bytes.
    Bytes(Vec<u8>),
    /// `$(context-values template…)`: the templates for each message of the context, as a list.
    ContextValues,
    /// `$(context-length)`: the number of messages in the context.
    ContextLength,
    /// `$(map template list)`: the template for each item (`$_`), as a list.
    Map,
    /// `$(filter (filter) list)`: the items (`$_`) the filter matches.
    FilterList(Box<Filter>),
    /// `$(iterate template initial)`: `initial`, then the template of the previous result
    /// (`$_`), one step per message formatted, shared by every thread formatting it.
    Iterate {
        step: Box<Template>,
        current: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
    },
    /// `$(list-search [--mode M] [--start-index N] pattern list…)`: the index of the first
    /// matching item from the start index.
    ListSearch {
        matcher: Box<filter::Matcher>,
        start: usize,
    },
    /// `$(template $name [fallback…])`: the template statement the first argument names when
    /// formatted; the other arguments, joined by spaces, when none has that name.
    DynamicNamed(std::sync::Arc<std::collections::HashMap<String, Template>>),
    /// `$(padding text width [pattern])`: the pattern, repeated to `width`, precomputed.
    Padding(Vec<u8>),
    UrlEncode,
    UrlDecode,
    Env,
    Ipv4ToInt,
    Dirname,
    Basename,
    Round,
    Ceil,
    Floor,
    /// `$(sha256 …)` and the other digests of the arguments written together, in hex, cut to
    /// `--length` digits.
    Digest(Digest, Option<usize>),
    Base64,
    ListConcat,
    ListAppend,
    ListCount,
    ListHead,
    ListNth,
    ListTail,
    ListSlice,
    Explode,
    Implode,
    /// `$(uuid)`: a random (version 4) UUID.
    Uuid,
    /// `$(sum …)`, `$(min …)`, `$(max …)`, `$(average …)`: of the integers the argument makes
    /// for the messages of a correlation context (or the one formatted); those it makes none
    /// for are left out, and nothing when none makes one. The average is an integer division.
    Aggregate(Aggregate),
    /// `$(format-date [--time-zone TZ] format [timestamp])` (syslog-ng 4.x): `strftime` of the
    /// message's time, or of a timestamp written `secs[.fraction][offset]`, in its own
    /// offset, the machine's when it has none, or the `--time-zone` given.
    FormatDate {
        format: String,
        zone: Option<Box<crate::time::Zone>>,
    },
    /// `$(template t_name)`: a named template, bound when the configuration is read.
    Named(Box<Template>),
}

/// What `$(sum)`, `$(min)`, `$(max)` and `$(average)` make of their numbers.
#[derive(Clone, Copy, Debug)]
pub enum Aggregate {
    Sum,
    Min,
    Max,
    Average,
}

/// The number of a function's `--max-count`.
fn count_option(function: &str, text: &str) -> Result<usize, String> {
    text.parse()
        .map_err(|_| format!("$({function}) --max-count needs a number, not {text:?}"))
}

/// Compiles the filter statement `name` for a template's condition; `building` holds the
/// names being compiled, to refuse a filter that refers to itself.
pub(crate) fn named_filter(
    name: &str,
    pos: sluice_config::Pos,
    names: &Names,
    building: &mut Vec<String>,
) -> Result<std::sync::Arc<Filter>, sluice_config::ConfigError> {
    if building.iter().any(|b| b == name) {
        return Err(sluice_config::ConfigError::new(
            pos,
            format!("filter '{name}' refers to itself"),
        ));
    }
    let expr = names.filters.get(name).ok_or_else(|| {
        sluice_config::ConfigError::new(pos, format!("no filter statement is named '{name}'"))
    })?;
    building.push(name.to_string());
    let compiled = filter::compile(expr, names, &mut |n, p| named_filter(n, p, names, building));
    building.pop();
    Ok(std::sync::Arc::new(compiled?))
}

#[derive(Clone, Copy, Debug)]
enum Digest {
    Md5,
    Sha1,
    Sha256,
    Sha512,
}

/// The template functions of this version (`$(name …)`) and what each gives, for the
/// configuration reference; others syslog-ng has are refused as not yet supported.
pub const FUNCTIONS: &[(&str, &str)] = &[
    ("echo", "its arguments, joined by spaces"),
    ("length", "the length in bytes of each argument"),
    ("substr", "`$(substr TEXT START [LENGTH])`: part of the text (negative: from the end)"),
    ("strip", "the arguments without leading and trailing white space"),
    ("sanitize", "the arguments with `/` and control characters replaced (`--ctrl-chars`, `--invalid-chars`, `--replacement`)"),
    ("lowercase", "the arguments in lower case"),
    ("uppercase", "the arguments in upper case"),
    ("indent-multi-line", "the text with a tab after each line end"),
    ("replace-delimiter", "`$(replace-delimiter CHARS NEW TEXT)`: each of CHARS replaced by NEW"),
    ("if", "`$(if (FILTER) THEN ELSE)`"),
    ("or", "the first argument that is not empty"),
    ("+", "the sum of two numbers"),
    ("-", "the difference of two numbers"),
    ("*", "the product of two numbers"),
    ("/", "the quotient of two numbers"),
    ("%", "the remainder of two numbers"),
    ("format-json", "name-value pairs as a JSON object (`--scope`, `--key`, `--exclude`, `--pair`, `--rekey`…)"),
    ("padding", "`$(padding TEXT WIDTH [PATTERN])`: the text padded on the left to WIDTH"),
    ("url-encode", "the arguments URL-encoded"),
    ("url-decode", "the arguments URL-decoded"),
    ("env", "the value of an environment variable"),
    ("ipv4-to-int", "an IPv4 address as a number"),
    ("dirname", "the directory part of a path"),
    ("basename", "the file part of a path"),
    ("round", "a number rounded (`$(round N [DIGITS])`)"),
    ("ceil", "a number rounded up"),
    ("floor", "a number rounded down"),
    ("hash", "a digest of the arguments (sha256 by default; `--length`)"),
    ("md5", "the MD5 digest of the arguments, in hex"),
    ("sha1", "the SHA-1 digest of the arguments, in hex"),
    ("sha256", "the SHA-256 digest of the arguments, in hex"),
    ("sha512", "the SHA-512 digest of the arguments, in hex"),
    ("base64-encode", "the arguments in base64"),
    ("format-flat-json", "name-value pairs as a flat JSON object (dotted names)"),
    ("list-concat", "the lists (comma-separated) joined into one"),
    ("list-append", "the first list with the other arguments added"),
    ("list-count", "the number of items in the lists"),
    ("list-head", "the first item of the lists"),
    ("list-nth", "`$(list-nth N LIST…)`: the Nth item"),
    ("list-tail", "the lists without their first item"),
    ("list-slice", "`$(list-slice FROM:TO LIST…)`: a part of the list"),
    ("explode", "`$(explode SEPARATOR TEXT…)`: the text cut into a list"),
    ("implode", "`$(implode SEPARATOR LIST…)`: the list joined with the separator"),
    ("uuid", "a random UUID"),
    ("binary", "`$(binary 0x00 …)`: the bytes its arguments name (hex `0x`, octal `0`, or decimal)"),
    ("format-gelf", "the message as a GELF 1.1 document (Graylog), ended by a NUL, as syslog-ng's `graylog2()` sends it"),
    ("sum", "the sum of the argument over the messages of a correlation context"),
    ("min", "the smallest value of the argument over a context"),
    ("max", "the largest value of the argument over a context"),
    ("average", "the average of the argument over a context (an integer)"),
    ("template", "the template statement the argument names"),
    ("format-welf", "name-value pairs in the WebTrends format (`name=value …`)"),
    ("names", "the names of the selected name-value pairs, as a list"),
    ("values", "the values of the selected name-value pairs, as a list"),
    ("grep", "`$(grep [--max-count N] (FILTER) TEMPLATE…)`: the templates for each message of a context the filter matches"),
    ("map", "`$(map TEMPLATE LIST)`: the template for each item (`$_`), as a list"),
    ("filter", "`$(filter (FILTER) LIST)`: the items (`$_`) the filter matches"),
    ("iterate", "`$(iterate TEMPLATE INITIAL)`: the initial value, then the template of the previous one, one step per message"),
    ("list-search", "`$(list-search [--mode M] [--start-index N] PATTERN LIST…)`: the index of the first matching item"),
    ("format-date", "`$(format-date [--time-zone TZ] FORMAT [TIMESTAMP])`: a time with strftime"),
    ("context-length", "the number of messages in the correlation context (1 outside one)"),
    ("context-lookup", "`$(context-lookup [--max-count N] (FILTER) TEMPLATE…)`: as `$(grep)`, as a list"),
    ("context-values", "the templates for each message of the context, as a list"),
];

const NOT_YET: &[&str] = &[
    "format-cim",
    "echo-json",
    "dns-resolve-ip",
    "geoip",
    "geoip2",
    "python",
];

/// Cuts the text of `$(…)` after `$(` into arguments; returns them (the function name first)
/// and how many bytes were read, the closing parenthesis included.
pub fn split(text: &str) -> Result<(Vec<String>, usize), String> {
    let b = text.as_bytes();
    let mut args = Vec::new();
    let mut arg = Vec::new();
    let mut has_value = false;
    let mut parens = 1;
    let mut i = 0;
    while i < b.len() && b[i].is_ascii_whitespace() {
        i += 1;
    }
    while i < b.len() {
        let c = b[i];
        match c {
            b'\\' => {
                i += 1;
                if let Some(&next) = b.get(i) {
                    arg.push(next);
                    has_value = true;
                    i += 1;
                }
                continue;
            }
            b'(' => parens += 1,
            b')' => {
                parens -= 1;
                if parens == 0 {
                    if has_value {
                        args.push(String::from_utf8_lossy(&arg).into_owned());
                    }
                    return Ok((args, i + 1));
                }
            }
            b'"' | b'\'' => {
                let end = b[i + 1..]
                    .iter()
                    .position(|&x| x == c)
                    .map(|e| i + 1 + e)
                    .ok_or("an unterminated quote in a template function")?;
                if parens == 1 {
                    arg.extend_from_slice(&b[i + 1..end]);
                } else {
                    arg.extend_from_slice(&b[i..=end]);
                }
                has_value = true;
                i = end + 1;
                continue;
            }
            c if parens == 1 && c.is_ascii_whitespace() => {
                args.push(String::from_utf8_lossy(&arg).into_owned());
                arg.clear();
                has_value = false;
                while i < b.len() && b[i].is_ascii_whitespace() {
                    i += 1;
                }
                continue;
            }
            _ => {}
        }
        arg.push(c);
        has_value = true;
        i += 1;
    }
    Err("a template function without its closing ')'".into())
}

/// `$(format-gelf)`: syslog-ng 3.38's definition (`scl/graylog2/plugin.conf`), the GELF 1.1
/// document Graylog reads, ended by a NUL as GELF over TCP is framed.
const FORMAT_GELF: &str = "$(format-json --auto-cast --omit-empty-values version='1.1' host='${HOST:--}' short_message='${MSG:--}' level=int(${LEVEL_NUM}) timestamp=int64(${R_UNIXTIME}) _program='${PROGRAM}' _pid=int(${PID}) _facility='${FACILITY}' _class='${.classifier.class}' --key .* --key _*)$(binary 0x00)";

/// A byte of `$(binary)`: `0x41`, `65` or `0101`, as C's `strtol` reads them.
fn byte_of(arg: &str) -> Result<u8, String> {
    let n = if let Some(hex) = arg.strip_prefix("0x").or_else(|| arg.strip_prefix("0X")) {
        u32::from_str_radix(hex, 16)
    } else if arg.len() > 1 && arg.starts_with('0') {
        u32::from_str_radix(&arg[1..], 8)
    } else {
        arg.parse::<u32>()
    };
    n.ok()
        .and_then(|n| u8::try_from(n).ok())
        .ok_or_else(|| format!("$(binary {arg}): a byte is a number from 0 to 255 (0x00 to 0xff)"))
}

impl Call {
    /// Compiles `$(name args…)` from its arguments (the name first).
    pub fn compile(mut argv: Vec<String>, names: &Names) -> Result<Call, String> {
        if argv.is_empty() {
            return Err("a template function needs a name: $(name arguments…)".into());
        }
        let name = argv.remove(0);
        let template = |t: &str| Template::compile_in(t, names);
        let func = match name.as_str() {
            "echo" => Func::Echo,
            "length" => Func::Length,
            "substr" => Func::Substr,
            "strip" => Func::Strip,
            "lowercase" => Func::Lowercase,
            "uppercase" => Func::Uppercase,
            "indent-multi-line" => Func::IndentMultiLine,
            "replace-delimiter" => Func::ReplaceDelimiter,
            "or" => Func::Or,
            "url-encode" => Func::UrlEncode,
            "url-decode" => Func::UrlDecode,
            "env" => Func::Env,
            "ipv4-to-int" => Func::Ipv4ToInt,
            "dirname" => Func::Dirname,
            "basename" => Func::Basename,
            "round" => Func::Round,
            "ceil" => Func::Ceil,
            "floor" => Func::Floor,
            "padding" => {
                if argv.len() < 2 {
                    return Err(
                        "$(padding) needs a text and a width: $(padding $MSG 10 [pattern])".into(),
                    );
                }
                let width: usize = argv[1].trim().parse().map_err(|_| {
                    format!("$(padding) needs a number as its width, not {}", argv[1])
                })?;
                let pattern = argv
                    .get(2)
                    .map(|p| p.as_bytes())
                    .filter(|p| !p.is_empty())
                    .unwrap_or(b" ");
                let fill: Vec<u8> = pattern.iter().copied().cycle().take(width).collect();
                argv.truncate(1);
                Func::Padding(fill)
            }
            "format-json" | "format-flat-json" | "format-welf" | "names" | "values" => {
                let output = super::value_pairs::Output::of(&name).expect("a value-pairs function");
                let f = super::value_pairs::ValuePairs::compile(&argv, output)?;
                argv.clear();
                Func::ValuePairs(Box::new(f))
            }
            "grep" | "context-lookup" => {
                let mut max_count = 0;
                if let Some(n) = argv.first().and_then(|a| a.strip_prefix("--max-count=")) {
                    max_count = count_option(&name, n)?;
                    argv.remove(0);
                } else if argv.len() > 2 && matches!(argv[0].as_str(), "--max-count" | "-m") {
                    max_count = count_option(&name, &argv[1])?;
                    argv.drain(..2);
                }
                if argv.len() < 2 {
                    return Err(format!(
                        "$({name}) needs a filter and a template: $({name} (filter) $MSG)"
                    ));
                }
                let condition = argv.remove(0);
                Func::Grep {
                    condition: Box::new(compile_condition(
                        &format!("$({name})"),
                        &condition,
                        names,
                    )?),
                    max_count,
                    list: name == "context-lookup",
                }
            }
            "context-values" => Func::ContextValues,
            "context-length" => {
                argv.truncate(0);
                Func::ContextLength
            }
            "map" | "filter" => {
                if argv.len() != 2 {
                    return Err(format!(
                        "$({name}) needs two arguments: $({name} {} list)",
                        if name == "map" {
                            "template"
                        } else {
                            "(filter)"
                        }
                    ));
                }
                if name == "map" {
                    Func::Map
                } else {
                    let condition = argv.remove(0);
                    Func::FilterList(Box::new(compile_condition("$(filter)", &condition, names)?))
                }
            }
            "format-date" => {
                let mut zone = None;
                let zone_flag = |a: &str| matches!(a, "--time-zone" | "-Z");
                if argv
                    .first()
                    .is_some_and(|a| zone_flag(a) || a.starts_with("--time-zone="))
                {
                    let flag = argv.remove(0);
                    let name = match flag.split_once('=') {
                        Some((_, name)) => name.to_string(),
                        None if !argv.is_empty() => argv.remove(0),
                        None => return Err("$(format-date) --time-zone needs a zone".into()),
                    };
                    let parsed = crate::time::Zone::parse(&name)
                        .map_err(|e| format!("$(format-date) --time-zone {name}: {e}"))?;
                    zone = Some(Box::new(parsed));
                }
                if argv.is_empty() || argv.len() > 2 {
                    return Err(
                        "$(format-date) needs a format and at most a timestamp: $(format-date %Y-%m-%d [$TIMESTAMP])".into(),
                    );
                }
                Func::FormatDate {
                    format: argv.remove(0),
                    zone,
                }
            }
            "iterate" => {
                let [step, initial] = argv.as_slice() else {
                    return Err(
                        "$(iterate) needs two arguments: $(iterate template initial)".into(),
                    );
                };
                let f = Func::Iterate {
                    step: Box::new(template(step)?),
                    current: std::sync::Arc::new(std::sync::Mutex::new(
                        initial.clone().into_bytes(),
                    )),
                };
                argv.clear();
                f
            }
            "list-search" => {
                let mut mode = "literal".to_string();
                let mut start = 0;
                while argv.first().is_some_and(|a| a.starts_with("--")) {
                    let flag = argv.remove(0);
                    let (flag, inline) = match flag.split_once('=') {
                        Some((f, v)) => (f.to_string(), Some(v.to_string())),
                        None => (flag, None),
                    };
                    let value = match inline {
                        Some(v) => v,
                        None if !argv.is_empty() => argv.remove(0),
                        None => return Err(format!("$(list-search) {flag} needs a value")),
                    };
                    match flag.as_str() {
                        "--mode" => mode = value,
                        "--start-index" => {
                            start = value.parse().map_err(|_| {
                                format!("$(list-search) --start-index needs a number, not {value}")
                            })?
                        }
                        other => return Err(format!("$(list-search) unknown option {other}")),
                    }
                }
                if argv.len() < 2 {
                    return Err("$(list-search) needs a pattern and a list: $(list-search [options] pattern ${list})".into());
                }
                let pattern = argv.remove(0);
                let string = |mode| filter::Matcher::string(pattern.as_bytes(), mode, false);
                let matcher = match mode.as_str() {
                    "literal" => string(filter::StringMode::Exact),
                    "prefix" => string(filter::StringMode::Prefix),
                    "substring" => string(filter::StringMode::Substring),
                    "glob" => filter::Matcher::glob(&pattern, false)?,
                    "pcre" => filter::Matcher::Regex(filter::regex(&pattern, false)?),
                    other => return Err(format!("$(list-search) invalid mode {other}; the modes are literal, prefix, substring, glob, pcre")),
                };
                Func::ListSearch {
                    matcher: Box::new(matcher),
                    start,
                }
            }
            "base64-encode" => Func::Base64,
            "list-concat" => Func::ListConcat,
            "list-append" => Func::ListAppend,
            "list-count" => Func::ListCount,
            "list-head" => Func::ListHead,
            "list-nth" => Func::ListNth,
            "list-tail" => Func::ListTail,
            "list-slice" => Func::ListSlice,
            "explode" => Func::Explode,
            "implode" => Func::Implode,
            "uuid" => Func::Uuid,
            "binary" => {
                let bytes = argv
                    .drain(..)
                    .map(|a| byte_of(&a))
                    .collect::<Result<Vec<u8>, String>>()?;
                if bytes.is_empty() {
                    return Err("$(binary) needs the bytes it gives: $(binary 0x00)".into());
                }
                Func::Bytes(bytes)
            }
            // As syslog-ng's library defines it (scl/graylog2): a GELF document and a NUL.
            "format-gelf" => {
                if !argv.is_empty() {
                    return Err("$(format-gelf) takes no arguments".into());
                }
                Func::Named(Box::new(template(FORMAT_GELF)?))
            }
            "sum" => Func::Aggregate(Aggregate::Sum),
            "min" => Func::Aggregate(Aggregate::Min),
            "max" => Func::Aggregate(Aggregate::Max),
            "average" => Func::Aggregate(Aggregate::Average),
            "template" => {
                let Some(target) = argv.first().cloned() else {
                    return Err("$(template) needs the name of a template statement".into());
                };
                match names.templates.get(&target) {
                    Some(t) => {
                        let t = t.clone();
                        argv.clear();
                        Func::Named(Box::new(t))
                    }
                    None if target.contains('$') => {
                        Func::DynamicNamed(std::sync::Arc::new(names.templates.clone()))
                    }
                    None => {
                        return Err(format!(
                            "$(template {target}): no template statement has that name"
                        ))
                    }
                }
            }
            "hash" | "md5" | "sha1" | "sha256" | "sha512" => {
                let digest = match name.as_str() {
                    "md5" => Digest::Md5,
                    "sha1" => Digest::Sha1,
                    "sha512" => Digest::Sha512,
                    _ => Digest::Sha256,
                };
                let mut length = None;
                if let Some(at) = argv.iter().position(|a| a == "--length" || a == "-l") {
                    let n = argv
                        .get(at + 1)
                        .and_then(|n| n.parse().ok())
                        .ok_or(format!("$({name}) --length needs a number"))?;
                    length = Some(n);
                    argv.drain(at..at + 2);
                }
                Func::Digest(digest, length)
            }
            "+" | "-" | "*" | "/" | "%" => Func::Arithmetic(name.as_bytes()[0]),
            "sanitize" => {
                let mut ctrl_chars = true;
                let mut invalid = b"/".to_vec();
                let mut replacement = b'_';
                let mut rest = Vec::new();
                let mut it = argv.drain(..);
                while let Some(a) = it.next() {
                    let mut value =
                        |flag: &str| it.next().ok_or(format!("$(sanitize) {flag} needs a value"));
                    match a.as_str() {
                        "--ctrl-chars" | "-c" => ctrl_chars = true,
                        "--no-ctrl-chars" | "-C" => ctrl_chars = false,
                        "--invalid-chars" | "-i" => invalid = value(&a)?.into_bytes(),
                        "--replacement" | "-r" => {
                            replacement = value(&a)?.bytes().next().unwrap_or(b'_')
                        }
                        _ => rest.push(a),
                    }
                }
                drop(it);
                argv = rest;
                Func::Sanitize {
                    ctrl_chars,
                    invalid,
                    replacement,
                }
            }
            "if" => {
                if argv.len() != 3 {
                    return Err(
                        "$(if) requires three arguments: $(if (filter) \"then\" \"else\")".into(),
                    );
                }
                let condition = argv.remove(0);
                Func::If(Box::new(compile_condition("$(if)", &condition, names)?))
            }
            n if NOT_YET.contains(&n) => {
                return Err(format!("the template function $({n}) is not supported yet"))
            }
            n => {
                return Err(format!(
                    "unknown template function $({n}); the functions are: {}",
                    FUNCTIONS
                        .iter()
                        .map(|(name, _)| *name)
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            }
        };
        let args = argv.iter().map(|a| template(a)).collect::<Result<_, _>>()?;
        Ok(Call { func, args })
    }

    pub fn uses_seq(&self) -> bool {
        match &self.func {
            Func::ValuePairs(f) => f.uses_seq(),
            Func::Iterate { step, .. } => step.uses_seq(),
            Func::Named(t) => t.uses_seq(),
            _ => self.args.iter().any(Template::uses_seq),
        }
    }

    /// Appends the call's result for `msg` to `out` and says its type, as syslog-ng 3.38's
    /// functions give it: numbers from arithmetic, lengths and counts, lists from the list
    /// functions, JSON from `$(format-json)`. (Arguments are strings in 3.x configurations, so
    /// `$(if)` gives a string.)
    pub fn append_typed(&self, msg: &LogMessage, seq: u32, out: &mut Vec<u8>) -> ValueType {
        let start = out.len();
        self.append(msg, seq, out);
        let result = &out[start..];
        let number = || {
            if std::str::from_utf8(result).is_ok_and(|s| s.parse::<i64>().is_ok()) {
                ValueType::Int
            } else {
                ValueType::Double
            }
        };
        match &self.func {
            Func::Arithmetic(_) | Func::Round | Func::Ceil | Func::Floor => number(),
            Func::Length | Func::ListCount | Func::ListSearch { .. } => ValueType::Int,
            Func::Aggregate(_) if result.is_empty() => ValueType::Null,
            Func::Aggregate(_) | Func::ContextLength => ValueType::Int,
            Func::ContextValues | Func::Grep { list: true, .. } => ValueType::List,
            Func::ListConcat | Func::ListAppend | Func::ListSlice | Func::Explode | Func::Map => {
                ValueType::List
            }
            Func::ValuePairs(f) => f.result_type(),
            _ => ValueType::String,
        }
    }

    /// Appends the call's result for `msg` to `out`.
    pub fn append(&self, msg: &LogMessage, seq: u32, out: &mut Vec<u8>) {
        let eval = |t: &Template| {
            let mut v = Vec::new();
            t.append(msg, seq, &mut v);
            v
        };
        let args = || self.args.iter().map(eval).collect::<Vec<_>>();
        match &self.func {
            Func::Echo => join(out, &args(), b" ", |v, out| out.extend_from_slice(v)),
            Func::Length => join(out, &args(), b" ", |v, out| {
                out.extend_from_slice(itoa::Buffer::new().format(v.len()).as_bytes())
            }),
            Func::Lowercase => join(out, &args(), b" ", |v, out| change_case(v, false, out)),
            Func::Uppercase => join(out, &args(), b" ", |v, out| change_case(v, true, out)),
            Func::Strip => {
                let start = out.len();
                for v in args() {
                    let trimmed = v.trim_ascii();
                    if trimmed.is_empty() {
                        continue;
                    }
                    if out.len() > start {
                        out.push(b' ');
                    }
                    out.extend_from_slice(trimmed);
                }
            }
            Func::Sanitize {
                ctrl_chars,
                invalid,
                replacement,
            } => join(out, &args(), b"/", |v, out| {
                out.extend(v.iter().map(|&b| {
                    if (*ctrl_chars && b < 32) || invalid.contains(&b) {
                        *replacement
                    } else {
                        b
                    }
                }))
            }),
            Func::IndentMultiLine => {
                let mut text = Vec::new();
                join(&mut text, &args(), b" ", |v, out| out.extend_from_slice(v));
                for (i, &b) in text.iter().enumerate() {
                    out.push(b);
                    if b == b'\n' && text.get(i + 1) != Some(&b'\t') {
                        out.push(b'\t');
                    }
                }
            }
            Func::ReplaceDelimiter => {
                let a = args();
                if let [delimiters, new, haystack] = a.as_slice() {
                    let new = new.first().copied().unwrap_or(0);
                    out.extend(
                        haystack
                            .iter()
                            .map(|&b| if delimiters.contains(&b) { new } else { b }),
                    );
                }
            }
            Func::Substr => {
                let a = args();
                if let Some(s) = substr(&a) {
                    out.extend_from_slice(s);
                }
            }
            Func::If(condition) => {
                let mut scratch = Vec::new();
                let branch = if condition.matches(msg, &mut scratch) {
                    0
                } else {
                    1
                };
                self.args[branch].append(msg, seq, out);
            }
            Func::Or => {
                if let Some(v) = args().into_iter().find(|v| !v.is_empty()) {
                    out.extend_from_slice(&v);
                }
            }
            Func::Arithmetic(op) => arithmetic(*op, &args(), out),
            Func::ValuePairs(f) => f.append(msg, seq, out),
            Func::Grep {
                condition,
                max_count,
                list,
            } => {
                let (start, mut count, mut scratch, mut value) =
                    (out.len(), 0, Vec::new(), Vec::new());
                context::each(msg, |m| {
                    if (*max_count > 0 && count >= *max_count)
                        || !condition.matches(m, &mut scratch)
                    {
                        return;
                    }
                    count += 1;
                    for t in &self.args {
                        match list {
                            true => {
                                value.clear();
                                t.append(m, seq, &mut value);
                                crate::list::push(out, start, &value);
                            }
                            false => {
                                if out.len() > start {
                                    out.push(b',');
                                }
                                t.append(m, seq, out);
                            }
                        }
                    }
                });
            }
            Func::ContextValues => {
                let (start, mut value) = (out.len(), Vec::new());
                context::each(msg, |m| {
                    for t in &self.args {
                        value.clear();
                        t.append(m, seq, &mut value);
                        crate::list::push(out, start, &value);
                    }
                });
            }
            Func::ContextLength => {
                out.extend_from_slice(itoa::Buffer::new().format(context::len()).as_bytes())
            }
            Func::Map => {
                let [template, list] = self.args.as_slice() else {
                    return;
                };
                let start = out.len();
                let mut item_out = Vec::new();
                for item in crate::list::items(&[&eval(list)]) {
                    item_out.clear();
                    with_element(&item, || template.append(msg, seq, &mut item_out));
                    crate::list::push(out, start, &item_out);
                }
            }
            Func::FilterList(condition) => {
                let start = out.len();
                let mut scratch = Vec::new();
                for item in crate::list::items(&[&args().concat()]) {
                    if with_element(&item, || condition.matches(msg, &mut scratch)) {
                        // Put back as read, not quoted again, as syslog-ng 3.38 does.
                        crate::list::separate(out, start);
                        out.extend_from_slice(&item);
                    }
                }
            }
            Func::Iterate { step, current } => {
                let mut current = current.lock().unwrap_or_else(|e| e.into_inner());
                out.extend_from_slice(&current);
                let mut next = Vec::new();
                with_element(&current, || step.append(msg, seq, &mut next));
                *current = next;
            }
            Func::ListSearch { matcher, start } => {
                let a = args();
                let lists: Vec<&[u8]> = a.iter().map(Vec::as_slice).collect();
                if let Some(i) = crate::list::items(&lists)
                    .iter()
                    .skip(*start)
                    .position(|item| matcher.is_match(item))
                {
                    out.extend_from_slice(itoa::Buffer::new().format(start + i).as_bytes());
                }
            }
            Func::DynamicNamed(named) => {
                let a = args();
                let Some((name, fallback)) = a.split_first() else {
                    return;
                };
                match std::str::from_utf8(name).ok().and_then(|n| named.get(n)) {
                    Some(t) => t.append(msg, seq, out),
                    None => join(out, fallback, b" ", |v, out| out.extend_from_slice(v)),
                }
            }
            Func::Padding(fill) => {
                let text = self.args.first().map(eval).unwrap_or_default();
                if text.len() <= fill.len() {
                    out.extend_from_slice(&fill[..fill.len() - text.len()]);
                }
                out.extend_from_slice(&text);
            }
            Func::UrlEncode => {
                for v in args() {
                    for &b in &v {
                        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                            out.push(b);
                        } else {
                            out.extend_from_slice(format!("%{b:02X}").as_bytes());
                        }
                    }
                }
            }
            Func::UrlDecode => {
                for v in args() {
                    if let Some(decoded) = url_decode(&v) {
                        out.extend_from_slice(&decoded);
                    }
                }
            }
            Func::Env => {
                let a = args();
                for (i, name) in a.iter().enumerate() {
                    let Some(value) = std::str::from_utf8(name).ok().and_then(std::env::var_os)
                    else {
                        continue;
                    };
                    out.extend_from_slice(value.as_encoded_bytes());
                    if i + 1 < a.len() {
                        out.push(b' ');
                    }
                }
            }
            Func::Ipv4ToInt => join(out, &args(), b",", |v, out| {
                let n = std::str::from_utf8(v).ok().and_then(inet_aton).unwrap_or(0);
                out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
            }),
            Func::Dirname | Func::Basename => {
                let a = args();
                let path = a.first().map(Vec::as_slice).unwrap_or_default();
                let dir = matches!(self.func, Func::Dirname);
                out.extend_from_slice(&path_part(path, dir));
            }
            Func::Round | Func::Ceil | Func::Floor => rounding(&self.func, &args(), out),
            Func::ListConcat
            | Func::ListAppend
            | Func::ListCount
            | Func::ListHead
            | Func::ListNth
            | Func::ListTail
            | Func::ListSlice
            | Func::Explode
            | Func::Implode => lists(&self.func, &args(), out),
            Func::Named(t) => t.append(msg, seq, out),
            Func::FormatDate { format, zone } => {
                let (secs, offset) = match self.args.first() {
                    Some(t) => datetime(&eval(t)).unwrap_or((0, None)),
                    None => (msg.stamp.secs, Some(msg.stamp.offset)),
                };
                let offset = match zone {
                    Some(zone) => zone.offset_at(secs),
                    None => offset.unwrap_or_else(|| crate::time::Zone::local().offset_at(secs)),
                };
                if let Some(text) = strftime(format, secs, offset) {
                    out.extend_from_slice(text.as_bytes());
                }
            }
            Func::Aggregate(how) => {
                let Some(arg) = self.args.first() else {
                    return;
                };
                let (mut found, mut count, mut v): (Option<i64>, i64, Vec<u8>) =
                    (None, 0, Vec::new());
                context::each(msg, |m| {
                    v.clear();
                    arg.append(m, seq, &mut v);
                    let Some(n) = std::str::from_utf8(&v)
                        .ok()
                        .and_then(|s| s.trim_start().parse::<i64>().ok())
                    else {
                        return;
                    };
                    count += 1;
                    found = Some(match (found, how) {
                        (None, _) => n,
                        (Some(a), Aggregate::Sum | Aggregate::Average) => a.wrapping_add(n),
                        (Some(a), Aggregate::Min) => a.min(n),
                        (Some(a), Aggregate::Max) => a.max(n),
                    });
                });
                if let Some(n) = found {
                    let n = match how {
                        Aggregate::Average => n / count,
                        _ => n,
                    };
                    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
                }
            }
            Func::Uuid => {
                out.extend_from_slice(uuid::Uuid::new_v4().hyphenated().to_string().as_bytes())
            }
            Func::Bytes(bytes) => out.extend_from_slice(bytes),
            Func::Base64 => {
                use base64::Engine;
                let all: Vec<u8> = args().concat();
                out.extend_from_slice(
                    base64::engine::general_purpose::STANDARD
                        .encode(all)
                        .as_bytes(),
                );
            }
            Func::Digest(digest, length) => {
                use sha2::Digest as _;
                let all: Vec<u8> = args().concat();
                let bytes: Vec<u8> = match digest {
                    Digest::Md5 => md5::Md5::digest(&all).to_vec(),
                    Digest::Sha1 => sha1::Sha1::digest(&all).to_vec(),
                    Digest::Sha256 => sha2::Sha256::digest(&all).to_vec(),
                    Digest::Sha512 => sha2::Sha512::digest(&all).to_vec(),
                };
                let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
                let n = length.unwrap_or(hex.len()).min(hex.len());
                out.extend_from_slice(&hex.as_bytes()[..n]);
            }
        }
    }
}

/// The list functions, with syslog-ng's rules for indices (negative ones count from the end).
fn lists(func: &Func, a: &[Vec<u8>], out: &mut Vec<u8>) {
    use crate::list::{items, push};
    let start = out.len();
    fn refs(v: &[Vec<u8>]) -> Vec<&[u8]> {
        v.iter().map(Vec::as_slice).collect()
    }
    let int = |v: &[u8]| std::str::from_utf8(v).ok()?.trim().parse::<i64>().ok();
    let nth = |list: &[Vec<u8>], n: i64| {
        let n = if n < 0 { n + list.len() as i64 } else { n };
        usize::try_from(n).ok().and_then(|n| list.get(n)).cloned()
    };
    let slice = |list: Vec<Vec<u8>>, first: i64, last: i64, out: &mut Vec<u8>| {
        let count = list.len() as i64;
        let first = if first < 0 { first + count } else { first }.max(0);
        let last = if last < 0 { last + count } else { last };
        for (i, item) in list.iter().enumerate() {
            let i = i as i64;
            if i >= first && i < last {
                push(out, start, item);
            }
        }
    };
    match func {
        Func::ListConcat => {
            for item in items(&refs(a)) {
                push(out, start, &item);
            }
        }
        Func::ListAppend => {
            if let Some((list, rest)) = a.split_first() {
                out.extend_from_slice(list);
                for item in rest {
                    push(out, start, item);
                }
            }
        }
        Func::ListCount => {
            let n = if a.is_empty() {
                0
            } else {
                items(&refs(a)).len()
            };
            out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
        }
        Func::ListHead => {
            if let Some(first) = nth(&items(&refs(a)), 0) {
                out.extend_from_slice(&first);
            }
        }
        Func::ListNth => {
            if let Some((n, rest)) = a.split_first() {
                if let Some(item) = int(n).and_then(|n| nth(&items(&refs(rest)), n)) {
                    out.extend_from_slice(&item);
                }
            }
        }
        Func::ListTail => {
            if !a.is_empty() {
                slice(items(&refs(a)), 1, i64::from(i32::MAX), out);
            }
        }
        Func::ListSlice => {
            if let Some((spec, rest)) = a.split_first() {
                let (first, last) = match spec.iter().position(|&b| b == b':') {
                    Some(c) => (&spec[..c], Some(&spec[c + 1..])),
                    None => (&spec[..], None),
                };
                let first = if first.is_empty() {
                    Some(0)
                } else {
                    int(first)
                };
                let last = match last {
                    Some(l) if !l.is_empty() => int(l),
                    _ => Some(i64::from(i32::MAX)),
                };
                if let (Some(first), Some(last)) = (first, last) {
                    if !rest.is_empty() {
                        slice(items(&refs(rest)), first, last, out);
                    }
                }
            }
        }
        Func::Explode => {
            if let Some((sep, rest)) = a.split_first() {
                for text in rest {
                    let parts: Vec<&[u8]> = if sep.is_empty() {
                        vec![&text[..]]
                    } else {
                        split_all(text, sep)
                    };
                    for part in parts {
                        push(out, start, part);
                    }
                }
            }
        }
        Func::Implode => {
            if let Some((sep, rest)) = a.split_first() {
                for item in items(&refs(rest)) {
                    if out.len() > start {
                        out.extend_from_slice(sep);
                    }
                    out.extend_from_slice(&item);
                }
            }
        }
        _ => unreachable!("only list functions come here"),
    }
}

/// `text` split at every `sep`, as `g_strsplit` does (an empty text gives no parts).
fn split_all<'a>(text: &'a [u8], sep: &[u8]) -> Vec<&'a [u8]> {
    if text.is_empty() {
        return Vec::new();
    }
    let mut parts = Vec::new();
    let mut at = 0;
    for hit in memchr::memmem::find_iter(text, sep) {
        if hit < at {
            continue;
        }
        parts.push(&text[at..hit]);
        at = hit + sep.len();
    }
    parts.push(&text[at..]);
    parts
}

/// glib's `g_uri_unescape_string`: `%XX` decoded; `None` for a broken escape or a NUL.
fn url_decode(v: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(v.len());
    let mut i = 0;
    while i < v.len() {
        if v[i] == b'%' {
            let hex = std::str::from_utf8(v.get(i + 1..i + 3)?).ok()?;
            let b = u8::from_str_radix(hex, 16).ok()?;
            if b == 0 {
                return None;
            }
            out.push(b);
            i += 3;
        } else {
            out.push(v[i]);
            i += 1;
        }
    }
    Some(out)
}

/// glibc's `inet_aton`: `a.b.c.d`, `a.b.c`, `a.b` or `a`, each part decimal, octal (`0…`) or
/// hex (`0x…`), the last part filling the remaining bytes.
fn inet_aton(s: &str) -> Option<u64> {
    let parts: Vec<u64> = s
        .split('.')
        .map(|p| {
            if let Some(h) = p.strip_prefix("0x").or_else(|| p.strip_prefix("0X")) {
                u64::from_str_radix(h, 16).ok()
            } else if p.len() > 1 && p.starts_with('0') {
                u64::from_str_radix(&p[1..], 8).ok()
            } else {
                p.parse().ok()
            }
        })
        .collect::<Option<_>>()?;
    let (last, head) = parts.split_last()?;
    if head.len() > 3 || head.iter().any(|&p| p > 255) || *last >= 1u64 << (8 * (4 - head.len())) {
        return None;
    }
    Some(
        head.iter()
            .enumerate()
            .fold(*last, |acc, (i, &p)| acc | p << (24 - 8 * i)),
    )
}

/// glib's `g_path_get_dirname` (`dir`) or `g_path_get_basename`.
fn path_part(path: &[u8], dir: bool) -> Vec<u8> {
    let trimmed_len = path.iter().rposition(|&b| b != b'/').map_or(0, |i| i + 1);
    if dir {
        let Some(slash) = path[..path.len()].iter().rposition(|&b| b == b'/') else {
            return b".".to_vec();
        };
        let end = path[..slash]
            .iter()
            .rposition(|&b| b != b'/')
            .map_or(0, |i| i + 1);
        return if end == 0 {
            b"/".to_vec()
        } else {
            path[..end].to_vec()
        };
    }
    if path.is_empty() {
        return b".".to_vec();
    }
    if trimmed_len == 0 {
        return b"/".to_vec();
    }
    let start = path[..trimmed_len]
        .iter()
        .rposition(|&b| b == b'/')
        .map_or(0, |i| i + 1);
    path[start..trimmed_len].to_vec()
}

/// `$(round n [digits])`, `$(ceil n)`, `$(floor n)`.
fn rounding(func: &Func, args: &[Vec<u8>], out: &mut Vec<u8>) {
    let number = |v: &[u8]| -> Option<f64> {
        let s = std::str::from_utf8(v).ok()?.trim_start();
        s.parse::<i64>()
            .map(|i| i as f64)
            .ok()
            .or_else(|| s.parse::<f64>().ok().filter(|f| f.is_finite()))
    };
    let Some(n) = args.first().and_then(|v| number(v)) else {
        out.extend_from_slice(b"NaN");
        return;
    };
    match func {
        Func::Round => {
            let digits = match args.get(1) {
                None => 0,
                Some(d) => match std::str::from_utf8(d)
                    .ok()
                    .and_then(|d| d.trim().parse::<i64>().ok())
                {
                    Some(d) if (0..=20).contains(&d) && args.len() == 2 => d as usize,
                    _ => {
                        out.extend_from_slice(b"NaN");
                        return;
                    }
                },
            };
            let m = 10f64.powi(digits as i32);
            out.extend_from_slice(format!("{:.*}", digits, (n * m).round() / m).as_bytes());
        }
        _ if args.len() != 1 => out.extend_from_slice(b"NaN"),
        Func::Ceil => out.extend_from_slice(itoa::Buffer::new().format(n.ceil() as i64).as_bytes()),
        _ => out.extend_from_slice(itoa::Buffer::new().format(n.floor() as i64).as_bytes()),
    }
}

/// Each value formatted by `each`, separated by `sep`.
fn join(
    out: &mut Vec<u8>,
    values: &[Vec<u8>],
    sep: &[u8],
    mut each: impl FnMut(&[u8], &mut Vec<u8>),
) {
    for (i, v) in values.iter().enumerate() {
        if i > 0 {
            out.extend_from_slice(sep);
        }
        each(v, out);
    }
}

/// Lower or upper case of the UTF-8 text in `v`; bytes that are not UTF-8 stay as they are,
/// as glib leaves them.
fn change_case(v: &[u8], upper: bool, out: &mut Vec<u8>) {
    for chunk in v.utf8_chunks() {
        let text = chunk.valid();
        let changed = if upper {
            text.to_uppercase()
        } else {
            text.to_lowercase()
        };
        out.extend_from_slice(changed.as_bytes());
        out.extend_from_slice(chunk.invalid());
    }
}

thread_local! {
    /// The list item `$(map)` and `$(filter)` are at, or the value `$(iterate)` steps from:
    /// what `$_` expands to.
    static ELEMENT: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Runs `f` with `$_` expanding to `element`.
fn with_element<R>(element: &[u8], f: impl FnOnce() -> R) -> R {
    let outer = ELEMENT.with_borrow_mut(|e| std::mem::replace(e, element.to_vec()));
    let result = f();
    ELEMENT.with_borrow_mut(|e| *e = outer);
    result
}

/// Appends what `$_` expands to here: the element of the innermost `$(map)`, `$(filter)` or
/// `$(iterate)`, or nothing.
pub fn append_element(out: &mut Vec<u8>) {
    ELEMENT.with_borrow(|e| out.extend_from_slice(e));
}

/// The condition of `$(if)`, `$(grep)` or `$(filter)`, written in parentheses: a filter
/// expression.
pub(crate) fn compile_condition(
    // What the condition belongs to, for errors: `$(grep)`, `<action condition=…>`.
    function: &str,
    text: &str,
    names: &Names,
) -> Result<Filter, String> {
    let config = sluice_config::load_str(
        "template function",
        &format!("filter condition {{ {text}; }};"),
    )
    .map_err(|e| format!("{function} condition {text}: {}", e.render()))?;
    let sluice_config::Body::Filter(expr) = &config.statements[0].body else {
        return Err(format!(
            "{function} condition {text} is not a filter expression"
        ));
    };
    filter::compile(expr, names, &mut |name, pos| {
        named_filter(name, pos, names, &mut Vec::new())
    })
    .map_err(|e| format!("{function} condition {text}: {}", e.render(&config.map)))
}

/// syslog-ng's DATETIME text, `secs[.fraction][Z|±hh:mm|±hhmm]`: the seconds, and the offset
/// when one is written.
fn datetime(text: &[u8]) -> Option<(i64, Option<i32>)> {
    let text = std::str::from_utf8(text).ok()?;
    let digits = |s: &str| s.bytes().take_while(u8::is_ascii_digit).count();
    let sign = usize::from(text.starts_with(['-', '+']));
    let end = sign + digits(&text[sign..]);
    let secs: i64 = text[..end].parse().ok()?;
    let mut rest = &text[end..];
    if let Some(fraction) = rest.strip_prefix('.') {
        let n = digits(fraction);
        if n == 0 || n > 9 {
            return None;
        }
        rest = &fraction[n..];
    }
    if rest.is_empty() {
        return Some((secs, None));
    }
    if rest == "Z" {
        return Some((secs, Some(0)));
    }
    let (sign, hhmm) = match rest.split_at(1) {
        ("+", hhmm) => (1, hhmm),
        ("-", hhmm) => (-1, hhmm),
        _ => return None,
    };
    let hhmm = hhmm.replace(':', "");
    if hhmm.len() != 4 || digits(&hhmm) != 4 {
        return None;
    }
    let (h, m): (i32, i32) = (hhmm[..2].parse().ok()?, hhmm[2..].parse().ok()?);
    Some((secs, Some(sign * (h * 3600 + m * 60))))
}

/// `strftime` of an instant shown at an offset; nothing when the result would not fit
/// syslog-ng's 64-byte buffer or the format is not one strftime knows.
fn strftime(format: &str, secs: i64, offset: i32) -> Option<String> {
    let offset = jiff::tz::Offset::from_seconds(offset).ok()?;
    let zoned = jiff::Timestamp::from_second(secs)
        .ok()?
        .to_zoned(jiff::tz::TimeZone::fixed(offset));
    let text = jiff::fmt::strtime::format(format, &zoned).ok()?;
    (text.len() < 64).then_some(text)
}

/// syslog-ng's `$(substr text start [length])`, negative start and length counting from the end.
fn substr(args: &[Vec<u8>]) -> Option<&[u8]> {
    let (text, rest) = args.split_first()?;
    if rest.is_empty() || rest.len() > 2 {
        return None;
    }
    let n = text.len() as i64;
    let int = |v: &[u8]| std::str::from_utf8(v).ok()?.trim().parse::<i64>().ok();
    let mut start = int(&rest[0])?;
    let mut len = match rest.get(1) {
        Some(l) => int(l)?,
        None => n,
    };
    if len < 0 && -len > n {
        return None;
    }
    len = len.min(n);
    if start >= n || (start < 0 && -start > n) {
        return None;
    }
    if len < 0 && ((start < 0 && start > len) || (start >= 0 && len + n - start < 0)) {
        return None;
    }
    if start < 0 {
        start = (start + n).max(0);
    }
    if len < 0 {
        len += n - start;
        if len < 0 {
            return None;
        }
    }
    if start + len > n {
        len = n - start;
    }
    let start = start as usize;
    Some(&text[start..start + len as usize])
}

/// `$(+ a b)` and the like: integers stay integers; otherwise doubles; `NaN` when an argument
/// is not a number (or the divisor is 0).
fn arithmetic(op: u8, args: &[Vec<u8>], out: &mut Vec<u8>) {
    let parse = |v: &[u8]| -> Option<Result<i64, f64>> {
        let s = std::str::from_utf8(v).ok()?.trim_start();
        match s.parse::<i64>() {
            Ok(i) => Some(Ok(i)),
            Err(_) => s.parse::<f64>().ok().filter(|f| f.is_finite()).map(Err),
        }
    };
    let (Some(a), Some(b)) = (
        args.first().and_then(|v| parse(v)),
        args.get(1).and_then(|v| parse(v)),
    ) else {
        out.extend_from_slice(b"NaN");
        return;
    };
    if args.len() != 2 {
        out.extend_from_slice(b"NaN");
        return;
    }
    match (a, b) {
        (Ok(a), Ok(b)) => {
            let r = match op {
                b'+' => Some(a.wrapping_add(b)),
                b'-' => Some(a.wrapping_sub(b)),
                b'*' => Some(a.wrapping_mul(b)),
                b'/' => a.checked_div(b),
                _ => a.checked_rem(b),
            };
            match r {
                Some(r) => out.extend_from_slice(itoa::Buffer::new().format(r).as_bytes()),
                None => out.extend_from_slice(b"NaN"),
            }
        }
        (a, b) => {
            let f = |x: Result<i64, f64>| x.map_or_else(|f| f, |i| i as f64);
            let (a, b) = (f(a), f(b));
            let r = match op {
                b'+' => a + b,
                b'-' => a - b,
                b'*' => a * b,
                b'/' if b != 0.0 => a / b,
                b'%' if b != 0.0 => a % b,
                _ => {
                    out.extend_from_slice(b"NaN");
                    return;
                }
            };
            // syslog-ng prints computed doubles with 20 decimals.
            out.extend_from_slice(format!("{r:.20}").as_bytes());
        }
    }
}
