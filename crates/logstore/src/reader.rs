//! Reading an archive: [`Walk`] goes through a file's bytes frame by frame and says what it
//! finds — segments, chunks, closes, and every problem with its offset: damage, frames
//! missing or out of order, a chain or seal that does not hold, a torn tail. Each intact
//! chunk stays readable whatever happened around it.
//!
//! The chain is checked without any key; seals with the verification key; a chunk's index
//! and records are read with a recipient's private key (or without one when the archive is
//! not encrypted).

use crate::chunk::{Index, Record};
use crate::crypt::{self, PART_DATA, PART_INDEX};
use crate::frame::{self, Found, Frame, Frames, Kind};
use crate::keys::{self, DecryptionKey, Secret, VerifyKey};
use crate::segment::{self, Follows, Segment};
use crate::timestamp::{self, Stamp, Trust};
use crate::wire::Cursor;
use ring::aead::LessSafeKey;
use std::sync::Arc;

/// The keys a reader has.
#[derive(Default, Clone, Copy)]
pub struct Keys<'k> {
    pub decrypt: Option<&'k DecryptionKey>,
    pub verify: Option<&'k VerifyKey>,
    /// The certificates trusted to sign timestamps.
    pub tsa: Option<&'k Trust>,
}

/// How bad a problem is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    /// Not a sign of tampering: a tail torn by a crash, a file still being written.
    Notice,
    /// Something was altered, removed, moved or added.
    Tampering,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// Offset in the file.
    pub at: u64,
    pub severity: Severity,
    pub what: String,
}

/// A segment as the walk knows it.
pub struct SegmentState {
    pub at: u64,
    pub segment: Segment,
    data_key: Result<Option<LessSafeKey>, String>,
}

/// The MAC keys of the current segment: the key of its frame `at` (counted from its start).
struct Macs {
    first_seq: u64,
    at: u64,
    key: Secret,
}

impl Macs {
    /// The MAC key of the segment's frame `seq`; `None` for a frame before the last asked.
    fn key_of(&mut self, seq: u64) -> Option<Secret> {
        let n = seq.checked_sub(self.first_seq)?;
        if n < self.at {
            return None;
        }
        while self.at < n {
            self.key = keys::evolve(&self.key);
            self.at += 1;
        }
        Some(self.key)
    }
}

impl Drop for Macs {
    fn drop(&mut self) {
        zeroize::Zeroize::zeroize(&mut self.key);
    }
}

/// The most bytes of records a chunk holds: a writer seals a chunk once its records reach
/// `chunk-size()` (64 MiB at most), so only its last record passes that. A chunk that says
/// more was not written by sluice, and is refused before anything is allocated for it.
pub const MAX_PLAIN: u32 = 128 << 20;

/// A chunk found in a file.
pub struct Chunk<'a> {
    pub at: u64,
    pub seq: u64,
    pub sealed_at: i64,
    pub records: u32,
    /// Bytes of records before compression.
    pub plain_len: u32,
    /// Its bytes on disk.
    pub len: u64,
    index: &'a [u8],
    data: &'a [u8],
    segment: Arc<SegmentState>,
}

impl Chunk<'_> {
    fn key(&self) -> Result<Option<&LessSafeKey>, String> {
        self.segment
            .data_key
            .as_ref()
            .map(Option::as_ref)
            .map_err(Clone::clone)
    }

    fn part(&self, part: u32, bytes: &[u8], limit: usize) -> Result<Vec<u8>, String> {
        let mut buf = bytes.to_vec();
        let plain_len = match self.key()? {
            Some(key) => crypt::open(key, &self.segment.segment.id, self.seq, part, &mut buf)
                .ok_or("does not decrypt: altered")?
                .len(),
            None => buf.len(),
        };
        buf.truncate(plain_len);
        if self.segment.segment.compression == segment::COMPRESSION_ZSTD {
            buf = crypt::decompress(&buf, limit)?;
        }
        Ok(buf)
    }

    /// The chunk's index.
    pub fn index(&self) -> Result<Index, String> {
        let plain = self.part(PART_INDEX, self.index, 16 << 20)?;
        Index::read(&plain).map_err(|e| format!("index: {e}"))
    }

    /// The chunk's records, decompressed: read them with [`Index::records`].
    pub fn data(&self) -> Result<Vec<u8>, String> {
        let data = self.part(PART_DATA, self.data, self.plain_len as usize)?;
        if data.len() != self.plain_len as usize {
            return Err(format!(
                "its records take {} bytes where it says {}",
                data.len(),
                self.plain_len
            ));
        }
        Ok(data)
    }

    /// Every record, or why they cannot be read.
    pub fn read(&self, mut each: impl FnMut(&Record)) -> Result<(), String> {
        let index = self.index()?;
        let data = self.data()?;
        for r in index.records(&data) {
            each(&r.map_err(|e| format!("records: {e}"))?);
        }
        Ok(())
    }
}

/// What a walk finds, in file order.
pub enum Item<'a> {
    Segment(Arc<SegmentState>),
    Chunk(Chunk<'a>),
    Close {
        at: u64,
        closed_at: i64,
    },
    /// A timestamp whose token holds, over the chain head of frame `stamped`.
    Timestamp {
        at: u64,
        stamped: u64,
        stamp: Stamp,
    },
    Problem(Problem),
}

/// How many frames back a timestamp may name: the heads of as many are kept.
const HEADS_KEPT: usize = 1 << 16;

/// Goes through an archive's bytes.
pub struct Walk<'a, 'k> {
    frames: std::iter::Peekable<Frames<'a>>,
    keys: Keys<'k>,
    state: Resume,
    /// Where the bytes end in the file.
    end: u64,
    queue: std::collections::VecDeque<Item<'a>>,
    /// Whether the end of the bytes is the end of the file (a missing close is said then).
    whole: bool,
    ended: bool,
}

/// Where a walk stopped in a file that is still being written, to go on from there once it
/// has grown ([`Walk::follow`]): the chain, the segment and its keys.
pub struct Resume {
    at: u64,
    /// The next `seq` and the chain head, when the last frame was whole.
    expect: Option<(u64, Secret)>,
    segment: Option<Arc<SegmentState>>,
    mac: Option<Macs>,
    closed: bool,
    first: bool,
    /// The chain heads of the last frames, for the timestamps that follow them.
    heads: std::collections::VecDeque<(u64, Secret)>,
}

impl Resume {
    /// The start of a file.
    pub fn start() -> Resume {
        Resume {
            at: 0,
            expect: None,
            segment: None,
            mac: None,
            closed: false,
            first: true,
            heads: Default::default(),
        }
    }

    /// The offset the walk goes on from.
    pub fn at(&self) -> u64 {
        self.at
    }
}

impl<'a, 'k> Walk<'a, 'k> {
    /// A walk over `bytes`, a whole file; an error when they are no archive.
    pub fn new(bytes: &'a [u8], keys: Keys<'k>) -> Result<Walk<'a, 'k>, String> {
        if bytes.is_empty() {
            return Err("an empty file, not a sluice logstore archive".into());
        }
        let mut walk = Walk::follow(bytes, keys, Resume::start())?;
        walk.whole = true;
        Ok(walk)
    }

    /// A walk over `bytes`, which follow what `from` walked in a file still being written
    /// (take [`frame::settled`] bytes of what it has grown by); [`Walk::pause`] gives where
    /// to go on from. An error when the file's start is no archive.
    pub fn follow(bytes: &'a [u8], keys: Keys<'k>, from: Resume) -> Result<Walk<'a, 'k>, String> {
        if from.at == 0 && !bytes.is_empty() && !bytes.starts_with(&frame::MAGIC) {
            return Err("not a sluice logstore archive (no SLS magic at its start)".into());
        }
        Ok(Walk {
            frames: Frames::at(bytes, from.at).peekable(),
            keys,
            end: from.at + bytes.len() as u64,
            state: from,
            queue: Default::default(),
            whole: false,
            ended: false,
        })
    }

    /// Where to go on from when the file has grown; call it once the walk has ended.
    pub fn pause(self) -> Resume {
        Resume {
            at: self.end,
            ..self.state
        }
    }

    fn problem(&mut self, at: u64, severity: Severity, what: String) {
        self.queue
            .push_back(Item::Problem(Problem { at, severity, what }));
    }

    fn damaged(&mut self, at: u64, len: u64, cut: bool) {
        self.state.expect = None;
        let torn_named = match self.frames.peek() {
            Some(Found::Frame(f)) if f.kind == Kind::Segment => Segment::read(f.content)
                .ok()
                .and_then(|s| s.torn)
                .is_some_and(|t| t == (at, len)),
            _ => false,
        };
        if torn_named {
            self.problem(
                at,
                Severity::Notice,
                format!("{len} bytes torn by a crash (the writer found them when it opened the file again and went on after them)"),
            );
        } else if cut && self.frames.peek().is_none() {
            self.problem(
                at,
                Severity::Notice,
                format!("the file ends in a frame cut short ({len} bytes): a crash while writing, or the file was cut"),
            );
        } else {
            self.problem(
                at,
                Severity::Tampering,
                format!("{len} bytes are no intact frame: altered or damaged"),
            );
        }
    }

    fn frame(&mut self, f: Frame<'a>) {
        // Its place in the chain.
        let follows_damage = self.state.expect.is_none() && !self.state.first;
        self.state.first = false;
        let mut linked = false;
        if let Some((seq, _)) = self.state.expect {
            if f.seq > seq {
                self.problem(
                    f.at,
                    Severity::Tampering,
                    format!(
                        "{} frame(s) missing before this one (seq {} follows {}): removed",
                        f.seq - seq,
                        f.seq,
                        seq.wrapping_sub(1)
                    ),
                );
            } else if f.seq < seq {
                self.problem(
                    f.at,
                    Severity::Tampering,
                    format!(
                        "frame seq {} where {} was due: moved or replayed",
                        f.seq, seq
                    ),
                );
            } else {
                linked = true;
            }
        }
        let segment = if f.kind == Kind::Segment {
            match Segment::read(f.content) {
                Ok(s) => Some(s),
                Err(e) => {
                    self.problem(f.at, Severity::Tampering, format!("segment: {e}"));
                    None
                }
            }
        } else {
            None
        };
        // The chain: the frame alone, then its link to the one before (or to nothing,
        // where a segment starts a chain).
        let intact = frame::chain(&f.prev, f.kind, f.whole) == f.head;
        if !intact {
            self.problem(
                f.at,
                Severity::Tampering,
                format!(
                    "frame seq {} was altered: it does not hash to its chain head",
                    f.seq
                ),
            );
        }
        let due = match (&segment, self.state.expect) {
            (Some(s), _) if s.follows != Follows::Frame => Some([0; 32]),
            (_, Some((_, head))) if linked => Some(head),
            _ => None,
        };
        if due.is_some_and(|due| due != f.prev) {
            self.problem(
                f.at,
                Severity::Tampering,
                format!(
                    "frame seq {} does not follow the frame before it: one of them was replaced",
                    f.seq
                ),
            );
        }
        if let Some(s) = &segment {
            if s.follows == Follows::Frame && self.state.expect.is_none() && !follows_damage {
                self.problem(
                    f.at,
                    Severity::Tampering,
                    "a segment that continues a chain starts the file: its beginning was removed"
                        .into(),
                );
            }
        }
        self.state.expect = Some((f.seq + 1, f.head));
        if intact {
            if self.state.heads.len() == HEADS_KEPT {
                self.state.heads.pop_front();
            }
            self.state.heads.push_back((f.seq, f.head));
        }
        if self.state.closed && f.kind != Kind::Segment {
            self.problem(
                f.at,
                Severity::Tampering,
                format!("a {} after the file was closed", f.kind.name()),
            );
        }
        self.state.closed = f.kind == Kind::Close;
        if let Some(s) = segment {
            let state = self.start_segment(&f, s);
            self.state.segment = Some(state.clone());
            self.queue.push_back(Item::Segment(state));
        }
        // The seal.
        if self.keys.verify.is_some() {
            if let Some(k) = self.state.mac.as_mut().and_then(|m| m.key_of(f.seq)) {
                if !keys::seal_holds(&k, &f.head, &f.seal) {
                    self.problem(
                        f.at,
                        Severity::Tampering,
                        format!("the seal does not hold at seq {}: altered or forged", f.seq),
                    );
                }
            }
        }
        match f.kind {
            Kind::Segment => {}
            Kind::Chunk => match self.chunk(&f) {
                Ok(c) => self.queue.push_back(Item::Chunk(c)),
                Err(e) => self.problem(f.at, Severity::Tampering, e),
            },
            Kind::Timestamp => self.timestamp(&f),
            Kind::Close => {
                let closed_at = Cursor::new(f.content).i64("close").unwrap_or(0);
                self.queue.push_back(Item::Close {
                    at: f.at,
                    closed_at,
                });
            }
        }
    }

    /// A timestamp frame: `stamped seq | stamped head | token`, over a frame before it.
    fn timestamp(&mut self, f: &Frame<'a>) {
        let (stamped, head, token) = match f.content.len() {
            40.. => (
                u64::from_le_bytes(f.content[..8].try_into().expect("8 bytes")),
                <Secret>::try_from(&f.content[8..40]).expect("32 bytes"),
                &f.content[40..],
            ),
            _ => {
                self.problem(
                    f.at,
                    Severity::Tampering,
                    "a timestamp frame too short".into(),
                );
                return;
            }
        };
        match self.state.heads.iter().find(|(seq, _)| *seq == stamped) {
            Some((_, known)) if *known != head => {
                self.problem(
                    f.at,
                    Severity::Tampering,
                    format!(
                        "the timestamp of seq {stamped} is over another chain head than the file's"
                    ),
                );
                return;
            }
            Some(_) => {}
            None => {
                self.problem(
                    f.at,
                    Severity::Notice,
                    format!("the timestamp of seq {stamped} names a frame not read before it: its token is checked, its place is not"),
                );
            }
        }
        match timestamp::verify(token, &head, self.keys.tsa) {
            Ok(stamp) => self.queue.push_back(Item::Timestamp {
                at: f.at,
                stamped,
                stamp,
            }),
            Err(e) => self.problem(
                f.at,
                Severity::Tampering,
                format!("the timestamp of seq {stamped}: {e}"),
            ),
        }
    }

    fn start_segment(&mut self, f: &Frame, segment: Segment) -> Arc<SegmentState> {
        let data_key = if segment.cipher == segment::CIPHER_NONE {
            Ok(None)
        } else {
            match self.keys.decrypt {
                None => Err("encrypted: no decryption key given".to_string()),
                Some(key) => match segment.recipients.iter().find(|r| r.1 == key.id) {
                    None => Err("not encrypted for the given key".to_string()),
                    Some((_, _, wrapped)) => key.unwrap(wrapped).map(|mut k| {
                        let made = crypt::data_key(&k);
                        zeroize::Zeroize::zeroize(&mut k);
                        Some(made)
                    }),
                },
            }
        };
        self.state.mac = match (self.keys.verify, segment.seal) {
            (Some(v), Some((id, j))) if id == v.id => Some(Macs {
                first_seq: f.seq,
                at: 0,
                key: v.segment_key(j, &segment.id),
            }),
            (Some(_), Some(_)) => {
                self.problem(
                    f.at,
                    Severity::Notice,
                    "sealed with another sealing key: seals not checked".into(),
                );
                None
            }
            (Some(_), None) => {
                self.problem(
                    f.at,
                    Severity::Notice,
                    "this segment is not sealed (no seal-key() when it was written)".into(),
                );
                None
            }
            (None, _) => None,
        };
        Arc::new(SegmentState {
            at: f.at,
            segment,
            data_key,
        })
    }

    fn chunk(&self, f: &Frame<'a>) -> Result<Chunk<'a>, String> {
        let segment = self
            .state
            .segment
            .clone()
            .ok_or_else(|| "a chunk before any segment: its segment was removed".to_string())?;
        let mut c = Cursor::new(f.content);
        let bad = |e| format!("chunk: {e}");
        let sealed_at = c.i64("chunk").map_err(bad)?;
        let records = c.u32("chunk").map_err(bad)?;
        let plain_len = c.u32("chunk").map_err(bad)?;
        if plain_len > MAX_PLAIN {
            return Err(format!(
                "chunk: says its records take {plain_len} bytes, more than a writer makes ({MAX_PLAIN})"
            ));
        }
        let index = c.bytes("chunk index").map_err(bad)?;
        Ok(Chunk {
            at: f.at,
            seq: f.seq,
            sealed_at,
            records,
            plain_len,
            len: f.len,
            index,
            data: c.rest(),
            segment,
        })
    }
}

impl<'a> Iterator for Walk<'a, '_> {
    type Item = Item<'a>;

    fn next(&mut self) -> Option<Item<'a>> {
        loop {
            if let Some(item) = self.queue.pop_front() {
                return Some(item);
            }
            match self.frames.next() {
                Some(Found::Frame(f)) => self.frame(f),
                Some(Found::Damaged { at, len, cut }) => self.damaged(at, len, cut),
                None if self.ended => return None,
                None => {
                    self.ended = true;
                    if self.whole && !self.state.closed {
                        self.problem(
                            u64::MAX,
                            Severity::Notice,
                            "the file ends without a close: still being written, or the writer was killed (or its end was cut)".into(),
                        );
                    }
                }
            }
        }
    }
}
