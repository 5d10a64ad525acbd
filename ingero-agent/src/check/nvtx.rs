//! Whether NVTX capture is available: the injection library `ingero run` and `trace -- CMD`
//! would use, whether it is a shared object NVTX can load (it must export
//! `InitializeInjectionNvtx2`), and whether `NVTX_INJECTION64_PATH` already names another tool
//! here (one tool per process: a program started from this environment would report to it).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use ingero_annotate::socket_path::{NVTX_INJECTION_ENV, NVTX_LIBRARY_ENV, nvtx_library};
use object::{Object, ObjectKind};

use super::{Line, Status};
use crate::discover::symbols::exported_functions;

/// The entry point NVTX looks up in the library `NVTX_INJECTION64_PATH` names.
pub const INJECTION_ENTRY: &str = "InitializeInjectionNvtx2";

/// What the check found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NvtxReport {
    /// The library found (`None`: none).
    pub library: Option<PathBuf>,
    /// Why the library cannot be used (`None` when it can, or when there is none).
    pub error: Option<String>,
    /// `NVTX_INJECTION64_PATH` in this environment, when set and not the library found.
    pub other_tool: Option<String>,
    pub line: Line,
}

impl NvtxReport {
    /// Whether `ingero run` / `trace -- CMD` would capture NVTX ranges.
    pub fn available(&self) -> bool {
        self.library.is_some() && self.error.is_none()
    }
}

/// Runs the check against this process's environment.
pub fn check() -> NvtxReport {
    report(nvtx_library(), std::env::var_os(NVTX_INJECTION_ENV))
}

/// The check on given inputs.
pub fn report(library: Option<PathBuf>, injection_env: Option<OsString>) -> NvtxReport {
    let error = library.as_deref().and_then(|l| loadable(l).err());
    let other_tool = injection_env
        .filter(|v| !v.is_empty())
        .filter(|v| {
            library
                .as_ref()
                .is_none_or(|l| l.as_os_str() != v.as_os_str())
        })
        .map(|v| v.to_string_lossy().into_owned());
    let (status, mut message) = match (&library, &error) {
        (None, _) => (
            Status::Info,
            format!(
                "no injection library found (set {NVTX_LIBRARY_ENV}, or build libingero_nvtx.so \
                 with `cargo build --release`): NVTX ranges are not captured"
            ),
        ),
        (Some(l), Some(e)) => (
            Status::Warn,
            format!("{}: {e}: NVTX ranges are not captured", l.display()),
        ),
        (Some(l), None) => (
            Status::Ok,
            format!(
                "{} exports {INJECTION_ENTRY}: `ingero run -- CMD` or `sudo ingero trace -- CMD` \
                 captures NVTX ranges",
                l.display()
            ),
        ),
    };
    if let Some(other) = &other_tool {
        message.push_str(&format!(
            "; {NVTX_INJECTION_ENV} is set here to {other}: programs started from this \
             environment report NVTX to that tool (ingero leaves it)"
        ));
    }
    NvtxReport {
        library,
        error,
        other_tool,
        line: Line::new("nvtx", status, message),
    }
}

/// Whether NVTX could load `path` as its tool: a shared object that exports the entry point.
fn loadable(path: &Path) -> Result<(), String> {
    let data = std::fs::read(path).map_err(|e| format!("cannot read it ({e})"))?;
    let file = object::File::parse(&*data).map_err(|_| "not an ELF file".to_string())?;
    if file.kind() != ObjectKind::Dynamic {
        return Err("not a shared library".into());
    }
    if !file.is_64() {
        return Err("a 32-bit library (NVTX_INJECTION64_PATH needs a 64-bit one)".into());
    }
    let exports = exported_functions(path).map_err(|e| format!("{e:#}"))?;
    if !exports.iter().any(|s| s.name == INJECTION_ENTRY) {
        return Err(format!("does not export {INJECTION_ENTRY}"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_library_is_information_not_a_failure() {
        let r = report(None, None);
        assert_eq!(r.line.status, Status::Info);
        assert!(!r.available());
        assert!(r.line.message.contains("no injection library found"));
    }

    #[test]
    fn a_file_that_is_not_an_injection_library_is_a_warning() {
        // An executable, not a shared object exporting the entry point.
        let exe = std::env::current_exe().expect("exe");
        let r = report(Some(exe.clone()), None);
        assert_eq!(r.line.status, Status::Warn, "{}", r.line.message);
        assert!(r.error.is_some());
        let missing = report(Some(PathBuf::from("/nonexistent/libingero_nvtx.so")), None);
        assert!(
            missing.line.message.contains("cannot read it"),
            "{}",
            missing.line.message
        );
    }

    #[test]
    fn another_tool_in_the_environment_is_mentioned() {
        let r = report(None, Some("/nsys/libToolsInjection64.so".into()));
        assert_eq!(
            r.other_tool.as_deref(),
            Some("/nsys/libToolsInjection64.so")
        );
        assert!(r.line.message.contains("NVTX_INJECTION64_PATH is set here"));
        // Our own library in the variable is not "another tool"; an empty value is unset.
        let ours = PathBuf::from("/x/libingero_nvtx.so");
        assert_eq!(
            report(Some(ours.clone()), Some(ours.into_os_string())).other_tool,
            None
        );
        assert_eq!(report(None, Some(OsString::new())).other_tool, None);
    }
}
