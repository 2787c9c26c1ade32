use super::*;
use crate::testing::message;

fn fmt(template: &str, frame: &str) -> String {
    let t = Template::compile(template).unwrap();
    String::from_utf8(t.format(&message(frame))).unwrap()
}

const BSD: &str = "<190>Jan  5 13:56:09 phone00 healthapp[28281]: hello \"world\"";

#[test]
fn header_macros() {
    assert_eq!(
        fmt("$HOST|$PROGRAM|${PID}|$MSGHDR|$MSG|$FACILITY.$LEVEL|$PRI|$TAG|$BSDTAG|$FACILITY_NUM $SEVERITY_NUM", BSD),
        "phone00|healthapp|28281|healthapp[28281]: |hello \"world\"|local7.info|190|be|6X|23 6"
    );
    assert_eq!(
        fmt("$SOURCEIP $HOST_FROM $SOURCE", BSD),
        "10.1.2.3 10.1.2.3 s_test"
    );
}

#[test]
fn dates_of_stamp_and_receipt() {
    assert_eq!(
        fmt("$DATE|$ISODATE|$FULLDATE|$UNIXTIME", BSD),
        "Jan  5 13:56:09|2025-01-05T13:56:09+00:00|2025 Jan  5 13:56:09|1736085369"
    );
    assert_eq!(
        fmt(
            "$YEAR-$MONTH-$DAY $HOUR:$MIN:$SEC $WEEKDAY $WEEK_DAY_NAME $MONTH_NAME $TZOFFSET",
            BSD
        ),
        "2025-01-05 13:56:09 Sun Sunday January +00:00"
    );
    assert_eq!(
        fmt(
            "$R_ISODATE $R_MSEC $R_USEC $S_YEAR_DAY $R_HOUR12$R_AMPM",
            BSD
        ),
        "2025-06-15T12:00:00+00:00 250 250000 005 12PM"
    );
}

#[test]
fn sdata_values_and_the_sdata_macro() {
    let frame =
        r#"<13>1 2025-01-05T13:56:09.5+01:00 h app 1 ID [a@1 x="1" y="q\"\]"][b z="2"] text"#;
    assert_eq!(
        fmt("${.SDATA.a@1.y}|${.SDATA.b.z}|$SDATA|$MSGID", frame),
        r#"q"]|2|[a@1 x="1" y="q\"\]"][b z="2"]|ID"#
    );
    assert_eq!(fmt("$ISODATE", frame), "2025-01-05T13:56:09+01:00");
}

#[test]
fn defaults_dollars_and_escaping() {
    assert_eq!(fmt("${MSGID:-none} $$5 $ x", BSD), "none $5 $ x");
    let mut t = Template::compile("$MSG").unwrap();
    t.escape = true;
    assert_eq!(
        String::from_utf8(t.format(&message(BSD))).unwrap(),
        "hello \\\"world\\\""
    );
}

/// What syslog-ng 3.38 writes for these lines with `template("$(format-gelf)")` (its receive
/// time masked): names in its order, casts, empty values left out, a NUL at the end.
#[test]
fn format_gelf_is_syslog_ngs() {
    let gelf = |frame| {
        let out = fmt("$(format-gelf)", frame);
        let at = out.find("\"timestamp\":").unwrap() + 12;
        let end = at + out[at..].find(',').unwrap();
        format!("{}T{}", &out[..at], &out[end..])
    };
    assert_eq!(
        gelf("<13>Jan  1 00:00:00 host1 app[42]: hello \"world\""),
        "{\"version\":\"1.1\",\"timestamp\":T,\"short_message\":\"hello \\\"world\\\"\",\"level\":5,\"host\":\"host1\",\"_program\":\"app\",\"_pid\":42,\"_facility\":\"user\"}\0"
    );
    assert_eq!(
        gelf("<34>Feb 10 10:10:10 host2 sshd: second msg"),
        "{\"version\":\"1.1\",\"timestamp\":T,\"short_message\":\"second msg\",\"level\":2,\"host\":\"host2\",\"_program\":\"sshd\",\"_facility\":\"auth\"}\0"
    );
    assert_eq!(
        gelf("<13>Jan  1 00:00:00 host3 noprog"),
        "{\"version\":\"1.1\",\"timestamp\":T,\"short_message\":\"-\",\"level\":5,\"host\":\"host3\",\"_program\":\"noprog\",\"_facility\":\"user\"}\0"
    );
    assert_eq!(fmt("$(binary 0x41 66 0103)", BSD), "ABC");
    assert!(Template::compile("$(binary 256)").is_err());
}

#[test]
fn unsupported_parts_are_refused() {
    assert!(Template::compile("$(format-cim)")
        .unwrap_err()
        .contains("not supported yet"));
    assert!(Template::compile("$RCPTID")
        .unwrap_err()
        .contains("not supported yet"));
    assert!(Template::compile("${MSG").is_err());
}

#[test]
fn escaping_writes_control_characters_in_octal() {
    let mut t = Template::compile("$MSG").unwrap();
    t.escape = true;
    assert_eq!(
        String::from_utf8(t.format(&message("<13>Jan  5 13:56:09 h p: a\tb'c"))).unwrap(),
        "a\\011b\\'c"
    );
}

#[test]
fn sequence_numbers_of_local_messages_join_the_sdata() {
    let t = Template::compile("$SEQNUM|$SDATA").unwrap();
    let plain = message("<13>1 2025-01-05T13:56:09Z h app - - [a b=\"c\"] text");
    let mut out = Vec::new();
    t.append(&plain, 7, &mut out);
    assert_eq!(out, b"7|[a b=\"c\"][meta sequenceId=\"7\"]");
    let with_meta = message("<13>1 2025-01-05T13:56:09Z h app - - [meta x=\"1\"] text");
    out.clear();
    t.append(&with_meta, 3, &mut out);
    assert_eq!(out, b"3|[meta sequenceId=\"3\" x=\"1\"]");
    assert_eq!(with_meta.sequence_id(), 0);
}

#[test]
fn uuid_is_a_random_version_4_uuid() {
    let t = Template::compile("$(uuid)").unwrap();
    let (a, b) = (t.format(&message(BSD)), t.format(&message(BSD)));
    let a = String::from_utf8(a).unwrap();
    assert_eq!(a.len(), 36);
    assert_eq!(a.as_bytes()[14], b'4', "version 4: {a}");
    assert!(a.split('-').map(str::len).eq([8, 4, 4, 4, 12]), "{a}");
    assert_ne!(a.as_bytes(), b.as_slice());
}

#[test]
fn iterate_steps_once_per_message_from_its_initial_value() {
    let t = Template::compile("$(iterate $(+ $_ 2) 1)|[$_]").unwrap();
    let msg = message(BSD);
    let runs: Vec<String> = (0..3)
        .map(|_| String::from_utf8(t.format(&msg)).unwrap())
        .collect();
    assert_eq!(runs, ["1|[]", "3|[]", "5|[]"]);
    // A copy of the template (one per writer thread) shares the sequence.
    let copy = t.clone();
    assert_eq!(String::from_utf8(copy.format(&msg)).unwrap(), "7|[]");
}

#[test]
fn list_templates_and_their_errors() {
    assert_eq!(
        fmt(
            "$(map $(map x$_ $_) a,b)|$(filter (\"$_\" ne \"b\") a,b,c)",
            BSD
        ),
        "xa,xb|a,c"
    );
    for (bad, says) in [
        ("$(map $MSG)", "$(map) needs two arguments"),
        ("$(iterate x)", "$(iterate) needs two arguments"),
        (
            "$(grep (level(err)))",
            "$(grep) needs a filter and a template",
        ),
        ("$(filter (nonsense) a)", "$(filter) condition"),
        ("$(list-search --mode fuzzy a b)", "invalid mode fuzzy"),
        ("$(template nope)", "no template statement has that name"),
        (
            "$(format-welf --scope nothing)",
            "$(format-welf) unknown scope nothing",
        ),
    ] {
        let err = Template::compile(bad).unwrap_err();
        assert!(err.contains(says), "{bad}: {err}");
    }
}

/// syslog-ng 4.x's own tests of `$(format-date)`, with zones named rather than the machine's.
#[test]
fn format_date_formats_the_message_time_or_a_timestamp() {
    assert_eq!(
        fmt(
            "$(format-date %Y-%m-%dT%H:%M:%S)|$(format-date '%A %z')",
            BSD
        ),
        "2025-01-05T13:56:09|Sunday +0000"
    );
    assert_eq!(
        fmt(
            "$(format-date %Y-%m-%dT%H:%M:%S 1667500613.613+05:00)|$(format-date --time-zone America/Los_Angeles %Y-%m-%dT%H:%M:%S 1667500613)|$(format-date --time-zone=UTC %H:%M%z 1667500613Z)|$(format-date --time-zone UTC %Y x)",
            BSD
        ),
        "2022-11-03T23:36:53|2022-11-03T11:36:53|18:36+0000|1970"
    );
    let err = Template::compile("$(format-date --time-zone Nowhere/Atall %Y)").unwrap_err();
    assert!(err.contains("Nowhere/Atall"), "{err}");
}

#[test]
fn repeated_sdata_parameters_show_once_with_their_last_value() {
    // Checked against syslog-ng 3.38 (tests/data/tricky-rfc5424.log has these lines).
    let t = Template::compile("$SDATA").unwrap();
    let sdata = |sd: &str| {
        let frame = format!("<13>1 2025-01-05T13:56:09Z h app - - {sd} text");
        String::from_utf8(t.format(&message(&frame))).unwrap()
    };
    assert_eq!(
        sdata("[a x=\"1\" x=\"2\" y=\"3\"][b z=\"1\"][a x=\"9\"]"),
        "[a x=\"9\" y=\"3\"][b z=\"1\"]"
    );
    assert_eq!(
        sdata("[a x=\"1\"][b z=\"1\"][a y=\"2\"]"),
        "[a x=\"1\"][b z=\"1\"][a y=\"2\"]"
    );
    // Many parameters take the set, not the pairwise comparison.
    let many: String = (0..40).map(|i| format!(" p{i}=\"{i}\"")).collect();
    assert_eq!(
        sdata(&format!("[a{many} p3=\"x\"]")),
        format!("[a{}]", many.replace("p3=\"3\"", "p3=\"x\""))
    );
    assert_eq!(sdata(&format!("[a{many}]")), format!("[a{many}]"));
}

#[test]
fn at_signs_after_values_are_message_references() {
    // `@@` is a literal `@`; `@0` the message itself; `@1` an earlier message of a correlation
    // context, none here; `@` before anything else stays.
    assert_eq!(
        fmt(
            "${HOST}@@${PROGRAM}|${HOST}@0|${HOST}@1|${HOST}@x|$(echo a)@@b",
            BSD
        ),
        "phone00@healthapp|phone00||phone00@x|a@b"
    );
}

#[test]
fn calls_nested_past_the_bound_are_refused_and_those_within_expand() {
    let nested = |n: usize| format!("{}x{}", "$(echo ".repeat(n), ")".repeat(n));
    assert_eq!(fmt(&nested(MAX_CALLS_NESTED), "<13>m"), "x");
    let e = Template::compile(&nested(MAX_CALLS_NESTED + 1))
        .err()
        .unwrap();
    assert_eq!(
        e,
        format!("template functions nested more than {MAX_CALLS_NESTED} deep")
    );
    // Parentheses that open no call do not count.
    let text = format!("{}{}", "(".repeat(1000), ")".repeat(1000));
    assert_eq!(fmt(&text, "<13>m"), text);
}
