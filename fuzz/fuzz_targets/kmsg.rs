//! `/dev/kmsg` records read as syslog-ng's `linux-kmsg` format: no panic, and every value of
//! a record it accepts lies inside the record.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_protocol::{SyslogFields, Text};

fuzz_target!(|record: &[u8]| {
    let inside = |t: &Text| match t {
        Text::Span(s) => assert!(s.start <= s.end && s.end as usize <= record.len()),
        _ => {}
    };
    let mut fields = SyslogFields::EMPTY;
    if sluice_model::kmsg::parse(record, &mut fields, |_, v| inside(&v)) {
        inside(&fields.message);
        if let Some(id) = &fields.msgid {
            inside(id);
        }
    }
});
