//! The CUDA side of `ingero check`: every libcudart and libcuda found (or named with
//! `--cuda-lib`), its version, and how many of the symbols ingero probes in it it exports.
//! The probed symbols come from the op table filtered by library, so driver ops added to the
//! table are counted here with no change.

use std::path::{Path, PathBuf};

use ingero_ebpf::CudaLibrary;

use crate::discover::{
    self, LibraryFile,
    kind::{probed_symbols, version_of},
    libraries::Search,
};

use super::{Line, Status};

/// What one library offers the probes.
#[derive(Clone, Debug)]
pub struct LibraryReport {
    pub path: PathBuf,
    pub kind: CudaLibrary,
    /// From the file name or its symlink target (`12.9.79`, `535.261.03`); `None`: unknown.
    pub version: Option<String>,
    /// Every symbol probed in a library of this kind.
    pub probed: Vec<&'static str>,
    /// The probed symbols this file exports.
    pub exported: Vec<&'static str>,
    /// The probed symbols it does not export.
    pub missing: Vec<&'static str>,
    /// Why its symbols could not be read (then nothing is exported).
    pub error: Option<String>,
    /// The uprobe test's target: a probed symbol's (else any export's) file offset.
    pub test_offset: Option<u64>,
    /// A program with the runtime linked in (`-cudart static`), not a library.
    pub linked_in: bool,
}

impl LibraryReport {
    pub fn of(library: &LibraryFile) -> LibraryReport {
        let probed = probed_symbols(library.kind);
        let (exports, error) = match library.functions() {
            Ok(exports) => (exports, None),
            Err(e) => (Vec::new(), Some(format!("{e:#}"))),
        };
        let (exported, missing): (Vec<&'static str>, Vec<&'static str>) = probed
            .iter()
            .partition(|symbol| exports.iter().any(|e| e.name == **symbol));
        let test_offset = exported
            .first()
            .and_then(|s| exports.iter().find(|e| e.name == *s))
            .or(exports.first())
            .map(|e| e.file_offset);
        LibraryReport {
            path: library.path.clone(),
            kind: library.kind,
            version: version_of(&library.path),
            probed,
            exported,
            missing,
            error,
            test_offset,
            linked_in: library.linked_in,
        }
    }

    pub fn line(&self) -> Line {
        let version = self.version.as_deref().unwrap_or("unknown");
        let what = format!("{} (version {version})", self.path.display());
        let name = self.kind.name();
        if let Some(error) = &self.error {
            return Line::new(
                name,
                Status::Warn,
                format!("{what}: cannot read its symbols: {error}"),
            );
        }
        let (total, found) = (self.probed.len(), self.exported.len());
        if total == 0 {
            return Line::new(
                name,
                Status::Ok,
                format!("{what}: this build probes no {name} symbols yet"),
            );
        }
        if self.linked_in {
            // A program links in only the part of the runtime it calls: no list of the rest.
            return Line::new(
                name,
                Status::Ok,
                format!(
                    "{}: the CUDA runtime is linked into this program; {found} of the {total} \
                     functions ingero probes are in it",
                    self.path.display()
                ),
            );
        }
        let mut message = format!("{what}: exports {found} of the {total} symbols ingero probes");
        if !self.missing.is_empty() && found > 0 {
            let which = match self.kind {
                CudaLibrary::Nccl => "NCCL",
                CudaLibrary::Runtime | CudaLibrary::Driver => "CUDA",
            };
            message.push_str(&format!(
                " (not exported: {}; an older or newer {which}, fine)",
                self.missing.join(", ")
            ));
        }
        if found == 0 {
            message.push_str(": nothing to trace in it (a stub or another library?)");
            return Line::new(name, Status::Warn, message);
        }
        Line::new(name, Status::Ok, message)
    }
}

/// The libraries to report: those named with `--cuda-lib`, else those discovery finds.
/// A named file that cannot be used is a failure line, as it would fail `ingero trace`.
pub fn libraries(cuda_libs: &[PathBuf]) -> (Vec<LibraryReport>, Vec<Line>) {
    let mut lines = Vec::new();
    let found: Vec<LibraryFile> = if cuda_libs.is_empty() {
        match discover::find_cuda_libraries(&Search::new(None)) {
            Ok(found) => found,
            Err(e) => {
                lines.push(Line::new(
                    "libraries",
                    Status::Warn,
                    format!("discovery failed: {e:#}"),
                ));
                Vec::new()
            }
        }
    } else {
        let mut named = Vec::new();
        for path in cuda_libs {
            match discover::libraries::library_at(path) {
                Ok(library) => named.push(library),
                Err(e) => lines.push(Line::new("cuda-lib", Status::Fail, format!("{e:#}"))),
            }
        }
        named
    };
    let mut reports: Vec<LibraryReport> = found.iter().map(LibraryReport::of).collect();
    reports.sort_by_key(|r| (r.kind, r.path.clone()));
    for kind in CudaLibrary::ALL {
        let of_kind: Vec<&LibraryReport> = reports.iter().filter(|r| r.kind == kind).collect();
        if of_kind.is_empty() {
            lines.push(absent(kind, !cuda_libs.is_empty()));
        }
        lines.extend(of_kind.iter().map(|r| r.line()));
    }
    (reports, lines)
}

/// The line for a library of which no copy was found: a warning, since the scheduler and
/// process tracing work without it.
fn absent(kind: CudaLibrary, named_only: bool) -> Line {
    let name = kind.name();
    let searched = if named_only {
        "none named with --cuda-lib".to_string()
    } else {
        format!(
            "none found in running processes or install places; ingero attaches to a {name} \
             that a process loads later"
        )
    };
    if probed_symbols(kind).is_empty() {
        return Line::new(
            name,
            Status::Info,
            format!("{searched} (this build probes no {name} symbols yet)"),
        );
    }
    let calls = match kind {
        CudaLibrary::Runtime => "CUDA runtime calls (cudaMalloc, kernel launches, ...)",
        CudaLibrary::Driver => "CUDA driver calls (cu*)",
        // Only multi-GPU jobs load NCCL: its absence is no loss for the rest.
        CudaLibrary::Nccl => {
            return Line::new(
                name,
                Status::Info,
                format!("{searched}; NCCL's collectives are traced once a job loads it"),
            );
        }
    };
    Line::new(
        name,
        Status::Warn,
        format!(
            "{searched}. Until then {calls} are not traced; scheduler and process tracing work \
             without it"
        ),
    )
}

/// libc as this process maps it: the uprobe test's target when no CUDA library is found.
pub fn libc_path() -> Option<PathBuf> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    maps.lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|p| {
            Path::new(p)
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("libc.so") || n.starts_with("libc-"))
        })
        .map(PathBuf::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(probed: Vec<&'static str>, exported: Vec<&'static str>) -> LibraryReport {
        let missing = probed
            .iter()
            .filter(|s| !exported.contains(s))
            .copied()
            .collect();
        LibraryReport {
            path: PathBuf::from("/usr/lib/x86_64-linux-gnu/libcuda.so.1"),
            kind: CudaLibrary::Driver,
            version: Some("535.261.03".into()),
            probed,
            exported,
            missing,
            error: None,
            test_offset: None,
            linked_in: false,
        }
    }

    #[test]
    fn a_library_line_counts_and_names_what_is_missing() {
        let line = report(vec!["cuA", "cuB", "cuC"], vec!["cuA", "cuB"]).line();
        assert_eq!(line.status, Status::Ok);
        assert_eq!(line.name, "libcuda");
        assert!(
            line.message.starts_with(
                "/usr/lib/x86_64-linux-gnu/libcuda.so.1 (version 535.261.03): exports 2 of the 3"
            ),
            "{}",
            line.message
        );
        assert!(
            line.message.contains("not exported: cuC"),
            "{}",
            line.message
        );
    }

    #[test]
    fn a_library_exporting_nothing_probed_is_a_warning() {
        assert_eq!(report(vec!["cuA"], vec![]).line().status, Status::Warn);
        assert_eq!(report(vec![], vec![]).line().status, Status::Ok);
    }

    #[test]
    fn an_absent_runtime_is_a_warning_that_says_what_still_works() {
        let line = absent(CudaLibrary::Runtime, false);
        assert_eq!(line.status, Status::Warn);
        assert!(line.message.contains("scheduler and process tracing work"));
        assert!(
            absent(CudaLibrary::Runtime, true)
                .message
                .contains("--cuda-lib")
        );
    }

    #[test]
    fn an_absent_nccl_is_only_information() {
        let line = absent(CudaLibrary::Nccl, false);
        assert_eq!(line.status, Status::Info);
        assert_eq!(line.name, "libnccl");
        assert!(
            line.message.contains("once a job loads it"),
            "{}",
            line.message
        );
    }

    #[test]
    fn libc_is_found_in_this_process() {
        let libc = libc_path().expect("this test links libc");
        assert!(libc.exists(), "{}", libc.display());
    }
}
