//! Encoding of NVTX ranges and marks, on the plain sequence (a first pass over the file learns
//! them, as it learns annotation spans, so `query --group-by nvtx` needs no chunk opened):
//!
//! - a push/pop range is a slice named by its message on its thread's NVTX track for its
//!   domain (`NVTX`, `NVTX: <domain>`; child of the thread's track, so it shows under the
//!   thread's CUDA calls as in Nsight Systems). Ranges arrive complete, inner ones first (at
//!   their pop): both ends are written at once, and nesting is by time;
//! - a start/end range is a slice on a lane of its process (`NVTX ranges`, `NVTX ranges #2`,
//!   …: the first lane free at its start, so ranges that overlap stay visible);
//! - a mark is an instant on its thread's NVTX track.
//!
//! Each carries its category `nvtx` and the [`NvtxArg`]s that are set.

use super::error::Result;
use super::labels::LabelSink;
use super::recorder::Recorder;
use super::tracks::{Hint, TrackKey};
use crate::model::{NvtxKind, NvtxPayload, NvtxRecord};
use crate::proto::{DebugAnnotation, TrackEvent};
use crate::vocab::{Category, NvtxArg};

impl Recorder {
    /// Writes one NVTX range or mark (see the module docs).
    pub(super) fn write_nvtx(&mut self, n: &NvtxRecord) -> Result<()> {
        let hint = Hint {
            pid: n.pid,
            comm: &n.thread_name,
        };
        let key = match n.kind {
            NvtxKind::PushPop | NvtxKind::Mark => TrackKey::Nvtx(n.tid, n.domain.clone()),
            NvtxKind::StartEnd => TrackKey::NvtxLane(n.pid, self.nvtx_lane(n)),
        };
        let track = LabelSink::track(self, &key, hint)?;
        let te = TrackEvent {
            name: Some(n.message.clone()),
            category_iids: vec![Category::Nvtx.iid()],
            debug_annotations: nvtx_args(self, n),
            ..Default::default()
        };
        match n.kind {
            NvtxKind::Mark => self.instant(track, n.ts_ns, te),
            NvtxKind::PushPop | NvtxKind::StartEnd => {
                self.complete(track, n.ts_ns, n.end_ns.max(n.ts_ns), te)
            }
        }
    }

    /// The first lane of the range's process free at its start, reserved until its end.
    fn nvtx_lane(&mut self, n: &NvtxRecord) -> u32 {
        let lanes = self.nvtx_lanes.entry(n.pid).or_default();
        let idx = match lanes.iter().position(|busy_until| *busy_until <= n.ts_ns) {
            Some(i) => i,
            None => {
                lanes.push(0);
                lanes.len() - 1
            }
        };
        lanes[idx] = n.end_ns;
        idx as u32
    }
}

/// The arguments that are set, by their interned names.
fn nvtx_args(sink: &mut impl LabelSink, n: &NvtxRecord) -> Vec<DebugAnnotation> {
    let mut out = Vec::with_capacity(8);
    let mut arg = |key: NvtxArg, value: DebugAnnotation| out.push(sink.named(key.text(), value));
    let uint = |v: u64| DebugAnnotation {
        uint_value: Some(v),
        ..Default::default()
    };
    let text = |v: &str| DebugAnnotation {
        string_value: Some(v.to_owned()),
        ..Default::default()
    };
    let yes = || DebugAnnotation {
        bool_value: Some(true),
        ..Default::default()
    };
    arg(NvtxArg::Pid, uint(u64::from(n.pid)));
    arg(NvtxArg::Tid, uint(u64::from(n.tid)));
    if let Some(d) = &n.domain {
        arg(NvtxArg::Domain, text(d));
    }
    if n.category != 0 {
        arg(NvtxArg::Category, uint(u64::from(n.category)));
    }
    if let Some(c) = &n.category_name {
        arg(NvtxArg::CategoryName, text(c));
    }
    if let Some(c) = n.color {
        arg(NvtxArg::Color, uint(u64::from(c)));
    }
    match n.payload {
        Some(NvtxPayload::U64(v)) => arg(NvtxArg::Payload, uint(v)),
        Some(NvtxPayload::I64(v)) => arg(
            NvtxArg::Payload,
            DebugAnnotation {
                int_value: Some(v),
                ..Default::default()
            },
        ),
        Some(NvtxPayload::F64(v)) => arg(
            NvtxArg::Payload,
            DebugAnnotation {
                double_value: Some(v),
                ..Default::default()
            },
        ),
        None => {}
    }
    if let Some(t) = n.end_tid {
        arg(NvtxArg::EndTid, uint(u64::from(t)));
    }
    if n.kind == NvtxKind::PushPop {
        arg(NvtxArg::Depth, uint(u64::from(n.depth)));
    }
    if n.truncated {
        arg(NvtxArg::Truncated, yes());
    }
    if n.unclosed {
        arg(NvtxArg::Unclosed, yes());
    }
    out
}
