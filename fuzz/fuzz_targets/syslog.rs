//! The syslog parser — RFC3164 or RFC5424 (with its fallback to RFC3164), under every flag
//! combination the first byte selects — accepts any bytes and its spans stay inside the frame.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_protocol::{parse, ParseFlags, ParseOptions, SyslogFields, Text};

fuzz_target!(|data: &[u8]| {
    let Some((&f, frame)) = data.split_first() else {
        return;
    };
    let opts = ParseOptions {
        flags: ParseFlags {
            syslog_protocol: f & 128 != 0,
            expect_hostname: f & 1 != 0,
            check_hostname: f & 2 != 0,
            sanitize_utf8: f & 4 != 0,
            validate_utf8: f & 8 != 0,
            no_header: f & 16 != 0,
            local: f & 32 != 0,
            no_multi_line: f & 64 != 0,
            ..ParseFlags::default()
        },
        ..ParseOptions::default()
    };
    let mut fields = SyslogFields::default();
    parse(frame, &opts, &mut fields);
    let check = |t: &Text| {
        if let Text::Span(s) = t {
            assert!(s.start <= s.end && s.end as usize <= frame.len());
        }
    };
    for t in [&fields.host, &fields.program, &fields.pid, &fields.msgid]
        .into_iter()
        .flatten()
    {
        check(t);
    }
    check(&fields.message);
    if let Some(sd) = fields.sd_in_place {
        assert!(sd.start <= sd.end && sd.end as usize <= frame.len());
    }
    // Structured data read in place or stored, every parameter comes out.
    for p in fields.sd_params(frame) {
        std::hint::black_box(p);
    }
});
