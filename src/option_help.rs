//! What each driver option does and its default, for the configuration reference
//! (`docs/reference.md`, `sluice.conf(5)`). Every option a driver's table declares as read has
//! its line here (a test fails otherwise); where an option means something else in another
//! kind of driver, the line says so.

/// (option, what it does, default) — the option as written, `-` for `_`.
pub const OPTIONS: &[(&str, &str, &str)] = &[
    ("aggregate", "the message a context makes when it ends: `value(NAME TEMPLATE)`, `tags()`, `inherit-mode()`", "required"),
    ("base-dir", "the directory `wildcard-file()` looks in", "required"),
    ("batch-bytes", "the most bytes a sender puts in one batch or request", "driver's"),
    ("batch-lines", "the most messages a sender puts in one batch or request", "what is queued"),
    ("batch-timeout", "milliseconds a sender waits to fill a batch", "0 (send at once)"),
    ("body", "the template of an HTTP request's body for each message", "the message in syslog-ng's file format"),
    ("body-prefix", "text before the messages of an HTTP request's body", "empty"),
    ("body-suffix", "text after the messages of an HTTP request's body", "empty"),
    ("chain-hostnames", "`$HOST` becomes `host/relay` when a message passes this server", "no"),
    ("check-hostname", "refuses host names with characters a host name cannot have", "no"),
    ("close-on-input", "a `program()` destination is closed when the program writes to its output", "yes"),
    ("columns", "`csv-parser()`: the names of the columns, a pair each", "required"),
    ("condition", "a rewrite rule applies only to messages this filter expression matches", "every message"),
    ("create-dirs", "file destinations create the directories of their paths", "no"),
    ("default-facility", "the facility of messages whose header has none", "user"),
    ("default-level", "the severity of messages whose header has none (syslog-ng's older name)", "notice"),
    ("default-priority", "the severity of messages whose header has none", "notice"),
    ("default-severity", "the severity of messages whose header has none", "notice"),
    ("delimiter", "`kv-parser()`'s pair separator in syslog-ng's older name; `$(explode)`'s", "driver's"),
    ("delimiters", "`csv-parser()`: the characters (`chars()`) or strings (`strings()`) that end a column", "space"),
    ("destport", "the port a forwarding destination sends to (`port()` too)", "514 (`syslog()`: 601)"),
    ("dialect", "`csv-parser()`: how quotes inside a column are escaped", "escape-none"),
    ("dir-group", "the group of directories a file destination creates", "the process's"),
    ("dir-owner", "the owner of directories a file destination creates", "the process's"),
    ("dir-perm", "the mode of directories a file destination creates", "0700"),
    ("disk-buffer", "a forwarding destination's queue on disk: `reliable()`, `disk-buf-size()`, `mem-buf-length()`, `mem-buf-size()`, `dir()`", "none: a queue in memory"),
    ("dns-cache", "keeps resolved names of senders", "yes"),
    ("drop-invalid", "a parser drops messages it cannot parse instead of passing them", "no"),
    ("drop-unmatched", "`db-parser()` drops messages no rule matches", "no"),
    ("encoding", "the character set of the input, converted to UTF-8", "UTF-8 (as is)"),
    ("exclude-pattern", "`wildcard-file()`: file names (a glob) not to follow", "none"),
    ("extract-prefix", "`json-parser()`: the part of the object (a dotted path) to take", "the whole object"),
    ("extract-stray-words-into", "`kv-parser()`: the pair that gets the words that are not `key=value`", "none"),
    ("failover", "a forwarding destination's other servers: `servers()`, `failback()`", "none"),
    ("file", "`db-parser()`: the pattern database (a file or a directory of them)", "/var/lib/syslog-ng/patterndb.xml"),
    ("filename-pattern", "`wildcard-file()`: the file names (a glob) to follow", "required"),
    ("flags", "a driver's flags (sources: `no-parse`, `syslog-protocol`, `no-multi-line`, `validate-utf8`…; `regexp-parser()`: `ignore-case`…)", "none"),
    ("flush-lines", "accepted: sluice writes what a read brought in one write (docs/compatibility.md)", ""),
    ("flush-timeout", "accepted, as `flush-lines()`", ""),
    ("follow-freq", "seconds between looks at a followed file when no inotify notice comes", "1"),
    ("format", "`date-parser()`: the strptime formats tried in order", "%FT%T%z"),
    ("frac-digits", "digits of the fraction of a second in written timestamps", "0"),
    ("fsync", "a file destination syncs each write to disk", "no"),
    ("group", "the group of files a destination creates (and of a unix socket)", "the process's"),
    ("handshake-timeout", "seconds a TLS handshake or PROXY header may take", "10"),
    ("having", "`grouping-by()`: a filter over a context's messages; its aggregate is made only when it holds", "always"),
    ("headers", "`http()`: header lines of each request", "none"),
    ("host-override", "`$HOST` of every message of the source", "the message's"),
    ("inherit-environment", "a `program()` gets sluice's environment", "yes"),
    ("inject-mode", "where a correlating parser's messages go: `pass-through`, `aggregate-only`, `internal`", "pass-through"),
    ("ip", "the address a source listens on or a destination sends to", "0.0.0.0 (sources)"),
    ("ip-protocol", "4 or 6: the family of the address", "4"),
    ("keep-alive", "connections and programs are kept over a reload", "yes"),
    ("keep-hostname", "`$HOST` is the header's host name rather than the sender's", "no"),
    ("keep-timestamp", "`$DATE` is the header's time rather than the time received", "yes"),
    ("key", "`grouping-by()`: the template that names a message's context", "required"),
    ("key-delimiter", "`json-parser()`: what joins the names of nested members", "."),
    ("listen-backlog", "the kernel's queue of connections waiting to be accepted", "4096"),
    ("listeners", "`udp-balancer()`: sockets sharing the port", "one per core"),
    ("localip", "the address a destination sends from", "any"),
    ("localport", "the port a destination sends from", "any"),
    ("log-fetch-limit", "accepted: a reader takes what one read brings", "10"),
    ("log-fifo-size", "messages a destination queues in memory on paths without flow control", "10000"),
    ("log-iw-size", "a source's window: messages in flight before it stops reading", "100"),
    ("log-msg-size", "the longest message read; longer ones are cut or split", "65536"),
    ("marker", "`json-parser()`: the text before the JSON (`@cee:`)", "none"),
    ("match-boot", "`systemd-journal()`: only entries of this boot", "no"),
    ("matches", "`systemd-journal()`: fields an entry must have (`\"FIELD\" => \"value\"`)", "none"),
    ("max-connections", "connections a source accepts at once", "10 (unix sockets: 256)"),
    ("max-contexts", "correlation contexts a parser keeps open; past it the one nearest its end ends early", "1000000"),
    ("max-field-size", "`systemd-journal()`: bytes of a field kept", "65536"),
    ("max-files", "`wildcard-file()`: files followed at once", "100"),
    ("message-template", "`db-parser()`: the text to classify", "$MSG"),
    ("method", "`http()`: the request method", "POST"),
    ("monitor-method", "`wildcard-file()`: inotify or poll", "auto"),
    ("multi-line-garbage", "`multi-line-mode(prefix-garbage)`: what is not part of a record", "none"),
    ("multi-line-mode", "how lines join into records: `indented`, `regexp`, `prefix-garbage`, `prefix-suffix`", "none"),
    ("multi-line-prefix", "the regular expression that starts a record", "none"),
    ("multi-line-suffix", "the regular expression that ends a record", "none"),
    ("multi-line-timeout", "seconds the last record waits for the line that ends it", "10"),
    ("namespace", "`systemd-journal()`: the journal namespace (`*` all, `+name` with the default)", "the default"),
    ("normalize-hostnames", "host names in lower case", "no"),
    ("null", "`csv-parser()`: the column text that means no value", "none"),
    ("optional", "a source that cannot open its file or device is said and left out", "no"),
    ("owner", "the owner of files a destination creates (and of a unix socket)", "the process's"),
    ("pad-size", "records of this many bytes instead of lines", "0 (lines)"),
    ("pair-separator", "`kv-parser()`: what separates pairs", "space"),
    ("pass-unix-credentials", "unix sockets take the sender's pid, uid and gid", "yes"),
    ("password", "`http()`: basic authentication's password", "none"),
    ("patterns", "`regexp-parser()`: regular expressions tried in order, named groups set pairs", "required"),
    ("perm", "the mode of files a destination creates (and of a unix socket)", "0600 (sockets: 0666)"),
    ("persist-name", "the name a driver keeps its state under, instead of one made from its options", "made"),
    ("port", "the port a source listens on or a destination sends to", "514 (`syslog()`: 601)"),
    ("prefix", "a parser: what the names of the pairs it sets start with", "driver's"),
    ("program-override", "`$PROGRAM` of every message of the source", "the message's"),
    ("program-template", "`db-parser()`: the program that chooses the ruleset", "$PROGRAM"),
    ("quote-pairs", "`csv-parser()`: pairs of characters that quote a column", "none"),
    ("quotes", "`csv-parser()`: characters that quote a column", "\" and '"),
    ("rate", "`udp-balancer()`, `program()`: a rate (messages, restarts) per second", "driver's"),
    ("read-old-records", "`systemd-journal()`: read what the journal held before the first start", "yes"),
    ("recursive", "`wildcard-file()`: subdirectories too", "no"),
    ("recv-time-zone", "the time zone of stamps that name none", "the machine's"),
    ("response-action", "`http()`: what a status code means (`404 => drop`, `503 => retry`)", "2xx taken, 5xx later, 4xx dropped"),
    ("retries", "times a batch is sent again before it is dropped", "3"),
    ("scope", "`grouping-by()`: which messages share a key: `process`, `program`, `host`, `global`", "global"),
    ("send-time-zone", "the time zone written stamps are in", "the message's"),
    ("so-keepalive", "TCP keepalives on connections", "no"),
    ("so-rcvbuf", "the socket's receive buffer, in bytes", "the kernel's"),
    ("so-reuseport", "SO_REUSEPORT on the listening socket", "no"),
    ("so-sndbuf", "the socket's send buffer, in bytes", "the kernel's"),
    ("sort-key", "`grouping-by()`: the order of a context's messages when it ends", "arrival"),
    ("tags", "tags every message of the source gets", "none"),
    ("template", "how a destination writes a message; a parser's input", "syslog-ng's file format; $MSG"),
    ("template-escape", "quotes and backslashes in values escaped", "no"),
    ("time-reap", "seconds an idle file destination stays open", "60"),
    ("time-reopen", "seconds before a failed connection or file is tried again", "60"),
    ("time-stamp", "`date-parser()`: the stamp it sets, `stamp` or `recvd`", "stamp"),
    ("time-zone", "the time zone of stamps read or written (`date-parser()`: of the text)", "the machine's"),
    ("timeout", "`grouping-by()`: seconds a context stays open after its last message", "required"),
    ("tls", "TLS: `key-file()`, `cert-file()`, `ca-file()`, `ca-dir()`, `peer-verify()`…", "none"),
    ("transport", "`tcp`, `udp`, `tls`, `proxied-tcp`, `proxied-tls`…", "tcp (`network()`)"),
    ("trigger", "`grouping-by()`: a filter over a context; when it holds the context ends at once", "none"),
    ("trim-large-messages", "a message longer than `log-msg-size()` is cut (not split)", "no"),
    ("trusted-proxies", "addresses whose PROXY headers are believed", "any"),
    ("ts-format", "the format of written timestamps: `rfc3164`, `rfc3339`, `iso`, `unix`", "rfc3164"),
    ("type", "a driver's variant (`regexp-parser()`: pcre, string, glob; a `subst()`'s)", "driver's"),
    ("url", "`http()`: the URLs requests go to", "required"),
    ("use-dns", "resolves senders' addresses to names", "yes"),
    ("use-fqdn", "host names with their domain", "no"),
    ("user", "`http()`: basic authentication's user", "none"),
    ("user-agent", "`http()`: the User-Agent header", "sluice"),
    ("value", "a rewrite rule: the field or pair it writes", "MESSAGE"),
    ("value-separator", "`kv-parser()`: what separates a key from its value", "="),
    ("values", "a rewrite or parser's pairs (a glob of names)", "none"),
    ("where", "`grouping-by()`: only messages this filter matches are grouped", "every message"),
    ("worker-partition-key", "the template that keeps messages of a key on one worker", "none"),
    ("workers", "senders a destination runs in parallel", "1"),
];

/// What `option` does and its default.
pub fn of(option: &str) -> Option<(&'static str, &'static str)> {
    OPTIONS
        .iter()
        .find(|(name, _, _)| *name == option)
        .map(|(_, what, default)| (*what, *default))
}

#[cfg(test)]
mod tests {
    use sluice_config::declared::Support;

    /// Every option a driver reads has its line: a new option cannot reach the reference
    /// without saying what it does.
    #[test]
    fn every_option_read_says_what_it_does() {
        let entries = [
            sluice_engine::sources::drivers::reference(),
            sluice_engine::destinations::drivers::reference(),
            sluice_model::parsers::reference(),
            sluice_model::rewrite::reference(),
            sluice_model::filter::reference(),
        ];
        let mut missing = Vec::new();
        for entry in entries.iter().flatten() {
            for option in entry.options.iter().flat_map(|part| part.iter()) {
                let name = option.name.replace('_', "-");
                if option.support == Support::Read && super::of(&name).is_none() {
                    missing.push(format!("{name} ({})", entry.names[0]));
                }
            }
        }
        missing.sort();
        missing.dedup();
        assert!(
            missing.is_empty(),
            "options without a line in OPTIONS: {missing:?}"
        );
    }
}
