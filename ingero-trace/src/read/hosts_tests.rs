//! [`host_recordings`]: files found recursively, grouped by the machine their sessions name,
//! each host's files in session order whatever their modification times.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use super::{host_recordings, natural_cmp, recording_files};
use crate::model::{FinalStats, SessionInfo};
use crate::synth;
use crate::write::{Recorder, RecorderConfig};

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ingero-hosts-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("tmp dir");
    d
}

/// Records the scenario as host `name` (machine id `id`) at `path`, rotating into several
/// files when `rotate`.
fn record(path: &Path, name: &str, id: u32, rotate: bool) -> Vec<PathBuf> {
    let cfg = RecorderConfig {
        path: Some(path.to_path_buf()),
        session: SessionInfo {
            host: format!("{name}.cluster.local"),
            machine_name: name.to_owned(),
            ..SessionInfo::default()
        },
        machine_id: Some(id),
        max_file_size: if rotate { 2_000 } else { 1 << 30 },
        chown_to_sudo_user: false,
        ..Default::default()
    };
    let mut rec = Recorder::create_with(cfg, false).expect("recorder");
    for r in synth::scenario().iter() {
        rec.write(r).expect("write");
    }
    rec.finish(&FinalStats::default()).expect("finish")
}

/// Sets a file's modification time `secs` after the epoch.
fn touch(path: &Path, secs: u64) {
    let f = std::fs::File::options()
        .write(true)
        .open(path)
        .expect("open");
    f.set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(secs))
        .expect("set mtime");
}

#[test]
fn files_of_several_hosts_group_by_machine_in_session_order() {
    let dir = tmp("group");
    std::fs::create_dir_all(dir.join("a/deeper")).expect("dirs");
    let a = record(&dir.join("a/deeper/run.pftrace"), "gpu-node-1", 11, true);
    let b = record(&dir.join("b.pftrace"), "gpu-node-2", 22, false);
    assert!(a.len() >= 3, "rotated: {a:?}");
    // Copied without their times: the newest file looks oldest.
    for (i, f) in a.iter().enumerate() {
        touch(f, 1_000_000 - i as u64);
    }
    let hosts = host_recordings(&dir).expect("lists");
    let names: Vec<&str> = hosts.iter().map(|h| h.name.as_str()).collect();
    assert_eq!(names, ["gpu-node-1", "gpu-node-2"]);
    assert_eq!(hosts[0].machine_id, 11);
    assert_eq!(hosts[0].files, a, "session order, not modification time");
    assert_eq!(hosts[1].files, b);
    let s = hosts[1].session.as_ref().expect("session");
    assert_eq!(s.info.host, "gpu-node-2.cluster.local");
    // One file is one host.
    let one = host_recordings(&b[0]).expect("a file");
    assert_eq!(one.len(), 1);
    assert_eq!(
        (one[0].name.as_str(), one[0].files.clone()),
        ("gpu-node-2", b)
    );
}

#[test]
fn one_host_reads_in_the_order_a_directory_always_had() {
    let dir = tmp("single");
    let files = record(&dir.join("run.pftrace"), "solo", 5, true);
    let hosts = host_recordings(&dir).expect("lists");
    assert_eq!(hosts.len(), 1);
    assert_eq!(hosts[0].files, files);
    assert_eq!(
        hosts[0].files,
        recording_files(&dir).expect("plain listing")
    );
}

#[test]
fn hosts_sharing_a_name_are_told_apart_and_files_without_a_session_are_kept() {
    let dir = tmp("shared");
    let x = record(&dir.join("x.pftrace"), "localhost", 0x1a, false);
    let y = record(&dir.join("y.pftrace"), "localhost", 0x2b, false);
    // A file cut before its session packet (an agent killed at once).
    let cut = dir.join("cut.pftrace");
    std::fs::write(&cut, [0x0a, 0x05, 0x01]).expect("write");
    let hosts = host_recordings(&dir).expect("lists");
    let names: Vec<&str> = hosts.iter().map(|h| h.name.as_str()).collect();
    assert_eq!(names, ["localhost#1a", "localhost#2b", "unknown"]);
    assert_eq!((hosts[0].files.clone(), hosts[1].files.clone()), (x, y));
    assert_eq!(hosts[2].files, vec![cut.clone()]);
    assert_eq!(hosts[2].session, None);
    // With one host, a file without a session is that host's (nothing else could have
    // written it).
    let solo = tmp("shared-solo");
    let z = record(&solo.join("z.pftrace"), "gpu-node-3", 3, false);
    let cut2 = solo.join("cut.pftrace");
    std::fs::copy(&cut, &cut2).expect("copy");
    touch(&z[0], 100);
    touch(&cut2, 200);
    let hosts = host_recordings(&solo).expect("lists");
    assert_eq!(hosts.len(), 1);
    assert_eq!(hosts[0].name, "gpu-node-3");
    assert_eq!(
        hosts[0].files,
        vec![z[0].clone(), cut2],
        "modification order"
    );
}

#[test]
fn an_empty_directory_has_no_hosts_and_a_missing_one_is_an_error() {
    let dir = tmp("empty");
    std::fs::write(dir.join("notes.txt"), "x").expect("write");
    assert!(host_recordings(&dir).expect("lists").is_empty());
    let missing = host_recordings(&dir.join("nope")).expect_err("no such file");
    assert!(missing.to_string().contains("nope"), "{missing}");
}

#[test]
fn host_names_sort_naturally() {
    let mut names = [
        "gpu-node-17",
        "gpu-node-2",
        "gpu-node-1",
        "gpu-node-02",
        "a",
        "gpu-node-",
    ];
    names.sort_by(|a, b| natural_cmp(a, b));
    assert_eq!(
        names,
        [
            "a",
            "gpu-node-",
            "gpu-node-1",
            "gpu-node-02",
            "gpu-node-2",
            "gpu-node-17"
        ]
    );
}
