//! The `sluice` command: syslog-ng's daemon flags, so an init script can swap the binary, plus
//! `check-config`.
//!
//! Without `-f` it reads `/etc/sluice/sluice.conf`, or else runs its embedded default
//! configuration (`--print-default-config`). Without `-F` it detaches once its sockets are
//! bound, so that a port in use still fails the command.

mod ctl;
mod daemon;
mod default_config;
mod diskq;
mod loggen;
mod logstore;
mod pdbtool;
mod privileges;
mod reference;

/// Readers allocate batch buffers that writer threads free. glibc's allocator serialises
/// those cross-thread frees on an arena lock (a third of all futex calls with 10,000
/// connections); mimalloc frees them without one. Without transparent huge pages
/// (`no_thp`): memory that readers hold while a burst is in flight is faulted in again after
/// mimalloc returns it, and each fault of a huge page zeroes 2 MiB — with 1,000 connections a
/// quarter of all CPU went to `clear_page_erms` (BENCHMARKS.md).
///
/// mimalloc also stands in for `malloc` and `free` (`override`), for the C libraries built
/// into sluice: librdkafka allocates each record in a sender thread and frees it in the
/// thread that serves its delivery report, the same cross-thread pattern (5 % of `kafka-c()`'s
/// CPU a record, docs/performance.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use clap::{Parser, Subcommand};
use sluice_config::{Config, LoadError};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Parser, Debug)]
#[command(name = "sluice", version = sluice_engine::VERSION, disable_version_flag = true, about = "A syslog server and log router that reads syslog-ng configurations")]
struct Cli {
    /// Stay in the foreground instead of detaching.
    #[arg(short = 'F', long)]
    foreground: bool,
    /// Configuration file (default: /etc/sluice/sluice.conf, else the embedded default).
    #[arg(short = 'f', long = "cfgfile", value_name = "FILE")]
    cfgfile: Option<PathBuf>,
    /// Persistent state file: its directory holds disk buffers whose dir() is not given
    /// (default: /var/lib/sluice).
    #[arg(short = 'R', long = "persist-file", value_name = "FILE")]
    persist_file: Option<PathBuf>,
    /// Write the process id to this file.
    #[arg(short = 'p', long = "pidfile", value_name = "FILE")]
    pidfile: Option<PathBuf>,
    /// Control socket that `sluice ctl` talks to (default: sluice.ctl beside the persist file,
    /// else /var/lib/sluice/sluice.ctl).
    #[arg(short = 'c', long = "control", value_name = "PATH")]
    control: Option<PathBuf>,
    /// Check the configuration and exit.
    #[arg(short = 's', long = "syntax-only")]
    syntax_only: bool,
    /// Print informational internal messages to standard error.
    #[arg(short = 'v', long)]
    verbose: bool,
    /// Print debug messages to standard error.
    #[arg(short = 'd', long)]
    debug: bool,
    /// Print internal messages down to informational ones to standard error (errors and warnings
    /// always go there), even when an internal() source takes them too.
    #[arg(short = 'e', long)]
    stderr: bool,
    /// Print the version and exit.
    #[arg(short = 'V', long)]
    version: bool,
    /// Threads that read, parse and format (default: one per core).
    #[arg(long = "worker-threads", value_name = "N")]
    worker_threads: Option<usize>,
    /// Print the embedded default configuration and exit.
    #[arg(long = "print-default-config")]
    print_default_config: bool,
    /// Run as this user (a name or a number) once everything that needs root is open.
    #[arg(short = 'u', long = "user", value_name = "USER")]
    user: Option<String>,
    /// Run as this group (default: the user's).
    #[arg(short = 'g', long = "group", value_name = "GROUP")]
    group: Option<String>,
    /// With -u: the capabilities to keep (syslog-ng's names, comma-separated; by default
    /// cap_net_bind_service, cap_syslog, cap_dac_read_search).
    #[arg(long = "caps", value_name = "CAPS")]
    caps: Option<String>,
    /// With -u: keep no capability.
    #[arg(long = "no-caps")]
    no_caps: bool,
    /// Change root to this directory before reading the configuration (which, and every
    /// file sluice opens, is then inside it); -u and -g are looked up before.
    #[arg(short = 'C', long = "chroot", value_name = "DIR")]
    chroot: Option<PathBuf>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Check a configuration file and exit: 0 when it is valid, 1 with the errors when not.
    CheckConfig {
        /// The configuration file.
        file: PathBuf,
    },
    /// Generate load as syslog-ng's loggen does, or check what a destination received.
    Loggen(loggen::LoggenArgs),
    /// Inspect disk buffers (syslog-ng's dqtool).
    #[command(subcommand)]
    Diskq(diskq::DiskqCommand),
    /// Talk to a running sluice: statistics, reopen, stop … (syslog-ng-ctl).
    Ctl(ctl::CtlArgs),
    /// Match messages against pattern databases, test and merge them (syslog-ng's pdbtool).
    #[command(subcommand)]
    Pdbtool(pdbtool::PdbtoolCommand),
    /// Read logstore() archives: cat, verify, info; make sealing keys.
    #[command(subcommand)]
    Logstore(logstore::LogstoreCommand),
    /// Print the completions of a shell (bash, zsh, fish) for sluice's commands and options.
    Completions { shell: clap_complete::Shell },
    /// Write sluice's manual pages (sluice.8, sluice-ctl.1, …) into a directory.
    #[command(hide = true)]
    Manpages { dir: PathBuf },
    /// Print the configuration reference (docs/reference.md) from the drivers' option tables.
    #[command(hide = true)]
    Reference,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if cli.version {
        println!(
            "sluice {}\nConfig version: 3.38 (syslog-ng configuration language)",
            sluice_engine::VERSION
        );
        return ExitCode::SUCCESS;
    }
    let defaults = default_config::for_this_user();
    if cli.print_default_config {
        print!("{}", defaults.text);
        return ExitCode::SUCCESS;
    }
    sluice_engine::own_log::configure(true, cli.verbose || cli.stderr, cli.debug);
    match &cli.command {
        Some(Command::CheckConfig { file }) => return check(&load(Some(file), &defaults)),
        Some(Command::Loggen(args)) => return ExitCode::from(loggen::run(args) as u8),
        Some(Command::Diskq(cmd)) => return ExitCode::from(diskq::run(cmd) as u8),
        Some(Command::Ctl(args)) => return ExitCode::from(ctl::run(args) as u8),
        Some(Command::Pdbtool(cmd)) => return ExitCode::from(pdbtool::run(cmd) as u8),
        Some(Command::Logstore(cmd)) => return ExitCode::from(logstore::run(cmd) as u8),
        Some(Command::Reference) => {
            print!("{}", reference::markdown());
            return ExitCode::SUCCESS;
        }
        Some(Command::Completions { shell }) => {
            let mut cmd = <Cli as clap::CommandFactory>::command();
            clap_complete::generate(*shell, &mut cmd, "sluice", &mut std::io::stdout());
            return ExitCode::SUCCESS;
        }
        Some(Command::Manpages { dir }) => {
            return match manpages(dir) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("sluice: writing manual pages into {}: {e}", dir.display());
                    ExitCode::from(1)
                }
            };
        }
        None => {}
    }
    // The user is looked up while /etc/passwd is at hand, then the root changes (as
    // syslog-ng does it: the configuration is read inside the new root, so a reload reads it
    // there too).
    let run_as = match privileges::resolve(cli.user.as_deref(), cli.group.as_deref()) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("sluice: {e}");
            return ExitCode::from(1);
        }
    };
    if let Some(dir) = &cli.chroot {
        if let Err(e) = privileges::chroot(dir) {
            eprintln!("sluice: -C {}: {e}", dir.display());
            return ExitCode::from(1);
        }
    }
    let loaded = load(cli.cfgfile.as_deref(), &defaults);
    if cli.syntax_only {
        return check(&loaded);
    }
    let Some(pipeline) = build(&loaded) else {
        return ExitCode::from(1);
    };
    if loaded.embedded {
        eprintln!("sluice: no configuration file given and /etc/sluice/sluice.conf does not exist: running the embedded default ({})", defaults.summary);
    }
    // State kept across restarts (disk buffers) lives beside the persist file, as syslog-ng's.
    let state_dir = cli
        .persist_file
        .as_deref()
        .and_then(Path::parent)
        .filter(|d| !d.as_os_str().is_empty())
        .map_or_else(|| PathBuf::from("/var/lib/sluice"), Path::to_path_buf);
    // Where file sources keep their positions: the persist file, or one in the state
    // directory.
    sluice_engine::persist::init(
        &cli.persist_file
            .clone()
            .unwrap_or_else(|| state_dir.join("sluice.persist")),
    );
    let opts = sluice_engine::RunOptions {
        worker_threads: cli.worker_threads,
        state_dir,
        control: cli.control.clone(),
        detached: !cli.foreground,
    };
    // SIGHUP and `sluice ctl reload` read the file again; the embedded default has none.
    let reloader: Option<sluice_engine::Reloader> = (!loaded.embedded).then(|| {
        let file = cli.cfgfile.clone();
        let defaults = defaults.clone();
        Box::new(move |stats, generation| {
            let config = load(file.as_deref(), &defaults)
                .result
                .map_err(|failed| failed.render())?;
            sluice_engine::build_with(&config, stats, generation).map_err(|e| e.render(&config.map))
        }) as sluice_engine::Reloader
    });
    let keep = match (cli.no_caps, cli.caps.as_deref()) {
        (true, _) => Ok(0),
        (false, Some(text)) => privileges::caps(text),
        (false, None) => privileges::caps(privileges::DEFAULT_CAPS),
    };
    let keep = match keep {
        Ok(mask) => mask,
        Err(e) => {
            eprintln!("sluice: {e}");
            return ExitCode::from(1);
        }
    };
    // Once every listener is bound: the pid file, then the user sluice runs as.
    let running = || {
        write_pidfile(cli.pidfile.as_deref());
        if let Some(who) = &run_as {
            // The persist file is root's: it is opened while sluice still is.
            sluice_engine::persist::open();
            if let Err(e) = privileges::drop_to(who, keep) {
                sluice_engine::own_log::error(format!(
                    "cannot run as the given user: {e}; stopping"
                ));
                std::process::exit(1);
            }
        }
    };
    let result = if cli.foreground {
        sluice_engine::run(pipeline, &opts, running, reloader)
    } else {
        daemon::detach(|started| {
            sluice_engine::run(
                pipeline,
                &opts,
                || {
                    running();
                    started();
                },
                reloader,
            )
        })
    };
    if let Some(p) = &cli.pidfile {
        let _ = std::fs::remove_file(p);
    }
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sluice: error: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// Writes the manual page of sluice (section 8, a daemon's) and of each of its tools (section
/// 1: `sluice-ctl.1`, …) into `dir`, from the command-line definitions.
fn manpages(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let cmd = <Cli as clap::CommandFactory>::command();
    let write = |cmd: clap::Command, name: &str, section: &str| -> std::io::Result<()> {
        let cmd = cmd.name(name.to_string());
        let mut page = Vec::new();
        clap_mangen::Man::new(cmd)
            .section(section)
            .render(&mut page)?;
        std::fs::write(dir.join(format!("{name}.{section}")), page)
    };
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = format!("sluice-{}", sub.get_name());
        if !matches!(sub.get_name(), "completions" | "help") {
            write(sub.clone(), &name, "1")?;
        }
    }
    write(cmd, "sluice", "8")?;
    std::fs::write(
        dir.join("sluice.conf.5"),
        reference::man_page(env!("CARGO_PKG_VERSION")),
    )
}

/// A configuration as read, or the error that stopped reading it.
struct Loaded {
    result: Result<Config, Box<LoadError>>,
    embedded: bool,
}

fn load(file: Option<&Path>, defaults: &default_config::Default) -> Loaded {
    let system = Path::new("/etc/sluice/sluice.conf");
    match file {
        Some(f) => Loaded {
            result: sluice_config::load(f),
            embedded: false,
        },
        None if system.exists() => Loaded {
            result: sluice_config::load(system),
            embedded: false,
        },
        None => Loaded {
            result: sluice_config::load_str("<embedded default>", &defaults.text),
            embedded: true,
        },
    }
}

/// Builds the pipeline, printing errors as syslog-ng does (file:line:column, line, caret).
fn build(loaded: &Loaded) -> Option<sluice_engine::Pipeline> {
    let config = match &loaded.result {
        Ok(c) => c,
        Err(failed) => {
            eprint!("{}", failed.render());
            return None;
        }
    };
    match sluice_engine::build(config) {
        Ok(p) => Some(p),
        Err(e) => {
            eprint!("{}", e.render(&config.map));
            None
        }
    }
}

fn check(loaded: &Loaded) -> ExitCode {
    match build(loaded) {
        Some(pipeline) => {
            for note in &pipeline.notes {
                eprintln!("sluice: warning: {note}");
            }
            ExitCode::SUCCESS
        }
        None => ExitCode::from(1),
    }
}

fn write_pidfile(path: Option<&Path>) {
    if let Some(p) = path {
        if let Err(e) = std::fs::write(p, format!("{}\n", std::process::id())) {
            sluice_engine::own_log::error(format!("cannot write pid file {}: {e}", p.display()));
        }
    }
}
