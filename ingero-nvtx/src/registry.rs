//! The process-wide definitions: domains, registered strings, category names and thread names,
//! kept as encoded [`crate::wire`] records so that the sender can replay them to every agent it
//! connects to, before any event, and an agent started or restarted after the program defined
//! them still knows them. Not on the hot path: definitions are rare and may allocate.
//!
//! Bounded by [`MAX_DEFINITIONS`] records and [`MAX_DEFINITION_BYTES`] bytes; a definition past
//! either bound is not kept and is counted in [`OVERFLOW`] (reported to the agent within
//! `Record::Dropped`).

use std::sync::atomic::{AtomicU64, Ordering};

use crate::lock::Lock;
use crate::wire::{self, Record};

/// Most definitions kept.
pub const MAX_DEFINITIONS: usize = 64 * 1024;
/// Most bytes of definitions kept.
pub const MAX_DEFINITION_BYTES: usize = 16 << 20;

/// Definitions refused because the registry was full.
pub static OVERFLOW: AtomicU64 = AtomicU64::new(0);

/// The encoded definitions, in the order they were made.
pub struct Definitions {
    bytes: Vec<u8>,
    count: usize,
}

/// The registry (its lock is also taken around `fork`, see `crate::sender`).
pub static REGISTRY: Lock<Definitions> = Lock::new(Definitions {
    bytes: Vec::new(),
    count: 0,
});

/// Keeps `rec` (a definition) for replay; the sender picks it up on its next tick.
pub fn define(rec: &Record<'_>) {
    let mut defs = REGISTRY.lock();
    if defs.count >= MAX_DEFINITIONS || defs.bytes.len() >= MAX_DEFINITION_BYTES {
        OVERFLOW.fetch_add(1, Ordering::Relaxed);
        return;
    }
    wire::encode(rec, &mut defs.bytes);
    defs.count += 1;
}

/// Appends the definitions' bytes from byte `offset` on to `out`; the new offset.
pub fn copy_since(offset: usize, out: &mut Vec<u8>) -> usize {
    let defs = REGISTRY.lock();
    out.extend_from_slice(defs.bytes.get(offset..).unwrap_or_default());
    defs.bytes.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::records;

    #[test]
    fn definitions_are_replayed_from_any_offset() {
        // The registry is process-wide and other tests may define too: look at our own.
        let start = copy_since(usize::MAX, &mut Vec::new());
        define(&Record::DomainCreate {
            ts_ns: 1,
            domain: 901,
            name: "replayed",
        });
        define(&Record::RegisterString {
            ts_ns: 2,
            domain: 901,
            id: 5,
            text: "s",
        });
        let mut out = Vec::new();
        let end = copy_since(start, &mut out);
        assert!(end > start);
        let got: Vec<_> = records(&out).map(|r| r.unwrap()).collect();
        assert!(got.contains(&Record::DomainCreate {
            ts_ns: 1,
            domain: 901,
            name: "replayed"
        }));
        assert!(got.contains(&Record::RegisterString {
            ts_ns: 2,
            domain: 901,
            id: 5,
            text: "s"
        }));
        let mut none = Vec::new();
        copy_since(usize::MAX, &mut none);
        assert!(none.is_empty());
    }
}
