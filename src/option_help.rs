//! What each driver option does and its default, for the configuration reference
//! (`docs/reference.md`, `sluice.conf(5)`). Every option a driver's table declares as read has
//! its line here (a test fails otherwise); where an option means something else in another
//! kind of driver, the line says so.

/// (option, what it does, default) — the option as written, `-` for `_`.
pub const OPTIONS: &[(&str, &str, &str)] = &[
    ("accept-encoding", "`http()` and its kind: the compressions answers may come in (`gzip`, `deflate`, `identity`, `all`), read when they do", "none asked"),
    ("accept-redirects", "`http()` and its kind: `no` only: sluice does not follow a redirect (a 3xx answer is sent again later, as a 5xx)", "no"),
    ("aggregate", "the message a context makes when it ends: `value(NAME TEMPLATE)`, `tags()`, `inherit-mode()`", "required"),
    ("base-dir", "the directory `wildcard-file()` looks in", "required"),
    ("batch-bytes", "the most bytes a sender puts in one batch or request", "driver's"),
    ("batch-lines", "the most messages a sender puts in one batch or request", "what is queued; 100 (elasticsearch-http, opensearch)"),
    ("batch-timeout", "milliseconds a sender waits to fill a batch", "0 (send at once)"),
    ("body", "the template of an HTTP request's body for each message", "the message in syslog-ng's file format"),
    ("body-prefix", "text before the messages of an HTTP request's body", "empty"),
    ("body-suffix", "text after the messages of an HTTP request's body", "empty"),
    ("bootstrap-servers", "`kafka-c()`, `kafka()`: the brokers it first connects to, `host:port,host:port`", "required"),
    ("chain-hostnames", "`$HOST` becomes `host/relay` when a message passes this server", "no"),
    ("check-hostname", "refuses host names with characters a host name cannot have", "no"),
    ("chunk-size", "`logstore()`: a chunk is sealed once its records take this many bytes (sluice reads bytes; 4 KiB to 64 MiB)", "1048576"),
    ("chunk-time", "`logstore()`: a chunk is sealed this many seconds after its first record", "5"),
    ("close-on-input", "a `program()` destination is closed when the program writes to its output", "yes"),
    ("columns", "`csv-parser()`: the names of the columns, a pair each", "required"),
    ("compress", "`logstore()`: the zstd level, 0 (none) to 9", "3"),
    ("condition", "a rewrite rule applies only to messages this filter expression matches", "every message"),
    ("config", "`kafka-c()`, `kafka()`: librdkafka properties, `\"name\" => \"value\"` (TLS, SASL; `group.id` of a `kafka()` source)", "none; group.id sluice-SOURCE (kafka)"),
    ("content-compression", "`http()` and its kind: request bodies compressed with `gzip` or `deflate` (`identity`: as they are)", "identity"),
    ("create-dirs", "file destinations create the directories of their paths", "no"),
    ("custom-id", "`elasticsearch-http()`, `opensearch()`: the template of a document's `_id` (the cluster makes one when empty)", "none"),
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
    ("disable-bookmarks", "`kafka()`: store no offsets, so the group commits none: the next start reads from where `auto.offset.reset` says", "no"),
    ("disk-buffer", "a forwarding destination's queue on disk: `reliable()`, `disk-buf-size()`, `mem-buf-length()`, `mem-buf-size()`, `dir()`", "none: a queue in memory"),
    ("dns-cache", "keeps resolved names of senders; `no`: `dns-cache-hosts()` does not name them either", "yes"),
    ("drop-invalid", "a parser drops messages it cannot parse instead of passing them", "no"),
    ("drop-unmatched", "`db-parser()` drops messages no rule matches", "no"),
    ("encoding", "the character set of the input, converted to UTF-8", "UTF-8 (as is)"),
    ("encrypt-certificate", "`logstore()`: PEM certificates (RSA) whose keys can read the archives; several for several readers; none writes them unencrypted", "none"),
    ("exclude-pattern", "`wildcard-file()`: file names (a glob) not to follow", "none"),
    ("extract-prefix", "`json-parser()`: the part of the object (a dotted path) to take", "the whole object"),
    ("extract-stray-words-into", "`kv-parser()`: the pair that gets the words that are not `key=value`", "none"),
    ("failover", "a forwarding destination's other servers: `servers()`, `failback()`", "none"),
    ("fallback-topic", "`kafka-c()`: where a record goes whose topic the broker refuses or is no topic name", "none: dropped"),
    ("file", "`db-parser()`: the pattern database (a file or a directory of them)", "/var/lib/syslog-ng/patterndb.xml"),
    ("filename-pattern", "`wildcard-file()`: the file names (a glob) to follow", "required"),
    ("flags", "a driver's flags (sources: `no-parse`, `syslog-protocol`, `no-multi-line`, `validate-utf8`…; `regexp-parser()`: `ignore-case`…)", "none"),
    ("flush-lines", "accepted: sluice writes what a read brought in one write (docs/compatibility.md)", ""),
    ("flush-timeout", "accepted, as `flush-lines()`", ""),
    ("flush-timeout-on-reload", "`kafka-c()`: milliseconds a reload waits for the brokers to take the records in flight before the new destination produces them again", "1000"),
    ("flush-timeout-on-shutdown", "`kafka-c()`: milliseconds a stop waits for the brokers to take what sluice holds", "60000"),
    ("follow-freq", "seconds between looks at a followed file when no inotify notice comes", "1"),
    ("format", "sources: `syslog`, or `json` (each record a JSON object, docs/compatibility.md); `date-parser()`: the strptime formats tried in order", "syslog; %FT%T%z (date-parser)"),
    ("frac-digits", "digits of the fraction of a second in written timestamps", "0"),
    ("fsync", "a file destination syncs each write to disk", "no"),
    ("group", "the group of files a destination creates (and of a unix socket)", "the process's"),
    ("handshake-timeout", "seconds a TLS handshake or PROXY header may take", "10"),
    ("having", "`grouping-by()`: a filter over a context's messages; its aggregate is made only when it holds", "always"),
    ("headers", "`http()`: header lines of each request", "none"),
    ("host-override", "`$HOST` of every message of the source", "the message's"),
    ("ignore-saved-bookmarks", "`kafka()`: each partition starts where `auto.offset.reset` says the first time it is given after a start, not at the group's committed offset", "no"),
    ("index", "`elasticsearch-http()`, `opensearch()`: the template of a document's index (`logs-${YEAR}.${MONTH}.${DAY}`)", "required"),
    ("inherit-environment", "a `program()` gets sluice's environment", "yes"),
    ("inject-mode", "where a correlating parser's messages go: `pass-through`, `aggregate-only`, `internal`", "pass-through"),
    ("ip", "the address a source listens on or a destination sends to", "0.0.0.0 (sources)"),
    ("ip-protocol", "4 or 6: the family of the address", "4"),
    ("kafka-logging", "`kafka()`, `kafka-c()`: what of librdkafka's own log reaches sluice's: `disabled`, `kafka` (all of it at its severities), `trace` (all of it as debug messages)", "warnings and worse, as errors"),
    ("keep-alive", "connections and programs are kept over a reload", "yes"),
    ("keep-hostname", "`$HOST` is the header's host name rather than the sender's", "no"),
    ("keep-timestamp", "`$DATE` is the header's time rather than the time received", "yes"),
    ("key", "`grouping-by()`: the template that names a message's context; `kafka-c()`: the template of a record's key", "required; none (kafka-c)"),
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
    ("memory-limit", "`options {}`: the bytes of messages held on their way in and out, what open connections hold, counters and correlation contexts, all together (`512M`); connections take at most half (new ones are refused past it), past three quarters paths without flow control drop (`dropped_memory_limit`), no new dynamic counter is made and correlation contexts end early (`contexts_evicted`), past it sources pause", "a quarter of the machine's memory (or of the control group's limit), at least 256M"),
    ("message", "`kafka-c()`: the template of a record's value", "$ISODATE $HOST $MSGHDR$MSG"),
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
    ("persist-store", "`kafka()`: where offsets are kept: `remote` (the consumer group, committed once delivered) is the only place sluice keeps them", "remote"),
    ("poll-timeout", "`kafka-c()`: milliseconds one poll for delivery reports waits at most; `kafka()`: for records", "1000; 100 (kafka)"),
    ("port", "the port a source listens on or a destination sends to", "514 (`syslog()`: 601)"),
    ("prefix", "a parser: what the names of the pairs it sets start with", "driver's"),
    ("program-override", "`$PROGRAM` of every message of the source", "the message's"),
    ("program-template", "`db-parser()`: the program that chooses the ruleset", "$PROGRAM"),
    ("proxy", "`http()` and its kind: an HTTP proxy, `http://[user:password@]host:port`; `https://` URLs go through a tunnel it opens (`CONNECT`)", "none"),
    ("quote-pairs", "`csv-parser()`: pairs of characters that quote a column", "none"),
    ("quotes", "`csv-parser()`: characters that quote a column", "\" and '"),
    ("rate", "`udp-balancer()`, `program()`: a rate (messages, restarts) per second", "driver's"),
    ("read-old-records", "`systemd-journal()`: read what the journal held before the first start", "yes"),
    ("recursive", "`wildcard-file()`: subdirectories too", "no"),
    ("recv-time-zone", "the time zone of stamps that name none", "the machine's"),
    ("response-action", "`http()`: what a status code means (`404 => drop`, `503 => retry`)", "2xx taken, 5xx later, 4xx dropped"),
    ("retries", "times a batch is sent again before it is dropped", "3"),
    ("scope", "`grouping-by()`: which messages share a key: `process`, `program`, `host`, `global`", "global"),
    ("seal-key", "`logstore()`: the sealing key `sluice logstore keygen` made; frames are sealed forward-securely", "none (chained, not sealed)"),
    ("separated-worker-queues", "`kafka()` source: each of its `workers()` takes batches from a queue of its own, dealt to in turn (`no`: all take from one)", "no"),
    ("send-time-zone", "the time zone written stamps are in", "the message's"),
    ("so-keepalive", "TCP keepalives on connections", "no"),
    ("so-rcvbuf", "the socket's receive buffer, in bytes", "the kernel's"),
    ("so-reuseport", "SO_REUSEPORT on the listening socket", "no"),
    ("so-sndbuf", "the socket's send buffer, in bytes", "the kernel's"),
    ("sort-key", "`grouping-by()`: the order of a context's messages when it ends", "arrival"),
    ("store-metadata", "`kafka()`: messages carry `.kafka.topic`, `.kafka.partition`, `.kafka.offset` and `.kafka.key`", "yes"),
    ("strategy-hint", "`kafka()`: `assign` reads listed partitions themselves, `subscribe` their whole topics, shared by the group", "assign"),
    ("sync-send", "`kafka-c()`: one record at a time, each waiting for the broker", "no"),
    ("tags", "tags every message of the source gets", "none"),
    ("template", "how a destination writes a message (`elasticsearch-http()`: a document); a parser's input", "syslog-ng's file format; $MSG; `$(format-json --scope rfc5424 --exclude DATE --key ISODATE @timestamp=${ISODATE})`"),
    ("template-escape", "quotes and backslashes in values escaped", "no"),
    ("time-reap", "seconds an idle file destination stays open", "60"),
    ("time-reopen", "seconds before a failed connection or file is tried again", "60"),
    ("time-stamp", "`date-parser()`: the stamp it sets, `stamp` or `recvd`", "stamp"),
    ("time-zone", "the time zone of stamps read or written (`date-parser()`: of the text)", "the machine's"),
    ("timeout", "`grouping-by()`: seconds a context stays open after its last message; `http()`: seconds a server may take to answer", "required; none (http), 10 (elasticsearch-http)"),
    ("timestamp-policy", "`logstore()`: the policy OID asked of the timestamping authority", "the authority's"),
    ("timestamp-url", "`logstore()`: an RFC 3161 timestamping authority (`http://`) that stamps the chain head as chunks are sealed", "none (no timestamps)"),
    ("tls", "TLS: `key-file()`, `cert-file()`, `ca-file()`, `ca-dir()`, `peer-verify()`…", "none"),
    ("topic", "`kafka-c()`: the template of a record's topic; `kafka()`: the topics it reads (`\"logs\"`, `\"^pattern\"`, `\"logs\" => \"0,1\"` for those partitions, `\"-1\"` for all)", "required"),
    ("transport", "`tcp`, `udp`, `tls`, `proxied-tcp`, `proxied-tls`…", "tcp (`network()`)"),
    ("trigger", "`grouping-by()`: a filter over a context; when it holds the context ends at once", "none"),
    ("trim-large-messages", "a message longer than `log-msg-size()` is cut (not split)", "no"),
    ("trusted-proxies", "addresses whose PROXY headers are believed", "any"),
    ("ts-format", "the format of written timestamps: `rfc3164`, `rfc3339`, `iso`, `unix`", "rfc3164"),
    ("type", "a driver's variant (`regexp-parser()`: pcre, string, glob; a `subst()`'s); `elasticsearch-http()`: the documents' `_type` (empty: none, as Elasticsearch 7 and OpenSearch want)", "driver's; none (elasticsearch-http)"),
    ("url", "`http()`: the URLs requests go to; `elasticsearch-http()`, `opensearch()`: the nodes' `_bulk` endpoints, failed over in turn", "required"),
    ("use-dns", "resolves senders' addresses to names", "yes"),
    ("use-fqdn", "host names with their domain", "no"),
    ("user", "`http()`: basic authentication's user", "none"),
    ("user-agent", "`http()`: the User-Agent header", "sluice"),
    ("value", "a rewrite rule: the field or pair it writes", "MESSAGE"),
    ("value-separator", "`kv-parser()`: what separates a key from its value", "="),
    ("values", "a rewrite or parser's pairs (a glob of names)", "none"),
    ("where", "`grouping-by()`: only messages this filter matches are grouped", "every message"),
    ("worker-partition-key", "the template that keeps messages of a key on one worker", "none"),
    ("workers", "senders a destination runs in parallel; of a `kafka()` source, its reading thread and the tasks that parse and dispatch what it reads", "1; 4 (elasticsearch-http, opensearch); 2 (kafka() source: a thread and a task)"),
];

/// (section of the reference, the driver's first name, what it does).
pub const DRIVERS: &[(&str, &str, &str)] = &[
    ("Sources", "network", "Syslog messages over TCP, UDP or TLS: RFC3164 and RFC5424 (`syslog()`: RFC6587 framing, port 601), RELP (`relp()`)."),
    ("Sources", "unix_stream", "Messages on a unix socket (`/dev/log`): a stream or datagrams, with the sender's credentials."),
    ("Sources", "udp_balancer", "UDP on one port spread over several sockets (SO_REUSEPORT), every core reading."),
    ("Sources", "system", "This machine's messages: the journal under systemd, else `/dev/log` and `/dev/kmsg`."),
    ("Sources", "systemd_journal", "The systemd journal, its position kept across restarts."),
    ("Sources", "file", "A file followed as it grows (and after rotation), its position kept; `/dev/kmsg` as the kernel's log."),
    ("Sources", "wildcard_file", "Every file of a directory whose name matches, followed as `file()`."),
    ("Sources", "program", "The output of a program sluice runs (and runs again when it exits)."),
    ("Sources", "pipe", "A named pipe."),
    ("Sources", "stdin", "sluice's standard input; sluice stops at its end."),
    ("Sources", "internal", "sluice's own messages."),
    ("Sources", "kafka", "Records of Kafka topics, as a member of a consumer group; offsets committed once delivered."),
    ("Destinations", "logstore", "A forensic archive: lines compressed in chunks, encrypted for certificates, chained, forward-sealed and timestamped (`sluice logstore cat|grep|tail|verify|info`)."),
    ("Destinations", "file", "A file (its name a template: a file per host, per day…), created as asked, written in batches."),
    ("Destinations", "stdout", "sluice's standard output."),
    ("Destinations", "network", "A syslog server over TCP, UDP or TLS (`syslog()`: RFC5424 with octet counting), with failover and a disk buffer."),
    ("Destinations", "tcp", "A syslog server over TCP, UDP or TLS (syslog-ng's older drivers), or RELP (`relp()`)."),
    ("Destinations", "unix_stream", "A unix socket: a stream or datagrams."),
    ("Destinations", "usertty", "The terminals of a logged-in user (`*`: everyone's): written at once or dropped."),
    ("Destinations", "pipe", "A named pipe (Debian's `/dev/xconsole`), made when missing: written at once when something reads it, or dropped."),
    ("Destinations", "program", "The standard input of a program sluice runs."),
    ("Destinations", "http", "HTTP(S) requests of one or more messages each, with retries by status code."),
    ("Destinations", "elasticsearch_http", "Documents into Elasticsearch or OpenSearch (`opensearch()`) through `_bulk`, each document's result read: refused ones dropped and counted, the rest retried."),
    ("Destinations", "kafka_c", "Kafka records through librdkafka, idempotent, acknowledged once the broker has them."),
    ("Parsers", "kv_parser", "`key=value` pairs of a message into name-value pairs."),
    ("Parsers", "json_parser", "A JSON object into name-value pairs."),
    ("Parsers", "csv_parser", "Columns (separated and quoted) into name-value pairs."),
    ("Parsers", "regexp_parser", "Named groups of the first regular expression that matches into name-value pairs."),
    ("Parsers", "date_parser", "A time written in the message into its timestamp."),
    ("Parsers", "tags_parser", "A list of tags into the message's tags."),
    ("Parsers", "db_parser", "Classifies messages with a pattern database (PatternDB) and correlates them."),
    ("Parsers", "grouping_by", "Groups messages by a key into contexts and makes one message of each."),
    ("Parsers", "syslog_parser", "A syslog message written in a message (or a template) into its fields."),
    ("Rewrite rules", "set", "Sets a field or name-value pair to a template."),
    ("Rewrite rules", "unset", "Unsets fields or name-value pairs."),
    ("Rewrite rules", "rename", "Renames a name-value pair."),
    ("Rewrite rules", "subst", "Replaces what a regular expression (or a string, a glob) matches."),
    ("Rewrite rules", "set_tag", "Adds a tag."),
    ("Rewrite rules", "clear_tag", "Removes a tag."),
    ("Rewrite rules", "set_facility", "Sets the facility."),
    ("Rewrite rules", "set_severity", "Sets the severity."),
    ("Rewrite rules", "set_pri", "Sets the priority (facility and severity) from a number."),
    ("Rewrite rules", "set_matches", "Sets `$1`… from a list."),
    ("Rewrite rules", "unset_matches", "Unsets `$0`…"),
    ("Rewrite rules", "groupset", "Sets every name-value pair a glob selects to a template (`$_` the value)."),
    ("Rewrite rules", "groupunset", "Unsets every name-value pair a glob selects."),
    ("Filter functions", "facility", "Messages of these facilities."),
    ("Filter functions", "level", "Messages of these severities (a list or a range)."),
    ("Filter functions", "program", "Messages whose program (host, text) a regular expression (or string, glob) matches."),
    ("Filter functions", "match", "Messages in which a regular expression matches a template (`value()`) or the whole line."),
    ("Filter functions", "tags", "Messages with one of these tags."),
    ("Filter functions", "source", "Messages from this source statement."),
    ("Filter functions", "netmask", "Messages from senders in this IPv4 network."),
    ("Filter functions", "netmask6", "Messages from senders in this IPv6 network."),
    ("Filter functions", "in_list", "Messages whose field is a line of a file."),
    ("Filter functions", "rate_limit", "At most so many messages a second, per key."),
    ("Filter functions", "filter", "What the named filter statement matches."),
];

/// What the driver `name` of `section` does.
pub fn driver(section: &str, name: &str) -> Option<&'static str> {
    DRIVERS
        .iter()
        .find(|(s, n, _)| *s == section && *n == name)
        .map(|(_, _, what)| *what)
}

/// (template function, what it gives) — `$(name args…)`.
pub const FUNCTIONS: &[(&str, &str)] = &[
    ("echo", "its arguments, joined by spaces"),
    ("length", "the length in bytes of each argument"),
    ("substr", "`$(substr TEXT START [LENGTH])`: part of the text (negative: from the end)"),
    ("strip", "the arguments without leading and trailing white space"),
    ("sanitize", "the arguments with `/` and control characters replaced (`--ctrl-chars`, `--invalid-chars`, `--replacement`)"),
    ("lowercase", "the arguments in lower case"),
    ("uppercase", "the arguments in upper case"),
    ("indent-multi-line", "the text with a tab after each line end"),
    ("replace-delimiter", "`$(replace-delimiter CHARS NEW TEXT)`: each of CHARS replaced by NEW"),
    ("if", "`$(if (FILTER) THEN ELSE)`"),
    ("or", "the first argument that is not empty"),
    ("+", "the sum of two numbers"),
    ("-", "the difference of two numbers"),
    ("*", "the product of two numbers"),
    ("/", "the quotient of two numbers"),
    ("%", "the remainder of two numbers"),
    ("format-json", "name-value pairs as a JSON object (`--scope`, `--key`, `--exclude`, `--pair`, `--rekey`…)"),
    ("padding", "`$(padding TEXT WIDTH [PATTERN])`: the text padded on the left to WIDTH"),
    ("url-encode", "the arguments URL-encoded"),
    ("url-decode", "the arguments URL-decoded"),
    ("env", "the value of an environment variable"),
    ("ipv4-to-int", "an IPv4 address as a number"),
    ("dirname", "the directory part of a path"),
    ("basename", "the file part of a path"),
    ("round", "a number rounded (`$(round N [DIGITS])`)"),
    ("ceil", "a number rounded up"),
    ("floor", "a number rounded down"),
    ("hash", "a digest of the arguments (sha256 by default; `--length`)"),
    ("md5", "the MD5 digest of the arguments, in hex"),
    ("sha1", "the SHA-1 digest of the arguments, in hex"),
    ("sha256", "the SHA-256 digest of the arguments, in hex"),
    ("sha512", "the SHA-512 digest of the arguments, in hex"),
    ("base64-encode", "the arguments in base64"),
    ("format-flat-json", "name-value pairs as a flat JSON object (dotted names)"),
    ("list-concat", "the lists (comma-separated) joined into one"),
    ("list-append", "the first list with the other arguments added"),
    ("list-count", "the number of items in the lists"),
    ("list-head", "the first item of the lists"),
    ("list-nth", "`$(list-nth N LIST…)`: the Nth item"),
    ("list-tail", "the lists without their first item"),
    ("list-slice", "`$(list-slice FROM:TO LIST…)`: a part of the list"),
    ("explode", "`$(explode SEPARATOR TEXT…)`: the text cut into a list"),
    ("implode", "`$(implode SEPARATOR LIST…)`: the list joined with the separator"),
    ("uuid", "a random UUID"),
    ("sum", "the sum of the argument over the messages of a correlation context"),
    ("min", "the smallest value of the argument over a context"),
    ("max", "the largest value of the argument over a context"),
    ("average", "the average of the argument over a context (an integer)"),
    ("template", "the template statement the argument names"),
    ("format-welf", "name-value pairs in the WebTrends format (`name=value …`)"),
    ("names", "the names of the selected name-value pairs, as a list"),
    ("values", "the values of the selected name-value pairs, as a list"),
    ("grep", "`$(grep [--max-count N] (FILTER) TEMPLATE…)`: the templates for each message of a context the filter matches"),
    ("map", "`$(map TEMPLATE LIST)`: the template for each item (`$_`), as a list"),
    ("filter", "`$(filter (FILTER) LIST)`: the items (`$_`) the filter matches"),
    ("iterate", "`$(iterate TEMPLATE INITIAL)`: the initial value, then the template of the previous one, one step per message"),
    ("list-search", "`$(list-search [--mode M] [--start-index N] PATTERN LIST…)`: the index of the first matching item"),
    ("format-date", "`$(format-date [--time-zone TZ] FORMAT [TIMESTAMP])`: a time with strftime"),
    ("context-length", "the number of messages in the correlation context (1 outside one)"),
    ("context-lookup", "`$(context-lookup [--max-count N] (FILTER) TEMPLATE…)`: as `$(grep)`, as a list"),
    ("context-values", "the templates for each message of the context, as a list"),
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
        let mut missing = Vec::new();
        let sections = crate::reference::sections();
        for entry in sections.iter().flat_map(|(_, entries)| entries) {
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

    #[test]
    fn every_driver_says_what_it_does() {
        let mut missing = Vec::new();
        for (section, entries) in crate::reference::sections() {
            for entry in entries {
                if super::driver(section, entry.names[0]).is_none() {
                    missing.push(format!("{section}: {}", entry.names[0]));
                }
            }
        }
        assert!(
            missing.is_empty(),
            "drivers without a line in DRIVERS: {missing:?}"
        );
    }

    #[test]
    fn every_template_function_says_what_it_gives() {
        let missing: Vec<&str> = sluice_model::template::functions::names()
            .iter()
            .copied()
            .filter(|f| !super::FUNCTIONS.iter().any(|(name, _)| name == f))
            .collect();
        assert!(
            missing.is_empty(),
            "functions without a line in FUNCTIONS: {missing:?}"
        );
    }
}
