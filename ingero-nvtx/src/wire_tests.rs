//! Round trips of every record kind, the hello, and a PRNG fuzz of the decoder over random and
//! mutated frames (decoding must be total: records or an error, never a panic).

use super::*;

pub(crate) fn attrs(message: Message<'_>, payload: Payload) -> Attributes<'_> {
    Attributes {
        category: 7,
        color: Some(0xFF00_80FF),
        payload,
        message,
        truncated: false,
    }
}

/// One record of every kind, every payload type and every message kind among them.
pub(crate) fn every_kind() -> Vec<Record<'static>> {
    let (ts_ns, tid) = (1_234_567_890_123, 4242);
    let mut v = vec![
        Record::Push {
            ts_ns,
            tid,
            domain: 0,
            attrs: Attributes::EMPTY,
        },
        Record::Push {
            ts_ns,
            tid,
            domain: 3,
            attrs: attrs(Message::Text("outer ünïcödé"), Payload::U64(u64::MAX)),
        },
        Record::Pop {
            ts_ns,
            tid,
            domain: 3,
        },
        Record::Start {
            ts_ns,
            tid,
            domain: 0,
            id: 99,
            attrs: attrs(Message::Registered(12), Payload::I64(-5)),
        },
        Record::End {
            ts_ns: ts_ns + 1,
            tid: tid + 1,
            domain: 0,
            id: 99,
        },
        Record::Mark {
            ts_ns,
            tid,
            domain: 2,
            attrs: attrs(Message::Text(""), Payload::F64(2.5)),
        },
        Record::DomainCreate {
            ts_ns,
            domain: 2,
            name: "my domain",
        },
        Record::DomainDestroy { ts_ns, domain: 2 },
        Record::RegisterString {
            ts_ns,
            domain: 2,
            id: 12,
            text: "registered",
        },
        Record::NameCategory {
            ts_ns,
            domain: 0,
            category: 7,
            name: "io",
        },
        Record::NameThread {
            ts_ns,
            tid: 77,
            name: "worker",
        },
        Record::Dropped { ts_ns, total: 31 },
    ];
    for p in [
        Payload::U32(u32::MAX),
        Payload::I32(-7),
        Payload::F32(-0.25),
        Payload::None,
    ] {
        v.push(Record::Mark {
            ts_ns,
            tid,
            domain: 0,
            attrs: attrs(Message::None, p),
        });
    }
    v
}

#[test]
fn every_kind_round_trips_through_one_frame() {
    let recs = every_kind();
    let mut frame = Vec::new();
    for r in &recs {
        encode(r, &mut frame);
    }
    let back: Vec<Record<'_>> = records(&frame).collect::<Result<_, _>>().unwrap();
    assert_eq!(back, recs);
}

#[test]
fn the_sizes_the_module_docs_promise() {
    let mut out = Vec::new();
    encode(
        &Record::Pop {
            ts_ns: 1,
            tid: 1,
            domain: 0,
        },
        &mut out,
    );
    assert_eq!(out.len(), 24);
    out.clear();
    let push = Record::Push {
        ts_ns: 1,
        tid: 1,
        domain: 0,
        attrs: attrs(Message::Text("step"), Payload::None),
    };
    encode(&push, &mut out);
    assert_eq!(out.len(), 40 + 4);
    assert_eq!(u16::from_le_bytes([out[0], out[1]]) as usize, out.len());
}

#[test]
fn long_text_is_cut_on_a_char_boundary_and_flagged() {
    let long = "é".repeat(MAX_TEXT); // 2 bytes each
    let rec = Record::Mark {
        ts_ns: 1,
        tid: 2,
        domain: 0,
        attrs: attrs(Message::Text(&long), Payload::None),
    };
    let mut out = Vec::new();
    encode(&rec, &mut out);
    let Ok((Record::Mark { attrs, .. }, rest)) = split_record(&out) else {
        panic!("not a mark")
    };
    assert!(rest.is_empty());
    assert!(attrs.truncated);
    assert_eq!(attrs.message, Message::Text(&long[..MAX_TEXT]));
}

#[test]
fn hello_round_trips_and_rejects_strangers() {
    let h = Hello {
        version: VERSION,
        pid: 1234,
        monotonic_ns: 55,
    };
    let bytes = encode_hello(&h);
    assert_eq!(&bytes[..8], b"INGNVTX1");
    assert_eq!(decode_hello(&bytes), Ok(h));
    assert_eq!(
        decode_hello(&bytes[..10]),
        Err(WireError::Truncated { need: 4, have: 2 })
    );
    let mut bad = bytes;
    bad[0] = b'X';
    assert_eq!(decode_hello(&bad), Err(WireError::BadMagic));
    let mut v2 = bytes;
    v2[8] = 2;
    assert_eq!(decode_hello(&v2), Err(WireError::BadVersion(2)));
    assert_eq!(
        frame_len(((MAX_FRAME + 1) as u32).to_le_bytes()),
        Err(WireError::FrameTooLarge(MAX_FRAME + 1))
    );
    assert_eq!(frame_len(16u32.to_le_bytes()), Ok(16));
}

#[test]
fn malformed_records_are_named() {
    let mut pop = Vec::new();
    encode(
        &Record::Pop {
            ts_ns: 1,
            tid: 1,
            domain: 0,
        },
        &mut pop,
    );
    let mut long_pop = pop.clone();
    long_pop.extend_from_slice(&[0; 4]);
    long_pop[0] = 28;
    assert_eq!(
        split_record(&long_pop).err(),
        Some(WireError::BadSize {
            kind: kind::POP,
            size: 28
        })
    );
    let mut unknown = pop.clone();
    unknown[2] = 200;
    assert_eq!(
        split_record(&unknown).err(),
        Some(WireError::UnknownKind(200))
    );
    assert!(matches!(
        split_record(&pop[..20]),
        Err(WireError::Truncated { .. })
    ));
    let mut tiny = pop.clone();
    tiny[0] = 3;
    assert!(matches!(
        split_record(&tiny),
        Err(WireError::BadSize { .. })
    ));
    let mut name = Vec::new();
    encode(
        &Record::NameThread {
            ts_ns: 1,
            tid: 1,
            name: "ab",
        },
        &mut name,
    );
    *name.last_mut().unwrap() = 0xFF;
    assert_eq!(split_record(&name).err(), Some(WireError::BadUtf8));
    let mut mark = Vec::new();
    encode(
        &Record::Mark {
            ts_ns: 1,
            tid: 1,
            domain: 0,
            attrs: Attributes::EMPTY,
        },
        &mut mark,
    );
    mark[3] = 7;
    assert_eq!(
        split_record(&mark).err(),
        Some(WireError::BadPayloadType(7))
    );
    mark[3] = flag::MESSAGE_MASK;
    assert_eq!(
        split_record(&mark).err(),
        Some(WireError::BadMessageKind(3))
    );
    // The iterator stops after the first error.
    let mut two = unknown.clone();
    two.extend_from_slice(&pop);
    let got: Vec<_> = records(&two).collect();
    assert_eq!(got.len(), 1);
    assert!(got[0].is_err());
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[test]
fn decoding_random_and_mutated_frames_never_panics() {
    let mut valid = Vec::new();
    for r in every_kind() {
        encode(&r, &mut valid);
    }
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let (mut ok, mut err) = (0usize, 0usize);
    for round in 0..20_000 {
        let buf: Vec<u8> = if round % 2 == 0 {
            let mut b = valid.clone();
            for _ in 0..=rng.below(6) {
                let i = rng.below(b.len());
                b[i] = rng.next() as u8;
            }
            let cut = rng.below(b.len() + 1);
            b.truncate(cut);
            b
        } else {
            (0..rng.below(200)).map(|_| rng.next() as u8).collect()
        };
        for r in records(&buf) {
            match r {
                Ok(rec) => {
                    ok += 1;
                    // Whatever decodes re-encodes to a record that decodes to itself.
                    let mut again = Vec::new();
                    encode(&rec, &mut again);
                    let (back, rest) = split_record(&again).unwrap();
                    assert!(rest.is_empty());
                    assert_eq!(format!("{back:?}"), format!("{rec:?}"));
                }
                Err(_) => err += 1,
            }
        }
        let _ = decode_hello(&buf);
    }
    assert!(ok > 1000 && err > 1000, "ok {ok} err {err}");
}
