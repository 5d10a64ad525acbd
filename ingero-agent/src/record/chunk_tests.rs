//! Tests of the on-disk encoding: compressed chunks (several per file, an oversized packet
//! written plain, `flush`, a file cut in the middle of a chunk), compression levels giving the
//! same records, the launch configuration interned once per distinct configuration.

use std::path::Path;

use ingero_ebpf::CudaOp;
use libdeflater::Decompressor;
use prost::Message;

use super::chunk::CHUNK_LIMIT;
use super::interner::Arg;
use super::proto::{TracePacket, event_type};
use super::schema::{self, LaunchConfig};
use super::synth::{self, SCENARIO_PID as P, SCENARIO_T0 as T0};
use super::tests::{config, read_all, tmp_dir, write_all};
use super::{FinalStats, Recorder};
use crate::decode::{CudaArgs, Event, ProcessEvent, ProcessOp};
use crate::read::{PacketReader, ReadRecord, TimeRange, TraceReader};
use crate::timeline::record::TimelineRecord;

const MS: u64 = 1_000_000;

/// The packets of a file as it lies on disk: `(offset of the packet's frame, packet)`.
fn outer_packets(bytes: &[u8]) -> Vec<(usize, Vec<u8>)> {
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
fn inflated(packet: &[u8]) -> Option<Vec<u8>> {
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

fn read_bytes(dir: &Path, name: &str, bytes: &[u8]) -> (Vec<ReadRecord>, bool) {
    let path = dir.join(name);
    std::fs::write(&path, bytes).expect("write");
    let mut reader = TraceReader::from_files(vec![path], TimeRange::all());
    let got = reader
        .by_ref()
        .collect::<anyhow::Result<Vec<_>>>()
        .expect("read");
    (got, !reader.truncated_files().is_empty())
}

#[test]
fn a_file_of_several_compressed_chunks_reads_as_the_plain_file() {
    let dir = tmp_dir("chunks");
    let records = workload(30_000);
    let plain = write_level(&dir, "l0.pftrace", 0, &records);
    let want = comparable(read_all(vec![dir.join("l0.pftrace")]));
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
        assert_eq!(
            chunks.len(),
            outer.len(),
            "level {level}: every packet a chunk"
        );
        assert!(chunks.len() >= 4, "level {level}: {} chunks", chunks.len());
        for c in &chunks[..chunks.len() - 1] {
            assert!(
                c.len() >= CHUNK_LIMIT && c.len() < CHUNK_LIMIT + 4096,
                "a chunk is written when it reaches the limit: {}",
                c.len()
            );
        }
        // The chunks hold exactly the packets of a plain file (same count, same framing).
        let inner: Vec<u8> = chunks.concat();
        assert_eq!(
            outer_packets(&inner).len(),
            outer_packets(&plain).len(),
            "level {level}"
        );
        assert!(bytes.len() * 4 < plain.len(), "level {level} compresses");
        let got = comparable(read_all(vec![dir.join(&name)]));
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
        .filter(|(_, (_, p))| inflated(p).is_none())
        .map(|(i, _)| i)
        .collect();
    assert_eq!(plain.len(), 1, "only the oversized packet is plain");
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
    assert_eq!(
        std::fs::metadata(&path).map(|m| m.len()).unwrap_or(1),
        0,
        "held in the chunk until a flush"
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
        assert!(!truncated, "a chunk boundary is a clean end");
        per_boundary.push((*at, got));
    }
    assert!(
        per_boundary.windows(2).all(|w| w[0].1.len() < w[1].1.len()),
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
                if let Some(l) = schema::parse_launch(&text) {
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
            assert_eq!(a.name_iid, Some(Arg::Launch.iid()));
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
