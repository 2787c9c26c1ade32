//! The field parsers of a pattern (`@NUMBER:pid@`, `@ESTRING:user: @`, …), each as
//! syslog-ng 3.38's radix tree reads it: how much of the input it takes from the current
//! position, and which part of that is the value (a quoted string without its quotes, an
//! `ESTRING` without its delimiter).
//!
//! syslog-ng's parsers read a NUL-terminated string, and some read past the NUL when the
//! message ends inside them (`@SET@` and `@EMAIL@` test the NUL against their character lists
//! with `strchr`, which finds it). Here the end of the input ends every parser.

use crate::values::ValueType;

/// A field parser and its parameter.
#[derive(Debug, Clone)]
pub struct Field {
    pub kind: Kind,
    /// The third part of `@KIND:name:param@`, as written.
    pub param: Vec<u8>,
    /// `@PCRE@`'s expression, anchored at the field's start.
    regex: Option<regex::bytes::Regex>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    String,
    QString,
    EString,
    Ipv4,
    Number,
    AnyString,
    Ipv6,
    IpvAny,
    Float,
    Set,
    MacAddr,
    Pcre,
    Email,
    Hostname,
    LlAddr,
    NlString,
    OptionalSet,
}

impl Kind {
    /// The name `pdbtool dump` gives the parser (syslog-ng's `r_parser_type_name`).
    pub fn name(self) -> &'static str {
        match self {
            Kind::String => "STRING",
            Kind::QString => "QSTRING",
            Kind::EString => "ESTRING",
            Kind::Ipv4 => "IPv4",
            Kind::Number => "NUMBER",
            Kind::AnyString => "ANYSTRING",
            Kind::Ipv6 => "IPv6",
            Kind::IpvAny => "IP",
            Kind::Float => "FLOAT",
            Kind::Set => "SET",
            Kind::MacAddr => "MACADDR",
            Kind::Pcre => "PCRE",
            Kind::Email => "EMAIL",
            Kind::Hostname => "HOSTNAME",
            Kind::LlAddr => "LLADDR",
            Kind::NlString => "NLSTRING",
            Kind::OptionalSet => "UNKNOWN",
        }
    }
}

/// What a field took: `len` bytes of the input, the value being `start..end` of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Taken {
    pub len: usize,
    pub start: usize,
    pub end: usize,
}

impl Taken {
    fn whole(len: usize) -> Taken {
        Taken {
            len,
            start: 0,
            end: len,
        }
    }
}

/// The byte at `i` of `s`, or NUL past its end (as a C string reads).
#[inline]
fn at(s: &[u8], i: usize) -> u8 {
    s.get(i).copied().unwrap_or(0)
}

/// `c` is one of `set` (never the end of the input).
#[inline]
fn one_of(set: &[u8], c: u8) -> bool {
    c != 0 && set.contains(&c)
}

impl Field {
    /// The parser `@KIND:…:param@` names; why not when it is not one, or lacks its
    /// parameter.
    pub fn new(kind: &str, param: Option<&[u8]>) -> Result<Field, String> {
        let need = |k: Kind| match param {
            Some(_) => Ok(k),
            None => Err(format!("@{kind}@ needs a parameter: @{kind}:name:param@")),
        };
        let kind = match kind {
            "STRING" => Kind::String,
            "QSTRING" => need(Kind::QString)?,
            "ESTRING" => need(Kind::EString)?,
            "IPv4" => Kind::Ipv4,
            "IPv6" => Kind::Ipv6,
            "IPvANY" => Kind::IpvAny,
            "NUMBER" => Kind::Number,
            // DOUBLE is syslog-ng's old name.
            "FLOAT" | "DOUBLE" => Kind::Float,
            "ANYSTRING" => Kind::AnyString,
            "SET" => need(Kind::Set)?,
            "OPTIONALSET" => need(Kind::OptionalSet)?,
            "MACADDR" => Kind::MacAddr,
            "PCRE" => need(Kind::Pcre)?,
            "EMAIL" => Kind::Email,
            "HOSTNAME" => Kind::Hostname,
            "LLADDR" => Kind::LlAddr,
            "NLSTRING" => match param {
                None => Kind::NlString,
                Some(_) => return Err("@NLSTRING@ takes no parameter".into()),
            },
            _ => return Err(format!("@{kind}@ is not a parser of patterns")),
        };
        let param = param.unwrap_or_default().to_vec();
        let regex = match kind {
            Kind::Pcre => {
                let expr = String::from_utf8_lossy(&param);
                let re = crate::filter::regex(&format!(r"\A(?:{expr})"), false)
                    .map_err(|e| format!("@PCRE@'s expression {expr:?}: {e}"))?;
                Some(re)
            }
            _ => None,
        };
        if kind == Kind::QString && !(1..=2).contains(&param.len()) {
            return Err("@QSTRING@'s parameter is its quote, or its opening and closing quotes: @QSTRING:name:\"@, @QSTRING:name:[]@".into());
        }
        Ok(Field { kind, param, regex })
    }

    /// The type of the values it makes.
    pub fn value_type(&self) -> ValueType {
        match self.kind {
            Kind::Number => ValueType::Int,
            Kind::Float => ValueType::Double,
            _ => ValueType::String,
        }
    }

    /// Whether it may start with `c` (the end of the input is NUL), as syslog-ng checks
    /// before it tries a parser.
    pub fn may_start_with(&self, c: u8) -> bool {
        match self.kind {
            Kind::Ipv4 => c.is_ascii_digit(),
            Kind::Number | Kind::Float => (b'-'..=b'9').contains(&c),
            Kind::QString => c == self.param[0],
            _ => true,
        }
    }

    /// What it takes of `input` from `pos` on; `None` when it does not match there.
    pub fn parse(&self, input: &[u8], pos: usize) -> Option<Taken> {
        let s = &input[pos..];
        let p = &self.param[..];
        match self.kind {
            Kind::String => {
                let len = s
                    .iter()
                    .take_while(|&&c| c.is_ascii_alphanumeric() || one_of(p, c))
                    .count();
                (len > 0).then(|| Taken::whole(len))
            }
            // To the first closing quote (3.38 counts no nesting): the value without quotes.
            Kind::QString => {
                let close = *p.get(1).unwrap_or(&p[0]);
                let len = memchr::memchr(close, s.get(1..)?)? + 2;
                Some(Taken {
                    len,
                    start: 1,
                    end: len - 1,
                })
            }
            Kind::EString => {
                let found = if p.len() <= 1 {
                    // A single character, or (no character at all) the end of the input.
                    match p.first() {
                        Some(&c) => memchr::memchr(c, s),
                        None => Some(s.len()),
                    }
                } else {
                    memchr::memmem::find(s, p)
                };
                found.map(|i| Taken {
                    len: (i + p.len()).min(s.len()),
                    start: 0,
                    end: i,
                })
            }
            // To the line's end (3.38 needs one), without a `\r` before it.
            Kind::NlString => {
                let mut end = memchr::memchr2(b'\n', 0, s).filter(|&i| s[i] == b'\n')?;
                if end >= 1 && s[end - 1] == b'\r' {
                    end -= 1;
                }
                Some(Taken::whole(end))
            }
            Kind::Pcre => {
                let re = self.regex.as_ref().expect("compiled with the field");
                re.find(s).map(|m| Taken::whole(m.end()))
            }
            Kind::AnyString => Some(Taken::whole(memchr::memchr(0, s).unwrap_or(s.len()))),
            Kind::Set | Kind::OptionalSet => {
                let len = s.iter().take_while(|&&c| one_of(p, c)).count();
                (len > 0 || self.kind == Kind::OptionalSet).then(|| Taken::whole(len))
            }
            Kind::Email => email(input, pos, p),
            Kind::Hostname => hostname(s).map(Taken::whole),
            Kind::LlAddr => {
                let parts: usize = match p.iter().take_while(|c| c.is_ascii_digit()).count() {
                    0 if p.is_empty() => 20,
                    n => std::str::from_utf8(&p[..n])
                        .ok()
                        .and_then(|d| d.parse().ok())
                        .unwrap_or(0),
                };
                lladdr(s, parts.saturating_mul(3).saturating_sub(1), parts).map(Taken::whole)
            }
            Kind::MacAddr => lladdr(s, 17, 6).map(Taken::whole),
            Kind::Ipv4 => ipv4(s).map(Taken::whole),
            Kind::Ipv6 => ipv6(s).map(Taken::whole),
            Kind::IpvAny => ipv4(s).or_else(|| ipv6(s)).map(Taken::whole),
            Kind::Float => float(s).map(Taken::whole),
            Kind::Number => number(s).map(Taken::whole),
        }
    }
}

/// `@EMAIL:name:<>@`: an address, with the characters of `param` around it taken but left out
/// of the value. `pos` is where it starts in `input` (syslog-ng looks at the byte before an
/// address with nothing in it).
fn email(input: &[u8], pos: usize, param: &[u8]) -> Option<Taken> {
    const LOCAL: &[u8] = b"!#$%&'*+-/=?^_`{|}~.";
    let s = &input[pos..];
    let mut len = 0;
    while one_of(param, at(s, len)) {
        len += 1;
    }
    let start = len;
    // The first character cannot be a period, nor the last one.
    if at(s, len) == b'.' {
        return None;
    }
    while at(s, len).is_ascii_alphanumeric() || one_of(LOCAL, at(s, len)) {
        len += 1;
    }
    let before = match len {
        0 => pos.checked_sub(1).map_or(0, |i| input[i]),
        _ => s[len - 1],
    };
    if before == b'.' || at(s, len) != b'@' {
        return None;
    }
    len += 1;
    len += hostname_labels(&s[len..])
        .filter(|(_, labels)| *labels >= 2)?
        .0;
    let end = len;
    while one_of(param, at(s, len)) {
        len += 1;
    }
    (len > 0).then_some(Taken { len, start, end })
}

/// Labels of letters, digits and `-`, each followed by a `.` or not: how far they go, and how
/// many there are.
fn hostname_labels(s: &[u8]) -> Option<(usize, usize)> {
    let name = |c: u8| c.is_ascii_alphanumeric() || c == b'-';
    let (mut len, mut count) = (0, 0);
    while name(at(s, len)) {
        count += 1;
        while name(at(s, len)) {
            len += 1;
        }
        if at(s, len) == b'.' {
            len += 1;
        }
    }
    Some((len, count))
}

/// A host name of at least two labels.
fn hostname(s: &[u8]) -> Option<usize> {
    hostname_labels(s)
        .filter(|(_, labels)| *labels >= 2)
        .map(|(len, _)| len)
}

/// Up to `parts` pairs of hex digits separated by `:`, at most `count` bytes.
fn lladdr(s: &[u8], count: usize, parts: usize) -> Option<usize> {
    let mut len = 0usize;
    for i in 1..=parts {
        if !at(s, len).is_ascii_hexdigit() || !at(s, len + 1).is_ascii_hexdigit() {
            if i > 1 {
                len -= 1;
                break;
            }
            return None;
        }
        if i == parts {
            len += 2;
        } else if at(s, len + 2) != b':' {
            len += 2;
            break;
        } else {
            len += 3;
        }
    }
    (len <= count && parts > 0).then_some(len)
}

fn ipv4(s: &[u8]) -> Option<usize> {
    let (mut len, mut dots, mut octet) = (0, 0, -1i64);
    loop {
        let c = at(s, len);
        if c == b'.' {
            if octet > 255 || octet == -1 {
                return None;
            }
            if dots == 3 {
                break;
            }
            dots += 1;
            octet = -1;
        } else if c.is_ascii_digit() {
            octet = if octet == -1 { 0 } else { octet * 10 };
            octet += i64::from(c - b'0');
            // Stays in range however many digits come; any octet past 255 fails.
            octet = octet.min(100_000);
        } else {
            break;
        }
        len += 1;
    }
    (dots == 3 && octet <= 255 && octet != -1).then_some(len)
}

fn ipv6(s: &[u8]) -> Option<usize> {
    let (mut colons, mut dots, mut octet, mut digit) = (0, 0, 0i64, 16i64);
    let mut shortened = false;
    let mut len = 0usize;
    loop {
        let c = at(s, len);
        if c == b':' {
            if octet > 0xffff || (octet == -1 && shortened) {
                return None;
            }
            if colons == 7 || dots == 3 {
                break;
            }
            if digit == 10 {
                return None;
            }
            if octet == -1 {
                shortened = true;
            }
            colons += 1;
            octet = -1;
        } else if c.is_ascii_hexdigit() {
            octet = if octet == -1 { 0 } else { octet * digit };
            octet += i64::from((c as char).to_digit(16).expect("a hex digit"));
            octet = octet.min(10_000_000);
        } else if c == b'.' {
            if digit == 10 && octet > 255 {
                return None;
            }
            if (digit == 16 && octet > 597) || octet == -1 || colons == 7 || dots == 3 {
                break;
            }
            dots += 1;
            octet = -1;
            digit = 10;
        } else {
            break;
        }
        len += 1;
    }
    if len > 0 && s[len - 1] == b'.' {
        len -= 1;
        dots -= 1;
    } else if len > 1 && s[len - 1] == b':' && s[len - 2] != b':' {
        len -= 1;
        colons -= 1;
    }
    let bad = !(2..=7).contains(&colons)
        || (digit == 10 && octet > 255)
        || (digit == 16 && octet > 0xffff)
        || !(dots == 0 || dots == 3)
        || (!shortened && colons < 7 && dots == 0);
    (!bad).then_some(len)
}

fn float(s: &[u8]) -> Option<usize> {
    let digits = |len: &mut usize| {
        while at(s, *len).is_ascii_digit() {
            *len += 1;
        }
    };
    let mut len = usize::from(at(s, 0) == b'-');
    digits(&mut len);
    if at(s, len) == b'.' {
        len += 1;
        digits(&mut len);
    }
    if len > 0 && matches!(at(s, len), b'e' | b'E') {
        len += 1;
        if at(s, len) == b'-' {
            len += 1;
        }
        digits(&mut len);
    }
    (len > 0).then_some(len)
}

fn number(s: &[u8]) -> Option<usize> {
    let (len, min) = if s.starts_with(b"0x") || s.starts_with(b"0X") {
        (
            2 + s[2..].iter().take_while(|c| c.is_ascii_hexdigit()).count(),
            3,
        )
    } else {
        let sign = usize::from(at(s, 0) == b'-');
        (
            sign + s[sign..].iter().take_while(|c| c.is_ascii_digit()).count(),
            1 + sign,
        )
    };
    (len >= min).then_some(len)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn take(kind: &str, param: Option<&str>, input: &str) -> Option<(usize, String)> {
        let f = Field::new(kind, param.map(str::as_bytes)).unwrap();
        f.parse(input.as_bytes(), 0)
            .map(|t| (t.len, input[t.start..t.end].to_string()))
    }

    #[test]
    fn each_parser_takes_what_syslog_ngs_takes() {
        assert_eq!(take("STRING", None, "ab1-x y"), Some((3, "ab1".into())));
        assert_eq!(
            take("STRING", Some("-"), "ab1-x y"),
            Some((5, "ab1-x".into()))
        );
        assert_eq!(take("STRING", None, " x"), None);
        assert_eq!(
            take("QSTRING", Some("\""), "\"a b\" c"),
            Some((5, "a b".into()))
        );
        assert_eq!(
            take("QSTRING", Some("[]"), "[a [b]] c"),
            Some((6, "a [b".into()))
        );
        assert_eq!(take("QSTRING", Some("\""), "\"open"), None);
        assert_eq!(
            take("ESTRING", Some(" "), "user rest"),
            Some((5, "user".into()))
        );
        assert_eq!(
            take("ESTRING", Some("--"), "a-b--c"),
            Some((5, "a-b".into()))
        );
        assert_eq!(take("ESTRING", Some(":"), "nothing"), None);
        assert_eq!(
            take("NLSTRING", None, "one\r\ntwo"),
            Some((3, "one".into()))
        );
        assert_eq!(
            take("ANYSTRING", None, "all of it"),
            Some((9, "all of it".into()))
        );
        assert_eq!(take("SET", Some(" \t"), "  \tx"), Some((3, "  \t".into())));
        assert_eq!(take("SET", Some(" "), "x"), None);
        assert_eq!(take("OPTIONALSET", Some(" "), "x"), Some((0, "".into())));
        assert_eq!(take("NUMBER", None, "-42x"), Some((3, "-42".into())));
        assert_eq!(take("NUMBER", None, "0x1fz"), Some((4, "0x1f".into())));
        assert_eq!(take("NUMBER", None, "-x"), None);
        assert_eq!(take("FLOAT", None, "-1.5e-3 "), Some((7, "-1.5e-3".into())));
        assert_eq!(
            take("IPv4", None, "10.0.0.1:22"),
            Some((8, "10.0.0.1".into()))
        );
        assert_eq!(take("IPv4", None, "10.0.0.256"), None);
        assert_eq!(take("IPv4", None, "1.2.3"), None);
        assert_eq!(take("IPv6", None, "fe80::1 x"), Some((7, "fe80::1".into())));
        assert_eq!(
            take("IPv6", None, "::ffff:10.0.0.1"),
            Some((15, "::ffff:10.0.0.1".into()))
        );
        assert_eq!(take("IPv6", None, "1:2:3"), None);
        assert_eq!(take("IPvANY", None, "::1"), Some((3, "::1".into())));
        assert_eq!(
            take("MACADDR", None, "00:1a:2B:3c:4d:5e:77"),
            Some((17, "00:1a:2B:3c:4d:5e".into()))
        );
        assert_eq!(
            take("LLADDR", Some("2"), "0a:0b:0c"),
            Some((5, "0a:0b".into()))
        );
        assert_eq!(
            take("HOSTNAME", None, "www.example.com."),
            Some((16, "www.example.com.".into()))
        );
        assert_eq!(take("HOSTNAME", None, "localhost "), None);
        assert_eq!(
            take("EMAIL", None, "a.b@example.com x"),
            Some((15, "a.b@example.com".into()))
        );
        assert_eq!(
            take("EMAIL", Some("<>"), "<a@b.c>"),
            Some((7, "a@b.c".into()))
        );
        assert_eq!(take("EMAIL", None, ".a@b.c"), None);
        assert_eq!(
            take("PCRE", Some("[a-c]+"), "abcd"),
            Some((3, "abc".into()))
        );
        assert_eq!(take("PCRE", Some("[a-c]+"), "xabc"), None);
    }

    #[test]
    fn parsers_that_need_a_parameter_say_so() {
        assert!(Field::new("ESTRING", None)
            .unwrap_err()
            .contains("parameter"));
        assert!(Field::new("NOPE", None)
            .unwrap_err()
            .contains("not a parser"));
        assert!(Field::new("NLSTRING", Some(b"x")).is_err());
        assert!(Field::new("PCRE", Some(b"(")).is_err());
    }
}
