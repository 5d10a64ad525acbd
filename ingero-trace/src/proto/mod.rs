//! The protobuf layer of Perfetto's trace format, as ingero uses it: the messages with their
//! field numbers (`messages.rs`, one row per field), the enum values ingero writes, varints
//! ([`varint`]), the key (tag) bytes derived from the field numbers ([`key1`], [`key2`]), the
//! hand encoder of the hot messages ([`encode`]) and the allocation-free scanner the reader
//! walks fields with ([`scan`]). See `shared/reference/perfetto-trace-format.md`.

pub mod encode;
pub mod keys;
mod messages;
pub mod scan;
pub mod varint;

pub use messages::*;

/// Protobuf wire types.
pub mod wire_type {
    /// A varint: integers, booleans and enums.
    pub const VARINT: u8 = 0;
    /// Eight little-endian bytes (`fixed64`, `double`).
    pub const FIXED64: u8 = 1;
    /// Length-delimited: a varint length, then that many bytes (strings, bytes, messages,
    /// packed repeated fields).
    pub const LEN: u8 = 2;
    /// Four little-endian bytes (`fixed32`, `float`).
    pub const FIXED32: u8 = 5;
}

/// A field's key as a varint value: `field << 3 | wire_type`.
pub const fn key(field: u32, wire_type: u8) -> u64 {
    ((field as u64) << 3) | wire_type as u64
}

/// The one-byte key of fields 1 to 15 (a compile-time error for others when used in a
/// constant).
pub const fn key1(field: u32, wire_type: u8) -> u8 {
    assert!(field >= 1 && field < 16, "fields 1..=15 have one-byte keys");
    key(field, wire_type) as u8
}

/// The two-byte key of fields 16 to 2047.
pub const fn key2(field: u32, wire_type: u8) -> [u8; 2] {
    assert!(
        field >= 16 && field < 2048,
        "fields 16..=2047 have two-byte keys"
    );
    let k = key(field, wire_type);
    [(k as u8 & 0x7f) | 0x80, (k >> 7) as u8]
}

/// `Trace.packet`'s key: what frames every packet in a file and in a chunk.
pub const FRAME: u8 = key1(Trace::PACKET, wire_type::LEN);

/// `TracePacket.sequence_flags`: the sequence's incremental state starts afresh here.
pub const SEQ_INCREMENTAL_STATE_CLEARED: u32 = 1;
/// `TracePacket.sequence_flags`: the packet depends on interned data or an incremental clock.
pub const SEQ_NEEDS_INCREMENTAL_STATE: u32 = 2;

/// `BuiltinClock` ids.
pub mod clock_id {
    /// CLOCK_REALTIME: wall-clock time (unix ns).
    pub const REALTIME: u32 = 1;
    /// CLOCK_MONOTONIC: the trace clock of every ingero timestamp.
    pub const MONOTONIC: u32 = 3;
    /// CLOCK_BOOTTIME: monotonic, counting suspend too (Perfetto's default trace clock).
    pub const BOOTTIME: u32 = 6;
    /// A sequence-scoped clock (64..=127): ingero's incremental MONOTONIC clock.
    pub const INCREMENTAL_MONOTONIC: u32 = 64;
}

/// `TrackEvent.Type`.
pub mod event_type {
    /// Opens a slice on its track (a CUDA call, an off-CPU interval, a label state, a span).
    pub const SLICE_BEGIN: i32 = 1;
    /// Closes the innermost open slice on its track.
    pub const SLICE_END: i32 = 2;
    /// An event without duration (lifecycle, annotations, session, statistics).
    pub const INSTANT: i32 = 3;
    /// A new value of a counter track.
    pub const COUNTER: i32 = 4;
}

/// `CounterDescriptor.Unit`.
pub mod counter_unit {
    /// A plain count (events/s, drops).
    pub const COUNT: i32 = 2;
    /// Bytes (device memory).
    pub const SIZE_BYTES: i32 = 3;
}

/// `TrackDescriptor.ChildTracksOrdering`.
pub const CHILD_ORDERING_CHRONOLOGICAL: i32 = 2;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_the_varint_of_field_and_wire_type() {
        for field in 1..2048u32 {
            for wt in [wire_type::VARINT, wire_type::LEN] {
                let mut want = Vec::new();
                varint::put(&mut want, key(field, wt));
                if field < 16 {
                    assert_eq!([key1(field, wt)], want[..]);
                } else {
                    assert_eq!(key2(field, wt), want[..]);
                }
            }
        }
        assert_eq!(FRAME, 0x0A);
    }
}
