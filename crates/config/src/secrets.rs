//! A configuration's text with its secrets hidden, for `sluice ctl config`: the values of
//! options that hold a password (`password()`, `key-password()`, `sasl-password()`…), of
//! `"name" => "value"` pairs whose name says password or secret (`config("sasl.password" =>
//! "…")`), and the password in a URI's user part (`uri("mongodb://user:secret@host")`) are
//! written `*****`.

use crate::lexer::{tokenize, Tok, Token};

/// What a hidden value is written as.
const HIDDEN: &str = "\"*****\"";

/// Whether an option or pair of this name holds a secret.
fn secret_name(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    ["password", "passwd", "passphrase", "secret"]
        .iter()
        .any(|w| name.contains(w))
        || matches!(name.as_str(), "pass" | "key_pass" | "key-pass")
}

fn text_of(t: &Token) -> Option<&str> {
    match &t.tok {
        Tok::Word(w) | Tok::Str(w) => Some(w),
        _ => None,
    }
}

/// `text` with the values of secret options replaced by `"*****"`; `text` as it is when it
/// is not read as a configuration.
pub fn without_secrets(text: &str) -> String {
    let Ok(tokens) = tokenize(text) else {
        return text.to_string();
    };
    // (from, to, replacement) in the text, in order.
    let mut hidden: Vec<(usize, usize, String)> = Vec::new();
    let own = |t: &Token| t.text == 0;
    for (i, t) in tokens.iter().enumerate() {
        let (Some(value), Some(after)) = (tokens.get(i + 2), tokens.get(i + 3)) else {
            break;
        };
        if !own(t) || !own(value) || !own(after) {
            continue;
        }
        let (from, to) = (value.offset as usize, after.offset as usize);
        let value_text = text_of(value);
        match (&t.tok, &tokens[i + 1].tok) {
            // password("x")
            (Tok::Word(name), Tok::LParen) if secret_name(name) && value_text.is_some() => {
                hidden.push((from, to, HIDDEN.to_string()));
            }
            // "sasl.password" => "x"
            (Tok::Word(name) | Tok::Str(name), Tok::Word(arrow))
                if arrow == "=>" && secret_name(name) && value_text.is_some() =>
            {
                hidden.push((from, to, HIDDEN.to_string()));
            }
            _ => {}
        }
    }
    // A URI's password: scheme://user:secret@host.
    for t in tokens.iter().filter(|t| own(t)) {
        let Tok::Str(s) = &t.tok else { continue };
        let Some(rest) = s.find("://").map(|i| &s[i + 3..]) else {
            continue;
        };
        let user_part = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
        let Some(at) = user_part.rfind('@') else {
            continue;
        };
        let Some(colon) = user_part[..at].find(':') else {
            continue;
        };
        let secret = &user_part[colon + 1..at];
        // Where the secret is in the text: within the token's quotes, written as it is read
        // (a secret with escapes in it is left to the whole value's hiding below).
        let start = t.offset as usize;
        let Some(end) = tokens
            .iter()
            .find(|n| own(n) && n.offset > t.offset)
            .map(|n| n.offset as usize)
        else {
            continue;
        };
        let written = &text[start..end];
        let needle = format!(":{secret}@");
        match written.find(&needle) {
            Some(i) if !secret.is_empty() => {
                hidden.push((start + i + 1, start + i + 1 + secret.len(), "*****".into()));
            }
            _ if !secret.is_empty() => hidden.push((start, end, HIDDEN.to_string())),
            _ => {}
        }
    }
    hidden.sort_by_key(|h| h.0);
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for (from, to, with) in hidden {
        if from < at {
            continue;
        }
        out.push_str(&text[at..from]);
        out.push_str(&with);
        // Keep the white space between the value and what follows it.
        let value = &text[from..to];
        let trailing = value.len() - value.trim_end().len();
        out.push_str(&value[value.len() - trailing..]);
        at = to;
    }
    out.push_str(&text[at..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_hidden_and_the_rest_kept() {
        let text = r#"destination d { sql(type(pgsql) username("syslog") password("s3cret") database("logs")); };
destination k { kafka-c(config("sasl.password" => "k3y" "client.id" => "c")); };
destination m { mongodb(uri("mongodb://user:m0ngo@db:27017/logs")); };
destination h { http(url("http://example.com/") password(w0rd)); };"#;
        let shown = without_secrets(text);
        for secret in ["s3cret", "k3y", "m0ngo", "w0rd"] {
            assert!(!shown.contains(secret), "{secret} in {shown}");
        }
        assert!(
            shown.contains(r#"password("*****") database("logs")"#),
            "{shown}"
        );
        assert!(
            shown.contains(r#""sasl.password" => "*****" "client.id" => "c""#),
            "{shown}"
        );
        assert!(
            shown.contains("mongodb://user:*****@db:27017/logs"),
            "{shown}"
        );
        assert!(shown.contains(r#"username("syslog")"#), "{shown}");
        assert_eq!(without_secrets("@version: 3.38\n"), "@version: 3.38\n");
    }
}
