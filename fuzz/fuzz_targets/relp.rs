//! The RELP frame parser over arbitrary bytes: it never panics, never takes more than it was
//! given, its data range lies inside what it took, a frame cut short is never a different
//! frame, and the offer and response readers take any data.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_protocol::relp::{offer, parse, response};

fuzz_target!(|data: &[u8]| {
    let mut at = 0;
    while let Ok(Some((frame, used))) = parse(&data[at..]) {
        assert!(used > 0 && at + used <= data.len());
        assert!(frame.data.start <= frame.data.end && frame.data.end < used);
        let body = &data[at + frame.data.start..at + frame.data.end];
        let _ = response(body);
        let _ = offer(body, "commands");
        for cut in 0..used {
            if let Ok(Some((f, n))) = parse(&data[at..at + cut]) {
                panic!("a prefix of {cut} bytes parsed as {f:?} ({n})");
            }
        }
        at += used;
    }
});
