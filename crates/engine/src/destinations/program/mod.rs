//! `program("command")`: messages written to a program's standard input, one per line.
//!
//! The command runs with `/bin/sh -c` (the configuration's text; message text never reaches
//! a command line). Its standard input is one end of a unix stream socket pair, so the
//! program is a "server" of the shared sender ([`super::sender`]): opening a connection
//! starts the program, a program that exits is a connection that closed, and what it had not
//! read is sent again to the next one — with the queue, `disk-buffer()`, flow control,
//! `time-reopen()` and the stop's grace of every forwarding destination. A program that keeps
//! exiting at once is started again after 1 s, doubling up to 60 s, not in a busy loop.

use super::driver::{Built, DestinationContext, DestinationDriver, FormatOptions, Queue};
use super::driver::{BATCH_LATER, DISK_BUFFER, EVERY_LATER, FORMAT, QUEUE};
use super::format::Format;
use super::link::{Connected, Failure, GiveUp, Link, Octets, OnLink, Position, Protocol};
use super::network::servers::NetworkDestination;
use super::queue::Batch;
use super::sender::Servers;
use super::sender::{Batching, Pacing};
use crate::options;
use sluice_config::declared::{read, Declared, Options};
use sluice_config::{ConfigError, Node};
use socket2::{Domain, Socket, Type};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
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
        // A group of its own: what the program starts (a pipeline, a `&`) ends with it.
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
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
    /// to finish, then its process group SIGTERM — what it started and left running too
    /// (`yes &`, a pipeline's other commands) — and another second, then SIGKILL, so that
    /// none is left behind.
    fn drop(&mut self) {
        // The program leads its group (`process_group(0)`): the group's id is its pid.
        let group = -(self.child.id() as i32);
        let exited = self.exited_within(Duration::from_secs(1));
        // SAFETY: signalling the process group of a child sluice started; the group lives
        // while any of its processes does, whether or not the program was reaped.
        unsafe { libc::kill(group, libc::SIGTERM) };
        if !exited && !self.exited_within(Duration::from_secs(1)) {
            // SAFETY: as above.
            unsafe { libc::kill(group, libc::SIGKILL) };
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

/// The declaration: the names it answers to, its options, a valid use, its build.
pub static DRIVER: DestinationDriver = DestinationDriver {
    names: &["program"],
    about: "The standard input of a program sluice runs.",
    options: &[
        FORMAT,
        QUEUE,
        DISK_BUFFER,
        PROGRAM,
        EVERY_LATER,
        BATCH_LATER,
    ],
    sample: "program(\"cat >/dev/null\")",
    build: program,
};

/// The options of `program()`.
const PROGRAM: &[Declared] = &[
    read("inherit_environment", "inherit-environment(no)")
        .about("a `program()` gets sluice's environment", "yes"),
    // The program runs until its connection ends, whatever this says.
    read("keep_alive", "keep-alive(yes)")
        .about("connections and programs are kept over a reload", "yes"),
];

/// `program("/usr/local/bin/alert")`: messages on a program's standard input.
fn program(node: &Node, o: &mut Options, cx: &DestinationContext) -> Result<Built, ConfigError> {
    let format = FormatOptions::read(o, cx)?;
    let queue = Queue::read(o, cx.globals)?;
    let (command, inherit_environment) = options::program_command(node, o, "/usr/local/bin/alert")?;
    o.last("keep_alive").map(Node::bool).transpose()?;
    let disk_buffer = queue.disk_buffer(o, || {
        format!(
            "{}-program-{:08x}",
            cx.name,
            crc32fast::hash(command.text.as_bytes())
        )
    })?;
    let dates = format.dates.clone();
    let formatter = format
        .or_global(&cx.globals.file_template)
        .formatter(Format::File(dates));
    let (component, id) = cx.counted_as(node);
    let counters = cx.stats.destination(&component, &id, &command.text);
    // A program that exited is started again as soon as its own delay allows
    // ([`Program`]), unless time-reopen() says to wait longer.
    let time_reopen = match o.last("time_reopen") {
        Some(_) => queue.time_reopen,
        None => Duration::from_secs(1),
    };
    let pacing = Pacing {
        time_reopen,
        failback: None,
        retries: 1,
        batch: Batching::default(),
        log_fifo_size: queue.log_fifo_size,
    };
    Ok(Arc::new(NetworkDestination::to(
        cx.label(),
        formatter,
        Arc::new(Program::new(command.text.clone(), inherit_environment)),
        pacing,
        disk_buffer,
        false,
        counters,
    )))
}
