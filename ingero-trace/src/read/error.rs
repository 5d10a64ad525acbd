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
    List {
        /// The directory.
        path: PathBuf,
        /// What the system said.
        source: io::Error,
    },
    /// A file could not be opened.
    #[error("opening {}: {source}", path.display())]
    Open {
        /// The file.
        path: PathBuf,
        /// What the system said.
        source: io::Error,
    },
    /// A file's packets could not be framed.
    #[error("reading {}: {source}", path.display())]
    Framing {
        /// The file.
        path: PathBuf,
        /// What is wrong with its framing.
        source: FramingError,
    },
    /// A packet outside the compressed containers could not be decoded.
    #[error("{} in the packet at offset {offset}: {source}", path.display())]
    Packet {
        /// The file.
        path: PathBuf,
        /// The packet's byte offset in the file.
        offset: u64,
        /// What is wrong with the packet.
        source: PacketError,
    },
}

/// The framing of a file (or of a stream given to `PacketReader`) is broken.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FramingError {
    /// Reading the bytes failed.
    #[error("reading trace: {0}")]
    Io(#[from] io::Error),
    /// A packet's length is not a valid varint.
    #[error("malformed varint at offset {offset}")]
    Varint {
        /// Byte offset of the packet.
        offset: u64,
    },
    /// A packet claims more than the reader's bound on one packet (64 MiB, far above
    /// anything ingero writes): the file is corrupt.
    #[error("packet of {len} bytes at offset {offset}: the file is corrupt")]
    TooLarge {
        /// The length it claims, in bytes.
        len: usize,
        /// Byte offset of the packet.
        offset: u64,
    },
    /// A top-level field that is not length-delimited, so not something a trace holds.
    #[error("unexpected top-level field tag {tag:#x} at offset {offset}")]
    UnexpectedField {
        /// The field's key byte.
        tag: u8,
        /// Byte offset of the field.
        offset: u64,
    },
}

/// A packet that could not be decoded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PacketError {
    /// The packet is not valid protobuf.
    #[error("decoding a packet: {0}")]
    Malformed(#[from] Malformed),
    /// The caller misused [`super::FileDecoder`]: it gave a packet before taking every
    /// record of the previous container (`pending_into` until `false`).
    #[error("a packet was given before the previous container's records were read")]
    ContainerPending,
}

/// Why a `compressed_packets` container was lost. `at` is the byte of the inflated
/// container where its trouble starts.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LossReason {
    /// The container could not be inflated.
    #[error("{0}")]
    Inflate(InflateError),
    /// An inner packet's framing is cut short or broken.
    #[error("cut or malformed inner packet at byte {at} of the inflated container")]
    CutInnerPacket {
        /// Where the trouble starts in the inflated container.
        at: usize,
    },
    /// A field other than `Trace.packet` in the container.
    #[error("unexpected field tag {tag:#x} at byte {at} of the inflated container")]
    UnexpectedField {
        /// The field's key byte.
        tag: u8,
        /// Where the trouble starts in the inflated container.
        at: usize,
    },
    /// A container inside the container (the format does not nest them).
    #[error("compressed_packets inside compressed_packets at byte {at} of the inflated container")]
    Nested {
        /// Where the trouble starts in the inflated container.
        at: usize,
    },
    /// An inner packet is not valid protobuf.
    #[error("inner packet at byte {at} of the inflated container: decoding a packet: {source}")]
    InnerPacket {
        /// Where the trouble starts in the inflated container.
        at: usize,
        /// What is wrong with the packet.
        source: Malformed,
    },
}

/// Why a chunk could not be inflated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum InflateError {
    /// Not a valid zlib stream (bad header, data or checksum).
    #[error("compressed_packets: not a valid zlib stream")]
    Corrupt,
    /// Inflates to more than `limit` bytes (the reader's bound on a packet).
    #[error("compressed_packets: inflates to more than {limit} bytes")]
    TooLarge {
        /// The reader's bound on one packet, in bytes.
        limit: usize,
    },
}
