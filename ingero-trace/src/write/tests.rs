//! Writer ↔ reader tests: round trip of every record kind, late records, rotation and
//! retention, truncation at every byte of the last packets, size per call. Chunks and
//! compression: `chunk_tests.rs`.

use std::path::{Path, PathBuf};

use ingero_ebpf::CudaOp;

use super::{Recorder, RecorderConfig};
use crate::clock_quality::ClockQuality;
use crate::model::TimelineRecord;
use crate::model::{
    CounterKind, CudaCallRecord, LabelInterval, LifecycleRecord, OffCpuRecord, ReadRecord,
    ThreadRef,
};
use crate::model::{CudaArgs, Event};
use crate::model::{FinalStats, SessionInfo};
use crate::read::{FileDecoder, PacketReader, TimeRange, TraceReader};
use crate::synth::{self, SCENARIO_PID as P, SCENARIO_T0 as T0};

const MS: u64 = 1_000_000;

pub(super) fn tmp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ingero-record-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("tmp dir");
    d
}

pub(super) fn config(path: Option<PathBuf>, dir: Option<PathBuf>) -> RecorderConfig {
    RecorderConfig {
        path,
        dir,
        session: SessionInfo {
            host: "h1".into(),
            kernel: "6.1".into(),
            agent_version: "0.1.0".into(),
            command_line: "ingero trace --record".into(),
            targets: vec!["pid 1".into(), "pid 2".into()],
            probes: vec!["cuda".into()],
            machine_name: "gpu-node-1".into(),
            clock: Some(ClockQuality {
                maxerror_us: 16_000,
                esterror_us: 250,
                unsynchronized: false,
            }),
        },
        machine_id: Some(77),
        chown_to_sudo_user: false,
        ..Default::default()
    }
}

pub(super) fn write_all(
    cfg: RecorderConfig,
    records: &[TimelineRecord],
) -> (Vec<PathBuf>, super::RecorderCounters) {
    let mut rec = Recorder::create_with(cfg, false).expect("create");
    for r in records {
        rec.write(r).expect("write");
    }
    rec.record_drops(T0 + 26 * MS, 3).expect("drops");
    let counters = rec.counters();
    let stats = FinalStats {
        events: vec![("cuda".into(), 7)],
        drops: vec![("ring_full".into(), 3)],
        rejected: vec![("bad_json".into(), 1)],
        recorder: Vec::new(),
    };
    (rec.finish(&stats).expect("finish"), counters)
}

/// Every record of `files`, which must read without damage.
pub(super) fn read_all(files: Vec<PathBuf>) -> Vec<ReadRecord> {
    let mut reader = TraceReader::from_files(files, TimeRange::all());
    let records = reader
        .by_ref()
        .collect::<Result<Vec<_>, _>>()
        .expect("read");
    assert_eq!(reader.containers_lost(), 0, "{:?}", reader.damage());
    assert_eq!(reader.packets_skipped(), 0);
    records
}

fn thread(tid: u32, name: &str) -> ThreadRef {
    ThreadRef {
        pid: P,
        tid,
        name: name.into(),
    }
}

#[test]
fn round_trip_of_every_record_kind() {
    let dir = tmp_dir("roundtrip");
    let input = synth::scenario();
    let (files, counters) = write_all(config(Some(dir.join("run.pftrace")), None), &input);
    assert_eq!(files, vec![dir.join("run.pftrace")]);
    assert_eq!(counters.late, 0);
    let out = read_all(files);

    // CUDA calls, off-CPU intervals and lifecycle: exactly the input events.
    let mut want_cuda = Vec::new();
    let mut want_off = Vec::new();
    let mut want_life = Vec::new();
    let mut want_ann = Vec::new();
    for r in &input {
        match r {
            TimelineRecord::Event(Event::Cuda(c)) => want_cuda.push(CudaCallRecord::written(
                c,
                thread(c.task.tid, &c.task.comm.as_str()),
                c.duration_ns,
            )),
            TimelineRecord::Event(Event::OffCpu(o)) => want_off.push(OffCpuRecord::written(
                o,
                thread(o.task.tid, &o.task.comm.as_str()),
                o.duration_ns,
            )),
            TimelineRecord::Event(Event::Process(p)) => want_life.push(LifecycleRecord {
                ts_ns: p.ts_ns,
                thread: thread(p.task.tid, &p.task.comm.as_str()),
                op: p.op,
                other_pid: p.other_pid,
                clone_flags_known: p.clone_flags_known,
                text: p.text.clone(),
                cpu: p.task.cpu,
                cgroup_id: p.task.cgroup_id,
            }),
            TimelineRecord::Annotation(a) => want_ann.push(a.clone()),
            // NVTX and driver messages have their own tests (`nvtx_tests.rs`, `vocab_tests.rs`).
            TimelineRecord::Nvtx(_) | TimelineRecord::Driver(_) => {}
        }
    }
    let mut got_cuda: Vec<_> = out
        .iter()
        .filter_map(|r| {
            if let ReadRecord::Cuda(c) = r {
                Some(c.clone())
            } else {
                None
            }
        })
        .collect();
    got_cuda.sort_by_key(|c| c.ts_ns);
    assert_eq!(got_cuda, want_cuda);
    let mut got_off: Vec<_> = out
        .iter()
        .filter_map(|r| {
            if let ReadRecord::OffCpu(o) = r {
                Some(o.clone())
            } else {
                None
            }
        })
        .collect();
    got_off.sort_by_key(|o| o.ts_ns);
    assert_eq!(got_off, want_off);
    let got_life: Vec<_> = out
        .iter()
        .filter_map(|r| {
            if let ReadRecord::Lifecycle(l) = r {
                Some(l.clone())
            } else {
                None
            }
        })
        .collect();
    assert_eq!(got_life, want_life);
    let mut got_ann: Vec<_> = out
        .iter()
        .filter_map(|r| {
            if let ReadRecord::Annotation(a) = r {
                Some(a.clone())
            } else {
                None
            }
        })
        .collect();
    got_ann.sort_by_key(|a| a.ts_ns);
    assert_eq!(got_ann, want_ann);

    // Label state: step 41 → 42 → 43 until the process exits; phase until the end.
    let states: Vec<LabelInterval> = out
        .iter()
        .filter_map(|r| {
            if let ReadRecord::LabelState(s) = r {
                Some(s.clone())
            } else {
                None
            }
        })
        .collect();
    let step: Vec<_> = states
        .iter()
        .filter(|s| s.key == "step")
        .map(|s| (s.value.as_str(), s.start_ns, s.end_ns))
        .collect();
    assert_eq!(
        step,
        vec![
            ("41", T0 + 2 * MS, T0 + 10 * MS),
            ("42", T0 + 10 * MS, T0 + 14 * MS),
            ("43", T0 + 14 * MS, T0 + 25 * MS)
        ]
    );
    assert!(
        states
            .iter()
            .all(|s| s.provenance_uid == 1000 && s.provenance_pid == Some(P) && !s.continued)
    );
    let phase: Vec<_> = states.iter().filter(|s| s.key == "phase").collect();
    assert_eq!(phase.len(), 1);
    assert_eq!(
        (phase[0].scope_pid, phase[0].start_ns),
        (None, T0 + 2 * MS + 1)
    );
    assert!(
        phase[0].end_ns >= T0 + 26 * MS,
        "open until the end of the recording: {phase:?} vs {}",
        T0 + 26 * MS
    );

    // Counters: device memory follows the successful malloc and its free; drops.
    let mem: Vec<_> = out
        .iter()
        .filter_map(|r| match r {
            ReadRecord::Counter(c) if c.kind == (CounterKind::DeviceMemory { pid: P }) => {
                Some((c.ts_ns, c.value))
            }
            _ => None,
        })
        .collect();
    assert_eq!(mem, vec![(T0 + 4 * MS, 4096), (T0 + 13 * MS, 0)]);
    assert!(out.iter().any(
        |r| matches!(r, ReadRecord::Counter(c) if c.kind == CounterKind::Drops && c.value == 3)
    ));

    // Session first, statistics last.
    let ReadRecord::Session(s) = &out[0] else {
        panic!("first record is {:?}", out[0])
    };
    assert_eq!(s.info, config(None, None).session);
    assert_eq!((s.machine_id, s.file_index), (77, 0));
    let Some(ReadRecord::Statistics(st)) = out.last() else {
        panic!("last record is {:?}", out.last())
    };
    assert_eq!(st.events, vec![("cuda".to_owned(), 7)]);
    assert_eq!(st.drops, vec![("ring_full".to_owned(), 3)]);
    assert_eq!(st.rejected, vec![("bad_json".to_owned(), 1)]);
    assert!(
        st.recorder
            .contains(&("records".to_owned(), input.len() as u64))
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn late_records_are_kept_and_overlaps_are_clamped() {
    let dir = tmp_dir("late");
    let t = synth::task(P, P, "python3");
    let launch = |ts: u64, dur: u64| {
        synth::cuda(
            t,
            ts,
            dur,
            CudaOp::LaunchKernel,
            0,
            CudaArgs::Launch {
                func: 1,
                grid: [1, 1, 1],
                block: [32, 1, 1],
                shared_mem: 0,
                stream: 0,
            },
        )
    };
    let records = vec![
        launch(T0 + 10 * MS, MS),
        // Arrives after a later record: goes on the late sequence, not dropped.
        launch(T0 + 5 * MS, MS),
        // Overlaps the next one on the same thread (bad clock data): shortened to nest.
        launch(T0 + 20 * MS, 10 * MS),
        launch(T0 + 25 * MS, 10 * MS),
    ];
    let (files, counters) = write_all(config(Some(dir.join("late.pftrace")), None), &records);
    assert_eq!((counters.late, counters.clamped), (1, 1));
    let mut cuda: Vec<_> = read_all(files)
        .into_iter()
        .filter_map(|r| {
            if let ReadRecord::Cuda(c) = r {
                Some((c.ts_ns, c.duration_ns, c.clamped_from_ns))
            } else {
                None
            }
        })
        .collect();
    cuda.sort();
    assert_eq!(
        cuda,
        vec![
            (T0 + 5 * MS, MS, None),
            (T0 + 10 * MS, MS, None),
            (T0 + 20 * MS, 10 * MS, None),
            (T0 + 25 * MS, 5 * MS, Some(10 * MS)),
        ]
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn rotation_makes_self_contained_files_and_retention_keeps_the_newest() {
    let dir = tmp_dir("rotate");
    let mut records = synth::scenario();
    let n = 3000;
    records.extend(synth::launches(n, T0 + 30 * MS));
    let mut cfg = config(None, Some(dir.clone()));
    cfg.max_file_size = 16 * 1024;
    let (files, counters) = write_all(cfg, &records);
    assert!(counters.files >= 4, "{} files", counters.files);
    assert_eq!(files.len() as u64, counters.files, "no retention yet");
    // Each file decodes on its own: starts with the session packet, names resolve.
    for (i, f) in files.iter().enumerate() {
        let recs = read_all(vec![f.clone()]);
        let ReadRecord::Session(s) = &recs[0] else {
            panic!("{} starts with {:?}", f.display(), recs[0])
        };
        assert_eq!(s.file_index, i as u64);
    }
    let all = read_all(crate::read::recording_files(&dir).expect("list"));
    let calls = all
        .iter()
        .filter(|r| matches!(r, ReadRecord::Cuda(_)))
        .count() as u64;
    assert_eq!(calls, n + 6, "every call, once, across files");
    // The step label was open across the first rotation? Either way no interval is lost.
    assert!(
        all.iter()
            .any(|r| matches!(r, ReadRecord::LabelState(s) if s.key == "step" && s.value == "43"))
    );

    // A second session in the same directory with a total cap deletes the oldest files.
    let total: u64 = files
        .iter()
        .map(|f| std::fs::metadata(f).map(|m| m.len()).unwrap_or(0))
        .sum();
    let mut cfg = config(None, Some(dir.clone()));
    cfg.max_file_size = 16 * 1024;
    cfg.max_total_size = total / 2;
    let (files2, _) = write_all(cfg, &records[..20]);
    assert!(!files[0].exists(), "the oldest file is gone");
    assert!(files2.iter().all(|f| f.exists()));
    let left: u64 = super::trace_files_in(&dir)
        .expect("list")
        .iter()
        .map(|f| std::fs::metadata(f).map(|m| m.len()).unwrap_or(0))
        .sum();
    assert!(
        left <= total / 2 + 16 * 1024 + 4096,
        "{left} > {}",
        total / 2
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Records completed after each packet, decoding the file packet by packet.
fn records_per_packet(bytes: &[u8]) -> Vec<(u64, usize)> {
    let mut r = PacketReader::new(bytes);
    let mut d = FileDecoder::new();
    let mut buf = Vec::new();
    let mut out = Vec::new();
    let mut acc = Vec::new();
    while r.next_into(&mut buf).expect("packet") {
        d.packet(&buf, &mut out).expect("decode");
        acc.push((r.offset(), out.len()));
    }
    acc
}

fn read_bytes(path: &Path) -> Vec<u8> {
    std::fs::read(path).expect("read file")
}

#[test]
fn truncation_at_every_byte_of_the_last_packets() {
    let dir = tmp_dir("truncate");
    // Plain packets, so every packet boundary is a file offset (chunks: `chunk_tests.rs`).
    let mut cfg = config(Some(dir.join("t.pftrace")), None);
    cfg.compression_level = 0;
    let (files, _) = write_all(cfg, &synth::scenario());
    let bytes = read_bytes(&files[0]);
    let per_packet = records_per_packet(&bytes);
    assert_eq!(per_packet.last().map(|p| p.0), Some(bytes.len() as u64));
    let from = per_packet[per_packet.len() - 6].0 as usize;
    let cut_path = dir.join("cut.pftrace");
    for cut in from..bytes.len() {
        std::fs::write(&cut_path, &bytes[..cut]).expect("write cut");
        let mut reader = TraceReader::from_files(vec![cut_path.clone()], TimeRange::all());
        let got: Vec<ReadRecord> = reader
            .by_ref()
            .collect::<Result<_, _>>()
            .unwrap_or_else(|e| panic!("cut at {cut}: {e:#}"));
        let complete = per_packet
            .iter()
            .rfind(|(end, _)| *end as usize <= cut)
            .map_or(0, |p| p.1);
        assert_eq!(got.len(), complete, "cut at {cut}");
        let at_boundary = per_packet.iter().any(|(end, _)| *end as usize == cut);
        assert_eq!(
            reader.truncated_files().is_empty(),
            at_boundary,
            "cut at {cut}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn time_range_filters_by_overlap() {
    let dir = tmp_dir("range");
    let (files, _) = write_all(
        config(Some(dir.join("r.pftrace")), None),
        &synth::scenario(),
    );
    let range = TimeRange::new(T0 + 10 * MS, T0 + 12 * MS);
    let got: Vec<ReadRecord> = TraceReader::from_files(files, range)
        .collect::<Result<_, _>>()
        .expect("read");
    let cuda: Vec<u64> = got
        .iter()
        .filter_map(|r| {
            if let ReadRecord::Cuda(c) = r {
                Some(c.ts_ns)
            } else {
                None
            }
        })
        .collect();
    assert_eq!(
        cuda,
        vec![T0 + 11 * MS],
        "only the memcpy overlaps [10ms, 12ms]"
    );
    assert!(
        got.iter()
            .any(|r| matches!(r, ReadRecord::Annotation(a) if a.end_ns == Some(T0 + 16 * MS))),
        "span req-a overlaps"
    );
    assert!(got.iter().any(|r| matches!(r, ReadRecord::Session(_))));
    assert!(
        !got.iter().any(|r| matches!(r, ReadRecord::Lifecycle(_))),
        "lifecycle instants are outside"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn packets_are_small_on_a_launch_workload() {
    let dir = tmp_dir("size");
    let n = 20_000u64;
    let records: Vec<_> = synth::launches(n, T0).collect();
    let per_call = |stamp_machine_id: bool, compression_level: u32| {
        let mut cfg = config(Some(dir.join("s.pftrace")), None);
        cfg.stamp_machine_id = stamp_machine_id;
        cfg.compression_level = compression_level;
        // The default id's width (21 bits), not the test override's.
        cfg.machine_id = Some(0x1F_FFFF);
        let (files, _) = write_all(cfg, &records);
        let size = std::fs::metadata(&files[0]).map(|m| m.len()).unwrap_or(0);
        size as f64 / n as f64
    };
    // Regression guards; the record-bench example prints the exact figures. Plain: a begin
    // (one interned launch argument, ~29 bytes) and an end (~20 bytes) per call, 5 of each for
    // the machine id. Compressed (the default): the target is 16 bytes per call.
    let plain = per_call(true, 0);
    assert!(plain < 52.0, "{plain:.1} bytes per call, plain");
    let plain_no_mid = per_call(false, 0);
    assert!(
        (9.0..11.0).contains(&(plain - plain_no_mid)),
        "machine id: {:.1} bytes per call",
        plain - plain_no_mid
    );
    let compressed = per_call(true, 1);
    assert!(
        compressed < 16.0,
        "{compressed:.1} bytes per call, compressed"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn next_into_yields_what_the_iterator_yields() {
    let dir = tmp_dir("next-into");
    let mut records = synth::scenario();
    records.extend(synth::launches(500, T0 + 30 * MS));
    let (files, _) = write_all(config(Some(dir.join("n.pftrace")), None), &records);
    let want = read_all(files.clone());
    let mut reader = TraceReader::from_files(files, TimeRange::all());
    let mut rec = crate::read::empty_record();
    let mut got = Vec::new();
    while reader.next_into(&mut rec).expect("next_into") {
        got.push(rec.clone());
    }
    assert_eq!(got, want);
    let _ = std::fs::remove_dir_all(&dir);
}
