//! The command of `ingero trace -- CMD`: started once the probes are attached, traced from its
//! first instruction with every process it forks, and waited for; its exit ends the session.
//!
//! The child adds itself to the tracked-process map before it execs (a `bpf()` call between
//! fork and exec), so nothing it does escapes the filter, not even an immediate fork: adding
//! its pid after `spawn` returns would leave a window in which a shell's first child is
//! missed. It then drops to the invoking user and execs.

use std::io;
use std::os::fd::RawFd;
use std::path::Path;
use std::process::ExitStatus;

use tokio::process::{Child, Command};

use super::config::CommandConfig;
use crate::launch::{display_command, exec_failure_code};
use ingero_annotate::socket_path::{NVTX_INJECTION_ENV, NVTX_SOCKET_ENV};

/// A started command.
pub(super) struct Running {
    child: Child,
    pid: u32,
}

/// Starts the command with stdio inherited, tracked through the map behind `tracked_fd`.
/// On failure, returns the exit code a shell would give (127: not found, 126: not runnable)
/// after saying why on stderr.
pub(super) fn start(config: &CommandConfig, tracked_fd: RawFd) -> Result<Running, u8> {
    let shown = display_command(&config.program, &config.args);
    match spawn(config, tracked_fd) {
        Ok(child) => {
            let pid = child.id().unwrap_or(0);
            let user = config
                .user
                .as_ref()
                .map_or(String::new(), |u| format!(" as {} (uid {})", u.name, u.uid));
            eprintln!("ingero: started `{shown}` (pid {pid}){user}");
            Ok(Running { child, pid })
        }
        Err(e) => {
            eprintln!("ingero: cannot run `{shown}`: {e}");
            Err(exec_failure_code(&e))
        }
    }
}

/// Points the NVTX variables the command line set (not those the user had set: they are not
/// in `config.env`) at this session's socket and published library.
pub(super) fn point_at(config: &mut CommandConfig, socket: &Path, library: Option<&Path>) {
    for (k, v) in &mut config.env {
        if k == NVTX_SOCKET_ENV {
            *v = socket.as_os_str().to_owned();
        } else if k == NVTX_INJECTION_ENV {
            if let Some(lib) = library {
                *v = lib.as_os_str().to_owned();
            }
        }
    }
}

fn spawn(config: &CommandConfig, tracked_fd: RawFd) -> io::Result<Child> {
    let mut command = Command::new(&config.program);
    command
        .args(&config.args)
        .envs(config.env.iter().map(|(k, v)| (k, v)))
        // Ingero exits right after the command; a command still running then (the session
        // ended first) is left to finish, as it would without ingero.
        .kill_on_drop(false);
    // Copied out now: the closure runs in the forked child, where allocating is not allowed.
    let ids: Option<(u32, u32, Vec<libc::gid_t>)> = config
        .user
        .as_ref()
        .map(|u| (u.uid, u.gid, u.groups.clone()));
    let update = MapUpdate::new(tracked_fd);
    // SAFETY: the closure runs between fork and exec and makes only async-signal-safe system
    // calls (getpid, bpf, setgroups, setgid, setuid) on memory allocated before the fork.
    unsafe {
        command.pre_exec(move || {
            update.track_self()?;
            if let Some((uid, gid, groups)) = &ids {
                drop_privileges(*uid, *gid, groups)?;
            }
            Ok(())
        });
    }
    command.spawn()
}

/// Switches to `uid`/`gid` with `groups`: groups first, the uid last (after it, the others
/// can no longer be changed).
///
/// # Safety
/// Called in the forked child only: it changes the credentials of the calling process.
unsafe fn drop_privileges(uid: u32, gid: u32, groups: &[libc::gid_t]) -> io::Result<()> {
    // SAFETY: `groups` is a valid slice of `groups.len()` gids; setgroups only reads it.
    if unsafe { libc::setgroups(groups.len(), groups.as_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: plain system calls without pointer arguments.
    if unsafe { libc::setgid(gid) } != 0 || unsafe { libc::setuid(uid) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `union bpf_attr` as `BPF_MAP_UPDATE_ELEM` reads it (include/uapi/linux/bpf.h).
#[repr(C)]
struct MapElemAttr {
    map_fd: u32,
    _pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

/// Adds the calling process to the tracked-process map.
#[derive(Clone, Copy)]
struct MapUpdate {
    fd: RawFd,
}

impl MapUpdate {
    const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
    const BPF_ANY: u64 = 0;

    fn new(fd: RawFd) -> MapUpdate {
        MapUpdate { fd }
    }

    /// `TRACKED[getpid()] = 1`: the key and value the eBPF side uses (tgid → 1).
    fn track_self(self) -> io::Result<()> {
        // SAFETY: getpid has no preconditions.
        let key: u32 = unsafe { libc::getpid() } as u32;
        let value: u32 = 1;
        let attr = MapElemAttr {
            map_fd: self.fd as u32,
            _pad: 0,
            key: (&key as *const u32) as u64,
            value: (&value as *const u32) as u64,
            flags: Self::BPF_ANY,
        };
        // SAFETY: `attr` is a valid bpf_attr prefix of the size passed; `key` and `value`
        // outlive the call, and the kernel only reads them.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_bpf,
                Self::BPF_MAP_UPDATE_ELEM,
                &attr as *const MapElemAttr,
                size_of::<MapElemAttr>(),
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

impl Running {
    pub(super) fn pid(&self) -> u32 {
        self.pid
    }

    /// Waits for the command to exit; its exit code as a shell gives it.
    pub(super) async fn wait(&mut self) -> u8 {
        match self.child.wait().await {
            Ok(status) => exit_code(status),
            Err(e) => {
                eprintln!("ingero: waiting for the command failed: {e}");
                1
            }
        }
    }

    /// Passes a signal ingero received on to the command, unless the terminal already sent it
    /// there: Ctrl-C signals the whole foreground process group, which the command shares, and
    /// a second SIGINT would interrupt its clean-up (Python's second KeyboardInterrupt).
    pub(super) fn forward(&self, signal: i32) {
        if signal == libc::SIGINT && in_terminal_foreground() {
            return;
        }
        // SAFETY: kill(2) on our own child's pid; it has not been reaped (we still wait on
        // it), so the pid cannot have been reused.
        unsafe { libc::kill(self.pid as i32, signal) };
    }
}

/// Whether this process's group is the foreground group of the terminal on stdin, stdout or
/// stderr (so a Ctrl-C there reached the command too).
fn in_terminal_foreground() -> bool {
    // SAFETY: getpgrp has no preconditions.
    let own = unsafe { libc::getpgrp() };
    // SAFETY: isatty and tcgetpgrp only query the descriptor; an invalid one yields an error.
    (0..3).any(|fd| unsafe { libc::isatty(fd) == 1 && libc::tcgetpgrp(fd) == own })
}

/// The exit code a shell reports: the code, or 128 + the signal that killed it.
pub(super) fn exit_code(status: ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => code as u8,
        (None, Some(signal)) => (128 + signal) as u8,
        (None, None) => 1,
    }
}

/// `program args…` for messages.
pub(super) fn shown(config: &CommandConfig) -> String {
    display_command(&config.program, &config.args)
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::ExitStatusExt;

    use super::*;

    #[test]
    fn exit_codes_are_the_shells() {
        assert_eq!(exit_code(ExitStatus::from_raw(7 << 8)), 7);
        assert_eq!(exit_code(ExitStatus::from_raw(libc::SIGTERM)), 143);
        assert_eq!(exit_code(ExitStatus::from_raw(libc::SIGKILL)), 137);
    }

    #[test]
    fn the_attribute_block_is_what_the_kernel_reads() {
        assert_eq!(size_of::<MapElemAttr>(), 32);
        assert_eq!(std::mem::offset_of!(MapElemAttr, key), 8);
        assert_eq!(std::mem::offset_of!(MapElemAttr, flags), 24);
    }
}
