//! File names made from values a sender chose (`$HOST`, `$PROGRAM`, name-value pairs, function
//! results) under templates of every shape: the name always starts with the template's root,
//! and no component after it is `.` or `..`, holds a NUL, or is longer than NAME_MAX: the
//! path, as the kernel reads it, stays beneath the root.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_model::file_name::{FileName, NAME_MAX};
use sluice_model::values::name_id;
use sluice_model::Template;
use sluice_protocol::Text;
use std::sync::OnceLock;

const TEMPLATES: &[&str] = &[
    "/var/log/hosts/${HOST}/${PROGRAM}.log",
    "/var/log/host-${HOST}.log",
    "/r/.${a}/${b}",
    "/r/${a}${b}/x.log",
    "/r/${a}/../${b}",
    "${a}/${b}",
    "logs/$(lowercase ${a})/$(substr ${b} 0 300)",
    "/r/${a:-..}/${HOST}-${b}",
];

fn templates() -> &'static [FileName] {
    static COMPILED: OnceLock<Vec<FileName>> = OnceLock::new();
    COMPILED.get_or_init(|| {
        TEMPLATES
            .iter()
            .map(|t| FileName::new(Template::compile(t).expect("valid template")))
            .collect()
    })
}

fuzz_target!(|data: &[u8]| {
    // Three values: the host, `${a}` and `${b}`, separated by 0xff bytes.
    let mut parts = data.splitn(3, |&b| b == 0xff);
    let host = parts.next().unwrap_or_default();
    let a = parts.next().unwrap_or_default();
    let b = parts.next().unwrap_or_default();
    let mut msg = sluice_model::testing::parsed(b"<13>Nov 24 10:00:00 h p: m");
    msg.set_host(Text::owned(host));
    msg.values.set(name_id("a"), Text::owned(a));
    msg.values.set(name_id("b"), Text::owned(b));
    for path in templates() {
        let mut name = Vec::new();
        path.append(&msg, &mut name);
        let root = path.root();
        assert!(name.starts_with(root), "{name:?} is not beneath {root:?}");
        for component in name[root.len()..].split(|&b| b == b'/') {
            assert!(
                component != b"." && component != b"..",
                "{name:?} has a dot component after {root:?}"
            );
            assert!(
                component.len() <= NAME_MAX,
                "{name:?}: a component is too long"
            );
            assert!(!component.contains(&0), "{name:?} holds a NUL");
        }
    }
});
