//! The running server: sources, dispatch, destinations and their threads.
//!
//! A message travels: a source task ([`sources`]) reads a buffer, frames and parses it into
//! messages, takes window credits ([`window`]) and hands the batch to the [`dispatch`]er, which
//! routes each message through the log paths and gives each destination ([`destinations`])
//! its share; the destination formats it in the reader's thread and queues the bytes with a
//! writer thread, which writes and then drops the batch's acknowledgement, returning the
//! credits so the reader reads on. [`build`] makes all of this from a parsed configuration.

pub mod build;
pub mod control;
pub mod destinations;
pub mod dispatch;
pub mod dns;
pub mod internal;
pub mod options;
pub mod sources;
pub mod stats;
pub mod window;

pub use build::{build, Pipeline};

use anyhow::Context as _;
use sources::{Context, Counters};
use std::sync::Arc;
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::{mpsc, watch};

/// How to run: threads, and where state kept across restarts lives.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// `--worker-threads`: threads that read and format; `None` uses one per core.
    pub worker_threads: Option<usize>,
    /// Where disk buffers go unless their `dir()` says otherwise: the directory of the
    /// persist file (`-R`), else `/var/lib/sluice`.
    pub state_dir: std::path::PathBuf,
    /// The control socket `sluice ctl` talks to (`-c`). Without one, `state_dir/sluice.ctl`
    /// is tried and a failure only warned about.
    pub control: Option<std::path::PathBuf>,
}

pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Runs `pipeline` until SIGTERM/SIGINT or, with `stdin()`, the end of input. `started` is
/// called once every listener is bound (to write a pid file, to let a parent process go).
pub fn run(pipeline: Pipeline, opts: &RunOptions, started: impl FnOnce()) -> anyhow::Result<()> {
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    runtime.enable_all().thread_name("sluice-worker");
    if let Some(n) = opts.worker_threads {
        runtime.worker_threads(n.max(1));
    }
    let runtime = runtime.build().context("starting the runtime")?;
    runtime.block_on(serve(pipeline, opts, started))
}

async fn serve(p: Pipeline, opts: &RunOptions, started: impl FnOnce()) -> anyhow::Result<()> {
    for note in &p.notes {
        internal::warning(note.clone());
    }
    let (stop_tx, stop_rx) = watch::channel(false);
    let ctx = Context {
        dispatcher: p.dispatcher.clone(),
        shutdown: stop_rx,
        counters: Arc::new(Counters::default()),
    };

    // Open disk buffers (replaying what they hold) and bind before reporting the start, so
    // that an unusable buffer or a port in use fails the start.
    for d in &p.dispatcher.destinations {
        d.start(&opts.state_dir).context("starting a destination")?;
    }
    let mut streams = Vec::new();
    for s in &p.streams {
        let bound = s.bind().with_context(|| {
            format!("source {}: cannot listen on {:?}", s.source_name, s.listen)
        })?;
        streams.push((s.clone(), bound));
    }
    let mut datagrams = Vec::new();
    for s in &p.datagrams {
        let bound = s
            .bind()
            .with_context(|| format!("source {}: cannot bind {:?}", s.source_name, s.bind))?;
        datagrams.push((s.clone(), bound));
    }
    // The control socket: asked for with -c, it must work; by default it is tried.
    let (ctl_stop_tx, mut ctl_stop) = mpsc::channel(1);
    let ctl_path = opts
        .control
        .clone()
        .unwrap_or_else(|| opts.state_dir.join("sluice.ctl"));
    if opts.control.is_none() {
        let _ = std::fs::create_dir_all(&opts.state_dir);
    }
    let control = match control::Control::bind(&ctl_path) {
        Ok(listener) => Some(listener),
        Err(e) if opts.control.is_some() => {
            return Err(e).with_context(|| {
                format!("cannot create the control socket {}", ctl_path.display())
            })
        }
        Err(e) => {
            internal::warning(format!(
                "no control socket: cannot create {}: {e}; `sluice ctl` will not reach this server (-c PATH sets another)",
                ctl_path.display()
            ));
            None
        }
    };
    let prometheus = match p.globals.prometheus_listen {
        Some(addr) => Some(
            tokio::net::TcpListener::bind(addr)
                .await
                .with_context(|| format!("cannot listen for Prometheus on {addr}"))?,
        ),
        None => None,
    };
    let internal_events = p.internal.as_ref().map(|_| internal::subscribe(1024));
    let mut tasks = tokio::task::JoinSet::new();
    for (s, bound) in streams {
        tasks.spawn(s.serve(bound, ctx.clone()));
    }
    for (s, bound) in datagrams {
        tasks.spawn(s.serve(bound, ctx.clone()));
    }
    let (stdin_done_tx, mut stdin_done) = mpsc::channel(1);
    if let Some(s) = &p.stdin {
        tasks.spawn(s.clone().serve(ctx.clone(), stdin_done_tx.clone()));
    }
    let internal_task = match (&p.internal, internal_events) {
        (Some(s), Some(events)) => Some(tokio::spawn(s.clone().serve(events, ctx.clone()))),
        _ => None,
    };
    let mut services = tokio::task::JoinSet::new();
    if let Some(listener) = control {
        let c = Arc::new(control::Control {
            stats: p.stats.clone(),
            dispatcher: p.dispatcher.clone(),
            config_text: p.config_text.clone(),
            stop: ctl_stop_tx,
            started: std::time::Instant::now(),
        });
        services.spawn(c.serve(listener));
    }
    if let Some(listener) = prometheus {
        services.spawn(control::serve_prometheus(listener, p.stats.clone()));
    }
    if p.globals.stats_freq > 0 {
        let stats = p.stats.clone();
        let every = std::time::Duration::from_secs(p.globals.stats_freq);
        services.spawn(async move {
            let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
            loop {
                tick.tick().await;
                internal::notice(stats.log_line());
            }
        });
    }
    started();
    internal::notice(format!("sluice starting up; version='{VERSION}'"));

    let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let mut int = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    let mut hup = signal(SignalKind::hangup()).context("installing the SIGHUP handler")?;
    let mut usr1 = signal(SignalKind::user_defined1()).context("installing the SIGUSR1 handler")?;
    loop {
        tokio::select! {
            _ = term.recv() => break,
            _ = int.recv() => break,
            Some(()) = stdin_done.recv() => break,
            Some(()) = ctl_stop.recv() => break,
            _ = usr1.recv() => {
                internal::notice("SIGUSR1 received: reopening files");
                for d in &p.dispatcher.destinations {
                    d.reopen();
                }
            }
            _ = hup.recv() => internal::warning("SIGHUP received: reloading the configuration is not supported yet; keeping the running one"),
        }
    }
    internal::notice(format!("sluice shutting down; version='{VERSION}'"));
    services.abort_all();
    let _ = std::fs::remove_file(&ctl_path);
    let _ = stop_tx.send(true);
    while tasks.join_next().await.is_some() {}
    internal::unsubscribe();
    if let Some(t) = internal_task {
        let _ = t.await;
    }
    let dispatcher = p.dispatcher.clone();
    tokio::task::spawn_blocking(move || {
        for d in &dispatcher.destinations {
            d.shutdown();
        }
    })
    .await
    .context("stopping the writers")?;
    Ok(())
}
