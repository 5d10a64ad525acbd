//! Shared fixtures of the end-to-end tests: locating the agent binary and the real libcudart,
//! building the C driver program, and running the agent with its JSON output collected.
//!
//! These tests need root (they load eBPF programs). `cargo xtask test` prepares everything
//! they need: it builds the agent, fetches libcudart from the `nvidia-cuda-runtime-cu12` and
//! `nvidia-cuda-runtime` (13) wheels, libnccl from the `nvidia-nccl-cu12` (2.27.5) and
//! `nvidia-nccl-cu13` (2.30.7) wheels and libcuda from Debian's `libcuda1` package, and sets
//! `INGERO_BIN`, `INGERO_CUDART`, `INGERO_CUDART13`, `INGERO_NCCL`, `INGERO_NCCL13` and
//! `INGERO_LIBCUDA`.
//!
//! [`otlp`] is an in-process OTLP/HTTP receiver with fault injection, for these tests and
//! the agent's own export tests.

pub mod otlp;

use std::{
    io::{BufRead, BufReader, Read, Write},
    path::{Path, PathBuf},
    process::{Child, ChildStdin, ChildStdout, Command, Stdio},
    sync::{Arc, Mutex, mpsc},
    thread,
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail};
use serde_json::Value;

/// The workspace root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Whether this process is root; kernel tests skip loudly otherwise.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Returns false (after saying why) when kernel tests cannot run here.
pub fn kernel_tests_enabled() -> bool {
    if !is_root() {
        eprintln!("SKIPPED: kernel tests need root");
        return false;
    }
    true
}

fn env_path(var: &str, fallback: PathBuf) -> Result<PathBuf> {
    let path = std::env::var_os(var).map(PathBuf::from).unwrap_or(fallback);
    if !path.exists() {
        bail!(
            "{} does not exist: run the tests through `cargo xtask test` or set {var}",
            path.display()
        );
    }
    Ok(path)
}

/// A fresh recording path `target/{suite}/{name}.pftrace` (any earlier file of that name
/// removed).
pub fn fresh_recording(suite: &str, name: &str) -> Result<PathBuf> {
    let dir = root().join("target").join(suite);
    std::fs::create_dir_all(&dir)?;
    let path = dir.join(format!("{name}.pftrace"));
    let _ = std::fs::remove_file(&path);
    Ok(path)
}

/// The agent binary under test.
pub fn agent_bin() -> Result<PathBuf> {
    env_path("INGERO_BIN", root().join("target/release/ingero"))
}

/// The real libcudart.so.12 from the PyPI wheel.
pub fn cudart() -> Result<PathBuf> {
    env_path(
        "INGERO_CUDART",
        root().join("target/test-deps/cudart/nvidia/cuda_runtime/lib/libcudart.so.12"),
    )
}

/// The real libcuda.so.1 of Debian's `libcuda1` package (driver 535.261.03), unpacked by
/// `cargo xtask test` (`cargo xtask test-deps` prints it). Required: unlike the fallbacks above
/// there is no default place, so an unset variable fails with what to do.
pub fn libcuda() -> Result<PathBuf> {
    required_env_path("INGERO_LIBCUDA", "libcuda.so.1 (Debian's libcuda1 package)")
}

/// The real libcudart.so.13 from the `nvidia-cuda-runtime` wheel, when `INGERO_CUDART13` names
/// it.
pub fn cudart13() -> Option<PathBuf> {
    std::env::var_os("INGERO_CUDART13")
        .map(PathBuf::from)
        .filter(|p| p.exists())
}

/// The real libnccl.so.2 2.27.5 of the `nvidia-nccl-cu12` wheel (no AlltoAll, Gather, Scatter).
/// Required, as [`libcuda`].
pub fn nccl() -> Result<PathBuf> {
    required_env_path(
        "INGERO_NCCL",
        "libnccl.so.2 2.27.5 (the nvidia-nccl-cu12 wheel)",
    )
}

/// The real libnccl.so.2 2.30.7 of the `nvidia-nccl-cu13` wheel (the NCCL torch 2.15 pulls).
/// Required, as [`libcuda`].
pub fn nccl13() -> Result<PathBuf> {
    required_env_path(
        "INGERO_NCCL13",
        "libnccl.so.2 2.30.7 (the nvidia-nccl-cu13 wheel)",
    )
}

fn required_env_path(var: &str, what: &str) -> Result<PathBuf> {
    let Some(path) = std::env::var_os(var).map(PathBuf::from) else {
        bail!(
            "{var} is not set: it names the {what} these tests trace. Run them through \
             `cargo xtask test`, or `export $(cargo xtask test-deps)` first"
        );
    };
    if !path.exists() {
        bail!("{var}={} does not exist", path.display());
    }
    Ok(path)
}

/// Compiles the C fixture `tests/fixtures/{name}.c` into `target/test-fixtures/{output}`.
/// The benchmarks build the same fixtures through this function.
///
/// Tests run in parallel and several use the same fixture, so a fixture is compiled once per
/// process, and into a file of its own that is then renamed over `output`: compiling in place
/// would open the program for writing while another test executes it (`Text file busy`) or
/// swap it under a starting process. Another test process building the same fixture at the
/// same time replaces it with identical bytes the same way.
pub fn build_fixture(name: &str, output: &str, extra: &[&str]) -> Result<PathBuf> {
    static BUILT: Mutex<Vec<(String, PathBuf)>> = Mutex::new(Vec::new());
    let key = format!("{name}\0{output}\0{}", extra.join("\0"));
    // Held while compiling, so two tests asking for one fixture compile it once.
    let mut built = BUILT
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some((_, path)) = built.iter().find(|(k, _)| *k == key) {
        return Ok(path.clone());
    }
    let src = root().join("tests/fixtures").join(format!("{name}.c"));
    let out_dir = root().join("target/test-fixtures");
    std::fs::create_dir_all(&out_dir)?;
    let out = out_dir.join(output);
    let file_name = out
        .file_name()
        .with_context(|| format!("fixture output `{output}` names no file"))?
        .to_string_lossy();
    // Beside the output (which may be in a subdirectory), so the rename stays on one file system.
    let partial = out.with_file_name(format!(".{file_name}.{}.partial", std::process::id()));
    let status = Command::new("cc")
        .args(["-O2", "-Wall", "-Werror", "-o"])
        .arg(&partial)
        .arg(&src)
        .args(extra)
        .status()
        .context("running cc")?;
    if !status.success() {
        let _ = std::fs::remove_file(&partial);
        bail!("compiling {} failed", src.display());
    }
    std::fs::rename(&partial, &out)
        .with_context(|| format!("moving {} to {}", partial.display(), out.display()))?;
    built.push((key, out.clone()));
    Ok(out)
}

/// The driver program built from `tests/fixtures/cuda_driver.c`: it dlopens the libcudart named
/// by its first argument and makes the CUDA calls, scheduler activity or process events its
/// mode asks for. One place, so every test builds it with the same flags.
pub fn cuda_driver() -> Result<PathBuf> {
    build_fixture("cuda_driver", "cuda_driver", &["-lpthread", "-ldl"])
}

/// The program of `tests/fixtures/linked_runtime.c` with the real runtime linked in: the
/// `libcudart_static.a` that lies beside `cudart` (each runtime wheel ships one), as
/// `nvcc -cudart static` links every CUDA program by default. `output` names the build.
pub fn linked_runtime_program(cudart: &Path, output: &str) -> Result<PathBuf> {
    let archive = cudart
        .parent()
        .context("the runtime's directory")?
        .join("libcudart_static.a");
    if !archive.exists() {
        bail!(
            "{} is missing (the runtime wheel ships it)",
            archive.display()
        );
    }
    let archive = archive.display().to_string();
    build_fixture(
        "linked_runtime",
        output,
        &[&archive, "-lpthread", "-ldl", "-lrt"],
    )
}

/// How long an agent may take to attach. A previous agent's uprobes are unregistered by the
/// kernel one at a time (about 0.1 s each) after it exits, and new attachments wait for that.
const ATTACH_TIMEOUT: Duration = Duration::from_secs(120);

/// A running agent whose stdout (JSON lines) and stderr are collected.
pub struct Agent {
    child: Child,
    stdout: mpsc::Receiver<String>,
    stderr: Arc<Mutex<String>>,
}

impl Agent {
    /// Starts `ingero trace --json` with extra arguments and waits for its `attached` line.
    pub fn start(args: &[&str]) -> Result<Agent> {
        Agent::start_under(&[], args)
    }

    /// As [`Agent::start`], run through `wrapper` (a program and its arguments that then
    /// exec the agent in place, such as `unshare --time …`, so the agent is still our child).
    pub fn start_under(wrapper: &[&str], args: &[&str]) -> Result<Agent> {
        let agent = agent_bin()?;
        let mut command = match wrapper.split_first() {
            Some((program, rest)) => {
                let mut c = Command::new(program);
                c.args(rest).arg(&agent);
                c
            }
            None => Command::new(&agent),
        };
        let mut child = command
            .arg("trace")
            .arg("--json")
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .context("starting the agent")?;
        let (out_tx, out_rx) = mpsc::channel();
        let stdout = child.stdout.take().context("agent stdout")?;
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(|l| l.ok()) {
                if out_tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stderr_text = Arc::new(Mutex::new(String::new()));
        let (attached_tx, attached_rx) = mpsc::channel();
        let mut stderr = child.stderr.take().context("agent stderr")?;
        let sink = stderr_text.clone();
        thread::spawn(move || {
            let mut buf = [0u8; 4096];
            let mut told = false;
            while let Ok(n) = stderr.read(&mut buf) {
                if n == 0 {
                    break;
                }
                let mut text = sink.lock().unwrap_or_else(|e| e.into_inner());
                text.push_str(&String::from_utf8_lossy(&buf[..n]));
                if !told && text.contains("attached") {
                    told = true;
                    let _ = attached_tx.send(());
                }
            }
        });
        let mut agent = Agent {
            child,
            stdout: out_rx,
            stderr: stderr_text,
        };
        if attached_rx.recv_timeout(ATTACH_TIMEOUT).is_err() {
            let _ = agent.child.kill();
            bail!(
                "the agent did not report `attached`; stderr:\n{}",
                agent.stderr()
            );
        }
        Ok(agent)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn stderr(&self) -> String {
        self.stderr
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Sends SIGINT, waits for a clean exit, and returns every JSON line it printed.
    pub fn stop(self) -> Result<Vec<Value>> {
        self.stop_with_stderr().map(|(lines, _)| lines)
    }

    /// [`Agent::stop`], also returning everything it wrote on stderr.
    pub fn stop_with_stderr(mut self) -> Result<(Vec<Value>, String)> {
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
        let deadline = Instant::now() + Duration::from_secs(20);
        let status = loop {
            if let Some(status) = self.child.try_wait()? {
                break status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                bail!(
                    "the agent did not exit after SIGINT; stderr:\n{}",
                    self.stderr()
                );
            }
            thread::sleep(Duration::from_millis(20));
        };
        // Let the reader thread finish the last lines.
        thread::sleep(Duration::from_millis(100));
        if !status.success() {
            bail!("the agent exited with {status}; stderr:\n{}", self.stderr());
        }
        let mut events = Vec::new();
        while let Ok(line) = self.stdout.try_recv() {
            events.push(serde_json::from_str(&line).with_context(|| format!("not JSON: {line}"))?);
        }
        Ok((events, self.stderr()))
    }
}

/// A fixture program that prints JSON lines and waits for a go line on stdin.
pub struct Driver {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl Driver {
    pub fn spawn(program: &Path, args: &[&str]) -> Result<Driver> {
        Driver::spawn_with_env(program, args, &[])
    }

    /// As [`Driver::spawn`], with extra environment variables.
    pub fn spawn_with_env(program: &Path, args: &[&str], env: &[(&str, &str)]) -> Result<Driver> {
        let mut child = Command::new(program)
            .args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .with_context(|| format!("starting {}", program.display()))?;
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().context("driver stdout")?);
        Ok(Driver {
            child,
            stdin,
            stdout,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Reads the next JSON line the driver prints.
    pub fn read(&mut self) -> Result<Value> {
        let mut line = String::new();
        self.stdout.read_line(&mut line)?;
        serde_json::from_str(&line).with_context(|| format!("driver printed {line:?}"))
    }

    /// Lets the driver proceed past one wait, keeping its stdin open for the next.
    pub fn go(&mut self) -> Result<()> {
        let stdin = self.stdin.as_mut().context("driver stdin")?;
        stdin.write_all(b"go\n")?;
        stdin.flush()?;
        Ok(())
    }

    /// Lets the driver proceed, then waits for its final line and its exit.
    pub fn go_and_finish(mut self) -> Result<Value> {
        self.go()?;
        // Closed: a driver that reads on sees the end of its input.
        drop(self.stdin.take());
        let last = self.read()?;
        let status = self.child.wait()?;
        if !status.success() {
            bail!("the driver exited with {status}");
        }
        Ok(last)
    }
}

/// Runs `ingero ARGS` (a command that does not trace: query, explain, check) and returns its
/// stdout; a non-zero exit is an error carrying its stderr.
pub fn run_ingero(args: &[&str]) -> Result<String> {
    let out = Command::new(agent_bin()?)
        .args(args)
        .output()
        .context("running ingero")?;
    if !out.status.success() {
        bail!(
            "ingero {} exited with {}: {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Events of one type and op.
pub fn events<'a>(all: &'a [Value], kind: &str, op: &str) -> Vec<&'a Value> {
    all.iter()
        .filter(|e| e["type"] == kind && e["op"] == op)
        .collect()
}

/// The CUDA (or NCCL) calls `op` of process `pid`.
pub fn calls_of<'a>(all: &'a [Value], op: &str, pid: u64) -> Vec<&'a Value> {
    events(all, "cuda", op)
        .into_iter()
        .filter(|e| e["pid"] == pid)
        .collect()
}

/// The one call `op` of process `pid` (a failed assertion when there is not exactly one).
pub fn only_call<'a>(all: &'a [Value], op: &str, pid: u64) -> &'a Value {
    let found = calls_of(all, op, pid);
    assert_eq!(found.len(), 1, "exactly one {op} of pid {pid}: {found:#?}");
    found[0]
}
