//! Finding the byte that ends a short RFC5424 header token: a column (APP-NAME, PROCID, MSGID)
//! or an SD-PARAM value.
//!
//! These tokens mostly end within 16 bytes. memchr's vector search spends 40–60 instructions
//! a call choosing its routine and setting up before it looks at a byte; here the first 16
//! bytes are tested a word at a time, inline, and memchr takes over only past them. RFC5424
//! parsing went from 204 to 192 ns a message (`cargo bench --bench allocations`). RFC3164's
//! host and program searches keep memchr3: there the word test measured no faster.

const LO: u64 = 0x0101_0101_0101_0101;
const HI: u64 = 0x8080_8080_8080_8080;

/// A high bit in each byte of `word` that equals `b`, and possibly in bytes above the first
/// such byte (a borrow runs upwards), never below it: the lowest bit set is always exact.
#[inline(always)]
fn equal_bytes(word: u64, b: u8) -> u64 {
    let v = word ^ (LO * u64::from(b));
    v.wrapping_sub(LO) & !v & HI
}

/// Where the first byte of `hay` that is one of `needles` is; `far` searches what lies past
/// the first 16 bytes (or past the last whole word of a shorter `hay`).
#[inline(always)]
fn find_any<const N: usize>(
    hay: &[u8],
    needles: [u8; N],
    far: impl Fn(&[u8]) -> Option<usize>,
) -> Option<usize> {
    for at in [0, 8] {
        let Some(chunk) = hay.get(at..at + 8) else {
            return far(&hay[at..]).map(|i| at + i);
        };
        let word = u64::from_le_bytes(chunk.try_into().expect("a chunk of 8 bytes"));
        let hits = needles
            .iter()
            .fold(0, |hits, &b| hits | equal_bytes(word, b));
        if hits != 0 {
            return Some(at + (hits.trailing_zeros() / 8) as usize);
        }
    }
    far(&hay[16..]).map(|i| 16 + i)
}

/// The position of the first `a` in `hay`, as `memchr::memchr` gives it.
#[inline(always)]
pub(crate) fn find(hay: &[u8], a: u8) -> Option<usize> {
    find_any(hay, [a], |rest| memchr::memchr(a, rest))
}

/// The position of the first `a`, `b` or `c` in `hay`, as `memchr::memchr3` gives it.
#[inline(always)]
pub(crate) fn find3(hay: &[u8], a: u8, b: u8, c: u8) -> Option<usize> {
    find_any(hay, [a, b, c], |rest| memchr::memchr3(a, b, c, rest))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::Xorshift;

    #[test]
    fn finds_what_memchr_finds_at_every_length_and_position() {
        // Bytes that test the word arithmetic: the needles, their neighbours, zero, and bytes
        // with the high bit set.
        const ALPHABET: &[u8] = b" [:]\"\\!Z\x00\x01\x1f\x21\x7f\x80\xa0\xff";
        let mut random = Xorshift::default();
        let mut hay = Vec::new();
        for round in 0..20_000 {
            hay.clear();
            let len = round % 40;
            // Mostly letters, so that a needle is often the first of its kind far in.
            for _ in 0..len {
                let r = random.next().expect("endless");
                hay.push(if r % 4 == 0 {
                    ALPHABET[(r >> 8) as usize % ALPHABET.len()]
                } else {
                    b'a' + (r >> 8) as u8 % 26
                });
            }
            assert_eq!(find(&hay, b' '), memchr::memchr(b' ', &hay), "{hay:?}");
            assert_eq!(find(&hay, 0), memchr::memchr(0, &hay), "{hay:?}");
            assert_eq!(find(&hay, 0xff), memchr::memchr(0xff, &hay), "{hay:?}");
            assert_eq!(
                find3(&hay, b' ', b'[', b':'),
                memchr::memchr3(b' ', b'[', b':', &hay),
                "{hay:?}"
            );
            assert_eq!(
                find3(&hay, b'"', b'\\', b']'),
                memchr::memchr3(b'"', b'\\', b']', &hay),
                "{hay:?}"
            );
        }
    }

    #[test]
    fn a_byte_just_above_a_needle_is_not_taken_for_it() {
        // A borrow from the needle's byte flags the byte above; the needle comes first.
        assert_eq!(find(b" !", b' '), Some(0));
        assert_eq!(find(b"abcdefg !xyz", b' '), Some(7));
        assert_eq!(find(b"abcdefgh!", b' '), None);
        assert_eq!(find(b"abcdefgh!!!!!!!! ", b' '), Some(16));
        assert_eq!(find3(b"abcdefgh[\x5c", b']', b'[', b'\\'), Some(8));
    }
}
