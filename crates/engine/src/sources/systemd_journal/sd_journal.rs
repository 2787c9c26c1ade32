//! The systemd journal, read through `libsystemd.so.0` loaded when a `systemd-journal()`
//! source first needs it — so one sluice binary runs on hosts without systemd, as
//! syslog-ng's does — and only the calls `systemd-journal()` makes, each with its error.
//!
//! A [`Journal`] is used by one thread at a time (libsystemd's rule for its objects): the
//! source's reading thread opens it, reads it and closes it.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::OnceLock;

/// `sd_journal_open*()` flags (`sd-journal.h`).
pub const LOCAL_ONLY: c_int = 1 << 0;
pub const ALL_NAMESPACES: c_int = 1 << 5;
pub const INCLUDE_DEFAULT_NAMESPACE: c_int = 1 << 6;

type Handle = *mut c_void;

/// The calls, as found in the library.
struct Api {
    open_namespace: unsafe extern "C" fn(*mut Handle, *const c_char, c_int) -> c_int,
    close: unsafe extern "C" fn(Handle),
    next: unsafe extern "C" fn(Handle) -> c_int,
    seek_head: unsafe extern "C" fn(Handle) -> c_int,
    seek_tail: unsafe extern "C" fn(Handle) -> c_int,
    previous: unsafe extern "C" fn(Handle) -> c_int,
    seek_cursor: unsafe extern "C" fn(Handle, *const c_char) -> c_int,
    test_cursor: unsafe extern "C" fn(Handle, *const c_char) -> c_int,
    get_cursor: unsafe extern "C" fn(Handle, *mut *mut c_char) -> c_int,
    get_realtime_usec: unsafe extern "C" fn(Handle, *mut u64) -> c_int,
    restart_data: unsafe extern "C" fn(Handle),
    enumerate_data: unsafe extern "C" fn(Handle, *mut *const c_void, *mut usize) -> c_int,
    add_match: unsafe extern "C" fn(Handle, *const c_void, usize) -> c_int,
    set_data_threshold: unsafe extern "C" fn(Handle, usize) -> c_int,
    get_fd: unsafe extern "C" fn(Handle) -> c_int,
    get_events: unsafe extern "C" fn(Handle) -> c_int,
    get_timeout: unsafe extern "C" fn(Handle, *mut u64) -> c_int,
    process: unsafe extern "C" fn(Handle) -> c_int,
}

/// The library's calls, loaded on first use; why not, when it cannot be.
fn api() -> Result<&'static Api, &'static str> {
    static API: OnceLock<Result<Api, String>> = OnceLock::new();
    API.get_or_init(load).as_ref().map_err(|e| e.as_str())
}

/// Whether `libsystemd.so.0` can be used here, and why not.
pub fn available() -> Result<(), &'static str> {
    api().map(|_| ())
}

fn load() -> Result<Api, String> {
    const LIBRARY: &str = "libsystemd.so.0";
    // SAFETY: libsystemd's initialisers have no preconditions.
    let lib = unsafe { libloading::Library::new(LIBRARY) }
        .map_err(|e| format!("cannot load {LIBRARY}: {e}"))?;
    // The library stays loaded for the life of the process: the calls point into it.
    let lib: &'static libloading::Library = Box::leak(Box::new(lib));
    macro_rules! call {
        ($name:literal) => {
            // SAFETY: the type is the call's C signature in `sd-journal.h`.
            *unsafe { lib.get(concat!($name, "\0").as_bytes()) }
                .map_err(|e| format!("{LIBRARY} has no {}: {e}", $name))?
        };
    }
    Ok(Api {
        open_namespace: call!("sd_journal_open_namespace"),
        close: call!("sd_journal_close"),
        next: call!("sd_journal_next"),
        seek_head: call!("sd_journal_seek_head"),
        seek_tail: call!("sd_journal_seek_tail"),
        previous: call!("sd_journal_previous"),
        seek_cursor: call!("sd_journal_seek_cursor"),
        test_cursor: call!("sd_journal_test_cursor"),
        get_cursor: call!("sd_journal_get_cursor"),
        get_realtime_usec: call!("sd_journal_get_realtime_usec"),
        restart_data: call!("sd_journal_restart_data"),
        enumerate_data: call!("sd_journal_enumerate_data"),
        add_match: call!("sd_journal_add_match"),
        set_data_threshold: call!("sd_journal_set_data_threshold"),
        get_fd: call!("sd_journal_get_fd"),
        get_events: call!("sd_journal_get_events"),
        get_timeout: call!("sd_journal_get_timeout"),
        process: call!("sd_journal_process"),
    })
}

/// An open journal.
pub struct Journal {
    api: &'static Api,
    j: Handle,
}

// SAFETY: a journal is used by one thread at a time (it is moved, never shared: not `Sync`).
unsafe impl Send for Journal {}

/// A negative return of libsystemd as an error.
fn check(rc: c_int, what: &str) -> std::io::Result<c_int> {
    if rc < 0 {
        let e = std::io::Error::from_raw_os_error(-rc);
        Err(std::io::Error::new(e.kind(), format!("{what}: {e}")))
    } else {
        Ok(rc)
    }
}

impl Journal {
    /// Opens this machine's journal: `namespace` `None` for every namespace, else one
    /// (`sd_journal_open_namespace`).
    pub fn open(namespace: Option<&str>, flags: c_int) -> std::io::Result<Journal> {
        let api = api().map_err(std::io::Error::other)?;
        let namespace = namespace
            .map(|n| CString::new(n).map_err(|_| std::io::Error::other("a namespace with NUL")))
            .transpose()?;
        let mut j: Handle = std::ptr::null_mut();
        let name = namespace.as_ref().map_or(std::ptr::null(), |n| n.as_ptr());
        // SAFETY: `j` is written on success only; `name` is NUL-terminated or null.
        check(
            unsafe { (api.open_namespace)(&mut j, name, flags) },
            "opening the journal",
        )?;
        Ok(Journal { api, j })
    }

    /// Only entries with this field value (`_COMM=sshd`); several of one field are either,
    /// of different fields all.
    pub fn add_match(&mut self, field_value: &str) -> std::io::Result<()> {
        // SAFETY: the data is valid for its length.
        let rc =
            unsafe { (self.api.add_match)(self.j, field_value.as_ptr().cast(), field_value.len()) };
        check(rc, &format!("matching {field_value}")).map(drop)
    }

    /// Values longer than `max` come cut to it.
    pub fn set_data_threshold(&mut self, max: usize) -> std::io::Result<()> {
        // SAFETY: a valid journal.
        check(
            unsafe { (self.api.set_data_threshold)(self.j, max) },
            "setting the field size",
        )
        .map(drop)
    }

    pub fn seek_head(&mut self) -> std::io::Result<()> {
        // SAFETY: a valid journal.
        check(
            unsafe { (self.api.seek_head)(self.j) },
            "seeking to the start",
        )
        .map(drop)
    }

    /// After the last entry: the next is the first one written from now on.
    pub fn seek_tail(&mut self) -> std::io::Result<()> {
        // SAFETY: a valid journal.
        check(
            unsafe { (self.api.seek_tail)(self.j) },
            "seeking to the end",
        )?;
        // At the tail, the next entry would be the last one again: step onto it.
        // SAFETY: a valid journal.
        check(unsafe { (self.api.previous)(self.j) }, "seeking to the end").map(drop)
    }

    /// Onto the entry of `cursor`, when it is still in the journal: `false` when it is not
    /// (the journal was rotated past it, or the cursor is another machine's).
    pub fn seek_cursor(&mut self, cursor: &str) -> std::io::Result<bool> {
        let c = CString::new(cursor).map_err(|_| std::io::Error::other("a cursor with NUL"))?;
        // SAFETY: a valid journal and a NUL-terminated cursor.
        check(
            unsafe { (self.api.seek_cursor)(self.j, c.as_ptr()) },
            "seeking to the cursor",
        )?;
        if !self.step()? {
            return Ok(false);
        }
        // SAFETY: as above.
        let rc = unsafe { (self.api.test_cursor)(self.j, c.as_ptr()) };
        Ok(check(rc, "testing the cursor")? > 0)
    }

    /// Steps onto the next entry: `false` at the end.
    pub fn step(&mut self) -> std::io::Result<bool> {
        // SAFETY: a valid journal.
        Ok(check(unsafe { (self.api.next)(self.j) }, "reading the next entry")? > 0)
    }

    /// The current entry's cursor.
    pub fn cursor(&mut self) -> std::io::Result<String> {
        let mut c: *mut c_char = std::ptr::null_mut();
        // SAFETY: `c` is written on success only.
        check(
            unsafe { (self.api.get_cursor)(self.j, &mut c) },
            "reading the cursor",
        )?;
        // SAFETY: libsystemd returned a NUL-terminated string the caller frees.
        let cursor = unsafe { CStr::from_ptr(c) }.to_string_lossy().into_owned();
        // SAFETY: allocated by libsystemd with malloc.
        unsafe { libc::free(c.cast()) };
        Ok(cursor)
    }

    /// The current entry's time, microseconds since the epoch.
    pub fn realtime(&mut self) -> std::io::Result<u64> {
        let mut t = 0u64;
        // SAFETY: a valid journal and place.
        check(
            unsafe { (self.api.get_realtime_usec)(self.j, &mut t) },
            "reading the time",
        )?;
        Ok(t)
    }

    /// Hands each field of the current entry (`KEY=value`) to `field`.
    pub fn fields(&mut self, mut field: impl FnMut(&[u8])) -> std::io::Result<()> {
        // SAFETY: a valid journal.
        unsafe { (self.api.restart_data)(self.j) };
        loop {
            let mut data: *const c_void = std::ptr::null();
            let mut len = 0usize;
            // SAFETY: a valid journal and places.
            let rc = unsafe { (self.api.enumerate_data)(self.j, &mut data, &mut len) };
            if check(rc, "reading the entry's fields")? == 0 {
                return Ok(());
            }
            // SAFETY: libsystemd's data, valid until the next call on the journal.
            field(unsafe { std::slice::from_raw_parts(data.cast::<u8>(), len) });
        }
    }

    /// Waits until the journal may have changed or `stop` can be read (or is closed).
    /// `false` when `stop` woke it.
    pub fn wait(&mut self, stop: BorrowedFd<'_>) -> std::io::Result<bool> {
        // SAFETY: a valid journal.
        let fd = check(unsafe { (self.api.get_fd)(self.j) }, "watching the journal")?;
        // SAFETY: as above.
        let events = check(
            unsafe { (self.api.get_events)(self.j) },
            "watching the journal",
        )?;
        let mut timeout = u64::MAX;
        // SAFETY: as above.
        check(
            unsafe { (self.api.get_timeout)(self.j, &mut timeout) },
            "watching the journal",
        )?;
        let ms = if timeout == u64::MAX {
            -1
        } else {
            let mut now = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            // SAFETY: a valid place; the journal's timeouts are on this clock.
            unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
            let now = now.tv_sec as u64 * 1_000_000 + now.tv_nsec as u64 / 1000;
            timeout
                .saturating_sub(now)
                .div_ceil(1000)
                .min(c_int::MAX as u64) as c_int
        };
        let mut fds = [
            libc::pollfd {
                fd,
                events: events as i16,
                revents: 0,
            },
            libc::pollfd {
                fd: stop.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: two valid pollfds.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, ms) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
        if fds[1].revents != 0 {
            return Ok(false);
        }
        // SAFETY: a valid journal.
        check(
            unsafe { (self.api.process)(self.j) },
            "watching the journal",
        )?;
        Ok(true)
    }
}

impl Drop for Journal {
    fn drop(&mut self) {
        // SAFETY: opened by `open`, closed once.
        unsafe { (self.api.close)(self.j) }
    }
}
