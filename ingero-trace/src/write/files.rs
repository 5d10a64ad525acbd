//! Trace files on disk: where they go (the invoking user's `~/.ingero/traces/`, also under
//! sudo), how they are named (by start time), streamed writes, and retention.

use super::error::{Result, WriteError};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// File name prefix and extension of files named by start time; retention only touches these.
pub const FILE_PREFIX: &str = "ingero-";
/// The extension of every trace file (Perfetto's); a recording's directory is read by it.
pub const FILE_EXT: &str = "pftrace";

/// A user to hand files to (the sudo caller).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Owner {
    pub uid: u32,
    pub gid: u32,
}

/// Gives `path` to `owner`, if any.
pub fn give(path: &Path, owner: Option<Owner>) -> Result<()> {
    if let Some(o) = owner {
        std::os::unix::fs::chown(path, Some(o.uid), Some(o.gid)).map_err(|source| {
            WriteError::Chown {
                path: path.to_path_buf(),
                uid: o.uid,
                source,
            }
        })?;
    }
    Ok(())
}

/// The invoking user: under sudo `SUDO_USER` (home from /etc/passwd, ids from `SUDO_UID` /
/// `SUDO_GID`), else the current user's `HOME` with no ownership change.
pub fn invoking_user_home() -> Result<(PathBuf, Option<Owner>)> {
    let sudo_user = std::env::var("SUDO_USER")
        .ok()
        .filter(|u| !u.is_empty() && u != "root");
    let ids = (
        std::env::var("SUDO_UID")
            .ok()
            .and_then(|v| v.parse::<u32>().ok()),
        std::env::var("SUDO_GID")
            .ok()
            .and_then(|v| v.parse::<u32>().ok()),
    );
    if let (Some(user), (Some(uid), Some(gid))) = (sudo_user, ids) {
        let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
        let home =
            passwd_home(&passwd, &user).unwrap_or_else(|| PathBuf::from("/home").join(&user));
        return Ok((home, Some(Owner { uid, gid })));
    }
    let home = std::env::var_os("HOME").ok_or(WriteError::NoHome)?;
    Ok((PathBuf::from(home), None))
}

/// The home directory of `user` in a passwd file's text.
pub fn passwd_home(passwd: &str, user: &str) -> Option<PathBuf> {
    passwd.lines().find_map(|line| {
        let f: Vec<&str> = line.split(':').collect();
        (f.len() >= 7 && f[0] == user).then(|| PathBuf::from(f[5]))
    })
}

/// Creates `dir` and its missing parents, handing each one created to `owner`.
pub fn create_dir_owned(dir: &Path, owner: Option<Owner>) -> Result<()> {
    let mut missing = Vec::new();
    let mut cur = Some(dir);
    while let Some(d) = cur {
        if d.exists() {
            break;
        }
        missing.push(d.to_path_buf());
        cur = d.parent();
    }
    std::fs::create_dir_all(dir).map_err(WriteError::io("creating", dir))?;
    for d in missing.iter().rev() {
        give(d, owner)?;
    }
    Ok(())
}

/// `ingero-20260314T092653.589Z.pftrace`: UTC, sortable, no colons.
pub fn file_name_for(start: SystemTime) -> String {
    let stamp = humantime::format_rfc3339_millis(start)
        .to_string()
        .replace(['-', ':'], "");
    format!("{FILE_PREFIX}{stamp}.{FILE_EXT}")
}

/// How the next file is named.
pub enum Naming {
    /// `-o PATH`: PATH, then `stem.1.ext`, `stem.2.ext`, …
    Fixed { base: PathBuf, next: u32 },
    /// By start time in a directory.
    Dir(PathBuf),
}

impl Naming {
    pub fn next_path(&mut self) -> PathBuf {
        match self {
            Naming::Fixed { base, next } => {
                let n = *next;
                *next += 1;
                if n == 0 {
                    return base.clone();
                }
                let stem = base
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let name = match base.extension() {
                    Some(ext) => format!("{stem}.{n}.{}", ext.to_string_lossy()),
                    None => format!("{stem}.{n}"),
                };
                base.with_file_name(name)
            }
            Naming::Dir(dir) => {
                let mut path = dir.join(file_name_for(SystemTime::now()));
                // Two rotations within a millisecond: add a counter rather than overwrite.
                let mut n = 1;
                while path.exists() {
                    let base = file_name_for(SystemTime::now());
                    let stem = base.trim_end_matches(&format!(".{FILE_EXT}")).to_owned();
                    path = dir.join(format!("{stem}-{n}.{FILE_EXT}"));
                    n += 1;
                }
                path
            }
        }
    }
}

/// One open trace file. Unbuffered: the chunk writer (`chunk.rs`) hands it whole chunks.
pub struct TraceFile {
    path: PathBuf,
    file: File,
    bytes: u64,
}

impl TraceFile {
    pub fn create(path: &Path, owner: Option<Owner>) -> Result<TraceFile> {
        let file = File::create(path).map_err(WriteError::io("creating", path))?;
        give(path, owner)?;
        Ok(TraceFile {
            path: path.to_path_buf(),
            file,
            bytes: 0,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Appends already framed bytes.
    pub fn write_all(&mut self, bytes: &[u8]) -> Result<()> {
        self.file
            .write_all(bytes)
            .map_err(WriteError::io("writing", &self.path))?;
        self.bytes += bytes.len() as u64;
        Ok(())
    }

    /// Hands buffered bytes to the kernel (none today: writes are unbuffered, kept so the
    /// file can gain a buffer without its callers changing).
    pub fn flush(&mut self) -> Result<()> {
        self.file
            .flush()
            .map_err(WriteError::io("flushing", &self.path))
    }

    /// Flushes and syncs the file to disk.
    pub fn close(mut self) -> Result<PathBuf> {
        self.flush()?;
        self.file
            .sync_all()
            .map_err(WriteError::io("syncing", &self.path))?;
        Ok(self.path)
    }
}

/// Deletes the oldest of `candidates` (by name: names sort by start time) while their total
/// size exceeds `max_total`, never `keep`. Returns what was deleted.
pub fn enforce_retention(
    candidates: &[PathBuf],
    keep: &Path,
    max_total: u64,
) -> Result<Vec<PathBuf>> {
    let mut files: Vec<(PathBuf, u64)> = candidates
        .iter()
        .filter_map(|p| std::fs::metadata(p).ok().map(|m| (p.clone(), m.len())))
        .collect();
    files.sort();
    let mut total: u64 = files.iter().map(|(_, len)| len).sum();
    let mut deleted = Vec::new();
    for (path, len) in files {
        if total <= max_total {
            break;
        }
        if path == keep {
            continue;
        }
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            // Someone else removed it: it no longer counts either way.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(WriteError::io("deleting", &path)(e)),
        }
        total = total.saturating_sub(len);
        deleted.push(path);
    }
    Ok(deleted)
}

/// The `ingero-*.pftrace` files in `dir`.
pub fn trace_files_in(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(WriteError::io("listing", dir))? {
        let entry = entry.map_err(WriteError::io("listing", dir))?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with(FILE_PREFIX) && name.ends_with(&format!(".{FILE_EXT}")) {
            out.push(entry.path());
        }
    }
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("ingero-files-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("tmp dir");
        d
    }

    #[test]
    fn names_sort_by_start_time() {
        let a = file_name_for(UNIX_EPOCH + Duration::from_millis(1_700_000_000_123));
        assert_eq!(a, "ingero-20231114T221320.123Z.pftrace");
        let b = file_name_for(UNIX_EPOCH + Duration::from_millis(1_700_000_001_000));
        assert!(a < b);
    }

    #[test]
    fn fixed_naming_numbers_rotations() {
        let mut n = Naming::Fixed {
            base: PathBuf::from("/tmp/run.pftrace"),
            next: 0,
        };
        assert_eq!(n.next_path(), PathBuf::from("/tmp/run.pftrace"));
        assert_eq!(n.next_path(), PathBuf::from("/tmp/run.1.pftrace"));
        assert_eq!(n.next_path(), PathBuf::from("/tmp/run.2.pftrace"));
    }

    /// A failed file operation names what was being done and the path (copied only now that
    /// it failed).
    #[test]
    fn a_failed_create_says_what_and_where() {
        let d = tmp("failed-create");
        let path = d.join("missing").join("run.pftrace");
        match TraceFile::create(&path, None) {
            Err(WriteError::Io {
                action,
                path: p,
                source,
            }) => {
                assert_eq!((action, p.as_path()), ("creating", path.as_path()));
                assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
            }
            other => panic!("expected an I/O error, got {:?}", other.map(|f| f.bytes())),
        }
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn passwd_lookup() {
        let p =
            "root:x:0:0:root:/root:/bin/bash\nalice:x:1000:1000:Alice,,,:/home/alice:/bin/zsh\n";
        assert_eq!(passwd_home(p, "alice"), Some(PathBuf::from("/home/alice")));
        assert_eq!(passwd_home(p, "bob"), None);
    }

    #[test]
    fn retention_deletes_oldest_but_never_the_current_file() {
        let d = tmp("retention");
        let names = [
            "ingero-20240101T000000.000Z.pftrace",
            "ingero-20240102T000000.000Z.pftrace",
            "ingero-20240103T000000.000Z.pftrace",
        ];
        for n in names {
            std::fs::write(d.join(n), vec![0u8; 100]).expect("write");
        }
        std::fs::write(d.join("other.txt"), vec![0u8; 1000]).expect("write");
        let files = trace_files_in(&d).expect("list");
        assert_eq!(files.len(), 3, "only ingero-*.pftrace");
        let deleted = enforce_retention(&files, &d.join(names[2]), 150).expect("retention");
        assert_eq!(deleted, vec![d.join(names[0]), d.join(names[1])]);
        assert!(d.join(names[2]).exists() && d.join("other.txt").exists());
        // Only the current file is left and it is over the limit on its own: it stays.
        let files = trace_files_in(&d).expect("list");
        assert!(
            enforce_retention(&files, &d.join(names[2]), 10)
                .expect("retention")
                .is_empty()
        );
        let _ = std::fs::remove_dir_all(&d);
    }
}
