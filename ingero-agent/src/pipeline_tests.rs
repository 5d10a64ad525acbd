//! The pipeline from raw records to JSON lines: kernel names from every source reach the
//! launches that use them, through aliases and across the two rings, and a process's exit
//! forgets them once the CUDA ring's records before it were taken.

use std::io::Write;
use std::sync::{Arc, Mutex};

use ingero_ebpf::{
    COMM_LEN, CudaOp, CudaRecord, NAME_LEN, NameRecord, RecordHeader, RecordKind, name_flags,
};
use serde_json::Value;

use super::Pipeline;
use crate::decode::record_bytes;

/// A `Write` whose bytes the test reads back.
#[derive(Clone, Default)]
struct Shared(Arc<Mutex<Vec<u8>>>);

impl Write for Shared {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

const PID: u32 = 4242;

fn header(kind: RecordKind, op: CudaOp, ts_ns: u64) -> RecordHeader {
    RecordHeader {
        kind: kind as u16,
        op: op as u16,
        cpu: 0,
        ts_ns,
        tgid: PID,
        tid: PID,
        cgroup_id: 1,
        comm: [b'p'; COMM_LEN],
    }
}

fn name(op: CudaOp, handle: u64, text: &str) -> Vec<u8> {
    let mut bytes = [0u8; NAME_LEN];
    bytes[..text.len()].copy_from_slice(text.as_bytes());
    let r = NameRecord {
        header: header(RecordKind::KernelName, op, 1),
        handle,
        other: 0,
        len: text.len() as u32,
        flags: 0,
        name: bytes,
    };
    record_bytes(&r).to_vec()
}

fn alias(op: CudaOp, handle: u64, target: u64) -> Vec<u8> {
    let r = NameRecord {
        header: header(RecordKind::KernelName, op, 1),
        handle,
        other: target,
        len: 0,
        flags: name_flags::ALIAS,
        name: [0; NAME_LEN],
    };
    record_bytes(&r).to_vec()
}

/// A successful call of `op` with `args`, as the CUDA ring carries it.
fn call(op: CudaOp, args: [u64; ingero_ebpf::MAX_ARGS], ts_ns: u64) -> Vec<u8> {
    let r = CudaRecord {
        header: header(RecordKind::Cuda, op, ts_ns),
        duration_ns: 10,
        ret: 0,
        args,
        out: 0,
        parent_op: 0,
        variant: 0,
        depth: 0,
    };
    record_bytes(&r).to_vec()
}

fn launch(op: CudaOp, func: u64, ts_ns: u64) -> Vec<u8> {
    call(op, [func, 1 | 1 << 32, 1, 32 | 1 << 32, 1, 0, 0, 0], ts_ns)
}

/// A successful `cudaMalloc` of `size` bytes at 0x7000.
fn malloc(size: u64, ts_ns: u64) -> Vec<u8> {
    let mut args = [0; ingero_ebpf::MAX_ARGS];
    args[1] = size;
    args[ingero_ebpf::ALLOC_PTR_SLOT] = 0x7000;
    call(CudaOp::Malloc, args, ts_ns)
}

/// The kernel of each `cudaLaunchKernel` line written, in order.
fn launched_kernels(out: &Shared) -> Vec<Value> {
    lines(out)
        .into_iter()
        .filter(|v| v["op"] == "cudaLaunchKernel")
        .map(|v| v["args"]["kernel"].clone())
        .collect()
}

fn lines(out: &Shared) -> Vec<Value> {
    let bytes = out.0.lock().unwrap_or_else(|e| e.into_inner()).clone();
    String::from_utf8_lossy(&bytes)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .collect()
}

fn kernels_of(out: &Shared) -> Vec<Value> {
    lines(out)
        .into_iter()
        .map(|v| v["args"]["kernel"].clone())
        .collect()
}

#[test]
fn every_name_source_reaches_its_launches() {
    let out = Shared::default();
    let mut p = Pipeline::new(Some(Box::new(out.clone())));
    // Runtime registration, then a CUDA 13 stub's handle aliased to the host function.
    p.handle_name_record(&name(CudaOp::RegisterFunction, 0x1000, "_Z7add_onePi"));
    p.handle_name_record(&alias(CudaOp::GetKernel, 0x2000, 0x1000));
    // The driver: a library's CUkernel, and the CUfunction a context makes of it.
    p.handle_name_record(&name(
        CudaOp::CuLibraryGetKernel,
        0x3000,
        "triton_poi_fused_add_0",
    ));
    p.handle_name_record(&alias(CudaOp::CuKernelGetFunction, 0x4000, 0x3000));
    p.handle_record(&launch(CudaOp::LaunchKernel, 0x1000, 10));
    p.handle_record(&launch(CudaOp::LaunchKernel, 0x2000, 20));
    p.handle_record(&launch(CudaOp::CuLaunchKernel, 0x3000, 30));
    p.handle_record(&launch(CudaOp::CuLaunchKernelEx, 0x4000, 40));
    p.flush();
    assert_eq!(
        kernels_of(&out),
        [
            "add_one(int*)",
            "add_one(int*)",
            "triton_poi_fused_add_0",
            "triton_poi_fused_add_0"
        ]
    );
    assert_eq!(p.stats.names_learned, 2);
    assert_eq!(
        p.stats.kernels.top(5)[0].1,
        2,
        "launches tallied per kernel"
    );
}

/// A short program registers, launches and exits before the agent runs: its exit (scheduler
/// ring) may be read before its launches (CUDA ring). They keep their name, and the process's
/// GPU memory stays out of the table; only after that drain is the process forgotten, so a
/// new process given its pid does not inherit the names.
#[test]
fn launches_read_after_their_process_exit_keep_their_names() {
    let out = Shared::default();
    let mut p = Pipeline::new(Some(Box::new(out.clone())));
    p.handle_name_record(&name(CudaOp::RegisterFunction, 0x1000, "_Z7add_onePi"));
    let exit = ingero_ebpf::ProcessRecord {
        header: header(RecordKind::Exit, CudaOp::Malloc, 50),
        other_pid: 0,
        flags: ingero_ebpf::process_flags::GROUP_DEAD,
        clone_flags: 0,
        filename: [0; ingero_ebpf::FILENAME_LEN],
    };
    p.handle_record(record_bytes(&exit));
    // The daemon's next drain of the CUDA ring, as `daemon::drain::drain_cuda` makes it.
    let mark = p.cuda_drain_begins();
    p.drain_names();
    p.handle_record(&launch(CudaOp::LaunchKernel, 0x1000, 40));
    p.handle_record(&malloc(1 << 20, 45));
    p.cuda_drain_ended(mark);
    // The same pid, reused by a process that registered nothing.
    let mark = p.cuda_drain_begins();
    p.handle_record(&launch(CudaOp::LaunchKernel, 0x1000, 60));
    p.cuda_drain_ended(mark);
    p.flush();
    assert_eq!(
        launched_kernels(&out),
        [Value::from("add_one(int*)"), Value::Null]
    );
    assert!(
        p.stats.memory.by_pid.is_empty(),
        "an exited process holds no GPU memory"
    );
    assert!(p.exits.is_empty());
}

/// A name the probe could not read (its page was not resident) is read from the process's
/// memory when a launch asks for it: here the test's own, where the string is.
#[test]
fn a_name_the_probe_could_not_read_is_read_from_the_process() {
    static NAME: &[u8] = b"_ZN4demo5scaleILi4EEEvPffi\0";
    let me = std::process::id();
    let mine = |kind, op| RecordHeader {
        tgid: me,
        tid: me,
        ..header(kind, op, 10)
    };
    let unreadable = NameRecord {
        header: mine(RecordKind::KernelName, CudaOp::RegisterFunction),
        handle: 0x1000,
        other: NAME.as_ptr() as u64,
        len: 0,
        flags: name_flags::UNREADABLE,
        name: [0; NAME_LEN],
    };
    let launch = CudaRecord {
        header: mine(RecordKind::Cuda, CudaOp::LaunchKernel),
        duration_ns: 10,
        ret: 0,
        args: [0x1000, 1 | 1 << 32, 1, 32 | 1 << 32, 1, 0, 0, 0],
        out: 0,
        parent_op: 0,
        variant: 0,
        depth: 0,
    };
    let out = Shared::default();
    let mut p = Pipeline::new(Some(Box::new(out.clone())));
    p.handle_name_record(record_bytes(&unreadable));
    p.handle_record(record_bytes(&launch));
    p.flush();
    assert_eq!(
        kernels_of(&out),
        ["void demo::scale<4>(float*, float, int)"]
    );
    let names = p.kernels.stats();
    assert_eq!(
        (p.stats.names_deferred, names.read_late, names.unreadable),
        (1, 1, 0)
    );
    // Nowhere to read (address 0): counted as unreadable when its launch asks, not before.
    let gone = NameRecord {
        other: 0,
        handle: 0x2000,
        ..unreadable
    };
    p.handle_name_record(record_bytes(&gone));
    assert_eq!(p.kernels.stats().unreadable, 0);
    let launch_gone = CudaRecord {
        args: [0x2000, 1 | 1 << 32, 1, 32 | 1 << 32, 1, 0, 0, 0],
        ..launch
    };
    p.handle_record(record_bytes(&launch_gone));
    p.flush();
    let names = p.kernels.stats();
    assert_eq!(
        (p.stats.names_deferred, names.read_late, names.unreadable),
        (2, 1, 1)
    );
    assert_eq!(kernels_of(&out).len(), 2);
}
