//! The few system calls the client needs that std does not offer: a
//! non-blocking `connect` (std's blocks while the agent's backlog is full)
//! and a `send` that neither blocks nor raises SIGPIPE (std's `write` on a
//! closed socket kills a process that has not ignored SIGPIPE, e.g. a
//! Python or C host embedding this library).

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Open a non-blocking, close-on-exec Unix stream socket connected to
/// `path`. Fails with `WouldBlock` instead of waiting when the listener's
/// backlog is full.
pub fn connect_nonblocking(path: &Path) -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2) call with constant arguments; the returned fd
    // is checked before use.
    let raw = unsafe {
        libc::socket(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `raw` is a fresh, valid fd that nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };

    // SAFETY: sockaddr_un is plain old data; all-zero is a valid value.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let bytes = path.as_os_str().as_bytes();
    // Leave room for the terminating NUL that the zeroed array provides.
    if bytes.is_empty() || bytes.len() >= addr.sun_path.len() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "socket path is empty or longer than {} bytes",
                addr.sun_path.len() - 1
            ),
        ));
    }
    for (dst, src) in addr.sun_path.iter_mut().zip(bytes) {
        *dst = *src as libc::c_char;
    }
    let len = size_of::<libc::sa_family_t>() + bytes.len() + 1;
    // SAFETY: `addr` is a properly initialised sockaddr_un, `len` does not
    // exceed its size, and `fd` is a valid socket.
    let rc = unsafe {
        libc::connect(
            fd.as_raw_fd(),
            (&raw const addr).cast::<libc::sockaddr>(),
            len as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(fd)
}

/// Send as much of `buf` as fits now, without blocking and without
/// SIGPIPE. Returns the number of bytes sent (possibly fewer than
/// `buf.len()`); a full socket buffer is `WouldBlock`.
pub fn send_nonblocking(fd: BorrowedFd<'_>, buf: &[u8]) -> io::Result<usize> {
    loop {
        // SAFETY: `buf` is valid for `buf.len()` bytes for the duration of
        // the call and `fd` is a valid socket borrowed for it.
        let n = unsafe {
            libc::send(
                fd.as_raw_fd(),
                buf.as_ptr().cast(),
                buf.len(),
                libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
            )
        };
        if n >= 0 {
            return Ok(n as usize);
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}
