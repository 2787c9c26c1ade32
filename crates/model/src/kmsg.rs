//! Records of the kernel's `/dev/kmsg`, read as syslog-ng's `linux-kmsg` format reads them:
//!
//! ```text
//! 6,802,65338577,-;eth0: NIC Link is Up <100 Mbps Full Duplex>
//!  SUBSYSTEM=pci
//!  DEVICE=+pci:0000:02:00.0
//! ```
//!
//! The priority, the sequence number (`$MSGID`), the microseconds since boot
//! (`.linux.timestamp`; fields after it are skipped), the text after the first `;` to the line
//! end (`$MSG`), then one ` KEY=value` line each (`.linux.KEY`). `DEVICE` is taken apart:
//! `b8:0` and `c4:1` (`.linux.DEVICE.type` `block`/`char`, `.major`, `.minor`), `n2` (a
//! network device, `.index`), `+pci:0000:02:00.0` (the subsystem as `.type`, `.name`), else
//! `<unknown>` and the whole as `.name`. Every value borrows from the record.

use crate::values::{name_id, NameId};
use sluice_protocol::{Span, SyslogFields, Text};

/// Reads `record` into `fields` and hands its name-value pairs to `set`. `false` when it is
/// not a `/dev/kmsg` record (the caller keeps it whole).
pub fn parse(record: &[u8], fields: &mut SyslogFields, mut set: impl FnMut(NameId, Text)) -> bool {
    let end = record
        .iter()
        .rposition(|&b| b != b'\n' && b != 0)
        .map_or(0, |i| i + 1);
    let r = &record[..end];
    let Some(header_end) = r.iter().position(|&b| b == b';') else {
        return false;
    };
    let mut header = r[..header_end].split(|&b| b == b',');
    let (Some(pri), Some(seq), Some(usecs)) = (header.next(), header.next(), header.next()) else {
        return false;
    };
    let digits = |f: &[u8]| !f.is_empty() && f.iter().all(u8::is_ascii_digit);
    if !digits(pri) || !digits(seq) || !digits(usecs) {
        return false;
    }
    let Ok(pri) = std::str::from_utf8(pri).unwrap_or("x").parse::<u16>() else {
        return false;
    };
    let span = |field: &[u8]| {
        let start = field.as_ptr() as usize - record.as_ptr() as usize;
        Text::Span(Span::new(start, start + field.len()))
    };
    fields.pri = pri;
    fields.msgid = Some(span(seq));
    set(name_id(".linux.timestamp"), span(usecs));
    let body = &r[header_end + 1..];
    let mut lines = body.split(|&b| b == b'\n');
    fields.message = span(lines.next().unwrap_or_default());
    for line in lines {
        let line = line.trim_ascii_start();
        let Some(eq) = line.iter().position(|&b| b == b'=') else {
            continue;
        };
        let (key, value) = (&line[..eq], &line[eq + 1..]);
        if key == b"DEVICE" {
            device(value, &span, &mut set);
        } else if let Ok(key) = std::str::from_utf8(key) {
            set(name_id(&format!(".linux.{key}")), span(value));
        }
    }
    true
}

/// `DEVICE=`'s value taken apart.
fn device(value: &[u8], span: &impl Fn(&[u8]) -> Text, set: &mut impl FnMut(NameId, Text)) {
    let (kind, rest) = value.split_first().map_or((0, value), |(k, r)| (*k, r));
    fn split(v: &[u8]) -> (&[u8], &[u8]) {
        match v.iter().position(|&b| b == b':') {
            Some(i) => (&v[..i], &v[i + 1..]),
            None => (v, &v[v.len()..]),
        }
    }
    let ty = name_id(".linux.DEVICE.type");
    match kind {
        b'b' | b'c' => {
            let (major, minor) = split(rest);
            set(
                ty,
                Text::Static(if kind == b'b' { b"block" } else { b"char" }),
            );
            set(name_id(".linux.DEVICE.major"), span(major));
            set(name_id(".linux.DEVICE.minor"), span(minor));
        }
        b'n' => {
            set(ty, Text::Static(b"netdev"));
            set(name_id(".linux.DEVICE.index"), span(rest));
        }
        b'+' => {
            let (subsystem, name) = split(rest);
            set(ty, span(subsystem));
            set(name_id(".linux.DEVICE.name"), span(name));
        }
        _ => {
            set(ty, Text::Static(b"<unknown>"));
            set(name_id(".linux.DEVICE.name"), span(value));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(record: &[u8]) -> Option<(SyslogFields, Vec<(String, String)>)> {
        let mut fields = SyslogFields::EMPTY;
        let mut pairs = Vec::new();
        let names = crate::values::name_of;
        let ok = parse(record, &mut fields, |n, v| {
            pairs.push((
                names(n).to_string(),
                String::from_utf8_lossy(v.of(record)).into_owned(),
            ))
        });
        ok.then_some((fields, pairs))
    }

    #[test]
    fn a_record_with_its_pairs() {
        let rec =
            b"6,802,65338577,-;eth0: NIC Link is Up\n SUBSYSTEM=pci\n DEVICE=+pci:0000:02:00.0\n";
        let (f, pairs) = read(rec).unwrap();
        assert_eq!(f.pri, 6);
        assert_eq!(f.msgid.unwrap().of(rec), b"802");
        assert_eq!(f.message.of(rec), b"eth0: NIC Link is Up");
        let pairs: Vec<(&str, &str)> = pairs
            .iter()
            .map(|(a, b)| (a.as_str(), b.as_str()))
            .collect();
        assert_eq!(
            pairs,
            [
                (".linux.timestamp", "65338577"),
                (".linux.SUBSYSTEM", "pci"),
                (".linux.DEVICE.type", "pci"),
                (".linux.DEVICE.name", "0000:02:00.0"),
            ]
        );
    }

    #[test]
    fn devices_and_bad_records() {
        let (_, pairs) = read(b"3,1,2;disk\n DEVICE=b8:0\n").unwrap();
        assert_eq!(
            pairs[1..],
            [
                (".linux.DEVICE.type".to_string(), "block".to_string()),
                (".linux.DEVICE.major".to_string(), "8".to_string()),
                (".linux.DEVICE.minor".to_string(), "0".to_string()),
            ]
        );
        assert!(read(b"not a record").is_none());
        assert!(read(b"6,x,1;text").is_none());
    }
}
