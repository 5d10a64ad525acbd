//! The track tree of a recording and its descriptors.
//!
//! Every track has a small sequential uuid (1, 2, …: one or two varint bytes on each event).
//! A descriptor is written before the first event on its track, parents first, and again in
//! each new file after a rotation (a file is self-contained). A process's tracks are forgotten
//! when it exits and a thread's when it ends, so the registry holds live tasks only.
//!
//! ```text
//! ingero                       session, statistics; counters events/s, drops
//! trace-wide labels            trace-wide annotations
//!   <key>                      state slices `key=value`
//!   spans, spans #2, …         one lane per concurrently open span
//! process <pid>                ProcessDescriptor (name, cmdline)
//!   device memory              counter, bytes
//!   labels                     this process's annotations, state tracks and span lanes
//!   thread <tid>               ThreadDescriptor: CUDA calls, lifecycle instants
//!     off-CPU                  off-CPU intervals
//! ```

use crate::fast_map::FastMap;
use crate::model::Comm;
use crate::proto::{
    CHILD_ORDERING_CHRONOLOGICAL, CounterDescriptor, ProcessDescriptor, ThreadDescriptor,
    TrackDescriptor, counter_unit,
};
use crate::vocab::{NVTX_DOMAIN_SEPARATOR, TrackName};

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum TrackKey {
    Ingero,
    EventsPerSecond,
    Drops,
    Process(u32),
    /// By tid.
    Thread(u32),
    OffCpu(u32),
    /// The annotations of a process (`Some(pid)`) or trace-wide (`None`).
    Labels(Option<u32>),
    /// State slices of one label key in a scope.
    State(Option<u32>, String),
    /// Lane `n` (0-based) of a scope's spans.
    SpanLane(Option<u32>, u32),
    DeviceMemory(u32),
    /// A thread's NVTX ranges of one domain (`None`: the default domain), by tid.
    Nvtx(u32, Option<String>),
    /// Lane `n` (0-based) of a process's NVTX start/end ranges.
    NvtxLane(u32, u32),
    /// The NVIDIA drivers' messages (machine-wide).
    Driver,
}

/// What a descriptor may need beyond the key: the task's pid and name as the event saw them.
#[derive(Clone, Copy, Debug)]
pub struct Hint<'a> {
    pub pid: u32,
    pub comm: &'a str,
}

struct TrackInfo {
    uuid: u64,
    desc: TrackDescriptor,
    /// The process the track belongs to, for forgetting it at exit.
    pid: Option<u32>,
    emitted_gen: u64,
}

/// `TrackInfo::emitted_gen` of a track this file described and that changed since (a rename,
/// an exec): it is described again before its next event. Generations start at 1.
const CHANGED: u64 = 0;

/// Slots of the per-thread track cache (direct-mapped by the low bits of the tid).
const CACHE_SLOTS: usize = 64;

/// The uuids of thread and off-CPU tracks already described in this file, by tid, with the
/// task name they were described under: the hot path's lookup (an array index instead of
/// hashing the key and formatting the task name for the hint). An event whose task name
/// differs misses, so a renamed thread is described again. Emptied whenever a track may have
/// to be described again or is forgotten.
struct ThreadCache {
    slots: [[CacheSlot; CACHE_SLOTS]; 2],
}

#[derive(Clone, Copy)]
struct CacheSlot {
    /// `tid + 1`; 0 marks an empty slot.
    key: u64,
    uuid: u64,
    comm: Comm,
}

const EMPTY_SLOT: CacheSlot = CacheSlot {
    key: 0,
    uuid: 0,
    comm: Comm::EMPTY,
};

impl ThreadCache {
    fn kind(key: &TrackKey) -> Option<(usize, u32)> {
        match key {
            TrackKey::Thread(tid) => Some((0, *tid)),
            TrackKey::OffCpu(tid) => Some((1, *tid)),
            _ => None,
        }
    }

    fn clear(&mut self) {
        self.slots = [[EMPTY_SLOT; CACHE_SLOTS]; 2];
    }
}

/// Which per-thread track [`Tracks::cached`] looks up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThreadTrack {
    Thread = 0,
    OffCpu = 1,
}

pub struct Tracks {
    map: FastMap<TrackKey, TrackInfo>,
    cache: Box<ThreadCache>,
    next_uuid: u64,
    /// Bumped per file: a track is emitted once per generation.
    generation: u64,
    /// Read `/proc` for process names and command lines (off in tests with synthetic pids).
    read_proc: bool,
    /// A track already described in this file was described again (a rename, an exec) since
    /// [`Tracks::take_redescribed`] last asked.
    redescribed: bool,
}

impl Tracks {
    pub fn new(read_proc: bool) -> Tracks {
        Tracks {
            map: FastMap::default(),
            cache: Box::new(ThreadCache {
                slots: [[EMPTY_SLOT; CACHE_SLOTS]; 2],
            }),
            next_uuid: 1,
            generation: 1,
            read_proc,
            redescribed: false,
        }
    }

    /// A new file: every track must be described again before use.
    pub fn new_file(&mut self) {
        self.generation += 1;
        self.cache.clear();
    }

    /// The uuid of `tid`'s thread or off-CPU track if it is known and described in this file
    /// under the name `comm` (else call [`Tracks::ensure`], after [`Tracks::rename_thread`]).
    #[inline(always)]
    pub fn cached(&self, kind: ThreadTrack, tid: u32, comm: &Comm) -> Option<u64> {
        let s = &self.cache.slots[kind as usize][tid as usize % CACHE_SLOTS];
        (s.key == u64::from(tid) + 1 && s.comm == *comm).then_some(s.uuid)
    }

    /// Whether a track was described again since the last call (see `redescribed`).
    pub fn take_redescribed(&mut self) -> bool {
        std::mem::take(&mut self.redescribed)
    }

    /// A thread's events now carry the name `comm`: if its track was described under another,
    /// the descriptor takes the new name and the thread's tracks are described again (same
    /// uuids) before their next event, so readers name its later records as the events do.
    pub fn rename_thread(&mut self, tid: u32, comm: &str) {
        let Some(info) = self.map.get_mut(&TrackKey::Thread(tid)) else {
            return;
        };
        let Some(t) = info.desc.thread.as_mut() else {
            return;
        };
        if t.thread_name.as_deref() == Some(comm) {
            return;
        }
        t.thread_name = Some(comm.to_owned());
        info.emitted_gen = CHANGED;
        if let Some(off) = self.map.get_mut(&TrackKey::OffCpu(tid)) {
            off.emitted_gen = CHANGED;
        }
        self.cache.clear();
    }

    /// The uuid of `key`, pushing onto `out` the descriptors (parents first) that this file
    /// still needs.
    pub fn ensure(
        &mut self,
        key: &TrackKey,
        hint: Hint<'_>,
        out: &mut Vec<TrackDescriptor>,
    ) -> u64 {
        if let Some(info) = self.map.get(key) {
            if info.emitted_gen == self.generation {
                let uuid = info.uuid;
                self.remember(key, uuid);
                return uuid;
            }
        }
        let parent = self.parent_of(key, hint);
        let parent_uuid = parent.map(|p| self.ensure(&p, hint, out));
        let generation = self.generation;
        let info = match self.map.entry(key.clone()) {
            std::collections::hash_map::Entry::Occupied(o) => {
                let info = o.into_mut();
                // `CHANGED`: this file described it already, and it changed since.
                self.redescribed |= info.emitted_gen == CHANGED;
                info
            }
            std::collections::hash_map::Entry::Vacant(v) => {
                let uuid = self.next_uuid;
                self.next_uuid += 1;
                let (desc, pid) = describe(key, uuid, parent_uuid, hint, self.read_proc);
                v.insert(TrackInfo {
                    uuid,
                    desc,
                    pid,
                    emitted_gen: generation,
                })
            }
        };
        info.emitted_gen = generation;
        out.push(info.desc.clone());
        let uuid = info.uuid;
        self.remember(key, uuid);
        uuid
    }

    /// Caches a thread or off-CPU track's uuid; its name is noted by [`Tracks::cache_name`]
    /// (until then a new slot matches no event).
    fn remember(&mut self, key: &TrackKey, uuid: u64) {
        if let Some((kind, tid)) = ThreadCache::kind(key) {
            let s = &mut self.cache.slots[kind][tid as usize % CACHE_SLOTS];
            let key = u64::from(tid) + 1;
            if (s.key, s.uuid) != (key, uuid) {
                *s = CacheSlot {
                    key,
                    uuid,
                    comm: Comm::EMPTY,
                };
            }
        }
    }

    /// Notes the task name (as the event carries it) under which `tid`'s track was just
    /// ensured, so [`Tracks::cached`] finds it for the events that follow.
    pub fn cache_name(&mut self, kind: ThreadTrack, tid: u32, comm: &Comm) {
        let s = &mut self.cache.slots[kind as usize][tid as usize % CACHE_SLOTS];
        if s.key == u64::from(tid) + 1 {
            s.comm = *comm;
        }
    }

    fn parent_of(&self, key: &TrackKey, hint: Hint<'_>) -> Option<TrackKey> {
        match key {
            TrackKey::Ingero | TrackKey::Process(_) | TrackKey::Labels(None) | TrackKey::Driver => {
                None
            }
            TrackKey::EventsPerSecond | TrackKey::Drops => Some(TrackKey::Ingero),
            TrackKey::Thread(tid) => {
                let pid = self
                    .map
                    .get(key)
                    .and_then(|i| i.pid)
                    .unwrap_or(if hint.pid == 0 { *tid } else { hint.pid });
                Some(TrackKey::Process(pid))
            }
            TrackKey::OffCpu(tid) => Some(TrackKey::Thread(*tid)),
            TrackKey::Labels(Some(pid)) | TrackKey::DeviceMemory(pid) => {
                Some(TrackKey::Process(*pid))
            }
            TrackKey::State(scope, _) | TrackKey::SpanLane(scope, _) => {
                Some(TrackKey::Labels(*scope))
            }
            TrackKey::Nvtx(tid, _) => Some(TrackKey::Thread(*tid)),
            TrackKey::NvtxLane(pid, _) => Some(TrackKey::Process(*pid)),
        }
    }

    /// A process exec'd: its name and command line changed. Its descriptors are re-read and
    /// re-emitted (same uuids) before the next event on them.
    pub fn refresh_process(&mut self, pid: u32, comm: &str) {
        self.cache.clear();
        let read_proc = self.read_proc;
        for (key, info) in self.map.iter_mut() {
            match key {
                TrackKey::Process(p) if p == &pid => {
                    info.desc.process = Some(process_descriptor(pid, comm, read_proc));
                    info.emitted_gen = CHANGED;
                }
                TrackKey::Thread(tid) if info.pid == Some(pid) => {
                    if let Some(t) = info.desc.thread.as_mut() {
                        if *tid == pid {
                            t.thread_name = Some(comm.to_owned());
                        }
                    }
                    info.emitted_gen = CHANGED;
                }
                _ => {}
            }
        }
    }

    /// Shows `labels` beside the process's name in the UI (`rank 3`): its descriptor is
    /// re-emitted (same uuid) before the next event on it. Only a process already described
    /// is touched (an annotation's labels track describes it first).
    pub fn set_process_labels(&mut self, pid: u32, labels: Vec<String>) {
        if let Some(info) = self.map.get_mut(&TrackKey::Process(pid)) {
            if let Some(p) = info.desc.process.as_mut() {
                if p.process_labels != labels {
                    p.process_labels = labels;
                    info.emitted_gen = CHANGED;
                }
            }
        }
    }

    /// Forgets every track of `pid` (it exited).
    pub fn forget_process(&mut self, pid: u32) {
        self.cache.clear();
        self.map.retain(|_, info| info.pid != Some(pid));
    }

    /// Forgets a thread's tracks (it exited).
    pub fn forget_thread(&mut self, tid: u32) {
        self.cache.clear();
        self.map.remove(&TrackKey::Thread(tid));
        self.map.remove(&TrackKey::OffCpu(tid));
    }

    /// Tracks known (tests check that forgetting a process drops its tracks).
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.map.len()
    }
}

fn named(uuid: u64, parent: Option<u64>, name: &str) -> TrackDescriptor {
    TrackDescriptor {
        uuid: Some(uuid),
        parent_uuid: parent,
        name: Some(name.to_owned()),
        ..Default::default()
    }
}

fn counter(uuid: u64, parent: Option<u64>, name: &str, unit: i32) -> TrackDescriptor {
    TrackDescriptor {
        counter: Some(CounterDescriptor { unit: Some(unit) }),
        ..named(uuid, parent, name)
    }
}

fn describe(
    key: &TrackKey,
    uuid: u64,
    parent: Option<u64>,
    hint: Hint<'_>,
    read_proc: bool,
) -> (TrackDescriptor, Option<u32>) {
    match key {
        TrackKey::Ingero => (named(uuid, parent, TrackName::Ingero.text()), None),
        TrackKey::Driver => (named(uuid, parent, TrackName::Driver.text()), None),
        TrackKey::EventsPerSecond => (
            counter(
                uuid,
                parent,
                TrackName::EventsPerSecond.text(),
                counter_unit::COUNT,
            ),
            None,
        ),
        TrackKey::Drops => (
            counter(uuid, parent, TrackName::Drops.text(), counter_unit::COUNT),
            None,
        ),
        TrackKey::Process(pid) => (
            TrackDescriptor {
                uuid: Some(uuid),
                process: Some(process_descriptor(*pid, hint.comm, read_proc)),
                ..Default::default()
            },
            Some(*pid),
        ),
        TrackKey::Thread(tid) => {
            let pid = if hint.pid == 0 { *tid } else { hint.pid };
            (
                TrackDescriptor {
                    uuid: Some(uuid),
                    parent_uuid: parent,
                    thread: Some(ThreadDescriptor {
                        pid: Some(pid as i32),
                        tid: Some(*tid as i32),
                        thread_name: Some(hint.comm.to_owned()),
                    }),
                    ..Default::default()
                },
                Some(pid),
            )
        }
        TrackKey::OffCpu(_) => (
            named(uuid, parent, TrackName::OffCpu.text()),
            Some(hint.pid),
        ),
        TrackKey::Labels(scope) => {
            let name = if scope.is_some() {
                TrackName::Labels.text()
            } else {
                TrackName::TraceWide.text()
            };
            let mut d = named(uuid, parent, name);
            d.child_ordering = Some(CHILD_ORDERING_CHRONOLOGICAL);
            (d, *scope)
        }
        TrackKey::State(scope, label) => (named(uuid, parent, label), *scope),
        TrackKey::SpanLane(scope, lane) => {
            let name = if *lane == 0 {
                TrackName::Spans.text().to_owned()
            } else {
                format!("{} #{}", TrackName::Spans.text(), lane + 1)
            };
            (named(uuid, parent, &name), *scope)
        }
        TrackKey::Nvtx(_, domain) => {
            let name = match domain {
                None => TrackName::Nvtx.text().to_owned(),
                Some(d) => format!("{}{NVTX_DOMAIN_SEPARATOR}{d}", TrackName::Nvtx.text()),
            };
            (named(uuid, parent, &name), Some(hint.pid))
        }
        TrackKey::NvtxLane(pid, lane) => {
            let name = if *lane == 0 {
                TrackName::NvtxRanges.text().to_owned()
            } else {
                format!("{} #{}", TrackName::NvtxRanges.text(), lane + 1)
            };
            (named(uuid, parent, &name), Some(*pid))
        }
        TrackKey::DeviceMemory(pid) => (
            counter(
                uuid,
                parent,
                TrackName::DeviceMemory.text(),
                counter_unit::SIZE_BYTES,
            ),
            Some(*pid),
        ),
    }
}

/// Name and command line from `/proc`, falling back to the event's task name when the process
/// is gone (short-lived processes often are by the time their first event is written).
fn process_descriptor(pid: u32, comm: &str, read_proc: bool) -> ProcessDescriptor {
    let (name, cmdline) = if read_proc {
        read_proc_identity(pid)
    } else {
        (None, Vec::new())
    };
    ProcessDescriptor {
        pid: Some(pid as i32),
        cmdline,
        process_name: Some(name.unwrap_or_else(|| comm.to_owned())),
        process_labels: Vec::new(),
    }
}

/// `/proc/<pid>/comm` and the NUL-separated `/proc/<pid>/cmdline`; missing ones are empty.
pub fn read_proc_identity(pid: u32) -> (Option<String>, Vec<String>) {
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .ok()
        .map(|s| s.trim_end().to_owned());
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|raw| {
            raw.split(|b| *b == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect()
        })
        .unwrap_or_default();
    (comm, cmdline)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parents_first_once_per_file() {
        let mut t = Tracks::new(false);
        let mut out = Vec::new();
        let hint = Hint {
            pid: 10,
            comm: "python",
        };
        let off = t.ensure(&TrackKey::OffCpu(11), hint, &mut out);
        let kinds: Vec<_> = out
            .iter()
            .map(|d| (d.process.is_some(), d.thread.is_some(), d.name.clone()))
            .collect();
        assert_eq!(
            kinds,
            vec![
                (true, false, None),
                (false, true, None),
                (false, false, Some("off-CPU".into()))
            ]
        );
        assert_eq!(out[1].parent_uuid, out[0].uuid);
        assert_eq!(out[2].parent_uuid, out[1].uuid);
        assert_eq!(out[2].uuid, Some(off));
        out.clear();
        assert_eq!(t.ensure(&TrackKey::OffCpu(11), hint, &mut out), off);
        assert!(out.is_empty(), "already described in this file");
        t.new_file();
        t.ensure(&TrackKey::OffCpu(11), hint, &mut out);
        assert_eq!(out.len(), 3, "re-described after rotation");
        assert_eq!(out[2].uuid, Some(off), "same uuid");
    }

    /// [`Tracks::ensure`] then [`Tracks::cache_name`], as the recorder's slow path does.
    fn ensure_thread(t: &mut Tracks, kind: ThreadTrack, tid: u32, name: &str) -> u64 {
        let key = match kind {
            ThreadTrack::Thread => TrackKey::Thread(tid),
            ThreadTrack::OffCpu => TrackKey::OffCpu(tid),
        };
        t.rename_thread(tid, name);
        let uuid = t.ensure(
            &key,
            Hint {
                pid: 10,
                comm: name,
            },
            &mut Vec::new(),
        );
        t.cache_name(kind, tid, &Comm::from_str_lossy(name));
        uuid
    }

    #[test]
    fn thread_cache_holds_only_tracks_described_in_this_file() {
        let mut t = Tracks::new(false);
        let p = Comm::from_str_lossy("p");
        assert_eq!(t.cached(ThreadTrack::Thread, 11, &p), None);
        let th = ensure_thread(&mut t, ThreadTrack::Thread, 11, "p");
        let off = ensure_thread(&mut t, ThreadTrack::OffCpu, 11, "p");
        assert_eq!(t.cached(ThreadTrack::Thread, 11, &p), Some(th));
        assert_eq!(t.cached(ThreadTrack::OffCpu, 11, &p), Some(off));
        // Same slot, other tid: evicts, and the evicted one comes back through `ensure`.
        let other = 11 + CACHE_SLOTS as u32;
        ensure_thread(&mut t, ThreadTrack::Thread, other, "p");
        assert_eq!(t.cached(ThreadTrack::Thread, 11, &p), None);
        let mut out = Vec::new();
        let hint = Hint { pid: 10, comm: "p" };
        assert_eq!(t.ensure(&TrackKey::Thread(11), hint, &mut out), th);
        assert!(out.is_empty());
        t.cache_name(ThreadTrack::Thread, 11, &p);
        assert_eq!(t.cached(ThreadTrack::Thread, 11, &p), Some(th));
        t.new_file();
        assert_eq!(
            t.cached(ThreadTrack::Thread, 11, &p),
            None,
            "describe again"
        );
        ensure_thread(&mut t, ThreadTrack::Thread, 11, "p");
        t.refresh_process(10, "q");
        assert_eq!(
            t.cached(ThreadTrack::Thread, 11, &p),
            None,
            "re-described after exec"
        );
        ensure_thread(&mut t, ThreadTrack::Thread, 11, "p");
        t.forget_thread(11);
        assert_eq!(t.cached(ThreadTrack::Thread, 11, &p), None, "forgotten");
    }

    #[test]
    fn a_renamed_thread_is_described_again_under_its_new_name() {
        let mut t = Tracks::new(false);
        let th = ensure_thread(&mut t, ThreadTrack::Thread, 11, "python3");
        let off = ensure_thread(&mut t, ThreadTrack::OffCpu, 11, "python3");
        let renamed = Comm::from_str_lossy("pt_autograd_0");
        assert_eq!(
            t.cached(ThreadTrack::Thread, 11, &renamed),
            None,
            "an event under another name misses the cache"
        );
        t.rename_thread(11, "pt_autograd_0");
        let mut out = Vec::new();
        let hint = Hint {
            pid: 10,
            comm: "pt_autograd_0",
        };
        assert_eq!(t.ensure(&TrackKey::OffCpu(11), hint, &mut out), off);
        let names: Vec<_> = out
            .iter()
            .map(|d| {
                (
                    d.uuid,
                    d.thread.as_ref().and_then(|t| t.thread_name.clone()),
                )
            })
            .collect();
        assert_eq!(
            names,
            vec![(Some(th), Some("pt_autograd_0".into())), (Some(off), None)],
            "the thread and its off-CPU track, same uuids, the thread under its new name"
        );
        out.clear();
        t.rename_thread(11, "pt_autograd_0");
        t.ensure(&TrackKey::Thread(11), hint, &mut out);
        assert!(out.is_empty(), "the same name again changes nothing");
    }

    #[test]
    fn exit_forgets_the_process() {
        let mut t = Tracks::new(false);
        let mut out = Vec::new();
        let hint = Hint {
            pid: 10,
            comm: "python",
        };
        t.ensure(&TrackKey::Thread(11), hint, &mut out);
        t.ensure(&TrackKey::State(Some(10), "step".into()), hint, &mut out);
        t.ensure(&TrackKey::State(None, "step".into()), hint, &mut out);
        t.forget_process(10);
        assert_eq!(
            t.len(),
            2,
            "only the trace-wide tracks are left: {}",
            t.len()
        );
    }

    #[test]
    fn own_process_is_read_from_proc() {
        let (comm, cmdline) = read_proc_identity(std::process::id());
        assert!(comm.is_some_and(|c| !c.is_empty()));
        assert!(!cmdline.is_empty());
        let (comm, cmdline) = read_proc_identity(u32::MAX);
        assert!(
            comm.is_none() && cmdline.is_empty(),
            "a vanished process is tolerated"
        );
    }
}
