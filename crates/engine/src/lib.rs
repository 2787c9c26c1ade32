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
//! 2. Every listener is bound (`Running::listen`); a port in use fails the start. Each gets
//!    its own retire signal and a duplicate of its socket; its connections get their source's
//!    stop (`Running::source_stops`).
//! 3. The control socket, Prometheus, `stdin()` and `internal()` start; a detached sluice
//!    without `internal()` sends its own messages to the host's syslog socket.
//! 4. The launcher is told the daemon started (`started`); signals are handled from here.
//!
//! # Reload (`Running::reload`)
//!
//! 1. The new configuration is built; one that does not build changes nothing.
//! 2. Sources whose statement (and `options {}`, templates) did not change are kept whole.
//! 3. Every listener of a changed or new source is bound now, or takes over the socket of the
//!    retiring listener at its address: a port in use fails the reload before anything changed.
//! 4. Destinations are kept, or started taking over their predecessor's queue.
//! 5. Retiring listeners stop accepting (handing their socket over, or closing it); the
//!    connections of removed sources stop, those of changed sources go on. A changed or new
//!    `internal()` takes sluice's own messages from here; the one it replaces finishes what it
//!    holds.
//! 6. The new dispatcher replaces the old; readers take it at their next read, with their
//!    listener's new parsing options. The new listeners start.
//! 7. Once no read prepared with the old dispatcher is in flight, destinations no one kept
//!    finish what they hold and stop.
//!
//! # Shutdown
//!
//! 1. SIGTERM, SIGINT or `sluice ctl stop`: every source stop is set; readers stop reading,
//!    queue what they read (waiting at most `STOP_GRACE` for a destination that takes nothing)
//!    and return. A second signal exits at once.
//! 2. Destinations write what they hold (failing files are tried for a bounded grace) and stop.
//! 3. The control socket is removed if it is still sluice's; the pid file by the caller.

pub mod build;
pub mod control;
pub mod destinations;
pub mod dispatch;
pub mod dns;
pub mod internal;
pub mod options;
pub mod sources;
pub mod stats;
pub mod tls;
pub mod window;

pub use build::{build, build_with, Fingerprints, Pipeline};

use anyhow::Context as _;
use dispatch::Current;
use sources::datagram::{Bind, DatagramSource};
use sources::internal::InternalSource;
use sources::stream::{Listen, StreamSource};
use sources::{Context, Listener, Retire};
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

/// Binds, trying again every 100 ms until `deadline` (when given): after a reload the source
/// being replaced may still hold the port for a moment.
async fn bind_until<B>(
    deadline: Option<std::time::Instant>,
    bind: impl Fn() -> std::io::Result<B>,
) -> std::io::Result<B> {
    loop {
        match bind() {
            Err(_) if deadline.is_some_and(|d| std::time::Instant::now() < d) => {
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            result => return result,
        }
    }
}

/// A running network or unix listener: what a reload compares, and how to stop it alone.
struct Listening {
    name: Arc<str>,
    /// Where it listens (`Listener::address`), and `Listener::KIND`.
    address: String,
    kind: &'static str,
    fingerprint: Option<String>,
    retire: watch::Sender<Retire>,
    /// A second descriptor of its socket, for a successor to take over at a reload.
    socket: Option<std::os::fd::OwnedFd>,
}

/// Sources to start, each with its socket when it was bound (or taken over) beforehand.
type ToStart<S> = Vec<(Arc<S>, Option<<S as Listener>::Bound>)>;

/// Binds now each of `sources` whose address no running listener holds, and takes over the
/// socket of a listener that `retiring` holds at the same address (`None` there: a kept
/// listener holds it, and the bind is tried once the reload is done). Returns the sources and
/// the addresses taken over.
/// Listeners' sockets by kind and address (see [`bind_new`]).
type Held<'a> =
    std::collections::HashMap<(&'static str, &'a str), Option<&'a std::os::fd::OwnedFd>>;

fn bind_new<S: Listener>(
    sources: Vec<Arc<S>>,
    held: &Held<'_>,
    taken: &mut std::collections::HashSet<(&'static str, String)>,
) -> anyhow::Result<ToStart<S>> {
    sources
        .into_iter()
        .map(|s| {
            let address = s.address();
            let bound = match held.get(&(S::KIND, address.as_str())) {
                Some(Some(socket)) => {
                    let adopted = socket.try_clone().and_then(|fd| s.adopt(fd));
                    match adopted {
                        Ok(bound) => {
                            taken.insert((S::KIND, address));
                            Some(bound)
                        }
                        Err(_) => None,
                    }
                }
                Some(None) => None,
                None => Some(s.bind().with_context(|| cannot_listen(&*s))?),
            };
            Ok((s, bound))
        })
        .collect()
}

fn cannot_listen<S: Listener>(s: &S) -> String {
    format!(
        "source {}: cannot listen on {}",
        s.source_name(),
        s.address()
    )
}

/// A running `internal()` source: what a reload compares, how to stop it, its task.
struct InternalRunning {
    name: Arc<str>,
    fingerprint: Option<String>,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

/// What the main loop keeps of the running configuration.
struct Running {
    ctx: Context,
    fingerprints: Fingerprints,
    listening: Vec<Listening>,
    /// Per source name, what stops its connections: a reload that changes a source keeps
    /// them (they route by its name); one that removes it stops them.
    source_stops: std::collections::HashMap<Arc<str>, watch::Sender<bool>>,
    /// The `internal()` source, when the configuration has one.
    internal: Option<InternalRunning>,
    tasks: tokio::task::JoinSet<()>,
    globals_stop: watch::Sender<bool>,
    generation: u64,
    state_dir: std::path::PathBuf,
}

impl Running {
    /// Binds `streams` and `datagrams` and starts serving them, each with a stop of its own.
    /// A port still held by a source being stopped is tried again for a few seconds.
    async fn listen(
        &mut self,
        streams: ToStart<StreamSource>,
        datagrams: ToStart<DatagramSource>,
        fingerprints: &Fingerprints,
        retry: bool,
    ) -> anyhow::Result<()> {
        self.start(streams, fingerprints, retry).await?;
        self.start(datagrams, fingerprints, retry).await
    }

    /// Serves each of `sources`, binding those not bound beforehand.
    async fn start<S: Listener>(
        &mut self,
        sources: ToStart<S>,
        fingerprints: &Fingerprints,
        retry: bool,
    ) -> anyhow::Result<()> {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        for (s, bound) in sources {
            let bound = match bound {
                Some(bound) => bound,
                None => bind_until(retry.then_some(deadline), || s.bind())
                    .await
                    .with_context(|| cannot_listen(&*s))?,
            };
            let name = s.source_name().clone();
            let (retire, retired) = watch::channel(Retire::Serving);
            self.listening.push(Listening {
                name: name.clone(),
                address: s.address(),
                kind: S::KIND,
                fingerprint: fingerprints.sources.get(&*name).cloned(),
                retire,
                socket: S::duplicate(&bound).ok(),
            });
            let ctx = Context {
                shutdown: self.source_stop(&name),
                ..self.ctx.clone()
            };
            self.tasks.spawn(s.serve(bound, ctx, retired));
        }
        Ok(())
    }

    /// Starts `internal()`: sluice's own messages go to it from now on.
    fn start_internal(&mut self, s: Arc<InternalSource>, fingerprints: &Fingerprints) {
        let events = internal::subscribe(1024);
        let (stop, stopped) = watch::channel(false);
        let ctx = Context {
            shutdown: stopped,
            ..self.ctx.clone()
        };
        self.internal = Some(InternalRunning {
            name: s.source_name.clone(),
            fingerprint: fingerprints.sources.get(&*s.source_name).cloned(),
            stop,
            task: tokio::spawn(s.serve(events, ctx)),
        });
    }

    /// Keeps `internal()` when its statement did not change; otherwise starts the new one
    /// (which takes the messages from now on) and lets the old one finish what it holds.
    fn reload_internal(
        &mut self,
        new: Option<Arc<InternalSource>>,
        fingerprints: &Fingerprints,
        same_shared: bool,
    ) {
        let kept = match (&self.internal, &new) {
            (Some(old), Some(s)) => {
                same_shared
                    && old.name == s.source_name
                    && old.fingerprint.is_some()
                    && old.fingerprint.as_ref() == fingerprints.sources.get(&*s.source_name)
            }
            _ => false,
        };
        if kept {
            return;
        }
        let old = self.internal.take();
        match new {
            Some(s) => self.start_internal(s, fingerprints),
            None => internal::unsubscribe(),
        }
        if let Some(old) = old {
            let _ = old.stop.send(true);
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
            internal::warning(note.clone());
        }
        let old = self.ctx.dispatcher.get();
        let same_shared = new.fingerprints.shared == self.fingerprints.shared;
        // Sources: stop the changed and removed ones, keep the rest, start the new. A source
        // has a listener for each of its drivers and is kept or restarted whole: decided once
        // per source, before any of its listeners is looked at.
        let mut streams = std::mem::take(&mut new.streams);
        let mut datagrams = std::mem::take(&mut new.datagrams);
        let used: std::collections::HashSet<Arc<str>> = streams
            .iter()
            .map(|s| s.source_name.clone())
            .chain(datagrams.iter().map(|s| s.source_name.clone()))
            .collect();
        let kept_sources: std::collections::HashSet<Arc<str>> = self
            .listening
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
        streams.retain(|s| !kept_sources.contains(&s.source_name));
        datagrams.retain(|s| !kept_sources.contains(&s.source_name));
        // Every new listener is bound now, before anything changes: a port in use fails the
        // reload with everything still running. One on the address of a listener that is
        // retiring takes over its socket, so that nothing the kernel queued meanwhile is
        // refused. (One on a kept listener's address is tried once the reload is done.)
        let held: Held<'_> = self
            .listening
            .iter()
            .map(|l| {
                let socket = l
                    .socket
                    .as_ref()
                    .filter(|_| !kept_sources.contains(&l.name));
                ((l.kind, l.address.as_str()), socket)
            })
            .collect();
        let mut taken = std::collections::HashSet::new();
        let stream_starts = bind_new(streams, &held, &mut taken)?;
        let datagram_starts = bind_new(datagrams, &held, &mut taken)?;
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

        // Listeners of changed and removed sources stop accepting: handing their socket over
        // where a successor took it, closing it otherwise. Connections of a changed source go
        // on; those of a removed one stop.
        let mut listening = Vec::new();
        for l in std::mem::take(&mut self.listening) {
            if kept_sources.contains(&l.name) {
                listening.push(l);
            } else if taken.contains(&(l.kind, l.address.clone())) {
                let _ = l.retire.send(Retire::HandOver);
            } else {
                let _ = l.retire.send(Retire::Close);
            }
        }
        self.listening = listening;
        let internal_source = new.internal.take();
        self.reload_internal(internal_source, &new.fingerprints, same_shared);
        self.source_stops.retain(|name, stop| {
            let stays = used.contains(name);
            if !stays {
                let _ = stop.send(true);
            }
            stays
        });
        self.generation = new.dispatcher.generation;
        // The new routing takes over before new listeners accept.
        drop(old);
        let old = self.ctx.dispatcher.replace(new.dispatcher.clone());
        let listened = self
            .listen(stream_starts, datagram_starts, &new.fingerprints, true)
            .await;
        self.fingerprints = new.fingerprints;
        // Reads prepared with the old routing hold it until they are queued: then the
        // destinations no one uses any more finish what they hold and stop.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while Arc::strong_count(&old) > 1 && std::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
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
        listened
    }
}

/// For a detached sluice whose configuration reads no `internal()`: sends its own messages
/// to the host's syslog socket, and says on standard error (still the terminal) where they go.
fn keep_own_messages(own_sockets: &[&std::path::Path]) {
    let Some(path) = internal::host_log_socket(own_sockets) else {
        internal::warning(
            "once detached, sluice's own messages are not kept: no log path reads internal() and \
             this host has no syslog socket (/dev/log); add internal() to a log path to keep them",
        );
        return;
    };
    match internal::send_to_host_log(&path) {
        Ok(()) => eprintln!(
            "sluice: its own messages go to {} (no log path reads internal())",
            path.display()
        ),
        Err(e) => internal::warning(format!(
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
        internal::warning(note.clone());
    }
    // From here on the routing lives in `ctx.dispatcher` only, so that a reload can tell when
    // no reader uses the one it replaced.
    let Pipeline {
        globals,
        streams,
        datagrams,
        stdin,
        internal: internal_source,
        dispatcher,
        stats,
        config_text,
        fingerprints,
        notes: _,
    } = p;
    // Open disk buffers (replaying what they hold) and bind before reporting the start, so
    // that an unusable buffer or a port in use fails the start.
    for d in &dispatcher.destinations {
        d.start(&opts.state_dir, None)
            .context("starting a destination")?;
    }
    let (stop_tx, stop_rx) = watch::channel(false);
    let ctx = Context {
        dispatcher: Arc::new(Current::new(dispatcher)),
        shutdown: stop_rx,
    };
    let mut running = Running {
        ctx: ctx.clone(),
        fingerprints: fingerprints.clone(),
        listening: Vec::new(),
        source_stops: std::collections::HashMap::new(),
        internal: None,
        tasks: tokio::task::JoinSet::new(),
        globals_stop: stop_tx,
        generation: ctx.dispatcher.get().generation,
        state_dir: opts.state_dir.clone(),
    };
    if opts.detached && internal_source.is_none() {
        let own: Vec<&std::path::Path> = streams
            .iter()
            .filter_map(|s| match &s.listen {
                Listen::Unix(u) => Some(&*u.path),
                Listen::Tcp(_) => None,
            })
            .chain(datagrams.iter().filter_map(|s| match &s.bind {
                Bind::Unix(u) => Some(&*u.path),
                Bind::Udp(_) => None,
            }))
            .collect();
        keep_own_messages(&own);
    }
    sources::stream::raise_open_files_limit(streams.iter().map(|s| s.max_connections).sum());
    let streams = streams.into_iter().map(|s| (s, None)).collect();
    let datagrams = datagrams.into_iter().map(|s| (s, None)).collect();
    running
        .listen(streams, datagrams, &fingerprints, false)
        .await?;
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
                internal::WARNING
            } else {
                internal::NOTICE
            };
            internal::emit(
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
                internal::warning(format!(
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
    if let Some(s) = internal_source {
        running.start_internal(s, &fingerprints);
    }
    let (stdin_done_tx, mut stdin_done) = mpsc::channel(1);
    if let Some(s) = &stdin {
        running
            .tasks
            .spawn(s.clone().serve(ctx.clone(), stdin_done_tx.clone()));
    }
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
    stats.set_max_dynamics(globals.stats_max_dynamics);
    if globals.stats_freq > 0 {
        let stats = stats.clone();
        let every = std::time::Duration::from_secs(globals.stats_freq);
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
        let answer: Option<tokio::sync::oneshot::Sender<Result<(), String>>> = tokio::select! {
            _ = term.recv() => break,
            _ = int.recv() => break,
            Some(()) = stdin_done.recv() => break,
            Some(()) = ctl_stop.recv() => break,
            _ = usr1.recv() => {
                internal::notice("SIGUSR1 received: reopening files");
                for d in &ctx.dispatcher.get().destinations {
                    d.reopen();
                }
                continue;
            }
            _ = hup.recv() => None,
            Some(answer) = reload_requests.recv() => Some(answer),
        };
        // A reload: SIGHUP or `sluice ctl reload`.
        let result = match &reloader {
            None => Err("this server cannot reload (no configuration file)".to_string()),
            Some(build) => match build(stats.clone(), running.generation + 1) {
                Err(e) => Err(e),
                Ok(new) => {
                    let text = new.config_text.clone();
                    match running.reload(new).await {
                        Ok(()) => {
                            if let Some(c) = &control {
                                *c.config_text.lock().expect("config lock") = text;
                            }
                            Ok(())
                        }
                        Err(e) => Err(format!("{e:#}")),
                    }
                }
            },
        };
        match &result {
            Ok(()) => internal::notice(format!(
                "configuration reloaded; generation={}",
                running.generation
            )),
            Err(e) => internal::error(format!(
                "reloading the configuration failed; the running configuration stays:\n{e}"
            )),
        }
        if let Some(answer) = answer {
            let _ = answer.send(result);
        }
    }
    internal::notice(format!("sluice shutting down; version='{VERSION}'"));
    // Stopping writes what was accepted, giving failing destinations a bounded grace; a
    // second SIGTERM or SIGINT does not wait for it.
    tokio::spawn(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
        internal::error("a second signal: stopping at once; what was not written yet is lost");
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
    if let Some(i) = &running.internal {
        let _ = i.stop.send(true);
    }
    while running.tasks.join_next().await.is_some() {}
    internal::unsubscribe();
    if let Some(i) = running.internal.take() {
        let _ = i.task.await;
    }
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
