//! What the user selected: a time range on the trace clock (`--since`, `--from`, `--to`,
//! `--at`), processes (`--pid`), operations (`--op`) and labels (`--label k=v`, all must
//! match). [`SelectionSpec`] is the text as typed; [`Selection`] is it resolved against a
//! recording.

use anyhow::{Context, Result, bail};
use ingero_ebpf::{CudaOp, cuda_ops::MAX_OP};

use super::clock::TraceClock;
use super::labels::{LabelIndex, ValueId};
use super::timespec;
use ingero_trace::read::TimeRange;

/// `--at T` looks at this much time either side of T.
pub const AT_WINDOW_NS: u64 = 1_000_000_000;

/// The filters as typed on the command line.
#[derive(Clone, Debug, Default)]
pub struct SelectionSpec {
    pub since: Option<String>,
    pub from: Option<String>,
    pub to: Option<String>,
    pub at: Option<String>,
    pub pids: Vec<u32>,
    pub ops: Vec<String>,
    pub labels: Vec<String>,
    /// How far before the window the labels the report looks up reach.
    pub label_reach: LabelReach,
}

/// How far before a time window the labels a report looks up reach: what the first pass
/// reads and keeps of the labels (see `index::FirstPass::finish`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LabelReach {
    /// The calls and off-CPU intervals the window holds are labelled by their starts, some
    /// before it: from the earliest start the seek marks allow (`query`, `explain`).
    #[default]
    Window,
    /// Also the requests and NVTX ranges it lists, by their starts (`query --events`).
    Listed,
    /// The recording's start (`query --memory`: the allocations still held in the window
    /// are labelled when they were made).
    Start,
}

/// The filters resolved against one recording.
#[derive(Clone, Debug)]
pub struct Selection {
    pub range: TimeRange,
    /// `--at`, on the trace clock.
    pub at: Option<u64>,
    pub pids: Vec<u32>,
    /// The ops `--op` names; empty: every op.
    pub op_mask: OpMask,
    /// `--label k=v` pairs (a value not in the recording matches nothing).
    pub labels: Vec<(String, Option<ValueId>)>,
}

/// A set of ops: a bit per `CudaOp` value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpMask([u64; MAX_OP / 64]);

impl OpMask {
    pub fn insert(&mut self, op: CudaOp) {
        let v = op as usize;
        self.0[v / 64] |= 1 << (v % 64);
    }

    #[inline]
    pub fn contains(&self, op: CudaOp) -> bool {
        let v = op as usize;
        self.0[v / 64] & (1 << (v % 64)) != 0
    }

    /// No op named: the filter admits every op.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.0.iter().all(|w| *w == 0)
    }
}

/// Resolves a `--op` name: `cudaMalloc`, `Malloc` or `malloc`.
pub fn parse_op(name: &str) -> Result<CudaOp> {
    let want = name.trim().to_ascii_lowercase();
    let bare = want.strip_prefix("cuda").unwrap_or(&want).to_owned();
    CudaOp::ALL
        .iter()
        .copied()
        .find(|op| {
            let n = op.name().to_ascii_lowercase();
            n == want || n.strip_prefix("cuda") == Some(bare.as_str())
        })
        .with_context(|| {
            let names: Vec<&str> = CudaOp::ALL.iter().map(|o| o.name()).collect();
            format!("unknown operation `{name}`; known: {}", names.join(", "))
        })
}

impl SelectionSpec {
    /// Whether a time flag narrows the window (`--since`, `--from`, `--to`, `--at`).
    pub fn has_time_window(&self) -> bool {
        self.since.is_some() || self.from.is_some() || self.to.is_some() || self.at.is_some()
    }

    /// The time window (`--since`, `--from`, `--to`, `--at`) on `clock`, and `--at`'s point.
    /// An error when it is empty.
    pub fn window(&self, clock: &TraceClock) -> Result<(TimeRange, Option<u64>)> {
        let mut start = clock.start_ns;
        let mut end = clock.end_ns;
        if let Some(s) = &self.since {
            let d = humantime::parse_duration(s.trim())
                .with_context(|| format!("--since `{s}`: expected a duration such as 5m"))?;
            let d = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
            start = start.max(clock.end_ns.saturating_sub(d));
        }
        let point = |text: &str, flag: &str| -> Result<u64> {
            timespec::parse(text)
                .and_then(|s| clock.resolve(s))
                .with_context(|| format!("{flag} `{text}`"))
        };
        if let Some(f) = &self.from {
            start = start.max(point(f, "--from")?);
        }
        if let Some(t) = &self.to {
            end = end.min(point(t, "--to")?);
        }
        let at = match &self.at {
            Some(a) => {
                let t = point(a, "--at")?;
                start = start.max(t.saturating_sub(AT_WINDOW_NS));
                end = end.min(t.saturating_add(AT_WINDOW_NS));
                Some(t)
            }
            None => None,
        };
        if start > end {
            bail!(
                "the selected time range is empty (it ends before it starts, or lies outside the recording)"
            );
        }
        Ok((TimeRange::new(start, end), at))
    }

    /// The selection with its time window already placed on the recording's clock (by
    /// [`Self::window`], or for one of several hosts from the job's REALTIME window); the
    /// other filters resolved against `labels`.
    pub fn resolve_in(
        &self,
        range: TimeRange,
        at: Option<u64>,
        labels: &LabelIndex,
    ) -> Result<Selection> {
        let mut op_mask = OpMask::default();
        for o in &self.ops {
            for name in o.split(',').filter(|n| !n.trim().is_empty()) {
                op_mask.insert(parse_op(name)?);
            }
        }
        let labels = self
            .labels
            .iter()
            .map(|l| {
                let (k, v) = l
                    .split_once('=')
                    .with_context(|| format!("--label `{l}`: expected KEY=VALUE"))?;
                Ok((k.trim().to_owned(), labels.value_id(v.trim())))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Selection {
            range,
            at,
            pids: self.pids.clone(),
            op_mask,
            labels,
        })
    }
}

impl Selection {
    /// Everything in the recording.
    pub fn all(clock: &TraceClock) -> Selection {
        Selection {
            range: TimeRange::new(clock.start_ns, clock.end_ns),
            at: None,
            pids: Vec::new(),
            op_mask: OpMask::default(),
            labels: Vec::new(),
        }
    }

    #[inline]
    pub fn admits_pid(&self, pid: u32) -> bool {
        self.pids.is_empty() || self.pids.contains(&pid)
    }

    #[inline]
    pub fn admits_op(&self, op: CudaOp) -> bool {
        self.op_mask.is_empty() || self.op_mask.contains(op)
    }

    /// Whether an event of `pid` at `t` carries every `--label`.
    pub fn admits_labels(
        &self,
        index: &LabelIndex,
        pid: u32,
        t: u64,
        scratch: &mut Vec<ValueId>,
    ) -> bool {
        self.labels.iter().all(|(k, v)| {
            let (Some(v), Some(key)) = (v, index.key(k)) else {
                return false;
            };
            scratch.clear();
            key.values_at(pid, t, scratch);
            scratch.contains(v)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The window on one recording's clock, then the selection in it: what `query` does.
    fn resolve(spec: &SelectionSpec) -> Result<Selection> {
        let (range, at) = spec.window(&clock())?;
        spec.resolve_in(range, at, &LabelIndex::default())
    }

    fn clock() -> TraceClock {
        TraceClock {
            start_ns: 1_000,
            end_ns: 601_000_001_000,
            real_minus_mono: None,
        }
    }

    #[test]
    fn since_is_relative_to_the_end_of_the_recording() {
        let spec = SelectionSpec {
            since: Some("5m".into()),
            ..Default::default()
        };
        let s = resolve(&spec).expect("resolves");
        assert_eq!(s.range.start_ns, 301_000_001_000);
        assert_eq!(s.range.end_ns, 601_000_001_000);
    }

    #[test]
    fn offsets_ops_and_labels_resolve() {
        let spec = SelectionSpec {
            from: Some("+1s".into()),
            to: Some("+2s".into()),
            ops: vec!["cudaMalloc,launchkernel".into()],
            labels: vec!["step=42".into()],
            ..Default::default()
        };
        let s = resolve(&spec).expect("resolves");
        assert_eq!(s.range, TimeRange::new(1_000_001_000, 2_000_001_000));
        assert!(s.admits_op(CudaOp::Malloc) && s.admits_op(CudaOp::LaunchKernel));
        assert!(!s.admits_op(CudaOp::Free));
        assert_eq!(s.labels, vec![("step".to_owned(), None)]);
        let at = resolve(&SelectionSpec {
            at: Some("+10s".into()),
            ..Default::default()
        })
        .expect("resolves");
        assert_eq!(at.at, Some(10_000_001_000));
        assert_eq!(at.range, TimeRange::new(9_000_001_000, 11_000_001_000));
        let bad = SelectionSpec {
            from: Some("+20m".into()),
            ..Default::default()
        };
        assert!(resolve(&bad).is_err());
        assert!(parse_op("cudaFrobnicate").is_err());
    }
}
