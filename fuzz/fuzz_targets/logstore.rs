//! The archive reader over arbitrary bytes: `sluice logstore cat|verify|info|grep` walk what a
//! disk, a copy or an intruder left; every frame, index and record is read without a key (the
//! seed archives are unencrypted, so chunks' indexes and records are reached), and nothing
//! panics. `tail -f`'s walk of a growing file is fed the same bytes in two pieces, each cut
//! where [`frame::settled`] says whole frames end.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_logstore::frame;
use sluice_logstore::reader::Resume;
use sluice_logstore::{Item, Keys, Walk};

fn read_all(walk: Walk) {
    for item in walk {
        if let Item::Chunk(c) = item {
            if let Ok(index) = c.index() {
                let _ = index.may_hold(b"denied");
            }
            let _ = c.read(|r| {
                let _ = (r.line.len(), r.text.len(), r.host.len());
            });
        }
    }
}

fuzz_target!(|data: &[u8]| {
    if let Ok(walk) = Walk::new(data, Keys::default()) {
        read_all(walk);
    }
    // Followed as it grows: the first half, then the rest.
    let mut resume = Resume::start();
    for grown in [data.len() / 2, data.len()] {
        let new = &data[resume.at() as usize..grown.max(resume.at() as usize)];
        let take = frame::settled(new);
        assert!(take <= new.len());
        let Ok(mut walk) = Walk::follow(&new[..take], Keys::default(), resume) else {
            return;
        };
        for item in walk.by_ref() {
            if let Item::Chunk(c) = item {
                let _ = c.read(|_| {});
            }
        }
        resume = walk.pause();
    }
});
