//! `cargo xtask test`: everything CI checks, in the order that fails fastest.
//!
//! 1. prerequisites (scripts/install-prerequisites.sh installs what is missing),
//! 2. `cargo fmt --check`, `cargo clippy -D warnings`, no import cycles between source files
//!    (`cargo xtask cycles`) and no source file over 800 lines,
//! 3. the eBPF freshness check (rebuild from source, compare with the committed object),
//! 4. unit tests (with the NVTX producers fetched by [`crate::test_deps`]),
//! 5. kernel tests as root against the real libcudart 12 and 13 and the real libnccl 2.27 and
//!    2.30 from the PyPI wheels and the real libcuda of Debian's `libcuda1` package (fetched by
//!    [`crate::test_deps`]),
//! 6. Python tests against the real agent binary.

use std::{path::PathBuf, process::Command};

use anyhow::{Context, Result, bail};
use clap::Args;

use crate::{
    cycles, ebpf, file_size,
    test_deps::{
        fetch_cudart, fetch_cudart13, fetch_libcuda, fetch_nccl, fetch_nccl13, fetch_nvtoolsext,
        fetch_nvtx_include, fetch_nvtx3interop,
    },
    util::{is_root, run as run_cmd, workspace_root},
};

#[derive(Args)]
pub struct TestArgs {
    /// Skip installing missing prerequisites (fail instead).
    #[arg(long)]
    pub no_install: bool,
    /// Skip the kernel tests (they need root); only for machines that cannot run them.
    #[arg(long)]
    pub skip_kernel: bool,
}

fn cargo() -> Command {
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.current_dir(workspace_root());
    cmd
}

pub fn run(args: &TestArgs) -> Result<()> {
    let root = workspace_root();
    if !args.no_install {
        run_cmd(Command::new("bash").arg(root.join("scripts/install-prerequisites.sh")))?;
    }
    run_cmd(cargo().args(["fmt", "--all", "--check"]))
        .context("formatting differs: run `cargo fmt --all`")?;
    run_cmd(cargo().args([
        "clippy",
        "--workspace",
        "--all-targets",
        "--release",
        "--",
        "-D",
        "warnings",
    ]))?;
    cycles::run(&cycles::CyclesArgs {
        krate: None,
        edges: false,
    })
    .context("import cycles between source files: see `cargo xtask cycles`")?;
    file_size::check()?;

    let built = ebpf::build(&ebpf::BuildArgs { check: true })?;
    let object_override = (!built.matches_committed).then(|| built.object.clone());
    let with_object = |mut cmd: Command| {
        if let Some(obj) = &object_override {
            cmd.env("INGERO_EBPF_OBJECT", obj);
        }
        cmd
    };

    run_cmd(with_object(cargo()).args(["build", "--release", "--workspace"]))?;
    // The NVTX producers the injection library's tests and the fallback's kernel tests drive
    // (headers, libnvToolsExt, libnvtx3interop from their PyPI wheels): fetched before the
    // tests, so a missing one fails here rather than being skipped.
    let nvtx = [
        ("INGERO_NVTX_INCLUDE", fetch_nvtx_include()?),
        ("INGERO_NVTOOLSEXT", fetch_nvtoolsext()?),
        ("INGERO_NVTX3INTEROP", fetch_nvtx3interop()?),
    ];
    run_cmd(
        with_object(cargo())
            .args([
                "test",
                "--release",
                "--workspace",
                "--exclude",
                "ingero-e2e",
            ])
            .envs(nvtx.iter().map(|(k, v)| (*k, v))),
    )?;

    let bin = root.join("target/release/ingero");
    let cudart = fetch_cudart()?;
    if args.skip_kernel {
        eprintln!("xtask: kernel tests SKIPPED (--skip-kernel)");
    } else {
        if !is_root() {
            bail!(
                "the kernel tests load eBPF programs and need root: run `sudo cargo xtask test`, or pass --skip-kernel"
            );
        }
        let libcuda = fetch_libcuda()?;
        let cudart13 = fetch_cudart13()?;
        let nccl = fetch_nccl()?;
        let nccl13 = fetch_nccl13()?;
        run_cmd(
            with_object(cargo())
                .args([
                    "test",
                    "--release",
                    "-p",
                    "ingero-e2e",
                    "--",
                    "--test-threads=1",
                ])
                .env("INGERO_BIN", &bin)
                .env("INGERO_CUDART", &cudart)
                .env("INGERO_CUDART13", &cudart13)
                .env("INGERO_LIBCUDA", &libcuda)
                .env("INGERO_NCCL", &nccl)
                .env("INGERO_NCCL13", &nccl13)
                .envs(nvtx.iter().map(|(k, v)| (*k, v))),
        )?;
    }
    python_tests(&bin, &cudart)
}

fn python_tests(bin: &std::path::Path, cudart: &std::path::Path) -> Result<()> {
    let root = workspace_root();
    let suites: Vec<PathBuf> = [
        "ingero-annotate/python/tests",
        "tests/perfetto",
        "tests/explain",
        "tests/otlp",
    ]
    .iter()
    .map(|p| root.join(p))
    .filter(|p| p.exists())
    .collect();
    if suites.is_empty() {
        return Ok(());
    }
    run_cmd(
        Command::new("python3")
            .args(["-m", "pytest", "-q"])
            .args(&suites)
            .current_dir(&root)
            .env("INGERO_BIN", bin)
            .env("INGERO_CUDART", cudart),
    )
}
