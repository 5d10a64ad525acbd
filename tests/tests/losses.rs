//! Kernel test of a recording that lost events: a tight loop of `cudaLaunchKernel` on the real
//! libcudart, traced with ring buffers of one page, overflows them; the agent's count of what
//! the full rings cost (its `drops:` line) is what `ingero explain` and `ingero query` say the
//! recording lost, where the finding and the rows overlap it, and on stderr beside JSON.
//! Run as root through `cargo xtask test`.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, ensure};
use ingero_e2e::{agent_bin, build_fixture, cudart, fresh_recording, kernel_tests_enabled};
use serde_json::Value;

/// The `ring_full_cuda N` of the summary's `drops:` line.
fn ring_full_cuda(summary: &str) -> Option<u64> {
    let line = summary.lines().find(|l| l.starts_with("drops:"))?;
    let rest = &line[line.find("ring_full_cuda ")? + "ring_full_cuda ".len()..];
    rest.split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

/// `ingero ARGS`: stdout parsed as JSON, and stderr.
fn json_and_stderr(args: &[&str]) -> Result<(Value, String)> {
    let out = Command::new(agent_bin()?).args(args).output()?;
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    ensure!(out.status.success(), "ingero {args:?}: {stderr}");
    let v = serde_json::from_slice(&out.stdout).with_context(|| format!("{args:?}: not JSON"))?;
    Ok((v, stderr))
}

#[test]
fn what_full_ring_buffers_lost_is_in_explain_and_query() -> Result<()> {
    if !kernel_tests_enabled() {
        return Ok(());
    }
    let program = build_fixture("call_loop", "call_loop", &["-ldl"])?;
    let lib = cudart()?.display().to_string();
    let file = fresh_recording("e2e-losses", "ring-full")?;
    let out = Command::new(agent_bin()?)
        .args(["trace", "--record", "--ringbuf-size", "4096", "-o"])
        .arg(&file)
        .args(["--cuda-lib", &lib, "--"])
        .arg(&program)
        .args([&lib, "2"])
        .output()?;
    let summary = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    ensure!(out.status.success(), "{summary}{stderr}");
    let lost = ring_full_cuda(&summary).with_context(|| format!("no drops: {summary}"))?;
    ensure!(lost > 0, "one page of ring lost nothing: {summary}");
    let trace = file.display().to_string();

    let (e, _) = json_and_stderr(&["explain", "--trace", &trace, "--json"])?;
    let losses = &e["losses"][0];
    assert_eq!(
        losses["by_reason"]["ring_full_cuda"], lost,
        "what the agent counted: {losses:#}"
    );
    let drops = losses["drops"].as_u64().context("drops")?;
    assert!(drops >= lost, "{losses:#}");
    // Ring drops lose records; a detail may be lost besides (an argument unreadable).
    let records_lost = losses["records_lost"].as_u64().context("records_lost")?;
    assert!(
        (lost..=drops).contains(&records_lost),
        "ring drops lose records: {losses:#}"
    );
    assert_eq!(losses["drops_in_selection"], drops);
    assert_eq!(losses["final_statistics"], true);
    let places = losses["places"].as_array().context("places")?;
    assert!(!places.is_empty(), "{losses:#}");
    let listed: u64 = places.iter().filter_map(|p| p["drops"].as_u64()).sum();
    assert!(listed > 0 && listed <= drops, "{losses:#}");
    // The calls all failed (no driver): the error finding covers them, and the drops.
    let error = e["findings"]
        .as_array()
        .and_then(|a| a.iter().find(|f| f["kind"] == "cuda_error"))
        .with_context(|| format!("no cuda_error finding: {e:#}"))?;
    let around = error["drops_overlapping"].as_u64().unwrap_or(0);
    assert!(around > 0 && around <= drops, "{error:#}");

    // `query --json` keeps its rows and says it on stderr; a process's row carries the drops
    // of its whole run.
    let (rows, stderr) =
        json_and_stderr(&["query", "--trace", &trace, "--group-by", "pid", "--json"])?;
    assert!(
        stderr.contains(&format!(
            "ingero: note: the recording counted {drops} drops"
        )),
        "{stderr}"
    );
    let row = rows
        .as_array()
        .and_then(|r| r.iter().find(|r| r["launches"].as_u64().unwrap_or(0) > 0))
        .with_context(|| format!("no row with launches: {rows:#}"))?;
    assert_eq!(row["drops_overlapping"], drops, "{row:#}");
    text_says_it(&file, drops)
}

/// The text forms say it after the table, and the explain report before its findings.
fn text_says_it(file: &Path, drops: u64) -> Result<()> {
    let trace = file.display().to_string();
    let q = ingero_e2e::run_ingero(&["query", "--trace", &trace])?;
    let note = format!("note: the recording counted {drops} drops (");
    assert!(q.contains(&note) && q.contains("--ringbuf-size"), "{q}");
    let e = ingero_e2e::run_ingero(&["explain", "--trace", &trace])?;
    assert!(e.starts_with(&note), "{e}");
    assert!(e.contains("trace incomplete: "), "{e}");
    Ok(())
}
