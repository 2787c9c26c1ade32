//! A server that the tests of one test binary share (a Kafka broker, an OpenSearch node): a
//! child of a thread that lives as long as the process, with `PR_SET_PDEATHSIG`, so it dies
//! when the binary exits however the binary ends. Tests can `kill -9` it and start it again.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::Mutex;

/// Whether `.ci/install-test-deps.sh` put `what` in `dir` (its `.done` marker); says why not
/// and skips, or fails where the peers are required (CI).
pub fn installed(dir: &str, what: &str) -> bool {
    if Path::new(dir).join(".done").exists() {
        return true;
    }
    if std::env::var_os("SLUICE_REQUIRE_PEERS").is_some() {
        panic!("{dir} is missing: run .ci/install-test-deps.sh");
    }
    eprintln!("SKIPPED: {what} is missing ({dir}); run .ci/install-test-deps.sh");
    false
}

pub struct Service {
    commands: Mutex<mpsc::Sender<(Ask, mpsc::Sender<()>)>>,
}

#[derive(Clone, Copy)]
enum Ask {
    Start,
    Kill9,
}

impl Service {
    /// A service that runs `command` when started, its output appended to `out`.
    pub fn new(name: &str, command: Command, out: PathBuf) -> Service {
        let (tx, rx) = mpsc::channel();
        std::thread::Builder::new()
            .name(name.into())
            .spawn(move || keep(command, &out, rx))
            .unwrap();
        Service {
            commands: Mutex::new(tx),
        }
    }

    /// Starts the server (again); the caller waits until it answers.
    pub fn start(&self) {
        self.ask(Ask::Start);
    }

    /// `kill -9` of the server.
    pub fn kill_9(&self) {
        self.ask(Ask::Kill9);
    }

    fn ask(&self, a: Ask) {
        let (done, wait) = mpsc::channel();
        self.commands.lock().unwrap().send((a, done)).unwrap();
        wait.recv().unwrap();
    }
}

/// The service's thread: starts and kills the server as asked.
fn keep(mut command: Command, out: &PathBuf, asks: mpsc::Receiver<(Ask, mpsc::Sender<()>)>) {
    let mut child: Option<Child> = None;
    while let Ok((a, done)) = asks.recv() {
        match a {
            Ask::Start => {
                let log = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(out)
                    .unwrap();
                // SAFETY: prctl(2) in the child before exec, async-signal-safe.
                let cmd = unsafe {
                    command.pre_exec(|| {
                        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                        Ok(())
                    })
                };
                child = Some(
                    cmd.stdin(Stdio::null())
                        .stdout(log.try_clone().unwrap())
                        .stderr(log)
                        .spawn()
                        .unwrap(),
                );
            }
            Ask::Kill9 => {
                if let Some(mut c) = child.take() {
                    let _ = c.kill();
                    let _ = c.wait();
                }
            }
        }
        let _ = done.send(());
    }
}
