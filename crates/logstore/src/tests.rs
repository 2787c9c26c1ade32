//! Archives written by [`Store`] and read back by [`Walk`]: every line in order, and every
//! kind of tampering found with its offset while the rest stays readable.

use crate::entry::EntryWriter;
use crate::frame::{self, Found, Frames, Kind};
use crate::keys::{DecryptionKey, Recipient, SealKey, VerifyKey};
use crate::reader::{Item, Keys, Severity, Walk};
use crate::writer::{Store, StoreOptions};
use std::path::{Path, PathBuf};
use std::sync::Arc;

const CERT: &[u8] = include_bytes!("../testdata/reader.pem");
const KEY: &[u8] = include_bytes!("../testdata/reader.key");
const OTHER_CERT: &[u8] = include_bytes!("../testdata/other.pem");
const OTHER_KEY: &[u8] = include_bytes!("../testdata/other.key");

struct Setup {
    dir: tempfile::TempDir,
    opts: Arc<StoreOptions>,
    decrypt: DecryptionKey,
    verify: VerifyKey,
}

fn setup(recipients: &[&[u8]]) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let (seal, verify) = (dir.path().join("seal.key"), dir.path().join("verify.key"));
    SealKey::generate(&seal, &verify).unwrap();
    let opts = StoreOptions {
        chunk_size: 600,
        recipients: recipients
            .iter()
            .flat_map(|pem| Recipient::from_pem(pem).unwrap())
            .collect(),
        seal: Some(Arc::new(SealKey::read(&seal).unwrap())),
        ..StoreOptions::default()
    };
    Setup {
        opts: Arc::new(opts),
        decrypt: DecryptionKey::from_pem(KEY).unwrap(),
        verify: VerifyKey::read(&verify).unwrap(),
        dir,
    }
}

fn line(n: usize) -> String {
    format!(
        "Nov 25 06:00:{:02} host{} sshd[1]: message number {n}\n",
        n % 60,
        n % 3
    )
}

fn entries(range: std::ops::Range<usize>) -> Vec<u8> {
    let mut out = Vec::new();
    for n in range {
        let l = line(n);
        let host = format!("host{}", n % 3);
        let w = EntryWriter::begin(
            &mut out,
            n as i64,
            n as i64,
            0,
            13,
            host.as_bytes(),
            b"sshd",
        );
        out.extend_from_slice(l.as_bytes());
        let text = l.split(": ").nth(1).unwrap().trim_end().to_string();
        w.finish(&mut out, text.as_bytes());
    }
    out
}

fn open(s: &Setup, path: &Path) -> Store {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .open(path)
        .unwrap();
    Store::open(file, s.opts.clone()).unwrap().0
}

/// An archive of 100 lines in chunks of about 10, closed.
fn archive(s: &Setup) -> PathBuf {
    let path = s.dir.path().join("a.lgs");
    let mut store = open(s, &path);
    store.absorb(&entries(0..100)).unwrap();
    store.close().unwrap();
    path
}

/// What a walk finds: the lines it could read, and each problem as `offset: what`.
fn walk(bytes: &[u8], keys: Keys) -> (Vec<String>, Vec<String>) {
    let (mut lines, mut problems) = (Vec::new(), Vec::new());
    for item in Walk::new(bytes, keys).unwrap() {
        match item {
            Item::Chunk(c) => {
                if let Err(e) = c.read(|r| lines.push(String::from_utf8_lossy(r.line).into_owned()))
                {
                    problems.push(format!("{}: {e}", c.at));
                }
            }
            Item::Problem(p) => problems.push(format!(
                "{}: {}{}",
                p.at,
                if p.severity == Severity::Tampering {
                    "TAMPERING "
                } else {
                    ""
                },
                p.what
            )),
            _ => {}
        }
    }
    (lines, problems)
}

fn all_keys(s: &Setup) -> Keys<'_> {
    Keys {
        decrypt: Some(&s.decrypt),
        verify: Some(&s.verify),
        tsa: None,
    }
}

fn frames(bytes: &[u8]) -> Vec<(u64, u64, Kind)> {
    Frames::new(bytes)
        .map(|f| match f {
            Found::Frame(f) => (f.at, f.len, f.kind),
            Found::Damaged { .. } => panic!("damaged"),
        })
        .collect()
}

fn want(range: std::ops::Range<usize>) -> Vec<String> {
    range.map(line).collect()
}

#[test]
fn every_line_reads_back_in_order_for_each_recipient_and_nothing_is_plain() {
    let s = setup(&[CERT, OTHER_CERT]);
    let path = archive(&s);
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(walk(&bytes, all_keys(&s)), (want(0..100), vec![]));
    let other = DecryptionKey::from_pem(OTHER_KEY).unwrap();
    let keys = Keys {
        decrypt: Some(&other),
        verify: None,
        tsa: None,
    };
    assert_eq!(walk(&bytes, keys).0, want(0..100));
    for word in ["message", "sshd", "host1", "number"] {
        assert!(
            memchr::memmem::find(&bytes, word.as_bytes()).is_none(),
            "{word} is visible"
        );
    }
    assert!(frames(&bytes).len() > 10, "chunks of about 600 bytes");
}

#[test]
fn without_the_keys_the_chain_is_checked_and_the_records_stay_closed() {
    let s = setup(&[CERT]);
    let bytes = std::fs::read(archive(&s)).unwrap();
    let (lines, problems) = walk(&bytes, Keys::default());
    assert!(lines.is_empty());
    assert!(problems
        .iter()
        .all(|p| p.ends_with("encrypted: no decryption key given")));
    let other = DecryptionKey::from_pem(OTHER_KEY).unwrap();
    let keys = Keys {
        decrypt: Some(&other),
        verify: Some(&s.verify),
        tsa: None,
    };
    let (lines, problems) = walk(&bytes, keys);
    assert!(lines.is_empty());
    assert!(problems
        .iter()
        .all(|p| p.ends_with("not encrypted for the given key")));
}

#[test]
fn tampering_is_found_where_it_is_and_the_rest_reads() {
    let s = setup(&[CERT]);
    let good = std::fs::read(archive(&s)).unwrap();
    let f = frames(&good);
    let (at2, len2) = (f[2].0 as usize, f[2].1 as usize);
    let (at3, len3) = (f[3].0 as usize, f[3].1 as usize);
    let lines_of = |bytes: &[u8]| walk(bytes, all_keys(&s)).0;
    let per_chunk = lines_of(&good[..at2]).len(); // segment and chunk 1
    let in_2 = lines_of(&[&good[..at2 + len2]].concat()).len() - per_chunk;

    // A byte flipped: the frame is damaged, the others read.
    let mut flipped = good.clone();
    flipped[at2 + 40] ^= 0x20;
    let (lines, problems) = walk(&flipped, all_keys(&s));
    assert_eq!(lines.len(), 100 - in_2);
    assert_eq!(
        problems,
        [format!(
            "{at2}: TAMPERING {len2} bytes are no intact frame: altered or damaged"
        )]
    );

    // A byte flipped and the CRC made to fit: the chain and the seal say where.
    let mut forged = flipped.clone();
    let crc = {
        let mut c = crc32fast::Hasher::new();
        c.update(&forged[at2..at2 + 12]);
        c.update(&forged[at2 + 16..at2 + len2]);
        c.finalize()
    };
    forged[at2 + 12..at2 + 16].copy_from_slice(&crc.to_le_bytes());
    let (_, problems) = walk(&forged, all_keys(&s));
    assert_eq!(
        problems[0],
        format!("{at2}: TAMPERING frame seq 2 was altered: it does not hash to its chain head")
    );
    // ... and the chain head made to fit too: the seal says so, and the next frame.
    let body_end = at2 + len2;
    let prev: [u8; 32] = forged[body_end - 96..body_end - 64].try_into().unwrap();
    let whole = forged[at2 + 16..body_end - 96].to_vec();
    let mut again = Vec::new();
    frame::write(&mut again, Kind::Chunk, &whole, &prev, None);
    let n = again.len();
    again[n - 32..].copy_from_slice(&forged[body_end - 32..body_end]);
    let crc = {
        let mut c = crc32fast::Hasher::new();
        c.update(&again[..12]);
        c.update(&again[16..]);
        c.finalize()
    };
    again[12..16].copy_from_slice(&crc.to_le_bytes());
    forged.splice(at2..body_end, again);
    let (_, problems) = walk(&forged, all_keys(&s));
    assert_eq!(
        problems[0],
        format!("{at2}: TAMPERING the seal does not hold at seq 2: altered or forged")
    );
    assert_eq!(problems[1], format!("{at2}: does not decrypt: altered"));
    assert_eq!(problems[2], format!("{at3}: TAMPERING frame seq 3 does not follow the frame before it: one of them was replaced"));

    // A chunk removed.
    let removed = [&good[..at2], &good[at2 + len2..]].concat();
    let (lines, problems) = walk(&removed, all_keys(&s));
    assert_eq!(lines.len(), 100 - in_2);
    assert_eq!(
        problems,
        [format!(
            "{at2}: TAMPERING 1 frame(s) missing before this one (seq 3 follows 1): removed"
        )]
    );

    // Two chunks swapped.
    let swapped = [
        &good[..at2],
        &good[at3..at3 + len3],
        &good[at2..at3],
        &good[at3 + len3..],
    ]
    .concat();
    let (lines, problems) = walk(&swapped, all_keys(&s));
    assert_eq!(lines.len(), 100);
    assert!(
        problems[0].starts_with(&format!("{at2}: TAMPERING 1 frame(s) missing")),
        "{problems:?}"
    );
    assert!(
        problems
            .iter()
            .any(|p| p.contains("frame seq 2 where 4 was due: moved or replayed")),
        "{problems:?}"
    );

    // Cut inside a frame, and at a frame's end.
    let (lines, problems) = walk(&good[..at3 + 20], all_keys(&s));
    assert_eq!(lines.len(), per_chunk + in_2);
    assert_eq!(problems, [
        format!("{at3}: the file ends in a frame cut short (20 bytes): a crash while writing, or the file was cut"),
        format!("{}: the file ends without a close: still being written, or the writer was killed (or its end was cut)", u64::MAX),
    ]);

    // A chunk appended by someone without the keys: its seal does not hold.
    let (seq, head) = {
        let (_, p) = walk(&good, all_keys(&s));
        assert!(p.is_empty());
        let last = Frames::new(&good).last().unwrap();
        match last {
            Found::Frame(f) => (f.seq + 1, f.head),
            Found::Damaged { .. } => unreachable!(),
        }
    };
    let mut appended = good.clone();
    let content = [&seq.to_le_bytes()[..], &good[at2 + 24..at2 + len2 - 96]].concat();
    frame::write(&mut appended, Kind::Chunk, &content, &head, Some(&[7; 32]));
    let (_, problems) = walk(&appended, all_keys(&s));
    assert!(
        problems
            .iter()
            .any(|p| p.contains("the seal does not hold at seq")),
        "{problems:?}"
    );
    assert!(
        problems
            .iter()
            .any(|p| p.contains("after the file was closed")),
        "{problems:?}"
    );
}

#[test]
fn the_current_mac_key_cannot_seal_an_earlier_chunk_again() {
    let s = setup(&[CERT]);
    let path = s.dir.path().join("fs.lgs");
    let mut store = open(&s, &path);
    store.absorb(&entries(0..50)).unwrap();
    store.seal_chunk();
    store.flush().unwrap();
    // An intruder takes the server now: the current MAC key and the sealing key file.
    let stolen = store.current_mac().unwrap();
    let good = std::fs::read(&path).unwrap();
    let f = frames(&good);
    let (at, len) = (f[1].0 as usize, f[1].1 as usize);
    // Chunk 1 altered (a line's text changed before encryption is not possible without the
    // data key either; the intruder rewrites the frame's bytes) and sealed with every key
    // the intruder can make from what was stolen.
    let mut key = stolen;
    for _ in 0..100 {
        let mut forged = good.clone();
        let whole = [&1u64.to_le_bytes()[..], &good[at + 24..at + len - 96]].concat();
        let mut frame_bytes = Vec::new();
        let prev = match Frames::new(&good).next().unwrap() {
            Found::Frame(f) => f.head,
            Found::Damaged { .. } => unreachable!(),
        };
        frame::write(&mut frame_bytes, Kind::Chunk, &whole, &prev, Some(&key));
        forged.splice(at..at + len, frame_bytes);
        let (_, problems) = walk(&forged, all_keys(&s));
        assert!(
            problems
                .iter()
                .any(|p| p.contains("the seal does not hold at seq 1")),
            "{problems:?}"
        );
        key = crate::keys::evolve(&key);
    }
    // The server's sealing key file gives no earlier segment key either.
    let server = SealKey::read(&s.dir.path().join("seal.key")).unwrap();
    let (j, _) = server.next_segment(b"x").unwrap();
    assert_eq!(j, 1, "segment 0 used S(0); the file holds S(1) on");
    drop(store);
}

#[test]
fn a_torn_tail_is_named_by_the_next_run_and_not_taken_for_tampering() {
    let s = setup(&[CERT]);
    let path = s.dir.path().join("torn.lgs");
    let mut store = open(&s, &path);
    store.absorb(&entries(0..30)).unwrap();
    store.seal_chunk();
    store.flush().unwrap();
    let (next, _) = store.head();
    drop(store); // killed: no close
    let len = std::fs::metadata(&path).unwrap().len();
    // A frame cut short, as a crash leaves it.
    let mut cut = Vec::new();
    frame::write(
        &mut cut,
        Kind::Chunk,
        &[&next.to_le_bytes()[..], &[1; 500]].concat(),
        &[0; 32],
        None,
    );
    cut.truncate(200);
    std::fs::write(&path, [std::fs::read(&path).unwrap(), cut].concat()).unwrap();
    let mut store = open(&s, &path);
    store.absorb(&entries(30..60)).unwrap();
    store.close().unwrap();
    let (lines, problems) = walk(&std::fs::read(&path).unwrap(), all_keys(&s));
    assert_eq!(lines, want(0..60));
    assert_eq!(
        problems,
        [format!("{len}: 200 bytes torn by a crash (the writer found them when it opened the file again and went on after them)")]
    );
}

#[test]
fn a_file_written_over_several_runs_is_one_chain() {
    let s = setup(&[CERT]);
    let path = s.dir.path().join("runs.lgs");
    for run in 0..3 {
        let mut store = open(&s, &path);
        store.absorb(&entries(run * 10..run * 10 + 10)).unwrap();
        store.close().unwrap();
    }
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(walk(&bytes, all_keys(&s)), (want(0..30), vec![]));
    // The first run's segment removed: found.
    let f = frames(&bytes);
    let second = f
        .iter()
        .position(|f| f.2 == Kind::Segment && f.0 > 0)
        .unwrap();
    let (_, problems) = walk(&bytes[f[second].0 as usize..], all_keys(&s));
    assert!(
        problems[0].contains("its beginning was removed"),
        "{problems:?}"
    );
}

#[test]
fn a_non_archive_is_refused() {
    assert!(Walk::new(b"Nov 25 host prog: a text file\n", Keys::default()).is_err());
    assert!(Walk::new(b"", Keys::default()).is_err());
}

/// A reader following a file that grows a few bytes at a time (`tail -f`) reads every line
/// once, in order, and finds what a walk of the whole file finds, a missing close aside.
#[test]
fn a_file_followed_as_it_grows_reads_as_the_whole_file() {
    let s = setup(&[CERT]);
    let path = archive(&s);
    let mut bytes = std::fs::read(&path).unwrap();
    let second = frames(&bytes)[2].0 as usize;
    bytes[second + 40] ^= 1; // damage inside the second chunk
    let (want_lines, mut want_problems) = walk(&bytes, all_keys(&s));
    let (mut lines, mut problems) = (Vec::new(), Vec::new());
    let mut resume = crate::reader::Resume::start();
    for grown in (0..bytes.len()).step_by(97).chain([bytes.len()]) {
        let new = &bytes[resume.at() as usize..grown];
        let take = frame::settled(new);
        let mut w = Walk::follow(&new[..take], all_keys(&s), resume).unwrap();
        for item in w.by_ref() {
            match item {
                Item::Chunk(c) => c
                    .read(|r| lines.push(String::from_utf8_lossy(r.line).into_owned()))
                    .unwrap(),
                Item::Problem(p) => problems.push(format!("{}: TAMPERING {}", p.at, p.what)),
                _ => {}
            }
        }
        resume = w.pause();
    }
    assert_eq!(resume.at(), bytes.len() as u64);
    assert_eq!(lines, want_lines);
    assert!(
        (80..100).contains(&lines.len()),
        "one chunk lost to the damage"
    );
    want_problems.retain(|p| !p.contains("without a close"));
    assert_eq!(problems, want_problems);
}

/// A chunk whose frame says its records take 2 GiB (a forged length, its chain made to fit,
/// issue 55: `cat` and `grep` reached 2.1 GB) is refused before anything is allocated for
/// it, and the others read.
#[test]
fn a_chunk_that_claims_more_than_a_writer_makes_is_refused() {
    let s = setup(&[]);
    let good = std::fs::read(archive(&s)).unwrap();
    let (at, len, _) = *frames(&good)
        .iter()
        .rfind(|(_, _, kind)| *kind == Kind::Chunk)
        .unwrap();
    let (at, end) = (at as usize, (at + len) as usize);
    let mut whole = good[at + 16..end - 96].to_vec();
    // seq (8 bytes), sealed_at (8), records (4), then the length of its records.
    whole[20..24].copy_from_slice(&0x7fff_ffffu32.to_le_bytes());
    let prev: [u8; 32] = good[end - 96..end - 64].try_into().unwrap();
    let mut forged_frame = Vec::new();
    frame::write(&mut forged_frame, Kind::Chunk, &whole, &prev, None);
    let mut forged = good.clone();
    forged.splice(at..end, forged_frame);
    let no_keys = Keys {
        decrypt: None,
        verify: None,
        tsa: None,
    };
    let (lines, problems) = walk(&forged, no_keys);
    assert!(
        problems
            .iter()
            .any(|p| p.contains("more than a writer makes")),
        "{problems:?}"
    );
    assert!(lines.len() >= 80, "{}", lines.len());
}
