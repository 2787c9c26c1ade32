//! The control socket (`-c PATH`) that `sluice ctl` talks to, and the Prometheus endpoint.
//!
//! One command per connection: the client writes a line (`stats csv`, `query get d_*`,
//! `reopen` …), the server answers with text and closes. An answer that starts with
//! `error: ` is a failure. The Prometheus endpoint (`stats(prometheus-listen("ADDR"))`) answers
//! any HTTP GET with the counters in Prometheus's text format.

use crate::dispatch::Current;
use crate::own_log;
use crate::stats::Registry;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::{mpsc, oneshot};

/// What the control socket can reach in the running server.
pub struct Control {
    pub stats: Arc<Registry>,
    pub dispatcher: Arc<Current>,
    /// The configuration as sluice read it (includes and `@define`s resolved).
    pub config_text: Mutex<Arc<str>>,
    /// Asks the main loop to stop.
    pub stop: mpsc::Sender<()>,
    /// Asks the main loop to reload; it answers whether that worked.
    pub reload: mpsc::Sender<oneshot::Sender<Result<(), String>>>,
    pub started: Instant,
}

/// The process at the other end of a unix socket connection.
fn peer_pid(conn: &std::os::unix::net::UnixStream) -> Option<i32> {
    use std::os::fd::AsRawFd;
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: getsockopt(2) on an open socket, writing at most `len` bytes into `cred`.
    let got = unsafe {
        libc::getsockopt(
            conn.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    (got == 0 && cred.pid > 0).then_some(cred.pid)
}

/// The longest command line accepted.
const MAX_LINE: u64 = 4096;

impl Control {
    /// Listens on `path`, readable and writable by sluice's user alone whatever the umask
    /// (the socket can stop the server). A stale socket there is replaced; anything else — a
    /// file that is not a socket, a socket a live server answers on — is refused, never
    /// removed. Returns the listener and the socket's inode (see [`Control::remove`]).
    pub fn bind(path: &Path) -> std::io::Result<(UnixListener, u64)> {
        use std::io::{Error, ErrorKind};
        use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
        match std::fs::symlink_metadata(path) {
            Ok(meta) if !meta.file_type().is_socket() => {
                return Err(Error::new(
                    ErrorKind::AlreadyExists,
                    "something that is not a socket is there; sluice does not remove it",
                ))
            }
            Ok(_) => {
                if let Ok(live) = std::os::unix::net::UnixStream::connect(path) {
                    let holder =
                        peer_pid(&live).map_or(String::new(), |pid| format!(" (process {pid})"));
                    return Err(Error::new(
                        ErrorKind::AddrInUse,
                        format!("a running server{holder} answers on it; stop it, or give this one another -c PATH"),
                    ));
                }
                std::fs::remove_file(path)?;
            }
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        // The socket is made with the umask's permissions: none for others from the start. A
        // file another thread makes meanwhile gets no more than 0600 either, never more.
        let old = rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o177));
        let bound = UnixListener::bind(path);
        rustix::process::umask(old);
        let listener = bound?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
        Ok((listener, std::fs::symlink_metadata(path)?.ino()))
    }

    /// Removes the control socket at `path` when it is still the one bound (`ino`): another
    /// server may have taken the path since.
    pub fn remove(path: &Path, ino: u64) {
        use std::os::unix::fs::MetadataExt;
        if std::fs::symlink_metadata(path).is_ok_and(|m| m.ino() == ino) {
            let _ = std::fs::remove_file(path);
        }
    }

    pub async fn serve(self: Arc<Self>, listener: UnixListener) {
        loop {
            let conn = match listener.accept().await {
                Ok((conn, _)) => conn,
                Err(e) => {
                    accept_failed("the control socket", &e).await;
                    continue;
                }
            };
            let me = self.clone();
            tokio::spawn(async move {
                let (read, mut write) = conn.into_split();
                let mut line = String::new();
                let mut reader = BufReader::new(read.take(MAX_LINE));
                if reader.read_line(&mut line).await.is_err() {
                    return;
                }
                let answer = match line.trim() {
                    "reload" => me.reload().await,
                    "ledger" => {
                        let ledger = crate::ledger::settled(&me.stats, crate::ledger::SETTLE).await;
                        if ledger.balanced() {
                            ledger.text()
                        } else {
                            format!("error: the books do not balance\n{}", ledger.text())
                        }
                    }
                    command => me.answer(command),
                };
                let _ = write.write_all(answer.as_bytes()).await;
                let _ = write.shutdown().await;
            });
        }
    }

    async fn reload(&self) -> String {
        let (tx, rx) = oneshot::channel();
        if self.reload.send(tx).await.is_err() {
            return "error: the server is stopping\n".into();
        }
        match rx.await {
            Ok(Ok(())) => "OK configuration reloaded\n".into(),
            Ok(Err(e)) => {
                format!("error: reloading failed; the running configuration stays:\n{e}\n")
            }
            Err(_) => "error: the server is stopping\n".into(),
        }
    }

    /// The answer to one command (all but `reload`).
    pub fn answer(&self, command: &str) -> String {
        let words: Vec<&str> = command.split_whitespace().collect();
        match words.as_slice() {
            ["stats", format, rest @ ..] => {
                let text = match *format {
                    "csv" => self.stats.csv(),
                    "kv" => self.stats.kv(),
                    "prometheus" => self.stats.prometheus(),
                    other => return format!("error: unknown stats format '{other}'\n"),
                };
                if rest == ["reset"] {
                    self.stats.reset();
                }
                text
            }
            ["query", "list", pattern] => self.stats.list(pattern),
            ["query", "list"] => self.stats.list("*"),
            ["query", "get", pattern] => self.stats.get(pattern, false),
            ["query", "get-sum", pattern] => self.stats.get(pattern, true),
            ["reopen"] => {
                for d in &self.dispatcher.get().destinations {
                    d.reopen();
                }
                own_log::notice("reopening files (ctl reopen)");
                "OK files reopened\n".into()
            }
            ["stop"] => {
                let _ = self.stop.try_send(());
                "OK stopping\n".into()
            }
            ["healthcheck"] => {
                let queued = self.stats.get("dst.*.queued", true);
                format!(
                    "OK\nuptime_seconds {}\nqueued_messages {}",
                    self.started.elapsed().as_secs(),
                    queued
                )
            }
            ["config"] | ["config", "preprocessed"] => {
                format!("{}\n", self.config_text.lock().expect("config lock"))
            }
            ["verbose"] => format!("verbose is {}\n", on_off(own_log::verbose())),
            ["verbose", v @ ("on" | "off")] => {
                own_log::set_verbose(*v == "on");
                format!("OK verbose is {v}\n")
            }
            ["debug"] => format!("debug is {}\n", on_off(own_log::debug())),
            ["debug", v @ ("on" | "off")] => {
                own_log::set_debug(*v == "on");
                format!("OK debug is {v}\n")
            }
            _ => format!("error: unknown command '{command}'\n"),
        }
    }
}

fn on_off(b: bool) -> &'static str {
    if b {
        "on"
    } else {
        "off"
    }
}

/// Serves the counters to Prometheus: any GET gets them.
///
/// At most [`SCRAPERS`] connections are open at once, and each has [`SCRAPE_TIMEOUT`] to send
/// its request and take the answer: idle or slow peers cannot take the descriptors the syslog
/// ports need. Connections are taken as they come; when all are in use, the oldest that has
/// not yet sent its request is closed for the new one, so a scrape never waits behind idle
/// connections queued before it (145 of them held one for 32 s).
pub async fn serve_prometheus(listener: TcpListener, stats: Arc<Registry>) {
    // The connections open now, oldest first: whether each has sent its request, and its task.
    let mut open: std::collections::VecDeque<(Arc<AtomicBool>, tokio::task::AbortHandle)> =
        std::collections::VecDeque::new();
    loop {
        let mut conn = match listener.accept().await {
            Ok((conn, _)) => conn,
            Err(e) => {
                accept_failed("the Prometheus endpoint", &e).await;
                continue;
            }
        };
        loop {
            open.retain(|(_, task)| !task.is_finished());
            if open.len() < SCRAPERS {
                break;
            }
            match open
                .iter()
                .position(|(asked, _)| !asked.load(Ordering::Relaxed))
            {
                Some(idle) => {
                    if let Some((_, task)) = open.remove(idle) {
                        task.abort();
                    }
                }
                // Every one is being answered: they end within their timeout.
                None => tokio::time::sleep(std::time::Duration::from_millis(10)).await,
            }
        }
        let stats = stats.clone();
        let asked = Arc::new(AtomicBool::new(false));
        let asking = asked.clone();
        let task = tokio::spawn(async move {
            let _ = tokio::time::timeout(SCRAPE_TIMEOUT, async move {
                // Read the request head (up to a blank line); its content does not matter.
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 8192 {
                    match conn.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                asking.store(true, Ordering::Relaxed);
                let (status, body) = if head.starts_with(b"GET ") {
                    ("200 OK", stats.prometheus())
                } else {
                    ("405 Method Not Allowed", String::new())
                };
                let reply = format!(
                    "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = conn.write_all(reply.as_bytes()).await;
                let _ = conn.shutdown().await;
            })
            .await;
        });
        open.push_back((asked, task.abort_handle()));
    }
}

/// Connections the Prometheus endpoint serves at once.
const SCRAPERS: usize = 16;
/// How long a Prometheus client has to send its request and take the answer.
const SCRAPE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// An `accept` that failed (out of descriptors, most likely): said, then a pause before the
/// next, so that a full descriptor table does not make a loop spin.
pub async fn accept_failed(what: &str, e: &std::io::Error) {
    own_log::error(format!("accepting a connection on {what} failed: {e}"));
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
}
