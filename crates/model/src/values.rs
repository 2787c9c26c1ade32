//! Name-value pairs that rewrite rules and parsers add to a message: `${.kv.user}`,
//! `${my.field}`, an `.SDATA.id.name` set by `set()`.
//!
//! Names are interned ([`name_id`]): those a configuration names while it is built, those a
//! parser finds (`.kv.<key>`) when it first sees them, after which finding one is a hash lookup
//! under a shared lock. A message carries only `(id, value)` pairs, in a list that stays empty
//! (and unallocated) for messages that no rule touched. Lookups in it are linear: a message
//! holds a handful of pairs, and a short scan of integers beats hashing them.

use hashbrown::HashTable;
use sluice_protocol::Text;
use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::{Arc, OnceLock, RwLock};

/// An interned name of a name-value pair.
pub type NameId = u32;

#[derive(Default)]
struct Registry {
    names: Vec<Arc<str>>,
    ids: HashMap<Arc<str>, NameId>,
}

/// How many match variables there are: `$0` to `$255`, as in syslog-ng.
pub const MATCHES: usize = 256;

fn registry() -> &'static RwLock<Registry> {
    static NAMES: OnceLock<RwLock<Registry>> = OnceLock::new();
    NAMES.get_or_init(|| {
        // The match variables take the first ids, so that `$3` is id 3.
        let mut reg = Registry::default();
        for i in 0..MATCHES {
            let name: Arc<str> = Arc::from(i.to_string());
            reg.names.push(name.clone());
            reg.ids.insert(name, i as NameId);
        }
        RwLock::new(reg)
    })
}

/// The id of match variable `$i` (`i` below [`MATCHES`]).
pub fn match_id(i: usize) -> NameId {
    debug_assert!(i < MATCHES);
    i as NameId
}

/// The id of a pair's name, registering it on first use.
pub fn name_id(name: &str) -> NameId {
    if let Some(id) = registry().read().expect("name registry lock").ids.get(name) {
        return *id;
    }
    let mut reg = registry().write().expect("name registry lock");
    if let Some(id) = reg.ids.get(name) {
        return *id;
    }
    let id = reg.names.len() as NameId;
    let name: Arc<str> = Arc::from(name);
    reg.names.push(name.clone());
    reg.ids.insert(name, id);
    id
}

/// Names a thread looked up before, by their bytes.
type Seen = HashTable<(Box<[u8]>, NameId)>;

thread_local! {
    /// Names this thread looked up before: a parser finds the same few keys in message after
    /// message, and this answers without the registry's lock or a string hash of the std kind.
    static SEEN: RefCell<Seen> = const { RefCell::new(HashTable::new()) };
}

/// The hash of names in [`SEEN`].
const SEEN_HASH: foldhash::fast::FixedState = foldhash::fast::FixedState::with_seed(0x5eed);

/// [`name_id`] for a name made of `prefix` and `key`, as parsers make them per value.
pub fn name_id_of(prefix: &[u8], key: &[u8], buf: &mut Vec<u8>) -> NameId {
    buf.clear();
    buf.extend_from_slice(prefix);
    buf.extend_from_slice(key);
    SEEN.with_borrow_mut(|seen| {
        let hash = SEEN_HASH.hash_one(&buf[..]);
        if let Some((_, id)) = seen.find(hash, |(n, _)| **n == buf[..]) {
            return *id;
        }
        let id = name_id(&String::from_utf8_lossy(buf));
        seen.insert_unique(hash, (buf[..].into(), id), |(n, _)| {
            SEEN_HASH.hash_one(&n[..])
        });
        id
    })
}

/// The name registered as `id`.
pub fn name_of(id: NameId) -> Arc<str> {
    let reg = registry().read().expect("name registry lock");
    reg.names
        .get(id as usize)
        .cloned()
        .unwrap_or_else(|| Arc::from(""))
}

/// The groups a regular expression matched, `$0` first; `None` for a group that took no part.
pub type Matches = Vec<Option<Vec<u8>>>;

/// The groups of a match, as many as there are match variables.
pub fn matches_of(groups: &regex::bytes::Captures) -> Matches {
    groups
        .iter()
        .take(MATCHES)
        .map(|g| g.map(|g| g.as_bytes().to_vec()))
        .collect()
}

/// The type of a value, as syslog-ng 3.38 keeps it beside the text: `json-parser()` sets
/// numbers, booleans, nulls, lists and JSON; template functions give their results a type.
/// The text is always there; the type matters only to `$(format-json --no-cast)`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ValueType {
    #[default]
    String,
    Int,
    Double,
    Boolean,
    Null,
    /// syslog-ng's comma-separated list ([`crate::list`]).
    List,
    /// JSON text, written as it is.
    Json,
}

/// The pairs of one message, in the order they were first set. Values are [`Text`]: spans into
/// the received frame where a parser could borrow, owned bytes otherwise.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Values(Vec<(NameId, ValueType, Text)>);

impl Values {
    /// The value last set for `name`.
    pub fn get(&self, name: NameId) -> Option<&Text> {
        self.get_typed(name).map(|(_, v)| v)
    }

    /// The value last set for `name`, with its type.
    pub fn get_typed(&self, name: NameId) -> Option<(ValueType, &Text)> {
        self.0
            .iter()
            .rev()
            .find(|(n, _, _)| *n == name)
            .map(|(_, t, v)| (*t, v))
    }

    /// Sets `name` to a string. The new value goes at the end and hides an earlier one
    /// ([`Values::get`] looks from the end), so a parser setting ten pairs does not search ten
    /// times.
    pub fn set(&mut self, name: NameId, value: Text) {
        self.set_typed(name, ValueType::String, value);
    }

    /// Sets `name` to a value of the given type.
    pub fn set_typed(&mut self, name: NameId, kind: ValueType, value: Text) {
        self.0.push((name, kind, value));
    }

    /// Unsets every match variable (`$0`…), as a regular expression that stores its groups does
    /// first.
    pub fn clear_matches(&mut self) {
        self.0.retain(|(n, _, _)| *n as usize >= MATCHES);
    }

    /// Replaces the match variables with `groups` (`$0` is the whole match).
    pub fn set_matches(&mut self, groups: Matches) {
        self.clear_matches();
        for (i, group) in groups.into_iter().enumerate() {
            if let Some(bytes) = group {
                self.set(match_id(i), Text::Owned(bytes.into_boxed_slice()));
            }
        }
    }

    /// Makes room for `n` more pairs at once (a parser about to set several).
    pub fn reserve(&mut self, n: usize) {
        self.0.reserve(n);
    }

    /// Removes `name` and returns its value.
    pub fn unset(&mut self, name: NameId) -> Option<Text> {
        let last = self.0.iter().rposition(|(n, _, _)| *n == name)?;
        let value = self.0.remove(last).2;
        self.0.retain(|(n, _, _)| *n != name);
        Some(value)
    }

    /// Whether any pair other than a match variable is set.
    pub fn has_pairs(&self) -> bool {
        self.0.iter().any(|(n, _, _)| *n as usize >= MATCHES)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// What the pairs hold on the heap (their list and the values they own), for the memory
    /// budget.
    pub fn heap_bytes(&self) -> usize {
        let owned: usize = self
            .0
            .iter()
            .map(|(_, _, v)| match v {
                Text::Owned(bytes) => bytes.len(),
                _ => 0,
            })
            .sum();
        self.0.capacity() * std::mem::size_of::<(NameId, ValueType, Text)>() + owned
    }

    /// Every name with its value, in the order names were first set.
    pub fn iter(&self) -> impl Iterator<Item = (NameId, &Text)> {
        self.iter_typed().map(|(n, _, v)| (n, v))
    }

    /// Every name with its value and type, in the order names were first set.
    pub fn iter_typed(&self) -> impl Iterator<Item = (NameId, ValueType, &Text)> {
        self.0
            .iter()
            .enumerate()
            .filter(|(i, (n, _, _))| !self.0[..*i].iter().any(|(m, _, _)| m == n))
            .map(|(_, (n, _, _))| {
                let (t, v) = self.get_typed(*n).expect("set above");
                (*n, t, v)
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_interned_and_values_replace() {
        let (a, b) = (name_id("values.test.a"), name_id("values.test.b"));
        assert_eq!(a, name_id("values.test.a"));
        assert_eq!(&*name_of(b), "values.test.b");
        let mut v = Values::default();
        v.set(a, Text::owned(b"1"));
        v.set(b, Text::owned(b"2"));
        v.set(a, Text::owned(b"3"));
        assert_eq!(v.get(a), Some(&Text::owned(b"3")));
        assert_eq!(v.iter().map(|(n, _)| n).collect::<Vec<_>>(), [a, b]);
        assert_eq!(v.unset(a), Some(Text::owned(b"3")));
        assert_eq!(v.get(a), None);
        assert!(!v.is_empty());
    }
}
