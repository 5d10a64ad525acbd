//! Time windows read through the seek index give the reports of a full scan, exactly: on a
//! recording of `synth::edges` (a restart at every chunk, calls and off-CPU intervals open
//! across many restarts, late calls, allocations, steps and request spans, several files),
//! for many windows, `query --json` (per op, `--group-by step`, `--by-request`),
//! `explain --json`, `explain --by-request --json`, `query --events --json` and
//! `query --memory --json` are the same with the index as with `seek_windows` off (what
//! `INGERO_FULL_SCAN=1` does).

use std::path::PathBuf;
use std::sync::OnceLock;

use serde_json::Value;

use crate::analyze::{self, Analysis, EventFormat, QueryMode, SelectionSpec};
use ingero_trace::read::TimeRange;
use ingero_trace::synth::edges::{self, EdgeOptions};

fn recording() -> &'static (Vec<PathBuf>, PathBuf) {
    static REC: OnceLock<(Vec<PathBuf>, PathBuf)> = OnceLock::new();
    REC.get_or_init(|| {
        let dir =
            std::env::temp_dir().join(format!("ingero-analyze-{}-windows", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let files = edges::write(dir.join("edges.pftrace"), &EdgeOptions::default())
            .expect("write the recording");
        assert!(files.len() > 2, "several files");
        (files, dir)
    })
}

fn open(spec: &SelectionSpec) -> Analysis {
    let (files, dir) = recording();
    Analysis::from_files(files.clone(), dir.clone(), spec).expect("analysis opens")
}

/// Every report the window selection feeds, as JSON.
fn reports(an: &Analysis) -> Vec<Value> {
    let mut out = Vec::new();
    for mode in [
        QueryMode::Ops,
        QueryMode::group_by(&["step"]),
        QueryMode::ByRequest,
    ] {
        out.push(analyze::query(an, &mode).expect("query").json().value());
    }
    out.push(analyze::explain(an, None).expect("explain").json().value());
    out.push(analyze::rank_requests(an).expect("ranking").json().value());
    let mut events = Vec::new();
    analyze::events::write(an, EventFormat::Json, &mut events).expect("events");
    out.push(Value::String(String::from_utf8(events).expect("utf-8")));
    if an.selection.op_mask.is_empty() && an.selection.labels.is_empty() {
        out.push(analyze::memory::query(an).expect("memory").json().value());
    }
    out
}

/// The reports of `an` read through the index and by a full scan: the same, and not empty.
fn same_both_ways(mut an: Analysis, what: &str) {
    an.index.seek_windows = true;
    let indexed = reports(&an);
    an.index.seek_windows = false;
    let full = reports(&an);
    for (i, (a, b)) in indexed.iter().zip(&full).enumerate() {
        assert!(
            a == b,
            "{what}: report {i} differs\nindexed: {a}\nfull:    {b}"
        );
    }
}

#[test]
fn windows_report_what_a_full_scan_reports() {
    let base = open(&SelectionSpec::default());
    let (a, b) = (base.index.clock.start_ns, base.index.clock.end_ns);
    assert!(
        base.index.seek.restarts() > 100,
        "{}",
        base.index.seek.restarts()
    );
    let mut rng = 0x2545_F491_4F6C_DD1Du64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let span = b - a;
    let mut windows = vec![(a, b), (a, a + span / 100), (b - span / 100, b), (a, a)];
    for _ in 0..12 {
        let start = a + next() % span;
        let len = next() % (span / 20).max(1);
        windows.push((start, (start + len).min(b)));
    }
    let mut events = 0;
    for (x, y) in windows {
        let mut an = open(&SelectionSpec::default());
        an.selection.range = TimeRange::new(x, y);
        let what = format!("window {}..{} of {a}..{b}", x - a, y - a);
        let matched = analyze::explain(&an, None).expect("explain").json().value();
        events += matched["events"].as_u64().unwrap_or(0);
        same_both_ways(an, &what);
    }
    assert!(events > 10_000, "the windows hold events: {events}");
}

#[test]
fn the_window_flags_and_filters_report_what_a_full_scan_reports() {
    let specs = [
        SelectionSpec {
            since: Some("40ms".into()),
            ..Default::default()
        },
        SelectionSpec {
            from: Some("+300ms".into()),
            to: Some("+320ms".into()),
            ..Default::default()
        },
        SelectionSpec {
            at: Some("+500ms".into()),
            ..Default::default()
        },
        SelectionSpec {
            from: Some("+100ms".into()),
            to: Some("+400ms".into()),
            ops: vec!["cudaDeviceSynchronize,cudaMemcpy".into()],
            ..Default::default()
        },
        SelectionSpec {
            from: Some("+200ms".into()),
            to: Some("+260ms".into()),
            labels: vec!["step=12".into()],
            pids: vec![edges::PID],
            ..Default::default()
        },
    ];
    for spec in specs {
        let what = format!("{spec:?}");
        same_both_ways(open(&spec), &what);
    }
}
