//! `sql()` end to end, against SQLite files and the PostgreSQL and MariaDB servers the tests
//! start (`tests/common/postgres.rs`, `tests/common/mariadb.rs`): the tables, indexes and rows
//! syslog-ng 3.38's `sql()` makes of the same messages (`syslog-ng-mod-sql` with libdbi's
//! drivers); a row the database refuses costs that row alone; a table name a sender makes up
//! is refused at the row; a server killed under load, a reload while rows arrive and a locked
//! table lose nothing and hold no stop.

mod common;

use common::{free_port, send_tcp, wait_until, Framing, Running, Server};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// The schema of `db` (`sqlite_master`'s statements, in order) and the rows of `table`, each
/// value with its type (`Integer(42)`, `Text("a")`, `Null`).
fn read(db: &Path, table: &str) -> (Vec<String>, Vec<Vec<String>>) {
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut s = conn
        .prepare("SELECT sql FROM sqlite_master ORDER BY rowid")
        .unwrap();
    let schema = s
        .query_map([], |r| r.get::<_, String>(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let mut s = conn.prepare(&format!("SELECT * FROM {table}")).unwrap();
    let n = s.column_count();
    let rows = s
        .query_map([], |r| {
            Ok((0..n)
                .map(|i| format!("{:?}", r.get::<_, rusqlite::types::Value>(i).unwrap()))
                .collect::<Vec<_>>())
        })
        .unwrap()
        .map(Result::unwrap)
        .collect();
    (schema, rows)
}

fn config(port: u16, db: &Path, extra: &str) -> String {
    format!(
        r#"@version: 3.38
        source s {{ network(ip(127.0.0.1) port({port}) transport(tcp)); }};
        destination d {{ sql(type(sqlite3) database("{}") table("msgs_${{PROGRAM}}")
            columns("id int", "host varchar(32)", "message") values("${{PID}}", "$HOST", "$MSG")
            indexes("host") null("") {extra}); }};
        log {{ source(s); destination(d); flags(flow-control); }};"#,
        db.display()
    )
}

const LINES: &[u8] = b"<13>Nov 24 10:00:00 host1 app[42]: hello world\n\
<13>Nov 24 10:00:01 host2 app: second, 'quoted' \"too\"; DROP TABLE msgs_app\n\
<13>Nov 24 10:00:02 host3 other[7]: \n";

/// The rows a server's `sql()` destinations say they wrote (syslog-ng counts a row once its
/// INSERT and commit returned; sluice once its batch is committed).
fn written(s: &Running) -> u64 {
    let text = match s.kind {
        Server::Sluice => common::ctl(s, &["stats"]).1,
        Server::SyslogNg => {
            let out = std::process::Command::new("syslog-ng-ctl")
                .args(["stats", "-c"])
                .arg(s.dir.path().join("ctl"))
                .output()
                .expect("syslog-ng-ctl");
            String::from_utf8_lossy(&out.stdout).into_owned()
        }
    };
    text.lines()
        .filter(|l| l.starts_with("dst.sql;") && l.contains(";a;written;"))
        .filter_map(|l| l.rsplit(';').next()?.parse::<u64>().ok())
        .sum()
}

/// Runs `kind` over LINES into a fresh database; the database's path. The database is read
/// only once the server has stopped: a reader makes syslog-ng's INSERT fail as busy (libdbi
/// sets no busy timeout), and its `sql()` then waits `time-reopen()`, 60 s.
fn stored(kind: Server, dir: &Path) -> std::path::PathBuf {
    let db = dir.join(format!("{kind:?}.db"));
    let port = free_port();
    let mut s = Running::start(kind, &config(port, &db, ""));
    s.wait_tcp(port);
    send_tcp(port, LINES, Framing::Newline);
    let done = wait_until(Duration::from_secs(20), || written(&s) == 3);
    assert!(done, "{kind:?}: {}", s.stderr());
    s.terminate();
    db
}

#[test]
fn tables_indexes_and_rows_are_those_syslog_ngs_sql_makes() {
    if common::syslog_ng().is_none() || !Path::new("/usr/lib/syslog-ng/3.38/libafsql.so").exists() {
        eprintln!(
            "SKIPPED: syslog-ng's sql() (syslog-ng-mod-sql, libdbd-sqlite3) is not installed"
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ours = stored(Server::Sluice, dir.path());
    let theirs = stored(Server::SyslogNg, dir.path());
    for table in ["msgs_app", "msgs_other"] {
        let (our_schema, our_rows) = read(&ours, table);
        let (their_schema, their_rows) = read(&theirs, table);
        assert_eq!(our_schema, their_schema);
        assert_eq!(our_rows, their_rows, "{table}");
    }
    let (schema, rows) = read(&ours, "msgs_app");
    assert!(schema.contains(&"CREATE INDEX msgs_app_host_idx ON msgs_app (host)".to_string()));
    assert_eq!(
        rows[1][2],
        r#"Text("second, 'quoted' \"too\"; DROP TABLE msgs_app")"#
    );
    let (_, other) = read(&ours, "msgs_other");
    // The PID, an int column's integer; the empty message, null("")'s NULL.
    assert_eq!(
        (other[0][0].as_str(), other[0][2].as_str()),
        ("Integer(7)", "Null")
    );
}

/// A row that breaks a constraint among good ones is the only one not stored; it is counted
/// and said. A table name made of a sender's program that is no name is refused at the row.
#[test]
fn a_refused_row_costs_that_row_alone() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("logs.db");
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch(
        "CREATE TABLE msgs_app (id int, host varchar(32), message text CHECK (message NOT LIKE '%poison%'))",
    )
    .unwrap();
    drop(conn);
    let port = free_port();
    let fallback = dir.path().join("refused.jsonl");
    let extra = format!("batch-lines(100) fallback-file(\"{}\")", fallback.display());
    let mut s = Running::start(Server::Sluice, &config(port, &db, &extra));
    s.wait_tcp(port);
    let mut lines = String::new();
    for i in 0..1000 {
        let text = if i == 500 {
            "poison".to_string()
        } else {
            format!("m{i}")
        };
        lines.push_str(&format!("<13>Nov 24 10:00:00 h app[{i}]: {text}\n"));
    }
    lines.push_str("<13>Nov 24 10:00:00 h x;y[1]: elsewhere\n");
    send_tcp(port, lines.as_bytes(), Framing::Newline);
    let count = || {
        rusqlite::Connection::open(&db)
            .and_then(|c| c.query_row("SELECT count(*) FROM msgs_app", [], |r| r.get::<_, i64>(0)))
            .unwrap_or(0)
    };
    assert!(
        wait_until(Duration::from_secs(20), || count() == 999),
        "{} rows; {}",
        count(),
        s.stderr()
    );
    let dropped = "dst.sql;d#0;sqlite3,".to_string() + &db.display().to_string() + ";a;dropped";
    assert!(
        wait_until(Duration::from_secs(10), || common::stat(&s, &dropped) == 2),
        "{}\n{}",
        s.stderr(),
        common::ctl(&s, &["stats"]).1
    );
    let said = s.stderr();
    assert!(
        said.contains("a row for table 'msgs_app' refused"),
        "{said}"
    );
    assert!(said.contains("'msgs_x;y' is not a table name"), "{said}");
    let kept = std::fs::read_to_string(&fallback).unwrap();
    let poison: serde_json::Value = serde_json::from_str(kept.lines().next().unwrap()).unwrap();
    assert_eq!(
        (
            &poison["table"],
            &poison["values"]["id"],
            &poison["values"]["message"]
        ),
        (&"msgs_app".into(), &"500".into(), &"poison".into()),
        "{kept}"
    );
    assert!(
        poison["reason"].as_str().unwrap().contains("CHECK"),
        "{kept}"
    );
}

// ---- Database servers: PostgreSQL and MariaDB ------------------------------------------

use common::mariadb::{mariadb, Mariadb};
use common::postgres::{postgres, Postgres};
use std::sync::RwLock;

/// Taken to read by the tests that use a shared server, to write by those that kill one.
static SERVERS: RwLock<()> = RwLock::new(());

/// A database server the tests start, and how they speak to it.
#[derive(Clone, Copy)]
enum Db {
    Pg(&'static Postgres),
    My(&'static Mariadb),
}

fn pg() -> Option<Db> {
    postgres().map(Db::Pg)
}

fn my() -> Option<Db> {
    mariadb().map(Db::My)
}

impl Db {
    /// `type()`.
    fn kind(self) -> &'static str {
        match self {
            Db::Pg(_) => "pgsql",
            Db::My(_) => "mysql",
        }
    }

    fn port(self) -> u16 {
        match self {
            Db::Pg(s) => s.port,
            Db::My(s) => s.port,
        }
    }

    fn login(self) -> (&'static str, &'static str) {
        match self {
            Db::Pg(_) => (common::postgres::USER, common::postgres::PASSWORD),
            Db::My(_) => (common::mariadb::USER, common::mariadb::PASSWORD),
        }
    }

    /// A database of the test's own.
    fn database(self) -> String {
        match self {
            Db::Pg(s) => s.database(),
            Db::My(s) => s.database(),
        }
    }

    /// The rows `sql` returns in `database`, columns split by `|`, `NULL` for NULL.
    fn query(self, database: &str, sql: &str) -> Result<Vec<String>, String> {
        match self {
            Db::Pg(s) => s.query(database, sql),
            Db::My(s) => Ok(s
                .query(database, sql)?
                .into_iter()
                .map(|l| l.replace('\t', "|"))
                .collect()),
        }
    }

    /// The number `sql` (a `count(*)`) returns; -1 when it fails.
    fn count(self, database: &str, sql: &str) -> i64 {
        self.query(database, sql)
            .ok()
            .and_then(|r| r.first()?.parse().ok())
            .unwrap_or(-1)
    }

    /// A table's columns (name, type, length) and indexes, and its rows.
    fn read(self, database: &str, table: &str) -> (Vec<String>, Vec<String>, Vec<String>) {
        let schema = match self {
            Db::Pg(_) => "'public'",
            Db::My(_) => "DATABASE()",
        };
        let columns = self
            .query(database, &format!("SELECT column_name, data_type, character_maximum_length FROM information_schema.columns WHERE table_schema = {schema} AND table_name = '{table}' ORDER BY ordinal_position"))
            .unwrap();
        let indexes = match self {
            Db::Pg(_) => format!("SELECT indexdef FROM pg_indexes WHERE tablename = '{table}' ORDER BY indexname"),
            Db::My(_) => format!("SELECT index_name, column_name FROM information_schema.statistics WHERE table_schema = DATABASE() AND table_name = '{table}' ORDER BY index_name"),
        };
        let indexes = self.query(database, &indexes).unwrap();
        let rows = self
            .query(database, &format!("SELECT * FROM {table}"))
            .unwrap();
        (columns, indexes, rows)
    }

    fn kill_9(self) {
        match self {
            Db::Pg(s) => s.kill_9(),
            Db::My(s) => s.kill_9(),
        }
    }

    fn restart(self) {
        match self {
            Db::Pg(s) => s.restart(),
            Db::My(s) => s.restart(),
        }
    }

    /// A session that holds `table` locked for two minutes; kill it to end it.
    fn lock(self, database: &str, table: &str) -> std::process::Child {
        match self {
            Db::Pg(s) => s.hold(
                database,
                &format!(
                    "BEGIN; LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(120);"
                ),
            ),
            Db::My(s) => s.hold(
                database,
                &format!("LOCK TABLES {table} WRITE; SELECT SLEEP(120);"),
            ),
        }
    }

    /// The driver libdbi needs for syslog-ng's sql() to speak to this server.
    fn dbd(self) -> &'static str {
        match self {
            Db::Pg(_) => "/usr/lib/x86_64-linux-gnu/dbd/libdbdpgsql.so",
            Db::My(_) => "/usr/lib/x86_64-linux-gnu/dbd/libdbdmysql.so",
        }
    }

    /// How sluice counts what its `sql()` destination `d` dropped.
    fn dropped(self, database: &str) -> String {
        format!(
            "dst.sql;d#0;{},127.0.0.1,{},{database};a;dropped",
            self.kind(),
            self.port()
        )
    }

    fn config(self, port: u16, database: &str, extra: &str) -> String {
        let (user, password) = self.login();
        format!(
            r#"@version: 3.38
            source s {{ network(ip(127.0.0.1) port({port}) transport(tcp) keep-hostname(yes)); }};
            destination d {{ sql(type({}) host("127.0.0.1") port("{}") username("{user}")
                password("{password}") database("{database}") table("msgs_${{PROGRAM}}")
                columns("id int", "host varchar(32)", "message") values("${{PID}}", "$HOST", "$MSG")
                indexes("host") null("") {extra}); }};
            log {{ source(s); destination(d); flags(flow-control); }};"#,
            self.kind(),
            self.port()
        )
    }
}

/// The same messages through syslog-ng's sql() and sluice's make the same tables, indexes
/// and rows.
fn same_tables_as_syslog_ng(db: Db) {
    let _shared = SERVERS.read().unwrap_or_else(|e| e.into_inner());
    if common::syslog_ng().is_none() || !Path::new(db.dbd()).exists() {
        eprintln!(
            "SKIPPED: syslog-ng's sql() over {} (syslog-ng-mod-sql, {}) is not installed",
            db.kind(),
            db.dbd()
        );
        return;
    }
    let mut databases = Vec::new();
    for kind in [Server::Sluice, Server::SyslogNg] {
        let database = db.database();
        let port = free_port();
        let mut s = Running::start(kind, &db.config(port, &database, ""));
        s.wait_tcp(port);
        send_tcp(port, LINES, Framing::Newline);
        let done = wait_until(Duration::from_secs(20), || written(&s) == 3);
        assert!(done, "{kind:?}: {}", s.stderr());
        s.terminate();
        databases.push(database);
    }
    for table in ["msgs_app", "msgs_other"] {
        let ours = db.read(&databases[0], table);
        let theirs = db.read(&databases[1], table);
        assert_eq!(ours, theirs, "{table}");
    }
    let (_, indexes, rows) = db.read(&databases[0], "msgs_app");
    assert_eq!(
        rows,
        [
            "42|host1|hello world",
            "NULL|host2|second, 'quoted' \"too\"; DROP TABLE msgs_app"
        ]
    );
    assert!(indexes[0].contains("msgs_app_host_idx"), "{indexes:?}");
    let (_, _, other) = db.read(&databases[0], "msgs_other");
    assert_eq!(other, ["7|host3|NULL"]);
}

#[test]
fn pgsql_tables_indexes_and_rows_are_those_syslog_ngs_sql_makes() {
    if let Some(db) = pg() {
        same_tables_as_syslog_ng(db);
        let database = db.database();
        let port = free_port();
        let mut s = Running::start(Server::Sluice, &db.config(port, &database, ""));
        s.wait_tcp(port);
        send_tcp(port, LINES, Framing::Newline);
        assert!(wait_until(Duration::from_secs(20), || written(&s) == 3));
        let (columns, indexes, _) = db.read(&database, "msgs_app");
        assert_eq!(
            columns,
            [
                "id|integer|NULL",
                "host|character varying|32",
                "message|text|NULL"
            ]
        );
        assert_eq!(
            indexes,
            ["CREATE INDEX msgs_app_host_idx ON public.msgs_app USING btree (host)"]
        );
    }
}

#[test]
fn mysql_tables_indexes_and_rows_are_those_syslog_ngs_sql_makes() {
    if let Some(db) = my() {
        same_tables_as_syslog_ng(db);
    }
}

/// Among 10,000 rows, one that breaks a constraint and one whose host is too long for its
/// column are the only ones not stored: counted as refused and said with the database's
/// words. A message that is not UTF-8 is stored, its bad bytes replaced; a table name a
/// sender makes up is refused at the row. The password is not said, nor shown with the
/// configuration.
fn a_refused_row_costs_that_row_alone_in(db: Db) {
    let database = db.database();
    db.query(
        &database,
        "CREATE TABLE msgs_app (id int, host varchar(32), message text CHECK (message NOT LIKE '%poison%'))",
    )
    .unwrap();
    let port = free_port();
    let kept = tempfile::tempdir().unwrap();
    let fallback = kept.path().join("refused.jsonl");
    let extra = format!("fallback-file(\"{}\")", fallback.display());
    let mut s = Running::start(Server::Sluice, &db.config(port, &database, &extra));
    s.wait_tcp(port);
    let mut lines = Vec::new();
    for i in 0..10_000 {
        let host = if i == 7000 {
            "h".repeat(40)
        } else {
            "h".into()
        };
        let text: &[u8] = match i {
            5000 => b"poison",
            6000 => b"caf\xe9 tab\there back\\slash",
            _ => b"",
        };
        lines.extend_from_slice(format!("<13>Nov 24 10:00:00 {host} app[{i}]: m{i} ").as_bytes());
        lines.extend_from_slice(text);
        lines.push(b'\n');
    }
    lines.extend_from_slice(b"<13>Nov 24 10:00:00 h x;y[1]: elsewhere\n");
    send_tcp(port, &lines, Framing::Newline);
    let count = || db.count(&database, "SELECT count(*) FROM msgs_app");
    assert!(
        wait_until(Duration::from_secs(30), || count() == 9998),
        "{} rows; {:?} {}",
        count(),
        db.query(&database, "SELECT seq FROM seq_0_to_9999 s LEFT JOIN msgs_app m ON m.id = s.seq WHERE m.id IS NULL"),
        s.stderr()
    );
    let dropped = db.dropped(&database);
    assert!(
        wait_until(Duration::from_secs(10), || common::stat(&s, &dropped) == 3),
        "{}\n{}",
        s.stderr(),
        common::ctl(&s, &["stats"]).1
    );
    let stored = db
        .query(&database, "SELECT message FROM msgs_app WHERE id = 6000")
        .unwrap();
    let expected = match db {
        Db::Pg(_) => "m6000 caf\u{fffd} tab\there back\\slash",
        // The client's batch mode writes tabs and backslashes escaped.
        Db::My(_) => "m6000 caf\u{fffd} tab\\there back\\\\slash",
    };
    assert_eq!(stored, [expected]);
    assert_eq!(
        db.count(
            &database,
            "SELECT count(*) FROM msgs_app WHERE id IN (5000, 7000)"
        ),
        0
    );
    let said = s.stderr();
    assert!(said.contains("for table 'msgs_app' refused"), "{said}");
    assert!(said.contains("'msgs_x;y' is not a table name"), "{said}");
    // Each refused row is kept with its reason.
    let kept: Vec<serde_json::Value> = std::fs::read_to_string(&fallback)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let mut ids: Vec<&str> = kept
        .iter()
        .map(|k| k["values"]["id"].as_str().unwrap())
        .collect();
    ids.sort();
    assert_eq!(ids, ["1", "5000", "7000"], "{kept:?}");
    for k in &kept {
        assert!(!k["reason"].as_str().unwrap().is_empty(), "{k}");
    }
    let poison = kept.iter().find(|k| k["values"]["id"] == "5000").unwrap();
    assert_eq!(poison["table"], "msgs_app");
    assert_eq!(poison["values"]["message"], "m5000 poison");
    let (_, config) = common::ctl(&s, &["config"]);
    assert!(config.contains(r#"password("*****")"#), "{config}");
    let password = db.login().1;
    assert!(
        !config.contains(password) && !said.contains(password),
        "{config}"
    );
}

#[test]
fn pgsql_a_refused_row_costs_that_row_alone() {
    if let Some(db) = pg() {
        let _shared = SERVERS.read().unwrap_or_else(|e| e.into_inner());
        a_refused_row_costs_that_row_alone_in(db);
    }
}

#[test]
fn mysql_a_refused_row_costs_that_row_alone() {
    if let Some(db) = my() {
        let _shared = SERVERS.read().unwrap_or_else(|e| e.into_inner());
        a_refused_row_costs_that_row_alone_in(db);
    }
}

/// A server that does not take `LOAD DATA LOCAL` (MySQL 8's default) is sent `INSERT`s: the
/// same rows stored, the same refused.
#[test]
fn mysql_without_load_data_local_rows_go_in_inserts() {
    if let Some(server) = mariadb() {
        let _alone = SERVERS.write().unwrap_or_else(|e| e.into_inner());
        server.root("SET GLOBAL local_infile = 0").unwrap();
        let ran =
            std::panic::catch_unwind(|| a_refused_row_costs_that_row_alone_in(Db::My(server)));
        server.root("SET GLOBAL local_infile = 1").unwrap();
        ran.unwrap();
    }
}

/// Under `flags(dont-create-tables)`, the rows of a table that is missing are counted as
/// refused and said; those of a table that is there are stored.
fn rows_of_a_missing_table_are_counted_in(db: Db) {
    let _shared = SERVERS.read().unwrap_or_else(|e| e.into_inner());
    let database = db.database();
    db.query(
        &database,
        "CREATE TABLE msgs_app (id int, host text, message text)",
    )
    .unwrap();
    let port = free_port();
    let mut s = Running::start(
        Server::Sluice,
        &db.config(port, &database, "flags(dont-create-tables)"),
    );
    s.wait_tcp(port);
    send_tcp(port, LINES, Framing::Newline);
    let dropped = db.dropped(&database);
    assert!(
        wait_until(Duration::from_secs(20), || common::stat(&s, &dropped) == 1),
        "{}",
        s.stderr()
    );
    assert_eq!(db.count(&database, "SELECT count(*) FROM msgs_app"), 2);
    assert!(s.stderr().contains("msgs_other"), "{}", s.stderr());
}

#[test]
fn pgsql_rows_of_a_missing_table_are_counted_when_tables_are_not_made() {
    if let Some(db) = pg() {
        rows_of_a_missing_table_are_counted_in(db);
    }
}

#[test]
fn mysql_rows_of_a_missing_table_are_counted_when_tables_are_not_made() {
    if let Some(db) = my() {
        rows_of_a_missing_table_are_counted_in(db);
    }
}

/// The server killed (`kill -9`) while rows arrive, and started again: every row is stored,
/// once; a transaction the kill cut is sent again whole.
fn killed_under_load_stores_every_row_once_in(db: Db) {
    let _alone = SERVERS.write().unwrap_or_else(|e| e.into_inner());
    let database = db.database();
    let port = free_port();
    let mut s = Running::start(
        Server::Sluice,
        &db.config(port, &database, "batch-lines(500) time-reopen(1)"),
    );
    s.wait_tcp(port);
    const N: usize = 50_000;
    let sender = std::thread::spawn(move || {
        let mut lines = String::new();
        for i in 0..N {
            lines.push_str(&format!("<13>Nov 24 10:00:00 h app[{i}]: m{i}\n"));
        }
        send_tcp(port, lines.as_bytes(), Framing::Newline);
    });
    let count = || db.count(&database, "SELECT count(*) FROM msgs_app");
    assert!(
        wait_until(Duration::from_secs(30), || count() > 1000),
        "{}",
        s.stderr()
    );
    db.kill_9();
    std::thread::sleep(Duration::from_millis(500));
    db.restart();
    sender.join().unwrap();
    assert!(
        wait_until(Duration::from_secs(60), || count() == N as i64),
        "{} of {N} rows; {}\n{}",
        count(),
        s.stderr(),
        common::ctl(&s, &["ledger"]).1
    );
    assert_eq!(
        db.count(&database, "SELECT count(DISTINCT id) FROM msgs_app"),
        N as i64
    );
}

#[test]
fn pgsql_killed_under_load_stores_every_row_once() {
    if let Some(db) = pg() {
        killed_under_load_stores_every_row_once_in(db);
    }
}

#[test]
fn mysql_killed_under_load_stores_every_row_once() {
    if let Some(db) = my() {
        killed_under_load_stores_every_row_once_in(db);
    }
}

/// A table another session holds locked takes nothing: the load waits, and a stop ends
/// within its grace all the same.
fn a_locked_table_does_not_hold_the_stop_in(db: Db) {
    let _shared = SERVERS.read().unwrap_or_else(|e| e.into_inner());
    let database = db.database();
    db.query(
        &database,
        "CREATE TABLE msgs_app (id int, host varchar(32), message text)",
    )
    .unwrap();
    let mut lock = db.lock(&database, "msgs_app");
    std::thread::sleep(Duration::from_millis(500));
    let port = free_port();
    let mut s = Running::start(Server::Sluice, &db.config(port, &database, ""));
    s.wait_tcp(port);
    send_tcp(
        port,
        b"<13>Nov 24 10:00:00 h app[1]: locked out\n",
        Framing::Newline,
    );
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(written(&s), 0, "{}", s.stderr());
    let took = s.terminate_within(Duration::from_secs(30));
    let _ = lock.kill();
    let _ = lock.wait();
    assert!(took < Duration::from_secs(15), "the stop took {took:?}");
}

#[test]
fn pgsql_a_locked_table_does_not_hold_the_stop() {
    if let Some(db) = pg() {
        a_locked_table_does_not_hold_the_stop_in(db);
    }
}

#[test]
fn mysql_a_locked_table_does_not_hold_the_stop() {
    if let Some(db) = my() {
        a_locked_table_does_not_hold_the_stop_in(db);
    }
}

/// Reloads that change the destination while rows arrive: the new one takes over what the old
/// one queued; every row is stored once.
fn a_reload_while_rows_arrive_stores_each_once_in(db: Db) {
    let _shared = SERVERS.read().unwrap_or_else(|e| e.into_inner());
    let database = db.database();
    let port = free_port();
    let config = |n: u32| db.config(port, &database, &format!("batch-lines({})", 100 * n));
    let mut s = Running::start(Server::Sluice, &config(1));
    s.wait_tcp(port);
    const N: usize = 20_000;
    let sending = std::thread::spawn(move || {
        for k in 0..20 {
            let mut lines = String::new();
            for i in k * 1000..(k + 1) * 1000 {
                lines.push_str(&format!("<13>Nov 24 10:00:00 h app[{i}]: m{i}\n"));
            }
            send_tcp(port, lines.as_bytes(), Framing::Newline);
            std::thread::sleep(Duration::from_millis(25));
        }
    });
    for n in 2..7 {
        std::thread::sleep(Duration::from_millis(80));
        std::fs::write(s.dir.path().join("server.conf"), config(n)).unwrap();
        let (ok, said) = common::ctl(&s, &["reload"]);
        assert!(ok, "{said}");
    }
    sending.join().unwrap();
    let count = || db.count(&database, "SELECT count(*) FROM msgs_app");
    assert!(
        wait_until(Duration::from_secs(30), || count() == N as i64),
        "{} of {N}; {}",
        count(),
        s.stderr()
    );
    assert_eq!(
        db.count(&database, "SELECT count(DISTINCT id) FROM msgs_app"),
        N as i64
    );
}

#[test]
fn pgsql_a_reload_while_rows_arrive_stores_each_once() {
    if let Some(db) = pg() {
        a_reload_while_rows_arrive_stores_each_once_in(db);
    }
}

#[test]
fn mysql_a_reload_while_rows_arrive_stores_each_once() {
    if let Some(db) = my() {
        a_reload_while_rows_arrive_stores_each_once_in(db);
    }
}

// ---- sql() as a source -------------------------------------------------------------------

/// Where a source test's table lives: a SQLite file, or a database of a server.
enum Held {
    Lite(std::path::PathBuf),
    Server(Db, String),
}

impl Held {
    fn run(&self, sql: &str) {
        match self {
            Held::Lite(file) => rusqlite::Connection::open(file)
                .unwrap()
                .execute_batch(sql)
                .unwrap(),
            Held::Server(db, database) => {
                db.query(database, sql).unwrap();
            }
        }
    }

    /// The `sql()` source's options that name the database.
    fn options(&self) -> String {
        match self {
            Held::Lite(file) => format!("type(sqlite3) database(\"{}\")", file.display()),
            Held::Server(db, database) => {
                let (user, password) = db.login();
                format!(
                    "type({}) host(\"127.0.0.1\") port(\"{}\") username(\"{user}\") password(\"{password}\") database(\"{database}\")",
                    db.kind(),
                    db.port()
                )
            }
        }
    }

    /// Rows `from..to` of `events`, the even ones with no `extra`.
    fn insert(&self, from: u32, to: u32) {
        let rows: Vec<String> = (from..to)
            .map(|i| {
                let extra = if i % 2 == 0 {
                    "NULL".to_string()
                } else {
                    format!("'x{i}'")
                };
                format!("({i}, 'host{}', 'app', 'row {i}', {extra})", i % 3)
            })
            .collect();
        self.run(&format!(
            "INSERT INTO events (id, host, program, message, extra) VALUES {}",
            rows.join(", ")
        ));
    }
}

/// A table followed by its increasing `id`: each row a message, its `host`, `program` and
/// `message` columns the message's fields, the others name-value pairs; stopped and started
/// again, the source reads on after the last row delivered — none lost, none twice.
fn a_table_is_followed_across_a_restart(held: Held) {
    held.run("CREATE TABLE events (id int, host varchar(64), program varchar(64), message text, extra text)");
    held.insert(1, 101);
    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        r#"source s {{ sql({} table("events") position-column("id") fetch-interval(1) fetch-limit(40)); }};
        destination d {{ file("@DIR@/rows.log" template("${{id}} ${{HOST}} ${{PROGRAM}} ${{MESSAGE}} ${{extra:-none}}\n")); }};
        log {{ source(s); destination(d); flags(flow-control); }};"#,
        held.options()
    );
    let out = dir.path().join("rows.log");
    let lines = || {
        std::fs::read_to_string(&out)
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    let said = || std::fs::read_to_string(dir.path().join("stderr")).unwrap_or_default();
    let mut s = common::InDir::start(Command::new(common::sluice_bin()), dir.path(), &config);
    assert!(
        wait_until(Duration::from_secs(20), || lines().len() == 100),
        "{} lines; {}\n{:?}",
        lines().len(),
        said(),
        lines()
    );
    s.stop();
    held.insert(101, 151);
    let mut s = common::InDir::start(Command::new(common::sluice_bin()), dir.path(), &config);
    assert!(
        wait_until(Duration::from_secs(20), || lines().len() == 150),
        "{} lines; {}",
        lines().len(),
        said()
    );
    // A row inserted while it runs is read within the fetch interval.
    held.insert(151, 152);
    assert!(
        wait_until(Duration::from_secs(10), || lines().len() == 151),
        "{}",
        said()
    );
    s.stop();
    let got = lines();
    let expected: Vec<String> = (1..152)
        .map(|i| {
            let extra = if i % 2 == 0 {
                "none".to_string()
            } else {
                format!("x{i}")
            };
            format!("{i} host{} app row {i} {extra}", i % 3)
        })
        .collect();
    assert_eq!(got, expected);
}

#[test]
fn sqlite_source_follows_a_table_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    a_table_is_followed_across_a_restart(Held::Lite(dir.path().join("events.db")));
}

#[test]
fn pgsql_source_follows_a_table_across_a_restart() {
    if let Some(db) = pg() {
        let _shared = SERVERS.read().unwrap_or_else(|e| e.into_inner());
        a_table_is_followed_across_a_restart(Held::Server(db, db.database()));
    }
}

#[test]
fn mysql_source_follows_a_table_across_a_restart() {
    if let Some(db) = my() {
        let _shared = SERVERS.read().unwrap_or_else(|e| e.into_inner());
        a_table_is_followed_across_a_restart(Held::Server(db, db.database()));
    }
}

/// A table followed by a time: the position kept is the time's text, read back as the column's
/// type by the server.
#[test]
fn pgsql_source_follows_a_time_column() {
    let Some(db) = pg() else { return };
    let _shared = SERVERS.read().unwrap_or_else(|e| e.into_inner());
    let held = Held::Server(db, db.database());
    held.run("CREATE TABLE stamped (stamp timestamptz, message text)");
    let insert = |from: u32, to: u32| {
        let rows: Vec<String> = (from..to)
            .map(|i| {
                format!(
                    "(timestamptz '2026-11-29 10:00:00+00' + interval '{i} seconds', 'row {i}')"
                )
            })
            .collect();
        held.run(&format!(
            "INSERT INTO stamped (stamp, message) VALUES {}",
            rows.join(", ")
        ));
    };
    insert(0, 30);
    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        r#"source s {{ sql({} table("stamped") position-column("stamp") fetch-limit(7)); }};
        destination d {{ file("@DIR@/rows.log" template("$MESSAGE\n")); }};
        log {{ source(s); destination(d); flags(flow-control); }};"#,
        held.options()
    );
    let out = dir.path().join("rows.log");
    let lines = || {
        std::fs::read_to_string(&out)
            .unwrap_or_default()
            .lines()
            .count()
    };
    let said = || std::fs::read_to_string(dir.path().join("stderr")).unwrap_or_default();
    let mut s = common::InDir::start(Command::new(common::sluice_bin()), dir.path(), &config);
    assert!(
        wait_until(Duration::from_secs(20), || lines() == 30),
        "{} lines; {}",
        lines(),
        said()
    );
    s.stop();
    insert(30, 50);
    let mut s = common::InDir::start(Command::new(common::sluice_bin()), dir.path(), &config);
    assert!(
        wait_until(Duration::from_secs(20), || lines() == 50),
        "{} lines; {}",
        lines(),
        said()
    );
    s.stop();
    let got: Vec<String> = std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    let expected: Vec<String> = (0..50).map(|i| format!("row {i}")).collect();
    assert_eq!(got, expected);
}
