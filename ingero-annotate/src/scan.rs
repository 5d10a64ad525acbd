//! The single-pass fast path of [`super::parse_raw`].
//!
//! The serde visitors in `parse.rs` are the reference: they decide every
//! refusal and its exact reason and detail. This scanner walks the common
//! line byte by byte, without serde's machinery and without allocating
//! anything but the labels, and either produces exactly the [`Raw`] the
//! visitors would, or returns `None` ("not sure") and leaves the line to
//! them. It never refuses a line itself, so refusals cannot drift from the
//! reference; it gives up on anything unusual (any syntax error, a wrong
//! type, a duplicate, a float, `-0`, a lone surrogate, more than
//! [`MAX_LABELS`] labels, deep nesting) because those lines are refused or
//! rare. `scan_tests.rs` checks it against the visitors over many generated
//! lines.

use std::borrow::Cow;

use super::{Field, Raw};
use crate::limits::MAX_LABELS;

/// Deepest nesting of an unknown field's value that is scanned here; deeper
/// values go to the reference (serde_json has its own recursion limit).
const MAX_SKIP_DEPTH: u32 = 32;

/// Scan one line (already length-checked, UTF-8, and trimmed).
pub(super) fn scan(text: &str) -> Option<Raw> {
    let mut s = Scanner { text, i: 0 };
    let raw = s.object()?;
    s.ws();
    (s.i == text.len()).then_some(raw)
}

struct Scanner<'a> {
    text: &'a str,
    i: usize,
}

impl<'a> Scanner<'a> {
    fn bytes(&self) -> &'a [u8] {
        self.text.as_bytes()
    }

    /// Skip JSON whitespace.
    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.bytes().get(self.i) {
            self.i += 1;
        }
    }

    /// The next non-whitespace byte, not consumed.
    fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.bytes().get(self.i).copied()
    }

    /// Consume `c` (after whitespace) or give up.
    fn expect(&mut self, c: u8) -> Option<()> {
        (self.peek()? == c).then(|| self.i += 1)
    }

    /// Consume the literal `lit` if it is next.
    fn literal(&mut self, lit: &[u8]) -> bool {
        let found = self.bytes()[self.i..].starts_with(lit);
        if found {
            self.i += lit.len();
        }
        found
    }

    /// After a member: `true` at `,`, `false` at `close`, else give up.
    fn next_member(&mut self, close: u8) -> Option<bool> {
        match self.peek()? {
            b',' => {
                self.i += 1;
                Some(true)
            }
            c if c == close => {
                self.i += 1;
                Some(false)
            }
            _ => None,
        }
    }

    fn object(&mut self) -> Option<Raw> {
        self.expect(b'{')?;
        let mut raw = Raw::default();
        if self.peek()? == b'}' {
            self.i += 1;
            return Some(raw);
        }
        let mut seen = 0u8;
        // Unknown field names, only to refuse duplicates (no allocation
        // unless a line has unknown fields).
        let mut unknown: Vec<Cow<'a, str>> = Vec::new();
        loop {
            let key = self.string()?;
            self.expect(b':')?;
            let field = match field_named(&key) {
                Some(f) => f,
                None => {
                    if unknown.contains(&key) {
                        return None;
                    }
                    self.skip_value(1)?;
                    unknown.push(key);
                    raw.unknown_fields = raw.unknown_fields.saturating_add(1);
                    if !self.next_member(b'}')? {
                        return Some(raw);
                    }
                    continue;
                }
            };
            if seen & field.bit() != 0 {
                return None;
            }
            seen |= field.bit();
            match field {
                Field::Labels => {
                    raw.labels_present = true;
                    raw.labels = self.labels()?;
                    raw.label_count = raw.labels.len();
                }
                Field::Pid => raw.pid = self.int()?,
                Field::StartTime => raw.start_time = self.int()?,
                Field::Ts => raw.ts = self.int()?,
                Field::SpanStart => raw.span_start = self.int()?,
                Field::SpanEnd => raw.span_end = self.int()?,
                Field::V => raw.v = self.int()?,
                Field::Reply => raw.reply = self.bool_or_null()?,
            }
            if !self.next_member(b'}')? {
                return Some(raw);
            }
        }
    }

    /// The `labels` object; gives up past [`MAX_LABELS`] (refused anyway).
    fn labels(&mut self) -> Option<Vec<(String, String)>> {
        self.expect(b'{')?;
        let mut labels: Vec<(String, String)> = Vec::new();
        if self.peek()? == b'}' {
            self.i += 1;
            return Some(labels);
        }
        labels.reserve(4);
        loop {
            let key = self.string()?;
            if labels.len() == MAX_LABELS || labels.iter().any(|(k, _)| *k == *key) {
                return None;
            }
            self.expect(b':')?;
            let value = self.string()?;
            labels.push((key.into_owned(), value.into_owned()));
            if !self.next_member(b'}')? {
                return Some(labels);
            }
        }
    }

    /// A JSON string (after whitespace), borrowed when it has no escapes.
    fn string(&mut self) -> Option<Cow<'a, str>> {
        self.expect(b'"')?;
        let b = self.bytes();
        let start = self.i;
        let mut j = start;
        loop {
            match *b.get(j)? {
                b'"' => {
                    self.i = j + 1;
                    return self.text.get(start..j).map(Cow::Borrowed);
                }
                b'\\' => break,
                // A raw control character is a syntax error.
                0..0x20 => return None,
                _ => j += 1,
            }
        }
        let mut out = String::with_capacity(j - start + 8);
        out.push_str(self.text.get(start..j)?);
        self.i = j;
        loop {
            let run_start = self.i;
            let mut j = run_start;
            loop {
                match *b.get(j)? {
                    b'"' | b'\\' => break,
                    0..0x20 => return None,
                    _ => j += 1,
                }
            }
            out.push_str(self.text.get(run_start..j)?);
            self.i = j + 1;
            if b[j] == b'"' {
                return Some(Cow::Owned(out));
            }
            out.push(self.escape()?);
        }
    }

    /// One escape, after its backslash.
    fn escape(&mut self) -> Option<char> {
        let c = *self.bytes().get(self.i)?;
        self.i += 1;
        Some(match c {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let hi = self.hex4()?;
                match hi {
                    0xD800..=0xDBFF => {
                        // Only a well-formed pair is decoded here; every
                        // lone half is left to the reference.
                        if !self.literal(b"\\u") {
                            return None;
                        }
                        let lo = self.hex4()?;
                        if !(0xDC00..=0xDFFF).contains(&lo) {
                            return None;
                        }
                        char::from_u32(0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00))?
                    }
                    _ => char::from_u32(hi)?,
                }
            }
            _ => return None,
        })
    }

    fn hex4(&mut self) -> Option<u32> {
        let digits = self.bytes().get(self.i..self.i + 4)?;
        let mut v = 0u32;
        for &d in digits {
            v = v * 16 + char::from(d).to_digit(16)?;
        }
        self.i += 4;
        Some(v)
    }

    /// An integer field: `null` is absent; only what serde_json hands the
    /// visitor as `u64` or `i64` is taken (floats, `-0`, overflow and
    /// leading zeros are left to the reference).
    fn int(&mut self) -> Option<Option<i128>> {
        if self.peek()? == b'n' {
            return self.literal(b"null").then_some(None);
        }
        let b = self.bytes();
        let negative = b[self.i] == b'-';
        if negative {
            self.i += 1;
        }
        let start = self.i;
        let mut v: u64 = 0;
        while let Some(&d @ b'0'..=b'9') = b.get(self.i) {
            v = v.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
            self.i += 1;
        }
        let digits = self.i - start;
        if digits == 0 || (digits > 1 && b[start] == b'0') {
            return None;
        }
        if let Some(b'.' | b'e' | b'E') = b.get(self.i) {
            return None;
        }
        if !negative {
            return Some(Some(i128::from(v)));
        }
        // serde_json gives -0 and magnitudes past i64::MIN as floats.
        if v == 0 || v > 1 << 63 {
            return None;
        }
        Some(Some(-i128::from(v)))
    }

    fn bool_or_null(&mut self) -> Option<Option<bool>> {
        self.peek()?;
        if self.literal(b"null") {
            Some(None)
        } else if self.literal(b"true") {
            Some(Some(true))
        } else if self.literal(b"false") {
            Some(Some(false))
        } else {
            None
        }
    }

    /// Skip any JSON value, checking its syntax as serde_json's
    /// `IgnoredAny` does.
    fn skip_value(&mut self, depth: u32) -> Option<()> {
        if depth > MAX_SKIP_DEPTH {
            return None;
        }
        match self.peek()? {
            b'"' => self.string().map(drop),
            b'{' => {
                self.i += 1;
                if self.peek()? == b'}' {
                    self.i += 1;
                    return Some(());
                }
                loop {
                    self.string()?;
                    self.expect(b':')?;
                    self.skip_value(depth + 1)?;
                    if !self.next_member(b'}')? {
                        return Some(());
                    }
                }
            }
            b'[' => {
                self.i += 1;
                if self.peek()? == b']' {
                    self.i += 1;
                    return Some(());
                }
                loop {
                    self.skip_value(depth + 1)?;
                    if !self.next_member(b']')? {
                        return Some(());
                    }
                }
            }
            b'n' => self.literal(b"null").then_some(()),
            b't' => self.literal(b"true").then_some(()),
            b'f' => self.literal(b"false").then_some(()),
            _ => self.skip_number(),
        }
    }

    /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`
    fn skip_number(&mut self) -> Option<()> {
        let b = self.bytes();
        if b.get(self.i) == Some(&b'-') {
            self.i += 1;
        }
        match b.get(self.i)? {
            b'0' => {
                self.i += 1;
                if let Some(b'0'..=b'9') = b.get(self.i) {
                    return None;
                }
            }
            b'1'..=b'9' => {
                self.digits();
            }
            _ => return None,
        }
        if b.get(self.i) == Some(&b'.') {
            self.i += 1;
            if self.digits() == 0 {
                return None;
            }
        }
        if let Some(b'e' | b'E') = b.get(self.i) {
            self.i += 1;
            if let Some(b'+' | b'-') = b.get(self.i) {
                self.i += 1;
            }
            if self.digits() == 0 {
                return None;
            }
        }
        Some(())
    }

    /// Consume a run of digits; how many.
    fn digits(&mut self) -> usize {
        let start = self.i;
        while let Some(b'0'..=b'9') = self.bytes().get(self.i) {
            self.i += 1;
        }
        self.i - start
    }
}

/// The known field with this (decoded) name.
fn field_named(name: &str) -> Option<Field> {
    Some(match name {
        "labels" => Field::Labels,
        "pid" => Field::Pid,
        "start_time" => Field::StartTime,
        "ts" => Field::Ts,
        "span_start" => Field::SpanStart,
        "span_end" => Field::SpanEnd,
        "v" => Field::V,
        "reply" => Field::Reply,
        _ => return None,
    })
}
