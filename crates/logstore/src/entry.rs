//! An entry: one message as the archive keeps it — the line the destination's template made,
//! and the fields a search asks about (when it arrived, its stamp, priority, host, program and
//! where its text is in the line).
//!
//! Readers of the log path write entries one after another into the writer's buffers
//! ([`Entry::append`]); the store's writer reads them back ([`Entries`]) into chunks. The
//! envelope is fixed-width so that reading it back costs a few loads: it lives in memory
//! only, between two threads of the same process.

use crate::wire::{Cursor, Malformed};

/// One message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry<'a> {
    /// When sluice received it, in microseconds since the epoch.
    pub recvd: i64,
    /// Its stamp, in microseconds since the epoch, and the offset it was written in.
    pub stamp: i64,
    pub offset: i32,
    pub pri: u8,
    pub host: &'a [u8],
    pub program: &'a [u8],
    /// The line the template made.
    pub line: &'a [u8],
    /// The message text: where it is in the line, or its own bytes when the line does not
    /// hold it.
    pub text: Text<'a>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Text<'a> {
    InLine { start: u32, len: u32 },
    Own(&'a [u8]),
}

impl<'a> Entry<'a> {
    /// The message text.
    pub fn text(&self) -> &'a [u8] {
        match self.text {
            Text::InLine { start, len } => self
                .line
                .get(start as usize..(start + len) as usize)
                .unwrap_or_default(),
            Text::Own(t) => t,
        }
    }
}

/// The fixed part of an entry: length (4), recvd (8), stamp (8), offset (4), pri (1), host
/// length (2), program length (2), text: start or `u32::MAX` (4), length (4).
const FIXED: usize = 37;
const OWN: u32 = u32::MAX;

/// Writes entries into a buffer: the fields first, then the line formatted in place, then
/// where the text is in it.
pub struct EntryWriter {
    start: usize,
    line_start: usize,
}

impl EntryWriter {
    /// Starts an entry in `out`; the caller appends the line next, then calls [`Self::finish`].
    /// Host and program longer than 65,535 bytes are cut there.
    #[allow(clippy::too_many_arguments)]
    pub fn begin(
        out: &mut Vec<u8>,
        recvd: i64,
        stamp: i64,
        offset: i32,
        pri: u8,
        host: &[u8],
        program: &[u8],
    ) -> EntryWriter {
        let host = &host[..host.len().min(u16::MAX as usize)];
        let program = &program[..program.len().min(u16::MAX as usize)];
        let start = out.len();
        out.reserve(FIXED + host.len() + program.len() + 256);
        out.extend_from_slice(&[0; 4]);
        out.extend_from_slice(&recvd.to_le_bytes());
        out.extend_from_slice(&stamp.to_le_bytes());
        out.extend_from_slice(&offset.to_le_bytes());
        out.push(pri);
        out.extend_from_slice(&(host.len() as u16).to_le_bytes());
        out.extend_from_slice(&(program.len() as u16).to_le_bytes());
        out.extend_from_slice(&[0; 8]);
        out.extend_from_slice(host);
        out.extend_from_slice(program);
        EntryWriter {
            start,
            line_start: out.len(),
        }
    }

    /// Ends the entry whose line was appended since [`Self::begin`]; `text` is the message
    /// text, found in the line or appended after it.
    pub fn finish(self, out: &mut Vec<u8>, text: &[u8]) {
        let line = &out[self.line_start..];
        let (at, len) = match find_text(line, text) {
            Some(at) => (at as u32, text.len() as u32),
            None => {
                out.extend_from_slice(text);
                (OWN, text.len() as u32)
            }
        };
        let total = (out.len() - self.start - 4) as u32;
        out[self.start..self.start + 4].copy_from_slice(&total.to_le_bytes());
        let fields = self.start + 29;
        out[fields..fields + 4].copy_from_slice(&at.to_le_bytes());
        out[fields + 4..fields + 8].copy_from_slice(&len.to_le_bytes());
    }
}

/// Where `text` is in `line`: most templates end with the text and a newline, so the end is
/// looked at before the whole line.
fn find_text(line: &[u8], text: &[u8]) -> Option<usize> {
    if text.is_empty() {
        return Some(0);
    }
    let end = line.len() - usize::from(line.last() == Some(&b'\n'));
    if end >= text.len() && &line[end - text.len()..end] == text {
        return Some(end - text.len());
    }
    memchr::memmem::find(line, text)
}

/// Reads back the entries of a buffer [`EntryWriter`] filled.
pub struct Entries<'a> {
    cursor: Cursor<'a>,
}

impl<'a> Entries<'a> {
    pub fn new(bytes: &'a [u8]) -> Entries<'a> {
        Entries {
            cursor: Cursor::new(bytes),
        }
    }

    fn read(&mut self) -> Result<Entry<'a>, Malformed> {
        let c = &mut self.cursor;
        let total = c.u32("entry length")? as usize;
        let mut e = Cursor::new(c.take(total, "entry")?);
        let recvd = e.i64("entry")?;
        let stamp = e.i64("entry")?;
        let offset = e.u32("entry")? as i32;
        let pri = e.u8("entry")?;
        let host_len = e.u16("entry")? as usize;
        let program_len = e.u16("entry")? as usize;
        let text_at = e.u32("entry")?;
        let text_len = e.u32("entry")? as usize;
        let host = e.take(host_len, "entry host")?;
        let program = e.take(program_len, "entry program")?;
        let rest = e.rest();
        let (line, text) = if text_at == OWN {
            let split = rest.len().checked_sub(text_len).ok_or(Malformed {
                what: "entry text",
                at: e.at(),
            })?;
            (&rest[..split], Text::Own(&rest[split..]))
        } else {
            if text_at as usize + text_len > rest.len() {
                return Err(Malformed {
                    what: "entry text",
                    at: e.at(),
                });
            }
            (
                rest,
                Text::InLine {
                    start: text_at,
                    len: text_len as u32,
                },
            )
        };
        Ok(Entry {
            recvd,
            stamp,
            offset,
            pri,
            host,
            program,
            line,
            text,
        })
    }
}

impl<'a> Iterator for Entries<'a> {
    type Item = Result<Entry<'a>, Malformed>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.cursor.is_empty() {
            return None;
        }
        let r = self.read();
        if r.is_err() {
            // What follows a bad entry cannot be found.
            self.cursor = Cursor::new(&[]);
        }
        Some(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(out: &mut Vec<u8>, line: &[u8], text: &[u8]) {
        let w = EntryWriter::begin(out, 10, 9, 3600, 13, b"host", b"prog");
        out.extend_from_slice(line);
        w.finish(out, text);
    }

    #[test]
    fn entries_read_back_as_written_whether_the_line_holds_the_text_or_not() {
        let mut out = Vec::new();
        write(&mut out, b"Jan  1 host prog: hello\n", b"hello");
        write(&mut out, b"{\"m\":\"x\"}\n", b"not in the line");
        write(&mut out, b"a hello b\n", b"hello");
        let got: Vec<Entry> = Entries::new(&out).map(Result::unwrap).collect();
        assert_eq!(got.len(), 3);
        assert_eq!(got[0].line, b"Jan  1 host prog: hello\n");
        assert_eq!(got[0].text(), b"hello");
        assert_eq!(got[0].text, Text::InLine { start: 18, len: 5 });
        assert_eq!(got[1].line, b"{\"m\":\"x\"}\n");
        assert_eq!(got[1].text(), b"not in the line");
        assert_eq!(got[2].text, Text::InLine { start: 2, len: 5 });
        assert_eq!((got[2].recvd, got[2].stamp, got[2].offset), (10, 9, 3600));
        assert_eq!((got[2].host, got[2].program), (&b"host"[..], &b"prog"[..]));
    }

    #[test]
    fn a_cut_buffer_is_an_error_not_a_panic() {
        let mut out = Vec::new();
        write(&mut out, b"line\n", b"line");
        for cut in 0..out.len() {
            let mut it = Entries::new(&out[..cut]);
            if cut > 0 {
                assert!(it.next().unwrap().is_err());
            }
            assert!(it.next().is_none());
        }
    }
}
