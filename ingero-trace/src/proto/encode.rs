//! Hand-written encoding of the hot messages (`TracePacket`, `TrackEvent`, `DebugAnnotation`):
//! prost's generic encoder walks every optional field and sizes nested messages once per
//! enclosing level, which made encoding the writer's largest cost. The rare nested messages
//! (interned data, descriptors, clock snapshots, defaults) still go through prost. The output
//! is ordinary protobuf, fields in tag order but the timestamp, which comes last (see
//! `write::encode` for why); a test checks prost decodes it to the same packet.

use prost::Message;
use prost::encoding::message;

use super::varint;
use super::wire_type::{FIXED64, LEN, VARINT};
use super::{DebugAnnotation, FRAME, TracePacket, TrackEvent, key};

#[inline(always)]
fn key_len(tag: u32) -> usize {
    varint::len(u64::from(tag) << 3)
}

#[inline(always)]
fn put_key(out: &mut Vec<u8>, tag: u32, wire_type: u8) {
    varint::put(out, key(tag, wire_type));
}

/// Bytes of an optional varint field.
#[inline(always)]
fn varint_field_len(tag: u32, v: Option<u64>) -> usize {
    v.map_or(0, |v| key_len(tag) + varint::len(v))
}

/// Bytes of an optional length-delimited field.
#[inline(always)]
fn bytes_field_len(tag: u32, b: Option<&[u8]>) -> usize {
    b.map_or(0, |b| key_len(tag) + varint::len(b.len() as u64) + b.len())
}

#[inline(always)]
fn put_varint_field(out: &mut Vec<u8>, tag: u32, v: Option<u64>) {
    if let Some(v) = v {
        put_key(out, tag, VARINT);
        varint::put(out, v);
    }
}

#[inline(always)]
fn put_bytes_field(out: &mut Vec<u8>, tag: u32, b: Option<&[u8]>) {
    if let Some(b) = b {
        put_key(out, tag, LEN);
        varint::put(out, b.len() as u64);
        out.extend_from_slice(b);
    }
}

/// Bytes of an optional `double` field.
#[inline(always)]
fn double_field_len(tag: u32, v: Option<f64>) -> usize {
    v.map_or(0, |_| key_len(tag) + 8)
}

#[inline(always)]
fn put_double_field(out: &mut Vec<u8>, tag: u32, v: Option<f64>) {
    if let Some(v) = v {
        put_key(out, tag, FIXED64);
        out.extend_from_slice(&v.to_bits().to_le_bytes());
    }
}

// Signed protobuf ints (int32/int64) are sign-extended to 64 bits on the wire.
fn signed32(v: Option<i32>) -> Option<u64> {
    v.map(|v| i64::from(v) as u64)
}

fn signed64(v: Option<i64>) -> Option<u64> {
    v.map(|v| v as u64)
}

fn text(s: &Option<String>) -> Option<&[u8]> {
    s.as_deref().map(str::as_bytes)
}

fn annotation_len(d: &DebugAnnotation) -> usize {
    type D = DebugAnnotation;
    varint_field_len(D::NAME_IID, d.name_iid)
        + varint_field_len(D::BOOL_VALUE, d.bool_value.map(u64::from))
        + varint_field_len(D::UINT_VALUE, d.uint_value)
        + varint_field_len(D::INT_VALUE, signed64(d.int_value))
        + double_field_len(D::DOUBLE_VALUE, d.double_value)
        + bytes_field_len(D::STRING_VALUE, text(&d.string_value))
        + varint_field_len(D::POINTER_VALUE, d.pointer_value)
        + bytes_field_len(D::NAME, text(&d.name))
        + varint_field_len(D::STRING_VALUE_IID, d.string_value_iid)
}

fn put_annotation(out: &mut Vec<u8>, d: &DebugAnnotation) {
    type D = DebugAnnotation;
    put_varint_field(out, D::NAME_IID, d.name_iid);
    put_varint_field(out, D::BOOL_VALUE, d.bool_value.map(u64::from));
    put_varint_field(out, D::UINT_VALUE, d.uint_value);
    put_varint_field(out, D::INT_VALUE, signed64(d.int_value));
    put_double_field(out, D::DOUBLE_VALUE, d.double_value);
    put_bytes_field(out, D::STRING_VALUE, text(&d.string_value));
    put_varint_field(out, D::POINTER_VALUE, d.pointer_value);
    put_bytes_field(out, D::NAME, text(&d.name));
    put_varint_field(out, D::STRING_VALUE_IID, d.string_value_iid);
}

fn track_event_len(t: &TrackEvent) -> usize {
    type T = TrackEvent;
    let mut n = t
        .category_iids
        .iter()
        .map(|c| key_len(T::CATEGORY_IIDS) + varint::len(*c))
        .sum::<usize>();
    for d in &t.debug_annotations {
        let l = annotation_len(d);
        n += key_len(T::DEBUG_ANNOTATIONS) + varint::len(l as u64) + l;
    }
    n + varint_field_len(T::TYPE, signed32(t.r#type))
        + varint_field_len(T::NAME_IID, t.name_iid)
        + varint_field_len(T::TRACK_UUID, t.track_uuid)
        + bytes_field_len(T::NAME, text(&t.name))
        + varint_field_len(T::COUNTER_VALUE, signed64(t.counter_value))
        + t.flow_ids.len() * (key_len(T::FLOW_IDS) + 8)
}

fn put_track_event(out: &mut Vec<u8>, t: &TrackEvent) {
    type T = TrackEvent;
    for c in &t.category_iids {
        put_varint_field(out, T::CATEGORY_IIDS, Some(*c));
    }
    for d in &t.debug_annotations {
        put_key(out, T::DEBUG_ANNOTATIONS, LEN);
        varint::put(out, annotation_len(d) as u64);
        put_annotation(out, d);
    }
    put_varint_field(out, T::TYPE, signed32(t.r#type));
    put_varint_field(out, T::NAME_IID, t.name_iid);
    put_varint_field(out, T::TRACK_UUID, t.track_uuid);
    put_bytes_field(out, T::NAME, text(&t.name));
    put_varint_field(out, T::COUNTER_VALUE, signed64(t.counter_value));
    for f in &t.flow_ids {
        put_key(out, T::FLOW_IDS, FIXED64);
        out.extend_from_slice(&f.to_le_bytes());
    }
}

/// A nested message field's bytes through prost.
fn message_len<M: Message>(tag: u32, m: &Option<M>) -> usize {
    m.as_ref().map_or(0, |m| message::encoded_len(tag, m))
}

fn packet_len(p: &TracePacket, te: usize) -> usize {
    type P = TracePacket;
    message_len(P::CLOCK_SNAPSHOT, &p.clock_snapshot)
        + varint_field_len(P::TIMESTAMP, p.timestamp)
        + varint_field_len(
            P::TRUSTED_PACKET_SEQUENCE_ID,
            p.trusted_packet_sequence_id.map(u64::from),
        )
        + p.track_event
            .as_ref()
            .map_or(0, |_| key_len(P::TRACK_EVENT) + varint::len(te as u64) + te)
        + message_len(P::INTERNED_DATA, &p.interned_data)
        + varint_field_len(P::SEQUENCE_FLAGS, p.sequence_flags.map(u64::from))
        + bytes_field_len(P::COMPRESSED_PACKETS, p.compressed_packets.as_deref())
        + varint_field_len(P::TIMESTAMP_CLOCK_ID, p.timestamp_clock_id.map(u64::from))
        + message_len(P::TRACE_PACKET_DEFAULTS, &p.trace_packet_defaults)
        + message_len(P::TRACK_DESCRIPTOR, &p.track_descriptor)
        + message_len(P::SYSTEM_INFO, &p.system_info)
        + varint_field_len(
            P::FIRST_PACKET_ON_SEQUENCE,
            p.first_packet_on_sequence.map(u64::from),
        )
        + varint_field_len(P::MACHINE_ID, p.machine_id.map(u64::from))
}

/// A nested message field through prost.
fn put_message<M: Message>(out: &mut Vec<u8>, tag: u32, m: &Option<M>) {
    if let Some(m) = m {
        message::encode(tag, m, out);
    }
}

/// Appends `p` as one `Trace.packet` field (tag, length, packet) to `out`.
pub fn framed(p: &TracePacket, out: &mut Vec<u8>) {
    type P = TracePacket;
    let te = p.track_event.as_ref().map_or(0, track_event_len);
    let len = packet_len(p, te);
    out.reserve(len + 11);
    out.push(FRAME);
    varint::put(out, len as u64);
    put_message(out, P::CLOCK_SNAPSHOT, &p.clock_snapshot);
    put_varint_field(
        out,
        P::TRUSTED_PACKET_SEQUENCE_ID,
        p.trusted_packet_sequence_id.map(u64::from),
    );
    if let Some(t) = &p.track_event {
        put_key(out, P::TRACK_EVENT, LEN);
        varint::put(out, te as u64);
        put_track_event(out, t);
    }
    put_message(out, P::INTERNED_DATA, &p.interned_data);
    put_varint_field(out, P::SEQUENCE_FLAGS, p.sequence_flags.map(u64::from));
    put_bytes_field(out, P::COMPRESSED_PACKETS, p.compressed_packets.as_deref());
    put_varint_field(
        out,
        P::TIMESTAMP_CLOCK_ID,
        p.timestamp_clock_id.map(u64::from),
    );
    put_message(out, P::TRACE_PACKET_DEFAULTS, &p.trace_packet_defaults);
    put_message(out, P::TRACK_DESCRIPTOR, &p.track_descriptor);
    put_message(out, P::SYSTEM_INFO, &p.system_info);
    put_varint_field(
        out,
        P::FIRST_PACKET_ON_SEQUENCE,
        p.first_packet_on_sequence.map(u64::from),
    );
    put_varint_field(out, P::MACHINE_ID, p.machine_id.map(u64::from));
    // Last, as in `write::encode` (see there why).
    put_varint_field(out, P::TIMESTAMP, p.timestamp);
    debug_assert_eq!(p.encoded_len(), len);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::*;

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
            flow_ids: vec![7, u64::MAX],
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
            TracePacket {
                compressed_packets: Some(vec![0x78, 0x01, 3]),
                ..Default::default()
            },
            TracePacket {
                system_info: Some(SystemInfo {
                    utsname: Some(Utsname {
                        sysname: Some("Linux".into()),
                        release: Some("6.8.0".into()),
                        machine: None,
                    }),
                    machine_name: Some("gpu-node-17".into()),
                }),
                machine_id: Some(5),
                ..Default::default()
            },
            TracePacket::default(),
        ];
        for p in packets {
            let mut out = Vec::new();
            framed(&p, &mut out);
            let mut want = vec![FRAME];
            p.encode_length_delimited(&mut want).expect("prost");
            assert_eq!(out.len(), want.len());
            let back = TracePacket::decode_length_delimited(&out[1..]).expect("decode");
            assert_eq!(back, p);
        }
    }
}
