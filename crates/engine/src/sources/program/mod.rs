//! `program("command")`: lines a local program writes.
//!
//! It runs the command (with `/bin/sh -c`, as syslog-ng runs it: the text is the
//! configuration's, never a sender's) and reads its standard output. When it exits it is
//! started again, after a delay that doubles while it keeps exiting within a minute (1 s up to
//! 60 s), so a program that fails at once is not a busy loop. Stopping sluice or retiring the
//! source ends it (SIGTERM).

use super::driver::{local, Built, Common, SourceDriver};
use super::until_retired;
use super::{read_stream, Context, Local, ReaderSpec, Retire};
use crate::options::{self, MULTI_LINE};
use crate::own_log as log;
use sluice_config::declared::{read, Declared, Options};
use sluice_config::{ConfigError, Node};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// The declaration: the names it answers to, its options, a valid use, its build.
pub static DRIVER: SourceDriver = SourceDriver {
    names: &["program"],
    about: "The output of a program sluice runs (and runs again when it exits).",
    options: &[PROGRAM, MULTI_LINE],
    sample: "program(\"true\")",
    build: program,
};

#[derive(Clone, Debug)]
pub struct ProgramSource {
    pub command: String,
    /// `inherit-environment()`: the program gets sluice's environment (else an empty one).
    pub inherit_environment: bool,
    pub local: Local,
}

/// The shortest and longest wait before a program that exited is started again.
const FIRST_DELAY: Duration = Duration::from_secs(1);
const LONGEST_DELAY: Duration = Duration::from_secs(60);

impl super::Source for ProgramSource {
    fn source_name(&self) -> &Arc<str> {
        &self.local.source_name
    }

    fn place(&self) -> super::Place {
        super::Place {
            kind: "program",
            address: self.command.clone(),
        }
    }

    fn bind(self: Arc<Self>, _: Option<super::Held>) -> std::io::Result<Box<dyn super::Ready>> {
        Ok(Box::new(Runs(self)))
    }

    fn reader(&self) -> Option<&ReaderSpec> {
        Some(&self.local.reader)
    }
}

struct Runs(Arc<ProgramSource>);

impl super::Ready for Runs {
    fn run(
        self: Box<Self>,
        ctx: Context,
        retire: watch::Receiver<Retire>,
    ) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        Box::pin(async move { self.0.supervise(ctx, retire).await })
    }
}

impl ProgramSource {
    /// Runs the program and reads it, again whenever it exits, until stopped.
    async fn supervise(&self, ctx: Context, retire: watch::Receiver<Retire>) {
        let (reading, watcher) = until_retired(&ctx, retire);
        let mut stop = reading.shutdown.clone();
        let mut delay = FIRST_DELAY;
        let label = format!("program({})", self.command);
        loop {
            let started = Instant::now();
            match self.spawn() {
                Ok(mut child) => {
                    let window = self.local.reader.window();
                    if let Some(out) = child.stdout.take() {
                        read_stream(
                            out,
                            self.local.origin(Vec::new()),
                            &self.local.reader,
                            &window,
                            &reading,
                            &label,
                            None,
                        )
                        .await;
                    }
                    if *stop.borrow() {
                        end(&mut child).await;
                        reading.drained(&window).await;
                        break;
                    }
                    let status = child.wait().await;
                    let how = match status {
                        Ok(s) => s.to_string(),
                        Err(e) => e.to_string(),
                    };
                    // Running a minute is running well: the next failure waits the least.
                    if started.elapsed() >= LONGEST_DELAY {
                        delay = FIRST_DELAY;
                    }
                    log::warning(format!(
                        "{label} of source {} ended ({how}); starting it again in {}s",
                        self.local.source_name,
                        delay.as_secs()
                    ));
                }
                Err(e) => log::error(format!(
                    "{label} of source {} cannot be started: {e}; trying again in {}s",
                    self.local.source_name,
                    delay.as_secs()
                )),
            }
            tokio::select! {
                _ = stop.wait_for(|s| *s) => break,
                _ = tokio::time::sleep(delay) => {}
            }
            delay = (delay * 2).min(LONGEST_DELAY);
        }
        watcher.abort();
    }

    fn spawn(&self) -> std::io::Result<tokio::process::Child> {
        let mut cmd = tokio::process::Command::new("/bin/sh");
        cmd.arg("-c")
            .arg(&self.command)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true);
        if !self.inherit_environment {
            cmd.env_clear();
        }
        cmd.spawn()
    }
}

/// Ends a program: SIGTERM, then SIGKILL if it is still there a second later.
async fn end(child: &mut tokio::process::Child) {
    if let Some(pid) = child.id() {
        // SAFETY: signalling a child sluice started and has not reaped.
        unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    }
    if tokio::time::timeout(Duration::from_secs(1), child.wait())
        .await
        .is_err()
    {
        let _ = child.kill().await;
    }
}

/// The options of `program()`.
const PROGRAM: &[Declared] = &[read("inherit_environment", "inherit-environment(no)")
    .about("a `program()` gets sluice's environment", "yes")];

/// `program("/usr/bin/tail -F /var/log/x")`: what a program writes.
fn program(node: &Node, o: &mut Options, common: Common) -> Result<Built, ConfigError> {
    let (command, inherit_environment) =
        options::program_command(node, o, "/usr/local/bin/events")?;
    Ok(Arc::new(ProgramSource {
        command: command.text.clone(),
        inherit_environment,
        local: local(node, common, &command.text),
    }))
}
