//! A program with the CUDA runtime linked in (`nvcc -cudart static`, nvcc's and CMake's
//! default): no libcudart.so is ever mapped, and the agent attaches to the runtime inside the
//! program. `trace -- CMD` finds it before starting the command, so the kernels it registers
//! before `main` are named, even from a page of names the program has not touched yet; a
//! program already running is found in its maps, and its kernels are named from its symbols.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use ingero_e2e::{
    Agent, Driver, agent_bin, cudart, cudart13, events, kernel_tests_enabled, libcuda,
    linked_runtime_program, run_ingero,
};
use serde_json::Value;

/// The kernel the fixture registers, as the agent demangles it.
const KERNEL: &str = "void demo::scale<4>(float*, float, int)";

/// The fixture built against each runtime wheel's `libcudart_static.a` (CUDA 13's when its
/// wheel is unpacked).
fn programs() -> Result<Vec<PathBuf>> {
    let mut programs = vec![linked_runtime_program(&cudart()?, "linked_runtime_12")?];
    if let Some(cudart13) = cudart13() {
        programs.push(linked_runtime_program(&cudart13, "linked_runtime_13")?);
    }
    Ok(programs)
}

/// The directory of Debian's libcuda.so.1, for the runtime's dlopen to find.
fn libcuda_dir() -> Result<String> {
    Ok(libcuda()?
        .parent()
        .context("libcuda's directory")?
        .display()
        .to_string())
}

/// A fresh recording path under target/.
fn recording(name: &str) -> Result<PathBuf> {
    ingero_e2e::fresh_recording("e2e-linked-runtime", name)
}

/// The one event of `op` in `all`.
fn one<'a>(all: &'a [Value], op: &str) -> Result<&'a Value> {
    match events(all, "cuda", op).as_slice() {
        [event] => Ok(event),
        other => bail!("{} {op} events: {other:#?}", other.len()),
    }
}

/// Checks the three calls of the fixture against what it printed (`{"ret","func"}`).
fn check_calls(all: &[Value], printed: &Value, kernel_source: &str) -> Result<()> {
    let ret = &printed["ret"];
    let malloc = one(all, "cudaMalloc")?;
    let launch = one(all, "cudaLaunchKernel")?;
    let sync = one(all, "cudaDeviceSynchronize")?;
    assert_eq!(malloc["ret"], ret[0], "{malloc}");
    assert_eq!(launch["ret"], ret[1], "{launch}");
    assert_eq!(sync["ret"], ret[2], "{sync}");
    assert_eq!(malloc["args"]["size"], 4096, "{malloc}");
    assert_eq!(launch["args"]["func"], printed["func"], "{launch}");
    assert_eq!(
        launch["args"]["grid"],
        serde_json::json!([4, 2, 1]),
        "{launch}"
    );
    assert_eq!(launch["args"]["kernel"], KERNEL, "{launch}");
    assert_eq!(launch["args"]["kernel_source"], kernel_source, "{launch}");
    Ok(())
}

/// Whether the agent said it attached to the runtime linked into `program` (named by any path
/// that reaches it).
fn said_linked_in(stderr: &str, program: &Path) -> bool {
    let program = std::fs::canonicalize(program).ok();
    stderr.lines().any(|l| {
        let Some(path) = l
            .strip_prefix("ingero: ")
            .and_then(|rest| rest.split_once(": probing "))
            .filter(|(_, rest)| rest.ends_with("symbols of the CUDA runtime linked into it"))
            .map(|(path, _)| path)
        else {
            return false;
        };
        program.is_some() && std::fs::canonicalize(path).ok() == program
    })
}

#[test]
fn a_command_with_the_runtime_linked_in_is_traced_from_its_first_call() -> Result<()> {
    if !kernel_tests_enabled() {
        return Ok(());
    }
    for program in programs()? {
        let file = recording(&format!(
            "command-{}",
            program.file_name().context("name")?.to_string_lossy()
        ))?;
        let mut child = Command::new(agent_bin()?)
            .args(["trace", "--json", "-o"])
            .arg(&file)
            .arg("--")
            .arg(&program)
            .env("LD_LIBRARY_PATH", libcuda_dir()?)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        let mut stdin = child.stdin.take().context("stdin")?;
        // The program inherits ingero's stdin and stdout: its lines and the agent's events
        // come on one pipe.
        stdin.write_all(b"go\n")?;
        let (tx, rx) = mpsc::channel();
        let stdout = child.stdout.take().context("stdout")?;
        let reader = thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(|l| l.ok()) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        // The program stays until the agent has shown its launch, named while it runs.
        let mut lines: Vec<Value> = Vec::new();
        while !lines
            .iter()
            .any(|l| l["type"] == "cuda" && l["op"] == "cudaLaunchKernel")
        {
            let Ok(line) = rx.recv_timeout(Duration::from_secs(120)) else {
                let _ = child.kill();
                bail!("no launch came from the agent; lines: {lines:#?}");
            };
            lines.push(serde_json::from_str(&line).with_context(|| format!("not JSON: {line}"))?);
        }
        stdin.write_all(b"end\n")?;
        drop(stdin);
        let out = child.wait_with_output()?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{stderr}");
        // Every line, the final statistics included, once the reader has seen the pipe close.
        let _ = reader.join();
        lines.extend(rx.try_iter().filter_map(|l| serde_json::from_str(&l).ok()));
        let printed = lines
            .iter()
            .find(|l| l.get("ret").is_some_and(Value::is_array))
            .with_context(|| format!("the program's line: {lines:#?}"))?
            .clone();
        assert!(lines.iter().any(|l| l["done"] == true), "{lines:#?}");
        assert!(said_linked_in(&stderr, &program), "{stderr}");
        check_calls(&lines, &printed, "registration")?;
        // The name's page was not mapped when the program registered: it was read there and
        // then (faulted in), not lost for a moment and read from the process afterwards.
        let stats = lines
            .iter()
            .find(|l| l["type"] == "stats" && l["final"] == true)
            .with_context(|| format!("no final statistics: {lines:#?}"))?;
        assert_eq!(stats["drops"]["kernel_name_unreadable"], 0, "{stats}");
        assert_eq!(stats["kernel_names"]["read_late"], 0, "{stats}");
        assert_eq!(stats["kernel_names"]["learned"], 1, "{stats}");
        // The recording holds the same calls.
        let trace = file.display().to_string();
        let recorded: Vec<Value> = run_ingero(&["query", "--trace", &trace, "--events", "--json"])?
            .lines()
            .map(|l| serde_json::from_str(l).with_context(|| format!("not JSON: {l}")))
            .collect::<Result<_>>()?;
        check_calls(&recorded, &printed, "registration")?;
    }
    Ok(())
}

#[test]
fn a_running_program_with_the_runtime_linked_in_is_found_and_its_kernels_named() -> Result<()> {
    if !kernel_tests_enabled() {
        return Ok(());
    }
    let program = linked_runtime_program(&cudart()?, "linked_runtime_12")?;
    let libcuda_dir = libcuda_dir()?;
    let mut driver =
        Driver::spawn_with_env(&program, &[], &[("LD_LIBRARY_PATH", libcuda_dir.as_str())])?;
    let pid = driver.read()?["pid"].as_u64().context("pid")?;
    // It registered its kernel before the agent started: the launch is named from the
    // program's symbols.
    let agent = Agent::start(&[])?;
    driver.go()?;
    let printed = driver.read()?;
    // Stopped while the program waits, so its names are read from a live process.
    let (all, stderr) = agent.stop_with_stderr()?;
    assert_eq!(driver.go_and_finish()?["done"], true);
    let own: Vec<Value> = all
        .into_iter()
        .filter(|e| e["pid"].as_u64() == Some(pid))
        .collect();
    assert!(said_linked_in(&stderr, &program), "{stderr}");
    check_calls(&own, &printed, "symtab")
}

#[test]
fn check_reports_the_runtime_functions_a_program_links_in() -> Result<()> {
    if !kernel_tests_enabled() {
        return Ok(());
    }
    use ingero_ebpf::{CudaLibrary, CudaOp};
    let program = linked_runtime_program(&cudart()?, "linked_runtime_12")?;
    let shown = program.display().to_string();
    // What nm sees in the program's symbol table (local functions included).
    let nm = Command::new("nm")
        .args(["--defined-only"])
        .arg(&program)
        .output()
        .context("running nm")?;
    let defined: Vec<String> = String::from_utf8_lossy(&nm.stdout)
        .lines()
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            let (_, kind, name) = (words.next()?, words.next()?, words.next()?);
            matches!(kind, "T" | "t").then(|| name.to_string())
        })
        .collect();
    let probed: Vec<&str> = CudaOp::ALL
        .iter()
        .filter(|op| op.library() == CudaLibrary::Runtime)
        .flat_map(|op| op.exports().map(|(symbol, _, _)| symbol))
        .collect();
    let linked = probed
        .iter()
        .filter(|s| defined.iter().any(|d| d == **s))
        .count();
    assert!(linked > 0, "nm found none of {probed:?}");
    let report: Value =
        serde_json::from_str(&run_ingero(&["check", "--json", "--cuda-lib", &shown])?)?;
    let entry = report["libraries"]
        .as_array()
        .and_then(|l| l.iter().find(|e| e["path"] == shown.as_str()))
        .with_context(|| format!("{shown} not reported: {report:#}"))?;
    assert_eq!(entry["library"], "libcudart", "{entry}");
    assert_eq!(entry["linked_in"], true, "{entry}");
    assert_eq!(entry["probed_symbols"], probed.len(), "{entry}");
    assert_eq!(entry["exported_symbols"], linked, "{entry}");
    Ok(())
}
