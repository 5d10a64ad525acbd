//! Binding the annotation socket safely, and removing it only if it is
//! still ours.
//!
//! Never follow a symlink at the socket path, never delete something that
//! is not a socket, and never steal a socket another agent is still
//! answering on: only a socket whose listener is gone (connect is refused)
//! is replaced.

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use tokio::net::{UnixListener, UnixStream};

use super::perms::{prepare_dir, secure_socket};

/// How long to wait for an existing socket to answer before calling it
/// stale. A live agent accepts at once (the kernel completes connect(2)
/// from its backlog).
const PROBE_TIMEOUT: Duration = Duration::from_millis(500);

/// Device and inode of the socket file we bound: the proof that the file at
/// the path is still ours at exit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SocketIdentity {
    dev: u64,
    ino: u64,
}

/// A listening socket and where it is.
#[derive(Debug)]
pub(crate) struct Bound {
    pub(crate) listener: UnixListener,
    pub(crate) path: PathBuf,
    pub(crate) identity: SocketIdentity,
}

/// Prepare the directory, clear a stale socket, bind and secure.
/// `manage_dir`: the directory is the agent's own (default location) and
/// its mode may be set.
pub(crate) async fn bind_socket(
    path: &Path,
    gid: Option<u32>,
    manage_dir: bool,
) -> anyhow::Result<Bound> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .with_context(|| format!("annotation socket path {} has no directory", path.display()))?;
    prepare_dir(dir, gid, manage_dir)?;
    clear_stale(path).await?;
    let listener = UnixListener::bind(path)
        .with_context(|| format!("binding annotation socket {}", path.display()))?;
    let identity = identity_of(path)?;
    if let Err(e) = secure_socket(path, gid) {
        remove_if_ours(path, identity);
        return Err(e);
    }
    Ok(Bound {
        listener,
        path: path.to_owned(),
        identity,
    })
}

fn identity_of(path: &Path) -> anyhow::Result<SocketIdentity> {
    let m = std::fs::symlink_metadata(path)
        .with_context(|| format!("inspecting {}", path.display()))?;
    Ok(SocketIdentity {
        dev: m.dev(),
        ino: m.ino(),
    })
}

/// Remove whatever is at `path` only if it is a stale socket.
async fn clear_stale(path: &Path) -> anyhow::Result<()> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e).with_context(|| format!("inspecting {}", path.display())),
    };
    let ft = meta.file_type();
    if ft.is_symlink() {
        bail!(
            "{} is a symbolic link; refusing to follow or replace it",
            path.display()
        );
    }
    if !ft.is_socket() {
        bail!(
            "{} exists and is not a socket; refusing to replace it",
            path.display()
        );
    }
    match tokio::time::timeout(PROBE_TIMEOUT, UnixStream::connect(path)).await {
        Ok(Ok(_)) => bail!(
            "another agent is already listening on {}; stop it first or use --annotate-socket",
            path.display()
        ),
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
            tracing::info!(path = %path.display(), "replacing stale annotation socket");
            match std::fs::remove_file(path) {
                Ok(()) => Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                Err(e) => {
                    Err(e).with_context(|| format!("removing stale socket {}", path.display()))
                }
            }
        }
        Ok(Err(e)) => Err(e).with_context(|| format!("probing existing socket {}", path.display())),
        Err(_) => bail!(
            "an existing socket at {} did not answer within {PROBE_TIMEOUT:?} but is not refusing \
             connections either; refusing to replace it",
            path.display()
        ),
    }
}

/// Remove the socket file if it is still the one we bound. Returns whether
/// it was removed.
pub(crate) fn remove_if_ours(path: &Path, identity: SocketIdentity) -> bool {
    match identity_of(path) {
        Ok(now) if now == identity => match std::fs::remove_file(path) {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "could not remove annotation socket");
                false
            }
        },
        Ok(_) => {
            tracing::info!(path = %path.display(), "annotation socket was replaced by someone else; leaving it");
            false
        }
        Err(_) => false,
    }
}
