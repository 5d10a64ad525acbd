//! Tests of library discovery against fake `/proc` trees and fake host roots in temp dirs.

use std::os::unix::fs::symlink;

use super::*;

/// A temp dir removed when the test ends.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("ingero-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("mkdir scratch");
        Scratch(dir)
    }

    /// Writes a file (parents created) and returns its path.
    fn file(&self, rel: &str, bytes: &[u8]) -> PathBuf {
        let path = self.0.join(rel);
        fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        fs::write(&path, bytes).expect("write");
        path
    }

    fn search(&self) -> Search {
        fs::create_dir_all(self.0.join("proc")).expect("mkdir proc");
        fs::create_dir_all(self.0.join("host")).expect("mkdir host");
        Search {
            pids: None,
            install_places: false,
            proc_root: self.0.join("proc"),
            fs_root: self.0.join("host"),
        }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

#[test]
fn maps_lines_give_both_libraries_with_spaces_and_deleted_files() {
    let maps = "\
7f00-7f01 r-xp 00000000 08:01 123 /opt/my env/lib/libcudart.so.12
7f01-7f02 r--p 00001000 08:01 123 /opt/my env/lib/libcudart.so.12
7f03-7f04 r-xp 00000000 08:01 124 /usr/lib/libcudart.so.11.0 (deleted)
7f05-7f06 rw-p 00000000 00:00 0 
7f07-7f08 r-xp 00000000 08:01 125 /usr/lib/libc.so.6
7f09-7f0a r-xp 00000000 08:01 126 /usr/lib/x86_64-linux-gnu/libcuda.so.535.261.03
7f0b-7f0c r--p 00002000 08:01 126 /usr/lib/x86_64-linux-gnu/libcuda.so.535.261.03
7f0d-7f0e r-xp 00000000 08:01 127 /usr/lib/x86_64-linux-gnu/libcudadebugger.so.1
";
    assert_eq!(
        mapped_cuda_libraries(maps),
        vec![
            (
                PathBuf::from("/opt/my env/lib/libcudart.so.12"),
                CudaLibrary::Runtime
            ),
            (
                PathBuf::from("/usr/lib/libcudart.so.11.0"),
                CudaLibrary::Runtime
            ),
            (
                PathBuf::from("/usr/lib/x86_64-linux-gnu/libcuda.so.535.261.03"),
                CudaLibrary::Driver
            ),
        ]
    );
}

#[test]
fn dedupes_by_inode_across_symlinks() {
    let s = Scratch::new("libs-dedup");
    let search = s.search();
    let lib = s.file("libcudart.so.12.9.79", b"\x7fELF");
    let link = s.0.join("libcudart.so.12");
    symlink(&lib, &link).expect("symlink");
    let maps = format!(
        "1-2 r-xp 0 08:01 1 {}\n3-4 r-xp 0 08:01 1 {}\n",
        lib.display(),
        link.display()
    );
    s.file("proc/42/maps", maps.as_bytes());
    let found = find_cuda_libraries(&search).expect("search");
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].mapped_by, vec![42]);
    assert_eq!(found[0].kind, CudaLibrary::Runtime);
}

#[test]
fn a_process_mapping_both_libraries_yields_both_through_its_root() {
    let s = Scratch::new("libs-both");
    let search = s.search();
    // The process sees /usr/lib/...; the agent reaches the files through /proc/7/root.
    let driver = s.file(
        "proc/7/root/usr/lib/x86_64-linux-gnu/libcuda.so.535.261.03",
        b"\x7fELF",
    );
    symlink(
        &driver,
        s.0.join("proc/7/root/usr/lib/x86_64-linux-gnu/libcuda.so.1"),
    )
    .expect("symlink");
    s.file("proc/7/root/opt/env/lib/libcudart.so.12", b"\x7fELF");
    s.file(
        "proc/7/maps",
        b"1-2 r-xp 0 08:01 1 /opt/env/lib/libcudart.so.12\n\
          3-4 r-xp 0 08:01 2 /usr/lib/x86_64-linux-gnu/libcuda.so.1\n",
    );
    let found = find_cuda_libraries(&search).expect("search");
    let kinds: Vec<CudaLibrary> = found.iter().map(|l| l.kind).collect();
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(kinds.contains(&CudaLibrary::Runtime) && kinds.contains(&CudaLibrary::Driver));
    for library in &found {
        assert_eq!(library.mapped_by, vec![7]);
        assert!(
            library.path.starts_with(s.0.join("proc/7/root")),
            "{library:?}"
        );
    }
}

#[test]
fn install_places_of_the_host_and_of_containers_hold_the_driver() {
    let s = Scratch::new("libs-places");
    let search = Search {
        install_places: true,
        ..s.search()
    };
    // The host: Debian's layout with its symlink, and a libcudart in a toolkit.
    let host_driver = s.file(
        "host/usr/lib/x86_64-linux-gnu/nvidia/current/libcuda.so.535.261.03",
        b"\x7fELF",
    );
    symlink(
        &host_driver,
        s.0.join("host/usr/lib/x86_64-linux-gnu/nvidia/current/libcuda.so.1"),
    )
    .expect("symlink");
    s.file(
        "host/usr/local/cuda-12.4/lib64/libcudart.so.12.4.127",
        b"\x7fELF",
    );
    s.file(
        "host/usr/local/cuda-12.4/lib64/stubs/libcuda.so",
        b"\x7fELF",
    );
    // A container whose process has not loaded CUDA yet: the toolkit's bind mount is there.
    s.file(
        "proc/99/root/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15",
        b"\x7fELF",
    );
    s.file("proc/99/maps", b"");
    let found = find_cuda_libraries(&search).expect("search");
    let mut seen: Vec<(String, CudaLibrary)> = found
        .iter()
        .map(|l| {
            let rel = l.path.strip_prefix(&s.0).expect("below scratch");
            (rel.display().to_string(), l.kind)
        })
        .collect();
    seen.sort();
    assert_eq!(
        seen,
        vec![
            (
                "host/usr/lib/x86_64-linux-gnu/nvidia/current/libcuda.so.1".to_string(),
                CudaLibrary::Driver
            ),
            (
                "host/usr/local/cuda-12.4/lib64/libcudart.so.12.4.127".to_string(),
                CudaLibrary::Runtime
            ),
            (
                "proc/99/root/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15".to_string(),
                CudaLibrary::Driver
            ),
        ],
        "the stub is not a driver anyone runs; the symlinked driver is found once"
    );
    assert!(found.iter().all(|l| l.mapped_by.is_empty()));
}

#[test]
fn rescans_skip_install_places() {
    let s = Scratch::new("libs-rescan");
    let search = s.search();
    s.file("host/usr/lib64/libcuda.so.1", b"\x7fELF");
    s.file("proc/5/root/usr/lib64/libcuda.so.1", b"\x7fELF");
    s.file("proc/5/maps", b"");
    assert!(find_cuda_libraries(&search).expect("search").is_empty());
}

#[test]
fn an_explicit_library_gets_its_kind_from_its_name_or_its_target() {
    let s = Scratch::new("libs-at");
    let driver = s.file("libcuda.so.535.261.03", b"\x7fELF");
    assert_eq!(
        library_at(&driver).expect("driver").kind,
        CudaLibrary::Driver
    );
    let runtime = s.file("libcudart.so.13", b"\x7fELF");
    assert_eq!(
        library_at(&runtime).expect("runtime").kind,
        CudaLibrary::Runtime
    );
    let alias = s.0.join("driver-copy.so");
    symlink(&driver, &alias).expect("symlink");
    assert_eq!(library_at(&alias).expect("alias").kind, CudaLibrary::Driver);
}

#[test]
fn an_explicit_library_with_another_name_is_judged_by_its_exports() {
    let s = Scratch::new("libs-exports");
    // Not an ELF file: its kind cannot be read, and the error says which file.
    let odd = s.file("mystery.so", b"not an elf");
    let err = library_at(&odd).expect_err("must fail");
    assert!(format!("{err:#}").contains("mystery.so"), "{err:#}");
    // An ELF file that exports no CUDA symbol (this test binary) is neither library.
    let exe = std::env::current_exe().expect("current exe");
    let copy = s.0.join("copy.so");
    fs::copy(&exe, &copy).expect("copy");
    let err = library_at(&copy).expect_err("must fail");
    assert!(
        format!("{err:#}").contains("neither a CUDA runtime nor a CUDA driver"),
        "{err:#}"
    );
}

#[test]
fn a_missing_explicit_library_is_an_error_naming_the_flag() {
    let err = library_at(Path::new("/nonexistent/libcuda.so.1")).expect_err("must fail");
    assert!(err.to_string().contains("--cuda-lib"), "{err}");
}
