//! Properties of the trace reader on files it cannot trust: arbitrary bytes, packet-shaped
//! noise, and real recordings damaged the ways stored files get damaged (flipped bits,
//! inserted, deleted and repeated bytes, cuts).
//!
//! Whatever the bytes, reading
//! - never panics and never hangs: every reading runs under a watchdog thread
//!   ([`common::WATCHDOG`]), and the records yielded stay within what the file's size allows
//!   ([`common::max_records`]), so a reader that loops or yields something twice fails;
//! - gives the same records, error, damage report and counts with and without the helper
//!   thread that inflates ahead (`TraceReader::inflate_ahead`), and `for_each_record` (its
//!   own hot loop) yields what the iterator yields;
//! - keeps every record before the damage: the first K records read from a damaged recording
//!   equal the first K of the intact one, where K is the number of records completed by the
//!   top-level packets that end before the first damaged byte. A `compressed_packets`
//!   container is one top-level packet: one damaged byte loses it whole, so its records count
//!   only when the container ends before the damage. K is computed without the reader under
//!   test: the file is framed here and its packets decoded one by one with `FileDecoder`.
//!   A cut file yields exactly those K records, quietly.
//!
//! - resolves interned names, sequences and tracks the same whatever their ids' values and
//!   the order they are declared in (small sequential ids live in dense tables, others in
//!   maps, and an id moves from one to the other as a table fills).
//!
//! Memory is checked in its own binary (`reader_memory.rs`), whose counting allocator must
//! not see other tests' allocations.
//!
//! An integration test, not a module of `read/`: it goes through the public API only
//! (`Recorder`, `TraceReader`, `synth`, `FileDecoder`), as the tools and a fuzzer do, so the
//! reader's insides can change under it, and reader errors are compared as text only.
//! Recordings are written by the real writer from generated workloads, at level 1
//! (`compressed_packets`) and level 0 (plain packets), flushed every few hundred records and
//! with small `restart_bytes`, so that a file holds many containers and restarts.
//!
//! Sized for `cargo test --release` in CI: a few seconds on two cores.
#![allow(
    clippy::expect_used,
    reason = "helpers of the properties, outside #[test] functions: a failed step is a failed test"
)]

mod common;

use std::cell::Cell;

use common::{
    Mutation, Workload, assert_same_records, mutation, noise, packet_ends, read_every_way,
    workload, write_recording,
};
use ingero_ebpf::CudaOp;
use ingero_trace::model::ReadRecord;
use ingero_trace::proto::{
    EventName, InternedData, SEQ_INCREMENTAL_STATE_CLEARED, SEQ_NEEDS_INCREMENTAL_STATE,
    ThreadDescriptor, TracePacket, TrackDescriptor, TrackEvent, event_type,
};
use ingero_trace::read::FileDecoder;
use proptest::prelude::*;
use proptest::test_runner::{TestCaseError, TestRunner};
use prost::Message;

proptest! {
    #![proptest_config(common::config(512))]

    #[test]
    fn arbitrary_bytes_never_panic_hang_or_read_differently_with_the_helper(
        bytes in prop::collection::vec(any::<u8>(), 0..2048),
        tagged in any::<bool>(),
    ) {
        // Half of the files start like a packet, so the framing gets past the first byte.
        let mut bytes = bytes;
        if tagged {
            bytes.insert(0, 0x0A);
        }
        read_every_way("bytes", &bytes);
    }

    #[test]
    fn packet_shaped_noise_never_panics_hangs_or_reads_differently_with_the_helper(
        bytes in noise(),
    ) {
        read_every_way("noise", &bytes);
    }
}

/// A top-level packet of an intact recording.
struct PacketEnd {
    /// Its end offset.
    end: usize,
    /// Records completed by it and every packet before it.
    records: usize,
    /// A `compressed_packets` container.
    container: bool,
}

/// A recording of a workload, read every way and checked against what was written.
struct Intact {
    file: Vec<u8>,
    records: Vec<ReadRecord>,
    packets: Vec<PacketEnd>,
}

impl Intact {
    fn new(w: &Workload) -> Intact {
        let file = write_recording(w);
        let read = read_every_way("intact", &file);
        assert_eq!(read.error, None);
        assert!(read.damage.is_empty() && !read.truncated, "{read:?}");
        let calls = read
            .records
            .iter()
            .filter(|r| matches!(r, ReadRecord::Cuda(_)))
            .count();
        assert_eq!(
            calls,
            w.cuda_calls(),
            "every CUDA call written is read back"
        );
        // Packet by packet, framed here: which records each top-level packet completes.
        let mut d = FileDecoder::new();
        let mut records = Vec::new();
        let mut packets = Vec::new();
        for (end, payload) in packet_ends(&file) {
            let container = file[payload.clone()].starts_with(&[0x92, 0x03]);
            d.packet(&file[payload], &mut records)
                .expect("the intact file decodes");
            packets.push(PacketEnd {
                end,
                records: records.len(),
                container,
            });
        }
        assert_same_records(&records, &read.records, "packet by packet");
        Intact {
            file,
            records,
            packets,
        }
    }

    /// Records completed by the top-level packets that end at or before `offset`.
    fn records_before(&self, offset: usize) -> usize {
        self.packets
            .iter()
            .take_while(|p| p.end <= offset)
            .last()
            .map_or(0, |p| p.records)
    }

    /// Whether some container ending at or before `offset` completed records.
    fn container_records_before(&self, offset: usize) -> bool {
        let mut before = 0;
        for p in self.packets.iter().take_while(|p| p.end <= offset) {
            if p.container && p.records > before {
                return true;
            }
            before = p.records;
        }
        false
    }
}

fn runner(cases: u32) -> TestRunner {
    TestRunner::new(common::config(cases))
}

#[test]
fn a_damaged_recording_keeps_every_record_before_the_damage() {
    // How often the assertion compares something: K > 0, and (compressed files) K takes in
    // the records of at least one whole container.
    let [cases, compared, packed, packed_compared] = [(); 4].map(|()| Cell::new(0u32));
    let add = |c: &Cell<u32>, yes: bool| c.set(c.get() + u32::from(yes));
    let strategy = (workload(), prop::collection::vec(mutation(), 1..3));
    let result = runner(256).run(&strategy, |(w, mutations)| {
        let intact = Intact::new(&w);
        let mut file = intact.file.clone();
        let first = mutations
            .iter()
            .map(|m| m.apply(&mut file))
            .min()
            .unwrap_or(0);
        let got = read_every_way("damaged", &file);
        let k = intact.records_before(first);
        prop_assert!(
            got.records.len() >= k,
            "{} records read, {k} before the damage at {first}",
            got.records.len()
        );
        assert_same_records(&got.records[..k], &intact.records[..k], "before the damage");
        add(&cases, true);
        add(&compared, k > 0);
        if w.level > 0 {
            add(&packed, true);
            add(&packed_compared, intact.container_records_before(first));
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    // Not vacuous: most damage falls after some records, and in compressed files after whole
    // containers of them.
    let [cases, compared, packed, packed_compared] =
        [cases, compared, packed, packed_compared].map(Cell::into_inner);
    eprintln!(
        "{compared} of {cases} cases compared records; {packed_compared} of {packed} \
         compressed ones a container's"
    );
    assert!(
        compared * 10 >= cases * 7,
        "{compared} of {cases} cases compared records"
    );
    assert!(
        packed_compared * 3 >= packed,
        "{packed_compared} of {packed} compressed cases compared a container's records"
    );
}

#[test]
fn a_cut_recording_reads_as_exactly_the_packets_before_the_cut() {
    let strategy = (workload(), any::<prop::sample::Index>());
    let result = runner(128).run(&strategy, |(w, at)| {
        let intact = Intact::new(&w);
        let cut = Mutation::Truncate { at };
        let mut file = intact.file.clone();
        let at = cut.apply(&mut file);
        let got = read_every_way("cut", &file);
        let k = intact.records_before(at);
        let on_boundary = at == 0 || intact.packets.iter().any(|p| p.end == at);
        // A cut ends the file quietly, after exactly the records of the whole packets.
        if got.error.is_some() || got.truncated == on_boundary || !got.damage.is_empty() {
            return Err(TestCaseError::fail(format!(
                "cut at {at} of {}: {got:?}",
                intact.file.len()
            )));
        }
        assert_same_records(&got.records, &intact.records[..k], "cut");
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

/// How a generated file names its sequence, its track and its interned event names.
#[derive(Clone, Debug)]
struct Ids {
    seq: u32,
    uuid: u64,
    /// The iid of each name, in declaration order: (iid, index of the name).
    names: Vec<(u64, usize)>,
    /// How many names each interning packet declares.
    per_packet: usize,
}

/// A file of one thread's CUDA calls named through interned event names: the names declared
/// as `ids` says, then a begin and an end for each name index in `calls`.
fn interned_calls(ids: &Ids, calls: &[usize]) -> Vec<u8> {
    let mut file = Vec::new();
    let mut put = |p: TracePacket| common::framed(&mut file, &p.encode_to_vec());
    let seq = Some(ids.seq);
    put(TracePacket {
        trusted_packet_sequence_id: seq,
        sequence_flags: Some(SEQ_INCREMENTAL_STATE_CLEARED),
        track_descriptor: Some(TrackDescriptor {
            uuid: Some(ids.uuid),
            thread: Some(ThreadDescriptor {
                pid: Some(10),
                tid: Some(11),
                thread_name: Some("train".into()),
            }),
            ..Default::default()
        }),
        ..Default::default()
    });
    for names in ids.names.chunks(ids.per_packet.max(1)) {
        put(TracePacket {
            trusted_packet_sequence_id: seq,
            sequence_flags: Some(SEQ_NEEDS_INCREMENTAL_STATE),
            interned_data: Some(InternedData {
                event_names: names
                    .iter()
                    .map(|&(iid, name)| EventName {
                        iid: Some(iid),
                        name: Some(CudaOp::ALL[name % CudaOp::ALL.len()].name().into()),
                    })
                    .collect(),
                ..Default::default()
            }),
            ..Default::default()
        });
    }
    let iid_of = |name: usize| ids.names.iter().find(|n| n.1 == name).map(|n| n.0);
    for (i, &name) in calls.iter().enumerate() {
        let ts = 1_000 + 100 * i as u64;
        for (t, kind, name_iid) in [
            (ts, event_type::SLICE_BEGIN, iid_of(name)),
            (ts + 50, event_type::SLICE_END, None),
        ] {
            put(TracePacket {
                timestamp: Some(t),
                trusted_packet_sequence_id: seq,
                sequence_flags: Some(SEQ_NEEDS_INCREMENTAL_STATE),
                track_event: Some(TrackEvent {
                    r#type: Some(kind),
                    track_uuid: Some(ids.uuid),
                    name_iid,
                    ..Default::default()
                }),
                ..Default::default()
            });
        }
    }
    file
}

/// Ids of every size: the writer's small sequential ones, ones around the decoder's dense
/// table limit (2^20), and any.
fn any_id() -> impl Strategy<Value = u64> {
    prop_oneof![
        1u64..64,
        64u64..5_000,
        (1u64 << 20) - 8..(1 << 20) + 8,
        1u64..u64::MAX,
    ]
}

proptest! {
    #![proptest_config(common::config(256))]

    #[test]
    fn interned_ids_resolve_the_same_whatever_their_values_and_order(
        iids in prop::collection::hash_set(any_id(), 1..48)
            .prop_map(|s| s.into_iter().collect::<Vec<_>>())
            .prop_shuffle(),
        seq in prop_oneof![1u32..4, any::<u32>().prop_filter("a sequence", |s| *s > 0)],
        uuid in any_id(),
        per_packet in 1usize..6,
        calls in prop::collection::vec(any::<prop::sample::Index>(), 1..64),
    ) {
        let n = iids.len();
        let calls: Vec<usize> = calls.iter().map(|i| i.index(n)).collect();
        let ids = Ids {
            seq,
            uuid,
            names: iids.iter().enumerate().map(|(name, iid)| (*iid, name)).collect(),
            per_packet,
        };
        // The writer's way: ids 1, 2, 3 … declared in order, all at once.
        let sequential = Ids {
            seq: 1,
            uuid: 1,
            names: (0..n).map(|name| (name as u64 + 1, name)).collect(),
            per_packet: n,
        };
        let got = read_every_way("ids", &interned_calls(&ids, &calls));
        let want = read_every_way("sequential-ids", &interned_calls(&sequential, &calls));
        prop_assert_eq!(want.error, None);
        prop_assert_eq!(want.records.len(), calls.len(), "one call per begin and end");
        assert_same_records(&got.records, &want.records, "generated ids");
        prop_assert_eq!(got.error, None);
    }
}
