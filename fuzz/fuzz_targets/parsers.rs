//! The parsers of message text as a configuration sets them up — `regexp-parser()`,
//! `date-parser()`, `tags-parser()`, `syslog-parser()`, and `json-parser()`, `kv-parser()`,
//! `csv-parser()` through their drivers — over any message: none panics, and each either
//! succeeds or fails the message cleanly.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_model::parsers::Parsers;
use std::sync::OnceLock;

const DRIVERS: &[&str] = &[
    r#"regexp-parser(patterns("(?<user>[a-z_]+)@(?<host>[^ ]+)" "^(?<first>\S+) (?<rest>.*)$") prefix(".r."));"#,
    r#"regexp-parser(patterns("(?<n>[0-9]+)") template("$PROGRAM$MSG"));"#,
    r#"date-parser(format("%Y-%m-%dT%H:%M:%S%z" "%b %d %H:%M:%S" "%s") template("$MSG"));"#,
    r#"date-parser(format("%d/%b/%Y:%H:%M:%S %z") time-zone("Europe/Budapest"));"#,
    r#"tags-parser(template("$MSG"));"#,
    r#"syslog-parser(flags(syslog-protocol));"#,
    r#"syslog-parser(flags(no-hostname, assume-utf8));"#,
    r#"json-parser(prefix(".j.") marker("@cee:"));"#,
    r#"kv-parser(prefix(".kv.") extract-stray-words-into(".stray"));"#,
    r#"csv-parser(columns(a, b, c) delimiters(chars(",;") strings("::")) flags(greedy) dialect(escape-backslash));"#,
];

fn parsers() -> &'static [Parsers] {
    static COMPILED: OnceLock<Vec<Parsers>> = OnceLock::new();
    COMPILED.get_or_init(|| {
        DRIVERS
            .iter()
            .map(|driver| {
                let text = format!("parser p {{ {driver} }};");
                let config = sluice_config::load_str("fuzz", &text).expect("the driver parses");
                let s = &config.statements[0];
                Parsers::compile(&s.body, s.pos).expect("the driver compiles")
            })
            .collect()
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&f, text)) = data.split_first() else {
        return;
    };
    let mut frame = b"<13>Jan  5 13:56:09 host prog[1]: ".to_vec();
    if f & 0x80 != 0 {
        // The whole frame from the input: syslog-parser() reads it again.
        frame.clear();
    }
    frame.extend_from_slice(text);
    let mut msg = sluice_model::testing::parsed(&frame);
    let all = parsers();
    let _ = all[usize::from(f & 0x7f) % all.len()].apply(&mut msg);
});
