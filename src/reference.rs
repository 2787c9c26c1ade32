//! `sluice reference`: the configuration reference (`docs/reference.md`), written from the
//! drivers' own option tables — every source, destination, parser, rewrite rule and filter
//! function, each option with a valid use of it — so that it never drifts: a test compares
//! the file with what this writes.

use sluice_config::declared::{Entry, Support};
use std::fmt::Write;

/// Every kind of driver, with its drivers: the reference's sections.
pub fn sections() -> [(&'static str, Vec<Entry>); 6] {
    [
        ("Sources", sluice_engine::sources::registry::reference()),
        (
            "Destinations",
            sluice_engine::destinations::registry::reference(),
        ),
        ("Parsers", sluice_model::parsers::reference()),
        ("Rewrite rules", sluice_model::rewrite::reference()),
        ("Filter functions", sluice_model::filter::reference()),
        ("Blocks inside drivers", vec![tls()]),
    ]
}

/// The `tls()` block of TLS sources and destinations.
fn tls() -> Entry {
    Entry {
        names: vec!["tls"],
        about: "TLS of a source (`transport(tls)`) or a destination: its certificate, what it trusts, what it speaks.",
        sample: "tls(key-file(\"/etc/sluice/key.pem\") cert-file(\"/etc/sluice/cert.pem\") ca-file(\"/etc/sluice/ca.pem\"))",
        options: vec![sluice_engine::tls::TLS],
    }
}

pub fn markdown() -> String {
    let mut out = String::from(
        "# Configuration reference\n\n\
         Every driver sluice has and every option it reads, written by `sluice reference` from the\n\
         drivers' own option tables (a test fails when this file and the tables differ). An option\n\
         marked *not yet* is syslog-ng's and is refused as not supported yet. How sluice differs\n\
         from syslog-ng is in `docs/compatibility.md`.\n",
    );
    for (title, entries) in sections() {
        let _ = write!(out, "\n## {title}\n");
        for entry in entries {
            section(&mut out, &entry);
        }
    }
    out.push_str("\n## Template functions\n\n| function | what it gives |\n|---|---|\n");
    for (name, what) in sluice_model::template::functions::FUNCTIONS {
        let _ = writeln!(out, "| `$({name})` | {} |", what.replace('|', "\\|"));
    }
    out.push_str("\n## Global options\n\n`options {}` reads:\n\n");
    for name in sluice_engine::options::Globals::NAMES {
        let _ = writeln!(out, "- `{}()`", name.replace('_', "-"));
    }
    out
}

/// Whether `docs/compatibility.md` says how `name()` differs from syslog-ng's.
fn differs(name: &str) -> bool {
    const COMPATIBILITY: &str = include_str!("../docs/compatibility.md");
    COMPATIBILITY.contains(&format!("`{name}(")) || COMPATIBILITY.contains(&format!("{name}()"))
}

/// The note a driver or option whose difference from syslog-ng is written down gets.
const DIFFERS: &str = " *(differs from syslog-ng: docs/compatibility.md)*";

fn section(out: &mut String, entry: &Entry) {
    let names: Vec<String> = entry
        .names
        .iter()
        .map(|n| format!("`{}()`", n.replace('_', "-")))
        .collect();
    let mut what = entry.about.to_string();
    if entry.names.iter().any(|n| differs(&n.replace('_', "-"))) {
        what.push_str(DIFFERS);
    }
    let _ = write!(
        out,
        "\n### {}\n\n{what} For example `{}`.\n",
        names.join(", "),
        entry.sample
    );
    let mut seen = Vec::new();
    let options: Vec<_> = entry
        .options
        .iter()
        .flat_map(|part| part.iter())
        .filter(|d| {
            let new = !seen.contains(&d.name);
            seen.push(d.name);
            new
        })
        .collect();
    if options.is_empty() {
        return;
    }
    out.push_str("\n| option | what it does | default | for example |\n|---|---|---|---|\n");
    for d in options {
        let name = d.name.replace('_', "-");
        let _ = match d.support {
            Support::Read => {
                let (what, default) = (d.about, d.default);
                let what = match differs(&name) {
                    true => format!("{what}{DIFFERS}"),
                    false => what.to_string(),
                };
                writeln!(
                    out,
                    "| `{name}()` | {} | {} | `{}` |",
                    what.replace('|', "\\|"),
                    default.replace('|', "\\|"),
                    d.example.replace('|', "\\|")
                )
            }
            Support::NotYet => writeln!(out, "| `{name}()` | *not yet* | | |"),
        };
    }
}

/// The reference as the manual page `sluice.conf(5)`: the same text as [`markdown`], its
/// headings as sections, each option table as a list of options with their example.
pub fn man_page(version: &str) -> String {
    let mut out = format!(
        ".TH SLUICE.CONF 5 \"\" \"sluice {version}\" \"File Formats\"\n\
         .SH NAME\nsluice.conf \\- sluice's configuration: syslog-ng's language, its drivers and options\n\
         .SH DESCRIPTION\n\
         sluice reads syslog-ng's configuration files (\\fBsyslog-ng.conf\\fR(5)): the same statements, \
         sources, destinations, filters, parsers, rewrite rules, templates and log paths. \
         This page lists every driver sluice has and every option it reads.\n"
    );
    for line in markdown().lines().skip(1) {
        if let Some(title) = line.strip_prefix("### ") {
            let _ = writeln!(out, ".SS {}", roff(&title.replace('`', "")));
        } else if let Some(title) = line.strip_prefix("## ") {
            let _ = writeln!(out, ".SH {}", roff(&title.to_uppercase()));
        } else if line.starts_with("| option")
            || line.starts_with("| function")
            || line.starts_with("|---")
        {
            continue;
        } else if let Some(row) = line.strip_prefix("| ") {
            let cells: Vec<&str> = row.trim_end_matches(" |").split(" | ").collect();
            if let [option, example] = cells.as_slice() {
                let _ = writeln!(
                    out,
                    ".TP\n\\fB{}\\fR\n{}",
                    roff(&option.replace('`', "")),
                    roff(
                        &example
                            .replace('`', "")
                            .replace("\\|", "|")
                            .replace('*', "")
                    )
                );
            }
        } else if let Some(item) = line.strip_prefix("- ") {
            let _ = writeln!(out, ".IP \\(bu 2\n{}", roff(&item.replace('`', "")));
        } else if line.is_empty() {
            out.push_str(".PP\n");
        } else {
            let _ = writeln!(out, "{}", roff(&line.replace(['`', '*'], "")));
        }
    }
    out.push_str(".SH SEE ALSO\n\\fBsluice\\fR(8), \\fBsyslog-ng.conf\\fR(5)\n");
    out
}

/// `text` safe in roff: backslashes doubled, a leading `.` or `'` escaped.
fn roff(text: &str) -> String {
    let text = text.replace('\\', "\\\\").replace('-', "\\-");
    match text.starts_with(['.', '\'']) {
        true => format!("\\&{text}"),
        false => text,
    }
}

#[cfg(test)]
mod tests {
    use sluice_config::declared::Support;

    /// Every option a driver reads says what it does: a new option cannot reach the reference
    /// without its line on its declaration.
    #[test]
    fn every_option_read_says_what_it_does() {
        let mut missing = Vec::new();
        for (_, entries) in super::sections() {
            for entry in entries {
                for option in entry.options.iter().flat_map(|part| part.iter()) {
                    if option.support == Support::Read && option.about.is_empty() {
                        missing.push(format!("{} ({})", option.name, entry.names[0]));
                    }
                }
            }
        }
        missing.sort();
        missing.dedup();
        assert!(
            missing.is_empty(),
            "options whose declaration has no .about(): {missing:?}"
        );
    }

    #[test]
    fn every_driver_and_function_says_what_it_does() {
        let mut missing = Vec::new();
        for (section, entries) in super::sections() {
            for entry in entries {
                if entry.about.is_empty() {
                    missing.push(format!("{section}: {}", entry.names[0]));
                }
            }
        }
        for (name, what) in sluice_model::template::functions::FUNCTIONS {
            if what.is_empty() {
                missing.push(format!("template function {name}"));
            }
        }
        assert!(missing.is_empty(), "no about: {missing:?}");
    }
}
