//! Template functions: `$(name arg …)`, compiled once with their arguments as templates.
//!
//! Arguments are cut as syslog-ng cuts them: white space separates them at the top level,
//! quotes group (and are removed at the top level, kept inside parentheses), `\` takes the
//! next byte as it is, and parentheses nest, so `$(if ("$HOST" eq "gw") "a" "b")` has the
//! filter expression `("$HOST" eq "gw")` as its first argument.

use super::Template;
use crate::filter::{self, Filter};
use crate::message::LogMessage;

/// A compiled call.
#[derive(Clone, Debug)]
pub struct Call {
    func: Func,
    args: Vec<Template>,
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
    FormatJson(Box<super::json::FormatJson>),
}

/// The functions of this version; others syslog-ng has are refused as not yet supported.
const FUNCTIONS: &[&str] = &[
    "echo",
    "length",
    "substr",
    "strip",
    "sanitize",
    "lowercase",
    "uppercase",
    "indent-multi-line",
    "replace-delimiter",
    "if",
    "or",
    "+",
    "-",
    "*",
    "/",
    "%",
    "format-json",
];
const NOT_YET: &[&str] = &[
    "format-flat-json",
    "format-welf",
    "format-date",
    "format-cim",
    "format-gelf",
    "grep",
    "padding",
    "hash",
    "md5",
    "sha1",
    "sha256",
    "sha512",
    "base64-encode",
    "url-encode",
    "url-decode",
    "uuid",
    "ipv4-to-int",
    "echo-json",
    "env",
    "template",
    "sum",
    "min",
    "max",
    "average",
    "round",
    "ceil",
    "floor",
    "list-concat",
    "list-append",
    "list-count",
    "list-nth",
    "list-head",
    "list-tail",
    "list-slice",
    "list-search",
    "explode",
    "implode",
    "iterate",
    "map",
    "filter",
    "names",
    "values",
    "binary",
    "dirname",
    "basename",
    "context-length",
    "context-lookup",
    "context-values",
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

impl Call {
    /// Compiles `$(name args…)` from its arguments (the name first).
    pub fn compile(mut argv: Vec<String>) -> Result<Call, String> {
        if argv.is_empty() {
            return Err("a template function needs a name: $(name arguments…)".into());
        }
        let name = argv.remove(0);
        let template = |t: &str| Template::compile(t);
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
            "format-json" => {
                let f = super::json::FormatJson::compile(&argv)?;
                argv.clear();
                Func::FormatJson(Box::new(f))
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
                Func::If(Box::new(compile_condition(&condition)?))
            }
            n if NOT_YET.contains(&n) => {
                return Err(format!("the template function $({n}) is not supported yet"))
            }
            n => {
                return Err(format!(
                    "unknown template function $({n}); the functions are: {}",
                    FUNCTIONS.join(", ")
                ))
            }
        };
        let args = argv.iter().map(|a| template(a)).collect::<Result<_, _>>()?;
        Ok(Call { func, args })
    }

    pub fn uses_seq(&self) -> bool {
        match &self.func {
            Func::FormatJson(f) => f.uses_seq(),
            _ => self.args.iter().any(Template::uses_seq),
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
            Func::FormatJson(f) => f.append(msg, seq, out),
        }
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

/// `$(if)`'s condition, written in parentheses: a filter expression.
fn compile_condition(text: &str) -> Result<Filter, String> {
    let config = sluice_config::load_str(
        "template function",
        &format!("filter condition {{ {text}; }};"),
    )
    .map_err(|e| format!("$(if) condition {text}: {}", e.render()))?;
    let sluice_config::Body::Filter(expr) = &config.statements[0].body else {
        return Err(format!("$(if) condition {text} is not a filter expression"));
    };
    filter::compile(expr, &mut |name, pos| {
        Err(sluice_config::ConfigError::new(
            pos,
            format!("filter({name}) cannot be used inside $(if) yet"),
        ))
    })
    .map_err(|e| format!("$(if) condition {text}: {}", e.render(&config.map)))
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
