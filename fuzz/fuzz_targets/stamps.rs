//! A header's stamp shown as written — its 15 bytes copied, or built from the fields as
//! written without calendar arithmetic (`LogMessage::bsd_stamp_as_written`) — reads exactly as
//! formatting the message's instant does, for any frame, RFC3164 in any dialect or RFC5424.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_model::time::{write_stamp, TsFormat};

fuzz_target!(|frame: &[u8]| {
    let msg = sluice_model::testing::parsed(frame);
    if let Some(shown) = msg.bsd_stamp_as_written() {
        let mut formatted = Vec::new();
        write_stamp(&mut formatted, msg.stamp, TsFormat::Bsd, 0);
        assert_eq!(
            formatted,
            shown,
            "{:?} shown as {:?}",
            String::from_utf8_lossy(frame),
            String::from_utf8_lossy(&shown)
        );
    }
});
