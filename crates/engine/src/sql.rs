//! What `sql()` the destination ([`crate::destinations::sql`]) and `sql()` the source
//! ([`crate::sources::sql`]) share: the database's kind and server as syslog-ng's options name
//! them, the names sluice writes into SQL, and connections to PostgreSQL (`tokio-postgres`) and
//! MariaDB/MySQL (`mysql_async`) made within the connect timeout, each driven by a runtime of
//! the thread that uses it.

use sluice_config::declared::{read, Declared, Options};
use sluice_config::{ConfigError, Value};
use std::time::Duration;

/// How long connecting, logging in and the session's statements may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Where PostgreSQL listens when `host()` is empty: its socket's directory, as libpq.
const PG_SOCKET_DIR: &str = "/var/run/postgresql";
/// Where MariaDB listens when `host()` is empty: its socket, as libmysqlclient.
const MYSQL_SOCKET: &str = "/run/mysqld/mysqld.sock";

/// What `type()` names, in syslog-ng's spellings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Sqlite,
    Pgsql,
    Mysql,
}

impl Kind {
    /// `type()`, else syslog-ng's default, `mysql`.
    pub fn read(o: &mut Options) -> Result<Kind, ConfigError> {
        match o.last("type") {
            Some(opt) => kind(opt.value()?),
            None => Ok(Kind::Mysql),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Kind::Sqlite => "sqlite3",
            Kind::Pgsql => "pgsql",
            Kind::Mysql => "mysql",
        }
    }
}

fn kind(v: &Value) -> Result<Kind, ConfigError> {
    match v.text.to_ascii_lowercase().as_str() {
        "sqlite3" | "sqlite" => Ok(Kind::Sqlite),
        "pgsql" | "postgres" | "postgresql" => Ok(Kind::Pgsql),
        "mysql" | "mariadb" => Ok(Kind::Mysql),
        "freetds" | "mssql" | "oracle" => Err(ConfigError::not_supported(
            v.pos,
            &format!("sql(type({}))", v.text),
        )),
        other => Err(ConfigError::new(
            v.pos,
            format!("unknown database type '{other}': sqlite3, pgsql or mysql"),
        )),
    }
}

/// The options of a database server, which come with `type(pgsql)` and `type(mysql)`.
pub const SERVERS: &[Declared] = &[
    read("host", "host(\"db.example.com\")").about(
        "the server: a name, an address or a socket's path",
        "the local socket",
    ),
    read("port", "port(5432)").about("the server's port", "the database's own: 5432, 3306"),
    read("username", "username(\"syslog\")").about("the user sluice logs in as", "syslog-ng"),
    read("password", "password(\"secret\")").about(
        "the user's password; never logged nor shown by `sluice ctl config`",
        "none",
    ),
];

/// The server of `type(pgsql)` and `type(mysql)`: syslog-ng's `host()` (empty: the local
/// socket), `port()` (empty: the database's own), `username()`, `password()`.
#[derive(Clone, Default)]
pub struct Server {
    pub host: String,
    pub port: Option<u16>,
    pub username: String,
    pub password: String,
}

impl Server {
    /// [`SERVERS`]' options.
    pub fn read(o: &mut Options) -> Result<Server, ConfigError> {
        let mut text = |name: &str| -> Result<Option<(String, sluice_config::Pos)>, ConfigError> {
            match o.last(name) {
                Some(opt) => {
                    let v = opt.value()?;
                    Ok(Some((v.text.clone(), v.pos)))
                }
                None => Ok(None),
            }
        };
        let port = match text("port")? {
            Some((p, _)) if p.is_empty() => None,
            Some((p, pos)) => Some(p.parse::<u16>().ok().filter(|p| *p > 0).ok_or_else(|| {
                ConfigError::new(
                    pos,
                    format!("'{p}' is not a port: a number from 1 to 65535"),
                )
            })?),
            None => None,
        };
        Ok(Server {
            host: text("host")?.map(|(t, _)| t).unwrap_or_default(),
            port,
            username: text("username")?.map_or_else(|| "syslog-ng".to_string(), |(t, _)| t),
            password: text("password")?.map(|(t, _)| t).unwrap_or_default(),
        })
    }

    /// How counters and messages name the database: `pgsql,db.example.com,5432,logs` (no
    /// user, no password).
    pub fn name(&self, kind: Kind, database: &str) -> String {
        match kind {
            Kind::Sqlite => format!("sqlite3,{database}"),
            _ => format!(
                "{},{},{},{database}",
                kind.name(),
                self.host,
                self.port.map(|p| p.to_string()).unwrap_or_default()
            ),
        }
    }
}

/// A server as sluice names it in its own messages: never its password.
impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // No password.
        write!(f, "{}:{:?} as {}", self.host, self.port, self.username)
    }
}

/// A table or column name sluice writes into SQL: 1 to 63 letters, digits and `_`, not
/// starting with a digit.
pub fn valid_name(name: &[u8]) -> bool {
    (1..=63).contains(&name.len())
        && !name[0].is_ascii_digit()
        && name.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'_')
}

/// Runs `connecting` on `runtime` within [`CONNECT_TIMEOUT`].
fn within<T, E: std::fmt::Display>(
    runtime: &tokio::runtime::Runtime,
    connecting: impl std::future::Future<Output = Result<T, E>>,
    said: impl Fn(&E) -> String,
) -> std::io::Result<T> {
    runtime
        .block_on(async { tokio::time::timeout(CONNECT_TIMEOUT, connecting).await })
        .map_err(|_| {
            std::io::Error::new(std::io::ErrorKind::TimedOut, "no answer from the server")
        })?
        .map_err(|e| std::io::Error::other(said(&e)))
}

/// PostgreSQL's words for `e`: its message and detail.
pub fn pg_said(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => match db.detail() {
            Some(detail) => format!("{}: {detail}", db.message()),
            None => db.message().to_string(),
        },
        None => e.to_string(),
    }
}

/// Connects to PostgreSQL (its connection driven by `runtime`) and runs `session`'s
/// statements. A connection that ends in an error says so with `label`.
pub fn pg_connect(
    runtime: &tokio::runtime::Runtime,
    server: &Server,
    database: &str,
    session: &[String],
    label: &str,
) -> std::io::Result<tokio_postgres::Client> {
    let mut config = tokio_postgres::Config::new();
    match server.host.as_str() {
        "" => config.host_path(PG_SOCKET_DIR),
        path if path.starts_with('/') => config.host_path(path),
        host => config.host(host),
    };
    config
        .port(server.port.unwrap_or(5432))
        .user(&server.username)
        .dbname(database)
        .application_name("sluice")
        .connect_timeout(CONNECT_TIMEOUT)
        .keepalives(true);
    if !server.password.is_empty() {
        config.password(&server.password);
    }
    let label = label.to_string();
    within(
        runtime,
        async {
            let (client, connection) = config.connect(tokio_postgres::NoTls).await?;
            tokio::spawn(async move {
                if let Err(e) = connection.await {
                    crate::own_log::error(format!(
                        "{label}: the connection to PostgreSQL ended: {e}"
                    ));
                }
            });
            for statement in session {
                client.batch_execute(statement).await?;
            }
            Ok(client)
        },
        pg_said,
    )
}

/// MariaDB's words for `e`.
pub fn mysql_said(e: &mysql_async::Error) -> String {
    match e {
        mysql_async::Error::Server(e) => e.message.clone(),
        e => e.to_string(),
    }
}

/// Connects to MariaDB or MySQL and runs `session`'s statements.
pub fn mysql_connect(
    runtime: &tokio::runtime::Runtime,
    server: &Server,
    database: &str,
    session: &[String],
) -> std::io::Result<mysql_async::Conn> {
    use mysql_async::prelude::Queryable;
    let mut builder = mysql_async::OptsBuilder::default()
        .user(Some(server.username.clone()))
        .db_name(Some(database.to_string()))
        .stmt_cache_size(16);
    if !server.password.is_empty() {
        builder = builder.pass(Some(server.password.clone()));
    }
    builder = match server.host.as_str() {
        "" => builder.socket(Some(MYSQL_SOCKET)),
        path if path.starts_with('/') => builder.socket(Some(path)),
        host => builder
            .ip_or_hostname(host)
            .tcp_port(server.port.unwrap_or(3306))
            .prefer_socket(false),
    };
    within(
        runtime,
        async {
            let mut conn = mysql_async::Conn::new(builder).await?;
            for statement in session {
                conn.query_drop(statement).await?;
            }
            Ok(conn)
        },
        mysql_said,
    )
}

/// A runtime for one thread's connection.
pub fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
}
