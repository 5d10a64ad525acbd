//! Kernel tests of the NVTX fallback: a process that makes NVTX calls with no injection tool,
//! already running when the agent starts, is traced with NVTX capture on (`--annotate`) and
//! recorded; its ranges and instants come out of the live `--json` lines with their messages,
//! nesting and threads, and its ranges out of `query --group-by nvtx` on the recording. Once
//! for each library the fallback probes: libnvToolsExt.so.1 (exported), libnvtx3interop.so.1
//! (exported), and a stand-in for torch's libtorch_python.so whose NVTX functions are local
//! symbols found in `.symtab`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, ensure};
use ingero_e2e::{Agent, Driver, build_fixture, cudart, kernel_tests_enabled, run_ingero};
use serde_json::Value;

/// (kind, tid, depth, message) of an NVTX line; depth is `-` for instants.
type Seen = (String, u64, String, String);

fn seen(lines: &[Value]) -> BTreeSet<Seen> {
    lines
        .iter()
        .filter(|l| l["type"] == "nvtx")
        .map(|l| {
            (
                l["kind"].as_str().unwrap_or_default().to_owned(),
                l["tid"].as_u64().unwrap_or_default(),
                l.get("depth").map_or("-".to_owned(), |d| d.to_string()),
                l["message"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

fn env_lib(var: &str) -> Result<PathBuf> {
    let path = std::env::var_os(var)
        .map(PathBuf::from)
        .with_context(|| format!("{var} is not set: `export $(cargo xtask test-deps)` first"))?;
    ensure!(path.exists(), "{var}={} does not exist", path.display());
    Ok(path)
}

/// Runs the fixture against `lib` under a fresh agent; checks live and recorded NVTX lines.
fn traced(name: &str, lib: &Path, wide_and_ex: bool) -> Result<()> {
    let dir = std::env::temp_dir().join(format!("ingero-e2e-nvtxfb-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let recording = dir.join("run.pftrace");
    let socket = dir.join("annotate.sock").to_string_lossy().to_string();
    let program = build_fixture("nvtx_fallback", "nvtx_fallback", &["-lpthread", "-ldl"])?;
    let mut driver = Driver::spawn(&program, &[&lib.to_string_lossy()])?;
    let pid = driver.read()?["pid"].as_u64().unwrap_or_default();
    let agent = Agent::start(&[
        "--cuda-lib",
        &cudart()?.to_string_lossy(),
        "--pid",
        &pid.to_string(),
        "-o",
        &recording.to_string_lossy(),
        "--annotate",
        "--annotate-socket",
        &socket,
    ])?;
    ensure!(
        agent.stderr().contains("NVTX fallback on"),
        "the fallback did not attach to {}: {}",
        lib.display(),
        agent.stderr()
    );
    let last = driver.go_and_finish()?;
    std::thread::sleep(std::time::Duration::from_millis(300));
    let live = agent.stop()?;

    let tid = |i: usize| last["tids"][i].as_u64().unwrap_or_default();
    let main = last["main"].as_u64().unwrap_or_default();
    let line = |kind: &str, tid: u64, depth: &str, message: &str| {
        (kind.to_owned(), tid, depth.to_owned(), message.to_owned())
    };
    let mut expected = BTreeSet::new();
    for i in 0..2 {
        expected.insert(line("push_pop", tid(i), "0", &format!("outer-{i}")));
        expected.insert(line("push_pop", tid(i), "1", &format!("inner-{i}")));
        expected.insert(line("mark", tid(i), "-", &format!("mark-{i}")));
        expected.insert(line("push_pop", tid(i), "0", &format!("ex-{i}")));
    }
    expected.insert(line("mark", main, "-", "start-main"));
    expected.insert(line("mark", main, "-", "nvtxRangeEnd"));
    if wide_and_ex {
        expected.insert(line("push_pop", main, "0", "wide-é"));
    }
    let live_nvtx: Vec<Value> = live.into_iter().filter(|l| l["type"] == "nvtx").collect();
    ensure!(
        live_nvtx.len() == expected.len(),
        "each range once: {live_nvtx:#?}"
    );
    assert_eq!(seen(&live_nvtx), expected, "live lines of {name}");
    for l in &live_nvtx {
        assert_eq!(l["pid"].as_u64(), Some(pid), "{l}");
        assert!(l.get("unclosed").is_none(), "{l}");
    }

    // The recording: `query --group-by nvtx` has a row per range message (marks are not
    // ranges), each range once, in the process.
    let text = run_ingero(&[
        "query",
        "--trace",
        &recording.to_string_lossy(),
        "--group-by",
        "nvtx",
        "--json",
    ])?;
    let rows: Value = serde_json::from_str(&text).with_context(|| format!("not JSON: {text}"))?;
    let recorded: BTreeSet<(String, u64, u64)> = rows
        .as_array()
        .context("query rows")?
        .iter()
        .map(|r| {
            (
                r["labels"]["nvtx"].as_str().unwrap_or_default().to_owned(),
                r["pid"].as_u64().unwrap_or_default(),
                r["ranges"]["count"].as_u64().unwrap_or_default(),
            )
        })
        .collect();
    let ranges: BTreeSet<(String, u64, u64)> = expected
        .iter()
        .filter(|(kind, ..)| kind == "push_pop")
        .map(|(_, _, _, message)| (message.clone(), pid, 1))
        .collect();
    assert_eq!(recorded, ranges, "recorded ranges of {name}");
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

#[test]
fn calls_into_libnvtoolsext_are_ranges_and_instants() -> Result<()> {
    if !kernel_tests_enabled() {
        return Ok(());
    }
    traced("v2", &env_lib("INGERO_NVTOOLSEXT")?, true)
}

#[test]
fn calls_into_libnvtx3interop_are_ranges_and_instants() -> Result<()> {
    if !kernel_tests_enabled() {
        return Ok(());
    }
    traced("interop", &env_lib("INGERO_NVTX3INTEROP")?, true)
}

#[test]
fn torchs_local_nvtx_copies_are_found_in_the_symtab() -> Result<()> {
    if !kernel_tests_enabled() {
        return Ok(());
    }
    let out = ingero_e2e::root().join("target/test-fixtures/fake-torch");
    std::fs::create_dir_all(&out)?;
    let lib = build_fixture(
        "fake_torch_nvtx",
        "fake-torch/libtorch_python.so",
        &["-shared", "-fPIC"],
    )?;
    traced("torch", &lib, false)
}
