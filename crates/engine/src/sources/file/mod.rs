//! `file()` source: follows one file as it grows, across rotations. Its declaration and build;
//! the following is [`follow`] (`wildcard-file()` follows its files with it too).

pub mod follow;

use follow::FileSource;

use super::driver::local;
use super::driver::{Built, Common, SourceDriver};
use crate::options::MULTI_LINE;
use sluice_config::declared::{read, Declared, Options};
use sluice_config::{ConfigError, Node};
use std::sync::Arc;
use std::time::Duration;

/// The declaration: the names it answers to, its options, a valid use, its build.
pub static DRIVER: SourceDriver = SourceDriver {
    names: &["file"],
    about: "A file followed as it grows (and after rotation), its position kept; `/dev/kmsg` as the kernel's log.",
    options: &[FILE, MULTI_LINE],
    sample: "file(\"/nonexistent/sluice-table-test\")",
    build: file,
};

/// The options of `file()`.
/// (Multi-line modes, `pad-size()` and encodings are every source's, in
/// [`SourceOptions::DECLARED`].)
const FILE: &[Declared] = &[read("follow_freq", "follow-freq(0.5)").about(
    "seconds between looks at a followed file when no inotify notice comes",
    "1",
)];

/// `file("/var/log/app.log")`: follows a file as it grows, across rotations.
fn file(node: &Node, o: &mut Options, common: Common) -> Result<Built, ConfigError> {
    let path = node.first_value().ok_or_else(|| {
        ConfigError::new(
            node.pos,
            "file() needs a file name: file(\"/var/log/app.log\")",
        )
    })?;
    if !path.text.starts_with('/') {
        return Err(ConfigError::new(
            path.pos,
            format!(
                "file(\"{}\"): give the file's whole path, from /",
                path.text
            ),
        ));
    }
    let follow_freq = follow_freq(o)?;
    Ok(Arc::new(FileSource {
        path: path.text.clone().into(),
        local: local(node, common, &path.text),
        follow_freq,
    }))
}

/// `follow-freq()`, in seconds (1 when not given).
pub(super) fn follow_freq(o: &mut Options) -> Result<Duration, ConfigError> {
    let Some(opt) = o.last("follow_freq") else {
        return Ok(Duration::from_secs(1));
    };
    let v = opt.value()?;
    let secs: f64 = v.text.parse().map_err(|_| {
        ConfigError::new(
            v.pos,
            format!("follow-freq({}) is not a number of seconds", v.text),
        )
    })?;
    if !(secs > 0.0 && secs <= 3600.0) {
        return Err(ConfigError::new(
            v.pos,
            "follow-freq() is more than 0 and at most 3600 seconds (sluice always follows)",
        ));
    }
    Ok(Duration::from_secs_f64(secs))
}
