//! Kernel test of the one event schema: a run traced with `ingero trace --json --record
//! --annotate` prints each event and annotation live, and `ingero query --events --json` on its
//! recording prints the same line for it, key for key (plus the labels in force, on events).
//! The run has CUDA calls with exact arguments on the real libcudart, off-CPU intervals of
//! three threads, a fork, an exec, exits, and annotations (scoped instants, a trace-wide one
//! and a span). Run as root through `cargo xtask test`.

use std::collections::BTreeMap;
use std::process::Command;

use anyhow::{Context, Result, ensure};
use ingero_e2e::{Agent, Driver, agent_bin, cuda_driver, cudart, kernel_tests_enabled};
use serde_json::Value;

/// `ingero annotate` through the test agent's socket.
fn annotate(socket: &str, args: &[&str]) -> Result<()> {
    let status = Command::new(agent_bin()?)
        .args(["annotate", "--socket", socket])
        .args(args)
        .status()
        .context("running ingero annotate")?;
    ensure!(
        status.success(),
        "ingero annotate {args:?} failed: {status}"
    );
    Ok(())
}

/// Each line as canonical text (object keys sorted by serde_json's map), counted.
fn counted<'a>(lines: impl Iterator<Item = &'a Value>) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for l in lines {
        *out.entry(l.to_string()).or_insert(0) += 1;
    }
    out
}

#[test]
fn every_live_line_is_the_recorded_line_key_for_key() -> Result<()> {
    if !kernel_tests_enabled() {
        return Ok(());
    }
    let dir = std::env::temp_dir().join(format!("ingero-e2e-schema-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let recording = dir.join("run.pftrace");
    let socket = dir.join("annotate.sock").to_string_lossy().to_string();
    let lib = cudart()?.to_string_lossy().to_string();
    let program = cuda_driver()?;
    let mut calls = Driver::spawn(&program, &[&lib, "calls"])?;
    let mut sched = Driver::spawn(&program, &[&lib, "sched"])?;
    let calls_pid = calls.read()?["pid"]
        .as_u64()
        .unwrap_or_default()
        .to_string();
    let sched_pid = sched.read()?["pid"]
        .as_u64()
        .unwrap_or_default()
        .to_string();
    let agent = Agent::start(&[
        "--cuda-lib",
        &lib,
        "--pid",
        &format!("{calls_pid},{sched_pid}"),
        "-o",
        &recording.to_string_lossy(),
        "--annotate",
        "--annotate-socket",
        &socket,
    ])?;
    annotate(&socket, &["--label", "step=1", "--pid", &calls_pid])?;
    annotate(&socket, &["--label", "phase=train"])?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_nanos() as u64;
    annotate(
        &socket,
        &[
            "--label",
            "request_id=r-1",
            "--pid",
            &calls_pid,
            "--span-start",
            &(now - 50_000_000).to_string(),
            "--span-end",
            &now.to_string(),
        ],
    )?;
    calls.go_and_finish()?;
    annotate(&socket, &["--label", "step=2", "--pid", &sched_pid])?;
    sched.go_and_finish()?;
    // Let the last annotation reach the agent before it stops.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let live: Vec<Value> = agent
        .stop()?
        .into_iter()
        .filter(|l| l["type"] != "stats")
        .collect();

    let out = Command::new(agent_bin()?)
        .args(["query", "--events", "--json", "--trace"])
        .arg(&recording)
        .output()
        .context("running ingero query --events")?;
    ensure!(
        out.status.success(),
        "query --events failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut recorded: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).with_context(|| format!("not JSON: {l}")))
        .collect::<Result<_>>()?;
    // `query --events` adds the labels in force to events; everything else is the same.
    for r in &mut recorded {
        if r["type"] != "annotation" {
            if let Some(map) = r.as_object_mut() {
                map.remove("labels");
            }
        }
    }

    let kinds = |v: &[Value], ty: &str| v.iter().filter(|l| l["type"] == ty).count();
    for ty in ["cuda", "sched", "process", "annotation"] {
        assert!(kinds(&live, ty) > 0, "the run has {ty} lines: {live:#?}");
    }
    assert_eq!(kinds(&live, "annotation"), 4);
    let (live, recorded) = (counted(live.iter()), counted(recorded.iter()));
    let missing: Vec<&String> = live
        .iter()
        .filter(|(l, n)| recorded.get(*l) != Some(n))
        .map(|(l, _)| l)
        .collect();
    let extra: Vec<&String> = recorded
        .iter()
        .filter(|(l, n)| live.get(*l) != Some(n))
        .map(|(l, _)| l)
        .collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "live lines not recorded as such:\n{missing:#?}\nrecorded lines not printed live:\n{extra:#?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
