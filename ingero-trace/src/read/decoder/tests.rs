//! The scanner-based decoder against packets built with the prost structs: the fast path
//! (interned, known arguments) and the general path (inline names and strings) must yield
//! the same record.

use ingero_ebpf::CudaOp;
use prost::Message;

use super::plan::{CudaPrep, OpenBody};
use super::track_kind::TrackKind;
use super::*;
use crate::model::{CudaArgs, CudaCallRecord, Placement, ThreadRef};
use crate::proto::{
    DebugAnnotation, DebugAnnotationName, EventName, InternedData, InternedString,
    ThreadDescriptor, TracePacket, TrackDescriptor, TrackEvent, event_type,
};
use crate::vocab::ArgKey;

fn bytes(p: &TracePacket) -> Vec<u8> {
    p.encode_to_vec()
}

fn launch_call(inline: bool, paths: Paths) -> ReadRecord {
    let mut d = Decoder::new(paths);
    let mut out = Vec::new();
    let first = TracePacket {
        trusted_packet_sequence_id: Some(1),
        sequence_flags: Some(3),
        interned_data: Some(InternedData {
            event_names: vec![EventName {
                iid: Some(1),
                name: Some("cudaLaunchKernel".into()),
            }],
            debug_annotation_names: [ArgKey::Func, ArgKey::Grid, ArgKey::Ret, ArgKey::SharedMem]
                .iter()
                .enumerate()
                .map(|(i, n)| DebugAnnotationName {
                    iid: Some(i as u64 + 1),
                    name: Some(n.text().into()),
                })
                .collect(),
            debug_annotation_string_values: vec![
                InternedString {
                    iid: Some(1),
                    str: Some(b"0x7f00".to_vec()),
                },
                InternedString {
                    iid: Some(2),
                    str: Some(b"4x2x1".to_vec()),
                },
            ],
            ..Default::default()
        }),
        track_descriptor: Some(TrackDescriptor {
            uuid: Some(5),
            thread: Some(ThreadDescriptor {
                pid: Some(10),
                tid: Some(11),
                thread_name: Some("train".into()),
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    let mut slot = empty_record();
    let mut step = |d: &mut Decoder, p: &TracePacket| {
        if d.packet(&bytes(p), &mut slot).expect("packet") == Step::Record {
            out.push(slot.clone());
        }
    };
    step(&mut d, &first);
    let arg = |iid: u64, name: &str| DebugAnnotation {
        name_iid: (!inline).then_some(iid),
        name: inline.then(|| name.to_owned()),
        ..Default::default()
    };
    let args = vec![
        DebugAnnotation {
            string_value_iid: (!inline).then_some(1),
            string_value: inline.then(|| "0x7f00".into()),
            ..arg(1, ArgKey::Func.text())
        },
        DebugAnnotation {
            string_value_iid: (!inline).then_some(2),
            string_value: inline.then(|| "4x2x1".into()),
            ..arg(2, ArgKey::Grid.text())
        },
        DebugAnnotation {
            int_value: Some(-2),
            ..arg(3, ArgKey::Ret.text())
        },
        DebugAnnotation {
            uint_value: Some(512),
            ..arg(4, ArgKey::SharedMem.text())
        },
    ];
    let begin = TracePacket {
        timestamp: Some(1_000),
        trusted_packet_sequence_id: Some(1),
        track_event: Some(TrackEvent {
            r#type: Some(event_type::SLICE_BEGIN),
            track_uuid: Some(5),
            name_iid: (!inline).then_some(1),
            name: inline.then(|| "cudaLaunchKernel".into()),
            debug_annotations: args,
            ..Default::default()
        }),
        ..Default::default()
    };
    let end = TracePacket {
        timestamp: Some(1_700),
        trusted_packet_sequence_id: Some(1),
        track_event: Some(TrackEvent {
            r#type: Some(event_type::SLICE_END),
            track_uuid: Some(5),
            ..Default::default()
        }),
        ..Default::default()
    };
    step(&mut d, &begin);
    let open_fast = matches!(
        d.tables.tracks.get(5).and_then(|t| t.bodies.last()),
        Some(OpenBody::Cuda(_))
    );
    assert_eq!(open_fast, !inline && paths != Paths::General, "path taken");
    step(&mut d, &end);
    assert_eq!(out.len(), 1);
    out.remove(0)
}

#[test]
fn fast_and_general_paths_agree() {
    let fast = launch_call(false, Paths::All);
    assert_eq!(fast, launch_call(false, Paths::Scanner));
    assert_eq!(fast, launch_call(false, Paths::General));
    assert_eq!(fast, launch_call(true, Paths::All));
    let ReadRecord::Cuda(c) = &fast else {
        panic!("not a CUDA call: {fast:?}");
    };
    assert_eq!((c.ts_ns, c.duration_ns, c.ret), (1_000, 700, -2));
    assert_eq!(&*c.thread.name, "train");
    assert_eq!(
        c.args,
        CudaArgs::Launch {
            func: 0x7f00,
            grid: [4, 2, 1],
            block: [0; 3],
            shared_mem: 512,
            stream: 0,
        }
    );
}

#[test]
fn slot_reuse_rewrites_every_field() {
    let rec = launch_call(false, Paths::All);
    let mut slot = ReadRecord::Cuda(CudaCallRecord {
        detail: Default::default(),
        ts_ns: 1,
        duration_ns: 2,
        thread: ThreadRef {
            pid: 1,
            tid: 2,
            name: "other-thread-name".into(),
        },
        op: CudaOp::Malloc,
        ret: 9,
        args: CudaArgs::HostFree { ptr: 1 },
        clamped_from_ns: Some(3),
        cpu: 5,
        cgroup_id: 6,
    });
    let ReadRecord::Cuda(c) = &rec else {
        panic!("not a CUDA call");
    };
    let Some(TrackKind::Thread(t)) = Some(TrackKind::Thread(c.thread.clone())) else {
        return;
    };
    let p = CudaPrep {
        op: c.op,
        ret: c.ret,
        args: c.args.clone(),
        detail: c.detail.clone(),
        clamped: c.clamped_from_ns,
    };
    let at = Placement {
        cpu: c.cpu,
        cgroup_id: c.cgroup_id,
    };
    slices::put_cuda(&mut slot, c.ts_ns, c.duration_ns, &t, at, &p);
    assert_eq!(slot, rec);
}
