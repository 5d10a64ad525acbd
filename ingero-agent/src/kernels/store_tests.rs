//! Tests of the `KernelNames` store with a scripted symbolizer: bounds and eviction counts,
//! aliases, the negative cache, long-name completion and interning.

use std::collections::HashMap;
use std::ffi::CString;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use super::*;

/// A symbolizer answering from a table and counting its calls.
#[derive(Clone, Default)]
struct Scripted {
    answers: Arc<Mutex<HashMap<(u32, u64), &'static str>>>,
    calls: Arc<AtomicUsize>,
    forgotten: Arc<Mutex<Vec<u32>>>,
}

impl AddressSymbolizer for Scripted {
    fn symbolize(&mut self, pid: u32, addr: u64) -> Option<(Vec<u8>, NameSource)> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        let answers = self.answers.lock().expect("lock");
        answers
            .get(&(pid, addr))
            .map(|name| (name.as_bytes().to_vec(), NameSource::ElfSymtab))
    }

    fn forget_process(&mut self, pid: u32) {
        self.forgotten.lock().expect("lock").push(pid);
    }
}

fn store(limits: KernelNameLimits) -> (KernelNames, Scripted) {
    let scripted = Scripted::default();
    (
        KernelNames::with_symbolizer(limits, Box::new(scripted.clone())),
        scripted,
    )
}

fn small_limits() -> KernelNameLimits {
    KernelNameLimits {
        per_process: 4,
        total: 6,
        unresolved_per_process: 2,
        pending_aliases_per_process: 2,
    }
}

#[test]
fn inserted_names_resolve_per_process() {
    let (mut names, scripted) = store(KernelNameLimits::default());
    let scale = names.name(
        b"_ZN4demo5scaleILi4EEEvPffi",
        NameSource::Registration,
        false,
    );
    names.insert(10, 0x1000, Arc::clone(&scale));
    let found = names.resolve(10, 0x1000).expect("named");
    assert!(Arc::ptr_eq(&found, &scale));
    assert_eq!(&*found.demangled, "void demo::scale<4>(float*, float, int)");
    assert_eq!(found.source.as_str(), "registration");
    // The same handle in another process is another kernel (unknown here).
    assert!(names.resolve(11, 0x1000).is_none());
    assert_eq!(scripted.calls.load(Ordering::Relaxed), 1);
}

#[test]
fn get_finds_named_handles_only_and_asks_nothing_else() {
    let (mut names, scripted) = store(KernelNameLimits::default());
    scripted
        .answers
        .lock()
        .expect("lock")
        .insert((10, 0x2000), "_Z4stubv");
    let k = names.name(b"_Z1kv", NameSource::Registration, false);
    names.insert(10, 0x1000, Arc::clone(&k));
    names.alias(10, 0x3000, 0x1000);
    names.alias(10, 0x4000, 0x5000);
    assert!(Arc::ptr_eq(&names.get(10, 0x1000).expect("named"), &k));
    assert!(names.get(10, 0x2000).is_none(), "no ELF fallback");
    assert!(
        Arc::ptr_eq(
            &names.get(10, 0x3000).expect("aliased to a named handle"),
            &k
        ),
        "an alias of a named handle is named at once"
    );
    assert!(
        names.get(10, 0x4000).is_none(),
        "a waiting alias is not followed"
    );
    assert!(names.get(11, 0x1000).is_none(), "another process");
    assert_eq!(scripted.calls.load(Ordering::Relaxed), 0);
    assert_eq!(names.stats().unresolved, 0, "a miss is not remembered");
    // The full lookup still finds the symbol afterwards.
    assert_eq!(
        &*names.resolve(10, 0x2000).expect("symtab").mangled,
        "_Z4stubv"
    );
}

#[test]
fn ranks_registering_the_same_kernel_share_one_name() {
    let (mut names, _) = store(KernelNameLimits::default());
    for pid in 1..=8 {
        let name = names.name(b"_Z9my_kernelPf", NameSource::Registration, false);
        names.insert(pid, 0x4000 + u64::from(pid), name);
    }
    let first = names.resolve(1, 0x4001).expect("named");
    let last = names.resolve(8, 0x4008).expect("named");
    assert!(Arc::ptr_eq(&first, &last));
    let stats = names.stats();
    assert_eq!((stats.names, stats.distinct_names), (8, 1));
}

#[test]
fn the_per_process_bound_evicts_and_counts() {
    let (mut names, _) = store(small_limits());
    for handle in 0..4u64 {
        let name = names.name(
            format!("k{handle}").as_bytes(),
            NameSource::DriverModule,
            false,
        );
        names.insert(1, handle, name);
    }
    // Launch 0 and 1: the hand spares them and evicts 2 for the new handle.
    assert!(names.resolve(1, 0).is_some());
    assert!(names.resolve(1, 1).is_some());
    let name = names.name(b"k4", NameSource::DriverModule, false);
    names.insert(1, 4, name);
    let stats = names.stats();
    assert_eq!(
        (stats.names, stats.evicted_per_process, stats.evicted_total),
        (4, 1, 0)
    );
    assert!(names.resolve(1, 0).is_some());
    assert!(names.resolve(1, 1).is_some());
    assert!(names.resolve(1, 4).is_some());
    assert!(names.resolve(1, 2).is_none(), "the unlaunched handle went");
    // Replacing a handle's name evicts nothing.
    let renamed = names.name(b"k0-again", NameSource::DriverModule, false);
    names.insert(1, 0, renamed);
    assert_eq!(names.stats().evicted_per_process, 1);
    assert_eq!(&*names.resolve(1, 0).expect("named").mangled, "k0-again");
}

#[test]
fn the_total_bound_takes_from_the_largest_process() {
    let (mut names, _) = store(small_limits());
    for handle in 0..4u64 {
        let name = names.name(b"big", NameSource::Registration, false);
        names.insert(1, handle, name);
    }
    for handle in 0..2u64 {
        let name = names.name(b"small", NameSource::Registration, false);
        names.insert(2, handle, name);
    }
    assert_eq!(names.stats().names, 6);
    let name = names.name(b"third", NameSource::Registration, false);
    names.insert(3, 0, name);
    let stats = names.stats();
    assert_eq!(
        (stats.names, stats.evicted_total, stats.evicted_per_process),
        (6, 1, 0)
    );
    let left_in_big = (0..4u64).filter(|&h| names.resolve(1, h).is_some()).count();
    assert_eq!(left_in_big, 3);
    assert!(names.resolve(2, 0).is_some() && names.resolve(2, 1).is_some());
    assert!(names.resolve(3, 0).is_some());
}

#[test]
fn forgetting_a_process_frees_its_room() {
    let (mut names, scripted) = store(small_limits());
    for handle in 0..4u64 {
        let name = names.name(b"k", NameSource::Registration, false);
        names.insert(7, handle, name);
    }
    names.forget_process(7);
    assert_eq!(names.stats().names, 0);
    assert!(names.resolve(7, 0).is_none());
    assert_eq!(*scripted.forgotten.lock().expect("lock"), [7]);
}

#[test]
fn an_alias_of_a_known_handle_resolves_at_once() {
    let (mut names, scripted) = store(KernelNameLimits::default());
    let name = names.name(b"triton_poi_fused_add_0", NameSource::DriverLibrary, false);
    names.insert(1, 0xA, Arc::clone(&name));
    names.alias(1, 0xB, 0xA);
    assert!(Arc::ptr_eq(&names.resolve(1, 0xB).expect("aliased"), &name));
    assert_eq!(scripted.calls.load(Ordering::Relaxed), 0);
}

#[test]
fn an_alias_chain_waits_for_a_later_insert() {
    let (mut names, _) = store(KernelNameLimits::default());
    // CUfunction 0xC → CUkernel 0xB → host function 0xA, named only afterwards.
    names.alias(1, 0xB, 0xA);
    names.alias(1, 0xC, 0xB);
    assert!(names.resolve(1, 0xC).is_none());
    let name = names.name(b"_Z9my_kernelPf", NameSource::Registration, false);
    names.insert(1, 0xA, Arc::clone(&name));
    assert!(Arc::ptr_eq(
        &names.resolve(1, 0xC).expect("through the chain"),
        &name
    ));
    assert!(Arc::ptr_eq(
        &names.resolve(1, 0xB).expect("now direct"),
        &name
    ));
}

#[test]
fn an_alias_of_an_elf_named_handle_resolves() {
    let (mut names, scripted) = store(KernelNameLimits::default());
    scripted
        .answers
        .lock()
        .expect("lock")
        .insert((1, 0xA), "_ZN4demoL5scaleILi4EEEvPffi");
    // `__cudaGetKernel(&k, hostFun)` seen, the registration was not.
    names.alias(1, 0xC0, 0xA);
    let name = names.resolve(1, 0xC0).expect("host function named by ELF");
    assert_eq!(name.source, NameSource::ElfSymtab);
    assert_eq!(&*name.demangled, "void demo::scale<4>(float*, float, int)");
    assert_eq!(names.stats().elf_resolved, 1);
}

#[test]
fn alias_cycles_end() {
    let (mut names, _) = store(KernelNameLimits::default());
    names.alias(1, 0xA, 0xB);
    names.alias(1, 0xB, 0xA);
    assert!(names.resolve(1, 0xA).is_none());
}

#[test]
fn waiting_aliases_are_bounded_and_counted() {
    let (mut names, _) = store(small_limits());
    for handle in 0..5u64 {
        names.alias(1, 0x100 + handle, 0x1);
    }
    assert_eq!(names.stats().aliases_dropped, 3);
}

#[test]
fn the_elf_fallback_runs_once_per_unknown_handle() {
    let (mut names, scripted) = store(small_limits());
    for _ in 0..5 {
        assert!(names.resolve(1, 0xDEAD).is_none());
    }
    assert_eq!(scripted.calls.load(Ordering::Relaxed), 1);
    assert_eq!(names.stats().unresolved, 1);
    // The negative cache is bounded (2 here): a third handle pushes one out, which is then
    // tried again.
    assert!(names.resolve(1, 0xBEEF).is_none());
    assert!(names.resolve(1, 0xF00D).is_none());
    assert_eq!(scripted.calls.load(Ordering::Relaxed), 3);
    // 0xDEAD was the one pushed out (never looked up since): it costs one more try.
    assert!(names.resolve(1, 0xDEAD).is_none());
    assert_eq!(scripted.calls.load(Ordering::Relaxed), 4);
}

#[test]
fn an_insert_overrides_a_remembered_failure() {
    let (mut names, _) = store(KernelNameLimits::default());
    assert!(names.resolve(1, 0x77).is_none());
    let name = names.name(b"late", NameSource::DriverModule, false);
    names.insert(1, 0x77, name);
    assert_eq!(&*names.resolve(1, 0x77).expect("named").mangled, "late");
}

#[test]
fn elf_names_are_cached_as_entries() {
    let (mut names, scripted) = store(KernelNameLimits::default());
    scripted
        .answers
        .lock()
        .expect("lock")
        .insert((3, 0x10), "_Z9my_kernelPf");
    for _ in 0..3 {
        let name = names.resolve(3, 0x10).expect("named");
        assert_eq!(&*name.demangled, "my_kernel(float*)");
        assert_eq!(name.source.as_str(), "symtab");
    }
    assert_eq!(scripted.calls.load(Ordering::Relaxed), 1);
    assert_eq!(names.stats().elf_resolved, 1);
}

#[test]
fn names_from_records_are_completed_or_marked() {
    let (mut names, _) = store(KernelNameLimits::default());
    let full = format!(
        "_ZN2at6native6kernelI{}EEvv",
        "N5outer5innerIfEE".repeat(30)
    );
    let text = CString::new(full.clone()).expect("no NUL");
    let addr = text.as_ptr() as u64;
    let pid = std::process::id();
    let prefix = &full.as_bytes()[..256];

    let completed = names.name_from_record(pid, NameSource::Registration, prefix, addr, true);
    assert_eq!(&*completed.mangled, full);
    assert!(!completed.truncated);

    let lost = names.name_from_record(pid, NameSource::Registration, prefix, 16, true);
    assert!(lost.truncated);
    assert!(lost.demangled.ends_with(TRUNCATION_MARK));

    let short = names.name_from_record(
        pid,
        NameSource::DriverModule,
        b"triton_poi_fused_add_0",
        16,
        false,
    );
    assert_eq!(&*short.demangled, "triton_poi_fused_add_0");

    let stats = names.stats();
    assert_eq!(
        (stats.long_names_completed, stats.long_names_truncated),
        (1, 1)
    );
}
