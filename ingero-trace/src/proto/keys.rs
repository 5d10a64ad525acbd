//! The key bytes of the fields the hot packets use, as the writer's direct encoder
//! (`write::encode`) writes them and the reader's fast path (`read::decoder::fast`) and the
//! deflate parser (`write::deflate`) match them. Each is derived from its field's number in
//! `messages.rs` (such as [`TracePacket::TIMESTAMP`]), so no key is spelled twice.

use super::wire_type::{FIXED64, LEN, VARINT};
use super::{DebugAnnotation, TracePacket, TrackEvent, key1, key2};

pub use super::FRAME;

/// `TracePacket.timestamp` (varint): last in every hot packet.
pub const TIMESTAMP: u8 = key1(TracePacket::TIMESTAMP, VARINT);
/// `TracePacket.trusted_packet_sequence_id` (varint): the sequence a packet belongs to.
pub const SEQUENCE_ID: u8 = key1(TracePacket::TRUSTED_PACKET_SEQUENCE_ID, VARINT);
/// `TracePacket.track_event` (message).
pub const TRACK_EVENT: u8 = key1(TracePacket::TRACK_EVENT, LEN);
/// `TracePacket.interned_data` (message): names and strings given iids.
pub const INTERNED_DATA: u8 = key1(TracePacket::INTERNED_DATA, LEN);
/// `TracePacket.sequence_flags` (varint): [`super::SEQ_INCREMENTAL_STATE_CLEARED`],
/// [`super::SEQ_NEEDS_INCREMENTAL_STATE`].
pub const SEQUENCE_FLAGS: u8 = key1(TracePacket::SEQUENCE_FLAGS, VARINT);
/// `TracePacket.machine_id` (varint): the recording host, on every packet when stamped.
pub const MACHINE_ID: [u8; 2] = key2(TracePacket::MACHINE_ID, VARINT);
/// `TracePacket.compressed_packets` (bytes): a zlib stream of more packets.
pub const COMPRESSED_PACKETS: [u8; 2] = key2(TracePacket::COMPRESSED_PACKETS, LEN);

/// `TrackEvent.category_iids`, one unpacked varint per category (as ingero writes them).
pub const CATEGORY_IID: u8 = key1(TrackEvent::CATEGORY_IIDS, VARINT);
/// Category iids written packed (by other writers; protobuf allows either form).
pub const CATEGORY_IIDS_PACKED: u8 = key1(TrackEvent::CATEGORY_IIDS, LEN);
/// `TrackEvent.debug_annotations` (message): one argument.
pub const DEBUG_ANNOTATION: u8 = key1(TrackEvent::DEBUG_ANNOTATIONS, LEN);
/// `TrackEvent.type` (varint): a [`super::event_type`] value.
pub const TYPE: u8 = key1(TrackEvent::TYPE, VARINT);
/// `TrackEvent.name_iid` (varint): the event's interned name.
pub const NAME_IID: u8 = key1(TrackEvent::NAME_IID, VARINT);
/// `TrackEvent.track_uuid` (varint): the track the event is on.
pub const TRACK_UUID: u8 = key1(TrackEvent::TRACK_UUID, VARINT);
/// `TrackEvent.flow_ids`, one unpacked fixed64 per flow (as ingero writes them).
pub const FLOW_ID: [u8; 2] = key2(TrackEvent::FLOW_IDS, FIXED64);
/// `TrackEvent.counter_value` (varint): a counter's new value.
pub const COUNTER_VALUE: [u8; 2] = key2(TrackEvent::COUNTER_VALUE, VARINT);

/// `DebugAnnotation.name_iid` (varint): the argument's interned key (an
/// [`crate::vocab::ArgKey`] iid, or a label's).
pub const ARG_NAME_IID: u8 = key1(DebugAnnotation::NAME_IID, VARINT);
/// `DebugAnnotation.bool_value` (varint).
pub const ARG_BOOL: u8 = key1(DebugAnnotation::BOOL_VALUE, VARINT);
/// `DebugAnnotation.uint_value` (varint).
pub const ARG_UINT: u8 = key1(DebugAnnotation::UINT_VALUE, VARINT);
/// `DebugAnnotation.int_value` (varint, two's complement).
pub const ARG_INT: u8 = key1(DebugAnnotation::INT_VALUE, VARINT);
/// `DebugAnnotation.string_value` (bytes).
pub const ARG_STRING: u8 = key1(DebugAnnotation::STRING_VALUE, LEN);
/// `DebugAnnotation.pointer_value` (varint): shown in hex.
pub const ARG_POINTER: u8 = key1(DebugAnnotation::POINTER_VALUE, VARINT);
/// `DebugAnnotation.string_value_iid` (varint): an interned string value.
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
