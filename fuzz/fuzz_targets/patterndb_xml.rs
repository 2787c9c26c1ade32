//! A pattern database file of any text: it loads or is refused with an error that names the
//! file, and never panics, recurses past the stack or expands past its input (depth, entities
//! and size are bounded by the loader).
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_model::patterndb::load_texts;
use sluice_model::template::Names;
use std::path::PathBuf;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let files = [(PathBuf::from("fuzz.xml"), text.to_string())];
    match load_texts(&files, &Names::default(), ".fuzz.") {
        Ok(loaded) => {
            // Whatever a database sets is bounded by what it holds.
            assert!(loaded.db.rules.len() <= text.len());
        }
        Err(e) => assert!(e.starts_with("fuzz.xml"), "{e}"),
    }
});
