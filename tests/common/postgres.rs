//! A PostgreSQL 15 server for the tests of one test binary: Debian's `postgresql-15`
//! (installed by `.ci/install-test-deps.sh`), a cluster made with `initdb` in a temporary
//! directory, listening on loopback with password logins, run as user `postgres` when the
//! tests run as root (it refuses root). Started at the first test that asks, shared by the
//! binary's tests (each makes a database of its own), killed when the binary exits
//! ([`Service`]); tests can `kill -9` it and start it again on its data. Spoken to with `psql`.

use super::free_port;
use super::service::Service;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Where Debian's `postgresql-15` puts the server's programs.
const BIN: &str = "/usr/lib/postgresql/15/bin";
/// The user sluice and syslog-ng log in as, and its password.
pub const USER: &str = "syslog";
pub const PASSWORD: &str = "Pg.s3cret";

pub struct Postgres {
    pub port: u16,
    server: Service,
    dir: tempfile::TempDir,
}

/// The server, started if it was not; `None` (said) where PostgreSQL is not installed and
/// the peers are not required.
pub fn postgres() -> Option<&'static Postgres> {
    static SERVER: OnceLock<Option<Postgres>> = OnceLock::new();
    SERVER.get_or_init(Postgres::start).as_ref()
}

/// Runs `c` as `postgres` when the tests run as root.
fn as_owner(c: &mut Command) -> &mut Command {
    if let Some((uid, gid)) = owner() {
        c.uid(uid).gid(gid);
    }
    c
}

/// The `postgres` user's ids when the tests run as root.
fn owner() -> Option<(u32, u32)> {
    // SAFETY: geteuid has no preconditions; getpwnam's answer is read before another call.
    unsafe {
        if libc::geteuid() != 0 {
            return None;
        }
        let pw = libc::getpwnam(c"postgres".as_ptr());
        assert!(
            !pw.is_null(),
            "there is no user 'postgres' to run PostgreSQL as"
        );
        Some(((*pw).pw_uid, (*pw).pw_gid))
    }
}

impl Postgres {
    fn start() -> Option<Postgres> {
        if !Path::new(BIN).join("postgres").exists() {
            if std::env::var_os("SLUICE_REQUIRE_PEERS").is_some() {
                panic!("{BIN}/postgres is missing: run .ci/install-test-deps.sh");
            }
            eprintln!("SKIPPED: PostgreSQL 15 is missing ({BIN}); run .ci/install-test-deps.sh");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        if let Some((uid, gid)) = owner() {
            std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid)).unwrap();
        }
        let pwfile = dir.path().join("pw");
        std::fs::write(&pwfile, "postgres\n").unwrap();
        if let Some((uid, gid)) = owner() {
            std::os::unix::fs::chown(&pwfile, Some(uid), Some(gid)).unwrap();
        }
        let made = as_owner(&mut Command::new(format!("{BIN}/initdb")))
            .arg("-D")
            .arg(dir.path().join("data"))
            .args([
                "-U",
                "postgres",
                "-A",
                "scram-sha-256",
                "-E",
                "UTF8",
                "--no-sync",
            ])
            .arg(format!("--pwfile={}", pwfile.display()))
            .output()
            .unwrap();
        assert!(
            made.status.success(),
            "initdb: {}",
            String::from_utf8_lossy(&made.stderr)
        );
        let mut server = Command::new(format!("{BIN}/postgres"));
        as_owner(&mut server)
            .arg("-D")
            .arg(dir.path().join("data"))
            .arg("-p")
            .arg(port.to_string())
            .arg("-k")
            .arg(dir.path())
            .args(["-c", "listen_addresses=127.0.0.1", "-c", "fsync=off"])
            .args(["-c", "max_connections=200", "-c", "lc_messages=C"]);
        let pg = Postgres {
            port,
            server: Service::new("postgres", server, dir.path().join("postgres.out")),
            dir,
        };
        pg.restart();
        pg.superuser(&format!(
            "CREATE USER {USER} WITH PASSWORD '{PASSWORD}' CREATEDB"
        ))
        .unwrap();
        Some(pg)
    }

    /// `kill -9` of the server.
    pub fn kill_9(&self) {
        self.server.kill_9();
    }

    /// Starts the server (again, on its data), and waits until it answers.
    pub fn restart(&self) {
        self.server.start();
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(60) {
            if self.superuser("SELECT 1").is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        let out = std::fs::read_to_string(self.dir.path().join("postgres.out")).unwrap_or_default();
        panic!("PostgreSQL did not answer within 60 s:\n{out}");
    }

    /// The server's own log.
    pub fn log(&self) -> PathBuf {
        self.dir.path().join("postgres.out")
    }

    /// A database of the test's own, owned by [`USER`]: its name.
    pub fn database(&self) -> String {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let name = format!("t{}", NEXT.fetch_add(1, Ordering::SeqCst));
        self.superuser(&format!("CREATE DATABASE {name} OWNER {USER}"))
            .unwrap();
        name
    }

    fn psql(
        &self,
        user: &str,
        password: &str,
        database: &str,
        sql: &str,
    ) -> Result<String, String> {
        let out = Command::new("psql")
            .env("PGPASSWORD", password)
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-U",
                user,
                "-d",
                database,
            ])
            .args([
                "-X",
                "-A",
                "-t",
                "-q",
                "-v",
                "ON_ERROR_STOP=1",
                "-F",
                "|",
                "-P",
                "null=NULL",
            ])
            .args(["-c", sql])
            .output()
            .map_err(|e| e.to_string())?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    }

    fn superuser(&self, sql: &str) -> Result<String, String> {
        self.psql("postgres", "postgres", "postgres", sql)
    }

    /// Starts `psql` running `sql` in `database` as [`USER`] (a transaction that holds a lock
    /// while it sleeps); kill it to end it.
    pub fn hold(&self, database: &str, sql: &str) -> std::process::Child {
        Command::new("psql")
            .env("PGPASSWORD", PASSWORD)
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-U",
                USER,
                "-d",
                database,
            ])
            .args(["-X", "-q", "-c", sql])
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap()
    }

    /// Runs `sql` in `database` as [`USER`]: its rows, a line each, columns split by `|`.
    pub fn query(&self, database: &str, sql: &str) -> Result<Vec<String>, String> {
        Ok(self
            .psql(USER, PASSWORD, database, sql)?
            .lines()
            .map(str::to_string)
            .collect())
    }
}
