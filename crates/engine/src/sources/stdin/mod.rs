//! `stdin()`: reads the process's standard input; at end of input, waits until everything it
//! read is written and then asks sluice to stop, as syslog-ng does.

use super::driver::{local, no_value, Built, Common, SourceDriver};
use super::{read_stream, Context, Local, ReaderSpec};
use crate::options::MULTI_LINE;
use sluice_config::declared::Options;
use sluice_config::{ConfigError, Node};
use sluice_model::values::name_id;
use sluice_protocol::Text;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use tokio::sync::watch;

#[derive(Clone, Debug)]
pub struct StdinSource {
    pub local: Local,
}

impl super::Source for StdinSource {
    fn source_name(&self) -> &Arc<str> {
        &self.local.source_name
    }

    fn place(&self) -> super::Place {
        super::Place {
            kind: "stdin",
            address: "stdin".to_string(),
        }
    }

    /// A successor of the same source (a reload that changed `stdin()`) reads nothing itself:
    /// its predecessor's reader goes on, like a connection of a changed listener, with the new
    /// parsing options.
    fn bind(self: Arc<Self>, held: Option<super::Held>) -> std::io::Result<Box<dyn super::Ready>> {
        Ok(Box::new(ReadStdin {
            source: self,
            reads: !held.is_some_and(|h| h.same_source),
        }))
    }

    fn reader(&self) -> Option<&ReaderSpec> {
        Some(&self.local.reader)
    }

    fn one_per_configuration(&self) -> bool {
        true
    }
}

/// Standard input, one for the process. A reader that stops (its source removed by a reload)
/// puts it back with the read it had under way, for the next `stdin()` to go on from: a new
/// handle would leave that read to take the next line and lose it.
static STDIN: std::sync::Mutex<Option<tokio::io::Stdin>> = std::sync::Mutex::new(None);

struct ReadStdin {
    source: Arc<StdinSource>,
    /// No predecessor reads it already.
    reads: bool,
}

impl super::Ready for ReadStdin {
    fn hand_over(&self) -> Vec<OwnedFd> {
        std::io::stdin()
            .as_fd()
            .try_clone_to_owned()
            .into_iter()
            .collect()
    }

    fn run(
        self: Box<Self>,
        ctx: Context,
        _: watch::Receiver<super::Retire>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> {
        Box::pin(async move {
            if self.reads {
                self.source.read(ctx).await;
            }
        })
    }
}

impl StdinSource {
    /// Reads to the end; then asks sluice to stop once all of it is written. A reload that
    /// removes the source stops it.
    async fn read(&self, ctx: Context) {
        // syslog-ng's `stdin()` is a file source named `-`.
        let origin = self
            .local
            .origin(vec![(name_id("FILE_NAME"), Text::Static(b"-"))]);
        let window = self.local.reader.window();
        let mut stdin = STDIN
            .lock()
            .expect("stdin lock")
            .take()
            .unwrap_or_else(tokio::io::stdin);
        read_stream(
            &mut stdin,
            origin,
            &self.local.reader,
            &window,
            &ctx,
            "stdin",
            None,
        )
        .await;
        *STDIN.lock().expect("stdin lock") = Some(stdin);
        ctx.drained(&window).await;
        if !*ctx.shutdown.borrow() {
            let _ = ctx.finished.send(()).await;
        }
    }
}

/// The declaration: the names it answers to, its options, a valid use, its build.
pub static DRIVER: SourceDriver = SourceDriver {
    names: &["stdin"],
    about: "sluice's standard input; sluice stops at its end.",
    options: &[MULTI_LINE],
    sample: "stdin()",
    build: stdin,
};

/// `stdin()`: what sluice is given on its standard input, to its end.
fn stdin(node: &Node, _: &mut Options, common: Common) -> Result<Built, ConfigError> {
    no_value(node)?;
    let mut local = local(node, common, "");
    // Its reader outlives a reload that changes the source: it finds its new parsing options
    // under this name.
    local.reader.listener = Arc::from("stdin()");
    Ok(Arc::new(StdinSource { local }))
}
