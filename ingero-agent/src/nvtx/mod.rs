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

#[cfg(test)]
mod socket_rules_tests {
    //! The injection library keeps to libc, so it repeats the socket-path rules of
    //! `ingero-annotate` (which the agent binds by) instead of depending on it: the two must
    //! name the same places, or the library would look where no agent listens.

    use std::ffi::OsString;
    use std::path::{Path, PathBuf};

    use ingero_annotate::socket_path as agent;
    use ingero_nvtx::socket_path as library;

    #[test]
    fn the_library_looks_where_the_agent_binds() {
        assert_eq!(library::SOCKET_ENV, agent::NVTX_SOCKET_ENV);
        assert_eq!(library::SOCKET_NAME, agent::NVTX_SOCKET_NAME);
        assert_eq!(library::RUN_SOCKET_DIR, agent::RUN_SOCKET_DIR);
        assert_eq!(library::HOME_SOCKET_DIR, agent::HOME_SOCKET_DIR);
        // The system place, and the user's place when no socket is in the system one.
        let home = library::SocketEnv {
            explicit: None,
            home: Some(OsString::from("/home/u")),
        };
        let run = Path::new(agent::RUN_SOCKET_DIR).join(agent::NVTX_SOCKET_NAME);
        assert_eq!(library::socket_path(&home, |p| p == run), run);
        assert_eq!(
            library::socket_path(&home, |_| false),
            PathBuf::from("/home/u")
                .join(agent::HOME_SOCKET_DIR)
                .join(agent::NVTX_SOCKET_NAME)
        );
        // Published beside the socket, under the name `ingero run` looks for.
        assert_eq!(
            agent::nvtx_published_library(&run),
            Path::new(agent::RUN_SOCKET_DIR).join(super::LIBRARY_NAME)
        );
    }
}
