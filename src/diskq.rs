//! `sluice diskq info|cat|relocate`: inspect disk buffers, as syslog-ng's `dqtool` does.
//!
//! A disk buffer is a directory (`sluice-<destination>-….rdq` for reliable buffers, `.dq` for
//! normal ones) of segment files and a position file; see
//! `crates/engine/src/destinations/diskq.rs`. These commands only read it (relocate moves it),
//! so they can look at the buffer of a running server.

use clap::Subcommand;
use sluice_engine::destinations::diskq::{read_position, read_record, segments, RecordRead};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

#[derive(Subcommand, Debug)]
pub enum DiskqCommand {
    /// Say what a buffer holds: segments, position, messages waiting, damage set aside.
    Info {
        /// The buffer's directory.
        buffer: PathBuf,
    },
    /// Print the messages waiting in a buffer, in order, as they will be sent.
    Cat {
        /// The buffer's directory.
        buffer: PathBuf,
    },
    /// Move buffers to another directory (then point the destination's `dir()` there).
    Relocate {
        /// The directory to move them into.
        #[arg(long = "new-dir", short = 'n')]
        new_dir: PathBuf,
        /// The buffers' directories.
        buffers: Vec<PathBuf>,
    },
}

/// What a walk over a buffer found.
#[derive(Default)]
struct Summary {
    records: u64,
    messages: u64,
    bytes: u64,
    /// Where reading stopped short, and why.
    trouble: Vec<String>,
}

/// Calls `each` with every waiting message of the buffer in `dir`, in order.
fn walk(dir: &Path, each: &mut dyn FnMut(&[u8])) -> Result<Summary, String> {
    let ids = segments(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
    let position = read_position(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut s = Summary::default();
    for id in ids {
        let (skip, from) = match position {
            Some(p) if id < p.segment => (true, 0),
            Some(p) if id == p.segment => (false, p.offset),
            _ => (false, 0),
        };
        if skip {
            continue;
        }
        let path = dir.join(format!("{id:020}.seg"));
        let file = File::open(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let len = file
            .metadata()
            .map_err(|e| format!("{}: {e}", path.display()))?
            .len();
        let mut offset = from;
        while offset < len {
            match read_record(&file, offset, len).map_err(|e| format!("{}: {e}", path.display()))? {
                RecordRead::Record { size, batch } => {
                    for i in 0..batch.len() {
                        each(&batch.data[batch.start(i)..batch.ends[i] as usize]);
                    }
                    s.records += 1;
                    s.messages += batch.len() as u64;
                    s.bytes += size;
                    offset += size;
                }
                RecordRead::Short => {
                    s.trouble.push(format!(
                        "{} ends inside a record at byte {offset} (a write cut short; the server cuts it off when it opens the buffer)",
                        path.display()
                    ));
                    break;
                }
                RecordRead::Bad(why) => {
                    s.trouble.push(format!(
                        "{} is damaged at byte {offset}: {why} (the server sets the rest aside when it opens the buffer)",
                        path.display()
                    ));
                    break;
                }
            }
        }
    }
    Ok(s)
}

pub fn run(cmd: &DiskqCommand) -> i32 {
    match cmd {
        DiskqCommand::Info { buffer } => info(buffer),
        DiskqCommand::Cat { buffer } => {
            let mut out = std::io::stdout().lock();
            let mut failed = None;
            let result = walk(buffer, &mut |m| {
                if failed.is_none() {
                    if let Err(e) = out.write_all(m) {
                        failed = Some(e);
                    }
                }
            });
            let _ = out.flush();
            match (result, failed) {
                (Ok(s), None) => {
                    for t in &s.trouble {
                        eprintln!("sluice diskq: {t}");
                    }
                    i32::from(!s.trouble.is_empty())
                }
                (Err(e), _) => {
                    eprintln!("sluice diskq: {e}");
                    1
                }
                (_, Some(e)) => {
                    eprintln!("sluice diskq: writing: {e}");
                    1
                }
            }
        }
        DiskqCommand::Relocate { new_dir, buffers } => relocate(new_dir, buffers),
    }
}

fn info(dir: &Path) -> i32 {
    let s = match walk(dir, &mut |_| {}) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("sluice diskq: {e}");
            return 1;
        }
    };
    let kind = match dir.extension().and_then(|e| e.to_str()) {
        Some("rdq") => "reliable",
        Some("dq") => "normal",
        _ => "unknown kind",
    };
    println!("disk buffer {} ({kind})", dir.display());
    let ids = segments(dir).unwrap_or_default();
    let on_disk: u64 = ids
        .iter()
        .filter_map(|id| std::fs::metadata(dir.join(format!("{id:020}.seg"))).ok())
        .map(|m| m.len())
        .sum();
    println!("  segments: {} ({on_disk} bytes)", ids.len());
    match read_position(dir) {
        Ok(Some(p)) => println!("  position: segment {}, byte {}", p.segment, p.offset),
        _ => println!("  position: none (nothing sent yet, or the file is damaged)"),
    }
    println!(
        "  waiting: {} messages in {} records ({} bytes)",
        s.messages, s.records, s.bytes
    );
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.contains(".damaged-at-") {
                let len = e.metadata().map(|m| m.len()).unwrap_or(0);
                println!("  set aside: {name} ({len} bytes)");
            }
        }
    }
    for t in &s.trouble {
        println!("  trouble: {t}");
    }
    0
}

fn relocate(new_dir: &Path, buffers: &[PathBuf]) -> i32 {
    if let Err(e) = std::fs::create_dir_all(new_dir) {
        eprintln!("sluice diskq: cannot create {}: {e}", new_dir.display());
        return 1;
    }
    let mut status = 0;
    for b in buffers {
        let Some(name) = b.file_name() else {
            eprintln!("sluice diskq: {} names no buffer", b.display());
            status = 1;
            continue;
        };
        let to = new_dir.join(name);
        match std::fs::rename(b, &to).or_else(|_| copy_then_remove(b, &to)) {
            Ok(()) => println!("{} -> {}", b.display(), to.display()),
            Err(e) => {
                eprintln!("sluice diskq: cannot move {}: {e}", b.display());
                status = 1;
            }
        }
    }
    if status == 0 {
        println!(
            "set dir(\"{}\") in the destinations' disk-buffer() before the next start",
            new_dir.display()
        );
    }
    status
}

/// Moves a buffer across file systems.
fn copy_then_remove(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for e in std::fs::read_dir(from)? {
        let e = e?;
        std::fs::copy(e.path(), to.join(e.file_name()))?;
    }
    std::fs::remove_dir_all(from)
}
