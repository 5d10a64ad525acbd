//! The hot path's bytes against the reference encoder's, for every record kind the hot path
//! writes, every payload type and every message form; and `nvtxEventAttributes_t` parsing.

use std::ffi::{CString, c_void};

use super::*;
use crate::ffi::EventAttributes;
use crate::wire::{Attributes, Message, Record, encode, records};

const TS: u64 = 987_654_321;
const TID: u32 = 31337;

/// What the reference encoder is given for a message: the caller's text converted as
/// documented (lossy UTF-8, cut at MAX_TEXT).
fn reference_text(m: &RawMessage<'_>) -> (Option<String>, Option<u64>) {
    match *m {
        RawMessage::None => (None, None),
        RawMessage::Registered(h) => (None, Some(h)),
        RawMessage::Bytes(b) => (Some(String::from_utf8_lossy(b).into_owned()), None),
        RawMessage::Wide(w) => (
            Some(
                w.iter()
                    .map(|&u| char::from_u32(u as u32).unwrap_or('\u{FFFD}'))
                    .collect(),
            ),
            None,
        ),
    }
}

fn check_event(kind: u8, domain: u64, id: u64, raw: &RawAttrs<'_>) {
    let mut buf = vec![0xAA; event_bound(kind, raw)];
    let n = encode_event(&mut buf, kind, TID, TS, domain, id, raw);
    let fast = &buf[..n];

    let (text, registered) = reference_text(&raw.message);
    let message = match (&text, registered) {
        (Some(t), _) => Message::Text(t),
        (None, Some(h)) => Message::Registered(h),
        (None, None) => Message::None,
    };
    let attrs = Attributes {
        category: raw.category,
        color: raw.color,
        payload: raw.payload,
        message,
        truncated: false,
    };
    let rec = match kind {
        wire::kind::PUSH => Record::Push {
            ts_ns: TS,
            tid: TID,
            domain,
            attrs,
        },
        wire::kind::START => Record::Start {
            ts_ns: TS,
            tid: TID,
            domain,
            id,
            attrs,
        },
        _ => Record::Mark {
            ts_ns: TS,
            tid: TID,
            domain,
            attrs,
        },
    };
    let mut reference = Vec::new();
    encode(&rec, &mut reference);
    assert_eq!(fast, &reference[..], "kind {kind} {raw:?}");
    assert_eq!(records(fast).count(), 1);
    assert!(records(fast).all(|r| r.is_ok()));
}

#[test]
fn the_fast_encoder_writes_the_reference_bytes_for_every_event() {
    let ascii = CString::new("outer").unwrap();
    let utf8 = CString::new("größe €").unwrap();
    let invalid = CString::new(vec![b'a', 0xFF, 0xC3, b'b', 0xE2, 0x82]).unwrap();
    let long = CString::new("x".repeat(MAX_TEXT + 500)).unwrap();
    let long_utf8 = CString::new("€".repeat(MAX_TEXT)).unwrap();
    let wide: Vec<WChar> = "wide ✓ 𝄞".chars().map(|c| c as WChar).chain([0]).collect();
    let bad_wide: Vec<WChar> = vec![0x41, 0xD800, -5, 0x11_0000, 0x42, 0];
    let long_wide: Vec<WChar> = std::iter::repeat_n('é' as WChar, MAX_TEXT)
        .chain([0])
        .collect();
    // SAFETY: all are NUL-terminated and outlive the test.
    let messages = unsafe {
        [
            RawMessage::None,
            RawMessage::Registered(42),
            c_bytes(ascii.as_ptr()),
            c_bytes(utf8.as_ptr()),
            c_bytes(invalid.as_ptr()),
            c_bytes(long.as_ptr()),
            c_bytes(long_utf8.as_ptr()),
            wide_units(wide.as_ptr()),
            wide_units(bad_wide.as_ptr()),
            wide_units(long_wide.as_ptr()),
        ]
    };
    let payloads = [
        Payload::None,
        Payload::U64(u64::MAX - 1),
        Payload::I64(-42),
        Payload::F64(3.25),
        Payload::U32(7),
        Payload::I32(-7),
        Payload::F32(1.5),
    ];
    for kind in [wire::kind::PUSH, wire::kind::START, wire::kind::MARK] {
        for m in messages {
            for p in payloads {
                for color in [None, Some(0xFF11_2233)] {
                    let raw = RawAttrs {
                        category: 3,
                        color,
                        payload: p,
                        message: m,
                    };
                    check_event(kind, 5, 77, &raw);
                }
            }
        }
    }
}

#[test]
fn long_messages_are_cut_and_flagged() {
    let long = CString::new("€".repeat(MAX_TEXT)).unwrap();
    // SAFETY: NUL-terminated, outlives the use.
    let raw = RawAttrs::message(unsafe { c_bytes(long.as_ptr()) });
    let mut buf = vec![0; event_bound(wire::kind::MARK, &raw)];
    let n = encode_event(&mut buf, wire::kind::MARK, 1, 1, 0, 0, &raw);
    let Some(Ok(Record::Mark { attrs, .. })) = records(&buf[..n]).next() else {
        panic!()
    };
    assert!(attrs.truncated);
    let Message::Text(t) = attrs.message else {
        panic!()
    };
    assert_eq!(t.len(), MAX_TEXT - MAX_TEXT % 3);
}

#[test]
fn pops_and_ends_match_the_reference() {
    let mut buf = [0u8; CLOSE_BOUND];
    for id in [None, Some(9)] {
        let n = encode_close(&mut buf, TID, TS, 4, id);
        let rec = match id {
            None => Record::Pop {
                ts_ns: TS,
                tid: TID,
                domain: 4,
            },
            Some(id) => Record::End {
                ts_ns: TS,
                tid: TID,
                domain: 4,
                id,
            },
        };
        let mut reference = Vec::new();
        encode(&rec, &mut reference);
        assert_eq!(&buf[..n], &reference[..]);
    }
}

fn attributes(
    payload_type: i32,
    payload: u64,
    message_type: i32,
    message: *const c_void,
) -> EventAttributes {
    EventAttributes {
        version: 3,
        size: 48,
        category: 9,
        color_type: ffi::COLOR_ARGB,
        color: 0xFF00_FF00,
        payload_type,
        reserved0: 0,
        payload,
        message_type,
        message,
    }
}

#[test]
fn event_attributes_are_read_by_type() {
    let text = CString::new("ascii").unwrap();
    let wide: Vec<WChar> = vec!['w' as WChar, 0];
    let read = |a: &EventAttributes| {
        // SAFETY: `a` is a full struct whose message pointers outlive the call.
        unsafe { RawAttrs::from_event_attributes(a) }
    };

    let a = read(&attributes(
        1,
        u64::MAX,
        ffi::MESSAGE_ASCII,
        text.as_ptr().cast(),
    ));
    assert_eq!(
        (a.category, a.color, a.payload),
        (9, Some(0xFF00_FF00), Payload::U64(u64::MAX))
    );
    assert!(matches!(a.message, RawMessage::Bytes(b) if b == b"ascii"));
    let a = read(&attributes(
        2,
        (-3i64) as u64,
        ffi::MESSAGE_UNICODE,
        wide.as_ptr().cast(),
    ));
    assert_eq!(a.payload, Payload::I64(-3));
    assert!(matches!(a.message, RawMessage::Wide(w) if w == ['w' as WChar]));
    let a = read(&attributes(
        3,
        2.5f64.to_bits(),
        ffi::MESSAGE_REGISTERED,
        0x1234 as *const c_void,
    ));
    assert_eq!(a.payload, Payload::F64(2.5));
    assert!(matches!(a.message, RawMessage::Registered(0x1234)));
    assert_eq!(
        read(&attributes(4, 0xFFFF_FFFF_0000_0007, 0, std::ptr::null())).payload,
        Payload::U32(7)
    );
    assert_eq!(
        read(&attributes(
            5,
            u64::from((-9i32) as u32),
            0,
            std::ptr::null()
        ))
        .payload,
        Payload::I32(-9)
    );
    assert_eq!(
        read(&attributes(
            6,
            u64::from(0.75f32.to_bits()),
            0,
            std::ptr::null()
        ))
        .payload,
        Payload::F32(0.75)
    );
    // The extended payload type, an unknown message type, no color, NULL strings.
    let mut ext = attributes(0xDFBD_0009u32 as i32, 1, 99, text.as_ptr().cast());
    ext.color_type = 0;
    let a = read(&ext);
    assert_eq!((a.payload, a.color), (Payload::None, None));
    assert!(matches!(a.message, RawMessage::None));
    assert!(matches!(
        read(&attributes(0, 0, ffi::MESSAGE_ASCII, std::ptr::null())).message,
        RawMessage::None
    ));
    assert!(matches!(
        read(&attributes(0, 0, ffi::MESSAGE_UNICODE, std::ptr::null())).message,
        RawMessage::None
    ));
}

#[test]
fn bad_size_or_version_gives_empty_attributes() {
    let text = CString::new("never read").unwrap();
    let empty = |a: RawAttrs<'_>| {
        a.category == 0
            && a.color.is_none()
            && a.payload == Payload::None
            && matches!(a.message, RawMessage::None)
    };
    let mut small = attributes(1, 1, ffi::MESSAGE_ASCII, text.as_ptr().cast());
    small.size = 40;
    let mut old = small;
    old.size = 48;
    old.version = 1;
    // SAFETY: the structs are complete; the parser must not read past `size` anyway.
    unsafe {
        assert!(empty(RawAttrs::from_event_attributes(&small)));
        assert!(empty(RawAttrs::from_event_attributes(&old)));
        assert!(empty(RawAttrs::from_event_attributes(std::ptr::null())));
    }
    // A short struct at the very end of a buffer: only the first 4 bytes are read.
    let four: [u16; 2] = [3, 4];
    // SAFETY: the two u16 are readable; size 4 < 48 stops the parser there.
    assert!(empty(unsafe {
        RawAttrs::from_event_attributes(four.as_ptr().cast())
    }));
}
