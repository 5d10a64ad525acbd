//! `ingero run -- CMD`: the command gets NVTX_INJECTION64_PATH (never over a value already
//! set) and INGERO_NVTX_SOCKET, and ingero exits as the command does. No root needed: one case
//! runs as `nobody`.

use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Output};

use anyhow::{Context, Result};
use ingero_e2e::{agent_bin, is_root};

const SOCKET: &str = "/tmp/ingero-e2e-nvtx.sock";
const LIBRARY: &str = "/some/abs/path/libingero_nvtx.so";
const PRINT_ENV: &str = "echo \"$NVTX_INJECTION64_PATH|$INGERO_NVTX_SOCKET\"; exit 7";

/// `ingero run ARGS` with the NVTX variables cleared, then `env` set.
fn run(prefix: &[&str], args: &[&str], env: &[(&str, &str)]) -> Result<Output> {
    let (program, pre) = match prefix.split_first() {
        Some((p, rest)) => (p.to_string(), rest.to_vec()),
        None => (agent_bin()?.display().to_string(), Vec::new()),
    };
    let mut command = Command::new(program);
    command.args(pre);
    if !prefix.is_empty() {
        command.arg(agent_bin()?);
    }
    command
        .arg("run")
        .args(args)
        .env_remove("NVTX_INJECTION64_PATH")
        .env_remove("INGERO_NVTX_LIBRARY")
        .env("INGERO_NVTX_SOCKET", SOCKET)
        .envs(env.iter().copied());
    command.output().context("running ingero run")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn the_command_gets_the_library_and_the_socket_and_its_exit_code_is_ingeros() -> Result<()> {
    let out = run(
        &[],
        &["--nvtx-library", LIBRARY, "--", "sh", "-c", PRINT_ENV],
        &[],
    )?;
    assert_eq!(text(&out.stdout), format!("{LIBRARY}|{SOCKET}\n"));
    assert_eq!(out.status.code(), Some(7), "{}", text(&out.stderr));

    // The library named by the environment instead of the flag.
    let out = run(
        &[],
        &["sh", "-c", PRINT_ENV],
        &[("INGERO_NVTX_LIBRARY", LIBRARY)],
    )?;
    assert_eq!(text(&out.stdout), format!("{LIBRARY}|{SOCKET}\n"));
    assert_eq!(out.status.code(), Some(7));
    Ok(())
}

#[test]
fn a_value_already_set_is_left_and_said_once() -> Result<()> {
    let nsys = "/opt/nsys/libToolsInjection64.so";
    let out = run(
        &[],
        &["--nvtx-library", LIBRARY, "--", "sh", "-c", PRINT_ENV],
        &[("NVTX_INJECTION64_PATH", nsys)],
    )?;
    assert_eq!(text(&out.stdout), format!("{nsys}|{SOCKET}\n"));
    let stderr = text(&out.stderr);
    let notice = format!(
        "ingero: NVTX_INJECTION64_PATH is already set ({nsys}): leaving it, NVTX ranges go to \
         that tool\n"
    );
    assert_eq!(stderr.matches(&notice).count(), 1, "{stderr}");
    assert_eq!(out.status.code(), Some(7));
    Ok(())
}

#[test]
fn a_signal_death_is_passed_on_and_a_shell_reports_143() -> Result<()> {
    // ingero execs the command, so its parent sees the command's own death by SIGTERM ...
    let out = run(
        &[],
        &["--nvtx-library", LIBRARY, "--", "sh", "-c", "kill -TERM $$"],
        &[],
    )?;
    assert_eq!(out.status.signal(), Some(libc::SIGTERM), "{:?}", out.status);
    // ... which a shell reports as 128 + 15.
    let out = Command::new("sh")
        .args([
            "-c",
            "\"$0\" run --nvtx-library /x.so -- sh -c 'kill -TERM $$' 2>/dev/null; echo $?",
        ])
        .arg(agent_bin()?)
        .output()?;
    assert_eq!(text(&out.stdout), "143\n");
    Ok(())
}

#[test]
fn a_missing_command_exits_127_with_a_clear_error() -> Result<()> {
    let out = run(&[], &["--", "/nonexistent/ingero-e2e-command"], &[])?;
    assert_eq!(out.status.code(), Some(127));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("ingero: cannot run `/nonexistent/ingero-e2e-command`: No such file"),
        "{stderr}"
    );
    Ok(())
}

#[test]
fn runs_without_root() -> Result<()> {
    if !is_root() {
        // Already unprivileged: the tests above proved it.
        return Ok(());
    }
    let out = run(
        &[
            "setpriv",
            "--reuid=nobody",
            "--regid=nogroup",
            "--clear-groups",
        ],
        &[
            "--nvtx-library",
            LIBRARY,
            "--",
            "sh",
            "-c",
            "id -u; echo \"$NVTX_INJECTION64_PATH\"; exit 5",
        ],
        &[],
    )?;
    let stdout = text(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_ne!(lines.first(), Some(&"0"), "ran as root: {stdout}");
    assert_eq!(lines.get(1), Some(&LIBRARY), "{stdout}");
    assert_eq!(out.status.code(), Some(5), "{}", text(&out.stderr));
    Ok(())
}
