//! Page-locked (pinned) host memory per process, and the asynchronous copies that did not
//! come from it.
//!
//! An "async" copy from pageable host memory is not asynchronous: the driver stages it
//! through a pinned buffer and the call returns only when the staging is done, so the host
//! blocks for the transfer and the copy cannot overlap compute. The trace knows which host
//! ranges are pinned from `cudaMallocHost`/`cudaHostAlloc`/`cudaHostRegister` and their
//! driver twins (less `cudaFreeHost`/`cudaHostUnregister`), and from the mappings of host
//! memory made by handle (`cuMemCreate` at a host location, `cuMemMap`, less `cuMemUnmap`),
//! and each copy's host pointer, so
//! it can tell the two apart for the ranges it saw pinned. Bounded: [`MAX_PINNED_RANGES`]
//! ranges per process (past that, copies are no longer judged: `overflowed`), the
//! [`WORST_KEPT`] longest pageable copies.

use std::collections::BTreeMap;

use ingero_ebpf::CudaOp;
use ingero_trace::model::{CudaArgs, CudaCallRecord};

/// Pinned ranges remembered per process.
pub const MAX_PINNED_RANGES: usize = 4096;
/// Copies smaller than this are staged without blocking for long (the driver copies small
/// pageable transfers into its own pinned buffer and returns): not judged.
pub const PAGEABLE_MIN_BYTES: u64 = 64 * 1024;
/// Longest pageable copies kept as evidence.
pub const WORST_KEPT: usize = 5;

/// One asynchronous copy from or to pageable memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageableCopy {
    pub ts_ns: u64,
    pub duration_ns: u64,
    pub bytes: u64,
    pub op: CudaOp,
}

/// A process's pinned ranges and pageable async copies.
#[derive(Default)]
pub struct Pinned {
    /// Start → end (exclusive) of each pinned range.
    ranges: BTreeMap<u64, u64>,
    /// More ranges than [`MAX_PINNED_RANGES`] were pinned: copies are no longer judged.
    pub overflowed: bool,
    /// Pinned allocations and registrations seen.
    pub pinned_calls: u64,
    /// Async copies judged, and those from pageable memory: count, time, bytes.
    pub judged: u64,
    pub pageable: u64,
    pub pageable_ns: u64,
    pub pageable_bytes: u64,
    /// The longest pageable copies, longest first.
    pub worst: Vec<PageableCopy>,
}

/// Whether a call changes or needs [`Pinned`] (so it cannot be summed with others).
#[inline(always)]
pub fn concerns_pinned(args: &CudaArgs) -> bool {
    matches!(
        args,
        CudaArgs::HostAlloc { .. }
            | CudaArgs::HostFree { .. }
            | CudaArgs::HostRegister { .. }
            | CudaArgs::HostUnregister { .. }
            | CudaArgs::Memcpy {
                stream: Some(_),
                host_ptr: Some(_),
                ..
            }
    )
}

impl Pinned {
    /// Accounts a call for which [`concerns_pinned`] holds.
    pub fn add(&mut self, c: &CudaCallRecord) {
        let ok = c.ret == 0;
        match c.args {
            CudaArgs::HostAlloc {
                size, ptr: Some(p), ..
            } if ok => self.pin(p, size),
            CudaArgs::HostRegister { ptr, size, .. } if ok => self.pin(ptr, size),
            CudaArgs::HostFree { ptr } | CudaArgs::HostUnregister { ptr } if ok => {
                self.ranges.remove(&ptr);
            }
            CudaArgs::Memcpy {
                count,
                stream: Some(_),
                host_ptr: Some(h),
                ..
            } if count >= PAGEABLE_MIN_BYTES && !self.overflowed => {
                self.judged += 1;
                if !self.is_pinned(h, count) {
                    self.add_pageable(c, count);
                }
            }
            _ => {}
        }
    }

    /// Forgets the pinned ranges that start in `[ptr, ptr + size)`: the mappings of host
    /// memory by handle one `cuMemUnmap` ends ([`super::processes`] follows the handles).
    pub fn unpin_range(&mut self, ptr: u64, size: u64) {
        let end = ptr.saturating_add(size.max(1));
        let gone: Vec<u64> = self.ranges.range(ptr..end).map(|(s, _)| *s).collect();
        for start in gone {
            self.ranges.remove(&start);
        }
    }

    /// `[ptr, ptr + size)` is pinned (an allocation, a registration, or a mapping of host
    /// memory by handle).
    pub fn pin(&mut self, ptr: u64, size: u64) {
        self.pinned_calls += 1;
        if self.ranges.len() >= MAX_PINNED_RANGES && !self.ranges.contains_key(&ptr) {
            self.overflowed = true;
            return;
        }
        self.ranges.insert(ptr, ptr.saturating_add(size));
    }

    /// Whether `[ptr, ptr + len)` lies inside one pinned range.
    pub fn is_pinned(&self, ptr: u64, len: u64) -> bool {
        self.ranges
            .range(..=ptr)
            .next_back()
            .is_some_and(|(_, end)| ptr.saturating_add(len) <= *end)
    }

    fn add_pageable(&mut self, c: &CudaCallRecord, bytes: u64) {
        self.pageable += 1;
        self.pageable_ns += c.duration_ns;
        self.pageable_bytes += bytes;
        let copy = PageableCopy {
            ts_ns: c.ts_ns,
            duration_ns: c.duration_ns,
            bytes,
            op: c.op,
        };
        let at = self
            .worst
            .iter()
            .position(|w| w.duration_ns < copy.duration_ns)
            .unwrap_or(self.worst.len());
        if at < WORST_KEPT {
            self.worst.insert(at, copy);
            self.worst.truncate(WORST_KEPT);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::tests::fixtures::call_record;
    use ingero_trace::model::MemcpyKind;

    fn call(op: CudaOp, args: CudaArgs, ts: u64) -> CudaCallRecord {
        call_record(op, args, ts, 1_000 + ts)
    }

    fn copy(host: u64, count: u64, ts: u64) -> CudaCallRecord {
        call(
            CudaOp::MemcpyAsync,
            CudaArgs::Memcpy {
                count,
                kind: MemcpyKind::HostToDevice,
                stream: Some(7),
                width_height: None,
                host_ptr: Some(host),
            },
            ts,
        )
    }

    #[test]
    fn mappings_of_host_memory_by_handle_are_pinned_until_unmapped() {
        // The process follows the handles and tells its pinned ranges of the mappings.
        use crate::analyze::processes::ProcStats;
        use ingero_trace::model::MemLocation;
        let mut s = ProcStats::default();
        let create = |handle, location| CudaArgs::PhysicalCreate {
            size: 4 << 20,
            handle: Some(handle),
            location,
        };
        let map = |ptr, handle| CudaArgs::AddressRange {
            ptr: Some(ptr),
            size: 4 << 20,
            handle: Some(handle),
        };
        s.add(&call(
            CudaOp::CuMemCreate,
            create(0x51, MemLocation::HostNuma(0)),
            1,
        ));
        s.add(&call(
            CudaOp::CuMemCreate,
            create(0x52, MemLocation::Device(0)),
            2,
        ));
        s.add(&call(CudaOp::CuMemMap, map(0x7f40_0000_0000, 0x51), 3));
        s.add(&call(CudaOp::CuMemMap, map(0x7f50_0000_0000, 0x52), 4));
        // Released after mapping: still pinned until the unmap.
        let release = CudaArgs::PhysicalHandle {
            handle: Some(0x51),
            ptr: None,
        };
        s.add(&call(CudaOp::CuMemRelease, release, 5));
        s.add(&copy(0x7f40_0010_0000, 1 << 20, 6));
        assert_eq!(
            (s.pinned.judged, s.pinned.pageable),
            (1, 0),
            "host memory by handle is pinned"
        );
        s.add(&copy(0x7f50_0000_0000, 1 << 20, 7));
        assert_eq!(
            s.pinned.pageable, 1,
            "device memory is no pinned host range"
        );
        let unmap = CudaArgs::AddressRange {
            ptr: Some(0x7f40_0000_0000),
            size: 4 << 20,
            handle: None,
        };
        s.add(&call(CudaOp::CuMemUnmap, unmap, 8));
        s.add(&copy(0x7f40_0010_0000, 1 << 20, 9));
        assert_eq!(s.pinned.pageable, 2, "unmapped");
    }

    #[test]
    fn copies_inside_pinned_ranges_are_not_pageable() {
        let mut p = Pinned::default();
        p.add(&call(
            CudaOp::HostAlloc,
            CudaArgs::HostAlloc {
                size: 1 << 20,
                ptr: Some(0x1000_0000),
            },
            1,
        ));
        p.add(&call(
            CudaOp::HostRegister,
            CudaArgs::HostRegister {
                ptr: 0x9000_0000,
                size: 1 << 20,
                flags: 0,
            },
            2,
        ));
        for (host, ts) in [(0x1000_0000, 3), (0x1008_0000, 4), (0x9000_0000, 5)] {
            p.add(&copy(host, 256 << 10, ts));
        }
        assert_eq!((p.judged, p.pageable), (3, 0));
        // Past the end of a range, outside any, and small copies (not judged).
        p.add(&copy(0x100f_0000, 256 << 10, 10));
        p.add(&copy(0x5000_0000, 1 << 20, 11));
        p.add(&copy(0x5000_0000, 4 << 10, 12));
        assert_eq!((p.judged, p.pageable), (5, 2));
        assert_eq!(p.worst[0].ts_ns, 11, "longest first");
        // Freed: the range is pageable again.
        p.add(&call(
            CudaOp::HostUnregister,
            CudaArgs::HostUnregister { ptr: 0x9000_0000 },
            13,
        ));
        p.add(&copy(0x9000_0000, 256 << 10, 14));
        assert_eq!(p.pageable, 3);
        assert_eq!(p.pinned_calls, 2);
    }

    #[test]
    fn too_many_ranges_stop_the_judging() {
        let mut p = Pinned::default();
        for i in 0..=MAX_PINNED_RANGES as u64 {
            p.add(&call(
                CudaOp::MallocHost,
                CudaArgs::HostAlloc {
                    size: 4096,
                    ptr: Some(0x1000_0000 + i * 8192),
                },
                i + 1,
            ));
        }
        assert!(p.overflowed);
        p.add(&copy(0x1, 1 << 20, 1 << 40));
        assert_eq!(p.judged, 0);
    }

    #[test]
    fn what_concerns_pinned_memory() {
        assert!(concerns_pinned(&CudaArgs::HostFree { ptr: 1 }));
        assert!(!concerns_pinned(&CudaArgs::Memcpy {
            count: 1,
            kind: MemcpyKind::HostToDevice,
            stream: None,
            width_height: None,
            host_ptr: Some(1),
        }));
    }
}
