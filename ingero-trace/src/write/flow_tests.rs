//! NCCL collectives on the timeline: the calls that make up one collective on every rank carry
//! one Perfetto flow id (so the UI joins them by arrows, the last rank to call last), a
//! collective of another number or communicator another, and a call without an identity none;
//! the reader takes such slices like any other.

use ingero_ebpf::CudaOp;
use prost::Message;

use super::Recorder;
use super::tests::{config, read_all, tmp_dir};
use crate::model::{
    Communicator, CudaArgs, FinalStats, NcclRedOp, NcclType, ReadRecord, TimelineRecord,
    collective_flow,
};
use crate::proto::{TracePacket, TrackEvent, event_type};
use crate::read::ExpandedPackets;
use crate::synth;

const ID: u64 = 0x5f1c_2a9e_81b3_d004;

fn all_reduce(pid: u32, ts: u64, id: Option<u64>, seq: Option<u64>) -> TimelineRecord {
    synth::cuda(
        synth::task(pid, pid, "rank"),
        ts,
        5_000,
        CudaOp::NcclAllReduce,
        0,
        CudaArgs::Collective {
            count: 64,
            datatype: NcclType(7),
            red_op: Some(NcclRedOp(0)),
            root: None,
            on: Communicator {
                comm: 0x5500 + u64::from(pid),
                id,
                rank: Some(pid as i32 - 10),
                nranks: Some(2),
            },
            stream: 0,
            seq,
        },
    )
}

#[test]
fn the_calls_of_one_collective_on_every_rank_share_a_flow() {
    let dir = tmp_dir("flows");
    let records = vec![
        all_reduce(10, 1_000_000, Some(ID), Some(1)),
        all_reduce(11, 1_100_000, Some(ID), Some(1)),
        all_reduce(10, 2_000_000, Some(ID), Some(2)),
        all_reduce(11, 2_100_000, Some(ID), Some(2)),
        all_reduce(10, 3_000_000, None, None),
    ];
    let mut rec =
        Recorder::create_with(config(Some(dir.join("f.pftrace")), None), false).expect("create");
    for r in &records {
        rec.write(r).expect("write");
    }
    let files = rec.finish(&FinalStats::default()).expect("finish");
    let mut flows: Vec<Vec<u64>> = Vec::new();
    for f in &files {
        let bytes = std::fs::read(f).expect("read");
        let mut packets = ExpandedPackets::new(&bytes[..]);
        let mut p = Vec::new();
        while let Ok(true) = packets.next_into(&mut p) {
            let Ok(pkt) = TracePacket::decode(&p[..]) else {
                continue;
            };
            let slice = |te: &TrackEvent| te.r#type == Some(event_type::SLICE_BEGIN);
            if let Some(te) = pkt.track_event.filter(slice) {
                flows.push(te.flow_ids);
            }
        }
    }
    let (one, two) = (collective_flow(ID, 1), collective_flow(ID, 2));
    assert_eq!(flows, [vec![one], vec![one], vec![two], vec![two], vec![]]);
    // Read back, every call is there with its arguments.
    let calls = read_all(files)
        .into_iter()
        .filter(|r| matches!(r, ReadRecord::Cuda(c) if c.op == CudaOp::NcclAllReduce))
        .count();
    assert_eq!(calls, 5);
}
