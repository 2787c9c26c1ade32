//! The frame decoder over arbitrary streams cut into arbitrary reads, both framings, with and
//! without trimming: it never panics, frames lie inside the buffer, and consumption never
//! exceeds what was offered.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_protocol::framing::{FrameDecoder, Framing};

fuzz_target!(|data: &[u8]| {
    let Some((&control, stream)) = data.split_first() else {
        return;
    };
    let framing = if control & 1 == 0 {
        Framing::Newline
    } else {
        Framing::OctetCounted
    };
    let trim = control & 2 != 0;
    let max = 1 + usize::from(control >> 2) * 4;
    let mut dec = FrameDecoder::new(framing, max, trim);
    let mut pending: Vec<u8> = Vec::new();
    // Feed the stream in reads of varying size, as a socket would deliver it.
    for (i, chunk) in stream.chunks(1 + usize::from(control % 7) * 3).enumerate() {
        pending.extend_from_slice(chunk);
        let eof = (i + 1) * (1 + usize::from(control % 7) * 3) >= stream.len();
        let len = pending.len();
        match dec.decode(&pending, eof, |f| {
            assert!(f.range.start <= f.range.end && f.range.end <= len && f.range.len() <= max)
        }) {
            Ok(used) => {
                assert!(used <= len);
                pending.drain(..used);
            }
            Err(_) => return,
        }
    }
});
