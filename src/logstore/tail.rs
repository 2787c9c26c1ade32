//! `sluice logstore tail [-n N] [-f] FILE…`: the last lines of archives, and with `-f` every
//! line sealed after them while the server writes on.
//!
//! The last lines are found without decrypting more than they need: the chunks are listed
//! first (a chunk's frame says how many records it holds), then only the chunks that hold the
//! last N are decrypted. Following, each file is read from where the walk stopped whenever it
//! has grown, whole frames only ([`frame::settled`]): a chunk shows up once the server seals
//! it (`chunk-time()` after its first line, or when it is full). A file that shrinks was
//! replaced: it is said and read from its start.

use super::output::{print, Output};
use super::{at, keys_of, KeyArgs};
use clap::Args;
use sluice_logstore::frame;
use sluice_logstore::reader::{Chunk, Resume};
use sluice_logstore::{Item, Keys, Severity, Walk};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Args, Debug)]
pub struct TailArgs {
    #[command(flatten)]
    keys: KeyArgs,
    /// How many of the last lines to print first.
    #[arg(short = 'n', long, default_value_t = 10)]
    lines: u64,
    /// Go on printing lines as the server seals them.
    #[arg(short, long)]
    follow: bool,
    /// Seconds between looks at the files when following.
    #[arg(short = 's', long, default_value_t = 0.5)]
    sleep_interval: f64,
    /// How each message is printed.
    #[arg(long, value_enum, default_value_t = Output::Text)]
    format: Output,
    /// Archive files.
    #[arg(required = true)]
    files: Vec<PathBuf>,
}

/// One followed file.
struct Followed<'p> {
    path: &'p Path,
    resume: Resume,
}

pub fn run(a: &TailArgs) -> i32 {
    let held = match keys_of(&a.keys) {
        Ok(k) => k,
        Err(e) => return super::fail(&e),
    };
    let keys = held.keys();
    let mut out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
    let many = a.files.len() > 1;
    let mut ok = true;
    let mut followed = Vec::new();
    for (n, path) in a.files.iter().enumerate() {
        if many {
            let _ = writeln!(
                out,
                "{}==> {} <==",
                if n > 0 { "\n" } else { "" },
                path.display()
            );
        }
        let mut f = Followed {
            path,
            resume: Resume::start(),
        };
        match last_lines(&mut f, keys, a, &mut out) {
            Ok(good) => ok &= good,
            Err(e) => {
                let _ = out.flush();
                eprintln!("sluice logstore: {}: {e}", path.display());
                ok = false;
                continue;
            }
        }
        followed.push(f);
    }
    if out.flush().is_err() {
        return 1;
    }
    if !a.follow {
        return i32::from(!ok);
    }
    let pause = Duration::from_secs_f64(a.sleep_interval.clamp(0.01, 3600.0));
    let mut last_printed = followed.len().saturating_sub(1);
    loop {
        std::thread::sleep(pause);
        for (n, f) in followed.iter_mut().enumerate() {
            let header = (many && n != last_printed).then(|| f.path.display().to_string());
            match grown(f, keys, a.format, header.as_deref(), &mut out) {
                Ok(true) => last_printed = n,
                Ok(false) => {}
                Err(e) => {
                    let _ = out.flush();
                    eprintln!("sluice logstore: {}: {e}", f.path.display());
                }
            }
        }
        if out.flush().is_err() {
            return 1; // standard output closed: tail | head
        }
    }
}

/// Prints the last `a.lines` lines of the file and leaves `f` where its whole frames end.
fn last_lines(
    f: &mut Followed,
    keys: Keys,
    a: &TailArgs,
    out: &mut impl Write,
) -> Result<bool, String> {
    let bytes = std::fs::read(f.path).map_err(|e| e.to_string())?;
    if bytes.is_empty() {
        return Ok(true);
    }
    let take = frame::settled(&bytes);
    let mut walk = Walk::follow(&bytes[..take], keys, Resume::start())?;
    let mut ok = true;
    let mut chunks: Vec<Chunk> = Vec::new();
    for item in walk.by_ref() {
        match item {
            Item::Chunk(c) => chunks.push(c),
            Item::Problem(p) => ok &= said(f.path, &p),
            Item::Segment(_) | Item::Close { .. } | Item::Timestamp { .. } => {}
        }
    }
    f.resume = walk.pause();
    // The chunks that hold the last lines, and how many of the first of them to skip.
    let mut held = 0u64;
    let mut from = chunks.len();
    while from > 0 && held < a.lines {
        from -= 1;
        held += u64::from(chunks[from].records);
    }
    let mut skip = held.saturating_sub(a.lines);
    for c in &chunks[from..] {
        let read = c.read(|r| {
            if skip > 0 {
                skip -= 1;
            } else {
                let _ = print(out, a.format, r);
            }
        });
        if let Err(e) = read {
            let _ = out.flush();
            eprintln!("{}: chunk at {}: {e}", f.path.display(), at(c.at));
            ok = false;
        }
    }
    Ok(ok)
}

/// Prints what the file has sealed since it was last read; whether it printed a line.
fn grown(
    f: &mut Followed,
    keys: Keys,
    format: Output,
    header: Option<&str>,
    out: &mut impl Write,
) -> Result<bool, String> {
    let file = std::fs::File::open(f.path).map_err(|e| e.to_string())?;
    let len = file.metadata().map_err(|e| e.to_string())?.len();
    if len < f.resume.at() {
        eprintln!(
            "sluice logstore: {}: the file shrank ({len} bytes, {} read): replaced; reading it from its start",
            f.path.display(),
            f.resume.at()
        );
        f.resume = Resume::start();
    }
    if len == f.resume.at() {
        return Ok(false);
    }
    let mut bytes = vec![0; (len - f.resume.at()) as usize];
    file.read_exact_at(&mut bytes, f.resume.at())
        .map_err(|e| e.to_string())?;
    let take = frame::settled(&bytes);
    if take == 0 {
        return Ok(false);
    }
    let resume = std::mem::replace(&mut f.resume, Resume::start());
    let mut walk = Walk::follow(&bytes[..take], keys, resume)?;
    let mut printed = false;
    for item in walk.by_ref() {
        match item {
            Item::Chunk(c) => {
                let mut first = !printed;
                let read = c.read(|r| {
                    if first {
                        if let Some(h) = header {
                            let _ = writeln!(out, "\n==> {h} <==");
                        }
                        first = false;
                    }
                    let _ = print(out, format, r);
                });
                printed |= !first;
                if let Err(e) = read {
                    let _ = out.flush();
                    eprintln!("{}: chunk at {}: {e}", f.path.display(), at(c.at));
                }
            }
            Item::Problem(p) => {
                let _ = out.flush();
                said(f.path, &p);
            }
            Item::Segment(_) | Item::Close { .. } | Item::Timestamp { .. } => {}
        }
    }
    f.resume = walk.pause();
    Ok(printed)
}

/// Says a problem on standard error; whether it was only a notice.
fn said(path: &Path, p: &sluice_logstore::Problem) -> bool {
    eprintln!("{}: {}: {}", path.display(), at(p.at), p.what);
    p.severity == Severity::Notice
}
