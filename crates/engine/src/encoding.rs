//! `encoding()`: input written in another character set (`iso-8859-2`, `windows-1251`,
//! `shift_jis`, …), made UTF-8 after it is cut into messages and before they are parsed, as
//! syslog-ng converts it. The character sets are the WHATWG Encoding Standard's
//! (`encoding_rs`), found by the names it lists (iconv's usual names among them). Only
//! ASCII-compatible ones: a line end is then the byte `\n` whatever the character set, so
//! framing, `log-msg-size()` and file positions stay in the input's own bytes. A byte that
//! is not a character of the set becomes U+FFFD.

use bytes::Bytes;
use sluice_protocol::framing::Frame;

/// A character set other than UTF-8.
pub type Charset = &'static encoding_rs::Encoding;

/// The character set `label` names; `None` for UTF-8 (and ASCII, a part of it): nothing to
/// convert.
pub fn lookup(label: &str) -> Result<Option<Charset>, String> {
    let Some(charset) = encoding_rs::Encoding::for_label(label.trim().as_bytes()) else {
        return Err(format!(
            "encoding(\"{label}\") is not a character set sluice knows (the WHATWG Encoding Standard's names: \"utf-8\", \"iso-8859-2\", \"windows-1251\", \"koi8-r\", \"shift_jis\", \"gb18030\", …)"
        ));
    };
    if charset == encoding_rs::UTF_8 || label.trim().eq_ignore_ascii_case("ascii") {
        return Ok(None);
    }
    if !charset.is_ascii_compatible() {
        return Err(format!(
            "encoding(\"{label}\") is not supported yet: sluice reads character sets whose line end is the byte \\n ({} is not one)",
            charset.name()
        ));
    }
    Ok(Some(charset))
}

/// `chunk`'s `frames` in UTF-8: a new buffer, and each frame's range moved into it.
pub fn frames(chunk: &[u8], frames: &mut [Frame], charset: Charset) -> Bytes {
    let mut out = Vec::with_capacity(chunk.len() + chunk.len() / 2);
    for f in frames {
        let start = out.len();
        out.extend_from_slice(decode(&chunk[f.range.clone()], charset).as_bytes());
        f.range = start..out.len();
    }
    Bytes::from(out)
}

/// A message (a datagram) in UTF-8.
pub fn message(raw: &[u8], charset: Charset) -> Bytes {
    Bytes::from(decode(raw, charset).into_owned().into_bytes())
}

fn decode(bytes: &[u8], charset: Charset) -> std::borrow::Cow<'_, str> {
    charset.decode_without_bom_handling(bytes).0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charsets_are_found_by_their_usual_names() {
        assert_eq!(lookup("UTF-8"), Ok(None));
        assert_eq!(lookup("ascii"), Ok(None));
        assert_eq!(lookup("ISO-8859-2").unwrap().unwrap().name(), "ISO-8859-2");
        assert_eq!(lookup("latin2").unwrap().unwrap().name(), "ISO-8859-2");
        assert!(lookup("UTF-16LE")
            .unwrap_err()
            .contains("not supported yet"));
        assert!(lookup("klingon")
            .unwrap_err()
            .contains("not a character set"));
    }

    #[test]
    fn frames_are_converted_where_they_are() {
        // "Łódź\n" and "zażółć" in ISO-8859-2, with a byte between that is in no frame.
        let chunk = b"\xa3\xf3d\xbc\nza\xbf\xf3\xb3\xe6";
        let mut f = vec![
            Frame {
                range: 0..4,
                oversized: false,
            },
            Frame {
                range: 5..11,
                oversized: false,
            },
        ];
        let out = frames(chunk, &mut f, lookup("iso-8859-2").unwrap().unwrap());
        assert_eq!(&out[f[0].range.clone()], "Łódź".as_bytes());
        assert_eq!(&out[f[1].range.clone()], "zażółć".as_bytes());
        let cp1251 = lookup("windows-1251").unwrap().unwrap();
        assert_eq!(
            &message(b"\xcf\xf0\xe8\xe2\xe5\xf2", cp1251)[..],
            "Привет".as_bytes()
        );
    }
}
