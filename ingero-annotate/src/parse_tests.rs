//! Tests of `parse_line`: one per rule, plus the tricky encodings.

use super::*;
use crate::test_rng::NOW;

fn ok(line: &str) -> WireAnnotation {
    match parse_line(line.as_bytes(), NOW) {
        Ok(a) => a,
        Err(e) => panic!("{line:?} was refused: {e}"),
    }
}

fn reason(line: &[u8]) -> RejectReason {
    match parse_line(line, NOW) {
        Ok(a) => panic!("{:?} was accepted: {a:?}", String::from_utf8_lossy(line)),
        Err(e) => e.reason,
    }
}

fn r(line: &str) -> RejectReason {
    reason(line.as_bytes())
}

#[test]
fn accepts_the_published_client_line() {
    let a = ok(r#"{"labels":{"step":"42"},"pid":1234,"ts":1700000000000000000}"#);
    assert_eq!(a.labels, vec![("step".to_owned(), "42".to_owned())]);
    assert_eq!(a.pid, Some(1234));
    assert_eq!(a.ts, Some(NOW));
    assert_eq!(a.span, None);
    assert_eq!(a.version, 1);
    assert_eq!(a.unknown_fields, 0);
}

#[test]
fn accepts_every_field_and_keeps_label_order() {
    let a = ok(&format!(
        r#" {{ "v" : 1, "labels" : {{ "z" : "1", "a" : "", "m" : "x" }}, "pid": 7, "start_time": 99,
            "span_start": {s}, "span_end": {e} }} "#,
        s = NOW - 5,
        e = NOW
    ));
    let keys: Vec<&str> = a.labels.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, ["z", "a", "m"]);
    assert_eq!(a.start_time, Some(99));
    assert_eq!(a.span, Some((NOW - 5, NOW)));
    assert_eq!(a.ts, None);
}

#[test]
fn tolerates_trailing_cr_and_newline() {
    ok("{\"labels\":{\"a\":\"b\"}}\r");
    ok("{\"labels\":{\"a\":\"b\"}}\r\n");
    ok("{\"labels\":{\"a\":\"b\"}}\n");
}

#[test]
fn unknown_fields_are_ignored_and_counted() {
    let a = ok(r#"{"labels":{"a":"b"},"extra":{"deep":[1,2,{"x":null}]},"more":1.5,"reply":true}"#);
    assert_eq!(a.unknown_fields, 2);
}

#[test]
fn null_optional_fields_mean_absent() {
    let a = ok(r#"{"labels":{"a":"b"},"pid":null,"ts":null,"v":null}"#);
    assert_eq!((a.pid, a.ts, a.version), (None, None, 1));
}

#[test]
fn escapes_are_decoded_before_limits_apply() {
    // 256 'a's written as \u0061: 1536 bytes on the wire, 256 decoded.
    let v = "\\u0061".repeat(256);
    let a = ok(&format!(r#"{{"labels":{{"\u0073tep":"{v}"}}}}"#));
    assert_eq!(a.labels[0].0, "step");
    assert_eq!(a.labels[0].1.len(), 256);
    let v = "\\u0061".repeat(257);
    assert_eq!(
        r(&format!(r#"{{"labels":{{"k":"{v}"}}}}"#)),
        RejectReason::ValueTooLong
    );
    // A surrogate pair is one character.
    let a = ok(r#"{"labels":{"k":"\ud83d\ude80"}}"#);
    assert_eq!(a.labels[0].1, "🚀");
}

#[test]
fn malformed_json() {
    for line in [
        "",
        "   ",
        "{",
        "{\"labels\":{\"a\":\"b\"}",
        "{\"labels\":{\"a\":\"b\"}} trailing",
        "{\"labels\":{\"a\":\"b\"}}{}",
        "{'labels':{}}",
        "{\"labels\":{\"a\":\"b\",}}",
        "{\"labels\":{\"a\":\"\\x\"}}",
        "nul",
    ] {
        assert_eq!(r(line), RejectReason::MalformedJson, "{line:?}");
    }
}

#[test]
fn wrong_types() {
    for line in [
        r#"[1,2]"#,
        r#""labels""#,
        r#"42"#,
        r#"null"#,
        r#"{"labels":["a","b"]}"#,
        r#"{"labels":"step=1"}"#,
        r#"{"labels":{"step":42}}"#,
        r#"{"labels":{"step":null}}"#,
        r#"{"labels":{"step":true}}"#,
        r#"{"labels":{"step":{"x":"y"}}}"#,
        r#"{"labels":{"a":"b"},"pid":"1234"}"#,
        r#"{"labels":{"a":"b"},"pid":12.0}"#,
        r#"{"labels":{"a":"b"},"pid":1e3}"#,
        r#"{"labels":{"a":"b"},"ts":1.7e18}"#,
        r#"{"labels":{"a":"b"},"ts":"1700000000000000000"}"#,
        r#"{"labels":{"a":"b"},"v":"1"}"#,
        r#"{"labels":{"a":"b"},"span_start":[1],"span_end":2}"#,
        r#"{"labels":{"a":"b"},"pid":99999999999999999999999}"#,
        r#"{"labels":{"a":"b"},"pid":1,"start_time":-5}"#,
        r#"{"labels":{"a":"b"},"reply":"yes"}"#,
    ] {
        assert_eq!(r(line), RejectReason::WrongType, "{line:?}");
    }
}

#[test]
fn duplicate_keys_at_every_level() {
    for line in [
        r#"{"labels":{"a":"1","a":"2"}}"#,
        r#"{"labels":{"a":"1","\u0061":"2"}}"#,
        r#"{"labels":{"a":"b"},"pid":1,"pid":2}"#,
        r#"{"labels":{"a":"b"},"labels":{"c":"d"}}"#,
        r#"{"labels":{"a":"b"},"x":1,"x":2}"#,
    ] {
        assert_eq!(r(line), RejectReason::DuplicateKey, "{line:?}");
    }
}

#[test]
fn label_set_rules() {
    assert_eq!(r(r#"{"pid":1}"#), RejectReason::MissingLabels);
    assert_eq!(r(r#"{}"#), RejectReason::MissingLabels);
    assert_eq!(r(r#"{"labels":{}}"#), RejectReason::EmptyLabels);
    let many = |n: usize| {
        let body: Vec<String> = (0..n).map(|i| format!("\"k{i}\":\"v\"")).collect();
        format!("{{\"labels\":{{{}}}}}", body.join(","))
    };
    assert_eq!(ok(&many(32)).labels.len(), 32);
    assert_eq!(r(&many(33)), RejectReason::TooManyLabels);
    assert_eq!(r(&many(1000)), RejectReason::TooManyLabels);
    assert_eq!(r(r#"{"labels":{"a b":"1"}}"#), RejectReason::BadKey);
    assert_eq!(r(r#"{"labels":{"":"1"}}"#), RejectReason::BadKey);
    assert_eq!(r(r#"{"labels":{"ключ":"1"}}"#), RejectReason::BadKey);
    let long_key = "k".repeat(65);
    assert_eq!(
        r(&format!(r#"{{"labels":{{"{long_key}":"1"}}}}"#)),
        RejectReason::BadKey
    );
    let long = "é".repeat(129);
    assert_eq!(
        r(&format!(r#"{{"labels":{{"k":"{long}"}}}}"#)),
        RejectReason::ValueTooLong
    );
}

#[test]
fn control_and_invisible_characters() {
    for esc in [
        "\\u0000",
        "\\n",
        "\\t",
        "\\u001b",
        "\\u007f",
        "\\u0085",
        "\\u200b",
        "\\u202e",
        "\\u2066",
        "\\ufeff",
        "\\u2028",
        "\\u2029",
        "\\u00ad",
        "\\udb40\\udc01",
    ] {
        let line = format!(r#"{{"labels":{{"k":"ok{esc}"}}}}"#);
        assert_eq!(r(&line), RejectReason::ControlChar, "{line:?}");
    }
    // The same characters raw (unescaped) in the UTF-8 line.
    for c in ['\u{85}', '\u{200f}', '\u{2028}', '\u{e0041}'] {
        let line = format!(r#"{{"labels":{{"k":"ok{c}"}}}}"#);
        assert_eq!(r(&line), RejectReason::ControlChar, "U+{:04X}", c as u32);
    }
}

#[test]
fn invalid_utf8_bytes_and_lone_surrogates() {
    assert_eq!(
        reason(b"{\"labels\":{\"k\":\"\xff\"}}"),
        RejectReason::InvalidUtf8
    );
    assert_eq!(
        reason(b"{\"labels\":{\"k\":\"\xc3\"}}"),
        RejectReason::InvalidUtf8
    );
    assert_eq!(
        reason(b"{\"labels\":{\"k\":\"\xed\xa0\x80\"}}"),
        RejectReason::InvalidUtf8
    );
    assert_eq!(r(r#"{"labels":{"k":"\ud800"}}"#), RejectReason::InvalidUtf8);
    assert_eq!(
        r(r#"{"labels":{"k":"\udc00x"}}"#),
        RejectReason::InvalidUtf8
    );
}

#[test]
fn pid_rules() {
    assert_eq!(
        ok(r#"{"labels":{"a":"b"},"pid":4194304}"#).pid,
        Some(4_194_304)
    );
    for pid in ["0", "-1", "4194305", "18446744073709551615"] {
        let line = format!(r#"{{"labels":{{"a":"b"}},"pid":{pid}}}"#);
        assert_eq!(r(&line), RejectReason::BadPid, "{line}");
    }
    assert_eq!(
        r(r#"{"labels":{"a":"b"},"start_time":5}"#),
        RejectReason::BadPid
    );
}

#[test]
fn span_rules() {
    let line = |s: &str| format!(r#"{{"labels":{{"a":"b"}},{s}}}"#);
    assert_eq!(
        r(&line(&format!(r#""span_start":{NOW}"#))),
        RejectReason::HalfSpan
    );
    assert_eq!(
        r(&line(&format!(r#""span_end":{NOW}"#))),
        RejectReason::HalfSpan
    );
    assert_eq!(
        r(&line(&format!(
            r#""span_start":{},"span_end":{}"#,
            NOW,
            NOW - 1
        ))),
        RejectReason::ReversedSpan
    );
    let a = ok(&line(&format!(
        r#""span_start":{NOW},"span_end":{NOW},"ts":{NOW}"#
    )));
    assert_eq!((a.span, a.ts), (Some((NOW, NOW)), Some(NOW)));
}

#[test]
fn time_range_rules() {
    let day = crate::limits::MAX_CLOCK_SKEW_NS;
    let line = |s: String| format!(r#"{{"labels":{{"a":"b"}},{s}}}"#);
    ok(&line(format!(r#""ts":{}"#, NOW + day)));
    ok(&line(format!(r#""ts":{}"#, NOW - day)));
    for bad in [
        format!(r#""ts":{}"#, NOW + day + 1),
        format!(r#""ts":{}"#, NOW - day - 1),
        r#""ts":0"#.to_owned(),
        r#""ts":-1"#.to_owned(),
        r#""ts":1700000000"#.to_owned(), // seconds, not nanoseconds
        format!(r#""span_start":{},"span_end":{}"#, NOW - day - 1, NOW),
        format!(r#""span_start":{},"span_end":{}"#, NOW, NOW + day + 1),
        format!(r#""span_start":-1,"span_end":{NOW}"#),
    ] {
        assert_eq!(r(&line(bad.clone())), RejectReason::TsOutOfRange, "{bad}");
    }
}

#[test]
fn version_rules() {
    ok(r#"{"labels":{"a":"b"},"v":1}"#);
    for v in ["2", "0", "-1", "1000"] {
        let line = format!(r#"{{"labels":{{"a":"b"}},"v":{v}}}"#);
        assert_eq!(r(&line), RejectReason::UnsupportedVersion, "{line}");
    }
    // The version is checked before the labels, so a future client's
    // different shape is reported as a version problem.
    assert_eq!(
        r(r#"{"v":2,"annotations":[]}"#),
        RejectReason::UnsupportedVersion
    );
}

#[test]
fn line_length_cap() {
    let pad = " ".repeat(MAX_LINE_BYTES);
    assert_eq!(
        r(&format!("{{\"labels\":{{\"a\":\"b\"}}}}{pad}")),
        RejectReason::LineTooLong
    );
    // Exactly at the cap (whitespace is allowed) is fine.
    let body = "{\"labels\":{\"a\":\"b\"}}";
    let line = format!("{body}{}", " ".repeat(MAX_LINE_BYTES - body.len()));
    ok(&line);
}

#[test]
fn reply_hello_is_recognised() {
    for hello in [
        r#"{"v":1,"reply":true}"#,
        r#"{"reply":true,"v":1}"#,
        r#" { "reply" : true } "#,
        "{\"v\":1,\"reply\":true}\r\n",
    ] {
        assert!(is_reply_hello(hello.as_bytes()), "{hello:?}");
    }
    for not in [
        r#"{"v":1,"reply":false}"#,
        r#"{"v":2,"reply":true}"#,
        r#"{"labels":{"a":"b"},"reply":true}"#,
        r#"{"v":1,"reply":true,"pid":1}"#,
        r#"{"v":1,"reply":"true"}"#,
        "garbage",
    ] {
        assert!(!is_reply_hello(not.as_bytes()), "{not:?}");
    }
    // Anywhere but first, a hello is a line without labels.
    assert_eq!(r(r#"{"v":1,"reply":true}"#), RejectReason::MissingLabels);
}

#[test]
fn never_panics_on_truncations_of_valid_lines() {
    let line = format!(
        r#"{{"labels":{{"step":"42","phase":"é🚀\"\\"}},"pid":1234,"start_time":5,"ts":{NOW},"span_start":{NOW},"span_end":{NOW},"v":1,"x":[{{}}]}}"#
    );
    ok(&line);
    let bytes = line.as_bytes();
    for cut in 0..bytes.len() {
        // Every strict prefix is incomplete JSON (or cut UTF-8).
        let reason = reason(&bytes[..cut]);
        assert!(
            matches!(
                reason,
                RejectReason::MalformedJson | RejectReason::InvalidUtf8 | RejectReason::WrongType
            ),
            "prefix {cut}: {reason}"
        );
    }
}
