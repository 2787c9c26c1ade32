//! `sql(type(sqlite3))`'s wire: the database file opened with `rusqlite` (SQLite built in),
//! one prepared INSERT a table, a batch's rows bound as its parameters in one transaction.
//! A row refused (a constraint, a value too large) sends the batch again a row at a time
//! under savepoints: the good rows are stored, the refused ones counted and said.

use super::store::{fields, rows_from, skip_rows, table_name, Ddl, Refusals, SqlOptions};
use crate::destinations::link::{Connected, Failure, GiveUp, Position, Wire};
use crate::destinations::queue::Batch;
use rusqlite::{params_from_iter, Connection};
use std::borrow::Cow;
use std::collections::HashMap;

/// Opens the database file and runs `session-statements()`.
pub(super) fn open(opts: &SqlOptions) -> std::io::Result<Connected> {
    let conn = Connection::open(&opts.database).map_err(std::io::Error::other)?;
    // Another reader of the file (a person with `sqlite3`) makes a write wait, not fail.
    conn.busy_timeout(std::time::Duration::from_secs(5))
        .map_err(std::io::Error::other)?;
    for statement in &opts.session_statements {
        conn.execute_batch(statement)
            .map_err(|e| std::io::Error::other(format!("{statement}: {e}")))?;
    }
    Ok(Box::new(SqliteWire {
        conn,
        ddl: opts.ddl(),
        made: HashMap::new(),
        refusals: Refusals::new(opts),
    }))
}

/// A connection to a SQLite database, and the tables it has seen made or checked.
struct SqliteWire {
    conn: Connection,
    ddl: Ddl,
    /// The tables made or checked on this connection, each with its INSERT statement.
    made: HashMap<String, String>,
    refusals: Refusals,
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
        if self.ddl.create {
            let existing = self.existing_columns(table).map_err(RowError::Database)?;
            let statements = if existing.is_empty() {
                self.ddl.create(table)
            } else {
                self.ddl.complete(table, &existing)
            };
            for statement in statements {
                self.conn
                    .execute_batch(&statement)
                    .map_err(RowError::Database)?;
            }
        }
        let marks = vec!["?"; self.ddl.columns.len()].join(", ");
        let insert = format!(
            "INSERT INTO {table} ({}) VALUES ({marks})",
            self.ddl.names()
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
        let table = table_name(*table).map_err(RowError::Refused)?;
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
                    let fields = fields(row);
                    let table = fields.first().copied().flatten().unwrap_or_default();
                    self.refusals
                        .values(table, fields.get(1..).unwrap_or_default(), &why);
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
