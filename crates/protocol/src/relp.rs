//! RELP frames, as rsyslog's librelp reads and writes them:
//!
//! ```text
//! TXNR SP COMMAND SP DATALEN [SP DATA] LF
//! ```
//!
//! `TXNR` is 1 to 9 digits (the transaction number; a server's unsolicited `serverclose` uses
//! 0), `COMMAND` 1 to 32 letters (`open`, `syslog`, `close`, `rsp`, `serverclose`), `DATALEN`
//! 1 to 9 digits; with a length of 0 the line ends right after it. A response's data starts
//! with a three-digit code and a text (`200 OK`); the response to `open` goes on with the
//! server's offers, one `name=value[,value…]` per line.
//!
//! [`parse`] cuts one frame from the front of a buffer without copying: the data is a range
//! of the buffer, so a syslog message can be borrowed from the read as other sources do.

use std::ops::Range;

/// The longest data a frame may announce to [`parse`]; larger is an error. A server reads
/// with [`parse_within`] and its own limit (librelp's `maxDataSize` is 128 KiB by default).
pub const MAX_DATA: usize = 64 << 20;

/// The transaction number that must follow `txnr`: numbers go up by one from 1 and wrap
/// from 999,999,999 back to 1.
pub fn next_txnr(txnr: u32) -> u32 {
    if txnr >= 999_999_999 {
        1
    } else {
        txnr + 1
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    pub txnr: u32,
    pub command: Command,
    /// Where the data is in the buffer given to [`parse`] (empty for none).
    pub data: Range<usize>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    Open,
    Syslog,
    Close,
    Rsp,
    ServerClose,
    /// A command this side does not know, by name: answered with a `500`.
    Other(String),
}

impl Command {
    fn of(name: &[u8]) -> Command {
        match name {
            b"open" => Command::Open,
            b"syslog" => Command::Syslog,
            b"close" => Command::Close,
            b"rsp" => Command::Rsp,
            b"serverclose" => Command::ServerClose,
            other => Command::Other(String::from_utf8_lossy(other).into_owned()),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RelpError(pub String);

impl std::fmt::Display for RelpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "invalid RELP frame: {}", self.0)
    }
}

impl std::error::Error for RelpError {}

fn invalid(what: impl Into<String>) -> RelpError {
    RelpError(what.into())
}

/// Cuts the frame at the start of `buf`: the frame and the bytes it took, `None` when `buf`
/// holds only the start of one, an error when it cannot be a RELP frame.
pub fn parse(buf: &[u8]) -> Result<Option<(Frame, usize)>, RelpError> {
    parse_within(buf, MAX_DATA)
}

/// [`parse`], refusing a frame that announces more than `max_data` bytes as soon as its
/// length is read: a peer cannot make the reader buffer more.
pub fn parse_within(buf: &[u8], max_data: usize) -> Result<Option<(Frame, usize)>, RelpError> {
    let mut at = 0;
    let Some(txnr) = number(buf, &mut at, "transaction number")? else {
        return Ok(None);
    };
    let Some(name) = word(buf, &mut at)? else {
        return Ok(None);
    };
    let command = Command::of(name);
    let Some(len) = number(buf, &mut at, "data length")? else {
        return Ok(None);
    };
    // `number` stopped at the byte after the digits: a space before data, or the end.
    let len = len as usize;
    if len > max_data {
        return Err(invalid(format!(
            "data length {len} is over the {max_data} bytes accepted"
        )));
    }
    let data = if len == 0 {
        at..at
    } else {
        match buf.get(at) {
            None => return Ok(None),
            Some(b' ') => at += 1,
            Some(&c) => return Err(invalid(format!("{} after the data length", shown(c)))),
        }
        if buf.len() < at + len {
            return Ok(None);
        }
        at += len;
        at - len..at
    };
    match buf.get(at) {
        None => Ok(None),
        Some(b'\n') => Ok(Some((
            Frame {
                txnr: txnr as u32,
                command,
                data,
            },
            at + 1,
        ))),
        Some(&c) => Err(invalid(format!(
            "{} where the frame should end with a line feed",
            shown(c)
        ))),
    }
}

/// Reads 1 to 9 digits at `*at` and the byte after them, which must be a space unless it is
/// the data length's (the caller looks at that one). `None`: the buffer ends first.
fn number(buf: &[u8], at: &mut usize, what: &str) -> Result<Option<u64>, RelpError> {
    let start = *at;
    let mut n: u64 = 0;
    loop {
        let Some(&c) = buf.get(*at) else {
            return Ok(None);
        };
        if c.is_ascii_digit() {
            if *at - start == 9 {
                return Err(invalid(format!("a {what} of more than 9 digits")));
            }
            n = n * 10 + u64::from(c - b'0');
            *at += 1;
            continue;
        }
        if *at == start {
            return Err(invalid(format!("{} where a {what} should be", shown(c))));
        }
        if what == "transaction number" {
            if c != b' ' {
                return Err(invalid(format!("{} after the {what}", shown(c))));
            }
            *at += 1;
        }
        return Ok(Some(n));
    }
}

/// Reads the command (1 to 32 letters) and the space after it.
fn word<'a>(buf: &'a [u8], at: &mut usize) -> Result<Option<&'a [u8]>, RelpError> {
    let start = *at;
    loop {
        let Some(&c) = buf.get(*at) else {
            return Ok(None);
        };
        if c.is_ascii_alphabetic() {
            if *at - start == 32 {
                return Err(invalid("a command of more than 32 letters"));
            }
            *at += 1;
            continue;
        }
        if c != b' ' || *at == start {
            return Err(invalid(format!("{} in the command", shown(c))));
        }
        *at += 1;
        return Ok(Some(&buf[start..*at - 1]));
    }
}

fn shown(c: u8) -> String {
    if c.is_ascii_graphic() {
        format!("'{}'", c as char)
    } else {
        format!("byte 0x{c:02x}")
    }
}

/// Appends a frame: `TXNR COMMAND LEN[ DATA]\n`.
pub fn write(out: &mut Vec<u8>, txnr: u32, command: &str, data: &[u8]) {
    out.extend_from_slice(itoa::Buffer::new().format(txnr).as_bytes());
    out.push(b' ');
    out.extend_from_slice(command.as_bytes());
    out.push(b' ');
    out.extend_from_slice(itoa::Buffer::new().format(data.len()).as_bytes());
    if !data.is_empty() {
        out.push(b' ');
        out.extend_from_slice(data);
    }
    out.push(b'\n');
}

/// A response's code and text: `200 OK` → (200, "OK"). `None` if the data does not start
/// with three digits and a space.
pub fn response(data: &[u8]) -> Option<(u16, &[u8])> {
    let code = data.get(..3)?;
    if !code.iter().all(u8::is_ascii_digit) || data.get(3) != Some(&b' ') {
        return None;
    }
    let code = code.iter().fold(0u16, |n, d| n * 10 + u16::from(d - b'0'));
    let rest = &data[4..];
    let text = &rest[..memchr::memchr(b'\n', rest).unwrap_or(rest.len())];
    Some((code, text))
}

/// The values of offer `name` in an `open` command's data or its response's (after the
/// status line): `commands=syslog,foo` → `["syslog", "foo"]`.
pub fn offer<'a>(data: &'a [u8], name: &str) -> Option<Vec<&'a [u8]>> {
    data.split(|&b| b == b'\n').find_map(|line| {
        let (key, values) = line.split_at(memchr::memchr(b'=', line)?);
        (key == name.as_bytes()).then(|| {
            values[1..]
                .split(|&b| b == b',')
                .filter(|v| !v.is_empty())
                .collect()
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(text: &[u8]) -> (Frame, usize) {
        parse(text).expect("valid").expect("complete")
    }

    #[test]
    fn frames_as_librelp_writes_them() {
        let open = b"1 open 86 relp_version=0\nrelp_software=librelp,1.11.0,http://librelp.adiscon.com\ncommands=syslog\n";
        let (f, used) = one(open);
        assert_eq!((f.txnr, &f.command, used), (1, &Command::Open, open.len()));
        let data = &open[f.data.clone()];
        assert_eq!(offer(data, "commands"), Some(vec![&b"syslog"[..]]));
        assert_eq!(offer(data, "relp_version"), Some(vec![&b"0"[..]]));
        let (f, used) = one(b"2 syslog 12 <13>hi there\n3 close 0\n");
        assert_eq!(
            (f.txnr, f.command, f.data, used),
            (2, Command::Syslog, 12..24, 25)
        );
        let (f, used) = one(b"3 close 0\n");
        assert_eq!((f.command, f.data, used), (Command::Close, 9..9, 10));
        let (f, _) = one(b"0 serverclose 0\n");
        assert_eq!((f.txnr, f.command), (0, Command::ServerClose));
        let (f, _) = one(b"7 rsp 6 200 OK\n");
        assert_eq!(
            response(&b"7 rsp 6 200 OK\n"[f.data]),
            Some((200, &b"OK"[..]))
        );
        assert_eq!(
            one(b"9 starttls 0\n").0.command,
            Command::Other("starttls".into())
        );
    }

    #[test]
    fn a_frame_cut_short_waits_for_more() {
        let whole = b"12 syslog 5 hello\n";
        for end in 0..whole.len() {
            assert_eq!(parse(&whole[..end]), Ok(None), "{end}");
        }
        // Data may hold line feeds: the length decides.
        let (f, _) = one(b"4 syslog 3 a\nb\n");
        assert_eq!(f.data, 11..14);
    }

    #[test]
    fn what_is_not_relp_is_an_error() {
        for bad in [
            &b"<13>Jan  1 host x: plain syslog\n"[..],
            b"1 syslog 5 hello!",
            b"1 syslog 5x hello\n",
            b"1234567890 syslog 1 x\n",
            b"1 sys-log 1 x\n",
            b"1  syslog 1 x\n",
            b"1 syslog 0 \n",
            b"1 syslog 99999999999 x\n",
            b"x syslog 1 x\n",
        ] {
            assert!(parse(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn written_frames_read_back() {
        let mut out = Vec::new();
        write(&mut out, 5, "syslog", b"<13>x y");
        write(&mut out, 6, "close", b"");
        assert_eq!(out, b"5 syslog 7 <13>x y\n6 close 0\n");
        let (f, used) = one(&out);
        assert_eq!((f.txnr, &out[f.data]), (5, &b"<13>x y"[..]));
        assert_eq!(one(&out[used..]).0.command, Command::Close);
    }
}
