//! Reading a file a person hands over — a configuration, an `@include`, a pattern database, an
//! `in-list()` — so that what sits at its name cannot hold the reader: only a regular file is
//! read (a FIFO or a device would block the open or the read for ever), opened non-blocking,
//! and at most `limit` bytes of it. Text must be UTF-8; the error says where it is not.

use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// The largest configuration file (each `@include` counted alone) sluice reads.
pub const CONFIG_LIMIT: u64 = 16 << 20;

/// The largest data file (a pattern database, an `in-list()`) sluice reads.
pub const DATA_LIMIT: u64 = 256 << 20;

/// The bytes of the regular file at `path`, at most `limit` of them; the error says what is
/// wrong without the path (the caller names it).
pub fn read_bytes(path: &Path, limit: u64) -> Result<Vec<u8>, String> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| e.to_string())?;
    let meta = file.metadata().map_err(|e| e.to_string())?;
    let kind = meta.file_type();
    if !kind.is_file() {
        let what = if kind.is_fifo() {
            "a FIFO"
        } else if kind.is_dir() {
            "a directory"
        } else if kind.is_socket() {
            "a socket"
        } else {
            "a device"
        };
        return Err(format!("{what}, not a regular file"));
    }
    if meta.len() > limit {
        return Err(too_large(meta.len(), limit));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
    if bytes.len() as u64 > limit {
        return Err(too_large(bytes.len() as u64, limit));
    }
    Ok(bytes)
}

/// The text of the regular file at `path`, at most `limit` bytes of UTF-8.
pub fn read_text(path: &Path, limit: u64) -> Result<String, String> {
    utf8(read_bytes(path, limit)?)
}

/// `bytes` as text, or where the first byte that is not UTF-8 is (line and column from 1,
/// the column counted in characters).
pub fn utf8(bytes: Vec<u8>) -> Result<String, String> {
    String::from_utf8(bytes).map_err(|e| {
        let bytes = e.as_bytes();
        let bad = e.utf8_error().valid_up_to();
        let good = std::str::from_utf8(&bytes[..bad]).unwrap_or_default();
        let line = good.matches('\n').count() + 1;
        let start = good.rfind('\n').map_or(0, |i| i + 1);
        let column = good[start..].chars().count() + 1;
        format!(
            "not UTF-8 at line {line}, column {column} (byte 0x{:02x})",
            bytes[bad]
        )
    })
}

fn too_large(size: u64, limit: u64) -> String {
    format!(
        "{} MiB or more, larger than the {} MiB read",
        size >> 20,
        limit >> 20
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fifo_is_refused_without_waiting_for_a_writer() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("f");
        let name = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
        assert_eq!(
            read_text(&fifo, CONFIG_LIMIT).unwrap_err(),
            "a FIFO, not a regular file"
        );
        assert_eq!(
            read_text(dir.path(), CONFIG_LIMIT).unwrap_err(),
            "a directory, not a regular file"
        );
    }

    #[test]
    fn a_file_over_the_limit_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("big");
        std::fs::write(&big, vec![b'a'; (2 << 20) + 1]).unwrap();
        assert_eq!(
            read_text(&big, 2 << 20).unwrap_err(),
            "2 MiB or more, larger than the 2 MiB read"
        );
        assert_eq!(read_text(&big, 3 << 20).unwrap().len(), (2 << 20) + 1);
    }

    #[test]
    fn text_that_is_not_utf8_says_where() {
        let bad = b"line one\nab\xc3\xa9c\xff rest".to_vec();
        assert_eq!(
            utf8(bad).unwrap_err(),
            "not UTF-8 at line 2, column 5 (byte 0xff)"
        );
    }
}
