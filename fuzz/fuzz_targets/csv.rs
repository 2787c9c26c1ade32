//! `csv-parser()`'s scanner over any bytes, with the options the first byte selects: it ends,
//! reports each column at most once and in order, and every value it reports as part of the
//! input lies inside it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_model::parsers::csv::{scan, Dialect, Options, Piece};

fuzz_target!(|data: &[u8]| {
    let Some((&f, input)) = data.split_first() else {
        return;
    };
    let opts = Options {
        columns: usize::from(f & 7) + 1,
        delimiters: if f & 8 != 0 {
            b",;".to_vec()
        } else {
            b" ".to_vec()
        },
        string_delimiters: if f & 16 != 0 {
            vec![b"::".to_vec()]
        } else {
            Vec::new()
        },
        quotes_start: b"\"'[".to_vec(),
        quotes_end: b"\"']".to_vec(),
        null: (f & 32 != 0).then(|| b"-".to_vec()),
        dialect: [
            Dialect::EscapeNone,
            Dialect::EscapeBackslash,
            Dialect::EscapeDoubleChar,
        ][usize::from(f >> 6) % 3],
        strip_whitespace: f & 64 != 0,
        greedy: f & 128 != 0,
    };
    let mut next = 0;
    scan(input, &opts, &mut |i, piece| {
        assert_eq!(i, next, "columns in order, each once");
        next += 1;
        if let Piece::In(r) = piece {
            assert!(r.start <= r.end && r.end <= input.len());
        }
    });
    assert!(next <= opts.columns);
});
