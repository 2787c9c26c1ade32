//! `sql(type(pgsql))`'s wire: a connection of `tokio-postgres` (driven by a runtime of the
//! sender's thread), a batch's rows sent with `COPY table (columns) FROM STDIN` in one
//! transaction — a row is `COPY` text made where the message was formatted ([`copy_text`]),
//! so sending a batch is writing its bytes.
//!
//! `COPY` stores all its rows or none: when the database refuses one (a constraint, a value
//! its column's type cannot hold, a NUL byte), the rows are sent again in parts under a
//! savepoint each — before the refused row (the line the database names), the row alone,
//! after it; halves where it names none — so that the good rows are stored and the refused
//! one counted and said. Tables are made and checked outside the transaction.

use super::store::{fields, rows_from, skip_rows, table_name, Ddl, Refusals, SqlOptions};
use crate::destinations::link::{stalled, Connected, Failure, GiveUp, Position, Wire};
use crate::destinations::link::{CONNECT_TIMEOUT, STOP_GRACE, TICK};
use crate::destinations::queue::Batch;
use bytes::BytesMut;
use futures_util::SinkExt;
use std::collections::HashMap;
use std::future::Future;
use tokio_postgres::error::SqlState;
use tokio_postgres::{Client, NoTls};

/// Where PostgreSQL listens when `host()` is empty: its socket's directory, as libpq.
const SOCKET_DIR: &str = "/var/run/postgresql";
/// The most `COPY` text handed to the connection at once.
const COPY_CHUNK: usize = 1 << 20;

/// Makes the value appended to `out` from `from` `COPY` text: `\N` where it is `null`, else
/// its backslashes, tabs and line ends escaped, and bytes that are not UTF-8 replaced.
pub(super) fn copy_text(out: &mut Vec<u8>, from: usize, null: Option<&[u8]>) {
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

/// Connects to the server and runs `session-statements()`.
pub(super) fn open(opts: &SqlOptions) -> std::io::Result<Connected> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let server = &opts.server;
    let mut config = tokio_postgres::Config::new();
    match server.host.as_str() {
        "" => config.host_path(SOCKET_DIR),
        path if path.starts_with('/') => config.host_path(path),
        host => config.host(host),
    };
    config
        .port(server.port.unwrap_or(5432))
        .user(&server.username)
        .dbname(&opts.database)
        .application_name("sluice")
        .connect_timeout(CONNECT_TIMEOUT)
        .keepalives(true);
    if !server.password.is_empty() {
        config.password(&server.password);
    }
    // The whole of it in the connect's time: a server that accepts and then says nothing
    // does not hold the sender (nor a stop) longer.
    let connecting = async {
        let (client, connection) = config.connect(NoTls).await?;
        let label = opts.label.clone();
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                crate::own_log::error(format!("{label}: the connection to PostgreSQL ended: {e}"));
            }
        });
        for statement in &opts.session_statements {
            client.batch_execute(statement).await?;
        }
        Ok::<_, tokio_postgres::Error>(client)
    };
    let client = runtime
        .block_on(async { tokio::time::timeout(CONNECT_TIMEOUT, connecting).await })
        .map_err(|_| {
            std::io::Error::new(std::io::ErrorKind::TimedOut, "no answer from the server")
        })?
        .map_err(|e| std::io::Error::other(said(&e)))?;
    Ok(Box::new(PgWire {
        runtime,
        client,
        ddl: opts.ddl(),
        made: HashMap::new(),
        refusals: Refusals::new(&opts.label),
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

/// Why rows were not stored.
enum Refused {
    /// The row alone: a constraint, a value its column cannot hold; of `COPY`'s rows, the
    /// one the database named (from 1).
    Row(String, Option<usize>),
    /// Every row of its table: the table is missing under `dont-create-tables`, its
    /// statement is wrong (a column type the database does not know).
    Table(String),
    /// The connection, the server: sent again on another connection.
    Broken(std::io::Error),
}

/// The database's words for `e`: its message and detail.
fn said(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => match db.detail() {
            Some(detail) => format!("{}: {detail}", db.message()),
            None => db.message().to_string(),
        },
        None => e.to_string(),
    }
}

/// Whether `e` refuses a row, the rows of a table, or is the connection's.
fn refused(e: tokio_postgres::Error) -> Refused {
    let Some(code) = e.code() else {
        return Refused::Broken(std::io::Error::other(e));
    };
    let class = &code.code()[..2];
    if class == "22" || class == "23" || *code == SqlState::PROGRAM_LIMIT_EXCEEDED {
        Refused::Row(said(&e), line_named(&e))
    } else if class == "42" && *code != SqlState::INSUFFICIENT_PRIVILEGE {
        // Permissions are an administrator's to mend: the rows wait for them.
        Refused::Table(said(&e))
    } else {
        Refused::Broken(std::io::Error::other(said(&e)))
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

impl From<Refused> for Failure {
    fn from(r: Refused) -> Failure {
        Failure::Broken(match r {
            Refused::Broken(e) => e,
            Refused::Row(why, _) | Refused::Table(why) => std::io::Error::other(why),
        })
    }
}

impl PgWire {
    /// Runs `work` on the connection; given up on once sluice has been stopping for the
    /// grace.
    fn wait<T>(
        &self,
        work: impl Future<Output = Result<T, tokio_postgres::Error>>,
        give_up: GiveUp,
    ) -> Result<T, Refused> {
        self.runtime.block_on(async {
            tokio::pin!(work);
            let mut since = None;
            loop {
                tokio::select! {
                    done = &mut work => return done.map_err(refused),
                    _ = tokio::time::sleep(TICK) => {
                        stalled(&mut since, give_up, STOP_GRACE).map_err(Refused::Broken)?;
                    }
                }
            }
        })
    }

    fn run(&self, statement: &str, give_up: GiveUp) -> Result<(), Refused> {
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
                    for c in &self.ddl.columns {
                        let has = found
                            .columns()
                            .iter()
                            .any(|e| e.name().eq_ignore_ascii_case(&c.name));
                        if !has {
                            self.run(&Ddl::add_column(table, c), give_up)?;
                            if self.ddl.indexes.contains(&c.name) {
                                self.run(&Ddl::create_index(table, &c.name), give_up)?;
                            }
                        }
                    }
                }
                Err(Refused::Table(_)) => {
                    let mut statements = vec![self.ddl.create_table(table)];
                    for column in &self.ddl.indexes {
                        statements.push(Ddl::create_index(table, column));
                    }
                    if let Err(e) = self.run(&statements.join("; "), give_up) {
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
    fn copy(&self, table: &str, lines: &[&[u8]], give_up: GiveUp) -> Result<u64, Refused> {
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
    }

    /// Stores `lines` of `table` (made) in the open transaction; returns how many were
    /// refused.
    fn store(&mut self, table: &str, lines: &[&[u8]], give_up: GiveUp) -> Result<usize, Refused> {
        let mut refused = 0;
        let mut parts = vec![(0, lines.len())];
        while let Some((from, to)) = parts.pop() {
            if from == to {
                continue;
            }
            self.run("SAVEPOINT rows", give_up)?;
            let why = match self.copy(table, &lines[from..to], give_up) {
                Ok(_) => {
                    self.run("RELEASE SAVEPOINT rows", give_up)?;
                    continue;
                }
                Err(Refused::Broken(e)) => return Err(Refused::Broken(e)),
                Err(why) => why,
            };
            self.run(
                "ROLLBACK TO SAVEPOINT rows; RELEASE SAVEPOINT rows",
                give_up,
            )?;
            match why {
                Refused::Table(why) => {
                    // Every row left of the table.
                    let left = (to - from) + parts.iter().map(|(a, b)| b - a).sum::<usize>();
                    self.refusals.say(table.as_bytes(), left, &why);
                    self.made.remove(table);
                    return Ok(refused + left);
                }
                Refused::Row(why, _) if to - from == 1 => {
                    self.refusals.say(table.as_bytes(), 1, &why);
                    refused += 1;
                }
                Refused::Row(_, named) => {
                    // Before the row named, the row alone, after it; halves without a name.
                    match named.filter(|&n| n >= 1 && n <= to - from) {
                        Some(n) => {
                            let bad = from + n - 1;
                            parts.extend([(bad + 1, to), (bad, bad + 1), (from, bad)]);
                        }
                        None => {
                            let half = from + (to - from) / 2;
                            parts.extend([(half, to), (from, half)]);
                        }
                    }
                }
                Refused::Broken(_) => unreachable!("returned above"),
            }
        }
        Ok(refused)
    }

    /// Writes the rows from `pos` in one transaction.
    fn write(
        &mut self,
        batches: &[Batch],
        pos: &mut Position,
        give_up: GiveUp,
    ) -> Result<(), Refused> {
        let rows = rows_from(batches, pos);
        let mut refused = 0;
        // The rows of each table, in order.
        let mut tables: Vec<(&str, Vec<&[u8]>)> = Vec::new();
        let mut which: HashMap<&str, usize> = HashMap::new();
        for row in &rows {
            let f = fields(row);
            let (table, line) = (f.first().copied().flatten(), f.get(1).copied().flatten());
            let name = match table_name(table) {
                Ok(name) => name,
                Err(why) => {
                    self.refusals.say(table.unwrap_or_default(), 1, &why);
                    refused += 1;
                    continue;
                }
            };
            let i = *which.entry(name).or_insert_with(|| {
                tables.push((name, Vec::new()));
                tables.len() - 1
            });
            tables[i].1.push(line.unwrap_or_default());
        }
        // Tables are made and checked before the transaction, which an error would end.
        let mut made = Vec::with_capacity(tables.len());
        for (table, lines) in tables {
            match self.make(table, give_up) {
                Ok(()) => made.push((table, lines)),
                Err(Refused::Table(why) | Refused::Row(why, _)) => {
                    self.refusals.say(table.as_bytes(), lines.len(), &why);
                    refused += lines.len();
                }
                Err(broken) => return Err(broken),
            }
        }
        self.run("BEGIN", give_up)?;
        for (table, lines) in &made {
            refused += self.store(table, lines, give_up)?;
        }
        self.run("COMMIT", give_up)?;
        skip_rows(batches, pos, rows.len(), refused);
        Ok(())
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
        self.write(batches, pos, give_up).map_err(Failure::from)
    }

    fn closed(&self) -> bool {
        self.client.is_closed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(value: &[u8], null: Option<&[u8]>) -> Vec<u8> {
        let mut out = b"x\t".to_vec();
        out.extend_from_slice(value);
        copy_text(&mut out, 2, null);
        out.split_off(2)
    }

    #[test]
    fn values_become_copy_text() {
        assert_eq!(text(b"plain words", None), b"plain words");
        assert_eq!(text(b"a\tb\nc\\d\re", None), b"a\\tb\\nc\\\\d\\re");
        assert_eq!(text(b"", Some(b"")), b"\\N");
        assert_eq!(text(b"-", Some(b"")), b"-");
        assert_eq!(text(b"caf\xe9", None), "caf\u{fffd}".as_bytes());
    }
}
