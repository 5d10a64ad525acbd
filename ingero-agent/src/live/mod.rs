//! The live view: running statistics per operation, GPU memory per process, and their
//! rendering as a table.

pub mod memory;
pub mod stats;
pub mod table;
mod xid;

pub use stats::Stats;
pub use xid::xid_line;
