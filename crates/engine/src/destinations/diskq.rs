//! Disk buffers: `disk-buffer(reliable(yes|no) dir() disk-buf-size() …)` on a forwarding
//! destination.
//!
//! A disk buffer is a directory of segment files (`00000000000000000001.seg` …) holding
//! records in the order readers queued them, and a `position` file that says where the sender
//! has got to. Every accepted batch is appended as one record by the buffer's disk thread;
//! the sender reads records in order (from a cache of recent records in memory, or from the
//! file after a restart or when it lags far behind), and once they are sent it moves the
//! position on and deletes segments it has passed. A restart replays every record after the
//! position: a message is sent twice at most when sluice died between sending it and
//! recording that it did (one gathered write).
//!
//! - `reliable(yes)`: a batch's acknowledgement is dropped (its reader's credits return) only
//!   once its record is on disk, `fdatasync`ed: a `kill -9` or a power cut loses nothing the
//!   sources were told was accepted. One `fdatasync` covers every batch written since the
//!   previous one, so the cost is spread over many batches.
//! - `reliable(no)`: the same records, not synced; a flow-controlled batch's credits return
//!   when its record is written (to the page cache). A `kill -9` loses nothing written; a power
//!   cut may lose what the kernel had not yet written. (syslog-ng keeps such messages in memory
//!   and loses them on a crash.)
//!
//! A full buffer (`disk-buf-size()`, or a disk that is full) holds flow-controlled batches in
//! memory with their acknowledgements — the reader stops: backpressure — and drops the others,
//! counted. A write that fails is cut back to the record's start and retried: the file is never
//! left with half a record by sluice. A record that does not read back whole when the buffer is
//! opened is a torn tail (repaired by truncation, reported) at the end of the last segment, or
//! else damage: the bytes from there on are moved to a `.damaged` file named in the error.

use super::queue::{Batch, BatchQueue};
use crate::own_log;
use crate::stats::{DestCounters, DropReason};
use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{DirBuilderExt, FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// `disk-buffer()` options. 3.38's and 4.x's names map onto these (see the builder).
#[derive(Clone, Debug)]
pub struct DiskBufferOptions {
    pub reliable: bool,
    /// `dir()`: where buffers live; by default the directory of the persist file.
    pub dir: Option<PathBuf>,
    /// `disk-buf-size()` / `capacity-bytes()`: the most the buffer holds on disk.
    pub capacity: u64,
    /// Messages of recent records kept in memory too, so that the sender need not read back
    /// what was just written (`front-cache-size()`, `mem-buf-length()`, `qout-size()`).
    pub cache_messages: usize,
    /// `prealloc()`: accepted; segments grow as written.
    pub prealloc: bool,
}

/// A record's header: magic, payload length, messages, CRC-32 of messages and payload.
const HEADER: usize = 16;
const MAGIC: u32 = u32::from_le_bytes(*b"SLQ1");
const POSITION_FILE: &str = "position";

/// Where a record is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Location {
    pub segment: u64,
    pub offset: u64,
}

/// A record written and not yet sent.
struct Record {
    at: Location,
    /// Header and payload.
    size: u64,
    messages: u32,
    cached: Option<Batch>,
    /// When the queue took its batch, seconds since the epoch; for a backlog from before
    /// the start, the start.
    queued_at: u64,
}

#[derive(Default)]
struct State {
    /// Accepted, waiting for the disk thread, in order.
    unwritten: VecDeque<Batch>,
    /// Flow-controlled batches that did not fit; they keep their acknowledgements (their
    /// readers wait) until there is room. While any waits, later flow-controlled batches wait
    /// behind them, so that order holds.
    held: VecDeque<Batch>,
    /// Written, not yet taken by the sender.
    records: VecDeque<Record>,
    /// Taken by the sender, not yet sent.
    taken: VecDeque<Record>,
    /// Bytes of `unwritten`, `records` and `taken` as records: what counts against capacity.
    used: u64,
    cached: usize,
    stopping: bool,
    /// The disk thread has written everything and exited.
    flushed: bool,
}

pub struct DiskQueue {
    label: Arc<str>,
    dir: PathBuf,
    opts: DiskBufferOptions,
    segment_size: u64,
    state: Mutex<State>,
    /// The sender waits here for records.
    ready: Condvar,
    /// The disk thread waits here for batches (and for room for held ones).
    work: Condvar,
    counters: DestCounters,
    /// The position file, and the first segment not yet deleted.
    position: Mutex<(File, u64)>,
    disk_thread: Mutex<Option<JoinHandle<()>>>,
}

fn segment_path(dir: &Path, id: u64) -> PathBuf {
    dir.join(format!("{id:020}.seg"))
}

/// The segment ids in `dir`, in order.
pub fn segments(dir: &Path) -> std::io::Result<Vec<u64>> {
    let mut ids: Vec<u64> = std::fs::read_dir(dir)?
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            name.strip_suffix(".seg")?.parse().ok()
        })
        .collect();
    ids.sort_unstable();
    Ok(ids)
}

/// Reads the `position` file: where the sender got to. `None` when absent or unreadable.
pub fn read_position(dir: &Path) -> std::io::Result<Option<Location>> {
    let mut buf = [0u8; 20];
    match File::open(dir.join(POSITION_FILE)) {
        Ok(mut f) => {
            if f.read_exact(&mut buf).is_err() {
                return Ok(None);
            }
        }
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    }
    let crc = u32::from_le_bytes(buf[16..20].try_into().expect("4 bytes"));
    if crc32fast::hash(&buf[..16]) != crc {
        return Ok(None);
    }
    Ok(Some(Location {
        segment: u64::from_le_bytes(buf[0..8].try_into().expect("8 bytes")),
        offset: u64::from_le_bytes(buf[8..16].try_into().expect("8 bytes")),
    }))
}

fn encode_position(at: Location) -> [u8; 20] {
    let mut buf = [0u8; 20];
    buf[0..8].copy_from_slice(&at.segment.to_le_bytes());
    buf[8..16].copy_from_slice(&at.offset.to_le_bytes());
    let crc = crc32fast::hash(&buf[..16]);
    buf[16..20].copy_from_slice(&crc.to_le_bytes());
    buf
}

/// The bytes a batch takes as a record.
fn record_size(b: &Batch) -> u64 {
    (HEADER + 4 * b.len() + b.data.len()) as u64
}

/// Appends `b` as a record to `out`.
fn encode_record(b: &Batch, out: &mut Vec<u8>) {
    let payload = 4 * b.len() + b.data.len();
    let start = out.len();
    out.extend_from_slice(&MAGIC.to_le_bytes());
    out.extend_from_slice(&(payload as u32).to_le_bytes());
    out.extend_from_slice(&(b.len() as u32).to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    for e in &b.ends {
        out.extend_from_slice(&e.to_le_bytes());
    }
    out.extend_from_slice(&b.data);
    let crc = crc32fast::hash(&out[start + 8..start + 12]);
    let mut h = crc32fast::Hasher::new_with_initial(crc);
    h.update(&out[start + HEADER..]);
    out[start + 12..start + 16].copy_from_slice(&h.finalize().to_le_bytes());
}

/// What reading a record at some offset found.
pub enum RecordRead {
    Record {
        size: u64,
        batch: Batch,
    },
    /// The file ends inside the record (or exactly here: `missing == 0` and no bytes).
    Short,
    /// The bytes there are not a record.
    Bad(&'static str),
}

/// Reads the record of `file` at `offset`.
pub fn read_record(file: &File, offset: u64, len: u64) -> std::io::Result<RecordRead> {
    if offset + HEADER as u64 > len {
        return Ok(RecordRead::Short);
    }
    let mut header = [0u8; HEADER];
    file.read_exact_at(&mut header, offset)?;
    let word = |i: usize| u32::from_le_bytes(header[i..i + 4].try_into().expect("4 bytes"));
    if word(0) != MAGIC {
        return Ok(RecordRead::Bad("no record header"));
    }
    let (payload, messages, crc) = (word(4) as u64, word(8) as usize, word(12));
    if (messages as u64) * 4 > payload {
        return Ok(RecordRead::Bad("a record header that contradicts itself"));
    }
    if offset + HEADER as u64 + payload > len {
        return Ok(RecordRead::Short);
    }
    let mut body = vec![0u8; payload as usize];
    file.read_exact_at(&mut body, offset + HEADER as u64)?;
    let mut h = crc32fast::Hasher::new_with_initial(crc32fast::hash(&header[8..12]));
    h.update(&body);
    if h.finalize() != crc {
        return Ok(RecordRead::Bad("a checksum mismatch"));
    }
    let ends: Vec<u32> = body[..messages * 4]
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")))
        .collect();
    let data = body[messages * 4..].to_vec();
    if ends.windows(2).any(|w| w[0] > w[1]) || ends.last().is_some_and(|&e| e as usize > data.len())
    {
        return Ok(RecordRead::Bad("message bounds outside the record"));
    }
    Ok(RecordRead::Record {
        size: HEADER as u64 + payload,
        batch: Batch {
            data,
            ends,
            ack: None,
            queued_at: 0,
        },
    })
}

/// What opening a buffer found.
struct Recovered {
    records: VecDeque<Record>,
    /// Where writing continues.
    end: Location,
}

/// Checks every record after the position, repairing a torn tail and setting damage aside.
fn recover(label: &str, dir: &Path) -> std::io::Result<Recovered> {
    let ids = segments(dir)?;
    let position = match read_position(dir)? {
        Some(p) => p,
        None => {
            if std::fs::metadata(dir.join(POSITION_FILE)).is_ok_and(|m| m.len() > 0) {
                own_log::warning(format!(
                    "{label}: the position file of disk buffer {} is damaged; sending every record in it again",
                    dir.display()
                ));
            }
            Location {
                segment: ids.first().copied().unwrap_or(1),
                offset: 0,
            }
        }
    };
    let mut records = VecDeque::new();
    // With no segment at or after the position, writing starts in a new one after it (never
    // in the position's own segment, whose first bytes count as sent).
    let mut end = Location {
        segment: position.segment + 1,
        offset: 0,
    };
    for (n, &id) in ids.iter().enumerate() {
        let path = segment_path(dir, id);
        if id < position.segment {
            std::fs::remove_file(&path)?;
            continue;
        }
        let file = OpenOptions::new().read(true).write(true).open(&path)?;
        let len = file.metadata()?.len();
        let mut offset = if id == position.segment {
            position.offset
        } else {
            0
        };
        if offset > len {
            own_log::error(format!(
                "{label}: disk buffer file {} is shorter than the position recorded for it ({offset} > {len} bytes); nothing in it is sent again",
                path.display()
            ));
            offset = len;
        }
        let last = n + 1 == ids.len();
        while offset < len {
            match read_record(&file, offset, len)? {
                RecordRead::Record { size, batch } => {
                    records.push_back(Record {
                        at: Location {
                            segment: id,
                            offset,
                        },
                        size,
                        messages: batch.len() as u32,
                        cached: None,
                        queued_at: crate::clock::unix_now(),
                    });
                    offset += size;
                }
                RecordRead::Short if last => {
                    own_log::warning(format!(
                        "{label}: disk buffer file {} ended inside a record (a write cut short): removed its last {} bytes",
                        path.display(),
                        len - offset
                    ));
                    file.set_len(offset)?;
                    break;
                }
                RecordRead::Short | RecordRead::Bad(_) => {
                    let why = match read_record(&file, offset, len)? {
                        RecordRead::Bad(why) => why,
                        _ => "a record cut short",
                    };
                    let aside = dir.join(format!("{id:020}.seg.damaged-at-{offset}"));
                    let mut rest = vec![0u8; (len - offset) as usize];
                    file.read_exact_at(&mut rest, offset)?;
                    OpenOptions::new()
                        .write(true)
                        .create_new(true)
                        .mode(0o600)
                        .open(&aside)?
                        .write_all(&rest)?;
                    file.set_len(offset)?;
                    file.sync_all()?;
                    own_log::error(format!(
                        "{label}: disk buffer file {} is damaged at byte {offset} ({why}); the {} bytes from there were moved to {} and are not sent",
                        path.display(),
                        rest.len(),
                        aside.display()
                    ));
                    break;
                }
            }
        }
        end = Location {
            segment: id,
            offset,
        };
    }
    Ok(Recovered { records, end })
}

impl DiskQueue {
    /// Opens (or creates) the buffer in `dir`, replaying what it holds, and starts its disk
    /// thread.
    pub fn open(
        label: Arc<str>,
        dir: PathBuf,
        opts: DiskBufferOptions,
        counters: DestCounters,
    ) -> std::io::Result<Arc<DiskQueue>> {
        // What a buffer holds is private: the directory 0700, its files 0600.
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)?;
        let recovered = recover(&label, &dir)?;
        let position = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(dir.join(POSITION_FILE))?;
        let first_live = segments(&dir)?
            .first()
            .copied()
            .unwrap_or(recovered.end.segment);
        let messages: u64 = recovered.records.iter().map(|r| r.messages as u64).sum();
        let used: u64 = recovered.records.iter().map(|r| r.size).sum();
        if messages > 0 {
            own_log::notice(format!(
                "{label}: disk buffer {} holds {messages} messages ({used} bytes) from before; sending them first",
                dir.display()
            ));
        }
        let q = Arc::new(DiskQueue {
            segment_size: (opts.capacity / 8).clamp(1 << 20, 64 << 20),
            label,
            dir,
            opts,
            state: Mutex::new(State {
                records: recovered.records,
                used,
                ..State::default()
            }),
            ready: Condvar::new(),
            work: Condvar::new(),
            counters,
            position: Mutex::new((position, first_live)),
            disk_thread: Mutex::new(None),
        });
        // What the buffer holds from before this start is processed again: the books of the
        // destination balance (`sluice ctl ledger`).
        let before = q.counters.queued.swap(messages, Ordering::Relaxed);
        q.counters
            .processed
            .fetch_add(messages.saturating_sub(before), Ordering::Relaxed);
        if messages > 0 {
            q.lock().show_oldest(&q.counters);
        }
        let writer = SegmentWriter::open(&q.dir, recovered.end)?;
        let q2 = q.clone();
        let handle = std::thread::Builder::new()
            .name("disk-buffer".into())
            .spawn(move || q2.write_loop(writer))?;
        *q.disk_thread.lock().expect("thread lock") = Some(handle);
        Ok(q)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().expect("disk buffer lock")
    }

    /// The disk thread: appends what readers queued, syncs, hands the records to the sender.
    fn write_loop(&self, mut writer: SegmentWriter) {
        let mut batch: Vec<Batch> = Vec::new();
        let mut encoded = Vec::new();
        let mut failing_since: Option<Instant> = None;
        loop {
            {
                let mut state = self.lock();
                // Held batches move on when there is room, in order.
                while let Some(b) = state.held.front() {
                    let size = record_size(b);
                    if state.used > 0 && state.used + size > self.opts.capacity {
                        break;
                    }
                    state.used += size;
                    let b = state.held.pop_front().expect("front exists");
                    state.unwritten.push_back(b);
                }
                if state.unwritten.is_empty() {
                    if state.stopping {
                        let held: usize = state.held.iter().map(Batch::len).sum();
                        if held > 0 {
                            own_log::error(format!(
                                "{}: stopping with {held} messages that did not fit the full disk buffer {}",
                                self.label,
                                self.dir.display()
                            ));
                        }
                        state.flushed = true;
                        self.ready.notify_all();
                        return;
                    }
                    state = self
                        .work
                        .wait_timeout(state, Duration::from_millis(500))
                        .expect("disk buffer lock")
                        .0;
                }
                batch.extend(state.unwritten.drain(..));
            }
            if batch.is_empty() {
                continue;
            }
            // One record per batch, all in one write into one segment; a new segment when
            // this one has grown past its size, or past 1 MiB with all of it sent.
            let mut placed = Vec::with_capacity(batch.len());
            let result = (|| -> std::io::Result<()> {
                if writer.at.offset >= self.segment_size {
                    writer.next_segment(&self.dir, self.opts.reliable)?;
                } else if writer.at.offset >= 1 << 20 {
                    self.drop_sent_segment(&mut writer)?;
                }
                encoded.clear();
                for b in &batch {
                    placed.push(Location {
                        segment: writer.at.segment,
                        offset: writer.at.offset + encoded.len() as u64,
                    });
                    encode_record(b, &mut encoded);
                }
                writer.append(&encoded)?;
                if self.opts.reliable {
                    writer.file.sync_data()?;
                }
                Ok(())
            })();
            if let Err(e) = result {
                if self.lock().stopping
                    && failing_since.is_some_and(|t| t.elapsed() > Duration::from_secs(5))
                {
                    let lost: usize = batch.iter().map(Batch::len).sum();
                    own_log::error(format!(
                        "{}: stopping with {lost} messages that could not be written to disk buffer {}: {e}",
                        self.label,
                        self.dir.display()
                    ));
                    let mut state = self.lock();
                    state.unwritten.clear();
                    state.held.clear();
                    state.flushed = true;
                    self.ready.notify_all();
                    return;
                }
                if failing_since.is_none() {
                    own_log::error(format!(
                        "{}: cannot write disk buffer {}: {e}; retrying every second, messages wait in memory",
                        self.label,
                        self.dir.display()
                    ));
                    failing_since = Some(Instant::now());
                }
                // Whatever reached the file in this round is cut off; the batches go back
                // to the front of the line.
                let _ = writer.rewind(placed.first().copied());
                placed.clear();
                let mut state = self.lock();
                for b in batch.drain(..).rev() {
                    state.unwritten.push_front(b);
                }
                drop(state);
                // A full disk whose only segment is all sent frees itself by starting anew;
                // otherwise the sender has to make room first.
                if matches!(self.drop_sent_segment(&mut writer), Ok(true)) {
                    continue;
                }
                std::thread::sleep(Duration::from_secs(1));
                continue;
            }
            if let Some(since) = failing_since.take() {
                own_log::notice(format!(
                    "{}: disk buffer {} is written again after {:.0}s",
                    self.label,
                    self.dir.display(),
                    since.elapsed().as_secs_f64()
                ));
            }
            let mut acks = Vec::with_capacity(batch.len());
            let mut state = self.lock();
            for (mut b, at) in batch.drain(..).zip(placed) {
                acks.push(b.ack.take());
                let size = record_size(&b);
                let messages = b.len() as u32;
                let queued_at = b.queued_at;
                let cached = if state.cached + b.len() <= self.opts.cache_messages {
                    state.cached += b.len();
                    Some(b)
                } else {
                    self.counters.release(b.data.len() as u64);
                    None
                };
                state.records.push_back(Record {
                    at,
                    size,
                    messages,
                    cached,
                    queued_at,
                });
            }
            drop(state);
            self.ready.notify_one();
            // The batches are durable (reliable) or written: their readers go on.
            drop(acks);
        }
    }

    /// When everything written has been sent, moves the writer to a new segment and deletes
    /// the one it leaves, so that a buffer kept busy does not keep one segment growing.
    /// Returns whether it did.
    fn drop_sent_segment(&self, writer: &mut SegmentWriter) -> std::io::Result<bool> {
        let state = self.lock();
        if writer.at.offset == 0 || !state.records.is_empty() || !state.taken.is_empty() {
            return Ok(false);
        }
        let old = writer.at.segment;
        let next = Location {
            segment: old + 1,
            offset: 0,
        };
        // The new segment first, then the position, then the old segment goes: a failure or a
        // crash at any point leaves a buffer that reads right (an old segment left behind is
        // deleted at the next start).
        *writer = SegmentWriter::open(&self.dir, next)?;
        let mut position = self.position.lock().expect("position lock");
        let (file, first_live) = &mut *position;
        file.write_all_at(&encode_position(next), 0)?;
        while *first_live <= old {
            let _ = std::fs::remove_file(segment_path(&self.dir, *first_live));
            *first_live += 1;
        }
        drop(state);
        Ok(true)
    }

    /// Records `to` as the position and deletes the segments before it.
    fn advance(&self, to: Location) {
        let mut position = self.position.lock().expect("position lock");
        let (file, first_live) = &mut *position;
        if let Err(e) = file.write_all_at(&encode_position(to), 0) {
            own_log::error(format!(
                "{}: cannot record the position of disk buffer {}: {e}; a restart will send some messages again",
                self.label,
                self.dir.display()
            ));
        }
        while *first_live < to.segment {
            let _ = std::fs::remove_file(segment_path(&self.dir, *first_live));
            *first_live += 1;
        }
    }
}

impl Drop for DiskQueue {
    /// A buffer dropped with batches in memory (a reload removed its destination; they are on
    /// disk or reported) gives their bytes back to the memory budget.
    fn drop(&mut self) {
        let state = self.state.get_mut().unwrap_or_else(|e| e.into_inner());
        let held: usize = state
            .unwritten
            .iter()
            .chain(state.held.iter())
            .chain(state.records.iter().filter_map(|r| r.cached.as_ref()))
            .map(|b| b.data.len())
            .sum();
        self.counters.release(held as u64);
    }
}

impl State {
    /// `oldest_queued_since`: when the oldest message not yet sent (held by the sender, or
    /// waiting) was queued; 0: none.
    fn show_oldest(&self, counters: &DestCounters) {
        let records = self.taken.iter().chain(self.records.iter()).next();
        let batches = self.unwritten.iter().chain(self.held.iter()).next();
        let oldest = records
            .map(|r| r.queued_at)
            .or(batches.map(|b| b.queued_at));
        counters.oldest_queued(oldest.unwrap_or(0));
    }
}

impl BatchQueue for DiskQueue {
    fn push(&self, mut batch: Batch) {
        if batch.is_empty() {
            return;
        }
        batch.queued_at = crate::clock::unix_now();
        let size = record_size(&batch);
        let mut state = self.lock();
        let fits =
            state.held.is_empty() && (state.used == 0 || state.used + size <= self.opts.capacity);
        if fits {
            state.used += size;
        }
        self.counters
            .queued
            .fetch_add(batch.len() as u64, Ordering::Relaxed);
        if fits || batch.ack.is_some() {
            self.counters.hold(batch.data.len() as u64);
        }
        if fits {
            state.unwritten.push_back(batch);
        } else if batch.ack.is_some() {
            state.held.push_back(batch);
        } else {
            self.counters
                .queued
                .fetch_sub(batch.len() as u64, Ordering::Relaxed);
            self.counters
                .drop(DropReason::DiskBufferFull, batch.len() as u64);
            return;
        }
        state.show_oldest(&self.counters);
        drop(state);
        self.work.notify_one();
    }

    fn take(&self, timeout: Duration, max_bytes: usize, into: &mut Vec<Batch>) -> bool {
        let mut state = self.lock();
        if state.records.is_empty() && !state.flushed {
            state = self
                .ready
                .wait_timeout(state, timeout)
                .expect("disk buffer lock")
                .0;
        }
        let (mut bytes, mut messages) = (0, 0u64);
        let mut to_read = Vec::new();
        while bytes < max_bytes {
            let Some(mut r) = state.records.pop_front() else {
                break;
            };
            bytes += r.size as usize;
            messages += u64::from(r.messages);
            match r.cached.take() {
                Some(b) => {
                    state.cached -= b.len();
                    self.counters.release(b.data.len() as u64);
                    into.push(b);
                }
                None => {
                    to_read.push((into.len(), r.at, r.size));
                    into.push(Batch::new(None));
                }
            }
            state.taken.push_back(r);
        }
        if messages > 0 {
            state.show_oldest(&self.counters);
        }
        let finished = state.flushed && state.records.is_empty();
        drop(state);
        if messages > 0 {
            self.counters.in_flight(messages, 0);
        }
        // Records not in memory are read back outside the lock.
        // One open per segment: a backlog is read back record after record.
        let mut open: Option<(u64, File)> = None;
        for (i, at, size) in to_read {
            match self.read_back(&mut open, at, size) {
                Ok(b) => into[i] = b,
                Err(e) => {
                    own_log::error(format!(
                        "{}: cannot read back disk buffer {} at {}:{}: {e}; those messages are not sent",
                        self.label,
                        self.dir.display(),
                        at.segment,
                        at.offset
                    ));
                }
            }
        }
        finished
    }

    fn done(&self, batches: &mut Vec<Batch>) {
        let mut state = self.lock();
        let mut last = None;
        let mut messages = 0u64;
        for _ in 0..batches.len() {
            let r = state.taken.pop_front().expect("done with what was taken");
            state.used -= r.size;
            messages += r.messages as u64;
            last = Some(Location {
                segment: r.at.segment,
                offset: r.at.offset + r.size,
            });
        }
        state.show_oldest(&self.counters);
        drop(state);
        batches.clear();
        self.counters.in_flight(0, messages);
        self.counters.queued.fetch_sub(messages, Ordering::Relaxed);
        self.work.notify_one();
        if let Some(to) = last {
            self.advance(to);
        }
    }

    fn abandon(&self, batches: &mut Vec<Batch>) -> String {
        let state = self.lock();
        let messages: u64 = state
            .taken
            .iter()
            .chain(state.records.iter())
            .map(|r| r.messages as u64)
            .sum();
        drop(state);
        batches.clear();
        format!(
            "{messages} messages stay in disk buffer {} for the next start",
            self.dir.display()
        )
    }

    fn put_back(&self, batches: &mut Vec<Batch>) {
        let mut state = self.lock();
        for b in batches.drain(..).rev() {
            let mut r = state.taken.pop_back().expect("put back what was taken");
            self.counters.in_flight(0, u64::from(r.messages));
            state.cached += b.len();
            self.counters.hold(b.data.len() as u64);
            r.cached = Some(b);
            state.records.push_front(r);
        }
        state.show_oldest(&self.counters);
        drop(state);
        self.ready.notify_one();
    }

    fn is_stopping(&self) -> bool {
        self.lock().stopping
    }

    fn stop(&self) {
        self.lock().stopping = true;
        self.work.notify_all();
        self.ready.notify_all();
        let thread = self.disk_thread.lock().expect("thread lock").take();
        if let Some(t) = thread {
            let _ = t.join();
        }
        self.ready.notify_all();
    }

    fn counters(&self) -> &DestCounters {
        &self.counters
    }

    fn has_backlog(&self) -> bool {
        !self.lock().records.is_empty()
    }
}

impl DiskQueue {
    /// Reads the record at `at`, keeping its segment in `open` for the next one.
    fn read_back(
        &self,
        open: &mut Option<(u64, File)>,
        at: Location,
        size: u64,
    ) -> std::io::Result<Batch> {
        if open
            .as_ref()
            .is_none_or(|(segment, _)| *segment != at.segment)
        {
            *open = Some((at.segment, File::open(segment_path(&self.dir, at.segment))?));
        }
        let (_, file) = open.as_ref().expect("opened above");
        match read_record(file, at.offset, at.offset + size)? {
            RecordRead::Record { batch, .. } => Ok(batch),
            RecordRead::Short => Err(std::io::Error::new(ErrorKind::UnexpectedEof, "cut short")),
            RecordRead::Bad(why) => Err(std::io::Error::new(ErrorKind::InvalidData, why)),
        }
    }
}

/// The segment the disk thread appends to.
struct SegmentWriter {
    file: File,
    at: Location,
}

impl SegmentWriter {
    fn open(dir: &Path, at: Location) -> std::io::Result<SegmentWriter> {
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(segment_path(dir, at.segment))?;
        file.seek(SeekFrom::End(0))?;
        Ok(SegmentWriter { file, at })
    }

    fn append(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.file.write_all(bytes)?;
        self.at.offset += bytes.len() as u64;
        Ok(())
    }

    /// Closes this segment (synced, when reliable) and starts the next.
    fn next_segment(&mut self, dir: &Path, reliable: bool) -> std::io::Result<()> {
        if reliable {
            self.file.sync_data()?;
        }
        let next = Location {
            segment: self.at.segment + 1,
            offset: 0,
        };
        *self = SegmentWriter::open(dir, next)?;
        if reliable {
            File::open(dir)?.sync_all()?;
        }
        Ok(())
    }

    /// After a failed write: cuts the file back to where this round started (`from`, if it
    /// is in this segment) or to the last whole record known.
    fn rewind(&mut self, from: Option<Location>) -> std::io::Result<()> {
        let to = match from {
            Some(l) if l.segment == self.at.segment => l.offset,
            _ => self.at.offset,
        };
        self.file.set_len(to)?;
        self.at.offset = to;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::window::Window;

    fn opts(reliable: bool) -> DiskBufferOptions {
        DiskBufferOptions {
            reliable,
            dir: None,
            capacity: 1 << 20,
            cache_messages: 4,
            prealloc: false,
        }
    }

    fn batch(from: usize, n: usize) -> Batch {
        let mut b = Batch::new(None);
        for i in from..from + n {
            b.data
                .extend_from_slice(format!("message {i}\n").as_bytes());
            b.end_message();
        }
        b
    }

    /// Takes everything the queue gives until it gives nothing for half a second, as text.
    /// (The disk thread may hand over a push's records in more than one round.)
    fn drain(q: &DiskQueue, done: bool) -> String {
        let mut taken = Vec::new();
        loop {
            let before = taken.len();
            q.take(Duration::from_millis(500), usize::MAX, &mut taken);
            if taken.len() == before {
                break;
            }
        }
        let text: String = taken
            .iter()
            .map(|b| String::from_utf8_lossy(&b.data).into_owned())
            .collect();
        if done {
            q.done(&mut taken);
        }
        text
    }

    fn label() -> Arc<str> {
        Arc::from("destination test")
    }

    #[test]
    fn a_restart_replays_what_was_not_sent_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("q.rdq");
        let q =
            DiskQueue::open(label(), path.clone(), opts(true), DestCounters::default()).unwrap();
        q.push(batch(0, 3));
        q.push(batch(3, 3));
        assert_eq!(
            drain(&q, true),
            (0..6).map(|i| format!("message {i}\n")).collect::<String>()
        );
        q.push(batch(6, 2));
        q.push(batch(8, 2)); // beyond the cache of 4 messages: read back from the file
        q.stop();
        drop(q);
        let q =
            DiskQueue::open(label(), path.clone(), opts(true), DestCounters::default()).unwrap();
        assert!(q.has_backlog());
        let text = drain(&q, false);
        assert_eq!(
            text,
            (6..10)
                .map(|i| format!("message {i}\n"))
                .collect::<String>()
        );
        // Taken but not done: sent again after another restart.
        q.stop();
        drop(q);
        let q =
            DiskQueue::open(label(), path.clone(), opts(true), DestCounters::default()).unwrap();
        assert_eq!(drain(&q, true), text);
        q.stop();
        drop(q);
        let q = DiskQueue::open(label(), path, opts(true), DestCounters::default()).unwrap();
        assert!(!q.has_backlog());
        q.stop();
    }

    #[test]
    fn a_torn_tail_is_cut_off_and_damage_is_set_aside() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("q.dq");
        let q =
            DiskQueue::open(label(), path.clone(), opts(false), DestCounters::default()).unwrap();
        for i in 0..3 {
            q.push(batch(i * 2, 2));
            // One record per write round.
            std::thread::sleep(Duration::from_millis(50));
        }
        q.stop();
        drop(q);
        let seg = segment_path(&path, segments(&path).unwrap()[0]);
        let len = std::fs::metadata(&seg).unwrap().len();
        // A write cut short: half a header at the end.
        let mut f = OpenOptions::new().append(true).open(&seg).unwrap();
        f.write_all(&MAGIC.to_le_bytes()).unwrap();
        drop(f);
        let q =
            DiskQueue::open(label(), path.clone(), opts(false), DestCounters::default()).unwrap();
        assert_eq!(std::fs::metadata(&seg).unwrap().len(), len);
        assert_eq!(drain(&q, false).lines().count(), 6);
        q.stop();
        drop(q);
        // A byte changed in the second record: the first is kept, the rest set aside.
        let record = len / 3;
        let f = OpenOptions::new().write(true).open(&seg).unwrap();
        f.write_all_at(b"X", record + HEADER as u64 + 9).unwrap();
        drop(f);
        let q =
            DiskQueue::open(label(), path.clone(), opts(false), DestCounters::default()).unwrap();
        assert_eq!(drain(&q, false), "message 0\nmessage 1\n");
        let aside = path.join(format!(
            "{:020}.seg.damaged-at-{record}",
            segments(&path).unwrap()[0]
        ));
        assert_eq!(std::fs::metadata(aside).unwrap().len(), 2 * record);
        q.stop();
    }

    #[tokio::test]
    async fn disk_buffers_keep_the_queue_contract() {
        use crate::destinations::queue::contract::{check, Acks};
        for reliable in [true, false] {
            check(Acks::WhenStored, &|dir| {
                DiskQueue::open(
                    label(),
                    dir.join("q"),
                    opts(reliable),
                    DestCounters::default(),
                )
                .unwrap()
            })
            .await;
        }
    }

    #[tokio::test]
    async fn a_full_buffer_holds_flow_controlled_batches_and_drops_others() {
        let dir = tempfile::tempdir().unwrap();
        let q = DiskQueue::open(
            label(),
            dir.path().join("q.rdq"),
            opts(true),
            DestCounters::default(),
        )
        .unwrap();
        let big = |from| {
            let mut b = Batch::new(None);
            b.data = vec![b'x'; 600 << 10];
            b.data.extend_from_slice(format!(" {from}\n").as_bytes());
            b.end_message();
            b
        };
        q.push(big(0));
        q.push(big(1)); // does not fit: dropped
        assert_eq!(q.counters.dropped.load(Ordering::Relaxed), 1);
        let window = Window::new(10);
        let ack = window.take(1).await;
        let mut held = big(2);
        held.ack = Some(ack);
        q.push(held);
        tokio::time::sleep(Duration::from_millis(200)).await;
        // Held in memory with its credit until the first record is sent.
        assert_eq!(q.lock().held.len(), 1);
        let mut taken = Vec::new();
        q.take(Duration::from_secs(1), usize::MAX, &mut taken);
        assert!(taken[0].data.ends_with(b" 0\n"));
        q.done(&mut taken);
        window.drained().await;
        q.take(Duration::from_secs(1), usize::MAX, &mut taken);
        assert!(taken[0].data.ends_with(b" 2\n"));
        q.stop();
    }

    /// What a test does to a disk buffer, as its sender and its operator would.
    #[derive(Clone, Debug)]
    enum Step {
        /// A reader queues a batch of this many messages of this many bytes.
        Push(usize, usize),
        /// The sender takes about this many bytes.
        Take(usize),
        /// The sender has sent the oldest of what it took (this many, at most).
        Done(usize),
        /// The sender gives back the newest of what it took (this many, at most).
        PutBack(usize),
        /// A clean stop and a start.
        Restart,
        /// `kill -9`: the files as they are, opened by a new start.
        Crash,
    }

    fn step() -> impl proptest::strategy::Strategy<Value = Step> {
        use proptest::prelude::*;
        prop_oneof![
            4 => (1usize..8, 1usize..40_000).prop_map(|(n, size)| Step::Push(n, size)),
            3 => (1usize..200_000).prop_map(Step::Take),
            3 => (1usize..6).prop_map(Step::Done),
            1 => (1usize..4).prop_map(Step::PutBack),
            1 => Just(Step::Restart),
            1 => Just(Step::Crash),
        ]
    }

    /// A batch whose bytes say which it is, so that a batch out of place is seen.
    fn numbered(serial: usize, n: usize, size: usize) -> Batch {
        let mut b = Batch::new(None);
        for i in 0..n {
            let head = format!("{serial}.{i} ");
            b.data.extend_from_slice(head.as_bytes());
            b.data.resize(
                b.data.len() + size.saturating_sub(head.len()),
                b'x' + (serial % 3) as u8,
            );
            b.data.push(b'\n');
            b.end_message();
        }
        b
    }

    /// Copies the buffer's files as they are now (what a `kill -9` leaves).
    fn copy_dir(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for entry in std::fs::read_dir(from).unwrap() {
            let entry = entry.unwrap();
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }

    /// Waits until the disk thread has written everything pushed (`expected` records).
    fn settle(q: &DiskQueue, expected: usize) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let state = q.lock();
            if state.unwritten.is_empty() && state.records.len() + state.taken.len() == expected {
                return;
            }
            drop(state);
            assert!(
                Instant::now() < deadline,
                "the disk thread did not write what was pushed"
            );
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::test_runner::Config {
            cases: 48,
            failure_persistence: None,
            ..proptest::test_runner::Config::default()
        })]

        /// Against a model (the batches pushed and not yet sent, in order, and how many of them
        /// the sender holds), any sequence of pushes, takes, sends, give-backs, restarts and
        /// crashes gives the sender exactly the batches the model says, in order: nothing sent
        /// comes back, nothing unsent is lost, a full buffer drops exactly what does not fit.
        #[test]
        fn a_disk_buffer_gives_what_was_pushed_and_not_sent_in_order(
            reliable in proptest::bool::ANY,
            steps in proptest::collection::vec(step(), 1..40),
        ) {
            let dir = tempfile::tempdir().unwrap();
            let mut path = dir.path().join("q");
            let opts = DiskBufferOptions {
                capacity: 4 << 20,
                ..opts(reliable)
            };
            let open = |path: &Path| {
                DiskQueue::open(label(), path.to_path_buf(), opts.clone(), DestCounters::default())
                    .unwrap()
            };
            let mut q = open(&path);
            // The model: batches not yet sent (bytes, record size), oldest first; the sender
            // holds the first `held.len()`; what was dropped since the last start.
            let mut unsent: VecDeque<(Vec<u8>, u64)> = VecDeque::new();
            let mut used = 0u64;
            let mut held: Vec<Batch> = Vec::new();
            let mut dropped = 0u64;
            let mut serial = 0;
            let mut crashes = 0;
            for step in steps {
                match step {
                    Step::Push(n, size) => {
                        let b = numbered(serial, n, size);
                        serial += 1;
                        let size = record_size(&b);
                        if used == 0 || used + size <= opts.capacity {
                            used += size;
                            unsent.push_back((b.data.clone(), size));
                        } else {
                            dropped += b.len() as u64;
                        }
                        q.push(b);
                    }
                    Step::Take(bytes) => {
                        if held.len() == unsent.len() {
                            continue;
                        }
                        let before = held.len();
                        let deadline = Instant::now() + Duration::from_secs(10);
                        while held.len() == before {
                            assert!(Instant::now() < deadline, "nothing to take");
                            q.take(Duration::from_millis(200), bytes, &mut held);
                        }
                        for (i, b) in held.iter().enumerate().skip(before) {
                            proptest::prop_assert!(
                                b.data == unsent[i].0,
                                "batch {i} out of place: {:?}",
                                String::from_utf8_lossy(&b.data[..b.data.len().min(20)])
                            );
                        }
                    }
                    Step::Done(k) => {
                        let k = k.min(held.len());
                        let mut sent: Vec<Batch> = held.drain(..k).collect();
                        q.done(&mut sent);
                        used -= unsent.drain(..k).map(|(_, size)| size).sum::<u64>();
                    }
                    Step::PutBack(k) => {
                        let k = k.min(held.len());
                        let mut back = held.split_off(held.len() - k);
                        q.put_back(&mut back);
                    }
                    Step::Restart => {
                        held.clear();
                        q.stop();
                        drop(q);
                        q = open(&path);
                        dropped = 0;
                    }
                    Step::Crash => {
                        settle(&q, unsent.len());
                        crashes += 1;
                        let copy = dir.path().join(format!("crash{crashes}"));
                        copy_dir(&path, &copy);
                        held.clear();
                        q.stop();
                        drop(q);
                        path = copy;
                        q = open(&path);
                        dropped = 0;
                    }
                }
            }
            proptest::prop_assert_eq!(q.counters.dropped.load(Ordering::Relaxed), dropped);
            proptest::prop_assert_eq!(q.counters.dropped_for(DropReason::DiskBufferFull), dropped);
            // What is left comes out whole and in order after one more start.
            held.clear();
            q.stop();
            drop(q);
            let q = open(&path);
            let mut rest = Vec::new();
            while rest.len() < unsent.len() {
                let before = rest.len();
                q.take(Duration::from_millis(500), usize::MAX, &mut rest);
                proptest::prop_assert!(rest.len() > before, "{} of {} unsent batches came back", before, unsent.len());
            }
            let rest: Vec<Vec<u8>> = rest.into_iter().map(|b| b.data).collect();
            let unsent: Vec<Vec<u8>> = unsent.into_iter().map(|(data, _)| data).collect();
            proptest::prop_assert!(rest == unsent, "the unsent batches differ after a start");
            q.stop();
        }
    }
}
