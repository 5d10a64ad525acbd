//! Direct encoding of the frequent packets (CUDA calls, off-CPU intervals, slice ends,
//! counters) into the chunk buffer, field by field, with no intermediate `TracePacket`.
//!
//! The bytes are exactly what `proto::wire::encode_framed` writes for the same packet (fields
//! in the same order; the tests below compare the two), so readers see one layout whichever
//! path wrote a packet:
//!
//! ```text
//! 0x0A len  timestamp(8) trusted_packet_sequence_id(10)
//!           track_event(11) { category_iids(3)… debug_annotations(4)… type(9) name_iid(10)
//!                             track_uuid(11) counter_value(30) }
//!           [interned_data(12)] sequence_flags(13) [machine_id(98)]
//! ```
//!
//! Lengths are written as a one-byte placeholder that is patched when the message is closed;
//! the rare message of 128 bytes or more (a packet carrying new interned data) moves its body
//! up to make room for the longer varint.

use super::proto::wire::{put_varint, varint_len};

/// `Trace.packet` (field 1, length-delimited).
pub const FRAME: u8 = 0x0A;
/// `TracePacket.timestamp` (8, varint).
const TIMESTAMP: u8 = 0x40;
/// `TracePacket.trusted_packet_sequence_id` (10, varint).
const SEQUENCE_ID: u8 = 0x50;
/// `TracePacket.track_event` (11, length-delimited).
const TRACK_EVENT: u8 = 0x5A;
/// `TracePacket.sequence_flags` (13, varint).
const SEQUENCE_FLAGS: u8 = 0x68;
/// `TracePacket.machine_id` (98, varint): key as a varint.
const MACHINE_ID: [u8; 2] = [0x90, 0x06];

/// `TrackEvent` keys.
const CATEGORY_IID: u8 = 0x18;
const DEBUG_ANNOTATION: u8 = 0x22;
const TYPE: u8 = 0x48;
const NAME_IID: u8 = 0x50;
const TRACK_UUID: u8 = 0x58;
const COUNTER_VALUE: [u8; 2] = [0xF0, 0x01];

/// `DebugAnnotation` keys.
const ANN_NAME_IID: u8 = 0x08;
const ANN_BOOL: u8 = 0x10;
const ANN_UINT: u8 = 0x18;
const ANN_INT: u8 = 0x20;
const ANN_STRING: u8 = 0x32;
const ANN_POINTER: u8 = 0x38;
const ANN_STRING_IID: [u8; 2] = [0x88, 0x01];

/// The machine id field as it is appended to every packet (empty when not stamped).
#[derive(Clone, Copy, Debug, Default)]
pub struct MachineIdField {
    bytes: [u8; 8],
    len: u8,
}

impl MachineIdField {
    pub fn new(id: Option<u32>) -> MachineIdField {
        let mut f = MachineIdField::default();
        if let Some(id) = id {
            let mut v = Vec::with_capacity(8);
            v.extend_from_slice(&MACHINE_ID);
            put_varint(&mut v, u64::from(id));
            f.bytes[..v.len()].copy_from_slice(&v);
            f.len = v.len() as u8;
        }
        f
    }

    #[inline(always)]
    pub fn bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

/// Opens a length-delimited field: its key and a one-byte length placeholder, whose position
/// is returned for [`close`].
#[inline(always)]
pub fn open(buf: &mut Vec<u8>, key: u8) -> usize {
    buf.extend_from_slice(&[key, 0]);
    buf.len() - 1
}

/// Writes the length of the field opened at `at` (everything after the placeholder).
#[inline(always)]
pub fn close(buf: &mut Vec<u8>, at: usize) {
    let len = buf.len() - at - 1;
    if len < 0x80 {
        buf[at] = len as u8;
    } else {
        close_long(buf, at, len);
    }
}

#[cold]
fn close_long(buf: &mut Vec<u8>, at: usize, len: usize) {
    let n = varint_len(len as u64);
    let body = at + 1..buf.len();
    buf.resize(buf.len() + n - 1, 0);
    buf.copy_within(body, at + n);
    let mut v = Vec::with_capacity(n);
    put_varint(&mut v, len as u64);
    buf[at..at + n].copy_from_slice(&v);
}

/// Starts a packet: frame, timestamp (already in the sequence's encoding), sequence id.
/// Returns the frame's placeholder for [`packet_tail`].
#[inline(always)]
pub fn packet_head(buf: &mut Vec<u8>, ts: Option<u64>, sequence_id: u32) -> usize {
    let at = open(buf, FRAME);
    if let Some(ts) = ts {
        buf.push(TIMESTAMP);
        put_varint(buf, ts);
    }
    buf.push(SEQUENCE_ID);
    put_varint(buf, u64::from(sequence_id));
    at
}

/// Ends a packet opened at `at`: sequence flags and machine id (the caller writes interned
/// data, field 12, before this).
#[inline(always)]
pub fn packet_tail(buf: &mut Vec<u8>, at: usize, flags: u32, machine_id: &MachineIdField) {
    buf.push(SEQUENCE_FLAGS);
    put_varint(buf, u64::from(flags));
    buf.extend_from_slice(machine_id.bytes());
    close(buf, at);
}

/// Opens the packet's `track_event`.
#[inline(always)]
pub fn track_event_open(buf: &mut Vec<u8>) -> usize {
    open(buf, TRACK_EVENT)
}

#[inline(always)]
pub fn category(buf: &mut Vec<u8>, iid: u64) {
    buf.push(CATEGORY_IID);
    put_varint(buf, iid);
}

/// Closes the track event opened at `at` with its type, name, track and counter value (the
/// fields after the debug annotations).
#[inline(always)]
pub fn track_event_close(
    buf: &mut Vec<u8>,
    at: usize,
    ty: i32,
    name_iid: Option<u64>,
    track: u64,
    counter_value: Option<i64>,
) {
    buf.push(TYPE);
    put_varint(buf, ty as u64);
    if let Some(n) = name_iid {
        buf.push(NAME_IID);
        put_varint(buf, n);
    }
    buf.push(TRACK_UUID);
    put_varint(buf, track);
    if let Some(v) = counter_value {
        buf.extend_from_slice(&COUNTER_VALUE);
        put_varint(buf, v as u64);
    }
    close(buf, at);
}

/// One debug annotation with an interned key and a varint value under `value_key`.
#[inline(always)]
fn arg_varint(buf: &mut Vec<u8>, name_iid: u64, value_key: &[u8], v: u64) {
    let at = open(buf, DEBUG_ANNOTATION);
    buf.push(ANN_NAME_IID);
    put_varint(buf, name_iid);
    buf.extend_from_slice(value_key);
    put_varint(buf, v);
    close(buf, at);
}

#[inline(always)]
pub fn arg_uint(buf: &mut Vec<u8>, name_iid: u64, v: u64) {
    arg_varint(buf, name_iid, &[ANN_UINT], v);
}

#[inline(always)]
pub fn arg_int(buf: &mut Vec<u8>, name_iid: u64, v: i64) {
    arg_varint(buf, name_iid, &[ANN_INT], v as u64);
}

#[inline(always)]
pub fn arg_bool(buf: &mut Vec<u8>, name_iid: u64, v: bool) {
    arg_varint(buf, name_iid, &[ANN_BOOL], u64::from(v));
}

#[inline(always)]
pub fn arg_pointer(buf: &mut Vec<u8>, name_iid: u64, v: u64) {
    arg_varint(buf, name_iid, &[ANN_POINTER], v);
}

/// A string value by its interned iid.
#[inline(always)]
pub fn arg_string_iid(buf: &mut Vec<u8>, name_iid: u64, iid: u64) {
    arg_varint(buf, name_iid, &ANN_STRING_IID, iid);
}

/// A string value inline (past the interning cap, or never interned).
pub fn arg_string(buf: &mut Vec<u8>, name_iid: u64, s: &[u8]) {
    let at = open(buf, DEBUG_ANNOTATION);
    buf.push(ANN_NAME_IID);
    put_varint(buf, name_iid);
    buf.push(ANN_STRING);
    put_varint(buf, s.len() as u64);
    buf.extend_from_slice(s);
    close(buf, at);
}

#[cfg(test)]
mod tests {
    use super::super::proto::wire::encode_framed;
    use super::super::proto::{
        DebugAnnotation, EventName, InternedData, TracePacket, TrackEvent, event_type,
    };
    use super::*;
    use prost::Message;

    fn ann(iid: u64) -> DebugAnnotation {
        DebugAnnotation {
            name_iid: Some(iid),
            ..Default::default()
        }
    }

    #[test]
    fn direct_encoding_is_byte_identical_to_the_generic_encoder() {
        let long = "x".repeat(300);
        let interned = InternedData {
            event_names: vec![EventName {
                iid: Some(9),
                name: Some("n".repeat(200)),
            }],
            ..Default::default()
        };
        for (with_interned, mid) in [(false, Some(0x1F_FFFF)), (true, None), (true, Some(7))] {
            let te = TrackEvent {
                r#type: Some(event_type::SLICE_BEGIN),
                track_uuid: Some(300),
                name_iid: Some(7),
                category_iids: vec![1],
                debug_annotations: vec![
                    DebugAnnotation {
                        uint_value: Some(u64::MAX),
                        ..ann(3)
                    },
                    DebugAnnotation {
                        int_value: Some(-35),
                        ..ann(1)
                    },
                    DebugAnnotation {
                        bool_value: Some(true),
                        ..ann(24)
                    },
                    DebugAnnotation {
                        pointer_value: Some(0x7f00),
                        ..ann(4)
                    },
                    DebugAnnotation {
                        string_value_iid: Some(70_000),
                        ..ann(40)
                    },
                    DebugAnnotation {
                        string_value: Some(long.clone()),
                        ..ann(2)
                    },
                ],
                counter_value: Some(-1),
                ..Default::default()
            };
            let pkt = TracePacket {
                timestamp: Some(1_500),
                trusted_packet_sequence_id: Some(1),
                track_event: Some(te),
                interned_data: with_interned.then(|| interned.clone()),
                sequence_flags: Some(2),
                machine_id: mid,
                ..Default::default()
            };
            let mut want = Vec::new();
            encode_framed(&pkt, &mut want);

            let mut buf = vec![0xEE];
            let p = packet_head(&mut buf, Some(1_500), 1);
            let t = track_event_open(&mut buf);
            category(&mut buf, 1);
            arg_uint(&mut buf, 3, u64::MAX);
            arg_int(&mut buf, 1, -35);
            arg_bool(&mut buf, 24, true);
            arg_pointer(&mut buf, 4, 0x7f00);
            arg_string_iid(&mut buf, 40, 70_000);
            arg_string(&mut buf, 2, long.as_bytes());
            track_event_close(&mut buf, t, event_type::SLICE_BEGIN, Some(7), 300, Some(-1));
            if with_interned {
                prost::encoding::message::encode(12, &interned, &mut buf);
            }
            packet_tail(&mut buf, p, 2, &MachineIdField::new(mid));
            assert_eq!(buf[0], 0xEE, "bytes before the packet are kept");
            assert_eq!(&buf[1..], &want[..], "interned {with_interned} mid {mid:?}");
            let back = TracePacket::decode_length_delimited(&buf[2..]).expect("decode");
            assert_eq!(back, pkt);
        }
    }

    #[test]
    fn slice_end_is_small() {
        let mut buf = Vec::new();
        let p = packet_head(&mut buf, Some(2_000), 1);
        let t = track_event_open(&mut buf);
        track_event_close(&mut buf, t, event_type::SLICE_END, None, 5, None);
        packet_tail(&mut buf, p, 2, &MachineIdField::new(Some(0x1F_FFFF)));
        // frame 2, timestamp 3, sequence 2, track event 6, flags 2, machine id 2 + 3.
        assert_eq!(buf.len(), 20);
    }
}
