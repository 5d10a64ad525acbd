//! The checks shared by the parser (agent side) and the encoder (client
//! side), so both enforce the exact same rules.

use crate::charclass::find_forbidden_char;
use crate::keys::is_valid_key;
use crate::limits::{MAX_CLOCK_SKEW_NS, MAX_LABELS, MAX_VALUE_BYTES, PID_MAX};
use crate::reason::{RejectReason, Rejection};

/// Check one label.
pub fn validate_label(key: &str, value: &str) -> Result<(), Rejection> {
    if !is_valid_key(key) {
        return Err(Rejection::new(
            RejectReason::BadKey,
            format!("invalid label key {key:?} (1 to 64 bytes of [A-Za-z0-9_.-])"),
        ));
    }
    if value.len() > MAX_VALUE_BYTES {
        return Err(Rejection::new(
            RejectReason::ValueTooLong,
            format!(
                "label {key:?} value is {} bytes, max {MAX_VALUE_BYTES}",
                value.len()
            ),
        ));
    }
    if let Some(c) = find_forbidden_char(value) {
        return Err(Rejection::new(
            RejectReason::ControlChar,
            format!(
                "label {key:?} value contains U+{:04X} (control or invisible format character)",
                c as u32
            ),
        ));
    }
    Ok(())
}

/// Check a whole label set: non-empty, at most [`MAX_LABELS`], unique keys,
/// every label valid.
pub fn validate_labels<K: AsRef<str>, V: AsRef<str>>(labels: &[(K, V)]) -> Result<(), Rejection> {
    // Same order as the parser: duplicates (found while reading, among the
    // first MAX_LABELS) come before the count checks and per-label rules.
    let head = &labels[..labels.len().min(MAX_LABELS)];
    for (i, (k, _)) in head.iter().enumerate() {
        let k = k.as_ref();
        // Quadratic, but n ≤ 32 and this avoids any allocation.
        if head[..i].iter().any(|(p, _)| p.as_ref() == k) {
            return Err(Rejection::new(
                RejectReason::DuplicateKey,
                format!("label key {k:?} appears twice"),
            ));
        }
    }
    if labels.is_empty() {
        return Err(Rejection::new(
            RejectReason::EmptyLabels,
            "annotation has no labels",
        ));
    }
    if labels.len() > MAX_LABELS {
        return Err(Rejection::new(
            RejectReason::TooManyLabels,
            format!("annotation has {} labels, max {MAX_LABELS}", labels.len()),
        ));
    }
    for (k, v) in labels {
        validate_label(k.as_ref(), v.as_ref())?;
    }
    Ok(())
}

/// Check a pid value as it came off the wire (any integer).
pub fn validate_pid(pid: i128) -> Result<u32, Rejection> {
    if pid < 1 || pid > i128::from(PID_MAX) {
        return Err(Rejection::new(
            RejectReason::BadPid,
            format!("pid {pid} is outside 1..={PID_MAX}"),
        ));
    }
    // In range 1..=2^22, so the conversion cannot fail; map it anyway rather
    // than unwrap.
    u32::try_from(pid).map_err(|_| Rejection::new(RejectReason::BadPid, "pid out of range"))
}

/// Check a span's shape (both ends or none, not reversed).
pub fn validate_span(
    start: Option<u64>,
    end: Option<u64>,
) -> Result<Option<(u64, u64)>, Rejection> {
    match (start, end) {
        (None, None) => Ok(None),
        (Some(s), Some(e)) if e >= s => Ok(Some((s, e))),
        (Some(s), Some(e)) => Err(Rejection::new(
            RejectReason::ReversedSpan,
            format!("span_end {e} is before span_start {s}"),
        )),
        _ => Err(Rejection::new(
            RejectReason::HalfSpan,
            "span_start and span_end must be given together",
        )),
    }
}

/// Check that a unix-ns timestamp is within 24 hours of `now_realtime_ns`.
pub fn validate_time(field: &str, t: u64, now_realtime_ns: u64) -> Result<(), Rejection> {
    if t.abs_diff(now_realtime_ns) > MAX_CLOCK_SKEW_NS {
        return Err(Rejection::new(
            RejectReason::TsOutOfRange,
            format!("{field} {t} is more than 24h from the agent clock ({now_realtime_ns})"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason<T: std::fmt::Debug>(r: Result<T, Rejection>) -> RejectReason {
        match r {
            Ok(v) => panic!("expected a rejection, got {v:?}"),
            Err(e) => e.reason,
        }
    }

    #[test]
    fn labels_rules() {
        assert!(validate_labels(&[("step", "42")]).is_ok());
        assert!(
            validate_labels(&[("step", "")]).is_ok(),
            "empty value clears a key"
        );
        let empty: [(&str, &str); 0] = [];
        assert_eq!(reason(validate_labels(&empty)), RejectReason::EmptyLabels);
        let many: Vec<(String, String)> = (0..33).map(|i| (format!("k{i}"), "v".into())).collect();
        assert_eq!(reason(validate_labels(&many)), RejectReason::TooManyLabels);
        assert!(validate_labels(&many[..32]).is_ok());
        assert_eq!(
            reason(validate_labels(&[("a", "1"), ("a", "2")])),
            RejectReason::DuplicateKey
        );
        assert_eq!(
            reason(validate_labels(&[("a b", "1")])),
            RejectReason::BadKey
        );
        let long = "x".repeat(257);
        assert_eq!(
            reason(validate_labels(&[("a", long.as_str())])),
            RejectReason::ValueTooLong
        );
        // 256 bytes of multi-byte UTF-8 is fine, 258 is not.
        assert!(validate_labels(&[("a", "é".repeat(128).as_str())]).is_ok());
        assert_eq!(
            reason(validate_labels(&[("a", "é".repeat(129).as_str())])),
            RejectReason::ValueTooLong
        );
        assert_eq!(
            reason(validate_labels(&[("a", "x\u{200b}")])),
            RejectReason::ControlChar
        );
    }

    #[test]
    fn pid_span_and_time_rules() {
        assert_eq!(validate_pid(1), Ok(1));
        assert_eq!(validate_pid(i128::from(PID_MAX)), Ok(4_194_304));
        for bad in [0, -1, i128::from(PID_MAX) + 1, i128::from(u64::MAX)] {
            assert_eq!(reason(validate_pid(bad)), RejectReason::BadPid);
        }
        assert_eq!(validate_span(None, None), Ok(None));
        assert_eq!(validate_span(Some(5), Some(5)), Ok(Some((5, 5))));
        assert_eq!(
            reason(validate_span(Some(6), Some(5))),
            RejectReason::ReversedSpan
        );
        assert_eq!(reason(validate_span(Some(6), None)), RejectReason::HalfSpan);
        assert_eq!(reason(validate_span(None, Some(6))), RejectReason::HalfSpan);
        let now = 1_700_000_000_000_000_000;
        assert!(validate_time("ts", now + MAX_CLOCK_SKEW_NS, now).is_ok());
        assert!(validate_time("ts", now - MAX_CLOCK_SKEW_NS, now).is_ok());
        assert_eq!(
            reason(validate_time("ts", now + MAX_CLOCK_SKEW_NS + 1, now)),
            RejectReason::TsOutOfRange
        );
        assert_eq!(
            reason(validate_time("ts", 0, now)),
            RejectReason::TsOutOfRange
        );
    }
}
