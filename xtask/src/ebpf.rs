//! Building the eBPF object reproducibly and checking that the committed copy is fresh.
//!
//! The object is built with Debian's `rustc-web` toolchain (it ships `rust-src` for
//! `-Z build-std=core`) and `bpf-linker`, with path prefixes remapped so the bytes do not
//! depend on where the repository or the cargo home lives. The toolchain versions are recorded
//! beside the object: when they match the current toolchain, a differing rebuild means the
//! committed object is stale (an error); when they differ (Debian's security archive replaced
//! rustc-web), the rebuild is reported and used for the tests instead of failing.

use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context, Result, bail};
use clap::Args;

use crate::util::{output, run, workspace_root};

/// Where the toolchain lives; overridable for other distributions.
const DEFAULT_RUSTC: &str = "/usr/bin/rustc";
const DEFAULT_CARGO: &str = "/usr/bin/cargo";

pub const OBJECT: &str = "ingero-ebpf/prebuilt/ingero-ebpf.o";
pub const TOOLCHAIN: &str = "ingero-ebpf/prebuilt/TOOLCHAIN";

#[derive(Args, Default)]
pub struct BuildArgs {
    /// Do not touch the committed object: rebuild, compare, and report.
    #[arg(long)]
    pub check: bool,
}

/// The outcome of a build: the freshly built object and whether it differs from the committed.
pub struct Built {
    pub object: PathBuf,
    pub matches_committed: bool,
    pub toolchain_matches: bool,
}

fn toolchain_description(rustc: &str) -> Result<String> {
    let rustc_v = output(Command::new(rustc).arg("-vV"))?;
    let pick = |key: &str| {
        rustc_v
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .map(str::trim)
            .unwrap_or("unknown")
            .to_string()
    };
    let linker = output(Command::new("bpf-linker").arg("--version"))
        .context("bpf-linker is not installed: see .ci/run for the install command")?;
    Ok(format!(
        "rustc {}\nllvm {}\n{}\n",
        pick("release:"),
        pick("LLVM version:"),
        linker.trim()
    ))
}

fn remap_flags(root: &Path) -> String {
    let cargo_home = std::env::var("CARGO_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|_| {
            PathBuf::from(std::env::var("HOME").unwrap_or_else(|_| "/root".into())).join(".cargo")
        });
    // \x1f separates CARGO_ENCODED_RUSTFLAGS entries, so paths with spaces survive.
    [
        format!("--remap-path-prefix={}=/ingero", root.display()),
        format!("--remap-path-prefix={}=/cargo", cargo_home.display()),
        "-Cdebuginfo=0".to_string(),
    ]
    .join("\x1f")
}

pub fn build(args: &BuildArgs) -> Result<Built> {
    let root = workspace_root();
    let rustc = std::env::var("INGERO_BPF_RUSTC").unwrap_or_else(|_| DEFAULT_RUSTC.into());
    let cargo = std::env::var("INGERO_BPF_CARGO").unwrap_or_else(|_| DEFAULT_CARGO.into());
    let toolchain = toolchain_description(&rustc)?;
    let target_dir = root.join("target/bpf");
    let mut cmd = Command::new(&cargo);
    cmd.current_dir(&root)
        .env_clear()
        .envs(std::env::vars().filter(|(k, _)| {
            // Drop what the outer (rustup) cargo exported so it cannot leak into this build.
            !(k.starts_with("CARGO")
                || k.starts_with("RUSTC")
                || k.starts_with("RUSTUP")
                || k == "RUSTFLAGS")
        }))
        .env("RUSTC_BOOTSTRAP", "1")
        .env("RUSTC", &rustc)
        .env("CARGO_TARGET_DIR", &target_dir)
        .env("CARGO_ENCODED_RUSTFLAGS", remap_flags(&root))
        .args([
            "build",
            "--release",
            "--locked",
            "-Z",
            "build-std=core",
            "--target",
            "bpfel-unknown-none",
            "-p",
            "ingero-ebpf",
            "--features",
            "programs",
            "--bin",
            "ingero-ebpf",
        ]);
    run(&mut cmd)?;
    let object = target_dir.join("bpfel-unknown-none/release/ingero-ebpf");
    let fresh = fs::read(&object).with_context(|| format!("reading {}", object.display()))?;
    let committed_path = root.join(OBJECT);
    let committed = fs::read(&committed_path).ok();
    let recorded = fs::read_to_string(root.join(TOOLCHAIN)).unwrap_or_default();
    let built = Built {
        matches_committed: committed.as_deref() == Some(fresh.as_slice()),
        toolchain_matches: recorded == toolchain,
        object,
    };
    if args.check {
        report_check(&built, &recorded, &toolchain)?;
    } else {
        fs::create_dir_all(committed_path.parent().unwrap_or(&root))?;
        fs::write(&committed_path, &fresh)?;
        fs::write(root.join(TOOLCHAIN), &toolchain)?;
        eprintln!(
            "xtask: wrote {OBJECT} ({} bytes) and {TOOLCHAIN}",
            fresh.len()
        );
    }
    Ok(built)
}

fn report_check(built: &Built, recorded: &str, current: &str) -> Result<()> {
    match (built.matches_committed, built.toolchain_matches) {
        (true, _) => eprintln!("xtask: {OBJECT} is fresh"),
        (false, true) => bail!(
            "{OBJECT} does not match its source although the toolchain is the recorded one: \
             run `cargo xtask build-ebpf` and commit the result"
        ),
        (false, false) => eprintln!(
            "xtask: the toolchain changed since {OBJECT} was built, so it needs a rebuild \
             (`cargo xtask build-ebpf`); testing the rebuilt object {}.\n  recorded: {}\n  current:  {}",
            built.object.display(),
            recorded.replace('\n', "; "),
            current.replace('\n', "; ")
        ),
    }
    Ok(())
}
