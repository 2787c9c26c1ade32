//! Values that borrow from the received frame where they can and own memory only where they must.

/// A byte range inside one received frame. `u32` keeps a message's fields small: frames are
/// bounded by `log-msg-size()`, far below 4 GiB.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Span {
    pub start: u32,
    pub end: u32,
}

impl Span {
    pub fn new(start: usize, end: usize) -> Span {
        debug_assert!(start <= end && end <= u32::MAX as usize);
        Span {
            start: start as u32,
            end: end as u32,
        }
    }

    pub fn len(self) -> usize {
        (self.end - self.start) as usize
    }

    pub fn is_empty(self) -> bool {
        self.start == self.end
    }

    /// The bytes this span covers in `frame`.
    #[inline]
    pub fn of(self, frame: &[u8]) -> &[u8] {
        &frame[self.start as usize..self.end as usize]
    }
}

/// A field value: a span of the frame, a constant, or bytes made during parsing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Text {
    Span(Span),
    Static(&'static [u8]),
    Owned(Box<[u8]>),
    /// A value shared by many messages (a `host-override()`, a TLS peer's names).
    Shared(std::sync::Arc<[u8]>),
}

impl Text {
    pub const EMPTY: Text = Text::Static(b"");

    /// The value's bytes; `frame` is the frame the message was parsed from.
    #[inline]
    pub fn of<'a>(&'a self, frame: &'a [u8]) -> &'a [u8] {
        match self {
            Text::Span(span) => span.of(frame),
            Text::Static(bytes) => bytes,
            Text::Owned(bytes) => bytes,
            Text::Shared(bytes) => bytes,
        }
    }

    pub fn owned(bytes: &[u8]) -> Text {
        Text::Owned(bytes.into())
    }
}

impl Default for Text {
    fn default() -> Text {
        Text::EMPTY
    }
}
