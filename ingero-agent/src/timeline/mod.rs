//! The agent's timeline: the merger that orders probe events and annotations into one
//! time-ordered stream for the recording.

pub mod merger;
