//! Tracepoint field offsets from tracefs `format` files.
//!
//! Offsets differ between kernels, so the programs read them from the configuration instead of
//! hard-coding them. tracefs is mounted at /sys/kernel/tracing if it is not already there.

use std::{fs, path::PathBuf};

use anyhow::{Context, Result, bail};
use ingero_ebpf::{TracepointLayout, config::ABSENT};

const TRACEFS_ROOTS: &[&str] = &["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

/// One field of a tracepoint record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Field {
    pub name: String,
    pub type_decl: String,
    pub offset: u32,
    pub size: u32,
}

impl Field {
    fn is_data_loc(&self) -> bool {
        self.type_decl.starts_with("__data_loc")
    }
}

/// Parses the `field:` lines of a format file.
pub fn parse_format(text: &str) -> Vec<Field> {
    let mut fields = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        let Some(rest) = line.strip_prefix("field:") else {
            continue;
        };
        let mut parts = rest.split(';').map(str::trim);
        let Some(decl) = parts.next() else { continue };
        let mut offset = None;
        let mut size = None;
        for part in parts {
            if let Some(v) = part.strip_prefix("offset:") {
                offset = v.parse().ok();
            } else if let Some(v) = part.strip_prefix("size:") {
                size = v.parse().ok();
            }
        }
        // "char prev_comm[16]" -> name "prev_comm"; "__data_loc char[] filename" -> "filename"
        let Some(last) = decl.rsplit(' ').next() else {
            continue;
        };
        let name = last.split('[').next().unwrap_or(last).to_string();
        let type_decl = decl[..decl.len() - last.len()].trim().to_string();
        if let (Some(offset), Some(size)) = (offset, size) {
            fields.push(Field {
                name,
                type_decl,
                offset,
                size,
            });
        }
    }
    fields
}

fn tracefs_root() -> Result<PathBuf> {
    for root in TRACEFS_ROOTS {
        if fs::metadata(format!("{root}/events")).is_ok() {
            return Ok(PathBuf::from(root));
        }
    }
    mount_tracefs()?;
    Ok(PathBuf::from(TRACEFS_ROOTS[0]))
}

fn mount_tracefs() -> Result<()> {
    let target = c"/sys/kernel/tracing";
    // SAFETY: valid NUL-terminated strings; mount(2) reports errors through errno.
    let rc = unsafe {
        libc::mount(
            c"nodev".as_ptr(),
            target.as_ptr(),
            c"tracefs".as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if rc != 0 {
        bail!(
            "tracefs is not mounted and mounting it at /sys/kernel/tracing failed: {}",
            std::io::Error::last_os_error()
        );
    }
    Ok(())
}

fn fields_of(root: &std::path::Path, event: &str) -> Result<Vec<Field>> {
    let path = root.join("events").join(event).join("format");
    let text = fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    Ok(parse_format(&text))
}

fn offset(fields: &[Field], name: &str) -> u32 {
    fields
        .iter()
        .find(|f| f.name == name)
        .map_or(ABSENT, |f| f.offset)
}

fn data_loc(fields: &[Field], name: &str) -> u32 {
    fields
        .iter()
        .find(|f| f.name == name)
        .is_some_and(Field::is_data_loc) as u32
}

/// Builds the layout from a lookup of each event's fields.
pub fn layout_from(mut fields: impl FnMut(&str) -> Result<Vec<Field>>) -> Result<TracepointLayout> {
    let switch = fields("sched/sched_switch")?;
    let exit = fields("sched/sched_process_exit")?;
    let exec = fields("sched/sched_process_exec")?;
    let fork = fields("sched/sched_process_fork")?;
    let newtask = fields("task/task_newtask")?;
    // Optional: without it only the NVIDIA drivers' log messages go unrecorded.
    let console = fields("printk/console").unwrap_or_default();
    let layout = TracepointLayout {
        switch_prev_pid: offset(&switch, "prev_pid"),
        switch_prev_state: offset(&switch, "prev_state"),
        switch_next_comm: offset(&switch, "next_comm"),
        switch_next_pid: offset(&switch, "next_pid"),
        exit_pid: offset(&exit, "pid"),
        exit_group_dead: offset(&exit, "group_dead"),
        exec_filename: offset(&exec, "filename"),
        exec_old_pid: offset(&exec, "old_pid"),
        fork_parent_pid: offset(&fork, "parent_pid"),
        fork_child_pid: offset(&fork, "child_pid"),
        fork_child_comm: offset(&fork, "child_comm"),
        fork_child_comm_is_data_loc: data_loc(&fork, "child_comm"),
        exec_filename_is_data_loc: data_loc(&exec, "filename"),
        newtask_pid: offset(&newtask, "pid"),
        newtask_clone_flags: offset(&newtask, "clone_flags"),
        console_msg: if data_loc(&console, "msg") != 0 {
            offset(&console, "msg")
        } else {
            ABSENT
        },
    };
    for (what, value) in [
        ("sched_switch.prev_state", layout.switch_prev_state),
        ("sched_switch.next_pid", layout.switch_next_pid),
        ("sched_process_fork.child_pid", layout.fork_child_pid),
    ] {
        if value == ABSENT {
            bail!("this kernel's tracepoint format lacks {what}, which ingero needs");
        }
    }
    Ok(layout)
}

/// Reads the running kernel's layout.
pub fn read_layout() -> Result<TracepointLayout> {
    let root = tracefs_root()?;
    layout_from(|event| fields_of(&root, event))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SWITCH: &str = "name: sched_switch
ID: 1
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;
\tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;
\tfield:long prev_state;\toffset:32;\tsize:8;\tsigned:1;
\tfield:char next_comm[16];\toffset:40;\tsize:16;\tsigned:0;
\tfield:pid_t next_pid;\toffset:56;\tsize:4;\tsigned:1;
";
    const FORK_NEW: &str = "\tfield:__data_loc char[] parent_comm;\toffset:8;\tsize:4;\tsigned:0;
\tfield:pid_t parent_pid;\toffset:12;\tsize:4;\tsigned:1;
\tfield:__data_loc char[] child_comm;\toffset:16;\tsize:4;\tsigned:0;
\tfield:pid_t child_pid;\toffset:20;\tsize:4;\tsigned:1;
";
    const FORK_OLD: &str = "\tfield:char parent_comm[16];\toffset:8;\tsize:16;\tsigned:0;
\tfield:pid_t parent_pid;\toffset:24;\tsize:4;\tsigned:1;
\tfield:char child_comm[16];\toffset:28;\tsize:16;\tsigned:0;
\tfield:pid_t child_pid;\toffset:44;\tsize:4;\tsigned:1;
";

    #[test]
    fn parses_fields_and_array_names() {
        let fields = parse_format(SWITCH);
        assert_eq!(fields.len(), 6);
        assert_eq!(fields[1].name, "prev_comm");
        assert_eq!(fields[1].type_decl, "char");
        assert_eq!(fields[3].name, "prev_state");
        assert_eq!(fields[3].offset, 32);
        assert_eq!(fields[3].size, 8);
    }

    fn layout_with_fork(fork: &'static str) -> TracepointLayout {
        layout_from(|event| {
            Ok(parse_format(match event {
                "sched/sched_switch" => SWITCH,
                "sched/sched_process_fork" => fork,
                "sched/sched_process_exit" => "\tfield:pid_t pid;\toffset:24;\tsize:4;\tsigned:1;",
                _ => "",
            }))
        })
        .expect("layout")
    }

    #[test]
    fn handles_data_loc_and_inline_comm_and_missing_fields() {
        let new = layout_with_fork(FORK_NEW);
        assert_eq!(new.fork_child_comm, 16);
        assert_eq!(new.fork_child_comm_is_data_loc, 1);
        assert_eq!(new.fork_child_pid, 20);
        assert_eq!(
            new.exit_group_dead, ABSENT,
            "older kernels have no group_dead"
        );
        let old = layout_with_fork(FORK_OLD);
        assert_eq!(old.fork_child_comm, 28);
        assert_eq!(old.fork_child_comm_is_data_loc, 0);
        assert_eq!(old.switch_next_pid, 56);
        assert_eq!(old.console_msg, ABSENT, "no printk/console format read");
    }

    #[test]
    fn reads_the_console_message_only_as_a_data_loc_word() {
        let console = |format: &'static str| {
            layout_from(|event| {
                Ok(parse_format(match event {
                    "sched/sched_switch" => SWITCH,
                    "sched/sched_process_fork" => FORK_NEW,
                    "printk/console" => format,
                    _ => "",
                }))
            })
            .expect("layout")
            .console_msg
        };
        let data_loc = "\tfield:__data_loc char[] msg;\toffset:8;\tsize:4;\tsigned:0;";
        assert_eq!(console(data_loc), 8);
        // Any other shape is not what the program reads: no driver messages, not garbage.
        let inline = "\tfield:char msg[64];\toffset:8;\tsize:64;\tsigned:0;";
        assert_eq!(console(inline), ABSENT);
    }

    #[test]
    fn refuses_a_kernel_without_required_fields() {
        let err = layout_from(|_| Ok(Vec::new())).expect_err("must fail");
        assert!(err.to_string().contains("sched_switch.prev_state"), "{err}");
    }

    #[test]
    fn reads_the_running_kernel_as_root() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: reading tracefs needs root");
            return;
        }
        let layout = read_layout().expect("tracefs layout");
        assert_ne!(layout.switch_next_pid, ABSENT);
        assert_ne!(layout.newtask_clone_flags, ABSENT);
        assert_ne!(layout.console_msg, ABSENT, "printk/console's msg");
    }
}
