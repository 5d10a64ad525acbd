//! The reader's throughput on a launch-dominated recording, split into inflate and decode.
//! Prints one `name value unit` line per figure.
//!
//! `cargo run --release -p ingero-trace --example read-bench -- [--events N] [--dir DIR]
//! [--rounds R] [--writer-level L] [--chunk KIB] [--level L] [--file PATH]
//! [--only next_into|for_each|for_each_ahead] [--write PATH]`
//!
//! Without `--file` it writes `synth::launches(N)` with the current writer, compressing at
//! `--writer-level` (default: the writer's; 0: plain packets), and with `--chunk KIB` re-packs
//! a plain file's packets into `compressed_packets` containers of about that size inflated at
//! `--level`. With `--file` it reads that file as is. Throughputs are the best of `--rounds`
//! runs and are also given per CPU second of the process (the machines this runs on are
//! shared), which counts the reader's helper thread where it has one. `for_each` inflates in
//! the reading thread, `for_each_ahead` on the helper thread (`TraceReader::inflate_ahead`);
//! `next_into` and `iterator` take the reader's default. `--only NAME` runs one such pass and
//! nothing else (for callgrind); `--write PATH` only writes the file it would read. `skim` is
//! the skim mode's pass over the same file (containers skipped unopened).

mod common;

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result};
use ingero_trace::clock::{process_cpu_secs, thread_cpu_secs};
use ingero_trace::model::FinalStats;
use ingero_trace::model::ReadRecord;
use ingero_trace::proto::keys::{COMPRESSED_PACKETS, FRAME};
use ingero_trace::proto::varint;
use ingero_trace::read::{ChunkedPackets, TimeRange, TraceReader, empty_record};
use ingero_trace::synth;
use ingero_trace::write::{Recorder, RecorderConfig};
use libdeflater::{CompressionLvl, Compressor, Decompressor};

fn frame(out: &mut Vec<u8>, tag: &[u8], packet: &[u8]) {
    out.extend_from_slice(tag);
    varint::put(out, packet.len() as u64);
    out.extend_from_slice(packet);
}

/// Re-packs a plain file's packets into containers of about `chunk` bytes inflated.
fn repack(plain: &[u8], chunk: usize, level: i32) -> Result<Vec<u8>> {
    let mut c = Compressor::new(CompressionLvl::new(level).map_err(|e| anyhow::anyhow!("{e:?}"))?);
    let mut packets = ChunkedPackets::new(plain);
    let mut out = Vec::new();
    let mut inner = Vec::new();
    let mut z = Vec::new();
    let mut flush = |inner: &mut Vec<u8>, out: &mut Vec<u8>| -> Result<()> {
        if inner.is_empty() {
            return Ok(());
        }
        z.resize(c.zlib_compress_bound(inner.len()), 0);
        let n = c
            .zlib_compress(inner, &mut z)
            .map_err(|e| anyhow::anyhow!("{e:?}"))?;
        let mut packet = Vec::with_capacity(n + 8);
        frame(&mut packet, &COMPRESSED_PACKETS, &z[..n]);
        frame(out, &[FRAME], &packet);
        inner.clear();
        Ok(())
    };
    while let Some(r) = packets.next_range()? {
        frame(&mut inner, &[FRAME], &packets.buf()[r]);
        if inner.len() >= chunk {
            flush(&mut inner, &mut out)?;
        }
    }
    flush(&mut inner, &mut out)?;
    Ok(out)
}

fn write_plain(path: &Path, n: u64, level: u32) -> Result<()> {
    let cfg = RecorderConfig {
        path: Some(path.to_path_buf()),
        max_file_size: u64::MAX,
        compression_level: level,
        chown_to_sudo_user: false,
        ..Default::default()
    };
    let mut rec = Recorder::create_with(cfg, false)?;
    for r in synth::launches(n, synth::SCENARIO_T0) {
        rec.write(&r)?;
    }
    rec.finish(&FinalStats::default())?;
    Ok(())
}

/// Inflates every container of the file (nothing else): (wall, cpu, inflated bytes).
fn inflate_only(path: &Path) -> Result<(f64, (f64, u64))> {
    let bytes = std::fs::read(path)?;
    let start = Instant::now();
    let cpu = thread_cpu_secs();
    let mut d = Decompressor::new();
    let mut buf = vec![0u8; 4 << 20];
    let mut total = 0u64;
    let mut packets = ChunkedPackets::new(&bytes[..]);
    while let Some(r) = packets.next_range()? {
        let p = &packets.buf()[r];
        if let Some(body) = p.strip_prefix(&COMPRESSED_PACKETS[..]) {
            let (len, rest) = varint::take(body).context("container length")?;
            let z = rest
                .get(..usize::try_from(len)?)
                .context("container length")?;
            total += d
                .zlib_decompress(z, &mut buf)
                .map_err(|e| anyhow::anyhow!("{e:?}"))? as u64;
        }
    }
    Ok((
        start.elapsed().as_secs_f64(),
        (thread_cpu_secs() - cpu, total),
    ))
}

/// The same pass through `for_each_record` (the closure inlined into the hot loop), inflating
/// on a helper thread or not; the CPU time is the whole process's.
fn read_each(path: &Path, ahead: bool) -> Result<(f64, (f64, u64))> {
    let start = Instant::now();
    let cpu = process_cpu_secs();
    let mut reader =
        TraceReader::from_files(vec![path.to_path_buf()], TimeRange::all()).inflate_ahead(ahead);
    let mut count = 0u64;
    let mut dur = 0u64;
    reader.for_each_record(|rec| {
        if let ReadRecord::Cuda(c) = rec {
            dur = dur.wrapping_add(c.duration_ns);
        }
        count += 1;
    })?;
    std::hint::black_box(dur);
    Ok((
        start.elapsed().as_secs_f64(),
        (process_cpu_secs() - cpu, count),
    ))
}

/// Skim mode (containers skipped unopened): (wall, cpu, containers skipped).
fn skim(path: &Path) -> Result<(f64, (f64, u64))> {
    let start = Instant::now();
    let cpu = thread_cpu_secs();
    let mut reader =
        TraceReader::from_files(vec![path.to_path_buf()], TimeRange::all()).skip_bundles();
    let mut rec: ReadRecord = empty_record();
    while reader.next_into(&mut rec)? {}
    Ok((
        start.elapsed().as_secs_f64(),
        (thread_cpu_secs() - cpu, reader.bundles_skipped()),
    ))
}

fn read_iter(path: &Path) -> Result<(f64, (f64, u64))> {
    let start = Instant::now();
    let cpu = process_cpu_secs();
    let mut count = 0u64;
    for r in TraceReader::from_files(vec![path.to_path_buf()], TimeRange::all()) {
        std::hint::black_box(r?);
        count += 1;
    }
    Ok((
        start.elapsed().as_secs_f64(),
        (process_cpu_secs() - cpu, count),
    ))
}

/// Best wall time and best CPU time over `rounds` runs.
fn best(rounds: u32, mut f: impl FnMut() -> Result<(f64, (f64, u64))>) -> Result<(f64, f64, u64)> {
    let (mut wall, mut cpu, mut n) = (f64::MAX, f64::MAX, 0);
    for _ in 0..rounds {
        let (w, (c, k)) = f()?;
        wall = wall.min(w);
        cpu = cpu.min(c);
        n = k;
    }
    Ok((wall, cpu, n))
}

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let mut n = 2_000_000u64;
    let mut rounds = 3u32;
    let mut chunk = 0usize;
    let mut level = 2i32;
    let mut writer_level = RecorderConfig::default().compression_level;
    let mut dir = std::env::temp_dir();
    let mut file = None;
    let mut only = None;
    let mut write_to = None;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--events" => n = args.next().context("--events N")?.parse()?,
            "--dir" => dir = PathBuf::from(args.next().context("--dir DIR")?),
            "--rounds" => rounds = args.next().context("--rounds R")?.parse()?,
            "--chunk" => chunk = args.next().context("--chunk KIB")?.parse()?,
            "--level" => level = args.next().context("--level L")?.parse()?,
            "--writer-level" => {
                writer_level = args.next().context("--writer-level L")?.parse()?;
            }
            "--file" => file = Some(PathBuf::from(args.next().context("--file PATH")?)),
            "--only" => only = Some(args.next().context("--only next_into|for_each")?),
            "--write" => write_to = Some(PathBuf::from(args.next().context("--write PATH")?)),
            other => anyhow::bail!("unknown argument {other}"),
        }
    }
    let mut made = None;
    let path = match file {
        Some(p) => p,
        None => {
            let plain = write_to.clone().unwrap_or_else(|| {
                dir.join(format!("ingero-read-bench-{}.pftrace", std::process::id()))
            });
            write_plain(&plain, n, writer_level)?;
            if chunk > 0 {
                let bytes = std::fs::read(&plain)?;
                std::fs::write(&plain, repack(&bytes, chunk << 10, level)?)?;
            }
            if write_to.is_some() {
                return Ok(());
            }
            made = Some(plain.clone());
            plain
        }
    };
    if only.as_deref() == Some("next_into") {
        let (_, (_, count)) = common::read_into(&path)?;
        println!("records {count}");
    } else if only.as_deref() == Some("for_each") {
        let (_, (_, count)) = read_each(&path, false)?;
        println!("records {count}");
    } else if only.as_deref() == Some("for_each_ahead") {
        let (_, (_, count)) = read_each(&path, true)?;
        println!("records {count}");
    } else {
        let size = std::fs::metadata(&path).context("trace size")?.len();
        let (w, c, inflated) = best(rounds, || inflate_only(&path))?;
        let (iw, ic, count) = best(rounds, || common::read_into(&path))?;
        println!(
            "file_bytes {size} bytes ({:.2} per record)",
            size as f64 / count as f64
        );
        println!(
            "inflate {:.0} MB/s inflated ({:.0} per cpu-s), {:.1} ns per record (cpu)",
            inflated as f64 / w / 1e6,
            inflated as f64 / c / 1e6,
            c * 1e9 / count as f64
        );
        println!(
            "next_into {:.2} M records/s ({:.2} per cpu-s), {:.1} ns per record (cpu)",
            count as f64 / iw / 1e6,
            count as f64 / ic / 1e6,
            ic * 1e9 / count as f64
        );
        for (name, ahead) in [("for_each", false), ("for_each_ahead", true)] {
            let (ew, ec, count) = best(rounds, || read_each(&path, ahead))?;
            println!(
                "{name} {:.2} M records/s ({:.2} per cpu-s), {:.1} ns per record (cpu)",
                count as f64 / ew / 1e6,
                count as f64 / ec / 1e6,
                ec * 1e9 / count as f64
            );
        }
        let (tw, tc, count) = best(rounds, || read_iter(&path))?;
        println!(
            "iterator {:.2} M records/s ({:.2} per cpu-s)",
            count as f64 / tw / 1e6,
            count as f64 / tc / 1e6
        );
        let (sw, sc, bundles) = best(rounds, || skim(&path))?;
        println!(
            "skim {:.0} MB/s of file ({:.0} per cpu-s), {bundles} containers skipped",
            size as f64 / sw / 1e6,
            size as f64 / sc / 1e6
        );
    }
    if let Some(p) = made {
        std::fs::remove_file(p).ok();
    }
    Ok(())
}
