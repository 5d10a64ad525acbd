//! Clock readings for ClockSnapshot packets and the host's stable identity (`machine_id`).

use super::proto::{Clock, ClockSnapshot, clock_id};
use crate::timeline::clock::clock_ns;

/// BOOTTIME and REALTIME relative to MONOTONIC, measured now.
#[derive(Clone, Copy, Debug)]
pub struct ClockOffsets {
    pub boot_minus_mono: i128,
    pub real_minus_mono: i128,
}

impl ClockOffsets {
    /// Reads MONOTONIC around the other two so the offsets are taken at one instant (to within
    /// the few hundred ns the reads take).
    pub fn measure() -> ClockOffsets {
        let m1 = clock_ns(libc::CLOCK_MONOTONIC);
        let boot = clock_ns(libc::CLOCK_BOOTTIME);
        let real = clock_ns(libc::CLOCK_REALTIME);
        let m2 = clock_ns(libc::CLOCK_MONOTONIC);
        let mid = i128::from(m1) + (i128::from(m2) - i128::from(m1)) / 2;
        ClockOffsets {
            boot_minus_mono: i128::from(boot) - mid,
            real_minus_mono: i128::from(real) - mid,
        }
    }

    fn at(mono: u64, offset: i128) -> u64 {
        u64::try_from((i128::from(mono) + offset).max(0)).unwrap_or(u64::MAX)
    }

    /// A snapshot stating that at MONOTONIC `mono` the other clocks read what the offsets
    /// say; `incremental` also re-states ingero's sequence-scoped clock 64 at `mono`.
    pub fn snapshot(&self, mono: u64, incremental: bool) -> ClockSnapshot {
        let mut clocks = Vec::with_capacity(4);
        if incremental {
            clocks.push(Clock {
                clock_id: Some(clock_id::INCREMENTAL_MONOTONIC),
                timestamp: Some(mono),
                is_incremental: Some(true),
            });
        }
        clocks.push(Clock {
            clock_id: Some(clock_id::MONOTONIC),
            timestamp: Some(mono),
            is_incremental: None,
        });
        clocks.push(Clock {
            clock_id: Some(clock_id::BOOTTIME),
            timestamp: Some(Self::at(mono, self.boot_minus_mono)),
            is_incremental: None,
        });
        clocks.push(Clock {
            clock_id: Some(clock_id::REALTIME),
            timestamp: Some(Self::at(mono, self.real_minus_mono)),
            is_incremental: None,
        });
        ClockSnapshot { clocks }
    }
}

pub fn monotonic_now_ns() -> u64 {
    crate::timeline::clock::monotonic_now_ns()
}

pub fn realtime_now_ns() -> u64 {
    clock_ns(libc::CLOCK_REALTIME)
}

/// FNV-1a, 32 bits.
pub fn fnv1a32(bytes: &[u8]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in bytes {
        h ^= u32::from(*b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

/// A stable, non-zero id of this host: a hash of `/etc/machine-id` (systemd's per-install id),
/// else of the D-Bus copy, else of the host name.
pub fn machine_id() -> u32 {
    let source = ["/etc/machine-id", "/var/lib/dbus/machine-id"]
        .iter()
        .find_map(|p| {
            std::fs::read_to_string(p)
                .ok()
                .filter(|s| !s.trim().is_empty())
        })
        .unwrap_or_else(host_name);
    machine_id_from(source.trim())
}

/// Bits of the default machine id.
pub const MACHINE_ID_BITS: u32 = 21;

/// The FNV-1a hash of `source` folded to [`MACHINE_ID_BITS`] bits, never zero (zero means
/// "this host" to Perfetto).
///
/// The id is stamped on every packet, and 21 bits make a 3-byte varint instead of the 5 bytes
/// of a 32-bit hash: 4 bytes less per CUDA call (two packets) before compression. Ids only have
/// to differ between the hosts whose recordings are merged into one trace: for k hosts the
/// chance of a collision is k(k−1)/2 pairs × 2⁻²¹, about 1 in 210,000 for 5 hosts, 1 in
/// 11,000 for 20, 1 in 420 for 100. Past a few dozen hosts, set the id per host instead
/// (`RecorderConfig::machine_id`).
pub fn machine_id_from(source: &str) -> u32 {
    fold_machine_id(fnv1a32(source.as_bytes()))
}

/// XOR-folds a 32-bit hash to [`MACHINE_ID_BITS`] bits (keeping every input bit's influence),
/// mapping 0 to 1.
pub fn fold_machine_id(h: u32) -> u32 {
    let mask = (1u32 << MACHINE_ID_BITS) - 1;
    ((h ^ (h >> MACHINE_ID_BITS)) & mask).max(1)
}

pub fn host_name() -> String {
    read_trimmed("/proc/sys/kernel/hostname").unwrap_or_else(|| "unknown".into())
}

pub fn kernel_release() -> String {
    read_trimmed("/proc/sys/kernel/osrelease").unwrap_or_else(|| "unknown".into())
}

fn read_trimmed(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_states_all_clocks_at_one_instant() {
        let off = ClockOffsets::measure();
        // BOOTTIME never runs behind MONOTONIC; the midpoint estimate may dip below by the read jitter.
        assert!(
            off.boot_minus_mono > -1_000_000,
            "BOOTTIME counts suspend too"
        );
        let s = off.snapshot(5_000, true);
        let ids: Vec<_> = s.clocks.iter().map(|c| c.clock_id).collect();
        assert_eq!(ids, vec![Some(64), Some(3), Some(6), Some(1)]);
        assert_eq!(s.clocks[0].timestamp, Some(5_000));
        assert_eq!(s.clocks[0].is_incremental, Some(true));
        let real = s.clocks[3].timestamp.unwrap_or(0);
        let expect = realtime_now_ns() - monotonic_now_ns() + 5_000;
        assert!(real.abs_diff(expect) < 50_000_000);
    }

    #[test]
    fn machine_id_is_stable_and_non_zero() {
        assert_eq!(machine_id(), machine_id());
        assert_ne!(machine_id(), 0);
        assert!(machine_id() < 1 << 21, "a 3-byte varint");
        let h = fnv1a32(b"abc");
        assert_eq!(machine_id_from("abc"), (h ^ (h >> 21)) & 0x1F_FFFF);
        assert_ne!(machine_id_from("a"), machine_id_from("b"));
        assert_eq!(fold_machine_id(0), 1, "never zero");
        assert_eq!(
            fold_machine_id(1 << 22),
            2,
            "high bits are folded in, not dropped"
        );
        assert_eq!(fold_machine_id(u32::MAX), 0x1F_FFFF ^ 0x7FF);
    }
}
