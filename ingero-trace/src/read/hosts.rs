//! A directory of recordings from several hosts (a distributed job's, copied from each node):
//! its `*.pftrace` files, found recursively, grouped by the machine that wrote them.
//!
//! A file says who wrote it in its session packet (machine id and name, see `write/identity`),
//! so the layout of the directory does not matter: `job/gpu-node-1/*.pftrace`, one flat
//! directory, or a mix. Each host's files are read as one recording on that host's own clock
//! (MONOTONIC clocks of different hosts have nothing in common); hosts relate through
//! REALTIME. Within a host, files go in session order (the session's REALTIME start, then the
//! file's place in its rotation), which survives a copy that loses modification times; a host
//! with a file whose session cannot be read keeps the plain order of modification time and
//! name instead (as [`super::recording_files`] does).

use std::collections::BTreeMap;
use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::{FileDecoder, PacketReader, ReadError, Result};
use crate::model::{ReadRecord, SessionRecord};

/// Directories deeper than this below the one named are not searched (a loop through bind
/// mounts, or a mistake such as `--trace /`, must end).
pub const MAX_DEPTH: usize = 16;
/// Packets read from the start of a file to find its session packet (the writer puts it
/// among the first few).
const SESSION_PROBE_PACKETS: usize = 64;

/// One host's files among a directory of several hosts' recordings.
#[derive(Clone, Debug, PartialEq)]
pub struct HostRecording {
    /// What reports call the host: its machine name, with `#` and its machine id in hex
    /// appended when two hosts of the directory go by the same name; `unknown` for files whose
    /// session could not be read.
    pub name: String,
    /// The machine id its packets carry (0: unknown).
    pub machine_id: u32,
    /// The session packet of its first file (host, kernel, clock quality), when readable.
    pub session: Option<SessionRecord>,
    /// Its files, in reading order.
    pub files: Vec<PathBuf>,
}

/// A file found, with what its start says.
struct Found {
    path: PathBuf,
    mtime: Option<SystemTime>,
    session: Option<SessionRecord>,
}

/// The hosts whose recordings `path` holds: a file is one host; a directory is searched
/// recursively (at most [`MAX_DEPTH`] levels; symbolic links to directories are not followed)
/// and its files grouped by machine (id and name). Hosts come sorted by name
/// ([`natural_cmp`]). Empty when
/// there is no `*.pftrace` file; an error when `path` does not exist or a directory cannot be
/// listed.
pub fn host_recordings(path: &Path) -> Result<Vec<HostRecording>> {
    let mut found = Vec::new();
    if path.is_dir() {
        list(path, 0, &mut found)?;
    } else {
        let meta = std::fs::metadata(path).map_err(|source| ReadError::Open {
            path: path.to_path_buf(),
            source,
        })?;
        found.push((meta.modified().ok(), path.to_path_buf()));
    }
    let found = found
        .into_iter()
        .map(|(mtime, path)| Found {
            session: first_session(&path),
            path,
            mtime,
        })
        .collect();
    Ok(group(found))
}

/// Appends the `*.pftrace` files under `dir` to `out`.
fn list(dir: &Path, depth: usize, out: &mut Vec<(Option<SystemTime>, PathBuf)>) -> Result<()> {
    let err = |source| ReadError::List {
        path: dir.to_path_buf(),
        source,
    };
    for entry in std::fs::read_dir(dir).map_err(err)? {
        let entry = entry.map_err(err)?;
        let p = entry.path();
        // The entry's own type: a symbolic link to a directory is not descended into.
        let kind = entry.file_type().map_err(err)?;
        if kind.is_dir() {
            if depth < MAX_DEPTH {
                list(&p, depth + 1, out)?;
            }
            continue;
        }
        if p.extension().is_some_and(|e| e == crate::write::FILE_EXT) {
            let meta = std::fs::metadata(&p);
            if meta.as_ref().is_ok_and(|m| m.is_file()) {
                out.push((meta.and_then(|m| m.modified()).ok(), p));
            }
        }
    }
    Ok(())
}

/// The session packet among a file's first packets; `None` when there is none or the file
/// cannot be read (reading it for the analysis then says why).
pub fn first_session(path: &Path) -> Option<SessionRecord> {
    let file = File::open(path).ok()?;
    // A small buffer: the session is in the first kilobytes, and a directory may hold
    // thousands of files.
    let mut packets = PacketReader::new(BufReader::with_capacity(64 << 10, file));
    let mut decoder = FileDecoder::new();
    let (mut buf, mut out) = (Vec::new(), Vec::new());
    for _ in 0..SESSION_PROBE_PACKETS {
        if !packets.next_into(&mut buf).ok()? {
            return None;
        }
        decoder.packet(&buf, &mut out).ok()?;
        if let Some(s) = out.iter().find_map(|r| match r {
            ReadRecord::Session(s) => Some(s.clone()),
            _ => None,
        }) {
            return Some(s);
        }
        out.clear();
    }
    None
}

/// The machine a session names: its id and its name (the host name for older sessions).
fn machine_of(s: &SessionRecord) -> (u32, String) {
    let name = s.info.machine();
    let name = if name.is_empty() { "unknown" } else { name };
    (s.machine_id, name.to_owned())
}

fn group(found: Vec<Found>) -> Vec<HostRecording> {
    let mut by_machine: BTreeMap<(u32, String), Vec<Found>> = BTreeMap::new();
    let mut unnamed = Vec::new();
    for f in found {
        match &f.session {
            Some(s) => by_machine.entry(machine_of(s)).or_default().push(f),
            None => unnamed.push(f),
        }
    }
    // Files without a session belong to the only host there is; among several, to none.
    if !unnamed.is_empty() {
        let only = by_machine.len() == 1;
        match by_machine.values_mut().next() {
            Some(files) if only => files.append(&mut unnamed),
            _ => {
                by_machine.insert((0, "unknown".to_owned()), std::mem::take(&mut unnamed));
            }
        }
    }
    let mut names: BTreeMap<&str, usize> = BTreeMap::new();
    for (_, name) in by_machine.keys() {
        *names.entry(name.as_str()).or_default() += 1;
    }
    let shared: Vec<String> = names
        .into_iter()
        .filter(|(_, n)| *n > 1)
        .map(|(name, _)| name.to_owned())
        .collect();
    let mut hosts: Vec<HostRecording> = by_machine
        .into_iter()
        .map(|((machine_id, name), mut files)| {
            order(&mut files);
            let name = if shared.contains(&name) {
                format!("{name}#{machine_id:x}")
            } else {
                name
            };
            HostRecording {
                name,
                machine_id,
                session: files.iter().find_map(|f| f.session.clone()),
                files: files.into_iter().map(|f| f.path).collect(),
            }
        })
        .collect();
    hosts.sort_by(|a, b| natural_cmp(&a.name, &b.name).then(a.machine_id.cmp(&b.machine_id)));
    hosts
}

/// Names in natural order: runs of digits compare as numbers, so `gpu-node-2` comes before
/// `gpu-node-17`.
pub fn natural_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    let (mut x, mut y) = (a.as_bytes(), b.as_bytes());
    loop {
        match (x.first(), y.first()) {
            (None, None) => return a.cmp(b),
            (None, Some(_)) => return std::cmp::Ordering::Less,
            (Some(_), None) => return std::cmp::Ordering::Greater,
            (Some(p), Some(q)) if p.is_ascii_digit() && q.is_ascii_digit() => {
                let run = |s: &[u8]| s.iter().take_while(|c| c.is_ascii_digit()).count();
                let (n, m) = (run(x), run(y));
                // Without leading zeros, the longer run is the larger number.
                let trim = |s: &[u8]| {
                    let z = s.iter().take_while(|c| **c == b'0').count();
                    s[z..].to_vec()
                };
                let (dx, dy) = (trim(&x[..n]), trim(&y[..m]));
                let o = dx.len().cmp(&dy.len()).then_with(|| dx.cmp(&dy));
                if o.is_ne() {
                    return o;
                }
                x = &x[n..];
                y = &y[m..];
            }
            (Some(p), Some(q)) => {
                if p != q {
                    return p.cmp(q);
                }
                x = &x[1..];
                y = &y[1..];
            }
        }
    }
}

/// Session order when every file has a session, else modification time and name.
fn order(files: &mut [Found]) {
    if files.iter().all(|f| f.session.is_some()) {
        files.sort_by(|a, b| {
            let key = |f: &Found| {
                f.session
                    .as_ref()
                    .map(|s| (s.started_realtime_ns, s.file_index))
            };
            key(a)
                .cmp(&key(b))
                .then(a.mtime.cmp(&b.mtime))
                .then_with(|| a.path.cmp(&b.path))
        });
    } else {
        files.sort_by(|a, b| a.mtime.cmp(&b.mtime).then_with(|| a.path.cmp(&b.path)));
    }
}
