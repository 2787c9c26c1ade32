//! syslog-ng's `str_repr` decoding: a value that may be quoted (`"…"` or `'…'`, with backslash
//! escapes inside), ended by a delimiter its reader defines. `kv-parser()` and syslog-ng's list
//! values (`a,"b c"`) read their values with it.
//!
//! A quoted value with text after its closing quote, or without a closing quote, is not valid:
//! the reader then keeps it as written.

use std::ops::Range;

/// A value: where it stands in the input, or the bytes escapes made of it.
#[derive(Debug, PartialEq, Eq)]
pub enum Piece {
    In(Range<usize>),
    Decoded(Vec<u8>),
}

impl Piece {
    pub fn into_bytes(self, input: &[u8]) -> Vec<u8> {
        match self {
            Piece::In(r) => input[r].to_vec(),
            Piece::Decoded(d) => d,
        }
    }
}

/// What [`decode`] read.
pub struct Decoded {
    pub value: Piece,
    /// Where reading stopped: after the delimiter, or at the end of the input.
    pub end: usize,
    /// The value was well formed; when not, `value` is the input from the start to `end`.
    pub ok: bool,
}

/// Decodes the value starting at `start`. `delimiter(at)` says whether a value ends at `at` and
/// where reading goes on; it is asked only at bytes in `stops` (syslog-ng's delimiter
/// characters), which also let runs of other bytes be taken at once.
pub fn decode(
    input: &[u8],
    start: usize,
    stops: [u8; 2],
    mut delimiter: impl FnMut(usize) -> Option<usize>,
) -> Decoded {
    #[derive(PartialEq)]
    enum State {
        Initial,
        Quoted(u8),
        Escape(u8),
        AfterQuote,
        Junk,
        Unquoted,
        Done(bool),
    }
    let mut state = State::Initial;
    // The value's bytes in the input, or a copy once an escape changed them.
    let mut span = start..start;
    let mut decoded: Option<Vec<u8>> = None;
    let mut cur = start;
    let mut ends_here = |at: usize| {
        if stops.contains(&input[at]) {
            delimiter(at)
        } else {
            None
        }
    };
    while cur < input.len() {
        // Runs of bytes that cannot end or change the state are taken at once.
        let rest = &input[cur..];
        let skip = match state {
            State::Quoted(q) => memchr::memchr2(q, b'\\', rest),
            State::Unquoted | State::Junk => memchr::memchr2(stops[0], stops[1], rest),
            _ => Some(0),
        }
        .unwrap_or(rest.len());
        if skip > 0 {
            match (&state, &mut decoded) {
                (State::Quoted(_), Some(d)) => d.extend_from_slice(&rest[..skip]),
                (State::Quoted(_) | State::Unquoted, None) => span.end = cur + skip,
                _ => {}
            }
            cur += skip;
            if cur >= input.len() {
                break;
            }
        }
        let b = input[cur];
        state = match state {
            State::Initial => match ends_here(cur) {
                Some(next) => {
                    cur = next;
                    State::Done(true)
                }
                None if b == b'"' || b == b'\'' => {
                    span = cur + 1..cur + 1;
                    State::Quoted(b)
                }
                None => {
                    span = cur..cur + 1;
                    State::Unquoted
                }
            },
            State::Quoted(q) if b == q => State::AfterQuote,
            State::Quoted(q) if b == b'\\' => {
                decoded.get_or_insert_with(|| input[span.clone()].to_vec());
                State::Escape(q)
            }
            State::Quoted(q) => {
                match &mut decoded {
                    Some(d) => d.push(b),
                    None => span.end = cur + 1,
                }
                State::Quoted(q)
            }
            State::Escape(q) => {
                unescape(b, q, decoded.as_mut().expect("an escape starts the copy"));
                State::Quoted(q)
            }
            State::AfterQuote | State::Junk | State::Unquoted => match ends_here(cur) {
                Some(next) => {
                    cur = next;
                    State::Done(state != State::Junk)
                }
                None if state == State::Unquoted => {
                    span.end = cur + 1;
                    State::Unquoted
                }
                None => State::Junk,
            },
            State::Done(_) => unreachable!("the loop ends when a value is done"),
        };
        if matches!(state, State::Done(_)) {
            break;
        }
        cur += 1;
    }
    let end = cur.min(input.len());
    let ok = matches!(
        state,
        State::Initial | State::AfterQuote | State::Unquoted | State::Done(true)
    );
    let value = match (ok, decoded) {
        (false, _) => Piece::In(start..end),
        (true, Some(d)) => Piece::Decoded(d),
        (true, None) => Piece::In(span),
    };
    Decoded { value, end, ok }
}

/// The backslash escapes inside a quoted value: `\b \f \n \r \t \\` and the quote itself; any
/// other escaped byte keeps its backslash. `c` follows the backslash.
fn unescape(c: u8, quote: u8, out: &mut Vec<u8>) {
    match c {
        b'b' => out.push(8),
        b'f' => out.push(12),
        b'n' => out.push(b'\n'),
        b'r' => out.push(b'\r'),
        b't' => out.push(b'\t'),
        b'\\' => out.push(b'\\'),
        _ => {
            if c != quote {
                out.push(b'\\');
            }
            out.push(c);
        }
    }
}
