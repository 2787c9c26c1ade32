//! Journal entries in the export format, as `systemd-journal()` hands them on: no panic,
//! every value lies inside the entry and is at most `max-field-size()` long, and an entry
//! written with `push_field` reads back every field it was given.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_model::journal::{self, JournalFields};
use sluice_protocol::{SyslogFields, Text};
use std::sync::Arc;

fuzz_target!(|data: &[u8]| {
    let Some((&max, entry)) = data.split_first() else {
        return;
    };
    let opts = JournalFields {
        prefix: Arc::from(&b".journald."[..]),
        max_field_size: usize::from(max).max(1),
    };
    let inside = |t: &Text| {
        if let Text::Span(s) = t {
            assert!(s.start <= s.end && s.end as usize <= entry.len());
            assert!((s.end - s.start) as usize <= opts.max_field_size);
        }
    };
    let mut fields = SyslogFields::EMPTY;
    journal::parse(entry, &opts, &mut fields, |_, v| inside(&v));
    inside(&fields.message);
    for t in [&fields.host, &fields.program, &fields.pid]
        .into_iter()
        .flatten()
    {
        inside(t);
    }
    // The same bytes as the fields of an entry (NUL between them): each one reads back
    // whole and in order. Keys starting with `__` are the journal's own and not handed on.
    let given: Vec<(&[u8], &[u8])> = entry
        .split(|&b| b == 0)
        .filter_map(|f| {
            let eq = f.iter().position(|&b| b == b'=')?;
            Some((&f[..eq], &f[eq + 1..]))
        })
        .filter(|(key, _)| !key.is_empty() && !key.contains(&b'\n') && !key.starts_with(b"__"))
        .collect();
    let mut written = Vec::new();
    for (key, value) in &given {
        journal::push_field(&mut written, &[*key, b"=", *value].concat());
    }
    let whole = JournalFields {
        prefix: Arc::from(&b""[..]),
        max_field_size: usize::MAX,
    };
    let mut read = Vec::new();
    journal::parse(&written, &whole, &mut SyslogFields::EMPTY, |_, v| {
        read.push(v.of(&written).to_vec())
    });
    let values: Vec<Vec<u8>> = given.iter().map(|(_, v)| v.to_vec()).collect();
    assert_eq!(read, values);
});
