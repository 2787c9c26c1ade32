//! `sql()` as a source: the rows of a database table — PostgreSQL, MariaDB/MySQL or SQLite —
//! followed by an increasing column (`id`, a time), as fluentd's and nxlog's database inputs
//! and syslog-ng PE read tables. A message a row: the row is read as a JSON object
//! (`format(json)`), so its columns become name-value pairs and columns named `message`,
//! `host`, `program`, `pid`, `date`… set the message's own fields — a table `sql()` the
//! destination wrote reads back whole. Where it has read to is kept in the persist file once
//! delivered ([`reader`]).

mod reader;

use super::driver::{no_value, Built, Common, SourceDriver};
use super::Local;
use crate::sql::{valid_name, Kind, Server, SERVERS};
use reader::SqlSource;
use sluice_config::declared::{read, Declared, Options};
use sluice_config::{ConfigError, Node};
use sluice_model::ingest::Format;
use sluice_protocol::framing::Framing;
use std::sync::Arc;
use std::time::Duration;

/// The declaration: the names it answers to, its options, a valid use, its build.
pub static DRIVER: SourceDriver = SourceDriver {
    names: &["sql"],
    about: "The rows of a database table (PostgreSQL, MariaDB/MySQL, SQLite) followed by an increasing column, a message a row; where it read to kept across restarts.",
    options: &[SQL, SERVERS],
    sample: "sql(type(sqlite3) database(\"/var/lib/app/events.db\") table(\"events\"))",
    build: sql,
};

/// The options of `sql()` the source.
const SQL: &[Declared] = &[
    read("type", "type(pgsql)").about("the database: `pgsql`, `mysql` or `sqlite3`", "mysql"),
    read("database", "database(\"/var/lib/app/events.db\")").about("the database's name; for SQLite its file", "logs"),
    read("table", "table(\"events\")").about("the table it reads: letters, digits and `_`, `schema.table` too", "required"),
    read("columns", "columns(\"id\", \"host\", \"message\")").about("the columns a message is made of", "all of them"),
    read("position_column", "position-column(\"id\")").about("the column whose values only grow (an id, a time): rows are read in its order, and where reading got to is its value", "id"),
    read("fetch_limit", "fetch-limit(1000)").about("the most rows one query reads", "1000"),
    read("fetch_interval", "fetch-interval(1)").about("seconds between queries once it has read every row", "1"),
    read("session_statements", "session-statements(\"SET search_path TO app\")").about("statements run once a connection is opened", "none"),
];

/// `sql(type(pgsql) host("db") database("app") table("events") position-column("id"))`.
fn sql(node: &Node, o: &mut Options, common: Common) -> Result<Built, ConfigError> {
    no_value(node)?;
    let example = "sql(type(pgsql) host(\"db\") database(\"app\") table(\"events\"))";
    let kind = Kind::read(o)?;
    let server = Server::read(o)?;
    let text = |o: &mut Options, name: &str| -> Result<Option<sluice_config::Value>, ConfigError> {
        o.last(name).map(|opt| opt.value().cloned()).transpose()
    };
    let database = text(o, "database")?.map_or_else(|| "logs".to_string(), |v| v.text);
    let table = match text(o, "table")? {
        Some(v) if valid_table(&v.text) => v.text,
        Some(v) => {
            return Err(ConfigError::new(
                v.pos,
                format!(
                    "'{}' is not a table name: letters, digits and '_', and one '.' after a schema",
                    v.text
                ),
            ))
        }
        None => {
            return Err(ConfigError::new(
                node.pos,
                format!("sql() needs table(): {example}"),
            ))
        }
    };
    let column = |v: &sluice_config::Value| {
        if valid_name(v.text.as_bytes()) {
            Ok(v.text.clone())
        } else {
            Err(ConfigError::new(
                v.pos,
                format!("'{}' is not a column name: letters, digits and '_'", v.text),
            ))
        }
    };
    let columns = match o.last("columns") {
        Some(opt) => Some(opt.values().map(column).collect::<Result<Vec<_>, _>>()?),
        None => None,
    };
    let position = match text(o, "position_column")? {
        Some(v) => column(&v)?,
        None => "id".to_string(),
    };
    let fetch_limit = o
        .last("fetch_limit")
        .map(Node::u64)
        .transpose()?
        .unwrap_or(1000)
        .clamp(1, 100_000) as usize;
    let fetch_interval = Duration::from_millis(
        o.last("fetch_interval")
            .map(Node::u64)
            .transpose()?
            .unwrap_or(1)
            .clamp(1, 3600)
            * 1000,
    );
    let mut session = Vec::new();
    for opt in o.all("session_statements") {
        session.extend(opt.values().map(|v| v.text.clone()));
    }
    let mut common = common;
    // The host a row names is the machine that logged it, not the one that read the table.
    if !node.options().any(|opt| opt.key() == "keep_hostname") {
        common.opts.keep_hostname = true;
    }
    let mut ingest = common.opts.ingest(common.cx.name, common.cx.globals);
    ingest.format = Format::Json;
    let ingest = Arc::new(ingest);
    let window = common.opts.log_iw_size;
    let name = server.name(kind, &database);
    let local = Local {
        reader: common.reader(node, &ingest, "sql", Framing::Newline, window, &name),
        names: common.names(),
        source_name: common.cx.name.clone(),
        source_id: common.cx.id,
    };
    Ok(Arc::new(SqlSource {
        local,
        kind,
        server,
        database,
        table,
        columns,
        position,
        fetch_limit,
        fetch_interval,
        session,
        time_reopen: common.cx.globals.time_reopen.max(Duration::from_secs(1)),
    }))
}

/// A table name: `events`, or `schema.events`, each part a name sluice writes into SQL.
fn valid_table(table: &str) -> bool {
    let parts: Vec<&str> = table.split('.').collect();
    parts.len() <= 2 && parts.iter().all(|p| valid_name(p.as_bytes()))
}

#[cfg(test)]
mod tests {
    #[test]
    fn tables_may_name_their_schema() {
        assert!(super::valid_table("events"));
        assert!(super::valid_table("app.events"));
        assert!(!super::valid_table("a.b.c"));
        assert!(!super::valid_table("events; DROP TABLE x"));
        assert!(!super::valid_table(""));
    }
}
