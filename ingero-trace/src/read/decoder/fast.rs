//! The fast path: slice begins and ends in the writer's exact packet layouts, decoded with
//! fixed one-byte tags instead of the general field scanner.
//!
//! Two levels, each falling back to the next before any state has changed:
//! - [`FastPath::packet`] first matches the writer's byte layout field by field, in its order:
//!   a slice end `{sequence id, track_event {type=2, track_uuid}, sequence_flags, machine_id,
//!   timestamp}` and a slice begin with exactly one interned argument (a kernel launch)
//!   `{.., track_event {debug_annotation {name_iid, string_value_iid}, type=1, name_iid,
//!   track_uuid}, .., timestamp}`. A launch then takes its configuration straight from the
//!   interned string, parsed when it was declared. What it decides for the bytes before the
//!   timestamp is remembered (`memo.rs`), and [`FastPath::each`] decodes a launch and the
//!   slice end that follows it on its track as one.
//! - [`fast_fields`] takes the same messages with fields in any order, any number of
//!   interned arguments with integer or interned string values, and category iids.
//!
//! Anything else (another field, an inline name or string, an unknown argument key, a cleared
//! sequence, a track or name the interned paths do not resolve) takes the scanner path.

use super::args::{SlotArgs, SlotVal, Slots};
use super::iids::IidTable;
use super::memo::{Action, Key, Memo};
use super::plan::{CudaPrep, OpenBody, Plan};
use super::sequence::KeyEntry;
use super::tables::Tables;
use super::track_kind::TrackKind;
use crate::model::ReadRecord;
use crate::proto::varint;
use crate::proto::{SEQ_INCREMENTAL_STATE_CLEARED, event_type};
use crate::vocab::{ArgKey, EventName};

use crate::proto::keys::{
    ARG_BOOL, ARG_INT, ARG_NAME_IID, ARG_POINTER, ARG_STRING_IID, ARG_UINT, CATEGORY_IID,
    CATEGORY_IIDS_PACKED, DEBUG_ANNOTATION, FRAME, MACHINE_ID, NAME_IID, SEQUENCE_FLAGS,
    SEQUENCE_ID, TIMESTAMP, TRACK_EVENT, TRACK_UUID, TYPE,
};

/// `TrackEvent.type`'s slice values (`event_type`'s, `i32` as prost declares the enum) as the
/// fast path meets them: as a decoded varint, and as the one byte each is on the wire.
const SLICE_BEGIN: u64 = SLICE_BEGIN_BYTE as u64;
const SLICE_END: u64 = SLICE_END_BYTE as u64;
const SLICE_BEGIN_BYTE: u8 = one_byte(event_type::SLICE_BEGIN);
const SLICE_END_BYTE: u8 = one_byte(event_type::SLICE_END);

/// The varint of `v` when it is one byte (a compile-time error otherwise, used in a constant).
const fn one_byte(v: i32) -> u8 {
    assert!(v >= 0 && v < 0x80, "values under 0x80 are one-byte varints");
    v as u8
}

#[inline(always)]
fn bytes<'a>(p: &'a [u8], i: &mut usize) -> Option<&'a [u8]> {
    let n = usize::try_from(varint::read(p, i)?).ok()?;
    let s = p.get(*i..i.checked_add(n)?)?;
    *i += n;
    Some(s)
}

/// One debug annotation into `slots`; `None` unless it has an interned, known key and exactly
/// one value of a kind the slots hold.
#[inline(always)]
fn annotation(a: &[u8], keys: &IidTable<KeyEntry>, slots: &mut Slots) -> Option<()> {
    let mut i = 0;
    let mut key = None;
    let mut val = None;
    while let Some(&tag) = a.get(i) {
        i += 1;
        let how = match tag {
            ARG_NAME_IID => {
                key = Some(varint::read(a, &mut i)?);
                continue;
            }
            ARG_UINT | ARG_POINTER => SlotVal::Unsigned,
            ARG_INT => SlotVal::Signed,
            ARG_BOOL => {
                let v = varint::read(a, &mut i)?;
                if val
                    .replace((u64::from(v != 0), SlotVal::Unsigned))
                    .is_some()
                {
                    return None;
                }
                continue;
            }
            t if t == ARG_STRING_IID[0] && a.get(i) == Some(&ARG_STRING_IID[1]) => {
                i += 1;
                SlotVal::StrIid
            }
            _ => return None,
        };
        // Several values: the scanner path applies the writer's precedence.
        if val.replace((varint::read(a, &mut i)?, how)).is_some() {
            return None;
        }
    }
    let k = keys.get(key?)?.slot?;
    let (v, how) = val?;
    slots.put(k, v, how);
    Some(())
}

/// What [`fast_fields`] did with a packet.
enum Fields {
    /// Ended a slice (or took another event); `true` when that wrote a record.
    Ended(bool),
    /// Began a slice on track `uuid` of sequence `seq` (the top of its stacks).
    Began { seq: u64, uuid: u64 },
}

impl Fields {
    /// Whether the packet wrote a record into the slot.
    fn completed(&self) -> bool {
        matches!(self, Fields::Ended(true))
    }
}

/// A packet in the writer's layout, matched but not yet applied.
enum Layout {
    End {
        uuid: u64,
    },
    /// A begin with one interned argument.
    Begin1 {
        uuid: u64,
        name: u64,
        key: u64,
        value: u64,
    },
}

/// Counts a packet the fast path took, for the tests that check it does (free in release
/// builds, where nothing reads the count).
#[inline(always)]
fn hit(n: &mut u64) {
    if cfg!(test) {
        *n += 1;
    }
}

/// A packet ending with its timestamp, as the writer puts it: the bytes before the
/// timestamp field and its value (see [`varint::split_trailing_field`] for when they are trusted).
#[inline(always)]
fn split_ts(p: &[u8]) -> Option<(&[u8], u64)> {
    varint::split_trailing_field(p, TIMESTAMP)
}

/// The slice end right after a launch, when it is `key` (a slice end of the launch's track on
/// sequence `seq`) followed by its timestamp: the timestamp and the bytes it takes.
#[inline(always)]
fn next_end(after: &[u8], key: Option<&(Key, u64)>, seq: u64) -> Option<(u64, usize)> {
    let (key, key_seq) = key?;
    let [FRAME, len, q @ ..] = after else {
        return None;
    };
    let p = q.get(..usize::from(*len)).filter(|_| *len < 0x80)?;
    let (head, ts) = split_ts(p)?;
    (*key_seq == seq && key.matches(head)).then_some((ts, 2 + p.len()))
}

/// Matches the writer's layouts byte by byte (see the module doc), before the timestamp:
/// `(sequence id, what)`.
#[inline(always)]
fn layout(r: &[u8]) -> Option<(u64, Layout)> {
    // One-byte sequence ids and track event lengths: every sequence and event of this shape.
    let [SEQUENCE_ID, seq, TRACK_EVENT, n, r @ ..] = r else {
        return None;
    };
    if (*seq | *n) >= 0x80 {
        return None;
    }
    let (te, tail) = r.split_at_checked(usize::from(*n))?;
    let [SEQUENCE_FLAGS, flags, m0, m1, r @ ..] = tail else {
        return None;
    };
    if *flags >= 0x80
        || u32::from(*flags) & SEQ_INCREMENTAL_STATE_CLEARED != 0
        || [*m0, *m1] != MACHINE_ID
    {
        return None;
    }
    if !varint::is_one(r) {
        return None;
    }
    let l = match te {
        [TYPE, SLICE_END_BYTE, TRACK_UUID, r @ ..] => {
            let (uuid, r) = varint::take(r)?;
            if !r.is_empty() {
                return None;
            }
            Layout::End { uuid }
        }
        [DEBUG_ANNOTATION, al, ARG_NAME_IID, r @ ..] if *al < 0x80 => {
            let (key, r) = varint::take(r)?;
            let [s0, s1, r @ ..] = r else {
                return None;
            };
            if [*s0, *s1] != ARG_STRING_IID {
                return None;
            }
            let (value, r) = varint::take(r)?;
            // The annotation ends where its length says.
            if te.len() - r.len() != 2 + usize::from(*al) {
                return None;
            }
            let [TYPE, SLICE_BEGIN_BYTE, NAME_IID, r @ ..] = r else {
                return None;
            };
            let (name, r) = varint::take(r)?;
            let [TRACK_UUID, r @ ..] = r else {
                return None;
            };
            let (uuid, r) = varint::take(r)?;
            if !r.is_empty() {
                return None;
            }
            Layout::Begin1 {
                uuid,
                name,
                key,
                value,
            }
        }
        _ => return None,
    };
    Some((u64::from(*seq), l))
}

/// The fast paths' own state: what they decided for the writer's repeated packets.
#[derive(Default)]
pub(super) struct FastPath {
    memo: Memo,
    /// Packets decoded by the byte-layout match (tests check the writer's layout hits it;
    /// counted in test builds only).
    layout_hits: u64,
}

impl FastPath {
    /// Forgets every remembered decision (the tables they were made on may change).
    pub(super) fn forget(&mut self) {
        self.memo.clear();
    }

    /// Packets the byte-layout match decoded so far.
    pub(super) fn layout_hits(&self) -> u64 {
        self.layout_hits
    }

    /// Decodes a slice begin or end in the writer's layout: `Some(true)` when it wrote a
    /// record into `slot`, `Some(false)` when it completed none, `None` (nothing changed)
    /// when the packet needs the scanner path.
    #[inline(always)]
    pub(super) fn packet(
        &mut self,
        t: &mut Tables,
        p: &[u8],
        slot: &mut ReadRecord,
    ) -> Option<bool> {
        if let Some((head, ts)) = split_ts(p) {
            if let Some(a) = self.memo.get(head) {
                if let Some(done) = self.run(t, ts, a, slot) {
                    hit(&mut self.layout_hits);
                    return Some(done);
                }
            }
            if let Some(done) = self.by_layout(t, head, ts, slot) {
                return Some(done);
            }
        }
        fast_fields(t, p, slot).map(|f| f.completed())
    }

    /// A packet the memo does not know, matched against the writer's layouts: `None`
    /// (nothing changed) when it needs a slower path. What it decided is remembered.
    #[inline(always)]
    fn by_layout(
        &mut self,
        t: &mut Tables,
        head: &[u8],
        ts: u64,
        slot: &mut ReadRecord,
    ) -> Option<bool> {
        // After a lost container only the scanner knows which sequences to trust.
        if !t.all_seqs_whole() {
            return None;
        }
        let (seq_id, l) = layout(head)?;
        let (done, a) = apply(t, ts, seq_id, l, slot)?;
        if let Some(a) = a {
            self.memo.put(head, a);
            if let (Action::End { seq, uuid }, Some(key)) = (a, Key::of(head)) {
                if let Some(tr) = t.tracks.get_mut(uuid) {
                    tr.end_key = Some((key, seq));
                }
            }
        }
        hit(&mut self.layout_hits);
        Some(done)
    }

    /// [`Self::packet`], calling `f` on the record a packet completes. A remembered slice end
    /// writes into its track's own slot (see `Track::own`), the rest into `slot`. A
    /// remembered launch followed by its track's slice end (`after` holds the bytes after the
    /// packet) is decoded with that end as one record: `Some(n)` says how many bytes of
    /// `after` that took.
    #[inline(always)]
    pub(super) fn each(
        &mut self,
        t: &mut Tables,
        p: &[u8],
        after: &[u8],
        slot: &mut ReadRecord,
        f: &mut impl FnMut(&ReadRecord),
    ) -> Option<usize> {
        if let Some((head, ts)) = split_ts(p) {
            match self.memo.get(head) {
                Some(Action::End { seq, uuid }) => {
                    let Tables {
                        seqs,
                        tracks,
                        launches,
                        names,
                        ..
                    } = t;
                    let layout_hits = &mut self.layout_hits;
                    // Else `run` could not end it either: the layout and slower paths.
                    if let Some(tr) = tracks.get_mut(uuid).filter(|t| !t.open.is_empty()) {
                        if let Some(s) = seqs.get_mut(seq) {
                            let end = s.advance(Some(ts), None);
                            hit(layout_hits);
                            if tr.end_top_own(end, launches, names) {
                                f(&tr.own);
                            }
                            return Some(0);
                        }
                    }
                }
                Some(Action::Launch { seq, uuid, op, idx }) => {
                    let Tables {
                        seqs,
                        tracks,
                        launches,
                        ..
                    } = t;
                    let layout_hits = &mut self.layout_hits;
                    if let (Some(tr), Some(s)) = (tracks.get_mut(uuid), seqs.get_mut(seq)) {
                        let begin = s.advance(Some(ts), None);
                        hit(layout_hits);
                        if let Some((end_ts, n)) = next_end(after, tr.end_key.as_ref(), seq) {
                            let end = s.advance(Some(end_ts), None);
                            hit(layout_hits);
                            if tr.launch_own(begin, end, op, idx, launches) {
                                f(&tr.own);
                            }
                            return Some(n);
                        }
                        tr.push_launch(begin, op, idx);
                        return Some(0);
                    }
                }
                Some(Action::Call { seq, uuid, body }) => {
                    let Tables { seqs, tracks, .. } = t;
                    let FastPath { memo, layout_hits } = self;
                    if let (Some(tr), Some(s), Some(body)) =
                        (tracks.get_mut(uuid), seqs.get_mut(seq), memo.body(body))
                    {
                        let begin = s.advance(Some(ts), None);
                        hit(layout_hits);
                        if let Some((end_ts, n)) = next_end(after, tr.end_key.as_ref(), seq) {
                            let end = s.advance(Some(end_ts), None);
                            hit(layout_hits);
                            if tr.call_own(begin, end, body) {
                                f(&tr.own);
                            }
                            return Some(n);
                        }
                        tr.push(begin, OpenBody::Cuda(body.clone()));
                        return Some(0);
                    }
                }
                None => {}
            }
            if self.unremembered(t, p, head, ts, slot)? {
                f(slot);
            }
            return Some(0);
        }
        if fast_fields(t, p, slot)?.completed() {
            f(slot);
        }
        Some(0)
    }

    /// [`Self::each`] for a packet the memo does not know (`head` and `ts` split from
    /// `p`): the layout match, then the any-order match, whose calls with several arguments
    /// are remembered once resolved. Out of line: it keeps the hot loop small.
    #[inline(never)]
    fn unremembered(
        &mut self,
        t: &mut Tables,
        p: &[u8],
        head: &[u8],
        ts: u64,
        slot: &mut ReadRecord,
    ) -> Option<bool> {
        if let Some(done) = self.by_layout(t, head, ts, slot) {
            return Some(done);
        }
        let done = fast_fields(t, p, slot)?;
        if let Fields::Began { seq, uuid } = done {
            let body = t.tracks.get(uuid).and_then(|t| match t.bodies.last() {
                Some(OpenBody::Cuda(c)) => Some(c.clone()),
                _ => None,
            });
            if let Some(body) = body {
                self.memo.put_call(head, seq, uuid, body);
            }
        }
        Some(done.completed())
    }

    /// Does what a remembered packet does; `None` (nothing changed) when it cannot now (no
    /// open slice to end).
    #[inline(always)]
    fn run(&mut self, t: &mut Tables, ts: u64, a: Action, slot: &mut ReadRecord) -> Option<bool> {
        let Tables {
            seqs,
            tracks,
            launches,
            names,
            ..
        } = t;
        let memo = &mut self.memo;
        match a {
            Action::End { seq, uuid } => {
                let tr = tracks.get_mut(uuid)?;
                if tr.open.is_empty() {
                    return None;
                }
                let end = seqs.get_mut(seq)?.advance(Some(ts), None);
                Some(tr.end_top(end, launches, names, slot))
            }
            Action::Launch { seq, uuid, op, idx } => {
                let tr = tracks.get_mut(uuid)?;
                let ts = seqs.get_mut(seq)?.advance(Some(ts), None);
                tr.push_launch(ts, op, idx);
                Some(false)
            }
            Action::Call { seq, uuid, body } => {
                let tr = tracks.get_mut(uuid)?;
                let body = memo.body(body)?;
                let ts = seqs.get_mut(seq)?.advance(Some(ts), None);
                tr.push(ts, OpenBody::Cuda(body.clone()));
                Some(false)
            }
        }
    }
}

/// Applies a matched layout; `None` (nothing changed) when its names, track or argument
/// need a slower path. With the result, what to remember for the same bytes (a slice
/// end, or a launch whose configuration is in the launch table).
#[inline(always)]
fn apply(
    t: &mut Tables,
    ts: u64,
    seq_id: u64,
    l: Layout,
    slot: &mut ReadRecord,
) -> Option<(bool, Option<Action>)> {
    let Tables {
        seqs,
        tracks,
        launches,
        names,
        scratch,
        ..
    } = t;
    let seq = seqs.get_mut(seq_id)?;
    match l {
        Layout::End { uuid } => {
            let tr = tracks.get_mut(uuid)?;
            // No open slice: the general path counts the clock all the same.
            if tr.open.is_empty() {
                return None;
            }
            let end = seq.advance(Some(ts), None);
            let done = tr.end_top(end, launches, names, slot);
            Some((done, Some(Action::End { seq: seq_id, uuid })))
        }
        Layout::Begin1 {
            uuid,
            name,
            key,
            value,
        } => {
            let Some(EventName::Op(op)) = seq.names.get(name)?.kind else {
                return None;
            };
            let tr = tracks.get_mut(uuid)?;
            let Some(TrackKind::Thread(_)) = tr.kind else {
                return None;
            };
            let k = seq.debug_names.get(key)?.slot?;
            let launch = match (k, op) {
                (ArgKey::Launch, op) if op.is_kernel_launch() => {
                    seq.strings.get(value).and_then(|e| e.launch_idx)
                }
                _ => None,
            };
            let ts = seq.advance(Some(ts), None);
            match launch {
                Some(idx) => {
                    tr.push_launch(ts, op, idx);
                    let a = Action::Launch {
                        seq: seq_id,
                        uuid,
                        op,
                        idx,
                    };
                    return Some((false, Some(a)));
                }
                None => {
                    scratch.clear();
                    scratch.put(k, value, SlotVal::StrIid);
                    let prep = CudaPrep::new(
                        op,
                        &SlotArgs {
                            s: scratch,
                            strings: &seq.strings,
                        },
                    );
                    tr.push(ts, OpenBody::Cuda(prep));
                }
            }
            Some((false, None))
        }
    }
}

/// The writer's messages with fields in any order (see the module doc).
#[inline(never)]
fn fast_fields(t: &mut Tables, p: &[u8], slot: &mut ReadRecord) -> Option<Fields> {
    if !t.all_seqs_whole() {
        return None;
    }
    let mut i = 0;
    let mut ts = None;
    let mut seq_id = 0u64;
    let mut te: &[u8] = &[];
    while let Some(&tag) = p.get(i) {
        i += 1;
        match tag {
            TIMESTAMP => ts = Some(varint::read(p, &mut i)?),
            SEQUENCE_ID => seq_id = varint::read(p, &mut i)? & u64::from(u32::MAX),
            TRACK_EVENT => te = bytes(p, &mut i)?,
            SEQUENCE_FLAGS => {
                if varint::read(p, &mut i)? & u64::from(SEQ_INCREMENTAL_STATE_CLEARED) != 0 {
                    return None;
                }
            }
            t if t == MACHINE_ID[0] && p.get(i) == Some(&MACHINE_ID[1]) => {
                i += 1;
                varint::skip(p, &mut i)?;
            }
            _ => return None,
        }
    }
    if te.is_empty() {
        return None;
    }
    let Tables {
        seqs,
        tracks,
        launches,
        names,
        scratch,
        ..
    } = t;
    let seq = seqs.get_mut(seq_id)?;
    scratch.clear();
    let (mut ty, mut uuid, mut name) = (0, 0, None);
    let mut i = 0;
    while let Some(&tag) = te.get(i) {
        i += 1;
        match tag {
            TYPE => ty = varint::read(te, &mut i)?,
            TRACK_UUID => uuid = varint::read(te, &mut i)?,
            NAME_IID => name = Some(varint::read(te, &mut i)?),
            DEBUG_ANNOTATION => annotation(bytes(te, &mut i)?, &seq.debug_names, scratch)?,
            CATEGORY_IID => {
                varint::read(te, &mut i)?;
            }
            CATEGORY_IIDS_PACKED => {
                bytes(te, &mut i)?;
            }
            _ => return None,
        }
    }
    match ty {
        SLICE_BEGIN => {
            let kind = seq.names.get(name?)?.kind;
            let tr = tracks.get_mut(uuid)?;
            let plan = Plan::of(tr.kind.as_ref(), kind)?;
            let body = plan.prepare(&SlotArgs {
                s: scratch,
                strings: &seq.strings,
            })?;
            let ts = seq.advance(ts, None);
            tr.push(ts, body);
            Some(Fields::Began { seq: seq_id, uuid })
        }
        SLICE_END => {
            if name.is_some() || scratch.present != 0 {
                return None;
            }
            let end = seq.advance(ts, None);
            Some(Fields::Ended(
                tracks
                    .get_mut(uuid)
                    .is_some_and(|tr| tr.end_top(end, launches, names, slot)),
            ))
        }
        _ => None,
    }
}
