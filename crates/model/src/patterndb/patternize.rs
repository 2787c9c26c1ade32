//! Proposing patterns for a log: messages clustered in the manner of Drain (He et al., 2017)
//! and each cluster written as a rule of a pattern database, with a test message.
//!
//! A message is cut into words at spaces. Messages of one program with as many words, whose
//! first word is the same (or has digits in it, then any), are candidates for one cluster; a
//! message joins the candidate whose literal words it shares most — at least `similarity` of
//! its words — and the words where they differ become fields; otherwise it starts a cluster
//! of its own, where words with digits in them are fields from the start. A cluster of at
//! least `support` messages is a rule: its literal words as they are, each field an
//! `@ESTRING@` up to the next space (the last one an `@ANYSTRING@`), in a ruleset per
//! program.

use super::radix::Radix;
use std::collections::HashMap;
use std::fmt::Write;

/// How clusters are made and kept.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// The fewest messages a cluster needs to become a rule.
    pub support: usize,
    /// The share of a message's words a cluster must have for the message to join it.
    pub similarity: f64,
}

struct Cluster {
    /// Each word: literal, or a field (`None`).
    words: Vec<Option<Vec<u8>>>,
    count: usize,
    /// The first few messages: the rule's test message is one its pattern leads to.
    samples: Vec<Vec<u8>>,
}

/// How many messages of a cluster are kept to choose its test message from.
const SAMPLES: usize = 8;

/// Where a message looks for its cluster: its program, its word count, its first word
/// (none when it has digits).
type Group = (Vec<u8>, usize, Option<Vec<u8>>);

/// Clusters of a program's messages.
#[derive(Default)]
pub struct Patternizer {
    groups: HashMap<Group, Vec<Cluster>>,
    /// Programs in the order first seen, for a stable output.
    programs: Vec<Vec<u8>>,
    lines: usize,
}

fn has_digit(word: &[u8]) -> bool {
    word.iter().any(u8::is_ascii_digit)
}

/// Whether a literal word can stand in a pattern's text as it is: no control characters
/// (XML cannot hold most of them) and valid UTF-8.
fn writable(word: &[u8]) -> bool {
    std::str::from_utf8(word).is_ok() && !word.iter().any(|&b| b < 0x20 && b != b'\t')
}

impl Patternizer {
    /// Takes one message of `program`.
    pub fn add(&mut self, program: &[u8], message: &[u8], similarity: f64) {
        self.lines += 1;
        let words: Vec<&[u8]> = message.split(|&b| b == b' ').collect();
        let first = Some(words[0].to_vec()).filter(|w| !has_digit(w));
        let key = (program.to_vec(), words.len(), first);
        if !self.groups.contains_key(&key) && !self.programs.iter().any(|p| p == program) {
            self.programs.push(program.to_vec());
        }
        let clusters = self.groups.entry(key).or_default();
        let best = clusters
            .iter_mut()
            .map(|c| {
                let same = c
                    .words
                    .iter()
                    .zip(&words)
                    .filter(|(a, b)| a.as_deref() == Some(**b))
                    .count();
                (same as f64 / words.len() as f64, c)
            })
            .max_by(|a, b| a.0.total_cmp(&b.0));
        match best {
            Some((share, cluster)) if share >= similarity => {
                for (w, m) in cluster.words.iter_mut().zip(&words) {
                    if w.as_deref() != Some(*m) {
                        *w = None;
                    }
                }
                cluster.count += 1;
                if cluster.samples.len() < SAMPLES {
                    cluster.samples.push(message.to_vec());
                }
            }
            _ => clusters.push(Cluster {
                words: words
                    .iter()
                    .map(|w| Some(w.to_vec()).filter(|w| !has_digit(w) && writable(w)))
                    .collect(),
                count: 1,
                samples: vec![message.to_vec()],
            }),
        }
    }

    /// The pattern database of the clusters of at least `support` messages; how many rules
    /// it has, and how many of the messages their clusters hold.
    pub fn database(&self, support: usize) -> (String, usize, usize) {
        let mut out = String::from("<?xml version='1.0' encoding='UTF-8'?>\n<patterndb version='4' pub_date='2026-01-01'>\n");
        let (mut rules, mut covered) = (0, 0);
        for program in &self.programs {
            let mut clusters: Vec<&Cluster> = self
                .groups
                .iter()
                .filter(|(k, _)| &k.0 == program)
                .flat_map(|(_, c)| c)
                .filter(|c| c.count >= support)
                .collect();
            if clusters.is_empty() {
                continue;
            }
            clusters.sort_by(|a, b| b.count.cmp(&a.count).then(a.samples.cmp(&b.samples)));
            // Each rule's test message: a sample its own pattern leads to. A rule whose
            // samples all go to other rules is shadowed by them and left out.
            let patterns: Vec<_> = clusters.iter().map(|c| pattern_of(c)).collect();
            let mut tree = Radix::default();
            for (k, (pattern, _)) in patterns.iter().enumerate() {
                let _ = tree.insert(pattern.as_bytes(), k, ("", ""), "");
            }
            let name = String::from_utf8_lossy(program);
            let mut ruleset = String::new();
            for (k, c) in clusters.iter().enumerate() {
                let mut taken = Vec::new();
                let Some(example) = c.samples.iter().find(|s| {
                    taken.clear();
                    tree.find(s, &mut taken) == Some(&k)
                }) else {
                    continue;
                };
                rules += 1;
                covered += c.count;
                let (pattern, names) = &patterns[k];
                let values: String = names
                    .iter()
                    .zip(&taken)
                    .map(|(n, t)| {
                        let v = String::from_utf8_lossy(&example[t.start..t.end]);
                        format!("<test_value name='{n}'>{}</test_value>", xml(&v))
                    })
                    .collect();
                let _ = write!(
                    ruleset,
                    "   <rule id='patternize-{rules}' class='system' provider='sluice patternize'>\n    <patterns><pattern>{}</pattern></patterns>\n    <examples><example><test_message program='{}'>{}</test_message><test_values>{values}</test_values></example></examples>\n   </rule>\n",
                    xml(pattern),
                    xml(&name),
                    xml(&String::from_utf8_lossy(example)),
                );
            }
            if ruleset.is_empty() {
                continue;
            }
            let _ = write!(
                out,
                " <ruleset name='{}' id='patternize-{}'>\n  <pattern>{}</pattern>\n  <rules>\n{ruleset}",
                xml(&name),
                xml(&name),
                xml(&name.replace('@', "@@"))
            );
            out.push_str("  </rules>\n </ruleset>\n");
        }
        out.push_str("</patterndb>\n");
        (out, rules, covered)
    }

    /// Messages taken.
    pub fn lines(&self) -> usize {
        self.lines
    }
}

/// A cluster's pattern, and the names of its fields in order.
fn pattern_of(c: &Cluster) -> (String, Vec<String>) {
    let mut pattern = String::new();
    let mut names = Vec::new();
    let last = c.words.len() - 1;
    for (i, word) in c.words.iter().enumerate() {
        match word {
            Some(w) => {
                pattern.push_str(&String::from_utf8_lossy(w).replace('@', "@@"));
                if i < last {
                    pattern.push(' ');
                }
            }
            None => {
                let name = format!(".dict.string{}", names.len());
                pattern.push_str(&match i < last {
                    true => format!("@ESTRING:{name}: @"),
                    false => format!("@ANYSTRING:{name}@"),
                });
                names.push(name);
            }
        }
    }
    (pattern, names)
}

fn xml(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '\'' => out.push_str("&apos;"),
            '"' => out.push_str("&quot;"),
            c if (c as u32) < 0x20 && c != '\t' => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn similar_messages_make_one_rule_with_fields() {
        let mut p = Patternizer::default();
        for user in ["alice", "bob", "carol"] {
            p.add(
                b"sshd",
                format!("Accepted password for {user} from 10.0.0.1 port 22 ssh2").as_bytes(),
                0.5,
            );
        }
        p.add(b"sshd", b"something else entirely", 0.5);
        let (db, rules, covered) = p.database(2);
        assert_eq!((rules, covered), (1, 3));
        assert!(db.contains("<pattern>Accepted password for @ESTRING:.dict.string0: @from @ESTRING:.dict.string1: @port @ESTRING:.dict.string2: @@ANYSTRING:.dict.string3@</pattern>"), "{db}");
        assert!(
            db.contains("<test_value name='.dict.string0'>alice</test_value>"),
            "{db}"
        );
    }
}
