//! Property: whatever bytes [`PacketDeflater::zlib`] is given, its output is a zlib stream that
//! inflates to exactly those bytes, also when one deflater is reused chunk after chunk as the
//! writer reuses it.
//!
//! The encoder does no match search: it trusts the packets' framing (`0x0A`, varint length,
//! payload) to find each packet's earlier twin, or the last packet of the same shape, and emits
//! copies at distances it computed itself. The inputs are therefore built like the writer's
//! chunks, where those shortcuts fire: framed packets whose payload ends in a varint timestamp
//! (field 8), exact repeats of earlier packets, the same bytes before a new timestamp (of any
//! varint length), packets over 127 bytes (two-byte lengths), packets over 258 bytes (copies
//! split in pieces) and over 32 KiB apart (out of the window), and raw bytes between them that
//! are not packets at all (a cut frame, garbage), which the parse must survive. A wrong
//! distance, length, Huffman code or checksum shows up as different output or an invalid
//! stream.
//!
//! An integration test: it needs only the public API, so it survives changes to the
//! encoder's insides. libdeflate, already a dependency, inflates; `write/deflate/`'s own
//! tests check that Python's zlib reads the encoder's output too.

use ingero_trace::proto::keys::{FRAME, TIMESTAMP};
use ingero_trace::proto::varint;
use ingero_trace::write::PacketDeflater;
use libdeflater::Decompressor;
use proptest::prelude::*;
use proptest::sample::Index;

/// One packet of a chunk.
#[derive(Clone, Debug)]
enum Piece {
    /// A new packet: these bytes, then a timestamp field.
    Packet { body: Vec<u8>, ts: u64 },
    /// An earlier packet of the chunk again, byte for byte (the index wraps).
    Repeat(usize),
    /// An earlier packet's bytes before its timestamp, with a new timestamp (the index wraps).
    Retimed { of: usize, ts: u64 },
    /// An earlier packet's bytes with some changed after the first two (the same shape: the
    /// encoder compares it with that packet byte by byte), and a new timestamp.
    Variant {
        of: usize,
        edits: Vec<(Index, u8)>,
        ts: u64,
    },
}

/// A chunk: packets, and maybe bytes that are not a packet somewhere among them (from there
/// on the encoder writes literals).
#[derive(Clone, Debug)]
struct Chunk {
    pieces: Vec<Piece>,
    raw: Option<(Index, Vec<u8>)>,
}

/// A timestamp of any varint length (1 to 10 bytes), small ones (deltas) most often.
fn timestamp() -> impl Strategy<Value = u64> {
    prop_oneof![
        4 => 0u64..128,
        4 => 128u64..(1 << 21),
        1 => (0u32..64, any::<u64>()).prop_map(|(shift, v)| v >> shift),
    ]
}

/// Bytes the writer's packets are full of (keys, small values, continuation bits).
const ALPHABET: &[u8] = &[0x08, 0x10, 0x50, 0x01, 0x40, 0x0A, 0x12, 0x80, 0xFF, 0x00];

/// A packet's bytes before its timestamp: mostly a few bytes from a small alphabet (so shapes
/// recur by chance, as the writer's do), some over 127 or 258 bytes, a few over 32 KiB.
fn body() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        8 => prop::collection::vec(prop::sample::select(ALPHABET), 0..24),
        3 => prop::collection::vec(any::<u8>(), 0..140),
        1 => prop::collection::vec(any::<u8>(), 250..600),
        1 => (1usize..40_000, any::<u8>()).prop_map(|(n, b)| {
            (0..n).map(|i| b.wrapping_add((i % 7) as u8)).collect()
        }),
    ]
}

fn piece() -> impl Strategy<Value = Piece> {
    prop_oneof![
        3 => (body(), timestamp()).prop_map(|(body, ts)| Piece::Packet { body, ts }),
        3 => any::<usize>().prop_map(Piece::Repeat),
        4 => (any::<usize>(), timestamp()).prop_map(|(of, ts)| Piece::Retimed { of, ts }),
        3 => (
            any::<usize>(),
            prop::collection::vec((any::<Index>(), any::<u8>()), 1..4),
            timestamp(),
        )
            .prop_map(|(of, edits, ts)| Piece::Variant { of, edits, ts }),
    ]
}

fn chunk_strategy() -> impl Strategy<Value = Chunk> {
    (
        prop::collection::vec(piece(), 0..300),
        prop::option::weighted(
            0.2,
            (any::<Index>(), prop::collection::vec(any::<u8>(), 1..12)),
        ),
    )
        .prop_map(|(pieces, raw)| Chunk { pieces, raw })
}

/// The bytes of `c`: framed packets as the writer frames them.
fn chunk(c: &Chunk) -> Vec<u8> {
    let mut out = Vec::new();
    let raw_at = c.raw.as_ref().map(|(at, _)| at.index(c.pieces.len() + 1));
    // Each packet: its bytes before the timestamp, and its whole payload.
    let mut packets: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    for (i, p) in c.pieces.iter().enumerate() {
        if raw_at == Some(i) {
            out.extend_from_slice(c.raw.as_ref().map_or(&[][..], |(_, b)| b));
        }
        let earlier = |of: usize| packets.get(of % packets.len().max(1)).cloned();
        let (body, payload) = match p {
            Piece::Packet { body, ts } => with_timestamp(body, *ts),
            Piece::Repeat(of) => earlier(*of).unwrap_or_default(),
            Piece::Retimed { of, ts } => with_timestamp(&earlier(*of).unwrap_or_default().0, *ts),
            Piece::Variant { of, edits, ts } => {
                let mut body = earlier(*of).unwrap_or_default().0;
                if body.len() > 2 {
                    for (at, b) in edits {
                        let i = 2 + at.index(body.len() - 2);
                        body[i] = *b;
                    }
                }
                with_timestamp(&body, *ts)
            }
        };
        out.push(FRAME);
        varint::put(&mut out, payload.len() as u64);
        out.extend_from_slice(&payload);
        packets.push((body, payload));
    }
    if raw_at == Some(c.pieces.len()) {
        out.extend_from_slice(c.raw.as_ref().map_or(&[][..], |(_, b)| b));
    }
    out
}

/// `body`, then `timestamp` (field 8, varint) as the writer ends every packet.
fn with_timestamp(body: &[u8], ts: u64) -> (Vec<u8>, Vec<u8>) {
    let mut payload = body.to_vec();
    payload.push(TIMESTAMP);
    varint::put(&mut payload, ts);
    (body.to_vec(), payload)
}

/// `z` inflated, into a buffer one byte larger than `want` so that any extra output shows.
fn inflate(z: &[u8], want: usize) -> Result<Vec<u8>, String> {
    let mut out = vec![0u8; want + 1];
    let n = Decompressor::new()
        .zlib_decompress(z, &mut out)
        .map_err(|e| format!("not a zlib stream of at most {} bytes: {e:?}", want + 1))?;
    out.truncate(n);
    Ok(out)
}

proptest! {
    // Failures are not persisted: an integration test has no lib.rs to keep them next to; a
    // failure prints its minimal input instead.
    #![proptest_config(ProptestConfig {
        cases: 192,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn packet_shaped_chunks_inflate_to_exactly_their_bytes(
        chunks in prop::collection::vec(chunk_strategy(), 1..4),
    ) {
        // One deflater for every chunk, as the writer keeps one: what it remembers of a chunk
        // must not leak into the next.
        let mut z = PacketDeflater::default();
        for (i, c) in chunks.iter().enumerate() {
            let plain = chunk(c);
            let mut out = Vec::new();
            z.zlib(&plain, &mut out);
            let got = inflate(&out, plain.len());
            prop_assert!(got.as_deref() == Ok(&plain[..]), "chunk {i} of {} bytes: {:?}",
                plain.len(), got.map(|g| g.len()));
        }
    }

    #[test]
    fn arbitrary_bytes_inflate_to_exactly_themselves(
        plain in prop::collection::vec(any::<u8>(), 0..4096),
        // Also as a packet's bytes, that packet again, and the bytes once more unframed:
        // copies of whatever they hold.
        framed in any::<bool>(),
    ) {
        let plain = if framed {
            let pieces = vec![Piece::Packet { body: plain.clone(), ts: 1 }, Piece::Repeat(0)];
            let mut c = chunk(&Chunk { pieces, raw: None });
            c.extend_from_slice(&plain);
            c
        } else {
            plain
        };
        let mut out = Vec::new();
        PacketDeflater::default().zlib(&plain, &mut out);
        prop_assert_eq!(inflate(&out, plain.len()), Ok(plain));
    }
}
