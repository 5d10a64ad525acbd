//! The tap against the file: the label states its edges describe are the intervals a reader
//! reads back, and a clamped slice's logged duration is the one read back, through late
//! label changes, a process's exit, rotations and the end of the recording.

use std::collections::BTreeSet;

use ingero_ebpf::CudaOp;

use super::tests::{config, read_all, tmp_dir};
use super::{Recorder, StateIntervals, Tap};
use crate::model::{CudaArgs, FinalStats, LabelInterval, ProcessOp, ReadRecord, TimelineRecord};
use crate::synth::{self, annotation, cuda, lifecycle, task};

const MS: u64 = 1_000_000;
const T0: u64 = 5_000_000_000;
const P: u32 = 6_000_001;
const Q: u32 = 6_000_002;

fn sync_args() -> CudaArgs {
    CudaArgs::Sync {
        stream: None,
        event: None,
    }
}

/// Two processes labelling steps (one is cleared, one process exits), a trace-wide phase, a
/// late label change, enough calls to rotate small files, and a call that outlasts the one
/// it is nested in.
fn records() -> Vec<TimelineRecord> {
    let (p, q) = (task(P, P, "train"), task(Q, Q, "other"));
    let t = |ms: u64| T0 + ms * MS;
    let mut out = vec![
        annotation(t(0), None, None, &[("phase", "train")]),
        annotation(t(1), None, Some(P), &[("step", "1")]),
        annotation(t(1), None, Some(Q), &[("step", "1"), ("rank", "1")]),
        // An outer call and a nested one that would outlast it: shortened to end with it.
        // First, so both are in the first file wherever the rotations fall.
        cuda(
            p,
            t(1) + 10_000,
            100_000,
            CudaOp::DeviceSynchronize,
            0,
            sync_args(),
        ),
        cuda(
            p,
            t(1) + 20_000,
            500_000,
            CudaOp::StreamSynchronize,
            0,
            sync_args(),
        ),
    ];
    for i in 0..400u64 {
        out.push(cuda(
            p,
            t(2) + i * 10_000,
            5_000,
            CudaOp::LaunchKernel,
            0,
            synth::launch_args(8, 1),
        ));
        out.push(cuda(
            q,
            t(2) + i * 10_000 + 1,
            4_000,
            CudaOp::StreamSynchronize,
            0,
            sync_args(),
        ));
        if i == 150 {
            out.push(annotation(
                t(2) + i * 10_000 + 2,
                None,
                Some(P),
                &[("step", "2")],
            ));
        }
        if i == 200 {
            // Late: older than what was written, so the state moves at the stream time.
            out.push(annotation(t(1) + 5, None, Some(Q), &[("step", "9")]));
        }
        if i == 250 {
            out.push(annotation(
                t(2) + i * 10_000 + 3,
                None,
                Some(P),
                &[("step", "")],
            ));
        }
    }
    out.push(annotation(t(11), None, Some(P), &[("step", "3")]));
    out.push(lifecycle(q, t(12), ProcessOp::Exit, 0, ""));
    out.push(annotation(t(13), None, None, &[("phase", "val")]));
    out
}

fn key(i: &LabelInterval) -> (Option<u32>, String, String, u64, u64, bool) {
    (
        i.scope_pid,
        i.key.clone(),
        i.value.clone(),
        i.start_ns,
        i.end_ns,
        i.continued,
    )
}

#[test]
fn the_tap_describes_what_a_reader_reads_back() {
    let dir = tmp_dir("tap");
    let mut cfg = config(None, Some(dir.clone()));
    // Small files that still hold a file's first packet (every word of the vocabulary, 9 KiB
    // and growing with it) and the clamped pair after it, so the pair is nested in one file.
    cfg.max_file_size = 24 * 1024;
    cfg.compression_level = 0;
    let mut rec = Recorder::create_with(cfg, false).expect("create");
    rec.enable_tap();
    let mut tap = Tap::default();
    let mut numbers = Vec::new();
    let input = records();
    for r in &input {
        rec.write(r).expect("write");
        numbers.push(rec.records_written());
        rec.take_tap(&mut tap);
    }
    rec.end_all().expect("end all");
    rec.take_tap(&mut tap);
    assert!(rec.first_realtime_offset().is_some());
    let files = rec.finish(&FinalStats::default()).expect("finish");
    assert!(files.len() > 1, "the small files rotated: {files:?}");

    let mut states = StateIntervals::default();
    let from_tap: BTreeSet<_> = tap
        .edges
        .iter()
        .filter_map(|e| states.apply(e))
        .map(|i| key(&i))
        .collect();
    assert_eq!(states.open_count(), 0, "end_all ended every state");
    let read = read_all(files);
    let from_file: BTreeSet<_> = read
        .iter()
        .filter_map(|r| match r {
            ReadRecord::LabelState(i) => Some(key(i)),
            _ => None,
        })
        .collect();
    assert_eq!(from_tap, from_file);
    assert!(
        from_file.iter().any(|k| k.5),
        "a rotation continued a state"
    );
    assert!(
        from_file
            .iter()
            .any(|k| k.1 == "step" && k.2 == "9" && k.3 > T0 + 3 * MS),
        "the late change took effect at the stream time"
    );

    // The one clamped slice: its logged duration is the one read back.
    assert_eq!(tap.clamped.len(), 1, "{:?}", tap.clamped);
    let clamp = tap.clamped[0];
    let at = numbers
        .iter()
        .position(|n| *n == clamp.record)
        .expect("a record's number");
    let TimelineRecord::Event(crate::model::Event::Cuda(c)) = &input[at] else {
        panic!("the clamped record is a call: {:?}", input[at]);
    };
    let back = read
        .iter()
        .find_map(|r| match r {
            ReadRecord::Cuda(r) if r.ts_ns == c.ts_ns && r.op == c.op => Some(r),
            _ => None,
        })
        .expect("read back");
    assert_eq!(back.duration_ns, clamp.duration_ns);
    assert_eq!(back.clamped_from_ns, Some(c.duration_ns));
    let _ = std::fs::remove_dir_all(&dir);
}
