//! The proof in `ingero check` that tracing works: the embedded object loaded (its programs
//! verified, its maps and ring buffers created), one uprobe attached and detached, and the
//! tracepoint that captures the NVIDIA drivers' kernel log messages attached.

use std::path::PathBuf;

use crate::discover::exported_functions;
use crate::probes::{LoadOptions, Probes};

use super::{Line, Status, cuda::LibraryReport, cuda::libc_path};

/// Ring buffer bytes for the test load: small, and a power of two on any page size up to 1 MiB.
const TEST_RINGBUF_BYTES: u32 = 1 << 20;

/// The library and offset the uprobe test attaches at: the first CUDA library with a readable
/// export, else libc.
fn target(libraries: &[LibraryReport]) -> Option<(PathBuf, u64, String)> {
    if let Some(lib) = libraries.iter().find(|l| l.test_offset.is_some()) {
        let symbol = lib
            .exported
            .first()
            .copied()
            .unwrap_or("an exported function");
        return Some((lib.path.clone(), lib.test_offset?, symbol.to_string()));
    }
    let libc = libc_path()?;
    let exports = exported_functions(&libc).ok()?;
    let export = exports
        .iter()
        .find(|e| e.name == "getpid")
        .or(exports.first())?;
    Some((libc, export.file_offset, export.name.clone()))
}

/// The `ebpf` and `uprobe` lines. When an earlier check failed (`ready` false: no privileges,
/// no tracefs) loading cannot succeed, so both are skipped instead of failing again with a
/// less clear reason.
pub fn lines(ready: bool, libraries: &[LibraryReport]) -> Vec<Line> {
    if !ready {
        let skipped = "not tried: fix the failure above first";
        return vec![
            Line::new("ebpf", Status::Skip, skipped.to_string()),
            Line::new("uprobe", Status::Skip, skipped.to_string()),
            Line::new("gpu_faults", Status::Skip, skipped.to_string()),
        ];
    }
    let options = LoadOptions {
        ringbuf_size: TEST_RINGBUF_BYTES,
        pids: None,
    };
    let (mut probes, _rings) = match Probes::load(&options) {
        Ok(loaded) => loaded,
        Err(e) => {
            return vec![
                Line::new(
                    "ebpf",
                    Status::Fail,
                    format!("the kernel refused ingero's eBPF object: {e:#}"),
                ),
                Line::new("uprobe", Status::Skip, "not tried: nothing loaded".into()),
                Line::new(
                    "gpu_faults",
                    Status::Skip,
                    "not tried: nothing loaded".into(),
                ),
            ];
        }
    };
    let ebpf = Line::new(
        "ebpf",
        Status::Ok,
        "loaded ingero's programs and created its maps and ring buffers".to_string(),
    );
    let uprobe = match target(libraries) {
        None => Line::new(
            "uprobe",
            Status::Fail,
            "no library to attach a test probe to (not even libc)".into(),
        ),
        Some((path, offset, symbol)) => match probes.attach_test_probe(&path, offset) {
            Ok(()) => Line::new(
                "uprobe",
                Status::Ok,
                format!("attached a test probe to {symbol} in {}", path.display()),
            ),
            Err(e) => Line::new(
                "uprobe",
                Status::Fail,
                format!("attaching a test probe to {symbol} failed: {e:#}"),
            ),
        },
    };
    // Optional for tracing (a warning, not a failure): without it GPU faults go unrecorded.
    let gpu_faults = match probes.attach_driver_log() {
        Ok(()) => Line::new(
            "gpu_faults",
            Status::Ok,
            "the NVIDIA driver's Xid reports are captured from the kernel log (printk:console)"
                .into(),
        ),
        Err(e) => Line::new(
            "gpu_faults",
            Status::Warn,
            format!("the NVIDIA driver's Xid reports (GPU faults) will not be captured: {e:#}"),
        ),
    };
    vec![ebpf, uprobe, gpu_faults]
}
