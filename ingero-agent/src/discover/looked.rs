//! Which mapped files have the CUDA runtime linked in ([`super::embedded`]), remembered across
//! rescans so that each file is read once, and read on a thread of its own once tracing runs:
//! a program's `.symtab` can be large (tens of MB unstripped), and the event loop that drains
//! the rings must not wait on it.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
    sync::mpsc::{self, Receiver, SyncSender, TrySendError},
};

use super::LibraryFile;
use super::embedded::linked_runtime_at;
use super::proc_maps::{executable_mappings, reachable};

/// A mapped file as a maps line names it: its inode and its path.
type Key = (u64, PathBuf);

/// The most files [`Looked`] remembers. Past it, it starts over: forgetting costs only reading
/// a file's headers again, and a runtime found again is not attached twice (the caller keeps
/// what it attached by inode).
const LOOKED_LIMIT: usize = 65_536;

/// The most files waiting for the reader thread; more wait for a later rescan.
const QUEUE_LIMIT: usize = 256;

/// What the mapped files already looked at hold: the runtime linked in, or nothing.
#[derive(Default)]
pub struct Looked {
    verdicts: BTreeMap<Key, Option<LibraryFile>>,
    /// `Some` once files are read on a thread ([`Looked::read_in_background`]).
    reader: Option<Reader>,
}

struct Reader {
    jobs: SyncSender<(Key, PathBuf)>,
    results: Receiver<(Key, Option<LibraryFile>)>,
    /// Files sent to the thread whose verdict has not come back.
    pending: BTreeSet<Key>,
}

impl Looked {
    /// From now on, files not seen yet are read on a thread of their own: a rescan does not
    /// wait for them, and a later one finds what they hold. Until then they are read in place
    /// (at start, before tracing, where waiting is what is wanted).
    pub fn read_in_background(&mut self) -> std::io::Result<()> {
        let (jobs, job_rx) = mpsc::sync_channel::<(Key, PathBuf)>(QUEUE_LIMIT);
        let (result_tx, results) = mpsc::channel();
        std::thread::Builder::new()
            .name("ingero-linked-rt".into())
            .spawn(move || {
                // Ends when the `Looked` (the jobs' sender) is dropped.
                for (key, path) in job_rx {
                    let verdict = linked_runtime_at(&path).ok().flatten();
                    if result_tx.send((key, verdict)).is_err() {
                        break;
                    }
                }
            })?;
        self.reader = Some(Reader {
            jobs,
            results,
            pending: BTreeSet::new(),
        });
        Ok(())
    }

    /// How many files have a verdict.
    pub fn len(&self) -> usize {
        self.verdicts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.verdicts.is_empty()
    }

    /// Takes the verdicts the thread has reached.
    fn collect(&mut self) {
        if let Some(reader) = self.reader.as_mut() {
            while let Ok((key, verdict)) = reader.results.try_recv() {
                reader.pending.remove(&key);
                self.verdicts.insert(key, verdict);
            }
        }
    }

    /// The runtime linked into the file `key` names (reached at `path`), when known: read in
    /// place, or handed to the thread (then unknown until a later call).
    fn verdict(&mut self, key: Key, path: impl FnOnce() -> PathBuf) -> Option<&LibraryFile> {
        if !self.verdicts.contains_key(&key) {
            match self.reader.as_mut() {
                None => {
                    let verdict = linked_runtime_at(&path()).ok().flatten();
                    self.verdicts.insert(key.clone(), verdict);
                }
                Some(reader) => {
                    if !reader.pending.contains(&key) {
                        match reader.jobs.try_send((key.clone(), path())) {
                            Ok(()) => {
                                reader.pending.insert(key);
                            }
                            // A full queue: the file is offered again by a later rescan.
                            Err(TrySendError::Full(_)) => {}
                            // The thread is gone: read in place from now on.
                            Err(TrySendError::Disconnected(_)) => self.reader = None,
                        }
                    }
                    return None;
                }
            }
        }
        self.verdicts.get(&key).and_then(Option::as_ref)
    }
}

/// The files a process's maps file maps as code that have the runtime linked in (the process's
/// program, or a library built with it), each once, as far as `looked` knows by now.
/// `proc_dir` is the process's `/proc/<pid>`, through which the paths are reached.
pub fn linked_runtimes_in(proc_dir: &Path, maps: &str, looked: &mut Looked) -> Vec<LibraryFile> {
    looked.collect();
    if looked.verdicts.len() >= LOOKED_LIMIT {
        looked.verdicts.clear();
    }
    let mut found: Vec<LibraryFile> = Vec::new();
    for (inode, path) in executable_mappings(maps) {
        let verdict = looked.verdict((inode, path.to_path_buf()), || reachable(proc_dir, path));
        if let Some(library) = verdict {
            if !found
                .iter()
                .any(|f| (f.dev, f.ino) == (library.dev, library.ino))
            {
                found.push(library.clone());
            }
        }
    }
    found
}
