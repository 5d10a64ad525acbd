//! The NVTX socket: accepts the injection library's connections (one per process), reads its
//! hello and frames, pairs the stream into ranges ([`Session`]) and queues them to the
//! timeline. The peer's pid comes from the kernel (`SO_PEERCRED`), not from the hello. The
//! queue is bounded: when the timeline falls behind, ranges are dropped and counted, and a
//! connection's reads (never the application: the library buffers and drops on its side)
//! wait for nothing.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use anyhow::Context;
use ingero_nvtx::wire::{self, HELLO_LEN};
use ingero_trace::model::NvtxRecord;
use tokio::io::AsyncReadExt;
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{mpsc, watch};
use tokio::task::{JoinHandle, JoinSet};

use super::pairing::{Limits, Session};
use crate::annotate::listener::{SocketIdentity, bind_socket, remove_if_ours};

/// Most connections at once (more are accepted and closed).
const MAX_CONNS: usize = 4096;
/// Ranges queued to the timeline.
const QUEUE: usize = 1 << 17;
/// A hello must arrive this soon after connecting.
const HELLO_TIMEOUT: Duration = Duration::from_secs(5);

/// What the server counted (all connections together).
#[derive(Debug, Default)]
pub struct NvtxCounters {
    pub connections: AtomicU64,
    pub records: AtomicU64,
    pub queue_full: AtomicU64,
    pub refused: AtomicU64,
    pub bad_streams: AtomicU64,
    pub unmatched: AtomicU64,
    pub over_limit: AtomicU64,
    pub unclosed: AtomicU64,
    pub library_dropped: AtomicU64,
    /// Records naming a thread not of the sending process (moved to the process's own).
    pub foreign_tids: AtomicU64,
}

/// The counters at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NvtxCountersSnapshot {
    pub connections: u64,
    pub records: u64,
    pub queue_full: u64,
    pub refused: u64,
    pub bad_streams: u64,
    pub unmatched: u64,
    pub over_limit: u64,
    pub unclosed: u64,
    pub library_dropped: u64,
    pub foreign_tids: u64,
}

impl NvtxCounters {
    pub fn snapshot(&self) -> NvtxCountersSnapshot {
        NvtxCountersSnapshot {
            connections: self.connections.load(Relaxed),
            records: self.records.load(Relaxed),
            queue_full: self.queue_full.load(Relaxed),
            refused: self.refused.load(Relaxed),
            bad_streams: self.bad_streams.load(Relaxed),
            unmatched: self.unmatched.load(Relaxed),
            over_limit: self.over_limit.load(Relaxed),
            unclosed: self.unclosed.load(Relaxed),
            library_dropped: self.library_dropped.load(Relaxed),
            foreign_tids: self.foreign_tids.load(Relaxed),
        }
    }
}

/// The processes that connected (by the kernel's peer pid), so the NVTX fallback's uprobes do
/// not record their calls a second time. A pid stays until its process exits (the pipeline
/// removes it on the exit event, which comes after the process's last fallback record): a
/// process that disconnects early still had its library. Bounded: when full, pids whose
/// process is gone are forgotten first; past that, a connection is not remembered (counted).
#[derive(Debug, Default)]
pub struct ConnectedPids {
    pids: std::sync::Mutex<std::collections::HashSet<u32>>,
    pub not_remembered: AtomicU64,
}

const MAX_CONNECTED_PIDS: usize = 65_536;

impl ConnectedPids {
    fn set(&self) -> std::sync::MutexGuard<'_, std::collections::HashSet<u32>> {
        // A panic while holding the lock leaves a plain set behind: still usable.
        self.pids.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn insert(&self, pid: u32) {
        let mut set = self.set();
        if set.len() >= MAX_CONNECTED_PIDS {
            set.retain(|p| Path::new(&format!("/proc/{p}")).exists());
        }
        if set.len() >= MAX_CONNECTED_PIDS {
            self.not_remembered.fetch_add(1, Relaxed);
            return;
        }
        set.insert(pid);
    }

    pub fn contains(&self, pid: u32) -> bool {
        self.set().contains(&pid)
    }

    pub fn remove(&self, pid: u32) {
        self.set().remove(&pid);
    }
}

/// A running NVTX socket.
#[derive(Debug)]
pub struct NvtxServer {
    path: PathBuf,
    identity: SocketIdentity,
    counters: Arc<NvtxCounters>,
    connected: Arc<ConnectedPids>,
    stop: watch::Sender<bool>,
    accept_task: JoinHandle<()>,
}

/// Where and for whom the socket is opened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NvtxSocketConfig {
    pub path: PathBuf,
    /// The directory is the agent's own (its mode may be set).
    pub manage_dir: bool,
    /// Open to this group (as the annotation socket).
    pub gid: Option<u32>,
    /// Also let this user connect (`trace -- CMD` run as the invoking user): the socket is
    /// given to it, and the agent's own directory made traversable (not listable).
    pub allowed_uid: Option<u32>,
}

impl NvtxServer {
    /// Binds the socket and starts accepting; ranges arrive on the receiver.
    pub async fn start(
        cfg: &NvtxSocketConfig,
    ) -> anyhow::Result<(NvtxServer, mpsc::Receiver<NvtxRecord>)> {
        let bound = bind_socket(&cfg.path, cfg.gid, cfg.manage_dir)
            .await
            .with_context(|| format!("starting the NVTX socket {}", cfg.path.display()))?;
        if let Some(uid) = cfg.allowed_uid {
            open_to_user(&bound.path, uid, cfg.manage_dir)?;
        }
        open_to_all(&bound.path, cfg.manage_dir)?;
        let counters = Arc::new(NvtxCounters::default());
        let connected = Arc::new(ConnectedPids::default());
        let (tx, rx) = mpsc::channel(QUEUE);
        let (stop, stop_rx) = watch::channel(false);
        let shared = Shared {
            tx,
            counters: counters.clone(),
            connected: connected.clone(),
        };
        let accept_task = tokio::spawn(accept_loop(bound.listener, shared, stop_rx));
        Ok((
            NvtxServer {
                path: bound.path,
                identity: bound.identity,
                counters,
                connected,
                stop,
                accept_task,
            },
            rx,
        ))
    }

    pub fn socket_path(&self) -> &Path {
        &self.path
    }

    pub fn counters(&self) -> NvtxCountersSnapshot {
        self.counters.snapshot()
    }

    /// The live counters, for the pipeline's statistics.
    /// The processes connected so far.
    pub fn connected_pids(&self) -> Arc<ConnectedPids> {
        self.connected.clone()
    }

    pub fn shared_counters(&self) -> Arc<NvtxCounters> {
        self.counters.clone()
    }

    /// Stops accepting and reading (open ranges of connected processes are closed as
    /// unclosed), and removes the socket if it is still ours.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        if let Err(e) = self.accept_task.await {
            tracing::warn!(error = %e, "NVTX accept loop ended abnormally");
        }
        remove_if_ours(&self.path, self.identity);
    }
}

/// Lets every local process connect. What a process sends describes that process only: its
/// pid is the kernel's (`SO_PEERCRED`) and a thread id that is a live thread of another
/// process is taken as the sender's own, so no one can put ranges on another process's
/// timeline; the queue and the connections are bounded.
fn open_to_all(path: &Path, manage_dir: bool) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666))
        .with_context(|| format!("opening {} to local processes", path.display()))?;
    allow_search(path, manage_dir)
}

/// Lets `uid` connect: the socket becomes its.
fn open_to_user(path: &Path, uid: u32, manage_dir: bool) -> anyhow::Result<()> {
    std::os::unix::fs::chown(path, Some(uid), None)
        .with_context(|| format!("giving {} to uid {uid}", path.display()))?;
    allow_search(path, manage_dir)
}

/// Gives others search permission on the socket's directory when it is the agent's own
/// (entering it, not listing it; the annotation socket in it keeps its own mode).
fn allow_search(path: &Path, manage_dir: bool) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let (true, Some(dir)) = (manage_dir, path.parent()) else {
        return Ok(());
    };
    let mode = std::fs::metadata(dir)
        .with_context(|| format!("inspecting {}", dir.display()))?
        .permissions()
        .mode();
    std::fs::set_permissions(
        dir,
        std::fs::Permissions::from_mode((mode & 0o7777) | 0o001),
    )
    .with_context(|| format!("letting others enter {}", dir.display()))
}

/// What every connection's task shares.
#[derive(Clone)]
struct Shared {
    tx: mpsc::Sender<NvtxRecord>,
    counters: Arc<NvtxCounters>,
    connected: Arc<ConnectedPids>,
}

async fn accept_loop(listener: UnixListener, shared: Shared, mut stop: watch::Receiver<bool>) {
    let counters = shared.counters.clone();
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    if conns.len() >= MAX_CONNS {
                        counters.refused.fetch_add(1, Relaxed);
                        continue;
                    }
                    counters.connections.fetch_add(1, Relaxed);
                    conns.spawn(serve(stream, shared.clone(), stop.clone()));
                }
                Err(e) => {
                    tracing::warn!(error = %e, "accepting an NVTX connection");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
        }
    }
    // Each connection sees `stop` too and closes its open ranges.
    while conns.join_next().await.is_some() {}
}

/// One process's connection, to its end.
async fn serve(mut stream: UnixStream, shared: Shared, mut stop: watch::Receiver<bool>) {
    let Shared {
        tx,
        counters,
        connected,
    } = shared;
    let peer_pid = stream
        .peer_cred()
        .ok()
        .and_then(|c| c.pid())
        .and_then(|p| u32::try_from(p).ok());
    // At once, before the hello: the process's first NVTX call (the one that loaded the
    // library) is already in the fallback's ring.
    if let Some(pid) = peer_pid {
        connected.insert(pid);
    }
    let mut hello = [0u8; HELLO_LEN];
    let hello = match tokio::time::timeout(HELLO_TIMEOUT, stream.read_exact(&mut hello)).await {
        Ok(Ok(_)) => wire::decode_hello(&hello).ok(),
        _ => None,
    };
    let Some(hello) = hello else {
        counters.bad_streams.fetch_add(1, Relaxed);
        return;
    };
    let pid = peer_pid.unwrap_or(hello.pid);
    let mut session = Session::new(pid, Limits::default());
    let mut names = ThreadNames::new(pid);
    let mut frame = Vec::new();
    let mut done = Vec::new();
    loop {
        let mut prefix = [0u8; 4];
        let read = tokio::select! {
            _ = stop.changed() => break,
            r = stream.read_exact(&mut prefix) => r,
        };
        if read.is_err() {
            break; // the process closed the connection (or went away)
        }
        let Ok(len) = wire::frame_len(prefix) else {
            counters.bad_streams.fetch_add(1, Relaxed);
            break;
        };
        frame.resize(len, 0);
        if stream.read_exact(&mut frame).await.is_err() {
            break;
        }
        for rec in wire::records(&frame) {
            match rec {
                Ok(r) => session.feed(&r, &mut |n| done.push(n)),
                Err(_) => {
                    counters.bad_streams.fetch_add(1, Relaxed);
                    break;
                }
            }
        }
        send(&mut done, &mut names, &tx, &counters);
    }
    let c = session.close(0, &mut |n| done.push(n));
    send(&mut done, &mut names, &tx, &counters);
    counters.unmatched.fetch_add(c.unmatched, Relaxed);
    counters.over_limit.fetch_add(c.over_limit, Relaxed);
    counters.unclosed.fetch_add(c.unclosed, Relaxed);
    counters
        .library_dropped
        .fetch_add(c.library_dropped, Relaxed);
}

/// Names the completed ranges' threads (NVTX's name, else the kernel's) and queues them.
fn send(
    done: &mut Vec<NvtxRecord>,
    names: &mut ThreadNames,
    tx: &mpsc::Sender<NvtxRecord>,
    counters: &NvtxCounters,
) {
    for r in done.drain(..) {
        let mut r = r;
        if !names.belongs(r.tid) {
            counters.foreign_tids.fetch_add(1, Relaxed);
            r.tid = r.pid;
        }
        if let Some(t) = r.end_tid {
            if !names.belongs(t) {
                r.end_tid = None;
            }
        }
        if r.thread_name.is_empty() {
            r.thread_name = names.of(r.tid);
        }
        match tx.try_send(r) {
            Ok(()) => {
                counters.records.fetch_add(1, Relaxed);
            }
            Err(_) => {
                counters.queue_full.fetch_add(1, Relaxed);
            }
        }
    }
}

/// Thread names from `/proc/<pid>/task/<tid>/comm`, read once per thread (bounded).
struct ThreadNames {
    pid: u32,
    cache: HashMap<u32, String>,
}

const MAX_THREAD_NAMES: usize = 4096;

impl ThreadNames {
    fn new(pid: u32) -> ThreadNames {
        ThreadNames {
            pid,
            cache: HashMap::new(),
        }
    }

    /// Whether `tid` may be one of the process's threads: false only when it is a live thread
    /// of another process (a thread that already exited cannot be checked, and is believed).
    fn belongs(&mut self, tid: u32) -> bool {
        if tid == self.pid || self.cache.contains_key(&tid) {
            return true;
        }
        let tgid = std::fs::read_to_string(format!("/proc/{tid}/status"))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("Tgid:"))
                    .and_then(|v| v.trim().parse::<u32>().ok())
            });
        match tgid {
            Some(t) if t != self.pid => false,
            _ => {
                self.of(tid);
                true
            }
        }
    }

    fn of(&mut self, tid: u32) -> String {
        if let Some(n) = self.cache.get(&tid) {
            return n.clone();
        }
        let name = std::fs::read_to_string(format!("/proc/{}/task/{tid}/comm", self.pid))
            .map(|s| s.trim_end().to_owned())
            .unwrap_or_default();
        if self.cache.len() < MAX_THREAD_NAMES {
            self.cache.insert(tid, name.clone());
        }
        name
    }
}
