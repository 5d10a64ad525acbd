//! The timeline model: what the agent hands the writer ([`TimelineRecord`]: a probe [`Event`],
//! an [`AnnotationRecord`], an [`NvtxRecord`] or a [`DriverMessage`]) and what the reader yields
//! ([`ReadRecord`]).

mod cuda_args;
mod driver;
mod event;
mod kernel;
mod nccl;
mod nvtx;
mod physical;
mod placement;
mod recorded;
mod session;
mod timeline;
mod xid;

pub use cuda_args::{
    ArgsShape, Captured, CudaArgs, LaunchConfig, MemKind, MemLocation, MemcpyKind, call_error_name,
    call_failed, counts_for_memory, cuda_error_name,
};
pub use driver::DriverMessage;
pub use event::{Comm, CudaCall, Event, OffCpu, ProcessEvent, ProcessOp, Task};
pub use kernel::{CallDetail, KernelName, NameSource};
pub use nccl::{
    CommSplit, Communicator, NcclRedOp, NcclType, collective_flow, nccl_accepted, nccl_error_name,
    split_id, unique_id,
};
pub use nvtx::{NvtxKind, NvtxPayload, NvtxRecord};
pub use physical::{PhysicalBlock, PhysicalChange, PhysicalMemory};
pub(crate) use placement::Placement;
pub use recorded::{
    CounterKind, CounterSample, CudaCallRecord, LabelInterval, LifecycleRecord, OffCpuRecord,
    ReadRecord, SessionRecord, ThreadRef,
};
pub use session::{FinalStats, SessionInfo};
pub use timeline::{AnnotationRecord, Scope, TimelineRecord};
pub use xid::{XidInfo, XidReport, XidSeverity, parse_xid, xid_info};
