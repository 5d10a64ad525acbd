//! Who runs the command of `sudo ingero trace -- CMD`: the user who ran sudo, with their
//! groups and home, so the program sees the files, caches and permissions it would see
//! without ingero, and what it writes stays theirs. As root without sudo, or when sudo was
//! run by root, the command runs as root.

use std::ffi::{CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use anyhow::{Context, Result, bail};

/// A user to run a command as.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunAs {
    pub name: String,
    pub uid: u32,
    /// The primary group.
    pub gid: u32,
    /// Supplementary groups (the primary one included), as login would give them.
    pub groups: Vec<u32>,
    pub home: PathBuf,
}

/// What sudo says about the invoking user (`SUDO_UID`, `SUDO_GID`, `SUDO_USER`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct SudoVars {
    uid: Option<String>,
    gid: Option<String>,
    user: Option<String>,
}

/// The user to run the command as: under sudo while root, the invoking user; `None` (stay as
/// this process is) otherwise.
pub fn invoking_user() -> Result<Option<RunAs>> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    let vars = SudoVars {
        uid: std::env::var("SUDO_UID").ok(),
        gid: std::env::var("SUDO_GID").ok(),
        user: std::env::var("SUDO_USER").ok(),
    };
    let Some(uid) = sudo_uid(euid, &vars)? else {
        return Ok(None);
    };
    let entry = passwd_by_uid(uid);
    // sudo's variables win over the passwd entry: they are what sudo authenticated.
    let gid = match vars.gid.as_deref() {
        Some(g) => g
            .parse()
            .with_context(|| format!("SUDO_GID is not a number: {g:?}"))?,
        None => match &entry {
            Some(e) => e.gid,
            None => bail!("SUDO_UID {uid} has no passwd entry and SUDO_GID is not set"),
        },
    };
    let name = vars
        .user
        .filter(|u| !u.is_empty())
        .or_else(|| entry.as_ref().map(|e| e.name.clone()))
        .unwrap_or_else(|| uid.to_string());
    let home = entry.map(|e| e.home).unwrap_or_else(|| PathBuf::from("/"));
    let groups = group_list(&name, gid);
    Ok(Some(RunAs {
        name,
        uid,
        gid,
        groups,
        home,
    }))
}

/// The uid to switch to: `SUDO_UID` when this process is root and it names someone else.
fn sudo_uid(euid: u32, vars: &SudoVars) -> Result<Option<u32>> {
    if euid != 0 {
        return Ok(None);
    }
    let Some(raw) = vars.uid.as_deref().filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    let uid: u32 = raw
        .parse()
        .with_context(|| format!("SUDO_UID is not a number: {raw:?}"))?;
    Ok((uid != 0).then_some(uid))
}

/// The parts of a passwd entry used here.
struct Passwd {
    name: String,
    gid: u32,
    home: PathBuf,
}

fn passwd_by_uid(uid: u32) -> Option<Passwd> {
    let mut buf = vec![0u8; 16 * 1024];
    // SAFETY: an all-zero passwd is a valid value (null pointers, zero ids) for getpwuid_r to
    // overwrite.
    let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
    let mut result: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer is valid for the call and `buf.len()` is the buffer's size; the
    // strings it fills in point into `buf`, which outlives their use below.
    let rc = unsafe {
        libc::getpwuid_r(
            uid,
            &mut pwd,
            buf.as_mut_ptr().cast(),
            buf.len(),
            &mut result,
        )
    };
    if rc != 0 || result.is_null() || pwd.pw_name.is_null() || pwd.pw_dir.is_null() {
        return None;
    }
    // SAFETY: on success both point to NUL-terminated strings inside `buf`.
    let (name, dir) = unsafe { (CStr::from_ptr(pwd.pw_name), CStr::from_ptr(pwd.pw_dir)) };
    Some(Passwd {
        name: name.to_string_lossy().into_owned(),
        gid: pwd.pw_gid,
        home: PathBuf::from(std::ffi::OsStr::from_bytes(dir.to_bytes())),
    })
}

/// The groups `user` belongs to (the group database), with `gid` first; just `gid` when the
/// name is unknown there.
fn group_list(user: &str, gid: u32) -> Vec<u32> {
    let Ok(name) = CString::new(user) else {
        return vec![gid];
    };
    let mut groups: Vec<libc::gid_t> = vec![0; 64];
    for _ in 0..4 {
        let mut n = groups.len() as libc::c_int;
        // SAFETY: `name` is NUL-terminated; `groups` holds `n` entries and getgrouplist writes
        // at most `n` (it sets `n` to the count needed when that is too few).
        let rc = unsafe { libc::getgrouplist(name.as_ptr(), gid, groups.as_mut_ptr(), &mut n) };
        if rc >= 0 {
            groups.truncate(n.max(0) as usize);
            if !groups.contains(&gid) {
                groups.insert(0, gid);
            }
            return groups;
        }
        groups.resize((n.max(0) as usize).max(groups.len() * 2), 0);
    }
    vec![gid]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(uid: Option<&str>) -> SudoVars {
        SudoVars {
            uid: uid.map(str::to_string),
            gid: None,
            user: None,
        }
    }

    #[test]
    fn switches_only_when_root_under_sudo_for_someone_else() {
        assert_eq!(sudo_uid(0, &vars(Some("1000"))).ok(), Some(Some(1000)));
        assert_eq!(sudo_uid(0, &vars(Some("0"))).ok(), Some(None));
        assert_eq!(sudo_uid(0, &vars(None)).ok(), Some(None));
        assert_eq!(sudo_uid(1000, &vars(Some("1000"))).ok(), Some(None));
        assert!(sudo_uid(0, &vars(Some("alice"))).is_err());
    }

    #[test]
    fn root_resolves_from_the_user_database() {
        let root = passwd_by_uid(0).expect("root has a passwd entry");
        assert_eq!(root.name, "root");
        assert_eq!(root.gid, 0);
        assert!(group_list("root", 0).contains(&0));
        assert_eq!(group_list("no-such-user-ingero", 4242), vec![4242]);
    }
}
