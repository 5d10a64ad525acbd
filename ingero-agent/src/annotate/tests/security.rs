//! The socket's security: directory checks, symlinks, stealing, stale
//! sockets, modes and groups, provenance, and pid-scope authorisation
//! against another user's process.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::UnixListener as StdListener;
use std::path::Path;
use std::process::{Child, Command};

use super::support::{OK, ReplyClient, TempDir, collect, refused, start};
use crate::annotate::perms::{self, prepare_dir};
use crate::annotate::{IngestConfig, IngestServer, Peer};

async fn start_err(cfg: IngestConfig) -> String {
    match IngestServer::start(cfg).await {
        Ok((s, _)) => {
            s.shutdown().await;
            panic!("start should have failed")
        }
        Err(e) => format!("{e:#}"),
    }
}

fn cfg_at(path: &Path) -> IngestConfig {
    IngestConfig {
        socket_path: Some(path.to_owned()),
        ..IngestConfig::default()
    }
}

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .map(|m| m.mode() & 0o7777)
        .unwrap_or_else(|e| panic!("{e}"))
}

fn set_mode(path: &Path, m: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(m))
        .unwrap_or_else(|e| panic!("{e}"));
}

#[tokio::test]
async fn socket_is_private_by_default() {
    let (dir, server, _rx) = start("modes", |_| {}).await;
    assert_eq!(mode(server.socket_path()), 0o700);
    assert_eq!(mode(dir.path()), 0o700);
    server.shutdown().await;
}

#[tokio::test]
async fn a_group_opens_the_socket_to_it() {
    let dir = TempDir::new("group");
    let cfg = IngestConfig {
        group: Some("daemon".into()),
        ..cfg_at(&dir.socket())
    };
    let gid = perms::resolve_group("daemon").unwrap_or_else(|e| panic!("{e}"));
    set_mode(dir.path(), 0o710);
    let (server, _rx) = IngestServer::start(cfg)
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    let meta = std::fs::symlink_metadata(server.socket_path()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((meta.mode() & 0o7777, meta.gid()), (0o770, gid));
    server.shutdown().await;
}

#[test]
fn a_managed_directory_gets_its_mode_and_group() {
    let dir = TempDir::new("managed");
    let sub = dir.path().join("ingero");
    prepare_dir(&sub, Some(0), true).unwrap_or_else(|e| panic!("{e:#}"));
    assert_eq!(mode(&sub), 0o710);
    prepare_dir(&sub, None, true).unwrap_or_else(|e| panic!("{e:#}"));
    assert_eq!(mode(&sub), 0o700, "back to private without a group");
    // Created with its missing parents.
    let deep = dir.path().join("home/.ingero/annotate");
    prepare_dir(&deep, None, true).unwrap_or_else(|e| panic!("{e:#}"));
    assert_eq!(mode(&deep), 0o700);
}

#[tokio::test]
async fn a_group_or_world_writable_directory_is_refused() {
    let dir = TempDir::new("gw");
    for m in [0o770, 0o702, 0o1777] {
        set_mode(dir.path(), m);
        let err = start_err(cfg_at(&dir.socket())).await;
        assert!(err.contains("writable by group or others"), "{m:o}: {err}");
        assert!(!dir.socket().exists());
    }
}

#[tokio::test]
async fn a_directory_owned_by_someone_else_is_refused() {
    let dir = TempDir::new("owner");
    std::os::unix::fs::chown(dir.path(), Some(12_345), None).unwrap_or_else(|e| panic!("{e}"));
    let err = start_err(cfg_at(&dir.socket())).await;
    assert!(err.contains("owned by uid 12345"), "{err}");
}

#[tokio::test]
async fn a_symlink_at_the_socket_path_is_never_followed() {
    let dir = TempDir::new("symlink");
    let target = dir.path().join("victim");
    std::fs::write(&target, b"keep me").unwrap_or_else(|e| panic!("{e}"));
    std::os::unix::fs::symlink(&target, dir.socket()).unwrap_or_else(|e| panic!("{e}"));
    let err = start_err(cfg_at(&dir.socket())).await;
    assert!(err.contains("symbolic link"), "{err}");
    assert_eq!(std::fs::read(&target).unwrap_or_default(), b"keep me");
    assert!(std::fs::symlink_metadata(dir.socket()).is_ok_and(|m| m.file_type().is_symlink()));
    // A symlink to a live socket is refused too.
    std::fs::remove_file(dir.socket()).unwrap_or_else(|e| panic!("{e}"));
    let real = dir.path().join("real.sock");
    let _l = StdListener::bind(&real).unwrap_or_else(|e| panic!("{e}"));
    std::os::unix::fs::symlink(&real, dir.socket()).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        start_err(cfg_at(&dir.socket()))
            .await
            .contains("symbolic link")
    );
}

#[tokio::test]
async fn a_symlinked_directory_is_refused() {
    let dir = TempDir::new("symdir");
    let real = dir.path().join("real");
    std::fs::create_dir(&real).unwrap_or_else(|e| panic!("{e}"));
    set_mode(&real, 0o700);
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&real, &link).unwrap_or_else(|e| panic!("{e}"));
    let err = start_err(cfg_at(&link.join("annotate.sock"))).await;
    assert!(err.contains("symbolic link"), "{err}");
}

#[tokio::test]
async fn a_regular_file_at_the_socket_path_is_left_alone() {
    let dir = TempDir::new("file");
    std::fs::write(dir.socket(), b"data").unwrap_or_else(|e| panic!("{e}"));
    let err = start_err(cfg_at(&dir.socket())).await;
    assert!(err.contains("not a socket"), "{err}");
    assert_eq!(std::fs::read(dir.socket()).unwrap_or_default(), b"data");
}

#[tokio::test]
async fn a_second_agent_refuses_to_steal_a_live_socket() {
    let (_dir, server, mut rx) = start("steal", |_| {}).await;
    let err = start_err(cfg_at(server.socket_path())).await;
    assert!(err.contains("already listening"), "{err}");
    // The first one still works.
    let mut c = ReplyClient::connect(server.socket_path()).await;
    assert_eq!(c.send(br#"{"labels":{"still":"mine"}}"#).await, OK);
    collect(&mut rx, 1).await;
    server.shutdown().await;
}

#[tokio::test]
async fn a_stale_socket_is_replaced() {
    let dir = TempDir::new("stale");
    drop(StdListener::bind(dir.socket()).unwrap_or_else(|e| panic!("{e}")));
    assert!(dir.socket().exists(), "the dead listener left its file");
    let (server, mut rx) = IngestServer::start(cfg_at(&dir.socket()))
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    let mut c = ReplyClient::connect(server.socket_path()).await;
    assert_eq!(c.send(br#"{"labels":{"a":"b"}}"#).await, OK);
    collect(&mut rx, 1).await;
    server.shutdown().await;
}

#[tokio::test]
async fn shutdown_leaves_a_socket_that_is_no_longer_ours() {
    let (_dir, server, _rx) = start("notours", |_| {}).await;
    let path = server.socket_path().to_owned();
    std::fs::remove_file(&path).unwrap_or_else(|e| panic!("{e}"));
    let _theirs = StdListener::bind(&path).unwrap_or_else(|e| panic!("{e}"));
    server.shutdown().await;
    assert!(path.exists(), "someone else's socket survives our exit");
}

#[tokio::test]
async fn provenance_is_the_writers_credentials() {
    let (_dir, server, mut rx) = start("provenance", |_| {}).await;
    let mut c = ReplyClient::connect(server.socket_path()).await;
    assert_eq!(c.send(br#"{"labels":{"who":"me"}}"#).await, OK);
    let got = collect(&mut rx, 1).await;
    // SAFETY: geteuid/getegid have no preconditions and cannot fail.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    assert_eq!(
        got[0].provenance,
        Peer {
            uid,
            gid,
            pid: Some(std::process::id())
        }
    );
    let json = got[0].to_json();
    assert_eq!(json["provenance"]["pid"], std::process::id());
    server.shutdown().await;
}

/// Test users and group, created on first use (we run as root). `None`
/// with a message when that is impossible.
fn test_users() -> Option<(u32, u32, u32)> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED: pid-scope test needs root to create users");
        return None;
    }
    let run = |cmd: &str, args: &[&str]| Command::new(cmd).args(args).output();
    // Exit code 9 = already exists; anything else is reported by the id
    // lookups below.
    let _ = run("groupadd", &["-f", "ingero-test"]);
    for u in ["ingero-t1", "ingero-t2"] {
        let _ = run(
            "useradd",
            &[
                "-M",
                "-N",
                "-g",
                "ingero-test",
                "-s",
                "/usr/sbin/nologin",
                u,
            ],
        );
    }
    let id = |flag: &str, user: &str| -> Option<u32> {
        let out = run("id", &[flag, user]).ok()?;
        String::from_utf8(out.stdout).ok()?.trim().parse().ok()
    };
    match (
        id("-u", "ingero-t1"),
        id("-u", "ingero-t2"),
        id("-g", "ingero-t1"),
    ) {
        (Some(u1), Some(u2), Some(g)) => Some((u1, u2, g)),
        _ => {
            eprintln!("SKIPPED: could not create test users (useradd/groupadd unavailable?)");
            None
        }
    }
}

/// A process running as `uid`:`gid`.
fn sleeper(uid: u32, gid: u32) -> Child {
    use std::os::unix::process::CommandExt;
    Command::new("sleep")
        .arg("60")
        .uid(uid)
        .gid(gid)
        .spawn()
        .unwrap_or_else(|e| panic!("spawn sleep: {e}"))
}

/// Connect to `path` with effective uid/gid `uid`/`gid`. Only a dedicated
/// thread changes identity (raw syscalls act per thread, unlike glibc's
/// process-wide wrappers), so the rest of the test process stays root.
fn connect_as(path: &Path, uid: u32, gid: u32) -> std::os::unix::net::UnixStream {
    let path = path.to_owned();
    let t = std::thread::spawn(move || {
        let keep = -1 as libc::c_long;
        // SAFETY: raw setresgid/setresuid on this thread only; the real and
        // saved ids stay 0, so the identity can be restored below.
        let rc = unsafe {
            libc::syscall(libc::SYS_setresgid, keep, libc::c_long::from(gid), keep)
                | libc::syscall(libc::SYS_setresuid, keep, libc::c_long::from(uid), keep)
        };
        assert_eq!(rc, 0, "changing thread identity");
        let s = std::os::unix::net::UnixStream::connect(&path);
        // SAFETY: as above; restores root on this thread before it exits.
        unsafe {
            libc::syscall(libc::SYS_setresuid, keep, 0 as libc::c_long, keep);
            libc::syscall(libc::SYS_setresgid, keep, 0 as libc::c_long, keep);
        }
        s
    });
    match t.join() {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => panic!("connect as {uid}:{gid}: {e}"),
        Err(_) => panic!("connect thread panicked"),
    }
}

#[tokio::test]
async fn pid_scope_is_refused_for_another_users_process() {
    let Some((u1, u2, gid)) = test_users() else {
        return;
    };
    let dir = TempDir::new("pidscope");
    // The group must be able to reach the socket: directory 0710.
    std::os::unix::fs::chown(dir.path(), None, Some(gid)).unwrap_or_else(|e| panic!("{e}"));
    set_mode(dir.path(), 0o710);
    let cfg = IngestConfig {
        group: Some("ingero-test".into()),
        ..cfg_at(&dir.socket())
    };
    let (server, mut rx) = IngestServer::start(cfg)
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    let mut mine = sleeper(u1, gid);
    let mut theirs = sleeper(u2, gid);
    let std_stream = connect_as(server.socket_path(), u1, gid);
    std_stream
        .set_nonblocking(true)
        .unwrap_or_else(|e| panic!("{e}"));
    let stream = tokio::net::UnixStream::from_std(std_stream).unwrap_or_else(|e| panic!("{e}"));
    let mut c = ReplyClient::over(stream).await;

    let line = |pid: u32, extra: &str| format!(r#"{{"labels":{{"step":"1"}},"pid":{pid}{extra}}}"#);
    assert_eq!(
        c.send(line(theirs.id(), "").as_bytes()).await,
        refused("pid_not_permitted")
    );
    assert_eq!(
        c.send(line(1, "").as_bytes()).await,
        refused("pid_not_permitted"),
        "init is root's"
    );
    assert_eq!(c.send(line(mine.id(), "").as_bytes()).await, OK);
    assert_eq!(
        c.send(line(mine.id(), ",\"start_time\":1").as_bytes())
            .await,
        refused("start_time_mismatch")
    );
    assert_eq!(
        c.send(br#"{"labels":{"global":"yes"}}"#).await,
        OK,
        "unscoped lines need no ownership"
    );

    let got = collect(&mut rx, 2).await;
    assert_eq!(got[0].scope.map(|s| s.pid), Some(mine.id()));
    for a in &got {
        assert_eq!((a.provenance.uid, a.provenance.gid), (u1, gid));
        assert_eq!(a.provenance.pid, Some(std::process::id()));
    }
    let st = got[0].scope.map(|s| s.start_time).unwrap_or_default();
    assert_eq!(
        c.send(line(mine.id(), &format!(",\"start_time\":{st}")).as_bytes())
            .await,
        OK,
        "the true start time"
    );

    let _ = mine.kill();
    let _ = theirs.kill();
    let _ = mine.wait();
    let _ = theirs.wait();
    server.shutdown().await;
}
