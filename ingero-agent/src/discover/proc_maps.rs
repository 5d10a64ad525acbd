//! What `/proc` says of running processes, for finding the libraries they map: their pids, the
//! file paths in a maps file, and where such a path is reachable from this mount namespace.
//! The CUDA libraries (`libraries.rs`) and the NVTX ones (`nvtx.rs`) are both found this way.

use std::fs;
use std::path::{Path, PathBuf};

/// Every process under `proc_root` (a `/proc`): the names of its numeric entries.
pub fn pids_in(proc_root: &Path) -> Vec<u32> {
    let Ok(dir) = fs::read_dir(proc_root) else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse().ok()))
        .collect()
}

/// The file paths of a maps file's lines, in order (repeated as the lines repeat them), each
/// without the ` (deleted)` the kernel adds to a replaced file's.
pub fn mapped_paths(maps: &str) -> impl Iterator<Item = &Path> {
    maps.lines().filter_map(|line| {
        // address perms offset dev inode pathname (the pathname may contain spaces)
        let path = line
            .splitn(6, char::is_whitespace)
            .nth(5)
            .map(str::trim_start)?;
        Some(Path::new(path.strip_suffix(" (deleted)").unwrap_or(path)))
    })
}

/// `path` as the process at `proc_dir` (`/proc/<pid>`) sees it, through its root: reachable
/// even in another mount namespace (a container); the path itself when that does not exist.
pub fn reachable(proc_dir: &Path, path: &Path) -> PathBuf {
    let rooted = proc_dir
        .join("root")
        .join(path.strip_prefix("/").unwrap_or(path));
    if rooted.exists() {
        rooted
    } else {
        path.to_path_buf()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_lines_give_their_paths_without_the_deleted_mark() {
        let maps = "\
7f00-7f01 r-xp 00000000 08:01 42   /usr/lib/a b/libcuda.so.1
7f01-7f02 r--p 00001000 08:01 42   /usr/lib/a b/libcuda.so.1
7f02-7f03 rw-p 00000000 00:00 0 
7f03-7f04 r-xp 00000000 08:01 43   /tmp/libcudart.so.12 (deleted)
";
        let paths: Vec<&Path> = mapped_paths(maps).collect();
        assert_eq!(
            paths,
            [
                Path::new("/usr/lib/a b/libcuda.so.1"),
                Path::new("/usr/lib/a b/libcuda.so.1"),
                Path::new(""),
                Path::new("/tmp/libcudart.so.12"),
            ]
        );
    }

    #[test]
    fn a_path_is_reached_through_the_process_root_when_it_is_there() {
        let dir = std::env::temp_dir().join(format!("ingero-proc-maps-{}", std::process::id()));
        let lib = dir.join("root/opt/lib.so");
        fs::create_dir_all(lib.parent().expect("parent")).expect("dirs");
        fs::write(&lib, b"").expect("file");
        assert_eq!(reachable(&dir, Path::new("/opt/lib.so")), lib);
        assert_eq!(
            reachable(&dir, Path::new("/opt/other.so")),
            Path::new("/opt/other.so")
        );
        let _ = fs::remove_dir_all(&dir);
    }
}
