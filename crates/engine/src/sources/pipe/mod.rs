//! `pipe("/path")`: reads a named pipe, made (mode 0600) when it is not there. It is opened for
//! reading and writing, as syslog-ng opens it, so that a writer that closes it is no end of
//! input for the next one.

use super::driver::{local, Built, Common, SourceDriver};
use super::{read_stream, until_retired, Context, Local, ReaderSpec, Retire};
use crate::file_open::{make_pipe, FileOptions};
use crate::options::{self, MULTI_LINE};
use sluice_config::declared::{read, Declared, Options};
use sluice_config::{ConfigError, Node};
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use tokio::sync::watch;

/// The declaration: the names it answers to, its options, a valid use, its build.
pub static DRIVER: SourceDriver = SourceDriver {
    names: &["pipe"],
    about: "A named pipe.",
    options: &[PIPE, options::MAKE_FILE, MULTI_LINE],
    sample: "pipe(\"/nonexistent/sluice-table-test\")",
    build: pipe,
};

/// The options of `pipe()` besides how a missing pipe is made ([`options::MAKE_FILE`]):
/// `optional()` is moot, the pipe is sluice's to make.
const PIPE: &[Declared] = &[read("optional", "optional(yes)").about(
    "a source that cannot open its file or device is said and left out",
    "no",
)];

/// `pipe("/var/run/app.pipe")`: a named pipe.
fn pipe(node: &Node, o: &mut Options, common: Common) -> Result<Built, ConfigError> {
    let path = node.first_value().ok_or_else(|| {
        ConfigError::new(node.pos, "pipe() needs a path: pipe(\"/var/run/app.pipe\")")
    })?;
    if !path.text.starts_with('/') {
        return Err(ConfigError::new(
            path.pos,
            format!(
                "pipe(\"{}\"): give the pipe's whole path, from /",
                path.text
            ),
        ));
    }
    o.last("optional").map(Node::bool).transpose()?;
    let mut rules = common.cx.globals.file.clone();
    o.apply(options::MAKE_FILE, |opt| {
        options::apply_file_option(&mut rules, opt)
    })?;
    Ok(Arc::new(PipeSource {
        path: path.text.clone().into(),
        rules,
        local: local(node, common, &path.text),
    }))
}

#[derive(Clone, Debug)]
pub struct PipeSource {
    pub path: PathBuf,
    /// How the pipe is made when it is missing (`perm()`, `owner()`, `create-dirs()`…).
    pub rules: FileOptions,
    pub local: Local,
}

impl super::Source for PipeSource {
    fn source_name(&self) -> &Arc<str> {
        &self.local.source_name
    }

    fn place(&self) -> super::Place {
        super::Place {
            kind: "pipe",
            address: self.path.display().to_string(),
        }
    }

    /// Makes the pipe when it is not there; refuses a path that is something else.
    fn bind(self: Arc<Self>, _: Option<super::Held>) -> std::io::Result<Box<dyn super::Ready>> {
        use std::os::unix::fs::FileTypeExt;
        match std::fs::metadata(&self.path) {
            Ok(m) if m.file_type().is_fifo() => {}
            Ok(_) => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::AlreadyExists,
                    format!("{} is there and is not a named pipe", self.path.display()),
                ))
            }
            Err(_) => make_pipe(&self.path, &self.rules)?,
        }
        let receiver = tokio::net::unix::pipe::OpenOptions::new()
            .read_write(true)
            .open_receiver(&self.path)?;
        Ok(Box::new(Reads(self, receiver)))
    }

    fn reader(&self) -> Option<&ReaderSpec> {
        Some(&self.local.reader)
    }
}

struct Reads(Arc<PipeSource>, tokio::net::unix::pipe::Receiver);

impl super::Ready for Reads {
    fn run(
        self: Box<Self>,
        ctx: Context,
        retire: watch::Receiver<Retire>,
    ) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        let Reads(source, receiver) = *self;
        Box::pin(async move {
            let (reading, watcher) = until_retired(&ctx, retire);
            let window = source.local.reader.window();
            let label = format!("pipe({})", source.path.display());
            read_stream(
                receiver,
                source.local.origin(Vec::new()),
                &source.local.reader,
                &window,
                &reading,
                &label,
                None,
            )
            .await;
            reading.drained(&window).await;
            watcher.abort();
        })
    }
}
