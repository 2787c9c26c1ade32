//! The timestamps syslog senders write, scanned as syslog-ng scans them.
//!
//! RFC3164 headers carry many dialects: BSD `Mmm dd hh:mm:ss` (no year, optional fraction), ISO
//! 8601 (`2024-01-05T10:00:00.123+01:00`, also with a space for the `T`), Cisco PIX/ASA
//! `Mmm dd yyyy hh:mm:ss` and Linksys `Mmm dd hh:mm:ss yyyy`. RFC5424 headers carry only ISO.
//! The scanners return a [`WallClock`]: the fields as written, with the year and the UTC offset
//! left unknown when the sender did not write them. Turning that into an instant needs a time
//! zone and the current date, which belong to the layer above.

/// A calendar time as the sender wrote it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WallClock {
    /// Four-digit year; `None` for BSD timestamps, which have none.
    pub year: Option<i32>,
    /// 1..=12.
    pub month: u8,
    pub day: u8,
    pub hour: u8,
    pub minute: u8,
    pub second: u8,
    pub micros: u32,
    /// Seconds east of UTC, when the timestamp says.
    pub offset: Option<i32>,
}

/// The month abbreviations in lower case, three bytes each.
const MONTHS: &[u8; 36] = b"janfebmaraprmayjunjulaugsepoctnovdec";

/// Three bytes as one number, lowered: setting bit 5 lowers a letter and turns no other byte
/// into one.
const fn lowered_word(s: &[u8]) -> u32 {
    (s[0] as u32 | (s[1] as u32) << 8 | (s[2] as u32) << 16) | 0x20_2020
}

/// One of 32 slots for a lowered word; this multiplier keeps the twelve months apart.
const fn month_slot(word: u32) -> usize {
    (word.wrapping_mul(2059) >> 27) as usize
}

/// Each month's lowered word and number in its slot; 0 in the others (no lowered word is 0).
const MONTH_SLOTS: [(u32, u8); 32] = {
    let mut slots = [(0, 0); 32];
    let mut i = 0;
    while i < 12 {
        let word = lowered_word(MONTHS.split_at(3 * i).1);
        slots[month_slot(word)] = (word, i as u8 + 1);
        i += 1;
    }
    slots
};

/// 1..=12 for an English month abbreviation, in any case: one table slot and one comparison,
/// with no branch that depends on the month (the months of a busy sender's stamps vary).
fn month(abbrev: &[u8]) -> Option<u8> {
    let word = lowered_word(abbrev.get(..3)?);
    let (known, month) = MONTH_SLOTS[month_slot(word)];
    (known == word).then_some(month)
}

/// A fixed-width decimal field that may be padded with leading spaces (`" 5"`), as
/// syslog-ng's `scan_positive_int` reads it. Returns the value and the bytes consumed.
fn fixed_int(s: &[u8], width: usize) -> Option<u32> {
    let field = s.get(..width)?;
    if let [a @ b'0'..=b'9', b @ b'0'..=b'9'] = *field {
        return Some(u32::from(a - b'0') * 10 + u32::from(b - b'0'));
    }
    let digits = field.iter().position(|&b| b != b' ').unwrap_or(width);
    if digits == width {
        return None;
    }
    let mut value = 0u32;
    for &b in &field[digits..] {
        if !b.is_ascii_digit() {
            return None;
        }
        value = value * 10 + u32::from(b - b'0');
    }
    Some(value)
}

fn expect(s: &[u8], at: usize, byte: u8) -> Option<()> {
    (s.get(at) == Some(&byte)).then_some(())
}

/// `Mmm dd hh:mm:ss` at the start of `s` (15 bytes). Inlined, as [`iso`] is, so that the
/// fields stay in registers.
#[inline(always)]
fn bsd(s: &[u8], wc: &mut WallClock) -> Option<usize> {
    wc.month = month(s)?;
    expect(s, 3, b' ')?;
    wc.day = fixed_int(&s[4..], 2)? as u8;
    expect(s, 6, b' ')?;
    clock(&s[7..], wc)?;
    Some(15)
}

/// `hh:mm:ss` at the start of `s` (8 bytes).
#[inline(always)]
fn clock(s: &[u8], wc: &mut WallClock) -> Option<()> {
    wc.hour = fixed_int(s, 2)? as u8;
    expect(s, 2, b':')?;
    wc.minute = fixed_int(&s[3..], 2)? as u8;
    expect(s, 5, b':')?;
    wc.second = fixed_int(&s[6..], 2)? as u8;
    Some(())
}

fn is_bsd(s: &[u8]) -> bool {
    s.len() >= 15 && s[3] == b' ' && s[6] == b' ' && s[9] == b':' && s[12] == b':'
}

fn is_iso(s: &[u8]) -> bool {
    s.len() >= 19
        && s[4] == b'-'
        && s[7] == b'-'
        && (s[10] == b'T' || s[10] == b' ')
        && s[13] == b':'
        && s[16] == b':'
}

/// Cisco PIX/ASA: `Mmm dd yyyy hh:mm:ss` followed by `:` or a space.
fn is_pix(s: &[u8]) -> bool {
    s.len() >= 21
        && s[3] == b' '
        && s[6] == b' '
        && s[11] == b' '
        && s[14] == b':'
        && s[17] == b':'
        && (s[20] == b':' || s[20] == b' ')
        && s[7..11].iter().all(u8::is_ascii_digit)
}

/// Linksys: `Mmm dd hh:mm:ss yyyy` followed by white space.
fn is_linksys(s: &[u8]) -> bool {
    s.len() >= 21
        && s[3] == b' '
        && s[6] == b' '
        && s[9] == b':'
        && s[12] == b':'
        && s[15] == b' '
        && s[16..20].iter().all(u8::is_ascii_digit)
        && s[20].is_ascii_whitespace()
}

/// Fractional seconds after `.` or `,` (Aruba writes a comma): microseconds and bytes consumed.
/// Digits past the sixth are skipped.
fn fraction(s: &[u8]) -> (u32, usize) {
    const SCALE: [u32; 6] = [100_000, 10_000, 1_000, 100, 10, 1];
    if !matches!(s.first(), Some(b'.' | b',')) {
        return (0, 0);
    }
    let mut micros = 0u32;
    let mut digits = 0;
    for &b in &s[1..] {
        let digit = b.wrapping_sub(b'0');
        if digit > 9 {
            break;
        }
        if let Some(scale) = SCALE.get(digits) {
            micros += u32::from(digit) * scale;
        }
        digits += 1;
    }
    (micros, 1 + digits)
}

/// `+hh:mm` / `-hh:mm` not followed by another digit.
fn iso_offset(s: &[u8]) -> Option<i32> {
    if s.len() < 6
        || !matches!(s[0], b'+' | b'-')
        || !s[1].is_ascii_digit()
        || !s[2].is_ascii_digit()
        || s[3] != b':'
        || !s[4].is_ascii_digit()
        || !s[5].is_ascii_digit()
        || s.get(6).is_some_and(u8::is_ascii_digit)
    {
        return None;
    }
    let hours = i32::from(s[1] - b'0') * 10 + i32::from(s[2] - b'0');
    let minutes = i32::from(s[4] - b'0') * 10 + i32::from(s[5] - b'0');
    let sign = if s[0] == b'-' { -1 } else { 1 };
    Some(sign * (hours * 3600 + minutes * 60))
}

/// An ISO 8601 / RFC3339 timestamp at the start of `s`: the time and the bytes consumed.
/// Inlined: returned through memory, the caller's wide load of the fields written one by one
/// waited for them (a failed store forward: a fifth of the RFC5424 parse's samples).
#[inline(always)]
fn iso(s: &[u8]) -> Option<(WallClock, usize)> {
    let mut wc = match iso_digits(s) {
        Some(wc) => wc,
        None => iso_padded(s)?,
    };
    let mut at = 19;
    let (micros, used) = fraction(&s[at..]);
    wc.micros = micros;
    at += used;
    if s.get(at) == Some(&b'Z') {
        wc.offset = Some(0);
        at += 1;
    } else if let Some(offset) = iso_offset(&s[at..]) {
        wc.offset = Some(offset);
        at += 6;
    }
    Some((wc, at))
}

/// Eight bytes as a pattern, `d` standing for a digit: the mask of the digits' bytes and the
/// other bytes as they must be.
const fn shape(pattern: &[u8; 8]) -> (u64, u64) {
    let mut digits = [0u8; 8];
    let mut others = [0u8; 8];
    let mut i = 0;
    while i < 8 {
        if pattern[i] == b'd' {
            digits[i] = 0xFF;
        } else {
            others[i] = pattern[i];
        }
        i += 1;
    }
    (u64::from_le_bytes(digits), u64::from_le_bytes(others))
}

/// The digits of the eight bytes at `s[at..]`, less `'0'` (0 in the other bytes), when the
/// bytes have `shape`.
fn digits_of(s: &[u8; 19], at: usize, (digits, others): (u64, u64)) -> Option<u64> {
    const ZEROS: u64 = u64::from_le_bytes([b'0'; 8]);
    const HIGH: u64 = 0xF0F0_F0F0_F0F0_F0F0;
    let w = u64::from_le_bytes(s[at..at + 8].try_into().expect("eight bytes"));
    if w & !digits != others {
        return None;
    }
    // With the other bytes made '0', every byte is a digit when its high nibble is 3 and
    // still is after adding 6 (a byte that carries into the next, 0xFA or more, fails on its
    // own).
    let v = (w & digits) | (ZEROS & !digits);
    let high = (v & HIGH) | ((v.wrapping_add(0x0606_0606_0606_0606) & HIGH) >> 4);
    (high == 0x3333_3333_3333_3333).then(|| v - ZEROS)
}

/// Byte `i` of the result is the number written with digits `i` and `i + 1` of `digits`
/// (no byte overflows: 9 × 10 + 9).
fn two_digit_numbers(digits: u64) -> [u8; 8] {
    (digits * 10 + (digits >> 8)).to_le_bytes()
}

/// `yyyy-mm-ddThh:mm:ss` with every number written in digits, as senders write it: checked
/// and read eight bytes at a time. `None` for anything else, which [`iso_padded`] reads.
#[inline(always)]
fn iso_digits(s: &[u8]) -> Option<WallClock> {
    const DATE: (u64, u64) = shape(b"dddd-dd-");
    const DAY_T: (u64, u64) = shape(b"ddTdd:dd");
    const DAY_SPACE: (u64, u64) = shape(b"dd dd:dd");
    const TIME: (u64, u64) = shape(b"dd:dd:dd");
    let s: &[u8; 19] = s.get(..19)?.try_into().ok()?;
    let date = two_digit_numbers(digits_of(s, 0, DATE)?);
    let day = if s[10] == b' ' { DAY_SPACE } else { DAY_T };
    let day = two_digit_numbers(digits_of(s, 8, day)?);
    let time = two_digit_numbers(digits_of(s, 11, TIME)?);
    Some(WallClock {
        year: Some(i32::from(date[0]) * 100 + i32::from(date[2])),
        month: date[5],
        day: day[0],
        hour: day[3],
        minute: day[6],
        second: time[6],
        ..WallClock::default()
    })
}

/// `yyyy-mm-ddThh:mm:ss` whose numbers may be padded with spaces (` 5` for `05`), as
/// syslog-ng's scanner allows.
fn iso_padded(s: &[u8]) -> Option<WallClock> {
    let mut wc = WallClock {
        year: Some(fixed_int(s, 4)? as i32),
        ..WallClock::default()
    };
    expect(s, 4, b'-')?;
    wc.month = fixed_int(&s[5..], 2)? as u8;
    expect(s, 7, b'-')?;
    wc.day = fixed_int(&s[8..], 2)? as u8;
    if !matches!(s.get(10), Some(b'T' | b' ')) {
        return None;
    }
    clock(&s[11..], &mut wc)?;
    Some(wc)
}

/// The timestamp of an RFC3164 header, in any dialect syslog-ng accepts, with a trailing `:`
/// (Cisco) consumed too. Returns the time and the bytes consumed, or `None` when `s` does not
/// start with a timestamp.
pub fn scan_rfc3164(s: &[u8]) -> Option<(WallClock, usize)> {
    let (wc, mut at) = if is_iso(s) {
        iso(s)?
    } else if is_pix(s) {
        let mut wc = WallClock {
            month: month(s)?,
            ..WallClock::default()
        };
        wc.day = fixed_int(&s[4..], 2)? as u8;
        wc.year = Some(fixed_int(&s[7..], 4)? as i32);
        clock(&s[12..], &mut wc)?;
        (wc, 20)
    } else if is_linksys(s) {
        let mut wc = WallClock::default();
        bsd(s, &mut wc)?;
        wc.year = Some(fixed_int(&s[16..], 4)? as i32);
        (wc, 20)
    } else if is_bsd(s) {
        let mut wc = WallClock::default();
        let mut at = bsd(s, &mut wc)?;
        let (micros, used) = fraction(&s[at..]);
        wc.micros = micros;
        at += used;
        (wc, at)
    } else {
        return None;
    };
    if s.get(at) == Some(&b':') {
        at += 1;
    }
    Some((wc, at))
}

/// Whether `text`, a BSD stamp that [`scan_rfc3164`] read as `wc`, is written exactly as a BSD
/// stamp of `wc` is formatted (`Jan  5 13:56:09`: the month capitalised, the day padded with a
/// space, two digits for each part of the time, second 59 at most). Such a stamp can be shown
/// again by copying it.
pub fn is_canonical_bsd(text: &[u8; 15], wc: &WallClock) -> bool {
    // The scan checked the shape and read the month in any case and each number as one or
    // two digits, padded with a space: what is left is case and padding.
    wc.year.is_none()
        && wc.offset.is_none()
        && wc.second < 60
        && text[0].is_ascii_uppercase()
        && text[1].is_ascii_lowercase()
        && text[2].is_ascii_lowercase()
        && (text[4] == b' ') == (wc.day < 10)
        && text[7] != b' '
        && text[10] != b' '
        && text[13] != b' '
}

/// Whether `text`, the start of an ISO stamp read as `wc`, is that stamp exactly as an ISO
/// stamp of `wc` without fractions is formatted (`2026-11-24T13:50:17+01:00`: every number in
/// digits, a `T`, no fraction, the offset in digits — not `Z`, and `-` only west of UTC).
/// Such a stamp can be shown again by copying it.
pub fn is_canonical_iso(text: &[u8; 25], wc: &WallClock) -> bool {
    let Some(offset) = wc.offset else {
        return false;
    };
    wc.year.is_some()
        && wc.second < 60
        && text.iter().enumerate().all(|(i, &b)| match i {
            4 | 7 => b == b'-',
            10 => b == b'T',
            13 | 16 | 22 => b == b':',
            19 => b == if offset < 0 { b'-' } else { b'+' },
            // Minutes of the offset past 59 were read as more hours.
            23 => (b'0'..=b'5').contains(&b),
            _ => b.is_ascii_digit(),
        })
}

/// The ISO timestamp of an RFC5424 header: the time and the bytes consumed.
#[inline]
pub fn scan_rfc5424(s: &[u8]) -> Option<(WallClock, usize)> {
    iso(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wc(s: &str) -> (WallClock, usize) {
        scan_rfc3164(s.as_bytes()).unwrap_or_else(|| panic!("no timestamp in {s:?}"))
    }

    #[test]
    fn months_are_read_in_any_case_and_nothing_else_passes() {
        let names = [
            "Jan", "FEB", "mar", "aPr", "May", "Jun", "jul", "Aug", "Sep", "Oct", "Nov", "DEC",
        ];
        for (i, name) in names.iter().enumerate() {
            assert_eq!(month(name.as_bytes()), Some(i as u8 + 1), "{name}");
        }
        assert_eq!(month(b"jaN 5"), Some(1));
        for bad in ["J@n", "Ja", "jbn", "{an", "J\u{1}n"] {
            assert_eq!(month(bad.as_bytes()), None, "{bad:?}");
        }
        assert_eq!(fixed_int(b" 5", 2), Some(5));
        assert_eq!(fixed_int(b"07", 2), Some(7));
        assert_eq!(fixed_int(b"7x", 2), None);
    }

    #[test]
    fn bsd_without_year_pads_the_day_with_a_space() {
        let (t, used) = wc("Jan  5 13:56:09 host");
        assert_eq!(
            (t.year, t.month, t.day, t.hour, t.minute, t.second),
            (None, 1, 5, 13, 56, 9)
        );
        assert_eq!(used, 15);
    }

    #[test]
    fn bsd_with_fraction_and_cisco_colon() {
        let (t, used) = wc("Oct 11 22:14:15.123456789: host");
        assert_eq!(t.micros, 123_456);
        assert_eq!(used, "Oct 11 22:14:15.123456789:".len());
    }

    #[test]
    fn iso_with_offset_zulu_and_none() {
        let (t, used) = wc("2025-01-05T13:56:09.5+01:30 x");
        assert_eq!(
            (t.year, t.micros, t.offset, used),
            (Some(2025), 500_000, Some(5400), 27)
        );
        assert_eq!(wc("2025-01-05 13:56:09Z x").0.offset, Some(0));
        assert_eq!(wc("2025-01-05T13:56:09 x").0.offset, None);
    }

    #[test]
    fn iso_digits_reads_what_the_padded_scan_reads() {
        let base = *b"2025-01-05T13:56:09";
        assert_eq!(iso_digits(&base), iso_padded(&base));
        assert!(iso_digits(&base).is_some());
        // Every byte in turn replaced: the one-pass read takes exactly the stamps written in
        // digits, and reads them as the padded scan does.
        for at in 0..base.len() {
            for b in [
                b'0', b'7', b'9', b' ', b'-', b'T', b':', b'/', b'a', 0xfa, 0xff,
            ] {
                let mut s = base;
                s[at] = b;
                let digits_only = (base[at].is_ascii_digit() && b.is_ascii_digit())
                    || (at == 10 && b == b' ')
                    || b == base[at];
                let text = String::from_utf8_lossy(&s);
                assert_eq!(iso_digits(&s).is_some(), digits_only, "{text:?}");
                if digits_only {
                    assert_eq!(iso_digits(&s), iso_padded(&s), "{text:?}");
                }
            }
        }
        assert_eq!(iso_digits(b"2025-01-05T13:56:0"), None);
        assert_eq!(
            iso_padded(b"2025- 1- 5T 3:56:09").map(|w| (w.month, w.day, w.hour)),
            Some((1, 5, 3))
        );
    }

    #[test]
    fn fractions_keep_six_digits_and_consume_all() {
        assert_eq!(fraction(b"."), (0, 1));
        assert_eq!(fraction(b",5 x"), (500_000, 2));
        assert_eq!(fraction(b".000001"), (1, 7));
        assert_eq!(fraction(b".1234567Z"), (123_456, 8));
        assert_eq!(fraction(b"x"), (0, 0));
    }

    #[test]
    fn pix_and_linksys_carry_a_year() {
        let (t, used) = wc("Jun 13 2024 12:34:56: %ASA-6-302013");
        assert_eq!((t.year, t.month, t.day, used), (Some(2024), 6, 13, 21));
        let (t, used) = wc("Jun 13 12:34:56 2024 host");
        assert_eq!((t.year, t.hour, used), (Some(2024), 12, 20));
    }

    #[test]
    fn not_a_timestamp() {
        for s in [
            "",
            "Foo 13 12:34:56 x",
            "Jan 13 12-34-56 host",
            "program[12]: hello",
        ] {
            assert_eq!(scan_rfc3164(s.as_bytes()), None, "{s:?}");
        }
    }
}
