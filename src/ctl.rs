//! `sluice ctl`: talk to a running sluice over its control socket, as `syslog-ng-ctl` does.
//!
//! Each command is one line written to the socket (`crates/engine/src/control.rs` answers);
//! the answer is printed. An answer starting with `error: ` makes the exit status 1.

use clap::{Args, Subcommand, ValueEnum};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct CtlArgs {
    /// The control socket (the server's -c).
    #[arg(
        short = 'c',
        long = "control",
        value_name = "PATH",
        default_value = "/var/lib/sluice/sluice.ctl"
    )]
    control: PathBuf,
    #[command(subcommand)]
    command: CtlCommand,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum StatsFormat {
    Csv,
    Kv,
    Prometheus,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum OnOff {
    On,
    Off,
}

#[derive(Subcommand, Debug)]
enum CtlCommand {
    /// Print the counters (syslog-ng's CSV by default).
    Stats {
        #[arg(long, value_enum, default_value = "csv")]
        format: StatsFormat,
        /// Set the counters back to zero after printing them.
        #[arg(long)]
        reset: bool,
    },
    /// List counter names, or print counters, matching a glob (`*`, `?`).
    Query {
        #[command(subcommand)]
        what: Query,
    },
    /// Reload the configuration.
    Reload,
    /// Close files so that they are opened again (after logrotate).
    Reopen,
    /// Stop the server (as SIGTERM).
    Stop,
    /// Say whether the server answers, with its uptime and queued messages.
    Healthcheck,
    /// Print where every message went (received = reached a destination + reached none;
    /// per destination, processed = written + dropped by reason + queued); exit status 1
    /// when the books do not balance.
    Ledger,
    /// Print the configuration as the server read it.
    Config {
        /// With includes and `@define`s resolved (what sluice always prints).
        #[arg(long)]
        preprocessed: bool,
    },
    /// Show or set whether informational messages go to standard error.
    Verbose {
        #[arg(long, value_enum)]
        set: Option<OnOff>,
    },
    /// Show or set debug messages.
    Debug {
        #[arg(long, value_enum)]
        set: Option<OnOff>,
    },
}

#[derive(Subcommand, Debug)]
enum Query {
    /// The names of the counters that match.
    List {
        #[arg(default_value = "*")]
        pattern: String,
    },
    /// `name=value` of the counters that match, or their sum.
    Get {
        #[arg(long)]
        sum: bool,
        pattern: String,
    },
}

fn on_off(v: Option<OnOff>) -> &'static str {
    match v {
        Some(OnOff::On) => " on",
        Some(OnOff::Off) => " off",
        None => "",
    }
}

pub fn run(args: &CtlArgs) -> i32 {
    let line = match &args.command {
        CtlCommand::Stats { format, reset } => {
            let f = match format {
                StatsFormat::Csv => "csv",
                StatsFormat::Kv => "kv",
                StatsFormat::Prometheus => "prometheus",
            };
            format!("stats {f}{}", if *reset { " reset" } else { "" })
        }
        CtlCommand::Query {
            what: Query::List { pattern },
        } => format!("query list {pattern}"),
        CtlCommand::Query {
            what: Query::Get { sum, pattern },
        } => format!("query {} {pattern}", if *sum { "get-sum" } else { "get" }),
        CtlCommand::Reload => "reload".into(),
        CtlCommand::Reopen => "reopen".into(),
        CtlCommand::Stop => "stop".into(),
        CtlCommand::Healthcheck => "healthcheck".into(),
        CtlCommand::Ledger => "ledger".into(),
        CtlCommand::Config { .. } => "config preprocessed".into(),
        CtlCommand::Verbose { set } => format!("verbose{}", on_off(*set)),
        CtlCommand::Debug { set } => format!("debug{}", on_off(*set)),
    };
    match ask(&args.control, &line) {
        Ok(answer) => {
            if let Some(e) = answer.strip_prefix("error: ") {
                eprint!("sluice ctl: {e}");
                return 1;
            }
            print!("{answer}");
            let _ = std::io::stdout().flush();
            0
        }
        Err(e) => {
            eprintln!(
                "sluice ctl: cannot talk to {}: {e} (is sluice running with -c {}?)",
                args.control.display(),
                args.control.display()
            );
            1
        }
    }
}

fn ask(socket: &PathBuf, line: &str) -> std::io::Result<String> {
    let mut conn = UnixStream::connect(socket)?;
    conn.write_all(line.as_bytes())?;
    conn.write_all(b"\n")?;
    let mut answer = String::new();
    conn.read_to_string(&mut answer)?;
    Ok(answer)
}
