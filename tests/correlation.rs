//! Correlation compared with syslog-ng 3.38: a pattern database whose rules put messages into
//! contexts (per host, per process, global), whose actions make messages when a rule matches
//! (with a condition and a rate) and when a context ends — on the messages' clock (a message
//! from later ends the contexts before it) and on the wall clock when no message comes —,
//! with `${name}@N`, `$(context-length)`, `$(context-values)`, `$(sum)`, `inherit-mode()` and
//! `<create-context>`.
//!
//! A context ending by a message's time makes its messages as syslog-ng does, but they reach
//! the files up to a second later (sluice's clock ticks once a second off the readers'
//! threads; see docs/compatibility.md), so outputs are compared as sets of lines.

mod common;

use common::{Framing, Running, Server};
use std::time::Duration;

const DATABASE: &str = r#"<?xml version='1.0' encoding='UTF-8'?>
<patterndb version='5' pub_date='2024-01-01'>
  <ruleset name='app' id='rs'>
    <patterns><pattern>app</pattern></patterns>
    <rules>
      <rule provider='t' id='fail' class='violation' context-id='fail-${ip}' context-timeout='3' context-scope='host'>
        <patterns><pattern>failed login for @STRING:user@ from @IPv4:ip@</pattern></patterns>
        <values><value name='n'>$(context-length)</value><value name='users'>$(context-values ${user})</value></values>
        <actions>
          <action trigger='timeout'>
            <message inherit-mode='context'>
              <values>
                <value name='MESSAGE'>$(context-length) failures from ${ip}: $(context-values ${user}) sum=$(sum ${n}) first=${user}@3</value>
              </values>
              <tags><tag>bruteforce</tag></tags>
            </message>
          </action>
          <action trigger='match' condition='"${n}" == "2"' rate='1/60'>
            <message inherit-mode='last-message'>
              <values><value name='MESSAGE'>second failure from ${ip} (${user}) prev ${user}@1</value></values>
            </message>
          </action>
          <action trigger='match' condition='"${n}" == "3"'>
            <create-context context-id='watch-${ip}' context-scope='global' context-timeout='2'>
              <message inherit-mode='none'>
                <values><value name='MESSAGE'>watching ${ip}@1</value><value name='ip'>${ip}@1</value></values>
              </message>
            </create-context>
          </action>
        </actions>
      </rule>
      <rule provider='t' id='watched' class='system' context-id='watch-${ip}' context-scope='global' context-timeout='2'>
        <patterns><pattern>hello from @IPv4:ip@</pattern></patterns>
        <values><value name='seen'>$(context-length) ${MESSAGE}@1</value></values>
        <actions>
          <action trigger='timeout'>
            <message><values><value name='MESSAGE'>watch over: $(context-length) ${MESSAGE}@1</value></values></message>
          </action>
        </actions>
      </rule>
      <rule provider='t' id='session' class='system' context-id='session' context-timeout='2' context-scope='process'>
        <patterns><pattern>session @ESTRING:state: @for @STRING:user@</pattern></patterns>
        <actions>
          <action trigger='match' condition='"${state}" == "closed"'>
            <message inherit-properties='TRUE'>
              <values><value name='MESSAGE'>${user} was in for $(context-length) messages, opened ${state}@1</value></values>
            </message>
          </action>
        </actions>
      </rule>
    </rules>
  </ruleset>
</patterndb>"#;

/// Messages from the past: their own times drive the clock (the `10:00:40` one ends the
/// contexts of ten seconds before); the last contexts end on the wall clock.
const MESSAGES: &str = "\
<38>Jan  1 10:00:00 h1 app[1]: failed login for bob from 10.0.0.1
<38>Jan  1 10:00:01 h1 app[2]: failed login for alice from 10.0.0.1
<38>Jan  1 10:00:02 h2 app[3]: failed login for carol from 10.0.0.1
<38>Jan  1 10:00:03 h1 app[4]: failed login for dave from 10.0.0.1
<38>Jan  1 10:00:04 h1 app[5]: hello from 10.0.0.1
<38>Jan  1 10:00:05 h1 app[7]: session opened for eve
<38>Jan  1 10:00:05 h1 app[8]: session opened for mallory
<38>Jan  1 10:00:06 h1 app[7]: session closed for eve
<38>Jan  1 10:00:40 h1 app[6]: failed login for erin from 10.0.0.1
<38>Jan  1 10:00:41 h1 app[6]: failed login for frank from 10.0.0.1
";

const TEMPLATE: &str = "${ISODATE}|${HOST}|${PROGRAM}|${PID}|${MESSAGE}|${.classifier.rule_id}|${.classifier.context_id}|${n}|${users}|${seen}|${ip}|$TAGS\\n";

/// `run` for syslog-ng and sluice at once (they take seconds of waiting each).
fn side_by_side<T: Send>(run: impl Fn(Server) -> T + Sync) -> (T, T) {
    std::thread::scope(|s| {
        let syslog_ng = s.spawn(|| run(Server::SyslogNg));
        let sluice = s.spawn(|| run(Server::Sluice));
        (syslog_ng.join().unwrap(), sluice.join().unwrap())
    })
}

/// The lines of `file`, sorted.
fn sorted_lines(file: &std::path::Path) -> Vec<String> {
    let mut got: Vec<String> = std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .map(String::from)
        .collect();
    got.sort();
    got
}

/// What `kind` writes for [`MESSAGES`] through `parser`, once `lines` lines are there and
/// nothing more comes for a while; sorted.
fn correlated(kind: Server, parser: &str, lines: usize) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("patterndb.xml");
    std::fs::write(&db, DATABASE).unwrap();
    let port = common::free_port();
    let config = format!(
        r#"@version: 3.38
        source s {{ network(ip(127.0.0.1) port({port}) transport(tcp) keep-hostname(yes)); }};
        parser p {{ {} }};
        destination d {{ file("@OUT@/all.log" template("{TEMPLATE}")); }};
        log {{ source(s); parser(p); destination(d); }};"#,
        parser.replace("DB", &db.display().to_string())
    );
    let mut r = Running::start(kind, &config);
    r.wait_tcp(port);
    common::send_tcp(port, MESSAGES.as_bytes(), Framing::Newline);
    common::wait_lines(&r.out, lines, Duration::from_secs(30));
    common::wait_stable(&r.out, Duration::from_millis(1500), Duration::from_secs(10));
    sorted_lines(&r.out.join("all.log"))
}

#[test]
fn contexts_actions_and_timeouts_as_syslog_ngs_db_parser() {
    if common::syslog_ng().is_none() {
        return;
    }
    let parser = r#"db-parser(file("DB"));"#;
    // Ten messages, one for the second failure, three for the sessions (`==` compares
    // numbers, and words are 0: every session message makes one), three timeouts of the
    // failures' contexts (h2's, h1's first, h1's second), one of the watch.
    let lines = 18;
    let (syslog_ng, sluice) = side_by_side(|kind| correlated(kind, parser, lines));
    assert_eq!(sluice, syslog_ng);
    assert_eq!(syslog_ng.len(), lines, "{syslog_ng:#?}");
    let said = |text: &str| sluice.iter().any(|l| l.contains(text));
    assert!(
        said("|4 failures from 10.0.0.1: bob,alice,dave,dave sum=9 first=bob|"),
        "{sluice:#?}"
    );
    assert!(said("|watch over: 3 hello from 10.0.0.1|"), "{sluice:#?}");
    assert!(
        said("|eve was in for 3 messages, opened closed|"),
        "{sluice:#?}"
    );
}

#[test]
fn aggregate_only_passes_what_the_actions_make() {
    if common::syslog_ng().is_none() {
        return;
    }
    let parser = r#"db-parser(file("DB") inject-mode(aggregate-only));"#;
    let lines = 8;
    let (syslog_ng, sluice) = side_by_side(|kind| correlated(kind, parser, lines));
    assert_eq!(sluice, syslog_ng);
    assert_eq!(syslog_ng.len(), lines, "{syslog_ng:#?}");
}

/// Past `max-contexts()`, the contexts nearest their end end early, their timeout actions
/// run at once, and nothing is lost: every key's summary arrives, long before the timeout.
#[test]
fn a_flood_of_keys_ends_the_oldest_contexts_early_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("patterndb.xml");
    std::fs::write(
        &db,
        r#"<patterndb version='4'><ruleset name='k' id='k'><patterns><pattern>app</pattern></patterns><rules>
        <rule id='key' context-id='${k}' context-timeout='3600' context-scope='global'>
          <patterns><pattern>key @NUMBER:k@</pattern></patterns>
          <actions><action trigger='timeout'><message><values><value name='MESSAGE'>ended ${k}@1</value></values></message></action></actions>
        </rule></rules></ruleset></patterndb>"#,
    )
    .unwrap();
    let port = common::free_port();
    let config = format!(
        r#"@version: 3.38
        source s {{ network(ip(127.0.0.1) port({port}) transport(tcp)); }};
        parser p {{ db-parser(file("{}") max-contexts(64)); }};
        destination d {{ file("@OUT@/ended.log" template("$MSG\n")); }};
        log {{ source(s); parser(p); if (message("^ended")) {{ destination(d); }}; }};"#,
        db.display()
    );
    let mut r = Running::start(Server::Sluice, &config);
    r.wait_tcp(port);
    let keys = 5000;
    let input: String = (0..keys)
        .map(|k| format!("<13>Jan  1 00:00:00 h app: key {k}\n"))
        .collect();
    common::send_tcp(port, input.as_bytes(), Framing::Newline);
    // All but the last (at most) 64 end early; the rest stay open for an hour.
    let have = common::wait_lines(&r.out, keys - 64, Duration::from_secs(30));
    assert!(have >= keys - 64, "{have} of {keys} ended: {}", r.stderr());
    common::wait_stable(&r.out, Duration::from_millis(1500), Duration::from_secs(10));
    let ended = std::fs::read_to_string(r.out.join("ended.log")).unwrap();
    let mut seen: Vec<u32> = ended
        .lines()
        .map(|l| l.strip_prefix("ended ").unwrap().parse().unwrap())
        .collect();
    let n = seen.len();
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(seen.len(), n, "a context ended twice");
    assert!(n <= keys && n >= keys - 64, "{n}");
    // Counted: `parser;db-parser#0;;a;contexts_evicted;N`.
    let (ok, stats) = common::ctl(&r, &["stats"]);
    assert!(ok, "{stats}");
    let counted = |kind: &str| -> usize {
        let line = format!("parser;db-parser#0;;a;{kind};");
        stats
            .lines()
            .find_map(|l| l.strip_prefix(&line))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {kind} in {stats}"))
    };
    assert_eq!(counted("contexts_evicted"), n, "{stats}");
    assert_eq!(counted("contexts") + n, keys, "{stats}");
}

/// Messages for `grouping-by()`: programs on two hosts, one group ended by its trigger, one
/// too small for `having()`, one from a program `where()` leaves out.
const GROUPED: &str = "\
<38>Jan  1 10:00:00 h1 app[1]: b second
<38>Jan  1 10:00:00 h1 app[1]: a first
<38>Jan  1 10:00:01 h2 app[2]: c other host
<38>Jan  1 10:00:01 h2 app[2]: d other host again
<38>Jan  1 10:00:02 h1 db[3]: lonely
<38>Jan  1 10:00:02 h1 job[4]: step 1
<38>Jan  1 10:00:03 h1 job[4]: end
<38>Jan  1 10:00:03 h1 job[4]: step 2 after the end
<38>Jan  1 10:00:04 h1 cron[5]: not grouped
";

#[test]
fn grouping_by_aggregates_as_syslog_ngs() {
    if common::syslog_ng().is_none() {
        return;
    }
    let run = |kind: Server| {
        let port = common::free_port();
        let config = format!(
            r#"@version: 3.38
            source s {{ network(ip(127.0.0.1) port({port}) transport(tcp) keep-hostname(yes)); }};
            parser p {{
                grouping-by(
                    key("${{PROGRAM}}") scope(host) timeout(2)
                    where(not program("cron"))
                    trigger(message("^end"))
                    having("$(context-length)" >= "2")
                    sort-key("$MSG")
                    aggregate(
                        value("MESSAGE" "$(context-length) of $PROGRAM: $(context-values $MSG)")
                        value("first" "${{MSG}}@2")
                        tags("grouped")
                    )
                );
            }};
            destination d {{ file("@OUT@/all.log" template("${{HOST}}|${{PROGRAM}}|${{PID}}|${{MESSAGE}}|${{first}}|${{.classifier.context_id}}|$TAGS\n")); }};
            log {{ source(s); parser(p); destination(d); }};"#
        );
        let mut r = Running::start(kind, &config);
        r.wait_tcp(port);
        common::send_tcp(port, GROUPED.as_bytes(), Framing::Newline);
        // Nine messages; aggregates of h1's app, h2's app, job (by its trigger) and job again
        // (the message after the end, alone: having() leaves it out), db's too small.
        common::wait_lines(&r.out, 12, Duration::from_secs(30));
        common::wait_stable(&r.out, Duration::from_millis(1500), Duration::from_secs(10));
        sorted_lines(&r.out.join("all.log"))
    };
    let (syslog_ng, sluice) = side_by_side(run);
    assert_eq!(sluice, syslog_ng);
    assert_eq!(syslog_ng.len(), 12, "{syslog_ng:#?}");
    // Sorted by sort-key(); the aggregate is formatted with itself as the last message.
    let aggregate = "h1|app|1|3 of app: \"a first\",\"b second\",\"b second\"|a first|app|grouped,";
    assert!(
        sluice.iter().any(|l| l.starts_with(aggregate)),
        "{sluice:#?}"
    );
}

/// A reload hands the open contexts to the new configuration's parser of the same database:
/// a context begun before it ends after it with every message.
#[test]
fn a_reload_keeps_the_open_contexts() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("patterndb.xml");
    // Five seconds: time enough for the reload between the messages.
    std::fs::write(
        &db,
        DATABASE.replace("context-timeout='3'", "context-timeout='5'"),
    )
    .unwrap();
    let port = common::free_port();
    let config = |extra: &str| {
        format!(
            r#"@version: 3.38
            source s {{ network(ip(127.0.0.1) port({port}) transport(tcp) keep-hostname(yes)); }};
            parser p {{ db-parser(file("{}")); }};
            destination d {{ file("@OUT@/all.log" template("$MSG\n")); }};
            log {{ source(s); parser(p); destination(d); }};
            {extra}"#,
            db.display()
        )
    };
    let mut r = Running::start(Server::Sluice, &config(""));
    r.wait_tcp(port);
    let send = |user: &str| {
        let line =
            format!("<38>Jan  1 10:00:00 h1 app[1]: failed login for {user} from 10.9.9.9\n");
        common::send_tcp(port, line.as_bytes(), Framing::Newline);
    };
    send("before1");
    send("before2");
    common::wait_lines(&r.out, 3, Duration::from_secs(10));
    // A changed configuration: the same parser, one more statement.
    std::fs::write(
        r.dir.path().join("server.conf"),
        config("destination unused { file(\"/dev/null\"); };")
            .replace("@OUT@", &r.out.to_string_lossy()),
    )
    .unwrap();
    let (ok, said) = common::ctl(&r, &["reload"]);
    assert!(ok, "{said}");
    send("after");
    let file = r.out.join("all.log");
    common::wait_until(Duration::from_secs(20), || {
        std::fs::read_to_string(&file).is_ok_and(|t| t.contains("4 failures from"))
    });
    let text = std::fs::read_to_string(&file).unwrap();
    // The summary counts itself (`$(context-length)` with the new message last).
    assert!(
        text.contains("4 failures from 10.9.9.9: before1,before2,after,after sum=9 first=before1"),
        "{text}\n{}",
        r.stderr()
    );
}

/// `pdbtool match -f` on the same messages: what every context makes, in syslog-ng's order
/// (the contexts a message's time ends, the message, what its rule's actions make; at the
/// end, every context still open).
#[test]
fn pdbtool_match_prints_what_contexts_make_as_syslog_ngs() {
    if common::syslog_ng().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("patterndb.xml");
    std::fs::write(&db, DATABASE).unwrap();
    let messages = dir.path().join("messages.log");
    std::fs::write(&messages, MESSAGES).unwrap();
    let run = |tool: &[&str]| {
        let out = std::process::Command::new(tool[0])
            .args(&tool[1..])
            .args([
                "match",
                "-p",
                db.to_str().unwrap(),
                "-f",
                messages.to_str().unwrap(),
            ])
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let sluice = common::sluice_bin();
    let ours = run(&[sluice.to_str().unwrap(), "pdbtool"]);
    assert_eq!(ours, run(&["pdbtool"]));
    assert!(
        ours.1
            .contains("MESSAGE=watch over: 3 hello from 10.0.0.1\n"),
        "{}",
        ours.1
    );
}

/// `inject-mode(internal)`: what the actions make goes to the `internal()` source, not on in
/// the path, as in syslog-ng.
#[test]
fn internal_inject_mode_hands_what_actions_make_to_internal() {
    if common::syslog_ng().is_none() {
        return;
    }
    let run = |kind: Server| {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("patterndb.xml");
        std::fs::write(&db, DATABASE).unwrap();
        let port = common::free_port();
        let config = format!(
            r#"@version: 3.38
            source s {{ network(ip(127.0.0.1) port({port}) transport(tcp) keep-hostname(yes)); }};
            source own {{ internal(); }};
            parser p {{ db-parser(file("{}") inject-mode(internal)); }};
            destination d {{ file("@OUT@/path.log" template("$MSG\n")); }};
            destination i {{ file("@OUT@/internal.log" template("${{HOST}}|${{PROGRAM}}|${{PID}}|$MSG|${{n}}|${{.classifier.rule_id}}|$TAGS\n")); }};
            log {{ source(s); parser(p); destination(d); }};
            log {{ source(own); filter {{ message("failure|was in|watch over"); }}; destination(i); }};"#,
            db.display()
        );
        let mut r = Running::start(kind, &config);
        r.wait_tcp(port);
        common::send_tcp(port, MESSAGES.as_bytes(), Framing::Newline);
        common::wait_lines(&r.out, 10 + 8, Duration::from_secs(30));
        common::wait_stable(&r.out, Duration::from_millis(1500), Duration::from_secs(10));
        // Tags compared as sets: syslog-ng numbers `.source.own` after the database's tags
        // (it registers tags as it starts each log path), sluice before (each source's first).
        let lines = |f: &str| -> Vec<String> {
            let mut l: Vec<String> = std::fs::read_to_string(r.out.join(f))
                .unwrap_or_default()
                .lines()
                .map(|l| match l.rsplit_once('|') {
                    Some((head, tags)) => {
                        let mut tags: Vec<&str> = tags.split(',').collect();
                        tags.sort_unstable();
                        format!("{head}|{}", tags.join(","))
                    }
                    None => l.to_string(),
                })
                .collect();
            l.sort();
            l
        };
        (lines("path.log"), lines("internal.log"))
    };
    let (syslog_ng, sluice) = side_by_side(run);
    assert_eq!(sluice, syslog_ng);
    assert_eq!(
        (syslog_ng.0.len(), syslog_ng.1.len()),
        (10, 8),
        "{syslog_ng:#?}"
    );
}
