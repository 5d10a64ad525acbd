//! The key bytes of the fields the hot packets use, as the writer's direct encoder
//! (`write::encode`) writes them and the reader's fast path (`read::decoder::fast`) and the
//! deflate parser (`write::deflate`) match them. Each is derived from its field's number in
//! [`super::messages`], so no key is spelled twice.

use super::wire_type::{LEN, VARINT};
use super::{DebugAnnotation, TracePacket, TrackEvent, key1, key2};

pub use super::FRAME;

/// `TracePacket.timestamp` (varint): last in every hot packet.
pub const TIMESTAMP: u8 = key1(TracePacket::TIMESTAMP, VARINT);
pub const SEQUENCE_ID: u8 = key1(TracePacket::TRUSTED_PACKET_SEQUENCE_ID, VARINT);
pub const TRACK_EVENT: u8 = key1(TracePacket::TRACK_EVENT, LEN);
pub const INTERNED_DATA: u8 = key1(TracePacket::INTERNED_DATA, LEN);
pub const SEQUENCE_FLAGS: u8 = key1(TracePacket::SEQUENCE_FLAGS, VARINT);
pub const MACHINE_ID: [u8; 2] = key2(TracePacket::MACHINE_ID, VARINT);
pub const COMPRESSED_PACKETS: [u8; 2] = key2(TracePacket::COMPRESSED_PACKETS, LEN);

/// `TrackEvent` keys.
pub const CATEGORY_IID: u8 = key1(TrackEvent::CATEGORY_IIDS, VARINT);
/// Category iids written packed (by other writers; protobuf allows either form).
pub const CATEGORY_IIDS_PACKED: u8 = key1(TrackEvent::CATEGORY_IIDS, LEN);
pub const DEBUG_ANNOTATION: u8 = key1(TrackEvent::DEBUG_ANNOTATIONS, LEN);
pub const TYPE: u8 = key1(TrackEvent::TYPE, VARINT);
pub const NAME_IID: u8 = key1(TrackEvent::NAME_IID, VARINT);
pub const TRACK_UUID: u8 = key1(TrackEvent::TRACK_UUID, VARINT);
pub const COUNTER_VALUE: [u8; 2] = key2(TrackEvent::COUNTER_VALUE, VARINT);

/// `DebugAnnotation` keys.
pub const ARG_NAME_IID: u8 = key1(DebugAnnotation::NAME_IID, VARINT);
pub const ARG_BOOL: u8 = key1(DebugAnnotation::BOOL_VALUE, VARINT);
pub const ARG_UINT: u8 = key1(DebugAnnotation::UINT_VALUE, VARINT);
pub const ARG_INT: u8 = key1(DebugAnnotation::INT_VALUE, VARINT);
pub const ARG_STRING: u8 = key1(DebugAnnotation::STRING_VALUE, LEN);
pub const ARG_POINTER: u8 = key1(DebugAnnotation::POINTER_VALUE, VARINT);
pub const ARG_STRING_IID: [u8; 2] = key2(DebugAnnotation::STRING_VALUE_IID, VARINT);

#[cfg(test)]
mod tests {
    use super::*;

    /// The bytes the writer's layouts were designed around (`write::encode`'s layout table):
    /// a change of a field number in the table shows up here as well as in the files.
    #[test]
    fn the_hot_keys_have_the_bytes_the_layouts_were_built_on() {
        assert_eq!(
            [FRAME, TIMESTAMP, SEQUENCE_ID, TRACK_EVENT, SEQUENCE_FLAGS],
            [0x0A, 0x40, 0x50, 0x5A, 0x68]
        );
        assert_eq!(MACHINE_ID, [0x90, 0x06]);
        assert_eq!(COMPRESSED_PACKETS, [0x92, 0x03]);
        assert_eq!(
            [CATEGORY_IID, DEBUG_ANNOTATION, TYPE, NAME_IID, TRACK_UUID],
            [0x18, 0x22, 0x48, 0x50, 0x58]
        );
        assert_eq!(COUNTER_VALUE, [0xF0, 0x01]);
        assert_eq!(ARG_STRING_IID, [0x88, 0x01]);
    }
}
