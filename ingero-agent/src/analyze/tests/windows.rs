//! Time windows read through the seek index give the reports of a full scan, exactly: on a
//! recording of `synth::edges` (a restart at every chunk, calls and off-CPU intervals open
//! across many restarts, late calls, allocations, steps and request spans, several files),
//! for many windows, `query --json` (per op, `--group-by step`, `--by-request`),
//! `explain --json`, `explain --by-request --json`, `query --events --json` and
//! `query --memory --json` are the same with the index as with `seek_windows` off (what
//! `INGERO_FULL_SCAN=1` does). With the time flags, the first pass reading only the labels of
//! the stretches the window needs gives the same reports as one reading every label, and as
//! one that keeps every label (labels of every kind: `synth::edges`' extra labels).

use std::path::PathBuf;
use std::sync::OnceLock;

use serde_json::Value;

use crate::analyze::{
    self, Analysis, EventFormat, LabelReach, QueryMode, SelectionSpec, TraceIndex,
};
use ingero_trace::read::TimeRange;
use ingero_trace::synth::edges::{self, EdgeOptions};

fn recording() -> &'static (Vec<PathBuf>, PathBuf) {
    static REC: OnceLock<(Vec<PathBuf>, PathBuf)> = OnceLock::new();
    REC.get_or_init(|| {
        let dir =
            std::env::temp_dir().join(format!("ingero-analyze-{}-windows", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let options = EdgeOptions {
            extra_labels: true,
            ..EdgeOptions::default()
        };
        let files = edges::write(dir.join("edges.pftrace"), &options).expect("write the recording");
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
    let reaches = [LabelReach::Window, LabelReach::Listed, LabelReach::Start];
    reaches.iter().flat_map(|r| reports_with(an, *r)).collect()
}

/// The reports whose labels reach as far as `reach` says ([`SelectionSpec::label_reach`]):
/// `query` and `explain`, `query --events`, `query --memory`.
fn reports_with(an: &Analysis, reach: LabelReach) -> Vec<Value> {
    let mut out = Vec::new();
    match reach {
        LabelReach::Window => {
            for mode in [
                QueryMode::Ops,
                QueryMode::group_by(&["step"]),
                QueryMode::group_by(&["phase", "epoch"]),
                QueryMode::group_by(&["nvtx"]),
                QueryMode::ByRequest,
            ] {
                out.push(analyze::query(an, &mode).expect("query").json().value());
            }
            out.push(analyze::explain(an, None).expect("explain").json().value());
            out.push(analyze::rank_requests(an).expect("ranking").json().value());
        }
        LabelReach::Listed => {
            let mut events = Vec::new();
            analyze::events::write(an, EventFormat::Json, &mut events).expect("events");
            out.push(Value::String(String::from_utf8(events).expect("utf-8")));
        }
        LabelReach::Start => {
            if an.selection.op_mask.is_empty() && an.selection.labels.is_empty() {
                out.push(analyze::memory::query(an).expect("memory").json().value());
            }
        }
    }
    out
}

/// Two reads' reports, `names` saying which is which: the same, report by report.
fn assert_same_reports(what: &str, names: (&str, &str), got: &[Value], other: &[Value]) {
    assert_eq!(got.len(), other.len(), "{what}: as many reports");
    let (x, y) = names;
    for (i, (a, b)) in got.iter().zip(other).enumerate() {
        assert!(a == b, "{what}: report {i} differs\n{x}: {a}\n{y}: {b}");
    }
}

/// The reports of `an` read through the index and by a full scan: the same, and not empty.
fn same_both_ways(mut an: Analysis, what: &str) {
    an.index.seek_windows = true;
    let indexed = reports(&an);
    an.index.seek_windows = false;
    let full = reports(&an);
    assert_same_reports(what, ("indexed", "full"), &indexed, &full);
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

/// The reports of `spec` with the first pass reading only the window's labels, reading every
/// label (`INGERO_FULL_SCAN=1`), and keeping every label (the index of the whole recording):
/// the same, for each reach of the labels and its reports.
fn same_labels_every_way(spec: &SelectionSpec) {
    for label_reach in [LabelReach::Window, LabelReach::Listed, LabelReach::Start] {
        let spec = SelectionSpec {
            label_reach,
            ..spec.clone()
        };
        same_labels(&spec, label_reach);
    }
}

fn same_labels(spec: &SelectionSpec, reach: LabelReach) {
    let (files, dir) = recording();
    let what = format!("{spec:?}");
    let open =
        |seek| Analysis::from_files_seeking(files.clone(), dir.clone(), spec, seek).expect("opens");
    let (seeking, full) = (open(true), open(false));
    let mut whole = open(false);
    whole.index = TraceIndex::build(files.clone()).expect("index");
    whole.index.seek_windows = false;
    let (range, at) = (whole.selection.range, whole.selection.at);
    whole.selection = spec
        .resolve_in(range, at, &whole.index.labels)
        .expect("resolves");
    let (range, clock) = (seeking.selection.range, &seeking.index.clock);
    let small = (range.end_ns - range.start_ns) * 8 < clock.end_ns - clock.start_ns;
    if small && reach == LabelReach::Window {
        // Fewer: this workload's long calls (up to 400 ms), requests (up to a second) and
        // `phase` states reach far around a window.
        assert!(
            seeking.index.records < full.index.records,
            "{what}: the window's labels are a part: {} of {}",
            seeking.index.records,
            full.index.records
        );
    }
    let got = reports_with(&seeking, reach);
    for (other, name) in [
        (&full, "reading every label"),
        (&whole, "keeping every label"),
    ] {
        let names = ("the window's labels", name);
        assert_same_reports(&what, names, &got, &reports_with(other, reach));
    }
}

#[test]
fn the_first_pass_reads_the_labels_a_window_needs_and_reports_the_same() {
    let base = open(&SelectionSpec::default());
    let (a, b) = (base.index.clock.start_ns, base.index.clock.end_ns);
    let ms = |t: u64| format!("+{}ms", t / 1_000_000);
    let mut specs = vec![
        SelectionSpec {
            since: Some("30ms".into()),
            ..Default::default()
        },
        SelectionSpec {
            at: Some(ms((b - a) / 2)),
            ..Default::default()
        },
        SelectionSpec {
            from: Some("+150ms".into()),
            to: Some("+170ms".into()),
            labels: vec!["phase=train".into()],
            ..Default::default()
        },
    ];
    for k in 1..6 {
        let from = (b - a) / 6 * k;
        specs.push(SelectionSpec {
            from: Some(ms(from)),
            to: Some(ms(from + (b - a) / 40)),
            ..Default::default()
        });
    }
    for spec in &specs {
        same_labels_every_way(spec);
    }
}
