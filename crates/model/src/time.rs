//! Instants with the UTC offset they were written in, and the date formats of syslog-ng.
//!
//! A message keeps its timestamp as seconds, microseconds and the offset of the zone the sender
//! wrote it in, as syslog-ng does: `$ISODATE` prints it in that zone unless the destination
//! sets `time-zone()`. Breaking an instant into calendar fields is done here with integer
//! arithmetic (no time zone database on the hot path); zone rules are looked up only to find
//! an offset, through [`Zone`].

use jiff::tz::TimeZone;
use sluice_protocol::WallClock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// An instant plus the offset (seconds east of UTC) to show it in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UnixTime {
    pub secs: i64,
    pub micros: u32,
    pub offset: i32,
}

impl UnixTime {
    pub fn now(zone: &Zone) -> UnixTime {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        let secs = now.as_secs() as i64;
        UnixTime {
            secs,
            micros: now.subsec_micros(),
            offset: zone.offset_at(secs),
        }
    }

    /// The instant `micros` after the epoch, shown in `zone`.
    pub fn from_micros(micros: i64, zone: &Zone) -> UnixTime {
        let secs = micros.div_euclid(1_000_000);
        UnixTime {
            secs,
            micros: micros.rem_euclid(1_000_000) as u32,
            offset: zone.offset_at(secs),
        }
    }

    /// The same instant shown in another offset.
    pub fn in_offset(self, offset: i32) -> UnixTime {
        UnixTime { offset, ..self }
    }

    /// Calendar fields in the time's own offset.
    pub fn civil(self) -> Civil {
        Civil::from_local_secs(self.secs + i64::from(self.offset))
    }
}

/// A time zone from the configuration (`time-zone("Europe/Budapest")`, `"+01:00"`) or the
/// machine's.
///
/// Looking a zone's rules up for every message is costly, and messages come in runs from the
/// same hour, so a zone remembers the offset of the last hour it resolved — of an instant and
/// of a wall-clock time — provided the whole hour has one offset. Hours that hold a DST
/// transition always go to the zone's rules.
#[derive(Clone, Debug)]
pub struct Zone {
    rules: TimeZone,
    /// The offset of a zone that has never changed it (UTC, `+05:30`): no lookups at all.
    constant: Option<i32>,
    by_instant: Arc<HourCache>,
    by_wall_clock: Arc<HourCache>,
}

/// One hour (seconds / 3600) and the offset in force for all of it, packed in one word:
/// `(hour + 1) << 24 | (offset + 2^23)`; 0 means empty.
#[derive(Debug, Default)]
struct HourCache(AtomicU64);

impl HourCache {
    fn get(&self, hour: i64) -> Option<i32> {
        let packed = self.0.load(Ordering::Relaxed);
        (packed != 0 && (packed >> 24) as i64 == hour + 1)
            .then(|| (packed & 0xFF_FFFF) as i32 - (1 << 23))
    }

    fn set(&self, hour: i64, offset: i32) {
        if (0..(1 << 39)).contains(&hour) && offset.abs() < (1 << 22) {
            self.0.store(
                ((hour + 1) as u64) << 24 | (offset + (1 << 23)) as u64,
                Ordering::Relaxed,
            );
        }
    }
}

impl Zone {
    fn new(rules: TimeZone) -> Zone {
        let never_changes = rules.following(jiff::Timestamp::MIN).next().is_none();
        let constant = match rules.to_fixed_offset() {
            Ok(offset) => Some(offset.seconds()),
            Err(_) if never_changes => Some(rules.to_offset(jiff::Timestamp::UNIX_EPOCH).seconds()),
            Err(_) => None,
        };
        Zone {
            rules,
            constant,
            by_instant: Arc::default(),
            by_wall_clock: Arc::default(),
        }
    }

    /// The machine's zone, read from the system once per process: `$C_` macros ask for it per
    /// message, and reading `/etc/localtime` each time would be I/O on the hot path.
    pub fn local() -> &'static Zone {
        static LOCAL: std::sync::OnceLock<Zone> = std::sync::OnceLock::new();
        LOCAL.get_or_init(|| Zone::new(TimeZone::try_system().unwrap_or(TimeZone::UTC)))
    }

    /// A zone name from the tz database or a fixed offset like `+01:00` / `-0530`.
    pub fn parse(name: &str) -> Result<Zone, String> {
        if let Some(offset) = parse_offset(name) {
            let offset = jiff::tz::Offset::from_seconds(offset).map_err(|e| e.to_string())?;
            return Ok(Zone::new(TimeZone::fixed(offset)));
        }
        TimeZone::get(name)
            .map(Zone::new)
            .map_err(|e| format!("unknown time zone '{name}': {e}"))
    }

    /// The offset in force at an instant.
    pub fn offset_at(&self, secs: i64) -> i32 {
        if let Some(offset) = self.constant {
            return offset;
        }
        let hour = secs.div_euclid(3600);
        if let Some(offset) = self.by_instant.get(hour) {
            return offset;
        }
        let offset = self.rules_offset_at(secs);
        let start = hour * 3600;
        if self.rules_offset_at(start) == offset && self.rules_offset_at(start + 3599) == offset {
            self.by_instant.set(hour, offset);
        }
        offset
    }

    fn rules_offset_at(&self, secs: i64) -> i32 {
        match jiff::Timestamp::from_second(secs) {
            Ok(ts) => self.rules.to_offset(ts).seconds(),
            Err(_) => 0,
        }
    }

    /// The instant and offset of a wall-clock time given as seconds counted as if it were UTC
    /// (see [`civil_to_secs`]); `None` when the zone cannot place it.
    fn resolve(&self, wall: i64) -> Option<(i64, i32)> {
        if let Some(offset) = self.constant {
            return Some((wall - i64::from(offset), offset));
        }
        let hour = wall.div_euclid(3600);
        if let Some(offset) = self.by_wall_clock.get(hour) {
            return Some((wall - i64::from(offset), offset));
        }
        let c = Civil::from_local_secs(wall);
        let dt = jiff::civil::DateTime::new(
            c.year as i16,
            c.month as i8,
            c.day as i8,
            c.hour as i8,
            c.minute as i8,
            c.second as i8,
            0,
        )
        .ok()?;
        let secs = self
            .rules
            .to_ambiguous_timestamp(dt)
            .compatible()
            .ok()?
            .as_second();
        // The offset in force at that instant, as syslog-ng shows it: a time in a DST gap moves
        // forward (02:30 becomes 03:30+02:00).
        let offset = self.rules_offset_at(secs);
        // Cache only when every wall-clock second of this hour has this one offset.
        let start = hour * 3600 - i64::from(offset);
        if wall - secs == i64::from(offset)
            && self.rules_offset_at(start) == offset
            && self.rules_offset_at(start + 3599) == offset
        {
            self.by_wall_clock.set(hour, offset);
        }
        Some((secs, offset))
    }
}

fn parse_offset(s: &str) -> Option<i32> {
    let b = s.as_bytes();
    let sign = match b.first()? {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let digits: Vec<i32> = b[1..]
        .iter()
        .filter(|c| **c != b':')
        .map(|c| c.is_ascii_digit().then(|| i32::from(c - b'0')))
        .collect::<Option<_>>()?;
    if digits.len() != 4 {
        return None;
    }
    Some(sign * ((digits[0] * 10 + digits[1]) * 3600 + (digits[2] * 10 + digits[3]) * 60))
}

/// The current year and month where the server runs, for guessing the year of BSD timestamps.
#[derive(Clone, Copy, Debug)]
pub struct Today {
    pub year: i32,
    pub month: u8,
}

impl Today {
    pub fn of(now: UnixTime) -> Today {
        let c = now.civil();
        Today {
            year: c.year,
            month: c.month,
        }
    }

    /// syslog-ng's guess: December seen in January is last year's, January seen in December
    /// is next year's.
    pub fn year_for_month(self, month: u8) -> i32 {
        match (month, self.month) {
            (12, 1) => self.year - 1,
            (1, 12) => self.year + 1,
            _ => self.year,
        }
    }
}

/// The instant of a parsed timestamp. Without an offset in the text, `hint` (the source's
/// `time-zone()`) or else the local zone decides. Out-of-range fields roll over as C's `mktime`
/// rolls them (`Feb 29` of a common year is `Mar 1`), as in syslog-ng; a time that cannot be
/// placed at all falls back to `recvd`.
pub fn resolve(
    wc: &WallClock,
    hint: Option<&Zone>,
    local: &Zone,
    today: Today,
    recvd: UnixTime,
) -> UnixTime {
    resolve_exact(wc, hint, local, today, recvd).0
}

/// As [`resolve`], and whether the instant, in the offset found, shows the wall clock that was
/// written: `false` when a field rolled over (`Feb 29` of a common year, second 60), a DST gap
/// moved the time forward, or the time fell back to `recvd`.
///
/// Inlined into ingest: returned through memory, the pair was written field by field and read
/// back with one wide load that waited for those stores (a third of `push_message`'s samples).
#[inline(always)]
pub fn resolve_exact(
    wc: &WallClock,
    hint: Option<&Zone>,
    local: &Zone,
    today: Today,
    recvd: UnixTime,
) -> (UnixTime, bool) {
    let year = wc.year.unwrap_or_else(|| today.year_for_month(wc.month));
    let zone = hint.unwrap_or(local);
    let Some(wall) = civil_to_secs(year, wc.month, wc.day, wc.hour, wc.minute, wc.second) else {
        return (recvd, false);
    };
    let placed = match wc.offset {
        Some(offset) => Some((wall - i64::from(offset), offset)),
        None => zone.resolve(wall),
    };
    match placed {
        Some((secs, offset)) => {
            let rolled = wc.second > 59 || (wc.day > 28 && wc.day > days_in_month(year, wc.month));
            let t = UnixTime {
                secs,
                micros: wc.micros,
                offset,
            };
            (t, !rolled && secs + i64::from(offset) == wall)
        }
        None => (recvd, false),
    }
}

/// 28 to 31; `month` is 1..=12.
fn days_in_month(year: i32, month: u8) -> u8 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Seconds of a wall-clock time counted as if it were UTC; days past the end of a month roll
/// into the next.
fn civil_to_secs(year: i32, month: u8, day: u8, hour: u8, minute: u8, second: u8) -> Option<i64> {
    if !(1..=12).contains(&month) || day == 0 || day > 31 || hour > 23 || minute > 59 || second > 60
    {
        return None;
    }
    Some(
        days_from_civil(year, month, 1) * 86400
            + (i64::from(day) - 1) * 86400
            + i64::from(hour) * 3600
            + i64::from(minute) * 60
            + i64::from(second),
    )
}

/// Days since 1970-01-01 of a proleptic Gregorian date. Every BSD stamp passes here: from
/// 1970 to 2099 every fourth year is a leap year, so the days are counted with a table of
/// month starts; other years take [`days_from_civil_any_year`].
fn days_from_civil(year: i32, month: u8, day: u8) -> i64 {
    /// Days of a common year before the first of each month.
    const BEFORE_MONTH: [u16; 12] = [0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334];
    if (1970..2100).contains(&year) && (1..=12).contains(&month) {
        let years = i64::from(year - 1970);
        // 29 Februaries before this year's first of January: 1972's is the first.
        let leap_days = (years + 1) / 4;
        let this_leap = year % 4 == 0 && month > 2;
        return years * 365
            + leap_days
            + i64::from(BEFORE_MONTH[usize::from(month - 1)])
            + i64::from(this_leap)
            + i64::from(day)
            - 1;
    }
    days_from_civil_any_year(year, month, day)
}

/// [`days_from_civil`] for any year (Howard Hinnant's algorithm).
fn days_from_civil_any_year(year: i32, month: u8, day: u8) -> i64 {
    let y = i64::from(year) - i64::from(month <= 2);
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146097 + doe - 719468
}

/// Calendar fields of a local time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Civil {
    pub year: i32,
    /// 1..=12
    pub month: u8,
    pub day: u8,
    pub hour: u8,
    pub minute: u8,
    pub second: u8,
    /// 0 = Sunday
    pub weekday: u8,
    /// 0-based day of the year
    pub yday: u16,
}

impl Civil {
    fn from_local_secs(local: i64) -> Civil {
        let days = local.div_euclid(86400);
        let rem = local.rem_euclid(86400);
        let (year, month, day) = date_of_days(days);
        Civil {
            year,
            month,
            day,
            hour: (rem / 3600) as u8,
            minute: (rem % 3600 / 60) as u8,
            second: (rem % 60) as u8,
            weekday: (days + 4).rem_euclid(7) as u8,
            yday: (days - days_from_civil(year, 1, 1)) as u16,
        }
    }

    /// ISO 8601 week number.
    pub fn iso_week(&self) -> u32 {
        let wday = (i32::from(self.weekday) + 6) % 7; // Monday = 0
        let week = (i32::from(self.yday) - wday + 10) / 7;
        if week < 1 {
            let prev = Civil::from_local_secs(days_from_civil(self.year - 1, 12, 31) * 86400);
            return prev.iso_week();
        }
        let days_in_year = if is_leap(self.year) { 366 } else { 365 };
        if week == 53 && i32::from(self.yday) - wday + 3 >= days_in_year {
            return 1;
        }
        week as u32
    }
}

fn is_leap(y: i32) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

pub const MONTH_ABBREV: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];
pub const MONTH_NAME: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
pub const WEEKDAY_ABBREV: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
pub const WEEKDAY_NAME: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];

/// `ts-format()`: how `$STAMP` and the default file format write a timestamp.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TsFormat {
    /// `Jan  5 13:56:09` (`rfc3164`, `bsd`)
    #[default]
    Bsd,
    /// `2025-01-05T13:56:09+00:00` (`rfc3339`, `iso`)
    Iso,
    /// `2025 Jan  5 13:56:09`
    Full,
    /// `1736085369`
    Unix,
}

impl TsFormat {
    pub fn parse(name: &str) -> Option<TsFormat> {
        Some(match name {
            "rfc3164" | "bsd" => TsFormat::Bsd,
            "rfc3339" | "iso" => TsFormat::Iso,
            "full" => TsFormat::Full,
            "unix" | "utc" => TsFormat::Unix,
            _ => return None,
        })
    }
}

/// Appends the decimal digits of `n`.
#[inline]
pub fn push_num(out: &mut Vec<u8>, n: impl itoa::Integer) {
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

/// Appends `n` right-aligned in `width` characters, padded with `pad` (`b'0'` or `b' '`).
#[inline]
pub fn push_padded(out: &mut Vec<u8>, n: u64, width: usize, pad: u8) {
    let mut buf = itoa::Buffer::new();
    let digits = buf.format(n).as_bytes();
    out.extend(std::iter::repeat_n(pad, width.saturating_sub(digits.len())));
    out.extend_from_slice(digits);
}

/// Appends a number below 100 as two digits: the hours, minutes and seconds of every stamp.
#[inline]
fn push2(out: &mut Vec<u8>, n: u8) {
    out.extend_from_slice(&[b'0' + n / 10 % 10, b'0' + n % 10]);
}

/// A stamp a thread formatted last, without a fraction: what it was of, and its text.
#[derive(Clone, Copy)]
struct LastStamp {
    secs: i64,
    offset: i32,
    format: TsFormat,
    len: u8,
    text: [u8; LastStamp::MOST],
}

impl LastStamp {
    /// The longest text kept: an ISO stamp of a ten-digit year is 31 bytes.
    const MOST: usize = 32;
}

thread_local! {
    /// The messages of a burst share their second: the last stamp formatted is copied
    /// rather than formatted again.
    static LAST_STAMP: std::cell::Cell<Option<LastStamp>> = const { std::cell::Cell::new(None) };
}

/// Writes `t` in `format` with `frac_digits` digits of fractional seconds. Every message
/// passes here: a stamp without a fraction of the same second, offset and format as the
/// last this thread wrote is copied from it ([`LAST_STAMP`]); others are formatted
/// ([`format_stamp`]).
pub fn write_stamp(out: &mut Vec<u8>, t: UnixTime, format: TsFormat, frac_digits: u8) {
    if frac_digits > 0 || format == TsFormat::Unix {
        return format_stamp(out, t, format, frac_digits);
    }
    let same = |l: &LastStamp| l.secs == t.secs && l.offset == t.offset && l.format == format;
    if let Some(last) = LAST_STAMP.get().filter(same) {
        out.extend_from_slice(&last.text[..usize::from(last.len)]);
        return;
    }
    let start = out.len();
    format_stamp(out, t, format, 0);
    let written = &out[start..];
    if written.len() <= LastStamp::MOST {
        let mut text = [0; LastStamp::MOST];
        text[..written.len()].copy_from_slice(written);
        LAST_STAMP.set(Some(LastStamp {
            secs: t.secs,
            offset: t.offset,
            format,
            len: written.len() as u8,
            text,
        }));
    }
}

/// Formats `t` as [`write_stamp`] writes it. The date is computed without the weekday and
/// day of the year, and each stamp is assembled in an array and appended at once.
fn format_stamp(out: &mut Vec<u8>, t: UnixTime, format: TsFormat, frac_digits: u8) {
    if format == TsFormat::Unix {
        push_num(out, t.secs);
        write_fraction(out, t.micros, frac_digits);
        return;
    }
    let local = t.secs + i64::from(t.offset);
    let (year, month, day) = date_of_days(local.div_euclid(86400));
    let clock = clock_text(local.rem_euclid(86400) as u32);
    match format {
        TsFormat::Bsd | TsFormat::Full => {
            if format == TsFormat::Full {
                push_num(out, year);
                out.push(b' ');
            }
            out.extend_from_slice(&bsd_text(month, day, clock));
            write_fraction(out, t.micros, frac_digits);
        }
        TsFormat::Iso => {
            push_padded(out, year.max(0) as u64, 4, b'0');
            let mut text = *b"-00-00T";
            text[1..3].copy_from_slice(&two_digits(month));
            text[4..6].copy_from_slice(&two_digits(day));
            out.extend_from_slice(&text);
            out.extend_from_slice(&clock);
            write_fraction(out, t.micros, frac_digits);
            write_offset(out, t.offset);
        }
        TsFormat::Unix => unreachable!("handled above"),
    }
}

/// The year, month (1..=12) and day of a count of days since 1970-01-01. Every formatted
/// stamp passes here: within a 400-year era the date is found with multiplications and
/// shifts only (Neri and Schneider, "Euclidean affine functions and their application to
/// calendar algorithms", 2022), on days counted from a 1 March.
fn date_of_days(days: i64) -> (i32, u8, u8) {
    const ERA: i64 = 146_097;
    // Days from 0000-03-01 to 1970-01-01.
    let z = days + 719_468;
    let era = z.div_euclid(ERA);
    let day_of_era = (z - era * ERA) as u32;
    // Century of the era, then year of the century and day of that year.
    let n1 = 4 * day_of_era + 3;
    let century = n1 / 146_097;
    let n2 = (n1 % 146_097) | 3;
    let p2 = 2_939_745 * u64::from(n2);
    let year_of_century = (p2 >> 32) as u32;
    let day_of_year = (p2 as u32) / 2_939_745 / 4;
    // Month (counted from March) and day of the month.
    let n3 = 2141 * day_of_year + 197_913;
    let (month, day) = ((n3 >> 16) as u8, ((n3 & 0xffff) / 2141 + 1) as u8);
    let january_or_february = day_of_year >= 306;
    let year = era * 400 + i64::from(100 * century + year_of_century);
    let month = if january_or_february {
        month - 12
    } else {
        month
    };
    ((year + i64::from(january_or_february)) as i32, month, day)
}

/// `13:56:09` for a second of the day.
fn clock_text(second_of_day: u32) -> [u8; 8] {
    clock_of(
        (second_of_day / 3600) as u8,
        (second_of_day % 3600 / 60) as u8,
        (second_of_day % 60) as u8,
    )
}

/// `hh:mm:ss`.
fn clock_of(hour: u8, minute: u8, second: u8) -> [u8; 8] {
    let [h0, h1] = two_digits(hour);
    let [m0, m1] = two_digits(minute);
    let [s0, s1] = two_digits(second);
    [h0, h1, b':', m0, m1, b':', s0, s1]
}

/// A BSD stamp, `Jan  5 13:56:09`: the day padded with a space, not a zero.
fn bsd_text(month: u8, day: u8, clock: [u8; 8]) -> [u8; 15] {
    let mut text = [b' '; 15];
    text[..3].copy_from_slice(MONTH_ABBREV[month as usize - 1].as_bytes());
    let [tens, ones] = two_digits(day);
    text[4] = if day >= 10 { tens } else { b' ' };
    text[5] = ones;
    text[7..].copy_from_slice(&clock);
    text
}

/// The BSD stamp of a wall clock as written, with no calendar arithmetic: right only for a
/// clock that [`resolve_exact`] found shows as written (no field rolled over).
pub fn bsd_text_of(wc: &WallClock) -> [u8; 15] {
    bsd_text(wc.month, wc.day, clock_of(wc.hour, wc.minute, wc.second))
}

/// `00` to `99`: every stamp writes five or six of them.
fn two_digits(n: u8) -> [u8; 2] {
    const PAIRS: [[u8; 2]; 100] = {
        let mut pairs = [[0; 2]; 100];
        let mut i = 0;
        while i < 100 {
            pairs[i] = [b'0' + (i / 10) as u8, b'0' + (i % 10) as u8];
            i += 1;
        }
        pairs
    };
    PAIRS[usize::from(n % 100)]
}

fn write_fraction(out: &mut Vec<u8>, micros: u32, digits: u8) {
    if digits == 0 {
        return;
    }
    // Six digits, zero-padded, cut to `digits`: no buffer of its own.
    let mut text = [b'0'; 6];
    let mut rest = micros.min(999_999);
    for d in text.iter_mut().rev() {
        *d = b'0' + (rest % 10) as u8;
        rest /= 10;
    }
    out.push(b'.');
    out.extend_from_slice(&text[..digits.min(6) as usize]);
}

/// `+01:00`
pub fn write_offset(out: &mut Vec<u8>, offset: i32) {
    out.push(if offset < 0 { b'-' } else { b'+' });
    let abs = offset.unsigned_abs();
    push2(out, (abs / 3600 % 100) as u8);
    out.push(b':');
    push2(out, (abs % 3600 / 60) as u8);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_of_days_match_the_proleptic_gregorian_calendar() {
        // Howard Hinnant's civil_from_days, with divisions, as the reference.
        fn reference(days: i64) -> (i32, u8, u8) {
            let z = days + 719_468;
            let era = z.div_euclid(146_097);
            let doe = z - era * 146_097;
            let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
            let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
            let mp = (5 * doy + 2) / 153;
            let day = (doy - (153 * mp + 2) / 5 + 1) as u8;
            let month = if mp < 10 { mp + 3 } else { mp - 9 } as u8;
            ((yoe + era * 400 + i64::from(month <= 2)) as i32, month, day)
        }
        for days in -1_000_000..3_000_000 {
            assert_eq!(date_of_days(days), reference(days), "day {days}");
        }
        assert_eq!(date_of_days(0), (1970, 1, 1));
        assert_eq!(date_of_days(11_016), (2000, 2, 29));
        assert_eq!(date_of_days(-1), (1969, 12, 31));
        assert_eq!(two_digits(7), *b"07");
        assert_eq!(two_digits(59), *b"59");
    }

    fn utc(secs: i64) -> UnixTime {
        UnixTime {
            secs,
            micros: 0,
            offset: 0,
        }
    }

    #[test]
    fn days_are_counted_alike_by_the_month_table_and_the_general_algorithm() {
        for year in 1960..2110 {
            for month in 1..=12 {
                for day in [1, 28, 29, 31] {
                    assert_eq!(
                        days_from_civil(year, month, day),
                        days_from_civil_any_year(year, month, day),
                        "{year}-{month}-{day}"
                    );
                }
            }
        }
    }

    #[test]
    fn civil_fields() {
        // 2025-01-05T13:56:09Z was a Sunday
        let c = utc(1736085369).civil();
        assert_eq!(
            (c.year, c.month, c.day, c.hour, c.minute, c.second, c.weekday, c.yday),
            (2025, 1, 5, 13, 56, 9, 0, 4)
        );
        assert_eq!(
            days_from_civil(2025, 1, 5) * 86400 + 13 * 3600 + 56 * 60 + 9,
            1736085369
        );
        assert_eq!(utc(0).civil().weekday, 4);
        assert_eq!(
            utc(951782400).civil(),
            Civil {
                year: 2000,
                month: 2,
                day: 29,
                hour: 0,
                minute: 0,
                second: 0,
                weekday: 2,
                yday: 59
            }
        );
    }

    #[test]
    fn iso_weeks() {
        // 2021-01-03 belongs to week 53 of 2020; 2024-12-30 to week 1 of 2025.
        assert_eq!(
            utc(days_from_civil(2021, 1, 3) * 86400).civil().iso_week(),
            53
        );
        assert_eq!(
            utc(days_from_civil(2024, 12, 30) * 86400)
                .civil()
                .iso_week(),
            1
        );
        assert_eq!(
            utc(days_from_civil(2025, 6, 15) * 86400).civil().iso_week(),
            24
        );
    }

    #[test]
    fn stamps() {
        let t = UnixTime {
            secs: 1736085369,
            micros: 123456,
            offset: 3600,
        };
        let fmt = |f, d| {
            let mut v = Vec::new();
            write_stamp(&mut v, t, f, d);
            String::from_utf8(v).unwrap()
        };
        assert_eq!(fmt(TsFormat::Bsd, 0), "Jan  5 14:56:09");
        assert_eq!(fmt(TsFormat::Iso, 3), "2025-01-05T14:56:09.123+01:00");
        assert_eq!(fmt(TsFormat::Full, 0), "2025 Jan  5 14:56:09");
        assert_eq!(fmt(TsFormat::Unix, 6), "1736085369.123456");
    }

    #[test]
    fn a_stamp_copied_from_the_last_reads_as_formatting_it_does() {
        // Runs of the same second, alternating formats and offsets, a year past 9999 and
        // one before 0, and fractions between: each as formatting it alone gives.
        let mut seed = 3u64;
        let mut next = |below: u64| {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            (seed >> 33) % below
        };
        let seconds = [
            0,
            1_736_085_369,
            1_736_085_370,
            253_402_300_800,
            -62_167_219_201,
        ];
        let formats = [TsFormat::Bsd, TsFormat::Iso, TsFormat::Full, TsFormat::Unix];
        let (mut got, mut want) = (Vec::new(), Vec::new());
        for _ in 0..5000 {
            let t = UnixTime {
                secs: seconds[next(seconds.len() as u64) as usize],
                micros: next(1_000_000) as u32,
                offset: [0, 3600, -12600][next(3) as usize],
            };
            let format = formats[next(4) as usize];
            let frac = if next(8) == 0 { 3 } else { 0 };
            for _ in 0..1 + next(3) {
                got.clear();
                want.clear();
                write_stamp(&mut got, t, format, frac);
                format_stamp(&mut want, t, format, frac);
                assert_eq!(got, want, "{t:?} {format:?} {frac}");
            }
        }
    }

    #[test]
    fn resolving_wall_clocks() {
        let zone = Zone::parse("+02:00").unwrap();
        let today = Today {
            year: 2025,
            month: 1,
        };
        let recvd = utc(1);
        let wc = WallClock {
            year: None,
            month: 12,
            day: 31,
            hour: 23,
            minute: 0,
            second: 0,
            micros: 5,
            offset: None,
        };
        let t = resolve(&wc, Some(&zone), &Zone::parse("UTC").unwrap(), today, recvd);
        assert_eq!(t.civil().year, 2024);
        assert_eq!(t.offset, 7200);
        assert_eq!(t.secs, days_from_civil(2024, 12, 31) * 86400 + 21 * 3600);
        let rolled = WallClock {
            year: Some(2025),
            month: 2,
            day: 29,
            ..wc
        };
        assert_eq!(resolve(&rolled, None, &zone, today, recvd).civil().month, 3);
        let bad = WallClock { month: 13, ..wc };
        assert_eq!(resolve(&bad, None, &zone, today, recvd), recvd);
        let explicit = WallClock {
            year: Some(2025),
            offset: Some(-3600),
            ..wc
        };
        assert_eq!(
            resolve(&explicit, Some(&zone), &zone, today, recvd).offset,
            -3600
        );
    }

    #[test]
    fn cached_hours_respect_dst_transitions() {
        let zone = Zone::parse("Europe/Budapest").unwrap();
        // 2025-03-30 02:00 local does not exist (clocks jump to 03:00); 2025-10-26 02:30 happens twice.
        let wall = |m, d, h, min| civil_to_secs(2025, m, d, h, min, 0).unwrap();
        for _ in 0..2 {
            assert_eq!(
                zone.resolve(wall(3, 30, 1, 30)),
                Some((wall(3, 30, 0, 30), 3600))
            );
            assert_eq!(
                zone.resolve(wall(3, 30, 3, 30)),
                Some((wall(3, 30, 1, 30), 7200))
            );
            assert_eq!(
                zone.resolve(wall(3, 30, 2, 30)),
                Some((wall(3, 30, 1, 30), 7200))
            ); // the gap: 03:30+02:00
            assert_eq!(
                zone.resolve(wall(10, 26, 2, 30)).map(|(_, o)| o),
                Some(7200)
            ); // compatible: earlier
            assert_eq!(zone.offset_at(wall(10, 26, 0, 59)), 7200);
            assert_eq!(zone.offset_at(wall(10, 26, 1, 0)), 3600);
        }
    }

    #[test]
    fn zones_without_transitions_are_constant() {
        assert_eq!(Zone::parse("UTC").unwrap().constant, Some(0));
        assert_eq!(Zone::parse("+05:30").unwrap().constant, Some(19800));
        assert_eq!(Zone::parse("Europe/Budapest").unwrap().constant, None);
    }

    #[test]
    fn zones_by_name_and_offset() {
        assert_eq!(Zone::parse("-05:30").unwrap().offset_at(0), -19800);
        assert_eq!(
            Zone::parse("Europe/Budapest")
                .unwrap()
                .offset_at(1736085369),
            3600
        );
        assert!(Zone::parse("Mars/Olympus").is_err());
    }
}
