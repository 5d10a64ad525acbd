//! The names ingero's recordings use: event names, categories, debug-annotation keys and track
//! names. Writer and reader both use these constants, so they are the file format's contract
//! beyond the Perfetto schema itself.

/// Category of CUDA calls that returned an error (successful calls carry no category: one
/// byte pair less per call, and the name already says it is a CUDA call).
pub const CAT_CUDA_ERROR: &str = "cuda,error";
pub const CAT_SCHED: &str = "sched";
pub const CAT_PROCESS: &str = "process";
pub const CAT_ANNOTATION: &str = "annotation";
pub const CAT_INGERO: &str = "ingero";

/// Track names.
pub const TRACK_INGERO: &str = "ingero";
pub const TRACK_OFF_CPU: &str = "off-CPU";
pub const TRACK_LABELS: &str = "labels";
pub const TRACK_TRACE_WIDE: &str = "trace-wide labels";
pub const TRACK_SPANS: &str = "spans";
pub const TRACK_DEVICE_MEMORY: &str = "device memory";
pub const TRACK_EVENTS_PER_SECOND: &str = "events/s";
pub const TRACK_DROPS: &str = "drops";

/// Instant names on the `ingero` track.
pub const EV_SESSION: &str = "session";
pub const EV_STATISTICS: &str = "statistics";
/// Instant name of an annotation on its scope's labels track.
pub const EV_ANNOTATION: &str = "annotation";

/// Debug-annotation keys of CUDA calls.
pub mod arg {
    pub const RET: &str = "ret";
    pub const ERROR: &str = "error";
    pub const SIZE: &str = "size";
    pub const PTR: &str = "ptr";
    pub const STREAM: &str = "stream";
    /// A kernel launch's whole configuration as one interned string (see [`launch_text`]):
    /// one argument per launch instead of four keeps a launch-dominated trace small and fast
    /// to read.
    pub const LAUNCH: &str = "launch";
    /// Older recordings: the launch configuration as separate arguments.
    pub const FUNC: &str = "func";
    pub const GRID: &str = "grid";
    pub const BLOCK: &str = "block";
    pub const SHARED_MEM: &str = "shared_mem";
    pub const GRAPH_EXEC: &str = "graph_exec";
    pub const COUNT: &str = "count";
    pub const KIND: &str = "kind";
    pub const WIDTH: &str = "width";
    pub const HEIGHT: &str = "height";
    pub const DST_DEVICE: &str = "dst_device";
    pub const SRC_DEVICE: &str = "src_device";
    pub const EVENT: &str = "event";
    /// The call's duration before it was clamped to keep slices nested.
    pub const CLAMPED_FROM_NS: &str = "clamped_from_ns";
    /// Off-CPU.
    pub const NEXT_TID: &str = "next_tid";
    pub const NEXT_COMM: &str = "next_comm";
    pub const PREV_STATE: &str = "prev_state";
    pub const CPU: &str = "cpu";
    /// Lifecycle.
    pub const OTHER_PID: &str = "other_pid";
    pub const CLONE_FLAGS_KNOWN: &str = "clone_flags_known";
    pub const TEXT: &str = "text";
    /// Annotations: each label is `labels.<key>`.
    pub const LABEL_PREFIX: &str = "labels.";
    pub const PROVENANCE_UID: &str = "provenance.uid";
    pub const PROVENANCE_PID: &str = "provenance.pid";
    pub const SCOPE_PID: &str = "scope.pid";
    pub const SCOPE_START_TIME: &str = "scope.start_time";
    /// A state slice re-opened at the start of a rotated file.
    pub const CONTINUED: &str = "continued";
}

/// Debug-annotation keys of the session packet.
pub mod session {
    pub const HOST: &str = "host";
    pub const KERNEL: &str = "kernel";
    pub const AGENT_VERSION: &str = "agent_version";
    pub const COMMAND_LINE: &str = "command_line";
    pub const TARGETS: &str = "targets";
    pub const PROBES: &str = "probes";
    pub const MACHINE_ID: &str = "machine_id";
    pub const FILE_INDEX: &str = "file_index";
    pub const STARTED_REALTIME_NS: &str = "started_realtime_ns";
}

/// Prefixes of the statistics packet's keys.
pub mod stats {
    pub const EVENTS: &str = "events.";
    pub const DROPS: &str = "drops.";
    pub const REJECTED: &str = "rejected.";
    pub const RECORDER: &str = "recorder.";
}

/// Name of a state slice: `key=value`.
pub fn state_name(key: &str, value: &str) -> String {
    format!("{key}={value}")
}

/// `1024x1x1`.
pub fn dim3(d: [u32; 3]) -> String {
    format!("{}x{}x{}", d[0], d[1], d[2])
}

pub fn parse_dim3(s: &str) -> Option<[u32; 3]> {
    let mut it = s.split('x').map(|p| p.parse::<u32>().ok());
    let d = [it.next()??, it.next()??, it.next()??];
    it.next().is_none().then_some(d)
}

/// A kernel launch's configuration, as carried by the `launch` argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LaunchConfig {
    pub func: u64,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub shared_mem: u64,
    pub stream: u64,
}

/// `func=0x7f00aa grid=16x4x1 block=32x8x1 smem=1024 stream=0xabcd` (the value of `launch`).
pub fn launch_text(l: &LaunchConfig) -> String {
    format!(
        "func={:#x} grid={} block={} smem={} stream={:#x}",
        l.func,
        dim3(l.grid),
        dim3(l.block),
        l.shared_mem,
        l.stream
    )
}

/// Parses [`launch_text`]'s output; `None` for anything else.
pub fn parse_launch(s: &str) -> Option<LaunchConfig> {
    let mut parts = s.split(' ');
    let mut field = |name: &str| {
        parts
            .next()
            .and_then(|p| p.strip_prefix(name))
            .and_then(|p| p.strip_prefix('='))
    };
    let hex = |v: &str| u64::from_str_radix(v.strip_prefix("0x")?, 16).ok();
    let l = LaunchConfig {
        func: hex(field("func")?)?,
        grid: parse_dim3(field("grid")?)?,
        block: parse_dim3(field("block")?)?,
        shared_mem: field("smem")?.parse().ok()?,
        stream: hex(field("stream")?)?,
    };
    parts.next().is_none().then_some(l)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launch_text_round_trips_and_rejects_garbage() {
        let l = LaunchConfig {
            func: 0x7f00_aa00,
            grid: [16, 4, 1],
            block: [32, 8, 1],
            shared_mem: 1024,
            stream: 0,
        };
        let text = launch_text(&l);
        assert_eq!(
            text,
            "func=0x7f00aa00 grid=16x4x1 block=32x8x1 smem=1024 stream=0x0"
        );
        assert_eq!(parse_launch(&text), Some(l));
        assert_eq!(parse_launch("func=0x1 grid=1x1x1 block=1x1x1 smem=0"), None);
        assert_eq!(parse_launch(&format!("{text} extra=1")), None);
        assert_eq!(
            parse_launch("func=1 grid=1x1x1 block=1x1x1 smem=0 stream=0x0"),
            None
        );
    }

    #[test]
    fn dim3_round_trips_and_rejects_garbage() {
        assert_eq!(parse_dim3(&dim3([1024, 2, 3])), Some([1024, 2, 3]));
        assert_eq!(parse_dim3("1x2"), None);
        assert_eq!(parse_dim3("1x2x3x4"), None);
        assert_eq!(parse_dim3("axbxc"), None);
    }
}
