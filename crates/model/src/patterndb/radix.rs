//! The radix tree of patterns, built and walked as syslog-ng 3.38's `radix.c` does, so that a
//! message meets the same rule: literal text is shared between patterns; at each node a
//! literal child (found by its first byte) is tried before the field parsers, and those in
//! the order they were added; a pattern that matches the start of a message only counts when
//! no pattern matches all of it (a second walk accepts the first node with a value passed on
//! the way). A `\r` of the input before a `\n` of the pattern is skipped.
//!
//! The tree holds indices (of rules, of programs); what fields took is handed back as
//! [`Capture`]s in the order of the path, ranges of the input.

use super::fields::Field;
use crate::values::{name_id, NameId, ValueType};

/// A tree of patterns, each leading to a `T`.
#[derive(Debug)]
pub struct Radix<T> {
    root: Node<T>,
}

#[derive(Debug)]
struct Node<T> {
    /// Literal text; `None` on a field's node.
    key: Option<Vec<u8>>,
    /// The field this node parses, the name its value goes to, the name as written, and
    /// where the pattern that made it is written (syslog-ng's position: `pdbtool dump`).
    field: Option<(Field, Option<NameId>, Vec<u8>, String)>,
    /// The pattern that ends here, and where it was written.
    value: Option<(T, String)>,
    /// Literal children, sorted by their first byte (no two share one).
    children: Vec<Node<T>>,
    /// Each literal child's first byte, in the same order: a lookup reads these few bytes
    /// rather than a child each (the children of a busy node are scattered in memory).
    firsts: Vec<u8>,
    /// Field children, in the order they were added.
    fields: Vec<Node<T>>,
}

/// A value a field took: `start..end` of the input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capture {
    pub name: NameId,
    pub start: usize,
    pub end: usize,
    pub kind: ValueType,
}

/// Why a pattern was not added.
#[derive(Debug)]
pub enum Refused<T> {
    /// Another pattern leads to the same node; where that one was written.
    Duplicate(T, String),
    /// A malformed field, or an `@` not written `@@`.
    Malformed(String),
}

/// Where a pattern is written, and the prefix of its fields' names.
struct Place<'a> {
    location: &'a str,
    /// Where syslog-ng's loader says the pattern is (after its text), for `pdbtool dump`.
    written_at: &'a str,
    prefix: &'a str,
}

/// The byte at `i`, NUL past the end (as syslog-ng reads a C string).
#[inline]
fn at(s: &[u8], i: usize) -> u8 {
    s.get(i).copied().unwrap_or(0)
}

impl<T> Node<T> {
    fn literal(key: &[u8]) -> Node<T> {
        Node {
            key: Some(key.to_vec()),
            field: None,
            value: None,
            children: Vec::new(),
            firsts: Vec::new(),
            fields: Vec::new(),
        }
    }

    /// The literal key's length; a field's node counts as having none.
    fn key_len(&self) -> usize {
        self.key.as_ref().map_or(0, Vec::len)
    }

    fn first(&self) -> u8 {
        at(self.key.as_deref().unwrap_or_default(), 0)
    }

    /// The literal child whose key starts with `c`. Most nodes have a few children: a loop
    /// over their first bytes costs less than memchr's set-up (7.6 % of a run at 90 %
    /// matching went to it); a busy node's many are searched with memchr.
    #[inline]
    fn child(&self, c: u8) -> Option<usize> {
        match self.firsts.len() {
            0..=16 => self.firsts.iter().position(|&f| f == c),
            _ => memchr::memchr(c, &self.firsts),
        }
    }

    /// Adds a literal child in its place; its index.
    fn add_child(&mut self, child: Node<T>) -> usize {
        let first = child.first();
        let i = self.firsts.partition_point(|&f| f <= first);
        self.children.insert(i, child);
        self.firsts.insert(i, first);
        i
    }

    fn set_value(&mut self, value: T, location: &str) -> Result<(), Refused<T>> {
        match &self.value {
            Some((_, other)) => Err(Refused::Duplicate(value, other.clone())),
            None => {
                self.value = Some((value, location.to_string()));
                Ok(())
            }
        }
    }
}

impl<T> Default for Radix<T> {
    fn default() -> Radix<T> {
        Radix {
            root: Node::literal(b""),
        }
    }
}

impl<T> Radix<T> {
    /// Adds `pattern`, leading to `value`; `location` names it in messages about it,
    /// `written_at` is where syslog-ng's loader says it is (`file:line:column` after its text).
    /// The values of its fields are named `prefix` and the field's name.
    pub fn insert(
        &mut self,
        pattern: &[u8],
        value: T,
        (location, written_at): (&str, &str),
        prefix: &str,
    ) -> Result<(), Refused<T>> {
        let place = Place {
            location,
            written_at,
            prefix,
        };
        insert(&mut self.root, pattern, value, &place)
    }

    /// The tree as `pdbtool dump` prints it: a line per node, `[depth]`, indented, a field's
    /// `@TYPE:name@ [where]`, the literal text, and `label` of a node's value.
    pub fn dump(&self, label: &dyn Fn(&T) -> String, out: &mut String) {
        dump(&self.root, 0, label, out);
    }

    /// Calls `f` with every node in `pdbtool`'s order of a walk (the node, its literal
    /// children, its fields): the name its field sets, if any, and its value.
    pub fn walk(&self, f: &mut dyn FnMut(Option<NameId>, Option<&T>)) {
        walk(&self.root, f);
    }

    /// The value of the root (the pattern that is empty).
    pub fn set_root(&mut self, value: T, location: &str) -> Result<(), Refused<T>> {
        self.root.set_value(value, location)
    }

    /// The value `input` leads to, with what the fields on the way took (appended to
    /// `captures`).
    pub fn find(&self, input: &[u8], captures: &mut Vec<Capture>) -> Option<&T> {
        self.find_traced(input, captures, None)
    }

    /// [`Radix::find`], recording each step of the walk in `trace` as syslog-ng's
    /// `r_find_node_dbg` does (`pdbtool match --debug-pattern`).
    pub fn find_traced(
        &self,
        input: &[u8],
        captures: &mut Vec<Capture>,
        trace: Option<&mut Vec<Step>>,
    ) -> Option<&T> {
        let base = captures.len();
        let mut walk = Walk {
            input,
            complete: true,
            partial: false,
            captures,
            trace,
        };
        if let Some(node) = walk.node(&self.root, 0) {
            return node.value.as_ref().map(|(v, _)| v);
        }
        if walk.partial {
            walk.captures.truncate(base);
            walk.complete = false;
            if let Some(node) = walk.node(&self.root, 0) {
                return node.value.as_ref().map(|(v, _)| v);
            }
        }
        None
    }
}

impl<T> Radix<T> {
    /// Every value whose pattern matches all of `input`, in the order of the tree (literal
    /// children before fields): more than one means patterns that shadow each other.
    pub fn find_all(&self, input: &[u8]) -> Vec<&T> {
        let mut found = Vec::new();
        collect(&self.root, input, 0, &mut found);
        found
    }
}

fn collect<'t, T>(node: &'t Node<T>, input: &[u8], pos: usize, found: &mut Vec<&'t T>) {
    let key = &input[pos..];
    let (taken, matched) = literal_prefix(node.key.as_deref().unwrap_or_default(), key);
    if taken == key.len() && (matched == node.key_len() || node.key.is_none()) {
        found.extend(node.value.as_ref().map(|(v, _)| v));
        return;
    }
    if !(node.key_len() < 1 || (taken < key.len() && matched >= node.key_len())) {
        return;
    }
    let rest = pos + taken;
    let literal = rest + usize::from(input[rest..].starts_with(b"\r\n"));
    if let Some(c) = node.child(at(input, literal)) {
        collect(&node.children[c], input, literal, found);
    }
    for child in &node.fields {
        let (field, _, _, _) = child.field.as_ref().expect("a field's node");
        if field.may_start_with(at(input, rest)) {
            if let Some(taken) = field.parse(input, rest) {
                collect(child, input, rest + taken.len, found);
            }
        }
    }
}

fn dump<T>(node: &Node<T>, depth: usize, label: &dyn Fn(&T) -> String, out: &mut String) {
    use std::fmt::Write as _;
    let _ = write!(out, "[{depth}]\t{}", "  ".repeat(depth));
    if let Some((field, name, _, at)) = &node.field {
        let name = name.map_or_else(|| "None".into(), crate::values::name_of);
        let _ = write!(out, "@{}:{name}@ [{at}]", field.kind.name());
    }
    let key = node.key.as_deref().unwrap_or_default();
    let _ = write!(out, "'{}' ", String::from_utf8_lossy(key));
    if let Some((value, _)) = &node.value {
        out.push_str(&label(value));
    }
    out.push('\n');
    for child in node.children.iter().chain(&node.fields) {
        dump(child, depth + 1, label, out);
    }
}

fn walk<T>(node: &Node<T>, f: &mut dyn FnMut(Option<NameId>, Option<&T>)) {
    f(
        node.field.as_ref().and_then(|(_, name, _, _)| *name),
        node.value.as_ref().map(|(v, _)| v),
    );
    for child in node.children.iter().chain(&node.fields) {
        walk(child, f);
    }
}

fn insert<T>(node: &mut Node<T>, key: &[u8], value: T, place: &Place) -> Result<(), Refused<T>> {
    if key.first() == Some(&b'@') {
        if key.get(1) == Some(&b'@') {
            // `@@`: a literal `@`, a node of its own.
            let i = match node.child(b'@') {
                Some(i) => i,
                None => node.add_child(Node::literal(b"@")),
            };
            let child = &mut node.children[i];
            return match key.len() {
                2 => child.set_value(value, place.location),
                _ => insert(child, &key[2..], value, place),
            };
        }
        let Some(end) = key[1..].iter().position(|&b| b == b'@').map(|e| e + 1) else {
            return Err(Refused::Malformed(format!(
                "an @ without its closing @ (a literal @ is written @@): {}",
                String::from_utf8_lossy(key)
            )));
        };
        let spec = &key[1..end];
        let mut parts = spec.splitn(3, |&b| b == b':');
        let kind = String::from_utf8_lossy(parts.next().unwrap_or_default()).into_owned();
        let name = parts.next().unwrap_or_default().to_vec();
        let param = parts.next();
        let field = Field::new(&kind, param).map_err(Refused::Malformed)?;
        let param = param.unwrap_or_default();
        let same = |n: &Node<T>| {
            n.field.as_ref().is_some_and(|(f, _, written, _)| {
                f.kind == field.kind && f.param == param && *written == name
            })
        };
        let i = match node.fields.iter().position(same) {
            Some(i) => i,
            None => {
                let id = (!name.is_empty()).then(|| {
                    name_id(&format!(
                        "{}{}",
                        place.prefix,
                        String::from_utf8_lossy(&name)
                    ))
                });
                node.fields.push(Node {
                    key: None,
                    field: Some((field, id, name, place.written_at.to_string())),
                    value: None,
                    children: Vec::new(),
                    firsts: Vec::new(),
                    fields: Vec::new(),
                });
                node.fields.len() - 1
            }
        };
        let child = &mut node.fields[i];
        return match end + 1 < key.len() {
            true => insert(child, &key[end + 1..], value, place),
            false => child.set_value(value, place.location),
        };
    }
    let nkey = node.key.as_deref().unwrap_or_default();
    let nodelen = nkey.len();
    let mut i = 0;
    while i < key.len() && i < nodelen && key[i] == nkey[i] && key[i] != b'@' {
        i += 1;
    }
    if nodelen == 0 || i == 0 || (i < key.len() && i >= nodelen) {
        match node.child(at(key, i)) {
            // An `@` is never part of a literal node: the field goes under this one.
            Some(_) if at(key, i) == b'@' => insert(node, &key[i..], value, place),
            Some(c) => insert(&mut node.children[c], &key[i..], value, place),
            None => add_child_check(node, &key[i..], value, place),
        }
    } else if i == key.len() && i == nodelen {
        node.set_value(value, place.location)
    } else if i > 0 && i < nodelen {
        // Split this node at `i`: what it held goes to a child with the rest of its key.
        let mut old = Node::literal(&nkey[i..]);
        old.value = node.value.take();
        old.children = std::mem::take(&mut node.children);
        old.firsts = std::mem::take(&mut node.firsts);
        old.fields = std::mem::take(&mut node.fields);
        node.key = Some(nkey[..i].to_vec());
        node.add_child(old);
        if i < key.len() {
            add_child_check(node, &key[i..], value, place)
        } else {
            node.set_value(value, place.location)
        }
    } else {
        add_child_check(node, &key[i..], value, place)
    }
}

/// Adds `key` under `node` as a new literal child up to its first `@`, the rest under that.
fn add_child_check<T>(
    node: &mut Node<T>,
    key: &[u8],
    value: T,
    place: &Place,
) -> Result<(), Refused<T>> {
    match key.iter().position(|&b| b == b'@') {
        Some(0) => insert(node, key, value, place),
        Some(at) => {
            let c = node.add_child(Node::literal(&key[..at]));
            insert(&mut node.children[c], &key[at..], value, place)
        }
        None => {
            let mut child = Node::literal(key);
            child.value = Some((value, place.location.to_string()));
            node.add_child(child);
            Ok(())
        }
    }
}

/// A step of a walk, as syslog-ng's `RDebugInfo` records it: a node reached (with how much
/// of its literal the input matched) or a field that took a value (with the node it hangs
/// from, and the value's place in the input).
#[derive(Clone, Debug)]
pub struct Step {
    /// The node's literal (the parent's, for a field); `None` for a field's node.
    pub key: Option<Vec<u8>>,
    /// Bytes of the input matched here: of the literal, or taken by the field.
    pub matched: usize,
    /// The field: its type's name and the name its value goes to.
    pub field: Option<(&'static str, Option<NameId>)>,
    /// Where the field's value is in the input, and its length.
    pub value_at: usize,
    pub value_len: usize,
}

impl Step {
    /// The length of the node's literal: -1 for a field's node, as syslog-ng has it.
    pub fn key_len(&self) -> i64 {
        self.key.as_ref().map_or(-1, |k| k.len() as i64)
    }
}

/// One walk of the tree over an input.
struct Walk<'i, 'c> {
    input: &'i [u8],
    /// Only a node that ends with the input counts (the first walk).
    complete: bool,
    /// A node with a value was passed with input left (worth a second walk).
    partial: bool,
    captures: &'c mut Vec<Capture>,
    /// Steps of the walks, for `pdbtool --debug-pattern`; kept across both walks and past
    /// literal children that led nowhere, as syslog-ng keeps them.
    trace: Option<&'c mut Vec<Step>>,
}

impl Walk<'_, '_> {
    /// The node the input from `pos` leads to from `node`.
    fn node<'t, T>(&mut self, node: &'t Node<T>, pos: usize) -> Option<&'t Node<T>> {
        let key = &self.input[pos..];
        let (taken, matched) = literal_prefix(node.key.as_deref().unwrap_or_default(), key);
        if let Some(trace) = &mut self.trace {
            trace.push(Step {
                key: node.key.clone(),
                matched: taken,
                field: None,
                value_at: 0,
                value_len: 0,
            });
        }
        let is_field = node.key.is_none();
        if taken == key.len() && (matched == node.key_len() || is_field) {
            // The input ends here.
            return node.value.as_ref().map(|_| node);
        }
        if !(node.key_len() < 1 || (taken < key.len() && matched >= node.key_len())) {
            return None;
        }
        let rest = pos + taken;
        // A literal child first, then the fields in order.
        let found = self
            .literal_child(node, rest)
            .or_else(|| self.field_child(node, rest));
        if found.is_none() && node.value.is_some() {
            if !self.complete {
                return Some(node);
            }
            self.partial = true;
        }
        found
    }

    fn literal_child<'t, T>(&mut self, node: &'t Node<T>, mut pos: usize) -> Option<&'t Node<T>> {
        if self.input[pos..].starts_with(b"\r\n") {
            pos += 1;
        }
        let child = &node.children[node.child(at(self.input, pos))?];
        self.node(child, pos)
    }

    fn field_child<'t, T>(&mut self, node: &'t Node<T>, pos: usize) -> Option<&'t Node<T>> {
        let slot = self.captures.len();
        let steps = self.trace.as_ref().map_or(0, |t| t.len());
        let next = at(self.input, pos);
        for child in &node.fields {
            if let Some(trace) = &mut self.trace {
                trace.truncate(steps);
            }
            let (field, name, _, _) = child.field.as_ref().expect("a field's node");
            if !field.may_start_with(next) {
                continue;
            }
            let Some(taken) = field.parse(self.input, pos) else {
                continue;
            };
            if let Some(trace) = &mut self.trace {
                trace.push(Step {
                    key: node.key.clone(),
                    matched: taken.len,
                    field: Some((field.kind.name(), *name)),
                    value_at: pos + taken.start,
                    value_len: taken.end - taken.start,
                });
            }
            self.captures.truncate(slot);
            self.captures.push(Capture {
                name: name.unwrap_or(0),
                start: pos + taken.start,
                end: pos + taken.end,
                kind: field.value_type(),
            });
            if let Some(found) = self.node(child, pos + taken.len) {
                if name.is_none() {
                    self.captures.remove(slot);
                }
                return Some(found);
            }
        }
        self.captures.truncate(slot);
        None
    }
}

/// How much of `key` the literal `literal` matches from the start: bytes of the input, bytes
/// of the literal (a `\r` of the input before a `\n` of the literal is skipped).
#[inline]
fn literal_prefix(literal: &[u8], key: &[u8]) -> (usize, usize) {
    // The bytes both share, compared eight at a time; byte by byte only from a `\r` on.
    let same = common_prefix(literal, key);
    if same == literal.len() || same == key.len() || key[same] != b'\r' {
        return (same, same);
    }
    let (mut input, mut radix) = (same, same);
    while input < key.len() && radix < literal.len() {
        if key[input] == b'\r' && literal[radix] == b'\n' {
            input += 1;
        }
        if at(key, input) != literal[radix] {
            break;
        }
        input += 1;
        radix += 1;
    }
    (input, radix)
}

/// How many bytes `a` and `b` share from the start, compared a word at a time (literals of
/// patterns are often tens of bytes; the byte loop was a tenth of a run at 90 % matching).
#[inline]
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let mut i = 0;
    while i + 8 <= n {
        let x = u64::from_le_bytes(a[i..i + 8].try_into().expect("eight bytes"));
        let y = u64::from_le_bytes(b[i..i + 8].try_into().expect("eight bytes"));
        let diff = x ^ y;
        if diff != 0 {
            return i + (diff.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while i < n && a[i] == b[i] {
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::values::name_of;

    #[test]
    fn common_prefixes_are_found_a_word_at_a_time() {
        let cases: [(&[u8], &[u8], usize); 6] = [
            (b"", b"abc", 0),
            (b"abcdefghij", b"abcdefghij", 10),
            (b"abcdefghij", b"abcdefgXij", 7),
            (b"abcdefghijklmnop", b"abcdefghijklmnoX", 15),
            (b"abcdefghijklmnopq", b"abcdefghi", 9),
            (b"Xbc", b"abc", 0),
        ];
        for (a, b, n) in cases {
            assert_eq!(common_prefix(a, b), n, "{a:?} {b:?}");
            assert_eq!(common_prefix(b, a), n, "{a:?} {b:?}");
        }
    }

    fn tree(patterns: &[&str]) -> Radix<usize> {
        let mut r = Radix::default();
        for (i, p) in patterns.iter().enumerate() {
            r.insert(p.as_bytes(), i, (&format!("pattern {i}"), ""), "")
                .unwrap();
        }
        r
    }

    fn find(r: &Radix<usize>, input: &str) -> Option<(usize, Vec<(String, String)>)> {
        let mut captures = Vec::new();
        let found = r.find(input.as_bytes(), &mut captures)?;
        let values = captures
            .iter()
            .map(|c| {
                (
                    name_of(c.name).to_string(),
                    input[c.start..c.end].to_string(),
                )
            })
            .collect();
        Some((*found, values))
    }

    #[test]
    fn literals_are_shared_and_split() {
        let r = tree(&["Accepted password", "Accepted publickey", "Accepted"]);
        assert_eq!(find(&r, "Accepted password").unwrap().0, 0);
        assert_eq!(find(&r, "Accepted publickey").unwrap().0, 1);
        assert_eq!(find(&r, "Accepted").unwrap().0, 2);
        assert_eq!(find(&r, "Rejected"), None);
    }

    #[test]
    fn fields_take_values_and_literals_come_first() {
        let r = tree(&[
            "Accepted @ESTRING:method: @for @ESTRING:user: @from @IPv4:ip@ port @NUMBER:port@",
            "Accepted password for root from @IPv4:ip@",
            "n=@NUMBER:n@ s=@STRING:s@",
            "n=@NUMBER:n@ s=lit",
        ]);
        let (rule, values) = find(&r, "Accepted password for bob from 10.0.0.1 port 22").unwrap();
        assert_eq!(rule, 0);
        assert_eq!(
            values,
            [
                ("method".into(), "password".into()),
                ("user".into(), "bob".into()),
                ("ip".into(), "10.0.0.1".into()),
                ("port".into(), "22".into())
            ]
        );
        assert_eq!(
            find(&r, "Accepted password for root from 10.0.0.1")
                .unwrap()
                .0,
            1
        );
        assert_eq!(find(&r, "n=5 s=lit").unwrap().0, 3);
        assert_eq!(find(&r, "n=5 s=other").unwrap().0, 2);
    }

    #[test]
    fn a_prefix_matches_only_when_nothing_matches_the_whole() {
        let r = tree(&["user @STRING:u@ logged", "user @STRING:u@ logged in"]);
        assert_eq!(find(&r, "user a logged in").unwrap().0, 1);
        // Only the start of the message matches a pattern: it counts.
        let (rule, values) = find(&r, "user a logged out").unwrap();
        assert_eq!(rule, 0);
        assert_eq!(values, [("u".into(), "a".into())]);
    }

    #[test]
    fn escapes_duplicates_and_malformed_patterns() {
        let mut r = tree(&["mail @@ @STRING:host@", "crlf\nend"]);
        assert_eq!(find(&r, "mail @ example").unwrap().1[0].1, "example");
        assert_eq!(find(&r, "crlf\r\nend").unwrap().0, 1);
        assert!(
            matches!(r.insert(b"mail @@ @STRING:host@", 9, ("again", ""), ""), Err(Refused::Duplicate(9, w)) if w == "pattern 0")
        );
        assert!(matches!(
            r.insert(b"user@host", 9, ("x", ""), ""),
            Err(Refused::Malformed(_))
        ));
        assert!(matches!(
            r.insert(b"@NOPE:x@", 9, ("x", ""), ""),
            Err(Refused::Malformed(_))
        ));
    }
}
