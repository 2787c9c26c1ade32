//! A MariaDB 10.11 server for the tests of one test binary: Debian's `mariadb-server`
//! (installed by `.ci/install-test-deps.sh`), its data made with `mariadb-install-db` in a
//! temporary directory, listening on loopback, run as user `mysql` when the tests run as root.
//! Started at the first test that asks, shared by the binary's tests (each makes a database
//! of its own), killed when the binary exits ([`Service`]); tests can `kill -9` it and start it
//! again on its data. Spoken to with the `mariadb` client.

use super::free_port;
use super::service::Service;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

const SERVER: &str = "/usr/sbin/mariadbd";
/// The user sluice and syslog-ng log in as, and its password.
pub const USER: &str = "syslog";
pub const PASSWORD: &str = "My.s3cret";

pub struct Mariadb {
    pub port: u16,
    server: Service,
    dir: tempfile::TempDir,
}

/// The server, started if it was not; `None` (said) where MariaDB is not installed and the
/// peers are not required.
pub fn mariadb() -> Option<&'static Mariadb> {
    static SERVER_ONCE: OnceLock<Option<Mariadb>> = OnceLock::new();
    SERVER_ONCE.get_or_init(Mariadb::start).as_ref()
}

/// The `mysql` user's ids when the tests run as root.
fn owner() -> Option<(u32, u32)> {
    // SAFETY: geteuid has no preconditions; getpwnam's answer is read before another call.
    unsafe {
        if libc::geteuid() != 0 {
            return None;
        }
        let pw = libc::getpwnam(c"mysql".as_ptr());
        assert!(!pw.is_null(), "there is no user 'mysql' to run MariaDB as");
        Some(((*pw).pw_uid, (*pw).pw_gid))
    }
}

impl Mariadb {
    fn start() -> Option<Mariadb> {
        if !Path::new(SERVER).exists() {
            if std::env::var_os("SLUICE_REQUIRE_PEERS").is_some() {
                panic!("{SERVER} is missing: run .ci/install-test-deps.sh");
            }
            eprintln!("SKIPPED: MariaDB is missing ({SERVER}); run .ci/install-test-deps.sh");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let user = match owner() {
            Some((uid, gid)) => {
                std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid)).unwrap();
                "mysql".to_string()
            }
            None => std::env::var("USER").unwrap_or_default(),
        };
        let data = dir.path().join("data");
        let made = Command::new("mariadb-install-db")
            .arg(format!("--user={user}"))
            .arg(format!("--datadir={}", data.display()))
            .args(["--auth-root-authentication-method=normal", "--skip-test-db"])
            .output()
            .unwrap();
        assert!(
            made.status.success(),
            "mariadb-install-db: {}{}",
            String::from_utf8_lossy(&made.stdout),
            String::from_utf8_lossy(&made.stderr)
        );
        let mut server = Command::new(SERVER);
        server
            .arg("--no-defaults")
            .arg(format!("--user={user}"))
            .arg(format!("--datadir={}", data.display()))
            .arg(format!(
                "--socket={}",
                dir.path().join("mysqld.sock").display()
            ))
            .arg(format!(
                "--pid-file={}",
                dir.path().join("mysqld.pid").display()
            ))
            .arg(format!("--port={port}"))
            .args([
                "--bind-address=127.0.0.1",
                "--skip-name-resolve",
                "--local-infile=1",
            ])
            // Commits written to the system at once (a kill -9 loses none), synced once a second.
            .args([
                "--innodb-flush-log-at-trx-commit=2",
                "--innodb-buffer-pool-size=128M",
            ])
            .arg("--max-connections=200")
            // As Debian's packaged configuration has it.
            .args([
                "--character-set-server=utf8mb4",
                "--collation-server=utf8mb4_general_ci",
            ])
            .arg(format!(
                "--log-error={}",
                dir.path().join("mariadb.err").display()
            ));
        let db = Mariadb {
            port,
            server: Service::new("mariadb", server, dir.path().join("mariadb.out")),
            dir,
        };
        db.restart();
        db.root(&format!(
            "CREATE USER '{USER}'@'127.0.0.1' IDENTIFIED BY '{PASSWORD}'"
        ))
        .unwrap();
        Some(db)
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
            if self.root("SELECT 1").is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        let out = std::fs::read_to_string(self.dir.path().join("mariadb.err")).unwrap_or_default();
        panic!("MariaDB did not answer within 60 s:\n{out}");
    }

    /// The server's own log.
    pub fn log(&self) -> PathBuf {
        self.dir.path().join("mariadb.err")
    }

    /// A database of the test's own, [`USER`] may do anything in: its name.
    pub fn database(&self) -> String {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let name = format!("t{}", NEXT.fetch_add(1, Ordering::SeqCst));
        self.root(&format!(
            "CREATE DATABASE {name}; GRANT ALL ON {name}.* TO '{USER}'@'127.0.0.1'"
        ))
        .unwrap();
        name
    }

    fn client(&self, args: &[&str], sql: &str) -> Result<String, String> {
        let out = Command::new("mariadb")
            .args(args)
            .args(["-N", "-B", "-e", sql])
            .output()
            .map_err(|e| e.to_string())?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    }

    /// Runs `sql` as the server's root.
    pub fn root(&self, sql: &str) -> Result<String, String> {
        let socket = self.dir.path().join("mysqld.sock");
        self.client(&["-uroot", &format!("--socket={}", socket.display())], sql)
    }

    /// Starts the client running `sql` in `database` as [`USER`] (a lock held while it
    /// sleeps); kill it to end it.
    pub fn hold(&self, database: &str, sql: &str) -> std::process::Child {
        Command::new("mariadb")
            .args(["-h127.0.0.1", "-P", &self.port.to_string(), "-u", USER])
            .arg(format!("-p{PASSWORD}"))
            .args([database, "-e", sql])
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap()
    }

    /// Runs `sql` in `database` as [`USER`]: its rows, a line each, columns split by tabs
    /// (`NULL` for NULL).
    pub fn query(&self, database: &str, sql: &str) -> Result<Vec<String>, String> {
        let port = self.port.to_string();
        let password = format!("-p{PASSWORD}");
        let args = ["-h127.0.0.1", "-P", &port, "-u", USER, &password, database];
        Ok(self
            .client(&args, sql)?
            .lines()
            .map(str::to_string)
            .collect())
    }
}
