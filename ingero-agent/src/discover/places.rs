//! The install places where CUDA libraries live when no running process maps them yet: system
//! directories, CUDA toolkits, conda, Python `site-packages` from the `nvidia-cuda-runtime`
//! and `nvidia-nccl` wheels (libcudart, libnccl), and the driver's directories of each
//! distribution, WSL and the CUDA forward-compatibility package (libcuda).
//!
//! Every pattern is absolute and is searched below a root: `/` for the host, `/proc/<pid>/root`
//! for a container, where the NVIDIA container toolkit bind-mounts the host's driver at the
//! same standard paths.

use std::{
    fs,
    path::{Path, PathBuf},
};

/// Glob patterns of the runtime's install places.
const RUNTIME_PATTERNS: &[&str] = &[
    "/usr/lib/libcudart.so*",
    "/usr/lib64/libcudart.so*",
    "/usr/lib/x86_64-linux-gnu/libcudart.so*",
    "/usr/local/lib/libcudart.so*",
    "/usr/local/cuda*/lib64/libcudart.so*",
    "/usr/local/cuda*/targets/x86_64-linux/lib/libcudart.so*",
    "/opt/cuda*/lib64/libcudart.so*",
    "/opt/conda/lib/libcudart.so*",
    "/opt/conda/envs/*/lib/libcudart.so*",
    "/root/miniconda3/lib/libcudart.so*",
    "/root/miniconda3/envs/*/lib/libcudart.so*",
    "/home/*/miniconda3/lib/libcudart.so*",
    "/home/*/miniconda3/envs/*/lib/libcudart.so*",
    "/home/*/anaconda3/envs/*/lib/libcudart.so*",
];

/// Glob patterns of NCCL's install places beside the wheels: Debian's and Ubuntu's `libnccl2`,
/// RHEL's, NVIDIA's containers (`/usr/local/lib`), conda.
const NCCL_PATTERNS: &[&str] = &[
    "/usr/lib/x86_64-linux-gnu/libnccl.so*",
    "/usr/lib64/libnccl.so*",
    "/usr/local/lib/libnccl.so*",
    "/opt/conda/lib/libnccl.so*",
    "/opt/conda/envs/*/lib/libnccl.so*",
];

/// Glob patterns of the driver's install places. The toolkit's `lib64/stubs/libcuda.so` is
/// left out on purpose: it is a link-time stub that no process runs.
pub const DRIVER_PATTERNS: &[&str] = &[
    "/usr/lib/x86_64-linux-gnu/libcuda.so*",
    "/usr/lib64/libcuda.so*",
    "/usr/lib/libcuda.so*",
    // Debian and Ubuntu's nvidia-alternative layout.
    "/usr/lib/x86_64-linux-gnu/nvidia/current/libcuda.so*",
    // The cuda-compat package: a newer driver library for an older kernel module.
    "/usr/local/cuda*/compat/libcuda.so*",
    // WSL 2: the Windows driver's Linux side.
    "/usr/lib/wsl/lib/libcuda.so*",
];

/// Python library roots whose `python3.*/{site,dist}-packages/nvidia/*/lib` may hold a PyPI
/// wheel's copy: `nvidia/cuda_runtime/lib` (nvidia-cuda-runtime-cu12, CUDA 12 builds of PyTorch)
/// or `nvidia/cu13/lib` (the CUDA 13 wheels); `nvidia/nccl/lib` (nvidia-nccl-cu12 and -cu13,
/// which PyTorch's wheels load).
const PYTHON_LIB_ROOTS: &[&str] = &[
    "/usr/lib",
    "/usr/local/lib",
    "/usr/lib64",
    "/opt/conda/lib",
    "/opt/conda/envs/*/lib",
    "/root/.local/lib",
    "/home/*/.local/lib",
    "/root/.pyenv/versions/*/lib",
    "/home/*/.pyenv/versions/*/lib",
    "/root/.pyenv/versions/*/envs/*/lib",
    "/root/miniconda3/lib",
    "/root/miniconda3/envs/*/lib",
    "/home/*/miniconda3/lib",
    "/home/*/miniconda3/envs/*/lib",
    "/home/*/anaconda3/envs/*/lib",
    "/opt/*/lib",
    "/opt/venv*/lib",
    "/root/venv*/lib",
    "/root/.venv*/lib",
    "/home/*/venv*/lib",
    "/home/*/.venv*/lib",
    "/workspace/*/lib",
];

/// The fixed places of the libraries, Python environments in their usual places included.
pub fn fixed_patterns() -> Vec<String> {
    let mut patterns: Vec<String> = RUNTIME_PATTERNS
        .iter()
        .chain(DRIVER_PATTERNS)
        .chain(NCCL_PATTERNS)
        .map(|s| s.to_string())
        .collect();
    patterns.extend(wheel_patterns(PYTHON_LIB_ROOTS));
    patterns
}

/// Every pattern to search below the host's root: [`fixed_patterns`], plus the environments
/// the (possibly sudo-preserved) environment names and the prefixes of the Python interpreters
/// on PATH.
pub fn host_patterns() -> Vec<String> {
    let mut patterns = fixed_patterns();
    let mut prefixes: Vec<String> = ["VIRTUAL_ENV", "CONDA_PREFIX"]
        .iter()
        .filter_map(|var| std::env::var(var).ok())
        .map(|prefix| glob::Pattern::escape(&prefix))
        .collect();
    prefixes.extend(python_prefixes_on_path());
    for prefix in &prefixes {
        patterns.push(format!("{prefix}/lib/libcudart.so*"));
        patterns.push(format!("{prefix}/lib/libnccl.so*"));
    }
    patterns.extend(wheel_patterns(prefixes.iter().map(|p| format!("{p}/lib"))));
    patterns
}

/// The places a program's own installation holds the libraries: `<prefix>/lib` and its
/// Python's `site-packages` where the program is `<prefix>/bin/NAME` (a virtual environment's
/// `python` anywhere, a conda environment, a CUDA toolkit's sample).
pub fn program_patterns(program: &Path) -> Vec<String> {
    let Some(prefix) = program
        .parent()
        .filter(|bin| bin.file_name().is_some_and(|n| n == "bin"))
        .and_then(Path::parent)
    else {
        return Vec::new();
    };
    let prefix = glob::Pattern::escape(&prefix.to_string_lossy());
    let mut out = vec![
        format!("{prefix}/lib/libcudart.so*"),
        format!("{prefix}/lib64/libcudart.so*"),
        format!("{prefix}/lib/libnccl.so*"),
    ];
    out.extend(wheel_patterns([format!("{prefix}/lib")]));
    out
}

/// The libraries in a directory of `LD_LIBRARY_PATH`.
pub fn library_dir_patterns(dir: &Path) -> Vec<String> {
    let dir = glob::Pattern::escape(dir.to_string_lossy().trim_end_matches('/'));
    ["libcudart", "libcuda", "libnccl"]
        .iter()
        .map(|stem| format!("{dir}/{stem}.so*"))
        .collect()
}

/// Where the `nvidia-cuda-runtime` and `nvidia-nccl` wheels put libcudart and libnccl below
/// each Python library root.
fn wheel_patterns<S: AsRef<str>>(roots: impl IntoIterator<Item = S>) -> Vec<String> {
    let mut out = Vec::new();
    for root in roots {
        let root = root.as_ref();
        for packages in ["site-packages", "dist-packages"] {
            for stem in ["libcudart", "libnccl"] {
                out.push(format!(
                    "{root}/python3*/{packages}/nvidia/*/lib/{stem}.so*"
                ));
            }
        }
    }
    out
}

/// The files matching `patterns` below `root` (`/` searches the patterns as they are).
pub fn matching_below(root: &Path, patterns: &[impl AsRef<str>]) -> Vec<PathBuf> {
    let root = root.to_string_lossy();
    let prefix = glob::Pattern::escape(root.trim_end_matches('/'));
    patterns
        .iter()
        .filter_map(|p| glob::glob(&format!("{prefix}{}", p.as_ref())).ok())
        .flatten()
        .filter_map(|entry| entry.ok())
        .collect()
}

/// `<prefix>` of every `python3` on PATH (`<prefix>/bin/python3`), both as found and with
/// symlinks resolved: a virtual environment's `python3` is a link to the interpreter it was
/// made from, and its packages are below the link's prefix, not the interpreter's.
fn python_prefixes_on_path() -> Vec<String> {
    let Some(path) = std::env::var_os("PATH") else {
        return Vec::new();
    };
    let mut out: Vec<String> = Vec::new();
    for dir in std::env::split_paths(&path) {
        for candidate in [dir.join("python3"), dir.join("python")] {
            let Ok(real) = fs::canonicalize(&candidate) else {
                continue;
            };
            for found in [&candidate, &real] {
                let Some(prefix) = found.parent().and_then(Path::parent) else {
                    continue;
                };
                let prefix = glob::Pattern::escape(&prefix.display().to_string());
                if !out.contains(&prefix) {
                    out.push(prefix);
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn driver_patterns_find_every_standard_place_below_a_root() {
        let root = std::env::temp_dir().join(format!("ingero-places-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        let places = [
            "usr/lib/x86_64-linux-gnu/libcuda.so.1",
            "usr/lib64/libcuda.so.550.54.15",
            "usr/lib/x86_64-linux-gnu/nvidia/current/libcuda.so.535.261.03",
            "usr/local/cuda-12.4/compat/libcuda.so.550.54.15",
            "usr/lib/wsl/lib/libcuda.so",
        ];
        for place in places {
            let path = root.join(place);
            fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            fs::write(&path, b"\x7fELF").expect("write");
        }
        // Look-alikes the patterns must not pick up.
        fs::write(root.join("usr/lib/x86_64-linux-gnu/libcudart.so.12"), b"").expect("write");
        fs::write(
            root.join("usr/lib/x86_64-linux-gnu/libcudadebugger.so.1"),
            b"",
        )
        .expect("w");
        let mut found = matching_below(&root, DRIVER_PATTERNS);
        found.sort();
        let mut expected: Vec<PathBuf> = places.iter().map(|p| root.join(p)).collect();
        expected.sort();
        assert_eq!(found, expected);
        let _ = fs::remove_dir_all(&root);
    }

    #[test]
    fn a_programs_own_installation_and_library_dirs_are_searched() {
        let root = std::env::temp_dir().join(format!("ingero-places-prog-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        // A virtual environment in an odd place (with a glob character in its name), and a
        // directory of LD_LIBRARY_PATH.
        let venv = root.join("srv/app [1]/.venv");
        let places = [
            venv.join("lib/python3.12/site-packages/nvidia/cu13/lib/libcudart.so.13"),
            venv.join("lib/libcudart.so.12"),
            venv.join("lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2"),
            root.join("opt/drivers/libcuda.so.1"),
            root.join("opt/drivers/libnccl.so.2.27.5"),
            root.join("opt/drivers/libcudart.so.12.9.79"),
        ];
        for path in &places {
            fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            fs::write(path, b"\x7fELF").expect("write");
        }
        fs::write(root.join("opt/drivers/libcudnn.so.9"), b"").expect("write");
        let mut patterns = program_patterns(&venv.join("bin/python"));
        patterns.extend(library_dir_patterns(&root.join("opt/drivers/")));
        let mut found = matching_below(Path::new("/"), &patterns);
        found.sort();
        let mut expected = places.to_vec();
        expected.sort();
        assert_eq!(found, expected);
        // A program outside a `bin` directory has no installation to look in.
        assert!(program_patterns(&root.join("opt/drivers/app")).is_empty());
        let _ = fs::remove_dir_all(&root);
    }

    #[test]
    fn host_patterns_cover_every_library() {
        let patterns = host_patterns();
        for stem in ["libcudart", "libcuda", "libnccl"] {
            assert!(
                patterns
                    .iter()
                    .any(|p| p.ends_with(&format!("/{stem}.so*"))),
                "{stem}"
            );
        }
        for stem in ["libcudart", "libnccl"] {
            assert!(
                patterns
                    .iter()
                    .any(|p| p.contains(&format!("site-packages/nvidia/*/lib/{stem}.so*"))),
                "{stem}"
            );
        }
    }
}
