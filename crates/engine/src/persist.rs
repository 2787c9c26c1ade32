//! The persist file (`-R`): where each file source has read to, kept across restarts.
//!
//! The file is an array of fixed [`SLOT`]-byte records, one per key: for a file
//! (`file:/var/log/x`) the file's device and inode, and the offset up to which its lines were
//! delivered; for the journal (`journal:`), the cursor of the last entry delivered. A record
//! is written in place with one `pwrite` when a position moves: the page cache keeps it when
//! sluice is killed (`kill -9`), and `fsync` at a clean stop keeps it when the machine is not.
//! Each record carries a CRC: a record that does not check out makes the whole file suspect —
//! it is set aside (renamed `….corrupt`) and named in an error, and the file sources start at
//! the end of their files instead of sending everything again.

use std::collections::HashMap;
use std::fs::File;
use std::io::ErrorKind;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The size of one record.
const SLOT: usize = 512;
/// The longest key a record holds as it is; a longer one (a followed file's path can be
/// 4,096 bytes) is kept under its SHA-256 ([`slot_key`]).
const LONGEST_KEY: usize = 256;
/// The first bytes of a file's record, of a cursor's.
const MAGIC: &[u8; 4] = b"SLU1";
const MAGIC_CURSOR: &[u8; 4] = b"SLC1";

/// Where a file was read to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Position {
    pub dev: u64,
    pub ino: u64,
    /// Bytes delivered from the start of the file.
    pub offset: u64,
}

/// What a record keeps.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Kept {
    At(Position),
    /// A journal's cursor.
    Cursor(Box<str>),
}

/// What the persist file said at start.
#[derive(Debug, PartialEq, Eq)]
pub enum Found<T = Position> {
    /// The key's record.
    At(T),
    /// No record: the source has not read this file before.
    New,
    /// The persist file was corrupt: start at the end.
    Unknown,
}

struct Store {
    file: Option<File>,
    path: PathBuf,
    /// Each key's slot and what it keeps.
    slots: HashMap<String, (usize, Kept)>,
    corrupt: bool,
    /// When the file was last looked for at its path ([`Store::make_again_if_gone`]).
    looked: Option<Instant>,
}

/// Where the persist file is: given once per process, opened when a source first asks.
static PATH: OnceLock<PathBuf> = OnceLock::new();
static STORE: OnceLock<Mutex<Store>> = OnceLock::new();

/// Sets where the persist file is (`-R`); once per process.
pub fn init(path: &Path) {
    let _ = PATH.set(path.to_path_buf());
}

/// The store, opened (or made) on first use; `None` without [`init`]. A file that does not
/// check out is set aside and said; one that cannot be opened means positions are not kept
/// (said).
fn store() -> Option<&'static Mutex<Store>> {
    let path = PATH.get()?;
    Some(STORE.get_or_init(|| Mutex::new(Store::open(path))))
}

/// Opens the persist file now rather than at its first use (before the process gives up the
/// rights it needs to open it).
pub fn open() {
    let _ = store();
}

/// The file position the persist file holds for `key`.
pub fn find(key: &str) -> Found {
    match find_kept(key) {
        Found::At(Kept::At(at)) => Found::At(at),
        Found::Unknown => Found::Unknown,
        _ => Found::New,
    }
}

/// The cursor the persist file holds for `key`.
pub fn find_cursor(key: &str) -> Found<String> {
    match find_kept(key) {
        Found::At(Kept::Cursor(c)) => Found::At(c.into()),
        Found::Unknown => Found::Unknown,
        _ => Found::New,
    }
}

fn find_kept(key: &str) -> Found<Kept> {
    let Some(store) = store() else {
        return Found::New;
    };
    let store = store.lock().expect("persist lock");
    match store.slots.get(&*slot_key(key)) {
        Some((_, kept)) => Found::At(kept.clone()),
        None if store.corrupt => Found::Unknown,
        None => Found::New,
    }
}

/// Keeps `key` at `position`.
pub fn keep(key: &str, position: Position) {
    keep_kept(key, Kept::At(position));
}

/// Keeps `cursor` under `key`; a cursor too long for a record is not kept (said once).
pub fn keep_cursor(key: &str, cursor: &str) {
    keep_kept(key, Kept::Cursor(cursor.into()));
}

fn keep_kept(key: &str, kept: Kept) {
    let Some(store) = store() else {
        return;
    };
    store.lock().expect("persist lock").keep(key, kept);
}

/// Writes the persist file to disk (a clean stop).
pub fn sync() {
    if let Some(store) = STORE.get() {
        if let Some(f) = &store.lock().expect("persist lock").file {
            let _ = f.sync_data();
        }
    }
}

impl Store {
    fn open(path: &Path) -> Store {
        let mut store = Store {
            file: None,
            path: path.to_path_buf(),
            slots: HashMap::new(),
            corrupt: false,
            looked: None,
        };
        let opened = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path);
        let file = match opened {
            Ok(f) => f,
            Err(e) => {
                crate::own_log::error(format!(
                    "persist file {}: {e}; file positions are not kept across restarts",
                    path.display()
                ));
                return store;
            }
        };
        let mut data = Vec::new();
        let read = std::io::Read::read_to_end(&mut &file, &mut data);
        if data.starts_with(b"SLP") {
            // syslog-ng's own persist file: left alone.
            crate::own_log::error(format!(
                "{} is syslog-ng's persist file; sluice keeps its own: give -R another path. File positions are not kept across restarts",
                path.display()
            ));
            return store;
        }
        match read.map_err(|e| e.to_string()).and_then(|_| parse(&data)) {
            Ok(slots) => {
                store.slots = slots;
                store.file = Some(file);
            }
            Err(why) => {
                let aside = path.with_extension("corrupt");
                let moved = std::fs::rename(path, &aside);
                crate::own_log::error(format!(
                    "persist file {} is corrupt ({why}){}; file sources start at the end of their files",
                    path.display(),
                    match moved {
                        Ok(()) => format!(", set aside as {}", aside.display()),
                        Err(e) => format!(" and cannot be set aside: {e}"),
                    }
                ));
                store.corrupt = true;
                store.file = std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create(true)
                    .truncate(true)
                    .open(path)
                    .ok();
            }
        }
        store
    }

    fn keep(&mut self, key: &str, kept: Kept) {
        let key = &*slot_key(key);
        let Some(record) = record(key, &kept) else {
            return;
        };
        let next = self.slots.len();
        let slot = match self.slots.get_mut(key) {
            Some((slot, at)) => {
                if *at == kept {
                    return;
                }
                *at = kept;
                *slot
            }
            None => {
                self.slots.insert(key.to_string(), (next, kept));
                next
            }
        };
        self.make_again_if_gone();
        let Some(file) = &self.file else {
            return;
        };
        if let Err(e) = file.write_all_at(&record, (slot * SLOT) as u64) {
            crate::own_log::error(format!(
                "persist file {}: {e}; file positions are not kept",
                self.path.display()
            ));
            self.file = None;
        }
    }
}

impl Store {
    /// Makes the file again, with every position, when the one open is no longer at the path
    /// (deleted or replaced while sluice runs: its positions would be lost at the stop, and a
    /// restart would read every file again). Looked at once a second at most.
    fn make_again_if_gone(&mut self) {
        use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
        if self
            .looked
            .is_some_and(|t| t.elapsed() < Duration::from_secs(1))
        {
            return;
        }
        self.looked = Some(Instant::now());
        let Some(file) = &self.file else {
            return;
        };
        let ours = file.metadata().map(|m| (m.dev(), m.ino())).ok();
        let there = std::fs::symlink_metadata(&self.path)
            .map(|m| (m.dev(), m.ino()))
            .ok();
        if ours.is_some() && ours == there {
            return;
        }
        let made = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&self.path)
            .and_then(|f| {
                for (key, (slot, kept)) in &self.slots {
                    if let Some(record) = record(key, kept) {
                        f.write_all_at(&record, (slot * SLOT) as u64)?;
                    }
                }
                Ok(f)
            });
        match made {
            Ok(f) => {
                crate::own_log::notice(format!(
                    "persist file {} was removed or replaced while sluice ran; made again with the {} positions it keeps",
                    self.path.display(),
                    self.slots.len()
                ));
                self.file = Some(f);
            }
            Err(e) => {
                crate::own_log::error(format!(
                    "persist file {} was removed or replaced while sluice ran and cannot be made again: {e}; file positions are not kept",
                    self.path.display()
                ));
                self.file = None;
            }
        }
    }
}

/// The key a record holds: `key` itself, or `sha256:` and its digest in hex when it is
/// longer than [`LONGEST_KEY`], so that every followed file's position fits a record.
fn slot_key(key: &str) -> std::borrow::Cow<'_, str> {
    use sha2::Digest;
    if key.len() <= LONGEST_KEY {
        return key.into();
    }
    use std::fmt::Write;
    let digest = sha2::Sha256::digest(key.as_bytes());
    let mut hex = String::with_capacity(7 + 64);
    hex.push_str("sha256:");
    for b in digest {
        let _ = write!(hex, "{b:02x}");
    }
    hex.into()
}

/// One record: magic, key length and key, then a file's device, inode and offset or a
/// cursor's length and text, then the CRC of what precedes it. `None` when key and cursor do
/// not fit.
fn record(key: &str, kept: &Kept) -> Option<[u8; SLOT]> {
    let value_len = match kept {
        Kept::At(_) => 24,
        Kept::Cursor(c) => 2 + c.len(),
    };
    if 4 + 2 + key.len() + value_len + 4 > SLOT {
        return None;
    }
    let mut r = [0u8; SLOT];
    let mut w = Writer { r: &mut r, at: 0 };
    w.put(match kept {
        Kept::At(_) => MAGIC,
        Kept::Cursor(_) => MAGIC_CURSOR,
    });
    w.put(&(key.len() as u16).to_le_bytes());
    w.put(key.as_bytes());
    match kept {
        Kept::At(at) => {
            for n in [at.dev, at.ino, at.offset] {
                w.put(&n.to_le_bytes());
            }
        }
        Kept::Cursor(c) => {
            w.put(&(c.len() as u16).to_le_bytes());
            w.put(c.as_bytes());
        }
    }
    let end = w.at;
    let crc = crc32fast::hash(&r[..end]);
    r[end..end + 4].copy_from_slice(&crc.to_le_bytes());
    Some(r)
}

/// Writes a record from its start.
struct Writer<'a> {
    r: &'a mut [u8; SLOT],
    at: usize,
}

impl Writer<'_> {
    fn put(&mut self, bytes: &[u8]) {
        self.r[self.at..self.at + bytes.len()].copy_from_slice(bytes);
        self.at += bytes.len();
    }
}

/// Reads a record from its start.
struct Reader<'a> {
    r: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, len: usize) -> Option<&'a [u8]> {
        let field = self.r.get(self.at..self.at + len)?;
        self.at += len;
        Some(field)
    }
}

/// Reads every record of a persist file.
fn parse(data: &[u8]) -> Result<HashMap<String, (usize, Kept)>, String> {
    let mut slots = HashMap::new();
    if data.len() % SLOT != 0 {
        return Err(format!(
            "{} bytes is not a whole number of records",
            data.len()
        ));
    }
    for (n, r) in data.chunks(SLOT).enumerate() {
        let bad = |what: &str| format!("record {n}: {what}");
        let mut read = Reader { r, at: 0 };
        let mut take = |len: usize| read.take(len).ok_or_else(|| bad("a length past its end"));
        let magic = take(4)?;
        let cursor = match magic {
            m if m == MAGIC => false,
            m if m == MAGIC_CURSOR => true,
            _ => return Err(bad("not a record")),
        };
        let len = u16::from_le_bytes(take(2)?.try_into().expect("2 bytes")) as usize;
        let key = std::str::from_utf8(take(len)?).map_err(|_| bad("a key that is not text"))?;
        let kept = if cursor {
            let len = u16::from_le_bytes(take(2)?.try_into().expect("2 bytes")) as usize;
            let c =
                std::str::from_utf8(take(len)?).map_err(|_| bad("a cursor that is not text"))?;
            Kept::Cursor(c.into())
        } else {
            let mut numbers = [0u64; 3];
            for n in &mut numbers {
                *n = u64::from_le_bytes(take(8)?.try_into().expect("8 bytes"));
            }
            let [dev, ino, offset] = numbers;
            Kept::At(Position { dev, ino, offset })
        };
        let crc = u32::from_le_bytes(take(4)?.try_into().expect("4 bytes"));
        if crc != crc32fast::hash(&r[..read.at - 4]) {
            return Err(bad("its checksum does not match"));
        }
        slots.insert(key.to_string(), (n, kept));
    }
    Ok(slots)
}

/// Whether an error opening a file means it is not there (yet).
pub fn missing(e: &std::io::Error) -> bool {
    e.kind() == ErrorKind::NotFound
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_kept_in_place_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("persist");
        let mut store = Store::open(&path);
        let a = Position {
            dev: 1,
            ino: 2,
            offset: 3,
        };
        store.keep("file:/a", Kept::At(a));
        store.keep("file:/b", Kept::At(Position { offset: 9, ..a }));
        store.keep("file:/a", Kept::At(Position { offset: 30, ..a }));
        store.keep("journal:", Kept::Cursor("s=1;i=2".into()));
        store.keep("journal:", Kept::Cursor("s=1;i=3".into()));
        // Too long for a record: not kept.
        store.keep("journal:x", Kept::Cursor("c".repeat(SLOT).into()));
        drop(store);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 3 * SLOT as u64);
        let store = Store::open(&path);
        assert_eq!(
            store.slots["file:/a"],
            (0, Kept::At(Position { offset: 30, ..a }))
        );
        assert_eq!(
            store.slots["file:/b"].1,
            Kept::At(Position { offset: 9, ..a })
        );
        assert_eq!(store.slots["journal:"], (2, Kept::Cursor("s=1;i=3".into())));
        assert!(!store.corrupt);
    }

    /// A followed file whose path is too long for a record as it is (issue 55: past ~470
    /// bytes its position was never kept) is kept under its digest.
    #[test]
    fn a_persist_file_removed_while_running_is_made_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("persist");
        let at = Position {
            dev: 1,
            ino: 2,
            offset: 51_000,
        };
        let mut store = Store::open(&path);
        store.keep("file:/a", Kept::At(at));
        std::fs::remove_file(&path).unwrap();
        store.looked = None;
        store.keep("file:/b", Kept::At(Position { offset: 7, ..at }));
        drop(store);
        let store = Store::open(&path);
        assert_eq!(store.slots["file:/a"].1, Kept::At(at));
        assert_eq!(
            store.slots["file:/b"].1,
            Kept::At(Position { offset: 7, ..at })
        );
    }

    #[test]
    fn a_long_path_keeps_its_position() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("persist");
        let long = format!("file:/{}", "d/".repeat(1000));
        let at = Position {
            dev: 1,
            ino: 2,
            offset: 2000,
        };
        let mut store = Store::open(&path);
        store.keep(&long, Kept::At(at));
        drop(store);
        let store = Store::open(&path);
        assert_eq!(store.slots[&*slot_key(&long)].1, Kept::At(at));
        assert!(slot_key(&long).len() < LONGEST_KEY);
        assert_eq!(slot_key("file:/a"), "file:/a");
    }

    #[test]
    fn a_corrupt_persist_file_is_set_aside() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("persist");
        let mut store = Store::open(&path);
        store.keep(
            "file:/a",
            Kept::At(Position {
                dev: 1,
                ino: 2,
                offset: 3,
            }),
        );
        drop(store);
        let mut data = std::fs::read(&path).unwrap();
        data[40] ^= 0xff;
        std::fs::write(&path, data).unwrap();
        let store = Store::open(&path);
        assert!(store.corrupt);
        assert!(store.slots.is_empty());
        assert!(path.with_extension("corrupt").exists());
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 0);
    }
}
