//! Frames: the units an archive file is made of, one after another.
//!
//! ```text
//! magic "SLS\x01" | kind u8 | 0 0 0 | body length u32 | crc32 u32 | body
//! body = content | previous chain head (32) | chain head h (32) | seal (32)
//! ```
//!
//! The CRC covers the header's first 12 bytes and the body: a frame cut short by a crash or
//! damaged on disk fails it, and a reader finds the next frame by its magic. Every frame's
//! content starts with its place in the file's chain, `seq`. The chain head is
//! `h(seq) = SHA-256("sluice-logstore chain " | h(seq-1) | kind | content)`; the seal is
//! the HMAC of `h` under the segment's MAC key for that frame ([`crate::keys`]), or zeros
//! when the archive is not sealed. A frame carries the head it follows, so that each frame
//! can be checked alone (past damage) as well as linked to the one before.

use crate::keys::{self, Secret};
use crate::wire::Cursor;

pub const MAGIC: [u8; 4] = *b"SLS\x01";
pub const HEADER: usize = 16;
/// The tail of every body: the previous chain head, the chain head and the seal.
pub const TRAILER: usize = 96;
/// The largest body a reader accepts.
pub const MAX_BODY: usize = 256 << 20;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// Starts a segment: its keys, and how it follows what came before.
    Segment = 1,
    /// Records.
    Chunk = 2,
    /// The writer closed the file.
    Close = 3,
    /// An RFC 3161 token over the chain head of an earlier frame.
    Timestamp = 4,
}

impl Kind {
    fn from_u8(b: u8) -> Option<Kind> {
        match b {
            1 => Some(Kind::Segment),
            2 => Some(Kind::Chunk),
            3 => Some(Kind::Close),
            4 => Some(Kind::Timestamp),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Kind::Segment => "segment",
            Kind::Chunk => "chunk",
            Kind::Close => "close",
            Kind::Timestamp => "timestamp",
        }
    }
}

/// The chain head after a frame of `kind` with `content` that follows `prev`.
pub fn chain(prev: &Secret, kind: Kind, content: &[u8]) -> Secret {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    ctx.update(b"sluice-logstore chain ");
    ctx.update(prev);
    ctx.update(&[kind as u8]);
    ctx.update(content);
    ctx.finish()
        .as_ref()
        .try_into()
        .expect("sha-256 is 32 bytes")
}

/// Appends a frame of `kind` with `content` to `out`; returns its chain head. `mac` seals it.
pub fn write(
    out: &mut Vec<u8>,
    kind: Kind,
    content: &[u8],
    prev: &Secret,
    mac: Option<&Secret>,
) -> Secret {
    let h = chain(prev, kind, content);
    let seal = mac.map_or([0; 32], |k| keys::seal(k, &h));
    let start = out.len();
    let body = content.len() + TRAILER;
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&[kind as u8, 0, 0, 0]);
    out.extend_from_slice(&(body as u32).to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(content);
    out.extend_from_slice(prev);
    out.extend_from_slice(&h);
    out.extend_from_slice(&seal);
    let crc = crc(&out[start..start + 12], &out[start + HEADER..]);
    out[start + 12..start + 16].copy_from_slice(&crc.to_le_bytes());
    h
}

fn crc(header: &[u8], body: &[u8]) -> u32 {
    let mut c = crc32fast::Hasher::new();
    c.update(header);
    c.update(body);
    c.finalize()
}

/// A frame as found in a file.
#[derive(Debug, Clone)]
pub struct Frame<'a> {
    /// Its offset in the file.
    pub at: u64,
    pub kind: Kind,
    pub seq: u64,
    /// The content after `seq`.
    pub content: &'a [u8],
    /// All of the content, `seq` included: what the chain hashes.
    pub whole: &'a [u8],
    /// The chain head it follows, as it says.
    pub prev: Secret,
    pub head: Secret,
    pub seal: Secret,
    /// Its length on disk.
    pub len: u64,
}

/// The length of the frame that starts at `bytes`, when its header reads as one; the frame may
/// go past the end of `bytes`.
pub fn declared_len(header: &[u8]) -> Option<usize> {
    if header.len() < HEADER || header[..4] != MAGIC || Kind::from_u8(header[4]).is_none() {
        return None;
    }
    let body = u32::from_le_bytes(header[8..12].try_into().expect("4 bytes")) as usize;
    (TRAILER + 8..=MAX_BODY)
        .contains(&body)
        .then_some(HEADER + body)
}

/// The frame at the start of `bytes` (at offset `at` of its file), if it is whole and its CRC
/// holds.
pub fn parse(bytes: &[u8], at: u64) -> Option<Frame<'_>> {
    let len = declared_len(bytes)?;
    if bytes.len() < len {
        return None;
    }
    let stored = u32::from_le_bytes(bytes[12..16].try_into().expect("4 bytes"));
    let body = &bytes[HEADER..len];
    if crc(&bytes[..12], body) != stored {
        return None;
    }
    let (whole, trailer) = body.split_at(body.len() - TRAILER);
    let mut c = Cursor::new(whole);
    let seq = c.u64("seq").ok()?;
    Some(Frame {
        at,
        kind: Kind::from_u8(bytes[4])?,
        seq,
        content: c.rest(),
        whole,
        prev: trailer[..32].try_into().expect("32 bytes"),
        head: trailer[32..64].try_into().expect("32 bytes"),
        seal: trailer[64..].try_into().expect("32 bytes"),
        len: len as u64,
    })
}

/// What a file holds, in order: frames, and bytes that are no frame (damaged, or cut short).
#[derive(Debug)]
pub enum Found<'a> {
    Frame(Frame<'a>),
    /// `len` bytes at `at` that are no whole frame; `cut` when they run to the end of the file
    /// and start as a frame that would go past it (a write cut short).
    Damaged {
        at: u64,
        len: u64,
        cut: bool,
    },
}

/// How many of `bytes` a reader following a file being written may take now: whole frames,
/// and damage up to a frame that reads whole after it. A frame not yet whole, or bytes that
/// may still become one, wait for the file to grow.
pub fn settled(bytes: &[u8]) -> usize {
    let mut at = 0;
    while at < bytes.len() {
        let rest = &bytes[at..];
        match declared_len(rest) {
            Some(len) if len <= rest.len() && parse(rest, 0).is_some() => at += len,
            _ => match next_whole(rest) {
                Some(i) => at += i,
                None => break,
            },
        }
    }
    at
}

/// The offset in `bytes` of the first frame after its start that reads whole.
fn next_whole(bytes: &[u8]) -> Option<usize> {
    let mut from = 1;
    loop {
        let i = from + memchr::memmem::find(bytes.get(from..)?, &MAGIC)?;
        if parse(&bytes[i..], 0).is_some() {
            return Some(i);
        }
        from = i + 1;
    }
}

/// The frames of a file's bytes, finding the next frame past damage by its magic.
pub struct Frames<'a> {
    bytes: &'a [u8],
    at: usize,
    /// The offset in the file of `bytes[0]`.
    base: u64,
}

impl<'a> Frames<'a> {
    pub fn new(bytes: &'a [u8]) -> Frames<'a> {
        Frames::at(bytes, 0)
    }

    /// The frames of `bytes`, which start at offset `base` of their file.
    pub fn at(bytes: &'a [u8], base: u64) -> Frames<'a> {
        Frames { bytes, at: 0, base }
    }
}

impl<'a> Iterator for Frames<'a> {
    type Item = Found<'a>;

    fn next(&mut self) -> Option<Found<'a>> {
        let rest = &self.bytes[self.at..];
        if rest.is_empty() {
            return None;
        }
        if let Some(frame) = parse(rest, self.base + self.at as u64) {
            self.at += frame.len as usize;
            return Some(Found::Frame(frame));
        }
        let start = self.at;
        let cut = declared_len(rest).is_some_and(|len| len > rest.len());
        let end = next_whole(rest).map_or(self.bytes.len(), |i| start + i);
        self.at = end;
        Some(Found::Damaged {
            at: self.base + start as u64,
            len: (end - start) as u64,
            cut: cut && end == self.bytes.len(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(out: &mut Vec<u8>, seq: u64, text: &[u8]) {
        let content = [&seq.to_le_bytes()[..], text].concat();
        write(out, Kind::Chunk, &content, &[0; 32], None);
    }

    #[test]
    fn frames_are_found_past_damage_and_a_cut_tail_is_told_apart() {
        let mut file = Vec::new();
        frame(&mut file, 0, b"one");
        let second = file.len();
        frame(&mut file, 1, b"two");
        let third = file.len();
        frame(&mut file, 2, b"three");
        let whole = file.len();
        frame(&mut file, 3, b"four, cut short");
        file.truncate(whole + 30);
        file[second + 20] ^= 1;
        let found: Vec<String> = Frames::new(&file)
            .map(|f| match f {
                Found::Frame(f) => format!("frame {} at {}", f.seq, f.at),
                Found::Damaged { at, len, cut } => format!("damaged {len} at {at} cut {cut}"),
            })
            .collect();
        assert_eq!(
            found,
            [
                "frame 0 at 0".to_string(),
                format!("damaged {} at {second} cut false", third - second),
                format!("frame 2 at {third}"),
                format!("damaged 30 at {whole} cut true"),
            ]
        );
    }
}
