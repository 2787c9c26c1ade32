//! `json-parser()` over any bytes, with the options the first byte selects: it returns, and
//! every value it reports as part of the input lies inside it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_model::parsers::json::{parse, Found, Name, Options};

fuzz_target!(|data: &[u8]| {
    let Some((&f, input)) = data.split_first() else {
        return;
    };
    let opts = Options {
        prefix: if f & 1 != 0 { ".j." } else { "" },
        key_delimiter: if f & 2 != 0 { '.' } else { '/' },
        extract_prefix: (f & 4 != 0).then_some("a.b[1]"),
    };
    parse(input, &opts, &mut |name, v, _type| {
        if let Name::Pair(name) = name {
            assert!(!name.is_empty() || opts.prefix.is_empty());
        }
        if let Found::In(r) = v {
            assert!(r.start <= r.end && r.end <= input.len());
        }
    });
});
