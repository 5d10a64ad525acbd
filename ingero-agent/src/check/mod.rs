//! `ingero check`: whether tracing will work on this host, one [`Line`] per check in the words
//! of someone who just installed ingero. Only a failure ([`Status::Fail`]) means tracing cannot
//! work; a missing CUDA library is a warning, because scheduler and process tracing do not need
//! one and ingero attaches to libraries that processes load later.
//!
//! The checks run in the order their causes depend on each other: privileges, kernel, BTF,
//! tracefs, then the proof (load the object, attach one uprobe), the CUDA libraries, NVTX and
//! the annotation socket. The proof uses a library the CUDA check found, so the libraries are
//! looked at before it runs, though they are listed after it.

pub mod cuda;
pub mod ebpf;
pub mod host;
pub mod nvtx;
pub mod render;
pub mod socket;

use std::path::PathBuf;

use cuda::LibraryReport;
use host::Privileges;
use nvtx::NvtxReport;
use socket::SocketReport;

/// How one check came out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    Ok,
    /// Tracing works, but less than it could.
    Warn,
    /// Tracing cannot work until this is fixed.
    Fail,
    /// A fact, not a judgement.
    Info,
    /// Not tried, because a check it depends on failed.
    Skip,
}

impl Status {
    /// The word shown in the text output (`FAIL` in capitals so it stands out).
    pub fn text(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Warn => "warn",
            Status::Fail => "FAIL",
            Status::Info => "info",
            Status::Skip => "skip",
        }
    }

    /// The value of `status` in the JSON output.
    pub fn json(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Warn => "warn",
            Status::Fail => "fail",
            Status::Info => "info",
            Status::Skip => "skip",
        }
    }
}

/// One check's outcome.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Line {
    /// Short and stable (`privileges`, `tracefs`, `libcuda`, ...): the JSON `name`.
    pub name: &'static str,
    pub status: Status,
    /// The plain-language reason.
    pub message: String,
}

impl Line {
    pub fn new(name: &'static str, status: Status, message: String) -> Line {
        Line {
            name,
            status,
            message,
        }
    }
}

/// What `ingero check` is asked.
#[derive(Clone, Debug, Default)]
pub struct CheckOptions {
    /// Check these libraries instead of discovering them.
    pub cuda_libs: Vec<PathBuf>,
}

/// Everything the checks found.
#[derive(Clone, Debug)]
pub struct Report {
    pub lines: Vec<Line>,
    pub kernel_release: String,
    pub privileges: Privileges,
    pub libraries: Vec<LibraryReport>,
    pub nvtx: NvtxReport,
    pub socket: SocketReport,
}

impl Report {
    /// Whether tracing can work: no check failed.
    pub fn ok(&self) -> bool {
        self.lines.iter().all(|l| l.status != Status::Fail)
    }

    /// The failed checks.
    pub fn failures(&self) -> impl Iterator<Item = &Line> {
        self.lines.iter().filter(|l| l.status == Status::Fail)
    }
}

/// Runs every check. Side effects: tracefs is mounted when absent and this process may, and
/// the eBPF object is loaded and one uprobe attached for a moment.
pub fn run(options: &CheckOptions) -> Report {
    let privileges = Privileges::current();
    let kernel_release = host::kernel_release();
    let mut lines = vec![
        privileges.line(),
        host::kernel_line(&kernel_release),
        host::btf_line(),
        host::tracefs_line(privileges),
    ];
    let (libraries, library_lines) = cuda::libraries(&options.cuda_libs);
    let ready = lines.iter().all(|l| l.status != Status::Fail);
    lines.extend(ebpf::lines(ready, &libraries));
    lines.extend(library_lines);
    let nvtx = nvtx::check();
    lines.push(nvtx.line.clone());
    let socket = socket::check();
    lines.push(socket.line.clone());
    Report {
        lines,
        kernel_release,
        privileges,
        libraries,
        nvtx,
        socket,
    }
}
