//! Multi-line joining over arbitrary streams cut into arbitrary reads, in every mode, as
//! `read_stream` drives it: records lie inside the buffer and within the size limit, the open
//! record's start lies within what the decoder took, and nothing panics.
#![no_main]

use libfuzzer_sys::fuzz_target;
use regex::bytes::Regex;
use sluice_protocol::framing::{FrameDecoder, Framing};
use sluice_protocol::multiline::MultiLine;

fuzz_target!(|data: &[u8]| {
    let Some((&control, stream)) = data.split_first() else {
        return;
    };
    let mode = match control % 3 {
        0 => MultiLine::Indented,
        1 => MultiLine::PrefixGarbage {
            prefix: Regex::new("^[0-9]").unwrap(),
            garbage: (control & 4 != 0).then(|| Regex::new("--").unwrap()),
        },
        _ => MultiLine::PrefixSuffix {
            prefix: Regex::new("^<").unwrap(),
            suffix: Regex::new(">").unwrap(),
        },
    };
    let max = 1 + usize::from(control >> 3) * 8;
    let mut dec = FrameDecoder::new(Framing::Newline, max, control & 2 != 0);
    let mut pending: Vec<u8> = Vec::new();
    let step = 1 + usize::from(control % 5) * 7;
    for (i, chunk) in stream.chunks(step).enumerate() {
        pending.extend_from_slice(chunk);
        let eof = (i + 1) * step >= stream.len();
        let len = pending.len();
        let mut lines = Vec::new();
        let Ok(used) = dec.decode(&pending, eof, |f| lines.push(f)) else {
            return;
        };
        let open = mode.join(&pending, &lines, eof, max, |f| {
            assert!(f.range.start <= f.range.end && f.range.end <= len && f.range.len() <= max)
        });
        let used = open.unwrap_or(used);
        assert!(used <= len);
        pending.drain(..used);
    }
});
