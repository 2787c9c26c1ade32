//! An HTTP server for the `http()` destination's tests: `http_server.py` beside this file
//! (Python's `http.server`, HTTP/1.1 with keep-alive), answering as a test asks and logging
//! every request it was sent.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct HttpServer {
    child: Child,
    pub port: u16,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

/// One request the server was sent, and its answer.
#[derive(Debug, Clone)]
pub struct Request {
    pub status: u16,
    /// The client's port: requests with the same one came over one connection.
    pub client: u16,
    /// `POST /path`.
    pub line: String,
    /// `Name: value` lines.
    pub headers: String,
    pub body: String,
}

impl HttpServer {
    /// Starts the server on a free port with the options of `http_server.py`.
    pub fn start(options: &[&str]) -> HttpServer {
        let port = super::free_port();
        HttpServer::start_on(port, options)
    }

    /// Starts the server on `port`.
    pub fn start_on(port: u16, options: &[&str]) -> HttpServer {
        let dir = tempfile::tempdir().expect("temporary directory");
        let log = dir.path().join("requests");
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/common/http_server.py");
        let child = Command::new("python3")
            .arg(script)
            .arg("--port")
            .arg(port.to_string())
            .arg("--log")
            .arg(&log)
            .args(options)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3 for the HTTP server");
        let started = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "HTTP server on {port}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        HttpServer {
            child,
            port,
            log,
            _dir: dir,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// Every request so far, in the order the server logged them.
    pub fn requests(&self) -> Vec<Request> {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        text.lines()
            .map(|l| {
                let f: Vec<&str> = l.split('\t').collect();
                Request {
                    status: f[0].parse().expect("status"),
                    client: f[1].parse().expect("port"),
                    line: f[2].to_string(),
                    headers: unhex(f[3]),
                    body: unhex(f[4]),
                }
            })
            .collect()
    }

    /// The requests the server accepted (2xx).
    pub fn accepted(&self) -> Vec<Request> {
        self.requests()
            .into_iter()
            .filter(|r| (200..300).contains(&r.status))
            .collect()
    }

    /// Waits until `done` says the requests are all there; returns them.
    pub fn wait_for(&self, limit: Duration, done: impl Fn(&[Request]) -> bool) -> Vec<Request> {
        let started = Instant::now();
        loop {
            let r = self.requests();
            if done(&r) || started.elapsed() > limit {
                return r;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        self.stop();
    }
}

fn unhex(text: &str) -> String {
    let bytes: Vec<u8> = (0..text.len() / 2)
        .map(|i| u8::from_str_radix(&text[2 * i..2 * i + 2], 16).expect("hex"))
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}
