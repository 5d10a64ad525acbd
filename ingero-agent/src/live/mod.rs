//! The live view: running statistics per operation and their rendering as a table.

pub mod stats;
pub mod table;

pub use stats::Stats;
