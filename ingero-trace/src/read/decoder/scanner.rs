//! The scanner path: any packet, fields in any order, through the general protobuf scanner.
//! It keeps every table up to date (interning, clocks, descriptors, sequence resets and
//! losses) and decodes what the fast paths leave: annotations (the writer's own read straight
//! into their records, `annotations.rs`), session and statistics, counters, inline names and
//! strings, foreign traces.

use super::annotations::annotation_direct;
use super::args::{SlotArgs, SlotVal};
use super::describe::describe;
use super::instants::{instant, seek_mark};
use super::plan::{OpenBody, Plan};
use super::sequence::{SeqState, intern};
use super::tables::Tables;
use super::track_kind::TrackKind;
use super::views::{
    RawVal, Te, event_name, for_each_arg, resolve_args, resolve_args_into, track_event,
};
use crate::model::{CounterSample, Placement, ReadRecord};
use crate::proto::scan::{self, Cur, text};
use crate::proto::{
    Clock, ClockSnapshot, SEQ_INCREMENTAL_STATE_CLEARED, SEQ_NEEDS_INCREMENTAL_STATE, TracePacket,
    TracePacketDefaults, clock_id, event_type,
};
use crate::vocab::Instant;

/// What one packet did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step<'a> {
    /// Nothing to yield (state only, or a record of no interest).
    Nothing,
    /// A record was written into the slot.
    Record,
    /// A `compressed_packets` container: its zlib stream, to be expanded by the caller.
    Compressed(&'a [u8]),
}

impl Step<'_> {
    pub(super) fn done(record: bool) -> Self {
        if record { Step::Record } else { Step::Nothing }
    }
}

/// Decodes one packet of any shape; if it completes a record (at most one per packet), writes
/// it into `slot`. `slots`: whether interned arguments may be resolved through slots (else
/// every argument is resolved by name; tests compare the two).
pub(super) fn packet<'a>(
    t: &mut Tables,
    slots: bool,
    bytes: &'a [u8],
    slot: &mut ReadRecord,
) -> scan::Result<Step<'a>> {
    let mut c = Cur::new(bytes);
    let mut timestamp = None;
    let mut clock = None;
    let mut seq_id = 0u32;
    let mut flags = 0u64;
    let (mut interned, mut defaults, mut snapshot, mut desc, mut te) =
        (None, None, None, None, None);
    let mut compressed = None;
    while let Some((f, w)) = c.field()? {
        match f {
            TracePacket::TIMESTAMP => timestamp = Some(w.int()),
            TracePacket::TIMESTAMP_CLOCK_ID => clock = Some(w.int() as u32),
            TracePacket::TRUSTED_PACKET_SEQUENCE_ID => seq_id = w.int() as u32,
            TracePacket::SEQUENCE_FLAGS => flags = w.int(),
            TracePacket::INTERNED_DATA => interned = Some(w.bytes()),
            TracePacket::TRACE_PACKET_DEFAULTS => defaults = Some(w.bytes()),
            TracePacket::CLOCK_SNAPSHOT => snapshot = Some(w.bytes()),
            TracePacket::TRACK_DESCRIPTOR => desc = Some(w.bytes()),
            TracePacket::TRACK_EVENT => te = Some(w.bytes()),
            TracePacket::COMPRESSED_PACKETS => compressed = Some(w.bytes()),
            _ => {}
        }
    }
    // The container's other fields are ignored, as Perfetto does.
    if let Some(z) = compressed {
        return Ok(Step::Compressed(z));
    }
    let seq = t.seqs.get_or_default(u64::from(seq_id));
    seq.in_bundles |= t.in_bundle;
    if flags & u64::from(SEQ_INCREMENTAL_STATE_CLEARED) != 0 {
        seq.reset();
        if t.lost_seqs {
            t.lost_seqs = t.seqs.values_mut().any(|s| s.lost);
        }
    } else if seq.lost && flags & u64::from(SEQ_NEEDS_INCREMENTAL_STATE) != 0 {
        t.lost_packets += 1;
        return Ok(Step::Nothing);
    }
    let seq = t.seqs.get_or_default(u64::from(seq_id));
    if let Some(d) = defaults {
        let mut clock = None;
        let mut c = Cur::new(d);
        while let Some((f, w)) = c.field()? {
            if f == TracePacketDefaults::TIMESTAMP_CLOCK_ID {
                clock = Some(w.int() as u32);
            }
        }
        seq.set_default_clock(clock);
    }
    if let Some(i) = interned {
        intern(seq, i, &t.names, &mut t.launches)?;
    }
    if let Some(cs) = snapshot {
        let (mut mono, mut real) = (None, None);
        let mut c = Cur::new(cs);
        while let Some((f, w)) = c.field()? {
            if f != ClockSnapshot::CLOCKS {
                continue;
            }
            let (mut id, mut ts) = (None, None);
            let mut cc = Cur::new(w.bytes());
            while let Some((f, w)) = cc.field()? {
                match f {
                    Clock::CLOCK_ID => id = Some(w.int() as u32),
                    Clock::TIMESTAMP => ts = Some(w.int()),
                    _ => {}
                }
            }
            match id {
                Some(clock_id::INCREMENTAL_MONOTONIC) => seq.clock64 = ts.unwrap_or(0),
                Some(clock_id::MONOTONIC) => mono = ts,
                Some(clock_id::REALTIME) => real = ts,
                _ => {}
            }
        }
        if let Some(m) = mono {
            if !t.in_bundle {
                t.clocks.add_plain(m);
            }
            if let (None, Some(r)) = (t.clocks.realtime_offset, real) {
                t.clocks.realtime_offset = Some(i128::from(r) - i128::from(m));
            }
        }
        return Ok(Step::Nothing);
    }
    let ts = seq.advance(timestamp, clock);
    if let Some(d) = desc {
        describe(&mut t.tracks, d)?;
        return Ok(Step::Nothing);
    }
    let Some(te) = te else {
        return Ok(Step::Nothing);
    };
    let te = track_event(te)?;
    if t.label_skip.skips(t.in_bundle, &t.tracks, te.track) {
        return Ok(Step::Nothing);
    }
    match te.ty as i32 {
        event_type::SLICE_BEGIN => begin(t, slots, seq_id, ts, &te)?,
        event_type::SLICE_END => {
            let Tables {
                seqs,
                tracks,
                launches,
                names,
                ..
            } = t;
            let Some(tr) = tracks.get_mut(te.track) else {
                return Ok(Step::Nothing);
            };
            // An end states where the thread ran when that changed (see `Placement`). An end
            // without arguments resolves to an empty list (no allocation), which changes
            // nothing.
            let seq = seqs.get_or_default(u64::from(seq_id));
            tr.placement.update(&resolve_args(seq, &te)?);
            return Ok(Step::done(tr.end_top(ts, launches, names, slot)));
        }
        event_type::INSTANT => {
            let seq = t.seqs.get_or_default(u64::from(seq_id));
            if slots {
                if let Some(TrackKind::Labels(scope)) =
                    t.tracks.get(te.track).and_then(|tr| tr.kind.as_ref())
                {
                    if is_instant(seq, &te, Instant::Annotation) {
                        if let Some((a, _)) = annotation_direct(seq, *scope, ts, None, te.raw)? {
                            *slot = ReadRecord::Annotation(a);
                            return Ok(Step::Record);
                        }
                    }
                }
            }
            let name = event_name(seq, &te);
            // An instant's arguments are read into the list the tables keep for it: what it
            // becomes copies what it keeps (a label-dense recording is mostly instants).
            let mut args = std::mem::take(&mut t.instant_args);
            resolve_args_into(seq, te.raw, &mut args)?;
            let step = instant_step(t, (seq_id, ts), &te, &name, &args, slot);
            args.clear();
            t.instant_args = args;
            return Ok(step);
        }
        event_type::COUNTER => {
            if let Some(TrackKind::Counter(kind)) = t.kind(te.track) {
                *slot = ReadRecord::Counter(CounterSample {
                    kind: *kind,
                    ts_ns: ts,
                    value: te.counter_value,
                });
                return Ok(Step::Record);
            }
        }
        _ => {}
    }
    Ok(Step::Nothing)
}

/// Whether a track event is the fixed instant `which` by name (as [`instant`] tells it).
fn is_instant(seq: &SeqState, te: &Te<'_>, which: Instant) -> bool {
    let name = match (te.name_iid, te.name) {
        (Some(iid), _) => seq.names.get(iid).map(|n| &*n.text),
        (None, Some(n)) => return Instant::from_text(&text(n)) == Some(which),
        (None, None) => Some(""),
    };
    name.and_then(Instant::from_text) == Some(which)
}

/// What an instant is: a seek mark (outside bundles), or the record it stands for.
fn instant_step<'a>(
    t: &mut Tables,
    (seq_id, ts): (u32, u64),
    te: &Te<'_>,
    name: &str,
    args: &[(std::sync::Arc<str>, super::values::Val)],
    slot: &mut ReadRecord,
) -> Step<'a> {
    if !t.in_bundle {
        let kind = t.kind(te.track);
        if matches!(kind, Some(TrackKind::Ingero))
            && Instant::from_text(name) == Some(Instant::LabelOpen)
        {
            t.label_skip.restate(&mut t.tracks, args);
            return Step::Nothing;
        }
        if let Some(mark) = seek_mark(kind, (seq_id, ts), name, args) {
            t.label_skip.note_mark(&mark);
            t.mark = Some(mark);
            return Step::Nothing;
        }
    }
    let at = match t.tracks.get_mut(te.track) {
        Some(tr) => {
            tr.placement.update(args);
            tr.placement
        }
        None => Placement::default(),
    };
    Step::done(instant(t.kind(te.track), at, ts, name, args, slot))
}

/// A slice begins: kept open on its track until its end.
fn begin(t: &mut Tables, slots: bool, seq_id: u32, ts: u64, te: &Te<'_>) -> scan::Result<()> {
    let seq = t.seqs.get_or_default(u64::from(seq_id));
    let name = te
        .name_iid
        .and_then(|i| seq.names.get(i))
        .and_then(|n| n.kind);
    let kind = t.tracks.get(te.track).and_then(|tr| tr.kind.as_ref());
    if let (true, Some(TrackKind::SpanLane(scope))) = (slots, kind) {
        // The scope is the lane's at the end; the end is filled in then.
        if let Some(span) = annotation_direct(seq, *scope, ts, Some(ts), te.raw)? {
            let body = OpenBody::Annotation(Box::new(span));
            t.tracks.get_or_default(te.track).push(ts, body);
            return Ok(());
        }
    }
    let plan = if slots { Plan::of(kind, name) } else { None };
    let mut body = None;
    if let Some(plan) = plan {
        let s = &mut t.scratch;
        s.clear();
        let mut ok = true;
        for_each_arg(te.raw, |a| {
            let slot = a
                .name_iid
                .and_then(|iid| seq.debug_names.get(iid))
                .and_then(|k| k.slot);
            let Some(k) = slot else {
                ok = false;
                return false;
            };
            match a.val {
                RawVal::U(v) => s.put(k, v, SlotVal::Unsigned),
                RawVal::B(b) => s.put(k, u64::from(b), SlotVal::Unsigned),
                RawVal::I(v) => s.put(k, v as u64, SlotVal::Signed),
                RawVal::StrIid(iid) => s.put(k, iid, SlotVal::StrIid),
                // Fixed keys carry no strings inline and no doubles: the general path.
                RawVal::Str(_) | RawVal::F(_) => {
                    ok = false;
                    return false;
                }
            }
            true
        })?;
        if ok {
            body = plan.prepare(&SlotArgs {
                s,
                strings: &seq.strings,
            });
        }
    }
    let body = match body {
        Some(b) => b,
        None => OpenBody::General {
            name: event_name(seq, te),
            args: resolve_args(seq, te)?,
        },
    };
    t.tracks.get_or_default(te.track).push(ts, body);
    Ok(())
}
