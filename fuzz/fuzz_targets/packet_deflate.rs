//! Fuzzes the packet-structured deflate encoder: its zlib output must inflate (libdeflate) to
//! exactly its input.
//!
//! The encoder finds copies from the packets' framing (`0x0A`, varint length, payload ending
//! in a varint timestamp), so raw fuzz bytes alone would rarely reach its shortcuts. Each
//! input is therefore compressed twice with one deflater, as the writer reuses it chunk after
//! chunk: once as it is, and once as a chunk of packets that the input describes (new
//! packets, exact repeats, earlier packets with a new timestamp, raw bytes in between; see
//! [`chunk`]). The same property runs in CI as a proptest
//! (`ingero-trace/tests/deflate_properties.rs`); this target is for long runs on a machine
//! with nightly: `cargo +nightly fuzz run packet_deflate`.

#![no_main]

use ingero_trace::proto::keys::{FRAME, TIMESTAMP};
use ingero_trace::proto::varint;
use ingero_trace::write::PacketDeflater;
use libdeflater::Decompressor;
use libfuzzer_sys::fuzz_target;

/// The input's next bytes, as many as there are up to `n`.
fn take<'a>(data: &mut &'a [u8], n: usize) -> &'a [u8] {
    let (head, rest) = data.split_at(n.min(data.len()));
    *data = rest;
    head
}

/// A timestamp of 1 to 8 little-endian input bytes (so varints of every length).
fn timestamp(data: &mut &[u8]) -> u64 {
    let n = take(data, 1).first().map_or(1, |b| usize::from(b % 8) + 1);
    take(data, n)
        .iter()
        .rev()
        .fold(0u64, |v, b| v << 8 | u64::from(*b))
}

/// `body`, and the payload it makes with a timestamp field `ts` after it, as the writer ends
/// every packet.
fn with_timestamp(body: Vec<u8>, ts: u64) -> (Vec<u8>, Vec<u8>) {
    let mut payload = body.clone();
    payload.push(TIMESTAMP);
    varint::put(&mut payload, ts);
    (body, payload)
}

/// The chunk of framed packets `data` describes, one opcode byte at a time: a new packet
/// (a length byte, that many bytes, a timestamp), an earlier packet again, an earlier packet's
/// bytes with a new timestamp, or up to 7 raw bytes.
fn chunk(mut data: &[u8]) -> Vec<u8> {
    let data = &mut data;
    let mut out = Vec::new();
    // Each packet's bytes before its timestamp.
    let mut bodies: Vec<Vec<u8>> = Vec::new();
    let mut payloads: Vec<Vec<u8>> = Vec::new();
    while let Some(&op) = take(data, 1).first() {
        let pick = |data: &mut &[u8], n: usize| {
            take(data, 1)
                .first()
                .map_or(0, |b| usize::from(*b) % n.max(1))
        };
        let (body, payload) = match op % 4 {
            0 => {
                let len = take(data, 1).first().map_or(0, |b| usize::from(*b));
                let body = take(data, len).to_vec();
                with_timestamp(body, timestamp(data))
            }
            1 if !payloads.is_empty() => {
                let i = pick(data, payloads.len());
                (bodies[i].clone(), payloads[i].clone())
            }
            2 if !payloads.is_empty() => {
                let i = pick(data, payloads.len());
                with_timestamp(bodies[i].clone(), timestamp(data))
            }
            _ => {
                let n = usize::from(op >> 2) % 8;
                out.extend_from_slice(take(data, n));
                continue;
            }
        };
        out.push(FRAME);
        varint::put(&mut out, payload.len() as u64);
        out.extend_from_slice(&payload);
        bodies.push(body);
        payloads.push(payload);
    }
    out
}

fn assert_round_trip(z: &mut PacketDeflater, plain: &[u8]) {
    let mut out = Vec::new();
    z.zlib(plain, &mut out);
    // One byte of room more than the input: any extra output shows.
    let mut back = vec![0u8; plain.len() + 1];
    let n = Decompressor::new()
        .zlib_decompress(&out, &mut back)
        .expect("the encoder's output is a zlib stream of its input's size");
    assert!(back[..n] == *plain, "inflated to other bytes");
}

fuzz_target!(|data: &[u8]| {
    let mut z = PacketDeflater::default();
    assert_round_trip(&mut z, data);
    assert_round_trip(&mut z, &chunk(data));
});
