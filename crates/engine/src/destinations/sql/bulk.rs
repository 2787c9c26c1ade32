//! How PostgreSQL's and MariaDB's wires write a batch, the same for both: its rows (a line
//! of tab-separated text each, made where the message was formatted) grouped by table; the
//! tables made and checked before the transaction; then in one transaction a bulk load a
//! table (`COPY`, `LOAD DATA`) under a savepoint, committed before the batch is acknowledged.
//!
//! A bulk load stores all its rows or none. When the database refuses one (a constraint, a
//! value its column cannot hold), the load is rolled back to its savepoint and the rows sent
//! again in parts — the rows before the one the database named, that row alone, the rows
//! after; halves when it named none — until the refused rows stand alone: they are counted
//! and said, the others stored.

use super::store::{fields, rows_from, skip_rows, table_name, Refusals};
use crate::destinations::link::{Failure, GiveUp, Position};
use crate::destinations::queue::Batch;
use std::collections::HashMap;

/// Why rows were not stored.
pub(super) enum Refused {
    /// The row alone: a constraint, a value its column cannot hold; of a load's rows, the
    /// one the database named (counted from 1).
    Row(String, Option<usize>),
    /// Every row of its table: the table is missing under `dont-create-tables`, its
    /// statement is wrong (a column type the database does not know).
    Table(String),
    /// The connection, the server: the batch is sent again on another connection.
    Broken(std::io::Error),
}

impl From<Refused> for Failure {
    fn from(r: Refused) -> Failure {
        Failure::Broken(match r {
            Refused::Broken(e) => e,
            Refused::Row(why, _) | Refused::Table(why) => std::io::Error::other(why),
        })
    }
}

/// What a database's wire does for [`write`].
pub(super) trait Bulk {
    /// Runs a statement (`BEGIN`, `SAVEPOINT sluice_rows`…).
    fn run(&mut self, statement: &str, give_up: GiveUp) -> Result<(), Refused>;
    /// Makes `table` as syslog-ng does (unless told not to) or checks it is there; ready to
    /// be loaded.
    fn make(&mut self, table: &str, give_up: GiveUp) -> Result<(), Refused>;
    /// Loads `lines` into `table` in one statement.
    fn load(&mut self, table: &str, lines: &[&[u8]], give_up: GiveUp) -> Result<(), Refused>;
    /// Forgets that `table` was made: it is checked again before its next rows.
    fn forget(&mut self, table: &str);
    fn refusals(&mut self) -> &mut Refusals;
}

/// Writes the rows from `pos` in one transaction, moving `pos` past them.
pub(super) fn write(
    wire: &mut impl Bulk,
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
                let line = line.unwrap_or_default();
                wire.refusals()
                    .lines(table.unwrap_or_default(), &[line], &why);
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
        match wire.make(table, give_up) {
            Ok(()) => made.push((table, lines)),
            Err(Refused::Table(why) | Refused::Row(why, _)) => {
                wire.refusals().lines(table.as_bytes(), &lines, &why);
                refused += lines.len();
            }
            Err(broken) => return Err(broken),
        }
    }
    wire.run("BEGIN", give_up)?;
    for (table, lines) in &made {
        refused += store(wire, table, lines, give_up)?;
    }
    wire.run("COMMIT", give_up)?;
    skip_rows(batches, pos, rows.len(), refused);
    Ok(())
}

/// Stores `lines` of `table` (made) in the open transaction; returns how many were refused.
fn store(
    wire: &mut impl Bulk,
    table: &str,
    lines: &[&[u8]],
    give_up: GiveUp,
) -> Result<usize, Refused> {
    let mut refused = 0;
    let mut parts = vec![(0, lines.len())];
    while let Some((from, to)) = parts.pop() {
        if from == to {
            continue;
        }
        wire.run("SAVEPOINT sluice_rows", give_up)?;
        let why = match wire.load(table, &lines[from..to], give_up) {
            Ok(()) => {
                wire.run("RELEASE SAVEPOINT sluice_rows", give_up)?;
                continue;
            }
            Err(Refused::Broken(e)) => return Err(Refused::Broken(e)),
            Err(why) => why,
        };
        wire.run("ROLLBACK TO SAVEPOINT sluice_rows", give_up)?;
        wire.run("RELEASE SAVEPOINT sluice_rows", give_up)?;
        match why {
            Refused::Table(why) => {
                // Every row left of the table.
                let mut left: Vec<&[u8]> = lines[from..to].to_vec();
                for (a, b) in parts.iter().rev() {
                    left.extend_from_slice(&lines[*a..*b]);
                }
                wire.refusals().lines(table.as_bytes(), &left, &why);
                wire.forget(table);
                return Ok(refused + left.len());
            }
            Refused::Row(why, _) if to - from == 1 => {
                wire.refusals()
                    .lines(table.as_bytes(), &lines[from..to], &why);
                refused += 1;
            }
            Refused::Row(_, named) => parts.extend(split(from, to, named)),
            Refused::Broken(_) => unreachable!("returned above"),
        }
    }
    Ok(refused)
}

/// The parts `from..to` is sent again in, last first: before the row the database named (from
/// 1), the row alone, after it; halves when it named none (or a row not among them).
fn split(from: usize, to: usize, named: Option<usize>) -> Vec<(usize, usize)> {
    match named.filter(|&n| n >= 1 && n <= to - from) {
        Some(n) => {
            let bad = from + n - 1;
            vec![(bad + 1, to), (bad, bad + 1), (from, bad)]
        }
        None => {
            let half = from + (to - from) / 2;
            vec![(half, to), (from, half)]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_isolate_the_row_named_or_halve() {
        assert_eq!(split(10, 20, Some(3)), [(13, 20), (12, 13), (10, 12)]);
        assert_eq!(split(10, 20, Some(1)), [(11, 20), (10, 11), (10, 10)]);
        assert_eq!(split(10, 20, Some(10)), [(20, 20), (19, 20), (10, 19)]);
        assert_eq!(split(10, 20, Some(11)), [(15, 20), (10, 15)]);
        assert_eq!(split(10, 20, None), [(15, 20), (10, 15)]);
        assert_eq!(split(10, 12, None), [(11, 12), (10, 11)]);
    }
}
