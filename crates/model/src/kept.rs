//! A message kept past the read that carried it: the messages of a correlation context, and
//! the messages a context makes when it ends on a timer.
//!
//! A [`LogMessage`] borrows its frame and [`Origin`] from its read; a [`Kept`] message owns a
//! copy of both and lends out a `LogMessage` that borrows them, so every template, filter and
//! destination reads it as it reads any other message. Keeping copies the frame once; the
//! fields stay spans of the copy. Kept messages of one origin share one copy of it.

use crate::message::{LogMessage, Origin};
use std::cell::RefCell;
use std::sync::Arc;

/// What a kept message borrows from.
struct Owned {
    raw: Box<[u8]>,
    origin: Arc<Origin>,
}

thread_local! {
    /// The origin this thread kept a message of last: the next message it keeps is most
    /// likely of the same connection.
    static LAST_ORIGIN: RefCell<Option<Arc<Origin>>> = const { RefCell::new(None) };
}

/// A shared copy of `origin`.
fn shared(origin: &Origin) -> Arc<Origin> {
    LAST_ORIGIN.with_borrow_mut(|last| match last {
        Some(o) if **o == *origin => o.clone(),
        _ => last.insert(Arc::new(origin.clone())).clone(),
    })
}

self_cell::self_cell!(
    struct Cell {
        owner: Owned,
        #[covariant]
        dependent: LogMessage,
    }
);

/// A message with its own copy of its frame and origin.
pub struct Kept(Cell);

impl Kept {
    /// A copy of `msg` that outlives its read.
    pub fn of(msg: &LogMessage) -> Kept {
        let owned = Owned {
            raw: msg.raw.into(),
            origin: shared(msg.origin),
        };
        Kept(Cell::new(owned, |o| LogMessage {
            raw: &o.raw,
            origin: &o.origin,
            fields: msg.fields.clone(),
            stamp: msg.stamp,
            recvd: msg.recvd,
            host_is_sender: msg.host_is_sender,
            tags: msg.tags.clone(),
            chained_hostname: msg.chained_hostname,
            keep_raw: msg.keep_raw,
            values: msg.values.clone(),
        }))
    }

    /// A message from `origin` with no frame of its own, its fields made by `make`.
    pub fn made(origin: Origin, make: impl for<'a> FnOnce(&'a Origin) -> LogMessage<'a>) -> Kept {
        let owned = Owned {
            raw: Box::default(),
            origin: Arc::new(origin),
        };
        Kept(Cell::new(owned, |o| make(&o.origin)))
    }

    pub fn get(&self) -> &LogMessage<'_> {
        self.0.borrow_dependent()
    }

    /// What this message holds, for the memory budget: its frame, its fields and pairs, and
    /// the cell around them (the origin is shared, and not counted).
    pub fn held_bytes(&self) -> u64 {
        let msg = self.get();
        (std::mem::size_of::<Owned>()
            + std::mem::size_of::<LogMessage>()
            + msg.raw.len()
            + msg.values.heap_bytes()
            + msg.tags.heap_bytes()) as u64
    }

    /// Changes the message (a synthetic one as it is made).
    pub fn change(&mut self, f: impl FnOnce(&mut LogMessage<'_>)) {
        self.0.with_dependent_mut(|_, msg| f(msg));
    }
}

impl std::fmt::Debug for Kept {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.get().fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::message;

    #[test]
    fn a_kept_message_reads_as_the_original_after_the_read_is_gone() {
        let frame = b"<13>Jan  1 00:00:00 host prog[7]: text".to_vec();
        let kept = {
            let parsed = crate::testing::parsed(&frame);
            Kept::of(&parsed)
        };
        drop(frame);
        let msg = kept.get();
        assert_eq!(msg.program(), b"prog");
        assert_eq!(msg.pid(), b"7");
        assert_eq!(msg.message(), b"text");
        assert_eq!(msg.host(), b"host");
        let mut kept = Kept::of(&message("<13>Jan  1 00:00:00 host prog: x"));
        kept.change(|m| m.set_host(sluice_protocol::Text::Static(b"other")));
        assert_eq!(kept.get().host(), b"other");
    }
}
