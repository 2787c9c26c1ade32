//! A MongoDB-wire server for the tests of one test binary: FerretDB 1.24, built from the Go
//! module proxy by `.ci/install-test-deps.sh`, over a database of the binary's PostgreSQL
//! ([`super::postgres`]). Started at the first test that asks, shared by the binary's tests
//! (each uses a database of its own), killed when the binary exits ([`Service`]); tests can
//! `kill -9` it and start it again.

use super::free_port;
use super::postgres::{postgres, PASSWORD, USER};
use super::service::{installed, Service};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Where `.ci/install-test-deps.sh` builds FerretDB.
const HOME: &str = "/opt/sluice-test/ferretdb";

pub struct FerretDb {
    /// `mongodb://127.0.0.1:PORT/`.
    pub uri: String,
    pub port: u16,
    server: Service,
    _dir: tempfile::TempDir,
}

/// The server, started if it was not; `None` (said) where FerretDB or PostgreSQL is missing
/// and the peers are not required.
pub fn ferretdb() -> Option<&'static FerretDb> {
    static SERVER: OnceLock<Option<FerretDb>> = OnceLock::new();
    SERVER.get_or_init(FerretDb::start).as_ref()
}

impl FerretDb {
    fn start() -> Option<FerretDb> {
        if !installed(HOME, "FerretDB") {
            return None;
        }
        let pg = postgres()?;
        let database = pg.database();
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let mut server = Command::new(format!("{HOME}/bin/ferretdb"));
        server
            .arg("--handler=postgresql")
            .arg(format!(
                "--postgresql-url=postgres://{USER}:{PASSWORD}@127.0.0.1:{}/{database}",
                pg.port
            ))
            .arg(format!("--listen-addr=127.0.0.1:{port}"))
            .arg("--debug-addr=-")
            .arg(format!("--state-dir={}", dir.path().display()))
            .args(["--telemetry=disable", "--log-level=warn"]);
        let db = FerretDb {
            uri: format!("mongodb://127.0.0.1:{port}/"),
            port,
            server: Service::new("ferretdb", server, dir.path().join("ferretdb.out")),
            _dir: dir,
        };
        db.restart();
        Some(db)
    }

    /// `kill -9` of the server.
    pub fn kill_9(&self) {
        self.server.kill_9();
    }

    /// Starts the server (again), and waits until it answers.
    pub fn restart(&self) {
        self.server.start();
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(60) {
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("FerretDB did not answer within 60 s");
    }

    /// A client of the server.
    pub fn client(&self) -> mongodb::sync::Client {
        mongodb::sync::Client::with_uri_str(&self.uri).unwrap()
    }
}
