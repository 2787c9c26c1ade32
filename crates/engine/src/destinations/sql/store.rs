//! `sql()` at run time, what every database shares: each message becomes a row — its table's
//! name and its values, each from its template, formatted where the message is routed — and
//! a sender writes a batch of rows in one transaction, committed before the batch is
//! acknowledged. How a row is held in a batch and written depends on the database: SQLite's
//! wire ([`super::sqlite`]) binds each value as a parameter of one prepared INSERT,
//! PostgreSQL's ([`super::pgsql`]) and MariaDB's ([`super::mysql`]) send the rows as
//! tab-separated text, with `COPY` and `LOAD DATA`.
//!
//! A table name comes from a template and is checked (letters, digits, `_`): a row whose
//! table would be another name is refused and counted, so a sender cannot pick a schema or
//! write a statement. Tables are made as syslog-ng 3.38 makes them (`CREATE TABLE messages
//! (date text, host text, message text)`, `CREATE INDEX messages_host_idx ON messages
//! (host)`), and a column a table lacks is added, unless `flags(dont-create-tables)`.
//!
//! A row the database refuses (a constraint, a value its column cannot hold) costs that row
//! alone: the good rows of its batch are stored, the refused one is counted as dropped and
//! said once a table with the database's words.

use crate::destinations::delivery::{Delivered, Delivers, Delivery, Lanes};
use crate::destinations::diskq::DiskBufferOptions;
use crate::destinations::fallback::Fallback;
use crate::destinations::format::{Format, Formatter};
use crate::destinations::link::Position;
use crate::destinations::queue::Batch;
use crate::destinations::sender::Pacing;
use crate::own_log;
use crate::sql::{valid_name, Kind, Server};
use crate::stats::DestCounters;
use sluice_model::{LogMessage, Template};
use std::borrow::Cow;
use std::collections::HashSet;
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
        if kind.contains([';', '\'', '"', '`']) || kind.contains("--") || kind.contains("/*") {
            return Err(format!("'{kind}' is not a column type"));
        }
        Ok(Column {
            name: name.to_string(),
            kind: kind.to_string(),
        })
    }
}

/// How a wire makes tables, and the statements, as syslog-ng 3.38 writes them.
#[derive(Clone)]
pub(super) struct Ddl {
    pub columns: Vec<Column>,
    pub indexes: Vec<String>,
    /// `create-statement-append()`.
    pub append: String,
    /// Whether tables are made and columns added (not `flags(dont-create-tables)`).
    pub create: bool,
}

impl Ddl {
    /// `CREATE TABLE t (date text, host varchar(32))` and `create-statement-append()`.
    pub fn create_table(&self, table: &str) -> String {
        let columns: Vec<String> = self
            .columns
            .iter()
            .map(|c| format!("{} {}", c.name, c.kind))
            .collect();
        format!(
            "CREATE TABLE {table} ({}){}",
            columns.join(", "),
            self.append
        )
    }

    /// `CREATE INDEX t_host_idx ON t (host)`.
    pub fn create_index(table: &str, column: &str) -> String {
        format!("CREATE INDEX {table}_{column}_idx ON {table} ({column})")
    }

    /// `ALTER TABLE t ADD host varchar(32)`.
    pub fn add_column(table: &str, column: &Column) -> String {
        format!("ALTER TABLE {table} ADD {} {}", column.name, column.kind)
    }

    /// The statements that make `table` and its indexes.
    pub fn create(&self, table: &str) -> Vec<String> {
        let mut statements = vec![self.create_table(table)];
        for column in &self.indexes {
            statements.push(Ddl::create_index(table, column));
        }
        statements
    }

    /// The statements that add the columns a table of `existing` columns lacks, and the
    /// indexes on them.
    pub fn complete(&self, table: &str, existing: &[String]) -> Vec<String> {
        let mut statements = Vec::new();
        for c in &self.columns {
            if !existing.iter().any(|e| e.eq_ignore_ascii_case(&c.name)) {
                statements.push(Ddl::add_column(table, c));
                if self.indexes.contains(&c.name) {
                    statements.push(Ddl::create_index(table, &c.name));
                }
            }
        }
        statements
    }

    /// The column names, `date, host, message`.
    pub fn names(&self) -> String {
        let names: Vec<&str> = self.columns.iter().map(|c| c.name.as_str()).collect();
        names.join(", ")
    }
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
    pub server: Server,
    pub database: String,
    pub columns: Vec<Column>,
    pub indexes: Vec<String>,
    pub create_tables: bool,
    pub session_statements: Vec<String>,
    pub create_statement_append: String,
    /// `fallback-file()`.
    pub fallback: Option<Arc<Fallback>>,
}

impl SqlOptions {
    pub(super) fn ddl(&self) -> Ddl {
        Ddl {
            columns: self.columns.clone(),
            indexes: self.indexes.clone(),
            append: self.create_statement_append.clone(),
            create: self.create_tables,
        }
    }

    /// How counters and messages name the database: `sqlite3,/var/log/logs.db`,
    /// `pgsql,db.example.com,5432,logs` (no user, no password).
    pub fn name(&self) -> String {
        self.server.name(self.kind, &self.database)
    }
}

pub struct SqlDestination {
    kind: Kind,
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
        let kind = opts.kind;
        let delivery = Delivery::new(
            opts.label.clone().into(),
            Arc::new(opts),
            pacing,
            counters,
            disk_buffer,
            workers,
        );
        Delivered(SqlDestination {
            kind,
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
/// then its bytes. A row is its table's field, then what its database's wire reads: a field
/// a value (SQLite), or one field of `COPY` text (PostgreSQL).
const NULL_FIELD: u32 = u32::MAX;

/// Ends the field begun at `start` (4 bytes kept for its length): NULL where its bytes are
/// `null`.
pub(super) fn push_field(out: &mut Vec<u8>, start: usize, null: Option<&[u8]>) {
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

/// Makes the value appended to `out` from `from` a field of tab-separated text, as
/// PostgreSQL's `COPY` and MariaDB's `LOAD DATA` read it: `\N` where it is `null`, else its
/// backslashes, tabs and line ends escaped, and bytes that are not UTF-8 replaced.
pub(super) fn tab_text(out: &mut Vec<u8>, from: usize, null: Option<&[u8]>) {
    let value = &out[from..];
    if null.is_some_and(|null| value == null) {
        out.truncate(from);
        out.extend_from_slice(b"\\N");
        return;
    }
    let plain = memchr::memchr3(b'\\', b'\t', b'\n', value).is_none()
        && memchr::memchr(b'\r', value).is_none()
        && std::str::from_utf8(value).is_ok();
    if plain {
        return;
    }
    let raw = out.split_off(from);
    for b in String::from_utf8_lossy(&raw).bytes() {
        match b {
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\t' => out.extend_from_slice(b"\\t"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b => out.push(b),
        }
    }
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
        let null = self.null.as_deref();
        for &i in which {
            let msg = &msgs[i as usize];
            let batch = lanes.batch_for(msg);
            let out = &mut batch.data;
            let start = out.len();
            out.extend_from_slice(&[0; 4]);
            self.table.append(msg, out);
            push_field(out, start, None);
            match self.kind {
                Kind::Sqlite => {
                    for value in &self.values {
                        let start = out.len();
                        out.extend_from_slice(&[0; 4]);
                        value.append(msg, out);
                        push_field(out, start, null);
                    }
                }
                Kind::Pgsql | Kind::Mysql => {
                    let start = out.len();
                    out.extend_from_slice(&[0; 4]);
                    for (n, value) in self.values.iter().enumerate() {
                        if n > 0 {
                            out.push(b'\t');
                        }
                        let from = out.len();
                        value.append(msg, out);
                        tab_text(out, from, null);
                    }
                    out.push(b'\n');
                    push_field(out, start, None);
                }
            }
            batch.end_message();
        }
    }
}

/// The fields of one row as a batch holds them: the table, then the rest.
pub(super) fn fields(mut row: &[u8]) -> Vec<Option<&[u8]>> {
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

/// A row's table (its first field), checked: letters, digits and `_`; else why it is no
/// table.
pub(super) fn table_name(field: Option<&[u8]>) -> Result<&str, String> {
    let table = field.unwrap_or_default();
    if !valid_name(table) {
        return Err(format!(
            "'{}' is not a table name: letters, digits and '_'",
            String::from_utf8_lossy(table)
        ));
    }
    Ok(std::str::from_utf8(table).expect("checked: ASCII"))
}

/// What a wire does with refused rows: says why once a table, with the database's words, and
/// keeps each in the `fallback-file()` when there is one. (They are counted by the sender, as
/// the wire's position says.)
pub(super) struct Refusals {
    label: String,
    said: HashSet<String>,
    columns: Vec<String>,
    fallback: Option<Arc<Fallback>>,
    /// Whether a failure to write the fallback was said.
    fallback_failed: bool,
}

impl Refusals {
    pub fn new(opts: &SqlOptions) -> Refusals {
        Refusals {
            label: opts.label.clone(),
            said: HashSet::new(),
            columns: opts.columns.iter().map(|c| c.name.clone()).collect(),
            fallback: opts.fallback.clone(),
            fallback_failed: false,
        }
    }

    /// Refuses rows of `table` held as lines of tab-separated text.
    pub fn lines(&mut self, table: &[u8], lines: &[&[u8]], why: &str) {
        self.say(table, lines.len(), why);
        if self.fallback.is_some() {
            for line in lines {
                self.keep(table, &tab_values(line), why);
            }
        }
    }

    /// Refuses one row of `table` held as its values.
    pub fn values(&mut self, table: &[u8], values: &[Option<&[u8]>], why: &str) {
        self.say(table, 1, why);
        if self.fallback.is_some() {
            let values: Vec<Option<Cow<[u8]>>> =
                values.iter().map(|v| v.map(Cow::Borrowed)).collect();
            self.keep(table, &values, why);
        }
    }

    /// Says, once for `table` (and at most for 1,000 tables), why `rows` of it were refused.
    fn say(&mut self, table: &[u8], rows: usize, why: &str) {
        let table = String::from_utf8_lossy(table);
        if self.said.len() < 1000 && self.said.insert(table.to_string()) {
            let what = if rows == 1 {
                "a row".to_string()
            } else {
                format!("{rows} rows")
            };
            let kept = match &self.fallback {
                Some(f) => format!("kept in {}", f.path().display()),
                None => "counted as dropped".to_string(),
            };
            own_log::error(format!(
                "{}: {what} for table '{table}' refused ({why}); {kept}, the others are stored",
                self.label
            ));
        }
    }

    /// Writes a refused row to the fallback file.
    fn keep(&mut self, table: &[u8], values: &[Option<Cow<[u8]>>], why: &str) {
        let Some(fallback) = &self.fallback else {
            return;
        };
        let mut row = serde_json::Map::new();
        for (column, value) in self.columns.iter().zip(values) {
            let value = match value {
                Some(v) => serde_json::Value::String(String::from_utf8_lossy(v).into_owned()),
                None => serde_json::Value::Null,
            };
            row.insert(column.clone(), value);
        }
        let line = serde_json::json!({
            "time": jiff::Timestamp::now().to_string(),
            "destination": self.label,
            "table": String::from_utf8_lossy(table),
            "reason": why,
            "values": row,
        });
        let mut text = line.to_string().into_bytes();
        text.push(b'\n');
        match fallback.append(&text) {
            Ok(()) => self.fallback_failed = false,
            Err(e) if !self.fallback_failed => {
                self.fallback_failed = true;
                own_log::error(format!(
                    "{}: cannot keep a refused row in {}: {e}; it is counted as dropped",
                    self.label,
                    fallback.path().display()
                ));
            }
            Err(_) => {}
        }
    }
}

/// The values of a line of tab-separated text, unescaped (`\N`: NULL).
pub(super) fn tab_values(line: &[u8]) -> Vec<Option<Cow<'_, [u8]>>> {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.split(|&b| b == b'\t')
        .map(|field| {
            if field == b"\\N" {
                return None;
            }
            if !field.contains(&b'\\') {
                return Some(Cow::Borrowed(field));
            }
            let mut value = Vec::with_capacity(field.len());
            let mut bytes = field.iter();
            while let Some(&b) = bytes.next() {
                if b != b'\\' {
                    value.push(b);
                    continue;
                }
                match bytes.next() {
                    Some(b't') => value.push(b'\t'),
                    Some(b'n') => value.push(b'\n'),
                    Some(b'r') => value.push(b'\r'),
                    Some(&other) => value.push(other),
                    None => value.push(b'\\'),
                }
            }
            Some(Cow::Owned(value))
        })
        .collect()
}

/// The rows from `pos` to the end of `batches`.
pub(super) fn rows_from<'b>(batches: &'b [Batch], pos: &Position) -> Vec<&'b [u8]> {
    pos.messages_on(batches)
}

/// Moves `pos` past `n` rows written, of which `refused` were refused.
pub(super) fn skip_rows(batches: &[Batch], pos: &mut Position, n: usize, refused: usize) {
    pos.skip_messages(batches, n);
    pos.refused += refused;
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
        assert!(Column::parse("a text /* x */").is_err());
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

    fn text(value: &[u8], null: Option<&[u8]>) -> Vec<u8> {
        let mut out = b"x\t".to_vec();
        out.extend_from_slice(value);
        tab_text(&mut out, 2, null);
        out.split_off(2)
    }

    #[test]
    fn tab_text_reads_back_into_values() {
        let values: Vec<Option<Vec<u8>>> = tab_values(b"a\\tb\t\\N\tc\\\\d\\ne\n")
            .into_iter()
            .map(|v| v.map(|v| v.into_owned()))
            .collect();
        assert_eq!(
            values,
            [Some(b"a\tb".to_vec()), None, Some(b"c\\d\ne".to_vec())]
        );
    }

    #[test]
    fn values_become_tab_text() {
        assert_eq!(text(b"plain words", None), b"plain words");
        assert_eq!(text(b"a\tb\nc\\d\re", None), b"a\\tb\\nc\\\\d\\re");
        assert_eq!(text(b"", Some(b"")), b"\\N");
        assert_eq!(text(b"-", Some(b"")), b"-");
        assert_eq!(text(b"caf\xe9", None), "caf\u{fffd}".as_bytes());
    }
}
