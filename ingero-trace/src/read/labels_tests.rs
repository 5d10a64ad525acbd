//! Labels by stretches: a skim that skips labels, then the stretches a window needs, gives of
//! the label records overlapping any window exactly what a whole read gives, in its order once
//! sorted by their places in the recording, on a recording with labels of every kind (states
//! held across many restarts and files, late annotations, long requests, NVTX ranges and
//! marks); the skipped labels' extent is what the marks say; a file cut short has its tail
//! read unbounded; the previous writer's files (marks without the labels' bounds) have their
//! labels read by the first pass; and a small window reads a small part of the labels.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use proptest::prelude::*;

use super::seek::{FileIndex, LabelStretches, Mark, MarkKind};
use super::tests::tmp_dir;
use super::{PacketReader, SkippedLabels, TimeRange, TraceReader};
use crate::model::ReadRecord;
use crate::synth::edges::{self, EdgeOptions};

/// A recording, what a whole read gives of its labels and records, and what a skim skipping
/// labels gave and left.
struct Labelled {
    files: Vec<PathBuf>,
    /// Every label record of a whole read.
    whole: Vec<ReadRecord>,
    /// Every other record of a whole skim (not skipping labels).
    others: Vec<ReadRecord>,
    /// The label records the skim skipping labels yielded, with their places.
    first_pass: Vec<(u64, ReadRecord)>,
    /// The records it yielded that are not labels.
    first_pass_others: Vec<ReadRecord>,
    index: super::seek::SeekIndex,
    /// Label packets it skipped.
    skipped_packets: u64,
}

fn read_all(files: &[PathBuf], skim: bool) -> Vec<ReadRecord> {
    let mut r = TraceReader::from_files(files.to_vec(), TimeRange::all());
    if skim {
        r = r.skip_bundles();
    }
    r.map(|x| x.expect("read")).collect()
}

impl Labelled {
    fn of(files: Vec<PathBuf>) -> Labelled {
        let whole = read_all(&files, false)
            .into_iter()
            .filter(ReadRecord::is_label)
            .collect();
        let others = read_all(&files, true)
            .into_iter()
            .filter(|r| !r.is_label())
            .collect();
        let mut lite = TraceReader::from_files(files.clone(), TimeRange::all())
            .skip_bundles()
            .skip_labels();
        let mut first_pass = Vec::new();
        let mut first_pass_others = Vec::new();
        let mut rec = super::empty_record();
        while lite.next_into(&mut rec).expect("skim") {
            if rec.is_label() {
                first_pass.push((lite.record_place(), rec.clone()));
            } else {
                first_pass_others.push(rec.clone());
            }
        }
        let skipped = lite.skipped_labels();
        let skipped_packets = skipped.skipped_by_the_skim();
        Labelled {
            files,
            whole,
            others,
            first_pass,
            first_pass_others,
            index: lite.seek_index(),
            skipped_packets,
        }
    }

    /// A fresh reader of the skipped labels (the skim's decoders): the skim again.
    fn skipped(&self) -> SkippedLabels {
        let mut lite = TraceReader::from_files(self.files.clone(), TimeRange::all())
            .skip_bundles()
            .skip_labels();
        for r in lite.by_ref() {
            r.expect("skim");
        }
        lite.skipped_labels()
    }

    /// The label records overlapping `w` that `skipped` and the first pass give, sorted by
    /// their places, and those a whole read gives, in its order.
    fn compare(&self, skipped: &mut SkippedLabels, w: TimeRange) -> (Vec<String>, Vec<String>) {
        let overlaps = |r: &ReadRecord| w.admits(r);
        let mut got: Vec<(u64, String)> = self
            .first_pass
            .iter()
            .filter(|(_, r)| overlaps(r))
            .map(|(place, r)| (*place, format!("{r:?}")))
            .collect();
        for which in [LabelStretches::Unbounded, LabelStretches::Overlapping(w)] {
            skipped
                .read(which, |r, place| {
                    if overlaps(r) {
                        got.push((place, format!("{r:?}")));
                    }
                })
                .expect("read labels");
        }
        got.sort_by_key(|(place, _)| *place);
        let places = got.len();
        got.dedup_by_key(|(place, _)| *place);
        assert_eq!(got.len(), places, "a place is one record's");
        let want: Vec<String> = self
            .whole
            .iter()
            .filter(|r| overlaps(r))
            .map(|r| format!("{r:?}"))
            .collect();
        (got.into_iter().map(|(_, r)| r).collect(), want)
    }

    fn extent(&self) -> (u64, u64) {
        self.whole.iter().fold((u64::MAX, 0), |(a, b), r| {
            let (s, e) = r.interval();
            (a.min(s), b.max(e))
        })
    }
}

fn options() -> EdgeOptions {
    EdgeOptions {
        records: 60_000,
        extra_labels: true,
        ..EdgeOptions::default()
    }
}

fn labelled() -> &'static Labelled {
    static REC: OnceLock<Labelled> = OnceLock::new();
    REC.get_or_init(|| {
        let dir = tmp_dir("labels");
        let files = edges::write(dir.join("labels.pftrace"), &options()).expect("write");
        Labelled::of(files)
    })
}

#[test]
fn the_workload_has_labels_of_every_kind_and_the_skim_skips_most() {
    let r = labelled();
    assert!(r.files.len() >= 3, "{} files", r.files.len());
    let count = |f: fn(&ReadRecord) -> bool| r.whole.iter().filter(|x| f(x)).count();
    assert!(count(|x| matches!(x, ReadRecord::LabelState(s) if s.key == "phase")) >= 5);
    assert!(count(|x| matches!(x, ReadRecord::LabelState(s) if s.continued)) >= 2);
    assert!(count(|x| matches!(x, ReadRecord::LabelState(s) if s.key == "epoch")) >= 3);
    assert!(count(|x| matches!(x, ReadRecord::Annotation(a) if a.end_ns.is_some())) > 100);
    assert!(count(|x| matches!(x, ReadRecord::Nvtx(_))) > 100);
    for f in &r.files {
        let ix = r.index.get(f).expect("indexed");
        assert!(ix.labels_skipped(), "{f:?}");
        assert!(
            !ix.label_ranges(LabelStretches::Overlapping(TimeRange::all()))
                .is_empty()
        );
        assert!(
            ix.label_ranges(LabelStretches::Unbounded).is_empty(),
            "closed"
        );
    }
    // The first pass yields the labels before each file's first restart only, and everything
    // else a plain skim does, in the same order.
    assert!(
        r.first_pass.len() * 20 < r.whole.len(),
        "{}",
        r.first_pass.len()
    );
    assert!(r.skipped_packets as usize > r.whole.len() / 2);
    assert_eq!(r.first_pass_others, r.others);
}

#[test]
fn the_marks_bound_the_skipped_labels_exactly() {
    let r = labelled();
    let first = r.first_pass.iter().map(|(_, rec)| rec.interval());
    let marks = r.index.labels_extent().into_iter();
    let (a, b) = first
        .chain(marks)
        .fold((u64::MAX, 0), |(a, b), (s, e)| (a.min(s), b.max(e)));
    assert_eq!((a, b), r.extent());
}

#[test]
fn every_window_gets_the_labels_a_whole_read_has() {
    let r = labelled();
    let (a, b) = r.extent();
    let mut skipped = r.skipped();
    // Windows of every size, read one after another with the same decoders, out of order.
    for k in [17u64, 3, 29, 0, 11, 31, 5] {
        for len in [0, (b - a) / 1000, (b - a) / 50, (b - a) / 3] {
            let start = a + (b - a) / 32 * k;
            let w = TimeRange::new(start, start.saturating_add(len));
            let (got, want) = r.compare(&mut skipped, w);
            assert_eq!(got, want, "{w:?}");
        }
    }
    let (got, want) = r.compare(&mut skipped, TimeRange::all());
    assert_eq!(got.len(), r.whole.len());
    assert_eq!(got, want);
}

#[test]
fn a_small_window_reads_a_small_part_of_the_labels() {
    let r = labelled();
    let (a, b) = r.extent();
    let bytes: u64 = r
        .files
        .iter()
        .map(|f| std::fs::metadata(f).expect("size").len())
        .sum();
    let mut skipped = r.skipped();
    let mid = a + (b - a) / 2;
    let w = TimeRange::new(mid, mid + (b - a) / 100);
    let (got, want) = r.compare(&mut skipped, w);
    assert_eq!(got, want);
    assert!(!got.is_empty());
    // The stretches around the window, and those ending the states and requests open across
    // it: a few percent of the recording.
    assert!(
        skipped.bytes_read() * 10 < bytes,
        "{} of {bytes}",
        skipped.bytes_read()
    );
    let mut all = r.skipped();
    all.read(LabelStretches::Overlapping(TimeRange::all()), |_, _| {})
        .expect("read");
    assert!(
        skipped.packets() * 5 < all.packets(),
        "{} of {}",
        skipped.packets(),
        all.packets()
    );
}

#[test]
fn a_file_cut_short_has_its_tail_read_unbounded() {
    let r = labelled();
    let dir = tmp_dir("labels-cut");
    let files = super::tests::rewritten(&r.files, &dir, "copy", |f, to| {
        std::fs::copy(f, to).expect("copy");
    });
    let last = files.last().expect("a file").clone();
    let len = std::fs::metadata(&last).expect("size").len();
    let cut = std::fs::OpenOptions::new()
        .write(true)
        .open(&last)
        .expect("open");
    cut.set_len(len * 2 / 3).expect("cut");
    let cut_short = Labelled::of(files);
    let ix = cut_short.index.get(&last).expect("indexed");
    assert!(!ix.label_ranges(LabelStretches::Unbounded).is_empty());
    let (a, b) = cut_short.extent();
    let mut skipped = cut_short.skipped();
    for k in 0..12 {
        let start = a + (b - a) / 12 * k;
        let w = TimeRange::new(start, start + (b - a) / 40);
        let (got, want) = cut_short.compare(&mut skipped, w);
        assert_eq!(got, want, "{w:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A mark of `kind` ending a stretch whose labels are `labels`, saying `open` restated states.
fn mark(kind: MarkKind, labels: Option<(u64, u64)>, open: Option<u64>) -> Mark {
    Mark {
        kind,
        ts_ns: 0,
        records: Some((0, 1_000)),
        open_from: None,
        labels,
        labels_open: open,
        sequence: 3,
    }
}

#[test]
fn label_ranges_join_adjacent_stretches_and_leave_out_the_first() {
    let mut ix = FileIndex::default();
    let stretches = [(0, 10), (5, 30), (40, 50), (45, 60), (100, 110)];
    for (i, l) in stretches.iter().enumerate() {
        let kind = if i + 1 == stretches.len() {
            MarkKind::FileEnd
        } else {
            MarkKind::Restart
        };
        ix.add(100 * (i as u64 + 1), &mark(kind, Some(*l), Some(1)));
    }
    let over = |a, b| ix.label_ranges(LabelStretches::Overlapping(TimeRange::new(a, b)));
    assert_eq!(over(0, 3), vec![], "the first stretch is the first pass's");
    assert_eq!(over(20, 20), vec![(100, Some(200))]);
    assert_eq!(
        over(47, 55),
        vec![(200, Some(400))],
        "two stretches, joined"
    );
    assert_eq!(over(70, 80), vec![]);
    assert_eq!(
        over(105, 200),
        vec![(400, None)],
        "the last reaches the end"
    );
    assert_eq!(ix.labels_extent(), Some((0, 110)));
    assert_eq!(ix.label_ranges(LabelStretches::Unbounded), vec![]);
}

#[test]
fn marks_that_say_nothing_of_labels_leave_them_to_the_first_pass_or_read_whole() {
    // An older writer's file: its first restart says nothing, so no label was skipped.
    let mut old = FileIndex::default();
    old.add(100, &mark(MarkKind::Restart, None, None));
    old.add(200, &mark(MarkKind::FileEnd, None, None));
    assert!(!old.labels_skipped());
    assert_eq!(old.label_ranges(LabelStretches::Unbounded), vec![]);
    assert_eq!(
        old.label_ranges(LabelStretches::Overlapping(TimeRange::all())),
        vec![]
    );
    // A restart with too many states to restate: everything after the first restart is read.
    let mut over = FileIndex::default();
    over.add(100, &mark(MarkKind::Restart, Some((0, 5)), Some(2)));
    over.add(200, &mark(MarkKind::Restart, Some((5, 9)), None));
    over.add(300, &mark(MarkKind::FileEnd, Some((9, 12)), Some(0)));
    assert!(over.labels_skipped());
    assert_eq!(
        over.label_ranges(LabelStretches::Unbounded),
        vec![(100, None)]
    );
    assert_eq!(
        over.label_ranges(LabelStretches::Overlapping(TimeRange::all())),
        vec![]
    );
    // A file cut short: the tail after its last mark is unbounded.
    let mut cut = FileIndex::default();
    cut.add(100, &mark(MarkKind::Restart, Some((0, 5)), Some(0)));
    cut.add(200, &mark(MarkKind::Restart, Some((5, 9)), Some(1)));
    assert_eq!(
        cut.label_ranges(LabelStretches::Unbounded),
        vec![(200, None)]
    );
    assert_eq!(
        cut.label_ranges(LabelStretches::Overlapping(TimeRange::new(6, 7))),
        vec![(100, Some(200))]
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Any window, read after any other with the same decoders.
    #[test]
    fn any_window_gets_the_labels_a_whole_read_has(
        windows in proptest::collection::vec((0u64..10_000, 0u64..10_000), 1..4),
    ) {
        let r = labelled();
        let (a, b) = r.extent();
        let mut skipped = r.skipped();
        for (start, len) in windows {
            let s = a + (b - a) / 10_000 * start;
            let w = TimeRange::new(s, s.saturating_add((b - a) / 10_000 * len / 20));
            let (got, want) = r.compare(&mut skipped, w);
            prop_assert_eq!(got, want);
        }
    }
}

/// Copies `from` to `to` as the previous writer wrote it: seek marks without their `labels.*`
/// arguments, and no `label open` instants. Returns how many instants it dropped and how many
/// marks it trimmed.
fn without_label_index(from: &Path, to: &Path) -> (u64, u64) {
    use crate::proto::TracePacket;
    use crate::vocab::{EventName, Instant, SeekArg};
    use prost::Message;
    let label_open = EventName::all()
        .position(|n| n == EventName::Instant(Instant::LabelOpen))
        .expect("a fixed name") as u64
        + 1;
    let labels_args = [
        SeekArg::LabelsFromNs,
        SeekArg::LabelsToNs,
        SeekArg::LabelsOpen,
    ];
    let bytes = std::fs::read(from).expect("read");
    let mut packets = PacketReader::new(&bytes[..]);
    let mut buf = Vec::new();
    let mut out = Vec::new();
    let mut names = std::collections::HashMap::new();
    let (mut dropped, mut trimmed) = (0u64, 0u64);
    while packets.next_into(&mut buf).expect("packet") {
        let Ok(mut p) = TracePacket::decode(&buf[..]) else {
            super::tests::frame(&mut out, &buf);
            continue;
        };
        if p.compressed_packets.is_some() {
            super::tests::frame(&mut out, &buf);
            continue;
        }
        for n in p
            .interned_data
            .iter()
            .flat_map(|i| &i.debug_annotation_names)
        {
            names.insert(n.iid.unwrap_or(0), n.name.clone().unwrap_or_default());
        }
        let Some(te) = p.track_event.as_mut() else {
            super::tests::frame(&mut out, &buf);
            continue;
        };
        if te.name_iid == Some(label_open) {
            dropped += 1;
            continue;
        }
        let before = te.debug_annotations.len();
        te.debug_annotations.retain(|a| {
            let name = a.name_iid.and_then(|i| names.get(&i)).cloned();
            !labels_args
                .iter()
                .any(|k| name.as_deref() == Some(k.text()))
        });
        if te.debug_annotations.len() == before {
            super::tests::frame(&mut out, &buf);
            continue;
        }
        trimmed += 1;
        super::tests::frame(&mut out, &p.encode_to_vec());
    }
    std::fs::write(to, out).expect("write");
    (dropped, trimmed)
}

#[test]
fn the_previous_writers_files_have_their_labels_read_by_the_first_pass() {
    let r = labelled();
    let dir = tmp_dir("labels-old");
    let rewrites = std::cell::Cell::new((0, 0));
    let old = super::tests::rewritten(&r.files, &dir, "old", |from, to| {
        let (dropped, trimmed) = without_label_index(from, to);
        let (d, t) = rewrites.get();
        rewrites.set((d + dropped, t + trimmed));
    });
    // Over all files (how many fall in the last one depends on where the rotations fall).
    let (dropped, trimmed) = rewrites.get();
    assert!(
        dropped > 10 && trimmed > 10,
        "{dropped} restated, {trimmed} marks"
    );
    let o = Labelled::of(old.clone());
    assert_eq!(o.whole, r.whole, "the same labels");
    for f in &old {
        let ix = o.index.get(f).expect("indexed");
        assert!(!ix.is_empty(), "the marks are there");
        assert!(!ix.labels_skipped());
    }
    assert_eq!(o.skipped_packets, 0);
    assert!(o.skipped().is_empty());
    let first: Vec<&ReadRecord> = o.first_pass.iter().map(|(_, rec)| rec).collect();
    assert_eq!(first, o.whole.iter().collect::<Vec<_>>());
    let _ = std::fs::remove_dir_all(&dir);
}
