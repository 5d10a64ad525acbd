//! The text output's layout, compared with files under `ingero-agent/tests/golden/`.
//! `INGERO_UPDATE_GOLDEN=1 cargo test -p ingero-agent analyze` rewrites them after a deliberate
//! change; review the diff.

use std::path::PathBuf;

use super::fixtures;
use crate::analyze::{self, QueryMode, SelectionSpec};

fn check(name: &str, actual: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("golden")
        .join(name);
    if std::env::var_os("INGERO_UPDATE_GOLDEN").is_some_and(|v| v == "1") {
        std::fs::write(&path, actual).expect("writing golden file");
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; run with INGERO_UPDATE_GOLDEN=1 to create it",
            path.display()
        )
    });
    assert!(
        expected == actual,
        "{} differs (INGERO_UPDATE_GOLDEN=1 to accept):\n--- expected\n{expected}\n--- actual\n{actual}",
        path.display()
    );
}

#[test]
fn training_text_output() {
    let path = fixtures::write("golden-training", fixtures::training());
    let an = fixtures::open(&path, &SelectionSpec::default());
    let o = an.origin();
    check(
        "query-ops.txt",
        &analyze::query(&an, &QueryMode::Ops).expect("q").text(o),
    );
    let steps = analyze::query(&an, &QueryMode::group_by(&["step"])).expect("q");
    check("query-group-by-step.txt", &steps.text(o));
    check("query-group-by-step.csv", &steps.csv(o));
    check(
        "explain-training.txt",
        &analyze::explain(&an, None).expect("e").text(),
    );
}

#[test]
fn serving_text_output() {
    let path = fixtures::write("golden-serving", fixtures::serving());
    let an = fixtures::open(&path, &SelectionSpec::default());
    let o = an.origin();
    check(
        "explain-by-request.txt",
        &analyze::rank_requests(&an).expect("r").text(o),
    );
    check(
        "query-by-request.txt",
        &analyze::query(&an, &QueryMode::ByRequest)
            .expect("q")
            .text(o),
    );
}

/// `text` with every `"wall":"…"` value replaced by `"wall":"-"`: a wall time is the trace
/// time plus the machine's REALTIME − MONOTONIC offset when the fixture was written, which
/// differs between machines and drifts with NTP.
fn without_wall_times(text: &str) -> String {
    const KEY: &str = "\"wall\":\"";
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(KEY) {
        out.push_str(&rest[..at + KEY.len()]);
        rest = &rest[at + KEY.len()..];
        let end = rest.find('"').unwrap_or(rest.len());
        out.push('-');
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// The JSON of every report on every fixture, byte for byte (but wall times): the refactors of the trace format
/// (the `ingero-trace` crate, its one vocabulary) must leave what `query`/`explain --json`
/// print unchanged.
#[test]
fn json_output_of_every_report() {
    let fixtures = [
        ("training", fixtures::training()),
        ("serving", fixtures::serving()),
        ("leaky", fixtures::leaky()),
        ("clean", fixtures::clean()),
    ];
    for (name, records) in fixtures {
        let path = fixtures::write(&format!("golden-json-{name}"), records);
        let an = fixtures::open(&path, &SelectionSpec::default());
        let mut out = String::new();
        let modes = [
            ("ops", QueryMode::Ops),
            ("group-by-step", QueryMode::group_by(&["step"])),
            ("by-request", QueryMode::ByRequest),
        ];
        for (mode_name, mode) in modes {
            let report = analyze::query(&an, &mode).expect("query");
            out.push_str(&format!("query {mode_name}\n{}\n", report.json()));
        }
        let explain = analyze::explain(&an, None).expect("explain");
        out.push_str(&format!("explain\n{}\n", explain.json()));
        let ranking = analyze::rank_requests(&an).expect("rank");
        out.push_str(&format!("explain --by-request\n{}\n", ranking.json()));
        check(&format!("json-{name}.txt"), &without_wall_times(&out));
    }
}
