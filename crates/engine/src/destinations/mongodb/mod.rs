//! The declaration of `mongodb()`: syslog-ng's options — `uri()`, `collection()` as a
//! template, `value-pairs()` (what a document holds), `bulk()`, `bulk-unordered()`,
//! `bulk-bypass-validation()`, `write-concern()` — read into the documents' recipe. Its runtime
//! is [`wire`]: documents inserted a batch at a time with `insert_many` through the official
//! `mongodb` crate, a document the server refuses kept in `fallback-file()`.

mod wire;

use super::driver::{Built, DestinationContext, DestinationDriver, FormatOptions, Queue, Threaded};
use super::driver::{DATES, DISK_BUFFER, QUEUE, THREADED};
use super::fallback::Fallback;
use sluice_config::declared::{read, Declared, Options};
use sluice_config::{ConfigError, Node};
use sluice_model::Template;
use std::sync::Arc;
use wire::{MongoDestination, MongoOptions};

/// The declaration: the names it answers to, its options, a valid use, its build.
pub static DRIVER: DestinationDriver = DestinationDriver {
    names: &["mongodb"],
    about: "Documents in a MongoDB collection (or FerretDB's), inserted a batch at a time; a refused document kept with its reason.",
    options: &[DATES, QUEUE, DISK_BUFFER, THREADED, OPTIONS],
    sample: "mongodb(uri(\"mongodb://127.0.0.1:27017/syslog\") collection(\"messages\"))",
    build,
};

/// syslog-ng's default `uri()`.
const DEFAULT_URI: &str =
    "mongodb://127.0.0.1:27017/syslog?wtimeoutMS=60000&socketTimeoutMS=60000&connectTimeoutMS=60000";

/// The options of `mongodb()` itself.
const OPTIONS: &[Declared] = &[
    read("uri", "uri(\"mongodb://127.0.0.1:27017/syslog\")").about("the server and database, as MongoDB's drivers read a connection string; a password in it is never shown", "mongodb://127.0.0.1:27017/syslog"),
    read("collection", "collection(\"logs_${HOST}\")").about("the template of the collection a document goes to: letters, digits, `_`, `-` and `.`, else the message is refused and counted", "messages"),
    read("value_pairs", "value-pairs(scope(\"rfc5424\" \"nv-pairs\") exclude(\"R_*\"))").about("what a document holds: `scope()`, `key()`, `exclude()`, `pair()`, `rekey()`, as `$(format-json)` takes them", "scope(\"selected-macros\" \"nv-pairs\" \"sdata\")"),
    read("bulk", "bulk(no)").about("`no`: a document an insert", "yes: a batch an insert"),
    read("bulk_unordered", "bulk-unordered(yes)").about("accepted: a batch's documents are always inserted unordered, the server going on past a refused one (each document keeps its time-ordered `_id`)", "no"),
    read("bulk_bypass_validation", "bulk-bypass-validation(yes)").about("the collection's validation rules are not applied", "no"),
    read("write_concern", "write-concern(majority)").about("what the server confirms before an insert returns: `unacked`, `acked`, `majority` or a number of members", "acked"),
    read("fallback_file", "fallback-file(\"/var/log/sluice/refused-documents.jsonl\")").about("where documents the server refuses are kept, a JSON line each with the reason", "none: counted and said"),
];

/// `mongodb(uri("mongodb://db:27017/syslog") collection("messages"))`.
fn build(node: &Node, o: &mut Options, cx: &DestinationContext) -> Result<Built, ConfigError> {
    let format = FormatOptions::read_part(o, cx, DATES)?;
    let queue = Queue::read(o, cx.globals)?;
    let threaded = Threaded::read(o, cx)?;
    let uri = match o.last("uri") {
        Some(opt) => opt.value()?.text.clone(),
        None => DEFAULT_URI.to_string(),
    };
    let options = wire::parse_uri(&uri).map_err(|e| {
        let pos = o.last("uri").map_or(node.pos, |opt| opt.pos);
        ConfigError::new(pos, format!("uri(): {e}"))
    })?;
    let collection = match o.last("collection") {
        Some(opt) => {
            let v = opt.value()?;
            let mut t =
                Template::compile_in(&v.text, cx.names).map_err(|e| ConfigError::new(v.pos, e))?;
            if let Some(literal) = t.literal() {
                if !wire::valid_collection(literal) {
                    return Err(ConfigError::new(
                        v.pos,
                        format!("'{}' is not a collection name: letters, digits, '_', '-' and '.', not starting with 'system.'", v.text),
                    ));
                }
            }
            t.dates = format.dates.clone();
            t
        }
        None => {
            Template::compile_in("messages", cx.names).map_err(|e| ConfigError::new(node.pos, e))?
        }
    };
    let mut document = match o.last("value_pairs") {
        Some(opt) => {
            Template::format_json(&value_pairs(opt)?).map_err(|e| ConfigError::new(opt.pos, e))?
        }
        None => Template::format_json(&[
            "--scope".into(),
            "selected-macros".into(),
            "--scope".into(),
            "nv-pairs".into(),
            "--scope".into(),
            "sdata".into(),
        ])
        .map_err(|e| ConfigError::new(node.pos, e))?,
    };
    document.dates = format.dates.clone();
    let write_concern = match o.last("write_concern") {
        Some(opt) => {
            let v = opt.value()?;
            wire::write_concern(&v.text).ok_or_else(|| {
                ConfigError::new(
                    v.pos,
                    format!(
                        "'{}' is not a write concern: unacked, acked, majority or a number",
                        v.text
                    ),
                )
            })?
        }
        None => wire::write_concern("acked").expect("acked is one"),
    };
    let bulk = o.yes_no("bulk", true)?;
    // Accepted: inserts are unordered (wire.rs).
    let _ = o.yes_no("bulk_unordered", false)?;
    let bypass = o.yes_no("bulk_bypass_validation", false)?;
    let fallback = match o.last("fallback_file") {
        Some(opt) => Some(Arc::new(Fallback::new(opt.value()?.text.clone().into()))),
        None => None,
    };
    let shown = wire::shown_uri(&uri);
    let disk_buffer = queue.disk_buffer(o, || {
        format!(
            "{}-mongodb-{:08x}",
            cx.name,
            crc32fast::hash(shown.as_bytes())
        )
    })?;
    let mut pacing = threaded.pacing(&queue);
    if !bulk {
        // syslog-ng's bulk(no): a document an insert.
        pacing.batch.lines = 1;
    }
    let (component, id) = cx.counted_as(node);
    let counters = cx
        .stats
        .destination(&component, &id, &format!("mongodb,{shown}"));
    Ok(Arc::new(MongoDestination::new(
        collection,
        document,
        MongoOptions {
            label: cx.label(),
            options,
            shown,
            write_concern,
            bypass,
            fallback,
        },
        threaded.workers,
        pacing,
        disk_buffer,
        counters,
    )))
}

/// `value-pairs(scope("rfc5424") key("HOST") exclude("R_*") pair("n" "$X")
/// rekey("*" add-prefix("a.")))` as `$(format-json)`'s arguments.
fn value_pairs(node: &Node) -> Result<Vec<String>, ConfigError> {
    let mut args = Vec::new();
    for opt in node.options() {
        let key = opt.key();
        match key.as_str() {
            "scope" | "key" | "exclude" => {
                for v in opt.values() {
                    args.push(format!("--{key}"));
                    args.push(v.text.clone());
                }
            }
            "pair" => {
                let values: Vec<&sluice_config::Value> = opt.values().collect();
                match values.as_slice() {
                    [name, template] => {
                        args.push("--pair".into());
                        args.push(format!("{}={}", name.text, template.text));
                    }
                    [pair] if pair.text.contains('=') => {
                        args.push("--pair".into());
                        args.push(pair.text.clone());
                    }
                    _ => {
                        return Err(ConfigError::new(
                            opt.pos,
                            "pair() takes a name and a template: pair(\"host\" \"$HOST\")",
                        ))
                    }
                }
            }
            "rekey" => {
                let glob = opt.value()?;
                args.push("--rekey".into());
                args.push(glob.text.clone());
                for how in opt.options() {
                    match how.key().as_str() {
                        "shift" => {
                            args.push("--shift".into());
                            args.push(how.value()?.text.clone());
                        }
                        "add_prefix" => {
                            args.push("--add-prefix".into());
                            args.push(how.value()?.text.clone());
                        }
                        "replace_prefix" | "replace" => {
                            let v: Vec<&sluice_config::Value> = how.values().collect();
                            let [old, new] = v.as_slice() else {
                                return Err(ConfigError::new(
                                    how.pos,
                                    "replace-prefix() takes the old prefix and the new",
                                ));
                            };
                            args.push("--replace-prefix".into());
                            args.push(format!("{}={}", old.text, new.text));
                        }
                        other => {
                            return Err(ConfigError::unknown(
                                how.pos,
                                "rekey() option",
                                other,
                                "",
                                &["shift", "add-prefix", "replace-prefix"],
                            ))
                        }
                    }
                }
            }
            "omit_empty_values" => {
                if opt.bool()? {
                    args.push("--omit-empty-values".into());
                }
            }
            other => {
                return Err(ConfigError::unknown(
                    opt.pos,
                    "value-pairs() option",
                    other,
                    "",
                    &[
                        "scope",
                        "key",
                        "exclude",
                        "pair",
                        "rekey",
                        "omit-empty-values",
                    ],
                ))
            }
        }
    }
    Ok(args)
}
