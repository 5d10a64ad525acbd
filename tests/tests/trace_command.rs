//! `ingero trace -- CMD`: the command runs once the probes are attached, as the user who ran
//! sudo, is traced with its descendants from its first instruction, and its exit ends the
//! session (recording finished) with its exit code; a signal to ingero goes to the command.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use ingero_e2e::{agent_bin, cuda_driver, cudart, kernel_tests_enabled, run_ingero};
use serde_json::Value;

/// A fresh recording path under target/.
fn recording(name: &str) -> Result<PathBuf> {
    ingero_e2e::fresh_recording("e2e-trace-command", name)
}

/// The simulated sudo of user `nobody`.
/// Copies of `files` in a fresh directory every user can enter, readable and executable by
/// all; returns the two copies (the first two files).
fn reachable_by_everyone(files: &[PathBuf]) -> Result<(PathBuf, PathBuf)> {
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("ingero-e2e-shared-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755))?;
    let mut out = Vec::new();
    for f in files {
        let copy = dir.join(f.file_name().context("file name")?);
        std::fs::copy(f, &copy).with_context(|| format!("copying {}", f.display()))?;
        std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755))?;
        out.push(copy);
    }
    match out.as_slice() {
        [a, b, ..] => Ok((a.clone(), b.clone())),
        _ => bail!("two files expected"),
    }
}

fn sudo_nobody(command: &mut Command) -> &mut Command {
    command
        .env("SUDO_USER", "nobody")
        .env("SUDO_UID", "65534")
        .env("SUDO_GID", "65534")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `ingero query --trace FILE ARGS --json`, parsed (one JSON value or NDJSON lines).
fn query(file: &Path, args: &[&str]) -> Result<Vec<Value>> {
    let trace = file.display().to_string();
    let out = run_ingero(&[&["query", "--trace", &trace, "--json"], args].concat())?;
    if args.contains(&"--events") {
        return out
            .lines()
            .map(|l| serde_json::from_str(l).with_context(|| format!("not JSON: {l}")))
            .collect();
    }
    let v: Value = serde_json::from_str(&out).context("query --json")?;
    Ok(v.as_array().cloned().unwrap_or_default())
}

/// The pid in `ingero: started `…` (pid N)`.
fn started_pid(stderr: &str) -> Option<u64> {
    let line = stderr
        .lines()
        .find(|l| l.starts_with("ingero: started `"))?;
    let rest = &line[line.rfind("(pid ")? + 5..];
    rest[..rest.find(')')?].parse().ok()
}

#[test]
fn the_command_runs_as_the_sudo_user_and_its_exit_ends_the_session() -> Result<()> {
    if !kernel_tests_enabled() {
        return Ok(());
    }
    let file = recording("sudo-user")?;
    let mut command = Command::new(agent_bin()?);
    command
        .args(["trace", "--record", "-o"])
        .arg(&file)
        .args(["--", "sh", "-c", "id -u; exit 3"])
        .stdin(Stdio::null());
    let out: Output = sudo_nobody(&mut command)
        .output()
        .context("running ingero trace")?;
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(3), "{stdout}{stderr}");
    assert_eq!(stdout.lines().next(), Some("65534"), "{stdout}{stderr}");
    assert!(
        stderr.contains("as nobody (uid 65534)") && stderr.contains("ingero: recorded "),
        "{stderr}"
    );
    assert!(file.exists(), "no recording: {stderr}");
    query(&file, &[])?;

    // Traced from before its exec, and its fork (`id`) followed.
    let pid = started_pid(&stderr).context("no started line")?;
    let events = query(&file, &["--events"])?;
    let exec_of = |pid_matches: &dyn Fn(u64) -> bool, file: &str| {
        events.iter().any(|e| {
            e["type"] == "process"
                && e["op"] == "exec"
                && e["pid"].as_u64().is_some_and(pid_matches)
                && e["args"]["filename"]
                    .as_str()
                    .is_some_and(|f| f.ends_with(file))
        })
    };
    assert!(
        exec_of(&|p| p == pid, "/sh"),
        "the command's own exec: {events:#?}"
    );
    assert!(
        exec_of(&|p| p != pid, "/id"),
        "the forked child's exec: {events:#?}"
    );
    Ok(())
}

/// Reads `rx` until the line `want`; when it does not come within `within` (or the sender
/// ended first), the lines read instead.
fn wait_for_line(
    rx: &std::sync::mpsc::Receiver<String>,
    want: &str,
    within: Duration,
) -> std::result::Result<(), Vec<String>> {
    let deadline = Instant::now() + within;
    let mut seen = Vec::new();
    while Instant::now() < deadline {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(line) if line == want => return Ok(()),
            Ok(line) => seen.push(line),
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
        }
    }
    Err(seen)
}

#[test]
fn a_signal_to_ingero_goes_to_the_command_and_the_session_ends_after_it() -> Result<()> {
    if !kernel_tests_enabled() {
        return Ok(());
    }
    let file = recording("signal")?;
    // No terminal on stdio: the signal reaches the command only through ingero.
    let mut child = Command::new(agent_bin()?)
        .args(["trace", "--record", "-o"])
        .arg(&file)
        .args([
            "--",
            "sh",
            "-c",
            "trap 'echo got-int; exit 9' INT; echo ready; while :; do sleep 0.05; done",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let stdout = child.stdout.take().context("stdout")?;
    let (tx, rx) = std::sync::mpsc::channel();
    thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(|l| l.ok())
        {
            let _ = tx.send(line);
        }
    });
    if let Err(seen) = wait_for_line(&rx, "ready", Duration::from_secs(120)) {
        let _ = child.kill();
        bail!("the command never started: {seen:?}");
    }
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output()?;
    // The reader thread may not have passed the command's last line on yet when ingero has
    // exited: wait for it (bounded) rather than take only what already arrived.
    let got_int = wait_for_line(&rx, "got-int", Duration::from_secs(10));
    assert!(got_int.is_ok(), "{got_int:?}");
    assert_eq!(out.status.code(), Some(9), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("ingero: recorded "));
    query(&file, &[])?;
    Ok(())
}

#[test]
fn a_real_cuda_program_is_recorded_and_its_exit_code_passed_on() -> Result<()> {
    if !kernel_tests_enabled() {
        return Ok(());
    }
    let file = recording("cuda")?;
    // The command runs as nobody: it needs copies it can reach (the checkout may sit in a
    // directory only root can enter, such as a fresh `mktemp -d`).
    let (driver, lib) = reachable_by_everyone(&[cuda_driver()?, cudart()?])?;
    let lib = lib.display().to_string();
    let mut command = Command::new(agent_bin()?);
    command
        .args(["trace", "--record", "-o"])
        .arg(&file)
        .args(["--cuda-lib", &lib, "--"])
        .arg(&driver)
        .args([&lib, "calls"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = sudo_nobody(&mut command).spawn()?;
    // The driver waits for a line on stdin, which it inherits from ingero.
    child.stdin.take().context("stdin")?.write_all(b"go\n")?;
    let out = child.wait_with_output()?;
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("\"done\":true"), "{stdout}");
    let rows = query(&file, &[])?;
    for op in [
        "cudaMalloc",
        "cudaMemcpy",
        "cudaLaunchKernel",
        "cudaFree",
        "cudaDeviceSynchronize",
    ] {
        let row = rows
            .iter()
            .find(|r| r["op"] == op)
            .with_context(|| format!("no {op}: {rows:#?}\n{stderr}"))?;
        assert_eq!(row["count"], 1, "{op}: {row}");
    }
    Ok(())
}

#[test]
fn a_command_that_does_not_exist_ends_the_session_with_127() -> Result<()> {
    if !kernel_tests_enabled() {
        return Ok(());
    }
    let file = recording("missing")?;
    let out = Command::new(agent_bin()?)
        .args(["trace", "--record", "-o"])
        .arg(&file)
        .args(["--", "/nonexistent/ingero-e2e-command"])
        .stdin(Stdio::null())
        .output()?;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(127), "{stderr}");
    assert!(
        stderr.contains("cannot run `/nonexistent/ingero-e2e-command`"),
        "{stderr}"
    );
    query(&file, &[])?;
    Ok(())
}

#[test]
fn a_runtime_the_command_finds_on_its_library_path_is_traced_from_its_first_call() -> Result<()> {
    if !kernel_tests_enabled() {
        return Ok(());
    }
    let file = recording("library-path")?;
    // A copy of the runtime in a place no search covers, that the program finds only through
    // the LD_LIBRARY_PATH given to it by `env` (as past sudo, which drops the variable).
    let dir = ingero_e2e::root().join("target/e2e-trace-command/odd place");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let copy = dir.join("libcudart.so.12");
    std::fs::copy(cudart()?, &copy)?;
    let mut child = Command::new(agent_bin()?)
        .args(["trace", "--record", "-o"])
        .arg(&file)
        .args(["--", "env"])
        .arg(format!("LD_LIBRARY_PATH={}", dir.display()))
        .arg(cuda_driver()?)
        .args(["libcudart.so.12", "calls"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    // Go at once: the calls are over long before a rescan could find the library mapped.
    child.stdin.take().context("stdin")?.write_all(b"go\n")?;
    let out = child.wait_with_output()?;
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    let probing = format!("ingero: {}: probing ", copy.display());
    let attached = stderr
        .find("ingero: attached")
        .context("no attached line")?;
    assert!(
        stderr[..attached].contains(&probing),
        "the copy is attached before the command starts:\n{stderr}"
    );
    let rows = query(&file, &[])?;
    for op in ["cudaMalloc", "cudaLaunchKernel", "cudaDeviceSynchronize"] {
        let row = rows
            .iter()
            .find(|r| r["op"] == op)
            .with_context(|| format!("no {op}: {rows:#?}\n{stderr}"))?;
        assert_eq!(row["count"], 1, "{op}: {row}");
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
