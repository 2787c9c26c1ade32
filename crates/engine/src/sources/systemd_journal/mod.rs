//! `systemd-journal()`: this machine's journal. Its declaration and build; the reading thread
//! is [`reader`], libsystemd's calls [`sd_journal`].

mod reader;
pub mod sd_journal;

pub use reader::JournalSource;

use super::driver::no_value;
use super::driver::{Built, Common, SourceDriver};
use super::Local;
use sluice_config::declared::{read, Declared, Options};
use sluice_config::{ConfigError, Node};
use sluice_model::{ingest::Format, journal::JournalFields};
use sluice_protocol::framing::Framing;
use std::sync::Arc;

/// The declaration: the names it answers to, its options, a valid use, its build.
pub static DRIVER: SourceDriver = SourceDriver {
    names: &["systemd_journal"],
    about: "The systemd journal, its position kept across restarts.",
    options: &[SYSTEMD_JOURNAL],
    sample: "systemd-journal(prefix(\".j.\") matches(\"_COMM\" => \"sshd\"))",
    build: systemd_journal,
};

/// The options of `systemd-journal()`.
const SYSTEMD_JOURNAL: &[Declared] = &[
    read("prefix", "prefix(\".journald.\")").about(
        "a parser: what the names of the pairs it sets start with",
        "driver's",
    ),
    read("max_field_size", "max-field-size(65536)").about("bytes of a field kept", "65536"),
    read("namespace", "namespace(\"*\")").about(
        "the journal namespace (`*` all, `+name` with the default)",
        "the default",
    ),
    read("matches", "matches(\"PRIORITY\" => \"3\")").about(
        "fields an entry must have (`\"FIELD\" => \"value\"`)",
        "none",
    ),
    read("match_boot", "match-boot(yes)").about("only entries of this boot", "no"),
    read("read_old_records", "read-old-records(no)")
        .about("read what the journal held before the first start", "yes"),
];

/// `systemd-journal()`: this machine's journal.
fn systemd_journal(node: &Node, o: &mut Options, common: Common) -> Result<Built, ConfigError> {
    no_value(node)?;
    let prefix = o.last("prefix").map(|n| n.string()).transpose()?;
    let max_field_size = match o.last("max_field_size") {
        Some(n) => match n.u64()? {
            0 => return Err(ConfigError::new(n.pos, "max-field-size() is at least 1")),
            size => size as usize,
        },
        None => 64 * 1024,
    };
    let namespace = o.last("namespace").map(|n| n.string()).transpose()?;
    let mut matches = Vec::new();
    for m in o.all("matches") {
        matches.extend(journal_matches(m)?);
    }
    let match_boot = o.last("match_boot").map(|n| n.bool()).transpose()?;
    let read_old_records = o.last("read_old_records").map(|n| n.bool()).transpose()?;
    Ok(Arc::new(JournalSource {
        local: journal_local(
            node,
            common,
            prefix.as_deref().unwrap_or(".journald."),
            max_field_size,
        ),
        namespace: namespace.unwrap_or_else(|| "*".into()),
        matches,
        match_boot: match_boot.unwrap_or(false),
        read_old_records: read_old_records.unwrap_or(true),
        max_field_size,
    }))
}

/// `matches("_COMM" => "sshd" "PRIORITY" => "3")`: `FIELD=value`, each.
fn journal_matches(node: &Node) -> Result<Vec<String>, ConfigError> {
    let values: Vec<&sluice_config::Value> = node.words()?;
    let bad = |pos| {
        ConfigError::new(
            pos,
            "matches() takes pairs of a field and its value: matches(\"_COMM\" => \"sshd\")",
        )
    };
    let mut matches = Vec::new();
    let mut rest = values.as_slice();
    while let [field, arrow, value, more @ ..] = rest {
        let name_ok = !field.text.is_empty()
            && field
                .text
                .bytes()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_');
        if arrow.text != "=>" || !name_ok {
            return Err(bad(field.pos));
        }
        matches.push(format!("{}={}", field.text, value.text));
        rest = more;
    }
    match rest.first() {
        Some(v) => Err(bad(v.pos)),
        None => Ok(matches),
    }
}

/// How a journal source reads: entries in the journal's export format, each field a pair
/// behind `prefix`; the priority without one local0.notice, as in syslog-ng.
pub(super) fn journal_local(
    node: &Node,
    common: Common,
    prefix: &str,
    max_field_size: usize,
) -> Local {
    let mut common = common;
    common.opts.flags.local = true;
    let mut ingest = common.opts.ingest(common.cx.name, common.cx.globals);
    ingest.format = Format::Journal(JournalFields {
        prefix: Arc::from(prefix.as_bytes()),
        max_field_size,
    });
    ingest.parse.default_pri = Some(
        common.opts.default_facility.unwrap_or(16) * 8
            + u16::from(common.opts.default_severity.unwrap_or(5)),
    );
    let ingest = Arc::new(ingest);
    let window = common.opts.log_iw_size;
    Local {
        reader: common.reader(node, &ingest, "journal", Framing::Newline, window, ""),
        names: common.names(),
        source_name: common.cx.name.clone(),
        source_id: common.cx.id,
    }
}
