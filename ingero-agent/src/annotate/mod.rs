//! Annotation ingest: the Unix socket server that receives NDJSON
//! annotations from applications, validates them against the contract in
//! `ingero-annotate`, authorises pid scopes, converts their times to the
//! trace clock and queues them for the timeline.
//!
//! Interface for the rest of the agent:
//! - [`IngestServer::start`] with an [`IngestConfig`] returns the server
//!   and a receiver of [`ReceivedAnnotation`]s;
//! - [`IngestServer::counters`] for the live view and `--json`;
//! - [`IngestServer::shutdown`] on exit.
//!
//! The client side, `ingero annotate`, is a command: `crate::cli::annotate`.
//!
//! One file per job: `listener` (bind, stale/live socket, removal),
//! `perms` (directory and socket permissions, groups), `conn` (per
//! connection loop), `framing` (lines with resync), `process` (one line:
//! limits, validation, authorisation, hand-off), `ratelimit`, `authz`,
//! `counters`, `received` (the output type), `shared` (the state connections
//! share), `server` (accept loop).

pub(crate) mod authz;
mod config;
mod conn;
mod counters;
mod framing;
pub(crate) mod listener;
mod perms;
mod process;
mod ratelimit;
mod received;
mod server;
mod shared;

pub use config::IngestConfig;
pub use counters::IngestCountersSnapshot;
pub(crate) use perms::resolve_group;
pub use received::{AnnotationTime, Peer, ReceivedAnnotation};
pub use server::IngestServer;

#[cfg(test)]
mod tests;
