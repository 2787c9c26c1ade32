//! The persist file (`-R`): where each file source has read to, kept across restarts.
//!
//! The file is an array of fixed [`SLOT`]-byte records, one per key (`file:/var/log/x`):
//! the file's device and inode, and the offset up to which its lines were delivered. A record
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

/// The size of one record.
const SLOT: usize = 512;
/// The longest key a record holds.
const MAX_KEY: usize = SLOT - 4 - 2 - 24 - 4;
const MAGIC: &[u8; 4] = b"SLU1";

/// Where a file was read to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Position {
    pub dev: u64,
    pub ino: u64,
    /// Bytes delivered from the start of the file.
    pub offset: u64,
}

/// What the persist file said at start.
#[derive(Debug, PartialEq, Eq)]
pub enum Found {
    /// The key's record.
    At(Position),
    /// No record: the source has not read this file before.
    New,
    /// The persist file was corrupt: start at the end.
    Unknown,
}

struct Store {
    file: Option<File>,
    path: PathBuf,
    /// Each key's slot and its last position.
    slots: HashMap<String, (usize, Position)>,
    corrupt: bool,
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

/// What the persist file holds for `key`.
pub fn find(key: &str) -> Found {
    let Some(store) = store() else {
        return Found::New;
    };
    let store = store.lock().expect("persist lock");
    match store.slots.get(key) {
        Some((_, at)) => Found::At(*at),
        None if store.corrupt => Found::Unknown,
        None => Found::New,
    }
}

/// Keeps `key` at `position`.
pub fn keep(key: &str, position: Position) {
    let Some(store) = store() else {
        return;
    };
    store.lock().expect("persist lock").keep(key, position);
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

    fn keep(&mut self, key: &str, position: Position) {
        if key.len() > MAX_KEY {
            return;
        }
        let next = self.slots.len();
        let slot = match self.slots.get_mut(key) {
            Some((slot, at)) => {
                if *at == position {
                    return;
                }
                *at = position;
                *slot
            }
            None => {
                self.slots.insert(key.to_string(), (next, position));
                next
            }
        };
        let Some(file) = &self.file else {
            return;
        };
        if let Err(e) = file.write_all_at(&record(key, position), (slot * SLOT) as u64) {
            crate::own_log::error(format!(
                "persist file {}: {e}; file positions are not kept",
                self.path.display()
            ));
            self.file = None;
        }
    }
}

/// One record: magic, key length and key, device, inode, offset, CRC of what precedes it.
fn record(key: &str, at: Position) -> [u8; SLOT] {
    let mut r = [0u8; SLOT];
    r[..4].copy_from_slice(MAGIC);
    r[4..6].copy_from_slice(&(key.len() as u16).to_le_bytes());
    let mut i = 6;
    r[i..i + key.len()].copy_from_slice(key.as_bytes());
    i += key.len();
    for n in [at.dev, at.ino, at.offset] {
        r[i..i + 8].copy_from_slice(&n.to_le_bytes());
        i += 8;
    }
    let crc = crc32fast::hash(&r[..i]);
    r[i..i + 4].copy_from_slice(&crc.to_le_bytes());
    r
}

/// Reads every record of a persist file.
fn parse(data: &[u8]) -> Result<HashMap<String, (usize, Position)>, String> {
    let mut slots = HashMap::new();
    if data.len() % SLOT != 0 {
        return Err(format!(
            "{} bytes is not a whole number of records",
            data.len()
        ));
    }
    for (n, r) in data.chunks(SLOT).enumerate() {
        let bad = |what: &str| format!("record {n}: {what}");
        if &r[..4] != MAGIC {
            return Err(bad("not a record"));
        }
        let len = u16::from_le_bytes([r[4], r[5]]) as usize;
        if len > MAX_KEY {
            return Err(bad("a key too long"));
        }
        let mut i = 6 + len;
        let key = std::str::from_utf8(&r[6..i]).map_err(|_| bad("a key that is not text"))?;
        let mut numbers = [0u64; 3];
        for n in &mut numbers {
            *n = u64::from_le_bytes(r[i..i + 8].try_into().expect("8 bytes"));
            i += 8;
        }
        let crc = u32::from_le_bytes(r[i..i + 4].try_into().expect("4 bytes"));
        if crc != crc32fast::hash(&r[..i]) {
            return Err(bad("its checksum does not match"));
        }
        let [dev, ino, offset] = numbers;
        slots.insert(key.to_string(), (n, Position { dev, ino, offset }));
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
        store.keep("file:/a", a);
        store.keep("file:/b", Position { offset: 9, ..a });
        store.keep("file:/a", Position { offset: 30, ..a });
        drop(store);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 2 * SLOT as u64);
        let store = Store::open(&path);
        assert_eq!(store.slots["file:/a"], (0, Position { offset: 30, ..a }));
        assert_eq!(store.slots["file:/b"].1.offset, 9);
        assert!(!store.corrupt);
    }

    #[test]
    fn a_corrupt_persist_file_is_set_aside() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("persist");
        let mut store = Store::open(&path);
        store.keep(
            "file:/a",
            Position {
                dev: 1,
                ino: 2,
                offset: 3,
            },
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
