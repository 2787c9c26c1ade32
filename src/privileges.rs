//! `-C/--chroot`, `-u/--user`, `-g/--group` and `--caps`/`--no-caps`, as syslog-ng has them: sluice binds its
//! listeners and opens what needs root (privileged ports, `/dev/kmsg`, its persist file) as
//! root, then runs as the given user and group for good, keeping only the capabilities a log
//! daemon needs (`--caps` names others; `--no-caps` keeps none).
//!
//! Credentials and capabilities belong to each thread, and sluice's threads are running by
//! then. glibc changes the ids of every thread (its `setxid` broadcast) but not their
//! capabilities, which the kernel clears as the ids leave root. So sluice does what glibc does,
//! with capabilities: every thread is sent a signal whose handler keeps its capabilities
//! across the change of ids (`PR_SET_KEEPCAPS`), changes them, and sets the capabilities kept
//! (`capset`); the caller does the same last. A thread a not-yet-changed thread starts meanwhile
//! is found by listing the threads again until none is new.

use std::ffi::CString;
use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering};
use std::sync::OnceLock;

/// Who to become.
#[derive(Debug, Clone)]
pub struct Become {
    uid: libc::uid_t,
    gid: libc::gid_t,
    /// The user's name, when given by one: its supplementary groups come with it.
    name: Option<CString>,
}

/// The ids of `user` (a name or a number) and `group` (by default the user's own group).
pub fn resolve(user: Option<&str>, group: Option<&str>) -> Result<Option<Become>, String> {
    if user.is_none() && group.is_none() {
        return Ok(None);
    }
    // SAFETY: getuid and getgid have no preconditions.
    let (mut uid, mut gid) = (unsafe { libc::getuid() }, unsafe { libc::getgid() });
    let mut user_name = None;
    if let Some(user) = user {
        let name = CString::new(user).map_err(|_| format!("-u {user:?}: not a user name"))?;
        // SAFETY: a NUL-terminated name; the entry is read before the next call.
        let pw = unsafe { libc::getpwnam(name.as_ptr()) };
        if pw.is_null() {
            uid = user
                .parse()
                .map_err(|_| format!("-u {user}: no such user"))?;
        } else {
            // SAFETY: a valid entry, just returned.
            (uid, gid) = unsafe { ((*pw).pw_uid, (*pw).pw_gid) };
            user_name = Some(name);
        }
    }
    if let Some(group) = group {
        let name = CString::new(group).map_err(|_| format!("-g {group:?}: not a group name"))?;
        // SAFETY: as above.
        let gr = unsafe { libc::getgrnam(name.as_ptr()) };
        gid = if gr.is_null() {
            group
                .parse()
                .map_err(|_| format!("-g {group}: no such group"))?
        } else {
            // SAFETY: a valid entry, just returned.
            unsafe { (*gr).gr_gid }
        };
    }
    Ok(Some(Become {
        uid,
        gid,
        name: user_name,
    }))
}

/// `-C DIR`: makes `dir` the root directory of the process (and its working directory).
pub fn chroot(dir: &std::path::Path) -> Result<(), String> {
    use std::os::unix::ffi::OsStrExt;
    let path =
        CString::new(dir.as_os_str().as_bytes()).map_err(|_| "a path with NUL".to_string())?;
    // The threads are found in /proc, which the new root does not have.
    tasks().ok_or("cannot read /proc/self/task")?;
    // SAFETY: a NUL-terminated path; chdir to "/" of the new root.
    unsafe {
        if libc::chroot(path.as_ptr()) != 0 {
            return Err(std::io::Error::last_os_error().to_string());
        }
        if libc::chdir(c"/".as_ptr()) != 0 {
            return Err(std::io::Error::last_os_error().to_string());
        }
    }
    Ok(())
}

/// The capabilities kept by default: binding ports below 1024 (a reload may add one), reading
/// the kernel's messages, reading files of other users.
pub const DEFAULT_CAPS: &str = "cap_net_bind_service,cap_syslog,cap_dac_read_search";

/// Capabilities by name, as `--caps` names them (syslog-ng's `cap_from_text` names).
const CAPS: &[(&str, u32)] = &[
    ("cap_chown", 0),
    ("cap_dac_override", 1),
    ("cap_dac_read_search", 2),
    ("cap_fowner", 3),
    ("cap_kill", 5),
    ("cap_net_bind_service", 10),
    ("cap_net_broadcast", 11),
    ("cap_net_admin", 12),
    ("cap_net_raw", 13),
    ("cap_ipc_lock", 14),
    ("cap_sys_chroot", 18),
    ("cap_sys_admin", 21),
    ("cap_sys_resource", 24),
    ("cap_syslog", 34),
];

/// The capabilities `text` names: a comma-separated list of names (`cap_` optional), each
/// perhaps with syslog-ng's `=ep`/`=p` flags (sluice keeps every one named effective).
pub fn caps(text: &str) -> Result<u64, String> {
    let mut mask = 0;
    for part in text.split([',', ' ']).filter(|p| !p.is_empty()) {
        let name = part
            .split(['=', '+'])
            .next()
            .unwrap_or_default()
            .to_ascii_lowercase();
        if name.is_empty() {
            continue;
        }
        let full = match name.starts_with("cap_") {
            true => name.clone(),
            false => format!("cap_{name}"),
        };
        let Some(&(_, bit)) = CAPS.iter().find(|(n, _)| *n == full) else {
            let known: Vec<&str> = CAPS.iter().map(|(n, _)| *n).collect();
            return Err(format!(
                "--caps: unknown capability {name:?}; known: {}",
                known.join(", ")
            ));
        };
        mask |= 1u64 << bit;
    }
    Ok(mask)
}

/// What every thread becomes: its ids, groups and the capabilities it keeps.
struct Target {
    uid: libc::uid_t,
    gid: libc::gid_t,
    groups: Vec<libc::gid_t>,
    caps: u64,
}

static TARGET: OnceLock<Target> = OnceLock::new();
/// Threads that changed, and the first error (an errno) one of them met.
static CHANGED: AtomicUsize = AtomicUsize::new(0);
static ERROR: AtomicI32 = AtomicI32::new(0);

/// Changes the calling thread's credentials to [`TARGET`]'s with raw system calls (glibc's
/// wrappers would broadcast to every thread themselves). Async-signal-safe: a signal handler
/// runs it.
fn change_this_thread() {
    let Some(t) = TARGET.get() else {
        return;
    };
    // A thread that a changed thread started has its creator's credentials already (and
    // could not change them again).
    // SAFETY: getuid(2) has no preconditions.
    if t.uid != 0 && unsafe { libc::syscall(libc::SYS_getuid) } == i64::from(t.uid) {
        CHANGED.fetch_add(1, Ordering::SeqCst);
        return;
    }
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    let low = t.caps as u32;
    let high = (t.caps >> 32) as u32;
    let header = Header {
        version: 0x2008_0522, // _LINUX_CAPABILITY_VERSION_3
        pid: 0,
    };
    let data = [
        Data {
            effective: low,
            permitted: low,
            inheritable: 0,
        },
        Data {
            effective: high,
            permitted: high,
            inheritable: 0,
        },
    ];
    // SAFETY: system calls on this thread's credentials with valid arguments; nothing here
    // allocates or takes a lock.
    let failed = unsafe {
        libc::prctl(libc::PR_SET_KEEPCAPS, 1, 0, 0, 0) != 0
            || libc::syscall(libc::SYS_setgroups, t.groups.len(), t.groups.as_ptr()) != 0
            || libc::syscall(libc::SYS_setresgid, t.gid, t.gid, t.gid) != 0
            || libc::syscall(libc::SYS_setresuid, t.uid, t.uid, t.uid) != 0
            || libc::syscall(libc::SYS_capset, &header, data.as_ptr()) != 0
            || libc::prctl(libc::PR_SET_KEEPCAPS, 0, 0, 0, 0) != 0
    };
    if failed {
        let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(-1);
        let _ = ERROR.compare_exchange(0, errno, Ordering::SeqCst, Ordering::SeqCst);
    }
    CHANGED.fetch_add(1, Ordering::SeqCst);
}

extern "C" fn on_signal(_: libc::c_int) {
    change_this_thread();
}

/// `/proc/self/task`, opened before a `chroot` (the new root has no `/proc`).
static TASKS: OnceLock<std::fs::File> = OnceLock::new();

fn tasks() -> Option<&'static std::fs::File> {
    if TASKS.get().is_none() {
        let _ = TASKS.set(std::fs::File::open("/proc/self/task").ok()?);
    }
    TASKS.get()
}

/// The ids of this process's threads: the entries of `/proc/self/task`.
fn threads() -> Result<Vec<libc::pid_t>, String> {
    use std::os::fd::AsRawFd;
    let dir = tasks().ok_or("cannot read /proc/self/task to find the threads")?;
    let mut found = Vec::new();
    // SAFETY: a duplicate of an open directory's descriptor, read to its end and closed; the
    // entries' names are NUL-terminated.
    unsafe {
        let fd = libc::dup(dir.as_raw_fd());
        let stream = libc::fdopendir(fd);
        if stream.is_null() {
            libc::close(fd);
            return Err(format!(
                "/proc/self/task: {}",
                std::io::Error::last_os_error()
            ));
        }
        libc::rewinddir(stream);
        loop {
            let entry = libc::readdir(stream);
            if entry.is_null() {
                break;
            }
            let name = std::ffi::CStr::from_ptr((*entry).d_name.as_ptr());
            if let Some(tid) = name.to_str().ok().and_then(|n| n.parse().ok()) {
                found.push(tid);
            }
        }
        libc::closedir(stream);
    }
    Ok(found)
}

/// Becomes `who` in every thread — supplementary groups, group, user — keeping the
/// capabilities of `caps` (a mask of capability bits) and no other.
pub fn drop_to(who: &Become, caps: u64) -> Result<(), String> {
    let groups = match &who.name {
        Some(name) => {
            let mut n: libc::c_int = 64;
            let mut list = vec![0 as libc::gid_t; n as usize];
            // SAFETY: a NUL-terminated name and a buffer of `n` entries, grown when too small.
            while unsafe { libc::getgrouplist(name.as_ptr(), who.gid, list.as_mut_ptr(), &mut n) }
                < 0
            {
                list.resize(n as usize, 0);
            }
            list.truncate(n as usize);
            list
        }
        None => vec![who.gid],
    };
    let target = Target {
        uid: who.uid,
        gid: who.gid,
        groups,
        caps,
    };
    if TARGET.set(target).is_err() {
        return Err("the user was already changed".into());
    }
    // SAFETY: gettid, getpid and sigaction with a handler that only makes system calls.
    let (me, pid, signal) = unsafe { (libc::gettid(), libc::getpid(), libc::SIGRTMIN() + 4) };
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
        action.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        if libc::sigaction(signal, &action, std::ptr::null_mut()) != 0 {
            return Err(format!("sigaction: {}", std::io::Error::last_os_error()));
        }
    }
    let mut signalled = std::collections::HashSet::new();
    loop {
        let new: Vec<libc::pid_t> = threads()?
            .into_iter()
            .filter(|t| *t != me && !signalled.contains(t))
            .collect();
        if new.is_empty() {
            break;
        }
        for tid in new {
            // SAFETY: a signal to a thread of this process.
            if unsafe { libc::syscall(libc::SYS_tgkill, pid, tid, signal) } == 0 {
                signalled.insert(tid);
            }
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while CHANGED.load(Ordering::SeqCst) < signalled.len() {
            if std::time::Instant::now() > deadline {
                return Err("a thread did not change its user in 5 s".into());
            }
            std::thread::yield_now();
        }
    }
    change_this_thread();
    match ERROR.load(Ordering::SeqCst) {
        0 => {}
        errno => {
            return Err(format!(
                "changing a thread's user and capabilities: {}",
                std::io::Error::from_raw_os_error(errno)
            ))
        }
    }
    // Root cannot be taken back.
    // SAFETY: setuid(2); it must fail.
    if who.uid != 0 && unsafe { libc::setuid(0) } == 0 {
        return Err("the user could become root again".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capabilities_are_named_as_syslog_ng_names_them() {
        assert_eq!(caps(DEFAULT_CAPS), Ok((1 << 10) | (1 << 34) | (1 << 2)));
        assert_eq!(
            caps("net_bind_service=ep,cap_syslog+p"),
            Ok((1 << 10) | (1 << 34))
        );
        assert_eq!(caps(""), Ok(0));
        assert!(caps("cap_fly").unwrap_err().contains("unknown capability"));
    }
}
