//! The two parts of a chunk, index and data, on their way to disk and back: compressed with
//! zstd (one compressor per thread, reused), then encrypted with AES-256-GCM under the
//! segment's data key. The nonce is the frame's `seq` and the part's number, unique under a
//! key; the segment id is the associated data, so a part moved to another segment fails.

use crate::keys::Secret;
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM};
use std::cell::RefCell;
use std::sync::{mpsc, Arc, Condvar, Mutex, OnceLock};

pub const PART_INDEX: u32 = 0;
pub const PART_DATA: u32 = 1;

pub fn data_key(key: &Secret) -> LessSafeKey {
    LessSafeKey::new(UnboundKey::new(&AES_256_GCM, key).expect("a 32-byte AES key"))
}

fn nonce(seq: u64, part: u32) -> Nonce {
    let mut n = [0; 12];
    n[..8].copy_from_slice(&seq.to_le_bytes());
    n[8..].copy_from_slice(&part.to_le_bytes());
    Nonce::assume_unique_for_key(n)
}

/// Encrypts `buf` in place, its tag appended.
pub fn seal(key: &LessSafeKey, segment: &[u8; 16], seq: u64, part: u32, buf: &mut Vec<u8>) {
    key.seal_in_place_append_tag(nonce(seq, part), Aad::from(segment), buf)
        .expect("AES-GCM of less than 64 GiB");
}

/// Decrypts a part; `None` when it was altered or the key is not its key.
pub fn open<'b>(
    key: &LessSafeKey,
    segment: &[u8; 16],
    seq: u64,
    part: u32,
    buf: &'b mut [u8],
) -> Option<&'b mut [u8]> {
    key.open_in_place(nonce(seq, part), Aad::from(segment), buf)
        .ok()
}

thread_local! {
    static COMPRESSOR: RefCell<Option<(i32, zstd::bulk::Compressor<'static>)>> =
        const { RefCell::new(None) };
}

/// `data` compressed at zstd `level`, in place of what `out` held.
pub fn compress(level: i32, data: &[u8], out: &mut Vec<u8>) {
    COMPRESSOR.with(|c| {
        let mut c = c.borrow_mut();
        if c.as_ref().is_none_or(|(l, _)| *l != level) {
            let made = zstd::bulk::Compressor::new(level).expect("a zstd compressor");
            *c = Some((level, made));
        }
        let (_, comp) = c.as_mut().expect("made above");
        out.clear();
        out.reserve(zstd::zstd_safe::compress_bound(data.len()));
        comp.compress_to_buffer(data, out)
            .expect("zstd compresses into its bound");
    })
}

/// `data` decompressed, refusing more than `limit` bytes. Memory grows with what the data
/// really holds, not with `limit`: a chunk that claims more than it holds costs nothing.
pub fn decompress(data: &[u8], limit: usize) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let decoder =
        zstd::stream::read::Decoder::new(data).map_err(|e| format!("does not decompress: {e}"))?;
    let mut out = Vec::with_capacity(limit.min(data.len().saturating_mul(8)));
    decoder
        .take(limit as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| format!("does not decompress: {e}"))?;
    if out.len() > limit {
        return Err(format!("decompresses to more than {limit} bytes"));
    }
    Ok(out)
}

/// Work for the sealers.
pub type Job = Box<dyn FnOnce() + Send>;

/// The sealer threads, one per core, shared by every archive: they compress and encrypt
/// chunks while the writers take entries.
pub struct Sealers {
    /// Jobs, each with the bytes of its chunk.
    queue: mpsc::Sender<(usize, Job)>,
    /// Bytes of the chunks handed over that no sealer has taken up yet.
    queued: Arc<(Mutex<usize>, Condvar)>,
    budget: usize,
}

/// What the chunks waiting for a sealer may hold: a writer that hands over more waits. Each
/// archive has at most a few chunks out, but thousands of archives (a file per host) that
/// outrun the sealers would otherwise queue gigabytes.
pub const QUEUED_BUDGET: usize = 64 << 20;

impl Sealers {
    /// Starts `threads` sealers, whose queue holds at most `budget` bytes of chunks.
    fn start(threads: usize, budget: usize) -> Sealers {
        let (tx, rx) = mpsc::channel::<(usize, Job)>();
        let rx = Arc::new(Mutex::new(rx));
        let queued: Arc<(Mutex<usize>, Condvar)> = Arc::default();
        for i in 0..threads {
            let (rx, queued) = (rx.clone(), queued.clone());
            std::thread::Builder::new()
                .name(format!("logstore-sealer-{i}"))
                .spawn(move || loop {
                    let Ok((bytes, job)) = rx.lock().expect("sealers lock").recv() else {
                        return;
                    };
                    let (held, room) = &*queued;
                    *held.lock().expect("sealers' queue lock") -= bytes;
                    room.notify_all();
                    job();
                })
                .expect("start a sealer thread");
        }
        Sealers {
            queue: tx,
            queued,
            budget,
        }
    }

    /// Hands `job`, the sealing of a chunk of `bytes`, to the sealers; first waits while the
    /// chunks queued for them hold their budget (never when none is queued).
    pub fn run(&self, bytes: usize, job: Job) {
        let (queued, room) = &*self.queued;
        let mut held = queued.lock().expect("sealers' queue lock");
        while *held > 0 && *held + bytes > self.budget {
            held = room.wait(held).expect("sealers' queue lock");
        }
        *held += bytes;
        drop(held);
        self.queue
            .send((bytes, job))
            .expect("the sealers run as long as the process");
    }
}

/// The sealers, started when the first chunk is sealed.
pub fn sealers() -> &'static Sealers {
    static SEALERS: OnceLock<Sealers> = OnceLock::new();
    SEALERS.get_or_init(|| {
        let n = std::thread::available_parallelism().map_or(2, |n| n.get());
        Sealers::start(n, QUEUED_BUDGET)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_writer_waits_while_the_chunks_queued_for_the_sealers_fill_their_budget() {
        let sealers = Arc::new(Sealers::start(1, 100));
        let (release, held) = mpsc::channel::<()>();
        let (started, first_started) = mpsc::channel::<()>();
        // The one sealer takes the first chunk up and stays busy with it.
        sealers.run(
            60,
            Box::new(move || {
                started.send(()).unwrap();
                held.recv().unwrap();
            }),
        );
        first_started.recv().unwrap();
        // The second waits in the queue: 60 of the 100 bytes.
        sealers.run(60, Box::new(|| {}));
        // The third would make 120: its writer waits until the sealer takes the second up.
        let (done, handed) = mpsc::channel();
        let s = sealers.clone();
        std::thread::spawn(move || {
            s.run(60, Box::new(|| {}));
            done.send(()).unwrap();
        });
        assert!(
            handed.recv_timeout(Duration::from_millis(300)).is_err(),
            "handed over past the budget"
        );
        release.send(()).unwrap();
        handed
            .recv_timeout(Duration::from_secs(10))
            .expect("handed over once a sealer took the second up");
        // A chunk larger than the whole budget goes when nothing is queued.
        let (done, handed) = mpsc::channel();
        sealers.run(1000, Box::new(move || done.send(()).unwrap()));
        handed.recv_timeout(Duration::from_secs(10)).unwrap();
    }
}
