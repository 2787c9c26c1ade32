//! syslog-ng's list values: comma-separated items, each quoted (`"a,b"`, `'x'`, with backslash
//! escapes inside the quotes) where it needs to be. `$(list-*)`, `$(explode)`, `set-matches()`
//! and the like read and write them.

/// The items of the lists in `args`, read one after the other as syslog-ng's list scanner
/// reads them: unquoted empty items are skipped, a quoted empty one counts, an item whose
/// quoting is broken is kept as written.
pub fn items(args: &[&[u8]]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for arg in args {
        let mut at = 0;
        loop {
            while arg.get(at) == Some(&b',') {
                at += 1;
            }
            if at >= arg.len() {
                break;
            }
            let (item, next) = decode(arg, at);
            out.push(item);
            at = next;
        }
    }
    out
}

/// One item from `at`: its value and where the next one starts.
fn decode(s: &[u8], start: usize) -> (Vec<u8>, usize) {
    let read = crate::str_repr::decode(s, start, [b',', b','], |at| Some(at + 1));
    (read.value.into_bytes(s), read.end)
}

/// Appends `item` to the list in `out` that began at `start`: a comma first unless the list is
/// empty or already ends in one, then the item quoted where it needs to be.
pub fn push(out: &mut Vec<u8>, start: usize, item: &[u8]) {
    separate(out, start);
    encode(out, item, Some(b','));
}

/// The comma before a new item of the list in `out` that began at `start`, unless the list is
/// empty or already ends in one.
pub fn separate(out: &mut Vec<u8>, start: usize) {
    if out.len() > start && out.last() != Some(&b',') {
        out.push(b',');
    }
}

/// syslog-ng's `str_repr_encode`: a word as is when nothing in it needs quoting (no quote,
/// control byte, backslash, space or `forbidden` byte), else in the quote it does not contain,
/// with control bytes, backslashes and invalid UTF-8 escaped. An empty word is `""`.
pub fn encode(out: &mut Vec<u8>, word: &[u8], forbidden: Option<u8>) {
    if word.is_empty() {
        out.extend_from_slice(b"\"\"");
        return;
    }
    let apostrophe = word.contains(&b'\'');
    let quote = word.contains(&b'"');
    let plain = |b: &u8| !b"\x08\x0c\n\r\t\\ ".contains(b) && Some(*b) != forbidden;
    if !apostrophe && !quote && word.iter().all(plain) {
        out.extend_from_slice(word);
        return;
    }
    let (q, escape_quote) = match (apostrophe, quote) {
        (false, true) => (b'\'', false),
        (true, false) => (b'"', false),
        _ => (b'"', true),
    };
    out.push(q);
    sluice_protocol::syslog::escape_binary(word, escape_quote.then_some(b'"'), out);
    out.push(q);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &[&str]) -> Vec<String> {
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        items(&args)
            .into_iter()
            .map(|i| String::from_utf8(i).unwrap())
            .collect()
    }

    #[test]
    fn items_quoting_and_empties() {
        assert_eq!(strings(&["a,b", "c"]), ["a", "b", "c"]);
        assert_eq!(strings(&["a,,b,", ""]), ["a", "b"]);
        assert_eq!(strings(&[r#""x,y",'z',"",w"#]), ["x,y", "z", "", "w"]);
        assert_eq!(strings(&[r#""a\"b\n""#]), ["a\"b\n"]);
        assert_eq!(strings(&[r#""a"b,c"#]), [r#""a"b,"#, "c"]);
        let mut out = Vec::new();
        for i in ["a", "b c", "x,y", "", "q\""] {
            push(&mut out, 0, i.as_bytes());
        }
        assert_eq!(String::from_utf8(out).unwrap(), r#"a,"b c","x,y","",'q"'"#);
    }
}
