//! `sql()` at run time: each message becomes a row — its table's name and a value a column,
//! each from its template, formatted where the message is routed — and the sender writes a
//! batch of rows in one transaction, committed before the batch is acknowledged.
//!
//! Every value is a statement's parameter, never SQL text. A table name comes from a template
//! and is checked (letters, digits, `_`): a row whose table would be another name is refused
//! and counted, so a sender cannot pick a schema or write a statement. Tables are made as
//! syslog-ng 3.38 makes them (`CREATE TABLE messages (date text, host text, message text)`,
//! `CREATE INDEX messages_host_idx ON messages (host)`), and a column a table lacks is added,
//! unless `flags(dont-create-tables)`.
//!
//! A row the database refuses (a constraint) costs that row alone: the batch is written
//! again a row at a time under savepoints, the good rows are stored, the bad one is counted
//! as refused and said once with the table and the database's words.

use super::Kind;
use crate::destinations::delivery::{Delivered, Delivers, Delivery, Lanes};
use crate::destinations::diskq::DiskBufferOptions;
use crate::destinations::format::{Format, Formatter};
use crate::destinations::link::{Connected, Failure, GiveUp, Position, Wire};
use crate::destinations::queue::Batch;
use crate::destinations::sender::{Pacing, Servers};
use crate::own_log;
use crate::stats::DestCounters;
use rusqlite::{params_from_iter, Connection};
use sluice_model::{LogMessage, Template};
use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// A column: its name and the type it is made with (`text` unless told, as syslog-ng).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Column {
    pub name: String,
    pub kind: String,
}

impl Column {
    /// `"host"` or `"host varchar(32)"`.
    pub fn parse(text: &str) -> Result<Column, String> {
        let text = text.trim();
        let (name, kind) = match text.split_once(char::is_whitespace) {
            Some((name, kind)) => (name, kind.trim()),
            None => (text, "text"),
        };
        if !valid_name(name.as_bytes()) {
            return Err(format!(
                "'{name}' is not a column name: letters, digits and '_'"
            ));
        }
        if kind.contains([';', '\'', '"', '`']) || kind.contains("--") {
            return Err(format!("'{kind}' is not a column type"));
        }
        Ok(Column {
            name: name.to_string(),
            kind: kind.to_string(),
        })
    }
}

/// A table or column name sluice writes into SQL: 1 to 63 letters, digits and `_`, not
/// starting with a digit.
pub fn valid_name(name: &[u8]) -> bool {
    (1..=63).contains(&name.len())
        && !name[0].is_ascii_digit()
        && name.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'_')
}

/// What a row is made of: the table's template, a template a column, and the value that
/// stands for NULL.
pub struct SqlTemplates {
    pub table: Template,
    pub values: Vec<Template>,
    pub null: Option<String>,
}

/// Where rows go and how tables are made.
pub struct SqlOptions {
    pub label: String,
    pub kind: Kind,
    pub database: String,
    pub columns: Vec<Column>,
    pub indexes: Vec<String>,
    pub create_tables: bool,
    pub session_statements: Vec<String>,
    pub create_statement_append: String,
}

pub struct SqlDestination {
    table: Formatter,
    values: Vec<Formatter>,
    null: Option<Vec<u8>>,
    delivery: Delivery,
}

impl SqlDestination {
    pub(super) fn new(
        templates: SqlTemplates,
        opts: SqlOptions,
        workers: usize,
        pacing: Pacing,
        disk_buffer: Option<(DiskBufferOptions, String)>,
        counters: DestCounters,
    ) -> Delivered<SqlDestination> {
        let delivery = Delivery::new(
            opts.label.clone().into(),
            Arc::new(opts),
            pacing,
            counters,
            disk_buffer,
            workers,
        );
        Delivered(SqlDestination {
            table: Formatter::new(Format::Template(templates.table), false),
            values: templates
                .values
                .into_iter()
                .map(|t| Formatter::new(Format::Template(t), false))
                .collect(),
            null: templates.null.map(String::into_bytes),
            delivery,
        })
    }
}

/// A field of a row in a batch: its length (4 bytes, little-endian; `NULL_FIELD` for NULL),
/// then its bytes.
const NULL_FIELD: u32 = u32::MAX;

fn push_field(out: &mut Vec<u8>, start: usize, null: Option<&[u8]>) {
    let len = out.len() - start - 4;
    let field = match null {
        Some(null) if &out[start + 4..] == null => NULL_FIELD,
        _ => len as u32,
    };
    if field == NULL_FIELD {
        out.truncate(start + 4);
    }
    out[start..start + 4].copy_from_slice(&field.to_le_bytes());
}

impl Delivers for SqlDestination {
    fn delivery(&self) -> &Delivery {
        &self.delivery
    }

    fn sized_by(&self) -> &Formatter {
        &self.table
    }

    fn numbers_local(&self) -> bool {
        self.table.numbers_local() || self.values.iter().any(Formatter::numbers_local)
    }

    fn format(&self, msgs: &[LogMessage], which: &[u32], lanes: &mut Lanes) {
        for &i in which {
            let msg = &msgs[i as usize];
            let batch = lanes.batch_for(msg);
            let out = &mut batch.data;
            let start = out.len();
            out.extend_from_slice(&[0; 4]);
            self.table.append(msg, out);
            push_field(out, start, None);
            for value in &self.values {
                let start = out.len();
                out.extend_from_slice(&[0; 4]);
                value.append(msg, out);
                push_field(out, start, self.null.as_deref());
            }
            batch.end_message();
        }
    }
}

/// The fields of one row as a batch holds them: the table, then a value a column.
fn fields(mut row: &[u8]) -> Vec<Option<&[u8]>> {
    let mut out = Vec::new();
    while row.len() >= 4 {
        let len = u32::from_le_bytes(row[..4].try_into().expect("four bytes"));
        row = &row[4..];
        if len == NULL_FIELD {
            out.push(None);
        } else {
            let len = (len as usize).min(row.len());
            out.push(Some(&row[..len]));
            row = &row[len..];
        }
    }
    out
}

impl Servers for SqlOptions {
    fn count(&self) -> usize {
        1
    }

    fn name(&self, _: usize) -> String {
        match self.kind {
            Kind::Sqlite => format!("sqlite3,{}", self.database),
        }
    }

    fn open(&self, _: usize) -> std::io::Result<Connected> {
        let conn = Connection::open(&self.database).map_err(std::io::Error::other)?;
        // Another reader of the file (a person with `sqlite3`) makes a write wait, not fail.
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .map_err(std::io::Error::other)?;
        for statement in &self.session_statements {
            conn.execute_batch(statement)
                .map_err(|e| std::io::Error::other(format!("{statement}: {e}")))?;
        }
        Ok(Box::new(SqliteWire {
            conn,
            columns: self.columns.clone(),
            indexes: self.indexes.clone(),
            create_tables: self.create_tables,
            create_append: self.create_statement_append.clone(),
            made: HashMap::new(),
            said: HashSet::new(),
            label: self.label.clone(),
        }))
    }

    fn probe(&self, _: usize) -> bool {
        true
    }
}

/// A connection to a SQLite database, and the tables it has seen made or checked.
struct SqliteWire {
    conn: Connection,
    columns: Vec<Column>,
    indexes: Vec<String>,
    create_tables: bool,
    create_append: String,
    /// The tables made or checked on this connection, each with its INSERT statement.
    made: HashMap<String, String>,
    /// Tables whose refusals were said (once each).
    said: HashSet<String>,
    label: String,
}

/// Why a row was not stored.
enum RowError {
    /// The row alone: a name that is no table, a constraint.
    Refused(String),
    /// The database: a full disk, a lock held too long.
    Database(rusqlite::Error),
}

impl SqliteWire {
    /// Makes `table`, its indexes and the columns it lacks, unless told not to, and keeps
    /// its INSERT.
    fn make(&mut self, table: &str) -> Result<(), RowError> {
        if self.made.contains_key(table) {
            return Ok(());
        }
        if self.create_tables {
            let existing = self.existing_columns(table).map_err(RowError::Database)?;
            if existing.is_empty() {
                let columns: Vec<String> = self
                    .columns
                    .iter()
                    .map(|c| format!("{} {}", c.name, c.kind))
                    .collect();
                let ddl = format!(
                    "CREATE TABLE {table} ({}){}",
                    columns.join(", "),
                    self.create_append
                );
                self.conn.execute_batch(&ddl).map_err(RowError::Database)?;
                for column in &self.indexes {
                    self.conn
                        .execute_batch(&format!(
                            "CREATE INDEX {table}_{column}_idx ON {table} ({column})"
                        ))
                        .map_err(RowError::Database)?;
                }
            } else {
                for c in &self.columns {
                    if !existing.iter().any(|e| e.eq_ignore_ascii_case(&c.name)) {
                        self.conn
                            .execute_batch(&format!(
                                "ALTER TABLE {table} ADD COLUMN {} {}",
                                c.name, c.kind
                            ))
                            .map_err(RowError::Database)?;
                    }
                }
            }
        }
        let names: Vec<&str> = self.columns.iter().map(|c| c.name.as_str()).collect();
        let marks = vec!["?"; names.len()].join(", ");
        let insert = format!(
            "INSERT INTO {table} ({}) VALUES ({marks})",
            names.join(", ")
        );
        self.made.insert(table.to_string(), insert);
        Ok(())
    }

    fn existing_columns(&self, table: &str) -> rusqlite::Result<Vec<String>> {
        let mut statement = self
            .conn
            .prepare(&format!("SELECT name FROM pragma_table_info('{table}')"))?;
        let names = statement.query_map([], |row| row.get::<_, String>(0))?;
        names.collect()
    }

    /// Stores one row (its fields as a batch holds them).
    fn insert(&mut self, row: &[u8]) -> Result<(), RowError> {
        let fields = fields(row);
        let Some((table, values)) = fields.split_first() else {
            return Err(RowError::Refused("an empty row".into()));
        };
        let table = table.unwrap_or_default();
        if !valid_name(table) {
            return Err(RowError::Refused(format!(
                "'{}' is not a table name: letters, digits and '_'",
                String::from_utf8_lossy(table)
            )));
        }
        let table = std::str::from_utf8(table).expect("checked: ASCII");
        self.make(table)?;
        let mut statement = self
            .conn
            .prepare_cached(&self.made[table])
            .map_err(RowError::Database)?;
        // Borrowed where the value is UTF-8 already, as almost every one is.
        let values = values
            .iter()
            .map(|v| v.map(|bytes| -> Cow<str> { String::from_utf8_lossy(bytes) }));
        match statement.execute(params_from_iter(values)) {
            Ok(_) => Ok(()),
            Err(e) if refuses_the_row(&e) => Err(RowError::Refused(e.to_string())),
            Err(e) => Err(RowError::Database(e)),
        }
    }

    /// Says, once a table, why the database refused a row of it.
    fn say_refused(&mut self, row: &[u8], why: &str) {
        let table = fields(row)
            .first()
            .copied()
            .flatten()
            .map(|t| String::from_utf8_lossy(t).into_owned())
            .unwrap_or_default();
        if self.said.len() < 1000 && self.said.insert(table.clone()) {
            own_log::error(format!(
                "{}: a row for table '{table}' refused ({why}); counted as dropped, the others are stored",
                self.label
            ));
        }
    }

    /// Writes the rows from `pos` in one transaction; on a refused row, again a row at a time
    /// under savepoints.
    fn write(&mut self, batches: &[Batch], pos: &mut Position) -> Result<(), rusqlite::Error> {
        let rows = rows_from(batches, pos);
        let whole = (|| {
            self.conn.execute_batch("BEGIN")?;
            for row in &rows {
                match self.insert(row) {
                    Ok(()) => {}
                    Err(RowError::Database(e)) => return Err(Some(e)),
                    Err(RowError::Refused(_)) => return Err(None),
                }
            }
            self.conn.execute_batch("COMMIT").map_err(Some)
        })();
        match whole {
            Ok(()) => {
                skip_rows(batches, pos, rows.len(), 0);
                return Ok(());
            }
            Err(error) => {
                let _ = self.conn.execute_batch("ROLLBACK");
                // The tables made in the transaction went with it.
                self.made.clear();
                if let Some(e) = error {
                    return Err(e);
                }
            }
        }
        // A row refused: each row alone.
        self.conn.execute_batch("BEGIN")?;
        let mut refused = 0;
        for row in &rows {
            self.conn.execute_batch("SAVEPOINT row")?;
            match self.insert(row) {
                Ok(()) => self.conn.execute_batch("RELEASE row")?,
                Err(RowError::Refused(why)) => {
                    self.conn.execute_batch("ROLLBACK TO row; RELEASE row")?;
                    self.say_refused(row, &why);
                    refused += 1;
                }
                Err(RowError::Database(e)) => {
                    let _ = self.conn.execute_batch("ROLLBACK");
                    self.made.clear();
                    return Err(e);
                }
            }
        }
        self.conn.execute_batch("COMMIT")?;
        skip_rows(batches, pos, rows.len(), refused);
        Ok(())
    }
}

/// Whether the database refused the row rather than failed: a constraint, a type, a value too
/// large. Anything else (a full disk, a busy database, an I/O error) is tried again.
fn refuses_the_row(e: &rusqlite::Error) -> bool {
    use rusqlite::ErrorCode::*;
    matches!(
        e.sqlite_error_code(),
        Some(ConstraintViolation | TypeMismatch | TooBig | SchemaChanged)
    )
}

/// The rows from `pos` to the end of `batches`.
fn rows_from<'b>(batches: &'b [Batch], pos: &Position) -> Vec<&'b [u8]> {
    let mut rows = Vec::new();
    let first = pos.message(batches);
    for (b, batch) in batches.iter().enumerate().skip(pos.batch) {
        let from = if b == pos.batch { first } else { 0 };
        for i in from..batch.len() {
            rows.push(&batch.data[batch.start(i)..batch.ends[i] as usize]);
        }
    }
    rows
}

/// Moves `pos` past `n` rows written, of which `refused` were refused.
fn skip_rows(batches: &[Batch], pos: &mut Position, n: usize, refused: usize) {
    pos.skip_messages(batches, n);
    pos.refused += refused;
}

impl Wire for SqliteWire {
    fn send(
        &mut self,
        batches: &[Batch],
        pos: &mut Position,
        _give_up: GiveUp,
    ) -> Result<(), Failure> {
        self.write(batches, pos)
            .map_err(|e| Failure::Broken(std::io::Error::other(e)))
    }

    fn closed(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_and_names_are_checked() {
        assert_eq!(
            Column::parse("host varchar(32)").unwrap(),
            Column {
                name: "host".into(),
                kind: "varchar(32)".into()
            }
        );
        assert_eq!(Column::parse("message").unwrap().kind, "text");
        assert!(Column::parse("a;b").is_err());
        assert!(Column::parse("a text; DROP TABLE x").is_err());
        assert!(valid_name(b"messages_20261129"));
        assert!(!valid_name(b"main.x"));
        assert!(!valid_name(b"x\"; DROP"));
        assert!(!valid_name(b"1x"));
        assert!(!valid_name(b""));
    }

    #[test]
    fn fields_read_back_with_nulls() {
        let mut out = Vec::new();
        for (value, null) in [
            (&b"logs"[..], None),
            (b"", Some(&b""[..])),
            (b"a b", Some(b"")),
        ] {
            let start = out.len();
            out.extend_from_slice(&[0; 4]);
            out.extend_from_slice(value);
            push_field(&mut out, start, null);
        }
        assert_eq!(fields(&out), [Some(&b"logs"[..]), None, Some(b"a b")]);
    }
}
