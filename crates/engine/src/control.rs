//! The control socket (`-c PATH`) that `sluice ctl` talks to, and the Prometheus endpoint.
//!
//! One command per connection: the client writes a line (`stats csv`, `query get d_*`,
//! `reopen` …), the server answers with text and closes. An answer that starts with
//! `error: ` is a failure. The Prometheus endpoint (`stats(prometheus-listen("ADDR"))`) answers
//! any HTTP GET with the counters in Prometheus's text format.

use crate::dispatch::Current;
use crate::internal;
use crate::stats::Registry;
use std::path::Path;
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

/// The longest command line accepted.
const MAX_LINE: u64 = 4096;

impl Control {
    /// Listens on `path` (replacing a stale socket) and serves commands until the task is
    /// dropped.
    pub fn bind(path: &Path) -> std::io::Result<UnixListener> {
        let _ = std::fs::remove_file(path);
        UnixListener::bind(path)
    }

    pub async fn serve(self: Arc<Self>, listener: UnixListener) {
        loop {
            let Ok((conn, _)) = listener.accept().await else {
                continue;
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
                internal::notice("reopening files (ctl reopen)");
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
            ["verbose"] => format!("verbose is {}\n", on_off(internal::verbose())),
            ["verbose", v @ ("on" | "off")] => {
                internal::set_verbose(*v == "on");
                format!("OK verbose is {v}\n")
            }
            ["debug"] => format!("debug is {}\n", on_off(internal::debug())),
            ["debug", v @ ("on" | "off")] => {
                internal::set_debug(*v == "on");
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
pub async fn serve_prometheus(listener: TcpListener, stats: Arc<Registry>) {
    loop {
        let Ok((mut conn, _)) = listener.accept().await else {
            continue;
        };
        let stats = stats.clone();
        tokio::spawn(async move {
            // Read the request head (up to a blank line); its content does not matter.
            let mut head = Vec::new();
            let mut buf = [0u8; 1024];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 8192 {
                match conn.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => head.extend_from_slice(&buf[..n]),
                }
            }
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
        });
    }
}
