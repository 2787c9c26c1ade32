//! `fallback-file()`: where a destination keeps what its peer refused for good — a row a
//! database cannot store, a document a collection refuses — a JSON line each, with the reason,
//! so that nothing is dropped unseen. The file is the administrator's (made 0600 when missing,
//! never followed through a link), shared by the destination's workers, opened at the first
//! refusal and again after a failed write.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

pub struct Fallback {
    path: PathBuf,
    file: Mutex<Option<File>>,
}

impl Fallback {
    pub fn new(path: PathBuf) -> Fallback {
        Fallback {
            path,
            file: Mutex::new(None),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `line` (a whole JSON line), opening the file the first time.
    pub fn append(&self, line: &[u8]) -> std::io::Result<()> {
        let mut file = self.file.lock().unwrap_or_else(|e| e.into_inner());
        if file.is_none() {
            use rustix::fs::{Mode, OFlags};
            let flags = OFlags::WRONLY
                | OFlags::APPEND
                | OFlags::CREATE
                | OFlags::NOFOLLOW
                | OFlags::CLOEXEC;
            let fd = rustix::fs::open(&self.path, flags, Mode::from_raw_mode(0o600))?;
            *file = Some(File::from(fd));
        }
        let result = file.as_mut().expect("opened").write_all(line);
        if result.is_err() {
            // Opened again next time: the disk may have room then, the file may be back.
            *file = None;
        }
        result
    }
}
