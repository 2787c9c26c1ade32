//! Detaching from the terminal as a classic Unix daemon: fork, new session, fork again,
//! standard streams on /dev/null. The first process waits until the daemon reports that its
//! sockets are bound (or that it failed) and exits with that result, so `sluice` without `-F`
//! still fails visibly on a port in use.

use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};

/// Runs `serve` in a detached process. `serve` calls its argument once it has started.
/// Returns in the daemon when `serve` returns; the launching process exits from here.
pub fn detach(serve: impl FnOnce(&dyn Fn()) -> anyhow::Result<()>) -> anyhow::Result<()> {
    let mut fds = [0; 2];
    // SAFETY: pipe() fills the two descriptors we own from here on.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        anyhow::bail!("cannot create a pipe: {}", std::io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created by pipe() and are owned by nobody else.
    let (read_end, write_end) =
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // SAFETY: no threads exist yet (the runtime starts inside `serve`), so forking is sound.
    match unsafe { libc::fork() } {
        -1 => anyhow::bail!("cannot fork: {}", std::io::Error::last_os_error()),
        0 => {}
        _ => {
            drop(write_end);
            let mut status = String::new();
            let _ = std::fs::File::from(read_end).read_to_string(&mut status);
            if status.starts_with("ok") {
                std::process::exit(0);
            }
            eprintln!(
                "sluice: the daemon did not start{}",
                if status.is_empty() {
                    String::new()
                } else {
                    format!(": {status}")
                }
            );
            std::process::exit(2);
        }
    }
    drop(read_end);
    // SAFETY: setsid and a second fork in a single-threaded child.
    unsafe {
        libc::setsid();
        match libc::fork() {
            -1 => anyhow::bail!("cannot fork: {}", std::io::Error::last_os_error()),
            0 => {}
            _ => libc::_exit(0),
        }
    }
    let report = std::cell::RefCell::new(Some(std::fs::File::from(write_end)));
    let started = || {
        if let Some(mut f) = report.borrow_mut().take() {
            let _ = f.write_all(b"ok");
        }
        quiet_stdio();
    };
    let result = serve(&started);
    if let (Err(e), Some(mut f)) = (&result, report.borrow_mut().take()) {
        // The launching process says it, once: not this one too on the same terminal.
        let _ = write!(f, "{e:#}");
        std::process::exit(2);
    }
    if let Err(e) = &result {
        // Standard error is gone: said where sluice's own messages go.
        sluice_engine::own_log::error(format!("{e:#}"));
    }
    result
}

/// Standard input and output on /dev/null (standard error too, unless debugging).
fn quiet_stdio() {
    if let Ok(null) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
    {
        use std::os::fd::AsRawFd;
        // SAFETY: dup2 onto the standard descriptors; `null` stays open for the call.
        unsafe {
            libc::dup2(null.as_raw_fd(), 0);
            libc::dup2(null.as_raw_fd(), 1);
            libc::dup2(null.as_raw_fd(), 2);
        }
    }
}
