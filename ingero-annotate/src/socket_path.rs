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

/// The path from `$INGERO_ANNOTATE_SOCKET`, if set and non-empty.
pub fn env_socket_path() -> Option<PathBuf> {
    std::env::var_os(SOCKET_ENV)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// `/run/ingero/annotate.sock`.
pub fn run_socket_path() -> PathBuf {
    Path::new(RUN_SOCKET_DIR).join(SOCKET_NAME)
}

/// `$HOME/.ingero/annotate/annotate.sock`, if `$HOME` is set.
pub fn home_socket_path() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(|h| PathBuf::from(h).join(HOME_SOCKET_DIR).join(SOCKET_NAME))
}

/// The path an agent run by this user binds (rules 1 and 2).
pub fn agent_socket_path() -> PathBuf {
    if let Some(p) = env_socket_path() {
        return p;
    }
    match home_socket_path() {
        Some(home) if !is_writable_dir(Path::new("/run")) => home,
        _ => run_socket_path(),
    }
}

/// The path a client connects to (rules 1 and 3).
pub fn client_socket_path() -> PathBuf {
    if let Some(p) = env_socket_path() {
        return p;
    }
    let run = run_socket_path();
    if is_socket(&run) {
        return run;
    }
    if let Some(home) = home_socket_path() {
        if is_socket(&home) {
            return home;
        }
    }
    agent_socket_path()
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
    fn home_path_shape() {
        // Reading HOME only; the environment is not modified (tests run in
        // parallel threads).
        if let Some(h) = std::env::var_os("HOME").filter(|h| !h.is_empty()) {
            let expected = PathBuf::from(h).join(".ingero/annotate/annotate.sock");
            assert_eq!(home_socket_path(), Some(expected));
        }
    }
}
