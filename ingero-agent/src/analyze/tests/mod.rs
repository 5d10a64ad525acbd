//! Tests of `query` and `explain` on synthetic recordings written through the real
//! [`Recorder`](ingero_trace::write::Recorder), each with a planted incident (`fixtures.rs`); the
//! assertions are on the JSON (`scenarios.rs`) and on the text layout (`golden.rs`).

pub(crate) mod fixtures;
mod golden;
mod ranks;
mod scenarios;
