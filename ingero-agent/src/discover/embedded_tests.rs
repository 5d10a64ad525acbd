//! Tests of finding a runtime linked into a program, against a test-only C program compiled
//! at test time (`testdata/linked_runtime.c`) in three builds: with device code, without it,
//! and stripped. The real `libcudart_static.a` is linked into the end-to-end tests' fixture.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};

use object::{Object, ObjectSection, ObjectSymbol};

use super::*;
use crate::discover::libraries::{Search, find_cuda_libraries_with, library_at};
use crate::discover::looked::Looked;

/// Compiles the test program with `flags` into a file of its own, or `None` when no C
/// compiler is installed.
fn compile(output: &str, flags: &[&str]) -> Option<PathBuf> {
    let dir = std::env::temp_dir().join(format!("ingero-embedded-{}", std::process::id()));
    fs::create_dir_all(&dir).expect("scratch dir");
    // One source per build: tests run in parallel and a shared file could be read half written.
    let source = dir.join(format!("{output}.c"));
    fs::write(&source, include_str!("testdata/linked_runtime.c")).expect("write source");
    let binary = dir.join(output);
    let status = Command::new("cc")
        .args(["-O2", "-Wall", "-Werror", "-o"])
        .arg(&binary)
        .arg(&source)
        .args(flags)
        .status();
    match status {
        Ok(status) => {
            assert!(status.success(), "compiling the test program failed");
            Some(binary)
        }
        Err(err) => {
            eprintln!("skipped: no C compiler ({err})");
            None
        }
    }
}

/// The file offsets of `names` as the general ELF reader finds them (the reference path).
fn reference_offsets(path: &Path, names: &[&str]) -> Vec<(String, u64)> {
    let data = fs::read(path).expect("read");
    let file = object::File::parse(&*data).expect("parse");
    let mut out = Vec::new();
    for sym in file.symbols() {
        let Ok(name) = sym.name() else { continue };
        if !names.contains(&name) {
            continue;
        }
        let index = sym.section_index().expect("defined");
        let section = file.section_by_index(index).expect("section");
        let (offset, _) = section.file_range().expect("in the file");
        out.push((name.to_owned(), offset + sym.address() - section.address()));
    }
    out.sort();
    out
}

#[test]
fn the_runtime_functions_linked_into_a_program_are_found_at_their_file_offsets() {
    let Some(binary) = compile("with-device-code", &[]) else {
        return;
    };
    let found: Vec<(String, u64)> = linked_runtime_functions(&binary)
        .expect("read")
        .into_iter()
        .map(|f| (f.name, f.file_offset))
        .collect();
    let names = ["__cudaRegisterFunction", "cudaLaunchKernel", "cudaMalloc"];
    assert_eq!(found, reference_offsets(&binary, &names));
    assert_eq!(found.len(), 3, "{found:?}");
    let library = linked_runtime_at(&binary)
        .expect("read")
        .expect("a runtime");
    assert!(library.linked_in);
    assert_eq!(library.kind, CudaLibrary::Runtime);
    // What `--cuda-lib` makes of it, and the functions the probes attach to.
    let named = library_at(&binary).expect("--cuda-lib");
    assert!(named.linked_in, "{named:?}");
    let attached: Vec<String> = named
        .functions()
        .expect("functions")
        .into_iter()
        .map(|f| f.name)
        .collect();
    assert_eq!(attached, names);
}

#[test]
fn a_program_without_device_code_or_without_symbols_has_no_runtime_to_find() {
    for (output, flags) in [
        ("no-device-code", &["-DNO_DEVICE_CODE"][..]),
        ("stripped", &["-s"][..]),
    ] {
        let Some(binary) = compile(output, flags) else {
            return;
        };
        assert_eq!(linked_runtime_functions(&binary).expect("read"), []);
        assert!(
            linked_runtime_at(&binary).expect("read").is_none(),
            "{output}"
        );
        let err = library_at(&binary).expect_err("not a CUDA library");
        assert!(
            format!("{err:#}").contains("no runtime linked in"),
            "{output}: {err:#}"
        );
    }
}

#[test]
fn a_program_that_loads_libcudart_has_no_runtime_linked_in() {
    let dir = std::env::temp_dir().join(format!("ingero-embedded-{}", std::process::id()));
    fs::create_dir_all(&dir).expect("scratch dir");
    let empty = dir.join("empty.c");
    fs::write(&empty, "int ingero_placeholder;\n").expect("write");
    let library = dir.join("libcudart.so.12");
    let built = Command::new("cc")
        .args(["-shared", "-fPIC", "-Wl,-soname,libcudart.so.12", "-o"])
        .arg(&library)
        .arg(&empty)
        .status();
    let Ok(built) = built else {
        eprintln!("skipped: no C compiler");
        return;
    };
    assert!(built.success());
    // Its own copies of the runtime's names (as the test program has) do not count: a program
    // that loads libcudart.so calls that library, which is attached on its own.
    let library = library.display().to_string();
    let Some(binary) = compile("needs-libcudart", &["-Wl,--no-as-needed", &library]) else {
        return;
    };
    assert_eq!(linked_runtime_functions(&binary).expect("read"), []);
}

#[test]
fn files_that_are_not_elf_programs_are_not_runtimes() {
    let dir = std::env::temp_dir().join(format!("ingero-embedded-{}", std::process::id()));
    fs::create_dir_all(&dir).expect("scratch dir");
    let path = dir.join("script.sh");
    fs::write(&path, b"#!/bin/sh\necho .nv_fatbin\n").expect("write");
    assert_eq!(linked_runtime_functions(&path).expect("read"), []);
}

/// The test program, running: killed on drop.
struct Running(std::process::Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Compiles the test program (with device code) as `output` and runs it; `None` without a C
/// compiler.
fn compile_and_run(output: &str) -> Option<(PathBuf, Running)> {
    let binary = compile(output, &[])?;
    let running = run(&binary);
    Some((binary, running))
}

fn run(binary: &Path) -> Running {
    let mut child = Command::new(binary)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start");
    let mut line = String::new();
    let stdout = child.stdout.take().expect("stdout");
    BufReader::new(stdout).read_line(&mut line).expect("ready");
    Running(child)
}

fn search_of(pid: u32) -> Search {
    Search {
        install_places: false,
        ..Search::new(Some(vec![pid]))
    }
}

#[test]
fn a_running_program_with_the_runtime_linked_in_is_found_once_with_its_process() {
    let Some((binary, running)) = compile_and_run("running") else {
        return;
    };
    let pid = running.0.id();
    let mut looked = Looked::default();
    let found = find_cuda_libraries_with(&search_of(pid), &mut looked).expect("search");
    let seen = looked.len();
    // A rescan finds it again (its processes may have changed) without new files to read.
    let again = find_cuda_libraries_with(&search_of(pid), &mut looked).expect("rescan");
    let linked: Vec<&LibraryFile> = found.iter().filter(|l| l.linked_in).collect();
    assert_eq!(linked.len(), 1, "{found:?}");
    let meta = fs::metadata(&binary).expect("binary");
    assert_eq!((linked[0].dev, linked[0].ino), (meta.dev(), meta.ino()));
    assert_eq!(linked[0].mapped_by, [pid]);
    // The process shares this one's mount namespace: the path the user knows.
    assert_eq!(linked[0].path, binary);
    assert_eq!(again, found);
    // The program, libc and the loader at least.
    assert!(seen >= 3, "{seen}");
    assert_eq!(looked.len(), seen);
}

#[test]
fn read_in_background_a_program_is_found_by_a_later_rescan() {
    let Some((binary, running)) = compile_and_run("background") else {
        return;
    };
    let pid = running.0.id();
    let mut looked = Looked::default();
    looked.read_in_background().expect("thread");
    // The first look hands the files to the thread and does not wait for them.
    let first = find_cuda_libraries_with(&search_of(pid), &mut looked).expect("search");
    assert!(first.iter().all(|l| !l.linked_in), "{first:?}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let found = find_cuda_libraries_with(&search_of(pid), &mut looked).expect("rescan");
        if let Some(linked) = found.iter().find(|l| l.linked_in) {
            assert_eq!(linked.path, binary);
            assert_eq!(linked.mapped_by, [pid]);
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never found: {found:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}
