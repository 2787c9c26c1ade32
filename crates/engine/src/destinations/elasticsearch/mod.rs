//! The declarations of `elasticsearch-http()` and `opensearch()`: syslog-ng's blocks of the same
//! names, which are `http()` to a cluster's `_bulk` endpoint. Each message is a document: an
//! action line naming its `index()` (and `type()`, `custom-id()`) and the `template()`, as
//! newline-delimited JSON; the answer says what became of each document
//! ([`crate::destinations::bulk`]).

pub mod bulk;

use super::driver::{Built, DestinationContext, DestinationDriver};
use super::driver::{DATES, DISK_BUFFER, EVERY_LATER, QUEUE, THREADED};
use super::http::{requests, Defaults, Kind, LATER as HTTP_LATER};
use sluice_config::declared::{read, Declared, Options};
use sluice_config::{ConfigError, Node};
use sluice_model::Template;

/// The declaration: the names it answers to, its options, a valid use, its build.
pub static DRIVER: DestinationDriver = DestinationDriver {
    names: &["elasticsearch_http", "opensearch"],
    about: "Documents into Elasticsearch or OpenSearch (`opensearch()`) through `_bulk`, each document's result read: refused ones dropped and counted, the rest retried.",
    options: &[
        DATES,
        QUEUE,
        DISK_BUFFER,
        THREADED,
        HTTP_OPTIONS,
        OPTIONS,
        HTTP_LATER,
        EVERY_LATER,
    ],
    sample: "elasticsearch-http(url(\"http://127.0.0.1:9200/_bulk\") index(\"logs\"))",
    build,
};

/// The options of `elasticsearch-http()` and `opensearch()` besides those of `http()`.
pub(super) const OPTIONS: &[Declared] = &[
    read("index", "index(\"logs-${YEAR}.${MONTH}.${DAY}\")").about(
        "the template of a document's index (`logs-${YEAR}.${MONTH}.${DAY}`)",
        "required",
    ),
    read("type", "type(\"\")").about(
        "the documents' `_type` (empty: none, as Elasticsearch 7 and OpenSearch want)",
        "none",
    ),
    read("custom_id", "custom-id(\"${HOST}-${SEQNUM}\")").about(
        "the template of a document's `_id` (the cluster makes one when empty)",
        "none",
    ),
    read("template", "template(\"$(format-json --scope rfc5424)\")").about(
        "the document of a message: a template statement's name or template text",
        "`$(format-json --scope rfc5424 --exclude DATE --key ISODATE @timestamp=${ISODATE})`",
    ),
];

/// The options of `http()` these drivers take; the method, the body and its framing are the
/// `_bulk` API's.
pub(super) const HTTP_OPTIONS: &[Declared] = &[
    read(
        "url",
        "url(\"http://127.0.0.1:9/_bulk\" \"https://127.0.0.1:9/_bulk\")",
    ).about("the URLs requests go to; `elasticsearch-http()`, `opensearch()`: the nodes' `_bulk` endpoints, failed over in turn", "required"),
    read("headers", "headers(\"X-A: b\")").about("header lines of each request", "none"),
    read("user", "user(\"u\") password(\"p\")").about("basic authentication's user", "none"),
    read("password", "password(\"p\") user(\"u\")").about("basic authentication's password", "none"),
    read("user_agent", "user-agent(\"sluice\")").about("the User-Agent header", "sluice"),
    read("timeout", "timeout(10)").about("seconds a node may take to answer", "10"),
    read("response_action", "response-action(404 => retry)").about("what a status code means (`404 => drop`, `503 => retry`)", "2xx taken, 5xx later, 4xx dropped"),
    read("tls", "tls(peer-verify(no))").about("TLS: `key-file()`, `cert-file()`, `ca-file()`, `ca-dir()`, `peer-verify()`…", "none"),
    read("content_compression", "content-compression(\"gzip\")").about("request bodies compressed with `gzip` or `deflate` (`identity`: as they are)", "identity"),
    read("accept_encoding", "accept-encoding(\"gzip\")").about("the compressions answers may come in (`gzip`, `deflate`, `identity`, `all`), read when they do", "none asked"),
    read("proxy", "proxy(\"http://proxy.example:3128\")").about("an HTTP proxy, `http://[user:password@]host:port`; `https://` URLs go through a tunnel it opens (`CONNECT`)", "none"),
    read("accept_redirects", "accept-redirects(no)").about("`no` only: sluice does not follow a redirect (a 3xx answer is sent again later, as a 5xx)", "no"),
];

/// A document unless `template()` says otherwise: syslog-ng's.
const DEFAULT_TEMPLATE: &str =
    "$(format-json --scope rfc5424 --exclude DATE --key ISODATE @timestamp=${ISODATE})";

/// `elasticsearch-http(url("http://10.0.0.1:9200/_bulk") index("logs-${YEAR}.${MONTH}.${DAY}"))`
/// and `opensearch(…)`.
pub(super) fn build(
    node: &Node,
    o: &mut Options,
    cx: &DestinationContext,
) -> Result<Built, ConfigError> {
    let opensearch = node.key() == "opensearch";
    let (driver, example) = if opensearch {
        (
            "opensearch",
            "opensearch(url(\"http://10.0.0.1:9200/_bulk\") index(\"logs\"))",
        )
    } else {
        (
            "elasticsearch-http",
            "elasticsearch-http(url(\"http://10.0.0.1:9200/_bulk\") index(\"logs\") type(\"\"))",
        )
    };
    let text = |o: &mut Options, name| o.last(name).map(Node::string).transpose();
    let index = text(o, "index")?.filter(|i| !i.is_empty()).ok_or_else(|| {
        ConfigError::new(node.pos, format!("{driver}() needs index(): {example}"))
    })?;
    let pairs = [
        ("index._index", index),
        ("index._type", text(o, "type")?.unwrap_or_default()),
        ("index._id", text(o, "custom_id")?.unwrap_or_default()),
    ];
    let (template, at) = match o.last("template") {
        Some(opt) => {
            let v = opt.value()?;
            (v.text.clone(), v.pos)
        }
        None => (DEFAULT_TEMPLATE.to_string(), node.pos),
    };
    // The action line as syslog-ng's block writes it; empty values are left out.
    let mut action = String::from("$(format-json --scope none --omit-empty-values");
    for (name, value) in pairs {
        if value.contains(['"', '\\']) {
            return Err(ConfigError::new(
                node.pos,
                format!("{name} cannot hold '\"' or '\\': '{value}'"),
            ));
        }
        action.push_str(&format!(" {name}=\"{value}\""));
    }
    action.push(')');
    let body = Template::compile_in(&format!("{action}\n{template}"), cx.names)
        .map_err(|e| ConfigError::new(at, e))?;
    let kind = Kind {
        driver,
        example,
        method: "POST",
        headers: &[("Content-Type", "application/x-ndjson")],
        body,
        body_prefix: String::new(),
        body_suffix: "\n".into(),
        delimiter: "\n".into(),
        bulk: true,
        defaults: Defaults {
            workers: Some(4),
            batch_lines: Some(100),
            timeout: Some(10),
        },
    };
    requests(node, o, cx, kind)
}
