//! Tests of the on-disk encoding: compressed chunks (several per file, an oversized packet
//! written plain, `flush`, a file cut in the middle of a chunk), compression levels giving the
//! same records, the launch configuration interned once per distinct configuration.

use std::path::Path;

use ingero_ebpf::CudaOp;
use libdeflater::Decompressor;
use prost::Message;

use super::Recorder;
use super::chunk::CHUNK_LIMIT;
use super::tests::{config, read_all, tmp_dir, write_all};
use crate::model::FinalStats;
use crate::model::LaunchConfig;
use crate::model::ReadRecord;
use crate::model::TimelineRecord;
use crate::model::{CudaArgs, Event, ProcessEvent, ProcessOp};
use crate::proto::{TracePacket, event_type};
use crate::read::{PacketReader, TimeRange, TraceReader};
use crate::synth::{self, SCENARIO_PID as P, SCENARIO_T0 as T0};
use crate::vocab;
use crate::vocab::ArgKey;

const MS: u64 = 1_000_000;

/// The packets of a file as it lies on disk: `(offset of the packet's frame, packet)`.
pub(super) fn outer_packets(bytes: &[u8]) -> Vec<(usize, Vec<u8>)> {
    let mut r = PacketReader::new(bytes);
    let mut buf = Vec::new();
    let mut out = Vec::new();
    let mut at = 0;
    while r.next_into(&mut buf).expect("packet") {
        out.push((at, buf.clone()));
        at = r.offset() as usize;
    }
    assert_eq!(at, bytes.len(), "the file ends on a packet boundary");
    out
}

/// The inflated content of a `compressed_packets` container, `None` for a plain packet.
pub(super) fn inflated(packet: &[u8]) -> Option<Vec<u8>> {
    let body = packet.strip_prefix(&[0x92, 0x03][..])?;
    // Field 50's payload is framed like a `Trace.packet` once a key is put in front of it.
    let mut framed = vec![0x0A];
    framed.extend_from_slice(body);
    let mut r = PacketReader::new(&framed[..]);
    let mut z = Vec::new();
    assert!(r.next_into(&mut z).expect("field 50"));
    assert_eq!(r.offset() as usize, framed.len(), "nothing but field 50");
    let mut out = vec![0; 4 * CHUNK_LIMIT];
    let n = Decompressor::new()
        .zlib_decompress(&z, &mut out)
        .expect("a zlib stream");
    out.truncate(n);
    Some(out)
}

/// Whether an outer packet belongs to the plain sequence (written outside the chunks).
fn on_plain_sequence(packet: &[u8]) -> bool {
    TracePacket::decode(packet)
        .is_ok_and(|p| p.trusted_packet_sequence_id == Some(super::sequence::PLAIN_SEQUENCE))
}

/// Whether a packet starts a sequence inside the chunks afresh (incremental state cleared).
fn starts_chunk_sequence(packet: &[u8]) -> bool {
    TracePacket::decode(packet).is_ok_and(|p| {
        p.trusted_packet_sequence_id != Some(super::sequence::PLAIN_SEQUENCE)
            && p.sequence_flags.unwrap_or(0) & crate::proto::SEQ_INCREMENTAL_STATE_CLEARED != 0
    })
}

fn workload(launches: u64) -> Vec<TimelineRecord> {
    let mut records = synth::scenario();
    records.extend(synth::launches(launches, T0 + 30 * MS));
    records
}

fn write_level(dir: &Path, name: &str, level: u32, records: &[TimelineRecord]) -> Vec<u8> {
    let mut cfg = config(Some(dir.join(name)), None);
    cfg.compression_level = level;
    let (files, _) = write_all(cfg, records);
    assert_eq!(files.len(), 1);
    std::fs::read(&files[0]).expect("read file")
}

/// Records without the session's start time (it is the wall clock at `create`).
fn comparable(records: Vec<ReadRecord>) -> Vec<ReadRecord> {
    records
        .into_iter()
        .map(|r| match r {
            ReadRecord::Session(mut s) => {
                s.started_realtime_ns = 0;
                ReadRecord::Session(s)
            }
            r => r,
        })
        .collect()
}

/// The records inside chunks, then those written plain, each in file order: where a plain
/// packet falls among the chunked ones depends on where chunks happen to end.
fn by_stream(mut records: Vec<ReadRecord>) -> Vec<ReadRecord> {
    use crate::model::CounterKind;
    records.sort_by_key(|r| match r {
        ReadRecord::Cuda(_) | ReadRecord::OffCpu(_) | ReadRecord::Lifecycle(_) => 0,
        ReadRecord::Counter(c) if matches!(c.kind, CounterKind::DeviceMemory { .. }) => 0,
        _ => 1,
    });
    records
}

fn read_bytes(dir: &Path, name: &str, bytes: &[u8]) -> (Vec<ReadRecord>, bool) {
    let path = dir.join(name);
    std::fs::write(&path, bytes).expect("write");
    let mut reader = TraceReader::from_files(vec![path], TimeRange::all());
    let got = reader
        .by_ref()
        .collect::<Result<Vec<_>, _>>()
        .expect("read");
    (got, !reader.truncated_files().is_empty())
}

#[test]
fn a_file_of_several_compressed_chunks_reads_as_the_plain_file() {
    let dir = tmp_dir("chunks");
    let records = workload(30_000);
    let plain = write_level(&dir, "l0.pftrace", 0, &records);
    let want = by_stream(comparable(read_all(vec![dir.join("l0.pftrace")])));
    assert!(
        outer_packets(&plain)
            .iter()
            .all(|(_, p)| inflated(p).is_none()),
        "level 0 writes packets plain"
    );
    for level in [1, 3, 9] {
        let name = format!("l{level}.pftrace");
        let bytes = write_level(&dir, &name, level, &records);
        let outer = outer_packets(&bytes);
        let chunks: Vec<Vec<u8>> = outer.iter().filter_map(|(_, p)| inflated(p)).collect();
        assert!(
            outer
                .iter()
                .all(|(_, p)| inflated(p).is_some() || on_plain_sequence(p)),
            "level {level}: every packet a chunk or on the plain sequence"
        );
        assert!(
            chunks
                .iter()
                .all(|c| !on_plain_sequence(&c[c.len().min(2)..])),
            "level {level}: no chunk holds plain-sequence packets"
        );
        assert!(chunks.len() >= 4, "level {level}: {} chunks", chunks.len());
        for c in &chunks[..chunks.len() - 1] {
            assert!(
                c.len() >= CHUNK_LIMIT && c.len() < CHUNK_LIMIT + 4096,
                "a chunk is written when it reaches the limit: {}",
                c.len()
            );
        }
        // The chunks and the plain-sequence packets together are exactly the packets of an
        // uncompressed file (same count, same framing), plus the restarts of the chunked
        // sequences (see `chunked_sequences_restart_every_restart_bytes`) and, on the plain
        // sequence, a seek mark before each restart and one at the end (`seek_marks.rs`).
        let inner: Vec<u8> = chunks.concat();
        let restarts = |packets: &[(usize, Vec<u8>)]| {
            packets
                .iter()
                .filter(|(_, p)| starts_chunk_sequence(p))
                .count()
        };
        let extra = restarts(&outer_packets(&inner)) - restarts(&outer_packets(&plain));
        let plain_sequence = outer.iter().filter(|(_, p)| on_plain_sequence(p)).count();
        assert!(
            plain_sequence > chunks.len(),
            "a clock snapshot after each chunk"
        );
        assert_eq!(
            outer_packets(&inner).len() + plain_sequence - 2 * extra - 1,
            outer_packets(&plain).len(),
            "level {level}"
        );
        assert!(bytes.len() * 4 < plain.len(), "level {level} compresses");
        let got = by_stream(comparable(read_all(vec![dir.join(&name)])));
        assert_eq!(got, want, "level {level} reads back the same records");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_oversized_packet_is_written_plain_between_chunks() {
    let dir = tmp_dir("oversized");
    let mut records = workload(8_000);
    let task = synth::task(P, P, "python3");
    let text = "x".repeat(CHUNK_LIMIT + 1000);
    let big = TimelineRecord::Event(Event::Process(ProcessEvent {
        ts_ns: T0 + 30 * MS + 4_000 * 2_000,
        task,
        op: ProcessOp::Exec,
        other_pid: P,
        clone_flags_known: true,
        text: text.clone(),
    }));
    records.insert(records.len() / 2, big);
    records.sort_by_key(|r| r.ts_ns());
    let bytes = write_level(&dir, "big.pftrace", 1, &records);
    let outer = outer_packets(&bytes);
    let plain: Vec<usize> = outer
        .iter()
        .enumerate()
        .filter(|(_, (_, p))| inflated(p).is_none() && !on_plain_sequence(p))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(
        plain.len(),
        1,
        "only the oversized packet is outside a chunk"
    );
    let i = plain[0];
    assert!(outer[i].1.len() > CHUNK_LIMIT);
    assert!(i > 0 && i + 1 < outer.len(), "chunks before and after it");
    let got = read_all(vec![dir.join("big.pftrace")]);
    assert!(
        got.iter()
            .any(|r| matches!(r, ReadRecord::Lifecycle(l) if l.text == text)),
        "the oversized packet reads back"
    );
    let want = comparable(read_all(vec![dir.join("big.pftrace")]));
    write_level(&dir, "big0.pftrace", 0, &records);
    assert_eq!(want, comparable(read_all(vec![dir.join("big0.pftrace")])));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn flush_makes_what_was_written_readable() {
    let dir = tmp_dir("flush");
    let path = dir.join("f.pftrace");
    let mut rec = Recorder::create_with(config(Some(path.clone()), None), false).expect("create");
    let records: Vec<_> = synth::launches(1_000, T0).collect();
    for r in &records {
        rec.write(r).expect("write");
    }
    let before = read_all(vec![path.clone()]);
    assert!(
        !before.iter().any(|r| matches!(r, ReadRecord::Cuda(_))),
        "calls are held in the chunk until a flush"
    );
    assert!(
        before.iter().any(|r| matches!(r, ReadRecord::Session(_))),
        "the plain sequence is written at once"
    );
    rec.flush().expect("flush");
    let got = read_all(vec![path.clone()]);
    let calls = got
        .iter()
        .filter(|r| matches!(r, ReadRecord::Cuda(_)))
        .count();
    // Slices come out of the reader when they end; the last ones have not been written yet.
    assert!((998..=1_000).contains(&calls), "{calls} calls");
    let flushed = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    rec.flush().expect("flush again");
    assert_eq!(
        std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0),
        flushed,
        "an empty chunk writes nothing"
    );
    rec.finish(&FinalStats::default()).expect("finish");
    let got = read_all(vec![path]);
    assert_eq!(
        got.iter()
            .filter(|r| matches!(r, ReadRecord::Cuda(_)))
            .count(),
        1_000
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_recorder_dropped_without_finish_still_writes_its_chunk() {
    let dir = tmp_dir("drop");
    let path = dir.join("d.pftrace");
    let mut rec = Recorder::create_with(config(Some(path.clone()), None), false).expect("create");
    for r in synth::launches(100, T0) {
        rec.write(&r).expect("write");
    }
    drop(rec);
    let calls = read_all(vec![path])
        .iter()
        .filter(|r| matches!(r, ReadRecord::Cuda(_)))
        .count();
    assert!((98..=100).contains(&calls), "{calls} calls");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_file_cut_inside_a_chunk_keeps_the_earlier_chunks() {
    let dir = tmp_dir("cut-chunk");
    let bytes = write_level(&dir, "c.pftrace", 1, &workload(20_000));
    let outer = outer_packets(&bytes);
    assert!(outer.len() >= 3, "{} chunks", outer.len());
    // What a reader gets from each whole prefix of chunks.
    let mut per_boundary = Vec::new();
    for (k, (at, _)) in outer.iter().enumerate().skip(1) {
        let (got, truncated) = read_bytes(&dir, &format!("b{k}.pftrace"), &bytes[..*at]);
        assert!(!truncated, "a packet boundary is a clean end");
        per_boundary.push((*at, got, inflated(&outer[k - 1].1).is_some()));
    }
    // The plain packets between chunks (clock snapshots) add no records; each chunk does.
    let after_chunks: Vec<usize> = per_boundary
        .iter()
        .filter(|b| b.2)
        .map(|b| b.1.len())
        .collect();
    assert!(after_chunks.len() >= 3, "{} chunks", after_chunks.len());
    assert!(
        after_chunks.windows(2).all(|w| w[0] < w[1]),
        "every chunk adds records"
    );
    // A SIGKILL in the middle of writing a chunk: everything before it is still there.
    for (k, (start, p)) in outer.iter().enumerate().skip(1) {
        let len = p.len() + 5;
        for cut in [1, 2, 3, 7, len / 2, len - 2, len - 1].map(|d| start + d) {
            if cut >= bytes.len() || outer.get(k + 1).is_some_and(|n| cut >= n.0) {
                continue;
            }
            let (got, truncated) = read_bytes(&dir, "cut.pftrace", &bytes[..cut]);
            let want = &per_boundary[k - 1];
            assert_eq!(want.0, *start);
            assert!(truncated, "cut at {cut}");
            assert_eq!(got, want.1, "cut at {cut}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_launch_is_one_argument_interned_once_per_configuration() {
    let dir = tmp_dir("launch");
    let t = synth::task(P, P, "python3");
    let configs = [
        (1u64, [1, 1, 1], 0u64),
        (2, [4, 1, 1], 0),
        (1, [1, 1, 1], 4096),
    ];
    let mut records = Vec::new();
    for i in 0..300u64 {
        let (func, grid, smem) = configs[(i % 3) as usize];
        let args = CudaArgs::Launch {
            func,
            grid,
            block: [32, 1, 1],
            shared_mem: smem,
            stream: 0x10,
        };
        records.push(synth::cuda(
            t,
            T0 + i * 10_000,
            1_000,
            CudaOp::LaunchKernel,
            0,
            args,
        ));
    }
    let bytes = write_level(&dir, "l.pftrace", 0, &records);
    let mut declared = Vec::new();
    let mut launch_args = 0;
    for (_, p) in outer_packets(&bytes) {
        let p = TracePacket::decode(&p[..]).expect("packet");
        if let Some(d) = &p.interned_data {
            for s in &d.debug_annotation_string_values {
                let text = String::from_utf8(s.str.clone().unwrap_or_default()).expect("utf-8");
                if let Some(l) = vocab::parse_launch(&text) {
                    declared.push((s.iid, l));
                }
            }
        }
        if let Some(te) = &p.track_event {
            if te.r#type != Some(event_type::SLICE_BEGIN) {
                continue;
            }
            assert_eq!(te.debug_annotations.len(), 1, "one argument per launch");
            let a = &te.debug_annotations[0];
            assert_eq!(a.name_iid, Some(ArgKey::Launch.iid()));
            assert!(declared.iter().any(|(iid, _)| *iid == a.string_value_iid));
            launch_args += 1;
        }
    }
    assert_eq!(launch_args, 300);
    let want: Vec<LaunchConfig> = configs
        .iter()
        .map(|(func, grid, smem)| LaunchConfig {
            func: *func,
            grid: *grid,
            block: [32, 1, 1],
            shared_mem: *smem,
            stream: 0x10,
        })
        .collect();
    assert_eq!(
        declared.iter().map(|(_, l)| *l).collect::<Vec<_>>(),
        want,
        "each distinct configuration declared once, in order of first use"
    );
    // And the reader turns it back into the call's arguments.
    let got: Vec<CudaArgs> = read_all(vec![dir.join("l.pftrace")])
        .into_iter()
        .filter_map(|r| match r {
            ReadRecord::Cuda(c) => Some(c.args),
            _ => None,
        })
        .collect();
    let input: Vec<CudaArgs> = records
        .iter()
        .filter_map(|r| match r {
            TimelineRecord::Event(Event::Cuda(c)) => Some(c.args.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(got, input);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn everything_a_first_pass_needs_is_outside_the_chunks() {
    let dir = tmp_dir("first-pass");
    let bytes = write_level(&dir, "f.pftrace", 1, &workload(20_000));
    let outer = outer_packets(&bytes);
    // The file without its chunks: what a first pass that skips them reads.
    let mut plain_only = Vec::new();
    for (k, (at, p)) in outer.iter().enumerate() {
        if inflated(p).is_none() {
            let end = outer.get(k + 1).map_or(bytes.len(), |n| n.0);
            plain_only.extend_from_slice(&bytes[*at..end]);
        }
    }
    let (skimmed, truncated) = read_bytes(&dir, "plain-only.pftrace", &plain_only);
    assert!(!truncated);
    let first_pass = |r: &ReadRecord| {
        matches!(
            r,
            ReadRecord::Session(_)
                | ReadRecord::Statistics(_)
                | ReadRecord::LabelState(_)
                | ReadRecord::Annotation(_)
        )
    };
    let full = read_all(vec![dir.join("f.pftrace")]);
    let want: Vec<_> = full.iter().filter(|r| first_pass(r)).collect();
    let got: Vec<_> = skimmed.iter().filter(|r| first_pass(r)).collect();
    assert!(want.len() >= 8, "labels, spans, session and statistics");
    assert_eq!(got, want);
    assert!(
        !skimmed
            .iter()
            .any(|r| matches!(r, ReadRecord::Cuda(_) | ReadRecord::OffCpu(_))),
        "calls and scheduling live in the chunks"
    );
    // The last plain packet before the statistics restates the clocks at the recording's end.
    let last_snapshot = outer
        .iter()
        .filter_map(|(_, p)| TracePacket::decode(&p[..]).ok())
        .filter_map(|p| p.clock_snapshot)
        .next_back()
        .expect("a plain clock snapshot");
    let mono = last_snapshot
        .clocks
        .iter()
        .find(|c| c.clock_id == Some(crate::proto::clock_id::MONOTONIC))
        .and_then(|c| c.timestamp)
        .expect("MONOTONIC");
    let end = full
        .iter()
        .filter(|r| !matches!(r, ReadRecord::Statistics(_)))
        .map(|r| r.interval().1)
        .max()
        .expect("records");
    assert_eq!(
        mono, end,
        "the last snapshot is at the end of the recording"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A file of about a dozen chunks whose chunked sequences restart every `restart_bytes`.
fn write_restarting(dir: &Path, name: &str, restart_bytes: u64) -> Vec<u8> {
    let mut cfg = config(Some(dir.join(name)), None);
    cfg.restart_bytes = restart_bytes;
    let (files, _) = write_all(cfg, &workload(60_000));
    std::fs::read(&files[0]).expect("read file")
}

/// The offsets (in the file) of its chunks.
pub(super) fn chunk_offsets(bytes: &[u8]) -> Vec<usize> {
    outer_packets(bytes)
        .into_iter()
        .filter(|(_, p)| inflated(p).is_some())
        .map(|(at, _)| at)
        .collect()
}

/// Whether chunk `c` (inflated) starts the chunked sequences afresh.
fn restarts(c: &[u8]) -> bool {
    outer_packets(c)
        .into_iter()
        .find(|(_, p)| !on_plain_sequence(p))
        .is_some_and(|(_, p)| starts_chunk_sequence(&p))
}

#[test]
fn chunked_sequences_restart_every_restart_bytes() {
    let dir = tmp_dir("restarts");
    let plain = by_stream(comparable(read_all(vec![dir.join(write_level_name(
        &dir,
        "l0.pftrace",
        0,
    ))])));
    // (file, restart_bytes, which chunks start afresh)
    type Case = (&'static str, u64, fn(usize) -> bool);
    let cases: [Case; 3] = [
        ("each.pftrace", 1, |_| true),
        ("second.pftrace", 2 * CHUNK_LIMIT as u64, |i| i % 2 == 0),
        ("never.pftrace", u64::MAX, |i| i == 0),
    ];
    for (name, every, want) in cases {
        let bytes = write_restarting(&dir, name, every);
        let chunks: Vec<Vec<u8>> = outer_packets(&bytes)
            .iter()
            .filter_map(|(_, p)| inflated(p))
            .collect();
        assert!(chunks.len() >= 8, "{name}: {} chunks", chunks.len());
        for (i, c) in chunks.iter().enumerate() {
            assert_eq!(restarts(c), want(i), "{name}: chunk {i}");
        }
        let got = by_stream(comparable(read_all(vec![dir.join(name)])));
        assert!(
            got == plain,
            "{name} reads back the records of the plain file"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Writes the plain (level 0) file of [`write_restarting`]'s workload; returns its name.
fn write_level_name(dir: &Path, name: &str, level: u32) -> String {
    write_level(dir, name, level, &workload(60_000));
    name.to_owned()
}

/// Reads a file with one chunk corrupted: (records, chunks lost, packets skipped, damage
/// offset).
pub(super) fn read_damaged(
    dir: &Path,
    name: &str,
    bytes: &[u8],
    chunk: usize,
) -> (Vec<ReadRecord>, u64, u64, u64) {
    let at = chunk_offsets(bytes)[chunk];
    let mut bad = bytes.to_vec();
    // The middle of the chunk's zlib stream.
    let len = outer_packets(&bytes[at..])[0].1.len();
    bad[at + len / 2] ^= 0x5a;
    let path = dir.join(name);
    std::fs::write(&path, &bad).expect("write");
    let mut reader = TraceReader::from_files(vec![path], TimeRange::all());
    let got = reader
        .by_ref()
        .collect::<Result<Vec<_>, _>>()
        .expect("a damaged chunk is not an error");
    let damage = reader.damage().to_vec();
    assert_eq!(damage.len() as u64, reader.containers_lost());
    let offset = damage.first().map_or(u64::MAX, |d| d.offset);
    (
        got,
        reader.containers_lost(),
        reader.packets_skipped(),
        offset,
    )
}

#[test]
fn a_damaged_chunk_loses_its_records_up_to_the_next_restart_and_nothing_else() {
    let dir = tmp_dir("damage");
    let key = |r: &ReadRecord| format!("{r:?}");
    let bytes = write_restarting(&dir, "good.pftrace", 2 * CHUNK_LIMIT as u64);
    let good = comparable(read_all(vec![dir.join("good.pftrace")]));
    let known: std::collections::HashSet<String> = good.iter().map(key).collect();
    let offsets = chunk_offsets(&bytes);

    // Chunk 3 damaged; chunk 4 restarts the sequences.
    let (got, lost, skipped, offset) = read_damaged(&dir, "bad3.pftrace", &bytes, 3);
    let got = comparable(got);
    assert_eq!((lost, skipped, offset), (1, 0, offsets[3] as u64));
    assert!(
        got.iter().all(|r| known.contains(&key(r))),
        "every record read is one of the undamaged file's"
    );
    let missing = good.len() - got.len();
    assert!(
        missing > 1_000 && missing < 7_000,
        "about one chunk of records is missing: {missing}"
    );
    // Everything from chunk 5 on is there: the last records of the file too.
    assert_eq!(
        got[got.len() - 100..].iter().map(key).collect::<Vec<_>>(),
        good[good.len() - 100..].iter().map(key).collect::<Vec<_>>()
    );

    // Without restarts the rest of the file's chunked records cannot be trusted: skipped,
    // never decoded against the wrong clock.
    let old = write_restarting(&dir, "old.pftrace", u64::MAX);
    let (got, lost, skipped, _) = read_damaged(&dir, "bad-old.pftrace", &old, 3);
    let got = comparable(got);
    assert_eq!(lost, 1);
    assert!(skipped > 10_000, "{skipped} packets skipped");
    assert!(got.iter().all(|r| known.contains(&key(r))));
    assert!(
        got.iter().any(|r| matches!(r, ReadRecord::Statistics(_))),
        "plain packets after the damage are still read"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
