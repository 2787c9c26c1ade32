//! The declaration of `sql()`: syslog-ng's options, read into a table template, columns with
//! their types, a template for each column's value and what makes a value NULL. Its runtime
//! is [`store`]: rows are written a batch at a time, one transaction a batch, committed before
//! the batch's messages are acknowledged.
//!
//! `type(sqlite3)` writes with [`sqlite`], `type(pgsql)` with [`pgsql`], `type(mysql)` (syslog-ng's
//! default) with [`mysql`]; the two servers share how a batch is written ([`bulk`]).

mod bulk;
mod mysql;
mod pgsql;
mod sqlite;
mod store;

use super::driver::{Built, DestinationContext, DestinationDriver, FormatOptions, Queue, Threaded};
use super::driver::{DATES, DISK_BUFFER, QUEUE, THREADED};
use super::fallback::Fallback;
use super::link::Connected;
use super::sender::Servers;
use crate::sql::{Kind, Server, SERVERS};
use sluice_config::declared::{read, Declared, Options};
use sluice_config::{ConfigError, Node};
use sluice_model::{Template, Zone};
use store::{Column, SqlDestination, SqlOptions, SqlTemplates};

/// The declaration: the names it answers to, its options, a valid use, its build.
pub static DRIVER: DestinationDriver = DestinationDriver {
    names: &["sql"],
    about: "Rows in an SQL database: PostgreSQL (with COPY), MariaDB/MySQL (with LOAD DATA) or SQLite, a transaction a batch, tables made as syslog-ng makes them.",
    options: &[DATES, QUEUE, DISK_BUFFER, THREADED, OPTIONS, SERVERS],
    sample: "sql(type(sqlite3) database(\"/var/log/logs.db\") columns(\"host\", \"message\") values(\"$HOST\", \"$MSG\"))",
    build,
};

/// The options of `sql()` itself.
const OPTIONS: &[Declared] = &[
    read("type", "type(sqlite3)").about("the database: `pgsql`, `mysql` or `sqlite3`", "mysql"),
    read("database", "database(\"/var/log/logs.db\")").about("the database's name; for SQLite its file", "logs"),
    read("table", "table(\"messages_${R_YEAR}${R_MONTH}${R_DAY}\")").about("the template of the table a row goes to; a name of letters, digits and `_`, else the row is refused and counted", "messages"),
    read("columns", "columns(\"host varchar(32)\", \"message\")").about("the table's columns, each a name and an optional type", "required"),
    read("values", "values(\"$HOST_FROM\", \"$MSGHDR$MSG\")").about("a template for each column's value", "required"),
    read("indexes", "indexes(\"host\")").about("the columns an index is made on, with the table", "none"),
    read("null", "null(\"\")").about("a value that is stored as NULL", "none"),
    read("flags", "flags(dont-create-tables)").about("`dont-create-tables`: tables are not made or changed; `explicit-commits`: accepted (a transaction a batch is always how rows are written)", "none"),
    read("session_statements", "session-statements(\"PRAGMA journal_mode=WAL\")").about("statements run once a connection is opened", "none"),
    read("create_statement_append", "create-statement-append(\" WITHOUT ROWID\")").about("text added after the columns of a table it makes", "none"),
    read("fallback_file", "fallback-file(\"/var/log/sluice/refused-rows.jsonl\")").about("where rows the database refuses are kept, a JSON line each with the reason", "none: counted and said"),
    read("local_time_zone", "local-time-zone(\"Europe/Budapest\")").about("the time zone of the dates in `table()`'s name", "the machine's"),
];

/// `sql(type(sqlite3) database("/var/log/logs.db") columns("host", "message") values("$HOST", "$MSG"))`.
fn build(node: &Node, o: &mut Options, cx: &DestinationContext) -> Result<Built, ConfigError> {
    let format = FormatOptions::read_part(o, cx, DATES)?;
    let queue = Queue::read(o, cx.globals)?;
    let threaded = Threaded::read(o, cx)?;
    let example = "sql(type(sqlite3) database(\"/var/log/logs.db\") columns(\"host\", \"message\") values(\"$HOST\", \"$MSG\"))";
    let needed = |what: &str| ConfigError::new(node.pos, format!("sql() needs {what}: {example}"));
    let kind = Kind::read(o)?;
    let text = |o: &mut Options,
                name: &str|
     -> Result<Option<(String, sluice_config::Pos)>, ConfigError> {
        match o.last(name) {
            Some(opt) => {
                let v = opt.value()?;
                Ok(Some((v.text.clone(), v.pos)))
            }
            None => Ok(None),
        }
    };
    let database = text(o, "database")?.map_or_else(|| "logs".to_string(), |(t, _)| t);
    let server = Server::read(o)?;
    let template = |text: &str, pos| -> Result<Template, ConfigError> {
        let mut t = Template::compile_in(text, cx.names).map_err(|e| ConfigError::new(pos, e))?;
        t.dates = format.dates.clone();
        Ok(t)
    };
    // The table's name shows dates in the local time zone, as syslog-ng's.
    let local = match o.last("local_time_zone") {
        Some(opt) => {
            let v = opt.value()?;
            Zone::parse(&v.text).map_err(|e| ConfigError::new(v.pos, e))?
        }
        None => Zone::local().clone(),
    };
    let table_template = |text: &str, pos| -> Result<Template, ConfigError> {
        let mut t = template(text, pos)?;
        t.dates.zone = Some(local.clone());
        Ok(t)
    };
    let table = match text(o, "table")? {
        Some((t, pos)) => {
            let compiled = table_template(&t, pos)?;
            if let Some(literal) = compiled.literal() {
                if !crate::sql::valid_name(literal) {
                    return Err(ConfigError::new(
                        pos,
                        format!("'{t}' is not a table name: letters, digits and '_'"),
                    ));
                }
            }
            compiled
        }
        None => table_template("messages", node.pos)?,
    };
    let mut columns = Vec::new();
    let mut column_pos = node.pos;
    if let Some(opt) = o.last("columns") {
        column_pos = opt.pos;
        for v in opt.values() {
            columns.push(Column::parse(&v.text).map_err(|e| ConfigError::new(v.pos, e))?);
        }
    }
    let mut values = Vec::new();
    if let Some(opt) = o.last("values") {
        for v in opt.values() {
            values.push(template(&v.text, v.pos)?);
        }
    }
    if columns.is_empty() || values.is_empty() {
        return Err(needed(
            "columns() and values() (syslog-ng 3.38 needs them too)",
        ));
    }
    if columns.len() != values.len() {
        return Err(ConfigError::new(
            column_pos,
            format!(
                "{} columns and {} values: each column needs its value",
                columns.len(),
                values.len()
            ),
        ));
    }
    let mut indexes = Vec::new();
    if let Some(opt) = o.last("indexes") {
        for v in opt.values() {
            if !columns.iter().any(|c| c.name == v.text) {
                return Err(ConfigError::new(
                    v.pos,
                    format!("an index on '{}', which is not one of the columns", v.text),
                ));
            }
            indexes.push(v.text.clone());
        }
    }
    let null = text(o, "null")?.map(|(t, _)| t);
    let mut create_tables = true;
    for opt in o.all("flags") {
        for v in opt.values() {
            match sluice_config::normalize(&v.text).as_str() {
                "dont_create_tables" => create_tables = false,
                "explicit_commits" => {}
                other => {
                    return Err(ConfigError::unknown(
                        v.pos,
                        "flag",
                        other,
                        "sql()",
                        &["dont-create-tables", "explicit-commits"],
                    ))
                }
            }
        }
    }
    let mut session_statements = Vec::new();
    for opt in o.all("session_statements") {
        for v in opt.values() {
            session_statements.push(v.text.clone());
        }
    }
    let create_statement_append = text(o, "create_statement_append")?
        .map(|(t, _)| t)
        .unwrap_or_default();
    let label = cx.label();
    let opts = SqlOptions {
        label,
        kind,
        server,
        database,
        columns,
        indexes,
        create_tables,
        session_statements,
        create_statement_append,
        fallback: text(o, "fallback_file")?
            .map(|(path, _)| std::sync::Arc::new(Fallback::new(path.into()))),
    };
    let disk_buffer = queue.disk_buffer(o, || {
        format!(
            "{}-sql-{:08x}",
            cx.name,
            crc32fast::hash(opts.name().as_bytes())
        )
    })?;
    let pacing = threaded.pacing(&queue);
    let (component, id) = cx.counted_as(node);
    let counters = cx.stats.destination(&component, &id, &opts.name());
    Ok(std::sync::Arc::new(SqlDestination::new(
        SqlTemplates {
            table,
            values,
            null,
        },
        opts,
        threaded.workers,
        pacing,
        disk_buffer,
        counters,
    )))
}

/// Where a sender's rows go: the database of `type()`, a wire of its own a connection.
impl Servers for SqlOptions {
    fn count(&self) -> usize {
        1
    }

    fn name(&self, _: usize) -> String {
        SqlOptions::name(self)
    }

    fn open(&self, _: usize) -> std::io::Result<Connected> {
        match self.kind {
            Kind::Sqlite => sqlite::open(self),
            Kind::Pgsql => pgsql::open(self),
            Kind::Mysql => mysql::open(self),
        }
    }

    fn probe(&self, _: usize) -> bool {
        true
    }
}
