//! `ingero run -- CMD ARGS…`: runs a command with NVTX capture on, without root. The command
//! gets `NVTX_INJECTION64_PATH` (unless already set: one NVTX tool per process) and
//! `INGERO_NVTX_SOCKET`, and replaces ingero (exec), so it keeps ingero's pid, stdio,
//! signals and exit status exactly as if it had been started directly.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

use ingero_annotate::socket_path::{nvtx_library, nvtx_socket_path};

use crate::launch::{display_command, exec_failure_code, nvtx_env_here};

#[derive(Args, Debug)]
pub struct RunArgs {
    #[command(flatten)]
    pub nvtx: NvtxFlags,
    /// The command and its arguments (after `--` when they start with a dash).
    #[arg(
        value_name = "COMMAND",
        required = true,
        num_args = 1..,
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    pub command: Vec<OsString>,
}

/// How the command finds the NVTX injection library (`ingero run`, `ingero trace -- CMD`).
#[derive(Args, Debug, Default)]
pub struct NvtxFlags {
    /// The NVTX injection library to load (default: $INGERO_NVTX_LIBRARY, else the one the
    /// agent publishes beside its NVTX socket, else libingero_nvtx.so beside this binary).
    #[arg(long, value_name = "PATH")]
    pub nvtx_library: Option<PathBuf>,
}

impl NvtxFlags {
    /// The library to use: the flag, else [`nvtx_library`]'s search.
    pub fn library(&self) -> Option<PathBuf> {
        self.nvtx_library.clone().or_else(nvtx_library)
    }
}

/// Execs the command; returns only when that fails (127: not found, 126: not executable).
///
/// Exec rather than spawn-and-wait: the exit code (a signal death included, which a parent
/// could only imitate with 128 + N), the pid seen by tools such as `ingero trace --pid`,
/// the terminal's process group and every signal then belong to the command itself, with
/// nothing to forward and no ingero process left over.
pub fn run(args: RunArgs) -> Result<ExitCode> {
    let Some((program, rest)) = args.command.split_first() else {
        // clap requires one; kept for a direct caller.
        eprintln!("ingero: run: no command given");
        return Ok(ExitCode::from(127));
    };
    let env = nvtx_env_here(args.nvtx.library(), &nvtx_socket_path());
    for notice in &env.notices {
        eprintln!("ingero: {notice}");
    }
    let error = std::process::Command::new(program)
        .args(rest)
        .envs(env.vars.iter().map(|(k, v)| (k, v)))
        .exec();
    eprintln!(
        "ingero: cannot run `{}`: {error}",
        display_command(program, rest)
    );
    Ok(ExitCode::from(exec_failure_code(&error)))
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        run: RunArgs,
    }

    fn parse(args: &[&str]) -> Result<RunArgs, clap::Error> {
        Cli::try_parse_from(std::iter::once("run").chain(args.iter().copied())).map(|c| c.run)
    }

    #[test]
    fn the_command_keeps_its_own_flags() {
        let a = parse(&[
            "--nvtx-library",
            "/l.so",
            "python",
            "-u",
            "train.py",
            "--lr",
            "3",
        ])
        .expect("parses");
        assert_eq!(a.nvtx.nvtx_library, Some(PathBuf::from("/l.so")));
        assert_eq!(a.command, ["python", "-u", "train.py", "--lr", "3"]);
        let a = parse(&["--", "sh", "-c", "exit 7"]).expect("parses");
        assert_eq!(a.command, ["sh", "-c", "exit 7"]);
        assert_eq!(a.nvtx.nvtx_library, None);
        // After the command, ingero's flags are the command's.
        let a = parse(&["sh", "--nvtx-library", "x"]).expect("parses");
        assert_eq!(a.command, ["sh", "--nvtx-library", "x"]);
    }

    #[test]
    fn a_command_is_required() {
        assert!(parse(&[]).is_err());
        assert!(parse(&["--"]).is_err());
    }
}
