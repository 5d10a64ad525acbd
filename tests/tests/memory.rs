//! Kernel tests of `ingero query --memory`: two processes make known allocations through a
//! test-only runtime (`tests/fixtures/mock_memory.c`, whose allocations succeed), and one
//! allocates by handle through a test-only driver (`tests/fixtures/mock_vmm.c`); the agent
//! records them, and the query gives each process's held and peak bytes exactly.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use anyhow::{Context, Result};
use ingero_e2e::{Agent, Driver, build_fixture, fresh_recording, kernel_tests_enabled, run_ingero};
use serde_json::Value;

const MIB: u64 = 1 << 20;
const KIB: u64 = 1 << 10;

fn row(report: &Value, pid: u64) -> Result<&Value> {
    report["processes"]
        .as_array()
        .context("processes")?
        .iter()
        .find(|p| p["pid"] == pid)
        .with_context(|| format!("no row for pid {pid} in {report:#}"))
}

#[test]
fn query_memory_gives_each_process_its_held_and_peak_bytes() -> Result<()> {
    if !kernel_tests_enabled() {
        return Ok(());
    }
    let mock = build_fixture("mock_memory", "libmock_memory.so", &["-shared", "-fPIC"])?;
    let mock_str = mock.to_string_lossy().to_string();
    let program = build_fixture("memory_driver", "memory_driver", &["-ldl"])?;
    // The holder stays alive past the end of the recording; its stdin is ours.
    let mut holder = Command::new(&program)
        .args([mock_str.as_str(), "hold"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .context("starting the holder")?;
    let mut holder_in = holder.stdin.take().context("holder stdin")?;
    let mut holder_out = BufReader::new(holder.stdout.take().context("holder stdout")?);
    let mut line = String::new();
    holder_out.read_line(&mut line)?;
    let holder_pid = serde_json::from_str::<Value>(&line)?["pid"]
        .as_u64()
        .context("holder pid")?;
    let mut leaver = Driver::spawn(&program, &[&mock_str, "exit"])?;
    let leaver_pid = leaver.read()?["pid"].as_u64().context("leaver pid")?;

    let trace = fresh_recording("e2e-memory", "memory")?;
    let trace_str = trace.to_string_lossy().to_string();
    let pids = format!("{holder_pid},{leaver_pid}");
    let agent = Agent::start(&[
        "--cuda-lib",
        &mock_str,
        "--pid",
        &pids,
        "--record",
        "-o",
        &trace_str,
    ])?;
    holder_in.write_all(b"go\n")?;
    line.clear();
    holder_out.read_line(&mut line)?;
    let done: Value = serde_json::from_str(&line)?;
    assert_eq!(done["ret"], 0, "the mock's calls succeed");
    let done = leaver.go_and_finish()?;
    assert_eq!(done["ret"], 0);
    // Let the leaver's exit reach the recording before the agent stops.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let live = agent.stop();
    drop(holder_in);
    let _ = holder.wait();
    live?;

    let out = run_ingero(&["query", "--trace", &trace_str, "--memory", "--json"])?;
    let report: Value = serde_json::from_str(out.trim()).context("query --memory --json")?;
    let h = row(&report, holder_pid)?;
    assert_eq!(h["command"], "memory_driver");
    assert_eq!(h["held_bytes"], 6 * MIB, "4 MiB device + 2 MiB pool: {h:#}");
    assert_eq!(h["peak_bytes"], 7 * MIB, "{h:#}");
    assert_eq!(h["allocated_bytes"], 7 * MIB);
    assert_eq!(h["freed_bytes"], MIB);
    assert_eq!(h["live_allocations"], 2);
    assert_eq!(h["kinds"]["device"]["held_bytes"], 4 * MIB);
    assert_eq!(h["kinds"]["pool"]["held_bytes"], 2 * MIB);
    assert_eq!(h["pinned"]["held_bytes"], 128 * KIB, "{h:#}");
    assert_eq!(h["pinned"]["peak_bytes"], 128 * KIB);
    assert_eq!(
        h["unknown_frees"], 1,
        "the free of a pointer never allocated"
    );
    assert_eq!(
        h["unknown_host_frees"], 0,
        "cudaFreeHost matched its pointer"
    );
    assert_eq!(h["exited_ns"], Value::Null);
    assert_eq!(h["largest"][0]["size_bytes"], 4 * MIB);
    assert_eq!(h["largest"][0]["op"], "cudaMalloc");

    let l = row(&report, leaver_pid)?;
    assert_eq!(l["peak_bytes"], 24 * MIB, "{l:#}");
    assert_eq!(l["kinds"]["managed"]["peak_bytes"], 16 * MIB);
    assert_eq!(l["unknown_frees"], 0);
    assert!(l["exited_ns"].is_u64(), "the exit was recorded: {l:#}");
    assert_eq!(l["held_at_exit_bytes"], 16 * MIB);
    assert_eq!(l["held_bytes"], 0, "an exited process holds nothing");

    // The readable form names both and says what it could not size.
    let text = run_ingero(&["query", "--trace", &trace_str, "--memory"])?;
    assert!(text.contains("1 unknown free(s)"), "{text}");
    assert!(text.contains("largest live allocations"), "{text}");
    Ok(())
}

#[test]
fn query_memory_follows_memory_by_handle_to_its_release_and_unmap() -> Result<()> {
    if !kernel_tests_enabled() {
        return Ok(());
    }
    let mock = build_fixture("mock_vmm", "libmock_vmm.so", &["-shared", "-fPIC"])?;
    let mock_str = mock.to_string_lossy().to_string();
    let program = build_fixture("vmm_driver", "vmm_driver", &["-ldl"])?;
    let mut driver = Driver::spawn(&program, &[&mock_str])?;
    let pid = driver.read()?["pid"].as_u64().context("pid")?;

    let trace = fresh_recording("e2e-memory", "vmm")?;
    let trace_str = trace.to_string_lossy().to_string();
    let agent = Agent::start(&[
        "--cuda-lib",
        &mock_str,
        "--pid",
        &pid.to_string(),
        "--record",
        "-o",
        &trace_str,
    ])?;
    let done = driver.go_and_finish()?;
    assert_eq!(done["ret"], 0, "the mock's calls succeed: {done}");
    // Let the exit reach the recording before the agent stops.
    std::thread::sleep(std::time::Duration::from_millis(300));
    agent.stop()?;

    let out = run_ingero(&["query", "--trace", &trace_str, "--memory", "--json"])?;
    let report: Value = serde_json::from_str(out.trim()).context("query --memory --json")?;
    let p = row(&report, pid)?;
    let vmm = &p["kinds"]["vmm"];
    assert_eq!(vmm["peak_bytes"], 40 * MIB, "A and B mapped at once: {p:#}");
    assert_eq!(vmm["allocations"], 2, "{p:#}");
    assert_eq!(
        vmm["frees"], 1,
        "B went at its unmap; A's retain and release left it: {p:#}"
    );
    assert_eq!(p["peak_bytes"], 40 * MIB, "host memory is not the GPU's");
    assert_eq!(p["pinned"]["peak_bytes"], 2 * MIB, "{p:#}");
    assert_eq!(p["held_at_exit_bytes"], 20 * MIB, "A was held at the exit");
    assert_eq!(p["unknown_frees"], 0, "{p:#}");
    assert_eq!(p["largest"][0]["op"], "cuMemCreate");
    assert_eq!(p["largest"][0]["size_bytes"], 20 * MIB);
    assert_eq!(p["largest"][0]["ptr"], done["a"], "named by its handle");
    assert_eq!(p["largest"][0]["kind"], "vmm");
    Ok(())
}
