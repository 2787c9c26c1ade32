//! `sql()` the source at run time. A thread of the source's own connects to the database
//! (again every `time-reopen()` while it cannot) and reads the table in its position column's
//! order, `fetch-limit()` rows a query after the last position read, waiting
//! `fetch-interval()` once a query found none; each row becomes a JSON object of its columns
//! (text, NULL as null), and the batches go to the source's task, which parses them
//! (`format(json)`) and dispatches them. A full window stops the task, a full channel the
//! thread: the table is read no faster than destinations write.
//!
//! Position: each batch's acknowledgement comes back when every destination wrote its
//! messages, and the position column's value of its last row is then kept in the persist file
//! (`sql:` and the table's place), in order, as a file's position is. A restart reads on after
//! that row: nothing is lost or read twice; `kill -9` repeats at most the batches in flight.
//! Rows inserted later with a position below the one kept are not read — the column must only
//! grow.

use crate::own_log as log;
use crate::persist::{self, Found};
use crate::sources::{Context, Local, Retire};
use crate::sql::{Kind, Server};

use crate::window::Delivered;
use sluice_model::{Ingest, LogMessage, Origin, Today, UnixTime};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, watch};

/// The kind of place an `sql()` source reads.
pub const KIND: &str = "sql";

#[derive(Debug)]
pub struct SqlSource {
    pub local: Local,
    pub kind: Kind,
    pub server: Server,
    pub database: String,
    pub table: String,
    /// `columns()`; all of the table's when not given.
    pub columns: Option<Vec<String>>,
    /// `position-column()`.
    pub position: String,
    pub fetch_limit: usize,
    pub fetch_interval: Duration,
    pub session: Vec<String>,
    pub time_reopen: Duration,
}

impl crate::sources::Source for SqlSource {
    fn source_name(&self) -> &Arc<str> {
        &self.local.source_name
    }

    fn place(&self) -> crate::sources::Place {
        crate::sources::Place {
            kind: KIND,
            address: self.key(),
        }
    }

    /// Connects later, in its thread: a database that is down delays the rows, not the start.
    fn bind(
        self: Arc<Self>,
        _: Option<crate::sources::Held>,
    ) -> std::io::Result<Box<dyn crate::sources::Ready>> {
        Ok(Box::new(Ready { source: self }))
    }

    fn reader(&self) -> Option<&crate::sources::ReaderSpec> {
        Some(&self.local.reader)
    }

    fn descriptors(&self) -> usize {
        // The connection (or the database file and its journal), the runtime's.
        4
    }

    /// Two readers of one table would each keep a position under one name.
    fn one_per_configuration(&self) -> bool {
        true
    }
}

struct Ready {
    source: Arc<SqlSource>,
}

impl crate::sources::Ready for Ready {
    fn run(
        self: Box<Self>,
        ctx: Context,
        retire: watch::Receiver<Retire>,
    ) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        Box::pin(async move {
            let (reading, watcher) = crate::sources::until_retired(&ctx, retire);
            self.source.clone().serve(&reading).await;
            watcher.abort();
        })
    }
}

/// Rows read together: each a JSON object, one after another.
struct Batch {
    records: Vec<u8>,
    /// Where each record ends in `records`.
    ends: Vec<usize>,
    /// The position column's value of the last row.
    position: String,
}

impl crate::sources::ThreadBatch for Batch {
    type Place = String;

    fn len(&self) -> usize {
        self.ends.len()
    }

    fn messages<'a>(
        &'a self,
        _: &crate::sources::ReaderSpec,
        ingest: &Ingest,
        origin: &'a Origin,
        recvd: UnixTime,
        msgs: &mut Vec<LogMessage<'a>>,
    ) {
        let today = Today::of(recvd);
        msgs.reserve(self.ends.len());
        let mut start = 0;
        for &end in &self.ends {
            ingest.push_message(&self.records[start..end], origin, recvd, today, msgs);
            start = end;
        }
    }

    fn place(&self) -> String {
        self.position.clone()
    }
}

/// A row: its columns' names and values as text (NULL: none), and its position's value.
type Rows = Vec<(Vec<Option<String>>, String)>;

impl SqlSource {
    /// The name its position is kept under: the database and table, not the user.
    fn key(&self) -> String {
        format!(
            "sql:{},{}.{}",
            self.server.name(self.kind, &self.database),
            self.table,
            self.position
        )
    }

    fn label(&self) -> String {
        format!("source {}: sql()", self.local.source_name)
    }

    /// Reads the table until `ctx` stops; then waits for what was read to be delivered and
    /// keeps the last position. A reload's new reader waits for the old one.
    async fn serve(self: Arc<Self>, ctx: &Context) {
        let key = self.key();
        let turn = crate::sources::turn(&key);
        let _turn = turn.lock().await;
        let after = match persist::find_cursor(&key) {
            Found::At(position) => Some(position),
            Found::New | Found::Unknown => None,
        };
        let (batches_tx, mut batches) = mpsc::channel::<Batch>(1);
        let reader = self.clone();
        let most = self
            .fetch_limit
            .min((self.local.reader.window as usize / 2).max(1));
        let thread = std::thread::Builder::new()
            .name("sql source".into())
            .spawn(move || reader.read(after, most, &batches_tx));
        if let Err(e) = thread {
            log::error(format!("{}: {e}", self.label()));
            return;
        }
        let (kept_tx, kept_rx) = mpsc::unbounded_channel();
        let keeper = tokio::spawn(keep_positions(key, kept_rx));
        let window = self.local.reader.window();
        crate::sources::dispatch_batches(
            ctx,
            &self.local,
            "sql()",
            &window,
            &mut batches,
            &kept_tx,
            crate::sources::Workers::ONE,
        )
        .await;
        // The thread ends at its next query or wait.
        drop(batches);
        drop(kept_tx);
        ctx.keep_last(&window, keeper).await;
    }

    /// Connects, reads and sends batches of at most `most` rows after `after`, until
    /// `batches` closes; a failed connection or query is said and tried again after
    /// `time-reopen()`.
    fn read(&self, mut after: Option<String>, most: usize, batches: &mpsc::Sender<Batch>) {
        let label = self.label();
        let mut said = None::<String>;
        while !batches.is_closed() {
            let mut table = match Table::open(self, most) {
                Ok(t) => t,
                Err(e) => {
                    if said.as_deref() != Some(e.as_str()) {
                        log::error(format!(
                            "{label}: cannot read {}: {e}; trying every {:?}",
                            self.key(),
                            self.time_reopen
                        ));
                        said = Some(e);
                    }
                    pause(self.time_reopen, batches);
                    continue;
                }
            };
            loop {
                let rows = match table.fetch(after.as_deref()) {
                    Ok(rows) => rows,
                    Err(e) => {
                        if said.as_deref() != Some(e.as_str()) {
                            log::error(format!(
                                "{label}: reading {}: {e}; trying again",
                                self.table
                            ));
                            said = Some(e);
                        }
                        pause(self.time_reopen, batches);
                        break;
                    }
                };
                said = None;
                if rows.is_empty() {
                    if !pause(self.fetch_interval, batches) {
                        return;
                    }
                    continue;
                }
                let batch = table.batch(rows);
                after = Some(batch.position.clone());
                if batches.blocking_send(batch).is_err() {
                    return;
                }
            }
        }
    }
}

/// Waits `how_long`, or less once `batches` closes; whether it is still open.
fn pause(how_long: Duration, batches: &mpsc::Sender<Batch>) -> bool {
    let step = Duration::from_millis(100);
    let mut waited = Duration::ZERO;
    while waited < how_long {
        if batches.is_closed() {
            return false;
        }
        std::thread::sleep(step);
        waited += step;
    }
    !batches.is_closed()
}

/// A connection to the database, and the queries that read the table.
struct Table {
    db: Connection,
    /// The columns a message is made of.
    columns: Vec<String>,
    /// Rows after a position, then the first rows (no position yet).
    after: String,
    first: String,
}

enum Connection {
    Pg(tokio::runtime::Runtime, tokio_postgres::Client),
    My(tokio::runtime::Runtime, mysql_async::Conn),
    Lite(rusqlite::Connection),
}

/// `name` quoted as an identifier: `"name"` (PostgreSQL, SQLite), `` `name` `` (MariaDB).
fn quoted(name: &str, kind: Kind) -> String {
    let q = if kind == Kind::Mysql { '`' } else { '"' };
    let mut out = String::with_capacity(name.len() + 2);
    out.push(q);
    for c in name.chars() {
        if c == q {
            out.push(q);
        }
        out.push(c);
    }
    out.push(q);
    out
}

impl Table {
    /// Connects, finds the table's columns when `columns()` did not name them, and makes the
    /// queries.
    fn open(source: &SqlSource, most: usize) -> Result<Table, String> {
        let kind = source.kind;
        let table: Vec<String> = source.table.split('.').map(|p| quoted(p, kind)).collect();
        let table = table.join(".");
        let position = quoted(&source.position, kind);
        let (mut db, found) = match kind {
            Kind::Pgsql => {
                let rt = crate::sql::runtime().map_err(|e| e.to_string())?;
                let client = crate::sql::pg_connect(
                    &rt,
                    &source.server,
                    &source.database,
                    &source.session,
                    &source.label(),
                )
                .map_err(|e| e.to_string())?;
                let probe = format!("SELECT * FROM {table} WHERE false");
                let found = rt
                    .block_on(client.prepare(&probe))
                    .map_err(|e| crate::sql::pg_said(&e))?;
                let names = found
                    .columns()
                    .iter()
                    .map(|c| c.name().to_string())
                    .collect();
                (Connection::Pg(rt, client), names)
            }
            Kind::Mysql => {
                use mysql_async::prelude::Queryable;
                let rt = crate::sql::runtime().map_err(|e| e.to_string())?;
                let mut conn = crate::sql::mysql_connect(
                    &rt,
                    &source.server,
                    &source.database,
                    &source.session,
                )
                .map_err(|e| e.to_string())?;
                let name = source
                    .table
                    .rsplit('.')
                    .next()
                    .unwrap_or_default()
                    .to_string();
                let found: Vec<String> = rt
                    .block_on(conn.exec(
                        "SELECT COLUMN_NAME FROM information_schema.COLUMNS \
                         WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION",
                        (name,),
                    ))
                    .map_err(|e| crate::sql::mysql_said(&e))?;
                (Connection::My(rt, conn), found)
            }
            Kind::Sqlite => {
                let conn = rusqlite::Connection::open_with_flags(
                    &source.database,
                    rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
                )
                .map_err(|e| format!("{}: {e}", source.database))?;
                let _ = conn.busy_timeout(Duration::from_secs(5));
                for statement in &source.session {
                    conn.execute_batch(statement).map_err(|e| e.to_string())?;
                }
                let found = {
                    let s = conn
                        .prepare(&format!("SELECT * FROM {table} WHERE 0"))
                        .map_err(|e| e.to_string())?;
                    s.column_names().map(|c| c.to_string()).collect()
                };
                (Connection::Lite(conn), found)
            }
        };
        if found.is_empty() {
            return Err(format!(
                "the table {} has no columns, or is not there",
                source.table
            ));
        }
        let columns = source.columns.clone().unwrap_or(found);
        // Each column as text, the position's last: its value where reading got to.
        let as_text = |c: &str| match kind {
            Kind::Pgsql => format!("{}::text", quoted(c, kind)),
            _ => quoted(c, kind),
        };
        let mut selected: Vec<String> = columns.iter().map(|c| as_text(c)).collect();
        selected.push(as_text(&source.position));
        let selected = selected.join(", ");
        // The table's column, not the text of it selected under its name.
        let order = format!("{table}.{position}");
        let first = format!("SELECT {selected} FROM {table} ORDER BY {order} LIMIT {most}");
        let bound = match &mut db {
            Connection::Pg(rt, client) => {
                // The position's value is sent as text, made the column's type by the server.
                let probe = format!("SELECT {position} FROM {table} WHERE false");
                let found = rt
                    .block_on(client.prepare(&probe))
                    .map_err(|e| crate::sql::pg_said(&e))?;
                let kind_of = found.columns()[0].type_().name().to_string();
                format!("CAST($1::text AS {})", quoted(&kind_of, Kind::Pgsql))
            }
            Connection::My(..) | Connection::Lite(_) => "?".to_string(),
        };
        let after = format!(
            "SELECT {selected} FROM {table} WHERE {order} > {bound} ORDER BY {order} LIMIT {most}"
        );
        Ok(Table {
            db,
            columns,
            after,
            first,
        })
    }

    /// The rows after `after` (from the first without it), each with its position.
    fn fetch(&mut self, after: Option<&str>) -> Result<Rows, String> {
        let query = if after.is_some() {
            &self.after
        } else {
            &self.first
        };
        let width = self.columns.len() + 1;
        let mut rows: Rows = Vec::new();
        let mut push = |mut values: Vec<Option<String>>| {
            let position = values.pop().flatten().unwrap_or_default();
            rows.push((values, position));
        };
        match &mut self.db {
            Connection::Pg(rt, client) => {
                let found = match after {
                    Some(a) => rt.block_on(client.query(query.as_str(), &[&a])),
                    None => rt.block_on(client.query(query.as_str(), &[])),
                }
                .map_err(|e| crate::sql::pg_said(&e))?;
                for row in found {
                    push(
                        (0..width)
                            .map(|i| row.get::<_, Option<String>>(i))
                            .collect(),
                    );
                }
            }
            Connection::My(rt, conn) => {
                use mysql_async::prelude::Queryable;
                let found: Vec<mysql_async::Row> = match after {
                    Some(a) => rt.block_on(conn.exec(query.as_str(), (a,))),
                    None => rt.block_on(conn.exec(query.as_str(), ())),
                }
                .map_err(|e| crate::sql::mysql_said(&e))?;
                for row in found {
                    push(row.unwrap().into_iter().map(mysql_text).collect());
                }
            }
            Connection::Lite(conn) => {
                let mut s = conn.prepare_cached(query).map_err(|e| e.to_string())?;
                let mut found = match after {
                    Some(a) => s.query([a]),
                    None => s.query([]),
                }
                .map_err(|e| e.to_string())?;
                while let Some(row) = found.next().map_err(|e| e.to_string())? {
                    push(
                        (0..width)
                            .map(|i| row.get_ref(i).ok().and_then(sqlite_text))
                            .collect(),
                    );
                }
            }
        }
        Ok(rows)
    }

    /// The rows as a batch of JSON objects.
    fn batch(&self, rows: Rows) -> Batch {
        let mut batch = Batch {
            records: Vec::with_capacity(rows.len() * 256),
            ends: Vec::with_capacity(rows.len()),
            position: String::new(),
        };
        for (values, position) in rows {
            let mut record = serde_json::Map::with_capacity(values.len());
            for (column, value) in self.columns.iter().zip(values) {
                record.insert(
                    column.clone(),
                    value.map_or(serde_json::Value::Null, serde_json::Value::String),
                );
            }
            // A map of strings is always written.
            let _ = serde_json::to_writer(&mut batch.records, &record);
            batch.ends.push(batch.records.len());
            batch.position = position;
        }
        batch
    }
}

/// A MariaDB value as text: numbers as written, dates as `YYYY-MM-DD HH:MM:SS[.ffffff]`.
fn mysql_text(v: mysql_async::Value) -> Option<String> {
    use mysql_async::Value::*;
    Some(match v {
        NULL => return None,
        Bytes(b) => String::from_utf8_lossy(&b).into_owned(),
        Int(i) => i.to_string(),
        UInt(u) => u.to_string(),
        Float(f) => f.to_string(),
        Double(d) => d.to_string(),
        Date(y, mo, d, h, mi, s, 0) => format!("{y:04}-{mo:02}-{d:02} {h:02}:{mi:02}:{s:02}"),
        Date(y, mo, d, h, mi, s, us) => {
            format!("{y:04}-{mo:02}-{d:02} {h:02}:{mi:02}:{s:02}.{us:06}")
        }
        Time(negative, days, h, mi, s, us) => {
            let sign = if negative { "-" } else { "" };
            let hours = days * 24 + u32::from(h);
            match us {
                0 => format!("{sign}{hours:02}:{mi:02}:{s:02}"),
                us => format!("{sign}{hours:02}:{mi:02}:{s:02}.{us:06}"),
            }
        }
    })
}

/// A SQLite value as text.
fn sqlite_text(v: rusqlite::types::ValueRef<'_>) -> Option<String> {
    use rusqlite::types::ValueRef::*;
    Some(match v {
        Null => return None,
        Integer(i) => i.to_string(),
        Real(f) => f.to_string(),
        Text(t) | Blob(t) => String::from_utf8_lossy(t).into_owned(),
    })
}

/// Keeps each batch's position once it is delivered, in order, and only then gives the batch's
/// credits back. A batch that was not delivered (lost at a stop) ends the keeping: the next
/// start repeats from the last one kept.
async fn keep_positions(
    key: String,
    mut kept: mpsc::UnboundedReceiver<(String, oneshot::Receiver<Delivered>)>,
) {
    while let Some((position, done)) = kept.recv().await {
        let Ok(credits) = done.await else {
            return;
        };
        persist::keep_cursor(&key, &position);
        drop(credits);
    }
}
