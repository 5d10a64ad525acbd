//! The recorder's own instants at the ends of a session: the `session` packet (host, kernel,
//! agent, command line, targets, probes, machine id, file index, start time, and the machine's
//! name and clock error bound) at the start of each file, and the `statistics` packet (events,
//! drops, rejections, the recorder's own counts) at the end.

use super::error::Result;
use super::identity;
use super::recorder::Recorder;
use super::tracks::{Hint, TrackKey};
use crate::model::FinalStats;
use crate::proto::DebugAnnotation;
use crate::vocab::{ArgKey, Instant, StatsGroup};

impl Recorder {
    pub(super) fn write_session(&mut self, ts: u64) -> Result<()> {
        let track = self.track(&TrackKey::Ingero, Hint { pid: 0, comm: "" })?;
        let s = &self.cfg.session;
        let strings = [
            (ArgKey::Host, s.host.clone()),
            (ArgKey::Kernel, s.kernel.clone()),
            (ArgKey::AgentVersion, s.agent_version.clone()),
            (ArgKey::CommandLine, s.command_line.clone()),
            (ArgKey::Targets, s.targets.join("\n")),
            (ArgKey::Probes, s.probes.join("\n")),
        ];
        let mut args: Vec<DebugAnnotation> = strings
            .into_iter()
            .map(|(k, v)| DebugAnnotation {
                name_iid: Some(k.iid()),
                string_value: Some(v),
                ..Default::default()
            })
            .collect();
        for (k, v) in [
            (ArgKey::MachineId, u64::from(self.machine_id)),
            (ArgKey::FileIndex, self.counters.files.saturating_sub(1)),
            (ArgKey::StartedRealtimeNs, self.started_realtime_ns),
        ] {
            args.push(DebugAnnotation {
                name_iid: Some(k.iid()),
                uint_value: Some(v),
                ..Default::default()
            });
        }
        args.extend(identity::session_args(s));
        self.ingero_instant(track, ts, Instant::Session, args)
    }

    pub(super) fn write_statistics(&mut self, ts: u64, stats: &FinalStats) -> Result<()> {
        let track = self.track(&TrackKey::Ingero, Hint { pid: 0, comm: "" })?;
        let c = self.counters;
        let own = [
            ("records", c.records),
            ("late", c.late),
            ("clamped", c.clamped),
            ("files", c.files),
            ("deleted_files", c.deleted_files),
        ];
        let mut args = Vec::new();
        let groups: [(&str, &[(String, u64)]); 4] = [
            (StatsGroup::Events.text(), &stats.events),
            (StatsGroup::Drops.text(), &stats.drops),
            (StatsGroup::Rejected.text(), &stats.rejected),
            (StatsGroup::Recorder.text(), &stats.recorder),
        ];
        for (p, list) in groups {
            for (k, v) in list {
                args.push(DebugAnnotation {
                    name: Some(format!("{p}{k}")),
                    uint_value: Some(*v),
                    ..Default::default()
                });
            }
        }
        for (k, v) in own {
            args.push(DebugAnnotation {
                name: Some(format!("{}{k}", StatsGroup::Recorder.text())),
                uint_value: Some(v),
                ..Default::default()
            });
        }
        self.ingero_instant(track, ts, Instant::Statistics, args)
    }
}
