//! Numeric limits of the annotation wire contract.
//!
//! Every limit is measured on decoded values (after JSON unescaping), so a
//! client's choice of escaping never changes whether an annotation is valid.
//! The one limit measured on raw bytes is [`MAX_LINE_BYTES`], and it is derived
//! below so that every annotation that passes validation fits, however it is
//! escaped.

/// Current protocol version (`"v"`). Larger values are rejected.
pub const PROTOCOL_VERSION: u64 = 1;

/// At most this many labels per annotation.
pub const MAX_LABELS: usize = 32;

/// A label key is 1 to this many bytes of `[A-Za-z0-9_.-]`.
pub const MAX_KEY_BYTES: usize = 64;

/// A label value is at most this many bytes of UTF-8 (decoded). `""` is valid
/// and clears the key on the timeline.
pub const MAX_VALUE_BYTES: usize = 256;

/// `ts`, `span_start` and `span_end` must lie within this distance of the
/// agent's CLOCK_REALTIME (24 hours).
pub const MAX_CLOCK_SKEW_NS: u64 = 24 * 60 * 60 * 1_000_000_000;

/// Linux `PID_MAX_LIMIT` on 64-bit kernels (2^22): no pid can be larger.
pub const PID_MAX: u64 = 4_194_304;

/// The worst-case escaped size of one byte of a decoded string: JSON lets any
/// character be written as `\uXXXX`, and one UTF-8 byte never needs more
/// than 6 bytes of escape (a 4-byte character is a 12-byte surrogate pair,
/// i.e. 3 bytes of escape per byte of UTF-8; ASCII as `\u0041` is 6 per byte).
const ESCAPE_FACTOR: usize = 6;

/// Worst case for one `"key":"value",` member: both strings fully escaped plus
/// two pairs of quotes, the colon and the comma.
const WORST_LABEL_MEMBER: usize = ESCAPE_FACTOR * (MAX_KEY_BYTES + MAX_VALUE_BYTES) + 6;

/// Room for everything outside the labels object: the braces, `"labels":`,
/// the integer fields (`pid`, `ts`, `start_time`, `span_start`, `span_end`,
/// `v`, each at most 20 digits, with escaped names), insignificant whitespace
/// a pretty-printer may add and a trailing `\r`. 4 KiB is several times what
/// these need.
const ENVELOPE_SLACK: usize = 4096;

/// The longest line (excluding the `\n`) the agent reads as one annotation.
///
/// `MAX_LABELS * (6 * (64 + 256) + 6) + 4096 = 32 * 1926 + 4096 = 65_728`
/// bytes. The published 0.1.1 client's `ensure_ascii` escaping reaches about
/// 27 KB for a maximal annotation, well inside this. A longer line is
/// rejected on its own (`line_too_long`) and the reader resynchronises at the
/// next newline.
pub const MAX_LINE_BYTES: usize = MAX_LABELS * WORST_LABEL_MEMBER + ENVELOPE_SLACK;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_cap_matches_documented_derivation() {
        assert_eq!(WORST_LABEL_MEMBER, 1926);
        assert_eq!(MAX_LINE_BYTES, 65_728);
    }

    #[test]
    fn line_cap_covers_a_fully_escaped_maximal_annotation() {
        // Every key and value byte written as \u00XX, 32 labels, every
        // integer field at 20 digits.
        let esc = |n: usize| "\\u0061".repeat(n);
        let mut line = String::from("{\"labels\":{");
        for i in 0..MAX_LABELS {
            if i > 0 {
                line.push(',');
            }
            line.push_str(&format!(
                "\"{}\":\"{}\"",
                esc(MAX_KEY_BYTES),
                esc(MAX_VALUE_BYTES)
            ));
        }
        line.push('}');
        for f in ["pid", "ts", "start_time", "span_start", "span_end", "v"] {
            line.push_str(&format!(",\"{}\":18446744073709551615", esc(f.len())));
        }
        line.push('}');
        assert!(
            line.len() < MAX_LINE_BYTES,
            "{} >= {}",
            line.len(),
            MAX_LINE_BYTES
        );
    }
}
