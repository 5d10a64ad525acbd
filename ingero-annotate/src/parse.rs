//! Parsing and validating one wire line (agent side).
//!
//! `serde_json`'s `Map` keeps the last of duplicate keys silently, and a
//! derived `Deserialize` would accept `1.0` for an integer in some paths, so
//! the line is walked with hand-written visitors: they see every key (to
//! refuse duplicates), accept only JSON integers where integers belong and
//! borrow field names without allocating.
//!
//! Those visitors are the reference. Every line first goes through a
//! single-pass scanner (`scan.rs`: no serde machinery, no allocation but
//! the labels) that either yields exactly what the visitors would or hands
//! the line to them; so every refusal, with its reason and detail, still
//! comes from the visitors.

use std::cell::Cell;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};

use crate::limits::{MAX_LABELS, MAX_LINE_BYTES, PROTOCOL_VERSION};
use crate::reason::{RejectReason, Rejection};
use crate::validate::{validate_label, validate_pid, validate_span, validate_time};
use crate::wire::WireAnnotation;

/// Parse and validate one line (without its `\n`; a trailing `\r` or `\n`
/// is tolerated). `now_realtime_ns` is the agent's CLOCK_REALTIME, used for
/// the ±24 h check of `ts` and spans.
///
/// Checks happen in this order, and the first failure is reported:
/// length, UTF-8, JSON syntax and types (left to right: duplicate keys,
/// wrong types), version, labels (missing, empty, too many, then per label
/// in order: key, value length, control characters), pid, span shape, time
/// range.
pub fn parse_line(line: &[u8], now_realtime_ns: u64) -> Result<WireAnnotation, Rejection> {
    let raw = parse_raw(line)?;
    check(raw, now_realtime_ns)
}

/// [`parse_line`] without the fast scanner: the serde visitors alone, as
/// the agent parsed before the scanner existed. For benchmarks and
/// differential tests only; the verdicts are the same.
#[doc(hidden)]
pub fn parse_line_reference(
    line: &[u8],
    now_realtime_ns: u64,
) -> Result<WireAnnotation, Rejection> {
    let raw = parse_raw_reference(checked_text(line)?)?;
    check(raw, now_realtime_ns)
}

/// Whether `line` is the reply-mode hello `{"v":1,"reply":true}` (field
/// order and whitespace free, `v` optional). Only meaningful as the first
/// line of a connection; later, such a line is refused as `missing_labels`.
pub fn is_reply_hello(line: &[u8]) -> bool {
    match parse_raw(line) {
        Ok(raw) => {
            raw.reply == Some(true)
                && !raw.labels_present
                && raw.v.is_none_or(|v| v == i128::from(PROTOCOL_VERSION))
                && raw.pid.is_none()
                && raw.ts.is_none()
                && raw.span_start.is_none()
                && raw.span_end.is_none()
        }
        Err(_) => false,
    }
}

fn trim_line_end(mut line: &[u8]) -> &[u8] {
    if let [rest @ .., b'\n'] = line {
        line = rest;
    }
    if let [rest @ .., b'\r'] = line {
        line = rest;
    }
    line
}

/// The fields as they came off the wire, before semantic checks.
#[derive(Debug, Default, PartialEq, Eq)]
struct Raw {
    labels_present: bool,
    labels: Vec<(String, String)>,
    /// Number of labels seen, which may exceed `labels.len()` once the
    /// limit is passed (the excess is not stored).
    label_count: usize,
    pid: Option<i128>,
    start_time: Option<i128>,
    ts: Option<i128>,
    span_start: Option<i128>,
    span_end: Option<i128>,
    v: Option<i128>,
    reply: Option<bool>,
    unknown_fields: u32,
}

fn parse_raw(line: &[u8]) -> Result<Raw, Rejection> {
    let text = checked_text(line)?;
    match scan::scan(text) {
        Some(raw) => Ok(raw),
        None => parse_raw_reference(text),
    }
}

/// The line without its end, once its length and UTF-8 are checked.
fn checked_text(line: &[u8]) -> Result<&str, Rejection> {
    let line = trim_line_end(line);
    if line.len() > MAX_LINE_BYTES {
        return Err(Rejection::new(
            RejectReason::LineTooLong,
            format!("line is {} bytes, max {MAX_LINE_BYTES}", line.len()),
        ));
    }
    std::str::from_utf8(line)
        .map_err(|e| Rejection::new(RejectReason::InvalidUtf8, format!("invalid UTF-8: {e}")))
}

/// The serde visitors: the reference for every line the scanner passes on.
fn parse_raw_reference(text: &str) -> Result<Raw, Rejection> {
    let noted = Cell::new(None);
    let mut de = serde_json::Deserializer::from_str(text);
    let result = TopSeed { noted: &noted }
        .deserialize(&mut de)
        .and_then(|raw| de.end().map(|()| raw));
    result.map_err(|e| classify(e, noted.get(), text))
}

/// Map a serde_json error to a reason: a reason a visitor noted before
/// failing wins; otherwise syntax errors are `malformed_json` (lone
/// surrogate escapes are `invalid_utf8`) and data errors `wrong_type`.
fn classify(err: serde_json::Error, noted: Option<RejectReason>, text: &str) -> Rejection {
    let detail = err.to_string();
    if let Some(reason) = noted {
        return Rejection::new(reason, detail);
    }
    let reason = match err.classify() {
        serde_json::error::Category::Data => RejectReason::WrongType,
        // serde_json reports an unpaired `\uD800`..`\uDFFF` escape either as
        // a "lone ... surrogate" or as an "unexpected end of hex escape"
        // where it expected the second half of the pair.
        _ if detail.contains("surrogate")
            || (detail.contains("hex escape") && has_surrogate_escape(text)) =>
        {
            RejectReason::InvalidUtf8
        }
        _ => RejectReason::MalformedJson,
    };
    Rejection::new(reason, detail)
}

/// Whether `text` contains a `\uD800`..`\uDFFF` escape (case-insensitive).
fn has_surrogate_escape(text: &str) -> bool {
    text.as_bytes().windows(4).any(|w| {
        w[0] == b'\\'
            && w[1] == b'u'
            && (w[2] | 0x20) == b'd'
            && matches!(w[3] | 0x20, b'8' | b'9' | b'a'..=b'f')
    })
}

fn check(raw: Raw, now: u64) -> Result<WireAnnotation, Rejection> {
    let version = match raw.v {
        None => PROTOCOL_VERSION,
        Some(v) if v == i128::from(PROTOCOL_VERSION) => PROTOCOL_VERSION,
        Some(v) => {
            return Err(Rejection::new(
                RejectReason::UnsupportedVersion,
                format!(
                    "protocol version {v} is not supported (this agent speaks {PROTOCOL_VERSION})"
                ),
            ));
        }
    };
    if !raw.labels_present {
        return Err(Rejection::new(
            RejectReason::MissingLabels,
            "the labels field is required",
        ));
    }
    if raw.label_count == 0 {
        return Err(Rejection::new(
            RejectReason::EmptyLabels,
            "annotation has no labels",
        ));
    }
    if raw.label_count > MAX_LABELS {
        return Err(Rejection::new(
            RejectReason::TooManyLabels,
            format!(
                "annotation has {} labels, max {MAX_LABELS}",
                raw.label_count
            ),
        ));
    }
    for (k, v) in &raw.labels {
        validate_label(k, v)?;
    }
    let pid = raw.pid.map(validate_pid).transpose()?;
    let start_time = match (raw.start_time, pid) {
        (None, _) => None,
        (Some(_), None) => {
            return Err(Rejection::new(
                RejectReason::BadPid,
                "start_time is only meaningful with pid",
            ));
        }
        (Some(st), Some(_)) => Some(u64::try_from(st).map_err(|_| {
            Rejection::new(
                RejectReason::WrongType,
                format!("start_time {st} is negative"),
            )
        })?),
    };
    let time = |field: &str, t: Option<i128>| -> Result<Option<u64>, Rejection> {
        t.map(|t| {
            let t = u64::try_from(t).map_err(|_| {
                Rejection::new(
                    RejectReason::TsOutOfRange,
                    format!("{field} {t} is negative"),
                )
            })?;
            Ok(t)
        })
        .transpose()
    };
    let ts = time("ts", raw.ts)?;
    let span = validate_span(
        time("span_start", raw.span_start)?,
        time("span_end", raw.span_end)?,
    )?;
    if let Some(t) = ts {
        validate_time("ts", t, now)?;
    }
    if let Some((s, e)) = span {
        validate_time("span_start", s, now)?;
        validate_time("span_end", e, now)?;
    }
    Ok(WireAnnotation {
        labels: raw.labels,
        pid,
        start_time,
        ts,
        span,
        version,
        unknown_fields: raw.unknown_fields,
    })
}

/// Record the first structural reason seen, so [`classify`] can report it
/// after serde unwinds.
fn note<E: de::Error>(
    noted: &Cell<Option<RejectReason>>,
    reason: RejectReason,
    msg: fmt::Arguments<'_>,
) -> E {
    if noted.get().is_none() {
        noted.set(Some(reason));
    }
    E::custom(msg)
}

struct TopSeed<'c> {
    noted: &'c Cell<Option<RejectReason>>,
}

impl<'de> DeserializeSeed<'de> for TopSeed<'_> {
    type Value = Raw;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Raw, D::Error> {
        d.deserialize_any(self)
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Field {
    Labels,
    Pid,
    StartTime,
    Ts,
    SpanStart,
    SpanEnd,
    V,
    Reply,
}

impl Field {
    const fn bit(self) -> u8 {
        1 << (self as u8)
    }
    const fn name(self) -> &'static str {
        match self {
            Field::Labels => "labels",
            Field::Pid => "pid",
            Field::StartTime => "start_time",
            Field::Ts => "ts",
            Field::SpanStart => "span_start",
            Field::SpanEnd => "span_end",
            Field::V => "v",
            Field::Reply => "reply",
        }
    }
}

/// A top-level key: a known field, or the name of an unknown one.
enum Key {
    Known(Field),
    Unknown(String),
}

struct KeySeed;

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Key;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Key, D::Error> {
        d.deserialize_str(self)
    }
}

impl Visitor<'_> for KeySeed {
    type Value = Key;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a field name")
    }
    fn visit_str<E: de::Error>(self, s: &str) -> Result<Key, E> {
        Ok(match s {
            "labels" => Key::Known(Field::Labels),
            "pid" => Key::Known(Field::Pid),
            "start_time" => Key::Known(Field::StartTime),
            "ts" => Key::Known(Field::Ts),
            "span_start" => Key::Known(Field::SpanStart),
            "span_end" => Key::Known(Field::SpanEnd),
            "v" => Key::Known(Field::V),
            "reply" => Key::Known(Field::Reply),
            other => Key::Unknown(other.to_owned()),
        })
    }
}

impl<'de> Visitor<'de> for TopSeed<'_> {
    type Value = Raw;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an annotation object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Raw, A::Error> {
        let mut raw = Raw::default();
        let mut seen = 0u8;
        // Names of unknown fields, kept only to refuse duplicates among them.
        let mut unknown: Vec<String> = Vec::new();
        while let Some(key) = map.next_key_seed(KeySeed)? {
            let field = match key {
                Key::Known(f) => f,
                Key::Unknown(name) => {
                    if unknown.contains(&name) {
                        return Err(note(
                            self.noted,
                            RejectReason::DuplicateKey,
                            format_args!("duplicate field {name:?}"),
                        ));
                    }
                    map.next_value::<IgnoredAny>()?;
                    unknown.push(name);
                    raw.unknown_fields = raw.unknown_fields.saturating_add(1);
                    continue;
                }
            };
            if seen & field.bit() != 0 {
                return Err(note(
                    self.noted,
                    RejectReason::DuplicateKey,
                    format_args!("duplicate field {:?}", field.name()),
                ));
            }
            seen |= field.bit();
            let int = |name| IntSeed {
                noted: self.noted,
                name,
            };
            match field {
                Field::Labels => {
                    raw.labels_present = true;
                    let (labels, count) = map.next_value_seed(LabelsSeed { noted: self.noted })?;
                    raw.labels = labels;
                    raw.label_count = count;
                }
                Field::Pid => raw.pid = map.next_value_seed(int("pid"))?,
                Field::StartTime => raw.start_time = map.next_value_seed(int("start_time"))?,
                Field::Ts => raw.ts = map.next_value_seed(int("ts"))?,
                Field::SpanStart => raw.span_start = map.next_value_seed(int("span_start"))?,
                Field::SpanEnd => raw.span_end = map.next_value_seed(int("span_end"))?,
                Field::V => raw.v = map.next_value_seed(int("v"))?,
                Field::Reply => raw.reply = map.next_value::<Option<bool>>()?,
            }
        }
        Ok(raw)
    }
}

/// An optional JSON integer: `null` means absent; floats, strings, booleans
/// and containers are wrong types.
struct IntSeed<'c> {
    noted: &'c Cell<Option<RejectReason>>,
    name: &'static str,
}

impl<'de> DeserializeSeed<'de> for IntSeed<'_> {
    type Value = Option<i128>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Option<i128>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for IntSeed<'_> {
    type Value = Option<i128>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "an integer for {:?}", self.name)
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Option<i128>, E> {
        Ok(Some(i128::from(v)))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Option<i128>, E> {
        Ok(Some(i128::from(v)))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Option<i128>, E> {
        Ok(None)
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Option<i128>, E> {
        Err(note(
            self.noted,
            RejectReason::WrongType,
            format_args!("{} must be an integer, got {v}", self.name),
        ))
    }
}

/// The `labels` object: string keys to string values, duplicates refused.
/// Returns the stored labels and how many were seen in total.
struct LabelsSeed<'c> {
    noted: &'c Cell<Option<RejectReason>>,
}

impl<'de> DeserializeSeed<'de> for LabelsSeed<'_> {
    type Value = (Vec<(String, String)>, usize);
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for LabelsSeed<'_> {
    type Value = (Vec<(String, String)>, usize);
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object of string labels")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut labels: Vec<(String, String)> = Vec::new();
        let mut count = 0usize;
        while let Some(key) = map.next_key::<String>()? {
            count += 1;
            // Past the limit the line is refused anyway: stop storing (and
            // comparing), keep counting so the reason can say how many.
            if count > MAX_LABELS {
                map.next_value::<IgnoredAny>()?;
                continue;
            }
            if labels.iter().any(|(k, _)| *k == key) {
                return Err(note(
                    self.noted,
                    RejectReason::DuplicateKey,
                    format_args!("duplicate label key {key:?}"),
                ));
            }
            let value = map.next_value_seed(StringSeed { key: &key })?;
            labels.push((key, value));
        }
        Ok((labels, count))
    }
}

/// A label value: strings only (`null`, numbers and booleans are wrong
/// types, so `{"step": 42}` is refused rather than silently converted).
struct StringSeed<'k> {
    key: &'k str,
}

impl<'de> DeserializeSeed<'de> for StringSeed<'_> {
    type Value = String;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<String, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for StringSeed<'_> {
    type Value = String;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a string value for label {:?}", self.key)
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<String, E> {
        Ok(v.to_owned())
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<String, E> {
        Ok(v)
    }
}

#[path = "scan.rs"]
mod scan;

#[cfg(test)]
#[path = "parse_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "scan_tests.rs"]
mod scan_tests;

#[cfg(test)]
#[path = "parse_proptests.rs"]
mod proptests;
#[cfg(test)]
#[path = "parse_strategies.rs"]
mod strategies;
