//! The annotation socket's directory, as `ingero trace --annotate` run by this user would use
//! it: whether it exists with safe permissions, or can be created. Nothing is created here.

use std::{
    os::unix::fs::MetadataExt,
    path::{Path, PathBuf},
};

use ingero_annotate::socket_path::{agent_socket_path, is_writable_dir};

use super::{Line, Status};

/// What the check found about the socket's directory.
#[derive(Clone, Debug)]
pub struct SocketReport {
    pub socket: PathBuf,
    pub directory: PathBuf,
    pub exists: bool,
    /// Permission bits when the directory exists.
    pub mode: Option<u32>,
    /// Whether the agent could use (or create) it.
    pub usable: bool,
    pub line: Line,
}

pub fn check() -> SocketReport {
    let socket = agent_socket_path();
    let directory = socket
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("/"));
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    let shown = directory.display();
    let (exists, mode, usable, line) = match std::fs::symlink_metadata(&directory) {
        Ok(meta) => {
            let mode = meta.mode() & 0o7777;
            let problem = if meta.file_type().is_symlink() {
                Some("is a symbolic link".to_string())
            } else if !meta.is_dir() {
                Some("is not a directory".to_string())
            } else if meta.uid() != euid {
                Some(format!("is owned by uid {}, not by uid {euid}", meta.uid()))
            } else if mode & 0o022 != 0 {
                Some("is writable by group or others".to_string())
            } else {
                None
            };
            match problem {
                None => (
                    true,
                    Some(mode),
                    true,
                    Line::new(
                        "annotate-socket",
                        Status::Ok,
                        format!("{shown} exists (mode {mode:04o})"),
                    ),
                ),
                Some(problem) => (
                    true,
                    Some(mode),
                    false,
                    Line::new(
                        "annotate-socket",
                        Status::Warn,
                        format!(
                            "{shown} {problem} (mode {mode:04o}): `ingero trace --annotate` \
                             will refuse it; remove it or use --annotate-socket"
                        ),
                    ),
                ),
            }
        }
        Err(_) => {
            let ancestor = directory
                .ancestors()
                .find(|a| a.exists())
                .unwrap_or(Path::new("/"));
            if is_writable_dir(ancestor) {
                (
                    false,
                    None,
                    true,
                    Line::new(
                        "annotate-socket",
                        Status::Ok,
                        format!("{shown} will be created (mode 0700) by `ingero trace --annotate`"),
                    ),
                )
            } else {
                (
                    false,
                    None,
                    false,
                    Line::new(
                        "annotate-socket",
                        Status::Warn,
                        format!(
                            "{shown} does not exist and {} is not writable: annotations need \
                             --annotate-socket PATH",
                            ancestor.display()
                        ),
                    ),
                )
            }
        }
    };
    SocketReport {
        socket,
        directory,
        exists,
        mode,
        usable,
        line,
    }
}
