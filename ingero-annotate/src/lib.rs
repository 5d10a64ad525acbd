//! The ingero annotation contract, shared by the agent and every client.
//!
//! An application labels the trace by writing NDJSON lines to a Unix stream
//! socket:
//!
//! ```text
//! {"labels": {"step": "42"}, "pid": 1234, "ts": 1700000000000000000}
//! ```
//!
//! This crate is the single definition of that line: its fields
//! ([`WireAnnotation`]), limits ([`limits`]), validation and the named
//! reasons a line is refused ([`RejectReason`]). The agent parses with
//! [`parse_line`]; clients encode with [`encode`] or use the non-blocking
//! [`AnnotationWriter`]. The Python package in `python/` mirrors it and its
//! tests check the two agree (see `examples/contract-json.rs`).
//!
//! It knows nothing of the agent.

// The public API is the contract every client builds on: every public item says what it
// means. Set here rather than in [workspace.lints] because Cargo cannot add a lint to one crate
// on top of `workspace = true`; "warn" is an error in CI, which runs clippy with -D warnings.
#![warn(missing_docs)]

pub mod charclass;
mod encode;
pub mod keys;
pub mod limits;
mod parse;
mod reason;
pub mod socket_path;
mod sys;
#[cfg(test)]
mod test_rng;
mod validate;
mod wire;
mod writer;

pub use encode::{EncodeOptions, encode, encode_into};
pub use keys::{KEY_CHARSET, WELL_KNOWN_KEYS, is_valid_key};
pub use limits::{
    MAX_CLOCK_SKEW_NS, MAX_KEY_BYTES, MAX_LABELS, MAX_LINE_BYTES, MAX_VALUE_BYTES, PID_MAX,
    PROTOCOL_VERSION,
};
pub use parse::{is_reply_hello, parse_line, parse_line_reference};
pub use reason::{RejectReason, Rejection};
pub use validate::{validate_label, validate_labels};
pub use wire::WireAnnotation;
pub use writer::{AnnotationWriter, SpanGuard, now_realtime_ns, socket_answers};

/// The reply-mode hello a tool sends as its first line to get one answer
/// per later line.
pub const REPLY_HELLO: &str = "{\"v\":1,\"reply\":true}";
