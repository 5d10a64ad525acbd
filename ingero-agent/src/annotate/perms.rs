//! Ownership and permission rules for the socket's directory, and group
//! lookup for `--annotate-group`.
//!
//! The directory is what protects the socket (connect(2) needs search
//! permission on it, and the socket file briefly has umask permissions
//! between bind and chmod), so it must be a real directory owned by the
//! agent's uid that nobody else can write into; otherwise someone could swap
//! the socket for their own.

use std::ffi::{CStr, CString};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::Path;

use anyhow::{Context, bail};

/// Directory mode without a group.
pub(crate) const DIR_MODE_PRIVATE: u32 = 0o700;
/// Directory mode with `--annotate-group`: the group may traverse only.
pub(crate) const DIR_MODE_GROUP: u32 = 0o710;
/// Socket mode without a group.
pub(crate) const SOCK_MODE_PRIVATE: u32 = 0o700;
/// Socket mode with `--annotate-group`: group members may connect.
pub(crate) const SOCK_MODE_GROUP: u32 = 0o770;

/// The agent's effective uid.
pub(crate) fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// Make sure `dir` exists and is safe to hold the socket. `manage`: the
/// agent owns this directory (its default location, or created just now)
/// and sets its mode and group; otherwise the mode is only checked.
pub(crate) fn prepare_dir(dir: &Path, gid: Option<u32>, manage: bool) -> anyhow::Result<()> {
    let created = match std::fs::symlink_metadata(dir) {
        Ok(_) => false,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(DIR_MODE_PRIVATE)
                .create(dir)
                .with_context(|| {
                    format!("creating annotation socket directory {}", dir.display())
                })?;
            true
        }
        Err(e) => return Err(e).with_context(|| format!("inspecting {}", dir.display())),
    };
    let meta =
        std::fs::symlink_metadata(dir).with_context(|| format!("inspecting {}", dir.display()))?;
    if meta.file_type().is_symlink() {
        bail!(
            "annotation socket directory {} is a symbolic link; refusing to use it",
            dir.display()
        );
    }
    if !meta.is_dir() {
        bail!(
            "annotation socket directory {} is not a directory",
            dir.display()
        );
    }
    let me = euid();
    if meta.uid() != me {
        bail!(
            "annotation socket directory {} is owned by uid {}, not by the agent (uid {me}); \
             refusing to use it (remove it or pick another path with --annotate-socket)",
            dir.display(),
            meta.uid()
        );
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o022 != 0 {
        bail!(
            "annotation socket directory {} is writable by group or others (mode {mode:04o}); \
             refusing to use it (chmod go-w it, or pick another path with --annotate-socket)",
            dir.display()
        );
    }
    if manage || created {
        let want = if gid.is_some() {
            DIR_MODE_GROUP
        } else {
            DIR_MODE_PRIVATE
        };
        if let Some(gid) = gid {
            std::os::unix::fs::chown(dir, None, Some(gid))
                .with_context(|| format!("giving {} to gid {gid}", dir.display()))?;
        }
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(want))
            .with_context(|| format!("setting mode {want:04o} on {}", dir.display()))?;
    } else if gid.is_some() && mode & 0o010 == 0 {
        tracing::warn!(
            dir = %dir.display(),
            "--annotate-group is set but the group cannot enter the socket directory (mode {mode:04o}); \
             group members will not be able to connect"
        );
    }
    Ok(())
}

/// Set the socket's mode (and group) after bind.
pub(crate) fn secure_socket(path: &Path, gid: Option<u32>) -> anyhow::Result<()> {
    let mode = if gid.is_some() {
        SOCK_MODE_GROUP
    } else {
        SOCK_MODE_PRIVATE
    };
    if let Some(gid) = gid {
        std::os::unix::fs::chown(path, None, Some(gid))
            .with_context(|| format!("giving {} to gid {gid}", path.display()))?;
    }
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .with_context(|| format!("setting mode {mode:04o} on {}", path.display()))
}

/// A group given by name or number.
pub(crate) fn resolve_group(spec: &str) -> anyhow::Result<u32> {
    if let Ok(gid) = spec.parse::<u32>() {
        return Ok(gid);
    }
    let name = CString::new(spec).with_context(|| format!("group name {spec:?} contains NUL"))?;
    let mut buf = vec![0u8; 1024];
    loop {
        // SAFETY: zeroed `group` is a valid out-parameter; getgrnam_r only
        // writes into it and into `buf`, whose length is passed.
        let mut grp: libc::group = unsafe { std::mem::zeroed() };
        let mut result: *mut libc::group = std::ptr::null_mut();
        // SAFETY: all pointers are valid for the duration of the call and
        // `buf.len()` is the true size of `buf`.
        let rc = unsafe {
            libc::getgrnam_r(
                name.as_ptr(),
                &mut grp,
                buf.as_mut_ptr().cast(),
                buf.len(),
                &mut result,
            )
        };
        if rc == libc::ERANGE && buf.len() < (1 << 20) {
            buf.resize(buf.len() * 2, 0);
            continue;
        }
        if rc != 0 {
            return Err(std::io::Error::from_raw_os_error(rc))
                .with_context(|| format!("looking up group {spec:?}"));
        }
        if result.is_null() {
            bail!("no such group {spec:?} (for --annotate-group)");
        }
        return Ok(grp.gr_gid);
    }
}

/// The name of group `gid`, if it has one.
fn group_name(gid: u32) -> Option<String> {
    let mut buf = vec![0u8; 4096];
    // SAFETY: zeroed `group` is a valid out-parameter.
    let mut grp: libc::group = unsafe { std::mem::zeroed() };
    let mut result: *mut libc::group = std::ptr::null_mut();
    // SAFETY: all pointers are valid for the call; `buf.len()` is its size.
    let rc = unsafe {
        libc::getgrgid_r(
            gid,
            &mut grp,
            buf.as_mut_ptr().cast(),
            buf.len(),
            &mut result,
        )
    };
    if rc != 0 || result.is_null() || grp.gr_name.is_null() {
        return None;
    }
    // SAFETY: on success gr_name points to a NUL-terminated string inside
    // `buf`, which is still alive.
    let name = unsafe { CStr::from_ptr(grp.gr_name) };
    name.to_str().ok().map(str::to_owned)
}

/// When the agent runs under sudo without a group, how to let the invoking
/// user write (their training job usually runs unprivileged).
pub(crate) fn sudo_hint(socket: &Path) -> Option<String> {
    if euid() != 0 {
        return None;
    }
    let uid: u32 = std::env::var("SUDO_UID").ok()?.parse().ok()?;
    if uid == 0 {
        return None;
    }
    let user = std::env::var("SUDO_USER").unwrap_or_else(|_| uid.to_string());
    let group = std::env::var("SUDO_GID")
        .ok()
        .and_then(|g| g.parse::<u32>().ok())
        .map(|g| group_name(g).unwrap_or_else(|| g.to_string()))
        .unwrap_or_else(|| user.clone());
    Some(format!(
        "the annotation socket {} is writable by root only; to let {user}'s programs annotate, \
         restart with --annotate-group {group}",
        socket.display()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_resolve_by_name_and_number() {
        assert_eq!(resolve_group("0").ok(), Some(0));
        assert_eq!(resolve_group("root").ok(), Some(0));
        assert!(resolve_group("no-such-group-ingero").is_err());
        assert_eq!(group_name(0).as_deref(), Some("root"));
    }
}
