//! RFC 3161 answers and tokens from hostile bytes: what an authority answers
//! (`token_of`) and what a timestamp frame of an archive holds (`verify`, with and without
//! trust anchors). Seeds: an `openssl ts -reply` answer (`crates/logstore/testdata`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_logstore::timestamp::{token_of, verify, Trust};

const CA: &[u8] = include_bytes!("../../crates/logstore/testdata/tsa-ca.pem");

fuzz_target!(|data: &[u8]| {
    let head = [7u8; 32];
    let _ = token_of(data, &head, 0x3D54_40A8_9762_03E3);
    let _ = verify(data, &head, None);
    let trust = Trust::from_pem(CA).expect("the test CA");
    let _ = verify(data, &head, Some(&trust));
});
