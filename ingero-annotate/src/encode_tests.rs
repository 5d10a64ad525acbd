//! Round-trip and property-style tests: everything `encode` produces is
//! accepted by `parse_line` with the same content, and `encode` refuses
//! exactly what `parse_line` refuses.

use super::*;
use crate::limits::{MAX_LABELS, MAX_LINE_BYTES, MAX_VALUE_BYTES};
use crate::parse::parse_line;
use crate::test_rng::{NOW, Rng};

/// Random annotation material for the round-trip tests.
trait Material {
    fn char(&mut self) -> char;
    fn key(&mut self) -> String;
    fn value(&mut self) -> String;
}

impl Material for Rng {
    fn char(&mut self) -> char {
        // Mostly ASCII, with JSON-special characters, Latin, CJK, emoji and
        // now and then a forbidden one.
        const POOL: &[char] = &[
            'a',
            'Z',
            '0',
            ' ',
            '"',
            '\\',
            '/',
            '{',
            '}',
            ':',
            ',',
            'é',
            'ß',
            '日',
            '本',
            '🚀',
            '\u{10FFFD}',
            '\u{a0}',
            '\u{2010}',
        ];
        const BAD: &[char] = &[
            '\n', '\u{0}', '\u{7f}', '\u{85}', '\u{200b}', '\u{202e}', '\u{2028}', '\u{feff}',
        ];
        if self.below(200) == 0 {
            BAD[self.index(BAD.len())]
        } else {
            POOL[self.index(POOL.len())]
        }
    }
    fn key(&mut self) -> String {
        const KEY: &[u8] = b"abcXYZ019_.-";
        let max = if self.below(50) == 0 { 70 } else { 12 };
        let len = 1 + self.below(max) as usize;
        let mut k: String = (0..len)
            .map(|_| KEY[self.index(KEY.len())] as char)
            .collect();
        if self.below(100) == 0 {
            k.push('!');
        }
        k
    }
    fn value(&mut self) -> String {
        let max = if self.below(20) == 0 { 300 } else { 24 };
        let len = self.below(max) as usize;
        (0..len).map(|_| self.char()).collect()
    }
}

#[test]
fn published_line_shape() {
    let line = encode(
        &[("step", "42")],
        &EncodeOptions {
            pid: Some(1234),
            ts: Some(NOW),
            ..Default::default()
        },
    )
    .unwrap_or_default();
    assert_eq!(
        line,
        b"{\"labels\":{\"step\":\"42\"},\"pid\":1234,\"ts\":1700000000000000000}\n"
    );
}

#[test]
fn escaping_round_trips() {
    let labels = [("q", "say \"hi\" \\o/ 日本 🚀"), ("empty", "")];
    let opts = EncodeOptions {
        ts: Some(NOW),
        ..Default::default()
    };
    let line = encode(&labels, &opts).unwrap_or_default();
    let parsed = parse_line(&line, NOW).map_err(|e| e.to_string());
    let parsed = parsed.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(parsed.labels[0].1, labels[0].1);
    assert_eq!(parsed.labels[1].1, "");
}

#[test]
fn encoder_refuses_what_the_parser_refuses() {
    let none = EncodeOptions::default();
    let reason =
        |labels: &[(&str, &str)], o: &EncodeOptions| encode(labels, o).err().map(|e| e.reason);
    assert_eq!(reason(&[], &none), Some(RejectReason::EmptyLabels));
    assert_eq!(reason(&[("a b", "1")], &none), Some(RejectReason::BadKey));
    assert_eq!(
        reason(&[("a", "1"), ("a", "2")], &none),
        Some(RejectReason::DuplicateKey)
    );
    assert_eq!(
        reason(&[("a", "\u{202e}")], &none),
        Some(RejectReason::ControlChar)
    );
    let pid0 = EncodeOptions {
        pid: Some(0),
        ..none
    };
    assert_eq!(reason(&[("a", "1")], &pid0), Some(RejectReason::BadPid));
    let st = EncodeOptions {
        start_time: Some(1),
        ..none
    };
    assert_eq!(reason(&[("a", "1")], &st), Some(RejectReason::BadPid));
    let rev = EncodeOptions {
        span: Some((2, 1)),
        ..none
    };
    assert_eq!(
        reason(&[("a", "1")], &rev),
        Some(RejectReason::ReversedSpan)
    );
    let mut out = b"keep".to_vec();
    assert!(encode_into(&[("a b", "1")], &none, &mut out).is_err());
    assert_eq!(out, b"keep", "output untouched on error");
}

#[test]
fn worst_case_encoded_line_fits_the_cap() {
    let value = "\"".repeat(MAX_VALUE_BYTES);
    let labels: Vec<(String, String)> = (0..MAX_LABELS)
        .map(|i| (format!("{i:0>64}"), value.clone()))
        .collect();
    let opts = EncodeOptions {
        pid: Some(4_194_304),
        start_time: Some(u64::MAX),
        ts: Some(NOW),
        span: Some((NOW, NOW)),
    };
    let line = encode(&labels, &opts).unwrap_or_default();
    assert!(line.len() < MAX_LINE_BYTES, "{}", line.len());
    assert!(parse_line(&line, NOW).is_ok());
}

#[test]
fn generated_annotations_agree_between_encoder_and_parser() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let (mut accepted, mut refused) = (0, 0);
    for _ in 0..20_000 {
        let max = if rng.below(30) == 0 { 40 } else { 5 };
        let n = rng.below(max) as usize;
        let labels: Vec<(String, String)> = (0..n).map(|_| (rng.key(), rng.value())).collect();
        let pid = (rng.below(3) == 0).then(|| rng.below(5_000_000) as u32);
        let span = (rng.below(4) == 0).then(|| {
            let s = NOW - rng.below(1_000_000);
            // Now and then reversed.
            (s, (s + rng.below(2_000_000)) - 100_000)
        });
        let opts = EncodeOptions {
            pid,
            ts: Some(NOW - rng.below(1000)),
            span,
            start_time: None,
        };
        match encode(&labels, &opts) {
            Ok(line) => {
                accepted += 1;
                assert_eq!(line.last(), Some(&b'\n'));
                assert_eq!(line.iter().filter(|b| **b == b'\n').count(), 1, "one line");
                let parsed =
                    parse_line(&line, NOW).unwrap_or_else(|e| panic!("{e} for {labels:?}"));
                assert_eq!(parsed.labels, labels);
                assert_eq!(parsed.pid, pid);
                assert_eq!(parsed.span, span);
                assert_eq!(parsed.ts, opts.ts);
            }
            Err(enc_err) => {
                refused += 1;
                // Build the same line by hand with serde_json's escaping
                // (which differs from ours), keeping label order so the
                // first failing label is the same one.
                let json = |s: &str| serde_json::to_string(s).unwrap_or_default();
                let body: Vec<String> = labels
                    .iter()
                    .map(|(k, v)| format!("{}:{}", json(k), json(v)))
                    .collect();
                let mut line = format!("{{\"labels\":{{{}}}", body.join(","));
                if let Some(p) = pid {
                    line.push_str(&format!(",\"pid\":{p}"));
                }
                if let Some((s, e)) = span {
                    line.push_str(&format!(",\"span_start\":{s},\"span_end\":{e}"));
                }
                line.push('}');
                let parse_err = parse_line(line.as_bytes(), NOW).err().map(|e| e.reason);
                assert_eq!(parse_err, Some(enc_err.reason), "{line}");
            }
        }
    }
    assert!(
        accepted > 10_000 && refused > 500,
        "accepted {accepted}, refused {refused}"
    );
}
