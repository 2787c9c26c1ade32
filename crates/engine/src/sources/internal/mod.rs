//! `internal()`: sluice's own messages (see [`crate::own_log`]) as log messages with
//! facility `syslog`, program `sluice` and this machine as host.

use super::driver::{no_value, Built, Common, SourceDriver};
use super::{Context, Retire};
use crate::dns;
use crate::own_log::Event;
use crate::window::Window;
use sluice_config::declared::Options;
use sluice_config::{ConfigError, Node};
use sluice_model::{Ingest, LogMessage, Origin, UnixTime};
use sluice_protocol::framing::Framing;
use sluice_protocol::{Span, SyslogFields, Text};
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio::sync::watch;

pub struct InternalSource {
    pub ingest: Arc<Ingest>,
    pub window: u32,
    pub source_name: Arc<str>,
    pub source_id: u16,
    pub use_fqdn: bool,
    pub counted: super::SourceCounters,
}

const BATCH: usize = 64;

/// The kind of place `internal()` reads: sluice's own messages.
pub const KIND: &str = "internal";

impl super::Source for InternalSource {
    fn source_name(&self) -> &Arc<str> {
        &self.source_name
    }

    fn place(&self) -> super::Place {
        super::Place {
            kind: KIND,
            address: "internal()".to_string(),
        }
    }

    fn bind(self: Arc<Self>, _: Option<super::Held>) -> std::io::Result<Box<dyn super::Ready>> {
        Ok(Box::new(self))
    }

    fn descriptors(&self) -> usize {
        0
    }

    fn one_per_configuration(&self) -> bool {
        true
    }
}

impl super::Ready for Arc<InternalSource> {
    /// Takes sluice's own messages from now on: a predecessor's queue ends once it has
    /// passed on what it holds. Retired with no successor, it lets go of them.
    fn run(
        self: Box<Self>,
        ctx: Context,
        mut retire: watch::Receiver<Retire>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> {
        let events = crate::own_log::subscribe(1024);
        let source = *self;
        Box::pin(async move {
            tokio::spawn(async move {
                if retire.wait_for(|r| *r == Retire::Close).await.is_ok() {
                    crate::own_log::unsubscribe();
                }
            });
            source.serve(events, ctx).await
        })
    }
}

impl InternalSource {
    async fn serve(self: Arc<Self>, mut events: mpsc::Receiver<Event>, ctx: Context) {
        let mut routed = super::Routed::new(Arc::new(Origin {
            source_name: self.source_name.clone(),
            source_id: self.source_id,
            peer: None,
            host_from: dns::local_name(self.use_fqdn),
            local: true,
            pairs: Vec::new(),
            endpoints: Default::default(),
        }));
        let pid: Arc<[u8]> = Arc::from(std::process::id().to_string().as_bytes());
        let window = Window::new(self.window);
        let mut batch = Vec::with_capacity(BATCH);
        let mut shutdown = ctx.shutdown.clone();
        loop {
            let received = tokio::select! {
                biased;
                n = events.recv_many(&mut batch, BATCH) => Some(n),
                _ = shutdown.wait_for(|stop| *stop) => None,
            };
            let n = match received {
                Some(n) => n,
                None => {
                    // Stopping: take what is queued, then no more.
                    events.close();
                    events.recv_many(&mut batch, usize::MAX).await
                }
            };
            if n == 0 {
                break;
            }
            let dispatcher = ctx.dispatcher.get();
            let Some(origin) = routed.origin(&dispatcher) else {
                break;
            };
            let now = UnixTime::now(&self.ingest.local_zone);
            let mut msgs: Vec<LogMessage> = batch
                .iter()
                .map(|e| {
                    if let Some(made) = &e.made {
                        return as_internal(made.get(), origin, &self.ingest);
                    }
                    let fields = SyslogFields {
                        pri: 5 * 8 + u16::from(e.severity),
                        program: Some(Text::Static(b"sluice")),
                        pid: Some(Text::Shared(pid.clone())),
                        message: Text::Span(Span::new(0, e.text.len())),
                        utf8: true,
                        ..SyslogFields::default()
                    };
                    LogMessage {
                        raw: e.text.as_bytes(),
                        fields,
                        stamp: now,
                        recvd: now,
                        origin,
                        // `$HOST` is this machine's name, the origin's.
                        host_is_sender: true,
                        tags: self.ingest.tags.clone(),
                        chained_hostname: false,
                        keep_raw: false,
                        values: Default::default(),
                    }
                })
                .collect();
            self.counted.add(msgs.len());
            let Some(ack) = ctx.credits(&window, msgs.len() as u32, "internal()").await else {
                break;
            };
            dispatcher.dispatch(&mut msgs, &ack);
            drop(msgs);
            batch.clear();
            let stopping = *shutdown.borrow();
            if stopping && events.is_closed() && events.is_empty() {
                break;
            }
        }
    }
}

/// A message a correlating parser made with `inject-mode(internal)`, as syslog-ng's
/// `internal()` posts it: its fields and pairs as made, its source `internal()` (and its
/// tags); `$HOST` the name of its sender (this machine's when it has none) unless the source
/// keeps host names.
fn as_internal<'a>(
    made: &'a LogMessage<'_>,
    origin: &'a Origin,
    ingest: &Ingest,
) -> LogMessage<'a> {
    let mut fields = made.fields.clone();
    let sender = &made.origin.host_from;
    let host: &[u8] = match ingest.keep_hostname {
        true => made.host(),
        false if !sender.is_empty() => sender,
        false => &origin.host_from,
    };
    fields.host = Some(Text::owned(host));
    let mut tags = made.tags.clone();
    for tag in ingest.tags.iter() {
        tags.insert(tag);
    }
    LogMessage {
        raw: made.raw,
        fields,
        stamp: made.stamp,
        recvd: made.recvd,
        origin,
        host_is_sender: false,
        tags,
        chained_hostname: made.chained_hostname,
        keep_raw: made.keep_raw,
        values: made.values.clone(),
    }
}

/// The declaration: the names it answers to, its options, a valid use, its build.
pub static DRIVER: SourceDriver = SourceDriver {
    names: &["internal"],
    about: "sluice's own messages.",
    options: &[],
    sample: "internal()",
    build: internal,
};

/// `internal()`: sluice's own messages.
fn internal(node: &Node, _: &mut Options, common: Common) -> Result<Built, ConfigError> {
    no_value(node)?;
    let mut common = common;
    common.opts.flags.local = true;
    let ingest = common.ingest();
    let window = common.opts.log_iw_size;
    Ok(Arc::new(InternalSource {
        ingest: ingest.clone(),
        window,
        source_name: common.cx.name.clone(),
        source_id: common.cx.id,
        use_fqdn: common.opts.use_fqdn,
        counted: common
            .reader(node, &ingest, "", Framing::Newline, window, "")
            .counted,
    }))
}
