//! Opening `file()` names beneath their root, and saying what became of names a sender chose.
//!
//! A name is made by [`sluice_model::file_name::FileName`] and stays beneath its root as text.
//! Opening keeps it there on disk: the root is the administrator's and opened as written; below
//! it each directory is opened relative to the one before with `O_NOFOLLOW` (made when missing
//! and `create-dirs(yes)`), so a link planted below the root is never followed; a link at the
//! file's own name is followed only when root or sluice's own user made it (`/dev/stdout`),
//! never one another user planted; and with a name made from values only a regular file is
//! written. `docs/compatibility.md` compares this with syslog-ng, which drops such messages.

use sluice_model::file_name::NAME_MAX;
use sluice_model::LogMessage;
use std::collections::HashSet;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustix::fs::{AtFlags, Mode, OFlags, CWD};

/// Options of `file()` that govern files and directories.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileOptions {
    pub create_dirs: bool,
    pub perm: Option<u32>,
    pub dir_perm: Option<u32>,
    pub owner: Option<u32>,
    pub group: Option<u32>,
    pub dir_owner: Option<u32>,
    pub dir_group: Option<u32>,
    pub fsync: bool,
    pub time_reap: Duration,
    /// Messages a writer keeps for its failing files before it drops those of paths without
    /// flow control.
    pub log_fifo_size: usize,
    /// The longest wait between two tries of a failing file.
    pub time_reopen: Duration,
    /// Files are opened to read as well (an archive reads its end before it appends).
    pub readable: bool,
}

/// Names said in internal messages at most; past that they are only counted.
const MAX_SAID: usize = 10_000;

/// Counts the file names that had to be rewritten or were refused (`sluice ctl stats`:
/// `names_rewritten`, `names_refused`) and says each once, with the sender's address.
#[derive(Debug)]
pub struct NameReports {
    label: Arc<str>,
    rewritten: Arc<AtomicU64>,
    refused: Arc<AtomicU64>,
    said: Mutex<HashSet<Vec<u8>>>,
}

impl NameReports {
    pub fn new(label: Arc<str>, rewritten: Arc<AtomicU64>, refused: Arc<AtomicU64>) -> NameReports {
        NameReports {
            label,
            rewritten,
            refused,
            said: Mutex::default(),
        }
    }

    /// True the first time `name` is met for `what` (`b'w'`ritten elsewhere, `b'r'`efused),
    /// and always past [`MAX_SAID`] names.
    fn first_time(&self, what: u8, name: &[u8]) -> bool {
        let key = [&[what][..], name].concat();
        let mut said = self.said.lock().expect("names said lock");
        if said.len() >= MAX_SAID {
            return !said.contains(&key);
        }
        said.insert(key)
    }

    /// `name` was written instead of `as_sent`, what the values of `msg` would have made.
    pub fn rewritten(&self, name: &[u8], as_sent: &[u8], msg: &LogMessage) {
        if !self.first_time(b'w', name) {
            return;
        }
        self.rewritten.fetch_add(1, Ordering::Relaxed);
        let sender = match msg.origin.peer {
            Some(peer) => peer.ip().to_string(),
            None => format!("the local source {}", msg.origin.source_name),
        };
        crate::own_log::warning(format!(
            "{}: a message from {sender} names the file \"{}\"; written to \"{}\" (values in a file name cannot leave its directory, hold '/' or control bytes, or be '.', '..' or longer than {NAME_MAX} bytes)",
            self.label,
            String::from_utf8_lossy(as_sent).escape_debug(),
            String::from_utf8_lossy(name).escape_debug(),
        ));
    }

    /// `name` was refused for what is at its place (`why`); counted once.
    pub fn refused(&self, name: &[u8]) {
        if self.first_time(b'r', name) {
            self.refused.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Why a file could not be opened.
#[derive(Debug)]
pub struct OpenError {
    pub error: io::Error,
    /// The file was refused for what is at its name (a link, not a regular file), not for an
    /// error of the system: counted as a refused name.
    pub refused: bool,
}

impl From<io::Error> for OpenError {
    fn from(error: io::Error) -> OpenError {
        OpenError {
            error,
            refused: false,
        }
    }
}

impl From<rustix::io::Errno> for OpenError {
    fn from(errno: rustix::io::Errno) -> OpenError {
        io::Error::from(errno).into()
    }
}

impl std::fmt::Display for OpenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.error.fmt(f)
    }
}

fn refused(text: String) -> OpenError {
    OpenError {
        error: io::Error::other(text),
        refused: true,
    }
}

/// Opens `root` + `rest` to append, beneath `root`: `root` is the administrator's (opened as
/// written, made with `create-dirs()`), `rest` is walked one directory at a time, each opened
/// with `O_NOFOLLOW` relative to the one before and made when missing. Only a file sluice
/// makes gets `perm()`, `owner()` and `group()`. With `regular_only` (the name is made from
/// values) only a regular file is written, never a FIFO or a device a local user put where a
/// sender's name leads.
pub fn open_beneath(
    root: &[u8],
    rest: &[u8],
    rules: &FileOptions,
    regular_only: bool,
) -> Result<File, OpenError> {
    let root_path = if root.is_empty() { &b"."[..] } else { root };
    let dir_flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let mut dir = match rustix::fs::openat(CWD, root_path, dir_flags, Mode::empty()) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::NOENT) if rules.create_dirs => {
            let path = std::path::Path::new(std::ffi::OsStr::from_bytes(root_path));
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(rules.dir_perm.unwrap_or(0o700))
                .create(path)?;
            rustix::fs::openat(CWD, root_path, dir_flags, Mode::empty())?
        }
        Err(rustix::io::Errno::NOENT) => return Err(missing_dir(root_path).into()),
        Err(e) => return Err(e.into()),
    };
    let mut components = rest.split(|&b| b == b'/').filter(|c| !c.is_empty());
    let Some(mut name) = components.next() else {
        return Err(
            io::Error::new(io::ErrorKind::InvalidInput, "the file name is a directory").into(),
        );
    };
    for next in components {
        dir = open_dir(&dir, name, rules)?;
        name = next;
    }
    open_file(&dir, name, rules, regular_only)
}

fn missing_dir(path: &[u8]) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!(
            "directory {} does not exist and create-dirs() is off",
            String::from_utf8_lossy(path)
        ),
    )
}

/// The directory `name` in `dir`, made when missing and `create-dirs(yes)`; never a link.
fn open_dir(dir: &OwnedFd, name: &[u8], rules: &FileOptions) -> Result<OwnedFd, OpenError> {
    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    for _ in 0..2 {
        match rustix::fs::openat(dir, name, flags, Mode::empty()) {
            Ok(fd) => return Ok(fd),
            Err(rustix::io::Errno::NOENT) if rules.create_dirs => {
                let mode = Mode::from_raw_mode(rules.dir_perm.unwrap_or(0o700));
                match rustix::fs::mkdirat(dir, name, mode) {
                    Ok(()) => {
                        chown_dir(dir, name, rules.dir_owner, rules.dir_group);
                        return Ok(rustix::fs::openat(dir, name, flags, Mode::empty())?);
                    }
                    // Made meanwhile by another writer: open it.
                    Err(rustix::io::Errno::EXIST) => continue,
                    Err(e) => return Err(e.into()),
                }
            }
            Err(rustix::io::Errno::NOENT) => return Err(missing_dir(name).into()),
            Err(rustix::io::Errno::NOTDIR | rustix::io::Errno::LOOP) if is_link(dir, name) => {
                return Err(refused(format!(
                    "{} is a symbolic link; sluice does not follow links beneath a file name's root",
                    String::from_utf8_lossy(name)
                )));
            }
            Err(e) => return Err(e.into()),
        }
    }
    Err(io::Error::other("the directory keeps changing").into())
}

fn is_link(dir: &OwnedFd, name: &[u8]) -> bool {
    rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
        .is_ok_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFLNK)
}

/// The file `name` in `dir`, opened to append: made (with `perm()`, `owner()`, `group()`) when
/// missing; a link is followed only when root or sluice's user owns it.
fn open_file(
    dir: &OwnedFd,
    name: &[u8],
    rules: &FileOptions,
    regular_only: bool,
) -> Result<File, OpenError> {
    let access = if rules.readable {
        OFlags::RDWR
    } else {
        OFlags::WRONLY
    };
    let append = access | OFlags::APPEND | OFlags::NOCTTY | OFlags::CLOEXEC;
    let mode = Mode::from_raw_mode(rules.perm.unwrap_or(0o600));
    for _ in 0..2 {
        let create = append | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW;
        match rustix::fs::openat(dir, name, create, mode) {
            Ok(fd) => {
                let file = File::from(fd);
                // The mode went through the umask: set it as asked.
                if let Some(perm) = rules.perm {
                    file.set_permissions(std::fs::Permissions::from_mode(perm))?;
                }
                chown(&file, rules.owner, rules.group, name);
                return Ok(file);
            }
            Err(rustix::io::Errno::EXIST) => {}
            Err(e) => return Err(e.into()),
        }
        // There already: open it as it is, without following a link, and never waiting for a
        // reader: a FIFO put at a log file's name must not hold a writer, nor the stop.
        let existing = append | OFlags::NOFOLLOW | OFlags::NONBLOCK;
        let fd = match rustix::fs::openat(dir, name, existing, Mode::empty()) {
            Ok(fd) => fd,
            // Removed meanwhile: make it.
            Err(rustix::io::Errno::NOENT) => continue,
            Err(rustix::io::Errno::LOOP) => {
                follow_trusted_link(dir, name, append | OFlags::NONBLOCK)?
            }
            // A FIFO without a reader.
            Err(rustix::io::Errno::NXIO) if regular_only => return Err(not_regular(name)),
            Err(rustix::io::Errno::NXIO) => return Err(no_reader(name)),
            Err(e) => return Err(e.into()),
        };
        let file = File::from(fd);
        let kind = file.metadata()?.file_type();
        if regular_only && !kind.is_file() {
            return Err(not_regular(name));
        }
        // Open, it is written as it always was: a file, a terminal (`file("/dev/tty10")`), or
        // a FIFO that has a reader, which holds the writer back while it reads nothing
        // (backpressure, as a slow disk does).
        rustix::fs::fcntl_setfl(&file, OFlags::APPEND)?;
        return Ok(file);
    }
    Err(io::Error::other("the file keeps changing").into())
}

fn not_regular(name: &[u8]) -> OpenError {
    refused(format!(
        "{} is not a regular file; a file name made from values is only written to a regular file",
        String::from_utf8_lossy(name)
    ))
}

/// Opens what the link `name` in `dir` points to, when root or sluice's own user made the
/// link (`/dev/stdout`): a link another user planted where a log file was is refused. The
/// link is held open while its target is read, so it cannot be swapped in between.
fn no_reader(name: &[u8]) -> OpenError {
    refused(format!(
        "{} is a named pipe nothing reads; its messages wait for a reader",
        String::from_utf8_lossy(name)
    ))
}

/// Opens `path` with `flags` (and `O_CLOEXEC`), following a link at its own name only when
/// root or sluice's own user made it, as a `file()` destination does; the directories above
/// are the administrator's and followed as written. A followed file replaced by another
/// user's link to `/etc/shadow` is refused, not read into the logs.
pub fn open_trusting_own_links(path: &Path, flags: OFlags) -> Result<OwnedFd, OpenError> {
    let flags = flags | OFlags::CLOEXEC;
    match rustix::fs::open(path, flags | OFlags::NOFOLLOW, Mode::empty()) {
        Err(rustix::io::Errno::LOOP) => {
            let name = path.file_name().unwrap_or_default().as_bytes();
            let parent = match path.parent() {
                Some(p) if !p.as_os_str().is_empty() => p,
                _ => Path::new("."),
            };
            let dir = rustix::fs::open(
                parent,
                OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
            )?;
            follow_trusted_link(&dir, name, flags)
        }
        opened => Ok(opened?),
    }
}

fn follow_trusted_link(dir: &OwnedFd, name: &[u8], append: OFlags) -> Result<OwnedFd, OpenError> {
    let link = rustix::fs::openat(
        dir,
        name,
        OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let owner = File::from(link.try_clone()?).metadata()?.uid();
    let me = rustix::process::geteuid().as_raw();
    if owner != 0 && owner != me {
        return Err(refused(format!(
            "{} is a symbolic link made by user {owner}; sluice follows a link at a log file's name only when root or its own user made it",
            String::from_utf8_lossy(name)
        )));
    }
    let target = rustix::fs::readlinkat(&link, "", Vec::new())?;
    // A relative target is relative to the link's directory.
    Ok(rustix::fs::openat(
        dir,
        target.as_c_str(),
        append,
        Mode::empty(),
    )?)
}

fn chown(fd: &impl AsFd, uid: Option<u32>, gid: Option<u32>, name: &[u8]) {
    if uid.is_none() && gid.is_none() {
        return;
    }
    if let Err(e) = std::os::unix::fs::fchown(fd, uid, gid) {
        owner_warning(name, e);
    }
}

/// `dir-owner()`, `dir-group()` of a directory just made (`dir` holds it).
fn chown_dir(dir: &OwnedFd, name: &[u8], uid: Option<u32>, gid: Option<u32>) {
    if uid.is_none() && gid.is_none() {
        return;
    }
    let uid = uid.map(rustix::process::Uid::from_raw_unchecked);
    let gid = gid.map(rustix::process::Gid::from_raw_unchecked);
    if let Err(e) = rustix::fs::chownat(dir, name, uid, gid, AtFlags::SYMLINK_NOFOLLOW) {
        owner_warning(name, e.into());
    }
}

fn owner_warning(name: &[u8], e: io::Error) {
    crate::own_log::warning(format!(
        "cannot change owner of {}: {e}",
        String::from_utf8_lossy(name)
    ));
}

/// Makes the named pipe `path`, as syslog-ng makes a missing one: with `create-dirs(yes)`
/// its directories first (`dir-perm()`, 0700 unless given; `dir-owner()`, `dir-group()`
/// for the one it is in), then the pipe, `perm()` (0600 unless given), `owner()` and
/// `group()` set through the pipe itself, so a link put in its place meanwhile is not
/// followed.
pub fn make_pipe(path: &Path, rules: &FileOptions) -> io::Result<()> {
    use rustix::fs::{Gid, Uid};
    let ids = |uid: Option<u32>, gid: Option<u32>| (uid.map(Uid::from_raw), gid.map(Gid::from_raw));
    if rules.create_dirs {
        if let Some(dir) = path.parent().filter(|d| !d.exists()) {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(rules.dir_perm.unwrap_or(0o700))
                .create(dir)?;
            if rules.dir_owner.is_some() || rules.dir_group.is_some() {
                let (uid, gid) = ids(rules.dir_owner, rules.dir_group);
                rustix::fs::chown(dir, uid, gid)?;
            }
        }
    }
    let perm = Mode::from_raw_mode(rules.perm.unwrap_or(0o600));
    match rustix::fs::mknodat(CWD, path, rustix::fs::FileType::Fifo, perm, 0) {
        // Made meanwhile by another writer or a reader: theirs stands.
        Err(rustix::io::Errno::EXIST) => return Ok(()),
        made => made?,
    }
    // Opening a pipe to read without waiting succeeds whether or not a writer is there.
    let fifo = rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    if rules.owner.is_some() || rules.group.is_some() {
        let (uid, gid) = ids(rules.owner, rules.group);
        rustix::fs::fchown(&fifo, uid, gid)?;
    }
    // The mode without the process's umask, as asked.
    rustix::fs::fchmod(&fifo, perm)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn rules() -> FileOptions {
        FileOptions {
            create_dirs: true,
            ..crate::options::Globals::new().file
        }
    }

    fn root_of(dir: &std::path::Path) -> Vec<u8> {
        [dir.as_os_str().as_encoded_bytes(), b"/"].concat()
    }

    #[test]
    fn files_are_made_beneath_the_root_and_links_below_it_are_refused() {
        let scratch = tempfile::tempdir().unwrap();
        let root = scratch.path().join("root");
        let outside = scratch.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        let r = root_of(&root);
        // The root and the directories beneath it are made.
        open_beneath(&r, b"a/b/c.log", &rules(), true).unwrap();
        assert!(root.join("a/b/c.log").is_file());
        // A directory beneath the root that is a link is not followed.
        symlink(&outside, root.join("a/out")).unwrap();
        let e = open_beneath(&r, b"a/out/x.log", &rules(), true).unwrap_err();
        assert!(e.refused, "{e}");
        assert!(e.to_string().contains("symbolic link"), "{e}");
        assert!(!outside.join("x.log").exists());
        // A file that is a link made by another user is not followed, nor re-permissioned.
        let secret = outside.join("secret");
        std::fs::write(&secret, b"s").unwrap();
        std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o400)).unwrap();
        symlink(&secret, root.join("a/link.log")).unwrap();
        rustix::fs::chownat(
            CWD,
            root.join("a/link.log"),
            Some(rustix::process::Uid::from_raw_unchecked(65534)),
            None,
            AtFlags::SYMLINK_NOFOLLOW,
        )
        .unwrap();
        let with_perm = FileOptions {
            perm: Some(0o644),
            ..rules()
        };
        let e = open_beneath(&r, b"a/link.log", &with_perm, true).unwrap_err();
        assert!(
            e.refused && e.to_string().contains("made by user 65534"),
            "{e}"
        );
        assert_eq!(std::fs::read(&secret).unwrap(), b"s");
        let mode = std::fs::metadata(&secret).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o400);
        // A link root made (as `/dev/stdout` is) is followed, for names without values.
        let target = outside.join("target");
        std::fs::write(&target, b"").unwrap();
        symlink(&target, root.join("a/mine.log")).unwrap();

        use std::io::Write;
        open_beneath(&r, b"a/mine.log", &rules(), false)
            .unwrap()
            .write_all(b"x")
            .unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"x");
    }

    #[test]
    fn perm_is_set_on_files_sluice_makes_only() {
        let scratch = tempfile::tempdir().unwrap();
        let r = root_of(scratch.path());
        let rules = FileOptions {
            perm: Some(0o640),
            ..rules()
        };
        open_beneath(&r, b"new.log", &rules, true).unwrap();
        let mode = |f: &str| std::fs::metadata(scratch.path().join(f)).unwrap().mode() & 0o777;
        assert_eq!(mode("new.log"), 0o640);
        std::fs::write(scratch.path().join("old.log"), b"").unwrap();
        std::fs::set_permissions(
            scratch.path().join("old.log"),
            std::fs::Permissions::from_mode(0o600),
        )
        .unwrap();
        open_beneath(&r, b"old.log", &rules, true).unwrap();
        assert_eq!(mode("old.log"), 0o600);
        // Without perm(), files are private.
        open_beneath(&r, b"private.log", &super::tests::rules(), true).unwrap();
        assert_eq!(mode("private.log"), 0o600);
    }

    #[test]
    fn a_fifo_or_a_directory_at_a_templated_name_is_refused() {
        let scratch = tempfile::tempdir().unwrap();
        let r = root_of(scratch.path());
        rustix::fs::mknodat(
            CWD,
            scratch.path().join("fifo"),
            rustix::fs::FileType::Fifo,
            Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        let e = open_beneath(&r, b"fifo", &rules(), true).unwrap_err();
        assert!(e.refused, "{e}");
        std::fs::create_dir(scratch.path().join("dir")).unwrap();
        let e = open_beneath(&r, b"dir", &rules(), true).unwrap_err();
        assert_eq!(e.error.raw_os_error(), Some(libc::EISDIR), "{e}");
    }
}
