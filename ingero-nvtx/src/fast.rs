//! The hot path's encoder: an NVTX call's arguments, as the caller passed them, straight into
//! the bytes of a [`crate::wire`] record in the thread's ring, without building a
//! [`wire::Record`] or allocating. The bytes must be exactly what [`wire::encode`] writes for
//! the same event; `fast_tests.rs` checks that for every kind, payload and message form.
//!
//! Text is converted on the way: an ASCII (`char*`) message is copied when it is UTF-8 and
//! otherwise converted as `String::from_utf8_lossy` would; a wide (`wchar_t*`, UTF-32 on Linux)
//! message is encoded to UTF-8 with invalid code points replaced by U+FFFD. Either is cut at
//! [`MAX_TEXT`] bytes on a character boundary and then flagged truncated.

use std::ffi::c_char;

use crate::ffi::{self, EventAttributes, WChar};
use crate::wire::{self, ATTRS_FIXED_LEN, HEADER_LEN, MAX_TEXT, Payload, flag};

/// A message as NVTX handed it: borrowed from the caller for the duration of the call.
#[derive(Clone, Copy, Debug)]
pub enum RawMessage<'a> {
    /// No message.
    None,
    /// `char*` bytes (up to MAX_TEXT + 1 of them: enough to know whether it is longer).
    Bytes(&'a [u8]),
    /// `wchar_t*` units (up to MAX_TEXT + 1).
    Wide(&'a [WChar]),
    /// A registered-string handle.
    Registered(u64),
}

/// `nvtxEventAttributes_t` read into values (or the `A`/`W` calls' bare message).
#[derive(Clone, Copy, Debug)]
pub struct RawAttrs<'a> {
    /// Category.
    pub category: u32,
    /// ARGB color if the caller set `NVTX_COLOR_ARGB`.
    pub color: Option<u32>,
    /// The payload, when its type is one of the six scalar types.
    pub payload: Payload,
    /// The message.
    pub message: RawMessage<'a>,
}

impl<'a> RawAttrs<'a> {
    /// Nothing but a message.
    pub fn message(message: RawMessage<'a>) -> Self {
        RawAttrs {
            category: 0,
            color: None,
            payload: Payload::None,
            message,
        }
    }

    /// Reads `*attr`. A NULL pointer, a `size` below 48 or a `version` below 2 give empty
    /// attributes (the event itself is still recorded, so depths stay right); an extended
    /// payload type gives no payload; an unknown message type no message.
    ///
    /// # Safety
    /// `attr` is NULL or points to at least `attr->size` readable bytes whose message pointer,
    /// for message types 1 and 2, is NULL or a NUL-terminated string, valid during the call.
    pub unsafe fn from_event_attributes(attr: *const EventAttributes) -> RawAttrs<'a> {
        let empty = RawAttrs::message(RawMessage::None);
        if attr.is_null() {
            return empty;
        }
        // SAFETY: `attr` is non-null and points to at least the two leading u16 fields of any
        // version of the struct (the caller's contract); read unaligned to assume nothing.
        let (version, size) = unsafe {
            let p = attr.cast::<u16>();
            (p.read_unaligned(), p.add(1).read_unaligned())
        };
        if version < 2 || size < ffi::EVENT_ATTRIB_SIZE {
            return empty;
        }
        // SAFETY: `size` says the caller's struct holds at least the 48 bytes of this layout.
        let a = unsafe { attr.read_unaligned() };
        let payload = match a.payload_type {
            1 => Payload::U64(a.payload),
            2 => Payload::I64(a.payload as i64),
            3 => Payload::F64(f64::from_bits(a.payload)),
            4 => Payload::U32(a.payload as u32),
            5 => Payload::I32(a.payload as u32 as i32),
            6 => Payload::F32(f32::from_bits(a.payload as u32)),
            _ => Payload::None,
        };
        let message = match a.message_type {
            // SAFETY: message types 1 and 2 carry a NUL-terminated string or NULL (contract).
            ffi::MESSAGE_ASCII => unsafe { c_bytes(a.message.cast()) },
            // SAFETY: as above, for a wide string.
            ffi::MESSAGE_UNICODE => unsafe { wide_units(a.message.cast()) },
            ffi::MESSAGE_REGISTERED => RawMessage::Registered(a.message as usize as u64),
            _ => RawMessage::None,
        };
        RawAttrs {
            category: a.category,
            color: (a.color_type == ffi::COLOR_ARGB).then_some(a.color),
            payload,
            message,
        }
    }
}

/// The bytes of a C string, at most `MAX_TEXT + 1` of them (`None` for NULL).
///
/// # Safety
/// `s` is NULL or a NUL-terminated string valid for the returned lifetime.
pub unsafe fn c_bytes<'a>(s: *const c_char) -> RawMessage<'a> {
    if s.is_null() {
        return RawMessage::None;
    }
    // SAFETY: `s` is NUL-terminated; strnlen reads no further than the NUL or the bound.
    let n = unsafe { libc::strnlen(s, MAX_TEXT + 1) };
    // SAFETY: the first `n` bytes were just read by strnlen and stay valid during the call.
    RawMessage::Bytes(unsafe { std::slice::from_raw_parts(s.cast::<u8>(), n) })
}

/// The units of a wide string, at most `MAX_TEXT + 1` of them (`None` for NULL).
///
/// # Safety
/// `s` is NULL or a 0-terminated `wchar_t` string valid for the returned lifetime.
pub unsafe fn wide_units<'a>(s: *const WChar) -> RawMessage<'a> {
    if s.is_null() {
        return RawMessage::None;
    }
    let mut n = 0;
    // SAFETY: every unit up to and including the terminator is readable; the loop stops at
    // the terminator or at the bound.
    while n <= MAX_TEXT && unsafe { *s.add(n) } != 0 {
        n += 1;
    }
    // SAFETY: the first `n` units were just read.
    RawMessage::Wide(unsafe { std::slice::from_raw_parts(s, n) })
}

/// Most bytes the message can take in a record (what to reserve in the ring).
pub fn message_bound(m: &RawMessage<'_>) -> usize {
    match m {
        RawMessage::None => 0,
        RawMessage::Registered(_) => 8,
        // Valid UTF-8 is copied; each invalid byte becomes the 3 bytes of U+FFFD.
        RawMessage::Bytes(b) if std::str::from_utf8(b).is_ok() => b.len().min(MAX_TEXT),
        RawMessage::Bytes(b) => (b.len() * 3).min(MAX_TEXT),
        RawMessage::Wide(w) => (w.len() * 4).min(MAX_TEXT),
    }
}

/// Most bytes a record of `kind` (push, start or mark) with `attrs` can take.
pub fn event_bound(kind: u8, attrs: &RawAttrs<'_>) -> usize {
    let ids = if kind == wire::kind::START { 16 } else { 8 };
    HEADER_LEN + ids + ATTRS_FIXED_LEN + message_bound(&attrs.message)
}

/// Writes a push, start or mark record into `out` (at least [`event_bound`] bytes); its size.
/// `id` is written for starts only.
pub fn encode_event(
    out: &mut [u8],
    kind: u8,
    tid: u32,
    ts_ns: u64,
    domain: u64,
    id: u64,
    attrs: &RawAttrs<'_>,
) -> usize {
    let mut w = Cursor {
        out,
        pos: HEADER_LEN,
    };
    w.put(&domain.to_le_bytes());
    if kind == wire::kind::START {
        w.put(&id.to_le_bytes());
    }
    let (ptype, bits) = wire::payload_bits(attrs.payload);
    let mut flags = ptype;
    w.put(&attrs.category.to_le_bytes());
    if let Some(c) = attrs.color {
        flags |= flag::COLOR;
        w.put(&c.to_le_bytes());
    } else {
        w.put(&[0; 4]);
    }
    w.put(&bits.to_le_bytes());
    match attrs.message {
        RawMessage::None => {}
        RawMessage::Registered(h) => {
            flags |= flag::MESSAGE_REGISTERED;
            w.put(&h.to_le_bytes());
        }
        RawMessage::Bytes(b) => {
            flags |= flag::MESSAGE_TEXT;
            if !w.put_lossy_utf8(b) {
                flags |= flag::TRUNCATED;
            }
        }
        RawMessage::Wide(units) => {
            flags |= flag::MESSAGE_TEXT;
            if !w.put_wide(units) {
                flags |= flag::TRUNCATED;
            }
        }
    }
    let size = w.pos;
    header(w.out, size, kind, flags, tid, ts_ns);
    size
}

/// Writes a pop (`id` None) or an end record; its size (24 or 32 bytes).
pub fn encode_close(out: &mut [u8], tid: u32, ts_ns: u64, domain: u64, id: Option<u64>) -> usize {
    let mut w = Cursor {
        out,
        pos: HEADER_LEN,
    };
    w.put(&domain.to_le_bytes());
    if let Some(id) = id {
        w.put(&id.to_le_bytes());
    }
    let size = w.pos;
    let kind = if id.is_some() {
        wire::kind::END
    } else {
        wire::kind::POP
    };
    header(w.out, size, kind, 0, tid, ts_ns);
    size
}

/// Bytes of a pop or end record.
pub const CLOSE_BOUND: usize = HEADER_LEN + 16;

fn header(out: &mut [u8], size: usize, kind: u8, flags: u8, tid: u32, ts_ns: u64) {
    let mut w = Cursor { out, pos: 0 };
    w.put(&(size as u16).to_le_bytes());
    w.put(&[kind, flags]);
    w.put(&tid.to_le_bytes());
    w.put(&ts_ns.to_le_bytes());
}

/// Writes into a slice the caller sized with the bounds above; a write that would not fit is
/// skipped rather than panicking (it cannot happen when the bound was respected).
struct Cursor<'o> {
    out: &'o mut [u8],
    pos: usize,
}

impl Cursor<'_> {
    fn put(&mut self, b: &[u8]) {
        if let Some(dst) = self.out.get_mut(self.pos..self.pos + b.len()) {
            dst.copy_from_slice(b);
            self.pos += b.len();
        }
    }

    /// Room left for text: what the slice has, never more than MAX_TEXT.
    fn text_room(&self, start: usize) -> usize {
        (start + MAX_TEXT).min(self.out.len())
    }

    /// Copies `s` up to the text limit, cut on a char boundary; false when cut.
    fn put_str(&mut self, s: &str, end: usize) -> bool {
        let room = end.saturating_sub(self.pos);
        if s.len() <= room {
            self.put(s.as_bytes());
            return true;
        }
        let mut cut = room;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        self.put(s.as_bytes().get(..cut).unwrap_or_default());
        false
    }

    /// `String::from_utf8_lossy(b)`, cut; false when cut.
    fn put_lossy_utf8(&mut self, b: &[u8]) -> bool {
        let end = self.text_room(self.pos);
        for chunk in b.utf8_chunks() {
            if !self.put_str(chunk.valid(), end) {
                return false;
            }
            if !chunk.invalid().is_empty() && !self.put_str("\u{FFFD}", end) {
                return false;
            }
        }
        true
    }

    /// UTF-32 to UTF-8, cut; false when cut.
    fn put_wide(&mut self, units: &[WChar]) -> bool {
        let end = self.text_room(self.pos);
        let mut buf = [0u8; 4];
        for &u in units {
            let c = char::from_u32(u as u32).unwrap_or('\u{FFFD}');
            if !self.put_str(c.encode_utf8(&mut buf), end) {
                return false;
            }
        }
        true
    }
}

#[cfg(test)]
#[path = "fast_tests.rs"]
mod tests;
