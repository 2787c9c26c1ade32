//! `kv-parser()`'s scanner over any bytes, with the separators the first byte selects: it ends,
//! every key and value it reports lies inside the input, and keys are made of key characters.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_model::parsers::kv::{Piece, Scanner};

fuzz_target!(|data: &[u8]| {
    let Some((&f, input)) = data.split_first() else {
        return;
    };
    let separator = [b'=', b':', b'#', b','][usize::from(f & 3)];
    let pairs: [&[u8]; 4] = [b", ", b";", b" ", b""];
    let mut scanner = Scanner::new(
        input,
        separator,
        pairs[usize::from((f >> 2) & 3)],
        f & 16 != 0,
    );
    let mut n = 0;
    while let Some((key, value)) = scanner.next_pair() {
        assert!(!key.is_empty() && key.end <= input.len());
        assert!(input[key]
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(b)));
        if let Piece::In(r) = value {
            assert!(r.start <= r.end && r.end <= input.len());
        }
        n += 1;
        assert!(
            n <= input.len(),
            "more pairs than bytes: the scanner does not advance"
        );
    }
    // Stray words keep bytes that are not UTF-8 where no quoting is needed, as syslog-ng does.
    let _ = scanner.stray;
});
