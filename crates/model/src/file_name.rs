//! File names made from templates: what a sender sends never chooses where a file goes.
//!
//! The *root* of a `file()` name is the directory part of its template before the first macro
//! or function: `/var/log/hosts/` of `/var/log/hosts/${HOST}/${YEAR}.log`, `/var/log/` of
//! `/var/log/host-${HOST}.log`, the working directory of `${HOST}.log`. Whatever the values,
//! the name stays beneath the root:
//!
//! - in each value substituted into the name (a macro, a name-value pair, a function's result),
//!   `/`, NUL and the other control bytes become `_`, as `$(sanitize)` makes them;
//! - after the root, a component that is `.` or `..` becomes `_` or `__`, and one longer than
//!   `NAME_MAX` is cut and ends in `~` and 16 hex digits of the hash of the whole component.
//!
//! So a name can be rewritten, never lead outside the root; the message is still written. The
//! engine opens such names beneath the root without following links
//! (`sluice_engine::file_open`).

use crate::{LogMessage, Template};

/// The longest name of one directory entry (Linux's `NAME_MAX`).
pub const NAME_MAX: usize = 255;

/// A `file()` name template and the root its values cannot leave.
#[derive(Clone, Debug)]
pub struct FileName {
    template: Template,
    /// The root: this many bytes at the start of every name the template makes.
    root_len: usize,
}

impl FileName {
    pub fn new(template: Template) -> FileName {
        let prefix = template.literal_prefix();
        let root_len = match template.literal() {
            // A name without macros: its directory is the root.
            Some(name) => name.iter().rposition(|&b| b == b'/').map_or(0, |at| at + 1),
            None => prefix
                .iter()
                .rposition(|&b| b == b'/')
                .map_or(0, |at| at + 1),
        };
        FileName { template, root_len }
    }

    pub fn template(&self) -> &Template {
        &self.template
    }

    /// The directory every name is beneath, as written (empty: the working directory).
    pub fn root(&self) -> &[u8] {
        match self.template.literal() {
            Some(name) => &name[..self.root_len],
            None => &self.template.literal_prefix()[..self.root_len],
        }
    }

    /// Appends the name of `msg`'s file to `out`; says whether a value had to be changed to
    /// keep it beneath the root (see the module's rules).
    pub fn append(&self, msg: &LogMessage, out: &mut Vec<u8>) -> bool {
        let start = out.len();
        let mut changed = false;
        self.template.append_with(msg, 0, out, |out, from| {
            changed |= sanitize_value(&mut out[from..]);
        });
        changed | fix_components(out, start + self.root_len)
    }

    /// What the name would be without the rules: to say what a rewritten name came from.
    pub fn append_as_sent(&self, msg: &LogMessage, out: &mut Vec<u8>) {
        self.template.append(msg, 0, out);
    }
}

/// `/`, NUL and the other control bytes (and DEL) become `_`.
fn sanitize_value(value: &mut [u8]) -> bool {
    let mut changed = false;
    for b in value {
        if *b == b'/' || *b < 0x20 || *b == 0x7f {
            *b = b'_';
            changed = true;
        }
    }
    changed
}

/// Makes each component of `path[from..]` a plain name: `.` → `_`, `..` → `__`, longer than
/// [`NAME_MAX`] → cut, with `~` and a hash of the whole. Empty components (`a//b`) are left:
/// they name nothing.
fn fix_components(path: &mut Vec<u8>, from: usize) -> bool {
    let mut changed = false;
    let mut start = from;
    while start <= path.len() {
        let end = memchr::memchr(b'/', &path[start..]).map_or(path.len(), |at| start + at);
        let component = &mut path[start..end];
        match component {
            [b'.'] | [b'.', b'.'] => {
                component.fill(b'_');
                changed = true;
            }
            _ if component.len() > NAME_MAX => {
                let short = shorten(component);
                let cut = short.len();
                path.splice(start..end, short);
                changed = true;
                start += cut + 1;
                continue;
            }
            _ => {}
        }
        start = end + 1;
    }
    changed
}

/// A component cut to [`NAME_MAX`]: its start (ending on a character boundary when it is
/// UTF-8), `~`, and 16 hex digits of the SHA-1 of the whole, so that two long names that
/// start alike stay two files, the same in every run.
fn shorten(component: &[u8]) -> Vec<u8> {
    use sha1::Digest;
    const SUFFIX: usize = 17;
    let mut keep = NAME_MAX - SUFFIX;
    // Back up to the start of a UTF-8 character (at most three continuation bytes).
    for _ in 0..3 {
        if component[keep] & 0xc0 == 0x80 {
            keep -= 1;
        }
    }
    let digest = sha1::Sha1::digest(component);
    let mut short = component[..keep].to_vec();
    short.push(b'~');
    for b in &digest[..8] {
        short.extend_from_slice(format!("{b:02x}").as_bytes());
    }
    short
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(template: &str, frame: &str) -> (String, bool) {
        let path = FileName::new(Template::compile(template).unwrap());
        let msg = crate::testing::message(frame);
        let mut out = b"ignored:".to_vec();
        let changed = path.append(&msg, &mut out);
        (String::from_utf8(out[8..].to_vec()).unwrap(), changed)
    }

    #[test]
    fn the_root_is_the_directory_before_the_first_macro() {
        let root = |t: &str| {
            String::from_utf8(FileName::new(Template::compile(t).unwrap()).root().to_vec()).unwrap()
        };
        assert_eq!(
            root("/var/log/hosts/${HOST}/${YEAR}.log"),
            "/var/log/hosts/"
        );
        assert_eq!(root("/var/log/host-${HOST}.log"), "/var/log/");
        assert_eq!(root("/var/log/messages"), "/var/log/");
        assert_eq!(root("logs/$(lowercase $HOST).log"), "logs/");
        assert_eq!(root("${HOST}.log"), "");
    }

    #[test]
    fn values_cannot_leave_the_root() {
        let t = "/l/${HOST}/${PROGRAM}.log";
        // The reproductions: a host of `../..`, a program of `../../x`.
        assert_eq!(
            name(t, "<13>Nov 24 10:00:00 host ../../x: m"),
            ("/l/host/.._.._x.log".into(), true)
        );
        assert_eq!(
            name("/l/${PROGRAM}/a.log", "<13>Nov 24 10:00:00 host ..: m"),
            ("/l/__/a.log".into(), true)
        );
        assert_eq!(
            name("/l/${PROGRAM}/a.log", "<13>Nov 24 10:00:00 host .: m"),
            ("/l/_/a.log".into(), true)
        );
        // A dot next to a literal dot makes `..` only with it: still a name.
        assert_eq!(
            name("/l/.${PROGRAM}/a.log", "<13>Nov 24 10:00:00 host .: m"),
            ("/l/__/a.log".into(), true)
        );
        // Percent-encoding is not decoded; NUL and control bytes are replaced.
        assert_eq!(
            name("/l/${PROGRAM}.log", "<13>Nov 24 10:00:00 host %2e%2e%2f: m"),
            ("/l/%2e%2e%2f.log".into(), false)
        );
        assert_eq!(
            name(
                "/l/${MSG}.log",
                "<13>Nov 24 10:00:00 host p: a\u{1}b\u{7f}c"
            ),
            ("/l/a_b_c.log".into(), true)
        );
        // Ordinary names are left as they are.
        assert_eq!(
            name(t, "<13>Nov 24 10:00:00 web-1.example.org sshd[1]: m"),
            ("/l/web-1.example.org/sshd.log".into(), false)
        );
    }

    #[test]
    fn a_long_component_is_cut_with_a_hash_of_the_whole() {
        let long = "p".repeat(300);
        let (made, changed) = name("/l/${MSG}.log", &format!("<13>Nov 24 10:00:00 h p: {long}"));
        assert!(changed);
        let file = made.strip_prefix("/l/").unwrap();
        assert_eq!(file.len(), NAME_MAX);
        assert!(file.starts_with(&"p".repeat(200)));
        // Another long name with the same start is another file; the same name, the same.
        let (other, _) = name(
            "/l/${MSG}.log",
            &format!("<13>Nov 24 10:00:00 h p: {long}q"),
        );
        assert_ne!(made, other);
        let (again, _) = name("/l/${MSG}.log", &format!("<13>Nov 24 10:00:00 h p: {long}"));
        assert_eq!(made, again);
        // Exactly NAME_MAX bytes is left whole; a multi-byte character is not cut in two.
        let exact = "e".repeat(NAME_MAX - 4);
        let (made, changed) = name(
            "/l/${MSG}.log",
            &format!("<13>Nov 24 10:00:00 h p: {exact}"),
        );
        assert_eq!((made.len(), changed), (3 + NAME_MAX, false));
        let wide = "é".repeat(200);
        let (made, _) = name("/l/${MSG}", &format!("<13>Nov 24 10:00:00 h p: {wide}"));
        let file = made.strip_prefix("/l/").unwrap();
        assert!(file.len() <= NAME_MAX, "{}", file.len());
        assert!(file.split('~').next().unwrap().chars().all(|c| c == 'é'));
    }
}
