//! A zlib stream (RFC 1950/1951) for a chunk of the writer's packets, parsed from the packets'
//! structure instead of by a general-purpose match search.
//!
//! The writer's packets repeat: the bytes of a CUDA call's begin or end before its timestamp
//! are the same every time the thread makes that call (see `encode.rs`, which puts the
//! timestamp last for this). `parse.rs` turns each such packet into one copy of its earlier
//! twin and two or three literal timestamp bytes, and `block.rs` writes the result as one
//! dynamic-Huffman block. Compared with libdeflate's fastest level on the same chunks this
//! takes a third fewer instructions, writes smaller output, and its output inflates with a
//! fifth fewer instructions because it has fewer and longer copies (numbers in
//! `docs/benchmarks-record.md`). Any zlib decoder reads it: the Perfetto UI and
//! trace_processor expand it as `compressed_packets`.
//!
//! # Interface
//! ```ignore
//! let mut z = PacketDeflater::default();
//! z.zlib(&chunk, &mut out); // appends the zlib stream of `chunk` to `out`
//! ```

mod block;
mod huffman;
mod parse;

use self::block::{Block, Tokens};
use self::parse::Parser;

/// Reusable state: the parse's tables, the tokens and the Huffman working memory.
#[derive(Default)]
pub struct PacketDeflater {
    parser: Parser,
    tokens: Tokens,
    block: Block,
}

impl PacketDeflater {
    /// Appends the zlib stream of `plain` (any bytes; framed packets compress well) to `out`.
    pub fn zlib(&mut self, plain: &[u8], out: &mut Vec<u8>) {
        // CMF: deflate with a 32 KiB window; FLG: no dictionary, check bits making the
        // header a multiple of 31.
        out.extend_from_slice(&[0x78, 0x01]);
        self.parser.parse(plain, &mut self.tokens);
        self.block.write(&mut self.tokens, out);
        out.extend_from_slice(&libdeflater::adler32(plain).to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use libdeflater::Decompressor;

    fn inflate(z: &[u8], n: usize) -> Vec<u8> {
        let mut out = vec![0u8; n];
        let got = Decompressor::new()
            .zlib_decompress(z, &mut out)
            .expect("a valid zlib stream");
        out.truncate(got);
        out
    }

    fn round_trip(plain: &[u8]) -> Vec<u8> {
        let mut z = Vec::new();
        PacketDeflater::default().zlib(plain, &mut z);
        assert_eq!(inflate(&z, plain.len() + 1), plain);
        z
    }

    fn framed(payloads: &[Vec<u8>]) -> Vec<u8> {
        let mut out = Vec::new();
        for p in payloads {
            out.push(0x0A);
            crate::proto::varint::put(&mut out, p.len() as u64);
            out.extend_from_slice(p);
        }
        out
    }

    /// xorshift, so every run tests the same bytes.
    fn rng(state: &mut u64) -> u64 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    }

    #[test]
    fn edge_inputs_round_trip() {
        round_trip(b"");
        round_trip(b"a");
        round_trip(b"\x0a");
        round_trip(b"\x0a\x05ab"); // a frame cut short
        round_trip(&[0x0A; 1000]);
        round_trip(&[0u8; 70_000]); // not packets: literals only
        // The same big packet again and again: copies longer than 258 bytes, split (including
        // lengths that leave less than a minimal copy after a 258-byte piece).
        for len in [259usize, 260, 261, 516, 1000, 20_000] {
            let p: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
            let z = round_trip(&framed(&[p.clone(), p.clone(), p]));
            assert!(z.len() < 2 * len, "len {len}: {} bytes", z.len());
        }
        // Twins beyond the 32 KiB window are not referenced.
        let far: Vec<Vec<u8>> = (0..40u8)
            .map(|i| vec![i; 1500])
            .chain([vec![0; 1500]])
            .collect();
        round_trip(&framed(&far));
        let mut s = 7u64;
        let noise: Vec<u8> = (0..50_000).map(|_| rng(&mut s) as u8).collect();
        round_trip(&noise); // no copies at all
    }

    #[test]
    fn packets_with_trailing_timestamps_become_copies() {
        let mut s = 1u64;
        let mut payloads = Vec::new();
        for i in 0..20_000u64 {
            let r = rng(&mut s);
            let mut p = vec![0x50, 0x01, 0x5A, 0x04, 0x48, 0x02, 0x58, (i % 3) as u8 + 17];
            p.extend_from_slice(&[0x68, 0x02, 0x90, 0x06, 0xc6, 0xa5, 0x2d]);
            if i % 7 == 0 {
                // Another shape: several arguments, some varying.
                p.extend_from_slice(&[0x22, 0x04, 0x08, 0x0b, 0x18, (r >> 8) as u8 & 0x7f]);
            }
            p.push(0x40);
            crate::proto::varint::put(&mut p, r % (1 << (7 * (1 + i % 4))));
            payloads.push(p);
        }
        // A big packet in the middle (interned data), and bytes that are not packets at the end.
        payloads.insert(500, (0..3000u32).map(|i| (i * 7) as u8).collect());
        let mut plain = framed(&payloads);
        plain.extend_from_slice(b"\x12\x34 not a packet");
        let z = round_trip(&plain);
        assert!(z.len() * 4 < plain.len(), "{} of {}", z.len(), plain.len());
    }

    #[test]
    fn python_zlib_reads_it_too() {
        // The Perfetto UI and trace_processor inflate with zlib, not libdeflate.
        let plain = framed(&vec![vec![0x50, 0x01, 0x40, 0x85, 0x03]; 100]);
        let mut z = Vec::new();
        PacketDeflater::default().zlib(&plain, &mut z);
        let hex: String = z.iter().map(|b| format!("{b:02x}")).collect();
        let out = std::process::Command::new("python3")
            .args([
                "-c",
                "import sys, zlib; sys.stdout.write(zlib.decompress(bytes.fromhex(sys.argv[1])).hex())",
                &hex,
            ])
            .output()
            .expect("python3 (the test suite's other half needs it too)");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let want: String = plain.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(String::from_utf8_lossy(&out.stdout), want);
    }
}
