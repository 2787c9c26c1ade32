use super::*;

/// The fields of `frame` as strings, for compact assertions.
#[derive(Debug, PartialEq)]
struct Seen {
    pri: u16,
    host: Option<String>,
    program: Option<String>,
    pid: Option<String>,
    msgid: Option<String>,
    message: String,
}

fn text(t: &Option<Text>, frame: &[u8]) -> Option<String> {
    t.as_ref()
        .map(|t| String::from_utf8_lossy(t.of(frame)).into_owned())
}

fn parse_with(frame: &str, flags: ParseFlags) -> (Seen, SyslogFields) {
    let opts = ParseOptions {
        flags,
        pid: 42,
        ..ParseOptions::default()
    };
    let mut f = SyslogFields::default();
    parse(frame.as_bytes(), &opts, &mut f);
    let b = frame.as_bytes();
    let seen = Seen {
        pri: f.pri,
        host: text(&f.host, b),
        program: text(&f.program, b),
        pid: text(&f.pid, b),
        msgid: text(&f.msgid, b),
        message: String::from_utf8_lossy(f.message.of(b)).into_owned(),
    };
    (seen, f)
}

fn bsd(frame: &str) -> (Seen, SyslogFields) {
    parse_with(frame, ParseFlags::default())
}

fn ietf(frame: &str) -> (Seen, SyslogFields) {
    parse_with(
        frame,
        ParseFlags {
            syslog_protocol: true,
            ..ParseFlags::default()
        },
    )
}

fn s(v: &str) -> Option<String> {
    Some(v.to_string())
}

#[test]
fn rfc3164_complete_header() {
    let (seen, f) = bsd("<190>Jan  5 13:56:09 phone00 healthapp[28281]: hello world\n");
    assert_eq!(
        seen,
        Seen {
            pri: 190,
            host: s("phone00"),
            program: s("healthapp"),
            pid: s("28281"),
            msgid: None,
            message: "hello world".into(),
        }
    );
    let stamp = f.stamp.unwrap();
    assert_eq!((stamp.month, stamp.day, stamp.second), (1, 5, 9));
    assert!(f.tags.is_empty());
    assert_eq!(
        f.legacy_msghdr
            .unwrap()
            .of(b"<190>Jan  5 13:56:09 phone00 healthapp[28281]: hello"),
        b"healthapp[28281]: "
    );
}

#[test]
fn rfc3164_missing_pri_gets_user_notice() {
    let (seen, f) = bsd("Jan  5 13:56:09 host prog: text");
    assert_eq!(seen.pri, 13);
    assert!(f.tags.contains(ParseTag::MissingPri));
    assert_eq!(seen.program, s("prog"));
}

#[test]
fn rfc3164_invalid_pri_keeps_the_whole_line() {
    let (seen, f) = bsd("<1x3>Jan  5 13:56:09 host prog: text");
    assert_eq!(seen.message, "<1x3>Jan  5 13:56:09 host prog: text");
    assert!(f.tags.contains(ParseTag::InvalidPri));
    assert_eq!(seen.pri, 13);
}

#[test]
fn rfc3164_without_timestamp_is_program_and_message() {
    let (seen, f) = bsd("<7>prog[12] message text");
    assert_eq!(
        (seen.program, seen.pid, seen.host),
        (s("prog"), s("12"), None)
    );
    assert_eq!(seen.message, "message text");
    assert!(f.tags.contains(ParseTag::MissingTimestamp));
    assert!(f.stamp.is_none());
}

#[test]
fn rfc3164_kernel_message_from_this_machine() {
    let flags = ParseFlags {
        local: true,
        ..ParseFlags::default()
    };
    let (seen, _) = parse_with("<4>[ 12.3] usb 1-1: new device", flags);
    assert_eq!(seen.program, s("kernel"));
    assert_eq!(seen.message, "[ 12.3] usb 1-1: new device");
}

#[test]
fn rfc3164_no_hostname_flag() {
    let flags = ParseFlags {
        expect_hostname: false,
        ..ParseFlags::default()
    };
    let (seen, _) = parse_with("<13>Jan  5 13:56:09 prog: text", flags);
    assert_eq!((seen.host, seen.program), (None, s("prog")));
}

#[test]
fn rfc3164_program_without_colon_or_space() {
    let (seen, _) = bsd("<13>Jan  5 13:56:09 host prog text here");
    assert_eq!(
        (seen.program, seen.message.as_str()),
        (s("prog"), "text here")
    );
    let (seen, _) = bsd("<13>Jan  5 13:56:09 host prog[1]:text");
    assert_eq!((seen.pid, seen.message.as_str()), (s("1"), "text"));
}

#[test]
fn rfc3164_cisco_sequence_and_time_quality() {
    let (seen, f) = bsd("<187>123: *Mar  1 18:48:50.483 UTC: %SYS-5-CONFIG_I: Configured");
    // "UTC:" is not followed by a space-delimited word before the program, so it is the host.
    assert_eq!(f.sdata.len(), 2);
    assert_eq!(f.sdata[0].value, Text::Span(Span::new(5, 8)));
    assert_eq!(f.sdata[1].value, Text::Static(b"0"));
    assert_eq!(f.stamp.unwrap().micros, 483_000);
    assert_eq!(seen.program, s("UTC"));
}

#[test]
fn rfc3164_pix_timestamp_with_year() {
    let (seen, f) = bsd("<166>Jun 13 2024 12:34:56: %ASA-6-302013: Built inbound TCP");
    assert_eq!(f.stamp.unwrap().year, Some(2024));
    assert_eq!(seen.host, None);
    assert_eq!(seen.program, s("%ASA-6-302013"));
    assert_eq!(seen.message, "Built inbound TCP");
}

#[test]
fn rfc3164_ipv6_hostname_and_colon_ended_word() {
    let (seen, _) = bsd("<13>Jan  5 13:56:09 fe80::1 prog: text");
    assert_eq!(seen.host, s("fe80::1"));
    let (seen, _) = bsd("<13>Jan  5 13:56:09 prog: text");
    assert_eq!((seen.host, seen.program), (None, s("prog")));
}

#[test]
fn rfc3164_aix_forwarded_and_repeated() {
    let (seen, _) = bsd("<13>Jan  5 13:56:09 Message forwarded from aixhost: prog: text");
    assert_eq!((seen.host, seen.program), (s("aixhost"), s("prog")));
    let (seen, _) = bsd("<13>Jan  5 13:56:09 last message repeated 3 times");
    assert_eq!((seen.host, seen.program), (None, None));
    assert_eq!(seen.message, "last message repeated 3 times");
}

#[test]
fn rfc3164_check_hostname_rejects_bad_bytes() {
    let flags = ParseFlags {
        check_hostname: true,
        ..ParseFlags::default()
    };
    let (seen, f) = parse_with("<13>Jan  5 13:56:09 bad$host prog: text", flags);
    assert_eq!(seen.host, None);
    assert!(f.tags.contains(ParseTag::InvalidHostname));
}

#[test]
fn rfc3164_sanitize_utf8() {
    let flags = ParseFlags {
        sanitize_utf8: true,
        ..ParseFlags::default()
    };
    let opts = ParseOptions {
        flags,
        ..ParseOptions::default()
    };
    let mut f = SyslogFields::default();
    parse(b"<13>Jan  5 13:56:09 host prog: a\xffb\tc", &opts, &mut f);
    assert_eq!(f.message, Text::Owned(b"a\\xffb\\tc".to_vec().into()));
    assert!(f.tags.contains(ParseTag::Utf8Sanitized));
}

#[test]
fn trailing_newlines_and_nuls_are_not_part_of_the_message() {
    let (seen, _) = bsd("<13>Jan  5 13:56:09 host prog: text\n\0\n");
    assert_eq!(seen.message, "text");
}

#[test]
fn rfc5424_complete() {
    let frame = r#"<165>1 2003-10-11T22:14:15.003Z mymachine.example.com evntslog 7 ID47 [exampleSDID@32473 iut="3" eventSource="Application"][x@1] BOMAn application"#
        .replace("BOM", "\u{feff}");
    let (seen, f) = ietf(&frame);
    assert_eq!(
        seen,
        Seen {
            pri: 165,
            host: s("mymachine.example.com"),
            program: s("evntslog"),
            pid: s("7"),
            msgid: s("ID47"),
            message: "An application".into(),
        }
    );
    assert!(f.utf8 && f.rfc5424);
    let b = frame.as_bytes();
    assert!(f.sdata.is_empty(), "plain values are read in place");
    let names: Vec<String> = f
        .sd_params(b)
        .map(|p| {
            format!(
                "{}.{}={}",
                String::from_utf8_lossy(p.id),
                String::from_utf8_lossy(p.name.unwrap_or_default()),
                String::from_utf8_lossy(p.value)
            )
        })
        .collect();
    assert_eq!(
        names,
        [
            "exampleSDID@32473.iut=3",
            "exampleSDID@32473.eventSource=Application",
            "x@1.="
        ]
    );
    let stamp = f.stamp.unwrap();
    assert_eq!(
        (stamp.year, stamp.micros, stamp.offset),
        (Some(2003), 3000, Some(0))
    );
}

#[test]
fn rfc5424_nil_values() {
    let (seen, f) = ietf("<13>1 - - - - - - text");
    assert_eq!(
        (seen.host, seen.program, seen.pid, seen.msgid),
        (None, None, None, None)
    );
    assert_eq!(seen.message, "text");
    assert!(f.stamp.is_none());
    for tag in [
        ParseTag::Rfc5424MissingHostname,
        ParseTag::Rfc5424MissingAppName,
        ParseTag::Rfc5424MissingProcid,
        ParseTag::Rfc5424MissingMsgid,
        ParseTag::Rfc5424MissingSdata,
    ] {
        assert!(f.tags.contains(tag), "{tag:?}");
    }
}

#[test]
fn rfc5424_sd_escapes() {
    let frame = r#"<13>1 - h a p m [id a="q\"b\]c\\d\x"] m"#;
    let (_, f) = ietf(frame);
    assert_eq!(
        f.sdata[0].value,
        Text::Owned(br#"q"b]c\d\x"#.to_vec().into())
    );
}

#[test]
fn rfc5424_falls_back_to_rfc3164() {
    let (seen, f) = ietf("<13>Jan  5 13:56:09 host prog: text");
    assert_eq!((seen.host, seen.program), (s("host"), s("prog")));
    assert!(!f.rfc5424);
}

#[test]
fn rfc5424_unparseable_keeps_the_frame_in_an_error_text() {
    let (seen, f) = ietf(r#"<13>1 - h a p m [id a="unterminated] text"#);
    assert!(f.tags.contains(ParseTag::Rfc5424Unparseable));
    assert_eq!(seen.program, s("syslog-ng"));
    assert_eq!(seen.pid, s("42"));
    assert_eq!(seen.pri, 43);
    assert_eq!(
        seen.message,
        r#"Error processing log message: <13>1 - h a p m [id a="unterminated>@<] text"#
    );
}

#[test]
fn rfc5424_missing_message() {
    let (seen, f) = ietf("<13>1 2020-01-01T00:00:00Z h a p m -");
    assert_eq!(seen.message, "");
    assert!(f.tags.contains(ParseTag::Rfc5424MissingMessage));
}

#[test]
fn no_multi_line_flattens_line_breaks() {
    let flags = ParseFlags {
        no_multi_line: true,
        ..ParseFlags::default()
    };
    let (seen, _) = parse_with("<13>Jan  5 13:56:09 host prog: a\nb\rc", flags);
    assert_eq!(seen.message, "a b c");
}

#[test]
fn arbitrary_bytes_never_panic() {
    let samples: [&[u8]; 8] = [
        b"",
        b"<",
        b"<>",
        b"<99999999999999>",
        b"<13>1",
        b"<13>1 ",
        b"<13>1 2020-01-01T00:00:00Z h a p m [",
        b"\xff\xfe<13>\x00",
    ];
    for s in samples {
        for protocol in [false, true] {
            let opts = ParseOptions {
                flags: ParseFlags {
                    syslog_protocol: protocol,
                    sanitize_utf8: true,
                    ..ParseFlags::default()
                },
                ..ParseOptions::default()
            };
            let mut f = SyslogFields::default();
            parse(s, &opts, &mut f);
        }
    }
}

/// `id.name=value` for every structured-data parameter of `frame`, and whether the parser read
/// them in place (nothing stored).
fn sd_list(frame: &str, value_max: usize) -> (Vec<String>, bool) {
    let opts = ParseOptions {
        flags: ParseFlags {
            syslog_protocol: true,
            ..ParseFlags::default()
        },
        sdata_param_value_max: value_max,
        ..ParseOptions::default()
    };
    let mut f = SyslogFields::default();
    parse(frame.as_bytes(), &opts, &mut f);
    let list = f
        .sd_params(frame.as_bytes())
        .map(|p| {
            let name = p.name.map(|n| String::from_utf8_lossy(n).into_owned());
            format!(
                "{}.{}={}",
                String::from_utf8_lossy(p.id),
                name.unwrap_or("(none)".into()),
                String::from_utf8_lossy(p.value)
            )
        })
        .collect();
    (list, f.sd_in_place.is_some() && f.sdata.is_empty())
}

#[test]
fn rfc5424_sd_is_read_in_place_unless_a_value_changed() {
    let plain = r#"<13>1 - h a p m [a x="1" y=""][b][c z="=v w"] m"#;
    let want = ["a.x=1", "a.y=", "b.(none)=", "c.z==v w"];
    assert_eq!(sd_list(plain, 100), (want.map(String::from).to_vec(), true));
    // One escaped value, or one longer than the limit: the whole section is stored, in order.
    let escaped = r#"<13>1 - h a p m [a x="1" y="q\"q"][b][c z="=v w"] m"#;
    let (got, in_place) = sd_list(escaped, 100);
    assert_eq!(got, ["a.x=1", "a.y=q\"q", "b.(none)=", "c.z==v w"]);
    assert!(!in_place);
    let (got, in_place) = sd_list(plain, 2);
    assert_eq!(got, ["a.x=1", "a.y=", "b.(none)=", "c.z==v"]);
    assert!(!in_place);
}

#[test]
fn rfc5424_sd_errors_stop_where_syslog_ng_stops() {
    for (frame, stop) in [
        (r#"<13>1 - h a p m [a x="1]" y="2"] m"#, 24),
        (r#"<13>1 - h a p m [a x="1"#, 23),
        (r#"<13>1 - h a p m [a x="1\"#, 24),
    ] {
        let (seen, f) = ietf(frame);
        assert!(f.tags.contains(ParseTag::Rfc5424Unparseable), "{frame}");
        let marked = format!("{}>@<{}", &frame[..stop - 1], &frame[stop - 1..]);
        assert_eq!(
            seen.message,
            format!("Error processing log message: {marked}"),
            "{frame}"
        );
    }
}

#[test]
fn rfc5424_sd_names_stop_at_the_first_byte_a_name_cannot_hold() {
    let head = "<13>1 - h a p m ";
    let a254 = "a".repeat(254);
    for (sd, stop) in [
        ("[a=b x=\"1\"] m", "["),
        ("[ x=\"1\"] m", ""),
        ("[a x=\"1\" =\"2\"] m", "[a x=\"1\""),
        ("[a\u{e9} x=\"1\"] m", "["),
        ("[a x", "[a "),
        ("[a", "["),
        ("[a x\"y=\"1\"] m", "[a "),
        (&format!("[{a254}aa x=\"1\"] m"), &format!("[{a254}")),
        (&format!("[a {a254}aa=\"1\"] m"), &format!("[a {a254}")),
    ] {
        let frame = format!("{head}{sd}");
        let (seen, f) = ietf(&frame);
        assert!(f.tags.contains(ParseTag::Rfc5424Unparseable), "{frame}");
        let at = head.len() + stop.len();
        let marked = format!("{}>@<{}", &frame[..at], &frame[at..]);
        assert_eq!(
            seen.message,
            format!("Error processing log message: {marked}")
        );
    }
    // 255 bytes is as long as a name may be.
    for sd in [
        format!("[{a254}a x=\"1\"] m"),
        format!("[a {a254}a=\"1\"] m"),
        "[a] m".into(),
    ] {
        let (seen, f) = ietf(&format!("{head}{sd}"));
        assert!(!f.tags.contains(ParseTag::Rfc5424Unparseable), "{sd}");
        assert_eq!(seen.message, "m");
    }
}
