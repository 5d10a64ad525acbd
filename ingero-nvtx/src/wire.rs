//! The byte stream from the injection library to the agent, and its reference encoder and
//! decoder. The agent decodes with this module; the library's hot path writes the same bytes
//! straight into its rings (`crate::fast`, tested against [`encode`]).
//!
//! All integers are little-endian. A connection carries:
//!
//! ```text
//! hello   magic "INGNVTX1" | u32 version = 1 | u32 pid | u64 monotonic_ns      (HELLO_LEN = 24)
//! frame   u32 len | len bytes of whole records, back to back                  (len <= MAX_FRAME)
//! ```
//!
//! A record is a 16-byte header and a body that depends on its kind:
//!
//! ```text
//! header  u16 size (header included) | u8 kind | u8 flags | u32 tid | u64 ts_ns (CLOCK_MONOTONIC)
//!
//! kind 1  Push            u64 domain | attrs
//! kind 2  Pop             u64 domain
//! kind 3  Start           u64 domain | u64 id | attrs
//! kind 4  End             u64 domain | u64 id
//! kind 5  Mark            u64 domain | attrs
//! kind 6  DomainCreate    u64 domain | name (UTF-8, to the end of the record)
//! kind 7  DomainDestroy   u64 domain
//! kind 8  RegisterString  u64 domain | u64 id | text (UTF-8, to the end)
//! kind 9  NameCategory    u64 domain | u32 category | name (UTF-8, to the end)
//! kind 10 NameThread      name (UTF-8, to the end); the named thread is the header's tid
//! kind 11 Dropped         u64 total
//!
//! attrs   u32 category | u32 color (ARGB) | u64 payload bits | message
//! message nothing (flags say none) | u64 registered-string id | UTF-8 text to the end
//!
//! flags (records with attrs; 0 elsewhere)
//!   bits 0-2  payload type: 0 none, 1 u64, 2 i64, 3 f64, 4 u32, 5 i32, 6 f32
//!   bit  3    color present
//!   bits 4-5  message: 0 none, 1 text, 2 registered
//!   bit  6    text truncated at MAX_TEXT bytes
//! ```
//!
//! Domain 0 is NVTX's default domain; handles the library hands out are never 0. Records that
//! name no thread (definitions, `Dropped`) carry tid 0. A push on a thread is 40 bytes plus its
//! message; a pop is 24.
//!
//! Decoding is total: any byte string gives records or a [`WireError`], never a panic, and
//! nothing is allocated.

use std::fmt;

/// The first eight bytes a client sends.
pub const MAGIC: [u8; 8] = *b"INGNVTX1";
/// The protocol version in the hello.
pub const VERSION: u32 = 1;
/// Bytes of the hello.
pub const HELLO_LEN: usize = 24;
/// Most bytes of records in one frame (the `len` after which a reader gives up).
pub const MAX_FRAME: usize = 1 << 20;
/// Bytes of a record header.
pub const HEADER_LEN: usize = 16;
/// Most bytes of a message or name; longer ones are cut on a character boundary (messages get
/// the truncated flag).
pub const MAX_TEXT: usize = 4096;
/// Bytes of the fixed part of `attrs` (category, color, payload).
pub const ATTRS_FIXED_LEN: usize = 16;

/// Record kinds (the header's third byte).
pub mod kind {
    /// [`super::Record::Push`].
    pub const PUSH: u8 = 1;
    /// [`super::Record::Pop`].
    pub const POP: u8 = 2;
    /// [`super::Record::Start`].
    pub const START: u8 = 3;
    /// [`super::Record::End`].
    pub const END: u8 = 4;
    /// [`super::Record::Mark`].
    pub const MARK: u8 = 5;
    /// [`super::Record::DomainCreate`].
    pub const DOMAIN_CREATE: u8 = 6;
    /// [`super::Record::DomainDestroy`].
    pub const DOMAIN_DESTROY: u8 = 7;
    /// [`super::Record::RegisterString`].
    pub const REGISTER_STRING: u8 = 8;
    /// [`super::Record::NameCategory`].
    pub const NAME_CATEGORY: u8 = 9;
    /// [`super::Record::NameThread`].
    pub const NAME_THREAD: u8 = 10;
    /// [`super::Record::Dropped`].
    pub const DROPPED: u8 = 11;
}

/// Bits of the header's flags byte.
pub mod flag {
    /// Mask of the payload type (values in [`super::payload_type`]).
    pub const PAYLOAD_MASK: u8 = 0b111;
    /// The color field is meaningful.
    pub const COLOR: u8 = 1 << 3;
    /// Shift of the two message-kind bits.
    pub const MESSAGE_SHIFT: u8 = 4;
    /// Message kind: text to the end of the record.
    pub const MESSAGE_TEXT: u8 = 1 << MESSAGE_SHIFT;
    /// Message kind: a registered-string id.
    pub const MESSAGE_REGISTERED: u8 = 2 << MESSAGE_SHIFT;
    /// Mask of the message-kind bits.
    pub const MESSAGE_MASK: u8 = 3 << MESSAGE_SHIFT;
    /// The text was cut at [`super::MAX_TEXT`] bytes.
    pub const TRUNCATED: u8 = 1 << 6;
}

/// Payload type numbers in the flags (NVTX's own numbering, `nvtxPayloadType_t`).
pub mod payload_type {
    /// No payload.
    pub const NONE: u8 = 0;
    /// `uint64_t`.
    pub const U64: u8 = 1;
    /// `int64_t`.
    pub const I64: u8 = 2;
    /// `double`.
    pub const F64: u8 = 3;
    /// `uint32_t`.
    pub const U32: u8 = 4;
    /// `int32_t`.
    pub const I32: u8 = 5;
    /// `float`.
    pub const F32: u8 = 6;
}

/// What a client says first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hello {
    /// [`VERSION`] for this format.
    pub version: u32,
    /// The process id of the sender.
    pub pid: u32,
    /// `CLOCK_MONOTONIC` when the hello was written, in ns.
    pub monotonic_ns: u64,
}

/// An event's number, as NVTX passed it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Payload {
    /// No payload.
    None,
    /// `uint64_t`.
    U64(u64),
    /// `int64_t`.
    I64(i64),
    /// `double`.
    F64(f64),
    /// `uint32_t`.
    U32(u32),
    /// `int32_t`.
    I32(i32),
    /// `float`.
    F32(f32),
}

/// An event's message.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Message<'a> {
    /// No message.
    None,
    /// Text (NVTX's ASCII and wide messages, as UTF-8 with invalid input replaced by U+FFFD).
    Text(&'a str),
    /// A registered string: the id of a [`Record::RegisterString`] of the same domain.
    Registered(u64),
}

/// What `nvtxEventAttributes_t` said about an event.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Attributes<'a> {
    /// The category (0 = none).
    pub category: u32,
    /// ARGB color, when one was given.
    pub color: Option<u32>,
    /// The payload.
    pub payload: Payload,
    /// The message.
    pub message: Message<'a>,
    /// The text message was longer than [`MAX_TEXT`] bytes and was cut.
    pub truncated: bool,
}

impl Attributes<'_> {
    /// No category, color, payload or message.
    pub const EMPTY: Attributes<'static> = Attributes {
        category: 0,
        color: None,
        payload: Payload::None,
        message: Message::None,
        truncated: false,
    };
}

/// One decoded record. Timestamps are `CLOCK_MONOTONIC` ns; `domain` 0 is the default domain.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Record<'a> {
    /// A thread range opened (`nvtxRangePush*`, `nvtxDomainRangePushEx`).
    Push {
        /// When.
        ts_ns: u64,
        /// The thread.
        tid: u32,
        /// The domain.
        domain: u64,
        /// What the caller said.
        attrs: Attributes<'a>,
    },
    /// The innermost thread range of `domain` on `tid` closed.
    Pop {
        /// When.
        ts_ns: u64,
        /// The thread.
        tid: u32,
        /// The domain.
        domain: u64,
    },
    /// A process range opened (`nvtxRangeStart*`); `id` pairs it with its [`Record::End`].
    Start {
        /// When.
        ts_ns: u64,
        /// The thread that opened it.
        tid: u32,
        /// The domain.
        domain: u64,
        /// The range id the library returned (never 0).
        id: u64,
        /// What the caller said.
        attrs: Attributes<'a>,
    },
    /// A process range closed, possibly on another thread.
    End {
        /// When.
        ts_ns: u64,
        /// The thread that closed it.
        tid: u32,
        /// The domain.
        domain: u64,
        /// The id of its [`Record::Start`].
        id: u64,
    },
    /// An instant.
    Mark {
        /// When.
        ts_ns: u64,
        /// The thread.
        tid: u32,
        /// The domain.
        domain: u64,
        /// What the caller said.
        attrs: Attributes<'a>,
    },
    /// `nvtxDomainCreate*`.
    DomainCreate {
        /// When.
        ts_ns: u64,
        /// The new domain's handle.
        domain: u64,
        /// Its name.
        name: &'a str,
    },
    /// `nvtxDomainDestroy` of a domain the library created.
    DomainDestroy {
        /// When.
        ts_ns: u64,
        /// The domain.
        domain: u64,
    },
    /// `nvtxDomainRegisterString*`.
    RegisterString {
        /// When.
        ts_ns: u64,
        /// The domain it belongs to.
        domain: u64,
        /// The handle events use in [`Message::Registered`].
        id: u64,
        /// The string.
        text: &'a str,
    },
    /// `nvtxNameCategory*`, `nvtxDomainNameCategory*`.
    NameCategory {
        /// When.
        ts_ns: u64,
        /// The domain.
        domain: u64,
        /// The category.
        category: u32,
        /// Its name.
        name: &'a str,
    },
    /// `nvtxNameOsThread*`.
    NameThread {
        /// When.
        ts_ns: u64,
        /// The thread named (the caller's argument).
        tid: u32,
        /// Its name.
        name: &'a str,
    },
    /// The process has dropped `total` events so far (rings full, registry full, a connection
    /// lost with events in flight).
    Dropped {
        /// When.
        ts_ns: u64,
        /// Cumulative count.
        total: u64,
    },
}

/// Why bytes did not decode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum WireError {
    /// Fewer bytes than the structure needs.
    Truncated {
        /// Bytes needed.
        need: usize,
        /// Bytes there.
        have: usize,
    },
    /// The hello does not start with [`MAGIC`].
    BadMagic,
    /// The hello names a version this decoder does not know.
    BadVersion(u32),
    /// A frame length above [`MAX_FRAME`].
    FrameTooLarge(usize),
    /// A record size smaller than its kind needs, or (for fixed-size kinds) different from it.
    BadSize {
        /// The record's kind.
        kind: u8,
        /// The size it claimed.
        size: u16,
    },
    /// A kind this decoder does not know.
    UnknownKind(u8),
    /// A payload type above 6.
    BadPayloadType(u8),
    /// Message-kind bits of 3.
    BadMessageKind(u8),
    /// Text that is not UTF-8.
    BadUtf8,
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            WireError::Truncated { need, have } => {
                write!(f, "truncated: {need} bytes needed, {have} there")
            }
            WireError::BadMagic => write!(f, "not an ingero NVTX stream (bad magic)"),
            WireError::BadVersion(v) => write!(f, "unknown NVTX stream version {v}"),
            WireError::FrameTooLarge(n) => write!(f, "frame of {n} bytes exceeds {MAX_FRAME}"),
            WireError::BadSize { kind, size } => write!(f, "record kind {kind} with size {size}"),
            WireError::UnknownKind(k) => write!(f, "unknown record kind {k}"),
            WireError::BadPayloadType(t) => write!(f, "unknown payload type {t}"),
            WireError::BadMessageKind(m) => write!(f, "unknown message kind {m}"),
            WireError::BadUtf8 => write!(f, "text is not UTF-8"),
        }
    }
}

impl std::error::Error for WireError {}

/// The hello's bytes.
pub fn encode_hello(h: &Hello) -> [u8; HELLO_LEN] {
    let mut out = [0u8; HELLO_LEN];
    out[..8].copy_from_slice(&MAGIC);
    out[8..12].copy_from_slice(&h.version.to_le_bytes());
    out[12..16].copy_from_slice(&h.pid.to_le_bytes());
    out[16..24].copy_from_slice(&h.monotonic_ns.to_le_bytes());
    out
}

/// Reads a hello (the first [`HELLO_LEN`] bytes of `buf`).
pub fn decode_hello(buf: &[u8]) -> Result<Hello, WireError> {
    let mut r = Reader(buf);
    let magic = r.take(8)?;
    if magic != MAGIC {
        return Err(WireError::BadMagic);
    }
    let version = r.u32()?;
    if version != VERSION {
        return Err(WireError::BadVersion(version));
    }
    Ok(Hello {
        version,
        pid: r.u32()?,
        monotonic_ns: r.u64()?,
    })
}

/// The length in a frame's 4-byte prefix, checked against [`MAX_FRAME`].
pub fn frame_len(prefix: [u8; 4]) -> Result<usize, WireError> {
    let len = u32::from_le_bytes(prefix) as usize;
    if len > MAX_FRAME {
        return Err(WireError::FrameTooLarge(len));
    }
    Ok(len)
}

/// The records of one frame's body, in order; stops after the first error.
pub fn records(frame: &[u8]) -> impl Iterator<Item = Result<Record<'_>, WireError>> {
    let mut rest = frame;
    let mut failed = false;
    std::iter::from_fn(move || {
        if failed || rest.is_empty() {
            return None;
        }
        match split_record(rest) {
            Ok((rec, tail)) => {
                rest = tail;
                Some(Ok(rec))
            }
            Err(e) => {
                failed = true;
                Some(Err(e))
            }
        }
    })
}

/// Decodes the record at the start of `buf`; the record and what follows it.
pub fn split_record(buf: &[u8]) -> Result<(Record<'_>, &[u8]), WireError> {
    let mut h = Reader(buf);
    let size = h.u16()?;
    let kind = h.u8()?;
    let flags = h.u8()?;
    if (size as usize) < HEADER_LEN {
        return Err(WireError::BadSize { kind, size });
    }
    if buf.len() < size as usize {
        return Err(WireError::Truncated {
            need: size as usize,
            have: buf.len(),
        });
    }
    let (this, tail) = buf.split_at(size as usize);
    let mut r = Reader(this);
    let _ = r.take(4)?;
    let tid = r.u32()?;
    let ts_ns = r.u64()?;
    let bad = WireError::BadSize { kind, size };
    let body = r.0.len();
    let exact = |n: usize| if body == n { Ok(()) } else { Err(bad) };
    let at_least = |n: usize| if body >= n { Ok(()) } else { Err(bad) };
    let rec = match kind {
        kind::PUSH | kind::MARK => {
            at_least(8 + ATTRS_FIXED_LEN)?;
            let domain = r.u64()?;
            let attrs = read_attrs(&mut r, flags, kind, size)?;
            if kind == kind::PUSH {
                Record::Push {
                    ts_ns,
                    tid,
                    domain,
                    attrs,
                }
            } else {
                Record::Mark {
                    ts_ns,
                    tid,
                    domain,
                    attrs,
                }
            }
        }
        kind::START => {
            at_least(16 + ATTRS_FIXED_LEN)?;
            let domain = r.u64()?;
            let id = r.u64()?;
            let attrs = read_attrs(&mut r, flags, kind, size)?;
            Record::Start {
                ts_ns,
                tid,
                domain,
                id,
                attrs,
            }
        }
        kind::POP => {
            exact(8)?;
            Record::Pop {
                ts_ns,
                tid,
                domain: r.u64()?,
            }
        }
        kind::END => {
            exact(16)?;
            Record::End {
                ts_ns,
                tid,
                domain: r.u64()?,
                id: r.u64()?,
            }
        }
        kind::DOMAIN_CREATE => {
            at_least(8)?;
            Record::DomainCreate {
                ts_ns,
                domain: r.u64()?,
                name: r.rest_str()?,
            }
        }
        kind::DOMAIN_DESTROY => {
            exact(8)?;
            Record::DomainDestroy {
                ts_ns,
                domain: r.u64()?,
            }
        }
        kind::REGISTER_STRING => {
            at_least(16)?;
            Record::RegisterString {
                ts_ns,
                domain: r.u64()?,
                id: r.u64()?,
                text: r.rest_str()?,
            }
        }
        kind::NAME_CATEGORY => {
            at_least(12)?;
            Record::NameCategory {
                ts_ns,
                domain: r.u64()?,
                category: r.u32()?,
                name: r.rest_str()?,
            }
        }
        kind::NAME_THREAD => Record::NameThread {
            ts_ns,
            tid,
            name: r.rest_str()?,
        },
        kind::DROPPED => {
            exact(8)?;
            Record::Dropped {
                ts_ns,
                total: r.u64()?,
            }
        }
        other => return Err(WireError::UnknownKind(other)),
    };
    Ok((rec, tail))
}

fn read_attrs<'a>(
    r: &mut Reader<'a>,
    flags: u8,
    kind: u8,
    size: u16,
) -> Result<Attributes<'a>, WireError> {
    let category = r.u32()?;
    let color = r.u32()?;
    let bits = r.u64()?;
    let payload = match flags & flag::PAYLOAD_MASK {
        payload_type::NONE => Payload::None,
        payload_type::U64 => Payload::U64(bits),
        payload_type::I64 => Payload::I64(bits as i64),
        payload_type::F64 => Payload::F64(f64::from_bits(bits)),
        payload_type::U32 => Payload::U32(bits as u32),
        payload_type::I32 => Payload::I32(bits as u32 as i32),
        payload_type::F32 => Payload::F32(f32::from_bits(bits as u32)),
        other => return Err(WireError::BadPayloadType(other)),
    };
    let message = match flags & flag::MESSAGE_MASK {
        0 if r.0.is_empty() => Message::None,
        0 => return Err(WireError::BadSize { kind, size }),
        flag::MESSAGE_TEXT => Message::Text(r.rest_str()?),
        flag::MESSAGE_REGISTERED if r.0.len() == 8 => Message::Registered(r.u64()?),
        flag::MESSAGE_REGISTERED => return Err(WireError::BadSize { kind, size }),
        other => return Err(WireError::BadMessageKind(other >> flag::MESSAGE_SHIFT)),
    };
    Ok(Attributes {
        category,
        color: (flags & flag::COLOR != 0).then_some(color),
        payload,
        message,
        // Only text can be cut; the flag on anything else means nothing.
        truncated: flags & flag::TRUNCATED != 0 && matches!(message, Message::Text(_)),
    })
}

/// A cursor over borrowed bytes whose reads fail instead of panicking.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        if self.0.len() < n {
            return Err(WireError::Truncated {
                need: n,
                have: self.0.len(),
            });
        }
        let (head, tail) = self.0.split_at(n);
        self.0 = tail;
        Ok(head)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], WireError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    fn u8(&mut self) -> Result<u8, WireError> {
        Ok(self.array::<1>()?[0])
    }

    fn u16(&mut self) -> Result<u16, WireError> {
        self.array().map(u16::from_le_bytes)
    }

    fn u32(&mut self) -> Result<u32, WireError> {
        self.array().map(u32::from_le_bytes)
    }

    fn u64(&mut self) -> Result<u64, WireError> {
        self.array().map(u64::from_le_bytes)
    }

    fn rest_str(&mut self) -> Result<&'a str, WireError> {
        let all = std::mem::take(&mut self.0);
        std::str::from_utf8(all).map_err(|_| WireError::BadUtf8)
    }
}

/// `text` cut to at most [`MAX_TEXT`] bytes on a character boundary, and whether it was cut.
pub fn cap_text(text: &str) -> (&str, bool) {
    if text.len() <= MAX_TEXT {
        return (text, false);
    }
    let mut end = MAX_TEXT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    (text.get(..end).unwrap_or(""), true)
}

/// The flags and payload bits of `p`.
pub fn payload_bits(p: Payload) -> (u8, u64) {
    match p {
        Payload::None => (payload_type::NONE, 0),
        Payload::U64(v) => (payload_type::U64, v),
        Payload::I64(v) => (payload_type::I64, v as u64),
        Payload::F64(v) => (payload_type::F64, v.to_bits()),
        Payload::U32(v) => (payload_type::U32, u64::from(v)),
        Payload::I32(v) => (payload_type::I32, u64::from(v as u32)),
        Payload::F32(v) => (payload_type::F32, u64::from(v.to_bits())),
    }
}

/// Appends `rec`'s bytes to `out`: the reference encoder. Text longer than [`MAX_TEXT`] is cut
/// on a character boundary (a message then gets the truncated flag; a name is cut silently).
pub fn encode(rec: &Record<'_>, out: &mut Vec<u8>) {
    let start = out.len();
    let head = |out: &mut Vec<u8>, kind: u8, flags: u8, tid: u32, ts: u64| {
        out.extend_from_slice(&[0, 0, kind, flags]);
        out.extend_from_slice(&tid.to_le_bytes());
        out.extend_from_slice(&ts.to_le_bytes());
    };
    let u64s = |out: &mut Vec<u8>, vals: &[u64]| {
        for v in vals {
            out.extend_from_slice(&v.to_le_bytes());
        }
    };
    let text = |out: &mut Vec<u8>, t: &str| out.extend_from_slice(cap_text(t).0.as_bytes());
    match *rec {
        Record::Push {
            ts_ns,
            tid,
            domain,
            attrs,
        } => {
            head(out, kind::PUSH, attrs_flags(&attrs), tid, ts_ns);
            u64s(out, &[domain]);
            put_attrs(out, &attrs);
        }
        Record::Pop { ts_ns, tid, domain } => {
            head(out, kind::POP, 0, tid, ts_ns);
            u64s(out, &[domain]);
        }
        Record::Start {
            ts_ns,
            tid,
            domain,
            id,
            attrs,
        } => {
            head(out, kind::START, attrs_flags(&attrs), tid, ts_ns);
            u64s(out, &[domain, id]);
            put_attrs(out, &attrs);
        }
        Record::End {
            ts_ns,
            tid,
            domain,
            id,
        } => {
            head(out, kind::END, 0, tid, ts_ns);
            u64s(out, &[domain, id]);
        }
        Record::Mark {
            ts_ns,
            tid,
            domain,
            attrs,
        } => {
            head(out, kind::MARK, attrs_flags(&attrs), tid, ts_ns);
            u64s(out, &[domain]);
            put_attrs(out, &attrs);
        }
        Record::DomainCreate {
            ts_ns,
            domain,
            name,
        } => {
            head(out, kind::DOMAIN_CREATE, 0, 0, ts_ns);
            u64s(out, &[domain]);
            text(out, name);
        }
        Record::DomainDestroy { ts_ns, domain } => {
            head(out, kind::DOMAIN_DESTROY, 0, 0, ts_ns);
            u64s(out, &[domain]);
        }
        Record::RegisterString {
            ts_ns,
            domain,
            id,
            text: t,
        } => {
            head(out, kind::REGISTER_STRING, 0, 0, ts_ns);
            u64s(out, &[domain, id]);
            text(out, t);
        }
        Record::NameCategory {
            ts_ns,
            domain,
            category,
            name,
        } => {
            head(out, kind::NAME_CATEGORY, 0, 0, ts_ns);
            u64s(out, &[domain]);
            out.extend_from_slice(&category.to_le_bytes());
            text(out, name);
        }
        Record::NameThread { ts_ns, tid, name } => {
            head(out, kind::NAME_THREAD, 0, tid, ts_ns);
            text(out, name);
        }
        Record::Dropped { ts_ns, total } => {
            head(out, kind::DROPPED, 0, 0, ts_ns);
            u64s(out, &[total]);
        }
    }
    // At most 16 + 16 + 16 + MAX_TEXT bytes, well inside u16.
    let size = (out.len() - start) as u16;
    if let Some(s) = out.get_mut(start..start + 2) {
        s.copy_from_slice(&size.to_le_bytes());
    }
}

fn attrs_flags(a: &Attributes<'_>) -> u8 {
    let mut flags = payload_bits(a.payload).0;
    if a.color.is_some() {
        flags |= flag::COLOR;
    }
    match a.message {
        Message::None => {}
        Message::Text(t) => {
            flags |= flag::MESSAGE_TEXT;
            if a.truncated || cap_text(t).1 {
                flags |= flag::TRUNCATED;
            }
        }
        Message::Registered(_) => flags |= flag::MESSAGE_REGISTERED,
    }
    flags
}

fn put_attrs(out: &mut Vec<u8>, a: &Attributes<'_>) {
    out.extend_from_slice(&a.category.to_le_bytes());
    out.extend_from_slice(&a.color.unwrap_or(0).to_le_bytes());
    out.extend_from_slice(&payload_bits(a.payload).1.to_le_bytes());
    match a.message {
        Message::None => {}
        Message::Text(t) => out.extend_from_slice(cap_text(t).0.as_bytes()),
        Message::Registered(id) => out.extend_from_slice(&id.to_le_bytes()),
    }
}

#[cfg(test)]
#[path = "wire_tests.rs"]
mod tests;
