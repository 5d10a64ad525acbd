//! Direct encoding of the frequent packets (CUDA calls, off-CPU intervals, slice ends,
//! counters) into the chunk buffer, field by field, with no intermediate `TracePacket`.
//!
//! The bytes are exactly what `proto::encode::framed` writes for the same packet (fields
//! in the same order; the tests below compare the two), so readers see one layout whichever
//! path wrote a packet:
//!
//! ```text
//! 0x0A len  trusted_packet_sequence_id(10)
//!           track_event(11) { category_iids(3)… debug_annotations(4)… type(9) name_iid(10)
//!                             track_uuid(11) counter_value(30) }
//!           [interned_data(12)] sequence_flags(13) [machine_id(98)] timestamp(8)
//! ```
//!
//! The timestamp comes last because it is what changes from one packet to the next: the
//! bytes before it repeat whenever a track (and its call) repeats, so the compressor finds
//! them as one long match, and a reader can recognise them as one key (11 % fewer inflate
//! instructions and 9 % fewer bytes than with the timestamp first).
//!
//! Lengths are written as a one-byte placeholder that is patched when the message is closed;
//! the rare message of 128 bytes or more (a packet carrying new interned data) moves its body
//! up to make room for the longer varint.

use super::slices::Placement;
use crate::proto::varint;
use crate::vocab::ArgKey;

use crate::proto::keys::{
    ARG_BOOL, ARG_INT, ARG_NAME_IID, ARG_POINTER, ARG_STRING, ARG_STRING_IID, ARG_UINT,
    CATEGORY_IID, COUNTER_VALUE, DEBUG_ANNOTATION, FLOW_ID, FRAME, MACHINE_ID, NAME_IID,
    SEQUENCE_FLAGS, SEQUENCE_ID, TIMESTAMP, TRACK_EVENT, TRACK_UUID, TYPE,
};

/// The machine id field as it is appended to every packet (empty when not stamped).
#[derive(Clone, Copy, Debug, Default)]
pub struct MachineIdField {
    /// Key and varint, zero-padded: copied whole (a fixed-size copy), `len` of them kept.
    bytes: [u8; 8],
    len: u8,
}

impl MachineIdField {
    pub fn new(id: Option<u32>) -> MachineIdField {
        let mut f = MachineIdField::default();
        if let Some(id) = id {
            let mut v = Vec::with_capacity(8);
            v.extend_from_slice(&MACHINE_ID);
            varint::put(&mut v, u64::from(id));
            f.bytes[..v.len()].copy_from_slice(&v);
            f.len = v.len() as u8;
        }
        f
    }
}

/// A raw writer into capacity reserved up front: no capacity check and length update per
/// byte as with `Vec::push` (which was a third of the writer's instructions), one
/// `set_len` at the end.
struct Room<'a> {
    buf: &'a mut Vec<u8>,
    /// The first free byte of `buf`'s allocation when the room was made.
    p: *mut u8,
    n: usize,
    #[cfg(debug_assertions)]
    max: usize,
}

impl<'a> Room<'a> {
    /// Reserves `max` bytes after `buf`'s contents.
    ///
    /// # Safety
    /// The caller writes at most `max` bytes through the room (checked in debug builds).
    #[inline(always)]
    unsafe fn new(buf: &'a mut Vec<u8>, max: usize) -> Room<'a> {
        buf.reserve(max);
        // SAFETY: `len <= capacity`, so the pointer is within (or one past) the allocation.
        let p = unsafe { buf.as_mut_ptr().add(buf.len()) };
        Room {
            buf,
            p,
            n: 0,
            #[cfg(debug_assertions)]
            max,
        }
    }

    #[inline(always)]
    fn byte(&mut self, b: u8) {
        #[cfg(debug_assertions)]
        assert!(self.n < self.max, "room of {} bytes overrun", self.max);
        // SAFETY: `new`'s caller keeps the bytes written below the `max` reserved, and `buf`
        // is borrowed by the room, so nothing else moves or fills the allocation meanwhile.
        unsafe { self.p.add(self.n).write(b) };
        self.n += 1;
    }

    #[inline(always)]
    fn bytes<const N: usize>(&mut self, b: &[u8; N]) {
        for x in b {
            self.byte(*x);
        }
    }

    #[inline(always)]
    fn varint(&mut self, v: u64) {
        varint::put_with(v, |b| self.byte(b));
    }

    /// The machine id: all 8 bytes copied (one fixed-size copy), `len` of them kept.
    #[inline(always)]
    fn machine_id(&mut self, m: &MachineIdField) {
        #[cfg(debug_assertions)]
        assert!(self.n + 8 <= self.max, "room of {} bytes overrun", self.max);
        // SAFETY: as in `byte`: callers count 8 bytes for the machine id in `max`.
        unsafe {
            self.p
                .add(self.n)
                .copy_from_nonoverlapping(m.bytes.as_ptr(), 8)
        };
        self.n += usize::from(m.len);
    }

    /// A one-byte length placeholder for [`Room::close`].
    #[inline(always)]
    fn open(&mut self, key: u8) -> usize {
        self.byte(key);
        self.byte(0);
        self.n - 1
    }

    /// Fills the placeholder at `at`: the callers' messages are bounded below 128 bytes.
    #[inline(always)]
    fn close(&mut self, at: usize) {
        let len = self.n - at - 1;
        debug_assert!(len < 0x80 && at < self.n);
        // SAFETY: `at` is a placeholder written earlier through this room.
        unsafe { self.p.add(at).write(len as u8) };
    }

    /// The bytes written become part of `buf`; returns where the room started.
    #[inline(always)]
    fn done(self) -> usize {
        let start = self.buf.len();
        // SAFETY: the `n` bytes after `len` were all written (`byte` counts only what it
        // wrote; `machine_id` wrote 8 and counts at most 8) within the reserved capacity.
        unsafe { self.buf.set_len(start + self.n) };
        start
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
    let n = varint::len(len as u64);
    let body = at + 1..buf.len();
    buf.resize(buf.len() + n - 1, 0);
    buf.copy_within(body, at + n);
    let mut v = Vec::with_capacity(n);
    varint::put(&mut v, len as u64);
    buf[at..at + n].copy_from_slice(&v);
}

/// Where a packet begun by [`event_head`] puts its lengths, and its timestamp (written last).
#[derive(Clone, Copy, Debug)]
pub struct Head {
    /// The frame's length placeholder (the frame's key is the byte before it).
    pub frame: usize,
    pub track_event: usize,
    /// Already in the sequence's encoding.
    pub ts: u64,
}

/// Starts a track-event packet: frame, sequence id, and the `track_event` field's key. Close
/// it with [`track_event_tail`] and [`packet_tail`], which writes `ts` (already in the
/// sequence's encoding).
#[inline(always)]
pub fn event_head(buf: &mut Vec<u8>, ts: u64, sequence_id: u32) -> Head {
    // SAFETY: at most 2 + 6 + 2 = 10 bytes.
    let mut r = unsafe { Room::new(buf, 12) };
    let frame = r.open(FRAME);
    r.byte(SEQUENCE_ID);
    r.varint(u64::from(sequence_id));
    let track_event = r.open(TRACK_EVENT);
    let base = r.done();
    Head {
        frame: base + frame,
        track_event: base + track_event,
        ts,
    }
}

/// The fields of the track event after its debug annotations.
#[derive(Clone, Copy, Debug)]
pub struct EventTail {
    pub ty: i32,
    pub name_iid: Option<u64>,
    pub track: u64,
    pub counter_value: Option<i64>,
}

impl EventTail {
    /// A slice end on `track`.
    pub fn end(track: u64) -> EventTail {
        EventTail {
            ty: crate::proto::event_type::SLICE_END,
            name_iid: None,
            track,
            counter_value: None,
        }
    }

    /// A slice begin or instant named by an interned name.
    pub fn named(ty: i32, name_iid: u64, track: u64) -> EventTail {
        EventTail {
            ty,
            name_iid: Some(name_iid),
            track,
            counter_value: None,
        }
    }
}

/// Ends the track event begun by [`event_head`] (type, name, track, counter value) and closes
/// its length. The caller then writes interned data, if any, and [`packet_tail`].
#[inline(always)]
pub fn track_event_tail(buf: &mut Vec<u8>, h: Head, t: &EventTail) {
    // SAFETY: at most 11 + 11 + 11 + 12 = 45 bytes.
    let mut r = unsafe { Room::new(buf, 48) };
    r.byte(TYPE);
    r.varint(t.ty as u64);
    if let Some(n) = t.name_iid {
        r.byte(NAME_IID);
        r.varint(n);
    }
    r.byte(TRACK_UUID);
    r.varint(t.track);
    if let Some(v) = t.counter_value {
        r.bytes(&COUNTER_VALUE);
        r.varint(v as u64);
    }
    r.done();
    close(buf, h.track_event);
}

/// Ends a packet: sequence flags, machine id (after interned data, field 12) and timestamp,
/// and the frame's length.
#[inline(always)]
pub fn packet_tail(buf: &mut Vec<u8>, h: Head, flags: u32, machine_id: &MachineIdField) {
    // SAFETY: at most 6 + 8 + 11 = 25 bytes.
    let mut r = unsafe { Room::new(buf, 28) };
    r.byte(SEQUENCE_FLAGS);
    r.varint(u64::from(flags));
    r.machine_id(machine_id);
    r.byte(TIMESTAMP);
    r.varint(h.ts);
    r.done();
    close(buf, h.frame);
}

/// A whole slice-end packet (no interned data): `{seq, track_event{type=2, track_uuid},
/// flags, machine_id, ts}` in one write, its lengths known to fit one byte.
#[inline(always)]
pub fn slice_end(
    buf: &mut Vec<u8>,
    ts: u64,
    sequence_id: u32,
    track: u64,
    flags: u32,
    machine_id: &MachineIdField,
) {
    // SAFETY: at most 2 + 11 + 6 + (2 + 2 + 11) + 6 + 8 = 48 bytes (so both lengths fit
    // one byte).
    let mut r = unsafe { Room::new(buf, 48) };
    let frame = r.open(FRAME);
    r.byte(SEQUENCE_ID);
    r.varint(u64::from(sequence_id));
    let te = r.open(TRACK_EVENT);
    r.byte(TYPE);
    r.varint(crate::proto::event_type::SLICE_END as u64);
    r.byte(TRACK_UUID);
    r.varint(track);
    r.close(te);
    r.byte(SEQUENCE_FLAGS);
    r.varint(u64::from(flags));
    r.machine_id(machine_id);
    r.byte(TIMESTAMP);
    r.varint(ts);
    r.close(frame);
    r.done();
}

/// One flow the event is on (`TrackEvent.flow_ids`, a fixed64).
pub fn flow_id(buf: &mut Vec<u8>, id: u64) {
    buf.extend_from_slice(&FLOW_ID);
    buf.extend_from_slice(&id.to_le_bytes());
}

#[inline(always)]
pub fn category(buf: &mut Vec<u8>, iid: u64) {
    // SAFETY: at most 11 bytes.
    let mut r = unsafe { Room::new(buf, 11) };
    r.byte(CATEGORY_IID);
    r.varint(iid);
    r.done();
}

/// One debug annotation with an interned key and a varint value under `value_key`.
#[inline(always)]
fn arg_varint<const K: usize>(buf: &mut Vec<u8>, name_iid: u64, value_key: &[u8; K], v: u64) {
    const { assert!(K <= 2) };
    // SAFETY: at most 2 + 11 + K + 10 <= 25 bytes (so the length fits one byte).
    let mut r = unsafe { Room::new(buf, 25) };
    let at = r.open(DEBUG_ANNOTATION);
    r.byte(ARG_NAME_IID);
    r.varint(name_iid);
    r.bytes(value_key);
    r.varint(v);
    r.close(at);
    r.done();
}

#[inline(always)]
pub fn arg_uint(buf: &mut Vec<u8>, name_iid: u64, v: u64) {
    arg_varint(buf, name_iid, &[ARG_UINT], v);
}

#[inline(always)]
pub fn arg_int(buf: &mut Vec<u8>, name_iid: u64, v: i64) {
    arg_varint(buf, name_iid, &[ARG_INT], v as u64);
}

#[inline(always)]
pub fn arg_bool(buf: &mut Vec<u8>, name_iid: u64, v: bool) {
    arg_varint(buf, name_iid, &[ARG_BOOL], u64::from(v));
}

#[inline(always)]
pub fn arg_pointer(buf: &mut Vec<u8>, name_iid: u64, v: u64) {
    arg_varint(buf, name_iid, &[ARG_POINTER], v);
}

/// A string value by its interned iid.
#[inline(always)]
pub fn arg_string_iid(buf: &mut Vec<u8>, name_iid: u64, iid: u64) {
    arg_varint(buf, name_iid, &ARG_STRING_IID, iid);
}

/// A string value inline (past the interning cap, or never interned).
pub fn arg_string(buf: &mut Vec<u8>, name_iid: u64, s: &[u8]) {
    let at = open(buf, DEBUG_ANNOTATION);
    buf.push(ARG_NAME_IID);
    varint::put(buf, name_iid);
    buf.push(ARG_STRING);
    varint::put(buf, s.len() as u64);
    buf.extend_from_slice(s);
    close(buf, at);
}

/// Where a thread ran, as the two arguments `cpu` and `cgroup_id` of an end or instant.
pub fn placement(buf: &mut Vec<u8>, at: Placement) {
    arg_uint(buf, ArgKey::Cpu.iid(), u64::from(at.cpu));
    arg_uint(buf, ArgKey::CgroupId.iid(), at.cgroup_id);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::encode;
    use crate::proto::{
        DebugAnnotation, EventName, InternedData, TracePacket, TrackEvent, event_type,
    };
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
            encode::framed(&pkt, &mut want);

            let mut buf = vec![0xEE];
            let h = event_head(&mut buf, 1_500, 1);
            category(&mut buf, 1);
            arg_uint(&mut buf, 3, u64::MAX);
            arg_int(&mut buf, 1, -35);
            arg_bool(&mut buf, 24, true);
            arg_pointer(&mut buf, 4, 0x7f00);
            arg_string_iid(&mut buf, 40, 70_000);
            arg_string(&mut buf, 2, long.as_bytes());
            let tail = EventTail {
                counter_value: Some(-1),
                ..EventTail::named(event_type::SLICE_BEGIN, 7, 300)
            };
            track_event_tail(&mut buf, h, &tail);
            if with_interned {
                prost::encoding::message::encode(12, &interned, &mut buf);
            }
            packet_tail(&mut buf, h, 2, &MachineIdField::new(mid));
            assert_eq!(buf[0], 0xEE, "bytes before the packet are kept");
            assert_eq!(&buf[1..], &want[..], "interned {with_interned} mid {mid:?}");
            let back = TracePacket::decode_length_delimited(&buf[2..]).expect("decode");
            assert_eq!(back, pkt);
        }
    }

    #[test]
    fn a_slice_end_in_one_piece_is_the_generic_packet() {
        for (ts, track, mid) in [(2_000, 5, Some(0x1F_FFFF)), (u64::MAX, u64::MAX, None)] {
            let mid = MachineIdField::new(mid);
            let mut one = Vec::new();
            slice_end(&mut one, ts, 1, track, 2, &mid);
            let mut parts = Vec::new();
            let h = event_head(&mut parts, ts, 1);
            track_event_tail(&mut parts, h, &EventTail::end(track));
            packet_tail(&mut parts, h, 2, &mid);
            assert_eq!(one, parts);
            let p = TracePacket::decode_length_delimited(&one[1..]).expect("decode");
            assert_eq!(p.timestamp, Some(ts));
            assert_eq!(
                p.track_event.and_then(|t| t.track_uuid),
                Some(track),
                "{one:02x?}"
            );
        }
        let mut buf = Vec::new();
        slice_end(
            &mut buf,
            2_000,
            1,
            5,
            2,
            &MachineIdField::new(Some(0x1F_FFFF)),
        );
        // frame 2, timestamp 3, sequence 2, track event 6, flags 2, machine id 2 + 3.
        assert_eq!(buf.len(), 20);
    }
}
