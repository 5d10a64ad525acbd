//! The host's side of `ingero check`: privileges (root or the capabilities), the kernel
//! release, BTF and tracefs. Each check is one [`Line`]; the parsers are pure so they are
//! tested on text.

use std::{ffi::CStr, io::ErrorKind, path::Path};

use super::{Line, Status};

/// `CAP_SYS_ADMIN`: before Linux 5.8 the only capability that allowed loading eBPF.
const CAP_SYS_ADMIN: u32 = 21;
/// `CAP_PERFMON` (Linux 5.8): perf events, which uprobes and tracepoints are attached through.
const CAP_PERFMON: u32 = 38;
/// `CAP_BPF` (Linux 5.8): loading programs and creating maps.
const CAP_BPF: u32 = 39;

/// Who this process is, as far as eBPF cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Privileges {
    pub euid: u32,
    /// The effective capability set (`CapEff` of /proc/self/status).
    pub cap_eff: u64,
}

impl Privileges {
    /// This process's, from /proc/self/status (no capabilities when it cannot be read).
    pub fn current() -> Privileges {
        // SAFETY: geteuid has no preconditions and cannot fail.
        let euid = unsafe { libc::geteuid() };
        let cap_eff = std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| parse_cap_eff(&s))
            .unwrap_or(0);
        Privileges { euid, cap_eff }
    }

    pub fn has(self, cap: u32) -> bool {
        self.cap_eff & (1u64 << cap) != 0
    }

    pub fn cap_bpf(self) -> bool {
        self.has(CAP_BPF)
    }

    pub fn cap_perfmon(self) -> bool {
        self.has(CAP_PERFMON)
    }

    pub fn cap_sys_admin(self) -> bool {
        self.has(CAP_SYS_ADMIN)
    }

    /// Whether the kernel lets this process load and attach ingero's programs.
    pub fn sufficient(self) -> bool {
        (self.cap_bpf() && self.cap_perfmon()) || self.cap_sys_admin()
    }

    pub fn line(self) -> Line {
        let names: Vec<&str> = [
            (self.cap_bpf(), "CAP_BPF"),
            (self.cap_perfmon(), "CAP_PERFMON"),
            (self.cap_sys_admin(), "CAP_SYS_ADMIN"),
        ]
        .iter()
        .filter_map(|(has, name)| has.then_some(*name))
        .collect();
        let who = if self.euid == 0 {
            "root".to_string()
        } else {
            format!("uid {}", self.euid)
        };
        if self.sufficient() {
            Line::new(
                "privileges",
                Status::Ok,
                format!("{who} with {}", names.join(", ")),
            )
        } else {
            let has = if names.is_empty() {
                "none of CAP_BPF, CAP_PERFMON, CAP_SYS_ADMIN".to_string()
            } else {
                format!("only {}", names.join(", "))
            };
            Line::new(
                "privileges",
                Status::Fail,
                format!(
                    "{who} has {has}: loading eBPF programs needs root or CAP_BPF and CAP_PERFMON. \
                     Run it with sudo, or grant the binary the capabilities once: \
                     sudo setcap cap_bpf,cap_perfmon+ep $(command -v ingero)"
                ),
            )
        }
    }
}

/// The effective capability set from the text of /proc/<pid>/status.
pub fn parse_cap_eff(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
}

/// `(major, minor)` of a kernel release such as `6.1.0-28-amd64`.
pub fn parse_kernel_version(release: &str) -> Option<(u32, u32)> {
    let mut parts = release.split(|c: char| !c.is_ascii_digit());
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// The running kernel's release (`uname -r`).
pub fn kernel_release() -> String {
    // SAFETY: utsname is plain bytes, so all zeroes is a valid value.
    let mut uts: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: uname writes into the struct it is given, which lives across the call.
    if unsafe { libc::uname(&mut uts) } != 0 {
        return "unknown".to_string();
    }
    // SAFETY: the kernel NUL-terminates `release`, and the array outlives the borrow.
    unsafe { CStr::from_ptr(uts.release.as_ptr()) }
        .to_string_lossy()
        .into_owned()
}

/// The oldest kernel ingero is built and tested for (attach cookies arrived in 5.15).
const MIN_KERNEL: (u32, u32) = (5, 15);

pub fn kernel_line(release: &str) -> Line {
    match parse_kernel_version(release) {
        Some(v) if v >= MIN_KERNEL => Line::new("kernel", Status::Ok, format!("Linux {release}")),
        Some(_) => Line::new(
            "kernel",
            Status::Warn,
            format!(
                "Linux {release} is older than {}.{}, which ingero needs for uprobe attach \
                 cookies; the eBPF check below says whether this kernel has them anyway",
                MIN_KERNEL.0, MIN_KERNEL.1
            ),
        ),
        None => Line::new(
            "kernel",
            Status::Warn,
            format!("cannot tell the version of Linux {release}"),
        ),
    }
}

const BTF: &str = "/sys/kernel/btf/vmlinux";

pub fn btf_line() -> Line {
    if Path::new(BTF).exists() {
        Line::new("btf", Status::Ok, format!("{BTF} present"))
    } else {
        Line::new(
            "btf",
            Status::Info,
            format!(
                "{BTF} absent; not needed: ingero reads the tracepoint layouts from tracefs \
                 instead of BTF"
            ),
        )
    }
}

/// Where tracefs may be; the first is where ingero mounts it.
const TRACEFS_ROOTS: &[&str] = &["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

/// Finds tracefs, mounting it at /sys/kernel/tracing when it is absent and this process may.
pub fn tracefs_line(privileges: Privileges) -> Line {
    let mut unreadable = None;
    for root in TRACEFS_ROOTS {
        match std::fs::metadata(Path::new(root).join("events")) {
            Ok(meta) if meta.is_dir() => {
                return Line::new("tracefs", Status::Ok, format!("mounted at {root}"));
            }
            Err(e) if e.kind() == ErrorKind::PermissionDenied => unreadable = Some(*root),
            _ => {}
        }
    }
    if let Some(root) = unreadable {
        return Line::new(
            "tracefs",
            Status::Fail,
            format!(
                "mounted at {root}, but its mode lets only root read the tracepoint formats \
                 ingero needs: run ingero with sudo"
            ),
        );
    }
    let how = "mount -t tracefs nodev /sys/kernel/tracing";
    if !privileges.cap_sys_admin() {
        return Line::new(
            "tracefs",
            Status::Fail,
            format!("not mounted; as root: {how}"),
        );
    }
    match mount_tracefs() {
        Ok(()) => Line::new(
            "tracefs",
            Status::Ok,
            format!(
                "was not mounted; mounted it at {} ({how})",
                TRACEFS_ROOTS[0]
            ),
        ),
        Err(e) => Line::new(
            "tracefs",
            Status::Fail,
            format!("not mounted, and `{how}` failed: {e}"),
        ),
    }
}

fn mount_tracefs() -> std::io::Result<()> {
    let source = c"nodev";
    let target = c"/sys/kernel/tracing";
    let fstype = c"tracefs";
    // SAFETY: NUL-terminated string literals that outlive the call; no data argument.
    let rc = unsafe {
        libc::mount(
            source.as_ptr(),
            target.as_ptr(),
            fstype.as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capabilities_come_from_cap_eff() {
        let status = "Name:\tingero\nCapInh:\t0000000000000000\nCapPrm:\t000001ffffffffff\n\
                      CapEff:\t000001ffffffffff\nCapBnd:\t000001ffffffffff\n";
        let root = Privileges {
            euid: 0,
            cap_eff: parse_cap_eff(status).expect("CapEff"),
        };
        assert!(root.cap_bpf() && root.cap_perfmon() && root.cap_sys_admin());
        assert!(root.sufficient());
        assert_eq!(root.line().status, Status::Ok);
        assert!(root.line().message.starts_with("root with CAP_BPF"));
    }

    #[test]
    fn the_two_capabilities_without_root_are_enough_and_one_is_not() {
        let both = Privileges {
            euid: 1000,
            cap_eff: (1 << CAP_BPF) | (1 << CAP_PERFMON),
        };
        assert!(both.sufficient());
        assert_eq!(both.line().message, "uid 1000 with CAP_BPF, CAP_PERFMON");
        let one = Privileges {
            euid: 1000,
            cap_eff: 1 << CAP_BPF,
        };
        assert!(!one.sufficient());
        let line = one.line();
        assert_eq!(line.status, Status::Fail);
        assert!(line.message.contains("only CAP_BPF"), "{}", line.message);
        let none = Privileges {
            euid: 65534,
            cap_eff: parse_cap_eff("CapEff:\t0000000000000000\n").expect("CapEff"),
        };
        let line = none.line();
        assert_eq!(line.status, Status::Fail);
        assert!(line.message.contains("sudo"), "{}", line.message);
        assert!(line.message.contains("setcap cap_bpf,cap_perfmon+ep"));
    }

    #[test]
    fn status_text_without_cap_eff_gives_none() {
        assert_eq!(parse_cap_eff("Name:\tx\n"), None);
        assert_eq!(parse_cap_eff("CapEff:\tnot-hex\n"), None);
    }

    #[test]
    fn kernel_versions_are_read_from_releases() {
        assert_eq!(parse_kernel_version("6.1.0-28-amd64"), Some((6, 1)));
        assert_eq!(parse_kernel_version("5.15.0"), Some((5, 15)));
        assert_eq!(parse_kernel_version("6.18.44-fc-v769"), Some((6, 18)));
        assert_eq!(parse_kernel_version("weird"), None);
        assert_eq!(kernel_line("5.15.0-91-generic").status, Status::Ok);
        assert_eq!(kernel_line("5.4.0-150-generic").status, Status::Warn);
        assert_eq!(kernel_line("4.18.0-513.el8.x86_64").status, Status::Warn);
    }
}
