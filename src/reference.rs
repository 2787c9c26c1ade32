//! `sluice reference`: the configuration reference (`docs/reference.md`), written from the
//! drivers' own option tables — every source, destination, parser, rewrite rule and filter
//! function, each option with a valid use of it — so that it never drifts: a test compares
//! the file with what this writes.

use sluice_config::declared::{Entry, Support};
use std::fmt::Write;

pub fn markdown() -> String {
    let mut out = String::from(
        "# Configuration reference\n\n\
         Every driver sluice has and every option it reads, written by `sluice reference` from the\n\
         drivers' own option tables (a test fails when this file and the tables differ). An option\n\
         marked *not yet* is syslog-ng's and is refused as not supported yet. How sluice differs\n\
         from syslog-ng is in `docs/compatibility.md`.\n",
    );
    let sections = [
        ("Sources", sluice_engine::sources::drivers::reference()),
        (
            "Destinations",
            sluice_engine::destinations::drivers::reference(),
        ),
        ("Parsers", sluice_model::parsers::reference()),
        ("Rewrite rules", sluice_model::rewrite::reference()),
        ("Filter functions", sluice_model::filter::reference()),
    ];
    for (title, entries) in sections {
        let _ = write!(out, "\n## {title}\n");
        for entry in entries {
            section(&mut out, &entry);
        }
    }
    out.push_str("\n## Global options\n\n`options {}` reads:\n\n");
    for name in sluice_engine::options::Globals::NAMES {
        let _ = writeln!(out, "- `{}()`", name.replace('_', "-"));
    }
    out
}

fn section(out: &mut String, entry: &Entry) {
    let names: Vec<String> = entry
        .names
        .iter()
        .map(|n| format!("`{}()`", n.replace('_', "-")))
        .collect();
    let _ = write!(
        out,
        "\n### {}\n\nFor example `{}`.\n",
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
    out.push_str("\n| option | for example |\n|---|---|\n");
    for d in options {
        let name = d.name.replace('_', "-");
        let _ = match d.support {
            Support::Read => writeln!(out, "| `{name}()` | `{}` |", d.example.replace('|', "\\|")),
            Support::NotYet => writeln!(out, "| `{name}()` | *not yet* |"),
        };
    }
}
