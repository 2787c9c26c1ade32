//! Differential tests: one configuration and one input through syslog-ng 3.38 (Debian's
//! `syslog-ng-core`) and through sluice; the files they write must be identical.
//!
//! Inputs are the project's own tricky lines (`tests/data/tricky-*.log`, from syslog-ng's
//! parser tests and real-world breakage) and, when `../shared/corpus` is present, the loghub
//! corpora. Deliberate differences are not exercised here; they are listed and unit-tested
//! (see `docs/compatibility.md`).

mod common;

use common::{diff_trees, free_port, send_tcp, syslog_ng, Framing, Running, Server};

/// Replaces receive times — the times of lines that carry no timestamp of their own — with
/// `<now>` in both outputs: every second from `from` to `to` (the span of both runs, padded),
/// in each format a date macro or the default file format prints, with any fraction after it.
fn mask_receive_times(
    files: &mut std::collections::BTreeMap<String, Vec<u8>>,
    from: jiff::Timestamp,
    to: jiff::Timestamp,
) {
    // The zones the tests show times in.
    let zones = [
        jiff::tz::TimeZone::system(),
        jiff::tz::TimeZone::get("Asia/Tokyo").expect("tz database"),
        jiff::tz::TimeZone::get("America/New_York").expect("tz database"),
        jiff::tz::TimeZone::fixed(
            jiff::tz::Offset::from_seconds(5 * 3600 + 1800).expect("valid offset"),
        ),
    ];
    let formats = [
        "%b %e %H:%M:%S",
        "%Y-%m-%dT%H:%M:%S",
        "%Y-%m-%d %H:%M:%S",
        "%Y %b %e %H:%M:%S",
    ];
    let mut alternatives = Vec::new();
    let mut t = from - jiff::SignedDuration::from_secs(2);
    while t <= to + jiff::SignedDuration::from_secs(2) {
        for zone in &zones {
            let z = t.to_zoned(zone.clone());
            for format in formats {
                alternatives.push(regex::escape(&z.strftime(format).to_string()));
            }
        }
        alternatives.push(t.as_second().to_string());
        t += jiff::SignedDuration::from_secs(1);
    }
    let re = regex::bytes::Regex::new(&format!("(?:{})(?:\\.\\d+)?", alternatives.join("|")))
        .expect("valid pattern");
    for bytes in files.values_mut() {
        *bytes = re.replace_all(bytes, &b"<now>"[..]).into_owned();
    }
}

/// Replaces a server's own process id, which it writes into the texts it makes for
/// unparseable input (`syslog-ng[PID]`, `syslog-ng PID` in RFC5424, `syslog-ng|PID` or `/PID` in
/// templates, and in the JSON the format-json tests write for it), with `<pid>`. Only those
/// places: a message of the corpus may carry the same number as its own pid.
fn mask_pid(files: &mut std::collections::BTreeMap<String, Vec<u8>>, pid: u32) {
    let re = regex::bytes::Regex::new(&format!(
        r#"(syslog-ng[\[| /]|"PROGRAM":"syslog-ng",("PRIORITY":"[a-z]+",)?"PID":"|"prog":"syslog-ng","pid":){pid}\b"#
    ))
        .expect("valid pattern");
    for bytes in files.values_mut() {
        *bytes = re.replace_all(bytes, &b"${1}<pid>"[..]).into_owned();
    }
}

/// docs/compatibility.md: syslog-ng 3.38 replaces an RFC3164 line with a malformed `<PRI>` by
/// `Error processing log message: <line>`; sluice keeps the line as the message.
fn keep_lines_with_invalid_pri(files: &mut std::collections::BTreeMap<String, Vec<u8>>) {
    let re = regex::bytes::Regex::new("Error processing log message: <").expect("valid pattern");
    for bytes in files.values_mut() {
        *bytes = re.replace_all(bytes, &b"<"[..]).into_owned();
    }
}

/// Windows and queues larger than any input, so that neither server drops or waits: this
/// compares parsing and routing, not flow control. syslog-ng 3.38 takes `log-iw-size()` only
/// per source, so [`WINDOW`] goes next to every `port(@PORT@)`.
const WINDOWS: &str = "options { log-fifo-size(10000000); };";
const WINDOW: &str = "port(@PORT@) log-iw-size(10000000)";

/// Which input a case reads.
#[derive(Clone, Copy)]
enum Input {
    Rfc3164,
    Rfc5424,
    /// RFC3164 lines whose message is `key=value` pairs.
    KeyValue,
    /// RFC3164 lines whose message is JSON.
    Json,
    /// RFC3164 lines whose message is delimited columns (the corpus: words).
    Csv,
}

fn inputs(input: Input) -> Vec<(String, Vec<u8>)> {
    let (tricky, corpus) = match input {
        Input::Rfc3164 => ("tricky-rfc3164.log", "loghub-rfc3164.log"),
        Input::Rfc5424 => ("tricky-rfc5424.log", "loghub-rfc5424.log"),
        Input::KeyValue => ("tricky-kv.log", "loghub-kv.log"),
        Input::Json => ("tricky-json.log", "loghub-json.log"),
        Input::Csv => ("tricky-csv.log", "loghub-rfc3164.log"),
    };
    let mut v = vec![(
        tricky.to_string(),
        std::fs::read(common::data(tricky)).expect("tricky input"),
    )];
    if let Some(p) = common::corpus(corpus) {
        v.push((corpus.to_string(), std::fs::read(p).expect("corpus")));
    }
    v
}

/// A documented deliberate difference, applied to syslog-ng's output before comparing.
type Deliberate = fn(&mut std::collections::BTreeMap<String, Vec<u8>>);

/// Runs `config` (with `@PORT@` and `@OUT@`) over `input` through both servers and compares.
fn differential(name: &str, config: &str, input: Input, framing: Framing) {
    differential_except(name, config, input, framing, None)
}

/// As [`differential`], with syslog-ng's output first rewritten as `deliberate` says.
fn differential_except(
    name: &str,
    config: &str,
    input: Input,
    framing: Framing,
    deliberate: Option<Deliberate>,
) {
    run_both(name, config, input, Via::Tcp(framing), deliberate)
}

/// How the input reaches the servers.
#[derive(Clone, Copy)]
enum Via {
    Tcp(Framing),
    /// `unix-stream("@DIR@/log.sock")`, newline framing.
    Unix,
    /// `stdin()`: the server reads the input to its end and stops by itself.
    Stdin,
}

/// Runs `config` over `input` through syslog-ng and sluice, delivered `via`, and compares.
fn run_both(name: &str, config: &str, input: Input, via: Via, deliberate: Option<Deliberate>) {
    run_both_masked(name, config, input, via, deliberate, None)
}

/// As [`run_both`], with both outputs first rewritten as `mask` says (a deliberate
/// difference that shows in what sluice writes).
fn run_both_masked(
    name: &str,
    config: &str,
    input: Input,
    via: Via,
    deliberate: Option<Deliberate>,
    mask: Option<Deliberate>,
) {
    if syslog_ng().is_none() {
        return;
    }
    for (input_name, bytes) in inputs(input) {
        let mut outputs = Vec::new();
        let started = jiff::Timestamp::now();
        for kind in [Server::SyslogNg, Server::Sluice] {
            let port = free_port();
            let text = format!(
                "@version: 3.38\n{WINDOWS}\n{}",
                config
                    .replace("port(@PORT@)", WINDOW)
                    .replace("@PORT@", &port.to_string())
            );
            let stdin = matches!(via, Via::Stdin).then_some(&bytes[..]);
            let mut server = Running::start_reading(kind, &text, stdin);
            match via {
                Via::Stdin => server.wait_exit(),
                Via::Tcp(framing) => {
                    server.wait_tcp(port);
                    send_tcp(port, &bytes, framing);
                }
                Via::Unix => {
                    let sock = server.dir.path().join("log.sock");
                    server.wait_unix(&sock);
                    common::send_unix(&sock, &bytes);
                }
            }
            // sluice is given until it wrote something when syslog-ng did.
            let some = outputs.first().map_or(0, |o: &common::Output| {
                u64::from(o.files.values().any(|f| !f.is_empty()))
            });
            outputs.push(server.settle_and_stop_after(some));
        }
        let ended = jiff::Timestamp::now();
        // Each server's pid is masked in both outputs: a corpus line from a process
        // `syslog-ng[N]` is masked alike in both when a server happens to run as pid N.
        let pids: Vec<u32> = outputs.iter().map(|o| o.pid).collect();
        for o in &mut outputs {
            mask_receive_times(&mut o.files, started, ended);
            for &pid in &pids {
                mask_pid(&mut o.files, pid);
            }
        }
        if let Some(rewrite) = deliberate {
            rewrite(&mut outputs[0].files);
        }
        if let Some(rewrite) = mask {
            outputs.iter_mut().for_each(|o| rewrite(&mut o.files));
        }
        let (ng, us) = (&outputs[0], &outputs[1]);
        assert!(
            !ng.files.is_empty(),
            "{name}/{input_name}: syslog-ng wrote nothing:\n{}",
            ng.stderr
        );
        let report = diff_trees(&ng.files, &us.files, "syslog-ng", "sluice");
        assert!(
            report.is_empty(),
            "{name} over {input_name} differs:\n{report}\nsluice stderr:\n{}",
            us.stderr
        );
    }
}

/// How an input is sent unless a test says otherwise: RFC5424 octet-counted, the rest by lines.
fn usual_framing(input: Input) -> Framing {
    match input {
        Input::Rfc5424 => Framing::OctetCounted,
        _ => Framing::Newline,
    }
}

fn bsd(name: &str, config: &str) {
    differential(name, config, Input::Rfc3164, Framing::Newline);
}

fn ietf(name: &str, config: &str) {
    differential(name, config, Input::Rfc5424, Framing::OctetCounted);
}

const NET: &str = "source s { network(ip(127.0.0.1) port(@PORT@)); };";
const SYSLOG: &str = "source s { syslog(ip(127.0.0.1) port(@PORT@) transport(tcp)); };";

#[test]
fn default_file_format() {
    bsd(
        "default_file_format",
        &format!(
            r#"{NET} destination d {{ file("@OUT@/all.log"); }}; log {{ source(s); destination(d); }};"#
        ),
    );
}

/// `options { file-template() }` formats the files that have no `template()` of their own;
/// the global `mark-freq()` with syslog-ng 3.38's `mark-mode(internal)` adds nothing.
#[test]
fn global_file_template() {
    bsd(
        "file_template",
        &format!(
            r#"template t_file {{ template("$PROGRAM|$PID|$MSG\n"); }};
            options {{ keep-hostname(yes); file-template(t_file); mark-freq(3600); mark-mode(internal); }}; {NET}
            destination plain {{ file("@OUT@/plain.log"); }};
            destination own {{ file("@OUT@/own.log" template("$HOST $MSG\n")); }};
            log {{ source(s); destination(plain); destination(own); }};"#
        ),
    );
}

/// `dns-cache-hosts()` names the sender from a hosts file, the first label of its first name
/// with `use-fqdn(no)`, lower case with `normalize-hostnames(yes)`.
#[test]
fn names_from_a_hosts_file() {
    let hosts = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/hosts");
    bsd(
        "dns_cache_hosts",
        &format!(
            r#"options {{ use-dns(yes); use-fqdn(no); normalize-hostnames(yes); dns-cache-hosts("{hosts}"); }}; {NET}
            destination d {{ file("@OUT@/h.log" template("$HOST_FROM|$HOST|$MSG\n")); }};
            log {{ source(s); destination(d); }};"#
        ),
    );
}

#[test]
fn keep_hostname_and_per_host_files() {
    bsd(
        "per_host",
        &format!(
            // Host and date apart: their product is some 20,000 files over the corpus, more than
            // syslog-ng can keep open (it drops what it cannot open; sluice closes and reopens).
            r#"options {{ keep-hostname(yes); }}; {NET}
            destination by_host {{ file("@OUT@/hosts/${{HOST}}.log" create-dirs(yes)); }};
            destination by_day {{ file("@OUT@/days/${{YEAR}}/${{MONTH}}${{DAY}}.log" create-dirs(yes)); }};
            log {{ source(s); destination(by_host); destination(by_day); }};"#
        ),
    );
}

#[test]
fn header_macros() {
    bsd(
        "header_macros",
        &format!(
            r#"options {{ keep-hostname(yes); }}; {NET}
            destination d {{ file("@OUT@/m.log" template("$PRI $FACILITY $FACILITY_NUM $LEVEL $LEVEL_NUM $PRIORITY $SEVERITY $TAG $BSDTAG|$HOST|$HOST_FROM|$FULLHOST|$PROGRAM|$PID|$MSGHDR|$LEGACY_MSGHDR|$MSG|$MESSAGE|$SOURCEIP|$SDATA|$MSGID|$LOGHOST|$SEQNUM|$DESTIP|$PROTO\n")); }};
            log {{ source(s); destination(d); }};"#
        ),
    );
}

#[test]
fn date_macros() {
    bsd(
        "date_macros",
        &format!(
            r#"options {{ keep-hostname(yes); }}; {NET}
            destination d {{ file("@OUT@/d.log" template("$ISODATE|$DATE|$FULLDATE|$STAMP|$UNIXTIME|$YEAR-$MONTH-$DAY $HOUR:$MIN:$SEC.$MSEC|$WEEKDAY $WEEK_DAY $WEEK_DAY_ABBREV $WEEK_DAY_NAME|$MONTH_NAME $MONTH_ABBREV $MONTH_WEEK|$YEAR_DAY $WEEK $ISOWEEK|$HOUR12 $AMPM|$TZOFFSET $TZ|$S_ISODATE $S_YEAR|$C_YEAR\n")); }};
            log {{ source(s); destination(d); }};"#
        ),
    );
}

#[test]
fn timestamp_formats_and_zones() {
    bsd(
        "ts_formats",
        &format!(
            r#"options {{ keep-hostname(yes); }}; {NET}
            destination iso {{ file("@OUT@/iso.log" ts-format(iso) frac-digits(3)); }};
            destination full {{ file("@OUT@/full.log" ts-format(full) time-zone("+05:30")); }};
            destination unix {{ file("@OUT@/unix.log" ts-format(unix) frac-digits(6)); }};
            destination zoned {{ file("@OUT@/zoned.log" template("$ISODATE $STAMP\n") time-zone("America/New_York")); }};
            log {{ source(s); destination(iso); destination(full); destination(unix); destination(zoned); }};"#
        ),
    );
}

#[test]
fn source_time_zone_for_stamps_without_one() {
    bsd(
        "recv_time_zone",
        r#"source s { network(ip(127.0.0.1) port(@PORT@) time-zone("Asia/Tokyo") keep-hostname(yes)); };
        destination d { file("@OUT@/tz.log" template("$ISODATE $UNIXTIME $HOST $MSG\n")); };
        log { source(s); destination(d); };"#,
    );
}

#[test]
fn rfc5424_with_structured_data() {
    ietf(
        "rfc5424",
        &format!(
            r#"options {{ keep-hostname(yes); }}; {SYSLOG}
            destination plain {{ file("@OUT@/plain.log"); }};
            destination sd {{ file("@OUT@/sd.log" template("$ISODATE|$HOST|$PROGRAM|$PID|$MSGID|$SDATA|${{.SDATA.exampleSDID@0.iut}}|${{.SDATA.origin.ip}}|${{.SDATA.meta.sequenceId}}|$MSG\n")); }};
            destination proto {{ file("@OUT@/proto.log" flags(syslog-protocol)); }};
            log {{ source(s); destination(plain); destination(sd); destination(proto); }};"#
        ),
    );
}

#[test]
fn syslog_protocol_flag_on_network() {
    differential(
        "syslog_protocol_flag",
        r#"source s { network(ip(127.0.0.1) port(@PORT@) flags(syslog-protocol) keep-hostname(yes)); };
        destination d { file("@OUT@/p.log" template("$HOST|$PROGRAM|$PID|$MSGID|$SDATA|$MSG\n")); };
        log { source(s); destination(d); };"#,
        Input::Rfc5424,
        Framing::Newline,
    );
}

#[test]
fn flag_no_parse() {
    bsd(
        "no_parse",
        r#"source s { network(ip(127.0.0.1) port(@PORT@) flags(no-parse)); };
        destination d { file("@OUT@/n.log" template("$PRI|$HOST|$PROGRAM|$MSG\n")); };
        log { source(s); destination(d); };"#,
    );
}

#[test]
fn flag_no_hostname() {
    bsd(
        "no_hostname",
        r#"source s { network(ip(127.0.0.1) port(@PORT@) flags(no-hostname) keep-hostname(yes)); };
        destination d { file("@OUT@/n.log" template("$HOST|$PROGRAM|$PID|$MSG\n")); };
        log { source(s); destination(d); };"#,
    );
}

#[test]
fn flag_check_hostname() {
    bsd(
        "check_hostname",
        r#"source s { network(ip(127.0.0.1) port(@PORT@) flags(check-hostname) keep-hostname(yes)); };
        destination d { file("@OUT@/c.log" template("$HOST|$PROGRAM|$MSG\n")); };
        log { source(s); destination(d); };"#,
    );
}

#[test]
fn flags_utf8_and_raw_message() {
    bsd(
        "utf8_raw",
        r#"source s { network(ip(127.0.0.1) port(@PORT@) flags(sanitize-utf8, store-raw-message) keep-hostname(yes)); };
        destination d { file("@OUT@/u.log" template("$MSG|$RAWMSG\n")); };
        log { source(s); destination(d); };"#,
    );
}

#[test]
fn overrides_and_defaults() {
    bsd(
        "overrides",
        r#"source s { network(ip(127.0.0.1) port(@PORT@) host-override("relay-1") program-override("overridden") default-facility(local3) default-priority(warning)); };
        destination d { file("@OUT@/o.log" template("$HOST|$PROGRAM|$PID|$FACILITY.$LEVEL|$MSGHDR$MSG\n")); };
        log { source(s); destination(d); };"#,
    );
}

#[test]
fn chain_hostnames() {
    bsd(
        "chain_hostnames",
        r#"options { chain-hostnames(yes); keep-hostname(no); use-dns(no); };
        source s { network(ip(127.0.0.1) port(@PORT@)); };
        destination d { file("@OUT@/c.log" template("$HOST|$FULLHOST|$HOST_FROM|$MSG\n")); };
        log { source(s); destination(d); };"#,
    );
}

/// syslog-ng's obsolete `long_hostnames()` (SUSE's stock configuration sets it) is
/// `chain-hostnames()`, globally and on a source.
#[test]
fn long_hostnames_is_chain_hostnames() {
    bsd(
        "long_hostnames",
        r#"options { long_hostnames(off); keep-hostname(no); use-dns(no); };
        source s { network(ip(127.0.0.1) port(@PORT@) long-hostnames(yes)); };
        destination d { file("@OUT@/c.log" template("$HOST|$FULLHOST|$HOST_FROM|$MSG\n")); };
        log { source(s); destination(d); };"#,
    );
}

#[test]
fn no_dns_sender_address() {
    bsd(
        "use_dns_no",
        r#"options { use-dns(no); };
        source s { network(ip(127.0.0.1) port(@PORT@)); };
        destination d { file("@OUT@/a.log" template("$HOST $HOST_FROM $SOURCEIP $MSG\n")); };
        log { source(s); destination(d); };"#,
    );
}

#[test]
fn facility_and_level_filters() {
    bsd(
        "facility_level",
        &format!(
            r#"options {{ keep-hostname(yes); }}; {NET}
            filter f_auth {{ facility(auth, authpriv); }};
            filter f_important {{ level(err..emerg); }};
            filter f_local {{ facility(local0, local1, local2, local3, local4, local5, local6, local7) and not level(debug); }};
            destination auth {{ file("@OUT@/auth.log"); }};
            destination important {{ file("@OUT@/important.log"); }};
            destination local {{ file("@OUT@/local.log"); }};
            destination notice {{ file("@OUT@/notice.log"); }};
            log {{ source(s); filter(f_auth); destination(auth); }};
            log {{ source(s); filter(f_important); destination(important); }};
            log {{ source(s); filter(f_local); destination(local); }};
            log {{ source(s); filter {{ priority(notice) or severity(info); }}; destination(notice); }};"#
        ),
    );
}

#[test]
fn matching_filters() {
    bsd(
        "matching",
        &format!(
            r#"options {{ keep-hostname(yes); }}; {NET}
            destination pcre {{ file("@OUT@/pcre.log"); }};
            destination icase {{ file("@OUT@/icase.log"); }};
            destination string {{ file("@OUT@/string.log"); }};
            destination glob {{ file("@OUT@/glob.log"); }};
            destination prog {{ file("@OUT@/prog.log"); }};
            destination by_value {{ file("@OUT@/value.log"); }};
            destination header {{ file("@OUT@/header.log"); }};
            log {{ source(s); filter {{ message("error|fail(ed|ure)" type(pcre)); }}; destination(pcre); }};
            log {{ source(s); filter {{ message("warn" flags(ignore-case)); }}; destination(icase); }};
            log {{ source(s); filter {{ message("Received block" type(string) flags(substring)); }}; destination(string); }};
            destination string_icase {{ file("@OUT@/string_icase.log"); }};
            log {{ source(s); filter {{ message("authentication FAILURE" type(string) flags(substring, ignore-case)) or host("LABSZ" type(string) flags(ignore-case)); }}; destination(string_icase); }};
            log {{ source(s); filter {{ host("hadoop-*" type(glob)); }}; destination(glob); }};
            log {{ source(s); filter {{ program("^(sshd|kernel)$") or program("hdfs" type(string) flags(prefix)); }}; destination(prog); }};
            log {{ source(s); filter {{ match("^bgl" value("HOST")); }}; destination(by_value); }};
            log {{ source(s); filter {{ match("openvpn\[2499\]: PTHREAD"); }}; destination(header); }};"#
        ),
    );
}

#[test]
fn final_and_fallback() {
    bsd(
        "final_fallback",
        &format!(
            r#"options {{ keep-hostname(yes); }}; {NET}
            destination first {{ file("@OUT@/first.log"); }};
            destination second {{ file("@OUT@/second.log"); }};
            destination rest {{ file("@OUT@/rest.log"); }};
            destination all {{ file("@OUT@/all.log"); }};
            log {{ source(s); filter {{ level(err..emerg); }}; destination(first); flags(final); }};
            log {{ source(s); filter {{ facility(local7); }}; destination(second); }};
            log {{ source(s); destination(rest); flags(fallback); }};
            log {{ source(s); destination(all); }};"#
        ),
    );
}

/// `flags(drop-unmatched)`: what such a path rejects counts as matched, for `final` and
/// `fallback` siblings, top-level, nested and in junctions.
#[test]
fn drop_unmatched() {
    bsd(
        "drop_unmatched",
        &format!(
            r#"options {{ keep-hostname(yes); }}; {NET}
            destination sshd {{ file("@OUT@/sshd.log"); }};
            destination after {{ file("@OUT@/after.log"); }};
            destination rest {{ file("@OUT@/rest.log"); }};
            destination nested {{ file("@OUT@/nested.log"); }};
            destination nested_rest {{ file("@OUT@/nested_rest.log"); }};
            destination ch {{ file("@OUT@/channel.log"); }};
            destination ch_rest {{ file("@OUT@/channel_rest.log"); }};
            destination joined {{ file("@OUT@/joined.log"); }};
            log {{ source(s); filter {{ program("sshd"); }}; destination(sshd); flags(drop-unmatched); }};
            log {{ source(s); filter {{ level(err..emerg); }}; destination(after); flags(final); }};
            log {{ source(s); destination(rest); flags(fallback); }};
            log {{ source(s);
                log {{ filter {{ facility(local7); }}; destination(nested); flags(drop-unmatched, final); }};
                log {{ destination(nested_rest); }};
            }};
            log {{ source(s);
                junction {{
                    channel {{ filter {{ facility(auth, authpriv); }}; destination(ch); flags(drop-unmatched); }};
                    channel {{ destination(ch_rest); flags(fallback); }};
                }};
                destination(joined);
            }};"#
        ),
    );
}

#[test]
fn nested_paths_and_junctions() {
    bsd(
        "nested_junction",
        &format!(
            r#"options {{ keep-hostname(yes); }}; {NET}
            destination a {{ file("@OUT@/a.log"); }};
            destination b {{ file("@OUT@/b.log"); }};
            destination c {{ file("@OUT@/c.log"); }};
            destination after {{ file("@OUT@/after.log"); }};
            log {{
                source(s);
                log {{ filter {{ level(info); }}; destination(a); flags(final); }};
                log {{ filter {{ level(info..warning); }}; destination(b); }};
                log {{ destination(c); flags(fallback); }};
            }};
            log {{
                source(s);
                junction {{
                    channel {{ filter {{ facility(local7); }}; }};
                    channel {{ filter {{ level(info); }}; }};
                }};
                destination(after);
            }};"#
        ),
    );
}

/// Paths that look at no message are worked out once per source (`Router::fixed_route`):
/// nested `final`, top-level `final`, an unreached fallback, and a destination that two paths
/// reach (each message written twice, in order: routed per message).
#[test]
fn routes_without_conditions() {
    bsd(
        "fixed_routes",
        &format!(
            r#"options {{ keep-hostname(yes); }}; {NET}
            destination a {{ file("@OUT@/a.log"); }};
            destination b {{ file("@OUT@/b.log"); }};
            destination c {{ file("@OUT@/c.log"); }};
            destination d {{ file("@OUT@/d.log"); }};
            destination e {{ file("@OUT@/e.log"); }};
            destination f {{ file("@OUT@/f.log"); }};
            log {{ source(s); destination(a); log {{ destination(b); flags(final); }}; log {{ destination(c); }}; }};
            log {{ source(s); destination(d); flags(final); }};
            log {{ source(s); destination(e); }};
            log {{ source(s); destination(f); flags(fallback); }};"#
        ),
    );
    bsd(
        "repeated_destination",
        &format!(
            r#"options {{ keep-hostname(yes); }}; {NET}
            destination twice {{ file("@OUT@/twice.log" template("$PROGRAM $MSG\n")); }};
            log {{ source(s); destination(twice); }};
            log {{ source(s); destination(twice); }};"#
        ),
    );
}

#[test]
fn templates_named_and_escaped() {
    bsd(
        "templates",
        &format!(
            r#"options {{ keep-hostname(yes); }}; {NET}
            template t_quoted {{ template("'$PROGRAM' \"$MSG\"\n"); template-escape(yes); }};
            template t_plain "${{HOST}}:${{MSGID:-none}}:$$literal\n";
            destination q {{ file("@OUT@/q.log" template(t_quoted)); }};
            destination p {{ file("@OUT@/p.log" template(t_plain)); }};
            destination inline {{ file("@OUT@/i.log" template("$PROGRAM $MSG\n") template-escape(yes)); }};
            log {{ source(s); destination(q); destination(p); destination(inline); }};"#
        ),
    );
}

#[test]
fn inline_objects_and_catchall() {
    bsd(
        "inline_catchall",
        r#"options { keep-hostname(yes); };
        source s { network(ip(127.0.0.1) port(@PORT@)); };
        log { source(s); filter { facility(local7); }; destination { file("@OUT@/inline.log"); }; };
        log { destination { file("@OUT@/catchall.log" template("$SOURCE $MSG\n")); }; flags(catchall); };"#,
    );
}

#[test]
fn no_multi_line() {
    bsd(
        "no_multi_line",
        r#"options { keep-hostname(yes); };
        source s { network(ip(127.0.0.1) port(@PORT@) flags(no-multi-line)); };
        destination d { file("@OUT@/n.log"); };
        log { source(s); destination(d); };"#,
    );
}

#[test]
fn long_lines_are_split() {
    // A split line's continuation may start with '<' and so look like a malformed PRI.
    differential_except(
        "split_long_lines",
        r#"options { keep-hostname(yes); };
        source s { network(ip(127.0.0.1) port(@PORT@) log-msg-size(100)); };
        destination d { file("@OUT@/s.log" template("[$MSG]\n")); };
        log { source(s); destination(d); };"#,
        Input::Rfc3164,
        Framing::Newline,
        Some(keep_lines_with_invalid_pri),
    );
}

#[test]
fn unix_stream_local_messages() {
    run_both(
        "unix_stream",
        r#"source s { unix-stream("@DIR@/log.sock"); };
        destination d { file("@OUT@/local.log" template("$HOST|$FULLHOST|$HOST_FROM|$SOURCEIP|$PROGRAM|$PID|$MSG\n")); };
        log { source(s); destination(d); };"#,
        Input::Rfc3164,
        Via::Unix,
        None,
    );
}

#[test]
fn unix_stream_chained_hostnames() {
    run_both(
        "unix_chain",
        r#"options { chain-hostnames(yes); };
        source s_local { unix-stream("@DIR@/log.sock" keep-hostname(no)); };
        destination d { file("@OUT@/chain.log" template("$HOST|$FULLHOST|$MSG\n")); };
        log { source(s_local); destination(d); };"#,
        Input::Rfc3164,
        Via::Unix,
        None,
    );
}

#[test]
fn utf8_flags_show_in_the_rfc5424_bom() {
    for flags in ["validate-utf8", "assume-utf8", "sanitize-utf8"] {
        ietf(
            "utf8_bom",
            &format!(
                r#"source s {{ syslog(ip(127.0.0.1) port(@PORT@) flags({flags}) keep-hostname(yes)); }};
                destination d {{ file("@OUT@/bom.log" flags(syslog-protocol)); }};
                log {{ source(s); destination(d); }};"#
            ),
        );
    }
}

#[test]
fn keep_timestamp_no_uses_the_receive_time() {
    bsd(
        "keep_timestamp",
        r#"source s { network(ip(127.0.0.1) port(@PORT@) keep-timestamp(no) keep-hostname(yes)); };
        destination d { file("@OUT@/k.log" template("$ISODATE $HOST $MSGHDR$MSG\n")); };
        log { source(s); destination(d); };"#,
    );
}

/// Rewrite rules, and which version of a message each destination gets: a destination before
/// a rewrite, a nested path's own rewrites and its sibling's view, junction channels that
/// rewrite differently; `tags()` filters on tags the rules set.
#[test]
fn rewrite_rules_and_copy_on_write() {
    const SEEN: &str = r#"template("$PRI $HOST $PROGRAM $PID $MSGHDR$MSG|${my.pair}|${.b}|${.SDATA.origin.ip}\n")"#;
    for (name, input, source) in [
        ("rewrite_bsd", Input::Rfc3164, NET),
        ("rewrite_ietf", Input::Rfc5424, SYSLOG),
    ] {
        differential(
            name,
            &format!(
                r#"options {{ keep-hostname(yes); }}; {source}
                filter f_hadoop {{ host("hadoop*" type(glob)); }};
                rewrite r_mask {{ subst("[0-9]+", "N", value("MESSAGE") flags(global)); }};
                rewrite r_fields {{
                    set("$HOST-x", value("HOST"));
                    set("$PROGRAM/$PID", value("my.pair"));
                    set("$MSGID", value(".a"));
                    rename(".a" ".b");
                    set("10.9.9.9", value(".SDATA.origin.ip") condition(filter(f_hadoop)));
                    set-tag("rewritten");
                    set-severity("err" condition(program("sshd") or level(debug)));
                    set-facility("local3" condition(not facility(local7)));
                }};
                rewrite r_prog {{ set("renamed", value("PROGRAM") condition(filter(f_hadoop))); unset(value("PID")); }};
                destination before {{ file("@OUT@/before.log" {SEEN}); }};
                destination after {{ file("@OUT@/after.log" {SEEN}); }};
                destination child {{ file("@OUT@/child.log" {SEEN}); }};
                destination parent {{ file("@OUT@/parent.log" {SEEN}); }};
                destination forked {{ file("@OUT@/forked.log" {SEEN}); }};
                log {{
                    source(s);
                    destination(before);
                    rewrite(r_mask);
                    rewrite(r_fields);
                    destination(after);
                    log {{
                        rewrite {{ subst("a", "A", type(string) flags(global ignore-case)); set-pri("13"); clear-tag("rewritten"); }};
                        rewrite(r_prog);
                        destination(child);
                    }};
                    log {{ destination(parent); }};
                }};
                log {{
                    source(s);
                    junction {{
                        channel {{ rewrite {{ set("one", value("my.pair")); }}; }};
                        channel {{ filter {{ level(info); }}; rewrite {{ set("two: $MSG", value("MESSAGE")); }}; }};
                    }};
                    destination(forked);
                }};
                destination tagged {{ file("@OUT@/tagged.log" {SEEN}); }};
                destination untagged {{ file("@OUT@/untagged.log" {SEEN}); }};
                log {{
                    source(s);
                    rewrite {{ set-tag("ssh" condition(program("sshd"))); set-tag("err" condition(level(err..emerg))); }};
                    log {{ filter {{ tags("ssh", "err"); }}; destination(tagged); }};
                    log {{ filter {{ not tags("ssh"); }}; destination(untagged); }};
                }};"#
            ),
            input,
            usual_framing(input),
        );
    }
}

/// `kv-parser()` over firewall-style lines and syslog-ng's edge cases: keys, quoting, escapes,
/// stray words, pair separators, prefixes and templates.
#[test]
fn kv_parser() {
    const KEYS: &str = "${.kv.a}|${.kv.b}|${.kv.c}|${.kv.d}|${.kv.k}|${.kv.k2}|${.kv.bar}|${.kv.here}|${.kv.y}|${.kv.key.with.dot}|${.kv.key-dash}|${.kv._u}|${.kv.trailing}|${.kv.msg}|${.kv.devname}|${.kv.action}|${.kv.srcip}|${.kv.dstip}|${.kv.logid}|${.kv.level}|${.kv.type}";
    differential(
        "kv_parser",
        &format!(
            r#"options {{ keep-hostname(yes); }}; {NET}
            parser p_kv {{ kv-parser(prefix(".kv.") extract-stray-words-into("stray")); }};
            parser p_semi {{ kv-parser(value-separator(":") pair-separator(";") prefix("s.")); }};
            destination kv {{ file("@OUT@/kv.log" template("{KEYS}|${{stray}}\n")); }};
            destination semi {{ file("@OUT@/semi.log" template("${{s.a}}|${{s.time}}|${{s.b}}\n")); }};
            destination tmpl {{ file("@OUT@/tmpl.log" template("${{h.host}}|${{h.a}}\n")); }};
            log {{ source(s); parser(p_kv); destination(kv); }};
            log {{ source(s); parser(p_semi); destination(semi); }};
            log {{ source(s); parser {{ kv-parser(prefix("h.") template("host=$HOST $MSG")); }}; destination(tmpl); }};"#
        ),
        Input::KeyValue,
        Framing::Newline,
    );
}

/// Types of values (`json-parser()`, template functions, casts) in `$(format-json --no-cast)`;
/// without `--no-cast`, strings as syslog-ng 3.x writes them. A top-level array sets the match
/// variables.
#[test]
fn typed_values_with_no_cast() {
    differential(
        "typed_values_with_no_cast",
        &format!(
            r#"options {{ keep-hostname(yes); }}; {NET}
            destination typed {{ file("@OUT@/typed.log" template("$(format-json --no-cast --scope dot-nv-pairs)|$(format-json --scope dot-nv-pairs --exclude .j.s --exclude .j.t)\n")); }};
            destination pairs {{ file("@OUT@/pairs.log" template("$(format-json --no-cast --pair sum=$(+ ${{.j.i}} 1) --pair half=$(/ ${{.j.j}} 2) --pair len=$(length ${{.j.a}}) --pair l=${{.j.l}} --pair w=$(explode ' ' $MSG) --pair c=$(list-count ${{.j.l}}) --pair j=$(format-json --key .j.f) --pair s=x${{.j.i}} --pair b=boolean(${{.j.c}}) --pair n=null(x) --pair lit=literal([1]) --pair if=$(if (\"${{.j.c}}\" eq \"true\") ${{.j.b}} ${{.j.a}}))\n")); }};
            destination strings {{ file("@OUT@/strings.log" template("$(format-json --pair sum=$(+ ${{.j.i}} 1) --pair l=${{.j.l}} --pair b=boolean(1))\n")); }};
            destination matches {{ file("@OUT@/matches.log" template("$0|$1|$2|$3|$4|$5|$6|$7|$8|$(format-json --no-cast --pair a=$2 --pair b=$5 --pair c=$7)\n")); }};
            log {{ source(s); parser {{ json-parser(prefix(".j.")); }}; destination(typed); destination(pairs); destination(strings); }};
            log {{ source(s); filter {{ message("(.)(.)(.)(.)(.)(.)(.)(.)" flags(store-matches)); }}; parser {{ json-parser(prefix(".j.")); }}; destination(matches); }};"#
        ),
        Input::Json,
        Framing::Newline,
    );
}

/// `json-parser()`: nesting, value types, arrays, invalid input (the message leaves the path),
/// `marker()`, `extract-prefix()` and `key-delimiter()`.
#[test]
fn json_parser() {
    const KEYS: &str = "${.j.a}|${.j.b}|${.j.c}|${.j.d}|${.j.nested.x.y}|${.j.nested.z}|${.j.f}|${.j.g}|${.j.h}|${.j.i}|${.j.j}|${.j.k}|${.j.s}|${.j.t}|${.j.l}|${.j.m}|${.j.n}|${.j.dotted.key}|${.j.b.c}|${.j.b.d}|${.j.time}|${.j.level}|${.j.app}|${.j.pid}|${.j.seq}|${.j.bytes}|${.j.ok}|${.j.msg}";
    differential(
        "json_parser",
        &format!(
            r#"options {{ keep-hostname(yes); }}; {NET}
            parser p_json {{ json-parser(prefix(".j.")); }};
            destination parsed {{ file("@OUT@/parsed.log" template("{KEYS}\n")); }};
            destination failed {{ file("@OUT@/failed.log" template("$MSG\n")); }};
            destination marked {{ file("@OUT@/marked.log" template("${{a}}\n")); }};
            destination nested {{ file("@OUT@/nested.log" template("${{x/y}}|${{z}}\n")); }};
            log {{ source(s); parser(p_json); destination(parsed); flags(final); }};
            log {{ source(s); destination(failed); }};
            log {{ source(s); parser {{ json-parser(marker("@cee:")); }}; destination(marked); }};
            log {{ source(s); parser {{ json-parser(extract-prefix("nested") key-delimiter("/")); }}; destination(nested); }};"#
        ),
        Input::Json,
        Framing::Newline,
    );
}

/// `if`/`elif`/`else` in log paths: filter conditions (a message the taken arm rejects is
/// dropped), a block as the condition (a parser decides), `else`, nesting, and what follows the
/// chain seeing the arm's version of the message.
#[test]
fn if_elif_else() {
    bsd(
        "if_elif_else",
        &format!(
            r#"options {{ keep-hostname(yes); }}; {NET}
            destination classified {{ file("@OUT@/classified.log" template("${{cls}} $PROGRAM $MSG\n")); }};
            destination l7 {{ file("@OUT@/l7.log"); }};
            destination after {{ file("@OUT@/after.log" template("${{inner:-none}} $MSG\n")); }};
            log {{
                source(s);
                if (level(err..emerg)) {{
                    rewrite {{ set("E", value("cls")); }};
                }} elif (program("sshd") or facility(auth)) {{
                    rewrite {{ set("S", value("cls")); }};
                    filter {{ message("Failed|Invalid"); }};
                }} elif {{
                    parser {{ kv-parser(prefix(".kv.")); }};
                    filter {{ match("." value(".kv.user")); }};
                    rewrite {{ set("K", value("cls")); }};
                }} else {{
                    rewrite {{ set("O", value("cls")); }};
                    if (facility(local7)) {{ rewrite {{ set("O7", value("cls")); }}; }};
                }};
                destination(classified);
            }};
            log {{
                source(s);
                if (facility(local7)) {{ destination(l7); rewrite {{ set("seen", value("inner")); }}; }};
                destination(after);
            }};"#
        ),
    );
}

/// Blocks of every context, with defaults, mandatory parameters, `...` and values in strings.
/// Each body starts on the line after its brace: syslog-ng fills in backticks on that line when
/// it reads the file (a documented difference).
#[test]
fn blocks() {
    bsd(
        "blocks",
        r#"@define logdir "@OUT@"
        block source net(ip("127.0.0.1") ...) {
            network(ip(`ip`) `__VARARGS__`);
        };
        block destination to_file(name() template("$MSG\n") ...) {
            file("`logdir`/`name`.log" template(`template`) `__VARARGS__`);
        };
        block filter prog(name()) {
            program("`name`") or program("`name`d")
        };
        block rewrite tag_it(value() tag()) {
            set("`tag`", value("`value`"));
        };
        block parser kv(prefix(".kv.")) {
            kv-parser(prefix("`prefix`"));
        };
        block log to(d()) {
            destination(`d`);
        };
        block root per_program(program() name()) {
            destination d_`name` { to_file(name("`name`") template("$PROGRAM $MSG\n")); };
            log { source(s); filter { program("`program`") }; to(d(d_`name`)); };
        };
        options { keep-hostname(yes); };
        source s { net(port(@PORT@)); };
        destination d_all { to_file(name("all") template("${cls} ${.kv.user} $HOST $MSG\n") perm(0600)); };
        log {
            source(s);
            filter { not prog(name(ssh)) and level(info..emerg) };
            rewrite { tag_it(value("cls") tag("T")); };
            parser { kv(); };
            to(d(d_all));
        };
        per_program(program("sshd") name(sshd));
        per_program(program("CRON") name(cron));"#,
    );
}

/// Comparing templates in filters: string operators, type-aware operators with quoted number
/// literals (numeric) and without (byte-wise), `===`/`!==`, values that are not numbers.
#[test]
fn comparisons() {
    bsd(
        "comparisons",
        &format!(
            r#"options {{ keep-hostname(yes); }}; {NET}
            destination lt {{ file("@OUT@/pid_lt.log"); }};
            destination ge {{ file("@OUT@/pid_ge.log"); }};
            destination ne {{ file("@OUT@/pid_ne.log"); }};
            destination eq {{ file("@OUT@/host_eq.log"); }};
            destination le {{ file("@OUT@/prog_le.log"); }};
            destination strne {{ file("@OUT@/prog_ne.log"); }};
            destination tav {{ file("@OUT@/tav.log"); }};
            destination tavne {{ file("@OUT@/tavne.log"); }};
            destination sev {{ file("@OUT@/sev.log"); }};
            log {{ source(s); filter {{ "$PID" < "1000"; }}; destination(lt); }};
            log {{ source(s); filter {{ "$PID" >= "20000" and "$PID" <= "30000"; }}; destination(ge); }};
            log {{ source(s); filter {{ "$PID" != "1"; }}; destination(ne); }};
            log {{ source(s); filter {{ "$HOST" eq "LabSZ" or "${{HOST}}x" eq "combox"; }}; destination(eq); }};
            log {{ source(s); filter {{ "$PROGRAM" le "m" and "$PROGRAM" gt "c"; }}; destination(le); }};
            log {{ source(s); filter {{ "$PROGRAM" != "sshd" and not "$PROGRAM" == "kernel"; }}; destination(strne); }};
            log {{ source(s); filter {{ "$PID" === "28281" or "$PROGRAM" === "sshd"; }}; destination(tav); }};
            log {{ source(s); filter {{ "$PID" !== "1"; }}; destination(tavne); }};
            log {{ source(s); filter {{ "$LEVEL_NUM" > "4"; }}; destination(sev); }};"#
        ),
    );
}

/// Match variables: `flags(store-matches)` in filters sets `$0`, `$1`… for what follows, and a
/// `subst()` replacement refers to its own groups.
#[test]
fn match_variables() {
    bsd(
        "match_variables",
        &format!(
            r#"options {{ keep-hostname(yes); }}; {NET}
            destination stored {{ file("@OUT@/stored.log" template("$0|$1|$2|$3\n")); }};
            destination swapped {{ file("@OUT@/swapped.log" template("$MSG|$1\n")); }};
            log {{ source(s); filter {{ message("([a-z]+) ([0-9]+)" flags(store-matches)); }}; destination(stored); }};
            log {{ source(s); rewrite {{ subst("([A-Za-z]+)=([^ ]+)", "$2<-$1", flags(global)); subst("(^| )([0-9]{{1,3}})\.([0-9]+)", "$1[$3.$2]"); }}; destination(swapped); }};"#
        ),
    );
}

/// `regexp-parser()`: named groups become pairs under the prefix, every group a match variable,
/// the first of several patterns that matches wins, and a message none matches leaves the path.
#[test]
fn regexp_parser() {
    bsd(
        "regexp_parser",
        &format!(
            r#"options {{ keep-hostname(yes); }}; {NET}
            parser p_ssh {{ regexp-parser(prefix(".re.") patterns(
                "^(?<action>Failed|Accepted) (?<method>\\S+) for (invalid user )?(?<user>\\S+) from (?<ip>[0-9.]+)"
                "^Invalid user (?<user>\\S*) from (?<ip>\\S+)"
                "^(?P<word>[a-z]+)=(?P<value>[0-9]+)"
            )); }};
            destination parsed {{ file("@OUT@/parsed.log" template("${{.re.action}}|${{.re.method}}|${{.re.user}}|${{.re.ip}}|${{.re.word}}|$1|$2|$3\n")); }};
            destination rest {{ file("@OUT@/rest.log" template("$PROGRAM $MSG\n")); }};
            destination icase {{ file("@OUT@/icase.log" template("${{p}}\n")); }};
            log {{ source(s); parser(p_ssh); destination(parsed); flags(final); }};
            log {{ source(s); destination(rest); }};
            log {{ source(s); parser {{ regexp-parser(patterns("(?<p>ERROR|WARN)") flags(ignore-case) template("$PROGRAM: $MSG")); }}; destination(icase); }};"#
        ),
    );
}

/// `csv-parser()`: quotes and quote pairs, the three escape dialects, whitespace stripping,
/// `null()`, string and character delimiters, `greedy`, and `drop-invalid` (the message leaves
/// the path when columns are missing or input is left over).
#[test]
fn csv_parser() {
    const C4: &str = "${c.a}|${c.b}|${c.c}|${c.d}";
    differential(
        "csv_parser",
        &format!(
            r#"options {{ keep-hostname(yes); }}; {NET}
            destination plain {{ file("@OUT@/plain.log" template("{C4}\n")); }};
            destination bs {{ file("@OUT@/backslash.log" template("{C4}\n")); }};
            destination dbl {{ file("@OUT@/double.log" template("{C4}\n")); }};
            destination raw {{ file("@OUT@/raw.log" template("{C4}\n")); }};
            destination strs {{ file("@OUT@/strings.log" template("{C4}\n")); }};
            destination greedy {{ file("@OUT@/greedy.log" template("${{w1}}|${{w2}}|${{rest}}\n")); }};
            destination strict {{ file("@OUT@/strict.log" template("{C4}\n")); }};
            destination apache {{ file("@OUT@/apache.log" template("${{ip}}|${{ts}}|${{req}}|${{st}}|${{ua}}\n")); }};
            log {{ source(s); parser {{ csv-parser(columns("a" "b" "c" "d") delimiters(",") prefix("c.") null("-")); }}; destination(plain); }};
            log {{ source(s); parser {{ csv-parser(columns("a" "b" "c" "d") delimiters(",") prefix("c.") flags(escape-backslash strip-whitespace)); }}; destination(bs); }};
            log {{ source(s); parser {{ csv-parser(columns("a" "b" "c" "d") delimiters(",") prefix("c.") flags(escape-double-char strip-whitespace)); }}; destination(dbl); }};
            log {{ source(s); parser {{ csv-parser(columns("a" "b" "c" "d") delimiters(",") prefix("c.") flags(escape-none) quote-pairs('""')); }}; destination(raw); }};
            log {{ source(s); parser {{ csv-parser(columns("a" "b" "c" "d") delimiters(chars(";,\t") strings("::")) prefix("c.")); }}; destination(strs); }};
            log {{ source(s); parser {{ csv-parser(columns("w1" "w2" "rest") flags(greedy)); }}; destination(greedy); }};
            log {{ source(s); parser {{ csv-parser(columns("a" "b" "c" "d") delimiters(",") prefix("c.") drop-invalid(yes)); }}; destination(strict); }};
            log {{ source(s); parser {{ csv-parser(columns("ip" "ident" "user" "ts" "req" "st" "size" "ref" "ua") delimiters(" ") quote-pairs('""[]')); }}; destination(apache); }};"#
        ),
        Input::Csv,
        Framing::Newline,
    );
}

/// Template functions: string functions, `$(if)` with a filter expression, `$(or)`, arithmetic,
/// nesting and quoting of arguments.
#[test]
fn template_functions() {
    bsd(
        "template_functions",
        &format!(
            r#"options {{ keep-hostname(yes); }}; {NET}
            destination f {{ file("@OUT@/functions.log" template("$(echo $HOST $PROGRAM)|$(length $MSG $HOST)|$(substr $MSG 0 12)|$(substr \"$MSG\" -6)|$(substr $MSG 3 -4)|$(strip \"  $PID  \" ' x ')|$(lowercase $MSG)|$(uppercase $HOST)|$(sanitize $PROGRAM $HOST)|$(sanitize --no-ctrl-chars --invalid-chars ':. ' --replacement '#' $MSG)\n")); }};
            destination g {{ file("@OUT@/more.log" template("$(if (\"$PROGRAM\" eq \"sshd\") \"ssh: $PID\" $(uppercase $PROGRAM))|$(if (level(err..emerg) or facility(auth)) bad good)|$(or $PID $MSGID none)|$(+ $PID 10)|$(- 5 $PID)|$(* $PID 3)|$(/ $PID 7)|$(% $PID 7)|$(+ $PID 1.5)|$(replace-delimiter ' :' _ $MSG)|$(indent-multi-line $MSG)|$(echo 'quoted $HOST' \\) x)\n")); }};
            log {{ source(s); destination(f); destination(g); }};"#
        ),
    );
}

/// `source()`, `netmask()`, `netmask6()` and `in-list()` filters.
#[test]
fn source_netmask_and_in_list_filters() {
    let list = tempfile::NamedTempFile::new().expect("a temporary file");
    std::fs::write(
        list.path(),
        "LabSZ\ncombo\n\nzk01\nbzorp\nlast-line-without-end",
    )
    .expect("list written");
    bsd(
        "source_netmask_in_list",
        &format!(
            r#"options {{ keep-hostname(yes); }}; {NET}
            destination listed {{ file("@OUT@/listed.log"); }};
            destination local {{ file("@OUT@/local.log"); }};
            destination none {{ file("@OUT@/none.log"); }};
            log {{ source(s); filter {{ in-list("{list}" value("HOST")); }}; destination(listed); }};
            log {{ source(s); filter {{ source(s) and netmask("127.0.0.0/255.0.0.0") and netmask("127.0.0.1"); }}; destination(local); }};
            log {{ source(s); filter {{ not source(s) or netmask("10.0.0.0/8") or netmask6("::1/128") or in-list("{list}" value("PROGRAM")); }}; destination(none); }};"#,
            list = list.path().display()
        ),
    );
}

/// `$(format-json)`: scopes, keys and excludes, pairs with casts, rekeying, parsed pairs and
/// structured data nested by their dots.
#[test]
fn format_json() {
    for (name, input, source) in [
        ("format_json_bsd", Input::Rfc3164, NET),
        ("format_json_ietf", Input::Rfc5424, SYSLOG),
    ] {
        differential(
            name,
            &format!(
                r#"options {{ keep-hostname(yes); }}; {source}
                destination a {{ file("@OUT@/scopes.log" template("$(format-json --scope rfc5424 --scope nv-pairs)\n")); }};
                destination b {{ file("@OUT@/keys.log" template("$(format-json --scope selected-macros --key .kv.* --exclude DATE --exclude SOURCEIP --exclude TAGS)\n")); }};
                destination c {{ file("@OUT@/pairs.log" template("$(format-json --pair host=$HOST --pair pid=int($PID) prog=$PROGRAM ISODATE --pair d=double(1.5) --pair b=boolean(true) --omit-empty-values)\n")); }};
                destination d {{ file("@OUT@/rekey.log" template("$(format-json --scope dot-nv-pairs --rekey .kv.* --shift 4 --add-prefix kv. --exclude .SDATA.*)\n")); }};
                destination e {{ file("@OUT@/sdata.log" template("$(format-json --scope sdata --scope rfc3164)\n")); }};
                destination f {{ file("@OUT@/delimiters.log" template("$(format-json --scope dot-nv-pairs --leave-initial-dot)|$(format-json --key-delimiter / --pair a/b=1 --pair a/c=$HOST --pair x.y=z --pair /lead=1 --scope dot-nv-pairs)\n")); }};
                log {{ source(s); parser {{ kv-parser(prefix(".kv.")); }}; destination(a); destination(b); destination(c); destination(d); destination(e); destination(f); }};"#
            ),
            input,
            usual_framing(input),
        );
    }
}

/// `$(format-json)` of messages without pairs of their own (sluice writes those from a plan
/// made when the configuration is read).
#[test]
fn format_json_without_pairs() {
    for (name, input, source) in [
        ("format_json_plain_bsd", Input::Rfc3164, NET),
        ("format_json_plain_ietf", Input::Rfc5424, SYSLOG),
    ] {
        differential(
            name,
            &format!(
                r#"options {{ keep-hostname(yes); }}; {source}
                destination a {{ file("@OUT@/a.log" template("$(format-json --scope rfc5424 --scope nv-pairs)|$(format-flat-json --scope rfc3164 --key HOST_FROM --exclude DATE)\n")); }};
                destination b {{ file("@OUT@/b.log" template("$(format-json --scope selected-macros --exclude SOURCEIP --exclude TAGS --exclude SEQNUM --pair fac=int($FACILITY_NUM) --pair HOST=h-$HOST --pair e=$MSGID --omit-empty-values)\n")); }};
                destination c {{ file("@OUT@/c.log" template("$(format-json --scope nv-pairs --pair n=$(+ $FACILITY_NUM 1) --no-cast --pair MESSAGE=$(length $MSG))|$(format-json --key PROGRAM --key PID --pair PID=$HOST)\n")); }};
                log {{ source(s); destination(a); destination(b); destination(c); }};"#
            ),
            input,
            usual_framing(input),
        );
    }
}

/// `set-matches()`, `unset-matches()`, `groupset()` and `groupunset()`.
#[test]
fn match_and_group_rewrites() {
    differential(
        "match_and_group_rewrites",
        &format!(
            r#"options {{ keep-hostname(yes); }}; {NET}
            destination m {{ file("@OUT@/matches.log" template("$1|$2|$3|$4\n")); }};
            destination u {{ file("@OUT@/unset.log" template("$0|$1|$2\n")); }};
            destination g {{ file("@OUT@/group.log" template("$HOST|${{.kv.a}}|${{.kv.b}}|${{.kv.msg}}|${{.kv.devname}}|${{.kv.level}}\n")); }};
            log {{ source(s); rewrite {{ set-matches("$PROGRAM,$HOST,'q, x',\"d\\\"q\""); }}; destination(m); }};
            log {{ source(s); filter {{ message("(a)(b)?" flags(store-matches)); }}; rewrite {{ unset-matches(); }}; destination(u); }};
            log {{ source(s); parser {{ kv-parser(prefix(".kv.")); }};
                  rewrite {{ groupset("***" values(".kv.a" ".kv.d*" "HOST")); groupunset(values(".kv.l*" ".kv.m?g")); }};
                  destination(g); }};"#
        ),
        Input::KeyValue,
        Framing::Newline,
    );
}

/// More template functions: padding, URL encoding, environment, addresses, paths, rounding.
#[test]
fn template_functions_more() {
    bsd(
        "template_functions_more",
        &format!(
            r#"options {{ keep-hostname(yes); }}; {NET}
            destination f {{ file("@OUT@/more.log" template("$(padding $PID 8 0)|$(padding $HOST 12)|$(padding $PROGRAM 3 ab)|$(url-encode $MSG)|$(url-decode 'a%20b%zz' '%41%2f' $HOST)|$(env PATH NO_SUCH_VAR HOME)|$(ipv4-to-int $SOURCEIP 10.1.2.3 010.0x10.3 1.2.3)|$(dirname $MSG)|$(basename $MSG)|$(dirname /a/b/)|$(basename /a/b/)|$(round ${{PID}}.567 2)|$(round $PID)|$(round 2.5)|$(ceil ${{PID}}.1)|$(floor -2.1)|$(ceil x)|$(sum $PID)|$(min $PID)|$(max ' $PID')|$(average $PID)|$(sum $HOST)\n")); }};
            log {{ source(s); destination(f); }};"#
        ),
    );
}

/// Digests, base64 and `$(format-flat-json)`.
#[test]
fn digests_and_flat_json() {
    differential(
        "digests_and_flat_json",
        &format!(
            r#"options {{ keep-hostname(yes); }}; {NET}
            destination d {{ file("@OUT@/digests.log" template("$(sha1 $HOST)|$(md5 $MSG)|$(sha256 $HOST $PID)|$(sha512 $MSG)|$(hash $MSG)|$(hash --length 10 $HOST)|$(md5 --length 5 $HOST)|$(base64-encode $HOST $MSG)\n")); }};
            destination f {{ file("@OUT@/flat.log" template("$(format-flat-json --scope rfc5424 --scope dot-nv-pairs --exclude DATE)\n")); }};
            log {{ source(s); parser {{ kv-parser(prefix(".kv.")); }}; destination(d); destination(f); }};"#
        ),
        Input::KeyValue,
        Framing::Newline,
    );
}

/// `$(format-welf)`, `$(names)`, `$(values)`, `$(grep)`, `$(map)`, `$(filter)`,
/// `$(list-search)` and `$(template)` with a name made from the message. (`$(format-welf)`'s
/// pairs avoid names that sort before `id`: where syslog-ng puts those depends on the shape of
/// its tree; sluice always writes `id` first, as syslog-ng means to.)
#[test]
fn value_pairs_and_list_templates() {
    differential(
        "value_pairs_and_list_templates",
        &format!(
            r#"options {{ keep-hostname(yes); }}; {NET}
            template t_ssh "ssh:$PID";
            template t_other "other:$HOST";
            destination w {{ file("@OUT@/welf.log" template("$(format-welf --scope dot-nv-pairs --pair id=$PID --pair z_host=$HOST --pair sp='a b\"c')|$(format-welf --key HOST --key PROGRAM)\n")); }};
            destination n {{ file("@OUT@/names.log" template("$(names --scope dot-nv-pairs)|$(values --key .kv.* --exclude .kv.msg)|$(list-count $(names --scope all-nv-pairs))\n")); }};
            destination g {{ file("@OUT@/grep.log" template("$(grep (\"$PROGRAM\" ne \"x\") $HOST $PID)|$(grep --max-count 1 (level(err..emerg)) $MSG)|$(map $(uppercase $_) $(explode ' ' $MSG))|$(filter (\"$_\" ne \"to\") $(explode ' ' $MSG))|$(map \"<$_>\" $(map $(length $_) a,bb,\"c,d\"))\n")); }};
            destination s {{ file("@OUT@/search.log" template("$(list-search a $(explode ' ' $MSG))|$(list-search --mode prefix s $(explode ' ' $MSG))|$(list-search --start-index 1 --mode glob '*=*' $(explode ' ' $MSG))|$(list-search --mode substring = a,b $(explode ' ' $MSG))|$(list-search --mode pcre '^[0-9]+$' $(explode ' ' $MSG))\n")); }};
            destination t {{ file("@OUT@/named.log" template("$(template ${{tname}} no template for $PROGRAM)\n")); }};
            filter f_bad {{ level(err..emerg) or filter(f_ssh); }};
            filter f_ssh {{ program("sshd"); }};
            filter f_word {{ "$_" ne "to" and "$_" ne "for"; }};
            destination r {{ file("@OUT@/refs.log" template("$(if (filter(f_bad)) bad good)|$(grep (filter(f_ssh) or facility(auth)) $PID)|$(filter (filter(f_word)) $(explode ' ' $MSG))\n")); }};
            log {{ source(s); parser {{ kv-parser(prefix(".kv.")); }}; destination(w); destination(n); destination(g); destination(s); }};
            log {{ source(s); rewrite {{ set("t_ssh", value("tname") condition(program("sshd"))); set("t_other", value("tname") condition(program("CRON"))); }}; destination(t); destination(r); }};"#
        ),
        Input::KeyValue,
        Framing::Newline,
    );
}

/// List functions over lists made from the message.
#[test]
fn list_functions() {
    bsd(
        "list_functions",
        &format!(
            r#"options {{ keep-hostname(yes); }}; {NET}
            destination l {{ file("@OUT@/lists.log" template("$(explode ' ' $MSG)|$(list-count $(explode ' ' $MSG))|$(list-head $(explode ' ' $MSG))|$(list-nth 2 $(explode ' ' $MSG))|$(list-nth -1 $(explode ' ' $MSG))|$(list-tail $(explode ' ' $MSG))|$(list-slice 1:3 $(explode ' ' $MSG))|$(list-slice -2: $(explode ' ' $MSG))|$(list-slice :-100 a,b)|$(list-concat $(explode ' ' $PROGRAM) '\"q, x\"' ,,)|$(list-append $HOST 'a b' $PID)|$(implode - $(explode : $MSG))|$(implode + a,,b \"\",c)\n")); }};
            log {{ source(s); destination(l); }};"#
        ),
    );
}

/// `date-parser()` (formats, zones, the received time) and `tags-parser()`.
#[test]
fn date_and_tags_parsers() {
    differential(
        "date_and_tags_parsers",
        &format!(
            r#"options {{ keep-hostname(yes); }}; {NET}
            destination dated {{ file("@OUT@/dated.log" template("$ISODATE|$S_UNIXTIME|$R_ISODATE|${{.j.time}}\n")); }};
            destination tokyo {{ file("@OUT@/tokyo.log" template("$ISODATE|${{.j.time}}\n")); }};
            destination undated {{ file("@OUT@/undated.log" template("${{.j.time}}\n")); }};
            destination warned {{ file("@OUT@/warned.log" template("${{.j.level}} ${{.j.app}}\n")); }};
            destination all {{ file("@OUT@/all.log" template("$MSG\n")); }};
            log {{ source(s); destination(all); }};
            log {{ source(s); parser {{ json-parser(prefix(".j.")); }};
                  log {{ parser {{ date-parser(format("%d/%b/%Y" "%Y-%m-%dT%H:%M:%S%z") template("${{.j.time}}")); }}; destination(dated); flags(final); }};
                  log {{ parser {{ date-parser(format("%Y-%m-%dT%H:%M:%S") template("$(substr ${{.j.time}} 0 19)") time-zone("Asia/Tokyo")); }}; destination(tokyo); }};
                  log {{ parser {{ date-parser(format("%H:%M") template("${{.j.time}}") time-stamp(recvd)); }}; destination(undated); flags(fallback); }};
            }};
            log {{ source(s); parser {{ json-parser(prefix(".j.")); tags-parser(template("${{.j.level}},$(substr ${{.j.app}} 0 3)")); }};
                  filter {{ tags("warning") or tags("had"); }}; destination(warned); }};"#
        ),
        Input::Json,
        Framing::Newline,
    );
}

/// `syslog-parser()` re-parsing what a `flags(no-parse)` source took whole.
#[test]
fn syslog_parser() {
    for (name, input, flags) in [
        ("syslog_parser_bsd", Input::Rfc3164, ""),
        (
            "syslog_parser_ietf",
            Input::Rfc5424,
            " flags(syslog-protocol)",
        ),
    ] {
        let source = match input {
            Input::Rfc5424 => {
                "source s { syslog(ip(127.0.0.1) port(@PORT@) transport(tcp) flags(no-parse)); };"
            }
            _ => "source s { network(ip(127.0.0.1) port(@PORT@) flags(no-parse)); };",
        };
        differential(
            name,
            &format!(
                r#"options {{ keep-hostname(yes); }}; {source}
                destination d {{ file("@OUT@/reparsed.log"); }};
                destination m {{ file("@OUT@/macros.log" template("$HOST|$PROGRAM|$PID|$MSGID|$FACILITY.$LEVEL|$ISODATE|$SDATA|$MSGHDR$MSG\n")); }};
                log {{ source(s); parser {{ syslog-parser({flags}); }}; destination(d); destination(m); }};"#
            ),
            input,
            usual_framing(input),
        );
    }
}

/// `$(template name)` invokes a template statement.
#[test]
fn template_function_template() {
    bsd(
        "template_function_template",
        &format!(
            r#"options {{ keep-hostname(yes); }}; {NET}
            template t_inner "$PROGRAM[$PID]";
            template t_escaped {{ template("'$MSG'"); template-escape(yes); }};
            destination d {{ file("@OUT@/t.log" template("$(template t_inner) $(template t_escaped) $(uppercase $(template t_inner))\n")); }};
            log {{ source(s); destination(d); }};"#
        ),
    );
}

/// `stdin()` is a file named `-` (`FILE_NAME`), and the `meta sequenceId` of local messages
/// counts them in the order they are written, over several runs (formatting in parallel once
/// numbered them out of order).
#[test]
fn stdin_file_name_and_sequence_ids() {
    for _ in 0..3 {
        run_both(
            "stdin_seq",
            r#"source s { stdin(flags(syslog-protocol) log-iw-size(10000000)); };
            destination d { file("@OUT@/seq.log" template("$SDATA|$(format-json --scope nv-pairs)\n")); };
            destination proto { file("@OUT@/proto.log" flags(syslog-protocol)); };
            log { source(s); destination(d); destination(proto); };"#,
            Input::Rfc5424,
            Via::Stdin,
            None,
        );
    }
}

/// `level(crit .. emerg)` as syslog-ng reads it: a range, spaces or not.
#[test]
fn level_and_facility_ranges_with_spaces() {
    bsd(
        "ranges",
        &format!(
            r#"options {{ keep-hostname(yes); }}; {NET}
            filter f_high {{ level(crit .. emerg) or level(debug ..info); }};
            filter f_fac {{ facility(kern.. mail, local7); }};
            destination high {{ file("@OUT@/high.log" template("$LEVEL $MSG\n")); }};
            destination fac {{ file("@OUT@/fac.log" template("$FACILITY $MSG\n")); }};
            log {{ source(s); filter(f_high); destination(high); }};
            log {{ source(s); filter(f_fac); destination(fac); }};"#
        ),
    );
}

/// `$TAGS` lists tags in the order their names were registered: the configuration's names
/// in the order written, then the sources' `.source.NAME`.
#[test]
fn tags_in_registration_order() {
    /// docs/compatibility.md: sluice's parser tags (`syslog.missing_pri`…) are not in 3.38.
    fn without_parser_tags(files: &mut std::collections::BTreeMap<String, Vec<u8>>) {
        let re = regex::bytes::Regex::new(r"(?m)^((syslog|message)\.[a-z0-9_]+,)+")
            .expect("valid pattern");
        for bytes in files.values_mut() {
            *bytes = re.replace_all(bytes, &b""[..]).into_owned();
        }
    }
    run_both_masked(
        "tags_order",
        r#"source s { network(ip(127.0.0.1) port(@PORT@) tags("net")); };
        rewrite r { set-tag("fw"); set-tag("later"); };
        filter f { tags("filt") or tags("net"); };
        destination d { file("@OUT@/tags.log" template("$TAGS $MSG\n")); };
        log { source(s); rewrite(r); if (filter(f)) { rewrite { set-tag("inner"); }; }; destination(d); };"#,
        Input::Rfc3164,
        Via::Tcp(Framing::Newline),
        None,
        Some(without_parser_tags),
    );
}

/// A space before an octet-counting header is an empty frame to syslog-ng, not an error
/// that closes the connection.
#[test]
fn octet_counting_with_spaces_before_headers() {
    differential(
        "spaced_frames",
        &format!(
            r#"options {{ keep-hostname(yes); }}; {SYSLOG}
            destination d {{ file("@OUT@/spaced.log" template("$HOST|$PROGRAM|$SDATA|$MSG\n")); }};
            log {{ source(s); destination(d); }};"#
        ),
        Input::Rfc5424,
        Framing::OctetCountedSpaced,
    );
}

/// `flags(final)` in nested log paths and junction channels: where a message stops.
#[test]
fn final_flags_in_junctions_and_nested_paths() {
    bsd(
        "final_nested",
        &format!(
            r#"options {{ keep-hostname(yes); }}; {NET}
            destination d1 {{ file("@OUT@/d1.log" template("$LEVEL $MSG\n")); }};
            destination d2 {{ file("@OUT@/d2.log" template("$LEVEL $MSG\n")); }};
            destination d3 {{ file("@OUT@/d3.log" template("$LEVEL $MSG\n")); }};
            destination d4 {{ file("@OUT@/d4.log" template("$LEVEL $MSG\n")); }};
            destination d5 {{ file("@OUT@/d5.log" template("$LEVEL $MSG\n")); }};
            destination d6 {{ file("@OUT@/d6.log" template("$LEVEL $MSG\n")); }};
            log {{ source(s);
                junction {{
                    channel {{ filter {{ level(err..emerg); }}; destination(d1); flags(final); }};
                    channel {{ filter {{ level(warning..emerg); }}; destination(d2); }};
                    channel {{ log {{ filter {{ level(notice..emerg); }}; destination(d3); flags(final); }}; log {{ destination(d4); }}; }};
                }};
                destination(d5);
            }};
            log {{ source(s); log {{ filter {{ level(info..emerg); }}; flags(final); }}; log {{ destination(d6); }}; }};"#
        ),
    );
    bsd(
        "final_nested_in_channel",
        &format!(
            r#"options {{ keep-hostname(yes); }}; {NET}
            destination d1 {{ file("@OUT@/d1.log" template("$LEVEL $MSG
")); }};
            destination d2 {{ file("@OUT@/d2.log" template("$LEVEL $MSG
")); }};
            destination d3 {{ file("@OUT@/d3.log" template("$LEVEL $MSG
")); }};
            destination d4 {{ file("@OUT@/d4.log" template("$LEVEL $MSG
")); }};
            destination d5 {{ file("@OUT@/d5.log" template("$LEVEL $MSG
")); }};
            log {{ source(s);
                junction {{
                    channel {{ junction {{
                        channel {{ filter {{ level(err..emerg); }}; destination(d1); flags(final); }};
                        channel {{ destination(d2); }};
                    }}; }};
                    channel {{ destination(d3); }};
                }};
                log {{ filter {{ level(warning..emerg); }}; destination(d4); flags(final); }};
                log {{ destination(d5); }};
            }};"#
        ),
    );
}

/// `graylog2()`: what syslog-ng 3.38's library block sends (GELF documents ended by a NUL,
/// over TCP) and what sluice's driver sends, both to one receiving sluice that keeps each
/// NUL-ended frame as a line; only the documents' receive times (`"timestamp"`) may differ.
#[test]
fn graylog2_sends_gelf_as_syslog_ng_does() {
    if syslog_ng().is_none() {
        return;
    }
    let input: &[u8] = b"<13>Jan  1 00:00:00 host1 app[42]: hello \"world\"\n\
        <34>Feb 10 10:10:10 host2 sshd: second msg with \\ and \t\n\
        <190>Jan  5 13:56:09 phone00 healthapp[28281]: caf\xc3\xa9 \xe2\x82\xac\n\
        <13>Jan  1 00:00:00 host3 noprog\n\
        <165>1 2003-10-11T22:14:15.003Z mymachine evntslog 77 ID47 [a@1 b=\"c\"] an RFC5424 one\n";
    let n = input.iter().filter(|&&b| b == b'\n').count();
    let stamp = regex::Regex::new(r#""timestamp":[0-9]+"#).unwrap();
    let mut outputs = Vec::new();
    for kind in [Server::SyslogNg, Server::Sluice] {
        let gelf = free_port();
        let mut receiver = Running::start(
            Server::Sluice,
            &format!(
                r#"source s {{ network(ip(127.0.0.1) port({gelf}) flags(no-parse)); }};
                destination d {{ file("@OUT@/gelf.log" template("$MSG\n")); }};
                log {{ source(s); destination(d); }};"#
            ),
        );
        receiver.wait_tcp(gelf);
        let port = free_port();
        let mut sender = Running::start(
            kind,
            &format!(
                "@version: 3.38\n@include \"scl.conf\"\n\
                 options {{ keep-hostname(yes); }};\n\
                 source s {{ network(ip(127.0.0.1) port({port})); }};\n\
                 destination d {{ graylog2(host(\"127.0.0.1\") port({gelf})); }};\n\
                 log {{ source(s); destination(d); }};\n"
            ),
        );
        sender.wait_tcp(port);
        send_tcp(port, input, Framing::Newline);
        let file = receiver.out.join("gelf.log");
        common::wait_until(std::time::Duration::from_secs(20), || {
            std::fs::read_to_string(&file).is_ok_and(|t| t.lines().count() >= n)
        });
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        outputs.push(stamp.replace_all(&text, r#""timestamp":T"#).into_owned());
        drop(sender);
    }
    assert_eq!(outputs[0].lines().count(), n, "syslog-ng:\n{}", outputs[0]);
    assert_eq!(outputs[0], outputs[1], "syslog-ng, then sluice");
}
