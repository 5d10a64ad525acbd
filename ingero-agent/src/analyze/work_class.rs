//! What kind of work a CUDA call is, for attributing time: [`WorkClass`] sorts every op into
//! synchronisation, copies (memcpy and memset), allocation (malloc and free of any kind),
//! launches (kernels and graphs), NCCL's communication and the rest. The classes are the CUDA
//! causes of `explain` (`sync`, `memcpy`, `alloc`, `launch`, `nccl`, `other_cuda`) and derive
//! from the op table's own library, predicates and argument shapes, so a new op is classified
//! where it is declared.

use ingero_ebpf::{CudaLibrary, CudaOp};
use ingero_trace::model::{ArgsShape, CudaArgs};

/// The classes, in the order of [`WorkClass::index`].
pub const CLASSES: usize = 6;

/// What a call spends its time on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WorkClass {
    /// Waits for the GPU: stream, device, event and context synchronisation.
    Sync,
    /// Copies and memsets, any direction.
    Memcpy,
    /// Allocations and frees: device, pool, managed and pinned host memory, and memory by
    /// handle (`cuMemCreate`, its mappings, address ranges and their access).
    Alloc,
    /// Kernel and graph launches.
    Launch,
    /// NCCL's calls: collectives, point-to-point calls, groups and communicators. On the host
    /// a collective is mostly its enqueue; a communicator's creation waits for every rank.
    Nccl,
    /// Everything else (events, streams, modules, queries).
    Other,
}

impl WorkClass {
    /// The class of `op`.
    #[inline(always)]
    pub const fn of(op: CudaOp) -> WorkClass {
        if matches!(op.library(), CudaLibrary::Nccl) {
            return WorkClass::Nccl;
        }
        if op.is_sync() {
            return WorkClass::Sync;
        }
        if op.is_launch() {
            return WorkClass::Launch;
        }
        let shape = ArgsShape::of(op);
        if shape.is_memory() {
            return WorkClass::Alloc;
        }
        match shape {
            ArgsShape::Memcpy | ArgsShape::MemcpyPeer | ArgsShape::Memset => WorkClass::Memcpy,
            _ => WorkClass::Other,
        }
    }

    /// Its place in per-class arrays.
    #[inline(always)]
    pub const fn index(self) -> usize {
        self as usize
    }

    /// Every class, in index order.
    pub const ALL: [WorkClass; CLASSES] = [
        WorkClass::Sync,
        WorkClass::Memcpy,
        WorkClass::Alloc,
        WorkClass::Launch,
        WorkClass::Nccl,
        WorkClass::Other,
    ];
}

/// Whether a call is a synchronous copy or memset: it returns only once the data has moved,
/// so the host waits for the transfer (and for the GPU work queued before it).
#[inline(always)]
pub fn is_sync_copy(args: &CudaArgs) -> bool {
    matches!(
        args,
        CudaArgs::Memcpy { stream: None, .. }
            | CudaArgs::MemcpyPeer { stream: None, .. }
            | CudaArgs::Memset { stream: None, .. }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_op_has_the_class_its_table_entry_implies() {
        for op in (0..u16::MAX).filter_map(CudaOp::from_u16) {
            let class = WorkClass::of(op);
            assert_eq!(class == WorkClass::Sync, op.is_sync(), "{op:?}");
            assert_eq!(class == WorkClass::Launch, op.is_launch(), "{op:?}");
            assert_eq!(
                class == WorkClass::Alloc,
                ArgsShape::of(op).is_memory(),
                "{op:?}"
            );
            assert_eq!(
                class == WorkClass::Nccl,
                op.library() == CudaLibrary::Nccl,
                "{op:?}"
            );
        }
        assert_eq!(WorkClass::of(CudaOp::NcclAllReduce), WorkClass::Nccl);
        assert_eq!(WorkClass::of(CudaOp::MemsetAsync), WorkClass::Memcpy);
        assert_eq!(WorkClass::of(CudaOp::CuMemcpyHtoD), WorkClass::Memcpy);
        assert_eq!(WorkClass::of(CudaOp::CuModuleLoad), WorkClass::Other);
        for (i, c) in WorkClass::ALL.iter().enumerate() {
            assert_eq!(c.index(), i);
        }
    }

    #[test]
    fn only_the_forms_without_a_stream_are_synchronous_copies() {
        let copy = |stream| CudaArgs::Memcpy {
            count: 8,
            kind: ingero_trace::model::MemcpyKind::HostToDevice,
            stream,
            width_height: None,
            host_ptr: None,
        };
        assert!(is_sync_copy(&copy(None)));
        assert!(!is_sync_copy(&copy(Some(0))));
        assert!(is_sync_copy(&CudaArgs::Memset {
            count: 8,
            stream: None
        }));
        assert!(!is_sync_copy(&CudaArgs::Memset {
            count: 8,
            stream: Some(3)
        }));
    }
}
