//! Property tests (proptest) of the line parser. Over generated inputs they
//! check that
//!
//! - on any input (arbitrary bytes; soups of JSON tokens; valid lines with
//!   one value strung from pieces of numbers and literals; valid lines
//!   damaged by byte flips, insertions, deletions, truncation, repeated
//!   slices and duplicated keys) `parse_line` never panics and returns
//!   exactly what `parse_line_reference` (the serde visitors) returns: the
//!   same annotation, or the same reason with the same detail; and whenever
//!   the fast scanner answers itself, its `Raw` equals the visitors' (which
//!   also covers `reply`, a field `parse_line`'s result does not carry);
//! - every valid annotation, written by [`crate::encode`] or by hand with
//!   free whitespace, member order, string escapes, `null`s and unknown
//!   fields, is accepted with exactly the labels, pid, start time, times and
//!   unknown-field count it was written with, and the hand-written ones are
//!   answered by the scanner itself (so the differential tests cannot pass
//!   merely because the fast path gave up).
//!
//! The module hangs off `parse.rs` (not `lib.rs`) to reach the scanner and
//! `Raw`. `scan_tests.rs` checks the same agreement with a fixed
//! hand-rolled generator, and its `agrees` is the check used here too (it
//! panics on a disagreement; proptest catches the panic, shrinks the input
//! and reports it); these explore further and shrink a failure to a
//! small input. Every run starts from the same seed, so CI is reproducible;
//! `PROPTEST_CASES` and `PROPTEST_RNG_SEED` ask for a longer or different
//! run, e.g. `PROPTEST_CASES=300000 PROPTEST_RNG_SEED=7 cargo test
//! --release -p ingero-annotate proptests`.

use std::collections::BTreeSet;

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngSeed, TestRunner};

use super::scan::scan;
use super::scan_tests::agrees;
use super::strategies::{annotation, damaged_line, odd_value_line, token_soup, written_line};
use super::*;
use crate::encode::encode;
use crate::test_rng::NOW;

/// The seed of every run unless `PROPTEST_RNG_SEED` says otherwise.
const SEED: u64 = 0x1e6e_2024_a770_7a7e;

/// `cases` cases from [`SEED`] (an eighth in a debug build, about ten
/// times slower: a plain `cargo test` stays quick, CI's release run does
/// them all). Failures are not persisted to files: with a fixed seed a
/// failure reproduces anyway, and a found bug gets a regular regression
/// test instead.
fn config(cases: u32) -> Config {
    // `Config::default()` reads the PROPTEST_* variables.
    let base = Config::default();
    Config {
        cases: if std::env::var_os("PROPTEST_CASES").is_some() {
            base.cases
        } else if cfg!(debug_assertions) {
            cases / 8
        } else {
            cases
        },
        rng_seed: match base.rng_seed {
            RngSeed::Random => RngSeed::Fixed(SEED),
            chosen => chosen,
        },
        failure_persistence: None,
        ..base
    }
}

proptest! {
    #![proptest_config(config(16384))]

    #[test]
    fn the_scanner_agrees_with_the_reference_on_any_bytes(
        line in vec(any::<u8>(), 0..2048),
    ) {
        agrees(&line);
    }
}

proptest! {
    #![proptest_config(config(32768))]

    #[test]
    fn the_scanner_agrees_with_the_reference_on_any_soup_of_json_tokens(
        line in token_soup(),
    ) {
        agrees(&line);
    }

    #[test]
    fn the_scanner_agrees_with_the_reference_on_any_value_of_any_field(
        line in odd_value_line(),
    ) {
        agrees(&line);
    }
}

proptest! {
    #![proptest_config(config(16384))]

    #[test]
    fn the_scanner_agrees_with_the_reference_on_damaged_valid_lines(
        line in damaged_line(),
    ) {
        agrees(&line);
    }
}

proptest! {
    #![proptest_config(config(4096))]

    #[test]
    fn encoded_annotations_parse_back_to_what_was_encoded(a in annotation()) {
        let line = encode(&a.labels, &a.opts).expect("a valid annotation encodes");
        prop_assert_eq!(parse_line(&line, NOW), Ok(a.decoded(0)));
        agrees(&line);
    }

    #[test]
    fn hand_written_valid_lines_take_the_fast_path_and_parse_back(
        (written, expected) in written_line(),
    ) {
        let line = written.bytes();
        let shown = String::from_utf8_lossy(&line).into_owned();
        prop_assert_eq!(parse_line(&line, NOW), Ok(expected), "line {:?}", shown);
        prop_assert!(agrees(&line), "the scanner gave up on {:?}", shown);
    }
}

/// The damaged-line generator is only worth its cases if it reaches both
/// paths and many refusals: count what a fixed sample of it does.
#[test]
fn damaged_lines_reach_the_fast_path_and_many_refusals() {
    let mut runner = TestRunner::new(config(0));
    let strategy = damaged_line();
    let (mut fast, mut accepted) = (0, 0);
    let mut reasons = BTreeSet::new();
    let total = 2000;
    for _ in 0..total {
        let line = strategy
            .new_tree(&mut runner)
            .expect("the strategy generates")
            .current();
        let Ok(text) = checked_text(&line) else {
            reasons.insert(RejectReason::InvalidUtf8);
            continue;
        };
        if scan(text).is_some() {
            fast += 1;
        }
        match parse_line(&line, NOW) {
            Ok(_) => accepted += 1,
            Err(e) => {
                reasons.insert(e.reason);
            }
        }
    }
    eprintln!("{fast} of {total} on the fast path, {accepted} accepted, refused as {reasons:?}");
    assert!(fast > total / 10, "{fast} of {total} on the fast path");
    assert!(
        accepted > total / 10 && accepted < total * 9 / 10,
        "{accepted} of {total} accepted"
    );
    for reason in [
        RejectReason::InvalidUtf8,
        RejectReason::MalformedJson,
        RejectReason::WrongType,
        RejectReason::DuplicateKey,
        RejectReason::BadKey,
        RejectReason::ControlChar,
    ] {
        assert!(reasons.contains(&reason), "no {reason} in {reasons:?}");
    }
}
