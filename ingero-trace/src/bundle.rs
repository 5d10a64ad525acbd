//! The Perfetto bundle of a multi-host job: one TAR archive holding every host's recording
//! files and a `perfetto_manifest.json` that names each file's machine, which the Perfetto UI
//! and trace processor (v58+) open as one timeline with one machine per host.
//!
//! # Layout
//! - `perfetto_manifest.json` first (trace processor reads it before any trace whatever its
//!   place), then `HOST/FILE.pftrace` for each host's files in reading order. Member names
//!   stay within 99 bytes (what the Perfetto UI's own TAR writer allows): host and file names
//!   are cut and made portable (letters, digits, `.`, `_`, `-`), and a name that would repeat
//!   gets `-2`, `-3`, ….
//! - The manifest (format version 1, `docs/reference/perfetto-manifest.md` of Perfetto):
//!   `files[].machine.name` puts every file of a host on that host's machine (its rotated files
//!   share it); `trace_time` is REALTIME, onto which every file maps its own clocks through the
//!   REALTIME readings of its clock snapshots, so no host's clock is privileged and hosts line
//!   up by wall-clock time. A known skew of a host is given as a `clocks` entry relating its
//!   REALTIME to the first host's (`offset_ns`). `attributes` carry ingero's version, the hosts
//!   and each host's clock error bound.
//! - Files are copied as they are (their own `machine_id` on every packet and
//!   `SystemInfo.machine_name` agree with the manifest), streamed, never held in memory; the
//!   archive is written to `OUT.partial` and renamed when complete.

use std::cell::Cell;
use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde_json::{Map, Value, json};

use crate::read::HostRecording;

/// The manifest's member name.
pub const MANIFEST: &str = "perfetto_manifest.json";
/// The longest member name the bundle writes.
pub const MAX_MEMBER_NAME: usize = 99;
/// The longest host part of a member name.
const MAX_HOST_PART: usize = 40;

/// Why the bundle could not be written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BundleError {
    /// There is nothing to bundle.
    #[error("no recording files to bundle")]
    Empty,
    /// A file could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// What failed.
        source: std::io::Error,
    },
    /// The archive could not be written.
    #[error("writing {path}: {source}")]
    Write {
        /// The archive.
        path: PathBuf,
        /// What failed.
        source: std::io::Error,
    },
}

/// A known offset of one host's REALTIME clock: at a common instant it reads `T` when the
/// first host's reads `T + offset_ns` (the manifest's sign), so a positive offset moves the host
/// later.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClockOffset {
    /// The host, by its name in the bundle.
    pub host: String,
    /// The offset, ns.
    pub offset_ns: i64,
}

/// One file in the archive.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    /// Its name in the archive.
    pub name: String,
    /// The host it belongs to.
    pub host: String,
    /// Where it was read from.
    pub source: PathBuf,
    /// Bytes.
    pub size: u64,
}

/// What was written.
#[derive(Clone, Debug, PartialEq)]
pub struct Bundle {
    /// The recording files, in archive order.
    pub members: Vec<Member>,
    /// The manifest as written.
    pub manifest: Value,
    /// The archive's size.
    pub bytes: u64,
}

/// A name's portable form: letters, digits, `.`, `_` and `-`; others become `_`; never empty
/// or starting with `.`.
fn portable(s: &str, max: usize) -> String {
    let mut out: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .take(max)
        .collect();
    if out.is_empty() || out.starts_with('.') {
        out.insert(0, '_');
        out.truncate(max);
    }
    out
}

/// `HOST/FILE` within [`MAX_MEMBER_NAME`] bytes (the file's extension kept), not among
/// `taken`.
fn member_name(host: &str, file: &Path, taken: &[String]) -> String {
    let dir = portable(host, MAX_HOST_PART);
    let ext = format!(".{}", crate::write::FILE_EXT);
    let stem = file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stem = stem.strip_suffix(&ext).unwrap_or(&stem);
    // Room for `/`, the extension and a `-NNNNN` to tell repeats apart.
    let room = MAX_MEMBER_NAME - dir.len() - 1 - ext.len() - 6;
    let stem = portable(stem, room);
    let mut name = format!("{dir}/{stem}{ext}");
    let mut n = 2;
    while taken.contains(&name) {
        name = format!("{dir}/{stem}-{n}{ext}");
        n += 1;
    }
    name
}

/// The manifest of `members` (in order; the first host's first file is the reference of
/// `offsets`).
pub fn manifest(members: &[Member], hosts: &[HostRecording], offsets: &[ClockOffset]) -> Value {
    let reference = members.first().map(|m| m.name.clone()).unwrap_or_default();
    let first_host = members.first().map(|m| m.host.clone()).unwrap_or_default();
    let files: Vec<Value> = members
        .iter()
        .map(|m| {
            let mut f = Map::new();
            f.insert("path".into(), json!(m.name));
            f.insert("machine".into(), json!({ "name": m.host }));
            let offset = offsets.iter().find(|o| o.host == m.host);
            if let (Some(o), false) = (offset, m.host == first_host) {
                f.insert(
                    "clocks".into(),
                    json!({
                        "clock": "REALTIME",
                        "sync_to": { "file": reference, "clock": "REALTIME" },
                        "offset_ns": o.offset_ns,
                    }),
                );
            }
            Value::Object(f)
        })
        .collect();
    let mut attributes = Map::new();
    attributes.insert("ingero.version".into(), json!(env!("CARGO_PKG_VERSION")));
    let names: Vec<&str> = hosts.iter().map(|h| h.name.as_str()).collect();
    attributes.insert("ingero.hosts".into(), json!(names.join(",")));
    for h in hosts {
        if let Some(q) = h.session.as_ref().and_then(|s| s.info.clock) {
            attributes.insert(format!("ingero.clock_error.{}", h.name), json!(q.text()));
        }
    }
    json!({
        "perfetto_manifest": {
            "version": 1,
            "trace_time": { "clock": "REALTIME" },
            "files": files,
            "attributes": attributes,
        }
    })
}

/// Reads exactly `left` bytes of a file whose size was taken for its TAR header: one that
/// shrank meanwhile is an error (the header would lie); one that grew (a recording still
/// being written) is cut at that size, which readers take for a truncated last packet.
/// `failed` tells the reading side's errors from the archive's.
struct Exact<'a, R> {
    inner: R,
    left: u64,
    failed: &'a Cell<bool>,
}

impl<R: Read> Read for Exact<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.left == 0 {
            return Ok(0);
        }
        let want = buf
            .len()
            .min(usize::try_from(self.left).unwrap_or(usize::MAX));
        let n = match self.inner.read(&mut buf[..want]) {
            Ok(0) => {
                self.failed.set(true);
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "the file shrank while it was copied",
                ));
            }
            Ok(n) => n,
            Err(e) => {
                self.failed.set(true);
                return Err(e);
            }
        };
        self.left -= n as u64;
        Ok(n)
    }
}

fn header(size: u64, mtime: Option<SystemTime>) -> tar::Header {
    let mut h = tar::Header::new_ustar();
    h.set_size(size);
    h.set_mode(0o644);
    h.set_entry_type(tar::EntryType::Regular);
    let secs = mtime
        .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_secs());
    h.set_mtime(secs);
    h
}

/// Writes the bundle of `hosts`' files to `out`.
pub fn write(
    hosts: &[HostRecording],
    offsets: &[ClockOffset],
    out: &Path,
) -> Result<Bundle, BundleError> {
    let mut members: Vec<Member> = Vec::new();
    for h in hosts {
        for f in &h.files {
            let size = std::fs::metadata(f)
                .map_err(|source| BundleError::Read {
                    path: f.clone(),
                    source,
                })?
                .len();
            let taken: Vec<String> = members.iter().map(|m| m.name.clone()).collect();
            members.push(Member {
                name: member_name(&h.name, f, &taken),
                host: h.name.clone(),
                source: f.clone(),
                size,
            });
        }
    }
    if members.is_empty() {
        return Err(BundleError::Empty);
    }
    let manifest = manifest(&members, hosts, offsets);
    let mut partial = out.as_os_str().to_owned();
    partial.push(".partial");
    let partial = PathBuf::from(partial);
    let written = write_archive(&partial, &manifest, &members);
    let bytes = match written {
        Ok(b) => b,
        Err(e) => {
            // Whatever failed, no half archive is left behind.
            let _ = std::fs::remove_file(&partial);
            return Err(e);
        }
    };
    std::fs::rename(&partial, out).map_err(|source| BundleError::Write {
        path: out.to_path_buf(),
        source,
    })?;
    Ok(Bundle {
        members,
        manifest,
        bytes,
    })
}

fn write_archive(path: &Path, manifest: &Value, members: &[Member]) -> Result<u64, BundleError> {
    let werr = |source| BundleError::Write {
        path: path.to_path_buf(),
        source,
    };
    let file = File::create(path).map_err(werr)?;
    let mut tar = tar::Builder::new(BufWriter::with_capacity(1 << 20, file));
    let text = serde_json::to_vec_pretty(manifest).unwrap_or_default();
    let mut h = header(text.len() as u64, Some(SystemTime::now()));
    tar.append_data(&mut h, MANIFEST, &text[..]).map_err(werr)?;
    for m in members {
        let rerr = |source| BundleError::Read {
            path: m.source.clone(),
            source,
        };
        let f = File::open(&m.source).map_err(rerr)?;
        let mtime = f.metadata().and_then(|md| md.modified()).ok();
        let mut h = header(m.size, mtime);
        let failed = Cell::new(false);
        let data = Exact {
            inner: f,
            left: m.size,
            failed: &failed,
        };
        tar.append_data(&mut h, &m.name, data)
            .map_err(|e| if failed.get() { rerr(e) } else { werr(e) })?;
    }
    let mut w = tar.into_inner().map_err(werr)?;
    w.flush().map_err(werr)?;
    let file = w.into_inner().map_err(|e| werr(e.into_error()))?;
    file.sync_all().map_err(werr)?;
    Ok(file.metadata().map_err(werr)?.len())
}

#[cfg(test)]
#[path = "bundle_tests.rs"]
mod tests;
