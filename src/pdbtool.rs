//! `sluice pdbtool match|test|merge|dump|dictionary|patternize`: syslog-ng's `pdbtool` on sluice's PatternDB, with its
//! options and output, so that a site's scripts and CI checks of its pattern files run
//! unchanged.
//!
//! - `match -p FILE [-P PROGRAM] -M MESSAGE` (or `-f FILE` of syslog lines): classifies and
//!   prints every pair the message then has (`name=value`), its tags, a blank line — or the
//!   output of `-T TEMPLATE` — and what correlation makes. `-D` (`--debug-pattern`) first shows
//!   the walk through the tree of patterns (`-c` in colours, `-C` as fields). Exit code 0 when
//!   the last message matched a rule, 1 when not.
//! - `test [-r RULE_ID] [-v] FILE…`: classifies every rule's `<test_message>` and checks the
//!   rule id and each `<test_value>`; exit code 1 when a file cannot be read, 2 when a test
//!   fails, 3 when `-r` names no rule with an example.
//! - `merge -D DIR -p OUT [-r]`: the `<ruleset>`s of every pattern file in DIR (`*.xml`,
//!   `*.pdb`; with `-r` its subdirectories too) in one database.
//! - `dump -p FILE -P PROGRAM` (or `-T`): the radix tree of the program's ruleset (or of the
//!   program patterns), a node a line.
//! - `dictionary -p FILE [-P PROGRAM] [-T]`: the names the fields and values set (or the
//!   rules' tags).

use clap::{Args, Subcommand};
use sluice_model::message::for_each_tag_name;
use sluice_model::parsers::Parsers;
use sluice_model::template::Names;
use sluice_model::values::name_of;
use sluice_model::{Ingest, LogMessage, Origin, Template, Today, UnixTime, Zone};
use sluice_protocol::{Span, SyslogFields, Text};
use std::path::{Path, PathBuf};

#[derive(Subcommand, Debug)]
pub enum PdbtoolCommand {
    /// Match a message against the pattern database.
    Match(MatchArgs),
    /// Test pattern databases against their rules' examples.
    Test(TestArgs),
    /// Merge the pattern databases of a directory into one file.
    Merge(MergeArgs),
    /// Print the tree of patterns of a program's ruleset (or of the programs).
    Dump(DumpArgs),
    /// Print the names the patterns' fields and the rules' values set (or the rules' tags).
    Dictionary(DictionaryArgs),
    /// Propose a pattern database for a log file (written to standard output).
    Patternize(PatternizeArgs),
}

#[derive(Args, Debug)]
pub struct PatternizeArgs {
    /// The log file, syslog lines (or any lines with --no-parse); - for standard input.
    #[arg(short = 'f', long = "file")]
    file: PathBuf,
    /// The share of lines (percent) a pattern must cover to be written.
    #[arg(short = 'S', long = "support", default_value_t = 4.0)]
    support: f64,
    /// The share of its words a line must have in common with a cluster to join it.
    #[arg(long = "similarity", default_value_t = 0.5)]
    similarity: f64,
    /// Take each whole line as the message (no syslog header).
    #[arg(short = 'p', long = "no-parse")]
    no_parse: bool,
}

#[derive(Args, Debug)]
pub struct MatchArgs {
    /// The pattern database.
    #[arg(short = 'p', long = "pdb")]
    pdb: PathBuf,
    /// The program name to match as $PROGRAM.
    #[arg(short = 'P', long = "program", default_value = "")]
    program: String,
    /// The message to match as $MSG.
    #[arg(short = 'M', long = "message")]
    message: Option<String>,
    /// Read syslog messages, one a line, from this file.
    #[arg(short = 'f', long = "file")]
    file: Option<PathBuf>,
    /// Print each message with this template instead of its pairs.
    #[arg(short = 'T', long = "template")]
    template: Option<String>,
    /// Show how the message went through the tree of patterns: each literal and field.
    #[arg(short = 'D', long = "debug-pattern")]
    debug_pattern: bool,
    /// With --debug-pattern: each step as a line of fields (PDBTOOL_DEBUG=…).
    #[arg(short = 'C', long = "debug-csv")]
    debug_csv: bool,
    /// With --debug-pattern: in colours.
    #[arg(short = 'c', long = "color-out")]
    color_out: bool,
}

#[derive(Args, Debug)]
pub struct TestArgs {
    /// Test only the examples of this rule.
    #[arg(short = 'r', long = "rule-id")]
    rule_id: Option<String>,
    /// Say every value that matched too.
    #[arg(short = 'v', long = "verbose")]
    verbose: bool,
    /// The pattern databases.
    #[arg(required = true)]
    files: Vec<PathBuf>,
}

#[derive(Args, Debug)]
pub struct DumpArgs {
    /// The pattern database.
    #[arg(short = 'p', long = "pdb")]
    pdb: PathBuf,
    /// The program ($PROGRAM) whose ruleset to print.
    #[arg(short = 'P', long = "program")]
    program: Option<String>,
    /// Print the tree of program patterns.
    #[arg(short = 'T', long = "program-tree")]
    program_tree: bool,
}

#[derive(Args, Debug)]
pub struct DictionaryArgs {
    /// The pattern database.
    #[arg(short = 'p', long = "pdb")]
    pdb: PathBuf,
    /// Only the ruleset of this program ($PROGRAM).
    #[arg(short = 'P', long = "program")]
    program: Option<String>,
    /// Print the rules' tags instead of the names of values.
    #[arg(short = 'T', long = "dump-tags")]
    dump_tags: bool,
}

#[derive(Args, Debug)]
pub struct MergeArgs {
    /// The directory of pattern files.
    #[arg(short = 'D', long = "directory")]
    directory: PathBuf,
    /// The merged database to write.
    #[arg(short = 'p', long = "pdb")]
    pdb: PathBuf,
    /// Read the subdirectories too.
    #[arg(short = 'r', long = "recursive")]
    recursive: bool,
}

pub fn run(cmd: &PdbtoolCommand) -> i32 {
    let result = match cmd {
        PdbtoolCommand::Match(args) => matching(args),
        PdbtoolCommand::Test(args) => Ok(test(args)),
        PdbtoolCommand::Merge(args) => merge(args).map(|()| 0),
        PdbtoolCommand::Dump(args) => dump(args).map(|()| 0),
        PdbtoolCommand::Dictionary(args) => dictionary(args).map(|()| 0),
        PdbtoolCommand::Patternize(args) => patternize(args).map(|()| 0),
    };
    result.unwrap_or_else(|e| {
        eprintln!("sluice pdbtool: {e}");
        1
    })
}

/// What `pdbtool match --debug-pattern` prints of `msg`'s walk through the tree of its
/// ruleset, before its values: each literal and field of the walk (syslog-ng's steps,
/// byte for byte), and the parts of the message they took; with `-C`, each step's numbers.
fn debug_pattern(
    db: &sluice_model::patterndb::PatternDb,
    msg: &LogMessage,
    args: &MatchArgs,
) -> String {
    use std::fmt::Write as _;
    let steps = db.trace(msg.program(), msg.message());
    let text = msg.message();
    let part = |from: usize, len: usize| {
        let from = from.min(text.len());
        String::from_utf8_lossy(&text[from..from.saturating_add(len).min(text.len())]).into_owned()
    };
    // Trailing junk, field, literal, partial literal; and the end of a colour.
    let colours: [&str; 4] = match args.color_out {
        true => ["\x1b[01;34m", "\x1b[0;33m", "\x1b[01;32m", "\x1b[01;31m"],
        false => ["", "", "", ""],
    };
    let plain = "\x1b[01;0m";
    let name = |s: &sluice_model::patterndb::radix::Step| {
        s.field
            .and_then(|(_, n)| n)
            .map(name_of)
            .map(|n| n.to_string())
            .unwrap_or_default()
    };
    let mut out = String::new();
    if args.debug_csv {
        out.push_str(
            "PDBTOOL_HEADER=i:len:key;keylen:match_off;match_len:parser_type:parser_name\n",
        );
        for (i, s) in steps.iter().enumerate() {
            let (at, len) = match s.field {
                Some(_) => (s.value_at, s.value_len),
                None => (0, 0),
            };
            let _ = writeln!(
                out,
                "PDBTOOL_DEBUG={i}:{}:{}:{at}:{len}:{}:{}",
                s.matched,
                s.key_len(),
                s.field.map_or("", |(kind, _)| kind),
                name(s)
            );
        }
        return out;
    }
    out.push_str("Pattern matching part:\n");
    let mut pos = 0;
    for s in &steps {
        pos += s.matched;
        let key = s
            .key
            .as_deref()
            .map(String::from_utf8_lossy)
            .unwrap_or_default();
        match s.field {
            Some((kind, _)) => {
                let name = name(s);
                let value = match name.is_empty() {
                    true => String::new(),
                    false => part(s.value_at, s.value_len),
                };
                let _ = write!(out, "{}@{kind}:{name}={value}@{plain}", colours[1]);
            }
            None if s.matched as i64 == s.key_len() => {
                let _ = write!(out, "{}{key}{plain}", colours[2]);
            }
            None => {
                let shown: String = key.chars().take(s.matched).collect();
                let _ = write!(out, "{}{shown}{plain}", colours[3]);
            }
        }
    }
    let _ = write!(out, "{}{}{plain}", colours[0], part(pos, usize::MAX));
    out.push_str("\nMatching part:\n");
    let mut pos = 0;
    for s in &steps {
        let colour = match (s.field.is_some(), s.matched as i64 == s.key_len()) {
            (true, _) => colours[1],
            (false, true) => colours[2],
            (false, false) => colours[3],
        };
        let _ = write!(out, "{colour}{}{plain}", part(pos, s.matched));
        pos += s.matched;
    }
    out.push_str("\nValues:\n");
    out
}

/// `dump`: the tree of a program's ruleset (`-P`) or of the program patterns (`-T`).
fn dump(args: &DumpArgs) -> Result<(), String> {
    let loaded = sluice_model::patterndb::load(&args.pdb, &Names::default(), "")?;
    if args.program_tree {
        print!("{}", loaded.db.dump_programs());
    } else if let Some(program) = &args.program {
        if let Some(tree) = loaded.db.dump_ruleset(program.as_bytes()) {
            print!("{tree}");
        }
    } else {
        eprintln!("Neither --program-tree nor --program was specified, doing nothing");
    }
    Ok(())
}

/// `dictionary`: the names fields and values set (or the rules' tags, `-T`).
fn dictionary(args: &DictionaryArgs) -> Result<(), String> {
    let loaded = sluice_model::patterndb::load(&args.pdb, &Names::default(), "")?;
    let program = args.program.as_deref().map(str::as_bytes);
    print!("{}", loaded.db.dictionary(program, args.dump_tags));
    Ok(())
}

/// A `db-parser()` of `pdb`, as a configuration would have it.
fn parser(pdb: &Path) -> Result<Parsers, String> {
    let path = pdb.display().to_string();
    if path.contains(['"', '\\']) {
        return Err(format!("{path}: a file name with \" or \\ in it"));
    }
    let text = format!("parser p {{ db-parser(file(\"{path}\")); }};");
    let config = sluice_config::load_str("pdbtool", &text).map_err(|e| e.render())?;
    let s = &config.statements[0];
    Parsers::compile(&s.body, s.pos, &Names::default()).map_err(|e| e.render(&config.map))
}

/// A message of `program` with text `message`, as pdbtool makes one.
fn message<'r>(program: &str, message: &'r [u8], origin: &'r Origin) -> LogMessage<'r> {
    let now = UnixTime::now(Zone::local());
    LogMessage {
        raw: message,
        fields: SyslogFields {
            program: (!program.is_empty()).then(|| Text::owned(program.as_bytes())),
            message: Text::Span(Span::new(0, message.len())),
            ..SyslogFields::default()
        },
        stamp: now,
        recvd: now,
        origin,
        // pdbtool's message has no host.
        host_is_sender: false,
        tags: Default::default(),
        chained_hostname: false,
        keep_raw: false,
        values: Default::default(),
    }
}

/// Whether `msg` matched a rule.
fn matched(msg: &LogMessage) -> bool {
    msg.values
        .get(sluice_model::values::name_id(".classifier.rule_id"))
        .is_some()
}

/// `name=value` of every pair, then the tags, as pdbtool prints a message.
fn print_pairs(msg: &LogMessage) {
    let mut out = String::new();
    // The header fields that are set, in syslog-ng's order of their handles; the text always.
    let fields: [(&str, &[u8]); 6] = [
        ("HOST", msg.host()),
        ("MESSAGE", msg.message()),
        ("PROGRAM", msg.program()),
        ("PID", msg.pid()),
        ("MSGID", msg.msgid()),
        ("LEGACY_MSGHDR", msg.legacy_msghdr()),
    ];
    for (name, value) in fields {
        if !value.is_empty() || name == "MESSAGE" {
            out.push_str(&format!("{name}={}\n", String::from_utf8_lossy(value)));
        }
    }
    // In the order names were first seen (syslog-ng's order of handles), a name once.
    let mut pairs: Vec<_> = msg.values.iter().collect();
    pairs.reverse();
    let mut seen = std::collections::HashSet::new();
    pairs.retain(|(name, _)| seen.insert(*name));
    pairs.sort_by_key(|(name, _)| *name);
    for (name, value) in pairs {
        out.push_str(&format!(
            "{}={}\n",
            name_of(name),
            String::from_utf8_lossy(value.of(msg.raw))
        ));
    }
    let mut tags = Vec::new();
    for_each_tag_name(&msg.tags, |t| tags.push(t.to_string()));
    out.push_str(&format!("TAGS={}\n\n", tags.join(",")));
    print!("{out}");
}

fn matching(args: &MatchArgs) -> Result<i32, String> {
    let parsers = parser(&args.pdb)?;
    let template = args
        .template
        .as_deref()
        .map(Template::compile)
        .transpose()
        .map_err(|e| format!("-T: {e}"))?;
    let origin = Origin::without_peer("pdbtool", 0, b"localhost", true);
    let print = |msg: &LogMessage| match &template {
        Some(t) => {
            let mut out = Vec::new();
            t.append(msg, 0, &mut out);
            print!("{}", String::from_utf8_lossy(&out));
        }
        None => print_pairs(msg),
    };
    let debug = match args.debug_pattern {
        true => Some(sluice_model::patterndb::load(&args.pdb, &Names::default(), "")?.db),
        false => None,
    };
    // With --debug-pattern, pdbtool prints the message alone, not what correlation makes.
    let ended = |now: Option<i64>| {
        let show = debug.is_none();
        parsers.tick(now, &mut |_, made| {
            made.iter().filter(|_| show).for_each(print)
        });
    };
    // As syslog-ng's pdbtool prints them: what contexts that ended by the message's time
    // made, the message, what its rule's actions made; at the end, what every context
    // still open makes when it ends.
    let show = |msg: &mut LogMessage| -> i32 {
        if let Some(db) = &debug {
            print!("{}", debug_pattern(db, msg, args));
        }
        let mut made = Vec::new();
        parsers.apply_from(0, msg, &mut made);
        let now = UnixTime::now(Zone::local());
        ended(Some(now.secs * 1_000_000 + i64::from(now.micros)));
        print(msg);
        if debug.is_none() {
            made.iter().for_each(|(_, m)| print(m));
        }
        i32::from(!matched(msg))
    };
    let status = match (&args.message, &args.file) {
        (Some(text), None) => Ok(show(&mut message(&args.program, text.as_bytes(), &origin))),
        (None, Some(file)) => {
            let text = std::fs::read(file).map_err(|e| format!("{}: {e}", file.display()))?;
            let mut ingest = Ingest::new(Zone::local().clone());
            // The header's host is the message's, as pdbtool parses it.
            ingest.keep_hostname = true;
            let mut last = 1;
            for line in text.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
                let recvd = UnixTime::now(&ingest.local_zone);
                let mut msgs = Vec::with_capacity(1);
                ingest.push_message(line, &origin, recvd, Today::of(recvd), &mut msgs);
                last = show(&mut msgs[0]);
            }
            Ok(last)
        }
        _ => Err(
            "give the message with -M (and its program with -P), or a file of them with -f".into(),
        ),
    };
    ended(None);
    status
}

fn test(args: &TestArgs) -> i32 {
    let (mut unreadable, mut failed, mut found) = (false, false, false);
    let origin = Origin::without_peer("pdbtool", 0, b"localhost", true);
    for file in &args.files {
        let loaded = match sluice_model::patterndb::load(file, &Names::default(), "") {
            Ok(l) => l,
            Err(e) => {
                eprintln!("{e}");
                unreadable = true;
                continue;
            }
        };
        let parsers = match parser(file) {
            Ok(p) => p,
            Err(e) => {
                eprintln!("{e}");
                unreadable = true;
                continue;
            }
        };
        // In syslog-ng's order: the last example of the file first.
        for example in loaded.examples.iter().rev() {
            if args.rule_id.as_ref().is_some_and(|r| *r != example.rule_id) {
                continue;
            }
            found = true;
            let Some(program) = &example.program else {
                println!(
                    "NOT Testing message as program is unset: message='{}'",
                    example.message
                );
                continue;
            };
            println!(
                "Testing message: program='{program}' message='{}'",
                example.message
            );
            let shadowing = loaded
                .db
                .applicable(program.as_bytes(), example.message.as_bytes());
            if shadowing.len() > 1 {
                println!(" Rule conflict! Multiple rules match this message, list of IDs follow");
                for rule in shadowing {
                    println!("  {}", rule.id);
                }
            }
            let mut msg = message(program, example.message.as_bytes(), &origin);
            parsers.apply_from(0, &mut msg, &mut Vec::new());
            let expected = std::iter::once((".classifier.rule_id", example.rule_id.as_str()))
                .chain(example.values.iter().map(|(n, v)| (n.as_str(), v.as_str())));
            for (name, want) in expected {
                // A value never set reads as empty, as in syslog-ng.
                let got = msg
                    .values
                    .get(sluice_model::values::name_id(name))
                    .map(|v| String::from_utf8_lossy(v.of(msg.raw)).into_owned())
                    .unwrap_or_default();
                if got == want {
                    if args.verbose {
                        println!(" Match name='{name}', value='{got}', expected='{want}'");
                    }
                } else {
                    println!(" Wrong match name='{name}', value='{got}', expected='{want}'");
                    failed = true;
                }
            }
        }
    }
    if unreadable {
        1
    } else if failed {
        2
    } else if args.rule_id.is_some() && !found {
        println!(
            "Could not find the specified ID, or the defined rule doesn't have an example message."
        );
        3
    } else {
        0
    }
}

fn merge(args: &MergeArgs) -> Result<(), String> {
    let mut files = Vec::new();
    pattern_files(&args.directory, args.recursive, &mut files)
        .map_err(|e| format!("{}: {e}", args.directory.display()))?;
    files.sort();
    let merged = sluice_model::patterndb::merge(&files)?;
    std::fs::write(&args.pdb, merged).map_err(|e| format!("{}: {e}", args.pdb.display()))?;
    // What was merged must read as one database.
    sluice_model::patterndb::load(&args.pdb, &Names::default(), "").map(drop)
}

fn pattern_files(dir: &Path, recursive: bool, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            if recursive {
                pattern_files(&path, recursive, out)?;
            }
        } else if path.extension().is_some_and(|e| e == "xml" || e == "pdb") {
            out.push(path);
        }
    }
    Ok(())
}

fn patternize(args: &PatternizeArgs) -> Result<(), String> {
    let text = if args.file.as_os_str() == "-" {
        let mut all = Vec::new();
        std::io::Read::read_to_end(&mut std::io::stdin(), &mut all).map_err(|e| e.to_string())?;
        all
    } else {
        std::fs::read(&args.file).map_err(|e| format!("{}: {e}", args.file.display()))?
    };
    let origin = Origin::without_peer("pdbtool", 0, b"localhost", true);
    let ingest = Ingest::new(Zone::local().clone());
    let mut clusters = sluice_model::patterndb::patternize::Patternizer::default();
    for line in text.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        if args.no_parse {
            clusters.add(b"", line, args.similarity);
            continue;
        }
        let recvd = UnixTime::now(&ingest.local_zone);
        let mut msgs = Vec::with_capacity(1);
        ingest.push_message(line, &origin, recvd, Today::of(recvd), &mut msgs);
        clusters.add(msgs[0].program(), msgs[0].message(), args.similarity);
    }
    let lines = clusters.lines();
    let support = ((lines as f64 * args.support / 100.0).ceil() as usize).max(1);
    let (db, rules, covered) = clusters.database(support);
    print!("{db}");
    eprintln!(
        "sluice pdbtool patternize: {rules} rules for {covered} of {lines} lines ({:.1} %), each for at least {support}",
        covered as f64 * 100.0 / lines.max(1) as f64
    );
    Ok(())
}
