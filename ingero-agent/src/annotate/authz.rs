//! Authorising pid-scoped annotations and binding them to a process
//! incarnation.
//!
//! A writer may scope an annotation to a process only if it is root or owns
//! that process (the uid owning `/proc/<pid>`): otherwise any local user
//! could put labels on someone else's job. The agent reads the process's
//! start time itself (field 22 of `/proc/<pid>/stat`) so the annotation binds
//! to this incarnation of the pid; a `start_time` sent by the client must
//! match it.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ingero_annotate::RejectReason;

use ingero_trace::model::Scope;

use super::received::Peer;

/// How long a looked-up process stays cached per connection. A writer
/// typically scopes every line to the same pid; re-reading /proc for each
/// one would dominate the ingest cost. Within this window a pid reuse could
/// only bind a line to the (dead) previous incarnation, which no event
/// refers to, so nothing is mislabelled.
const CACHE_TTL: Duration = Duration::from_secs(1);
/// Processes remembered per connection.
const CACHE_SLOTS: usize = 8;

/// The facts about a process that authorisation needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ProcInfo {
    /// Owner of `/proc/<pid>`.
    pub(crate) uid: u32,
    /// Field 22 of `/proc/<pid>/stat`.
    pub(crate) start_time: u64,
}

/// Field 22 (`starttime`) of a `/proc/<pid>/stat` line. The command name
/// (field 2) is in parentheses and may itself contain spaces and `)`, so
/// counting starts after the last `)`.
pub(crate) fn parse_start_time(stat: &str) -> Option<u64> {
    let after = &stat[stat.rfind(')')? + 1..];
    // After the name come field 3 (state) onwards: field 22 is the 20th.
    after.split_ascii_whitespace().nth(22 - 3)?.parse().ok()
}

/// Reads `<proc_root>/<pid>`'s owner and start time.
pub(crate) fn proc_info(proc_root: &Path, pid: u32) -> std::io::Result<ProcInfo> {
    let dir = proc_root.join(pid.to_string());
    let uid = std::fs::metadata(&dir)?.uid();
    let stat = std::fs::read_to_string(dir.join("stat"))?;
    let start_time = parse_start_time(&stat).ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("unparseable {}/stat", dir.display()),
        )
    })?;
    Ok(ProcInfo { uid, start_time })
}

/// Per-connection authoriser with a small cache of looked-up processes.
#[derive(Debug)]
pub(crate) struct PidAuthorizer {
    proc_root: PathBuf,
    cache: Vec<(u32, ProcInfo, Instant)>,
}

impl PidAuthorizer {
    pub(crate) fn new(proc_root: PathBuf) -> PidAuthorizer {
        PidAuthorizer {
            proc_root,
            cache: Vec::with_capacity(CACHE_SLOTS),
        }
    }

    /// Whether `peer` may scope an annotation to `pid` (and, if given,
    /// whether `claimed_start` matches); on success, the incarnation.
    pub(crate) fn authorize(
        &mut self,
        peer: &Peer,
        pid: u32,
        claimed_start: Option<u64>,
        now: Instant,
    ) -> Result<Scope, RejectReason> {
        let info = self.lookup(pid, now)?;
        if peer.uid != 0 && peer.uid != info.uid {
            return Err(RejectReason::PidNotPermitted);
        }
        if claimed_start.is_some_and(|st| st != info.start_time) {
            return Err(RejectReason::StartTimeMismatch);
        }
        Ok(Scope {
            pid,
            start_time: info.start_time,
        })
    }

    fn lookup(&mut self, pid: u32, now: Instant) -> Result<ProcInfo, RejectReason> {
        if let Some(pos) = self.cache.iter().position(|(p, _, _)| *p == pid) {
            let (_, info, at) = self.cache[pos];
            if now.saturating_duration_since(at) < CACHE_TTL {
                return Ok(info);
            }
            self.cache.swap_remove(pos);
        }
        let info = proc_info(&self.proc_root, pid).map_err(|_| RejectReason::NoSuchProcess)?;
        if self.cache.len() == CACHE_SLOTS {
            // Evict the oldest entry.
            if let Some(oldest) = self
                .cache
                .iter()
                .enumerate()
                .min_by_key(|(_, e)| e.2)
                .map(|(i, _)| i)
            {
                self.cache.swap_remove(oldest);
            }
        }
        self.cache.push((pid, info, now));
        Ok(info)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_time_is_field_22_even_with_odd_names() {
        let fields: Vec<String> = (3..=52).map(|i| i.to_string()).collect();
        let tail = fields.join(" ");
        assert_eq!(parse_start_time(&format!("123 (python3) {tail}")), Some(22));
        assert_eq!(
            parse_start_time(&format!("123 (a) b (c)) {tail}")),
            Some(22)
        );
        assert_eq!(
            parse_start_time(&format!("123 (my prog) {tail}\n")),
            Some(22)
        );
        assert_eq!(parse_start_time("123 (x) S 1 2"), None);
        assert_eq!(parse_start_time("garbage"), None);
    }

    #[test]
    fn own_process_is_authorised_with_its_real_start_time() {
        let me = std::process::id();
        let info = proc_info(Path::new("/proc"), me).unwrap_or_else(|e| panic!("{e}"));
        // SAFETY: geteuid has no preconditions and cannot fail.
        let uid = unsafe { libc::geteuid() };
        assert_eq!(info.uid, uid);
        let peer = Peer {
            uid,
            gid: 0,
            pid: Some(me),
        };
        let mut a = PidAuthorizer::new("/proc".into());
        let now = Instant::now();
        let scope = a.authorize(&peer, me, None, now);
        assert_eq!(
            scope,
            Ok(Scope {
                pid: me,
                start_time: info.start_time
            })
        );
        assert_eq!(
            a.authorize(&peer, me, Some(info.start_time), now)
                .map(|s| s.pid),
            Ok(me)
        );
        assert_eq!(
            a.authorize(&peer, me, Some(info.start_time + 1), now),
            Err(RejectReason::StartTimeMismatch)
        );
    }

    #[test]
    fn other_owners_and_missing_processes_are_refused() {
        let mut a = PidAuthorizer::new("/proc".into());
        let now = Instant::now();
        // pid 1 is owned by root; a non-root peer may not scope to it.
        let user = Peer {
            uid: 65_534,
            gid: 65_534,
            pid: None,
        };
        assert_eq!(
            a.authorize(&user, 1, None, now),
            Err(RejectReason::PidNotPermitted)
        );
        let root = Peer {
            uid: 0,
            gid: 0,
            pid: None,
        };
        assert!(
            a.authorize(&root, 1, None, now).is_ok(),
            "root may scope to anything"
        );
        assert_eq!(
            a.authorize(&root, 4_194_303, None, now),
            Err(RejectReason::NoSuchProcess)
        );
    }

    #[test]
    fn cache_is_bounded_and_expires() {
        let mut a = PidAuthorizer::new("/proc".into());
        let root = Peer {
            uid: 0,
            gid: 0,
            pid: None,
        };
        let me = std::process::id();
        let t0 = Instant::now();
        assert!(a.authorize(&root, me, None, t0).is_ok());
        assert_eq!(a.cache.len(), 1);
        for _ in 0..20 {
            let _ = a.authorize(&root, 1, None, t0);
        }
        assert!(a.cache.len() <= CACHE_SLOTS);
        // A fake root proves the cache is used within the TTL and dropped
        // after it.
        a.proc_root = "/nonexistent".into();
        assert!(a.authorize(&root, me, None, t0).is_ok(), "cached");
        assert_eq!(
            a.authorize(&root, me, None, t0 + CACHE_TTL),
            Err(RejectReason::NoSuchProcess)
        );
    }
}
