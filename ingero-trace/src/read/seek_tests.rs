//! Seeking to windows: a recording of [`synth::edges`] (a restart at every chunk, calls and
//! off-CPU intervals open across dozens of restarts, late records, counters, labels, several
//! files) read for many windows gives, of the records overlapping each window, exactly what
//! a whole read gives, in the same order; through the iterator and `for_each_record`, with
//! every record or the probe events alone. Also: a file without marks (as older writers
//! wrote them), a file cut short, damage inside and before a window, and how little a small
//! window reads.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use proptest::prelude::*;

use super::seek::{FileIndex, Plan, SeekIndex};
use super::tests::tmp_dir;
use super::{FileDecoder, PacketReader, TimeRange, TraceReader, is_probe_event};
use crate::model::ReadRecord;
use crate::synth::edges::{self, EdgeOptions};

/// A recording, everything a whole read of it yields, and what a skim of it indexed.
struct Recording {
    files: Vec<PathBuf>,
    whole: Vec<ReadRecord>,
    index: SeekIndex,
    /// Earliest start and latest end of its records.
    extent: (u64, u64),
    /// Packets a whole read decodes.
    packets: u64,
}

impl Recording {
    fn of(files: Vec<PathBuf>) -> Recording {
        let mut reader = TraceReader::from_files(files.clone(), TimeRange::all());
        let whole: Vec<ReadRecord> = reader.by_ref().map(|r| r.expect("whole read")).collect();
        let packets = reader.packets();
        let mut skim = TraceReader::from_files(files.clone(), TimeRange::all()).skip_bundles();
        for r in skim.by_ref() {
            r.expect("skim");
        }
        let extent = whole
            .iter()
            .filter(|r| !matches!(r, ReadRecord::Session(_) | ReadRecord::Statistics(_)))
            .fold((u64::MAX, 0), |(a, b), r| {
                let (s, e) = r.interval();
                (a.min(s), b.max(e))
            });
        Recording {
            files,
            whole,
            index: skim.seek_index(),
            extent,
            packets,
        }
    }

    /// What a whole read gives of the records `window` admits.
    fn want(&self, window: TimeRange, events_only: bool) -> Vec<&ReadRecord> {
        self.whole
            .iter()
            .filter(|r| window.admits(r) && (!events_only || is_probe_event(r)))
            .collect()
    }

    /// Checks every way of reading `window` against the whole read; returns the packets the
    /// probe-events read decoded.
    fn check(&self, window: TimeRange) -> u64 {
        let seeking = |range| {
            TraceReader::from_files(self.files.clone(), range).seek(self.index.clone(), window)
        };
        // Every record, the reader's range the whole clock: those in the window as a whole
        // read has them.
        let got: Vec<ReadRecord> = seeking(TimeRange::all())
            .map(|r| r.expect("seeking read"))
            .filter(|r| window.admits(r))
            .collect();
        assert_eq!(got.iter().collect::<Vec<_>>(), self.want(window, false));
        // The reader's range is the window itself.
        let got: Vec<ReadRecord> = seeking(window).map(|r| r.expect("read")).collect();
        assert_eq!(got.iter().collect::<Vec<_>>(), self.want(window, false));
        // The analysis's way: the probe events alone, through the inlined loop.
        let mut reader = seeking(TimeRange::all()).events_only();
        let mut got = Vec::new();
        reader
            .for_each_record(|r| {
                if window.admits(r) {
                    got.push(r.clone());
                }
            })
            .expect("for_each_record");
        assert_eq!(got.iter().collect::<Vec<_>>(), self.want(window, true));
        assert_eq!(reader.containers_lost(), 0);
        reader.packets()
    }
}

fn recording() -> &'static Recording {
    static REC: OnceLock<Recording> = OnceLock::new();
    REC.get_or_init(|| {
        let dir = tmp_dir("seek");
        let files =
            edges::write(dir.join("edges.pftrace"), &EdgeOptions::default()).expect("write");
        Recording::of(files)
    })
}

/// Half the calls late (begun 2 ms before the stream's time, ending 1 ms after it), no flush:
/// chunks end where they fill, often between a late call's begin and its end.
fn late_heavy() -> &'static Recording {
    static REC: OnceLock<Recording> = OnceLock::new();
    REC.get_or_init(|| {
        use crate::synth::{cuda, launch_args, task};
        let dir = tmp_dir("seek-late");
        let cfg = crate::write::RecorderConfig {
            path: Some(dir.join("late.pftrace")),
            restart_bytes: 1,
            machine_id: Some(5),
            chown_to_sudo_user: false,
            ..Default::default()
        };
        let mut rec = crate::write::Recorder::create_with(cfg, false).expect("create");
        let t = task(4242, 4242, "late");
        let mut ts = crate::synth::SCENARIO_T0;
        for i in 0..150_000u64 {
            ts += 10_000;
            let r = if i % 2 == 0 {
                cuda(
                    t,
                    ts,
                    2_000,
                    ingero_ebpf::CudaOp::LaunchKernel,
                    0,
                    launch_args(64, 1),
                )
            } else {
                let sync = crate::model::CudaArgs::Sync {
                    stream: None,
                    event: None,
                };
                cuda(
                    t,
                    ts - 2_000_000,
                    3_000_000,
                    ingero_ebpf::CudaOp::StreamSynchronize,
                    0,
                    sync,
                )
            };
            rec.write(&r).expect("write");
        }
        let files = rec
            .finish(&crate::model::FinalStats::default())
            .expect("finish");
        Recording::of(files)
    })
}

#[test]
fn late_calls_are_never_cut_from_their_ends_by_a_restart() {
    let r = late_heavy();
    assert!(r.index.restarts() > 10, "{}", r.index.restarts());
    let (a, b) = r.extent;
    for k in 0..30 {
        let start = a + (b - a) / 30 * k;
        r.check(TimeRange::new(start, start + (b - a) / 300));
    }
    // A late call written as the sequences restart at T begins 2 ms before T: a reader that
    // stopped at the restart would lose the one whose end came after it.
    let ix = r.index.get(&r.files[0]).expect("indexed");
    let mut points = 0;
    for t in ix.restart_times() {
        for x in r.whole.iter().filter_map(|x| match x {
            ReadRecord::Cuda(c) if c.ts_ns + 2_020_000 >= *t && c.ts_ns + 1_980_000 <= *t => {
                Some(c.ts_ns)
            }
            _ => None,
        }) {
            r.check(TimeRange::new(x, x));
            points += 1;
        }
    }
    assert!(points > 20, "{points}");
}

#[test]
fn the_workload_has_what_the_window_edges_cut() {
    let r = recording();
    assert!(r.files.len() >= 3, "{} files", r.files.len());
    assert!(r.index.restarts() > 60, "{} restarts", r.index.restarts());
    for f in &r.files {
        assert!(r.index.get(f).is_some_and(|ix| !ix.is_empty()), "{f:?}");
    }
    let long = r.whole.iter().filter(|rec| match rec {
        ReadRecord::Cuda(c) => c.duration_ns > 5_000_000,
        _ => false,
    });
    assert!(long.count() > 50);
    let kinds = |f: fn(&ReadRecord) -> bool| r.whole.iter().filter(|x| f(x)).count();
    assert!(kinds(|x| matches!(x, ReadRecord::OffCpu(_))) > 100);
    assert!(kinds(|x| matches!(x, ReadRecord::Counter(_))) > 100);
    assert!(kinds(|x| matches!(x, ReadRecord::Lifecycle(_))) > 50);
    assert!(kinds(|x| matches!(x, ReadRecord::LabelState(_))) > 5);
    assert!(kinds(|x| matches!(x, ReadRecord::Annotation(_))) > 50);
    // Late records come out of time order.
    let cuda: Vec<u64> = r
        .whole
        .iter()
        .filter_map(|x| match x {
            ReadRecord::Cuda(c) => Some(c.ts_ns),
            _ => None,
        })
        .collect();
    assert!(cuda.windows(2).filter(|w| w[1] + 1_000_000 < w[0]).count() > 50);
}

#[test]
fn windows_at_the_ends_and_across_everything_read_what_a_whole_read_holds() {
    let r = recording();
    let (a, b) = r.extent;
    for w in [
        TimeRange::all(),
        TimeRange::new(a, b),
        TimeRange::new(0, a),
        TimeRange::new(a, a),
        TimeRange::new(b, b),
        TimeRange::new(b, u64::MAX),
        TimeRange::new(0, a - 1),
        TimeRange::new(b + 1, u64::MAX),
    ] {
        r.check(w);
    }
}

#[test]
fn a_small_window_reads_a_small_part() {
    let r = recording();
    let (a, b) = r.extent;
    // 1 % of the time, where no call of 100 ms or more (which a read must take whole) is near.
    // The statistics record spans all time (its interval is unbounded): it is not a call.
    let len = (b - a) / 100;
    let near = |start: u64| {
        r.whole.iter().any(|x| {
            let (s, e) = x.interval();
            e != u64::MAX && e - s >= 100_000_000 && s <= start + 2 * len && e + len >= start
        })
    };
    let start = (1..99)
        .map(|k| a + (b - a) / 100 * k)
        .find(|s| !near(*s))
        .expect("a quiet stretch");
    let packets = r.check(TimeRange::new(start, start + len));
    assert!(
        packets * 20 < r.packets,
        "{packets} packets of {} for 1 % of the time",
        r.packets
    );
    // Nothing at all overlaps: no file is opened.
    let mut none = TraceReader::from_files(r.files.clone(), TimeRange::all())
        .seek(r.index.clone(), TimeRange::new(b + 1, u64::MAX))
        .events_only();
    assert_eq!(none.by_ref().count(), 0);
    assert_eq!(none.files_skipped(), r.files.len() as u64);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn random_windows_read_what_a_whole_read_holds(from in 0.0f64..1.0, len in 0.0f64..0.15) {
        let r = recording();
        let (a, b) = r.extent;
        let span = (b - a) as f64;
        let start = a + (from * span) as u64;
        r.check(TimeRange::new(start, start + (len * span) as u64));
    }

    /// Windows whose edges fall on a record's start or end, or a nanosecond beside it: the
    /// cases an off-by-one in the index or the plan would get wrong.
    #[test]
    fn windows_on_record_edges_read_what_a_whole_read_holds(
        i in any::<prop::sample::Index>(),
        j in any::<prop::sample::Index>(),
        ends in (0usize..2, 0usize..2),
        nudge in (-1i64..=1, -1i64..=1),
    ) {
        let r = recording();
        let edge = |k: &prop::sample::Index, end: usize, nudge: i64| {
            let (s, e) = k.get(&r.whole).interval();
            ([s, e][end]).saturating_add_signed(nudge)
        };
        let (x, y) = (edge(&i, ends.0, nudge.0), edge(&j, ends.1, nudge.1));
        r.check(TimeRange::new(x.min(y), x.max(y)));
    }
}

/// Copies `from` to `to` without its seek marks: the file an older writer would have written.
fn without_marks(from: &Path, to: &Path) {
    let bytes = std::fs::read(from).expect("read");
    let mut packets = PacketReader::new(&bytes[..]);
    let mut dec = FileDecoder::new();
    let mut buf = Vec::new();
    let mut out = Vec::new();
    let mut dropped = 0;
    while packets.next_into(&mut buf).expect("packet") {
        let mut recs = Vec::new();
        dec.packet(&buf, &mut recs).expect("decode");
        if dec.take_mark().is_some() {
            dropped += 1;
            continue;
        }
        super::tests::frame(&mut out, &buf);
    }
    // A restart and the file's end at least (a file ending the recording may hold few).
    assert!(dropped > 1, "{dropped} marks");
    std::fs::write(to, out).expect("write");
}

#[test]
fn files_without_marks_are_read_whole() {
    let r = recording();
    let dir = tmp_dir("seek-old");
    let old = super::tests::rewritten(&r.files, &dir, "old", without_marks);
    let o = Recording::of(old.clone());
    assert_eq!(o.whole, r.whole, "the marks are no records");
    for f in &old {
        let ix = o.index.get(f).expect("indexed");
        assert!(ix.is_empty());
        assert_eq!(ix.plan(TimeRange::new(0, 1)), None);
    }
    let (a, b) = o.extent;
    for k in 0..10 {
        let start = a + (b - a) / 10 * k;
        o.check(TimeRange::new(start, start + (b - a) / 50));
    }
    // An index of other files (or none) changes nothing either.
    let mut reader = TraceReader::from_files(old, TimeRange::all())
        .seek(SeekIndex::default(), TimeRange::new(a, a + 1));
    assert_eq!(reader.by_ref().count(), o.whole.len());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_file_cut_short_is_read_past_its_last_mark() {
    let r = recording();
    let dir = tmp_dir("seek-cut");
    // The first file, as an agent killed while writing it left it (the later ones stand for
    // the next session's).
    let bytes = std::fs::read(&r.files[0]).expect("read");
    let mut files = r.files.clone();
    let cut = dir.join("cut.pftrace");
    std::fs::write(&cut, &bytes[..bytes.len() * 2 / 3]).expect("write");
    files[0] = cut.clone();
    let c = Recording::of(files);
    let ix = c.index.get(&cut).expect("indexed");
    assert!(!ix.is_empty() && ix.restarts() > 5);
    let (a, b) = c.extent;
    // The last stretch has no mark after it: a window after the file's last mark is read to
    // its end.
    let last = c
        .whole
        .iter()
        .position(|x| matches!(x, ReadRecord::Session(s) if s.file_index == 1));
    let before_next = c.whole[..last.expect("the second file")]
        .iter()
        .filter(|x| !matches!(x, ReadRecord::Session(_) | ReadRecord::Statistics(_)))
        .map(|x| x.interval().0)
        .max()
        .expect("records");
    let end = TimeRange::new(before_next, before_next);
    assert!(matches!(
        ix.plan(end),
        Some(Plan::Range { until: None, .. })
    ));
    for k in 0..20 {
        let start = a + (b - a) / 20 * k;
        c.check(TimeRange::new(start, start + (b - a) / 40));
    }
    c.check(end);
    let _ = std::fs::remove_dir_all(&dir);
}

/// File offsets and lengths of the top-level packets of `bytes` that are containers.
fn containers(bytes: &[u8]) -> Vec<(usize, usize)> {
    let mut packets = PacketReader::new(bytes);
    let mut buf = Vec::new();
    let mut out = Vec::new();
    let mut at = 0;
    while packets.next_into(&mut buf).expect("packet") {
        let next = packets.offset() as usize;
        if buf.starts_with(&crate::proto::keys::COMPRESSED_PACKETS) {
            out.push((at, next - at));
        }
        at = next;
    }
    out
}

#[test]
fn damage_is_reported_where_the_window_reads_it() {
    let r = recording();
    let dir = tmp_dir("seek-damage");
    let first = &r.files[0];
    let mut bytes = std::fs::read(first).expect("read");
    let list = containers(&bytes);
    let (at, len) = list[list.len() / 2];
    // The zlib stream's last byte is part of its checksum.
    bytes[at + len - 1] ^= 0x01;
    let bad = dir.join("bad.pftrace");
    std::fs::write(&bad, &bytes).expect("write");
    let mut files = r.files.clone();
    files[0] = bad.clone();
    let whole = {
        let mut reader = TraceReader::from_files(files.clone(), TimeRange::all());
        let recs: Vec<ReadRecord> = reader.by_ref().map(|x| x.expect("read")).collect();
        assert_eq!(reader.containers_lost(), 1);
        assert_eq!(reader.damage()[0].offset, at as u64);
        (recs, reader.damage().to_vec())
    };
    let mut skim = TraceReader::from_files(files.clone(), TimeRange::all()).skip_bundles();
    for x in skim.by_ref() {
        x.expect("skim");
    }
    let index = skim.seek_index();
    let ix: &FileIndex = index.get(&bad).expect("indexed");
    let (a, b) = r.extent;
    let mut inside = 0;
    for k in 0..40 {
        let start = a + (b - a) / 40 * k;
        let window = TimeRange::new(start, start + (b - a) / 60);
        let mut reader =
            TraceReader::from_files(files.clone(), TimeRange::all()).seek(index.clone(), window);
        let got: Vec<ReadRecord> = reader
            .by_ref()
            .map(|x| x.expect("read"))
            .filter(|x| window.admits(x))
            .collect();
        let want: Vec<&ReadRecord> = whole.0.iter().filter(|x| window.admits(x)).collect();
        assert_eq!(got.iter().collect::<Vec<_>>(), want, "{window:?}");
        let reads_it = match ix.plan(window) {
            Some(Plan::Range { from, until }) => {
                from <= at as u64 && until.is_none_or(|u| u > at as u64)
            }
            _ => false,
        };
        if reads_it {
            inside += 1;
            assert_eq!(
                reader.damage(),
                &whole.1[..],
                "the same loss, the same reason"
            );
        } else {
            assert!(reader.damage().is_empty(), "{window:?}");
        }
    }
    assert!(inside > 0 && inside < 40, "{inside}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn marks_out_of_place_leave_the_file_to_be_read_whole() {
    use super::seek::{Mark, MarkKind};
    let mark = |kind| Mark {
        kind,
        ts_ns: 0,
        records: Some((10, 20)),
        open_from: None,
        labels: None,
        labels_open: None,
        sequence: 3,
    };
    let mut ix = FileIndex::default();
    ix.add(100, &mark(MarkKind::Restart));
    ix.add(200, &mark(MarkKind::FileEnd));
    assert!(ix.plan(TimeRange::new(30, 40)).is_some());
    ix.add(300, &mark(MarkKind::Restart));
    assert_eq!(
        ix.plan(TimeRange::new(30, 40)),
        None,
        "a mark after the end"
    );
    let mut back = FileIndex::default();
    back.add(100, &mark(MarkKind::Restart));
    back.add(50, &mark(MarkKind::Restart));
    assert!(back.is_empty(), "an offset going back");
    let mut other = FileIndex::default();
    other.add(100, &mark(MarkKind::Restart));
    other.add(
        200,
        &Mark {
            sequence: 9,
            ..mark(MarkKind::Restart)
        },
    );
    assert!(other.is_empty(), "marks on two sequences");
}

/// An index of stretches with `records` extents, `opens[k]` open across the restart that
/// starts stretch `k + 1`; stretch `k` starts at offset `100 k`.
fn index_of(records: &[(u64, u64)], opens: &[Option<u64>]) -> FileIndex {
    use super::seek::{Mark, MarkKind};
    let mut ix = FileIndex::default();
    for (i, r) in records.iter().enumerate() {
        let last = i == records.len() - 1;
        let kind = if last {
            MarkKind::FileEnd
        } else {
            MarkKind::Restart
        };
        let mark = Mark {
            kind,
            ts_ns: 0,
            records: Some(*r),
            open_from: opens.get(i).copied().flatten(),
            labels: None,
            labels_open: None,
            sequence: 3,
        };
        ix.add(100 * (i as u64 + 1), &mark);
    }
    ix
}

#[test]
fn plans_start_at_the_first_stretch_reaching_the_window_and_stop_where_nothing_more_can() {
    let range = |from, until| Some(Plan::Range { from, until });
    // A slice open since 22 across the restart starting the fourth stretch.
    let ix = index_of(
        &[(0, 10), (5, 30), (20, 25), (40, 50), (60, 70)],
        &[None, None, Some(22), None],
    );
    let plan = |a, b| ix.plan(TimeRange::new(a, b));
    assert_eq!(plan(0, 3), range(0, Some(100)));
    assert_eq!(
        plan(11, 12),
        range(100, Some(200)),
        "the first stretch ends before"
    );
    assert_eq!(
        plan(21, 21),
        range(100, Some(300)),
        "the open slice begins after"
    );
    assert_eq!(
        plan(23, 23),
        range(100, Some(400)),
        "the open slice ends after 300"
    );
    assert_eq!(plan(45, 46), range(300, Some(400)));
    assert_eq!(plan(31, 35), Some(Plan::Nothing), "between the records");
    assert_eq!(plan(51, 59), Some(Plan::Nothing));
    assert_eq!(plan(71, 80), Some(Plan::Nothing), "after the last record");
    assert_eq!(plan(65, 80), range(400, None));
    // A late record at 12 in the last stretch: no stop after 12 before the end.
    let late = index_of(
        &[(0, 10), (5, 30), (20, 25), (40, 50), (12, 70)],
        &[None, None, None, None],
    );
    assert_eq!(late.plan(TimeRange::new(11, 11)), range(100, Some(200)));
    assert_eq!(late.plan(TimeRange::new(13, 13)), range(100, None));
}
