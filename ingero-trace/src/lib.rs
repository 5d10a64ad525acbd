//! ingero's recording format: the timeline model, its one vocabulary, the Perfetto writer and
//! the streaming reader.
//!
//! Everything that reads or writes a recording builds on this crate: the agent's `trace
//! --record` writes through [`write::Recorder`]; `query`, `explain` and the exporters read
//! through [`read::TraceReader`]. It depends on neither aya nor tokio, so tools that only read
//! recordings do not compile the agent.

// The public API is the recording format other tools build on: every public item says what it
// means. Set here rather than in [workspace.lints] because Cargo cannot add a lint to one crate
// on top of `workspace = true`; "warn" is an error in CI, which runs clippy with -D warnings.
#![warn(missing_docs)]

pub mod clock;
pub mod clock_error;
pub mod fast_map;
pub mod host;
pub mod json;
pub mod model;
pub mod proto;
pub mod read;
pub mod synth;
pub mod vocab;
pub mod write;
