//! Skim mode: a file of containers plus plain packets on sequence 3 (clock snapshots and a
//! label-state slice, as the writer keeps them outside its containers) yields exactly the
//! plain packets' records without opening a container, and the clock bounds and offset
//! the snapshots give.

use std::path::{Path, PathBuf};

use prost::Message;

use super::tests::{container, frame, packets_of, tmp_dir, written};
use super::{TimeRange, TraceReader};
use crate::model::{LabelInterval, ReadRecord};
use crate::proto::{
    Clock, ClockSnapshot, TracePacket, TrackDescriptor, TrackEvent, clock_id, event_type,
};
use crate::vocab;

const SEQ: u32 = 3;
/// REALTIME − MONOTONIC in the plain snapshots.
const OFFSET: u64 = 1_700_000_000_000_000_000;

fn packet(p: TracePacket) -> Vec<u8> {
    TracePacket {
        trusted_packet_sequence_id: Some(SEQ),
        ..p
    }
    .encode_to_vec()
}

/// A plain snapshot at MONOTONIC `mono`, with REALTIME when `realtime`.
fn snapshot(mono: u64, realtime: bool) -> Vec<u8> {
    let clock = |id: u32, ts: u64| Clock {
        clock_id: Some(id),
        timestamp: Some(ts),
        is_incremental: None,
    };
    let mut clocks = vec![
        clock(clock_id::MONOTONIC, mono),
        clock(clock_id::BOOTTIME, mono + 5),
    ];
    if realtime {
        clocks.push(clock(clock_id::REALTIME, mono + OFFSET));
    }
    packet(TracePacket {
        clock_snapshot: Some(ClockSnapshot { clocks }),
        ..Default::default()
    })
}

fn track(uuid: u64, parent: Option<u64>, name: &str) -> Vec<u8> {
    packet(TracePacket {
        track_descriptor: Some(TrackDescriptor {
            uuid: Some(uuid),
            parent_uuid: parent,
            name: Some(name.into()),
            ..Default::default()
        }),
        ..Default::default()
    })
}

/// A slice begin (with its name) or end on `track` at absolute time `ts`.
fn slice(ts: u64, track: u64, name: Option<&str>) -> Vec<u8> {
    let ty = if name.is_some() {
        event_type::SLICE_BEGIN
    } else {
        event_type::SLICE_END
    };
    packet(TracePacket {
        timestamp: Some(ts),
        track_event: Some(TrackEvent {
            r#type: Some(ty),
            track_uuid: Some(track),
            name: name.map(str::to_owned),
            ..Default::default()
        }),
        ..Default::default()
    })
}

fn bundle(packets: &[Vec<u8>], corrupt: bool) -> Vec<u8> {
    let mut b = container(packets);
    if corrupt {
        // The zlib stream's last byte is part of its checksum.
        let last = b.len() - 1;
        b[last] ^= 0x01;
    }
    b
}

/// The writer's packets in two bundles, the plain packets around them; the second bundle
/// corrupt when `corrupt`.
fn file(dir: &Path, name: &str, corrupt: bool) -> PathBuf {
    let inner = packets_of(&written(dir, 500));
    let half = inner.len() / 2;
    let mut f = Vec::new();
    for p in [
        snapshot(1_000, true),
        track(900, None, vocab::TrackName::TraceWide.text()),
        track(901, Some(900), "step"),
        bundle(&inner[..half], false),
        snapshot(5_000, true),
        slice(2_000, 901, Some("step=42")),
        bundle(&inner[half..], corrupt),
        snapshot(9_000, false),
        slice(8_000, 901, None),
    ] {
        frame(&mut f, &p);
    }
    let path = dir.join(name);
    std::fs::write(&path, f).expect("write");
    path
}

fn label() -> ReadRecord {
    ReadRecord::LabelState(LabelInterval {
        scope_pid: None,
        key: "step".into(),
        value: "42".into(),
        start_ns: 2_000,
        end_ns: 8_000,
        provenance_uid: 0,
        provenance_pid: None,
        continued: false,
    })
}

#[test]
fn skim_yields_the_plain_records_without_opening_a_bundle() {
    let dir = tmp_dir("skim");
    let path = file(&dir, "corrupt.pftrace", true);

    let mut skim = TraceReader::from_files(vec![path.clone()], TimeRange::all()).skip_bundles();
    let got: Vec<ReadRecord> = skim.by_ref().map(|r| r.expect("skim")).collect();
    assert_eq!(got, [label()]);
    assert_eq!(skim.bundles_skipped(), 2);
    assert_eq!(skim.plain_clock_bounds(), Some((1_000, 9_000)));
    assert_eq!(skim.first_realtime_offset(), Some(i128::from(OFFSET)));

    // A full read opens the corrupt bundle, and reports it lost.
    let mut full = TraceReader::from_files(vec![path], TimeRange::all());
    let got: Vec<ReadRecord> = full.by_ref().map(|r| r.expect("full read")).collect();
    assert!(got.contains(&label()), "{got:?}");
    assert!(full.containers_lost() >= 1);
    assert!(full.damage()[0].path.ends_with("corrupt.pftrace"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_full_read_yields_the_bundles_and_the_plain_records() {
    let dir = tmp_dir("skim-full");
    let path = file(&dir, "ok.pftrace", false);
    let mut full = TraceReader::from_files(vec![path], TimeRange::all());
    let got: Vec<ReadRecord> = full.by_ref().map(|r| r.expect("read")).collect();
    assert!(got.len() > 500, "{}", got.len());
    assert_eq!(got.iter().filter(|r| **r == label()).count(), 1);
    assert!(got.iter().any(|r| matches!(r, ReadRecord::Cuda(_))));
    assert_eq!(full.bundles_skipped(), 0);
    // The writer's snapshots inside the bundles do not count; the first snapshot with
    // REALTIME is the plain one before them.
    assert_eq!(full.plain_clock_bounds(), Some((1_000, 9_000)));
    assert_eq!(full.first_realtime_offset(), Some(i128::from(OFFSET)));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_first_snapshot_with_realtime_may_be_inside_a_bundle() {
    let dir = tmp_dir("skim-offset");
    let inner = packets_of(&written(&dir, 10));
    let mut f = Vec::new();
    for p in [
        snapshot(1_000, false),
        bundle(&inner, false),
        snapshot(5_000, true),
    ] {
        frame(&mut f, &p);
    }
    let path = dir.join("offset.pftrace");
    std::fs::write(&path, f).expect("write");
    let mut full = TraceReader::from_files(vec![path.clone()], TimeRange::all());
    for r in full.by_ref() {
        r.expect("read");
    }
    let inside = full.first_realtime_offset().expect("an offset");
    assert_ne!(
        inside,
        i128::from(OFFSET),
        "the bundle's snapshot comes first"
    );
    let mut skim = TraceReader::from_files(vec![path], TimeRange::all()).skip_bundles();
    for r in skim.by_ref() {
        r.expect("skim");
    }
    assert_eq!(skim.first_realtime_offset(), Some(i128::from(OFFSET)));
    assert_eq!(skim.plain_clock_bounds(), Some((1_000, 5_000)));
    let _ = std::fs::remove_dir_all(&dir);
}
