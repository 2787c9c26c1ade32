//! `mongodb()` at run time: each message becomes a document — `value-pairs()`' JSON made a
//! BSON document with an `_id` of its own, and its collection's name, formatted where the
//! message is routed — and a sender inserts a batch's documents with `insert_many`, a call a
//! collection, through the official `mongodb` crate driven by a runtime of the sender's
//! thread.
//!
//! Each document's `_id` is given when it is formatted: a batch sent again after a broken
//! connection is answered "duplicate key" for the documents the server had already taken, and
//! those count as stored — each document is stored once. A batch's documents are inserted
//! unordered (the server goes on past a refused one); when the server refused some, the batch
//! is inserted again a document at a time, so that a document the server refuses for itself
//! (a validation rule, a duplicate of a key of the user's) costs that document alone: it is
//! counted as refused, said once a collection and kept in `fallback-file()` with the server's
//! words.

use crate::destinations::delivery::{Delivered, Delivers, Delivery, Lanes};
use crate::destinations::diskq::DiskBufferOptions;
use crate::destinations::fallback::Fallback;
use crate::destinations::format::{Format, Formatter};
use crate::destinations::link::{block_on_giving_up, Connected, Failure, GiveUp, Position, Wire};
use crate::destinations::queue::Batch;
use crate::destinations::sender::{Pacing, Servers};
use crate::own_log;
use crate::stats::DestCounters;
use mongodb::bson::{self, oid::ObjectId, Document, RawDocumentBuf};
use mongodb::error::ErrorKind;
use mongodb::options::{Acknowledgment, ClientOptions, WriteConcern};
use sluice_model::{LogMessage, Template};
use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::Arc;

/// The server's code for a duplicate key.
const DUPLICATE_KEY: i32 = 11000;

/// A runtime for one sender's client.
fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
}

/// `uri()` read as MongoDB's drivers read it (on a thread of its own: a reload reads the
/// configuration within sluice's runtime, where another cannot block).
pub fn parse_uri(uri: &str) -> Result<ClientOptions, String> {
    let uri = uri.to_string();
    std::thread::spawn(move || {
        let runtime = runtime().map_err(|e| e.to_string())?;
        runtime
            .block_on(async { ClientOptions::parse(uri).await })
            .map_err(|e| e.to_string())
    })
    .join()
    .map_err(|_| "reading the URI failed".to_string())?
}

/// `uri()` as messages and counters show it: its password written `*****`.
pub fn shown_uri(uri: &str) -> String {
    let Some(scheme_end) = uri.find("://") else {
        return uri.to_string();
    };
    let rest = &uri[scheme_end + 3..];
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    match (authority.rfind('@'), authority.find(':')) {
        (Some(at), Some(colon)) if colon < at => format!(
            "{}{}:*****{}",
            &uri[..scheme_end + 3],
            &authority[..colon],
            &uri[scheme_end + 3 + at..]
        ),
        _ => uri.to_string(),
    }
}

/// `write-concern()`: `unacked`, `acked` (the server's default: none sent), `majority` or a
/// number of members.
pub fn write_concern(text: &str) -> Option<Option<WriteConcern>> {
    let w = match text {
        "unacked" => Acknowledgment::Nodes(0),
        "acked" => return Some(None),
        "majority" => Acknowledgment::Majority,
        n => Acknowledgment::Nodes(n.parse().ok()?),
    };
    Some(Some(WriteConcern::builder().w(w).build()))
}

/// A collection name a message may name: 1 to 120 letters, digits, `_`, `-` and `.`, not a
/// system collection.
pub fn valid_collection(name: &[u8]) -> bool {
    (1..=120).contains(&name.len())
        && !name.starts_with(b"system.")
        && name
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

/// Where documents go and how they are inserted.
pub struct MongoOptions {
    pub label: String,
    pub options: ClientOptions,
    /// `uri()` without its password.
    pub shown: String,
    /// `write-concern()`, when it is not the server's default (`acked`).
    pub write_concern: Option<WriteConcern>,
    pub bypass: bool,
    pub fallback: Option<Arc<Fallback>>,
}

pub struct MongoDestination {
    collection: Formatter,
    document: Formatter,
    delivery: Delivery,
}

impl MongoDestination {
    pub(super) fn new(
        collection: Template,
        document: Template,
        opts: MongoOptions,
        workers: usize,
        pacing: Pacing,
        disk_buffer: Option<(DiskBufferOptions, String)>,
        counters: DestCounters,
    ) -> Delivered<MongoDestination> {
        let delivery = Delivery::new(
            opts.label.clone().into(),
            Arc::new(opts),
            pacing,
            counters,
            disk_buffer,
            workers,
        );
        Delivered(MongoDestination {
            collection: Formatter::new(Format::Template(collection), false),
            document: Formatter::new(Format::Template(document), false),
            delivery,
        })
    }
}

/// A document of a batch: its collection's length (4 bytes, little-endian) and name, then the
/// document's BSON.
impl Delivers for MongoDestination {
    fn delivery(&self) -> &Delivery {
        &self.delivery
    }

    fn sized_by(&self) -> &Formatter {
        &self.document
    }

    fn numbers_local(&self) -> bool {
        self.collection.numbers_local() || self.document.numbers_local()
    }

    fn format(&self, msgs: &[LogMessage], which: &[u32], lanes: &mut Lanes) {
        let mut json = Vec::new();
        for &i in which {
            let msg = &msgs[i as usize];
            json.clear();
            self.document.append(msg, &mut json);
            let batch = lanes.batch_for(msg);
            let out = &mut batch.data;
            let start = out.len();
            out.extend_from_slice(&[0; 4]);
            self.collection.append(msg, out);
            let len = (out.len() - start - 4) as u32;
            out[start..start + 4].copy_from_slice(&len.to_le_bytes());
            document(&json)
                .to_writer(&mut *out)
                .expect("a document writes to memory");
            batch.end_message();
        }
    }
}

/// The document `value-pairs()` wrote as JSON, with an `_id` of its own first unless it names
/// one.
fn document(json: &[u8]) -> Document {
    let mut doc = Document::new();
    let fields: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(json).unwrap_or_default();
    if !fields.contains_key("_id") {
        doc.insert("_id", ObjectId::new());
    }
    for (name, value) in fields {
        // A JSON value is always a BSON one.
        if let Ok(value) = bson::to_bson(&value) {
            doc.insert(name, value);
        }
    }
    doc
}

/// A row of a batch: its collection and its document's bytes.
fn split(row: &[u8]) -> (&[u8], &[u8]) {
    let len = u32::from_le_bytes(row[..4].try_into().expect("four bytes")) as usize;
    let len = len.min(row.len() - 4);
    (&row[4..4 + len], &row[4 + len..])
}

impl Servers for MongoOptions {
    fn count(&self) -> usize {
        1
    }

    fn name(&self, _: usize) -> String {
        format!("mongodb,{}", self.shown)
    }

    fn open(&self, _: usize) -> std::io::Result<Connected> {
        let runtime = runtime()?;
        // The client spawns its monitors on the runtime it is made in: this sender's.
        let client = {
            let _in = runtime.enter();
            mongodb::Client::with_options(self.options.clone())
                .map_err(|e| std::io::Error::other(e.to_string()))?
        };
        let database =
            client.database(self.options.default_database.as_deref().unwrap_or("syslog"));
        Ok(Box::new(MongoWire {
            runtime,
            client: Some((client, database)),
            write_concern: self.write_concern.clone(),
            bypass: self.bypass,
            fallback: self.fallback.clone(),
            said: HashSet::new(),
            label: self.label.clone(),
        }))
    }

    fn probe(&self, _: usize) -> bool {
        true
    }
}

struct MongoWire {
    runtime: tokio::runtime::Runtime,
    /// The client and its database; dropped in the runtime, where the client's drop spawns.
    client: Option<(mongodb::Client, mongodb::Database)>,
    write_concern: Option<WriteConcern>,
    bypass: bool,
    fallback: Option<Arc<Fallback>>,
    /// Collections whose refusals were said (once each).
    said: HashSet<Vec<u8>>,
    label: String,
}

impl MongoWire {
    /// Runs `work`; given up on once sluice has been stopping for the grace.
    fn wait<T>(
        &self,
        work: impl Future<Output = mongodb::error::Result<T>>,
        give_up: GiveUp,
    ) -> Result<mongodb::error::Result<T>, Failure> {
        block_on_giving_up(&self.runtime, work, give_up).map_err(Failure::Broken)
    }

    /// Inserts `docs` into `collection` with one `insert_many`; where the server refused
    /// some, each again alone (servers do not all name the refused ones reliably: FerretDB
    /// 1.24 repeats and shifts them). Returns the refused ones, by index, with the server's
    /// words.
    fn insert(
        &self,
        collection: &str,
        docs: &[&[u8]],
        give_up: GiveUp,
    ) -> Result<Vec<(usize, String)>, Failure> {
        let (_, database) = self.client.as_ref().expect("dropped only at the end");
        let coll = database.collection::<RawDocumentBuf>(collection);
        let raw: Vec<RawDocumentBuf> = docs
            .iter()
            .filter_map(|d| RawDocumentBuf::from_bytes(d.to_vec()).ok())
            .collect();
        let answer = self.wait(
            async {
                let mut insert = coll.insert_many(raw).ordered(false);
                if self.bypass {
                    insert = insert.bypass_document_validation(true);
                }
                if let Some(w) = &self.write_concern {
                    insert = insert.write_concern(w.clone());
                }
                insert.await
            },
            give_up,
        )?;
        let error = match answer {
            Ok(_) => return Ok(Vec::new()),
            Err(e) => e,
        };
        match error.kind.as_ref() {
            ErrorKind::InsertMany(many)
                if many.write_concern_error.is_none() && many.write_errors.is_some() => {}
            // Broken, or written and not confirmed: sent again, its duplicates are what was
            // stored.
            _ => return Err(Failure::Broken(std::io::Error::other(error.to_string()))),
        }
        let mut refused = Vec::new();
        for (i, doc) in docs.iter().enumerate() {
            let Ok(raw) = RawDocumentBuf::from_bytes(doc.to_vec()) else {
                refused.push((i, "not a BSON document".to_string()));
                continue;
            };
            let answer = self.wait(
                async {
                    let mut insert = coll.insert_one(raw);
                    if self.bypass {
                        insert = insert.bypass_document_validation(true);
                    }
                    if let Some(w) = &self.write_concern {
                        insert = insert.write_concern(w.clone());
                    }
                    insert.await
                },
                give_up,
            )?;
            let Err(error) = answer else { continue };
            match error.kind.as_ref() {
                ErrorKind::Write(mongodb::error::WriteFailure::WriteError(e)) => {
                    // A duplicate of itself: stored by the call before.
                    if !(e.code == DUPLICATE_KEY && self.stored(&coll, doc, give_up)?) {
                        refused.push((i, e.message.clone()));
                    }
                }
                _ => return Err(Failure::Broken(std::io::Error::other(error.to_string()))),
            }
        }
        Ok(refused)
    }

    /// Whether `doc` is in `coll` as it is: its `_id` is one sluice gave (no one else has
    /// it), or the document of its `_id` holds the same.
    fn stored(
        &self,
        coll: &mongodb::Collection<RawDocumentBuf>,
        doc: &[u8],
        give_up: GiveUp,
    ) -> Result<bool, Failure> {
        if own_id(doc) {
            return Ok(true);
        }
        let Ok(mine) = Document::from_reader(doc) else {
            return Ok(false);
        };
        let Some(id) = mine.get("_id").cloned() else {
            return Ok(false);
        };
        let found = self
            .wait(
                async {
                    coll.clone_with_type::<Document>()
                        .find_one(bson::doc! { "_id": id })
                        .await
                },
                give_up,
            )?
            .map_err(|e| Failure::Broken(std::io::Error::other(e.to_string())))?;
        Ok(found.is_some_and(|theirs| {
            theirs.len() == mine.len() && mine.iter().all(|(k, v)| theirs.get(k) == Some(v))
        }))
    }

    /// Says once a collection why a document was refused, and keeps it in the fallback.
    fn refuse(&mut self, collection: &[u8], doc: &[u8], why: &str) {
        let name = String::from_utf8_lossy(collection);
        if self.said.len() < 1000 && self.said.insert(collection.to_vec()) {
            let kept = match &self.fallback {
                Some(f) => format!("kept in {}", f.path().display()),
                None => "counted as dropped".to_string(),
            };
            own_log::error(format!(
                "{}: a document for collection '{name}' refused ({why}); {kept}, the others are stored",
                self.label
            ));
        }
        let Some(fallback) = &self.fallback else {
            return;
        };
        let document = bson::Document::from_reader(doc)
            .map(|d| bson::Bson::Document(d).into_relaxed_extjson())
            .unwrap_or(serde_json::Value::Null);
        let line = serde_json::json!({
            "time": jiff::Timestamp::now().to_string(),
            "destination": self.label,
            "collection": name,
            "reason": why,
            "document": document,
        });
        let mut text = line.to_string().into_bytes();
        text.push(b'\n');
        if let Err(e) = fallback.append(&text) {
            own_log::error(format!(
                "{}: cannot keep a refused document in {}: {e}; it is counted as dropped",
                self.label,
                fallback.path().display()
            ));
        }
    }

    /// Inserts the documents from `pos`, a call a collection.
    fn write(
        &mut self,
        batches: &[Batch],
        pos: &mut Position,
        give_up: GiveUp,
    ) -> Result<(), Failure> {
        let rows = pos.messages_on(batches);
        let mut refused = 0;
        let mut collections: Vec<(&[u8], Vec<&[u8]>)> = Vec::new();
        let mut which: HashMap<&[u8], usize> = HashMap::new();
        for row in &rows {
            let (collection, doc) = split(row);
            if !valid_collection(collection) {
                let why = format!(
                    "'{}' is not a collection name: letters, digits, '_', '-' and '.', not starting with 'system.'",
                    String::from_utf8_lossy(collection)
                );
                self.refuse(collection, doc, &why);
                refused += 1;
                continue;
            }
            let i = *which.entry(collection).or_insert_with(|| {
                collections.push((collection, Vec::new()));
                collections.len() - 1
            });
            collections[i].1.push(doc);
        }
        for (collection, docs) in &collections {
            let name = std::str::from_utf8(collection).expect("checked: ASCII");
            for (i, why) in self.insert(name, docs, give_up)? {
                self.refuse(collection, docs[i], &why);
                refused += 1;
            }
        }
        pos.skip_messages(batches, rows.len());
        pos.refused += refused;
        Ok(())
    }
}

/// Whether `doc`'s `_id` is an ObjectId, as sluice gives one.
fn own_id(doc: &[u8]) -> bool {
    bson::RawDocument::from_bytes(doc)
        .ok()
        .and_then(|d| d.get("_id").ok().flatten())
        .is_some_and(|id| id.as_object_id().is_some())
}

impl Drop for MongoWire {
    fn drop(&mut self) {
        let _in = self.runtime.enter();
        drop(self.client.take());
    }
}

impl Wire for MongoWire {
    fn send(
        &mut self,
        batches: &[Batch],
        pos: &mut Position,
        give_up: GiveUp,
    ) -> Result<(), Failure> {
        self.write(batches, pos, give_up)
    }

    fn closed(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_not_shown_and_names_are_checked() {
        assert_eq!(
            shown_uri("mongodb://user:s3cret@db:27017/syslog?w=1"),
            "mongodb://user:*****@db:27017/syslog?w=1"
        );
        assert_eq!(shown_uri("mongodb://db/syslog"), "mongodb://db/syslog");
        assert!(valid_collection(b"logs_host-1.x"));
        assert!(!valid_collection(b"system.users"));
        assert!(!valid_collection(b"a$b"));
        assert!(!valid_collection(b""));
    }

    #[test]
    fn documents_get_an_id_of_their_own() {
        let doc = document(br#"{"HOST":"h","n":"1"}"#);
        assert!(doc.get_object_id("_id").is_ok());
        assert_eq!(doc.get_str("HOST").unwrap(), "h");
        let doc = document(br#"{"_id":"mine"}"#);
        assert_eq!(doc.get_str("_id").unwrap(), "mine");
    }
}
