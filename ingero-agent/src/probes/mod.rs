//! Loading the embedded eBPF object, attaching it, and reading its counters.
//!
//! [`Probes`] owns the loaded object and every link. [`Probes::detach`] removes the probes
//! while the ring buffers taken out of it stay readable, so a shutdown can drain what is
//! already buffered.

mod attach;
mod counters;
mod selftest;
mod tracefs;

use anyhow::{Context, Result, bail};
use aya::{
    Ebpf, EbpfLoader,
    maps::{Array, HashMap, MapData, RingBuf},
};
use ingero_ebpf::{Config, FilterMode};

pub use attach::LibraryAttach;
pub use counters::KernelCounters;
pub use tracefs::read_layout;

/// The object built by `cargo xtask build-ebpf`, embedded at compile time.
fn object() -> &'static [u8] {
    aya::include_bytes_aligned!(env!("INGERO_EBPF_OBJECT_PATH"))
}

/// [`Config`] as a map value. The wrapper exists because `aya::Pod` cannot be implemented for a
/// type of another crate.
#[derive(Clone, Copy)]
#[repr(transparent)]
struct ConfigPod(Config);

// SAFETY: `Config` is `repr(C)`, made only of integers, with no padding (its size is asserted
// in ingero-ebpf), so every bit pattern is valid and it can be copied into a map as bytes.
unsafe impl aya::Pod for ConfigPod {}

/// A ring buffer wakes the agent once this fraction of it is filled; below that the agent's
/// periodic drain ([`DRAIN_INTERVAL`]) collects records in batches.
const WAKEUP_FRACTION: u32 = 8;

/// How often the agent drains the rings without being woken.
pub const DRAIN_INTERVAL: std::time::Duration = std::time::Duration::from_millis(100);

/// Load-time settings.
#[derive(Clone, Debug)]
pub struct LoadOptions {
    /// Bytes per ring buffer (a power of two, a multiple of the page size).
    pub ringbuf_size: u32,
    /// `Some(pids)` traces only these processes (and their forked children).
    pub pids: Option<Vec<u32>>,
}

/// The loaded object, its links, and the maps user space reads.
pub struct Probes {
    ebpf: Ebpf,
    links: attach::Links,
    counters: KernelCounters,
    config: Config,
}

/// The ring buffers, taken out of the object so they outlive detaching.
pub struct Rings {
    pub cuda: RingBuf<MapData>,
    pub sched: RingBuf<MapData>,
    /// Kernel names and handle aliases.
    pub names: RingBuf<MapData>,
}

/// Checks a `--ringbuf-size` value the way the kernel will.
pub fn validate_ringbuf_size(bytes: u64) -> Result<u32> {
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as u64;
    if bytes < page || !bytes.is_power_of_two() || bytes > (1 << 30) {
        bail!(
            "--ringbuf-size must be a power of two between the page size ({page} bytes) and 1 GiB, \
             got {bytes}"
        );
    }
    Ok(bytes as u32)
}

impl Probes {
    /// Loads the object, writes the configuration, and fills the tracked-process map.
    pub fn load(options: &LoadOptions) -> Result<(Probes, Rings)> {
        raise_memlock_limit();
        let layout = read_layout().context("reading tracepoint formats from tracefs")?;
        let mut ebpf = EbpfLoader::new()
            .map_max_entries("CUDA_EVENTS", options.ringbuf_size)
            .map_max_entries("SCHED_EVENTS", options.ringbuf_size)
            .map_max_entries("NAME_EVENTS", options.ringbuf_size)
            .load(object())
            .context("loading the eBPF object (this needs root, or CAP_BPF and CAP_PERFMON)")?;
        let config = Config {
            filter_mode: if options.pids.is_some() {
                FilterMode::Listed as u32
            } else {
                FilterMode::All as u32
            },
            agent_tgid: std::process::id(),
            layout,
            wakeup_bytes: options.ringbuf_size / WAKEUP_FRACTION,
            _pad: 0,
        };
        let mut config_map: Array<_, ConfigPod> = Array::try_from(
            ebpf.map_mut("CONFIG")
                .context("the object has no CONFIG map")?,
        )?;
        config_map
            .set(0, ConfigPod(config), 0)
            .context("writing the probe configuration")?;
        if let Some(pids) = &options.pids {
            let mut tracked: HashMap<_, u32, u32> =
                HashMap::try_from(ebpf.map_mut("TRACKED").context("no TRACKED map")?)?;
            for pid in pids {
                tracked
                    .insert(pid, 1, 0)
                    .with_context(|| format!("tracking pid {pid}"))?;
            }
        }
        let take = |ebpf: &mut Ebpf, name: &str| -> Result<RingBuf<MapData>> {
            let map = ebpf
                .take_map(name)
                .with_context(|| format!("the object has no {name}"))?;
            RingBuf::try_from(map).with_context(|| format!("{name} is not a ring buffer"))
        };
        let rings = Rings {
            cuda: take(&mut ebpf, "CUDA_EVENTS")?,
            sched: take(&mut ebpf, "SCHED_EVENTS")?,
            names: take(&mut ebpf, "NAME_EVENTS")?,
        };
        let counters = KernelCounters::take_from(&mut ebpf)?;
        Ok((
            Probes {
                ebpf,
                links: attach::Links::default(),
                counters,
                config,
            },
            rings,
        ))
    }

    /// Marks processes as traced (found by discovery, so their scheduling is followed even
    /// before their first CUDA call).
    pub fn track(&mut self, pids: &[u32]) -> Result<()> {
        let mut tracked: HashMap<_, u32, u32> =
            HashMap::try_from(self.ebpf.map_mut("TRACKED").context("no TRACKED map")?)?;
        for pid in pids {
            tracked
                .insert(pid, 1, 0)
                .with_context(|| format!("tracking pid {pid}"))?;
        }
        Ok(())
    }

    /// The descriptor of the tracked-process map, for a child to add itself before it execs
    /// (`trace -- CMD`: tracked from its first instruction, with no window in which a fork
    /// would escape). Valid while `self` lives.
    pub fn tracked_map_fd(&self) -> Result<std::os::fd::RawFd> {
        use std::os::fd::{AsFd, AsRawFd};
        match self.ebpf.map("TRACKED").context("no TRACKED map")? {
            aya::maps::Map::HashMap(data) => Ok(data.fd().as_fd().as_raw_fd()),
            _ => bail!("TRACKED is not a hash map"),
        }
    }

    /// Attaches the scheduler and process tracepoints.
    pub fn attach_tracepoints(&mut self) -> Result<usize> {
        attach::tracepoints(&mut self.ebpf, &mut self.links)
    }

    /// Attaches the tracepoint of the NVIDIA drivers' kernel log messages (Xid reports).
    pub fn attach_driver_log(&mut self) -> Result<()> {
        attach::driver_log_tracepoint(&mut self.ebpf, &mut self.links)
    }

    /// Attaches entry and return probes to every traced symbol the library exports.
    pub fn attach_library(
        &mut self,
        library: &crate::discover::LibraryFile,
    ) -> Result<LibraryAttach> {
        attach::library(&mut self.ebpf, &mut self.links, library)
    }

    /// Attaches the NVTX fallback's program to the library's NVTX functions; returns the
    /// symbols attached.
    pub fn attach_nvtx_library(
        &mut self,
        library: &crate::discover::nvtx::NvtxLibrary,
    ) -> Result<Vec<&'static str>> {
        attach::nvtx_library(&mut self.ebpf, &mut self.links, library)
    }

    /// The same at entry points read beforehand (off the event loop).
    pub fn attach_nvtx_points(
        &mut self,
        library: &crate::discover::nvtx::NvtxLibrary,
        points: &[(ingero_ebpf::NvtxCall, u64)],
    ) -> Result<Vec<&'static str>> {
        attach::nvtx_points(&mut self.ebpf, &mut self.links, library, points)
    }

    /// Number of live probe links.
    pub fn probe_count(&self) -> usize {
        self.links.len()
    }

    pub fn counters(&self) -> &KernelCounters {
        &self.counters
    }

    /// Stops every program from recording (they return at once), so what is buffered can be
    /// drained to empty. Unregistering ~150 uprobes takes the kernel about 0.1 s each, one at a
    /// time, so the links themselves are released by [`Probes::release_in_background`] at exit.
    pub fn stop(&mut self) -> Result<()> {
        let mut config_map: Array<_, ConfigPod> = Array::try_from(
            self.ebpf
                .map_mut("CONFIG")
                .context("the object has no CONFIG map")?,
        )?;
        let stopped = Config {
            filter_mode: FilterMode::Stopped as u32,
            ..self.config
        };
        config_map
            .set(0, ConfigPod(stopped), 0)
            .context("stopping the probes")?;
        self.links.detach_tracepoints(&mut self.ebpf);
        Ok(())
    }

    /// Ends the process at once while a forked child closes the probe links, so the caller does
    /// not wait many seconds for the kernel to unregister each uprobe. Call last: nothing after
    /// it runs. The probes are already inert ([`Probes::stop`]). The process exits with `code`.
    pub fn release_in_background(self, code: i32) -> ! {
        std::mem::forget(self);
        exit_releasing_in_background(code)
    }
}

/// Exits with `code` at once, leaving a forked child to hold the last references to every
/// descriptor (the probe links among them) and close them after this process is gone.
///
/// The child waits for end of file on a pipe whose write end only the parent has, so the
/// parent's exit drops non-final references only; it closes stdio first, so nobody reading our
/// output waits for it. Without a child (fork or pipe failed) this exit releases them itself.
pub fn exit_releasing_in_background(code: i32) -> ! {
    let mut pipe = [-1i32; 2];
    // SAFETY: pipe2 writes two descriptors into the array.
    let piped = unsafe { libc::pipe2(pipe.as_mut_ptr(), libc::O_CLOEXEC) } == 0;
    // SAFETY: fork in a process whose other threads (the sockets' worker, idle once the
    // servers shut down) hold nothing the child needs: the child only makes async-signal-safe
    // system calls (close, close_range, read, _exit) and never returns.
    let pid = if piped { unsafe { libc::fork() } } else { -1 };
    if pid == 0 {
        // SAFETY: plain system calls on descriptors this process owns, then exit without
        // running destructors.
        unsafe {
            libc::close(pipe[1]);
            libc::syscall(libc::SYS_close_range, 0u32, 2u32, 0u32);
            let mut byte = 0u8;
            loop {
                let n = libc::read(pipe[0], (&mut byte as *mut u8).cast(), 1);
                if n >= 0 || *libc::__errno_location() != libc::EINTR {
                    break;
                }
            }
            libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32);
            libc::_exit(0);
        }
    }
    // SAFETY: exiting without destructors; callers flush their output first.
    unsafe { libc::_exit(code) }
}

/// Kernels before 5.11 charge eBPF maps to RLIMIT_MEMLOCK; lifting it is harmless elsewhere.
fn raise_memlock_limit() {
    let limit = libc::rlimit {
        rlim_cur: libc::RLIM_INFINITY,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: setrlimit with a valid, initialised struct.
    if unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &limit) } != 0 {
        tracing::debug!("could not raise RLIMIT_MEMLOCK; fine on kernels >= 5.11");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ringbuf_size_must_be_a_power_of_two_of_pages() {
        assert!(validate_ringbuf_size(4 << 20).is_ok());
        assert!(validate_ringbuf_size(3 << 20).is_err());
        assert!(validate_ringbuf_size(1024).is_err());
        assert!(validate_ringbuf_size(2 << 30).is_err());
    }

    #[test]
    fn embedded_object_is_an_ebpf_elf() {
        let obj = object();
        assert_eq!(&obj[..4], b"\x7fELF");
        // e_machine 247 = EM_BPF
        assert_eq!(u16::from_le_bytes([obj[18], obj[19]]), 247);
    }
}
