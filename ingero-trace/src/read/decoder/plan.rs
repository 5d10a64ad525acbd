//! What a slice begin resolves to: a [`Plan`] chosen from its track and name, and the
//! [`OpenBody`] kept on its track until the slice ends (a CUDA call's or an off-CPU
//! interval's fields resolved at the begin, or the general path's names and values).

use std::sync::Arc;

use ingero_ebpf::{CudaOp, OffCpuReason};

use super::args::Args;
use super::track_kind::TrackKind;
use super::values::Val;
use crate::model::{
    AnnotationRecord, ArgsShape, CallDetail, Captured, CudaArgs, KernelName, MemLocation,
    NameSource, NcclType,
};
use crate::vocab::{ArgKey, EventName, parse_nccl};

/// What a slice begin resolves to on the interned paths.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Plan {
    Cuda(CudaOp),
    /// A slice on a thread track named outside the vocabulary: a launch named by its kernel,
    /// whose op is its `op` argument.
    CudaNamedByArg,
    OffCpu(OffCpuReason),
}

impl Plan {
    /// The plan for a slice of `name` on `track`; `None` for the general path.
    #[inline]
    pub(super) fn of(track: Option<&TrackKind>, name: Option<EventName>) -> Option<Plan> {
        let track = track?;
        let Some(name) = name else {
            return matches!(track, TrackKind::Thread(_)).then_some(Plan::CudaNamedByArg);
        };
        match (track, name) {
            (TrackKind::Thread(_), EventName::Op(op)) => Some(Plan::Cuda(op)),
            (TrackKind::Thread(_), _) => None,
            (TrackKind::OffCpu(_), EventName::OffCpu(reason)) => Some(Plan::OffCpu(reason)),
            // The general path reads any other name on an off-CPU track as blocked.
            (TrackKind::OffCpu(_), EventName::Op(_)) => Some(Plan::OffCpu(OffCpuReason::Blocked)),
            _ => None,
        }
    }

    /// Resolves the slice's arguments now, so its end only adds the time and the thread;
    /// `None` when the plan does not hold (a thread slice without an `op`: the general path).
    #[inline]
    pub(super) fn prepare(self, a: &impl Args) -> Option<OpenBody> {
        Some(match self {
            Plan::Cuda(op) => OpenBody::Cuda(CudaPrep::new(op, a)),
            Plan::CudaNamedByArg => OpenBody::Cuda(CudaPrep::new(op_argument(a)?, a)),
            Plan::OffCpu(reason) => OpenBody::OffCpu(OffPrep::new(reason, a)),
        })
    }
}

/// The op a slice named by something else carries in its `op` argument.
pub(super) fn op_argument(a: &impl Args) -> Option<CudaOp> {
    EventName::op_from_text(a.text(ArgKey::Op)?)
}

/// A CUDA call's fields but time and thread.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct CudaPrep {
    pub(super) op: CudaOp,
    pub(super) ret: i32,
    pub(super) args: CudaArgs,
    pub(super) detail: CallDetail,
    pub(super) clamped: Option<u64>,
}

impl CudaPrep {
    #[inline]
    pub(super) fn new(op: CudaOp, a: &impl Args) -> CudaPrep {
        CudaPrep {
            op,
            ret: a
                .i(ArgKey::Ret)
                .and_then(|v| i32::try_from(v).ok())
                .unwrap_or(0),
            args: cuda_args(op, a),
            detail: call_detail(op, a),
            clamped: a.u(ArgKey::ClampedFromNs),
        }
    }
}

/// A call's context from its `symbol`, `parent` and `kernel*` arguments.
fn call_detail(op: CudaOp, a: &impl Args) -> CallDetail {
    let kernel = a.arc(ArgKey::Kernel).map(|demangled| {
        let truncated = demangled.ends_with('…');
        KernelName {
            mangled: a
                .arc(ArgKey::KernelMangled)
                .unwrap_or_else(|| demangled.clone()),
            source: a
                .text(ArgKey::KernelSource)
                .and_then(NameSource::from_text)
                .unwrap_or(NameSource::Registration),
            truncated,
            demangled,
        }
    });
    CallDetail {
        symbol: a
            .text(ArgKey::Symbol)
            .and_then(|t| CallDetail::symbol_of(op, t)),
        parent: a.text(ArgKey::Parent).and_then(EventName::op_from_text),
        kernel: kernel.map(Arc::new),
    }
}

/// An off-CPU interval's fields but time and thread.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct OffPrep {
    pub(super) reason: OffCpuReason,
    pub(super) prev_state: i64,
    pub(super) next_tid: u32,
    pub(super) cpu: u32,
    pub(super) next_comm: Option<Arc<str>>,
    pub(super) clamped: Option<u64>,
}

impl OffPrep {
    pub(super) fn new(reason: OffCpuReason, a: &impl Args) -> OffPrep {
        OffPrep {
            reason,
            prev_state: a.i(ArgKey::PrevState).unwrap_or(0),
            next_tid: a.u(ArgKey::NextTid).unwrap_or(0) as u32,
            cpu: a.u(ArgKey::Cpu).unwrap_or(0) as u32,
            next_comm: a.arc(ArgKey::NextComm),
            clamped: a.u(ArgKey::ClampedFromNs),
        }
    }
}

pub(super) enum OpenBody {
    /// A CUDA call on a thread track, resolved at its begin.
    Cuda(CudaPrep),
    /// An off-CPU interval on an off-CPU track, resolved at its begin.
    OffCpu(OffPrep),
    General {
        name: Arc<str>,
        args: Vec<(Arc<str>, Val)>,
    },
    /// A request span of the writer's on a span lane, read at its begin (`annotations.rs`):
    /// its record but the end and the scope, and the scope's start time it carried.
    Annotation(Box<(AnnotationRecord, Option<u64>)>),
}

/// Rebuilds an op's arguments from its debug annotations (absent optional ones stay `None`).
fn cuda_args(op: CudaOp, a: &impl Args) -> CudaArgs {
    let u = |k: ArgKey| a.u(k);
    let dim = |k: ArgKey| a.dim(k).unwrap_or([0; 3]);
    match ArgsShape::of(op) {
        ArgsShape::Alloc => CudaArgs::Alloc {
            size: u(ArgKey::Size).unwrap_or(0),
            ptr: u(ArgKey::Ptr),
            stream: u(ArgKey::Stream),
        },
        ArgsShape::Free => CudaArgs::Free {
            ptr: u(ArgKey::Ptr).unwrap_or(0),
            size: u(ArgKey::Size),
            stream: u(ArgKey::Stream),
        },
        ArgsShape::HostAlloc => CudaArgs::HostAlloc {
            size: u(ArgKey::Size).unwrap_or(0),
            ptr: u(ArgKey::Ptr),
        },
        ArgsShape::HostFree => CudaArgs::HostFree {
            ptr: u(ArgKey::Ptr).unwrap_or(0),
        },
        ArgsShape::PhysicalCreate => CudaArgs::PhysicalCreate {
            size: u(ArgKey::Size).unwrap_or(0),
            handle: u(ArgKey::Handle),
            location: a
                .text(ArgKey::Location)
                .map_or(MemLocation::Unknown(0), MemLocation::from_text),
        },
        ArgsShape::PhysicalHandle => CudaArgs::PhysicalHandle {
            handle: u(ArgKey::Handle),
            ptr: u(ArgKey::Ptr),
        },
        ArgsShape::AddressRange => CudaArgs::AddressRange {
            ptr: u(ArgKey::Ptr),
            size: u(ArgKey::Size).unwrap_or(0),
            handle: u(ArgKey::Handle),
        },
        ArgsShape::HostRegister => CudaArgs::HostRegister {
            ptr: u(ArgKey::Ptr).unwrap_or(0),
            size: u(ArgKey::Size).unwrap_or(0),
            flags: u(ArgKey::Flags).map_or(0, |f| u32::try_from(f).unwrap_or(u32::MAX)),
        },
        ArgsShape::HostUnregister => CudaArgs::HostUnregister {
            ptr: u(ArgKey::Ptr).unwrap_or(0),
        },
        ArgsShape::Launch => match a.launch(ArgKey::Launch) {
            Some(l) => CudaArgs::Launch {
                func: l.func,
                grid: l.grid,
                block: l.block,
                shared_mem: l.shared_mem,
                stream: l.stream,
            },
            // Recordings from before the `launch` argument.
            None => CudaArgs::Launch {
                func: u(ArgKey::Func).unwrap_or(0),
                grid: dim(ArgKey::Grid),
                block: dim(ArgKey::Block),
                shared_mem: u(ArgKey::SharedMem).unwrap_or(0),
                stream: u(ArgKey::Stream).unwrap_or(0),
            },
        },
        ArgsShape::GraphLaunch => CudaArgs::GraphLaunch {
            graph_exec: u(ArgKey::GraphExec).unwrap_or(0),
            stream: u(ArgKey::Stream).unwrap_or(0),
            captured: u(ArgKey::KernelNodes).map(|n| Captured {
                kernel_nodes: u32::try_from(n).unwrap_or(u32::MAX),
                stream: u(ArgKey::CaptureStream).unwrap_or(0),
            }),
        },
        ArgsShape::CaptureBegin => CudaArgs::CaptureBegin {
            stream: u(ArgKey::Stream).unwrap_or(0),
            mode: u(ArgKey::CaptureMode).and_then(|m| u32::try_from(m).ok()),
        },
        ArgsShape::CaptureEnd => CudaArgs::CaptureEnd {
            stream: u(ArgKey::Stream).unwrap_or(0),
            graph: u(ArgKey::Graph),
            kernel_nodes: u(ArgKey::KernelNodes).and_then(|n| u32::try_from(n).ok()),
        },
        ArgsShape::GraphInstantiate => CudaArgs::GraphInstantiate {
            graph: u(ArgKey::Graph).unwrap_or(0),
            graph_exec: u(ArgKey::GraphExec),
        },
        ArgsShape::ModuleLoad => CudaArgs::ModuleLoad {
            module: u(ArgKey::Module),
        },
        ArgsShape::GetFunction => CudaArgs::GetFunction {
            owner: u(ArgKey::Owner).unwrap_or(0),
            function: u(ArgKey::Function),
        },
        ArgsShape::Memcpy => CudaArgs::Memcpy {
            count: u(ArgKey::Count).unwrap_or(0),
            kind: a.kind(ArgKey::Kind),
            stream: u(ArgKey::Stream),
            width_height: u(ArgKey::Width).zip(u(ArgKey::Height)),
            // Absent in recordings from before host pointers, and for copies without one.
            host_ptr: u(ArgKey::HostPtr),
        },
        ArgsShape::MemcpyPeer => CudaArgs::MemcpyPeer {
            count: u(ArgKey::Count).unwrap_or(0),
            dst_device: a.i(ArgKey::DstDevice).unwrap_or(0) as i32,
            src_device: a.i(ArgKey::SrcDevice).unwrap_or(0) as i32,
            stream: u(ArgKey::Stream),
        },
        ArgsShape::Memset => CudaArgs::Memset {
            count: u(ArgKey::Count).unwrap_or(0),
            stream: u(ArgKey::Stream),
        },
        ArgsShape::Sync => CudaArgs::Sync {
            stream: u(ArgKey::Stream),
            event: u(ArgKey::Event),
        },
        ArgsShape::Collective
        | ArgsShape::PointToPoint
        | ArgsShape::CommCreate
        | ArgsShape::CommEnd => {
            // An `nccl` argument that is missing or does not parse leaves the defaults (an
            // unknown type, communicator 0) rather than losing the call.
            let f = a
                .text(ArgKey::Nccl)
                .and_then(parse_nccl)
                .unwrap_or_default();
            let (count, stream) = (
                u(ArgKey::Count).unwrap_or(0),
                u(ArgKey::Stream).unwrap_or(0),
            );
            let datatype = f.datatype.unwrap_or(NcclType(u32::MAX));
            match ArgsShape::of(op) {
                ArgsShape::Collective => CudaArgs::Collective {
                    count,
                    datatype,
                    red_op: f.red_op,
                    root: f.root,
                    on: f.on,
                    stream,
                    seq: u(ArgKey::Seq),
                },
                ArgsShape::PointToPoint => CudaArgs::PointToPoint {
                    count,
                    datatype,
                    peer: f.peer.unwrap_or(-1),
                    on: f.on,
                    stream,
                },
                ArgsShape::CommCreate => CudaArgs::CommCreate {
                    made: f.on,
                    split: f.split,
                },
                _ => CudaArgs::CommEnd { comm: f.on.comm },
            }
        }
        ArgsShape::Group => CudaArgs::Group,
    }
}
