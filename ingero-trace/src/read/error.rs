//! The reader's errors: [`ReadError`] when reading cannot go on, and [`LossReason`] when one
//! compressed container is lost and reading goes on (a [`super::Damage`] report).

use std::io;
use std::path::PathBuf;

use crate::proto::scan::Malformed;

/// Why a recording could not be read further.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReadError {
    /// A recording's directory could not be listed.
    #[error("listing {}: {source}", path.display())]
    List { path: PathBuf, source: io::Error },
    /// A file could not be opened.
    #[error("opening {}: {source}", path.display())]
    Open { path: PathBuf, source: io::Error },
    /// A file's packets could not be framed.
    #[error("reading {}: {source}", path.display())]
    Framing { path: PathBuf, source: FramingError },
    /// A packet outside the compressed containers could not be decoded.
    #[error("{} in the packet at offset {offset}: {source}", path.display())]
    Packet {
        path: PathBuf,
        offset: u64,
        source: PacketError,
    },
}

/// The framing of a file (or of a stream given to `PacketReader`) is broken.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FramingError {
    #[error("reading trace: {0}")]
    Io(#[from] io::Error),
    #[error("malformed varint at offset {offset}")]
    Varint { offset: u64 },
    #[error("packet of {len} bytes at offset {offset}: the file is corrupt")]
    TooLarge { len: usize, offset: u64 },
    #[error("unexpected top-level field tag {tag:#x} at offset {offset}")]
    UnexpectedField { tag: u8, offset: u64 },
}

/// A packet that could not be decoded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PacketError {
    #[error("decoding a packet: {0}")]
    Malformed(#[from] Malformed),
    #[error("a packet was given before the previous container's records were read")]
    ContainerPending,
}

/// Why a `compressed_packets` container was lost. `at` is the byte of the inflated
/// container where its trouble starts.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LossReason {
    #[error("{0}")]
    Inflate(InflateError),
    #[error("cut or malformed inner packet at byte {at} of the inflated container")]
    CutInnerPacket { at: usize },
    #[error("unexpected field tag {tag:#x} at byte {at} of the inflated container")]
    UnexpectedField { tag: u8, at: usize },
    #[error("compressed_packets inside compressed_packets at byte {at} of the inflated container")]
    Nested { at: usize },
    #[error("inner packet at byte {at} of the inflated container: decoding a packet: {source}")]
    InnerPacket { at: usize, source: Malformed },
}

/// Why a chunk could not be inflated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum InflateError {
    /// Not a valid zlib stream (bad header, data or checksum).
    #[error("compressed_packets: not a valid zlib stream")]
    Corrupt,
    /// Inflates to more than `limit` bytes (the reader's bound on a packet).
    #[error("compressed_packets: inflates to more than {limit} bytes")]
    TooLarge { limit: usize },
}
