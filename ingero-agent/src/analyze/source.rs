//! Which files to read: `--trace PATH` (a file, or a directory whose `*.pftrace` files are read
//! oldest first; a directory of several hosts' recordings is split by host in `fleet/`), else
//! `$INGERO_TRACE`, else the newest recording in `~/.ingero/traces/` of the
//! invoking user (under sudo, `SUDO_USER`'s home) — that is, its newest file and the rotated
//! files of the same session before it.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use ingero_trace::model::ReadRecord;
use ingero_trace::read::{TimeRange, TraceReader, recording_files};
use ingero_trace::write::trace_files_in;

/// Environment variable naming the default recording (file or directory).
pub const TRACE_ENV: &str = "INGERO_TRACE";

/// The recording named: `--trace PATH`, else `$INGERO_TRACE`; `None` for the default one.
pub fn chosen(explicit: Option<&Path>) -> Option<PathBuf> {
    match explicit {
        Some(p) => Some(p.to_path_buf()),
        None => std::env::var_os(TRACE_ENV)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from),
    }
}

/// The files of the recording to analyse, oldest first, and what to call it in reports.
pub fn resolve(explicit: Option<&Path>) -> Result<(Vec<PathBuf>, PathBuf)> {
    if let Some(path) = chosen(explicit) {
        if !path.exists() {
            bail!("{} does not exist", path.display());
        }
        let files = recording_files(&path)?;
        if files.is_empty() {
            bail!("{} holds no .pftrace files", path.display());
        }
        return Ok((files, path));
    }
    let dir = default_dir()?;
    let files = newest_session(&dir)?;
    let shown = files.last().cloned().unwrap_or(dir);
    Ok((files, shown))
}

/// `~/.ingero/traces/` of the invoking user.
pub fn default_dir() -> Result<PathBuf> {
    let home = match std::env::var("SUDO_USER")
        .ok()
        .filter(|u| !u.is_empty() && u != "root")
    {
        Some(user) => {
            let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
            passwd_home(&passwd, &user).unwrap_or_else(|| PathBuf::from("/home").join(&user))
        }
        None => {
            PathBuf::from(std::env::var_os("HOME").context("HOME is not set; pass --trace PATH")?)
        }
    };
    Ok(home.join(".ingero").join("traces"))
}

/// The home directory of `user` in a passwd file's text.
fn passwd_home(passwd: &str, user: &str) -> Option<PathBuf> {
    passwd.lines().find_map(|line| {
        let f: Vec<&str> = line.split(':').collect();
        (f.len() >= 7 && f[0] == user).then(|| PathBuf::from(f[5]))
    })
}

/// The newest file in `dir` and the earlier files of its session (back to the file whose
/// session packet says `file_index` 0), oldest first.
pub fn newest_session(dir: &Path) -> Result<Vec<PathBuf>> {
    let files = trace_files_in(dir).with_context(|| {
        format!(
            "no recordings found in {} (record one with `ingero trace --record`, or pass --trace)",
            dir.display()
        )
    })?;
    if files.is_empty() {
        bail!(
            "no recordings in {} (record one with `ingero trace --record`, or pass --trace)",
            dir.display()
        );
    }
    let mut out = Vec::new();
    for f in files.iter().rev() {
        out.push(f.clone());
        if file_index(f).unwrap_or(0) == 0 {
            break;
        }
    }
    out.reverse();
    Ok(out)
}

/// The rotation index in a file's session packet (its first records).
fn file_index(file: &Path) -> Option<u64> {
    // Its first records only: a helper would inflate chunks that are never read.
    let reader =
        TraceReader::from_files(vec![file.to_path_buf()], TimeRange::all()).inflate_ahead(false);
    for rec in reader.take(64) {
        if let Ok(ReadRecord::Session(s)) = rec {
            return Some(s.file_index);
        }
    }
    None
}
