//! The whole vocabulary, written and read back: one CUDA call of every op with every argument
//! its kind has (and a failed one with its error), both off-CPU reasons, every lifecycle op, an
//! annotation instant and span with every field, NVIDIA driver messages, the session,
//! statistics and counters; each
//! read back equal. And every debug-annotation key of `vocab::ArgKey` is written by some record
//! (but the older recordings' launch keys), so a key no record writes is noticed.

use std::collections::BTreeSet;

use ingero_ebpf::{CudaOp, OffCpuReason};
use prost::Message;

use super::tests::{config, read_all, tmp_dir};
use super::{Recorder, RecorderConfig};
use crate::model::ArgsShape;
use crate::model::{
    AnnotationRecord, Comm, CommSplit, Communicator, CudaArgs, DriverMessage, Event, FinalStats,
    MemcpyKind, NcclRedOp, NcclType, OffCpu, ProcessOp, ReadRecord, Scope, Task, TimelineRecord,
};
use crate::proto::TracePacket;
use crate::read::ExpandedPackets;
use crate::synth::{self, SCENARIO_PID as P, SCENARIO_T0 as T0};
use crate::vocab::{ArgKey, DriverArg, ProcessLabel};

/// The arguments of `op` with every optional part present.
fn full_args(op: CudaOp) -> CudaArgs {
    let stream = Some(0x5600_0000_0010);
    match ArgsShape::of(op) {
        ArgsShape::Alloc => CudaArgs::Alloc {
            size: 4096,
            ptr: Some(0x7f00_0000_1000),
            stream,
        },
        ArgsShape::Free => CudaArgs::Free {
            ptr: 0x7f00_0000_1000,
            size: Some(4096),
            stream,
        },
        ArgsShape::HostAlloc => CudaArgs::HostAlloc {
            size: 1 << 20,
            ptr: Some(0x7f00_2000),
        },
        ArgsShape::HostFree => CudaArgs::HostFree { ptr: 0x7f00_2000 },
        // Every flag CUDA defines (portable, mapped, I/O memory, read-only).
        ArgsShape::HostRegister => CudaArgs::HostRegister {
            ptr: 0x7f00_8000,
            size: 3 << 20,
            flags: 0xf,
        },
        ArgsShape::HostUnregister => CudaArgs::HostUnregister { ptr: 0x7f00_8000 },
        ArgsShape::PhysicalCreate => CudaArgs::PhysicalCreate {
            size: 2 << 20,
            handle: Some(0x5600_0000_9000),
            location: crate::model::MemLocation::Device(1),
        },
        ArgsShape::PhysicalHandle => CudaArgs::PhysicalHandle {
            handle: Some(0x5600_0000_9000),
            ptr: Some(0x7f00_a000),
        },
        ArgsShape::AddressRange => CudaArgs::AddressRange {
            ptr: Some(0x7f00_a000),
            size: 2 << 20,
            handle: Some(0x5600_0000_9000),
        },
        ArgsShape::Launch => synth::launch_args(64, 0x56),
        ArgsShape::GraphLaunch => CudaArgs::GraphLaunch {
            graph_exec: 0x7f00_3000,
            stream: 0x56,
            captured: Some(crate::model::Captured {
                kernel_nodes: 12,
                stream: 0x57,
            }),
        },
        ArgsShape::CaptureBegin => CudaArgs::CaptureBegin {
            stream: 0x57,
            mode: Some(1),
        },
        ArgsShape::CaptureEnd => CudaArgs::CaptureEnd {
            stream: 0x57,
            graph: Some(0x7f00_5000),
            kernel_nodes: Some(12),
        },
        ArgsShape::GraphInstantiate => CudaArgs::GraphInstantiate {
            graph: 0x7f00_5000,
            graph_exec: Some(0x7f00_3000),
        },
        ArgsShape::ModuleLoad => CudaArgs::ModuleLoad {
            module: Some(0x7f00_6000),
        },
        ArgsShape::GetFunction => CudaArgs::GetFunction {
            owner: 0x7f00_6000,
            function: Some(0x7f00_7000),
        },
        // A kind outside CUDA's values, so the raw value's round trip is checked too; no host
        // side, so an absent `host_ptr` reads back absent.
        ArgsShape::Memcpy if op == CudaOp::Memcpy2D => CudaArgs::Memcpy {
            count: 64 * 32,
            kind: MemcpyKind::Unknown(9),
            stream,
            width_height: Some((64, 32)),
            host_ptr: None,
        },
        ArgsShape::Memcpy => CudaArgs::Memcpy {
            count: 1 << 16,
            kind: MemcpyKind::DeviceToHost,
            stream,
            width_height: None,
            host_ptr: Some(0x7f00_8000),
        },
        ArgsShape::MemcpyPeer => CudaArgs::MemcpyPeer {
            count: 1 << 12,
            dst_device: 1,
            src_device: -1,
            stream,
        },
        ArgsShape::Memset => CudaArgs::Memset { count: 512, stream },
        ArgsShape::Sync if op == CudaOp::EventSynchronize => CudaArgs::Sync {
            stream: None,
            event: Some(0x7f00_4000),
        },
        ArgsShape::Sync => CudaArgs::Sync {
            stream,
            event: None,
        },
        // Every part known: a communicator seen made, a numbered collective; a reduction with
        // a root (ncclReduce) and an element type NCCL does not define, so their texts'
        // round trips are checked too.
        ArgsShape::Collective => CudaArgs::Collective {
            count: 1 << 20,
            datatype: NcclType(if op == CudaOp::NcclReduce { 99 } else { 9 }),
            red_op: Some(NcclRedOp(if op == CudaOp::NcclReduce { 7 } else { 4 })),
            root: Some(2),
            on: communicator(),
            stream: 0x56,
            seq: Some(1204),
        },
        ArgsShape::PointToPoint => CudaArgs::PointToPoint {
            count: 512,
            datatype: NcclType(0),
            peer: 5,
            on: communicator(),
            stream: 0x56,
        },
        ArgsShape::CommCreate => CudaArgs::CommCreate {
            made: communicator(),
            split: Some(CommSplit {
                parent: 0x5600_0000_c000,
                color: -1,
                key: 3,
            }),
        },
        ArgsShape::CommEnd => CudaArgs::CommEnd {
            comm: 0x5600_0000_c100,
        },
        ArgsShape::Group => CudaArgs::Group,
    }
}

/// A communicator with everything the agent can know of it.
fn communicator() -> Communicator {
    Communicator {
        comm: 0x5600_0000_c100,
        id: Some(0x5f1c_2a9e_81b3_d004),
        rank: Some(3),
        nranks: Some(8),
    }
}

fn everything() -> Vec<TimelineRecord> {
    let t = synth::task(P, P, "python3");
    let mut out = Vec::new();
    let mut ts = T0;
    let mut next = || {
        ts += 10_000;
        ts
    };
    // First (before any rotation ends the outer one): a call that outlasts the one around it,
    // shortened in the file, `clamped_from_ns` kept.
    let outer = next();
    out.push(synth::cuda(
        t,
        outer,
        5_000,
        CudaOp::StreamSynchronize,
        0,
        full_args(CudaOp::StreamSynchronize),
    ));
    out.push(synth::cuda(
        t,
        outer + 1_000,
        9_000,
        CudaOp::Memset,
        0,
        full_args(CudaOp::Memset),
    ));
    for op in CudaOp::ALL {
        out.push(synth::cuda(t, next(), 1_000, *op, 0, full_args(*op)));
    }
    // A driver launch inside a runtime one, from its `_ptsz` export, named by its kernel
    // (the slice takes the kernel's name; the op goes into an argument).
    let op = CudaOp::CuLaunchKernel;
    if let TimelineRecord::Event(Event::Cuda(mut c)) =
        synth::cuda(t, next(), 1_000, op, 0, full_args(op))
    {
        c.detail = crate::model::CallDetail {
            symbol: Some("cuLaunchKernel_ptsz"),
            parent: Some(CudaOp::LaunchKernel),
            kernel: Some(std::sync::Arc::new(crate::model::KernelName {
                mangled: "_ZN4demo5scaleILi4EEEvPffi".into(),
                demangled: "void demo::scale<4>(float*, float, int)".into(),
                source: crate::model::NameSource::Registration,
                truncated: false,
            })),
        };
        out.push(TimelineRecord::Event(Event::Cuda(c)));
    }
    // A failed call (error category, `ret` and its name) and one whose error has no name.
    out.push(synth::cuda(
        t,
        next(),
        1_000,
        CudaOp::Malloc,
        2,
        CudaArgs::Alloc {
            size: 1 << 40,
            ptr: None,
            stream: None,
        },
    ));
    out.push(synth::cuda(
        t,
        next(),
        1_000,
        CudaOp::Free,
        12_345,
        full_args(CudaOp::Free),
    ));
    for reason in OffCpuReason::ALL {
        out.push(TimelineRecord::Event(Event::OffCpu(OffCpu {
            ts_ns: next(),
            duration_ns: 2_000,
            task: t,
            reason,
            prev_state: 1,
            next_tid: 7,
            next_comm: Comm::from_str_lossy("kworker/1:0"),
        })));
    }
    let worker = Task { tid: P + 1, ..t };
    for op in ProcessOp::ALL {
        let (who, other, text) = match op {
            ProcessOp::Exec => (t, P, "/usr/bin/python3"),
            ProcessOp::Fork => (t, P + 9, "child"),
            ProcessOp::ThreadStart => (t, P + 1, "pt_worker"),
            ProcessOp::ThreadExit => (worker, 0, ""),
            ProcessOp::Exit => (t, 0, ""),
        };
        // Exit ends the process: last.
        let at = if *op == ProcessOp::Exit {
            T0 + 1_000_000_000
        } else {
            next()
        };
        out.push(synth::lifecycle(who, at, *op, other, text));
    }
    let annotation = |ts_ns: u64, end_ns: Option<u64>, stamped: bool| {
        TimelineRecord::Annotation(AnnotationRecord {
            labels: vec![("step".into(), "7".into()), ("phase".into(), "eval".into())],
            scope: Some(Scope {
                pid: P,
                start_time: 4242,
            }),
            ts_ns,
            end_ns,
            provenance_uid: 1000,
            provenance_pid: Some(P),
            provenance_gid: 100,
            received_ns: ts_ns + 7,
            realtime_ns: 1_700_000_000_000_000_000,
            end_realtime_ns: end_ns.map(|_| 1_700_000_000_500_000_000),
            stamped_by_agent: stamped,
        })
    };
    out.push(annotation(next(), None, true));
    let start = next();
    out.push(annotation(start, Some(start + 50_000), false));
    // NVIDIA driver messages: an Xid naming a process (cut), one naming none, an NVSwitch
    // SXid, and a message that is no report.
    for (text, truncated) in [
        (
            "NVRM: Xid (PCI:0000:01:00): 31, pid=4242, name=python3, Ch 00000008, intr 0",
            true,
        ),
        (
            "NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
            false,
        ),
        (
            "nvidia-nvswitch3: SXid (PCI:0000:c6:00.0): 24007, Fatal, Link 48 ECC DBE Error",
            false,
        ),
        ("NVRM: GPU at PCI:0000:3b:00: GPU-5a2f1c3e", false),
    ] {
        out.push(TimelineRecord::Driver(DriverMessage {
            ts_ns: next(),
            text: text.to_owned(),
            truncated,
        }));
    }
    out.sort_by_key(TimelineRecord::ts_ns);
    out
}

/// The packets of a file that decode, expanded out of their compressed containers.
fn decoded_packets(bytes: &[u8]) -> Vec<TracePacket> {
    let mut packets = ExpandedPackets::new(bytes);
    let mut out = Vec::new();
    let mut p = Vec::new();
    while let Ok(true) = packets.next_into(&mut p) {
        if let Ok(pkt) = TracePacket::decode(&p[..]) {
            out.push(pkt);
        }
    }
    out
}

/// The debug-annotation key names declared in a file.
fn declared_keys(bytes: &[u8]) -> BTreeSet<String> {
    decoded_packets(bytes)
        .into_iter()
        .flat_map(|pkt| pkt.interned_data.unwrap_or_default().debug_annotation_names)
        .filter_map(|n| n.name)
        .collect()
}

/// The key iids the packets of a file use.
fn used_key_iids(bytes: &[u8]) -> BTreeSet<u64> {
    decoded_packets(bytes)
        .into_iter()
        .filter_map(|pkt| pkt.track_event)
        .flat_map(|te| te.debug_annotations)
        .filter_map(|d| d.name_iid)
        .collect()
}

/// Writes `input` (with drops and the final statistics `stats`) into `path`, rotating at
/// `max_file_size`; the files.
fn write(
    path: &std::path::Path,
    max_file_size: u64,
    input: &[TimelineRecord],
    stats: &FinalStats,
) -> Vec<std::path::PathBuf> {
    let mut rec = Recorder::create_with(
        RecorderConfig {
            path: Some(path.to_path_buf()),
            max_file_size,
            ..config(None, None)
        },
        false,
    )
    .expect("create");
    for r in input {
        rec.write(r).expect("write");
    }
    rec.record_drops(T0 + 2_000_000_000, 5).expect("drops");
    rec.finish(stats).expect("finish")
}

/// The JSON lines of the events and annotations among `records`, sorted.
fn lines<'a>(records: impl Iterator<Item = crate::json::Line<'a>>) -> Vec<String> {
    let mut v: Vec<String> = records
        .map(|l| serde_json::to_string(&l).expect("json"))
        .collect();
    v.sort();
    v
}

#[test]
fn every_op_argument_and_record_kind_reads_back_equal() {
    let dir = tmp_dir("vocab");
    let input = everything();
    let stats = FinalStats {
        events: vec![("cuda".into(), 30)],
        drops: vec![("ring_full_cuda".into(), 5)],
        rejected: vec![("bad_key".into(), 1)],
        recorder: Vec::new(),
    };
    let want = lines(input.iter().map(crate::json::Line::of_timeline));
    let (mut declared, mut used) = (BTreeSet::new(), BTreeSet::new());
    // One file; and small files, where the label state open across a rotation is re-opened
    // as `continued`.
    for (name, max_file_size, rotated) in [
        ("one.pftrace", u64::MAX, false),
        ("small.pftrace", 2_500, true),
    ] {
        let files = write(&dir.join(name), max_file_size, &input, &stats);
        assert_eq!(files.len() > 1, rotated, "{name}: {files:?}");
        let out = read_all(files.clone());
        // Events and annotations: exactly the input's, in the form both sides print.
        assert_eq!(
            lines(out.iter().filter_map(crate::json::Line::of_record)),
            want
        );
        let annotations: Vec<&AnnotationRecord> = out
            .iter()
            .filter_map(|r| match r {
                ReadRecord::Annotation(a) => Some(a),
                _ => None,
            })
            .collect();
        let input_annotations: Vec<&AnnotationRecord> = input
            .iter()
            .filter_map(|r| match r {
                TimelineRecord::Annotation(a) => Some(a),
                _ => None,
            })
            .collect();
        assert_eq!(annotations, input_annotations, "{name}");
        // Every call's arguments, field for field (not only as printed).
        let mut read_calls: Vec<(u64, CudaOp, &CudaArgs)> = out
            .iter()
            .filter_map(|r| match r {
                ReadRecord::Cuda(c) => Some((c.ts_ns, c.op, &c.args)),
                _ => None,
            })
            .collect();
        let mut input_calls: Vec<(u64, CudaOp, &CudaArgs)> = input
            .iter()
            .filter_map(|r| match r {
                TimelineRecord::Event(Event::Cuda(c)) => Some((c.ts_ns, c.op, &c.args)),
                _ => None,
            })
            .collect();
        read_calls.sort_by_key(|(ts, op, _)| (*ts, *op));
        input_calls.sort_by_key(|(ts, op, _)| (*ts, *op));
        assert_eq!(read_calls, input_calls, "{name}");
        let written = out.iter().find_map(|r| match r {
            ReadRecord::Statistics(s) => Some(s.clone()),
            _ => None,
        });
        let recorder = written
            .as_ref()
            .map(|s| s.recorder.clone())
            .unwrap_or_default();
        assert_eq!(
            written,
            Some(FinalStats {
                recorder,
                ..stats.clone()
            }),
            "{name}"
        );
        for kind in ["Session", "Counter", "LabelState"] {
            assert!(
                out.iter().any(|r| format!("{r:?}").starts_with(kind)),
                "{name}: no {kind}"
            );
        }
        if !rotated {
            assert!(
                out.iter()
                    .any(|r| matches!(r, ReadRecord::Cuda(c) if c.clamped_from_ns.is_some())),
                "the clamped call"
            );
        }
        for f in &files {
            let bytes = std::fs::read(f).expect("read");
            declared.extend(declared_keys(&bytes));
            used.extend(used_key_iids(&bytes));
        }
    }
    // Every key of the table is declared, and every one but the older recordings' launch
    // keys is written by some record.
    for k in ArgKey::ALL {
        assert!(declared.contains(k.text()), "{k:?} is not declared");
    }
    // Every driver message argument is written by some message.
    for k in DriverArg::ALL {
        assert!(declared.contains(k.text()), "{k:?} is not declared");
    }
    let legacy = [ArgKey::Func, ArgKey::Grid, ArgKey::Block, ArgKey::SharedMem];
    for k in ArgKey::ALL {
        if !legacy.contains(k) {
            assert!(used.contains(&k.iid()), "no record writes {k:?}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_process_rank_label_names_the_process_in_the_ui() {
    let dir = tmp_dir("process-labels");
    let t = synth::task(P, P, "python3");
    let input = vec![
        synth::cuda(
            t,
            T0 + 1_000,
            500,
            CudaOp::DeviceSynchronize,
            0,
            full_args(CudaOp::DeviceSynchronize),
        ),
        TimelineRecord::Annotation(AnnotationRecord {
            labels: vec![
                (ProcessLabel::Rank.text().into(), "3".into()),
                (ProcessLabel::WorldSize.text().into(), "8".into()),
            ],
            scope: Some(Scope {
                pid: P,
                start_time: 1,
            }),
            ts_ns: T0 + 2_000,
            end_ns: None,
            provenance_uid: 0,
            provenance_pid: Some(1),
            provenance_gid: 0,
            received_ns: T0 + 2_000,
            realtime_ns: 0,
            end_realtime_ns: None,
            stamped_by_agent: true,
        }),
    ];
    let files = write(
        &dir.join("labels.pftrace"),
        u64::MAX,
        &input,
        &FinalStats::default(),
    );
    let bytes = std::fs::read(&files[0]).expect("read");
    let labels: Vec<Vec<String>> = decoded_packets(&bytes)
        .into_iter()
        .filter_map(|p| p.track_descriptor?.process)
        .filter(|p| p.pid == Some(P as i32))
        .map(|p| p.process_labels)
        .collect();
    assert_eq!(
        labels.last(),
        Some(&vec!["rank 3".to_owned()]),
        "the process described again with its rank: {labels:?}"
    );
    assert_eq!(labels.first(), Some(&Vec::new()), "first described without");
}

#[test]
fn a_driver_message_is_an_instant_named_by_its_xid_on_the_nvidia_driver_track() {
    let dir = tmp_dir("driver");
    let text = "NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.";
    let input = vec![TimelineRecord::Driver(DriverMessage {
        ts_ns: T0 + 1_000,
        text: text.to_owned(),
        truncated: false,
    })];
    let files = write(
        &dir.join("d.pftrace"),
        u64::MAX,
        &input,
        &FinalStats::default(),
    );
    let bytes = std::fs::read(&files[0]).expect("read");
    let packets = decoded_packets(&bytes);
    let track = packets
        .iter()
        .filter_map(|p| p.track_descriptor.as_ref())
        .find(|d| d.name.as_deref() == Some("NVIDIA driver"))
        .and_then(|d| d.uuid)
        .expect("an NVIDIA driver track");
    let instant = packets
        .iter()
        .filter_map(|p| p.track_event.as_ref())
        .find(|te| te.track_uuid == Some(track))
        .expect("the message's instant");
    assert_eq!(
        instant.name.as_deref(),
        Some("Xid 79: GPU has fallen off the bus")
    );
    assert_eq!(
        instant.debug_annotations.len(),
        4,
        "text, xid, bus id, meaning"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
