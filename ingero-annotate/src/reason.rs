//! Why a line was not accepted: one named reason per rule, with a stable
//! snake_case name used in counters, reply-mode answers and logs.

use std::fmt;

/// Every reason a line can be refused. The names returned by
/// [`RejectReason::as_str`] are part of the contract: they appear in the
/// agent's counters and in reply-mode answers, so they never change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RejectReason {
    /// The line exceeded [`crate::MAX_LINE_BYTES`]; the reader skipped to the
    /// next newline.
    LineTooLong,
    /// The line is not valid UTF-8, or a string escape decodes to a lone
    /// surrogate.
    InvalidUtf8,
    /// Not parseable JSON (or trailing data after the object).
    MalformedJson,
    /// A known field has the wrong JSON type: a float or string where an
    /// integer is expected, a non-string label value, a non-object line, ...
    WrongType,
    /// The same key appears twice, at the top level or inside `labels`.
    DuplicateKey,
    /// No `labels` field.
    MissingLabels,
    /// `labels` is an empty object.
    EmptyLabels,
    /// More than [`crate::MAX_LABELS`] labels.
    TooManyLabels,
    /// A label key is empty, longer than [`crate::MAX_KEY_BYTES`] or has a
    /// byte outside `[A-Za-z0-9_.-]`.
    BadKey,
    /// A label value is longer than [`crate::MAX_VALUE_BYTES`] bytes.
    ValueTooLong,
    /// A label value contains a character of category Cc, Cf, Zl or Zp.
    ControlChar,
    /// `pid` is zero, negative or above `PID_MAX`, or `start_time` was given
    /// without `pid`.
    BadPid,
    /// Only one of `span_start` and `span_end` is present.
    HalfSpan,
    /// `span_end < span_start`.
    ReversedSpan,
    /// `ts`, `span_start` or `span_end` is negative or more than 24 hours
    /// away from the agent's clock.
    TsOutOfRange,
    /// `v` is not a version this agent speaks.
    UnsupportedVersion,
    /// The connection (or the agent as a whole) exceeded its line rate.
    RateLimited,
    /// A pid-scoped annotation from a peer that is neither root nor the
    /// owner of the target process.
    PidNotPermitted,
    /// A pid-scoped annotation for a process that does not exist.
    NoSuchProcess,
    /// `start_time` does not match the live process with that pid (the pid
    /// was reused, or the caller is confused).
    StartTimeMismatch,
}

impl RejectReason {
    /// Every reason, in declaration order.
    pub const ALL: [RejectReason; 20] = [
        RejectReason::LineTooLong,
        RejectReason::InvalidUtf8,
        RejectReason::MalformedJson,
        RejectReason::WrongType,
        RejectReason::DuplicateKey,
        RejectReason::MissingLabels,
        RejectReason::EmptyLabels,
        RejectReason::TooManyLabels,
        RejectReason::BadKey,
        RejectReason::ValueTooLong,
        RejectReason::ControlChar,
        RejectReason::BadPid,
        RejectReason::HalfSpan,
        RejectReason::ReversedSpan,
        RejectReason::TsOutOfRange,
        RejectReason::UnsupportedVersion,
        RejectReason::RateLimited,
        RejectReason::PidNotPermitted,
        RejectReason::NoSuchProcess,
        RejectReason::StartTimeMismatch,
    ];

    /// The stable snake_case name.
    pub const fn as_str(self) -> &'static str {
        match self {
            RejectReason::LineTooLong => "line_too_long",
            RejectReason::InvalidUtf8 => "invalid_utf8",
            RejectReason::MalformedJson => "malformed_json",
            RejectReason::WrongType => "wrong_type",
            RejectReason::DuplicateKey => "duplicate_key",
            RejectReason::MissingLabels => "missing_labels",
            RejectReason::EmptyLabels => "empty_labels",
            RejectReason::TooManyLabels => "too_many_labels",
            RejectReason::BadKey => "bad_key",
            RejectReason::ValueTooLong => "value_too_long",
            RejectReason::ControlChar => "control_char",
            RejectReason::BadPid => "bad_pid",
            RejectReason::HalfSpan => "half_span",
            RejectReason::ReversedSpan => "reversed_span",
            RejectReason::TsOutOfRange => "ts_out_of_range",
            RejectReason::UnsupportedVersion => "unsupported_version",
            RejectReason::RateLimited => "rate_limited",
            RejectReason::PidNotPermitted => "pid_not_permitted",
            RejectReason::NoSuchProcess => "no_such_process",
            RejectReason::StartTimeMismatch => "start_time_mismatch",
        }
    }

    /// The reason with this name, if any.
    pub fn from_name(name: &str) -> Option<RejectReason> {
        RejectReason::ALL.into_iter().find(|r| r.as_str() == name)
    }

    /// Position in [`RejectReason::ALL`], for array-indexed counters.
    pub const fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for RejectReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A refused line: the reason plus a human-readable detail.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}: {detail}")]
pub struct Rejection {
    /// The named reason.
    pub reason: RejectReason,
    /// What exactly was wrong, for humans (never parsed).
    pub detail: String,
}

impl Rejection {
    /// A rejection with a detail message.
    pub fn new(reason: RejectReason, detail: impl Into<String>) -> Rejection {
        Rejection {
            reason,
            detail: detail.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_snake_case_and_round_trip() {
        let mut seen = std::collections::HashSet::new();
        for (i, r) in RejectReason::ALL.into_iter().enumerate() {
            let name = r.as_str();
            assert!(seen.insert(name), "duplicate {name}");
            assert!(
                name.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'),
                "{name}"
            );
            assert_eq!(RejectReason::from_name(name), Some(r));
            assert_eq!(r.index(), i);
        }
        assert_eq!(RejectReason::from_name("nope"), None);
    }

    #[test]
    fn display_includes_reason_and_detail() {
        let r = Rejection::new(RejectReason::BadKey, "key \"a b\"");
        assert_eq!(r.to_string(), "bad_key: key \"a b\"");
    }
}
