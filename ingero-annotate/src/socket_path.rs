//! Where the annotation socket lives. The agent and every client follow the
//! same rules, so they meet without configuration:
//!
//! 1. `$INGERO_ANNOTATE_SOCKET`, when set and non-empty, wins everywhere.
//! 2. The agent binds `/run/ingero/annotate.sock` when `/run` is writable
//!    (it runs as root), else `$HOME/.ingero/annotate/annotate.sock`.
//! 3. A client uses whichever of those two holds a socket now (`/run`
//!    first, as the published 0.1.1 client does); when neither does, the one
//!    an agent run by the same user would bind. Clients re-resolve on each
//!    reconnect, so an agent started later is still found.
//!
//! The NVTX socket (`nvtx.sock`, where the injection library `libingero_nvtx.so` streams NVTX
//! ranges) follows the same rules with its own variable, `$INGERO_NVTX_SOCKET`, and lives
//! beside the annotation socket. The agent publishes the library into that same directory, so
//! a client that finds the socket finds the library next to it ([`nvtx_library`]).

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

/// Environment variable that overrides the socket path.
pub const SOCKET_ENV: &str = "INGERO_ANNOTATE_SOCKET";
/// File name of the socket.
pub const SOCKET_NAME: &str = "annotate.sock";
/// Directory used when `/run` is writable.
pub const RUN_SOCKET_DIR: &str = "/run/ingero";
/// Directory under `$HOME` used otherwise.
pub const HOME_SOCKET_DIR: &str = ".ingero/annotate";

/// Environment variable that overrides the NVTX socket path.
pub const NVTX_SOCKET_ENV: &str = "INGERO_NVTX_SOCKET";
/// File name of the NVTX socket.
pub const NVTX_SOCKET_NAME: &str = "nvtx.sock";
/// File name of the NVTX injection library (built by `cargo build --release`, published by the
/// agent beside the NVTX socket).
pub const NVTX_LIBRARY_NAME: &str = "libingero_nvtx.so";
/// Environment variable naming the injection library to use instead of looking for one.
pub const NVTX_LIBRARY_ENV: &str = "INGERO_NVTX_LIBRARY";
/// The variable NVTX reads (once per linkage unit, at its first NVTX call) to load a tool.
pub const NVTX_INJECTION_ENV: &str = "NVTX_INJECTION64_PATH";

/// One socket's naming: the overriding variable and the file name. Both sockets share the
/// directories, so one set of rules serves both.
#[derive(Clone, Copy)]
struct Socket {
    env: &'static str,
    name: &'static str,
}

const ANNOTATE: Socket = Socket {
    env: SOCKET_ENV,
    name: SOCKET_NAME,
};
const NVTX: Socket = Socket {
    env: NVTX_SOCKET_ENV,
    name: NVTX_SOCKET_NAME,
};

impl Socket {
    fn env_path(self) -> Option<PathBuf> {
        std::env::var_os(self.env)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    }

    fn run_path(self) -> PathBuf {
        Path::new(RUN_SOCKET_DIR).join(self.name)
    }

    fn home_path(self) -> Option<PathBuf> {
        std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .map(|h| PathBuf::from(h).join(HOME_SOCKET_DIR).join(self.name))
    }

    fn agent_path(self) -> PathBuf {
        if let Some(p) = self.env_path() {
            return p;
        }
        match self.home_path() {
            Some(home) if !is_writable_dir(Path::new("/run")) => home,
            _ => self.run_path(),
        }
    }

    fn client_path(self) -> PathBuf {
        if let Some(p) = self.env_path() {
            return p;
        }
        let run = self.run_path();
        if is_socket(&run) {
            return run;
        }
        if let Some(home) = self.home_path() {
            if is_socket(&home) {
                return home;
            }
        }
        self.agent_path()
    }
}

/// The path from `$INGERO_ANNOTATE_SOCKET`, if set and non-empty.
pub fn env_socket_path() -> Option<PathBuf> {
    ANNOTATE.env_path()
}

/// `/run/ingero/annotate.sock`.
pub fn run_socket_path() -> PathBuf {
    ANNOTATE.run_path()
}

/// `$HOME/.ingero/annotate/annotate.sock`, if `$HOME` is set.
pub fn home_socket_path() -> Option<PathBuf> {
    ANNOTATE.home_path()
}

/// The path an agent run by this user binds (rules 1 and 2).
pub fn agent_socket_path() -> PathBuf {
    ANNOTATE.agent_path()
}

/// The path a client connects to (rules 1 and 3).
pub fn client_socket_path() -> PathBuf {
    ANNOTATE.client_path()
}

/// The NVTX socket an agent run by this user binds: `$INGERO_NVTX_SOCKET`, else
/// `/run/ingero/nvtx.sock` when `/run` is writable, else `$HOME/.ingero/annotate/nvtx.sock`.
pub fn nvtx_agent_socket_path() -> PathBuf {
    NVTX.agent_path()
}

/// The NVTX socket a client (the injection library, `ingero run`) connects to:
/// `$INGERO_NVTX_SOCKET`, else whichever of the two places holds a socket now (`/run` first),
/// else [`nvtx_agent_socket_path`].
pub fn nvtx_socket_path() -> PathBuf {
    NVTX.client_path()
}

/// Where the agent publishes the injection library for the NVTX socket `socket`: beside it.
pub fn nvtx_published_library(socket: &Path) -> PathBuf {
    socket
        .parent()
        .unwrap_or(Path::new("/"))
        .join(NVTX_LIBRARY_NAME)
}

/// The injection library to point `NVTX_INJECTION64_PATH` at: `$INGERO_NVTX_LIBRARY` when set
/// and non-empty (not checked: the user named it), else the one the agent published beside
/// [`nvtx_socket_path`] when it exists, else one next to the running executable (where
/// `cargo build --release` puts both `ingero` and the library), else `None`.
pub fn nvtx_library() -> Option<PathBuf> {
    let beside_exe = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|dir| dir.join(NVTX_LIBRARY_NAME)));
    pick_nvtx_library(
        std::env::var_os(NVTX_LIBRARY_ENV).map(PathBuf::from),
        nvtx_published_library(&nvtx_socket_path()),
        beside_exe,
    )
}

/// [`nvtx_library`]'s order, on given inputs (testable without touching the environment).
fn pick_nvtx_library(
    from_env: Option<PathBuf>,
    published: PathBuf,
    beside_exe: Option<PathBuf>,
) -> Option<PathBuf> {
    if let Some(p) = from_env.filter(|p| !p.as_os_str().is_empty()) {
        return Some(p);
    }
    if published.is_file() {
        return Some(published);
    }
    beside_exe.filter(|p| p.is_file())
}

/// Whether `path` is a socket (without following a symlink).
pub fn is_socket(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket())
}

/// Whether this process may create entries in `dir` (`access(2)`, which
/// accounts for root, ACLs and read-only mounts).
pub fn is_writable_dir(dir: &Path) -> bool {
    let Ok(c) = CString::new(dir.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: `c` is a valid NUL-terminated string that outlives the call;
    // access(2) only reads it.
    unsafe { libc::access(c.as_ptr(), libc::W_OK | libc::X_OK) == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_parts() {
        assert_eq!(
            run_socket_path(),
            PathBuf::from("/run/ingero/annotate.sock")
        );
        assert!(is_writable_dir(Path::new("/tmp")));
        assert!(!is_writable_dir(Path::new("/nonexistent-ingero-dir")));
        assert!(!is_socket(Path::new("/tmp")));
    }

    #[test]
    fn nvtx_socket_sits_beside_the_annotation_socket() {
        assert_eq!(NVTX.run_path(), PathBuf::from("/run/ingero/nvtx.sock"));
        assert_eq!(
            NVTX.home_path().map(|p| p.with_file_name(SOCKET_NAME)),
            ANNOTATE.home_path()
        );
        assert_eq!(
            nvtx_published_library(Path::new("/run/ingero/nvtx.sock")),
            PathBuf::from("/run/ingero/libingero_nvtx.so")
        );
    }

    #[test]
    fn nvtx_library_prefers_the_variable_then_the_published_file_then_the_executables_dir() {
        let dir = std::env::temp_dir().join(format!("ingero-nvtx-pick-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let published = dir.join("published.so");
        let beside = dir.join("beside.so");
        let named = PathBuf::from("/named/by/the/user.so");
        // The variable wins even when the file is missing: the user said so.
        assert_eq!(
            pick_nvtx_library(Some(named.clone()), published.clone(), Some(beside.clone())),
            Some(named)
        );
        // Nothing exists: none.
        assert_eq!(
            pick_nvtx_library(
                Some(PathBuf::new()),
                published.clone(),
                Some(beside.clone())
            ),
            None
        );
        std::fs::write(&beside, b"").expect("beside");
        assert_eq!(
            pick_nvtx_library(None, published.clone(), Some(beside.clone())),
            Some(beside.clone())
        );
        std::fs::write(&published, b"").expect("published");
        assert_eq!(
            pick_nvtx_library(None, published.clone(), Some(beside)),
            Some(published)
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn home_path_shape() {
        // Reading HOME only; the environment is not modified (tests run in
        // parallel threads).
        if let Some(h) = std::env::var_os("HOME").filter(|h| !h.is_empty()) {
            let expected = PathBuf::from(h).join(".ingero/annotate/annotate.sock");
            assert_eq!(home_socket_path(), Some(expected));
        }
    }
}
