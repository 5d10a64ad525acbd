//! Track descriptors: what each track is ([`TrackKind`]), from its descriptor's process or
//! thread, its name and its parent.

use super::iids::IidTable;
use super::slices::Track;
use super::track_kind::TrackKind;
use crate::model::{CounterKind, ThreadRef};
use crate::proto::scan::{self, Cur, text};
use crate::proto::{ProcessDescriptor, ThreadDescriptor, TrackDescriptor};
use crate::vocab::{NVTX_DOMAIN_SEPARATOR, TrackName};

/// Reads a track descriptor and records what the track is.
pub(super) fn describe(tracks: &mut IidTable<Track>, b: &[u8]) -> scan::Result<()> {
    let mut c = Cur::new(b);
    let (mut uuid, mut parent_uuid, mut name) = (0u64, None, String::new());
    let (mut process, mut thread, mut counter) = (None, None, false);
    while let Some((f, w)) = c.field()? {
        match f {
            TrackDescriptor::UUID => uuid = w.int(),
            TrackDescriptor::PARENT_UUID => parent_uuid = Some(w.int()),
            TrackDescriptor::NAME => name = text(w.bytes()).into_owned(),
            TrackDescriptor::PROCESS => {
                let mut pid = 0u32;
                let mut c = Cur::new(w.bytes());
                while let Some((f, w)) = c.field()? {
                    if f == ProcessDescriptor::PID {
                        pid = w.int() as u32;
                    }
                }
                process = Some(pid);
            }
            TrackDescriptor::THREAD => {
                let mut t = ThreadRef {
                    pid: 0,
                    tid: 0,
                    name: "".into(),
                };
                let mut c = Cur::new(w.bytes());
                while let Some((f, w)) = c.field()? {
                    match f {
                        ThreadDescriptor::PID => t.pid = w.int() as u32,
                        ThreadDescriptor::TID => t.tid = w.int() as u32,
                        ThreadDescriptor::THREAD_NAME => t.name = text(w.bytes()).into(),
                        _ => {}
                    }
                }
                thread = Some(t);
            }
            TrackDescriptor::COUNTER => counter = true,
            _ => {}
        }
    }
    let parent = parent_uuid
        .and_then(|p| tracks.get(p))
        .and_then(|t| t.kind.clone());
    let kind = if let Some(pid) = process {
        TrackKind::Process(pid)
    } else if let Some(t) = thread {
        TrackKind::Thread(t)
    } else if counter {
        match (TrackName::from_text(&name), parent) {
            (Some(TrackName::DeviceMemory), Some(TrackKind::Process(pid))) => {
                TrackKind::Counter(CounterKind::DeviceMemory { pid })
            }
            (Some(TrackName::EventsPerSecond), _) => {
                TrackKind::Counter(CounterKind::EventsPerSecond)
            }
            (Some(TrackName::Drops), _) => TrackKind::Counter(CounterKind::Drops),
            _ => TrackKind::Other,
        }
    } else {
        match (TrackName::from_text(&name), parent) {
            (Some(TrackName::Ingero), None) => TrackKind::Ingero,
            (Some(TrackName::Driver), None) => TrackKind::Driver,
            (Some(TrackName::TraceWide), None) => TrackKind::Labels(None),
            (Some(TrackName::Labels), Some(TrackKind::Process(pid))) => {
                TrackKind::Labels(Some(pid))
            }
            (Some(TrackName::OffCpu), Some(TrackKind::Thread(t))) => TrackKind::OffCpu(t),
            // `NVTX ranges`, `NVTX ranges #2`, … under a process; `NVTX`, `NVTX: <domain>`
            // under a thread.
            (_, Some(TrackKind::Process(pid)))
                if name.starts_with(TrackName::NvtxRanges.text()) =>
            {
                TrackKind::NvtxLane(pid)
            }
            (_, Some(TrackKind::Thread(t))) if name.starts_with(TrackName::Nvtx.text()) => {
                let domain = name
                    .strip_prefix(TrackName::Nvtx.text())
                    .and_then(|rest| rest.strip_prefix(NVTX_DOMAIN_SEPARATOR))
                    .map(str::to_owned);
                TrackKind::Nvtx(t, domain)
            }
            // Span lanes are `spans`, `spans #2`, …; any other child of a labels track is a
            // label key's state slices.
            (_, Some(TrackKind::Labels(scope))) if name.starts_with(TrackName::Spans.text()) => {
                TrackKind::SpanLane(scope)
            }
            (_, Some(TrackKind::Labels(scope))) => TrackKind::State(scope, name),
            _ => TrackKind::Other,
        }
    };
    tracks.get_or_default(uuid).kind = Some(kind);
    Ok(())
}
