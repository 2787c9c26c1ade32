//! The PROXY protocol header (HAProxy's, versions 1 and 2) that a load balancer puts before a
//! connection's data to say whom it relays: `transport(proxied-tcp)` sources read it first.
//!
//! Version 1 is a text line: `PROXY TCP4 192.0.2.1 198.51.100.2 3333 514\r\n` (or `TCP6`, or
//! `UNKNOWN …`), at most 107 bytes; as syslog-ng, a bare LF ends it too. Version 2 is binary: a 12-byte signature, a version and
//! command byte, an address family byte, a 16-bit length, the addresses, then TLVs (skipped).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// What a header announces. `None` addresses: `UNKNOWN` (v1), `LOCAL` or an unsupported
/// family (v2): the connection's own addresses stand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProxyHeader {
    pub source: Option<SocketAddr>,
    pub destination: Option<SocketAddr>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProxyError(pub String);

impl std::fmt::Display for ProxyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "bad PROXY protocol header: {}", self.0)
    }
}

const V2_SIGNATURE: &[u8; 12] = b"\r\n\r\n\0\r\nQUIT\n";
/// The longest version 1 line, `\r\n` included.
const V1_MAX: usize = 107;

/// Reads the header at the start of `buf`: `Ok(None)` when more bytes are needed, else the
/// header and how many bytes it took.
pub fn parse(buf: &[u8]) -> Result<Option<(ProxyHeader, usize)>, ProxyError> {
    let sig = V2_SIGNATURE.len().min(buf.len());
    if buf[..sig] == V2_SIGNATURE[..sig] {
        return if buf.len() < 16 { Ok(None) } else { v2(buf) };
    }
    let v1 = b"PROXY ".len().min(buf.len());
    if buf[..v1] != b"PROXY "[..v1] {
        return Err(ProxyError("the connection does not start with one".into()));
    }
    match memchr::memchr(b'\n', &buf[..buf.len().min(V1_MAX)]) {
        Some(end) => v1_line(&buf[..end + 1]).map(|h| Some((h, end + 1))),
        None if buf.len() >= V1_MAX => Err(ProxyError(format!(
            "no line end in the first {V1_MAX} bytes"
        ))),
        None => Ok(None),
    }
}

fn v1_line(line: &[u8]) -> Result<ProxyHeader, ProxyError> {
    let text = std::str::from_utf8(line)
        .map_err(|_| ProxyError("a version 1 line that is not text".into()))?;
    // The specification says CRLF; syslog-ng (and its loggen, which sends a bare LF) take LF
    // with or without the CR.
    let text = text.strip_suffix('\n').expect("the line was cut at its LF");
    let text = text.strip_suffix('\r').unwrap_or(text);
    let fields: Vec<&str> = text.split(' ').collect();
    match fields.as_slice() {
        ["PROXY", "UNKNOWN", ..] => Ok(ProxyHeader {
            source: None,
            destination: None,
        }),
        ["PROXY", family @ ("TCP4" | "TCP6"), src, dst, sport, dport] => {
            let ip = |s: &str| -> Result<IpAddr, ProxyError> {
                let ip: IpAddr = s
                    .parse()
                    .map_err(|_| ProxyError(format!("'{s}' is not an address")))?;
                if ip.is_ipv4() != (*family == "TCP4") {
                    return Err(ProxyError(format!("'{s}' is not a {family} address")));
                }
                Ok(ip)
            };
            let port = |s: &str| -> Result<u16, ProxyError> {
                s.parse()
                    .map_err(|_| ProxyError(format!("'{s}' is not a port")))
            };
            Ok(ProxyHeader {
                source: Some(SocketAddr::new(ip(src)?, port(sport)?)),
                destination: Some(SocketAddr::new(ip(dst)?, port(dport)?)),
            })
        }
        _ => Err(ProxyError(format!("'{text}' is not a version 1 line"))),
    }
}

fn v2(buf: &[u8]) -> Result<Option<(ProxyHeader, usize)>, ProxyError> {
    let (version, command) = (buf[12] >> 4, buf[12] & 0x0f);
    if version != 2 {
        return Err(ProxyError(format!("version {version}")));
    }
    let len = u16::from_be_bytes([buf[14], buf[15]]) as usize;
    if buf.len() < 16 + len {
        return Ok(None);
    }
    let body = &buf[16..16 + len];
    let none = ProxyHeader {
        source: None,
        destination: None,
    };
    let header = match (command, buf[13] >> 4) {
        (0, _) => none, // LOCAL: a health check from the proxy itself
        (1, 1) if body.len() >= 12 => {
            let ip = |at: usize| {
                IpAddr::V4(Ipv4Addr::new(
                    body[at],
                    body[at + 1],
                    body[at + 2],
                    body[at + 3],
                ))
            };
            let port = |at: usize| u16::from_be_bytes([body[at], body[at + 1]]);
            ProxyHeader {
                source: Some(SocketAddr::new(ip(0), port(8))),
                destination: Some(SocketAddr::new(ip(4), port(10))),
            }
        }
        (1, 2) if body.len() >= 36 => {
            let ip = |at: usize| {
                let octets: [u8; 16] = body[at..at + 16].try_into().expect("16 bytes");
                IpAddr::V6(Ipv6Addr::from(octets))
            };
            let port = |at: usize| u16::from_be_bytes([body[at], body[at + 1]]);
            ProxyHeader {
                source: Some(SocketAddr::new(ip(0), port(32))),
                destination: Some(SocketAddr::new(ip(16), port(34))),
            }
        }
        (1, 1 | 2) => return Err(ProxyError("addresses cut short".into())),
        (1, _) => none, // UNSPEC or unix addresses: the connection's own stand
        (c, _) => return Err(ProxyError(format!("command {c}"))),
    };
    Ok(Some((header, 16 + len)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> Option<SocketAddr> {
        Some(s.parse().unwrap())
    }

    #[test]
    fn version_1() {
        let line = b"PROXY TCP4 192.168.1.1 192.168.1.2 3333 4444\r\n<13>x\n";
        let (h, n) = parse(line).unwrap().unwrap();
        assert_eq!(n, 46);
        assert_eq!(h.source, addr("192.168.1.1:3333"));
        assert_eq!(h.destination, addr("192.168.1.2:4444"));
        let (h, _) = parse(b"PROXY TCP6 ::1 2001:db8::2 1 2\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(h.source, addr("[::1]:1"));
        assert_eq!(parse(b"PROXY UNKNOWN\r\n").unwrap().unwrap().0.source, None);
        let (h, used) = parse(b"PROXY TCP4 192.168.1.1 192.168.1.2 3333 514\nrest")
            .unwrap()
            .unwrap();
        assert_eq!(h.source, Some("192.168.1.1:3333".parse().unwrap()));
        assert_eq!(used, 44);
        assert_eq!(parse(b"PROXY TCP4 1.2.3").unwrap(), None);
        assert_eq!(parse(b"PRO").unwrap(), None);
        assert!(parse(b"<13>Jan  1 00:00:00 h p: x\n").is_err());
        assert!(parse(b"PROXY TCP4 ::1 1.2.3.4 1 2\r\n").is_err());
        assert!(parse(b"PROXY TCP4 1.2.3.4 1.2.3.4 70000 2\r\n").is_err());
        assert!(parse(&[b'P'; 200]).is_err());
    }

    #[test]
    fn version_2() {
        let mut h = V2_SIGNATURE.to_vec();
        h.extend_from_slice(&[
            0x21, 0x11, 0, 12, 10, 0, 0, 1, 10, 0, 0, 2, 0x0d, 0x05, 0x02, 0x02,
        ]);
        h.extend_from_slice(b"<13>rest");
        let (header, n) = parse(&h).unwrap().unwrap();
        assert_eq!(n, 28);
        assert_eq!(header.source, addr("10.0.0.1:3333"));
        assert_eq!(header.destination, addr("10.0.0.2:514"));
        assert_eq!(parse(&h[..20]).unwrap(), None);
        let mut local = V2_SIGNATURE.to_vec();
        local.extend_from_slice(&[0x20, 0x00, 0, 0]);
        assert_eq!(parse(&local).unwrap().unwrap().0.source, None);
        let mut bad = V2_SIGNATURE.to_vec();
        bad.extend_from_slice(&[0x31, 0x11, 0, 0]);
        assert!(parse(&bad).is_err());
    }
}
