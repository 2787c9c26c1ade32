//! `sql(type(mysql))`'s wire, for MariaDB and MySQL: a connection of `mysql_async` (driven by
//! a runtime of the sender's thread), a batch's rows sent from memory with `LOAD DATA LOCAL
//! INFILE` in one transaction — a row is tab-separated text made where the message was
//! formatted ([`super::store::tab_text`]), as `LOAD DATA` reads it by default.
//!
//! With `LOCAL`, the server takes a value it cannot store as a warning, not an error (it
//! cannot stop the client in the middle of the file): a load that leaves a warning, or stores
//! fewer rows than it was sent, is taken as refused and [`bulk`] sends its rows again in parts
//! (the warning's `at row N` the row it names), so that a row is stored as it was sent or
//! not at all. A server that does not allow `LOAD DATA LOCAL` (MySQL 8's default) is sent
//! multi-row `INSERT`s instead, each value a parameter.

use super::bulk::{self, Bulk, Refused};
use super::store::{tab_values, Ddl, Refusals, SqlOptions};
use crate::destinations::link::{block_on_giving_up, Connected, Failure, GiveUp, Position, Wire};
use crate::destinations::queue::Batch;
use crate::own_log;
use crate::sql::mysql_said;
use bytes::Bytes;
use futures_util::StreamExt;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Value};
use std::collections::HashMap;
use std::future::Future;

/// The most parameters one `INSERT` takes (the protocol's limit is 65,535).
const MOST_PARAMETERS: usize = 60_000;

/// The server's errors that refuse a row: a value too long, out of range or of the wrong type,
/// NULL where it may not be, a duplicate key, a foreign key, a CHECK constraint.
const ROW_ERRORS: &[u16] = &[
    1048, 1062, 1264, 1265, 1292, 1300, 1366, 1406, 1451, 1452, 1586, 1690, 3819, 4025,
];
/// The server's errors that refuse the rows of a table: no such table or column, a statement
/// it cannot read (a column type it does not know), a key on a column it cannot index.
const TABLE_ERRORS: &[u16] = &[1054, 1064, 1146, 1170, 1071];
/// `LOAD DATA LOCAL` not allowed: MariaDB's `local_infile=0` (4166; 1148 before 10.5), MySQL 8's
/// default (3948).
const NO_LOCAL_LOAD: &[u16] = &[1148, 3948, 4166];

/// Connects to the server and runs `session-statements()`.
pub(super) fn open(opts: &SqlOptions) -> std::io::Result<Connected> {
    let runtime = crate::sql::runtime()?;
    let conn = crate::sql::mysql_connect(
        &runtime,
        &opts.server,
        &opts.database,
        &opts.session_statements,
    )?;
    Ok(Box::new(MysqlWire {
        runtime,
        conn,
        ddl: opts.ddl(),
        made: HashMap::new(),
        insert_only: false,
        refusals: Refusals::new(opts),
        label: opts.label.clone(),
    }))
}

/// A connection to MariaDB or MySQL, and the tables it has made or checked.
struct MysqlWire {
    runtime: tokio::runtime::Runtime,
    conn: Conn,
    ddl: Ddl,
    /// The tables made or checked on this connection, each with its `LOAD DATA` statement.
    made: HashMap<String, String>,
    /// The server refused `LOAD DATA LOCAL`: rows go in `INSERT`s.
    insert_only: bool,
    refusals: Refusals,
    label: String,
}

/// Whether `e` refuses a row, the rows of a table, or is the connection's.
fn refused(e: mysql_async::Error) -> Refused {
    match &e {
        mysql_async::Error::Server(s) if ROW_ERRORS.contains(&s.code) => {
            Refused::Row(s.message.clone(), row_named(&s.message))
        }
        mysql_async::Error::Server(s) if TABLE_ERRORS.contains(&s.code) => {
            Refused::Table(s.message.clone())
        }
        _ => Refused::Broken(std::io::Error::other(mysql_said(&e))),
    }
}

/// The row a message names (`Data too long for column 'host' at row 3`), counted from 1.
fn row_named(message: &str) -> Option<usize> {
    let (_, after) = message.rsplit_once(" at row ")?;
    let digits = after.bytes().take_while(u8::is_ascii_digit).count();
    after[..digits].parse().ok()
}

impl MysqlWire {
    /// Runs `work` on the connection; given up on once sluice has been stopping for the
    /// grace.
    fn wait<T>(
        runtime: &tokio::runtime::Runtime,
        work: impl Future<Output = Result<T, mysql_async::Error>>,
        give_up: GiveUp,
    ) -> Result<T, Refused> {
        Self::answer(runtime, work, give_up)?.map_err(refused)
    }

    /// As [`MysqlWire::wait`], with the server's error as it answered.
    fn answer<T>(
        runtime: &tokio::runtime::Runtime,
        work: impl Future<Output = Result<T, mysql_async::Error>>,
        give_up: GiveUp,
    ) -> Result<Result<T, mysql_async::Error>, Refused> {
        block_on_giving_up(runtime, work, give_up).map_err(Refused::Broken)
    }

    /// The columns `table` has, none where it is missing.
    fn columns_of(&mut self, table: &str, give_up: GiveUp) -> Result<Vec<String>, Refused> {
        Self::wait(
            &self.runtime,
            self.conn.exec(
                "SELECT COLUMN_NAME FROM information_schema.COLUMNS \
                 WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?",
                (table,),
            ),
            give_up,
        )
    }

    /// Sends `lines` of `table` in `INSERT`s of as many rows as the protocol takes.
    fn insert(&mut self, table: &str, lines: &[&[u8]], give_up: GiveUp) -> Result<(), Refused> {
        let columns = self.ddl.columns.len();
        let per_statement = (MOST_PARAMETERS / columns).max(1);
        let marks = format!("({})", vec!["?"; columns].join(", "));
        for (n, chunk) in lines.chunks(per_statement).enumerate() {
            let statement = format!(
                "INSERT INTO {table} ({}) VALUES {}",
                self.ddl.names(),
                vec![marks.as_str(); chunk.len()].join(", ")
            );
            let params: Vec<Value> = chunk
                .iter()
                .flat_map(|l| tab_values(l))
                .map(|v| v.map_or(Value::NULL, |v| Value::Bytes(v.into_owned())))
                .collect();
            Self::wait(
                &self.runtime,
                self.conn.exec_drop(statement, params),
                give_up,
            )
            .map_err(|e| match e {
                // The row named is of this statement's.
                Refused::Row(why, Some(row)) => Refused::Row(why, Some(n * per_statement + row)),
                other => other,
            })?;
        }
        Ok(())
    }
}

impl Bulk for MysqlWire {
    fn run(&mut self, statement: &str, give_up: GiveUp) -> Result<(), Refused> {
        Self::wait(&self.runtime, self.conn.query_drop(statement), give_up)
    }

    /// Makes `table`, its indexes and the columns it lacks, unless told not to, and keeps its
    /// `LOAD DATA` statement.
    fn make(&mut self, table: &str, give_up: GiveUp) -> Result<(), Refused> {
        if self.made.contains_key(table) {
            return Ok(());
        }
        if self.ddl.create {
            let existing = self.columns_of(table, give_up)?;
            if existing.is_empty() {
                for statement in self.ddl.create(table) {
                    if let Err(e) = self.run(&statement, give_up) {
                        // Another worker may have made it meanwhile.
                        if self.columns_of(table, give_up)?.is_empty() {
                            return Err(e);
                        }
                        break;
                    }
                }
            } else {
                for statement in self.ddl.complete(table, &existing) {
                    self.run(&statement, give_up)?;
                }
            }
        } else {
            let probe = format!("SELECT {} FROM {table} WHERE 0=1", self.ddl.names());
            self.run(&probe, give_up)?;
        }
        let load = format!(
            "LOAD DATA LOCAL INFILE 'sluice-rows' INTO TABLE {table} CHARACTER SET utf8mb4 ({})",
            self.ddl.names()
        );
        self.made.insert(table.to_string(), load);
        Ok(())
    }

    /// Sends `lines` of `table` with one `LOAD DATA LOCAL INFILE`, its file the lines in
    /// memory; `INSERT`s where the server does not take it.
    fn load(&mut self, table: &str, lines: &[&[u8]], give_up: GiveUp) -> Result<(), Refused> {
        if self.insert_only {
            return self.insert(table, lines, give_up);
        }
        let rows: Bytes = lines.concat().into();
        self.conn
            .set_infile_handler(async move { Ok(futures_util::stream::iter([Ok(rows)]).boxed()) });
        let statement = self.made[table].clone();
        match Self::answer(&self.runtime, self.conn.query_drop(statement), give_up)? {
            Ok(()) => {}
            Err(mysql_async::Error::Server(e)) if NO_LOCAL_LOAD.contains(&e.code) => {
                own_log::warning(format!(
                    "{}: the server does not take LOAD DATA LOCAL ({}); rows are sent as INSERTs",
                    self.label, e.message
                ));
                self.insert_only = true;
                return self.insert(table, lines, give_up);
            }
            Err(e) => return Err(refused(e)),
        }
        let (stored, warnings) = (self.conn.affected_rows(), self.conn.get_warnings());
        if warnings == 0 && stored == lines.len() as u64 {
            return Ok(());
        }
        let warning: Option<(String, u16, String)> = Self::wait(
            &self.runtime,
            self.conn.query_first("SHOW WARNINGS LIMIT 1"),
            give_up,
        )?;
        Err(match warning {
            Some((_, _, message)) => {
                let row = row_named(&message);
                Refused::Row(message, row)
            }
            None => Refused::Row(format!("{stored} of {} rows stored", lines.len()), None),
        })
    }

    fn forget(&mut self, table: &str) {
        self.made.remove(table);
    }

    fn refusals(&mut self) -> &mut Refusals {
        &mut self.refusals
    }
}

impl Wire for MysqlWire {
    fn send(
        &mut self,
        batches: &[Batch],
        pos: &mut Position,
        give_up: GiveUp,
    ) -> Result<(), Failure> {
        // A failed transaction is gone with its connection, which the sender drops.
        bulk::write(self, batches, pos, give_up).map_err(Failure::from)
    }

    fn closed(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_named_in_messages() {
        assert_eq!(
            row_named("Data too long for column 'host' at row 3"),
            Some(3)
        );
        assert_eq!(row_named("CONSTRAINT `c` failed for `t`.`m`"), None);
    }
}
