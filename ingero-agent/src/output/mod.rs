//! User-facing renderings of events: the `--json` line schema (docs/json-schema.md).

pub mod json;
