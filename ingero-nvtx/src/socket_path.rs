//! Where the agent's NVTX socket lives, by the same directory rules as the annotation socket
//! (`ingero-annotate/src/socket_path.rs`), with the file name `nvtx.sock`:
//!
//! 1. `$INGERO_NVTX_SOCKET`, when set and non-empty;
//! 2. else `/run/ingero/nvtx.sock` when a socket is there (the agent runs as root);
//! 3. else `$HOME/.ingero/annotate/nvtx.sock` when `$HOME` is set (an agent run by the user);
//! 4. else `/run/ingero/nvtx.sock`, which may appear later.
//!
//! The sender re-resolves on every connection attempt, so an agent started later, under either
//! directory, is found. The environment is read once, when the sender starts (reading it later
//! would race an application's `setenv`).

use std::ffi::OsString;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

/// Environment variable that overrides the socket path.
pub const SOCKET_ENV: &str = "INGERO_NVTX_SOCKET";
/// The socket's file name.
pub const SOCKET_NAME: &str = "nvtx.sock";
/// The system directory (the agent as root).
pub const RUN_SOCKET_DIR: &str = "/run/ingero";
/// The directory under `$HOME` (an agent run by a user).
pub const HOME_SOCKET_DIR: &str = ".ingero/annotate";

/// The environment the rules read, captured once.
#[derive(Clone, Debug, Default)]
pub struct SocketEnv {
    /// `$INGERO_NVTX_SOCKET`.
    pub explicit: Option<OsString>,
    /// `$HOME`.
    pub home: Option<OsString>,
}

impl SocketEnv {
    /// Reads the two variables.
    pub fn from_process() -> SocketEnv {
        SocketEnv {
            explicit: std::env::var_os(SOCKET_ENV),
            home: std::env::var_os("HOME"),
        }
    }
}

/// The path to connect to now; `is_socket` tells whether a socket exists at a path.
pub fn socket_path(env: &SocketEnv, is_socket: impl Fn(&Path) -> bool) -> PathBuf {
    if let Some(p) = env.explicit.as_ref().filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let run = Path::new(RUN_SOCKET_DIR).join(SOCKET_NAME);
    if is_socket(&run) {
        return run;
    }
    match env.home.as_ref().filter(|h| !h.is_empty()) {
        Some(h) => PathBuf::from(h).join(HOME_SOCKET_DIR).join(SOCKET_NAME),
        None => run,
    }
}

/// Whether `path` is a socket now (without following a symlink).
pub fn is_socket(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(explicit: Option<&str>, home: Option<&str>) -> SocketEnv {
        SocketEnv {
            explicit: explicit.map(OsString::from),
            home: home.map(OsString::from),
        }
    }

    #[test]
    fn the_variable_wins_when_set_and_non_empty() {
        let e = env(Some("/tmp/x.sock"), Some("/home/u"));
        assert_eq!(socket_path(&e, |_| true), PathBuf::from("/tmp/x.sock"));
        let empty = env(Some(""), Some("/home/u"));
        assert_eq!(
            socket_path(&empty, |_| false),
            PathBuf::from("/home/u/.ingero/annotate/nvtx.sock")
        );
    }

    #[test]
    fn run_first_when_a_socket_is_there_else_home_else_run() {
        let e = env(None, Some("/home/u"));
        assert_eq!(
            socket_path(&e, |p| p == Path::new("/run/ingero/nvtx.sock")),
            PathBuf::from("/run/ingero/nvtx.sock")
        );
        assert_eq!(
            socket_path(&e, |_| false),
            PathBuf::from("/home/u/.ingero/annotate/nvtx.sock")
        );
        assert_eq!(
            socket_path(&env(None, None), |_| false),
            PathBuf::from("/run/ingero/nvtx.sock")
        );
        assert_eq!(
            socket_path(&env(None, Some("")), |_| false),
            PathBuf::from("/run/ingero/nvtx.sock")
        );
    }

    #[test]
    fn is_socket_tells_sockets_from_files() {
        let dir = std::env::temp_dir().join(format!("ingero-nvtx-sp-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let sock = dir.join("s.sock");
        let _ = std::fs::remove_file(&sock);
        let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        assert!(is_socket(&sock));
        assert!(!is_socket(&dir));
        assert!(!is_socket(&dir.join("absent")));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
