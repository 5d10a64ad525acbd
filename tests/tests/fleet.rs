//! Kernel test of several hosts on one machine: two agents record annotation-only sessions
//! as `gpu-node-1` and `gpu-node-2` (distinct `--machine-name` and `--machine-id`), the second
//! in a time namespace (`unshare --time --monotonic 5000 --boottime 5000`) so its MONOTONIC
//! clock, which the agent stamps annotations with, runs 5000 s ahead while REALTIME is shared.
//! (Kernel events would not move: `bpf_ktime_get_ns` is not namespaced, which is why the
//! hosts here record only what the agent stamps itself.)
//!
//! The directory of both recordings is queried per host (`host` on every row, steps lined up
//! on REALTIME, `--host`), explained (the host whose step 2 ran 300 ms longer is named) and
//! bundled for Perfetto (`export perfetto`: the TAR's members and manifest).

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use ingero_e2e::{Agent, build_fixture, kernel_tests_enabled, run_ingero};
use serde_json::Value;

const SHIFT_NS: u64 = 5_000_000_000_000;

fn annotate(socket: &Path, step: u32) -> Result<()> {
    let socket = socket.to_string_lossy();
    run_ingero(&[
        "annotate",
        "--socket",
        &socket,
        "--label",
        &format!("step={step}"),
    ])?;
    Ok(())
}

fn agent(wrapper: &[&str], dir: &Path, name: &str, id: &str, mock: &str) -> Result<Agent> {
    let out = dir.join(name).join("r.pftrace");
    let socket = dir.join(format!("{name}.sock"));
    Agent::start_under(
        wrapper,
        &[
            "--cuda-lib",
            mock,
            "-o",
            &out.to_string_lossy(),
            "--machine-name",
            name,
            "--machine-id",
            id,
            "--annotate",
            "--annotate-socket",
            &socket.to_string_lossy(),
        ],
    )
}

fn json(args: &[&str]) -> Result<Value> {
    let out = run_ingero(args)?;
    serde_json::from_str(&out)
        .with_context(|| format!("ingero {}: not JSON: {out}", args.join(" ")))
}

fn step_of(row: &Value) -> &str {
    row["labels"]["step"].as_str().unwrap_or("")
}

#[test]
fn two_hosts_one_in_a_time_namespace_are_reported_per_host_and_bundled() -> Result<()> {
    if !kernel_tests_enabled() {
        return Ok(());
    }
    let dir = std::env::temp_dir().join(format!("ingero-e2e-fleet-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let mock = build_fixture("mock_cuda", "libmock_cuda.so", &["-shared", "-fPIC"])?;
    let mock = mock.to_string_lossy().to_string();
    let a = agent(&[], &dir, "gpu-node-1", "101", &mock)?;
    let b = agent(
        &[
            "unshare",
            "--time",
            "--monotonic",
            "5000",
            "--boottime",
            "5000",
        ],
        &dir,
        "gpu-node-2",
        "102",
        &mock,
    )?;
    let (sa, sb) = (dir.join("gpu-node-1.sock"), dir.join("gpu-node-2.sock"));
    // Steps 1..=4 of 200 ms on both hosts, but step 2 runs 300 ms longer on gpu-node-2.
    for s in 1..=4u32 {
        annotate(&sa, s)?;
        if s == 3 {
            std::thread::sleep(Duration::from_millis(300));
        }
        annotate(&sb, s)?;
        std::thread::sleep(Duration::from_millis(200));
    }
    // The last value holds to the end of the recording, which may be at once: a fifth step
    // closes the fourth.
    annotate(&sa, 5)?;
    annotate(&sb, 5)?;
    a.stop()?;
    b.stop()?;
    let trace = dir.to_string_lossy().to_string();

    // Rows per host; the same step on both hosts together, aligned on REALTIME although the
    // trace clocks are 5000 s apart.
    let rows = json(&["query", "--trace", &trace, "--group-by", "step", "--json"])?;
    let rows: Vec<Value> = rows
        .as_array()
        .context("rows")?
        .iter()
        .filter(|r| step_of(r) != "5")
        .cloned()
        .collect();
    let hosts: Vec<&str> = rows.iter().filter_map(|r| r["host"].as_str()).collect();
    assert_eq!(
        hosts.len(),
        rows.len(),
        "every row names its host: {rows:?}"
    );
    let steps: Vec<&str> = rows.iter().map(step_of).collect();
    assert_eq!(steps, ["1", "1", "2", "2", "3", "3", "4", "4"], "{rows:?}");
    for pair in rows.chunks(2) {
        assert_eq!(
            (pair[0]["host"].as_str(), pair[1]["host"].as_str()),
            (Some("gpu-node-1"), Some("gpu-node-2"))
        );
        let start = |r: &Value| r["start_ns"].as_u64().unwrap_or(0);
        let wall = |r: &Value| r["wall_start_ns"].as_u64().unwrap_or(0);
        let apart = start(&pair[1]).abs_diff(start(&pair[0]) + SHIFT_NS);
        let skew = wall(&pair[1]).abs_diff(wall(&pair[0]));
        let late = if step_of(&pair[0]) == "3" {
            300_000_000
        } else {
            0
        };
        assert!(
            apart.abs_diff(late) < 150_000_000,
            "trace clocks 5000 s apart: {pair:?}"
        );
        assert!(
            skew.abs_diff(late) < 150_000_000,
            "REALTIME together: {pair:?}"
        );
    }
    let one = json(&[
        "query",
        "--trace",
        &trace,
        "--group-by",
        "step",
        "--host",
        "gpu-node-2",
        "--json",
    ])?;
    let one: Vec<&Value> = one
        .as_array()
        .context("rows")?
        .iter()
        .filter(|r| step_of(r) != "5")
        .collect();
    assert_eq!(one.len(), 4);
    assert!(one.iter().all(|r| r["host"] == "gpu-node-2"));
    let text = run_ingero(&["query", "--trace", &trace, "--group-by", "step"])?;
    assert!(text.starts_with("host "), "{text}");

    // The host whose step 2 ran long is named, and every finding names a host.
    let e = json(&["explain", "--trace", &trace, "--json"])?;
    let names: Vec<&str> = e["hosts"]
        .as_array()
        .map(|h| h.iter().filter_map(|x| x["name"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(names, ["gpu-node-1", "gpu-node-2"]);
    let findings = e["findings"].as_array().context("findings")?;
    assert!(findings.iter().all(|f| f["host"].is_string()), "{e:#}");
    let slow = findings
        .iter()
        .find(|f| f["kind"] == "slow_host" && f["host"] == "gpu-node-2")
        .with_context(|| format!("no slow host: {e:#}"))?;
    let summary = slow["summary"].as_str().unwrap_or("");
    assert!(
        summary.starts_with("step 2 was slow on gpu-node-2"),
        "{summary}"
    );

    // The Perfetto bundle: the manifest and each host's file under its name.
    let tar = dir.join("job.tar");
    run_ingero(&[
        "export",
        "perfetto",
        "--trace",
        &trace,
        "-o",
        &tar.to_string_lossy(),
    ])?;
    let list = Command::new("tar").arg("tf").arg(&tar).output()?;
    if !list.status.success() {
        bail!("tar tf: {}", String::from_utf8_lossy(&list.stderr));
    }
    let members = String::from_utf8_lossy(&list.stdout).into_owned();
    let members: Vec<&str> = members.lines().collect();
    assert_eq!(
        members,
        [
            "perfetto_manifest.json",
            "gpu-node-1/r.pftrace",
            "gpu-node-2/r.pftrace"
        ]
    );
    let manifest = Command::new("tar")
        .arg("xOf")
        .arg(&tar)
        .arg("perfetto_manifest.json")
        .output()?;
    let m: Value = serde_json::from_slice(&manifest.stdout)?;
    let files = m["perfetto_manifest"]["files"]
        .as_array()
        .context("files")?;
    let machines: Vec<(&str, &str)> = files
        .iter()
        .filter_map(|f| Some((f["path"].as_str()?, f["machine"]["name"].as_str()?)))
        .collect();
    assert_eq!(
        machines,
        [
            ("gpu-node-1/r.pftrace", "gpu-node-1"),
            ("gpu-node-2/r.pftrace", "gpu-node-2")
        ]
    );
    assert_eq!(m["perfetto_manifest"]["version"], 1);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
