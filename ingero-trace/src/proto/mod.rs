//! The subset of Perfetto's `perfetto_trace.proto` that ingero writes and reads, hand-written
//! with the upstream field numbers (see `shared/reference/perfetto-trace-format.md`).
//!
//! Only the fields used are declared: protobuf skips unknown fields, so a file written with
//! this subset is a valid Perfetto trace and a full Perfetto trace still decodes here (the
//! extra fields are ignored). `oneof`s are declared as separate optional fields, which has the
//! same wire format.

/// `TracePacket.sequence_flags`: the sequence's incremental state starts afresh here.
pub const SEQ_INCREMENTAL_STATE_CLEARED: u32 = 1;
/// `TracePacket.sequence_flags`: the packet depends on interned data or an incremental clock.
pub const SEQ_NEEDS_INCREMENTAL_STATE: u32 = 2;

/// `BuiltinClock` ids.
pub mod clock_id {
    pub const REALTIME: u32 = 1;
    pub const MONOTONIC: u32 = 3;
    pub const BOOTTIME: u32 = 6;
    /// A sequence-scoped clock (64..=127): ingero's incremental MONOTONIC clock.
    pub const INCREMENTAL_MONOTONIC: u32 = 64;
}

/// `TrackEvent.Type`.
pub mod event_type {
    pub const SLICE_BEGIN: i32 = 1;
    pub const SLICE_END: i32 = 2;
    pub const INSTANT: i32 = 3;
    pub const COUNTER: i32 = 4;
}

/// `CounterDescriptor.Unit`.
pub mod counter_unit {
    pub const COUNT: i32 = 2;
    pub const SIZE_BYTES: i32 = 3;
}

/// `TrackDescriptor.ChildTracksOrdering`.
pub const CHILD_ORDERING_CHRONOLOGICAL: i32 = 2;

#[derive(Clone, PartialEq, prost::Message)]
pub struct TracePacket {
    #[prost(uint64, optional, tag = "8")]
    pub timestamp: Option<u64>,
    #[prost(uint32, optional, tag = "58")]
    pub timestamp_clock_id: Option<u32>,
    #[prost(uint32, optional, tag = "10")]
    pub trusted_packet_sequence_id: Option<u32>,
    #[prost(uint32, optional, tag = "13")]
    pub sequence_flags: Option<u32>,
    #[prost(bool, optional, tag = "87")]
    pub first_packet_on_sequence: Option<bool>,
    #[prost(message, optional, tag = "12")]
    pub interned_data: Option<InternedData>,
    #[prost(message, optional, tag = "59")]
    pub trace_packet_defaults: Option<TracePacketDefaults>,
    #[prost(message, optional, tag = "6")]
    pub clock_snapshot: Option<ClockSnapshot>,
    #[prost(message, optional, tag = "60")]
    pub track_descriptor: Option<TrackDescriptor>,
    #[prost(message, optional, tag = "11")]
    pub track_event: Option<TrackEvent>,
    #[prost(uint32, optional, tag = "98")]
    pub machine_id: Option<u32>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct TracePacketDefaults {
    #[prost(uint32, optional, tag = "58")]
    pub timestamp_clock_id: Option<u32>,
    #[prost(message, optional, tag = "11")]
    pub track_event_defaults: Option<TrackEventDefaults>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct TrackEventDefaults {
    #[prost(uint64, optional, tag = "11")]
    pub track_uuid: Option<u64>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ClockSnapshot {
    #[prost(message, repeated, tag = "1")]
    pub clocks: Vec<Clock>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Clock {
    #[prost(uint32, optional, tag = "1")]
    pub clock_id: Option<u32>,
    #[prost(uint64, optional, tag = "2")]
    pub timestamp: Option<u64>,
    #[prost(bool, optional, tag = "3")]
    pub is_incremental: Option<bool>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct InternedData {
    #[prost(message, repeated, tag = "1")]
    pub event_categories: Vec<EventCategory>,
    #[prost(message, repeated, tag = "2")]
    pub event_names: Vec<EventName>,
    #[prost(message, repeated, tag = "3")]
    pub debug_annotation_names: Vec<DebugAnnotationName>,
    #[prost(message, repeated, tag = "29")]
    pub debug_annotation_string_values: Vec<InternedString>,
}

impl InternedData {
    pub fn is_empty(&self) -> bool {
        self.event_categories.is_empty()
            && self.event_names.is_empty()
            && self.debug_annotation_names.is_empty()
            && self.debug_annotation_string_values.is_empty()
    }
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct EventCategory {
    #[prost(uint64, optional, tag = "1")]
    pub iid: Option<u64>,
    #[prost(string, optional, tag = "2")]
    pub name: Option<String>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct EventName {
    #[prost(uint64, optional, tag = "1")]
    pub iid: Option<u64>,
    #[prost(string, optional, tag = "2")]
    pub name: Option<String>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct DebugAnnotationName {
    #[prost(uint64, optional, tag = "1")]
    pub iid: Option<u64>,
    #[prost(string, optional, tag = "2")]
    pub name: Option<String>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct InternedString {
    #[prost(uint64, optional, tag = "1")]
    pub iid: Option<u64>,
    #[prost(bytes = "vec", optional, tag = "2")]
    pub str: Option<Vec<u8>>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct TrackDescriptor {
    #[prost(uint64, optional, tag = "1")]
    pub uuid: Option<u64>,
    #[prost(uint64, optional, tag = "5")]
    pub parent_uuid: Option<u64>,
    #[prost(string, optional, tag = "2")]
    pub name: Option<String>,
    #[prost(message, optional, tag = "3")]
    pub process: Option<ProcessDescriptor>,
    #[prost(message, optional, tag = "4")]
    pub thread: Option<ThreadDescriptor>,
    #[prost(message, optional, tag = "8")]
    pub counter: Option<CounterDescriptor>,
    #[prost(int32, optional, tag = "11")]
    pub child_ordering: Option<i32>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ProcessDescriptor {
    #[prost(int32, optional, tag = "1")]
    pub pid: Option<i32>,
    #[prost(string, repeated, tag = "2")]
    pub cmdline: Vec<String>,
    #[prost(string, optional, tag = "6")]
    pub process_name: Option<String>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ThreadDescriptor {
    #[prost(int32, optional, tag = "1")]
    pub pid: Option<i32>,
    #[prost(int32, optional, tag = "2")]
    pub tid: Option<i32>,
    #[prost(string, optional, tag = "5")]
    pub thread_name: Option<String>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct CounterDescriptor {
    #[prost(int32, optional, tag = "3")]
    pub unit: Option<i32>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct TrackEvent {
    #[prost(int32, optional, tag = "9")]
    pub r#type: Option<i32>,
    #[prost(uint64, optional, tag = "11")]
    pub track_uuid: Option<u64>,
    #[prost(uint64, optional, tag = "10")]
    pub name_iid: Option<u64>,
    #[prost(string, optional, tag = "23")]
    pub name: Option<String>,
    #[prost(uint64, repeated, packed = "false", tag = "3")]
    pub category_iids: Vec<u64>,
    #[prost(message, repeated, tag = "4")]
    pub debug_annotations: Vec<DebugAnnotation>,
    #[prost(int64, optional, tag = "30")]
    pub counter_value: Option<i64>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct DebugAnnotation {
    #[prost(uint64, optional, tag = "1")]
    pub name_iid: Option<u64>,
    #[prost(string, optional, tag = "10")]
    pub name: Option<String>,
    #[prost(bool, optional, tag = "2")]
    pub bool_value: Option<bool>,
    #[prost(uint64, optional, tag = "3")]
    pub uint_value: Option<u64>,
    #[prost(int64, optional, tag = "4")]
    pub int_value: Option<i64>,
    #[prost(string, optional, tag = "6")]
    pub string_value: Option<String>,
    #[prost(uint64, optional, tag = "7")]
    pub pointer_value: Option<u64>,
    #[prost(uint64, optional, tag = "17")]
    pub string_value_iid: Option<u64>,
}

/// Hand-written encoding of the hot messages (`TracePacket`, `TrackEvent`,
/// `DebugAnnotation`): prost's generic encoder walks every optional field and sizes nested
/// messages once per enclosing level, which made encoding the writer's largest cost. The rare
/// nested messages (interned data, descriptors, clock snapshots, defaults) still go through
/// prost. The output is ordinary protobuf; fields are written in tag order.
pub mod wire {
    use super::{DebugAnnotation, TracePacket, TrackEvent};
    use prost::Message;
    use prost::encoding::message;

    #[inline(always)]
    pub fn varint_len(v: u64) -> usize {
        ((64 - (v | 1).leading_zeros()) as usize).div_ceil(7)
    }

    /// A message ending with the varint field whose one-byte key is `key` (the writer ends
    /// every packet with its timestamp): the bytes before that field, and its value. The
    /// field is found from the end, since a varint's last byte is the only one without the
    /// continuation bit and a one-byte key has none either. What precedes it is not checked:
    /// the reader trusts the split only once it knows those bytes in full (its memo's exact
    /// bytes, or the writer's layout matched field by field), so a message that merely ends
    /// in such bytes still decodes as what it is.
    #[inline(always)]
    pub fn split_trailing_varint(p: &[u8], key: u8) -> Option<(&[u8], u64)> {
        // Most gaps between packets take two bytes (128 ns to 16 µs).
        match p {
            [head @ .., k, a, b] if *k == key && *a >= 0x80 && *b < 0x80 => {
                Some((head, u64::from(a & 0x7f) | (u64::from(*b) << 7)))
            }
            [head @ .., k, a] if *k == key && *a < 0x80 => Some((head, u64::from(*a))),
            [head @ .., k, a, b, c] if *k == key && (*a & *b) >= 0x80 && *c < 0x80 => Some((
                head,
                u64::from(a & 0x7f) | (u64::from(b & 0x7f) << 7) | (u64::from(*c) << 14),
            )),
            _ => split_trailing_varint_long(p, key),
        }
    }

    /// [`split_trailing_varint`] for varints of 4 to 10 bytes (gaps of 268 ms and more).
    #[inline(never)]
    fn split_trailing_varint_long(p: &[u8], key: u8) -> Option<(&[u8], u64)> {
        let [.., last] = p else {
            return None;
        };
        if *last >= 0x80 {
            return None;
        }
        let cont = p
            .iter()
            .rev()
            .skip(1)
            .take(9)
            .take_while(|b| **b >= 0x80)
            .count();
        let at = p.len().checked_sub(cont + 2)?;
        if p[at] != key {
            return None;
        }
        let value = p[at + 1..]
            .iter()
            .enumerate()
            .fold(0u64, |v, (i, b)| v | (u64::from(b & 0x7f) << (7 * i)));
        Some((&p[..at], value))
    }

    #[inline(always)]
    pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }

    #[inline(always)]
    fn key_len(tag: u32) -> usize {
        varint_len(u64::from(tag) << 3)
    }

    #[inline(always)]
    fn put_key(out: &mut Vec<u8>, tag: u32, wire_type: u8) {
        put_varint(out, (u64::from(tag) << 3) | u64::from(wire_type));
    }

    #[inline(always)]
    fn vlen(tag: u32, v: Option<u64>) -> usize {
        v.map_or(0, |v| key_len(tag) + varint_len(v))
    }

    #[inline(always)]
    fn blen(tag: u32, b: Option<&[u8]>) -> usize {
        b.map_or(0, |b| key_len(tag) + varint_len(b.len() as u64) + b.len())
    }

    #[inline(always)]
    fn put_v(out: &mut Vec<u8>, tag: u32, v: Option<u64>) {
        if let Some(v) = v {
            put_key(out, tag, 0);
            put_varint(out, v);
        }
    }

    #[inline(always)]
    fn put_b(out: &mut Vec<u8>, tag: u32, b: Option<&[u8]>) {
        if let Some(b) = b {
            put_key(out, tag, 2);
            put_varint(out, b.len() as u64);
            out.extend_from_slice(b);
        }
    }

    // Signed protobuf ints (int32/int64) are sign-extended to 64 bits on the wire.
    fn i32v(v: Option<i32>) -> Option<u64> {
        v.map(|v| i64::from(v) as u64)
    }

    fn da_len(d: &DebugAnnotation) -> usize {
        vlen(1, d.name_iid)
            + vlen(2, d.bool_value.map(u64::from))
            + vlen(3, d.uint_value)
            + vlen(4, d.int_value.map(|v| v as u64))
            + blen(6, d.string_value.as_deref().map(str::as_bytes))
            + vlen(7, d.pointer_value)
            + blen(10, d.name.as_deref().map(str::as_bytes))
            + vlen(17, d.string_value_iid)
    }

    fn put_da(out: &mut Vec<u8>, d: &DebugAnnotation) {
        put_v(out, 1, d.name_iid);
        put_v(out, 2, d.bool_value.map(u64::from));
        put_v(out, 3, d.uint_value);
        put_v(out, 4, d.int_value.map(|v| v as u64));
        put_b(out, 6, d.string_value.as_deref().map(str::as_bytes));
        put_v(out, 7, d.pointer_value);
        put_b(out, 10, d.name.as_deref().map(str::as_bytes));
        put_v(out, 17, d.string_value_iid);
    }

    fn te_len(t: &TrackEvent) -> usize {
        let mut n = t
            .category_iids
            .iter()
            .map(|c| key_len(3) + varint_len(*c))
            .sum::<usize>();
        for d in &t.debug_annotations {
            let l = da_len(d);
            n += key_len(4) + varint_len(l as u64) + l;
        }
        n + vlen(9, i32v(t.r#type))
            + vlen(10, t.name_iid)
            + vlen(11, t.track_uuid)
            + blen(23, t.name.as_deref().map(str::as_bytes))
            + vlen(30, t.counter_value.map(|v| v as u64))
    }

    fn put_te(out: &mut Vec<u8>, t: &TrackEvent) {
        for c in &t.category_iids {
            put_v(out, 3, Some(*c));
        }
        for d in &t.debug_annotations {
            put_key(out, 4, 2);
            put_varint(out, da_len(d) as u64);
            put_da(out, d);
        }
        put_v(out, 9, i32v(t.r#type));
        put_v(out, 10, t.name_iid);
        put_v(out, 11, t.track_uuid);
        put_b(out, 23, t.name.as_deref().map(str::as_bytes));
        put_v(out, 30, t.counter_value.map(|v| v as u64));
    }

    fn packet_len(p: &TracePacket, te: usize) -> usize {
        p.clock_snapshot
            .as_ref()
            .map_or(0, |m| message::encoded_len(6, m))
            + vlen(8, p.timestamp)
            + vlen(10, p.trusted_packet_sequence_id.map(u64::from))
            + p.track_event
                .as_ref()
                .map_or(0, |_| key_len(11) + varint_len(te as u64) + te)
            + p.interned_data
                .as_ref()
                .map_or(0, |m| message::encoded_len(12, m))
            + vlen(13, p.sequence_flags.map(u64::from))
            + vlen(58, p.timestamp_clock_id.map(u64::from))
            + p.trace_packet_defaults
                .as_ref()
                .map_or(0, |m| message::encoded_len(59, m))
            + p.track_descriptor
                .as_ref()
                .map_or(0, |m| message::encoded_len(60, m))
            + vlen(87, p.first_packet_on_sequence.map(u64::from))
            + vlen(98, p.machine_id.map(u64::from))
    }

    /// Appends `p` as one `Trace.packet` field (tag, length, packet) to `out`.
    pub fn encode_framed(p: &TracePacket, out: &mut Vec<u8>) {
        let te = p.track_event.as_ref().map_or(0, te_len);
        let len = packet_len(p, te);
        out.reserve(len + 11);
        out.push(0x0A);
        put_varint(out, len as u64);
        if let Some(m) = &p.clock_snapshot {
            message::encode(6, m, out);
        }
        put_v(out, 10, p.trusted_packet_sequence_id.map(u64::from));
        if let Some(t) = &p.track_event {
            put_key(out, 11, 2);
            put_varint(out, te as u64);
            put_te(out, t);
        }
        if let Some(m) = &p.interned_data {
            message::encode(12, m, out);
        }
        put_v(out, 13, p.sequence_flags.map(u64::from));
        put_v(out, 58, p.timestamp_clock_id.map(u64::from));
        if let Some(m) = &p.trace_packet_defaults {
            message::encode(59, m, out);
        }
        if let Some(m) = &p.track_descriptor {
            message::encode(60, m, out);
        }
        put_v(out, 87, p.first_packet_on_sequence.map(u64::from));
        put_v(out, 98, p.machine_id.map(u64::from));
        // Last, as in `record::encode` (see there why).
        put_v(out, 8, p.timestamp);
        debug_assert_eq!(p.encoded_len(), len);
    }

    #[cfg(test)]
    mod tests {
        use super::super::*;
        use super::*;

        #[test]
        fn split_trailing_varint_takes_the_trailing_timestamp_of_any_length() {
            const TIMESTAMP: u8 = 0x40;
            let with_ts = |head: &[u8], ts: u64| {
                let mut p = head.to_vec();
                p.push(TIMESTAMP);
                put_varint(&mut p, ts);
                p
            };
            let split =
                |p: &[u8]| split_trailing_varint(p, TIMESTAMP).map(|(h, v)| (h.to_vec(), v));
            // A head ending in bytes that look like a varint's (0x40 included) and in one
            // with the continuation bit, which cannot end a message but must not confuse the
            // split.
            for head in [
                &[0x50, 0x01, 0x90, 0x06, 0xc6, 0xa5, 0x2d][..],
                &[0x58, 0x40],
                &[0xff],
            ] {
                for ts in [
                    0,
                    1,
                    127,
                    128,
                    300,
                    16_383,
                    16_384,
                    2_000_000,
                    1 << 40,
                    u64::MAX,
                ] {
                    let p = with_ts(head, ts);
                    assert_eq!(
                        split(&p),
                        Some((head.to_vec(), ts)),
                        "head {head:x?}, ts {ts}"
                    );
                }
            }
            // No trailing timestamp: the timestamp first, a cut varint, nothing at all.
            let mut first = vec![TIMESTAMP, 0x85, 0x03];
            first.extend_from_slice(&[0x50, 0x01]);
            assert_eq!(split(&first), None);
            assert_eq!(split(&[0x50, 0x01, TIMESTAMP, 0x85]), None);
            assert_eq!(split(&[TIMESTAMP]), None);
            assert_eq!(split(&[]), None);
            // Eleven varint bytes are too many.
            let mut long = vec![0x50, 0x01, TIMESTAMP];
            long.extend_from_slice(&[0xff; 10]);
            long.push(0x01);
            assert_eq!(split(&long), None);
            // Another key is not the timestamp's.
            assert_eq!(
                split_trailing_varint(&[0x50, 0x01, 0x48, 0x02], TIMESTAMP),
                None
            );
        }

        #[test]
        fn hand_encoding_decodes_with_prost_to_the_same_packet() {
            let te = TrackEvent {
                r#type: Some(event_type::SLICE_BEGIN),
                track_uuid: Some(300),
                name_iid: Some(7),
                name: Some("n".into()),
                category_iids: vec![1, 200],
                debug_annotations: vec![
                    DebugAnnotation {
                        name_iid: Some(3),
                        uint_value: Some(u64::MAX),
                        ..Default::default()
                    },
                    DebugAnnotation {
                        name: Some("k".into()),
                        int_value: Some(-35),
                        ..Default::default()
                    },
                    DebugAnnotation {
                        name_iid: Some(9),
                        string_value: Some("text".into()),
                        bool_value: Some(true),
                        pointer_value: Some(0x7f00),
                        string_value_iid: Some(70_000),
                        ..Default::default()
                    },
                ],
                counter_value: Some(-1),
            };
            let packets = [
                TracePacket {
                    timestamp: Some(123_456_789),
                    trusted_packet_sequence_id: Some(1),
                    sequence_flags: Some(SEQ_NEEDS_INCREMENTAL_STATE),
                    track_event: Some(te),
                    machine_id: Some(0xdead_beef),
                    ..Default::default()
                },
                TracePacket {
                    first_packet_on_sequence: Some(true),
                    timestamp_clock_id: Some(64),
                    clock_snapshot: Some(ClockSnapshot {
                        clocks: vec![Clock {
                            clock_id: Some(64),
                            timestamp: Some(5),
                            is_incremental: Some(true),
                        }],
                    }),
                    interned_data: Some(InternedData {
                        event_names: vec![EventName {
                            iid: Some(1),
                            name: Some("cudaMalloc".into()),
                        }],
                        ..Default::default()
                    }),
                    trace_packet_defaults: Some(TracePacketDefaults {
                        timestamp_clock_id: Some(64),
                        track_event_defaults: None,
                    }),
                    track_descriptor: Some(TrackDescriptor {
                        uuid: Some(2),
                        name: Some("t".into()),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
                TracePacket::default(),
            ];
            for p in packets {
                let mut out = Vec::new();
                encode_framed(&p, &mut out);
                let mut want = vec![0x0A];
                p.encode_length_delimited(&mut want).expect("prost");
                assert_eq!(out.len(), want.len());
                let back = TracePacket::decode_length_delimited(&out[1..]).expect("decode");
                assert_eq!(back, p);
            }
        }
    }
}
