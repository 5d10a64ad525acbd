//! Integration-style tests: the real server on a temporary socket, real
//! client connections, real credentials.

mod ingest;
mod limits;
mod security;
mod support;
