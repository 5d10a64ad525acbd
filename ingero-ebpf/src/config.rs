//! Runtime configuration the agent writes into the `CONFIG` array map before attaching.
//!
//! Tracepoint field offsets are read from tracefs `format` files at start-up rather than
//! hard-coded, because they move between kernel versions (for example `sched_process_fork`
//! switched its comm fields to `__data_loc` strings, and `sched_process_exit` gained
//! `group_dead`).

/// How uprobe entries decide whether a process is traced.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FilterMode {
    /// Trace every process that calls into an attached library; record it as tracked.
    All = 0,
    /// Trace only processes already in the `TRACKED` map (`--pid`), and their forked children.
    Listed = 1,
    /// Shutting down: every program returns at once, so the rings can be drained to empty
    /// without waiting for the slow unregistration of each uprobe.
    Stopped = 2,
}

/// Byte offsets of the tracepoint fields the programs read. `u32::MAX` marks an absent field.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TracepointLayout {
    pub switch_prev_pid: u32,
    pub switch_prev_state: u32,
    pub switch_next_comm: u32,
    pub switch_next_pid: u32,
    pub exit_pid: u32,
    pub exit_group_dead: u32,
    pub exec_filename: u32,
    pub exec_old_pid: u32,
    pub fork_parent_pid: u32,
    pub fork_child_pid: u32,
    /// Offset of `child_comm`, either inline `char[16]` or a `__data_loc` word.
    pub fork_child_comm: u32,
    /// Non-zero when `child_comm` is a `__data_loc` word (offset in the low 16 bits).
    pub fork_child_comm_is_data_loc: u32,
    pub exec_filename_is_data_loc: u32,
    pub newtask_pid: u32,
    pub newtask_clone_flags: u32,
    /// Offset of `printk:console`'s `msg`, a `__data_loc` word.
    pub console_msg: u32,
}

/// Marks a tracepoint field the running kernel does not have.
pub const ABSENT: u32 = u32::MAX;

/// The single entry of the `CONFIG` map.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// A [`FilterMode`] value.
    pub filter_mode: u32,
    /// The agent's own tgid: never traced, so its own work cannot feed back into the trace.
    pub agent_tgid: u32,
    pub layout: TracepointLayout,
    /// Ring buffer fill level (bytes) from which a submit wakes the agent. Below it records are
    /// submitted without a wakeup and the agent's periodic drain collects them in batches, so
    /// the agent does not wake once per event.
    pub wakeup_bytes: u32,
    pub _pad: u32,
}

const _: () = assert!(size_of::<TracepointLayout>() == 64);
const _: () = assert!(size_of::<Config>() == 80);
