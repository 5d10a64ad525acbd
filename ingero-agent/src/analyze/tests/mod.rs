//! Tests of `query` and `explain` on synthetic recordings written through the real
//! [`Recorder`](ingero_trace::write::Recorder), each with a planted incident (`fixtures.rs`); the
//! assertions are on the JSON (`scenarios.rs`, `ranks.rs`, `grouping.rs`) and on the text
//! layout (`golden.rs`).

pub(crate) mod fixtures;
mod golden;
mod grouping;
mod hosts;
mod losses;
mod nccl;
mod nvtx;
mod ranks;
mod rules;
mod scenarios;
mod windows;
mod xids;
