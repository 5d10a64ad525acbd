//! Fuzz target: any bytes as one annotation line. `parse_line` (the fast
//! scanner, falling back to the serde visitors) must never panic and must
//! return exactly what `parse_line_reference` (the visitors alone) returns:
//! the same annotation, or the same reason with the same detail. This is
//! the property `ingero-annotate/src/parse_proptests.rs` checks on stable;
//! libFuzzer's coverage guidance explores further than its generators.

#![no_main]

use libfuzzer_sys::fuzz_target;

/// The agent's clock for the ±24 h checks of `ts` and spans: fixed, so a
/// crash reproduces from its input alone.
const NOW: u64 = 1_700_000_000_000_000_000;

fuzz_target!(|line: &[u8]| {
    let fast = ingero_annotate::parse_line(line, NOW);
    let reference = ingero_annotate::parse_line_reference(line, NOW);
    assert_eq!(fast, reference, "line {:?}", String::from_utf8_lossy(line));
    // The reply-mode hello check goes through the scanner too; it only
    // has to not panic.
    let _ = ingero_annotate::is_reply_hello(line);
});
