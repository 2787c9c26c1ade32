//! The PROXY protocol header parser over arbitrary bytes, whole and cut at every length: it
//! never panics, never takes more than it was given, and a prefix of a header it accepts is
//! either incomplete or the same header.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_protocol::proxy::parse;

fuzz_target!(|data: &[u8]| {
    let whole = parse(data);
    if let Ok(Some((header, used))) = &whole {
        assert!(*used <= data.len());
        for cut in 0..*used {
            match parse(&data[..cut]) {
                Ok(None) | Err(_) => {}
                Ok(Some((h, n))) => panic!("a prefix of {cut} bytes parsed as {h:?} ({n})"),
            }
        }
        assert_eq!(parse(&data[..*used]).unwrap(), Some((*header, *used)));
    }
});
