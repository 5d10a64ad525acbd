//! Probe cost and end-to-end rate.
//!
//! A loop calls a test library function that does nothing three ways: untraced; under a bare
//! uprobe+uretprobe pair whose programs only return (the floor this kernel charges for any
//! such pair, loaded from ingero's own object); and under `ingero trace`. ingero's cost is
//! reported as the ratio of its overhead to the floor's, for the runtime's `cudaLaunchKernel`
//! (tests/fixtures/mock_cuda.c) and the driver's 11-argument `cuLaunchKernel`, whose probe
//! also reads three stack words (tests/fixtures/mock_driver.c). The traced runtime run also
//! gives the end-to-end numbers: the call rate one producer thread reaches, the drops at that
//! rate, and the agent's CPU use. Last, a registration burst like `import torch`'s.

use std::{
    io::{BufRead, BufReader, Read},
    path::Path,
    process::{Command, Stdio},
    time::Instant,
};

use anyhow::{Context, Result, bail};
use aya::{
    Ebpf,
    programs::{UProbe, uprobe::UProbeScope},
};

use crate::util::workspace_root;
use ingero_e2e::build_fixture;

pub struct ProbeCost {
    pub untraced_ns: f64,
    pub floor_ns: f64,
    pub traced_ns: f64,
    pub driver: LoopCost,
    pub burst: Burst,
    pub traced_calls_per_s: f64,
    pub agent_cpu_fraction: f64,
    pub drops_line: String,
    pub events_recorded: u64,
    pub seconds: f64,
}

/// One function's loop: untraced, under the floor pair, under ingero (ns per call).
pub struct LoopCost {
    pub untraced_ns: f64,
    pub floor_ns: f64,
    pub traced_ns: f64,
}

/// The registration burst: names registered, how long the registering took untraced and
/// traced, how many names the agent ended up knowing, and its drops line.
pub struct Burst {
    pub count: u64,
    pub name_bytes: u64,
    pub untraced_s: f64,
    pub traced_s: f64,
    pub names_known: u64,
    pub drops_line: String,
}

/// Registrations in the burst and the bytes of each name (libtorch_cuda: ~24 k, 281 B mean).
pub const BURST_COUNT: u64 = 25_000;
pub const BURST_NAME_BYTES: u64 = 300;

impl ProbeCost {
    pub fn markdown(&self) -> String {
        let d = &self.driver;
        let b = &self.burst;
        format!(
            "{}\n### Driver launch (`cuLaunchKernel`, 11 arguments)\n\n\
             | loop | ns per call | overhead per call |\n|---|---|---|\n\
             | untraced | {u:.1} | — |\n\
             | bare uprobe+uretprobe pair (floor) | {f:.1} | {fo:.1} |\n\
             | `ingero trace` | {t:.1} | {to:.1} |\n\n\
             ingero's overhead / floor overhead: **{ratio:.3}** (target ≤ 1.3)\n\n\
             ### Registration burst ({n} × `__cudaRegisterFunction`, {nb}-byte names)\n\n\
             | untraced | traced | per registration traced | names the agent learnt | drops |\n\
             |---|---|---|---|---|\n\
             | {bu:.2} ms | {bt:.0} ms | {per:.1} µs | {known} of {n} | {drops} |\n",
            self.runtime_markdown(),
            u = d.untraced_ns,
            f = d.floor_ns,
            fo = d.floor_ns - d.untraced_ns,
            t = d.traced_ns,
            to = d.traced_ns - d.untraced_ns,
            ratio = (d.traced_ns - d.untraced_ns) / (d.floor_ns - d.untraced_ns),
            n = b.count,
            nb = b.name_bytes,
            bu = b.untraced_s * 1e3,
            bt = b.traced_s * 1e3,
            per = b.traced_s * 1e6 / b.count as f64,
            known = b.names_known,
            drops = b.drops_line,
        )
    }

    fn runtime_markdown(&self) -> String {
        let floor = self.floor_ns - self.untraced_ns;
        let ours = self.traced_ns - self.untraced_ns;
        format!(
            "### Probe cost (`cargo xtask bench probes`, {s:.0} s per run)\n\n\
             | loop | ns per call | overhead per call |\n|---|---|---|\n\
             | untraced | {u:.1} | — |\n\
             | bare uprobe+uretprobe pair (floor) | {f:.1} | {fo:.1} |\n\
             | `ingero trace` | {t:.1} | {to:.1} |\n\n\
             ingero's overhead / floor overhead: **{ratio:.3}** (target ≤ 1.3)\n\n\
             ### End to end (same traced run)\n\n\
             | calls/s (one producer thread) | events recorded | drops | agent CPU (share of one core) |\n\
             |---|---|---|---|\n| {rate:.0} | {ev} | {drops} | {cpu:.1}% (target < 25%) |\n",
            s = self.seconds,
            u = self.untraced_ns,
            f = self.floor_ns,
            fo = floor,
            t = self.traced_ns,
            to = ours,
            ratio = ours / floor,
            rate = self.traced_calls_per_s,
            ev = self.events_recorded,
            drops = self.drops_line,
            cpu = self.agent_cpu_fraction * 100.0,
        )
    }
}

fn parse_loop_output(out: &str) -> Result<(f64, f64)> {
    let line = out
        .lines()
        .last()
        .context("the call loop printed nothing")?;
    let v: serde_json::Value =
        serde_json::from_str(line).with_context(|| format!("call loop: {line}"))?;
    Ok((
        v["ns_per_call"].as_f64().context("ns_per_call")?,
        v["calls"].as_f64().context("calls")? / v["seconds"].as_f64().context("seconds")?,
    ))
}

/// The library a loop calls and which of its functions.
#[derive(Clone, Copy)]
struct Target<'a> {
    lib: &'a Path,
    /// The driver's `cuLaunchKernel` rather than the runtime's `cudaLaunchKernel`.
    driver: bool,
}

impl Target<'_> {
    fn symbol(&self) -> &'static str {
        if self.driver {
            "cuLaunchKernel"
        } else {
            "cudaLaunchKernel"
        }
    }

    fn loop_command(&self, program: &Path) -> Command {
        let mut cmd = Command::new(program);
        cmd.arg(self.lib);
        if self.driver {
            cmd.env("CALL_LOOP_DRIVER", "1");
        }
        cmd
    }
}

fn run_loop(program: &Path, target: Target<'_>, seconds: f64) -> Result<(f64, f64)> {
    let out = target
        .loop_command(program)
        .arg(seconds.to_string())
        .output()?;
    if !out.status.success() {
        bail!(
            "the call loop failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    parse_loop_output(&String::from_utf8_lossy(&out.stdout))
}

fn floor(program: &Path, target: Target<'_>, seconds: f64) -> Result<f64> {
    let object = std::env::var("INGERO_EBPF_OBJECT")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| workspace_root().join(crate::ebpf::OBJECT));
    let mut ebpf =
        Ebpf::load_file(&object).with_context(|| format!("loading {}", object.display()))?;
    let mut links = Vec::new();
    for name in ["bench_noop_enter", "bench_noop_return"] {
        let p: &mut UProbe = ebpf
            .program_mut(name)
            .with_context(|| format!("no program {name}"))?
            .try_into()?;
        p.load().with_context(|| format!("loading {name}"))?;
        links.push(p.attach(target.symbol(), target.lib, UProbeScope::AllProcesses)?);
    }
    let (ns, _) = run_loop(program, target, seconds)?;
    drop(ebpf);
    Ok(ns)
}

fn cpu_ticks(pid: u32) -> Result<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let after_comm = stat.rsplit(')').next().context("stat")?;
    let fields: Vec<&str> = after_comm.split_whitespace().collect();
    // utime and stime are fields 14 and 15; after "pid (comm)" they are at index 11 and 12.
    Ok(fields.get(11).context("utime")?.parse::<u64>()?
        + fields.get(12).context("stime")?.parse::<u64>()?)
}

/// Starts `ingero trace ARGS` and waits until it has attached.
fn start_agent(args: &[&std::ffi::OsStr]) -> Result<std::process::Child> {
    let agent_bin = workspace_root().join("target/release/ingero");
    let mut agent = Command::new(&agent_bin)
        .arg("trace")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {}", agent_bin.display()))?;
    let mut stderr = BufReader::new(agent.stderr.take().context("stderr")?);
    let mut line = String::new();
    while !line.contains("attached") {
        line.clear();
        if stderr.read_line(&mut line)? == 0 {
            bail!("the agent exited before attaching");
        }
    }
    // Keep reading stderr so the agent never blocks on a full pipe.
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    Ok(agent)
}

fn traced(
    program: &Path,
    target: Target<'_>,
    seconds: f64,
) -> Result<(f64, f64, f64, String, u64)> {
    let mut agent = start_agent(&["--cuda-lib".as_ref(), target.lib.as_os_str()])?;
    let pid = agent.id();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let ticks_before = cpu_ticks(pid)?;
    let start = Instant::now();
    let (ns, rate) = run_loop(program, target, seconds)?;
    let elapsed = start.elapsed().as_secs_f64();
    let ticks = cpu_ticks(pid)? - ticks_before;
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(pid as i32, libc::SIGINT) };
    let mut summary = String::new();
    agent
        .stdout
        .take()
        .context("stdout")?
        .read_to_string(&mut summary)?;
    agent.wait()?;
    let drops = summary
        .lines()
        .find_map(|l| l.strip_prefix("drops: "))
        .unwrap_or("unknown")
        .to_string();
    let events = summary
        .lines()
        .find(|l| l.starts_with(target.symbol()))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    Ok((ns, rate, ticks as f64 / hz / elapsed, drops, events))
}

pub fn run(seconds: f64) -> Result<ProbeCost> {
    let lib = build_fixture("mock_cuda", "libmock_cuda.so", &["-shared", "-fPIC"])?;
    let driver_lib = build_fixture("mock_driver", "libmock_driver.so", &["-shared", "-fPIC"])?;
    let program = build_fixture("call_loop", "call_loop", &["-ldl"])?;
    let runtime = Target {
        lib: &lib,
        driver: false,
    };
    let (untraced_ns, _) = run_loop(&program, runtime, seconds)?;
    let floor_ns = floor(&program, runtime, seconds)?;
    let (traced_ns, traced_calls_per_s, agent_cpu_fraction, drops_line, events_recorded) =
        traced(&program, runtime, seconds)?;
    let driver = Target {
        lib: &driver_lib,
        driver: true,
    };
    let driver = LoopCost {
        untraced_ns: run_loop(&program, driver, seconds)?.0,
        floor_ns: floor(&program, driver, seconds)?,
        traced_ns: traced(&program, driver, seconds)?.0,
    };
    let burst = burst(&lib)?;
    Ok(ProbeCost {
        untraced_ns,
        floor_ns,
        traced_ns,
        driver,
        burst,
        traced_calls_per_s,
        agent_cpu_fraction,
        drops_line,
        events_recorded,
        seconds,
    })
}

/// Runs the registration burst once untraced and once under `ingero trace --json`; the agent's
/// final stats line says how many names it knows and what it dropped.
fn burst(lib: &Path) -> Result<Burst> {
    let program = build_fixture("register_burst", "register_burst", &["-ldl"])?;
    let run = |agent: Option<&mut std::process::Child>| -> Result<f64> {
        let mut child = Command::new(&program)
            .arg(lib)
            .arg(BURST_COUNT.to_string())
            .arg(BURST_NAME_BYTES.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()?;
        let mut stdin = child.stdin.take().context("stdin")?;
        let mut out = BufReader::new(child.stdout.take().context("stdout")?);
        let mut line = String::new();
        out.read_line(&mut line)?;
        use std::io::Write as _;
        stdin.write_all(b"go\n")?;
        line.clear();
        out.read_line(&mut line)?;
        let v: serde_json::Value = serde_json::from_str(&line).context("burst output")?;
        if let Some(agent) = agent {
            // Let the agent drain (and complete the long names) while the names are mapped.
            std::thread::sleep(std::time::Duration::from_secs(2));
            let _ = agent;
        }
        stdin.write_all(b"done\n")?;
        drop(stdin);
        child.wait()?;
        v["seconds"].as_f64().context("seconds")
    };
    let untraced_s = run(None)?;
    let mut agent = start_agent(&["--json".as_ref(), "--cuda-lib".as_ref(), lib.as_os_str()])?;
    let traced_s = run(Some(&mut agent))?;
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(agent.id() as i32, libc::SIGINT) };
    let mut out = String::new();
    agent
        .stdout
        .take()
        .context("stdout")?
        .read_to_string(&mut out)?;
    agent.wait()?;
    let stats: serde_json::Value = out
        .lines()
        .rev()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["type"] == "stats" && v["final"] == true)
        .context("no final stats line")?;
    let lost: Vec<String> = stats["drops"]
        .as_object()
        .map(|m| {
            m.iter()
                .filter(|(_, n)| n.as_u64().unwrap_or(0) > 0)
                .map(|(k, n)| format!("{k} {n}"))
                .collect()
        })
        .unwrap_or_default();
    Ok(Burst {
        count: BURST_COUNT,
        name_bytes: BURST_NAME_BYTES,
        untraced_s,
        traced_s,
        names_known: stats["kernel_names"]["learned"].as_u64().unwrap_or(0),
        drops_line: if lost.is_empty() {
            "none".into()
        } else {
            lost.join(", ")
        },
    })
}
