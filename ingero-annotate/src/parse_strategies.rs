//! The generators of the parser's property tests (`parse_proptests.rs`): valid annotations,
//! lines written for them by hand (free whitespace, member order, escapes, `null`s, unknown
//! fields), those lines damaged (byte flips, insertions, deletions, truncation, repeated
//! slices, duplicated keys), soups of JSON tokens, and valid lines with one odd value.

use std::collections::BTreeSet;

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::{Index, select};

use super::*;
use crate::charclass::is_forbidden_char;
use crate::encode::EncodeOptions;
use crate::limits::{MAX_CLOCK_SKEW_NS, PID_MAX};
use crate::test_rng::NOW;

// ---------------------------------------------------------------------------
// Valid annotations.

/// One valid annotation: what a client means to send.
#[derive(Debug, Clone)]
pub(super) struct Annotation {
    pub(super) labels: Vec<(String, String)>,
    pub(super) opts: EncodeOptions,
}

impl Annotation {
    /// What the agent must decode from a line carrying this annotation and
    /// `unknown_fields` unknown top-level fields.
    pub(super) fn decoded(&self, unknown_fields: usize) -> WireAnnotation {
        WireAnnotation {
            labels: self.labels.clone(),
            pid: self.opts.pid,
            start_time: self.opts.start_time,
            ts: self.opts.ts,
            span: self.opts.span,
            version: 1,
            unknown_fields: u32::try_from(unknown_fields).expect("few unknown fields"),
        }
    }
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        2 => select(&crate::keys::WELL_KNOWN_KEYS[..]).prop_map(str::to_owned),
        6 => "[a-z_]{1,8}",
        // The whole charset, up to the longest key allowed.
        1 => "[A-Za-z0-9_.-]{1,64}",
    ]
}

/// A character a label value may hold.
fn value_char() -> impl Strategy<Value = char> {
    prop_oneof![
        8 => (0x20u8..0x7f).prop_map(char::from),
        // JSON specials, multi-byte UTF-8, astral (a surrogate pair when
        // escaped), and the no-break space (allowed, unlike U+200B).
        2 => select(&['"', '\\', '/', 'é', 'ß', '日', '🚀', '\u{10FFFD}', '\u{a0}'][..]),
        // Mapped rather than filtered: filtering would count towards
        // proptest's reject limit, which long runs reach.
        1 => any::<char>().prop_map(|c| if is_forbidden_char(c) { '\u{fffd}' } else { c }),
    ]
}

fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        // At most 48 characters of at most 4 bytes: within the 256-byte cap.
        8 => vec(value_char(), 0..48).prop_map(String::from_iter),
        // Right up to the cap.
        1 => "[ -~]{250,256}",
    ]
}

/// 1 to 32 labels with distinct keys, in order.
fn labels() -> impl Strategy<Value = Vec<(String, String)>> {
    prop_oneof![
        9 => vec((key(), value()), 1..=6),
        1 => vec((key(), value()), 1..=MAX_LABELS),
    ]
    .prop_map(|labels| {
        let mut seen = BTreeSet::new();
        labels
            .into_iter()
            .filter(|(k, _)| seen.insert(k.clone()))
            .collect()
    })
}

/// A unix time the agent accepts at [`NOW`] (within 24 h), edges included.
fn time() -> impl Strategy<Value = u64> {
    prop_oneof![
        8 => (NOW - MAX_CLOCK_SKEW_NS)..=(NOW + MAX_CLOCK_SKEW_NS),
        1 => select(&[NOW - MAX_CLOCK_SKEW_NS, NOW, NOW + MAX_CLOCK_SKEW_NS][..]),
    ]
}

pub(super) fn annotation() -> impl Strategy<Value = Annotation> {
    let pid_max = u32::try_from(PID_MAX).expect("PID_MAX fits in u32");
    (
        labels(),
        proptest::option::of(prop_oneof![1..=pid_max, Just(1), Just(pid_max)]),
        proptest::option::of(any::<u64>()),
        proptest::option::of(time()),
        proptest::option::of((time(), time())),
    )
        .prop_map(|(labels, pid, start_time, ts, span)| Annotation {
            labels,
            opts: EncodeOptions {
                pid,
                // start_time is only valid with a pid.
                start_time: pid.and(start_time),
                ts,
                span: span.map(|(a, b)| (a.min(b), a.max(b))),
            },
        })
}

// ---------------------------------------------------------------------------
// Writing a valid annotation by hand, in any of the ways JSON allows.

/// Top-level names the parser knows; unknown fields must avoid them.
const KNOWN_FIELDS: [&str; 8] = [
    "labels",
    "pid",
    "start_time",
    "ts",
    "span_start",
    "span_end",
    "v",
    "reply",
];

/// What a line may carry beside the annotation without changing it.
#[derive(Debug, Clone)]
struct Extras {
    /// Write `"v":1`.
    version: bool,
    /// Write absent integer fields as `null`.
    nulls: bool,
    /// `reply`, ignored by `parse_line`: absent, `null`, `true` or `false`.
    reply: Option<Option<bool>>,
    /// Unknown fields: distinct names, any JSON value (as text).
    unknown: Vec<(String, String)>,
}

/// Any JSON value as text, nested a few levels, with every number form.
fn json_value() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        select(
            &[
                "null", "true", "false", "0", "-0", "-0.0", "1E400", "-2.5E-3", "0.5e+7"
            ][..]
        )
        .prop_map(str::to_owned),
        any::<i64>().prop_map(|n| n.to_string()),
        any::<u64>().prop_map(|n| n.to_string()),
        // Rust writes finite floats as valid JSON numbers, both ways.
        // (JSON has no NaN or infinity.)
        (any::<f64>(), any::<bool>()).prop_map(|(f, exp)| match (f.is_finite(), exp) {
            (false, _) => "0.0".to_owned(),
            (true, false) => format!("{f}"),
            (true, true) => format!("{f:e}"),
        }),
        any::<String>().prop_map(|s| serde_json::to_string(&s).expect("a string serialises")),
    ];
    leaf.prop_recursive(4, 24, 4, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..4).prop_map(|items| format!("[{}]", items.join(","))),
            vec((any::<String>(), inner), 0..4).prop_map(|members| {
                let members: Vec<String> = members
                    .into_iter()
                    .map(|(k, v)| {
                        let k = serde_json::to_string(&k).expect("a string serialises");
                        format!("{k}:{v}")
                    })
                    .collect();
                format!("{{{}}}", members.join(","))
            }),
        ]
    })
}

fn extras() -> impl Strategy<Value = Extras> {
    let name = prop_oneof![
        select(&["x", "extra", "trace_id", "Labels", "pid_", "span", "ts "][..])
            .prop_map(str::to_owned),
        "[a-z_]{1,10}",
    ]
    .prop_map(|n| {
        if KNOWN_FIELDS.contains(&n.as_str()) {
            format!("{n}_")
        } else {
            n
        }
    });
    (
        any::<bool>(),
        any::<bool>(),
        proptest::option::of(proptest::option::of(any::<bool>())),
        vec((name, json_value()), 0..3),
    )
        .prop_map(|(version, nulls, reply, unknown)| {
            let mut seen = BTreeSet::new();
            let unknown = unknown
                .into_iter()
                .filter(|(n, _)| seen.insert(n.clone()))
                .collect();
            Extras {
                version,
                nulls,
                reply,
                unknown,
            }
        })
}

/// Style choices (whitespace, escapes, member order) read from a generated
/// tape, cycled. All zeros is the plain compact style, so a failure shrinks
/// towards it.
struct Dice<'t> {
    tape: &'t [u8],
    at: usize,
}

impl Dice<'_> {
    fn roll(&mut self) -> u8 {
        if self.tape.is_empty() {
            return 0;
        }
        let r = self.tape[self.at % self.tape.len()];
        self.at += 1;
        r
    }

    fn ws(&mut self) -> &'static str {
        match self.roll() % 8 {
            5 => " ",
            6 => "\t",
            7 => "\r\n  ",
            _ => "",
        }
    }

    /// `s` as a JSON string, each character escaped or not by the dice.
    fn string(&mut self, s: &str) -> String {
        let mut out = String::with_capacity(s.len() + 2);
        out.push('"');
        for c in s.chars() {
            let roll = self.roll() % 16;
            match c {
                '"' | '\\' if roll < 14 => {
                    out.push('\\');
                    out.push(c);
                }
                _ if roll == 13 => push_u_escape(&mut out, c, false),
                _ if roll == 14 => push_u_escape(&mut out, c, true),
                '"' | '\\' => push_u_escape(&mut out, c, roll == 15),
                '/' if roll == 15 => out.push_str("\\/"),
                _ => out.push(c),
            }
        }
        out.push('"');
        out
    }
}

/// `c` as `\uXXXX` (two of them, a surrogate pair, above U+FFFF).
fn push_u_escape(out: &mut String, c: char, upper: bool) {
    let mut units = [0u16; 2];
    for unit in c.encode_utf16(&mut units) {
        if upper {
            out.push_str(&format!("\\u{unit:04X}"));
        } else {
            out.push_str(&format!("\\u{unit:04x}"));
        }
    }
}

/// One top-level member. The labels object is kept apart so a test can
/// duplicate one label inside it.
#[derive(Debug, Clone)]
enum Member {
    /// `name:value` with its whitespace.
    Plain(String),
    /// The `labels` member: `head` up to the colon's whitespace, then the
    /// object built from [`Written::labels`], then `tail`.
    Labels { head: String, tail: String },
}

/// A line as its parts, before they are joined.
#[derive(Debug, Clone)]
pub(super) struct Written {
    lead: String,
    members: Vec<Member>,
    /// The label members `"key":"value"`, with their whitespace.
    labels: Vec<String>,
    /// Whitespace and line end after the object.
    trail: String,
}

impl Written {
    fn new(a: &Annotation, x: &Extras, tape: &[u8]) -> Written {
        let d = &mut Dice { tape, at: 0 };
        let labels = a
            .labels
            .iter()
            .map(|(k, v)| {
                let (k, v) = (d.string(k), d.string(v));
                format!("{}{k}{}:{}{v}{}", d.ws(), d.ws(), d.ws(), d.ws())
            })
            .collect();
        let head = format!("{}{}{}:{}", d.ws(), d.string("labels"), d.ws(), d.ws());
        let mut members = vec![Member::Labels {
            head,
            tail: d.ws().to_owned(),
        }];
        let mut int = |name: &str, v: Option<u64>, d: &mut Dice<'_>| match v {
            Some(v) => members.push(plain(d, name, &v.to_string())),
            None if x.nulls => members.push(plain(d, name, "null")),
            None => {}
        };
        int("pid", a.opts.pid.map(u64::from), d);
        int("start_time", a.opts.start_time, d);
        int("ts", a.opts.ts, d);
        int("span_start", a.opts.span.map(|s| s.0), d);
        int("span_end", a.opts.span.map(|s| s.1), d);
        if x.version {
            members.push(plain(d, "v", "1"));
        }
        if let Some(reply) = x.reply {
            let value = match reply {
                None => "null",
                Some(true) => "true",
                Some(false) => "false",
            };
            members.push(plain(d, "reply", value));
        }
        for (name, value) in &x.unknown {
            members.push(plain(d, name, value));
        }
        // Any member order.
        for i in (1..members.len()).rev() {
            let j = usize::from(d.roll()) % (i + 1);
            members.swap(i, j);
        }
        let end = match d.roll() % 4 {
            1 => "\n",
            2 => "\r\n",
            3 => "\r",
            _ => "",
        };
        Written {
            lead: d.ws().to_owned(),
            members,
            labels,
            trail: format!("{}{end}", d.ws()),
        }
    }

    pub(super) fn bytes(&self) -> Vec<u8> {
        let members: Vec<String> = self
            .members
            .iter()
            .map(|m| match m {
                Member::Plain(text) => text.clone(),
                Member::Labels { head, tail } => {
                    format!("{head}{{{}}}{tail}", self.labels.join(","))
                }
            })
            .collect();
        format!("{}{{{}}}{}", self.lead, members.join(","), self.trail).into_bytes()
    }
}

fn plain(d: &mut Dice<'_>, name: &str, value: &str) -> Member {
    let name = d.string(name);
    Member::Plain(format!(
        "{}{name}{}:{}{value}{}",
        d.ws(),
        d.ws(),
        d.ws(),
        d.ws()
    ))
}

/// A hand-written valid line and the annotation it must decode to.
pub(super) fn written_line() -> impl Strategy<Value = (Written, WireAnnotation)> {
    (annotation(), extras(), vec(any::<u8>(), 0..128)).prop_map(|(a, x, tape)| {
        let written = Written::new(&a, &x, &tape);
        (written, a.decoded(x.unknown.len()))
    })
}

// ---------------------------------------------------------------------------
// Damage.

/// Bytes that matter to a JSON parser, plus a few that break UTF-8 or are
/// control characters.
const INTERESTING: &[u8] =
    b"{}[]\":,\\ \t\r\n/0123456789-+.eEnultrfasx\x00\x1f\x7f\xc3\xa9\xed\xff";

fn byte() -> impl Strategy<Value = u8> {
    prop_oneof![3 => select(INTERESTING), 1 => any::<u8>()]
}

/// One change to a line's bytes.
#[derive(Debug, Clone)]
enum Damage {
    Flip {
        at: Index,
        bit: u8,
    },
    Set {
        at: Index,
        byte: u8,
    },
    Insert {
        at: Index,
        byte: u8,
    },
    Delete {
        at: Index,
    },
    Truncate {
        at: Index,
    },
    /// Copy up to `len` bytes from `from` to `to` (repeats keys, values,
    /// whole members or half of them).
    Repeat {
        from: Index,
        len: usize,
        to: Index,
    },
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        (any::<Index>(), 0u8..8).prop_map(|(at, bit)| Damage::Flip { at, bit }),
        (any::<Index>(), byte()).prop_map(|(at, byte)| Damage::Set { at, byte }),
        (any::<Index>(), byte()).prop_map(|(at, byte)| Damage::Insert { at, byte }),
        any::<Index>().prop_map(|at| Damage::Delete { at }),
        any::<Index>().prop_map(|at| Damage::Truncate { at }),
        (any::<Index>(), 1usize..24, any::<Index>()).prop_map(|(from, len, to)| Damage::Repeat {
            from,
            len,
            to
        }),
    ]
}

impl Damage {
    fn apply(&self, b: &mut Vec<u8>) {
        let len = b.len();
        match *self {
            Damage::Flip { at, bit } if len > 0 => b[at.index(len)] ^= 1 << bit,
            Damage::Set { at, byte } if len > 0 => b[at.index(len)] = byte,
            Damage::Insert { at, byte } => b.insert(at.index(len + 1), byte),
            Damage::Delete { at } if len > 0 => {
                b.remove(at.index(len));
            }
            Damage::Truncate { at } => b.truncate(at.index(len + 1)),
            Damage::Repeat { from, len: n, to } if len > 0 => {
                let start = from.index(len);
                let chunk = b[start..(start + n).min(len)].to_vec();
                let to = to.index(len + 1);
                b.splice(to..to, chunk);
            }
            _ => {}
        }
    }
}

/// A member written twice: a duplicate key, at the top level or among the
/// labels, the copy's name optionally spelt with an escape (`"\u0070id"`).
#[derive(Debug, Clone)]
struct Duplicate {
    label: bool,
    which: Index,
    to: Index,
    escaped: bool,
}

fn duplicate() -> impl Strategy<Value = Duplicate> {
    (any::<bool>(), any::<Index>(), any::<Index>(), any::<bool>()).prop_map(
        |(label, which, to, escaped)| Duplicate {
            label,
            which,
            to,
            escaped,
        },
    )
}

impl Duplicate {
    fn apply(&self, w: &mut Written) {
        let respell = |s: &str| {
            if self.escaped {
                escape_name(s)
            } else {
                s.to_owned()
            }
        };
        if self.label {
            let copy = respell(&w.labels[self.which.index(w.labels.len())]);
            w.labels.insert(self.to.index(w.labels.len() + 1), copy);
        } else {
            let copy = match &w.members[self.which.index(w.members.len())] {
                Member::Plain(text) => Member::Plain(respell(text)),
                Member::Labels { head, tail } => Member::Labels {
                    head: respell(head),
                    tail: tail.clone(),
                },
            };
            w.members.insert(self.to.index(w.members.len() + 1), copy);
        }
    }
}

/// `member` with the first character of its name written as `\u00XX`
/// (when it is plain ASCII), so the copy is the same key spelt otherwise.
fn escape_name(member: &str) -> String {
    if let Some(q) = member.find('"') {
        if let Some(&c) = member.as_bytes().get(q + 1) {
            if c.is_ascii_alphanumeric() || c == b'_' {
                let (head, rest) = member.split_at(q + 1);
                return format!("{head}\\u{c:04x}{}", &rest[1..]);
            }
        }
    }
    member.to_owned()
}

/// A valid hand-written line, maybe with a duplicated member, then up to
/// three byte-level changes (none at all for some: valid lines too).
pub(super) fn damaged_line() -> impl Strategy<Value = Vec<u8>> {
    (
        written_line(),
        proptest::option::of(duplicate()),
        vec(damage(), 0..4),
    )
        .prop_map(|((mut written, _), dup, damage)| {
            if let Some(dup) = dup {
                dup.apply(&mut written);
            }
            let mut bytes = written.bytes();
            for d in &damage {
                d.apply(&mut bytes);
            }
            bytes
        })
}

/// Fragments of annotation lines, valid and not, to be strung together.
const TOKENS: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    ":",
    ",",
    " ",
    "\"labels\"",
    "\"pid\"",
    "\"ts\"",
    "\"start_time\"",
    "\"span_start\"",
    "\"span_end\"",
    "\"v\"",
    "\"reply\"",
    "\"x\"",
    "\"step\"",
    "\"a\"",
    "\"\"",
    "\"\\u0070id\"",
    "\"\\ud83d\\ude80\"",
    "\"\\ud800\"",
    "\"\\udc00\"",
    "\"\\q\"",
    "\"é\"",
    "\"\u{200b}\"",
    "\"a\tb\"",
    "0",
    "1",
    "-0",
    "-1",
    "1234",
    "4194305",
    "1.5",
    "1e3",
    "01",
    "-",
    "1700000000000000000",
    "18446744073709551616",
    "-9223372036854775809",
    "null",
    "true",
    "false",
    "nul",
    "\"",
    "\\",
];

/// A start that makes an object likely, then tokens and stray bytes.
pub(super) fn token_soup() -> impl Strategy<Value = Vec<u8>> {
    let start = select(&["", "{", "{\"labels\":{", "{\"labels\":{\"a\":\"b\"},"][..]);
    let piece = prop_oneof![
        4 => select(TOKENS).prop_map(|t| t.as_bytes().to_vec()),
        1 => byte().prop_map(|b| vec![b]),
    ];
    (start, vec(piece, 0..48)).prop_map(|(start, pieces)| {
        let mut line = start.as_bytes().to_vec();
        line.extend(pieces.concat());
        line
    })
}

/// Pieces of JSON scalars, mostly of numbers, to be strung together into
/// one value: `-0`, `1.`, `01`, `1e+`, `-9223372036854775809`, `nul`, ...
const SCALAR_PIECES: &[&str] = &[
    "-",
    "+",
    "0",
    "1",
    "9",
    "00",
    "12",
    ".",
    ".5",
    "e",
    "E",
    "e+",
    "18446744073709551615",
    "9223372036854775808",
    "1700000000000000000",
    "null",
    "nul",
    "true",
    "false",
    "\"",
    "\"s\"",
    "[",
    "]",
    ",",
    " ",
];

/// Where a strung value goes: `(before, after)` in an otherwise valid line.
const VALUE_SLOTS: &[(&str, &str)] = &[
    (r#"{"labels":{"a":"b"},"pid":"#, "}"),
    (r#"{"labels":{"a":"b"},"pid":1,"start_time":"#, "}"),
    (r#"{"labels":{"a":"b"},"ts":"#, "}"),
    (
        r#"{"labels":{"a":"b"},"span_end":1700000000000000000,"span_start":"#,
        "}",
    ),
    (r#"{"labels":{"a":"b"},"v":"#, "}"),
    (r#"{"labels":{"a":"b"},"reply":"#, "}"),
    (r#"{"labels":{"a":"#, "}}"),
    (r#"{"labels":"#, "}"),
    // Unknown fields' values go through the scanner's own number syntax.
    (r#"{"labels":{"a":"b"},"x":"#, "}"),
    (r#"{"x":"#, r#","labels":{"a":"b"}}"#),
    (r#"{"labels":{"a":"b"},"x":["#, "]}"),
    (r#"{"labels":{"a":"b"},"x":{"k":"#, "}}"),
];

/// A valid line with one value strung from [`SCALAR_PIECES`].
pub(super) fn odd_value_line() -> impl Strategy<Value = Vec<u8>> {
    (select(VALUE_SLOTS), vec(select(SCALAR_PIECES), 1..6)).prop_map(|((before, after), pieces)| {
        format!("{before}{}{after}", pieces.concat()).into_bytes()
    })
}

// ---------------------------------------------------------------------------
// The properties.
