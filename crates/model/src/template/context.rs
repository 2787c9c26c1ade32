//! The correlation context a template is formatted in, as syslog-ng formats the values of a
//! pattern database's rules and actions and `grouping-by()`'s aggregates: the messages of a
//! context, oldest first, the one being formatted last.
//!
//! `${name}@N` (the message N before the last), `$(context-length)`, `$(context-values)`,
//! `$(context-lookup)`, `$(grep)` and the aggregates (`$(sum)`…) read it; outside a context
//! they see the one message being formatted, as in syslog-ng. The context is set for the
//! duration of a call ([`with`]) on the calling thread, so templates and filters keep their
//! one-message signatures.

use crate::message::LogMessage;
use std::cell::Cell;
use std::ptr::NonNull;

type Messages = [&'static LogMessage<'static>];

thread_local! {
    static CONTEXT: Cell<Option<NonNull<Messages>>> = const { Cell::new(None) };
}

/// Runs `f` with `messages` as the context of every template and filter it formats.
pub fn with<R>(messages: &[&LogMessage<'_>], f: impl FnOnce() -> R) -> R {
    /// Puts back the context that was set before, however `f` ends.
    struct Restore(Option<NonNull<Messages>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            CONTEXT.set(self.0);
        }
    }
    // The lifetimes are forgotten here and given back, shortened to a call, by `read`:
    // the pointer lives in the thread-local only while `messages` is borrowed by this call.
    let erased = NonNull::from(messages).as_ptr() as *mut Messages;
    let previous = CONTEXT.replace(NonNull::new(erased));
    let _restore = Restore(previous);
    f()
}

/// `f` of the context's messages; `None` outside a context.
fn read<R>(f: impl FnOnce(Option<&[&LogMessage<'_>]>) -> R) -> R {
    match CONTEXT.get() {
        // Set by `with`, whose borrow of the messages outlives this call (see there).
        Some(p) => f(Some(unsafe { p.as_ref() })),
        None => f(None),
    }
}

/// The number of messages in the context: `$(context-length)` (1 outside a context).
pub fn len() -> usize {
    read(|c| c.map_or(1, <[_]>::len))
}

/// Calls `f` with each message of the context, oldest first; with `msg` alone outside one.
pub fn each(msg: &LogMessage, mut f: impl FnMut(&LogMessage)) {
    read(|c| match c {
        Some(messages) => messages.iter().for_each(|m| f(m)),
        None => f(msg),
    })
}

/// Calls `f` with the message `n` (≥ 1) before the last one (`${name}@N`); not at all when the
/// context has no such message, or outside a context.
pub fn earlier(n: usize, f: impl FnOnce(&LogMessage)) {
    read(|c| {
        if let Some(m) = c.and_then(|m| m.len().checked_sub(n + 1).map(|i| m[i])) {
            f(m)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::message;
    use crate::Template;

    fn format(t: &str, msg: &LogMessage) -> String {
        let mut out = Vec::new();
        Template::compile(t).unwrap().append(msg, 0, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn references_reach_earlier_messages_of_the_context_only_inside_one() {
        let first = message("<13>Jan  1 00:00:00 h a: one");
        let second = message("<13>Jan  1 00:00:01 h b: two");
        let last = message("<13>Jan  1 00:00:02 h c: three");
        // `@N` follows braces and calls only: `$MSG@0` is `$MSG` and a literal `@0`.
        let t = "${MSG}@2 ${MSG}@1 ${MSG}@0 $MSG@0 $(context-length) ${MSG}@3.";
        assert_eq!(format(t, &last), "  three three@0 1 .");
        let all = [&first, &second, &last];
        let inside = with(&all, || format(t, &last));
        assert_eq!(inside, "one two three three@0 3 .");
        // Nested contexts put back the outer one.
        let inner = with(&all, || {
            with(&all[..1], || format("$(context-length)", &first)) + &format(t, &last)
        });
        assert_eq!(inner, "1one two three three@0 3 .");
        assert_eq!(format("$(context-length)", &last), "1");
    }

    #[test]
    fn context_functions_look_at_every_message() {
        let a = message("<13>Jan  1 00:00:00 h a: 1");
        let b = message("<13>Jan  1 00:00:01 h b: 20");
        let c = message("<14>Jan  1 00:00:02 h c: 300");
        let all = [&a, &b, &c];
        let cases = [
            ("$(context-values $PROGRAM $MSG)", "a,1,b,20,c,300"),
            (
                "$(context-lookup (program(\"b\") or level(info)) $MSG)",
                "20,300",
            ),
            ("$(context-lookup --max-count 1 (level(notice)) $MSG)", "1"),
            ("$(grep (level(notice)) $PROGRAM)", "a,b"),
            (
                "$(sum $MSG) $(min $MSG) $(max $MSG) $(average $MSG)",
                "321 1 300 107",
            ),
        ];
        for (t, want) in cases {
            assert_eq!(with(&all, || format(t, &c)), want, "{t}");
        }
        assert_eq!(format("$(context-values $MSG)", &c), "300");
    }
}
