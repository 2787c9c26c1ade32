//! `wildcard-file()`: every file of a directory that matches a pattern, each followed as
//! `file()` follows one. Its declaration and build; the directory's scan is [`scan`].

mod scan;

use scan::WildcardSource;

use super::driver::local;
use super::driver::{Built, Common, SourceDriver};
use super::file::follow_freq;
use crate::options::MULTI_LINE;
use sluice_config::declared::{read, Declared, Options};
use sluice_config::{ConfigError, Node};
use std::sync::Arc;

/// The declaration: the names it answers to, its options, a valid use, its build.
pub static DRIVER: SourceDriver = SourceDriver {
    names: &["wildcard_file"],
    about: "Every file of a directory whose name matches, followed as `file()`.",
    options: &[WILDCARD_FILE, MULTI_LINE],
    sample: "wildcard-file(base-dir(\"/nonexistent\") filename-pattern(\"*.log\"))",
    build: wildcard_file,
};

/// The options of `wildcard-file()`.
const WILDCARD_FILE: &[Declared] = &[
    read("base_dir", "base-dir(\"/nonexistent\")")
        .about("the directory `wildcard-file()` looks in", "required"),
    read("filename_pattern", "filename-pattern(\"*.log\")")
        .about("the file names (a glob) to follow", "required"),
    read("exclude_pattern", "exclude-pattern(\"*.gz\")")
        .about("file names (a glob) not to follow", "none"),
    read("recursive", "recursive(yes)").about("subdirectories too", "no"),
    read("max_files", "max-files(1000)").about("files followed at once", "100"),
    read("follow_freq", "follow-freq(0.5)").about(
        "seconds between looks at a followed file when no inotify notice comes",
        "1",
    ),
    read("monitor_method", "monitor-method(poll)").about("inotify or poll", "auto"),
];

/// `wildcard-file(base-dir("/var/log/apps") filename-pattern("*.log"))`: every matching file.
fn wildcard_file(node: &Node, o: &mut Options, common: Common) -> Result<Built, ConfigError> {
    if let Some(v) = node.first_value() {
        return Err(ConfigError::new(
            v.pos,
            "wildcard-file() takes base-dir() and filename-pattern(): wildcard-file(base-dir(\"/var/log\") filename-pattern(\"*.log\"))",
        ));
    }
    let needed = |o: &mut Options, name: &str, example: &str| {
        o.last(name)
            .map(Node::value)
            .transpose()?
            .cloned()
            .ok_or_else(|| ConfigError::new(node.pos, format!("wildcard-file() needs {example}")))
    };
    let base_dir = needed(o, "base_dir", "base-dir(\"/var/log\")")?;
    if !base_dir.text.starts_with('/') {
        return Err(ConfigError::new(
            base_dir.pos,
            format!(
                "base-dir(\"{}\"): give the directory's whole path, from /",
                base_dir.text
            ),
        ));
    }
    let pattern = |v: &sluice_config::Value| {
        glob::Pattern::new(&v.text).map_err(|e| {
            ConfigError::new(
                v.pos,
                format!("'{}' is not a file name pattern: {e}", v.text),
            )
        })
    };
    let filename = needed(o, "filename_pattern", "filename-pattern(\"*.log\")")?;
    let exclude = o.last("exclude_pattern").map(Node::value).transpose()?;
    let recursive = o.yes_no("recursive", false)?;
    let max_files = o
        .last("max_files")
        .map(Node::u64)
        .transpose()?
        .unwrap_or(100)
        .max(1) as usize;
    // Change notices (inotify) unless monitor-method(poll).
    let notices = match o.last("monitor_method") {
        Some(opt) => {
            let v = opt.value()?;
            match v.text.as_str() {
                "auto" | "inotify" => true,
                "poll" => false,
                _ => {
                    return Err(ConfigError::unknown(
                        v.pos,
                        "monitor-method",
                        &v.text,
                        "",
                        &["auto", "inotify", "poll"],
                    ))
                }
            }
        }
        None => true,
    };
    let follow_freq = follow_freq(o)?;
    let (stats, counted_as) = (
        common.cx.stats.clone(),
        format!("{}#{}", common.cx.name, common.cx.n),
    );
    Ok(Arc::new(WildcardSource {
        base_dir: base_dir.text.clone().into(),
        pattern: pattern(&filename)?,
        exclude: exclude.map(pattern).transpose()?,
        recursive,
        max_files,
        local: local(node, common, &base_dir.text),
        follow_freq,
        notices,
        stats,
        counted_as,
    }))
}
