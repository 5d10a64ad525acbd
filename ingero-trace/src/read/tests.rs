//! Reader tests on whole recordings: `compressed_packets` containers (re-packed here from a
//! file the writer wrote) must yield exactly the records of the plain file; corrupt and cut
//! containers; the `launch` argument.

use std::path::{Path, PathBuf};

use libdeflater::{CompressionLvl, Compressor};
use prost::Message;

use super::ahead::InflateAhead;
use super::error::InflateError;
use super::{
    Damage, ExpandedPackets, FileDecoder, LossReason, PacketReader, Paths, TimeRange, TraceReader,
    empty_record,
};
use crate::model::CudaArgs;
use crate::model::FinalStats;
use crate::model::LaunchConfig;
use crate::model::ReadRecord;
use crate::model::TimelineRecord;
use crate::proto::keys::{COMPRESSED_PACKETS, FRAME};
use crate::proto::varint;
use crate::proto::{
    DebugAnnotation, DebugAnnotationName, EventName, InternedData, InternedString,
    ThreadDescriptor, TracePacket, TrackDescriptor, TrackEvent, event_type,
};
use crate::synth::{self, SCENARIO_T0 as T0};
use crate::vocab::{self, ArgKey};
use crate::write::{Recorder, RecorderConfig};
use ingero_ebpf::CudaOp;

pub(super) fn tmp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ingero-read-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("tmp dir");
    d
}

/// Writes `records` with the current writer into `dir/written*.pftrace`, rotating at
/// `max_file_size`, compressing at `level` (0: plain packets); returns the files' bytes,
/// oldest first.
fn write(dir: &Path, records: &[TimelineRecord], max_file_size: u64, level: u32) -> Vec<Vec<u8>> {
    let cfg = RecorderConfig {
        path: Some(dir.join("written.pftrace")),
        machine_id: Some(77),
        max_file_size,
        compression_level: level,
        chown_to_sudo_user: false,
        ..Default::default()
    };
    let mut rec = Recorder::create_with(cfg, false).expect("create");
    for r in records {
        rec.write(r).expect("write");
    }
    let files = rec.finish(&FinalStats::default()).expect("finish");
    files
        .iter()
        .map(|f| std::fs::read(f).expect("read back"))
        .collect()
}

/// A file of plain packets written by the current writer: the full scenario, then launches.
pub(super) fn written(dir: &Path, launches: u64) -> Vec<u8> {
    let mut records = synth::scenario();
    records.extend(synth::launches(launches, T0 + 30_000_000));
    write(dir, &records, u64::MAX, 0).remove(0)
}

pub(super) fn packets_of(file: &[u8]) -> Vec<Vec<u8>> {
    let mut r = PacketReader::new(file);
    let mut buf = Vec::new();
    let mut out = Vec::new();
    while r.next_into(&mut buf).expect("packet") {
        out.push(buf.clone());
    }
    out
}

/// `Trace.packet` framing.
/// Each of `files` rewritten by `rewrite(from, to)` into `dir` (`<stem>-<i>.pftrace`), in order.
pub(super) fn rewritten(
    files: &[PathBuf],
    dir: &Path,
    stem: &str,
    rewrite: impl Fn(&Path, &Path),
) -> Vec<PathBuf> {
    files
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let to = dir.join(format!("{stem}-{i}.pftrace"));
            rewrite(f, &to);
            to
        })
        .collect()
}

pub(super) fn frame(out: &mut Vec<u8>, packet: &[u8]) {
    out.push(FRAME);
    varint::put(out, packet.len() as u64);
    out.extend_from_slice(packet);
}

fn zlib(data: &[u8]) -> Vec<u8> {
    let mut c = Compressor::new(CompressionLvl::new(2).expect("level"));
    let mut out = vec![0; c.zlib_compress_bound(data.len())];
    let n = c.zlib_compress(data, &mut out).expect("compress");
    out.truncate(n);
    out
}

/// A `TracePacket` holding only `compressed_packets` with `packets` inside.
pub(super) fn container(packets: &[Vec<u8>]) -> Vec<u8> {
    let mut inner = Vec::new();
    for p in packets {
        frame(&mut inner, p);
    }
    let z = zlib(&inner);
    let mut outer = COMPRESSED_PACKETS.to_vec();
    varint::put(&mut outer, z.len() as u64);
    outer.extend_from_slice(&z);
    outer
}

/// The packets re-packed: the first few plain, then containers of varying sizes with a plain
/// packet now and then. Returns the file and the offset of each container.
pub(super) fn repack(packets: &[Vec<u8>]) -> (Vec<u8>, Vec<(u64, usize)>) {
    let mut file = Vec::new();
    let mut containers = Vec::new();
    let mut i = 0;
    let sizes = [3usize, 1, 40, 7, 500, 2, 90];
    let mut k = 0;
    while i < packets.len() {
        if i < 2 || k % 4 == 3 {
            frame(&mut file, &packets[i]);
            i += 1;
        } else {
            let n = sizes[k % sizes.len()].min(packets.len() - i);
            containers.push((file.len() as u64, i));
            frame(&mut file, &container(&packets[i..i + n]));
            i += n;
        }
        k += 1;
    }
    (file, containers)
}

/// Writes `bytes` to `dir/name` and reads the file with `read`, once inflating in the reading
/// thread and once with the helper thread inflating ahead, which must not change what `read`
/// finds; returns that.
fn read_both_ways<T: PartialEq>(
    dir: &Path,
    name: &str,
    bytes: &[u8],
    read: impl Fn(&mut TraceReader) -> T,
) -> T {
    let path = dir.join(name);
    std::fs::write(&path, bytes).expect("write");
    let read_with = |ahead: bool| {
        read(
            &mut TraceReader::from_files(vec![path.clone()], TimeRange::all()).inflate_ahead(ahead),
        )
    };
    let alone = read_with(false);
    assert!(
        read_with(true) == alone,
        "the helper thread changed what {name} reads as"
    );
    alone
}

/// Everything the reader yields from `bytes`, then its error if any, and whether it saw a
/// truncated file (the same with and without the helper thread).
fn read(dir: &Path, name: &str, bytes: &[u8]) -> (Vec<ReadRecord>, Option<String>, bool) {
    read_both_ways(dir, name, bytes, |reader| {
        let mut got = Vec::new();
        let mut err = None;
        for r in reader.by_ref() {
            match r {
                Ok(r) => got.push(r),
                Err(e) => err = Some(format!("{e:#}")),
            }
        }
        (got, err, !reader.truncated_files().is_empty())
    })
}

/// Reads a file that may hold damaged containers: its records, the damage and the packets
/// skipped after it (the same with and without the helper thread).
fn read_damaged(dir: &Path, name: &str, bytes: &[u8]) -> (Vec<ReadRecord>, Vec<Damage>, u64) {
    read_both_ways(dir, name, bytes, |reader| {
        let got = reader
            .by_ref()
            .collect::<Result<Vec<_>, _>>()
            .expect("damaged containers are not errors");
        assert_eq!(reader.damage().len() as u64, reader.containers_lost());
        (got, reader.damage().to_vec(), reader.packets_skipped())
    })
}

/// Records completed by the first `n` packets of the plain file.
fn records_before(packets: &[Vec<u8>], n: usize) -> usize {
    let mut d = FileDecoder::new();
    let mut out = Vec::new();
    for p in &packets[..n] {
        d.packet(p, &mut out).expect("decode");
    }
    out.len()
}

#[test]
fn compressed_containers_yield_the_plain_records() {
    let dir = tmp_dir("compressed");
    let plain = written(&dir, 3_000);
    let packets = packets_of(&plain);
    let (want, err, _) = read(&dir, "plain.pftrace", &plain);
    assert!(err.is_none(), "{err:?}");
    assert!(want.len() > 3_000);
    let (file, containers) = repack(&packets);
    assert!(containers.len() > 5);
    let (got, err, truncated) = read(&dir, "packed.pftrace", &file);
    assert!(err.is_none(), "{err:?}");
    assert!(!truncated);
    assert_eq!(got, want);

    // next_into, and the packet count (inner packets, not containers).
    let path = dir.join("packed.pftrace");
    let mut reader = TraceReader::from_files(vec![path], TimeRange::all());
    let mut rec = empty_record();
    let mut n = 0;
    while reader.next_into(&mut rec).expect("next_into") {
        assert_eq!(rec, want[n]);
        n += 1;
    }
    assert_eq!(n, want.len());
    assert_eq!(reader.packets(), packets.len() as u64);

    // FileDecoder::packet expands containers too.
    let mut d = FileDecoder::new();
    let mut out = Vec::new();
    for p in packets_of(&file) {
        d.packet(&p, &mut out).expect("decode");
    }
    assert_eq!(out, want);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_container_s_other_fields_are_ignored() {
    let dir = tmp_dir("container-fields");
    let plain = written(&dir, 10);
    let packets = packets_of(&plain);
    let (want, _, _) = read(&dir, "plain.pftrace", &plain);
    let mut file = Vec::new();
    // A sequence id and a clearing flag on the container must not touch any sequence.
    let mut c = vec![0x50, 0x01, 0x68, 0x01];
    c.extend(container(&packets));
    frame(&mut file, &c);
    let (got, err, _) = read(&dir, "fields.pftrace", &file);
    assert!(err.is_none(), "{err:?}");
    assert_eq!(got, want);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_corrupt_container_is_lost_and_reported_with_its_offset() {
    let dir = tmp_dir("corrupt");
    let plain = written(&dir, 2_000);
    let packets = packets_of(&plain);
    let (want, _, _) = read(&dir, "plain.pftrace", &plain);
    let (file, containers) = repack(&packets);
    let (at, first_inner) = containers[containers.len() / 2];
    // The zlib stream's last four bytes are its Adler-32 checksum: flipping one makes the
    // stream invalid whatever the data.
    let outer = packets_of(&file);
    let mut pos = 0usize;
    let mut bad = Vec::new();
    for p in &outer {
        let mut p = p.clone();
        if pos as u64 == at {
            let last = p.len() - 1;
            p[last] ^= 0x01;
        }
        let before = bad.len();
        frame(&mut bad, &p);
        pos += bad.len() - before;
    }
    let (got, damage, skipped) = read_damaged(&dir, "corrupt.pftrace", &bad);
    assert_eq!(damage.len(), 1, "{damage:?}");
    assert!(damage[0].path.ends_with("corrupt.pftrace"));
    assert_eq!(damage[0].offset, at);
    assert_eq!(
        damage[0].reason,
        LossReason::Inflate(InflateError::Corrupt),
        "{damage:?}"
    );
    // The records before the container are all there. This file's sequences never start
    // afresh, so the packets after it that needed its state are skipped, never misread.
    let n = records_before(&packets, first_inner);
    assert_eq!(got[..n], want[..n]);
    assert!(skipped > 0);
    assert!(got[n..].iter().all(|r| want.contains(r)));

    // A container whose inflated content is not packets.
    let mut file = Vec::new();
    frame(&mut file, &packets[0]);
    // A valid zlib stream whose content is a packet cut short.
    let mut raw = COMPRESSED_PACKETS.to_vec();
    let z = zlib(&[FRAME, 0x20, 1, 2]);
    varint::put(&mut raw, z.len() as u64);
    raw.extend(&z);
    let at = file.len();
    frame(&mut file, &raw);
    let (_, damage, _) = read_damaged(&dir, "cut-inner.pftrace", &file);
    assert_eq!(damage.len(), 1, "{damage:?}");
    assert_eq!(damage[0].offset, at as u64);
    assert_eq!(
        damage[0].reason,
        LossReason::CutInnerPacket { at: 0 },
        "{damage:?}"
    );
    assert!(
        damage[0]
            .reason
            .to_string()
            .contains("byte 0 of the inflated container"),
        "{damage:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_helper_out_of_step_is_dropped_and_nothing_is_lost() {
    let dir = tmp_dir("ahead-step");
    let packets = packets_of(&written(&dir, 2_000));
    let (file, containers) = repack(&packets);
    let decode = |d: &mut FileDecoder| {
        let mut out = Vec::new();
        for p in packets_of(&file) {
            d.packet(&p, &mut out).expect("decode");
        }
        out
    };
    let want = decode(&mut FileDecoder::new());
    // The helper reads a copy whose middle container differs from the decoder's in its
    // checksum only: it is out of step there, and the decoder inflates that container and
    // the rest itself.
    let (at, _) = containers[containers.len() / 2];
    let outer_len = packets_of(&file[at as usize..])[0].len();
    let mut other = file.clone();
    let framed_end = at as usize + 1 + varint::len(outer_len as u64) + outer_len;
    other[framed_end - 1] ^= 0x01;
    // Had the decoder taken the helper's output, that container would have been lost.
    let changed = packets_of(&other[at as usize..]).remove(0);
    let z = super::expand::compressed(&changed).expect("a container");
    assert!(super::inflate::Inflater::default().inflate(z).is_err());
    let other_path = dir.join("other.pftrace");
    std::fs::write(&other_path, &other).expect("write");
    let mut d = FileDecoder::new();
    d.inflate_ahead(InflateAhead::spawn(&other_path).expect("spawn"));
    same(&decode(&mut d), &want);
    assert_eq!(d.containers_lost(), 0);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_cut_container_at_the_end_ends_the_file_quietly() {
    let dir = tmp_dir("cut-container");
    let plain = written(&dir, 1_000);
    let packets = packets_of(&plain);
    let (want, _, _) = read(&dir, "plain.pftrace", &plain);
    let (file, containers) = repack(&packets);
    let (at, first_inner) = *containers.last().expect("containers");
    let n = records_before(&packets, first_inner);
    let outer_len = packets_of(&file[at as usize..])[0].len();
    for cut in [
        at as usize + 1,
        at as usize + 3,
        at as usize + outer_len / 2,
    ] {
        let (got, err, truncated) = read(&dir, "cut.pftrace", &file[..cut]);
        assert!(err.is_none(), "cut at {cut}: {err:?}");
        assert!(truncated, "cut at {cut}");
        assert_eq!(got, want[..n], "cut at {cut}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A `cudaLaunchKernel` slice with the `launch` argument, interned or inline.
fn launch_slice(inline: bool, cfg: &LaunchConfig) -> Vec<ReadRecord> {
    let text = vocab::launch_text(cfg);
    let first = TracePacket {
        trusted_packet_sequence_id: Some(1),
        sequence_flags: Some(3),
        interned_data: Some(InternedData {
            event_names: vec![EventName {
                iid: Some(1),
                name: Some("cudaLaunchKernel".into()),
            }],
            debug_annotation_names: vec![DebugAnnotationName {
                iid: Some(1),
                name: Some(ArgKey::Launch.text().into()),
            }],
            debug_annotation_string_values: vec![InternedString {
                iid: Some(1),
                str: Some(text.clone().into_bytes()),
            }],
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
    let begin = TracePacket {
        timestamp: Some(1_000),
        trusted_packet_sequence_id: Some(1),
        track_event: Some(TrackEvent {
            r#type: Some(event_type::SLICE_BEGIN),
            track_uuid: Some(5),
            name_iid: Some(1),
            debug_annotations: vec![DebugAnnotation {
                name_iid: (!inline).then_some(1),
                name: inline.then(|| ArgKey::Launch.text().to_owned()),
                string_value_iid: (!inline).then_some(1),
                string_value: inline.then(|| text.clone()),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    };
    let end = TracePacket {
        timestamp: Some(1_500),
        trusted_packet_sequence_id: Some(1),
        track_event: Some(TrackEvent {
            r#type: Some(event_type::SLICE_END),
            track_uuid: Some(5),
            ..Default::default()
        }),
        ..Default::default()
    };
    let mut d = FileDecoder::new();
    let mut out = Vec::new();
    for p in [first, begin, end] {
        d.packet(&p.encode_to_vec(), &mut out).expect("decode");
    }
    out
}

#[test]
fn the_launch_argument_gives_the_launch_configuration() {
    let cfg = LaunchConfig {
        func: 0x7f00_aa00,
        grid: [16, 4, 1],
        block: [32, 8, 1],
        shared_mem: 1024,
        stream: 0xabcd,
    };
    for inline in [false, true] {
        let out = launch_slice(inline, &cfg);
        let [ReadRecord::Cuda(c)] = &out[..] else {
            panic!("inline {inline}: {out:?}");
        };
        assert_eq!((c.ts_ns, c.duration_ns, c.ret), (1_000, 500, 0));
        assert_eq!(
            c.args,
            CudaArgs::Launch {
                func: cfg.func,
                grid: cfg.grid,
                block: cfg.block,
                shared_mem: cfg.shared_mem,
                stream: cfg.stream,
            },
            "inline {inline}"
        );
    }
}

/// Equal record lists, reporting only the first difference (the lists are long).
fn same(got: &[ReadRecord], want: &[ReadRecord]) {
    if let Some(i) = (0..got.len().min(want.len())).find(|i| got[*i] != want[*i]) {
        panic!("record {i}: got {:?}, want {:?}", got[i], want[i]);
    }
    assert_eq!(got.len(), want.len(), "record count");
}

/// Every record of a file, decoded packet by packet with some of the decoder's paths.
fn decode_with(paths: Paths, file: &[u8]) -> Vec<ReadRecord> {
    let mut d = FileDecoder::with_paths(paths);
    let mut out = Vec::new();
    for p in packets_of(file) {
        d.packet(&p, &mut out).expect("decode");
    }
    out
}

/// The scenario, launch-dominated calls of two threads (some overlapping), late calls (the
/// late sequence), an overlap the writer clamps, and a failing call.
fn mixed_records() -> Vec<TimelineRecord> {
    let mut records = synth::scenario();
    records.extend(synth::launches(3_000, T0 + 30_000_000));
    let t = synth::task(synth::SCENARIO_PID, synth::SCENARIO_PID, "python3");
    let launch = |ts: u64, dur: u64, ret: i32| {
        synth::cuda(
            t,
            ts,
            dur,
            CudaOp::LaunchKernel,
            ret,
            CudaArgs::Launch {
                func: 0x42,
                grid: [2, 1, 1],
                block: [64, 1, 1],
                shared_mem: 16,
                stream: 0x99,
            },
        )
    };
    let late = T0 + 100_000_000;
    records.extend([
        launch(late, 1_000, 0),
        launch(late - 50_000_000, 1_000, 0),
        launch(late + 10_000, 50_000, 0),
        launch(late + 20_000, 50_000, 719),
    ]);
    records
}

#[test]
fn every_decoder_path_yields_the_same_records() {
    let dir = tmp_dir("paths");
    let records = mixed_records();
    // The writer's own compressed chunks and plain packets give the same records.
    let one = |level| {
        let d = dir.join(format!("level-{level}"));
        std::fs::create_dir_all(&d).expect("dir");
        write(&d, &records, u64::MAX, level).remove(0)
    };
    let (plain, packed) = (one(0), one(1));
    assert!(packed.len() * 3 < plain.len(), "compressed");
    // Written twice: only the session's wall-clock start differs.
    let unstamp = |mut rs: Vec<ReadRecord>| {
        for r in &mut rs {
            if let ReadRecord::Session(s) = r {
                s.started_realtime_ns = 0;
            }
        }
        rs
    };
    same(
        &unstamp(decode_with(Paths::All, &packed)),
        &unstamp(decode_with(Paths::General, &plain)),
    );

    let mut files = write(&dir, &records, 16 * 1024, 0);
    let rotated = files.len();
    assert!(rotated >= 3, "{rotated} files");
    let d = dir.join("rotated");
    std::fs::create_dir_all(&d).expect("dir");
    files.extend(write(&d, &records, 16 * 1024, 1));
    let mut total = 0;
    for file in &files[..rotated] {
        let want = decode_with(Paths::General, file);
        assert!(!want.is_empty());
        total += want.len();
        same(&decode_with(Paths::Scanner, file), &want);
        same(&decode_with(Paths::All, file), &want);
        let (packed, _) = repack(&packets_of(file));
        same(&decode_with(Paths::All, &packed), &want);
        same(&decode_with(Paths::General, &packed), &want);
    }
    for file in &files[rotated..] {
        let want = decode_with(Paths::General, file);
        assert!(!want.is_empty());
        same(&decode_with(Paths::Scanner, file), &want);
        same(&decode_with(Paths::All, file), &want);
    }
    let files = &files[..rotated];
    let calls = |rs: &[ReadRecord]| {
        rs.iter()
            .filter(|r| matches!(r, ReadRecord::Cuda(_)))
            .count()
    };
    let all: Vec<ReadRecord> = files
        .iter()
        .flat_map(|f| decode_with(Paths::All, f))
        .collect();
    assert_eq!(all.len(), total);
    assert!(calls(&all) >= 3_000 + 4, "{} calls", calls(&all));
    assert!(
        all.iter()
            .any(|r| matches!(r, ReadRecord::Cuda(c) if c.ret == 719))
    );
    assert!(
        all.iter()
            .any(|r| matches!(r, ReadRecord::Cuda(c) if c.clamped_from_ns.is_some()))
    );
    assert!(all.iter().any(|r| matches!(r, ReadRecord::OffCpu(_))));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn recordings_with_the_timestamp_first_read_the_same() {
    // Recordings written before the timestamp moved to the end of each packet, and other
    // writers' packets (prost writes fields in number order: timestamp first).
    let dir = tmp_dir("ts-first");
    let file = write(&dir, &mixed_records(), u64::MAX, 0).remove(0);
    let mut reordered = Vec::new();
    for p in packets_of(&file) {
        let packet = TracePacket::decode(&p[..]).expect("prost decodes the writer's packet");
        let bytes = packet.encode_to_vec();
        assert_eq!(bytes.len(), p.len(), "prost keeps every field");
        if packet.timestamp.is_some() && packet.track_event.is_some() {
            assert_eq!(bytes.first(), Some(&0x40), "timestamp first");
        }
        frame(&mut reordered, &bytes);
    }
    let want = decode_with(Paths::General, &file);
    assert!(want.len() > 3_000);
    same(&decode_with(Paths::All, &reordered), &want);
    let (packed, _) = repack(&packets_of(&reordered));
    same(&decode_with(Paths::All, &packed), &want);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_writer_s_launches_take_the_byte_layout_path() {
    let dir = tmp_dir("layout");
    let n = 4_000u64;
    let records: Vec<_> = synth::launches(n, T0).collect();
    let file = write(&dir, &records, u64::MAX, 1).remove(0);
    let mut d = FileDecoder::new();
    let mut out = Vec::new();
    for p in packets_of(&file) {
        d.packet(&p, &mut out).expect("decode");
    }
    let calls = out
        .iter()
        .filter(|r| matches!(r, ReadRecord::Cuda(_)))
        .count() as u64;
    assert_eq!(calls, n);
    // Launches (98 %) and every end; the other calls have several arguments.
    assert!(
        d.layout_packets() > 2 * n * 97 / 100,
        "{} of {} packets",
        d.layout_packets(),
        d.packets()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn expanded_packets_are_the_plain_packets() {
    let dir = tmp_dir("expand");
    let plain = written(&dir, 500);
    let packets = packets_of(&plain);
    let (file, _) = repack(&packets);
    let mut r = ExpandedPackets::new(&file[..]);
    let mut buf = Vec::new();
    let mut got = Vec::new();
    while r.next_into(&mut buf).expect("packet") {
        got.push(buf.clone());
    }
    assert_eq!(got, packets);
    assert!(!r.truncated());
    let mut cut = ExpandedPackets::new(&file[..file.len() - 3]);
    let mut n = 0;
    while cut.next_into(&mut buf).expect("a cut file ends quietly") {
        n += 1;
    }
    assert!(cut.truncated());
    assert!(n < packets.len());
    let _ = std::fs::remove_dir_all(&dir);
}

/// Every record `next_into` yields from `files` over `range`.
fn next_into_all(files: &[PathBuf], range: TimeRange) -> Vec<ReadRecord> {
    let mut reader = TraceReader::from_files(files.to_vec(), range);
    let mut rec = empty_record();
    let mut out = Vec::new();
    while reader.next_into(&mut rec).expect("next_into") {
        out.push(rec.clone());
    }
    out
}

#[test]
fn for_each_record_yields_what_next_into_yields() {
    let dir = tmp_dir("for-each");
    let records = mixed_records();
    // Plain and compressed files, rotated: the hot loop (a call's begin and end decoded as
    // one, or apart when another thread's call comes between), the slow path and file
    // changes.
    let mut paths = Vec::new();
    for (level, name) in [(0, "plain"), (1, "packed")] {
        let d = dir.join(name);
        std::fs::create_dir_all(&d).expect("dir");
        let files = write(&d, &records, 16 * 1024, level);
        assert!(files.len() >= 2, "{} files", files.len());
        for (i, f) in files.iter().enumerate() {
            let p = d.join(format!("{i:03}.pftrace"));
            std::fs::write(&p, f).expect("write");
            paths.push(p);
        }
    }
    let mid = T0 + 30_000_000 + 1_000_000;
    for range in [TimeRange::all(), TimeRange::new(mid, mid + 2_000_000)] {
        let want = next_into_all(&paths, range);
        assert!(want.len() > 100, "{} records", want.len());
        let mut by_next = TraceReader::from_files(paths.clone(), range);
        let mut rec = empty_record();
        while by_next.next_into(&mut rec).expect("next_into") {}
        // Inflating on the helper thread or not changes nothing either.
        for ahead in [false, true] {
            let mut reader = TraceReader::from_files(paths.clone(), range).inflate_ahead(ahead);
            let mut got = Vec::new();
            reader
                .for_each_record(|r| got.push(r.clone()))
                .expect("for_each");
            same(&got, &want);
            assert_eq!(reader.packets(), by_next.packets());
        }
    }
    // An error ends the scan with the error, after the records before it (a timestamp whose
    // varint runs past its packet).
    let bad = dir.join("bad.pftrace");
    std::fs::write(&bad, b"\x0a\x02\x40\xff").expect("write");
    let mut reader = TraceReader::from_files(vec![paths[0].clone(), bad], TimeRange::all());
    let mut n = 0usize;
    assert!(reader.for_each_record(|_| n += 1).is_err());
    assert_eq!(n, next_into_all(&paths[..1], TimeRange::all()).len());
    let _ = std::fs::remove_dir_all(&dir);
}
