//! How a reader prints a record: the line as the template made it, a JSON object of its
//! fields, or an RFC5424 line.

use clap::ValueEnum;
use sluice_logstore::chunk::Record;
use std::io::Write;

/// How each message is printed.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Output {
    Text,
    Json,
    Rfc5424,
}

/// Prints `r` as `format` says.
pub fn print(out: &mut impl Write, format: Output, r: &Record) -> std::io::Result<()> {
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let stamp = |micros: i64| {
        jiff::Timestamp::from_microsecond(micros)
            .map_or_else(|_| micros.to_string(), |t| t.to_string())
    };
    match format {
        Output::Text => out.write_all(r.line),
        Output::Json => {
            let line = r.line.strip_suffix(b"\n").unwrap_or(r.line);
            let v = serde_json::json!({
                "stamp": stamp(r.stamp),
                "recvd": stamp(r.recvd),
                "pri": r.pri,
                "host": text(r.host),
                "program": text(r.program),
                "message": text(r.text),
                "line": text(line),
            });
            writeln!(out, "{v}")
        }
        Output::Rfc5424 => {
            let dash = |b: &[u8]| {
                if b.is_empty() {
                    "-".to_string()
                } else {
                    text(b)
                }
            };
            let t = jiff::Timestamp::from_microsecond(r.stamp)
                .ok()
                .and_then(|t| {
                    let tz =
                        jiff::tz::TimeZone::fixed(jiff::tz::Offset::from_seconds(r.offset).ok()?);
                    Some(
                        t.to_zoned(tz)
                            .strftime("%Y-%m-%dT%H:%M:%S%.6f%:z")
                            .to_string(),
                    )
                })
                .unwrap_or_else(|| "-".into());
            writeln!(
                out,
                "<{}>1 {t} {} {} - - - {}",
                r.pri,
                dash(r.host),
                dash(r.program),
                text(r.text)
            )
        }
    }
}
