//! Locating `libcudart` copies: mapped by running processes (`/proc/*/maps`) and in the usual
//! install places (system directories, CUDA toolkits, conda, Python `site-packages` from the
//! `nvidia-cuda-runtime` wheels, CUDA 12 and 13 layouts). Copies are deduplicated by device and inode, because uprobes
//! attach to an inode: a library reached through several paths is attached once.

use std::{
    collections::BTreeMap,
    fs,
    os::unix::fs::MetadataExt,
    path::{Path, PathBuf},
};

use anyhow::{Context, Result};

/// One distinct library file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LibraryFile {
    /// A path that reaches the file (the first one found).
    pub path: PathBuf,
    pub dev: u64,
    pub ino: u64,
    /// Processes seen mapping it.
    pub mapped_by: Vec<u32>,
    /// Runtime (`libcudart`) or driver (`libcuda`).
    pub kind: ingero_ebpf::CudaLibrary,
}

/// Where a library search looks.
#[derive(Clone, Debug, Default)]
pub struct Search {
    /// Only these processes' mappings (`--pid`); `None` scans every process.
    pub pids: Option<Vec<u32>>,
    /// Also look in the common install places.
    pub install_places: bool,
    /// Root of the proc filesystem (tests point it elsewhere).
    pub proc_root: PathBuf,
}

impl Search {
    pub fn new(pids: Option<Vec<u32>>) -> Self {
        Search {
            pids,
            install_places: true,
            proc_root: PathBuf::from("/proc"),
        }
    }
}

/// Whether a file name is a CUDA runtime shared library (`libcudart.so`, `libcudart.so.12`, ...).
pub fn is_cuda_runtime_name(name: &str) -> bool {
    name == "libcudart.so" || name.starts_with("libcudart.so.")
}

/// Glob patterns of the install places, relative to `/`.
const INSTALL_PATTERNS: &[&str] = &[
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

/// Python library roots whose `python3.*/{site,dist}-packages/nvidia/*/lib` may hold a PyPI
/// wheel's copy: `nvidia/cuda_runtime/lib` (nvidia-cuda-runtime-cu12, CUDA 12 builds of PyTorch)
/// or `nvidia/cu13/lib` (the CUDA 13 wheels).
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

fn install_place_candidates() -> Vec<PathBuf> {
    let mut patterns: Vec<String> = INSTALL_PATTERNS.iter().map(|s| s.to_string()).collect();
    let mut roots: Vec<String> = PYTHON_LIB_ROOTS.iter().map(|s| s.to_string()).collect();
    // Environments named by the (possibly sudo-preserved) environment, and the prefixes of
    // the Python interpreters on PATH.
    let mut prefixes: Vec<String> = ["VIRTUAL_ENV", "CONDA_PREFIX"]
        .iter()
        .filter_map(|var| std::env::var(var).ok())
        .collect();
    prefixes.extend(python_prefixes_on_path());
    for prefix in prefixes {
        roots.push(format!("{prefix}/lib"));
        patterns.push(format!("{prefix}/lib/libcudart.so*"));
    }
    for root in roots {
        for packages in ["site-packages", "dist-packages"] {
            patterns.push(format!(
                "{root}/python3*/{packages}/nvidia/*/lib/libcudart.so*"
            ));
        }
    }
    patterns
        .iter()
        .filter_map(|p| glob::glob(p).ok())
        .flatten()
        .filter_map(|entry| entry.ok())
        .collect()
}

/// `<prefix>` of every `python3` on PATH (`<prefix>/bin/python3`, symlinks resolved).
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
            let Some(prefix) = real.parent().and_then(Path::parent) else {
                continue;
            };
            let prefix = prefix.display().to_string();
            if !out.contains(&prefix) {
                out.push(prefix);
            }
        }
    }
    out
}

/// Paths of CUDA runtime libraries mapped by one process, from its maps file.
pub fn mapped_cuda_runtimes(maps: &str) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for line in maps.lines() {
        // address perms offset dev inode pathname (the pathname may contain spaces)
        let Some(path) = line
            .splitn(6, char::is_whitespace)
            .nth(5)
            .map(str::trim_start)
        else {
            continue;
        };
        let path = path.strip_suffix(" (deleted)").unwrap_or(path);
        let is_runtime = Path::new(path)
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(is_cuda_runtime_name);
        if is_runtime && !out.iter().any(|p| p == Path::new(path)) {
            out.push(PathBuf::from(path));
        }
    }
    out
}

fn pids_in(proc_root: &Path) -> Vec<u32> {
    let Ok(dir) = fs::read_dir(proc_root) else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse().ok()))
        .collect()
}

/// Finds the distinct CUDA runtime libraries to attach to.
pub fn find_cuda_runtimes(search: &Search) -> Result<Vec<LibraryFile>> {
    let mut by_inode: BTreeMap<(u64, u64), LibraryFile> = BTreeMap::new();
    let mut add = |path: PathBuf, pid: Option<u32>| {
        // Through /proc/<pid>/root the file is reachable even in another mount namespace.
        let Ok(meta) = fs::metadata(&path) else {
            return;
        };
        if !meta.is_file() {
            return;
        }
        let entry = by_inode
            .entry((meta.dev(), meta.ino()))
            .or_insert_with(|| LibraryFile {
                path: path.clone(),
                dev: meta.dev(),
                ino: meta.ino(),
                mapped_by: Vec::new(),
                kind: ingero_ebpf::CudaLibrary::Runtime,
            });
        if let Some(pid) = pid {
            if !entry.mapped_by.contains(&pid) {
                entry.mapped_by.push(pid);
            }
        }
    };
    let pids = search
        .pids
        .clone()
        .unwrap_or_else(|| pids_in(&search.proc_root));
    for pid in pids {
        let maps_path = search.proc_root.join(pid.to_string()).join("maps");
        let Ok(maps) = fs::read_to_string(&maps_path) else {
            continue;
        };
        for path in mapped_cuda_runtimes(&maps) {
            let rooted = search
                .proc_root
                .join(pid.to_string())
                .join("root")
                .join(path.strip_prefix("/").unwrap_or(&path));
            let reachable = if rooted.exists() { rooted } else { path };
            add(reachable, Some(pid));
        }
    }
    if search.install_places {
        for path in install_place_candidates() {
            add(path, None);
        }
    }
    Ok(by_inode.into_values().collect())
}

/// Resolves an explicit `--cuda-lib` path into a library file.
pub fn library_at(path: &Path) -> Result<LibraryFile> {
    let meta = fs::metadata(path)
        .with_context(|| format!("--cuda-lib {}: cannot read the file", path.display()))?;
    Ok(LibraryFile {
        path: path.to_path_buf(),
        dev: meta.dev(),
        ino: meta.ino(),
        mapped_by: Vec::new(),
        kind: if path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("libcuda.so"))
        {
            ingero_ebpf::CudaLibrary::Driver
        } else {
            ingero_ebpf::CudaLibrary::Runtime
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_runtime_names() {
        assert!(is_cuda_runtime_name("libcudart.so.12"));
        assert!(is_cuda_runtime_name("libcudart.so"));
        assert!(is_cuda_runtime_name("libcudart.so.12.9.79"));
        assert!(!is_cuda_runtime_name("libcudart_static.a"));
        assert!(!is_cuda_runtime_name("libcuda.so.1"));
    }

    #[test]
    fn parses_maps_lines_with_spaces_and_deleted_files() {
        let maps = "\
7f00-7f01 r-xp 00000000 08:01 123 /opt/my env/lib/libcudart.so.12
7f01-7f02 r--p 00001000 08:01 123 /opt/my env/lib/libcudart.so.12
7f03-7f04 r-xp 00000000 08:01 124 /usr/lib/libcudart.so.11.0 (deleted)
7f05-7f06 rw-p 00000000 00:00 0 
7f07-7f08 r-xp 00000000 08:01 125 /usr/lib/libc.so.6
";
        assert_eq!(
            mapped_cuda_runtimes(maps),
            vec![
                PathBuf::from("/opt/my env/lib/libcudart.so.12"),
                PathBuf::from("/usr/lib/libcudart.so.11.0"),
            ]
        );
    }

    #[test]
    fn dedupes_by_inode_across_symlinks() {
        let dir = std::env::temp_dir().join(format!("ingero-libs-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let proc_root = dir.join("proc");
        fs::create_dir_all(proc_root.join("42")).expect("mkdir");
        let lib = dir.join("libcudart.so.12.9.79");
        fs::write(&lib, b"\x7fELF").expect("write lib");
        let link = dir.join("libcudart.so.12");
        std::os::unix::fs::symlink(&lib, &link).expect("symlink");
        let maps = format!(
            "1-2 r-xp 0 08:01 1 {}\n3-4 r-xp 0 08:01 1 {}\n",
            lib.display(),
            link.display()
        );
        fs::write(proc_root.join("42/maps"), maps).expect("write maps");
        let search = Search {
            pids: None,
            install_places: false,
            proc_root,
        };
        let found = find_cuda_runtimes(&search).expect("search");
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].mapped_by, vec![42]);
        let _ = fs::remove_dir_all(&dir);
    }
}
