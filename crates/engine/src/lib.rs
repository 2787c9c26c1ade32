//! The running server: sources, dispatch, destinations and their threads.
//!
//! A message travels: a source task ([`sources`]) reads a buffer, frames and parses it into
//! messages, takes window credits ([`window`]) and hands the batch to the [`dispatch`]er, which
//! routes each message through the log paths and gives each destination ([`destinations`])
//! its share; the destination formats it in the reader's thread and queues the bytes with a
//! writer thread, which writes and then drops the batch's acknowledgement, returning the
//! credits so the reader reads on. [`build`] makes all of this from a parsed configuration.
//!
//! # Startup (`serve`)
//!
//! 1. Each destination starts: disk buffers are opened and replayed (a buffer that cannot be
//!    used fails the start).
//! 2. Every source gets ready ([`Source::bind`]: listeners bind); a port in use fails the
//!    start. A detached sluice without `internal()` sends its own messages to the host's
//!    syslog socket.
//! 3. The control socket and Prometheus start; every source runs, each with its own retire
//!    signal and what it accepts with its source's stop (`Running::source_stops`).
//! 4. The launcher is told the daemon started (`started`), and systemd (`notify`); signals
//!    are handled from here.
//!
//! # Reload (`Running::reload`)
//!
//! 1. The new configuration is built; one that does not build changes nothing.
//! 2. Sources whose statement (and `options {}`, templates) did not change are kept whole.
//! 3. Every changed or new source gets ready now, taking over what the retiring source at its
//!    place holds (a listener's socket; a changed `stdin()` keeps its reader): a port in use
//!    fails the reload before anything changed.
//! 4. Destinations are kept, or started taking over their predecessor's queue.
//! 5. Retiring sources stop (a listener hands its socket over, or closes it); what removed
//!    sources accepted stops, what changed ones accepted goes on. A changed or new
//!    `internal()` takes sluice's own messages from when it runs; the one it replaces finishes
//!    what it holds.
//! 6. The new dispatcher replaces the old; readers take it at their next read, with their
//!    listener's new parsing options. The new sources run.
//! 7. Once no read routed by the old dispatcher is in flight, its parsers' open
//!    correlation contexts go to the new parsers of the same identity, and destinations no one
//!    kept finish what they hold and stop.
//!
//! # Shutdown
//!
//! 1. SIGTERM, SIGINT, `sluice ctl stop` or the end of `stdin()`: every source stop is set;
//!    readers stop reading, queue what they read and return. A second signal exits at once.
//! 2. Destinations write what they hold and stop. Whatever waits on a destination that takes
//!    nothing (a reader for credits, a failing file, a peer that reads nothing) waits within
//!    one grace counted from the stop (`stopping::GRACE`); then the destination gives up
//!    without reconnecting, reporting what is lost (or leaving it in its disk buffer).
//! 3. The control socket is removed if it is still sluice's; the pid file by the caller.

pub mod build;
pub mod clock;
pub mod control;
pub mod correlation;
pub mod destinations;
pub mod dispatch;
pub mod dns;
pub mod encoding;
pub mod file_open;
#[cfg(feature = "kafka")]
pub mod kafka;
pub mod ledger;
pub mod memory;
pub mod notify;
pub mod options;
pub mod own_log;
pub mod persist;
pub mod sources;
#[cfg(feature = "sql")]
pub mod sql;
pub mod stats;
pub mod stopping;
pub mod tls;
pub mod window;

pub use build::{build, build_with, Fingerprints, Pipeline, ReadFiles};

use anyhow::Context as _;
use dispatch::Current;
use sources::{Context, Held, Place, Ready, Retire, Source};
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
    /// sluice detaches: its own messages go to the host's syslog socket when no log path
    /// reads `internal()` (standard error is gone).
    pub detached: bool,
}

pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Builds the configuration again for a reload: given the running statistics (so counters go
/// on) and the new configuration's number; an error is the text to report.
pub type Reloader = Box<dyn Fn(Arc<stats::Registry>, u64) -> Result<Pipeline, String> + Send>;

/// Runs `pipeline` until SIGTERM/SIGINT or, with `stdin()`, the end of input. `started` is
/// called once every listener is bound (to write a pid file, to let a parent process go).
/// `reload` rebuilds the configuration on SIGHUP or `sluice ctl reload`.
pub fn run(
    pipeline: Pipeline,
    opts: &RunOptions,
    started: impl FnOnce(),
    reload: Option<Reloader>,
) -> anyhow::Result<()> {
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    runtime.enable_all().thread_name("sluice-worker");
    if let Some(n) = opts.worker_threads {
        runtime.worker_threads(n.max(1));
    }
    let runtime = runtime.build().context("starting the runtime")?;
    runtime.block_on(serve(pipeline, opts, started, reload))
}

/// A running source: what a reload compares, and how to stop it alone.
struct RunningSource {
    name: Arc<str>,
    place: Place,
    fingerprint: Option<String>,
    retire: watch::Sender<Retire>,
    /// What a successor at its place takes over at a reload (a second descriptor of its
    /// socket).
    hand_over: Vec<std::os::fd::OwnedFd>,
}

/// Sources ready to run.
type Bound = Vec<(Arc<dyn Source>, Box<dyn Ready>)>;

/// What each source retiring at a reload holds, by its place: its name and sockets.
type Retiring<'a> = std::collections::HashMap<Place, (&'a Arc<str>, &'a [std::os::fd::OwnedFd])>;

/// Gets each of `sources` ready; one at the place of a source in `retiring` takes over what
/// that one holds there.
fn bind(sources: Vec<Arc<dyn Source>>, retiring: &Retiring<'_>) -> anyhow::Result<Bound> {
    sources
        .into_iter()
        .map(|s| {
            let place = s.place();
            let held = retiring.get(&place).and_then(|(name, sockets)| {
                let sockets = sockets
                    .iter()
                    .map(|s| s.try_clone())
                    .collect::<std::io::Result<Vec<_>>>()
                    .ok()?;
                (!sockets.is_empty()).then(|| Held {
                    sockets,
                    same_source: **name == *s.source_name(),
                })
            });
            let ready = s.clone().bind(held).map_err(|e| {
                // A server that gave up root (`-u`) binds only what the capabilities it kept
                // allow.
                // SAFETY: geteuid has no preconditions.
                let hint = match e.kind() == std::io::ErrorKind::PermissionDenied
                    && unsafe { libc::geteuid() } != 0
                {
                    true => " (sluice gave up root at start, -u, keeping only the capabilities --caps names: a restart adds this listener)",
                    false => "",
                };
                anyhow::Error::new(e).context(format!(
                    "source {}: cannot listen on {place}{hint}",
                    s.source_name()
                ))
            })?;
            Ok((s, ready))
        })
        .collect()
}

/// What the main loop keeps of the running configuration.
struct Running {
    ctx: Context,
    fingerprints: Fingerprints,
    sources: Vec<RunningSource>,
    /// Per source name, what stops what it accepted (connections, a reader of stdin): a
    /// reload that changes a source keeps them (they route by its name); one that removes it
    /// stops them.
    source_stops: std::collections::HashMap<Arc<str>, watch::Sender<bool>>,
    tasks: tokio::task::JoinSet<()>,
    globals_stop: watch::Sender<bool>,
    generation: u64,
    state_dir: std::path::PathBuf,
    /// Detached: sluice's own messages go to the host's syslog socket while no source reads
    /// them (`internal()`).
    detached: bool,
}

impl Running {
    /// Runs each of `ready`, each with a retire signal of its own.
    fn start(&mut self, ready: Bound, fingerprints: &Fingerprints) {
        for (s, ready) in ready {
            let name = s.source_name().clone();
            let (retire, retired) = watch::channel(Retire::Serving);
            self.sources.push(RunningSource {
                name: name.clone(),
                place: s.place(),
                fingerprint: fingerprints.sources.get(&*name).cloned(),
                retire,
                hand_over: ready.hand_over(),
            });
            let ctx = Context {
                shutdown: self.source_stop(&name),
                ..self.ctx.clone()
            };
            self.tasks.spawn(ready.run(ctx, retired));
        }
    }

    /// What stops the connections of the source `name` (and everything at the end).
    fn source_stop(&mut self, name: &Arc<str>) -> watch::Receiver<bool> {
        self.source_stops
            .entry(name.clone())
            .or_insert_with(|| watch::channel(false).0)
            .subscribe()
    }

    /// Puts `new` in place of the running configuration, keeping what did not change: sources
    /// (their listeners and connections) and destinations (their queues and connections). A
    /// changed forwarding destination takes over its predecessor's queue.
    async fn reload(&mut self, mut new: Pipeline) -> anyhow::Result<()> {
        for note in &new.notes {
            own_log::warning(note.clone());
        }
        let old = self.ctx.dispatcher.get();
        let same_shared = new.fingerprints.shared == self.fingerprints.shared;
        // Sources: stop the changed and removed ones, keep the rest, start the new. A source
        // has a listener for each of its drivers and is kept or restarted whole: decided once
        // per source, before any of its listeners is looked at.
        // The new configuration's connections may need more descriptors than the start gave.
        sources::stream::raise_open_files_limit(
            new.sources.iter().map(|s| s.descriptors()).sum(),
            new.sources.iter().map(|s| s.connections()).sum(),
        )
        .map_err(anyhow::Error::msg)?;
        let reads_own_messages = new
            .sources
            .iter()
            .any(|s| s.place().kind == sources::internal::KIND);
        let own_sockets: Vec<std::path::PathBuf> = new
            .sources
            .iter()
            .filter_map(|s| s.unix_path().map(std::path::Path::to_path_buf))
            .collect();
        let mut sources = std::mem::take(&mut new.sources);
        let used: std::collections::HashSet<Arc<str>> =
            sources.iter().map(|s| s.source_name().clone()).collect();
        let kept_sources: std::collections::HashSet<Arc<str>> = self
            .sources
            .iter()
            .filter(|l| {
                let print = new.fingerprints.sources.get(&*l.name);
                same_shared
                    && l.fingerprint.is_some()
                    && print == l.fingerprint.as_ref()
                    && used.contains(&l.name)
            })
            .map(|l| l.name.clone())
            .collect();
        sources.retain(|s| !kept_sources.contains(s.source_name()));
        // Every new source gets ready now, before anything changes: a port in use fails the
        // reload with everything still running. One at the place of a source that is retiring
        // takes over what it holds there (its socket: nothing the kernel queued meanwhile is
        // refused).
        let held: Retiring<'_> = self
            .sources
            .iter()
            .filter(|l| !kept_sources.contains(&l.name))
            .map(|l| (l.place.clone(), (&l.name, l.hand_over.as_slice())))
            .collect();
        let taken: std::collections::HashSet<Place> = sources
            .iter()
            .map(|s| s.place())
            .filter(|p| held.contains_key(p))
            .collect();
        let ready = bind(sources, &held)?;
        // Destinations: keep the unchanged, start the others (taking over queues).
        let old_names = &self.fingerprints.destinations;
        let mut kept = vec![false; old.destinations.len()];
        let mut starts = Vec::new();
        {
            let d = Arc::get_mut(&mut new.dispatcher).expect("a new dispatcher is not shared");
            for (i, (name, print)) in new.fingerprints.destinations.iter().enumerate() {
                let before = old_names
                    .iter()
                    .position(|(n, p)| n == name && p.is_some() && print.is_some())
                    .filter(|&j| !kept[j]);
                match before {
                    Some(j) if same_shared && old_names[j].1 == *print => {
                        d.destinations[i] = old.destinations[j].clone();
                        kept[j] = true;
                    }
                    other => starts.push((
                        d.destinations[i].clone(),
                        other.map(|j| old.destinations[j].clone()),
                    )),
                }
            }
        }
        // New destinations first: if one cannot start (an unusable disk buffer), the reload
        // fails before any running destination has handed its queue over.
        starts.sort_by_key(|(_, previous)| previous.is_some());
        let state_dir = self.state_dir.clone();
        tokio::task::spawn_blocking(move || {
            for (dest, previous) in starts {
                dest.start(&state_dir, previous.as_ref())?;
            }
            Ok::<_, std::io::Error>(())
        })
        .await
        .context("starting destinations")?
        .context("starting a destination")?;

        // Changed and removed sources retire: handing what they hold over where a successor
        // took their place, closing it otherwise. What a changed source accepted goes on;
        // what a removed one accepted stops.
        let mut running = Vec::new();
        for l in std::mem::take(&mut self.sources) {
            if kept_sources.contains(&l.name) {
                running.push(l);
            } else if taken.contains(&l.place) {
                let _ = l.retire.send(Retire::HandOver);
            } else {
                let _ = l.retire.send(Retire::Close);
            }
        }
        self.sources = running;
        self.source_stops.retain(|name, stop| {
            let stays = used.contains(name);
            if !stays {
                let _ = stop.send(true);
            }
            stays
        });
        self.generation = new.dispatcher.generation;
        // The new routing takes over before new sources read.
        drop(old);
        let old = self.ctx.dispatcher.replace(new.dispatcher.clone());
        self.start(ready, &new.fingerprints);
        self.fingerprints = new.fingerprints;
        // Detached, sluice's own messages go to internal() when a source reads it, else to
        // the host's syslog socket.
        if self.detached && reads_own_messages {
            own_log::stop_host_log();
        } else if self.detached && !own_log::sends_to_host_log() {
            let own: Vec<&std::path::Path> = own_sockets.iter().map(|p| p.as_path()).collect();
            keep_own_messages(&own);
        }
        // Reads routed by the old routing hold it until they are queued: then the
        // destinations no one uses any more finish what they hold and stop.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while Arc::strong_count(&old) > 1 && std::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        // No read uses the old routing now: its parsers' open correlation contexts go to
        // their successors (merged with any the new ones opened meanwhile).
        // The new configuration is in place: so is its memory-limit().
        memory::budget().set_limit(
            new.globals
                .memory_limit
                .unwrap_or_else(memory::default_limit),
        );
        new.dispatcher.router.adopt_state(&old.router);
        let retired: Vec<_> = old
            .destinations
            .iter()
            .zip(&kept)
            .filter(|(_, &k)| !k)
            .map(|(d, _)| d.clone())
            .collect();
        tokio::task::spawn_blocking(move || {
            for d in retired {
                d.shutdown();
            }
        })
        .await
        .context("stopping the destinations the new configuration dropped")?;
        // Kept sources read their certificates again too.
        tls::reloading::refresh_all();
        Ok(())
    }
}

/// For a detached sluice whose configuration reads no `internal()`: sends its own messages
/// to the host's syslog socket, and says on standard error (still the terminal) where they go.
fn keep_own_messages(own_sockets: &[&std::path::Path]) {
    let Some(path) = own_log::host_log_socket(own_sockets) else {
        own_log::warning(
            "once detached, sluice's own messages are not kept: no log path reads internal() and \
             this host has no syslog socket (/dev/log); add internal() to a log path to keep them",
        );
        return;
    };
    match own_log::send_to_host_log(&path) {
        Ok(()) => eprintln!(
            "sluice: its own messages go to {} (no log path reads internal())",
            path.display()
        ),
        Err(e) => own_log::warning(format!(
            "once detached, sluice's own messages are not kept: cannot send them to {}: {e}; add \
             internal() to a log path to keep them",
            path.display()
        )),
    }
}

async fn serve(
    p: Pipeline,
    opts: &RunOptions,
    started: impl FnOnce(),
    reloader: Option<Reloader>,
) -> anyhow::Result<()> {
    for note in &p.notes {
        own_log::warning(note.clone());
    }
    // From here on the routing lives in `ctx.dispatcher` only, so that a reload can tell when
    // no reader uses the one it replaced.
    let Pipeline {
        globals,
        sources,
        dispatcher,
        stats,
        config_text,
        fingerprints,
        notes: _,
        mut read,
    } = p;
    // Open disk buffers (replaying what they hold) and bind before reporting the start, so
    // that an unusable buffer or a port in use fails the start.
    for d in &dispatcher.destinations {
        d.start(&opts.state_dir, None)
            .context("starting a destination")?;
    }
    let (stop_tx, stop_rx) = watch::channel(false);
    let (finished_tx, mut finished) = mpsc::channel(1);
    let ctx = Context {
        dispatcher: Arc::new(Current::new(dispatcher)),
        shutdown: stop_rx,
        finished: finished_tx,
    };
    let mut running = Running {
        ctx: ctx.clone(),
        fingerprints: fingerprints.clone(),
        sources: Vec::new(),
        source_stops: std::collections::HashMap::new(),
        tasks: tokio::task::JoinSet::new(),
        globals_stop: stop_tx,
        generation: ctx.dispatcher.get().generation,
        state_dir: opts.state_dir.clone(),
        detached: opts.detached,
    };
    if opts.detached
        && !sources
            .iter()
            .any(|s| s.place().kind == sources::internal::KIND)
    {
        let own: Vec<&std::path::Path> = sources.iter().filter_map(|s| s.unix_path()).collect();
        keep_own_messages(&own);
    }
    sources::stream::raise_open_files_limit(
        sources.iter().map(|s| s.descriptors()).sum(),
        sources.iter().map(|s| s.connections()).sum(),
    )
    .map_err(anyhow::Error::msg)?;
    let ready = bind(sources, &std::collections::HashMap::new())?;
    // The control socket: asked for with -c, it must work; by default it is tried.
    let (ctl_stop_tx, mut ctl_stop) = mpsc::channel(1);
    let (reload_tx, mut reload_requests) = mpsc::channel(1);
    let ctl_path = opts
        .control
        .clone()
        .unwrap_or_else(|| opts.state_dir.join("sluice.ctl"));
    if opts.control.is_none() {
        use std::os::unix::fs::DirBuilderExt;
        // Disk buffers and the control socket live there: private.
        let _ = std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&opts.state_dir);
    }
    let control = match control::Control::bind(&ctl_path) {
        Ok(bound) => Some(bound),
        Err(e) if opts.control.is_some() => {
            return Err(e).with_context(|| {
                format!("cannot create the control socket {}", ctl_path.display())
            })
        }
        Err(e) => {
            // Unprivileged runs (a first try of the embedded default) say so only with -v.
            // SAFETY: geteuid(2) has no preconditions.
            let severity = if unsafe { libc::geteuid() } == 0 {
                own_log::WARNING
            } else {
                own_log::NOTICE
            };
            own_log::emit(
                severity,
                format!(
                    "no control socket: cannot create {}: {e}; `sluice ctl` will not reach this server (-c PATH sets another)",
                    ctl_path.display()
                ),
            );
            None
        }
    };
    let prometheus = match globals.prometheus_listen {
        Some(addr) => {
            if !addr.ip().is_loopback() {
                own_log::warning(format!(
                    "the Prometheus endpoint on {addr} can be reached from other machines: anyone who reaches it reads the counters, which name hosts, programs and files; listen on 127.0.0.1 unless a firewall keeps it in"
                ));
            }
            Some(
                tokio::net::TcpListener::bind(addr)
                    .await
                    .with_context(|| format!("cannot listen for Prometheus on {addr}"))?,
            )
        }
        None => None,
    };
    running.start(ready, &fingerprints);
    let mut services = tokio::task::JoinSet::new();
    let ctl_ino = control.as_ref().map(|(_, ino)| *ino);
    let control = control.map(|(listener, _)| {
        let c = Arc::new(control::Control {
            stats: stats.clone(),
            dispatcher: ctx.dispatcher.clone(),
            config_text: std::sync::Mutex::new(config_text),
            stop: ctl_stop_tx,
            reload: reload_tx,
            started: std::time::Instant::now(),
        });
        services.spawn(c.clone().serve(listener));
        c
    });
    if let Some(listener) = prometheus {
        services.spawn(control::serve_prometheus(listener, stats.clone()));
    }
    services.spawn(correlation::run(ctx.clone()));
    services.spawn(stats::watch_pauses(stats.clone(), stats::PAUSE_WARNING));
    services.spawn(stats::watch_listen_drops(stats.clone()));
    services.spawn(tls::reloading::watch(stats.clone()));
    sluice_model::correlation::set_internal(Box::new(own_log::post_made));
    stats.set_max_dynamics(globals.stats_max_dynamics);
    let budget = memory::budget();
    budget.set_limit(globals.memory_limit.unwrap_or_else(memory::default_limit));
    stats.register("global", "memory", "", "memory_usage", budget.used.clone());
    stats.register("global", "memory", "", "memory_limit", budget.limit.clone());
    stats.register(
        "global",
        "memory",
        "",
        "connections_memory",
        budget.connections.clone(),
    );
    if globals.stats_freq > 0 {
        let stats = stats.clone();
        let every = std::time::Duration::from_secs(globals.stats_freq);
        services.spawn(async move {
            let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
            loop {
                tick.tick().await;
                own_log::notice(stats.log_line());
            }
        });
    }
    started();
    own_log::notice(format!("sluice starting up; version='{VERSION}'"));
    notify::ready("running");
    if let Some(every) = notify::watchdog_every() {
        services.spawn(async move {
            let mut tick = tokio::time::interval(every);
            loop {
                tick.tick().await;
                notify::alive();
            }
        });
    }

    let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let mut int = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    let mut hup = signal(SignalKind::hangup()).context("installing the SIGHUP handler")?;
    let mut usr1 = signal(SignalKind::user_defined1()).context("installing the SIGUSR1 handler")?;
    // Files the configuration read besides its text (pattern databases) are looked at every
    // five seconds, as syslog-ng's db-parser() looks at its file.
    let mut files_tick = tokio::time::interval(std::time::Duration::from_secs(5));
    files_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let (answer, changed_files) = tokio::select! {
            _ = term.recv() => break,
            _ = int.recv() => break,
            Some(()) = finished.recv() => break,
            Some(()) = ctl_stop.recv() => break,
            _ = usr1.recv() => {
                own_log::notice("SIGUSR1 received: reopening files");
                for d in &ctx.dispatcher.get().destinations {
                    d.reopen();
                }
                continue;
            }
            _ = hup.recv() => (None, false),
            Some(answer) = reload_requests.recv() => (Some(answer), false),
            _ = files_tick.tick() => {
                if read.paths.is_empty() || !read.changed() {
                    continue;
                }
                (None, true)
            }
        };
        // A reload: SIGHUP or `sluice ctl reload` read the configuration file again; a
        // changed pattern database builds the running configuration again.
        notify::reloading();
        let built = match (&reloader, changed_files) {
            (_, true) => {
                let config = read.config.clone();
                build_with(&config, stats.clone(), running.generation + 1)
                    .map_err(|e| e.render(&config.map))
            }
            (None, false) => Err("this server cannot reload (no configuration file)".to_string()),
            (Some(build), false) => build(stats.clone(), running.generation + 1),
        };
        let result = match built {
            Err(e) => Err(e),
            Ok(new) => {
                let text = new.config_text.clone();
                let files = new.read.clone();
                match running.reload(new).await {
                    Ok(()) => {
                        if let Some(c) = &control {
                            *c.config_text.lock().expect("config lock") = text;
                        }
                        read = files;
                        Ok(())
                    }
                    Err(e) => Err(format!("{e:#}")),
                }
            }
        };
        let what = match changed_files {
            true => "a pattern database changed: ",
            false => "",
        };
        match &result {
            Ok(()) => own_log::notice(format!(
                "{what}configuration reloaded; generation={}",
                running.generation
            )),
            Err(e) => own_log::error(format!(
                "{what}reloading the configuration failed; the running configuration stays:\n{e}"
            )),
        }
        // Running again: the new configuration, or the one that stayed.
        notify::ready("running");
        if let Some(answer) = answer {
            let _ = answer.send(result);
        }
    }
    notify::stopping();
    stopping::begin();
    own_log::notice(format!("sluice shutting down; version='{VERSION}'"));
    // Stopping writes what was accepted, giving failing destinations a bounded grace; a
    // second SIGTERM or SIGINT does not wait for it.
    tokio::spawn(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
        own_log::error("a second signal: stopping at once; what was not written yet is lost");
        std::process::exit(1);
    });
    services.abort_all();
    if let Some(ino) = ctl_ino {
        control::Control::remove(&ctl_path, ino);
    }
    let _ = running.globals_stop.send(true);
    for stop in running.source_stops.values() {
        let _ = stop.send(true);
    }
    while running.tasks.join_next().await.is_some() {}
    own_log::unsubscribe();
    let dispatcher = ctx.dispatcher.get();
    tokio::task::spawn_blocking(move || {
        for d in &dispatcher.destinations {
            d.shutdown();
        }
    })
    .await
    .context("stopping the writers")?;
    Ok(())
}
