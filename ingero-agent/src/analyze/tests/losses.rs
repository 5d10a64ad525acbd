//! A recording that lost events says so: the drops its agent counted (samples of the drops
//! counter, the final statistics' reasons) are in `explain`'s report, on the findings and
//! the `query` rows whose time they overlap, and only in the selection they fall in; with
//! several hosts, each host's drops are named by host.
//!
//! The fixture is [`fixtures::training`] (steps 40..=49, step 42 from +200 ms to +600 ms),
//! written with a drops sample every 100 ms: 120 drops counted in (+200 ms, +300 ms], inside
//! step 42, and 5 more in the final statistics only (after the last sample).

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::fixtures::{self, MS, T0};
use crate::analyze::fleet::{Fleet, report};
use crate::analyze::{self, QueryMode, SelectionSpec};
use ingero_trace::model::{FinalStats, SessionInfo, TimelineRecord};
use ingero_trace::write::{Recorder, RecorderConfig};

/// Drops counted by each sample (at +100 ms, +200 ms, …): 120 by +300 ms.
fn drops_by(ts: u64) -> u64 {
    if ts >= T0 + 300 * MS { 120 } else { 0 }
}

/// Writes `records` to `path`, a drops sample every 100 ms of them and, with `lossy`, 125
/// drops in the final statistics; without `lossy`, none at all.
fn write(path: &Path, machine_name: &str, mut records: Vec<TimelineRecord>, lossy: bool) {
    records.sort_by_key(TimelineRecord::ts_ns);
    let cfg = RecorderConfig {
        path: Some(path.to_path_buf()),
        session: SessionInfo {
            host: machine_name.to_owned(),
            machine_name: machine_name.to_owned(),
            command_line: "ingero trace --record".into(),
            ..SessionInfo::default()
        },
        chown_to_sudo_user: false,
        machine_id: Some(9),
        ..Default::default()
    };
    let mut rec = Recorder::create_with(cfg, false).expect("recorder");
    let mut next = T0 + 100 * MS;
    for r in &records {
        while r.ts_ns() > next {
            let total = if lossy { drops_by(next) } else { 0 };
            rec.record_drops(next, total).expect("drops sample");
            next += 100 * MS;
        }
        rec.write(r).expect("write");
    }
    let drops = if lossy {
        vec![
            ("ring_full_cuda".to_owned(), 120),
            ("nesting_overflow".to_owned(), 5),
            ("kernel_name_unreadable".to_owned(), 0),
        ]
    } else {
        vec![("ring_full_cuda".to_owned(), 0)]
    };
    rec.finish(&FinalStats {
        drops,
        ..FinalStats::default()
    })
    .expect("finish");
}

fn lossy_training(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ingero-losses-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let path = dir.join("run.pftrace");
    write(&path, "gpu-node-1", fixtures::training(), true);
    path
}

fn finding<'a>(e: &'a Value, kind: &str) -> &'a Value {
    e["findings"]
        .as_array()
        .and_then(|a| a.iter().find(|f| f["kind"] == kind))
        .unwrap_or_else(|| panic!("no {kind} finding: {e:#}"))
}

#[test]
fn explain_says_what_the_recording_lost_and_which_findings_it_touches() {
    let path = lossy_training("explain");
    let an = fixtures::open(&path, &SelectionSpec::default());
    let report = analyze::explain(&an, None).expect("explain");
    let e = report.json().value();
    let losses = &e["losses"][0];
    assert_eq!(losses["drops"], 125, "{losses:#}");
    assert_eq!(losses["drops_in_selection"], 125);
    assert_eq!(losses["records_lost"], 125, "both reasons lose records");
    assert_eq!(losses["final_statistics"], true);
    assert_eq!(
        losses["by_reason"],
        serde_json::json!({"nesting_overflow": 5, "ring_full_cuda": 120}),
        "reasons without drops left out"
    );
    let first = &losses["places"][0];
    assert_eq!(first["start_ns"], T0 + 200 * MS);
    assert_eq!(first["end_ns"], T0 + 300 * MS);
    assert_eq!(first["offset_ns"], 200 * MS, "from the recording's start");
    assert_eq!(first["drops"], 120);
    assert_eq!(losses["places"][1]["drops"], 5, "after the last sample");
    assert!(losses.get("host").is_none(), "one host: not named");

    // Step 42 holds the stretch of 120; its slow-step finding says so.
    assert_eq!(finding(&e, "slow_group")["drops_overlapping"], 120);
    let text = report.text();
    assert!(
        text.starts_with("note: the recording counted 125 drops (nesting_overflow 5, ring_full_cuda 120), 125 in the selection's time, counted in +0.200000s..+0.300000s (120)"),
        "{text}"
    );
    assert!(text.contains("--ringbuf-size"), "{text}");
    assert!(
        text.contains("trace incomplete: 120 drops counted in the seconds this window overlaps"),
        "{text}"
    );
}

#[test]
fn query_rows_carry_the_drops_around_them_and_a_window_only_its_own() {
    let path = lossy_training("query");
    let an = fixtures::open(&path, &SelectionSpec::default());
    let q = analyze::query(&an, &QueryMode::group_by(&["step"])).expect("query");
    let rows = q.json().value();
    let drops_of = |step: &str| {
        rows.as_array()
            .and_then(|a| a.iter().find(|r| r["labels"]["step"] == step))
            .map(|r| r["drops_overlapping"].clone())
            .unwrap_or_else(|| panic!("no step {step}: {rows:#}"))
    };
    assert_eq!(drops_of("42"), 120);
    // Step 41 ends where the stretch begins: what was counted came after it.
    assert_eq!(drops_of("41"), Value::Null);
    assert_eq!(drops_of("43"), Value::Null);
    let text = q.text(an.origin());
    let header = text.lines().next().unwrap_or("");
    assert!(header.trim_end().ends_with("drops"), "{header}");

    // A window after the drops: the recording's count, none of them in it.
    let later = SelectionSpec {
        from: Some("+700ms".into()),
        to: Some("+900ms".into()),
        ..SelectionSpec::default()
    };
    let an = fixtures::open(&path, &later);
    let e = analyze::explain(&an, None).expect("explain");
    let losses = &e.losses[0];
    assert_eq!((losses.drops, losses.drops_in_selection), (125, 0));
    assert!(losses.places.is_empty());
    assert!(
        e.text().contains("none of them in the selection"),
        "{}",
        e.text()
    );
    let q = analyze::query(&an, &QueryMode::group_by(&["step"])).expect("query");
    assert!(
        !q.text(an.origin()).contains("drops"),
        "no column where no row lost any"
    );
}

#[test]
fn a_clean_recording_reports_no_losses() {
    let dir = std::env::temp_dir().join(format!("ingero-losses-{}-clean", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let path = dir.join("run.pftrace");
    write(&path, "gpu-node-1", fixtures::training(), false);
    let an = fixtures::open(&path, &SelectionSpec::default());
    let e = analyze::explain(&an, None).expect("explain");
    assert!(e.losses.is_empty(), "{:?}", e.losses);
    assert!(e.json().value().get("losses").is_none());
    assert!(e.findings.iter().all(|f| f.drops_overlapping.is_none()));
    assert!(!e.text().contains("note:"));
}

#[test]
fn with_several_hosts_each_hosts_drops_are_named_by_host() {
    let dir = std::env::temp_dir().join(format!("ingero-losses-{}-hosts", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    write(
        &dir.join("gpu-node-1/run.pftrace"),
        "gpu-node-1",
        fixtures::training(),
        false,
    );
    write(
        &dir.join("gpu-node-2/run.pftrace"),
        "gpu-node-2",
        fixtures::training(),
        true,
    );
    let fleet = Fleet::open(Some(&dir), &SelectionSpec::default(), &[]).expect("opens");
    let e = report::explain(&fleet, None).expect("explain");
    assert_eq!(e.losses.len(), 1, "only the lossy host: {:?}", e.losses);
    assert_eq!(e.losses[0].host.as_deref(), Some("gpu-node-2"));
    assert_eq!(e.losses[0].drops, 125);
    assert!(
        e.text()
            .contains("note: the recording of gpu-node-2 counted 125 drops"),
        "{}",
        e.text()
    );
    let slow: Vec<_> = e
        .findings
        .iter()
        .filter(|f| f.kind == "slow_group")
        .map(|f| (f.host.clone(), f.drops_overlapping))
        .collect();
    assert!(
        slow.contains(&(Some("gpu-node-2".into()), Some(120)))
            && slow.contains(&(Some("gpu-node-1".into()), None)),
        "{slow:?}"
    );
    // `query` carries the same per host (its own notes, for the CLI to print).
    let notes = fleet.losses();
    assert_eq!(notes.len(), 1);
    assert_eq!(notes[0].host.as_deref(), Some("gpu-node-2"));
}
