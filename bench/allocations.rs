//! Heap allocations per message on the hot path: frames of the loghub corpus (or generated
//! lines when `../shared/corpus` is absent) go through what a TCP reader does with them —
//! frame, parse (`Ingest`), route, format into the file destination's buffers, queue for the
//! writer — with a counting allocator around it.
//!
//! ```sh
//! cargo bench --bench allocations              # every case
//! cargo bench --bench allocations -- "per host" # the cases whose label holds the text
//! cargo bench --bench allocations -- --passes=1  # one timed pass (under callgrind)
//! ```

use bytes::Bytes;
use sluice_engine::sources::{take_frames, Read};
use sluice_engine::window::Window;
use sluice_model::Origin;
use sluice_protocol::framing::{Frame, FrameDecoder};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Counts allocations (and reallocations, which may move) made through it.
struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

// SAFETY: every call is forwarded unchanged to the system allocator; only a counter is added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded with the caller's pointer and layout.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: forwarded with the caller's arguments.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// How many times the input is timed unless `--passes=N` says; the best pass is reported.
const PASSES: usize = 7;

/// The size of one read, as a busy reader sees it.
const READ: usize = 256 << 10;

/// The corpus file in the wire format `rfc` names, framed as `peers.py` sends it (`"3164"`:
/// newline framed, `"5424"`: octet counted), or generated messages in that format when
/// `../shared/corpus` is absent; `"loggen"`: [`loggen_lines`].
fn input(rfc: &str) -> (Vec<u8>, String) {
    if rfc == "loggen" {
        return (loggen_lines(), "`sluice loggen -s 300` lines".into());
    }
    let name = format!("loghub-rfc{rfc}.log");
    let corpus = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/corpus")
        .join(&name);
    match std::fs::read(&corpus) {
        Ok(bytes) if rfc == "3164" => (bytes, name),
        Ok(lines) => {
            let mut out = Vec::with_capacity(lines.len() + lines.len() / 16);
            for line in lines.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
                out.extend_from_slice(format!("{} ", line.len()).as_bytes());
                out.extend_from_slice(line);
            }
            (out, name)
        }
        Err(_) => {
            eprintln!(
                "note: {} is absent; using generated messages",
                corpus.display()
            );
            let mut out = Vec::new();
            for i in 0..30_000 {
                let (pri, day, sec, host, prog, pid) =
                    (8 + i % 180, 1 + i % 28, i % 60, i % 50, i % 7, 1000 + i);
                if rfc == "3164" {
                    out.extend_from_slice(
                        format!("<{pri}>Jan {day:2} 13:56:{sec:02} host{host} prog{prog}[{pid}]: generated message {i}\n").as_bytes(),
                    );
                } else {
                    let msg = format!("<{pri}>1 2026-01-{day:02}T13:56:{sec:02}.123456+01:00 host{host} prog{prog} {pid} ID{prog} [origin ip=\"10.0.0.{host}\"] generated message {i}");
                    out.extend_from_slice(format!("{} {msg}", msg.len()).as_bytes());
                }
            }
            (out, format!("generated RFC{rfc} messages"))
        }
    }
}

/// 100,000 lines as `sluice loggen -s 300` sends them: an ISO stamp without a zone, a
/// sequence number, padding to 300 bytes.
fn loggen_lines() -> Vec<u8> {
    let mut out = Vec::new();
    for i in 0..100_000 {
        let line = format!(
            "<38>2026-11-28T11:00:{:02} sluice-bench prg00000[1234]: seq: {i:010}, thread: 0000, runid: 1795863865, stamp: 2026-11-28T11:00:00 ",
            i / 2000 % 60
        );
        out.extend_from_slice(line.as_bytes());
        out.resize(out.len() + 300 - line.len(), b'P');
        out.push(b'\n');
    }
    out
}

fn main() {
    // `cargo bench` passes --bench; `cargo test --all-targets` runs this without it, and speed is
    // not measured in tests.
    if !std::env::args().any(|a| a == "--bench") {
        println!("allocations: a benchmark; run it with `cargo bench --bench allocations`");
        return;
    }
    // Any other argument picks the cases whose label holds it (to profile one alone).
    let only: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let passes = std::env::args()
        .find_map(|a| a.strip_prefix("--passes=")?.parse::<usize>().ok())
        .unwrap_or(PASSES)
        .max(1);
    let dir = std::env::temp_dir().join(format!("sluice-allocations-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch directory");
    let one_file = format!("file(\"{}/all.log\")", dir.display());
    let per_host = format!("file(\"{}/${{HOST}}.log\")", dir.display());
    // The template `kafka-c()` and `elasticsearch-http()` benchmarks format with.
    let iso = format!(
        "file(\"{}/iso.log\" template(\"$ISODATE $HOST $MSGHDR$MSG\\n\"))",
        dir.display()
    );
    for (label, rfc, destination) in [
        ("one file, default format", "3164", &one_file),
        ("one file per host", "3164", &per_host),
        ("RFC5424 (syslog()), one file", "5424", &one_file),
        ("loggen's lines, $ISODATE template", "loggen", &iso),
    ] {
        if !only.is_empty() && !only.iter().any(|o| label.contains(o.as_str())) {
            continue;
        }
        let source = if rfc == "5424" { "syslog" } else { "network" };
        let config = format!(
            "@version: 3.38\noptions {{ keep-hostname(yes); use-dns(no); }};\nsource s {{ {source}(ip(127.0.0.1) port(5999)); }};\ndestination d {{ {destination}; }};\nlog {{ source(s); destination(d); }};\n"
        );
        let config = sluice_config::load_str("allocations", &config)
            .unwrap_or_else(|e| panic!("{}", e.render()));
        let pipeline =
            sluice_engine::build(&config).unwrap_or_else(|e| panic!("{}", e.render(&config.map)));
        let reader = pipeline.sources[0]
            .reader()
            .expect("a network source reads bytes")
            .clone();
        let origin = Arc::new(Origin {
            source_name: Arc::from("s"),
            source_id: 0,
            peer: Some("127.0.0.1:40000".parse().expect("address")),
            host_from: Arc::from(&b"127.0.0.1"[..]),
            local: false,
            pairs: Vec::new(),
            endpoints: Default::default(),
        });
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        let window = Window::new(u32::MAX / 2);
        let (bytes, name) = input(rfc);
        // What `read_stream` does with each read: frame it, then hand it to a `Read`.
        let run = || {
            let mut decoder = FrameDecoder::new(
                reader.framing,
                reader.log_msg_size,
                reader.trim_large_messages,
            );
            let mut count = 0u64;
            let mut pending: Vec<u8> = Vec::new();
            let reads = bytes.len().div_ceil(READ);
            let mut frames: Vec<Frame> = Vec::new();
            for (i, read) in bytes.chunks(READ).enumerate() {
                // What a reader holds: the unfinished line of the last read, then this read.
                pending.extend_from_slice(read);
                let used = decoder
                    .decode(&pending, i + 1 == reads, |f| frames.push(f))
                    .expect("the corpus is framed correctly");
                let chunk = Bytes::copy_from_slice(&pending[..used]);
                pending.drain(..used);
                let read = Read::of(
                    chunk,
                    take_frames(&mut frames),
                    origin.clone(),
                    reader.ingest.clone(),
                    &reader,
                    pipeline.dispatcher.clone(),
                );
                let ack = runtime.block_on(window.take(read.frames() as u32));
                read.parse_and_route(&ack).commit();
                count += read.frames() as u64;
            }
            count
        };
        run(); // warm up: writers started, buffers grown
        let before = ALLOCATIONS.load(Ordering::Relaxed);
        let started = std::time::Instant::now();
        let count = run();
        let allocations = ALLOCATIONS.load(Ordering::Relaxed) - before;
        // The time is the fastest of a few passes: this machine's neighbours slow some.
        let mut elapsed = started.elapsed();
        for _ in 1..passes {
            let started = std::time::Instant::now();
            run();
            elapsed = elapsed.min(started.elapsed());
        }
        for d in &pipeline.dispatcher.destinations {
            d.shutdown();
        }
        println!(
            "{label}: {:.3} allocations per message ({allocations} for {count} messages of {name}; {:.0} ns per message on one thread, the best of {passes} passes, reads of {} KiB)",
            allocations as f64 / count as f64,
            elapsed.as_nanos() as f64 / count as f64,
            READ >> 10
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
