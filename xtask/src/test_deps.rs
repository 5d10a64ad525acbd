//! The real NVIDIA libraries the kernel tests trace, fetched once under `target/test-deps/`:
//!
//! - libcuda (the driver) of Debian 12's non-free `libcuda1` package, driver 535.261.03:
//!   downloaded with `apt-get download` and unpacked with `dpkg -x`, never installed (its
//!   dependencies would pull in the whole driver stack). bookworm's `contrib non-free
//!   non-free-firmware` components are added to apt's sources when they are missing, with the
//!   URIs, suites and key of the existing `main` entry.
//! - libcudart 12 and 13 from the PyPI wheels `nvidia-cuda-runtime-cu12`
//!   (`nvidia/cuda_runtime/lib/libcudart.so.12`) and `nvidia-cuda-runtime`
//!   (`nvidia/cu13/lib/libcudart.so.13`).
//! - NCCL from the PyPI wheels `nvidia-nccl-cu12` 2.27.5 (older: no `ncclAlltoAll`,
//!   `ncclGather`, `ncclScatter` nor `*Config` collectives), under `target/test-deps/nccl/`, and
//!   `nvidia-nccl-cu13` 2.30.7 (the NCCL torch 2.15 pulls: with AlltoAll, Gather and Scatter,
//!   still no `*Config` forms), under `target/test-deps/nccl13/`; both ship
//!   `nvidia/nccl/lib/libnccl.so.2`.
//!
//! - NVTX for the `ingero-nvtx` tests, under `target/test-deps/nvtx/`: the NVTX3 headers of
//!   `nvidia-nvtx` 13.5.25 (`nvidia/cu13/include/nvtx3/`), the v2 `libnvToolsExt.so.1` of
//!   `nvidia-nvtx-cu12` 12.8.90 and the v3 `libnvtx3interop.so.1` of `nvidia-nvtx-cu12` 12.9.79.
//!
//! `INGERO_LIBCUDA`, `INGERO_CUDART13`, `INGERO_NCCL` or `INGERO_NCCL13`, when set to an existing
//! file, is used as is.

use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context, Result, bail};

use crate::util::{output, run, workspace_root};

/// The driver package the kernel tests pin (`apt-get download libcuda1=<this>`).
const LIBCUDA_VERSION: &str = "535.261.03-1";
/// Where `dpkg -x` puts the library below the unpack directory.
const LIBCUDA_DIR: &str = "usr/lib/x86_64-linux-gnu/nvidia/current";
/// The apt sources file this module writes.
const NONFREE_SOURCES: &str = "/etc/apt/sources.list.d/ingero-nonfree.sources";
const NONFREE_COMPONENTS: &str = "contrib non-free non-free-firmware";

/// Runs a fetching command with its standard output on stderr: `cargo xtask test-deps` prints
/// nothing but the environment on stdout (`export $(cargo xtask test-deps)`), and apt-get
/// prints its progress there.
fn run_cmd(cmd: &mut Command) -> Result<()> {
    run(cmd.stdout(std::io::stderr()))
}

fn preset(var: &str) -> Option<PathBuf> {
    std::env::var_os(var)
        .map(PathBuf::from)
        .filter(|p| p.exists())
}

/// libcuda.so.1 of driver 535.261.03 (or whatever bookworm has, said so), unpacked under
/// `target/test-deps/libcuda/`.
pub fn fetch_libcuda() -> Result<PathBuf> {
    if let Some(path) = preset("INGERO_LIBCUDA") {
        return Ok(path);
    }
    let unpacked = workspace_root().join("target/test-deps/libcuda");
    let lib_dir = unpacked.join(LIBCUDA_DIR);
    let link = lib_dir.join("libcuda.so.1");
    if link.exists() {
        return Ok(link);
    }
    enable_nonfree()?;
    let madison = output(Command::new("apt-cache").args(["madison", "libcuda1"]))?;
    let available = madison_versions(&madison);
    let spec = if available.iter().any(|v| v == LIBCUDA_VERSION) {
        format!("libcuda1={LIBCUDA_VERSION}")
    } else if let Some(v) = available.first() {
        eprintln!("xtask: libcuda1 {LIBCUDA_VERSION} is not in apt's sources; using {v} instead");
        format!("libcuda1={v}")
    } else {
        bail!("apt knows no libcuda1 package even with the non-free components enabled");
    };
    eprintln!("xtask: fetching {spec} (downloaded and unpacked, not installed)");
    let download = workspace_root().join("target/test-deps/libcuda-download");
    let _ = fs::remove_dir_all(&download);
    fs::create_dir_all(&download)?;
    run_cmd(
        Command::new("apt-get")
            .args(["download", "-q", &spec])
            .current_dir(&download),
    )?;
    let deb = fs::read_dir(&download)?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "deb"))
        .context("apt-get download left no .deb")?;
    run_cmd(Command::new("dpkg").arg("-x").arg(&deb).arg(&unpacked))?;
    if !link.exists() {
        let real = real_libcuda(&lib_dir)?;
        let _ = fs::remove_file(&link);
        std::os::unix::fs::symlink(&real, &link)
            .with_context(|| format!("linking {}", link.display()))?;
    }
    let _ = fs::remove_dir_all(&download);
    Ok(link)
}

/// `libcuda.so.<driver version>` in the unpacked directory.
fn real_libcuda(dir: &Path) -> Result<PathBuf> {
    fs::read_dir(dir)
        .with_context(|| format!("{} after dpkg -x", dir.display()))?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name())
        .find(|n| {
            n.to_str()
                .and_then(|n| n.strip_prefix("libcuda.so."))
                .is_some_and(|v| v.contains('.'))
        })
        .map(PathBuf::from)
        .with_context(|| format!("no libcuda.so.<version> in {}", dir.display()))
}

/// Versions listed by `apt-cache madison` (`libcuda1 | 535.261.03-1 | http://... Packages`).
pub fn madison_versions(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in text.lines() {
        if let Some(v) = line.split('|').nth(1).map(str::trim) {
            if !v.is_empty() && !out.iter().any(|o| o == v) {
                out.push(v.to_string());
            }
        }
    }
    out
}

/// Adds bookworm's non-free components to apt's sources (when no source has them yet) and
/// updates the package lists.
fn enable_nonfree() -> Result<()> {
    let codename = fs::read_to_string("/etc/os-release")
        .ok()
        .and_then(|t| os_codename(&t))
        .context("cannot tell the Debian release from /etc/os-release")?;
    let mut texts: Vec<(PathBuf, String)> = Vec::new();
    for path in apt_source_files() {
        if let Ok(text) = fs::read_to_string(&path) {
            texts.push((path, text));
        }
    }
    let has_nonfree = texts.iter().any(|(path, text)| {
        if path.extension().is_some_and(|e| e == "sources") {
            deb822_stanzas(text)
                .iter()
                .any(|s| s.suites.contains(&codename) && s.has("non-free"))
        } else {
            one_line_entries(text)
                .iter()
                .any(|e| e.suite == codename && e.components.iter().any(|c| c == "non-free"))
        }
    });
    if !has_nonfree {
        let mut entries = Vec::new();
        for (path, text) in &texts {
            if path.extension().is_some_and(|e| e == "sources") {
                entries.extend(
                    deb822_stanzas(text)
                        .iter()
                        .filter(|s| s.suites.contains(&codename) && s.has("main"))
                        .map(|s| s.nonfree_stanza()),
                );
            } else {
                entries.extend(
                    one_line_entries(text)
                        .iter()
                        .filter(|e| e.suite == codename && e.components.iter().any(|c| c == "main"))
                        .map(|e| e.nonfree_stanza()),
                );
            }
        }
        if entries.is_empty() {
            bail!(
                "no apt source for Debian {codename} `main` to copy for the non-free components; \
                 set INGERO_LIBCUDA to a libcuda.so.1 instead"
            );
        }
        eprintln!("xtask: adding {NONFREE_COMPONENTS} to apt's sources ({NONFREE_SOURCES})");
        fs::write(NONFREE_SOURCES, entries.join("\n"))
            .with_context(|| format!("writing {NONFREE_SOURCES} (this needs root)"))?;
    }
    let known = output(Command::new("apt-cache").args(["madison", "libcuda1"]))?;
    if !has_nonfree || known.is_empty() {
        run_cmd(Command::new("apt-get").args(["update", "-q"]))?;
    }
    Ok(())
}

fn apt_source_files() -> Vec<PathBuf> {
    let mut files = vec![PathBuf::from("/etc/apt/sources.list")];
    if let Ok(dir) = fs::read_dir("/etc/apt/sources.list.d") {
        let mut listed: Vec<PathBuf> = dir
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "list" || e == "sources"))
            .collect();
        listed.sort();
        files.extend(listed);
    }
    files
}

/// `VERSION_CODENAME` of /etc/os-release.
pub fn os_codename(text: &str) -> Option<String> {
    text.lines()
        .find_map(|l| l.strip_prefix("VERSION_CODENAME="))
        .map(|v| v.trim().trim_matches('"').to_string())
        .filter(|v| !v.is_empty())
}

/// One deb822 stanza of a `.sources` file, the fields this module copies.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Stanza {
    pub uris: String,
    pub suites: Vec<String>,
    pub components: Vec<String>,
    pub signed_by: Option<String>,
}

impl Stanza {
    fn has(&self, component: &str) -> bool {
        self.components.iter().any(|c| c == component)
    }

    /// The same source with the non-free components.
    pub fn nonfree_stanza(&self) -> String {
        let mut out = format!(
            "Types: deb\nURIs: {}\nSuites: {}\nComponents: {NONFREE_COMPONENTS}\n",
            self.uris,
            self.suites.join(" ")
        );
        if let Some(key) = &self.signed_by {
            out.push_str(&format!("Signed-By: {key}\n"));
        }
        out
    }
}

/// The `deb` stanzas of a deb822 file (comments skipped; disabled stanzas left out).
pub fn deb822_stanzas(text: &str) -> Vec<Stanza> {
    let mut out = Vec::new();
    for block in text.split("\n\n") {
        let mut stanza = Stanza::default();
        let (mut is_deb, mut enabled) = (false, true);
        for line in block.lines().filter(|l| !l.trim_start().starts_with('#')) {
            let Some((key, value)) = line.split_once(':') else {
                continue;
            };
            let value = value.trim();
            let words = || value.split_whitespace().map(String::from).collect();
            match key.trim() {
                "Types" => is_deb = value.split_whitespace().any(|t| t == "deb"),
                "URIs" => stanza.uris = value.to_string(),
                "Suites" => stanza.suites = words(),
                "Components" => stanza.components = words(),
                "Signed-By" => stanza.signed_by = Some(value.to_string()),
                "Enabled" => enabled = value != "no",
                _ => {}
            }
        }
        if is_deb && enabled && !stanza.uris.is_empty() {
            out.push(stanza);
        }
    }
    out
}

/// One `deb [options] URI suite components...` line.
#[derive(Debug, PartialEq, Eq)]
pub struct OneLine {
    pub options: Option<String>,
    pub uri: String,
    pub suite: String,
    pub components: Vec<String>,
}

impl OneLine {
    /// The same source with the non-free components, as a deb822 stanza.
    pub fn nonfree_stanza(&self) -> String {
        let signed_by = self.options.as_deref().and_then(|o| {
            o.split_whitespace()
                .find_map(|kv| kv.strip_prefix("signed-by="))
                .map(String::from)
        });
        Stanza {
            uris: self.uri.clone(),
            suites: vec![self.suite.clone()],
            components: Vec::new(),
            signed_by,
        }
        .nonfree_stanza()
    }
}

/// The `deb` lines of a one-line-style sources file.
pub fn one_line_entries(text: &str) -> Vec<OneLine> {
    let mut out = Vec::new();
    for line in text.lines().map(str::trim) {
        let Some(rest) = line.strip_prefix("deb ") else {
            continue;
        };
        let rest = rest.trim_start();
        let (options, rest) = match rest.strip_prefix('[') {
            Some(r) => match r.split_once(']') {
                Some((opts, after)) => (Some(opts.trim().to_string()), after),
                None => continue,
            },
            None => (None, rest),
        };
        let mut words = rest.split_whitespace();
        let (Some(uri), Some(suite)) = (words.next(), words.next()) else {
            continue;
        };
        out.push(OneLine {
            options,
            uri: uri.to_string(),
            suite: suite.to_string(),
            components: words.map(String::from).collect(),
        });
    }
    out
}

/// A PyPI wheel that holds a library (libcudart, libnccl, NVTX), and where the library lands once unpacked.
struct RuntimeWheel {
    /// `pip download` spec, `name==version`.
    spec: &'static str,
    /// The unpack directory, under `target/test-deps/`.
    dir: &'static str,
    /// The library, below `dir`.
    lib: &'static str,
}

/// The wheel whose libcudart.so.12 the kernel tests trace.
const CUDART12: RuntimeWheel = RuntimeWheel {
    spec: "nvidia-cuda-runtime-cu12==12.9.79",
    dir: "cudart",
    lib: "nvidia/cuda_runtime/lib/libcudart.so.12",
};

/// The wheel whose libcudart.so.13 the kernel tests trace.
const CUDART13: RuntimeWheel = RuntimeWheel {
    spec: "nvidia-cuda-runtime==13.0.96",
    dir: "cudart13",
    lib: "nvidia/cu13/lib/libcudart.so.13",
};

/// The wheel whose libnccl.so.2 (2.27) the kernel tests trace.
const NCCL: RuntimeWheel = RuntimeWheel {
    spec: "nvidia-nccl-cu12==2.27.5",
    dir: "nccl",
    lib: "nvidia/nccl/lib/libnccl.so.2",
};

/// The wheel whose libnccl.so.2 (2.30, built for CUDA 13) the kernel tests trace.
const NCCL13: RuntimeWheel = RuntimeWheel {
    spec: "nvidia-nccl-cu13==2.30.7",
    dir: "nccl13",
    lib: "nvidia/nccl/lib/libnccl.so.2",
};

/// Downloads `w` once and unpacks it under `target/test-deps/`; the library's path.
fn fetch_wheel(w: &RuntimeWheel) -> Result<PathBuf> {
    let deps = workspace_root().join("target/test-deps");
    let lib = deps.join(w.dir).join(w.lib);
    if lib.exists() {
        return Ok(lib);
    }
    let wheels = deps.join("wheels");
    run_cmd(
        Command::new("python3")
            .args(["-m", "pip", "download", "-q", "--no-deps"])
            .args(["--disable-pip-version-check", "-d"])
            .arg(&wheels)
            .arg(w.spec),
    )?;
    // pip names the file after the project with `_` for `-`, then the version.
    let (name, version) = w.spec.split_once("==").unwrap_or((w.spec, "*"));
    let file = format!("{}-{version}-*.whl", name.replace('-', "_"));
    let unpack = "import sys, glob, zipfile\n\
                  zipfile.ZipFile(glob.glob(sys.argv[1] + '/' + sys.argv[2])[0]).extractall(sys.argv[3])";
    run_cmd(
        Command::new("python3")
            .args(["-c", unpack])
            .arg(&wheels)
            .arg(&file)
            .arg(deps.join(w.dir)),
    )?;
    if !lib.exists() {
        bail!("the wheel {} did not contain {}", w.spec, lib.display());
    }
    Ok(lib)
}

/// The NVTX3 headers (`<include>/nvtx3/nvToolsExt.h`) the C producers of the ingero-nvtx tests
/// and benchmark compile against.
const NVTX_HEADERS: RuntimeWheel = RuntimeWheel {
    spec: "nvidia-nvtx==13.5.25",
    dir: "nvtx/headers",
    lib: "nvidia/cu13/include/nvtx3/nvToolsExt.h",
};

/// The NVTX v2 library (one table for the process).
const NVTOOLSEXT: RuntimeWheel = RuntimeWheel {
    spec: "nvidia-nvtx-cu12==12.8.90",
    dir: "nvtx/nvtoolsext",
    lib: "nvidia/nvtx/lib/libnvToolsExt.so.1",
};

/// The NVTX v3 interop library (NVTX3 compiled with exported symbols).
const NVTX3INTEROP: RuntimeWheel = RuntimeWheel {
    spec: "nvidia-nvtx-cu12==12.9.79",
    dir: "nvtx/interop",
    lib: "nvidia/nvtx/lib/libnvtx3interop.so.1",
};

/// The include directory holding `nvtx3/` (`INGERO_NVTX_INCLUDE`).
pub fn fetch_nvtx_include() -> Result<PathBuf> {
    let header = fetch_wheel(&NVTX_HEADERS)?;
    // <include>/nvtx3/nvToolsExt.h
    header
        .parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .context("the NVTX header has no include directory")
}

/// `libnvToolsExt.so.1` (`INGERO_NVTOOLSEXT`).
pub fn fetch_nvtoolsext() -> Result<PathBuf> {
    fetch_wheel(&NVTOOLSEXT)
}

/// `libnvtx3interop.so.1` (`INGERO_NVTX3INTEROP`).
pub fn fetch_nvtx3interop() -> Result<PathBuf> {
    fetch_wheel(&NVTX3INTEROP)
}

/// libcudart.so.12 from the `nvidia-cuda-runtime-cu12` wheel.
pub fn fetch_cudart() -> Result<PathBuf> {
    fetch_wheel(&CUDART12)
}

/// libcudart.so.13 from the `nvidia-cuda-runtime` wheel, unless `INGERO_CUDART13` names one.
pub fn fetch_cudart13() -> Result<PathBuf> {
    match preset("INGERO_CUDART13") {
        Some(path) => Ok(path),
        None => fetch_wheel(&CUDART13),
    }
}

/// libnccl.so.2 2.27.5 from the `nvidia-nccl-cu12` wheel, unless `INGERO_NCCL` names one.
pub fn fetch_nccl() -> Result<PathBuf> {
    match preset("INGERO_NCCL") {
        Some(path) => Ok(path),
        None => fetch_wheel(&NCCL),
    }
}

/// libnccl.so.2 2.30.7 from the `nvidia-nccl-cu13` wheel, unless `INGERO_NCCL13` names one.
pub fn fetch_nccl13() -> Result<PathBuf> {
    match preset("INGERO_NCCL13") {
        Some(path) => Ok(path),
        None => fetch_wheel(&NCCL13),
    }
}

/// `cargo xtask test-deps`: fetches every library and prints `VAR=path` lines for the shell
/// (`export $(cargo xtask test-deps)`), to run single kernel tests by hand.
pub fn print_env() -> Result<()> {
    let cudart = fetch_cudart()?;
    let cudart13 = fetch_cudart13()?;
    let nvtx_include = fetch_nvtx_include()?;
    let nvtoolsext = fetch_nvtoolsext()?;
    let nvtx3interop = fetch_nvtx3interop()?;
    let nccl = fetch_nccl()?;
    let nccl13 = fetch_nccl13()?;
    let libcuda = fetch_libcuda()?;
    println!("INGERO_CUDART={}", cudart.display());
    println!("INGERO_CUDART13={}", cudart13.display());
    println!("INGERO_NVTX_INCLUDE={}", nvtx_include.display());
    println!("INGERO_NVTOOLSEXT={}", nvtoolsext.display());
    println!("INGERO_NVTX3INTEROP={}", nvtx3interop.display());
    println!("INGERO_NCCL={}", nccl.display());
    println!("INGERO_NCCL13={}", nccl13.display());
    println!("INGERO_LIBCUDA={}", libcuda.display());
    Ok(())
}

#[cfg(test)]
#[path = "test_deps_tests.rs"]
mod tests;
