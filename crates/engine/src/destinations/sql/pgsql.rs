//! `sql(type(pgsql))`'s wire: a connection of `tokio-postgres` (driven by a runtime of the
//! sender's thread), a batch's rows sent with `COPY table (columns) FROM STDIN` in one
//! transaction — a row is `COPY` text made where the message was formatted
//! ([`super::store::tab_text`]), so sending a batch is writing its bytes.
//!
//! How a batch is written, and a refused row found, is [`bulk`]'s: a `COPY` a table under a
//! savepoint, its error's `line N` the row it refused.

use super::bulk::{self, Bulk, Refused};
use super::store::{Ddl, Refusals, SqlOptions};
use crate::destinations::link::{block_on_giving_up, Connected, Failure, GiveUp, Position, Wire};
use crate::destinations::queue::Batch;
use crate::sql::pg_said;
use bytes::BytesMut;
use futures_util::SinkExt;
use std::collections::HashMap;
use std::future::Future;
use tokio_postgres::error::SqlState;
use tokio_postgres::Client;

/// The most `COPY` text handed to the connection at once.
const COPY_CHUNK: usize = 1 << 20;

/// Connects to the server and runs `session-statements()`.
pub(super) fn open(opts: &SqlOptions) -> std::io::Result<Connected> {
    let runtime = crate::sql::runtime()?;
    let client = crate::sql::pg_connect(
        &runtime,
        &opts.server,
        &opts.database,
        &opts.session_statements,
        &opts.label,
    )?;
    Ok(Box::new(PgWire {
        runtime,
        client,
        ddl: opts.ddl(),
        made: HashMap::new(),
        refusals: Refusals::new(opts),
    }))
}

/// A connection to PostgreSQL, and the tables it has made or checked.
struct PgWire {
    runtime: tokio::runtime::Runtime,
    client: Client,
    ddl: Ddl,
    /// The tables made or checked on this connection, each with its `COPY` statement.
    made: HashMap<String, String>,
    refusals: Refusals,
}

/// Whether `e` refuses a row, the rows of a table, or is the connection's.
fn refused(e: tokio_postgres::Error) -> Refused {
    let Some(code) = e.code() else {
        return Refused::Broken(std::io::Error::other(e));
    };
    let class = &code.code()[..2];
    if class == "22" || class == "23" || *code == SqlState::PROGRAM_LIMIT_EXCEEDED {
        Refused::Row(pg_said(&e), line_named(&e))
    } else if class == "42" && *code != SqlState::INSUFFICIENT_PRIVILEGE {
        // Permissions are an administrator's to mend: the rows wait for them.
        Refused::Table(pg_said(&e))
    } else {
        Refused::Broken(std::io::Error::other(pg_said(&e)))
    }
}

/// The row a `COPY` error names (`COPY messages, line 501, column pid: "x"`), counted
/// from 1.
fn line_named(e: &tokio_postgres::Error) -> Option<usize> {
    let place = e.as_db_error()?.where_()?;
    let (_, after) = place.split_once(", line ")?;
    let digits = after.bytes().take_while(u8::is_ascii_digit).count();
    after[..digits].parse().ok()
}

impl PgWire {
    /// Runs `work` on the connection; given up on once sluice has been stopping for the
    /// grace.
    fn wait<T>(
        &self,
        work: impl Future<Output = Result<T, tokio_postgres::Error>>,
        give_up: GiveUp,
    ) -> Result<T, Refused> {
        block_on_giving_up(&self.runtime, work, give_up)
            .map_err(Refused::Broken)?
            .map_err(refused)
    }
}

impl Bulk for PgWire {
    fn run(&mut self, statement: &str, give_up: GiveUp) -> Result<(), Refused> {
        self.wait(self.client.batch_execute(statement), give_up)
    }

    /// Makes `table`, its indexes and the columns it lacks, unless told not to, and keeps its
    /// `COPY` statement.
    fn make(&mut self, table: &str, give_up: GiveUp) -> Result<(), Refused> {
        if self.made.contains_key(table) {
            return Ok(());
        }
        if self.ddl.create {
            let probe = format!("SELECT * FROM {table} WHERE 0=1");
            match self.wait(self.client.prepare(&probe), give_up) {
                Ok(found) => {
                    let existing: Vec<String> = found
                        .columns()
                        .iter()
                        .map(|c| c.name().to_string())
                        .collect();
                    for statement in self.ddl.complete(table, &existing) {
                        self.run(&statement, give_up)?;
                    }
                }
                Err(Refused::Table(_)) => {
                    if let Err(e) = self.run(&self.ddl.create(table).join("; "), give_up) {
                        // Another worker may have made it meanwhile.
                        if self.wait(self.client.prepare(&probe), give_up).is_err() {
                            return Err(e);
                        }
                    }
                }
                Err(e) => return Err(e),
            }
        } else {
            // A `COPY` to a table or column that is not there fails only once sent, and
            // `tokio-postgres` loses the connection then: the table is asked first.
            let probe = format!("SELECT {} FROM {table} WHERE 0=1", self.ddl.names());
            self.wait(self.client.prepare(&probe), give_up)?;
        }
        let copy = format!("COPY {table} ({}) FROM STDIN", self.ddl.names());
        self.made.insert(table.to_string(), copy);
        Ok(())
    }

    /// Sends `lines` of `table` with one `COPY`.
    fn load(&mut self, table: &str, lines: &[&[u8]], give_up: GiveUp) -> Result<(), Refused> {
        let statement = &self.made[table];
        self.wait(
            async {
                let sink = self.client.copy_in(statement.as_str()).await?;
                tokio::pin!(sink);
                let mut chunk = BytesMut::with_capacity(COPY_CHUNK.min(lines.len() * 256));
                for line in lines {
                    chunk.extend_from_slice(line);
                    if chunk.len() >= COPY_CHUNK {
                        sink.send(chunk.split().freeze()).await?;
                    }
                }
                if !chunk.is_empty() {
                    sink.send(chunk.freeze()).await?;
                }
                sink.as_mut().finish().await
            },
            give_up,
        )
        .map(|_| ())
    }

    fn forget(&mut self, table: &str) {
        self.made.remove(table);
    }

    fn refusals(&mut self) -> &mut Refusals {
        &mut self.refusals
    }
}

impl Wire for PgWire {
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
        self.client.is_closed()
    }
}
