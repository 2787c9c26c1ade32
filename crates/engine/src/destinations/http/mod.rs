//! The declaration of `http()` (its runtime is [`crate::destinations::http`]): syslog-ng's
//! options, read into the request every message goes out in.

pub mod client;

use super::driver::{Built, DestinationContext, DestinationDriver, FormatOptions, Queue, Threaded};
use super::driver::{DATES, DISK_BUFFER, EVERY_LATER, QUEUE, THREADED};
use crate::destinations::format::{Format, Formatter};
use crate::tls::TlsOptions;
use base64::Engine;
use client::{Action, Coding, HttpDestination, HttpOptions, Proxy, Requests, Target};
use sluice_config::declared::{not_yet, read, Declared, Options};
use sluice_config::{ConfigError, Node};
use sluice_model::Template;
use std::sync::Arc;
use std::time::Duration;

/// The declaration: the names it answers to, its options, a valid use, its build.
pub static DRIVER: DestinationDriver = DestinationDriver {
    names: &["http"],
    about: "HTTP(S) requests of one or more messages each, with retries by status code.",
    options: &[
        DATES,
        QUEUE,
        DISK_BUFFER,
        THREADED,
        OPTIONS,
        LATER,
        EVERY_LATER,
    ],
    sample: "http(url(\"http://127.0.0.1:9200/_bulk\"))",
    build,
};

/// The options of `http()` itself.
pub(super) const OPTIONS: &[Declared] = &[
    read(
        "url",
        "url(\"http://127.0.0.1:9/a\" \"https://127.0.0.1:9/b\")",
    ).about("the URLs requests go to; `elasticsearch-http()`, `opensearch()`: the nodes' `_bulk` endpoints, failed over in turn", "required"),
    read("method", "method(\"PUT\")").about("the request method", "POST"),
    read(
        "headers",
        "headers(\"Content-Type: application/json\", \"X-A: b\")",
    ).about("header lines of each request", "none"),
    read("body", "body(\"$MSG\")").about("the template of an HTTP request's body for each message", "the message in syslog-ng's file format"),
    read("body_prefix", "body-prefix(\"[\")").about("text before the messages of an HTTP request's body", "empty"),
    read("body_suffix", "body-suffix(\"]\")").about("text after the messages of an HTTP request's body", "empty"),
    read("delimiter", "delimiter(\",\")").about("text between the messages of an HTTP request's body", "a line end"),
    read("user", "user(\"u\") password(\"p\")").about("basic authentication's user", "none"),
    read("password", "password(\"p\") user(\"u\")").about("basic authentication's password", "none"),
    read("user_agent", "user-agent(\"sluice\")").about("the User-Agent header", "sluice"),
    read("timeout", "timeout(10)").about("seconds a server may take to answer", "none"),
    read(
        "response_action",
        "response-action(404 => retry, 418 => drop)",
    ).about("what a status code means (`404 => drop`, `503 => retry`)", "2xx taken, 5xx later, 4xx dropped"),
    read("tls", "tls(peer-verify(no))").about("TLS: `key-file()`, `cert-file()`, `ca-file()`, `ca-dir()`, `peer-verify()`…", "none"),
    read("content_compression", "content-compression(\"gzip\")").about("request bodies compressed with `gzip` or `deflate` (`identity`: as they are)", "identity"),
    read("accept_encoding", "accept-encoding(\"gzip, deflate\")").about("the compressions answers may come in (`gzip`, `deflate`, `identity`, `all`), read when they do", "none asked"),
    read("proxy", "proxy(\"http://proxy.example:3128\")").about("an HTTP proxy, `http://[user:password@]host:port`; `https://` URLs go through a tunnel it opens (`CONNECT`)", "none"),
    read("accept_redirects", "accept-redirects(no)").about("`no` only: sluice does not follow a redirect (a 3xx answer is sent again later, as a 5xx)", "no"),
];

/// syslog-ng's options of `http()` that sluice does not have yet.
pub(super) const LATER: &[Declared] = &[
    not_yet("ca_dir"),
    not_yet("ca_file"),
    not_yet("cert_file"),
    not_yet("key_file"),
    not_yet("cipher_suite"),
    not_yet("ssl_version"),
    not_yet("peer_verify"),
    not_yet("use_system_cert_store"),
    not_yet("auth"),
];

/// `http(url("http://10.0.0.1:8080/logs") …)`.
pub(super) fn build(
    node: &Node,
    o: &mut Options,
    cx: &DestinationContext,
) -> Result<Built, ConfigError> {
    let text = |o: &mut Options, name| o.last(name).map(Node::string).transpose();
    let body = match o.last("body") {
        Some(opt) => {
            let v = opt.value()?;
            Template::compile_in(&v.text, cx.names).map_err(|e| ConfigError::new(v.pos, e))?
        }
        None => Template::compile_in("$MSG", cx.names).expect("a valid template"),
    };
    let kind = Kind {
        driver: "http",
        example: "http(url(\"http://10.0.0.1:8080/logs\"))",
        method: method(o)?,
        headers: &[],
        body,
        body_prefix: text(o, "body_prefix")?.unwrap_or_default(),
        body_suffix: text(o, "body_suffix")?.unwrap_or_default(),
        delimiter: text(o, "delimiter")?.unwrap_or_else(|| "\n".into()),
        bulk: false,
        defaults: Defaults::default(),
    };
    requests(node, o, cx, kind)
}

/// What a driver that speaks HTTP says where `http()` lets the configuration say.
pub(super) struct Kind {
    /// Its name, for its errors: `http`.
    pub driver: &'static str,
    /// A configuration of it, for its errors.
    pub example: &'static str,
    pub method: &'static str,
    /// The headers it sends unless `headers()` names them.
    pub headers: &'static [(&'static str, &'static str)],
    /// A message's part of a request.
    pub body: Template,
    pub body_prefix: String,
    pub body_suffix: String,
    pub delimiter: String,
    /// Its server answers for each message, as Elasticsearch's `_bulk` does.
    pub bulk: bool,
    pub defaults: Defaults,
}

/// The options of a driver that are syslog-ng's defaults for it unless given.
#[derive(Default)]
pub(super) struct Defaults {
    pub workers: Option<usize>,
    pub batch_lines: Option<usize>,
    /// `timeout()`, in seconds.
    pub timeout: Option<u64>,
}

/// `method("PUT")`.
fn method(o: &mut Options) -> Result<&'static str, ConfigError> {
    Ok(match o.last("method") {
        None => "POST",
        Some(opt) => {
            let v = opt.value()?;
            match v.text.to_ascii_uppercase().as_str() {
                "POST" => "POST",
                "PUT" => "PUT",
                _ => {
                    return Err(ConfigError::unknown(
                        v.pos,
                        "method",
                        &v.text,
                        "",
                        &["POST", "PUT"],
                    ))
                }
            }
        }
    })
}

/// Builds a destination of HTTP requests: `kind` and what every such driver reads (the
/// servers, their headers and credentials, TLS, batches and workers).
pub(super) fn requests(
    node: &Node,
    o: &mut Options,
    cx: &DestinationContext,
    kind: Kind,
) -> Result<Built, ConfigError> {
    let format = FormatOptions::read_part(o, cx, DATES)?;
    let queue = Queue::read(o, cx.globals)?;
    let mut threaded = Threaded::read(o, cx)?;
    let given = |o: &mut Options, name| o.last(name).is_some();
    if let (Some(workers), false) = (kind.defaults.workers, given(o, "workers")) {
        threaded.workers = workers;
    }
    if let (Some(lines), false) = (kind.defaults.batch_lines, given(o, "batch_lines")) {
        threaded.batch.lines = lines;
    }
    let driver = kind.driver;
    if let Some(v) = node.first_value() {
        return Err(ConfigError::new(
            v.pos,
            format!("{driver}() takes its server in url(): {}", kind.example),
        ));
    }
    let method = kind.method;
    let text = |o: &mut Options, name| o.last(name).map(Node::string).transpose();
    // What every request carries, whatever its server.
    let mut common = String::new();
    let agent =
        text(o, "user_agent")?.unwrap_or_else(|| format!("sluice/{}", env!("CARGO_PKG_VERSION")));
    common.push_str(&format!(
        "User-Agent: {}\r\n",
        header_value(&agent, o.last("user_agent"))?
    ));
    match (o.last("user"), o.last("password")) {
        (None, None) => {}
        (Some(user), password) => {
            let password = password.map(Node::string).transpose()?.unwrap_or_default();
            let pair = format!("{}:{password}", user.string()?);
            let encoded = base64::engine::general_purpose::STANDARD.encode(pair);
            common.push_str(&format!("Authorization: Basic {encoded}\r\n"));
        }
        (None, Some(p)) => {
            return Err(ConfigError::new(
                p.pos,
                "password() goes with user(): user(\"sluice\") password(\"…\")",
            ))
        }
    }
    let mut named = Vec::new();
    for opt in o.all("headers") {
        for v in opt.values() {
            let (name, value) = v.text.split_once(':').ok_or_else(|| {
                ConfigError::new(
                    v.pos,
                    format!("'{}' is not a header: headers(\"Name: value\")", v.text),
                )
            })?;
            let name = http::HeaderName::from_bytes(name.trim().as_bytes()).map_err(|_| {
                ConfigError::new(v.pos, format!("'{}' is not a header name", name.trim()))
            })?;
            let value = value.trim();
            // syslog-ng 3.38 sends headers as written; 4.x fills templates in. Neither is
            // what a `${HOST}` here means to sluice yet: it is refused, as in url().
            let templated = value.contains('$')
                && Template::compile_in(value, cx.names).is_ok_and(|t| t.literal().is_none());
            if templated {
                return Err(ConfigError::not_supported(v.pos, "a template in headers()"));
            }
            if http::HeaderValue::from_str(value).is_err() {
                return Err(ConfigError::new(
                    v.pos,
                    format!("the value of header {name} has characters a header cannot carry"),
                ));
            }
            if matches!(
                name.as_str(),
                "content-length" | "transfer-encoding" | "host"
            ) {
                return Err(ConfigError::new(
                    v.pos,
                    format!("{name} is sluice's to say, not headers()'"),
                ));
            }
            common.push_str(&format!(
                "{}: {value}\r\n",
                v.text.split_once(':').expect("split").0.trim()
            ));
            named.push(name);
        }
    }
    for (name, value) in kind.headers {
        if !named.iter().any(|n| n.as_str().eq_ignore_ascii_case(name)) {
            common.push_str(&format!("{name}: {value}\r\n"));
        }
    }
    let compression = match o.last("content_compression") {
        Some(opt) => {
            let v = opt.value()?;
            match v.text.trim() {
                "identity" | "" => None,
                name => Some(Coding::by_name(name).ok_or_else(|| {
                    ConfigError::new(
                        v.pos,
                        format!("content-compression(\"{name}\"): \"gzip\", \"deflate\" or \"identity\""),
                    )
                })?),
            }
        }
        None => None,
    };
    if let Some(coding) = compression {
        common.push_str(&format!("Content-Encoding: {}\r\n", coding.name()));
    }
    if let Some(opt) = o.last("accept_encoding") {
        let v = opt.value()?;
        let mut accepted = Vec::new();
        for name in v.text.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            match name {
                "all" => accepted.extend(["gzip", "deflate", "identity"]),
                "identity" => accepted.push("identity"),
                _ => accepted.push(Coding::by_name(name).map(Coding::name).ok_or_else(|| {
                    ConfigError::new(
                        v.pos,
                        format!("accept-encoding(\"{name}\"): \"gzip\", \"deflate\", \"identity\" or \"all\""),
                    )
                })?),
            }
        }
        accepted.dedup();
        common.push_str(&format!("Accept-Encoding: {}\r\n", accepted.join(", ")));
    }
    let urls: Vec<&sluice_config::Value> = o.all("url").flat_map(|n| n.values()).collect();
    if urls.is_empty() {
        return Err(ConfigError::new(
            node.pos,
            format!("{driver}() needs url(): {}", kind.example),
        ));
    }
    // A server's answer says what became of a request, never where logs go next.
    if let Some(opt) = o.last("accept_redirects") {
        if opt.bool()? {
            return Err(ConfigError::new(
                opt.pos,
                "sluice does not follow redirects: an answer of a server does not choose where logs go (a redirect to an inner address would send them there); give the final URL in url()",
            ));
        }
    }
    let proxy = match o.last("proxy") {
        Some(opt) => proxy(opt.value()?)?,
        None => None,
    };
    let mut targets = Vec::new();
    let mut any_tls = false;
    for v in &urls {
        let t = target(v, method, &common, proxy.as_ref())?;
        any_tls |= t.tls;
        targets.push(t);
    }
    let tls = match o.last("tls") {
        Some(opt) => Some(TlsOptions::parse(opt)?),
        None if any_tls => Some(TlsOptions::new(node.pos)),
        None => None,
    };
    let tls = match tls {
        Some(mut t) => {
            // As curl does: the server is named in the handshake.
            t.sni = true;
            Some(t.client()?)
        }
        None => None,
    };
    let mut actions = Vec::new();
    for opt in o.all("response_action") {
        response_actions(opt, &mut actions)?;
    }
    let dates = format.dates.clone();
    let mut format = format;
    format.template = Some(kind.body);
    let body = format.formatter(Format::Proto(dates.clone()));
    let partition_key = threaded.partition_key.map(|mut key| {
        key.dates = dates;
        Formatter::new(Format::Template(key), false)
    });
    let requests = Requests {
        targets,
        body_prefix: kind.body_prefix.into_bytes(),
        body_suffix: kind.body_suffix.into_bytes(),
        delimiter: kind.delimiter.into_bytes(),
        batch: threaded.batch,
        timeout: o
            .last("timeout")
            .map(Node::u64)
            .transpose()?
            .or(kind.defaults.timeout)
            .filter(|&s| s > 0)
            .map(Duration::from_secs),
        actions,
        bulk: kind.bulk,
        compression,
    };
    let first = urls[0].text.clone();
    let all: String = urls.iter().map(|v| v.text.as_str()).collect();
    let disk_buffer = queue.disk_buffer(o, || {
        format!(
            "{}-{driver}-{:08x}",
            cx.name,
            crc32fast::hash(all.as_bytes())
        )
    })?;
    let opts = HttpOptions {
        requests: Arc::new(requests),
        tls,
        workers: threaded.workers,
        retries: threaded.retries,
        time_reopen: queue.time_reopen,
        log_fifo_size: queue.log_fifo_size,
        disk_buffer,
        proxy,
    };
    let (component, id) = cx.counted_as(node);
    let counters = cx
        .stats
        .destination(&component, &id, &format!("{driver},{first}"));
    Ok(Arc::new(HttpDestination::new(
        cx.label(),
        body,
        partition_key,
        opts,
        counters,
    )))
}

/// A header value from the configuration, checked.
fn header_value(value: &str, at: Option<&Node>) -> Result<String, ConfigError> {
    if http::HeaderValue::from_str(value).is_err() {
        let pos = at.map(|n| n.pos).unwrap_or_default();
        return Err(ConfigError::new(
            pos,
            "a header cannot carry control characters",
        ));
    }
    Ok(value.to_string())
}

/// `proxy("http://[user:password@]host:port")`: an HTTP proxy, as curl takes one; empty: none.
fn proxy(v: &sluice_config::Value) -> Result<Option<Proxy>, ConfigError> {
    if v.text.trim().is_empty() {
        return Ok(None);
    }
    let bad = |why: &str| ConfigError::new(v.pos, format!("proxy(\"{}\"): {why}", v.text));
    let uri: http::Uri = v
        .text
        .parse()
        .map_err(|e| bad(&format!("not a URL ({e})")))?;
    if uri.scheme_str().is_some_and(|s| s != "http") {
        return Err(bad(
            "sluice speaks to HTTP proxies: proxy(\"http://host:port\")",
        ));
    }
    let authority = uri.authority().ok_or_else(|| bad("no server"))?;
    let (credentials, server) = match authority.as_str().rsplit_once('@') {
        Some((c, s)) => (Some(c), s),
        None => (None, authority.as_str()),
    };
    let server: http::uri::Authority = server.parse().map_err(|_| bad("no server"))?;
    let authorization = credentials.map(|c| {
        use base64::Engine as _;
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(c)
        )
    });
    Ok(Some(Proxy {
        host: server
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string(),
        port: server.port_u16().unwrap_or(1080),
        authorization,
    }))
}

/// One `url()`: `http://host[:port]/path?query` or `https://…`. Through an HTTP proxy, an
/// `http://` request names the whole URL (an `https://` one goes through a tunnel).
fn target(
    v: &sluice_config::Value,
    method: &str,
    common: &str,
    proxy: Option<&Proxy>,
) -> Result<Target, ConfigError> {
    let bad = |why: &str| ConfigError::new(v.pos, format!("url(\"{}\"): {why}", v.text));
    if v.text.contains('$') {
        return Err(ConfigError::not_supported(v.pos, "a template in url()"));
    }
    let uri: http::Uri = v
        .text
        .parse()
        .map_err(|e| bad(&format!("not a URL ({e})")))?;
    let tls = match uri.scheme_str() {
        Some("http") => false,
        Some("https") => true,
        _ => return Err(bad("sluice speaks http:// and https://")),
    };
    let authority = uri.authority().ok_or_else(|| bad("no server"))?;
    if authority.as_str().contains('@') {
        return Err(bad(
            "give the user in user() and password(), not in the URL",
        ));
    }
    let host = authority
        .host()
        .trim_start_matches('[')
        .trim_end_matches(']');
    let port = authority.port_u16().unwrap_or(if tls { 443 } else { 80 });
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    let head = match proxy.filter(|_| !tls) {
        Some(p) => {
            let authorization = p
                .authorization
                .as_ref()
                .map_or(String::new(), |a| format!("Proxy-Authorization: {a}\r\n"));
            format!(
                "{method} http://{}{path} HTTP/1.1\r\nHost: {}\r\n{authorization}{common}",
                authority.as_str(),
                authority.as_str()
            )
        }
        None => format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\n{common}",
            authority.as_str()
        ),
    };
    Ok(Target {
        url: v.text.clone(),
        host: host.to_string(),
        port,
        tls,
        head: head.into_bytes(),
    })
}

/// `response-action(404 => retry, 418 => drop)`.
fn response_actions(opt: &Node, into: &mut Vec<(u16, Action)>) -> Result<(), ConfigError> {
    let words: Vec<&sluice_config::Value> = opt.values().collect();
    let example = "response-action(404 => retry, 418 => drop)";
    if words.is_empty() || words.len() % 3 != 0 {
        return Err(ConfigError::new(opt.pos, format!("write it as {example}")));
    }
    for w in words.chunks(3) {
        let status = w[0]
            .text
            .parse::<u16>()
            .ok()
            .filter(|s| (100..=599).contains(s))
            .ok_or_else(|| {
                ConfigError::new(w[0].pos, format!("'{}' is not an HTTP status", w[0].text))
            })?;
        if w[1].text != "=>" {
            return Err(ConfigError::new(w[1].pos, format!("write it as {example}")));
        }
        let action = Action::named(&w[2].text.to_ascii_lowercase()).ok_or_else(|| {
            ConfigError::unknown(w[2].pos, "response action", &w[2].text, "", Action::NAMES)
        })?;
        into.push((status, action));
    }
    Ok(())
}
