//! Name-value pairs that rewrite rules and parsers add to a message: `${.kv.user}`,
//! `${my.field}`, an `.SDATA.id.name` set by `set()`.
//!
//! Names are interned once, while the configuration is built ([`name_id`]); a message carries
//! only `(id, value)` pairs, in a list that stays empty (and unallocated) for messages that no
//! rule touched. Lookups are linear: a message holds a handful of pairs, and a short scan of
//! integers beats hashing them.

use sluice_protocol::Text;
use std::sync::{Arc, OnceLock, RwLock};

/// An interned name of a name-value pair.
pub type NameId = u32;

fn registry() -> &'static RwLock<Vec<Arc<str>>> {
    static NAMES: OnceLock<RwLock<Vec<Arc<str>>>> = OnceLock::new();
    NAMES.get_or_init(RwLock::default)
}

/// The id of a pair's name, registering it on first use. Call this while building the
/// configuration, not per message.
pub fn name_id(name: &str) -> NameId {
    let mut names = registry().write().expect("name registry lock");
    if let Some(i) = names.iter().position(|n| &**n == name) {
        return i as NameId;
    }
    names.push(Arc::from(name));
    (names.len() - 1) as NameId
}

/// The name registered as `id`.
pub fn name_of(id: NameId) -> Arc<str> {
    let names = registry().read().expect("name registry lock");
    names
        .get(id as usize)
        .cloned()
        .unwrap_or_else(|| Arc::from(""))
}

/// The pairs of one message, in the order they were first set. Values are [`Text`]: spans into
/// the received frame where a parser could borrow, owned bytes otherwise.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Values(Vec<(NameId, Text)>);

impl Values {
    pub fn get(&self, name: NameId) -> Option<&Text> {
        self.0.iter().find(|(n, _)| *n == name).map(|(_, v)| v)
    }

    /// Sets `name`, replacing its value where it was set before.
    pub fn set(&mut self, name: NameId, value: Text) {
        match self.0.iter_mut().find(|(n, _)| *n == name) {
            Some((_, v)) => *v = value,
            None => self.0.push((name, value)),
        }
    }

    /// Removes `name` and returns its value.
    pub fn unset(&mut self, name: NameId) -> Option<Text> {
        let at = self.0.iter().position(|(n, _)| *n == name)?;
        Some(self.0.remove(at).1)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = (NameId, &Text)> {
        self.0.iter().map(|(n, v)| (*n, v))
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
