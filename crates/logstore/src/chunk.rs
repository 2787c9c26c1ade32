//! What a chunk holds: records, and an index that tells a search whether the chunk can hold
//! what it looks for — the range of arrival times and stamps, the hosts and programs (each
//! record names its host and program by their place in these tables), and which trigrams the
//! message texts hold.
//!
//! Records, in the data part (compressed together), as two streams — the bytes of every
//! record, then their fields — which compress better apart than interleaved:
//! ```text
//! data = bytes | fields | fields length (u32)
//! fields, a record: zigzag(recvd - previous recvd) | zigzag(stamp's second - previous
//!   stamp's second) | stamp's microseconds | zigzag(offset - previous offset) | pri u8
//!   | host index | program index | line length | text: 0, start (the rest of the line, but
//!   its last newline) | 1, start, length (inside the line) | 2, length (its own bytes)
//! bytes, a record: the line, then the text when it is not inside the line
//! ```
//! (Times in microseconds since the epoch; the first "previous recvd" is the index's, the
//! first previous stamp is recvd.)
//! Index: record count, recvd min/max, stamp min/max (i64), hosts, programs (a count, then
//! each as length and bytes), the trigram bitmap ([`GRAMS`] bits), then the layout (u8, 2).
//! An index without it is of layout 1, as sluice wrote before: the data part was
//! `fields length (varint) | fields | bytes` and the bitmap held the trigrams at every
//! offset. (The bytes first let the builder's buffer of bytes go to the sealers as the data
//! part: a chunk is not copied to be sealed.)
//!
//! Trigrams are of the text folded to 37 classes (letters without case, digits, the rest as
//! one), those that start at an even offset of a text: setting a bit per trigram is
//! the index's cost, and half of them answer nearly as well. A literal inside a text starts at
//! an even or an odd offset; its trigrams at offsets of that parity are the text's trigrams at
//! even offsets, so a chunk whose bitmap lacks one of its even trigrams and one of its odd
//! ones cannot hold it (in any case). A literal of three bytes has no odd trigram: any chunk
//! may hold it.

use crate::entry::{Entry, Text};
use crate::wire::{put_bytes, put_varint, unzigzag, zigzag, Cursor, Malformed};

/// 37 classes to the power of three.
pub const GRAMS: usize = 37 * 37 * 37;
/// The layout sluice writes.
const LAYOUT: u8 = 2;

/// Every how many offsets of a text the bitmap of a chunk of `layout` holds a trigram.
fn stride(layout: u8) -> usize {
    if layout == 1 {
        1
    } else {
        2
    }
}
const GRAM_WORDS: usize = GRAMS.div_ceil(64);

/// The class of a byte: 1-26 letters (either case), 27-36 digits, 0 the rest. Without a
/// table or a branch, so that a block of bytes is classed in vector registers.
#[inline(always)]
fn class_of(byte: u8) -> u8 {
    let letter = (byte | 0x20).wrapping_sub(b'a');
    let digit = byte.wrapping_sub(b'0');
    if letter < 26 {
        letter + 1
    } else if digit < 10 {
        digit + 27
    } else {
        0
    }
}

/// The trigrams of `text` that start at an offset that is a multiple of `stride` (1 or 2),
/// each as its bit number (below [`GRAMS`], so 16 bits hold it). A block at a time: the bytes
/// classed, then the trigrams' numbers made, each pass with no state carried from byte to
/// byte (both run in vector registers); only setting the bits is a trigram at a time. Blocks
/// overlap by two bytes, so each trigram is made once, and hold an even number of trigrams
/// but the last, so a block starts at an even offset.
fn grams(text: &[u8], stride: usize, mut each: impl FnMut(u16)) {
    const BLOCK: usize = 256;
    let mut classes = [0u8; BLOCK];
    let mut numbers = [0u16; BLOCK];
    let mut at = 0;
    while at + 2 < text.len() {
        let block = &text[at..text.len().min(at + BLOCK)];
        for (c, &byte) in classes.iter_mut().zip(block) {
            *c = class_of(byte);
        }
        let made = block.len() - 2;
        for (i, n) in numbers[..made].iter_mut().enumerate() {
            *n = u16::from(classes[i]) * 1369
                + u16::from(classes[i + 1]) * 37
                + u16::from(classes[i + 2]);
        }
        for &n in numbers[..made].iter().step_by(stride) {
            each(n);
        }
        at += made;
    }
}

/// A bitmap of trigrams as it is built: a word for every 64 numbers a `u16` can hold, so
/// that setting a bit needs no bounds check; the first [`GRAM_WORDS`] are the index's.
type GramWords = [u64; 1 << 10];

fn set_gram(words: &mut GramWords, n: u16) {
    words[usize::from(n >> 6)] |= 1 << (n & 63);
}

/// Whether trigram `n` is set in a bitmap read from an index (a missing word holds none).
fn has_gram(words: &[u64], n: u16) -> bool {
    words
        .get(usize::from(n >> 6))
        .is_some_and(|w| w & (1 << (n & 63)) != 0)
}

/// The length of `line` from `start` to its end, its last newline left out.
fn rest_of(line: &[u8], start: u32) -> Option<u32> {
    let end = line.len() - usize::from(line.last() == Some(&b'\n'));
    (end as u32).checked_sub(start)
}

/// A table of distinct strings, each known by its place.
#[derive(Default)]
struct Table {
    places: hashbrown::HashMap<Vec<u8>, u32, foldhash::fast::RandomState>,
    order: Vec<Vec<u8>>,
    last: Option<u32>,
}

impl Table {
    fn place(&mut self, s: &[u8]) -> u32 {
        if let Some(last) = self.last {
            if self.order[last as usize] == s {
                return last;
            }
        }
        let at = match self.places.get(s) {
            Some(&at) => at,
            None => {
                let at = self.order.len() as u32;
                self.places.insert(s.to_vec(), at);
                self.order.push(s.to_vec());
                at
            }
        };
        self.last = Some(at);
        at
    }

    fn write(&self, out: &mut Vec<u8>) {
        put_varint(out, self.order.len() as u64);
        for s in &self.order {
            put_bytes(out, s);
        }
    }

    fn clear(&mut self) {
        self.places.clear();
        self.order.clear();
        self.last = None;
    }
}

/// Buffers of a chunk up to this size are always kept for the next one.
const KEPT: usize = 64 << 10;

/// A chunk being filled.
pub struct ChunkBuilder {
    fields: Vec<u8>,
    bytes: Vec<u8>,
    count: u32,
    prev_recvd: i64,
    prev_stamp: i64,
    prev_offset: i32,
    /// The first record's arrival (records keep theirs as a difference to it).
    first: i64,
    recvd: (i64, i64),
    stamp: (i64, i64),
    hosts: Table,
    programs: Table,
    /// Where each record's text is in `bytes`: their trigrams are taken when the chunk is,
    /// all at once into one bitmap that stays in the cache. (Set record by record, the
    /// bitmaps of a thousand archives — a file per host — missed it at every bit.)
    texts: Vec<(u32, u32)>,
}

impl Default for ChunkBuilder {
    fn default() -> Self {
        ChunkBuilder {
            fields: Vec::new(),
            bytes: Vec::new(),
            count: 0,
            prev_recvd: 0,
            prev_stamp: 0,
            prev_offset: 0,
            first: 0,
            recvd: (i64::MAX, i64::MIN),
            stamp: (i64::MAX, i64::MIN),
            hosts: Table::default(),
            programs: Table::default(),
            texts: Vec::new(),
        }
    }
}

impl ChunkBuilder {
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The bytes of records so far.
    pub fn len(&self) -> usize {
        self.fields.len() + self.bytes.len()
    }

    pub fn records(&self) -> u32 {
        self.count
    }

    pub fn add(&mut self, e: &Entry) {
        if self.count == 0 {
            self.first = e.recvd;
            self.prev_recvd = e.recvd;
            self.prev_stamp = e.recvd.div_euclid(1_000_000);
            self.prev_offset = 0;
        }
        const S: i64 = 1_000_000;
        let out = &mut self.fields;
        put_varint(out, zigzag(e.recvd.wrapping_sub(self.prev_recvd)));
        let stamp_secs = e.stamp.div_euclid(S);
        put_varint(out, zigzag(stamp_secs.wrapping_sub(self.prev_stamp)));
        put_varint(out, e.stamp.rem_euclid(S) as u64);
        put_varint(
            out,
            zigzag(i64::from(e.offset) - i64::from(self.prev_offset)),
        );
        out.push(e.pri);
        put_varint(out, u64::from(self.hosts.place(e.host)));
        put_varint(out, u64::from(self.programs.place(e.program)));
        put_varint(out, e.line.len() as u64);
        let line_at = self.bytes.len() as u32;
        self.bytes.extend_from_slice(e.line);
        let text = match e.text {
            Text::InLine { start, len } if rest_of(e.line, start) == Some(len) => {
                out.push(0);
                put_varint(out, u64::from(start));
                (line_at + start, len)
            }
            Text::InLine { start, len } => {
                out.push(1);
                put_varint(out, u64::from(start));
                put_varint(out, u64::from(len));
                (line_at + start, len)
            }
            Text::Own(t) => {
                out.push(2);
                put_varint(out, t.len() as u64);
                let at = self.bytes.len() as u32;
                self.bytes.extend_from_slice(t);
                (at, t.len() as u32)
            }
        };
        self.texts.push(text);
        self.prev_recvd = e.recvd;
        self.prev_stamp = stamp_secs;
        self.prev_offset = e.offset;
        self.count += 1;
        self.recvd = (self.recvd.0.min(e.recvd), self.recvd.1.max(e.recvd));
        self.stamp = (self.stamp.0.min(e.stamp), self.stamp.1.max(e.stamp));
    }

    /// The records of the chunk and its index but for the trigrams ([`Taken::finish`]
    /// adds them); the builder starts empty again.
    pub fn take(&mut self) -> Taken {
        let mut index = Vec::with_capacity(4 + 5 * 8 + GRAM_WORDS * 8 + 64);
        index.extend_from_slice(&self.count.to_le_bytes());
        for v in [
            self.recvd.0,
            self.recvd.1,
            self.stamp.0,
            self.stamp.1,
            self.first,
        ] {
            index.extend_from_slice(&v.to_le_bytes());
        }
        self.hosts.write(&mut index);
        self.programs.write(&mut index);
        // The bytes go with the chunk. The next chunk's are given the room this whole chunk
        // took and a quarter more, so that neither they nor the fields after them grow it by
        // copying (a chunk's size changes little from one to the next); the room is taken as
        // it is written, and follows the archive's chunks down when it goes quiet.
        let whole = self.bytes.len() + self.fields.len() + 4;
        let next = Vec::with_capacity(whole + whole / 4);
        let mut records = std::mem::replace(&mut self.bytes, next);
        records.reserve_exact(self.fields.len() + 4);
        records.extend_from_slice(&self.fields);
        records.extend_from_slice(&(self.fields.len() as u32).to_le_bytes());
        let texts = std::mem::take(&mut self.texts);
        // The fields' buffer is kept for the next chunk, unless it is much larger than this
        // one needed: an archive that went quiet (thousands of them, with a file per host)
        // lets go of what its busy chunks grew.
        if self.fields.capacity() > KEPT.max(4 * self.fields.len()) {
            self.fields = Vec::new();
        } else {
            self.fields.clear();
        }
        self.count = 0;
        self.recvd = (i64::MAX, i64::MIN);
        self.stamp = (i64::MAX, i64::MIN);
        self.hosts.clear();
        self.programs.clear();
        Taken {
            index,
            records,
            texts,
        }
    }
}

/// A chunk taken from its builder, its index not finished: the trigrams of its texts are
/// set by [`Taken::finish`], on a sealer's thread, not on the one thread an archive's writer
/// has.
pub struct Taken {
    index: Vec<u8>,
    pub records: Vec<u8>,
    /// Where each record's text is in `records`.
    texts: Vec<(u32, u32)>,
}

impl Taken {
    /// The chunk's index and its records.
    pub fn finish(mut self) -> (Vec<u8>, Vec<u8>) {
        let mut words: GramWords = [0; 1 << 10];
        for &(at, len) in &self.texts {
            let text = &self.records[at as usize..(at + len) as usize];
            grams(text, stride(LAYOUT), |n| set_gram(&mut words, n));
        }
        for w in &words[..GRAM_WORDS] {
            self.index.extend_from_slice(&w.to_le_bytes());
        }
        self.index.push(LAYOUT);
        (self.index, self.records)
    }
}

/// A chunk's index, read back.
#[derive(Debug, Clone)]
pub struct Index {
    pub records: u32,
    pub recvd: (i64, i64),
    pub stamp: (i64, i64),
    first_recvd: i64,
    pub hosts: Vec<Vec<u8>>,
    pub programs: Vec<Vec<u8>>,
    grams: Vec<u64>,
    /// 1 or [`LAYOUT`] (see the module's comment).
    layout: u8,
}

impl Index {
    pub fn read(bytes: &[u8]) -> Result<Index, Malformed> {
        let mut c = Cursor::new(bytes);
        let records = c.u32("index")?;
        let recvd = (c.i64("index")?, c.i64("index")?);
        let stamp = (c.i64("index")?, c.i64("index")?);
        let first_recvd = c.i64("index")?;
        let table = |c: &mut Cursor| -> Result<Vec<Vec<u8>>, Malformed> {
            let n = c.len("index table")?;
            (0..n)
                .map(|_| Ok(c.bytes("index table")?.to_vec()))
                .collect()
        };
        let hosts = table(&mut c)?;
        let programs = table(&mut c)?;
        let grams = c
            .take(GRAM_WORDS * 8, "index trigrams")?
            .chunks_exact(8)
            .map(|w| u64::from_le_bytes(w.try_into().expect("8 bytes")))
            .collect();
        let layout = match c.rest() {
            [] => 1,
            [LAYOUT] => LAYOUT,
            _ => {
                return Err(Malformed {
                    what: "index layout",
                    at: c.at(),
                })
            }
        };
        Ok(Index {
            records,
            recvd,
            stamp,
            first_recvd,
            hosts,
            programs,
            grams,
            layout,
        })
    }

    /// Whether some text of the chunk may hold `literal` (in any case): with every offset's
    /// trigram in the bitmap, all of the literal's; with every other offset's, all of those
    /// at its even offsets or all of those at its odd ones.
    pub fn may_hold(&self, literal: &[u8]) -> bool {
        let stride = stride(self.layout);
        let mut all = [true; 2];
        let mut at = 0;
        grams(literal, 1, |n| {
            all[at % stride] &= has_gram(&self.grams, n);
            at += 1;
        });
        all[0] || (stride == 2 && all[1])
    }

    /// The records of `data`, the chunk's decompressed data part.
    pub fn records<'a>(&'a self, data: &'a [u8]) -> Records<'a> {
        let parts = if self.layout == 1 {
            let mut c = Cursor::new(data);
            c.bytes("record fields")
                .ok()
                .map(|fields| (fields, c.rest()))
        } else {
            data.len().checked_sub(4).and_then(|end| {
                let len = u32::from_le_bytes(data[end..].try_into().expect("4 bytes"));
                let at = end.checked_sub(len as usize)?;
                Some((&data[at..end], &data[..at]))
            })
        };
        let (fields, bytes, left) = match parts {
            Some((fields, bytes)) => (fields, bytes, self.records),
            None => (&[][..], &[][..], 1), // one error, then nothing
        };
        Records {
            index: self,
            c: Cursor::new(fields),
            b: Cursor::new(bytes),
            prev_recvd: self.first_recvd,
            prev_stamp: self.first_recvd.div_euclid(1_000_000),
            prev_offset: 0,
            left,
        }
    }
}

/// A record read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record<'a> {
    pub recvd: i64,
    pub stamp: i64,
    pub offset: i32,
    pub pri: u8,
    pub host: &'a [u8],
    pub program: &'a [u8],
    pub line: &'a [u8],
    pub text: &'a [u8],
}

pub struct Records<'a> {
    index: &'a Index,
    c: Cursor<'a>,
    b: Cursor<'a>,
    prev_recvd: i64,
    prev_stamp: i64,
    prev_offset: i32,
    left: u32,
}

impl<'a> Records<'a> {
    fn read(&mut self) -> Result<Record<'a>, Malformed> {
        const S: i64 = 1_000_000;
        let c = &mut self.c;
        let recvd = self.prev_recvd.wrapping_add(unzigzag(c.varint("record")?));
        let secs = self.prev_stamp.wrapping_add(unzigzag(c.varint("record")?));
        let micros = c.varint("record")?;
        if micros >= S as u64 {
            return Err(Malformed {
                what: "record stamp",
                at: c.at(),
            });
        }
        let stamp = secs.wrapping_mul(S).wrapping_add(micros as i64);
        let offset = (i64::from(self.prev_offset) + unzigzag(c.varint("record")?)) as i32;
        let pri = c.u8("record")?;
        let at = c.at();
        let bad = || Malformed {
            what: "record table place",
            at,
        };
        let host = self
            .index
            .hosts
            .get(c.varint("record")? as usize)
            .ok_or_else(bad)?;
        let program = self
            .index
            .programs
            .get(c.varint("record")? as usize)
            .ok_or_else(bad)?;
        let line_len = c.len_of(self.b.rest().len(), "record line")?;
        let line = self.b.take(line_len, "record line")?;
        let text = match c.u8("record text")? {
            0 => {
                let start = c.varint("record text")?;
                let len = u32::try_from(start)
                    .ok()
                    .and_then(|s| rest_of(line, s))
                    .ok_or(Malformed {
                        what: "record text",
                        at: c.at(),
                    })?;
                &line[start as usize..start as usize + len as usize]
            }
            1 => {
                let start = c.varint("record text")? as usize;
                let len = c.varint("record text")? as usize;
                line.get(start..start.saturating_add(len))
                    .ok_or(Malformed {
                        what: "record text",
                        at: c.at(),
                    })?
            }
            2 => {
                let len = c.len_of(self.b.rest().len(), "record text")?;
                self.b.take(len, "record text")?
            }
            _ => {
                return Err(Malformed {
                    what: "record text",
                    at: c.at(),
                })
            }
        };
        self.prev_recvd = recvd;
        self.prev_stamp = secs;
        self.prev_offset = offset;
        Ok(Record {
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

impl<'a> Iterator for Records<'a> {
    type Item = Result<Record<'a>, Malformed>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        let r = self.read();
        self.left = if r.is_err() { 0 } else { self.left - 1 };
        Some(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Trigrams as the index defines them: a byte's class from a table, one byte at a time.
    fn grams_one_by_one(text: &[u8]) -> Vec<u16> {
        let class = |b: u8| match b {
            b'a'..=b'z' => b - b'a' + 1,
            b'A'..=b'Z' => b - b'A' + 1,
            b'0'..=b'9' => b - b'0' + 27,
            _ => 0,
        };
        text.windows(3)
            .map(|w| {
                u16::from(class(w[0])) * 1369 + u16::from(class(w[1])) * 37 + u16::from(class(w[2]))
            })
            .collect()
    }

    #[test]
    fn trigrams_of_blocks_are_those_of_the_bytes_one_by_one() {
        let every_byte: Vec<u8> = (0..=255u8).chain((0..=255u8).rev()).collect();
        let mut seed = 7u32;
        let random: Vec<u8> = (0..2000)
            .map(|_| {
                seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12345);
                (seed >> 16) as u8
            })
            .collect();
        for len in [0, 1, 2, 3, 4, 255, 256, 257, 258, 259, 511, 512, 513, 2000] {
            for text in [
                &random[..len.min(random.len())],
                &every_byte[..len.min(512)],
            ] {
                let mut got = Vec::new();
                grams(text, 1, |n| got.push(n));
                assert_eq!(got, grams_one_by_one(text), "{len}");
                let mut even = Vec::new();
                grams(text, 2, |n| even.push(n));
                let want: Vec<u16> = grams_one_by_one(text).into_iter().step_by(2).collect();
                assert_eq!(even, want, "{len}");
            }
        }
        assert!(grams_one_by_one(b"999")
            .iter()
            .all(|&n| usize::from(n) < GRAMS));
    }

    fn entry<'a>(recvd: i64, host: &'a [u8], line: &'a [u8], text: Text<'a>) -> Entry<'a> {
        Entry {
            recvd,
            stamp: recvd - 5,
            offset: -3600,
            pri: 13,
            host,
            program: b"sshd",
            line,
            text,
        }
    }

    #[test]
    fn records_and_index_read_back_and_trigrams_answer_for_substrings() {
        let mut b = ChunkBuilder::default();
        b.add(&entry(
            100,
            b"a",
            b"x: Failed password\n",
            Text::InLine { start: 3, len: 15 },
        ));
        b.add(&entry(90, b"b", b"{}", Text::Own(b"Accepted key")));
        b.add(&entry(120, b"a", b"z\n", Text::InLine { start: 0, len: 1 }));
        let (index, data) = b.take().finish();
        assert!(b.is_empty());
        let index = Index::read(&index).unwrap();
        assert_eq!(index.records, 3);
        assert_eq!(index.recvd, (90, 120));
        assert_eq!(index.stamp, (85, 115));
        assert_eq!(index.hosts, [b"a".to_vec(), b"b".to_vec()]);
        let got: Vec<Record> = index.records(&data).map(Result::unwrap).collect();
        assert_eq!(got.len(), 3);
        assert_eq!(got[0].text, b"Failed password");
        assert_eq!(
            (got[1].host, got[1].text),
            (&b"b"[..], &b"Accepted key"[..])
        );
        assert_eq!(
            (got[2].recvd, got[2].stamp, got[2].offset),
            (120, 115, -3600)
        );
        for yes in ["failed", "PASSWORD", "d pa", "key", "ab"] {
            assert!(index.may_hold(yes.as_bytes()), "{yes}");
        }
        for no in ["denied", "passworx", "keys"] {
            assert!(!index.may_hold(no.as_bytes()), "{no}");
        }
    }

    #[test]
    fn every_substring_of_a_text_may_be_held_whatever_its_offset() {
        let text = b"sshd[4242]: Accepted publickey for root from 10.0.0.7 port 51022";
        let mut b = ChunkBuilder::default();
        b.add(&entry(
            1,
            b"h",
            text,
            Text::InLine {
                start: 0,
                len: text.len() as u32,
            },
        ));
        let (bytes, _) = b.take().finish();
        let index = Index::read(&bytes).unwrap();
        assert_eq!(index.layout, LAYOUT);
        for len in 0..=12 {
            for start in 0..=text.len() - len {
                let literal = &text[start..start + len];
                assert!(
                    index.may_hold(literal),
                    "{:?}",
                    String::from_utf8_lossy(literal)
                );
            }
        }
        for no in ["Rejected", "root9x", "Refused", "denied"] {
            assert!(!index.may_hold(no.as_bytes()), "{no}");
        }
    }

    #[test]
    fn a_chunk_of_the_first_layout_is_read_and_asked_as_written() {
        // As sluice wrote them before layout 2: every trigram set, no layout byte, the
        // fields before the bytes.
        let mut b = ChunkBuilder::default();
        let text = Text::InLine { start: 0, len: 12 };
        b.add(&entry(1, b"h", b"Accepted key\n", text));
        b.add(&entry(2, b"i", b"{}", Text::Own(b"Failed")));
        let (mut bytes, data) = b.take().finish();
        let index = Index::read(&bytes).unwrap();
        let want: Vec<Record> = index.records(&data).map(Result::unwrap).collect();
        let end = data.len() - 4;
        let fields_len = u32::from_le_bytes(data[end..].try_into().unwrap()) as usize;
        let mut old = Vec::new();
        put_varint(&mut old, fields_len as u64);
        old.extend_from_slice(&data[end - fields_len..end]);
        old.extend_from_slice(&data[..end - fields_len]);
        bytes.pop();
        let gram_at = bytes.len() - GRAM_WORDS * 8;
        let mut words = [0u64; GRAM_WORDS];
        for text in [&b"Accepted key"[..], b"Failed"] {
            grams(text, 1, |n| words[usize::from(n >> 6)] |= 1 << (n & 63));
        }
        for (i, w) in words.iter().enumerate() {
            bytes[gram_at + 8 * i..gram_at + 8 * i + 8].copy_from_slice(&w.to_le_bytes());
        }
        let index = Index::read(&bytes).unwrap();
        assert_eq!(index.layout, 1);
        assert!(index.may_hold(b"key") && index.may_hold(b"ted k"));
        assert!(!index.may_hold(b"keys") && !index.may_hold(b"zzz"));
        let got: Vec<Record> = index.records(&old).map(Result::unwrap).collect();
        assert_eq!(got, want);
        assert_eq!(got[1].text, b"Failed");
        bytes.push(3);
        assert!(
            Index::read(&bytes).is_err(),
            "a layout sluice does not write"
        );
    }

    #[test]
    fn a_data_part_too_short_for_its_fields_is_one_error() {
        let mut b = ChunkBuilder::default();
        b.add(&entry(
            1,
            b"h",
            b"line\n",
            Text::InLine { start: 0, len: 4 },
        ));
        let (bytes, data) = b.take().finish();
        let index = Index::read(&bytes).unwrap();
        for cut in [&data[..2], &data[data.len() - 3..], &[0xff; 8][..]] {
            let got: Vec<_> = index.records(cut).collect();
            assert!(got.len() == 1 && got[0].is_err(), "{cut:?}");
        }
    }
}
