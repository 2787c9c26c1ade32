//! `systemd-journal()`: this machine's journal, entry by entry, as syslog-ng reads it.
//!
//! A thread of the source's own reads the journal through libsystemd ([`sd_journal`]: its
//! calls block, and a journal is used by one thread) and hands batches of entries on, each
//! entry in the journal's export format ([`sluice_model::journal`]); the source's task parses
//! them into messages (the `Format::Journal` of its [`Ingest`](sluice_model::Ingest)) and
//! dispatches them. A full window stops the task, a full channel the thread: the journal is
//! read no faster than destinations write.
//!
//! Position: each batch's acknowledgement comes back when every destination wrote its
//! messages, and the cursor of its last entry is then kept in the persist file
//! (`journal:*`, the namespace's), in order — as a file's position is. A restart goes on
//! after that entry; `kill -9` repeats at most the batches that were in flight. Without a
//! cursor the journal is read from its start (`read-old-records(yes)`, syslog-ng's default)
//! or from now on; with a cursor the journal no longer holds (rotated away while sluice was
//! stopped), from its start, as syslog-ng does; after a corrupt persist file, from now on.

use super::sd_journal::{self, Journal};
use crate::own_log as log;
use crate::persist::{self, Found};
use crate::sources::{Context, Local, Retire};
use crate::window::Delivered;
use sluice_model::{journal, Ingest, LogMessage, Origin, Today, UnixTime};
use std::future::Future;
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::pin::Pin;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot, watch};

#[derive(Debug)]
pub struct JournalSource {
    /// How its messages are read (`Format::Journal`) and counted.
    pub local: Local,
    /// `namespace()` as written: `*` (every namespace), `+name` (one and the default), a
    /// name, or empty (the default).
    pub namespace: String,
    /// `matches("_COMM" => "sshd")`: `FIELD=value`, each.
    pub matches: Vec<String>,
    /// `match-boot(yes)`: only entries of the running boot.
    pub match_boot: bool,
    /// `read-old-records()`: the first start reads what the journal holds already.
    pub read_old_records: bool,
    /// `max-field-size()`.
    pub max_field_size: usize,
}

/// The kind of place a journal source reads.
pub const KIND: &str = "systemd-journal";

/// The most entries in a batch.
const BATCH: usize = 256;

impl crate::sources::Source for JournalSource {
    fn source_name(&self) -> &Arc<str> {
        &self.local.source_name
    }

    fn place(&self) -> crate::sources::Place {
        crate::sources::Place {
            kind: KIND,
            address: self.namespace.clone(),
        }
    }

    /// Opens the journal: a journal that cannot be opened (no libsystemd, no journal
    /// files) fails the start, as in syslog-ng.
    fn bind(
        self: Arc<Self>,
        _: Option<crate::sources::Held>,
    ) -> std::io::Result<Box<dyn crate::sources::Ready>> {
        let journal = self
            .open()
            .map_err(|e| std::io::Error::new(e.kind(), format!("systemd-journal(): {e}")))?;
        Ok(Box::new(Ready {
            source: self,
            journal,
        }))
    }

    fn reader(&self) -> Option<&crate::sources::ReaderSpec> {
        Some(&self.local.reader)
    }

    fn descriptors(&self) -> usize {
        // The journal's files and its inotify descriptor.
        8
    }

    /// Two readers of one namespace would each keep a cursor under one name.
    fn one_per_configuration(&self) -> bool {
        true
    }
}

impl JournalSource {
    /// The name its cursor is kept under.
    fn key(&self) -> String {
        format!("journal:{}", self.namespace)
    }

    fn open(&self) -> std::io::Result<Journal> {
        let mut flags = sd_journal::LOCAL_ONLY;
        let name = match self.namespace.as_str() {
            "*" => {
                flags |= sd_journal::ALL_NAMESPACES;
                None
            }
            "" => None,
            n => match n.strip_prefix('+') {
                Some(n) => {
                    flags |= sd_journal::INCLUDE_DEFAULT_NAMESPACE;
                    Some(n).filter(|n| !n.is_empty())
                }
                None => Some(n),
            },
        };
        let mut journal = Journal::open(name, flags)?;
        for m in &self.matches {
            journal.add_match(m)?;
        }
        if self.match_boot {
            journal.add_match(&format!("_BOOT_ID={}", boot_id()?))?;
        }
        journal.set_data_threshold(self.max_field_size)?;
        Ok(journal)
    }

    /// Puts the journal where reading goes on: after the last entry delivered, else as
    /// `read-old-records()` says.
    fn seek(&self, journal: &mut Journal) -> std::io::Result<()> {
        match persist::find_cursor(&self.key()) {
            Found::At(cursor) => {
                if !journal.seek_cursor(&cursor)? {
                    log::warning(format!(
                        "source {}: systemd-journal() no longer holds the entry it read last ({cursor}); reading the journal from its start",
                        self.local.source_name
                    ));
                    journal.seek_head()?;
                }
                Ok(())
            }
            Found::New if self.read_old_records => journal.seek_head(),
            Found::New | Found::Unknown => journal.seek_tail(),
        }
    }
}

/// The running boot's id, as the journal writes it (`_BOOT_ID`: 32 hex digits).
fn boot_id() -> std::io::Result<String> {
    let id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map_err(|e| std::io::Error::new(e.kind(), format!("reading the boot id: {e}")))?;
    Ok(id.trim().replace('-', ""))
}

struct Ready {
    source: Arc<JournalSource>,
    journal: Journal,
}

/// Entries read together: each in the export format, one after another.
struct Batch {
    entries: Vec<u8>,
    /// Where each entry ends in `entries`.
    ends: Vec<usize>,
    /// The cursor of the last one.
    cursor: String,
}

impl crate::sources::Ready for Ready {
    fn run(
        self: Box<Self>,
        ctx: Context,
        retire: watch::Receiver<Retire>,
    ) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        Box::pin(async move {
            let (reading, watcher) = crate::sources::until_retired(&ctx, retire);
            self.source.clone().serve(self.journal, &reading).await;
            watcher.abort();
        })
    }
}

impl JournalSource {
    /// Reads the journal until `ctx` stops; then waits for what was read to be delivered
    /// and keeps the last cursor. A reload's new reader waits for the old one.
    async fn serve(self: Arc<Self>, mut journal: Journal, ctx: &Context) {
        let key = self.key();
        let turn = crate::sources::turn(&key);
        let _turn = turn.lock().await;
        let (batches_tx, mut batches) = mpsc::channel::<Batch>(1);
        // Dropping `stop` wakes the thread from its wait for the journal.
        let (stopped, stop) = match UnixStream::pair() {
            Ok(pipe) => pipe,
            Err(e) => {
                log::error(format!(
                    "source {}: systemd-journal(): {e}",
                    self.local.source_name
                ));
                return;
            }
        };
        let reader = self.clone();
        let most = BATCH.min((self.local.reader.window as usize / 2).max(1));
        let thread = std::thread::Builder::new()
            .name("journal".into())
            .spawn(move || {
                if let Err(e) = reader
                    .seek(&mut journal)
                    .and_then(|()| read_entries(&mut journal, most, &batches_tx, &stopped))
                {
                    log::error(format!(
                        "source {}: systemd-journal() stops reading: {e}",
                        reader.local.source_name
                    ));
                }
            });
        if let Err(e) = thread {
            log::error(format!(
                "source {}: systemd-journal(): {e}",
                self.local.source_name
            ));
            return;
        }
        let (kept_tx, kept_rx) = mpsc::unbounded_channel();
        let keeper = tokio::spawn(keep_cursors(key, kept_rx));
        let window = self.local.reader.window();
        crate::sources::dispatch_batches(
            ctx,
            &self.local,
            "systemd-journal()",
            &window,
            &mut batches,
            &kept_tx,
            crate::sources::Workers::ONE,
        )
        .await;
        // The thread ends at its next wait or batch.
        drop(batches);
        drop(stop);
        drop(kept_tx);
        ctx.keep_last(&window, keeper).await;
    }
}

impl crate::sources::ThreadBatch for Batch {
    type Place = String;

    fn len(&self) -> usize {
        self.ends.len()
    }

    fn messages<'a>(
        &'a self,
        _: &crate::sources::ReaderSpec,
        ingest: &Ingest,
        origin: &'a Origin,
        recvd: UnixTime,
        msgs: &mut Vec<LogMessage<'a>>,
    ) {
        let today = Today::of(recvd);
        msgs.reserve(self.ends.len());
        let mut start = 0;
        for &end in &self.ends {
            ingest.push_message(&self.entries[start..end], origin, recvd, today, msgs);
            start = end;
        }
    }

    /// The cursor of its last entry.
    fn place(&self) -> String {
        self.cursor.clone()
    }
}

/// Reads entries into batches of at most `most` and sends them, until `batches` closes, the
/// other end of `stopped` is dropped, or the journal fails.
fn read_entries(
    journal: &mut Journal,
    most: usize,
    batches: &mpsc::Sender<Batch>,
    stopped: &UnixStream,
) -> std::io::Result<()> {
    loop {
        let mut batch = Batch {
            entries: Vec::with_capacity(most * 512),
            ends: Vec::with_capacity(most),
            cursor: String::new(),
        };
        while batch.ends.len() < most && journal.step()? {
            journal::push_realtime(&mut batch.entries, journal.realtime()?);
            journal.fields(|field| journal::push_field(&mut batch.entries, field))?;
            batch.ends.push(batch.entries.len());
        }
        if batch.ends.is_empty() {
            if !journal.wait(stopped.as_fd())? {
                return Ok(());
            }
            continue;
        }
        batch.cursor = journal.cursor()?;
        if batches.blocking_send(batch).is_err() {
            return Ok(());
        }
    }
}

/// Keeps each batch's cursor once it is delivered, in order, and only then gives the batch's
/// credits back: the reader is never more than a window past the cursor kept. A batch that
/// was not delivered (lost at a stop) ends the keeping: the next start repeats from the
/// last one kept.
async fn keep_cursors(
    key: String,
    mut kept: mpsc::UnboundedReceiver<(String, oneshot::Receiver<Delivered>)>,
) {
    while let Some((cursor, done)) = kept.recv().await {
        let Ok(credits) = done.await else {
            return;
        };
        persist::keep_cursor(&key, &cursor);
        drop(credits);
    }
}
