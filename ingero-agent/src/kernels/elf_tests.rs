//! Tests of the ELF fallback and of reading another process's memory, against a C fixture
//! compiled at test time (`testdata/host_stubs.c`) and run as a child, and against this test
//! process itself.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use super::*;

/// A running fixture, killed on drop.
struct Fixture {
    child: Child,
    scale_stub: u64,
    exported_stub: u64,
    long_name: u64,
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn scratch_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ingero-kernels-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// Compiles the fixture (PIE, -rdynamic so the exported stub is in `.dynsym`), or `None`
/// when no C compiler is installed.
fn compile_fixture(output: &str) -> Option<PathBuf> {
    let dir = scratch_dir();
    // One source per test: tests run in parallel and a shared file could be read half written.
    let source = dir.join(format!("{output}.c"));
    std::fs::write(&source, include_str!("testdata/host_stubs.c")).expect("write source");
    let binary = dir.join(output);
    let status = Command::new("cc")
        .args(["-O2", "-Wall", "-Werror", "-rdynamic", "-o"])
        .arg(&binary)
        .arg(&source)
        .status();
    match status {
        Ok(status) => {
            assert!(status.success(), "compiling the fixture failed");
            Some(binary)
        }
        Err(err) => {
            eprintln!("skipped: no C compiler ({err})");
            None
        }
    }
}

fn start(binary: &Path) -> Fixture {
    let mut child = Command::new(binary)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start fixture");
    let mut line = String::new();
    let stdout = child.stdout.take().expect("stdout");
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("addresses");
    let addresses: Vec<u64> = line
        .split_whitespace()
        .map(|text| u64::from_str_radix(text.trim_start_matches("0x"), 16).expect("hex address"))
        .collect();
    Fixture {
        child,
        scale_stub: addresses[0],
        exported_stub: addresses[1],
        long_name: addresses[2],
    }
}

#[test]
fn a_child_host_stub_resolves_from_symtab() {
    let Some(binary) = compile_fixture("host_stubs") else {
        return;
    };
    let fixture = start(&binary);
    let pid = fixture.child.id();
    let mut names = KernelNames::new(KernelNameLimits::default());

    let scale = names
        .resolve(pid, fixture.scale_stub)
        .expect("local stub named");
    assert_eq!(&*scale.mangled, "_ZN4demoL5scaleILi4EEEvPffi");
    assert_eq!(&*scale.demangled, "void demo::scale<4>(float*, float, int)");
    assert_eq!(scale.source.as_str(), "symtab");
    let exported = names
        .resolve(pid, fixture.exported_stub)
        .expect("exported stub named");
    assert_eq!(&*exported.demangled, "my_kernel(float*)");
    assert_eq!(
        exported.source,
        NameSource::ElfSymtab,
        ".symtab wins when present"
    );

    // An address inside the function resolves too; one in no file mapping does not.
    let mut fallback = ElfFallback::new("/proc");
    let (inside, _) = fallback
        .symbolize(pid, fixture.scale_stub + 1)
        .expect("inside");
    assert_eq!(inside, b"_ZN4demoL5scaleILi4EEEvPffi");
    assert!(names.resolve(pid, 0x10).is_none());
    let stats = names.stats();
    assert_eq!((stats.elf_resolved, stats.unresolved), (2, 1));
}

#[test]
fn a_stripped_child_resolves_exported_stubs_from_dynsym_only() {
    let Some(binary) = compile_fixture("host_stubs_stripped") else {
        return;
    };
    let Ok(status) = Command::new("strip")
        .arg("--strip-all")
        .arg(&binary)
        .status()
    else {
        eprintln!("skipped: no strip");
        return;
    };
    assert!(status.success());
    let fixture = start(&binary);
    let pid = fixture.child.id();
    let mut names = KernelNames::new(KernelNameLimits::default());

    let exported = names
        .resolve(pid, fixture.exported_stub)
        .expect("exported stub named");
    assert_eq!(&*exported.mangled, "_Z9my_kernelPf");
    assert_eq!(exported.source.as_str(), "dynsym");
    assert!(
        names.resolve(pid, fixture.scale_stub).is_none(),
        "a local symbol is gone"
    );
}

#[test]
fn a_long_name_is_completed_from_a_child() {
    let Some(binary) = compile_fixture("host_stubs_memory") else {
        return;
    };
    let fixture = start(&binary);
    let pid = fixture.child.id();
    let full = read_user_string(pid, fixture.long_name, MAX_NAME_LEN).expect("read child");
    assert!(full.len() > 256, "{}", full.len());
    assert!(full.starts_with(b"_ZN2at6native29vectorized_elementwise_kernel"));
    let (completed, still_cut) = complete_name(pid, &full[..256], fixture.long_name, true);
    assert_eq!((completed, still_cut), (full.clone(), false));

    let mut names = KernelNames::new(KernelNameLimits::default());
    let name = names.name_from_record(
        pid,
        NameSource::Registration,
        &full[..256],
        fixture.long_name,
        true,
    );
    assert!(!name.truncated);
    assert!(
        name.demangled.starts_with(
            "void at::native::vectorized_elementwise_kernel<4, at::native::AbsFunctor<float>"
        ),
        "{}",
        name.demangled
    );
}

/// A function of this test binary with a known, unmangled symbol.
#[unsafe(no_mangle)]
#[inline(never)]
pub extern "C" fn ingero_kernels_test_marker(x: u64) -> u64 {
    std::hint::black_box(x.wrapping_mul(31).rotate_left(7))
}

#[test]
fn a_function_of_this_process_resolves() {
    let addr = ingero_kernels_test_marker as extern "C" fn(u64) -> u64 as usize as u64;
    assert_ne!(ingero_kernels_test_marker(1), 0);
    let mut fallback = ElfFallback::new("/proc");
    match fallback.symbolize(std::process::id(), addr) {
        Some((name, source)) => {
            assert_eq!(name, b"ingero_kernels_test_marker");
            assert_eq!(source, NameSource::ElfSymtab);
        }
        // A test binary built with `strip = "symbols"` has no `.symtab`, and the marker is not
        // exported: then there is nothing to find.
        None => eprintln!("skipped: this test binary has no .symtab"),
    }
}

#[test]
fn a_fake_proc_root_without_the_process_resolves_nothing() {
    let mut fallback = ElfFallback::new(scratch_dir().join("no-proc"));
    assert!(fallback.symbolize(1, 0x1000).is_none());
}
