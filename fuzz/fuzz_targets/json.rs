//! `json-parser()` over any bytes, with the options the first byte selects: it returns, and
//! every value it reports as part of the input lies inside it. With bit 3 of that byte, the
//! bytes are a `format(json)` record instead: the message's fields lie inside it too.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_model::ingest::Format;
use sluice_model::parsers::json::{parse, Found, Name, Options};
use sluice_model::{testing, Ingest, Today, UnixTime, Zone};
use sluice_protocol::Text;

fuzz_target!(|data: &[u8]| {
    let Some((&f, input)) = data.split_first() else {
        return;
    };
    if f & 8 != 0 {
        let mut ingest = Ingest::new(Zone::parse("UTC").expect("UTC exists"));
        ingest.format = Format::Json;
        ingest.keep_hostname = true;
        let recvd = UnixTime::now(&ingest.local_zone);
        let mut msgs = Vec::new();
        ingest.push_message(input, testing::origin(), recvd, Today::of(recvd), &mut msgs);
        let fields = &msgs[0].fields;
        let inside = |t: &Text| {
            if let Text::Span(s) = t {
                assert!(s.start <= s.end && s.end as usize <= input.len());
            }
        };
        inside(&fields.message);
        for t in [&fields.host, &fields.program, &fields.pid, &fields.msgid]
            .into_iter()
            .flatten()
        {
            inside(t);
        }
        return;
    }
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
