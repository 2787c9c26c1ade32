//! `program("command")`: messages written to a program's standard input, one per line.
//!
//! The command runs with `/bin/sh -c` (the configuration's text; message text never reaches
//! a command line). Its standard input is one end of a unix stream socket pair, so the
//! program is a "server" of the shared sender ([`super::sender`]): opening a connection
//! starts the program, a program that exits is a connection that closed, and what it had not
//! read is sent again to the next one — with the queue, `disk-buffer()`, flow control,
//! `time-reopen()` and the stop's grace of every forwarding destination. A program that keeps
//! exiting at once is started again after 1 s, doubling up to 60 s, not in a busy loop.

use super::link::{Connected, Failure, GiveUp, Link, Octets, OnLink, Position, Protocol};
use super::queue::Batch;
use super::sender::Servers;
use socket2::{Domain, Socket, Type};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The program to run, and when it may next be started.
#[derive(Debug)]
pub struct Program {
    pub command: String,
    /// `inherit-environment()`: the program gets sluice's environment (else an empty one).
    pub inherit_environment: bool,
    starts: Mutex<Starts>,
}

#[derive(Debug)]
struct Starts {
    last: Option<Instant>,
    /// The wait before the next start when the last one ran shorter than a minute.
    delay: Duration,
}

const FIRST_DELAY: Duration = Duration::from_secs(1);
const LONGEST_DELAY: Duration = Duration::from_secs(60);

impl Program {
    pub fn new(command: String, inherit_environment: bool) -> Program {
        Program {
            command,
            inherit_environment,
            starts: Mutex::new(Starts {
                last: None,
                delay: FIRST_DELAY,
            }),
        }
    }
}

impl Servers for Program {
    fn count(&self) -> usize {
        1
    }

    fn name(&self, _: usize) -> String {
        format!("program({})", self.command)
    }

    /// Starts the program with its standard input a socket, unless it was started less than
    /// its delay ago.
    fn open(&self, _: usize) -> std::io::Result<Connected> {
        {
            let mut starts = self.starts.lock().expect("starts lock");
            if let Some(last) = starts.last {
                let ran = last.elapsed();
                if ran >= LONGEST_DELAY {
                    starts.delay = FIRST_DELAY;
                } else if ran < starts.delay {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::WouldBlock,
                        format!(
                            "it exited {:.0}s after it started; starting it again {}s after that",
                            ran.as_secs_f64(),
                            starts.delay.as_secs()
                        ),
                    ));
                } else {
                    starts.delay = (starts.delay * 2).min(LONGEST_DELAY);
                }
            }
            starts.last = Some(Instant::now());
        }
        let (ours, theirs) = Socket::pair(Domain::UNIX, Type::STREAM, None)?;
        let mut cmd = Command::new("/bin/sh");
        cmd.arg("-c")
            .arg(&self.command)
            .stdin(Stdio::from(std::os::fd::OwnedFd::from(theirs)))
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if !self.inherit_environment {
            cmd.env_clear();
        }
        let child = cmd.spawn()?;
        ours.set_write_timeout(Some(super::link::TICK))?;
        let link = Link {
            sock: ours,
            tls: None,
        };
        Ok(OnLink::connected(link, Running { child }))
    }

    fn probe(&self, _: usize) -> bool {
        false
    }
}

/// A running program: lines on its standard input; ended with the connection.
struct Running {
    child: Child,
}

impl Protocol for Running {
    fn send(
        &mut self,
        link: &mut Link,
        batches: &[Batch],
        pos: &mut Position,
        give_up: GiveUp,
    ) -> Result<(), Failure> {
        Octets.send(link, batches, pos, give_up)
    }

    /// The program closed its standard input (or exited).
    fn closed(&self, link: &Link) -> bool {
        link.peer_closed()
    }
}

impl Drop for Running {
    /// Ends the program: its input has closed with the link (dropped first); it gets a second
    /// to finish, then SIGTERM and another second, then SIGKILL, so that none is left behind.
    fn drop(&mut self) {
        if self.exited_within(Duration::from_secs(1)) {
            return;
        }
        // SAFETY: signalling a child sluice started and has not reaped.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        if !self.exited_within(Duration::from_secs(1)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

impl Running {
    fn exited_within(&mut self, wait: Duration) -> bool {
        let until = Instant::now() + wait;
        loop {
            if !matches!(self.child.try_wait(), Ok(None)) {
                return true;
            }
            if Instant::now() >= until {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
