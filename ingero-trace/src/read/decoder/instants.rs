//! Records read from instants (lifecycle events on thread tracks, annotations on labels
//! tracks, the session and statistics on the `ingero` track, driver messages on the `NVIDIA
//! driver` track) and from request spans.

use std::sync::Arc;

use super::annotations;
use super::args::{find, u64_of};
use super::nvtx;
use super::track_kind::TrackKind;
use super::values::Val;
use crate::clock_quality::ClockQuality;
use crate::model::NvtxKind;
use crate::model::{
    AnnotationRecord, DriverMessage, FinalStats, LifecycleRecord, Placement, ProcessOp, ReadRecord,
    SessionInfo, SessionRecord,
};
use crate::read::seek::{Mark, MarkKind};
use crate::vocab::{ArgKey, DriverArg, Instant, LABEL_PREFIX, SeekArg, SessionArg, StatsGroup};

/// The seek mark an instant named `name` on a track of `kind` is, if it is one (see
/// `read::seek`): not a record, but what the reader's index is made of.
pub(super) fn seek_mark(
    kind: Option<&TrackKind>,
    (sequence, ts_ns): (u32, u64),
    name: &str,
    args: &[(Arc<str>, Val)],
) -> Option<Mark> {
    let kind = match (kind, Instant::from_text(name)) {
        (Some(TrackKind::Ingero), Some(Instant::Restart)) => MarkKind::Restart,
        (Some(TrackKind::Ingero), Some(Instant::FileEnd)) => MarkKind::FileEnd,
        _ => return None,
    };
    let num = |key: SeekArg| {
        args.iter()
            .find(|(k, _)| &**k == key.text())
            .and_then(|(_, v)| v.as_u64())
    };
    let from = num(SeekArg::RecordsFromNs);
    let to = num(SeekArg::RecordsToNs);
    let labels = num(SeekArg::LabelsFromNs).zip(num(SeekArg::LabelsToNs));
    Some(Mark {
        kind,
        ts_ns,
        records: from.zip(to),
        open_from: num(SeekArg::OpenFromNs),
        labels,
        labels_open: num(SeekArg::LabelsOpen),
        sequence,
    })
}

/// Writes the record an instant named `name` on a track of `kind` stands for into `slot`;
/// `false` (slot untouched) for an instant of no interest.
pub(super) fn instant(
    kind: Option<&TrackKind>,
    at: Placement,
    ts: u64,
    name: &str,
    args: &[(Arc<str>, Val)],
    slot: &mut ReadRecord,
) -> bool {
    match (kind, Instant::from_text(name)) {
        (Some(TrackKind::Thread(t)), _) => {
            let Some(op) = ProcessOp::from_text(name) else {
                return false;
            };
            *slot = ReadRecord::Lifecycle(LifecycleRecord {
                ts_ns: ts,
                thread: t.clone(),
                op,
                other_pid: u64_of(args, ArgKey::OtherPid).unwrap_or(0) as u32,
                clone_flags_known: matches!(
                    find(args, ArgKey::CloneFlagsKnown),
                    Some(Val::B(true))
                ),
                text: find(args, ArgKey::Text)
                    .and_then(Val::as_str)
                    .unwrap_or("")
                    .to_owned(),
                cpu: at.cpu,
                cgroup_id: at.cgroup_id,
            });
        }
        (Some(TrackKind::Nvtx(t, domain)), _) => {
            *slot = ReadRecord::Nvtx(nvtx::record(
                NvtxKind::Mark,
                (t.pid, t.tid),
                domain.as_deref(),
                (ts, ts),
                name,
                args,
            ));
        }
        (Some(TrackKind::Driver), _) => {
            let arg = |key: DriverArg| {
                args.iter()
                    .find(|(k, _)| &**k == key.text())
                    .map(|(_, v)| v)
            };
            *slot = ReadRecord::Driver(DriverMessage {
                ts_ns: ts,
                text: arg(DriverArg::Text)
                    .and_then(Val::as_str)
                    .unwrap_or("")
                    .to_owned(),
                truncated: matches!(arg(DriverArg::Truncated), Some(Val::B(true))),
            });
        }
        (Some(TrackKind::Labels(scope)), Some(Instant::Annotation)) => {
            *slot = ReadRecord::Annotation(annotation(*scope, ts, None, args));
        }
        (Some(TrackKind::Ingero), Some(Instant::Session)) => {
            *slot = ReadRecord::Session(session(ts, args));
        }
        (Some(TrackKind::Ingero), Some(Instant::Statistics)) => {
            *slot = ReadRecord::Statistics(statistics(args));
        }
        _ => return false,
    }
    true
}

fn session(ts: u64, args: &[(Arc<str>, Val)]) -> SessionRecord {
    let s = |k: ArgKey| find(args, k).and_then(Val::as_str).unwrap_or("").to_owned();
    let list = |k: ArgKey| {
        let v = s(k);
        if v.is_empty() {
            Vec::new()
        } else {
            v.split('\n').map(str::to_owned).collect()
        }
    };
    let named = |k: SessionArg| {
        args.iter()
            .find(|(name, _)| &**name == k.text())
            .map(|(_, v)| v)
    };
    SessionRecord {
        ts_ns: ts,
        info: SessionInfo {
            host: s(ArgKey::Host),
            kernel: s(ArgKey::Kernel),
            agent_version: s(ArgKey::AgentVersion),
            command_line: s(ArgKey::CommandLine),
            targets: list(ArgKey::Targets),
            probes: list(ArgKey::Probes),
            machine_name: named(SessionArg::MachineName)
                .and_then(Val::as_str)
                .unwrap_or("")
                .to_owned(),
            // Written together; older recordings have none of them.
            clock: named(SessionArg::ClockMaxErrorUs)
                .and_then(Val::as_u64)
                .map(|maxerror_us| ClockQuality {
                    maxerror_us,
                    esterror_us: named(SessionArg::ClockEstErrorUs)
                        .and_then(Val::as_u64)
                        .unwrap_or(0),
                    unsynchronized: matches!(
                        named(SessionArg::ClockUnsynchronized),
                        Some(Val::B(true))
                    ),
                }),
        },
        machine_id: u64_of(args, ArgKey::MachineId).unwrap_or(0) as u32,
        file_index: u64_of(args, ArgKey::FileIndex).unwrap_or(0),
        started_realtime_ns: u64_of(args, ArgKey::StartedRealtimeNs).unwrap_or(0),
    }
}

fn statistics(args: &[(Arc<str>, Val)]) -> FinalStats {
    let mut st = FinalStats::default();
    for (k, v) in args {
        let v = v.as_u64().unwrap_or(0);
        let groups = [
            (StatsGroup::Events, &mut st.events),
            (StatsGroup::Drops, &mut st.drops),
            (StatsGroup::Rejected, &mut st.rejected),
            (StatsGroup::Recorder, &mut st.recorder),
        ];
        for (group, list) in groups {
            if let Some(name) = k.strip_prefix(group.text()) {
                list.push((name.to_owned(), v));
            }
        }
    }
    st
}

/// An annotation: an instant (`end: None`) or a request span, from its arguments.
pub(super) fn annotation(
    scope: Option<u32>,
    ts: u64,
    end: Option<u64>,
    args: &[(Arc<str>, Val)],
) -> AnnotationRecord {
    let labels = args
        .iter()
        .filter_map(|(k, v)| {
            Some((
                k.strip_prefix(LABEL_PREFIX)?.to_owned(),
                v.as_str().unwrap_or("").to_owned(),
            ))
        })
        .collect();
    let start_time = u64_of(args, ArgKey::ScopeStartTime);
    AnnotationRecord {
        labels,
        scope: annotations::scoped(scope, start_time),
        ts_ns: ts,
        end_ns: end,
        provenance_uid: u64_of(args, ArgKey::ProvenanceUid).unwrap_or(0) as u32,
        provenance_pid: u64_of(args, ArgKey::ProvenancePid).map(|p| p as u32),
        provenance_gid: u64_of(args, ArgKey::ProvenanceGid).unwrap_or(0) as u32,
        received_ns: u64_of(args, ArgKey::ReceivedNs).unwrap_or(0),
        realtime_ns: u64_of(args, ArgKey::RealtimeNs).unwrap_or(0),
        end_realtime_ns: u64_of(args, ArgKey::EndRealtimeNs),
        stamped_by_agent: matches!(find(args, ArgKey::StampedByAgent), Some(Val::B(true))),
    }
}
