//! `sluice logstore keygen|cat|grep|tail|verify|info`: reading the archives `logstore()`
//! writes.
//!
//! - `keygen --seal-key FILE --verify-key FILE`: the server's sealing key (for `seal-key()`)
//!   and the verification key to keep elsewhere.
//! - `cat [--key KEY.pem] [--format text|json|rfc5424] FILE…`: every line, in order, as the
//!   template made it (or its fields as JSON or RFC5424). What cannot be read is said on
//!   standard error with its offset; exit code 1 then.
//! - `verify [--verify-key FILE] [--tsa-ca FILE] FILE…`: the chain of every frame, with the
//!   verification key every seal, and every timestamp (trusted with the authority's CA); no
//!   decryption key needed. Exit code 1 when something was altered,
//!   removed, moved or added; a tail torn by a crash or a file still open is said, not failed.
//! - `info [--key KEY.pem] FILE…`: segments, chunks, records, sizes and compression; with
//!   the key, the time range, hosts and programs.
//! - `grep [--key KEY.pem] [--from T] [--to T] [--format text|json|rfc5424] FILTER FILE…`:
//!   the messages a filter expression matches, decrypting only chunks that can hold them
//!   ([`grep`]).
//! - `tail [--key KEY.pem] [-n N] [-f] FILE…`: the last lines, and with `-f` every line
//!   sealed after them ([`tail`]).

mod grep;
mod output;
mod tail;

use clap::{Args, Subcommand};
use sluice_logstore::timestamp::Trust;
use sluice_logstore::{DecryptionKey, Item, Keys, SealKey, Severity, VerifyKey, Walk};
use std::collections::BTreeSet;
use std::io::Write;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

#[derive(Subcommand, Debug)]
pub enum LogstoreCommand {
    /// Make a sealing key (for seal-key()) and its verification key (keep it elsewhere).
    Keygen(KeygenArgs),
    /// Print every line of archives, in order.
    Cat(CatArgs),
    /// Check the chain and the seals of archives (no decryption key needed).
    Verify(ReadArgs),
    /// Print what archives hold: chunks, records, sizes, time range, hosts.
    Info(ReadArgs),
    /// Print the messages a filter expression matches, reading only chunks that can hold them.
    Grep(grep::GrepArgs),
    /// Print the last lines of archives, and with -f every line sealed after them.
    Tail(tail::TailArgs),
}

#[derive(Args, Debug)]
pub struct KeygenArgs {
    /// The sealing key, for logstore(seal-key()): stays on the server, changes as it is used.
    #[arg(long)]
    seal_key: PathBuf,
    /// The verification key: take it off the server.
    #[arg(long)]
    verify_key: PathBuf,
}

/// The keys a reader may be given.
#[derive(Args, Debug)]
pub struct KeyArgs {
    /// A private key (PEM) of a certificate the archives were encrypted for.
    #[arg(short, long)]
    key: Option<PathBuf>,
    /// The verification key `keygen` made: seals are checked.
    #[arg(short = 'V', long)]
    verify_key: Option<PathBuf>,
    /// Certificates (PEM) trusted to sign timestamps: the authority's, or its CA's.
    #[arg(long)]
    tsa_ca: Option<PathBuf>,
}

/// The keys a reader was given, read.
struct Held {
    decrypt: Option<DecryptionKey>,
    verify: Option<VerifyKey>,
    tsa: Option<Trust>,
}

impl Held {
    fn keys(&self) -> Keys<'_> {
        Keys {
            decrypt: self.decrypt.as_ref(),
            verify: self.verify.as_ref(),
            tsa: self.tsa.as_ref(),
        }
    }
}

#[derive(Args, Debug)]
pub struct CatArgs {
    #[command(flatten)]
    read: ReadArgs,
    /// How each message is printed: the line as stored, a JSON object, or RFC5424.
    #[arg(long, value_enum, default_value_t = output::Output::Text)]
    format: output::Output,
}

#[derive(Args, Debug)]
pub struct ReadArgs {
    #[command(flatten)]
    keys: KeyArgs,
    /// Archive files.
    #[arg(required = true)]
    files: Vec<PathBuf>,
}

pub fn run(cmd: &LogstoreCommand) -> i32 {
    match cmd {
        LogstoreCommand::Keygen(a) => match SealKey::generate(&a.seal_key, &a.verify_key) {
            Ok(id) => {
                let id: String = id.iter().map(|b| format!("{b:02x}")).collect();
                println!(
                    "sealing key {id}: {} (for seal-key()); verification key: {} (keep it off the server)",
                    a.seal_key.display(),
                    a.verify_key.display()
                );
                0
            }
            Err(e) => {
                eprintln!("sluice logstore keygen: {e}");
                1
            }
        },
        LogstoreCommand::Cat(a) => read(&a.read, &|file, walk| cat(file, walk, a.format)),
        LogstoreCommand::Verify(a) => read(a, &verify),
        LogstoreCommand::Info(a) => read(a, &info),
        LogstoreCommand::Grep(a) => grep::run(a),
        LogstoreCommand::Tail(a) => tail::run(a),
    }
}

/// What a command does with one file's walk: returns whether all went well.
type PerFile<'f> = &'f dyn Fn(&Path, Walk) -> bool;

/// The keys `a` names, read.
fn keys_of(a: &KeyArgs) -> Result<Held, String> {
    let pem = |p: &Path| std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()));
    let decrypt = a
        .key
        .as_deref()
        .map(|p| DecryptionKey::from_pem(&pem(p)?).map_err(|e| format!("{}: {e}", p.display())))
        .transpose()?;
    let verify = a.verify_key.as_deref().map(VerifyKey::read).transpose()?;
    let tsa = a
        .tsa_ca
        .as_deref()
        .map(|p| Trust::from_pem(&pem(p)?).map_err(|e| format!("{}: {e}", p.display())))
        .transpose()?;
    Ok(Held {
        decrypt,
        verify,
        tsa,
    })
}

fn read(a: &ReadArgs, each: PerFile) -> i32 {
    let held = match keys_of(&a.keys) {
        Ok(k) => k,
        Err(e) => return fail(&e),
    };
    i32::from(!walk_files(&a.files, held.keys(), &mut |file, walk| {
        ControlFlow::Continue(each(file, walk))
    }))
}

/// Walks each of `files` with `keys` through `each`, which says whether all went well with
/// a file or that the rest need not be read (`Break`: standard output was closed); a file
/// that cannot be read or is no archive is said on standard error. Whether all went well.
fn walk_files(
    files: &[PathBuf],
    keys: Keys,
    each: &mut dyn FnMut(&Path, Walk) -> ControlFlow<(), bool>,
) -> bool {
    let mut ok = true;
    for file in files {
        let walked = std::fs::read(file)
            .map_err(|e| e.to_string())
            .and_then(|bytes| Walk::new(&bytes, keys).map(|walk| each(file, walk)));
        match walked {
            Ok(ControlFlow::Continue(good)) => ok &= good,
            Ok(ControlFlow::Break(())) => return false,
            Err(e) => {
                eprintln!("sluice logstore: {}: {e}", file.display());
                ok = false;
            }
        }
    }
    ok
}

fn fail(e: &str) -> i32 {
    eprintln!("sluice logstore: {e}");
    1
}

fn at(offset: u64) -> String {
    if offset == u64::MAX {
        "end".to_string()
    } else {
        format!("offset {offset}")
    }
}

fn cat(file: &Path, walk: Walk, format: output::Output) -> bool {
    let mut out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
    let mut ok = true;
    for item in walk {
        match item {
            Item::Chunk(c) => {
                let read = c.read(|r| {
                    let _ = output::print(&mut out, format, r);
                });
                if let Err(e) = read {
                    let _ = out.flush();
                    eprintln!("{}: chunk at {}: {e}", file.display(), at(c.at));
                    ok = false;
                }
            }
            Item::Problem(p) => {
                let _ = out.flush();
                eprintln!("{}: {}: {}", file.display(), at(p.at), p.what);
                ok &= p.severity == Severity::Notice;
            }
            Item::Segment(_) | Item::Close { .. } | Item::Timestamp { .. } => {}
        }
    }
    out.flush().is_ok() && ok
}

fn verify(file: &Path, walk: Walk) -> bool {
    let (mut frames, mut tampering, mut notices) = (0u64, 0u64, 0u64);
    let mut stamps = Stamps::default();
    for item in walk {
        match item {
            Item::Problem(p) => {
                println!("{}: {}: {}", file.display(), at(p.at), p.what);
                match p.severity {
                    Severity::Tampering => tampering += 1,
                    Severity::Notice => notices += 1,
                }
            }
            Item::Timestamp { stamp, stamped, .. } => {
                frames += 1;
                stamps.add(stamped, &stamp);
            }
            Item::Chunk(_) | Item::Segment(_) | Item::Close { .. } => frames += 1,
        }
    }
    println!(
        "{}: {frames} frames; {}{notices} notices",
        file.display(),
        if tampering == 0 {
            "intact; ".to_string()
        } else {
            format!("{tampering} signs of TAMPERING; ")
        }
    );
    if let Some(said) = stamps.said() {
        println!("{}: {said}", file.display());
    }
    tampering == 0
}

/// The timestamps of a file, as `verify` and `info` sum them up.
#[derive(Default)]
struct Stamps {
    count: u64,
    untrusted: u64,
    /// The last: over which frame, when, by whom.
    last: Option<(u64, i64, String)>,
}

impl Stamps {
    fn add(&mut self, stamped: u64, stamp: &sluice_logstore::timestamp::Stamp) {
        self.count += 1;
        self.untrusted += u64::from(!stamp.trusted);
        self.last = Some((stamped, stamp.time, stamp.tsa.clone()));
    }

    fn said(&self) -> Option<String> {
        let (seq, time, tsa) = self.last.as_ref()?;
        Some(format!(
            "{} timestamps, the last over seq {seq} at {} by {tsa}; {}",
            self.count,
            when(*time),
            if self.untrusted == 0 {
                "each signed by a trusted authority".to_string()
            } else {
                format!(
                    "{} with signatures that hold but were not checked against an authority's certificate (--tsa-ca)",
                    self.untrusted
                )
            }
        ))
    }
}

fn when(t: i64) -> String {
    jiff::Timestamp::from_microsecond(t).map_or_else(|_| t.to_string(), |ts| ts.to_string())
}

fn info(file: &Path, walk: Walk) -> bool {
    let (mut segments, mut chunks, mut records, mut plain, mut stored) =
        (0u64, 0u64, 0u64, 0u64, 0u64);
    let mut sealed: Option<(i64, i64)> = None;
    let mut range: Option<(i64, i64)> = None;
    let (mut hosts, mut programs) = (BTreeSet::new(), BTreeSet::new());
    let mut problems = 0;
    let mut unread = None;
    let mut stamps = Stamps::default();
    for item in walk {
        match item {
            Item::Segment(_) => segments += 1,
            Item::Chunk(c) => {
                chunks += 1;
                records += u64::from(c.records);
                plain += u64::from(c.plain_len);
                stored += c.len;
                let t = c.sealed_at;
                sealed = Some(sealed.map_or((t, t), |(a, b)| (a.min(t), b.max(t))));
                match c.index() {
                    Ok(index) => {
                        let (a, b) = index.recvd;
                        range = Some(range.map_or((a, b), |(x, y)| (x.min(a), y.max(b))));
                        hosts.extend(index.hosts);
                        programs.extend(index.programs);
                    }
                    Err(e) => unread = Some(e),
                }
            }
            Item::Problem(_) => problems += 1,
            Item::Timestamp { stamp, stamped, .. } => stamps.add(stamped, &stamp),
            Item::Close { .. } => {}
        }
    }
    println!("{}:", file.display());
    println!("  segments: {segments}, chunks: {chunks}, records: {records}");
    println!(
        "  records' bytes: {plain}, on disk: {stored} ({:.1} % of the records)",
        if plain > 0 {
            stored as f64 * 100.0 / plain as f64
        } else {
            0.0
        }
    );
    if let Some((a, b)) = sealed {
        println!("  chunks sealed: {} to {}", when(a), when(b));
    }
    match (range, unread) {
        (Some((a, b)), None) => {
            println!("  received: {} to {}", when(a), when(b));
            let list = |set: &BTreeSet<Vec<u8>>| {
                set.iter()
                    .map(|h| String::from_utf8_lossy(h).into_owned())
                    .collect::<Vec<_>>()
                    .join(" ")
            };
            println!("  hosts ({}): {}", hosts.len(), list(&hosts));
            println!("  programs ({}): {}", programs.len(), list(&programs));
        }
        (_, Some(e)) => println!("  indexes: {e}"),
        (None, None) => {}
    }
    if let Some(said) = stamps.said() {
        println!("  {said}");
    }
    if problems > 0 {
        println!("  problems: {problems} (sluice logstore verify says which)");
    }
    true
}
