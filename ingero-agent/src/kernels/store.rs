//! `KernelNames`: which kernel each handle of each process names, bounded, with the ELF
//! fallback for handles nobody named.

use std::collections::HashMap;
use std::sync::Arc;

use super::clock::ClockMap;
use super::elf_fallback::{AddressSymbolizer, ElfFallback};
use super::intern::NameInterner;
use super::name::{KernelName, NameSource};
use super::user_memory::{MAX_NAME_LEN, complete_name, read_user_string};

/// An alias chain (`CUfunction` → `CUkernel` → host function) is followed this deep; a cycle
/// (a handle reused for another kernel) ends here too.
const MAX_ALIAS_DEPTH: usize = 8;

/// The bounds of a [`KernelNames`] store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelNameLimits {
    /// Named handles per process (libtorch_cuda registers some 24k).
    pub per_process: usize,
    /// Named handles, all processes together.
    pub total: usize,
    /// Handles per process remembered as unnamed, so the ELF fallback runs once for each.
    pub unresolved_per_process: usize,
    /// Alias edges per process waiting for the handle they point to be named.
    pub pending_aliases_per_process: usize,
}

impl Default for KernelNameLimits {
    fn default() -> Self {
        Self {
            per_process: 65_536,
            total: 262_144,
            unresolved_per_process: 4096,
            pending_aliases_per_process: 4096,
        }
    }
}

/// Counters for the agent's final statistics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelNameStats {
    /// Named handles held now, all processes together.
    pub names: u64,
    /// Distinct names held (shared by handles and processes).
    pub distinct_names: u64,
    /// Handles evicted because their process held `per_process` already.
    pub evicted_per_process: u64,
    /// Handles evicted because the store held `total` already.
    pub evicted_total: u64,
    /// Handles named by the ELF fallback.
    pub elf_resolved: u64,
    /// Lookups of handles nobody named that the ELF fallback could not name either; a handle
    /// counts once while it is remembered as unnamed (bounded per process).
    pub unresolved: u64,
    /// Alias edges dropped unresolved because a process had too many waiting.
    pub aliases_dropped: u64,
    /// Cut names completed from the process's memory.
    pub long_names_completed: u64,
    /// Cut names that could not be completed (kept cut and marked).
    pub long_names_truncated: u64,
    /// Names the probe could not read (their page was not resident) that were read from the
    /// process when a launch first asked for them.
    pub read_late: u64,
    /// Of those, the names that could not be read then either (the process had exited, or the
    /// memory was gone): the launch is named by the ELF fallback or stays unnamed.
    pub unreadable: u64,
    /// Addresses of names not read yet that were forgotten because their process had
    /// `per_process` of them waiting already.
    pub unread_dropped: u64,
}

/// What is known about one process.
struct ProcessNames {
    names: ClockMap<u64, Arc<KernelName>>,
    /// Handles the ELF fallback could not name.
    unresolved: ClockMap<u64, ()>,
    /// new handle → the handle it names the same kernel as, not named yet.
    pending_aliases: ClockMap<u64, u64>,
    /// Handles whose name the probe could not read → where the name is, and who named it. Read
    /// when a launch asks (a library registers ~24k kernels and launches a few hundred, so
    /// reading them all at registration would stall the drain loop for nothing).
    unread: ClockMap<u64, (u64, NameSource)>,
}

impl ProcessNames {
    fn new() -> Self {
        Self {
            names: ClockMap::new(),
            unresolved: ClockMap::new(),
            pending_aliases: ClockMap::new(),
            unread: ClockMap::new(),
        }
    }
}

/// The kernel-name store: `(pid, handle)` → [`KernelName`].
///
/// Handles are whatever a launch passes: the host function registered by
/// `__cudaRegisterFunction`, a `CUfunction`, a `CUkernel`, a `cudaKernel_t`. Each process
/// holds at most `per_process` named handles and the store `total`; beyond that the least
/// recently launched go (CLOCK, see `clock.rs`), counted in [`KernelNameStats`].
pub struct KernelNames {
    limits: KernelNameLimits,
    processes: HashMap<u32, ProcessNames>,
    held: usize,
    interner: NameInterner,
    symbolizer: Box<dyn AddressSymbolizer>,
    stats: KernelNameStats,
}

impl KernelNames {
    /// A store with the ELF fallback reading `/proc`.
    pub fn new(limits: KernelNameLimits) -> Self {
        Self::with_symbolizer(limits, Box::new(ElfFallback::new("/proc")))
    }

    /// A store naming unknown handles through `symbolizer`.
    pub fn with_symbolizer(
        limits: KernelNameLimits,
        symbolizer: Box<dyn AddressSymbolizer>,
    ) -> Self {
        Self {
            limits,
            processes: HashMap::new(),
            held: 0,
            // Twice the handles it can be asked to share: see `intern.rs`.
            interner: NameInterner::new(limits.total.saturating_mul(2)),
            symbolizer,
            stats: KernelNameStats::default(),
        }
    }

    /// The shared name for a probe's record: `prefix` is what the record carried, `name_addr`
    /// where the string is in process `pid`, `truncated` whether the prefix is cut. A cut name
    /// is completed from the process's memory; if that fails it stays cut and is marked.
    pub fn name_from_record(
        &mut self,
        pid: u32,
        source: NameSource,
        prefix: &[u8],
        name_addr: u64,
        truncated: bool,
    ) -> Arc<KernelName> {
        let (name, still_truncated) = complete_name(pid, prefix, name_addr, truncated);
        if truncated {
            if still_truncated {
                self.stats.long_names_truncated += 1;
            } else {
                self.stats.long_names_completed += 1;
            }
        }
        self.interner.intern(&name, source, still_truncated)
    }

    /// The shared name for bytes known to be complete (or cut, as `truncated` says).
    pub fn name(&mut self, mangled: &[u8], source: NameSource, truncated: bool) -> Arc<KernelName> {
        self.interner.intern(mangled, source, truncated)
    }

    /// Records that `handle` in process `pid` names `name`, replacing what it named before.
    pub fn insert(&mut self, pid: u32, handle: u64, name: Arc<KernelName>) {
        let process = self.processes.entry(pid).or_insert_with(ProcessNames::new);
        process.unresolved.remove(&handle);
        process.pending_aliases.remove(&handle);
        if !process.names.contains(&handle) {
            if process.names.len() >= self.limits.per_process.max(1) {
                if process.names.evict_one().is_some() {
                    self.held -= 1;
                    self.stats.evicted_per_process += 1;
                }
            } else if self.held >= self.limits.total.max(1) {
                self.evict_from_largest_process();
            }
        }
        let process = self.processes.entry(pid).or_insert_with(ProcessNames::new);
        if process.names.insert(handle, name).is_none() {
            self.held += 1;
        }
    }

    /// Records that `handle` in process `pid` names the string at `addr`, which the probe could
    /// not read: it is read from the process if a launch asks for `handle` (bounded per process,
    /// like the names).
    pub fn defer(&mut self, pid: u32, handle: u64, addr: u64, source: NameSource) {
        let capacity = self.limits.per_process;
        let process = self.processes.entry(pid).or_insert_with(ProcessNames::new);
        process.unresolved.remove(&handle);
        if process
            .unread
            .insert_bounded(handle, (addr, source), capacity)
        {
            self.stats.unread_dropped += 1;
        }
    }

    /// Records that `new_handle` names the same kernel as `existing` (`cuKernelGetFunction`,
    /// `__cudaGetKernel`). If `existing` is not named yet, the edge waits (bounded) and a
    /// later lookup of `new_handle` follows it.
    pub fn alias(&mut self, pid: u32, new_handle: u64, existing: u64) {
        if new_handle == existing {
            return;
        }
        let process = self.processes.entry(pid).or_insert_with(ProcessNames::new);
        if let Some(name) = process.names.peek(&existing).cloned() {
            self.insert(pid, new_handle, name);
            return;
        }
        process.unresolved.remove(&new_handle);
        let capacity = self.limits.pending_aliases_per_process;
        if process
            .pending_aliases
            .insert_bounded(new_handle, existing, capacity)
        {
            self.stats.aliases_dropped += 1;
        }
    }

    /// The name `handle` already has in process `pid` (marked as used), without following
    /// aliases, asking the ELF fallback or remembering a miss: the launch path's first look.
    pub fn get(&mut self, pid: u32, handle: u64) -> Option<Arc<KernelName>> {
        self.processes
            .get_mut(&pid)?
            .names
            .get(&handle)
            .map(Arc::clone)
    }

    /// The name of `handle` in process `pid`. An unknown handle is followed through its alias
    /// edge, then tried once with the ELF fallback; a failure is remembered (bounded), so the
    /// next launch of it costs one lookup.
    pub fn resolve(&mut self, pid: u32, handle: u64) -> Option<Arc<KernelName>> {
        self.resolve_within(pid, handle, 0)
    }

    fn resolve_within(&mut self, pid: u32, handle: u64, depth: usize) -> Option<Arc<KernelName>> {
        let process = self.processes.entry(pid).or_insert_with(ProcessNames::new);
        if let Some(name) = process.names.get(&handle) {
            return Some(Arc::clone(name));
        }
        if let Some(&target) = process.pending_aliases.peek(&handle) {
            if depth < MAX_ALIAS_DEPTH {
                if let Some(name) = self.resolve_within(pid, target, depth + 1) {
                    self.insert(pid, handle, Arc::clone(&name));
                    return Some(name);
                }
            }
            // The target is unnamed so far; a later insert of it may still name this handle,
            // so it is not marked unresolved.
            return None;
        }
        if process.unresolved.contains(&handle) {
            return None;
        }
        if let Some((addr, source)) = process.unread.remove(&handle) {
            match read_user_string(pid, addr, MAX_NAME_LEN) {
                Ok(bytes) if !bytes.is_empty() && bytes.len() < MAX_NAME_LEN => {
                    self.stats.read_late += 1;
                    let name = self.interner.intern(&bytes, source, false);
                    self.insert(pid, handle, Arc::clone(&name));
                    return Some(name);
                }
                _ => self.stats.unreadable += 1,
            }
        }
        match self.symbolizer.symbolize(pid, handle) {
            Some((symbol, source)) => {
                self.stats.elf_resolved += 1;
                let name = self.interner.intern(&symbol, source, false);
                self.insert(pid, handle, Arc::clone(&name));
                Some(name)
            }
            None => {
                self.stats.unresolved += 1;
                let capacity = self.limits.unresolved_per_process;
                let process = self.processes.entry(pid).or_insert_with(ProcessNames::new);
                process.unresolved.insert_bounded(handle, (), capacity);
                None
            }
        }
    }

    /// Drops everything known about process `pid` (it exited; its pid may be reused).
    pub fn forget_process(&mut self, pid: u32) {
        if let Some(process) = self.processes.remove(&pid) {
            self.held -= process.names.len();
        }
        self.symbolizer.forget_process(pid);
    }

    /// The counters, for the agent's final statistics.
    pub fn stats(&self) -> KernelNameStats {
        KernelNameStats {
            names: self.held as u64,
            distinct_names: self.interner.len() as u64,
            ..self.stats
        }
    }

    /// At the total bound, the process holding the most names gives one up: a job's many
    /// ranks share the room instead of the newest process evicting the others' hot kernels.
    /// Finding it scans the processes, which happens only while the store is full.
    fn evict_from_largest_process(&mut self) {
        let largest = self
            .processes
            .iter_mut()
            .max_by_key(|(_, process)| process.names.len())
            .map(|(_, process)| process);
        if largest
            .and_then(|process| process.names.evict_one())
            .is_some()
        {
            self.held -= 1;
            self.stats.evicted_total += 1;
        }
    }
}
