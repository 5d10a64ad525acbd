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

/// The files a maps file maps executable (`r-xp`: a program's or library's code), each with
/// the inode its line gives, in order (repeated as the lines repeat them); pseudo-files
/// (`[vdso]`) and anonymous mappings are left out.
pub fn executable_mappings(maps: &str) -> impl Iterator<Item = (u64, &Path)> {
    maps.lines().filter_map(|line| {
        let mut fields = line.splitn(6, char::is_whitespace);
        let perms = fields.nth(1)?;
        let inode: u64 = fields.nth(2)?.parse().ok()?;
        let path = fields.next().map(str::trim_start)?;
        let path = path.strip_suffix(" (deleted)").unwrap_or(path);
        (perms.as_bytes().get(2) == Some(&b'x') && inode != 0 && path.starts_with('/'))
            .then(|| (inode, Path::new(path)))
    })
}

/// `path` as the process at `proc_dir` (`/proc/<pid>`) sees it, through its root: reachable
/// even in another mount namespace (a container); the path itself when the process is in this
/// one's mount namespace (the path the user knows), or when the rooted path does not exist.
pub fn reachable(proc_dir: &Path, path: &Path) -> PathBuf {
    if same_mount_namespace(proc_dir) {
        return path.to_path_buf();
    }
    let rooted = proc_dir
        .join("root")
        .join(path.strip_prefix("/").unwrap_or(path));
    if rooted.exists() {
        rooted
    } else {
        path.to_path_buf()
    }
}

/// Whether the process at `proc_dir` shares this process's mount namespace (the links name
/// the namespace's inode); false when either cannot be read.
fn same_mount_namespace(proc_dir: &Path) -> bool {
    match (
        fs::read_link(proc_dir.join("ns/mnt")),
        fs::read_link("/proc/self/ns/mnt"),
    ) {
        (Ok(theirs), Ok(ours)) => theirs == ours,
        _ => false,
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
    fn executable_mappings_give_code_files_with_their_inodes() {
        let maps = "\
5600-5601 r--p 00000000 08:01 77   /opt/app/train
5601-5602 r-xp 00001000 08:01 77   /opt/app/train
7f00-7f01 r-xp 00000000 08:01 42   /usr/lib/a b/libcuda.so.1
7f02-7f03 rw-p 00000000 00:00 0 
7f03-7f04 r-xp 00000000 08:01 43   /tmp/prog (deleted)
7ffd-7ffe r-xp 00000000 00:00 0    [vdso]
";
        let files: Vec<(u64, &Path)> = executable_mappings(maps).collect();
        assert_eq!(
            files,
            [
                (77, Path::new("/opt/app/train")),
                (42, Path::new("/usr/lib/a b/libcuda.so.1")),
                (43, Path::new("/tmp/prog")),
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
        // A process in this one's mount namespace: the path as the user knows it.
        let this = Path::new("/proc/self");
        assert_eq!(
            reachable(this, Path::new("/usr/lib/libc.so.6")),
            Path::new("/usr/lib/libc.so.6")
        );
        let _ = fs::remove_dir_all(&dir);
    }
}
