//! Label keys: the allowed character set and the well-known keys that the
//! integrations standardise on.

use crate::limits::MAX_KEY_BYTES;

/// The bytes a key may contain, as a human-readable class (also exported in
/// the contract JSON so other clients can check they agree).
pub const KEY_CHARSET: &str = "A-Za-z0-9_.-";

/// Training step number.
pub const KEY_STEP: &str = "step";
/// Training epoch number.
pub const KEY_EPOCH: &str = "epoch";
/// Task identifier (e.g. a distributed worker's task).
pub const KEY_TASK_ID: &str = "task_id";
/// Phase of work (`forward`, `backward`, `optimizer`, `eval`, ...).
pub const KEY_PHASE: &str = "phase";
/// Run identifier (one training or serving run).
pub const KEY_RUN_ID: &str = "run_id";
/// Inference request identifier.
pub const KEY_REQUEST_ID: &str = "request_id";
/// Model name.
pub const KEY_MODEL: &str = "model";

/// All well-known keys, in a stable order.
pub const WELL_KNOWN_KEYS: [&str; 7] = [
    KEY_STEP,
    KEY_EPOCH,
    KEY_TASK_ID,
    KEY_PHASE,
    KEY_RUN_ID,
    KEY_REQUEST_ID,
    KEY_MODEL,
];

/// Whether `b` may appear in a label key.
#[inline]
pub const fn is_key_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'.' || b == b'-'
}

/// Whether `key` is a valid label key: 1 to [`MAX_KEY_BYTES`] bytes, each in
/// `[A-Za-z0-9_.-]`.
pub fn is_valid_key(key: &str) -> bool {
    !key.is_empty() && key.len() <= MAX_KEY_BYTES && key.bytes().all(is_key_byte)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_the_documented_charset() {
        assert!(is_valid_key("step"));
        assert!(is_valid_key("a.b-c_D9"));
        assert!(is_valid_key(&"k".repeat(MAX_KEY_BYTES)));
        for k in WELL_KNOWN_KEYS {
            assert!(is_valid_key(k), "{k}");
        }
    }

    #[test]
    fn rejects_everything_else() {
        assert!(!is_valid_key(""));
        assert!(!is_valid_key(&"k".repeat(MAX_KEY_BYTES + 1)));
        for bad in ["a b", "a/b", "a:b", "é", "a\u{0}", "a+b", "a\"b", "ключ"] {
            assert!(!is_valid_key(bad), "{bad:?}");
        }
        // Exhaustive over single bytes: exactly 65 ASCII bytes are allowed.
        let allowed = (0u8..=255).filter(|b| is_key_byte(*b)).count();
        assert_eq!(allowed, 26 + 26 + 10 + 3);
    }
}
