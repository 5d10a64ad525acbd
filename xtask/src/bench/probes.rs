//! Probe cost and end-to-end rate.
//!
//! A loop calls a test library function that does nothing (tests/fixtures/mock_cuda.c) three
//! ways: untraced; under a bare uprobe+uretprobe pair whose programs only return (the floor
//! this kernel charges for any such pair, loaded from ingero's own object); and under
//! `ingero trace`. ingero's cost is reported as the ratio of its overhead to the floor's.
//! The traced run also gives the end-to-end numbers: the call rate one producer thread
//! reaches, the drops at that rate, and the agent's CPU use.

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
    pub traced_calls_per_s: f64,
    pub agent_cpu_fraction: f64,
    pub drops_line: String,
    pub events_recorded: u64,
    pub seconds: f64,
}

impl ProbeCost {
    pub fn markdown(&self) -> String {
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

fn run_loop(program: &Path, lib: &Path, seconds: f64) -> Result<(f64, f64)> {
    let out = Command::new(program)
        .arg(lib)
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

fn floor(program: &Path, lib: &Path, seconds: f64) -> Result<f64> {
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
        links.push(p.attach("cudaLaunchKernel", lib, UProbeScope::AllProcesses)?);
    }
    let (ns, _) = run_loop(program, lib, seconds)?;
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

fn traced(program: &Path, lib: &Path, seconds: f64) -> Result<(f64, f64, f64, String, u64)> {
    let agent_bin = workspace_root().join("target/release/ingero");
    let mut agent = Command::new(&agent_bin)
        .args(["trace", "--cuda-lib"])
        .arg(lib)
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
    let pid = agent.id();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let ticks_before = cpu_ticks(pid)?;
    let start = Instant::now();
    let (ns, rate) = run_loop(program, lib, seconds)?;
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
        .find(|l| l.starts_with("cudaLaunchKernel"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    Ok((ns, rate, ticks as f64 / hz / elapsed, drops, events))
}

pub fn run(seconds: f64) -> Result<ProbeCost> {
    let lib = build_fixture("mock_cuda", "libmock_cuda.so", &["-shared", "-fPIC"])?;
    let program = build_fixture("call_loop", "call_loop", &["-ldl"])?;
    let (untraced_ns, _) = run_loop(&program, &lib, seconds)?;
    let floor_ns = floor(&program, &lib, seconds)?;
    let (traced_ns, traced_calls_per_s, agent_cpu_fraction, drops_line, events_recorded) =
        traced(&program, &lib, seconds)?;
    Ok(ProbeCost {
        untraced_ns,
        floor_ns,
        traced_ns,
        traced_calls_per_s,
        agent_cpu_fraction,
        drops_line,
        events_recorded,
        seconds,
    })
}
