//! Every match of a regular expression in a value, left to right, as `subst(… flags(global))`
//! replaces them.
//!
//! The regex crate finds each match with a forward search to its end and then a reverse search
//! back to its start. When every match of a pattern must start with one of a set of bytes
//! (`[0-9]+`: a digit), it is cheaper to step to the next such byte and try a match anchored
//! there: one forward pass, and no search between matches. On real log lines with `[0-9]+`
//! this takes less than half the time. A try that fails shows that matches do not start at
//! every such byte (`[a-z]+[0-9]` over words), so the rest of the value is searched the regex
//! crate's way: a value costs at most one wasted try more than before.

use regex::bytes::Regex;
use regex_automata::{meta, Anchored, Input};
use regex_syntax::hir::literal::{ExtractKind, Extractor};
use std::cell::RefCell;
use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};

#[derive(Clone, Debug)]
pub struct Finder {
    re: Regex,
    /// The anchored matcher and the bytes a match can start with, when the pattern has such a
    /// set (it cannot match the empty string, and its first bytes are known).
    anchored: Option<AnchoredFinder>,
}

#[derive(Clone, Debug)]
struct AnchoredFinder {
    re: meta::Regex,
    first: FirstBytes,
    /// Tells this finder's search cache apart in [`CACHES`].
    id: usize,
}

/// The bytes a match can start with, in the form that finds the next one fastest.
#[derive(Clone, Debug)]
enum FirstBytes {
    One(u8),
    Two(u8, u8),
    Three(u8, u8, u8),
    /// `lo..=hi`, within ASCII: eight bytes at a time.
    Range(u8, u8),
    Table(Box<[bool; 256]>),
}

thread_local! {
    /// Each thread's search caches of the finders it used, so that a search takes none from
    /// the regex's shared pool.
    static CACHES: RefCell<Vec<(usize, meta::Cache)>> = const { RefCell::new(Vec::new()) };
}

impl Finder {
    /// `re` as [`crate::filter::regex`] compiled it from `pattern`.
    pub fn new(re: Regex, pattern: &str, ignore_case: bool) -> Finder {
        Finder {
            anchored: anchored(pattern, ignore_case),
            re,
        }
    }

    pub fn regex(&self) -> &Regex {
        &self.re
    }

    /// Calls `found` with the span of each match, up to `limit` of them.
    pub fn each(&self, hay: &[u8], limit: usize, mut found: impl FnMut(Range<usize>)) {
        let Some(anchored) = &self.anchored else {
            for m in self.re.find_iter(hay).take(limit) {
                found(m.range());
            }
            return;
        };
        CACHES.with_borrow_mut(|caches| {
            let at = match caches.iter().position(|(id, _)| *id == anchored.id) {
                Some(at) => at,
                None => {
                    caches.push((anchored.id, anchored.re.create_cache()));
                    caches.len() - 1
                }
            };
            anchored.each(hay, limit, &mut caches[at].1, &mut found);
        });
    }
}

impl AnchoredFinder {
    fn each(
        &self,
        hay: &[u8],
        limit: usize,
        cache: &mut meta::Cache,
        found: &mut impl FnMut(Range<usize>),
    ) {
        let re = &self.re;
        let mut count = 0;
        let mut at = 0;
        while count < limit {
            let Some(start) = self.first.next(hay, at) else {
                return;
            };
            let input = Input::new(hay)
                .span(start..hay.len())
                .anchored(Anchored::Yes);
            let Some(m) = re.search_with(cache, &input) else {
                // The rest the usual way, from here: the span keeps what comes before in view
                // of `\b` and the like. (These patterns cannot match empty.)
                let mut rest = Input::new(hay).span(start..hay.len());
                while count < limit {
                    let Some(m) = re.search_with(cache, &rest) else {
                        return;
                    };
                    found(m.range());
                    count += 1;
                    rest.set_start(m.end());
                }
                return;
            };
            found(m.range());
            count += 1;
            at = m.end();
        }
    }
}

impl FirstBytes {
    fn of(set: &[bool; 256]) -> FirstBytes {
        let bytes: Vec<u8> = (0..=255u8).filter(|&b| set[usize::from(b)]).collect();
        match *bytes.as_slice() {
            [a] => FirstBytes::One(a),
            [a, b] => FirstBytes::Two(a, b),
            [a, b, c] => FirstBytes::Three(a, b, c),
            [lo, .., hi] if hi < 0x80 && usize::from(hi - lo) + 1 == bytes.len() => {
                FirstBytes::Range(lo, hi)
            }
            _ => FirstBytes::Table(Box::new(*set)),
        }
    }

    /// Where the next byte of the set is, at or after `at`.
    fn next(&self, hay: &[u8], at: usize) -> Option<usize> {
        let rest = &hay[at..];
        let found = match *self {
            FirstBytes::One(a) => memchr::memchr(a, rest),
            FirstBytes::Two(a, b) => memchr::memchr2(a, b, rest),
            FirstBytes::Three(a, b, c) => memchr::memchr3(a, b, c, rest),
            FirstBytes::Range(lo, hi) => {
                let mut i = 0;
                while let Some(chunk) = rest.get(i..i + 8) {
                    let hits = in_range8(u64::from_le_bytes(chunk.try_into().expect("8")), lo, hi);
                    if hits != 0 {
                        return Some(at + i + hits.trailing_zeros() as usize / 8);
                    }
                    i += 8;
                }
                rest[i..]
                    .iter()
                    .position(|b| (lo..=hi).contains(b))
                    .map(|p| i + p)
            }
            FirstBytes::Table(ref set) => rest.iter().position(|&b| set[usize::from(b)]),
        };
        found.map(|p| at + p)
    }
}

/// The high bit of each of eight bytes set where the byte is within `lo..=hi` (both below
/// 0x80); the lowest set bit marks the first such byte exactly.
fn in_range8(w: u64, lo: u8, hi: u8) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let low7 = w & !HIGH;
    // Each byte: (b + 0x80 - lo) keeps its high bit where b >= lo; (b + 0x7f - hi) where b > hi.
    let at_least_lo = low7 + ONES * u64::from(0x80 - lo);
    let above_hi = low7 + ONES * u64::from(0x7f - hi);
    at_least_lo & !above_hi & !w & HIGH
}

/// The anchored matcher of `pattern` and its first bytes, when every match starts with one of
/// a known set of bytes.
fn anchored(pattern: &str, ignore_case: bool) -> Option<AnchoredFinder> {
    let hir = regex_syntax::ParserBuilder::new()
        .unicode(false)
        .utf8(false)
        .case_insensitive(ignore_case)
        .build()
        .parse(pattern)
        .ok()?;
    let mut extractor = Extractor::new();
    extractor
        .kind(ExtractKind::Prefix)
        .limit_class(256)
        .limit_literal_len(1)
        .limit_total(256);
    let prefixes = extractor.extract(&hir);
    if prefixes.min_literal_len()? == 0 {
        return None;
    }
    let mut first = [false; 256];
    for literal in prefixes.literals()? {
        first[usize::from(literal.as_bytes()[0])] = true;
    }
    let re = meta::Regex::builder()
        .syntax(
            regex_automata::util::syntax::Config::new()
                .unicode(false)
                .utf8(false)
                .case_insensitive(ignore_case),
        )
        .build(pattern)
        .ok()?;
    static NEXT_ID: AtomicUsize = AtomicUsize::new(0);
    Some(AnchoredFinder {
        re,
        first: FirstBytes::of(&first),
        id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finder(pattern: &str) -> Finder {
        Finder::new(
            crate::filter::regex(pattern, false).unwrap(),
            pattern,
            false,
        )
    }

    fn spans(finder: &Finder, hay: &[u8], limit: usize) -> (Vec<Range<usize>>, Vec<Range<usize>>) {
        let mut got = Vec::new();
        finder.each(hay, limit, |r| got.push(r));
        let want = finder
            .regex()
            .find_iter(hay)
            .take(limit)
            .map(|m| m.range())
            .collect();
        (got, want)
    }

    const PATTERNS: [&str; 10] = [
        "[0-9]+",
        "[a-z]+[0-9]",
        "[0-9]+|pass",
        "^[A-Z]",
        r"\b[a-z]+\b",
        "x*",
        "u(nknown|ser)",
        "[^ ]+",
        "(?i)USER",
        r"\d{2}:\d{2}",
    ];

    #[test]
    fn the_same_matches_as_the_regex_crate() {
        let hay =
            b"Jun 14 15:16:01 combo sshd(pam_unix)[19939]: check pass; user unknown a1b22 x9 ";
        let finders: Vec<Finder> = PATTERNS.iter().map(|p| finder(p)).collect();
        for (pattern, finder) in PATTERNS.iter().zip(&finders) {
            for limit in [1, 2, usize::MAX] {
                let (got, want) = spans(finder, hay, limit);
                assert_eq!(got, want, "{pattern} limit {limit}");
            }
        }
        // Random values over a small alphabet.
        for hay in crate::testing::random_values(b"aux1 9:Pp\xff_sU", 24, 3000) {
            for (pattern, finder) in PATTERNS.iter().zip(&finders) {
                let (got, want) = spans(finder, &hay, usize::MAX);
                assert_eq!(got, want, "{pattern} over {hay:?}");
            }
        }
    }

    #[test]
    fn the_next_first_byte_is_found_in_every_form() {
        let hay: Vec<u8> = (0..300u32).map(|i| (i * 37 % 256) as u8).collect();
        let sets: [&[u8]; 5] = [b"a", b"ab", b"a\xff0", b"0123456789", b"az{\x80"];
        for set in sets {
            let mut table = [false; 256];
            for &b in set {
                table[usize::from(b)] = true;
            }
            let first = FirstBytes::of(&table);
            for at in 0..hay.len() {
                let want = hay[at..]
                    .iter()
                    .position(|&b| table[usize::from(b)])
                    .map(|p| at + p);
                assert_eq!(first.next(&hay, at), want, "{set:?} from {at}");
            }
        }
        assert!(matches!(
            FirstBytes::of(&{
                let mut t = [false; 256];
                t[usize::from(b'0')..=usize::from(b'9')].fill(true);
                t
            }),
            FirstBytes::Range(b'0', b'9')
        ));
    }

    #[test]
    fn patterns_that_can_be_empty_or_start_anywhere_go_the_usual_way() {
        assert!(anchored("x*", false).is_none());
        assert!(anchored("[0-9]+", false).is_some());
        assert!(anchored("(?s).+", false).is_some());
    }
}
