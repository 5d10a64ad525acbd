//! Reading a NUL-terminated string out of another process, to complete kernel names the
//! eBPF record had to cut.
//!
//! Why in user space: 41 % of libtorch_cuda's kernel names are longer than 256 bytes and the
//! longest is 2.3 kB. Copying 2.3 kB per registration through the ring for 24k registrations
//! would cost the kernel side a large per-CPU buffer and the ring 50 MB per `import torch`;
//! instead the record carries the first bytes and the string's address, and the name (in the
//! library's `.rodata`, valid while the library is mapped) is read here. The prefix in the
//! record is checked against what is read, so a string that changed or went away is never
//! taken for the name: the name is then kept cut, and marked.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

/// Longest name read from a process: longer than any kernel name seen (2,301 bytes).
pub const MAX_NAME_LEN: usize = 4096;

/// Reads are split at 4 KiB boundaries: `process_vm_readv` fails a whole iovec that runs
/// into an unmapped page, and a string near the end of a mapping must still be readable.
/// Every page size (4 KiB, 16 KiB, 64 KiB) is a multiple, so no chunk spans two pages.
const CHUNK_BOUNDARY: u64 = 4096;

/// Reads the string at `addr` in process `pid`: the bytes before its NUL, or `max_len` bytes
/// if no NUL comes first (the caller tells these apart by the length). Uses
/// `process_vm_readv`, and `/proc/<pid>/mem` where that is refused (EPERM) or missing
/// (ENOSYS). An error when the memory is unreadable before a NUL or `max_len`.
pub fn read_user_string(pid: u32, addr: u64, max_len: usize) -> io::Result<Vec<u8>> {
    match read_string_in_chunks(addr, max_len, |at, buf| read_with_vm_readv(pid, at, buf)) {
        Err(err) if matches!(err.raw_os_error(), Some(libc::EPERM | libc::ENOSYS)) => {
            let mem = File::open(format!("/proc/{pid}/mem"))?;
            read_string_in_chunks(addr, max_len, |at, buf| mem.read_at(buf, at))
        }
        result => result,
    }
}

/// The full name for a record that carried `prefix` (its first bytes) and the name's
/// address: the prefix itself when it was not cut; else the string read from the process if
/// it begins with the prefix. Returns the name and whether it is still cut.
pub fn complete_name(pid: u32, prefix: &[u8], addr: u64, truncated: bool) -> (Vec<u8>, bool) {
    if !truncated {
        return (prefix.to_vec(), false);
    }
    match read_user_string(pid, addr, MAX_NAME_LEN) {
        Ok(full) if full.len() >= prefix.len() && full.starts_with(prefix) => {
            let still_cut = full.len() >= MAX_NAME_LEN;
            (full, still_cut)
        }
        _ => (prefix.to_vec(), true),
    }
}

fn read_with_vm_readv(pid: u32, addr: u64, buf: &mut [u8]) -> io::Result<usize> {
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let remote = libc::iovec {
        iov_base: addr as *mut libc::c_void,
        iov_len: buf.len(),
    };
    let pid = libc::pid_t::try_from(pid).map_err(|_| io::Error::from_raw_os_error(libc::ESRCH))?;
    // SAFETY: `local` describes `buf`, which is valid for writes of its length for the whole
    // call; `remote` is an address in the other process, which the kernel checks and this
    // process never dereferences. One iovec each, matching the counts passed.
    let read = unsafe { libc::process_vm_readv(pid, &local, 1, &remote, 1, 0) };
    usize::try_from(read).map_err(|_| io::Error::last_os_error())
}

/// The chunked loop shared by both ways of reading: `read_at(address, buffer)` returns how
/// many bytes it read.
fn read_string_in_chunks(
    addr: u64,
    max_len: usize,
    mut read_at: impl FnMut(u64, &mut [u8]) -> io::Result<usize>,
) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut buf = [0u8; CHUNK_BOUNDARY as usize];
    let mut at = addr;
    while out.len() < max_len {
        let to_boundary = (CHUNK_BOUNDARY - at % CHUNK_BOUNDARY) as usize;
        let want = to_boundary.min(max_len - out.len());
        let chunk = buf.get_mut(..want).unwrap_or_default();
        let read = read_at(at, chunk)?;
        if read == 0 {
            return Err(io::Error::from(io::ErrorKind::UnexpectedEof));
        }
        let chunk = chunk.get(..read).unwrap_or_default();
        if let Some(nul) = chunk.iter().position(|&byte| byte == 0) {
            out.extend_from_slice(chunk.get(..nul).unwrap_or_default());
            return Ok(out);
        }
        out.extend_from_slice(chunk);
        at = at
            .checked_add(read as u64)
            .ok_or_else(|| io::Error::from_raw_os_error(libc::EFAULT))?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::ffi::CString;

    use super::*;

    fn own_pid() -> u32 {
        std::process::id()
    }

    #[test]
    fn reads_a_string_of_this_process() {
        let text = CString::new("_ZN4demo5scaleILi4EEEvPffi").expect("no NUL");
        let read = read_user_string(own_pid(), text.as_ptr() as u64, MAX_NAME_LEN).expect("read");
        assert_eq!(read, text.as_bytes());
    }

    #[test]
    fn reads_across_page_boundaries_and_stops_at_max_len() {
        let long = "x".repeat(10_000);
        let text = CString::new(long.clone()).expect("no NUL");
        let addr = text.as_ptr() as u64;
        let read = read_user_string(own_pid(), addr, 20_000).expect("read");
        assert_eq!(read.len(), 10_000);
        let capped = read_user_string(own_pid(), addr, MAX_NAME_LEN).expect("read");
        assert_eq!(capped.len(), MAX_NAME_LEN);
    }

    #[test]
    fn a_string_ending_at_the_end_of_a_mapping_is_read() {
        // Two pages, the second unmapped: the string ends one byte before it.
        let page = 4096usize;
        // SAFETY: an anonymous private mapping of two pages, checked for failure below.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                2 * page,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(base, libc::MAP_FAILED);
        // SAFETY: the second page lies inside the mapping made above.
        let second = unsafe { base.cast::<u8>().add(page) };
        // SAFETY: unmaps only the second page of our own mapping.
        assert_eq!(unsafe { libc::munmap(second.cast(), page) }, 0);
        // SAFETY: the first page is mapped, writable and `page` bytes long.
        let first = unsafe { std::slice::from_raw_parts_mut(base.cast::<u8>(), page) };
        first.fill(b'a');
        first[page - 1] = 0;
        let addr = base as u64 + 100;
        let read = read_user_string(own_pid(), addr, MAX_NAME_LEN).expect("read");
        assert_eq!(read.len(), page - 101);
        // Without a NUL before the hole, the read fails instead of returning a cut name.
        first[page - 1] = b'a';
        assert!(read_user_string(own_pid(), addr, MAX_NAME_LEN).is_err());
        // SAFETY: unmaps the first page, which nothing uses any more.
        assert_eq!(unsafe { libc::munmap(base, page) }, 0);
    }

    #[test]
    fn unreadable_addresses_are_errors() {
        assert!(read_user_string(own_pid(), 0, MAX_NAME_LEN).is_err());
        assert!(read_user_string(own_pid(), u64::MAX - 10, MAX_NAME_LEN).is_err());
    }

    #[test]
    fn the_proc_mem_path_reads_the_same() {
        let text = CString::new("y".repeat(5000)).expect("no NUL");
        let mem = File::open(format!("/proc/{}/mem", own_pid())).expect("open mem");
        let read = read_string_in_chunks(text.as_ptr() as u64, MAX_NAME_LEN, |at, buf| {
            mem.read_at(buf, at)
        })
        .expect("read");
        assert_eq!(read.len(), MAX_NAME_LEN);
    }

    #[test]
    fn complete_name_uses_the_prefix_only_when_it_matches() {
        let full = format!(
            "_ZN2at6native29vectorized_elementwise_kernel{}",
            "I".repeat(600)
        );
        let text = CString::new(full.clone()).expect("no NUL");
        let addr = text.as_ptr() as u64;
        let prefix = &full.as_bytes()[..256];

        assert_eq!(
            complete_name(own_pid(), prefix, addr, false),
            (prefix.to_vec(), false)
        );
        assert_eq!(
            complete_name(own_pid(), prefix, addr, true),
            (full.clone().into_bytes(), false)
        );
        // The string at the address is not the one the record saw: keep the prefix, cut.
        let other = b"_ZN5other6kernel";
        assert_eq!(
            complete_name(own_pid(), other, addr, true),
            (other.to_vec(), true)
        );
        // Unreadable address: keep the prefix, cut.
        assert_eq!(
            complete_name(own_pid(), prefix, 8, true),
            (prefix.to_vec(), true)
        );
    }
}
