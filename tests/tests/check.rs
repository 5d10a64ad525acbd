//! Kernel tests of `ingero check`: as root on this host it proves tracing works and reports the
//! real libcudart and libcuda with the probed symbols each exports (counted here independently,
//! from the op table and `nm -D`); without privileges it fails and says why. Its NVTX line
//! names the injection library and whether NVTX could load it.

use std::{
    collections::BTreeSet,
    path::Path,
    process::{Command, Output},
};

use anyhow::{Context, Result, bail};
use ingero_e2e::{agent_bin, build_fixture, cudart, cudart13, kernel_tests_enabled, libcuda};
use ingero_ebpf::{CudaLibrary, CudaOp};
use serde_json::Value;

/// A shared object exporting `InitializeInjectionNvtx2`, as the injection library does.
fn nvtx_stub() -> Result<String> {
    let path = build_fixture("nvtx_stub", "libnvtx_stub.so", &["-shared", "-fPIC"])?;
    Ok(path.display().to_string())
}

fn check(args: &[&str]) -> Result<Output> {
    check_with_env(args, &[("INGERO_NVTX_LIBRARY", &nvtx_stub()?)])
}

/// `ingero check ARGS` with the NVTX variables cleared, then `env` set.
fn check_with_env(args: &[&str], env: &[(&str, &str)]) -> Result<Output> {
    Command::new(agent_bin()?)
        .arg("check")
        .args(args)
        .env_remove("INGERO_NVTX_LIBRARY")
        .env_remove("NVTX_INJECTION64_PATH")
        .envs(env.iter().copied())
        .output()
        .context("running ingero check")
}

/// The `nvtx` line of the text output.
fn nvtx_line(out: &Output) -> String {
    text(&out.stdout)
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some("nvtx:"))
        .unwrap_or_default()
        .to_string()
}

#[test]
fn the_nvtx_line_says_whether_the_injection_library_can_be_loaded() -> Result<()> {
    // Runs with or without root: the line does not depend on tracing working.
    let stub = nvtx_stub()?;
    let out = check_with_env(&[], &[("INGERO_NVTX_LIBRARY", &stub)])?;
    assert_eq!(
        nvtx_line(&out),
        format!(
            "ok    nvtx: {stub} exports InitializeInjectionNvtx2: `ingero run -- CMD` or \
             `sudo ingero trace -- CMD` captures NVTX ranges"
        )
    );
    let out = check_with_env(&[], &[("INGERO_NVTX_LIBRARY", "/etc/passwd")])?;
    assert_eq!(
        nvtx_line(&out),
        "warn  nvtx: /etc/passwd: not an ELF file: NVTX ranges are not captured"
    );
    let nsys = "/opt/nsys/libToolsInjection64.so";
    let out = check_with_env(
        &["--json"],
        &[
            ("INGERO_NVTX_LIBRARY", &stub),
            ("NVTX_INJECTION64_PATH", nsys),
        ],
    )?;
    let report: Value = serde_json::from_slice(&out.stdout).context("check --json")?;
    assert_eq!(report["nvtx"]["available"], true, "{report:#}");
    assert_eq!(report["nvtx"]["library"], stub.as_str());
    assert_eq!(report["nvtx"]["error"], Value::Null);
    assert_eq!(report["nvtx"]["other_tool"], nsys);
    let message = report["checks"]
        .as_array()
        .and_then(|c| c.iter().find(|l| l["name"] == "nvtx"))
        .and_then(|l| l["message"].as_str())
        .unwrap_or_default();
    assert!(
        message.contains(&format!("NVTX_INJECTION64_PATH is set here to {nsys}")),
        "{message}"
    );
    Ok(())
}

/// The same command as `nobody`, with no capabilities.
fn check_unprivileged(args: &[&str]) -> Result<Output> {
    Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(agent_bin()?)
        .arg("check")
        .args(args)
        .output()
        .context("running ingero check through setpriv")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Defined dynamic function symbols, read with `nm -D` (not the agent's ELF reader).
fn nm_exports(path: &Path) -> Result<BTreeSet<String>> {
    let out = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(path)
        .output()
        .context("running nm")?;
    if !out.status.success() {
        bail!("nm -D {} failed: {}", path.display(), text(&out.stderr));
    }
    Ok(text(&out.stdout)
        .lines()
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            let (_, kind, name) = (words.next()?, words.next()?, words.next()?);
            matches!(kind, "T" | "t" | "i" | "W")
                .then(|| name.split('@').next().unwrap_or(name).to_string())
        })
        .collect())
}

fn probed(kind: CudaLibrary) -> Vec<&'static str> {
    CudaOp::ALL
        .iter()
        .filter(|op| op.library() == kind)
        .flat_map(|op| op.exports().map(|(symbol, _, _)| symbol))
        .collect()
}

fn lib_args(paths: &[String]) -> Vec<&str> {
    paths
        .iter()
        .flat_map(|p| ["--cuda-lib", p.as_str()])
        .collect()
}

#[test]
fn as_root_check_passes_and_lists_both_libraries() -> Result<()> {
    if !kernel_tests_enabled() {
        return Ok(());
    }
    let mut libs = vec![cudart()?, libcuda()?];
    libs.extend(cudart13());
    let paths: Vec<String> = libs.iter().map(|p| p.display().to_string()).collect();

    let out = check(&lib_args(&paths))?;
    let stdout = text(&out.stdout);
    assert!(
        out.status.success(),
        "exit {}:\n{stdout}{}",
        out.status,
        text(&out.stderr)
    );
    for name in [
        "privileges",
        "tracefs",
        "ebpf",
        "uprobe",
        "gpu_faults",
        "libcudart",
        "libcuda",
        "nvtx",
    ] {
        assert!(
            stdout
                .lines()
                .any(|l| l.split_whitespace().nth(1) == Some(&format!("{name}:"))),
            "no {name} line:\n{stdout}"
        );
    }
    assert!(stdout.contains("ok    ebpf:"), "{stdout}");
    assert!(stdout.contains("ok    uprobe:"), "{stdout}");
    assert!(stdout.contains("ok    gpu_faults:"), "{stdout}");
    assert!(
        stdout.contains("ok    nvtx: ") && stdout.contains("exports InitializeInjectionNvtx2"),
        "{stdout}"
    );
    assert!(
        stdout.contains("(version 535.261.03)"),
        "the driver's version: {stdout}"
    );
    assert!(
        stdout.ends_with("ingero check: tracing will work on this host\n"),
        "{stdout}"
    );

    let out = check(&[&lib_args(&paths)[..], &["--json"]].concat())?;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).context("check --json")?;
    for key in [
        "ok",
        "checks",
        "kernel",
        "privileges",
        "libraries",
        "nvtx",
        "annotate_socket",
    ] {
        assert!(report.get(key).is_some(), "no {key}: {report:#}");
    }
    assert_eq!(report["ok"], true);
    assert_eq!(report["privileges"]["sufficient"], true);
    assert_eq!(report["nvtx"]["available"], true);
    let libraries = report["libraries"].as_array().context("libraries")?;
    assert_eq!(libraries.len(), libs.len(), "{report:#}");
    for lib in &libs {
        let shown = lib.display().to_string();
        let entry = libraries
            .iter()
            .find(|l| l["path"] == shown.as_str())
            .with_context(|| format!("{shown} not reported: {report:#}"))?;
        let kind = if shown.contains("libcudart") {
            CudaLibrary::Runtime
        } else {
            CudaLibrary::Driver
        };
        assert_eq!(entry["library"], kind.name(), "{entry}");
        let probed = probed(kind);
        let exports = nm_exports(lib)?;
        let exported = probed.iter().filter(|s| exports.contains(**s)).count();
        let missing: Vec<&str> = probed
            .iter()
            .filter(|s| !exports.contains(**s))
            .copied()
            .collect();
        assert_eq!(entry["probed_symbols"], probed.len(), "{entry}");
        assert_eq!(entry["exported_symbols"], exported, "{entry}");
        assert_eq!(entry["missing"], serde_json::json!(missing), "{entry}");
    }
    let driver = libraries
        .iter()
        .find(|l| l["library"] == "libcuda")
        .context("no libcuda")?;
    assert_eq!(driver["version"], "535.261.03");
    Ok(())
}

#[test]
fn without_privileges_check_fails_and_says_why() -> Result<()> {
    if !kernel_tests_enabled() {
        return Ok(());
    }
    let out = check_unprivileged(&[])?;
    let stdout = text(&out.stdout);
    assert!(!out.status.success(), "nobody passed the check:\n{stdout}");
    assert_eq!(out.status.code(), Some(1), "{stdout}{}", text(&out.stderr));
    let privileges = stdout
        .lines()
        .find(|l| l.contains("privileges:"))
        .with_context(|| format!("no privileges line:\n{stdout}"))?;
    assert!(privileges.starts_with("FAIL"), "{privileges}");
    assert!(privileges.contains("uid 65534"), "{privileges}");
    assert!(privileges.contains("sudo"), "{privileges}");
    assert!(
        privileges.contains("setcap cap_bpf,cap_perfmon+ep"),
        "{privileges}"
    );
    assert!(stdout.contains("skip  ebpf: not tried"), "{stdout}");
    assert!(
        stdout.contains("tracing will NOT work on this host"),
        "{stdout}"
    );

    let out = check_unprivileged(&["--json"])?;
    assert_eq!(out.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&out.stdout).context("check --json")?;
    assert_eq!(report["ok"], false);
    assert_eq!(report["privileges"]["euid"], 65534);
    assert_eq!(report["privileges"]["sufficient"], false);
    let first = &report["checks"][0];
    assert_eq!(first["name"], "privileges");
    assert_eq!(first["status"], "fail");
    Ok(())
}
