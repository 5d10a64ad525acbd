//! The fast scanner against the serde visitors (the reference): over many
//! generated lines, `parse_line` must give exactly what the reference
//! gives (value, or reason and detail), and whenever the scanner answers,
//! its `Raw` must equal the reference's.

use super::scan::scan;
use super::*;
use crate::test_rng::{NOW, Rng};

/// `parse_line` without the fast path.
fn reference(line: &[u8]) -> Result<WireAnnotation, Rejection> {
    parse_line_reference(line, NOW)
}

/// Whether the scanner answered for `line`, after checking it agrees (panicking if not). The
/// property tests (`parse_proptests.rs`) use it too: proptest catches the panic, shrinks the
/// input and reports the message as it would a failed `prop_assert!`.
pub(super) fn agrees(line: &[u8]) -> bool {
    assert_eq!(
        parse_line(line, NOW),
        reference(line),
        "{:?}",
        String::from_utf8_lossy(line)
    );
    let Ok(text) = checked_text(line) else {
        return false;
    };
    match scan(text) {
        Some(raw) => {
            match parse_raw_reference(text) {
                Ok(r) => assert_eq!(raw, r, "{text:?}"),
                Err(e) => panic!("scanner accepted {text:?}, reference refused: {e}"),
            }
            true
        }
        None => false,
    }
}

#[test]
fn realistic_lines_take_the_fast_path() {
    for line in [
        format!(r#"{{"labels":{{"step":"42","epoch":"3"}},"pid":1234,"ts":{NOW}}}"#),
        format!(r#"{{"labels":{{"request_id":"abc-123"}},"span_start":{NOW},"span_end":{NOW}}}"#),
        r#"{"labels":{"phase":"say \"hi\"\\ \/ \b\f\n\r\t"}}"#.to_owned(),
        r#"{"labels":{"k":"\u00e9\ud83d\ude80\uD83D\uDE80é🚀"}}"#.to_owned(),
        r#" { "v" : 1 , "labels" : { "\u0073tep" : "" } , "reply" : false } "#.to_owned(),
        r#"{"labels":{"a":"b"},"x":{"deep":[1,-0,1e3,1.0,-2.5E-3,"s",true,null,{}]},"y":[]}"#
            .to_owned(),
        r#"{"labels":{"a":"b"},"pid":null,"ts":null,"v":null,"reply":null}"#.to_owned(),
        r#"{"labels":{"a":"b"},"ts":-9223372036854775808,"v":18446744073709551615}"#.to_owned(),
        r#"{"labels":{}}"#.to_owned(),
        r#"{}"#.to_owned(),
    ] {
        assert!(agrees(line.as_bytes()), "{line}");
    }
}

#[test]
fn unusual_lines_are_left_to_the_reference() {
    for line in [
        r#"{"labels":{"a":"1","a":"2"}}"#,
        r#"{"labels":{"a":"b"},"x":1,"x":2}"#,
        r#"{"labels":{"a":"b"},"pid":1,"pid":2}"#,
        r#"{"labels":{"a":"b"},"pid":-0}"#,
        r#"{"labels":{"a":"b"},"pid":1e3}"#,
        r#"{"labels":{"a":"b"},"pid":1.0}"#,
        r#"{"labels":{"a":"b"},"pid":01}"#,
        r#"{"labels":{"a":"b"},"ts":-9223372036854775809}"#,
        r#"{"labels":{"a":"b"},"ts":18446744073709551616}"#,
        r#"{"labels":{"k":"\ud800"}}"#,
        r#"{"labels":{"k":"\udc00x"}}"#,
        r#"{"labels":{"k":"\ud83dx"}}"#,
        r#"{"labels":{"k":"\x"}}"#,
        "{\"labels\":{\"k\":\"a\tb\"}}",
        r#"{"labels":{"a":"b",}}"#,
        r#"{"labels":{"a":"b"},"x":[1,]}"#,
        r#"{"labels":{"a":42}}"#,
        r#"{"labels":null}"#,
        r#"{"labels":{"a":"b"}} x"#,
        r#"[{"labels":{"a":"b"}}]"#,
    ] {
        assert!(!agrees(line.as_bytes()), "{line}");
    }
    let many: Vec<String> = (0..33).map(|i| format!("\"k{i}\":\"v\"")).collect();
    let line = format!("{{\"labels\":{{{}}}}}", many.join(","));
    assert!(!agrees(line.as_bytes()));
    let deep = format!(
        r#"{{"labels":{{"a":"b"}},"x":{}{}}}"#,
        "[".repeat(40),
        "]".repeat(40)
    );
    assert!(!agrees(deep.as_bytes()));
}

/// Choices for the line generator.
trait Choose {
    fn pick<'t>(&mut self, items: &[&'t str]) -> &'t str;
    fn chance(&mut self, percent: usize) -> bool;
}

impl Choose for Rng {
    fn pick<'t>(&mut self, items: &[&'t str]) -> &'t str {
        items[self.index(items.len())]
    }
    fn chance(&mut self, percent: usize) -> bool {
        self.index(100) < percent
    }
}

const INTS: &[&str] = &[
    "0",
    "-0",
    "1",
    "-1",
    "1234",
    "4194304",
    "4194305",
    "1e3",
    "1.0",
    "1E400",
    "-0.0",
    "01",
    "-",
    "-9223372036854775808",
    "-9223372036854775809",
    "18446744073709551615",
    "18446744073709551616",
    "99999999999999999999999",
    "1700000000000000000",
    "1700000000000000001",
    "1699999999999999999",
    "null",
    "true",
    "\"1\"",
    "[]",
    "nul",
];

const FRAGMENTS: &[&str] = &[
    "42",
    "x",
    "é",
    "🚀",
    "日本",
    "\\\"",
    "\\\\",
    "\\/",
    "\\n",
    "\\t",
    "\\b",
    "\\u00e9",
    "\\u0041",
    "\\ud83d\\ude80",
    "\\uD83D\\uDE80",
    "\\ud800",
    "\\udc00",
    "\\ud83dx",
    "\\u200b",
    "\\u00",
    "\\q",
    "\u{85}",
    "\u{200f}",
    "\t",
    " ",
];

const KEYS: &[&str] = &[
    "step",
    "epoch",
    "a",
    "k.1-x_Y",
    "bad key",
    "",
    "ключ",
    "st\\u0065p",
    "\\u0061",
    "\\ud83d\\ude80",
];

const WS: &[&str] = &["", "", "", " ", "\t", "\r\n ", "  "];

fn ws(rng: &mut Rng) -> &'static str {
    rng.pick(WS)
}

fn string(rng: &mut Rng) -> String {
    let n = rng.index(4);
    let body: String = (0..n).map(|_| rng.pick(FRAGMENTS)).collect();
    format!("\"{body}\"")
}

/// Any JSON-ish value, sometimes invalid.
fn any_value(rng: &mut Rng, depth: u32) -> String {
    match rng.index(if depth > 3 { 5 } else { 8 }) {
        0 | 1 => rng.pick(INTS).to_owned(),
        2 => string(rng),
        3 => rng
            .pick(&["true", "false", "null", "-2.5E-3", "0.5e+7", "tru"])
            .to_owned(),
        4 => rng.pick(&["[1,]", "{\"a\"}", "[", "{}", "[]"]).to_owned(),
        5 | 6 => {
            let items: Vec<String> = (0..rng.index(4))
                .map(|_| format!("{}{}", ws(rng), any_value(rng, depth + 1)))
                .collect();
            format!("[{}]", items.join(","))
        }
        _ => {
            let items: Vec<String> = (0..rng.index(4))
                .map(|_| format!("{}:{}", string(rng), any_value(rng, depth + 1)))
                .collect();
            format!("{{{}}}", items.join(","))
        }
    }
}

/// A field name, sometimes with one character written as `\u00XX`.
fn name(rng: &mut Rng, plain: &str) -> String {
    if plain.is_empty() || !rng.chance(15) {
        return format!("\"{plain}\"");
    }
    let at = rng.index(plain.len());
    match plain.get(at..at + 1) {
        Some(c) if c.is_ascii() => format!(
            "\"{}\\u{:04x}{}\"",
            &plain[..at],
            c.as_bytes()[0],
            &plain[at + 1..]
        ),
        _ => format!("\"{plain}\""),
    }
}

fn labels(rng: &mut Rng) -> String {
    let n = match rng.index(20) {
        0 => 0,
        1 => 33,
        2 => 32,
        _ => 1 + rng.index(4),
    };
    let members: Vec<String> = (0..n)
        .map(|i| {
            let key = if n > 4 {
                format!("\"k{i}\"")
            } else {
                let k = rng.pick(KEYS);
                name(rng, k)
            };
            let value = if rng.chance(5) {
                any_value(rng, 1)
            } else {
                string(rng)
            };
            format!("{}{key}{}:{}{value}{}", ws(rng), ws(rng), ws(rng), ws(rng))
        })
        .collect();
    if rng.chance(3) {
        return rng.pick(&["null", "[]", "\"step=1\""]).to_owned();
    }
    format!("{{{}}}", members.join(","))
}

fn line(rng: &mut Rng) -> Vec<u8> {
    let fields = [
        "labels",
        "pid",
        "ts",
        "start_time",
        "span_start",
        "span_end",
        "v",
        "reply",
        "x",
        "extra",
    ];
    let mut members = Vec::new();
    for f in fields {
        let wanted = match f {
            "labels" => 90,
            "pid" | "ts" => 50,
            "span_start" | "span_end" => 20,
            _ => 8,
        };
        let copies = if rng.chance(wanted) {
            if rng.chance(3) { 2 } else { 1 }
        } else {
            0
        };
        for _ in 0..copies {
            let value = match f {
                "labels" => labels(rng),
                "reply" => rng
                    .pick(&["true", "false", "null", "\"yes\"", "1"])
                    .to_owned(),
                "x" | "extra" => any_value(rng, 1),
                "ts" | "span_start" | "span_end" if rng.chance(60) => {
                    (NOW - 10 + rng.index(20) as u64).to_string()
                }
                _ if rng.chance(50) => rng.pick(&["1", "1234", "4194304", "0", "-1"]).to_owned(),
                _ => rng.pick(INTS).to_owned(),
            };
            members.push(format!(
                "{}{}{}:{}{value}",
                ws(rng),
                name(rng, f),
                ws(rng),
                ws(rng)
            ));
        }
    }
    // Shuffle member order.
    for i in (1..members.len()).rev() {
        let j = rng.index(i + 1);
        members.swap(i, j);
    }
    let mut bytes = format!("{}{{{}}}{}", ws(rng), members.join(","), ws(rng)).into_bytes();
    // Occasional damage: cut, dropped byte, inserted byte, trailing junk.
    match rng.index(25) {
        0 => bytes.truncate(rng.index(bytes.len() + 1)),
        1 if !bytes.is_empty() => {
            bytes.remove(rng.index(bytes.len()));
        }
        2 => {
            let junk = b"{}[],:\"\\ 0a\xff-";
            let at = rng.index(bytes.len() + 1);
            bytes.insert(at, junk[rng.index(junk.len())]);
        }
        3 => bytes.extend_from_slice(b" {}"),
        _ => {}
    }
    bytes
}

#[test]
fn scanner_agrees_with_the_reference_on_generated_lines() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let total = 60_000;
    let mut fast = 0;
    for _ in 0..total {
        if agrees(&line(&mut rng)) {
            fast += 1;
        }
    }
    // The generator is meant to exercise both paths substantially.
    assert!(
        fast > total / 5,
        "only {fast} of {total} took the fast path"
    );
    assert!(fast < total * 4 / 5, "{fast} of {total} took the fast path");
}
