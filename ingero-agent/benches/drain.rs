//! Drain capacity: the user-space pipeline after the ring buffers (decode, statistics, and
//! optionally `--json` rendering) fed from records built exactly as the kernel builds them, with
//! no kernel in the loop. Reports events per second on one core for each stage, and the
//! pipeline's rate as a ratio of the decode-only baseline measured in the same run.
//!
//! Run: `cargo bench -p ingero-agent --bench drain` (or `cargo xtask bench probes`).

use std::{hint::black_box, time::Instant};

use common::{RECORDS, records};
use ingero_agent::{decode, pipeline::Pipeline};

mod common;

const ROUNDS: usize = 5;

/// Best rate over the rounds (events per second).
fn rate(mut f: impl FnMut()) -> f64 {
    let mut best = f64::MAX;
    for _ in 0..ROUNDS {
        let t = Instant::now();
        f();
        best = best.min(t.elapsed().as_secs_f64());
    }
    RECORDS as f64 / best
}

fn main() {
    let recs = records();
    let decode_only = rate(|| {
        for r in &recs {
            let _ = black_box(decode::decode(black_box(r)));
        }
    });
    let mut stats_pipeline = Pipeline::new(None);
    let stats = rate(|| {
        for r in &recs {
            stats_pipeline.handle_record(black_box(r));
        }
    });
    let mut json_pipeline = Pipeline::new(Some(Box::new(std::io::sink())));
    let json = rate(|| {
        for r in &recs {
            json_pipeline.handle_record(black_box(r));
        }
    });
    println!(
        "### Drain capacity (`cargo bench -p ingero-agent --bench drain`, {RECORDS} records, best of {ROUNDS})\n"
    );
    println!("| stage | events/s on one core | ratio to decode-only |\n|---|---|---|");
    println!("| decode only (baseline) | {decode_only:.0} | 1.00 |");
    println!(
        "| decode + statistics (live view) | {stats:.0} | {:.2} (target ≥ 2,000,000 events/s) |",
        stats / decode_only
    );
    println!(
        "| decode + statistics + `--json` lines | {json:.0} | {:.2} |",
        json / decode_only
    );
}
