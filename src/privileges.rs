//! `-u/--user` and `-g/--group`, as syslog-ng has them: sluice binds its listeners and opens
//! what needs root (privileged ports, `/dev/kmsg`, its persist file) as root, then runs as
//! the given user and group for good.
//!
//! glibc changes the ids of every thread of the process (its `setxid` broadcast), and the
//! kernel clears a thread's capabilities when its ids leave root: nothing privileged is kept.
//! A reload that adds a listener on a port below 1024 then fails, said with the reason.

use std::ffi::CString;

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

/// Becomes `who` in every thread: supplementary groups, group, user — in that order, while
/// there is still the right to change them.
pub fn drop_to(who: &Become) -> Result<(), String> {
    let fail = |what: &str| format!("{what}: {}", std::io::Error::last_os_error());
    // SAFETY: plain system calls with valid arguments.
    unsafe {
        let groups = match &who.name {
            Some(name) => libc::initgroups(name.as_ptr(), who.gid),
            None => libc::setgroups(1, &who.gid),
        };
        if groups != 0 {
            return Err(fail("setting the supplementary groups"));
        }
        if libc::setresgid(who.gid, who.gid, who.gid) != 0 {
            return Err(fail("setresgid"));
        }
        if libc::setresuid(who.uid, who.uid, who.uid) != 0 {
            return Err(fail("setresuid"));
        }
        // Root cannot be taken back.
        if who.uid != 0 && libc::setuid(0) == 0 {
            return Err("the user could become root again".into());
        }
    }
    Ok(())
}
