//! [`Store`]: writes one archive file. Entries go into the open chunk; a chunk is sealed when
//! it holds `chunk-size()` bytes of records or its first record is `chunk-time()` old (the
//! caller asks [`Store::due`]), and sealed frames are written with one `write` each time the
//! caller flushes.
//!
//! A sealed chunk takes its place in the chain (its `seq`) at once, and is compressed and
//! encrypted by the sealer threads ([`crypt::sealers`]) while the writer goes on taking
//! entries: so that one archive is not bound to one core. Chunks come back and are framed in
//! the order of their `seq`; any other frame (a timestamp, the close) waits for the chunks
//! before it. [`Store::write_ready`] writes what came back; [`Store::flush`] waits for all.
//!
//! Opening a file that has frames continues its chain in a new segment (the keys of the
//! last run are gone: each run has its own). A tail cut short by a crash is left where it is
//! and named in the new segment, so that readers report it as torn rather than altered;
//! nothing the file held is moved or dropped.

use crate::authority::{Authority, Slot};
use crate::chunk::ChunkBuilder;
use crate::crypt::{self, PART_DATA, PART_INDEX};
use crate::entry::Entries;
use crate::frame::{self, Found, Frames, Kind, HEADER};
use crate::keys::{self, random, Recipient, SealKey, Secret};
use crate::segment::{self, Follows, Segment};
use crate::wire::{put_bytes, Malformed};
use ring::aead::LessSafeKey;
use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};
use zeroize::Zeroize;

/// How archives are written: the options of `logstore()`.
#[derive(Clone)]
pub struct StoreOptions {
    /// zstd's level; 0 stores records uncompressed.
    pub level: i32,
    /// A chunk is sealed once its records take this many bytes.
    pub chunk_size: usize,
    /// ... or once its first record is this old.
    pub chunk_time: Duration,
    /// Whom the data keys are wrapped for; none writes records unencrypted.
    pub recipients: Vec<Recipient>,
    pub seal: Option<Arc<SealKey>>,
    /// `fsync()` after each flush.
    pub fsync: bool,
    /// Where chain heads are timestamped (`timestamp-url()`).
    pub authority: Option<Arc<Authority>>,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            level: 3,
            chunk_size: 1 << 20,
            chunk_time: Duration::from_secs(5),
            recipients: Vec::new(),
            seal: None,
            fsync: false,
            authority: None,
        }
    }
}

/// How often a writer looks for tokens while heads wait for the authority.
const STAMP_LOOK: Duration = Duration::from_millis(200);
/// How long a closing archive waits for the token over its last chunk.
const CLOSE_WAIT: Duration = Duration::from_secs(5);

impl StoreOptions {
    /// Whether archives written with `other` come out as with these: the same compression,
    /// chunks, recipients, sealing key and authority. A reload whose options are not the
    /// same closes the open archives, so that what follows starts a segment with the new.
    pub fn same_as(&self, other: &StoreOptions) -> bool {
        let ids = |o: &StoreOptions| o.recipients.iter().map(|r| r.id).collect::<Vec<_>>();
        let seal = |o: &StoreOptions| o.seal.as_ref().map(|k| (k.path.clone(), k.id));
        let authority = |o: &StoreOptions| o.authority.as_ref().map(|a| (a.url.clone(), a.policy));
        self.level == other.level
            && self.chunk_size == other.chunk_size
            && self.chunk_time == other.chunk_time
            && self.fsync == other.fsync
            && ids(self) == ids(other)
            && seal(self) == seal(other)
            && authority(self) == authority(other)
    }
}

fn now_micros() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as i64)
}

/// What the end of an existing file showed when a store opened it.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Opened {
    /// Frames it held.
    pub frames: u64,
    /// A tail cut short: offset and length.
    pub torn: Option<(u64, u64)>,
    /// Bytes that were no frame before the end: the chain could not be continued.
    pub damaged: bool,
}

/// One archive file being written.
pub struct Store {
    file: File,
    opts: Arc<StoreOptions>,
    segment: [u8; 16],
    data_key: Option<Arc<LessSafeKey>>,
    /// The MAC key of the next frame.
    mac: Option<Secret>,
    head: Secret,
    next_seq: u64,
    chunk: ChunkBuilder,
    /// When the open chunk took its first record.
    opened: Option<Instant>,
    /// Frames sealed and not yet written.
    out: Vec<u8>,
    /// This archive's heads to timestamp and tokens that came back.
    stamps: Option<Arc<Slot>>,
    /// Chunks with the sealers, in `seq` order.
    sealing: VecDeque<Sealing>,
}

/// A chunk with the sealers.
struct Sealing {
    seq: u64,
    sealed_at: i64,
    records: u32,
    plain_len: u32,
    /// The index part and the data part, compressed and encrypted.
    parts: mpsc::Receiver<(Vec<u8>, Vec<u8>)>,
}

/// How many chunks of one archive may be with the sealers: past it the writer waits for the
/// oldest (memory stays bounded by `chunk-size()` times this).
const MAX_SEALING: usize = 4;

/// Bytes in the open chunks of every archive of the process. Thousands of archives (a file
/// per host) each filling a chunk of `chunk-size()` would hold thousands of them in memory:
/// past [`UNSEALED_BUDGET`], an archive seals its chunk once it holds [`EARLY_SEAL`].
static UNSEALED: AtomicI64 = AtomicI64::new(0);
const UNSEALED_BUDGET: i64 = 128 << 20;
const EARLY_SEAL: usize = 64 << 10;

/// How long to wait for chunks with the sealers.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Wait {
    No,
    Oldest,
    All,
}

impl Store {
    /// Starts a segment at the end of `file` (opened to read and append).
    pub fn open(file: File, opts: Arc<StoreOptions>) -> Result<(Store, Opened), String> {
        let (head, next_seq, opened) =
            tail(&file).map_err(|e| format!("cannot read the archive's end: {e}"))?;
        let follows = if opened.damaged {
            Follows::Damage
        } else if opened.frames > 0 {
            Follows::Frame
        } else {
            Follows::Nothing
        };
        let id: [u8; 16] = random();
        let (seal, mac) = match &opts.seal {
            Some(key) => {
                let (j, k0) = key.next_segment(&id)?;
                (Some((key.id, j)), Some(k0))
            }
            None => (None, None),
        };
        let mut data: Secret = random();
        let recipients = opts
            .recipients
            .iter()
            .map(|r| (keys::WRAP_RSA_OAEP_SHA256, r.id, r.wrap(&data)))
            .collect::<Vec<_>>();
        let data_key = (!recipients.is_empty()).then(|| Arc::new(crypt::data_key(&data)));
        data.zeroize();
        let seg = Segment {
            id,
            created: now_micros(),
            cipher: if data_key.is_some() {
                segment::CIPHER_AES_256_GCM
            } else {
                segment::CIPHER_NONE
            },
            compression: if opts.level > 0 {
                segment::COMPRESSION_ZSTD
            } else {
                segment::COMPRESSION_NONE
            },
            seal,
            recipients,
            follows,
            torn: opened.torn,
        };
        let mut store = Store {
            file,
            opts,
            segment: id,
            data_key,
            mac,
            head: if follows == Follows::Frame {
                head
            } else {
                [0; 32]
            },
            next_seq,
            chunk: ChunkBuilder::default(),
            opened: None,
            out: Vec::new(),
            stamps: None,
            sealing: VecDeque::new(),
        };
        store.stamps = store.opts.authority.as_ref().map(|_| Arc::default());
        let mut content = Vec::new();
        seg.write(&mut content);
        store.frame_next(Kind::Segment, &content);
        Ok((store, opened))
    }

    /// Seals `content` as frame `seq` into `out`; the MAC key moves on. Frames are sealed
    /// in the order of their `seq`.
    fn frame(&mut self, seq: u64, kind: Kind, content: &[u8]) {
        let mut whole = Vec::with_capacity(8 + content.len());
        whole.extend_from_slice(&seq.to_le_bytes());
        whole.extend_from_slice(content);
        self.head = frame::write(&mut self.out, kind, &whole, &self.head, self.mac.as_ref());
        if let Some(k) = &mut self.mac {
            let next = keys::evolve(k);
            k.zeroize();
            *k = next;
        }
    }

    /// Seals `content` as the next frame, after the chunks with the sealers.
    fn frame_next(&mut self, kind: Kind, content: &[u8]) {
        self.frame_sealed(Wait::All);
        let seq = self.next_seq;
        self.next_seq += 1;
        self.frame(seq, kind, content);
    }

    /// Frames the chunks that came back from the sealers, in order, waiting as `wait` says.
    fn frame_sealed(&mut self, wait: Wait) {
        let mut waiting = wait;
        while let Some(front) = self.sealing.front() {
            let parts = match waiting {
                Wait::No => match front.parts.try_recv() {
                    Ok(parts) => parts,
                    Err(_) => return,
                },
                Wait::Oldest | Wait::All => front.parts.recv().expect("a sealer answers"),
            };
            if waiting == Wait::Oldest {
                waiting = Wait::No;
            }
            let c = self.sealing.pop_front().expect("the front");
            let (index, data) = parts;
            let mut content = Vec::with_capacity(24 + index.len() + data.len());
            content.extend_from_slice(&c.sealed_at.to_le_bytes());
            content.extend_from_slice(&c.records.to_le_bytes());
            content.extend_from_slice(&c.plain_len.to_le_bytes());
            put_bytes(&mut content, &index);
            content.extend_from_slice(&data);
            self.frame(c.seq, Kind::Chunk, &content);
            if let (Some(authority), Some(slot)) = (&self.opts.authority, &self.stamps) {
                authority.ask(slot, c.seq, self.head);
            }
        }
    }

    /// Takes the entries of `bytes` into the open chunk, sealing it each time it is full —
    /// or, while the open chunks of every archive hold more than [`UNSEALED_BUDGET`], once
    /// it holds [`EARLY_SEAL`].
    pub fn absorb(&mut self, bytes: &[u8]) -> Result<(), Malformed> {
        // Bytes added and not yet counted in UNSEALED (counted before a seal takes them off).
        let mut grown = 0;
        for entry in Entries::new(bytes) {
            let entry = entry?;
            if self.opened.is_none() {
                self.opened = Some(Instant::now());
            }
            let before = self.chunk.len();
            self.chunk.add(&entry);
            grown += (self.chunk.len() - before) as i64;
            if self.chunk.len() >= self.opts.chunk_size {
                UNSEALED.fetch_add(std::mem::take(&mut grown), Ordering::Relaxed);
                self.seal_chunk();
            }
        }
        let all = UNSEALED.fetch_add(grown, Ordering::Relaxed) + grown;
        if all > UNSEALED_BUDGET && self.chunk.len() >= EARLY_SEAL {
            self.seal_chunk();
        }
        Ok(())
    }

    /// When the open chunk must be sealed, if it holds records.
    pub fn due(&self) -> Option<Instant> {
        self.opened.map(|t| t + self.opts.chunk_time)
    }

    /// When the archive wants its writer to look again: its open chunk's due or its
    /// timestamps' ([`Store::stamps_due`]), whichever is first.
    pub fn next_due(&self, now: Instant) -> Option<Instant> {
        self.due().into_iter().chain(self.stamps_due(now)).min()
    }

    /// Records in the open chunk.
    pub fn unsealed(&self) -> u32 {
        self.chunk.records()
    }

    /// Bytes of sealed frames not written yet (a write failed).
    pub fn unwritten(&self) -> usize {
        self.out.len()
    }

    /// Chunks with the sealers.
    pub fn sealing(&self) -> usize {
        self.sealing.len()
    }

    /// Bytes waiting: of the open chunk and of sealed frames not written.
    pub fn pending_bytes(&self) -> usize {
        self.chunk.len() + self.out.len()
    }

    /// Seals the open chunk, if it holds records: it takes the next `seq` and goes to the
    /// sealers.
    pub fn seal_chunk(&mut self) {
        if self.chunk.is_empty() {
            return;
        }
        if self.sealing.len() >= MAX_SEALING {
            self.frame_sealed(Wait::Oldest);
        }
        self.opened = None;
        let records = self.chunk.records();
        UNSEALED.fetch_sub(self.chunk.len() as i64, Ordering::Relaxed);
        let taken = self.chunk.take();
        let seq = self.next_seq;
        self.next_seq += 1;
        let plain_len = taken.records.len() as u32;
        let (tx, parts) = mpsc::sync_channel(1);
        let (level, key, segment) = (self.opts.level, self.data_key.clone(), self.segment);
        crypt::sealers().run(
            plain_len as usize,
            Box::new(move || {
                let part = |n: u32, plain: &[u8]| {
                    let mut part = Vec::new();
                    if level > 0 {
                        crypt::compress(level, plain, &mut part);
                    } else {
                        part.extend_from_slice(plain);
                    }
                    if let Some(key) = &key {
                        crypt::seal(key, &segment, seq, n, &mut part);
                    }
                    part
                };
                let (index, data) = taken.finish();
                let _ = tx.send((part(PART_INDEX, &index), part(PART_DATA, &data)));
            }),
        );
        self.sealing.push_back(Sealing {
            seq,
            sealed_at: now_micros(),
            records,
            plain_len,
            parts,
        });
    }

    /// Writes every chunk sealed so far, waiting for the sealers, and the tokens that came
    /// back (and syncs with `fsync(yes)`). What a failed write did not take stays for the
    /// next write.
    pub fn flush(&mut self) -> io::Result<()> {
        self.frame_sealed(Wait::All);
        self.write_ready()
    }

    /// Writes the chunks that came back from the sealers and the tokens that came back from
    /// the authority, without waiting for the others (and syncs with `fsync(yes)`).
    pub fn write_ready(&mut self) -> io::Result<()> {
        self.frame_sealed(Wait::No);
        self.seal_tokens();
        while !self.out.is_empty() {
            match self.file.write(&self.out) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    self.out.drain(..n);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if self.opts.fsync {
            self.file.sync_data()?;
        }
        Ok(())
    }

    /// Seals the tokens that came back, each as a timestamp frame:
    /// `stamped seq | stamped head | token`.
    fn seal_tokens(&mut self) {
        let Some(slot) = &self.stamps else {
            return;
        };
        let tokens = slot.take();
        for token in tokens {
            let mut content = Vec::with_capacity(40 + token.der.len());
            content.extend_from_slice(&token.seq.to_le_bytes());
            content.extend_from_slice(&token.head);
            content.extend_from_slice(&token.der);
            self.frame_next(Kind::Timestamp, &content);
        }
    }

    /// When timestamp frames should be written: now when tokens came back, soon while heads
    /// wait for the authority. (Chunks with the sealers are written when the writer looks
    /// again while [`Store::sealing`] says some are out.) `now` is the caller's clock: a
    /// writer looks at thousands of archives in a row.
    pub fn stamps_due(&self, now: Instant) -> Option<Instant> {
        self.stamps.as_ref().and_then(|slot| match slot.pending() {
            (true, _) => Some(now),
            (false, true) => Some(now + STAMP_LOOK),
            (false, false) => None,
        })
    }

    /// Seals the open chunk, its timestamp (waiting up to five seconds for it while the
    /// authority answers) and a close frame, and writes them.
    pub fn close(&mut self) -> io::Result<()> {
        self.seal_chunk();
        self.frame_sealed(Wait::All);
        if let (Some(authority), Some(slot)) = (&self.opts.authority, &self.stamps) {
            authority.settle(slot, CLOSE_WAIT);
        }
        self.seal_tokens();
        let mut content = Vec::new();
        content.extend_from_slice(&now_micros().to_le_bytes());
        self.frame_next(Kind::Close, &content);
        self.flush()
    }
}

#[cfg(test)]
impl Store {
    /// The MAC key the next frame will be sealed with: what an intruder would find.
    pub(crate) fn current_mac(&self) -> Option<Secret> {
        self.mac
    }

    pub(crate) fn head(&self) -> (u64, Secret) {
        (self.next_seq, self.head)
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        UNSEALED.fetch_sub(self.chunk.len() as i64, Ordering::Relaxed);
        if let Some(k) = &mut self.mac {
            k.zeroize();
        }
    }
}

/// The chain head and next `seq` at the end of `file`, and what its end showed. Frame headers
/// are read one after another (a frame's length says where the next starts); only the last
/// frame is read whole. A header that does not read as one before the end, or a last frame
/// whose CRC fails, makes the file be read whole to find its frames past the damage.
fn tail(file: &File) -> io::Result<(Secret, u64, Opened)> {
    let len = file.metadata()?.len();
    let mut at = 0u64;
    let mut last = None;
    let mut frames = 0;
    let mut header = [0; HEADER];
    while at < len {
        if len - at < HEADER as u64 {
            break;
        }
        file.read_exact_at(&mut header, at)?;
        match frame::declared_len(&header) {
            Some(n) if at + n as u64 <= len => {
                last = Some((at, n));
                frames += 1;
                at += n as u64;
            }
            _ => break,
        }
    }
    if at == len {
        if let Some((start, n)) = last {
            let mut bytes = vec![0; n];
            file.read_exact_at(&mut bytes, start)?;
            if let Some(f) = frame::parse(&bytes, start) {
                let opened = Opened {
                    frames,
                    ..Opened::default()
                };
                return Ok((f.head, f.seq + 1, opened));
            }
        } else {
            return Ok(([0; 32], 0, Opened::default()));
        }
    }
    // Damage, or a tail cut short: read the file whole.
    let mut bytes = vec![0; len as usize];
    file.read_exact_at(&mut bytes, 0)?;
    let found: Vec<Found> = Frames::new(&bytes).collect();
    let mut opened = Opened::default();
    let mut end = ([0; 32], 0);
    for (i, f) in found.iter().enumerate() {
        match f {
            Found::Frame(f) => {
                opened.frames += 1;
                end = (f.head, f.seq + 1);
            }
            Found::Damaged { at, len, .. } if i + 1 == found.len() => {
                opened.torn = Some((*at, *len))
            }
            Found::Damaged { .. } => opened.damaged = true,
        }
    }
    Ok((end.0, end.1, opened))
}
