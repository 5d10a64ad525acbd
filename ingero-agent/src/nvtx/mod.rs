//! NVTX capture, the agent's side: the socket the injection library (`libingero_nvtx.so`,
//! crate `ingero-nvtx`) streams to ([`server`]), the pairing of its events into ranges
//! ([`pairing`]), and the publication of the library beside the socket ([`publish_library`])
//! so `ingero run`, `trace -- CMD` and `import ingero_annotate` find it without configuration.
//! The socket sits beside the annotation socket, with the same permissions: it is opened
//! with `--annotate`. Processes without the library are covered, less completely, by uprobes
//! on the NVTX libraries they map ([`fallback`]).

pub mod fallback;
pub mod pairing;
pub mod server;

use std::path::{Path, PathBuf};

use anyhow::Context;

pub use server::{NvtxCountersSnapshot, NvtxServer, NvtxSocketConfig};

/// The library's file name (as `cargo build` names it, and as it is published).
pub use ingero_annotate::socket_path::NVTX_LIBRARY_NAME as LIBRARY_NAME;
/// The socket's file name, beside the annotation socket.
pub use ingero_annotate::socket_path::NVTX_SOCKET_NAME as SOCKET_NAME;

/// The library `ingero` was built with: beside the executable.
pub fn built_library() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let lib = exe.parent()?.join(LIBRARY_NAME);
    lib.is_file().then_some(lib)
}

/// Copies the library into `dir` (atomically: a temporary file renamed over the old copy),
/// readable by everyone who may enter `dir`. Returns where it is, or `None` (with a warning)
/// when there is no library to publish.
pub fn publish_library(dir: &Path) -> anyhow::Result<Option<PathBuf>> {
    use std::os::unix::fs::PermissionsExt;
    let Some(src) = built_library() else {
        eprintln!(
            "ingero: {LIBRARY_NAME} not found beside the ingero binary: NVTX capture needs it \
             (cargo build --release builds both)"
        );
        return Ok(None);
    };
    let dst = dir.join(LIBRARY_NAME);
    let tmp = dir.join(format!(".{LIBRARY_NAME}.{}", std::process::id()));
    std::fs::copy(&src, &tmp)
        .with_context(|| format!("copying {} to {}", src.display(), tmp.display()))?;
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o644))
        .with_context(|| format!("setting the mode of {}", tmp.display()))?;
    std::fs::rename(&tmp, &dst).with_context(|| format!("publishing {}", dst.display()))?;
    Ok(Some(dst))
}
