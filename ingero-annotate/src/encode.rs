//! Encoding one annotation as a wire line (client side). The output always
//! passes [`crate::parse_line`] (given a `ts` near the agent's clock); the
//! round-trip tests check that.

use std::io::Write as _;

use crate::reason::{RejectReason, Rejection};
use crate::validate::{validate_labels, validate_pid, validate_span};

/// The optional fields of an annotation. All times are unix nanoseconds
/// (CLOCK_REALTIME).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EncodeOptions {
    /// Scope the annotation to this process; `None` = trace-wide.
    pub pid: Option<u32>,
    /// Field 22 of `/proc/<pid>/stat`; only valid with `pid`.
    pub start_time: Option<u64>,
    /// Instant timestamp; `None` lets the agent stamp the receive time.
    pub ts: Option<u64>,
    /// `(span_start, span_end)` for a span instead of an instant.
    pub span: Option<(u64, u64)>,
}

/// Encode one annotation as a line terminated by `\n`.
pub fn encode<K: AsRef<str>, V: AsRef<str>>(
    labels: &[(K, V)],
    opts: &EncodeOptions,
) -> Result<Vec<u8>, Rejection> {
    let mut out = Vec::with_capacity(64 + labels.len() * 24);
    encode_into(labels, opts, &mut out)?;
    Ok(out)
}

/// Like [`encode`], appending to `out` (which is left unchanged on error).
pub fn encode_into<K: AsRef<str>, V: AsRef<str>>(
    labels: &[(K, V)],
    opts: &EncodeOptions,
    out: &mut Vec<u8>,
) -> Result<(), Rejection> {
    validate_labels(labels)?;
    if let Some(pid) = opts.pid {
        validate_pid(i128::from(pid))?;
    } else if opts.start_time.is_some() {
        return Err(Rejection::new(
            RejectReason::BadPid,
            "start_time is only meaningful with pid",
        ));
    }
    if let Some((s, e)) = opts.span {
        validate_span(Some(s), Some(e))?;
    }

    out.extend_from_slice(b"{\"labels\":{");
    for (i, (k, v)) in labels.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        // Keys are [A-Za-z0-9_.-] only: nothing to escape.
        out.push(b'"');
        out.extend_from_slice(k.as_ref().as_bytes());
        out.extend_from_slice(b"\":");
        push_json_string(out, v.as_ref());
    }
    out.push(b'}');
    // Writing to a Vec cannot fail; the results are ignored on purpose.
    if let Some(pid) = opts.pid {
        let _ = write!(out, ",\"pid\":{pid}");
    }
    if let Some(st) = opts.start_time {
        let _ = write!(out, ",\"start_time\":{st}");
    }
    if let Some(ts) = opts.ts {
        let _ = write!(out, ",\"ts\":{ts}");
    }
    if let Some((s, e)) = opts.span {
        let _ = write!(out, ",\"span_start\":{s},\"span_end\":{e}");
    }
    out.extend_from_slice(b"}\n");
    Ok(())
}

/// Append `s` as a JSON string. Validated values contain no control
/// characters, so only `"` and `\` need escaping; UTF-8 is written as is.
fn push_json_string(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        if b == b'"' || b == b'\\' {
            out.extend_from_slice(&bytes[start..i]);
            out.push(b'\\');
            out.push(b);
            start = i + 1;
        }
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

#[cfg(test)]
#[path = "encode_tests.rs"]
mod tests;
