//! The bundle read back with the `tar` crate: the manifest first, naming each file's
//! machine; every host's files under its name, byte for byte, names within 99 bytes.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::*;
use crate::clock_quality::ClockQuality;
use crate::model::{FinalStats, SessionInfo};
use crate::read::host_recordings;
use crate::synth;
use crate::write::{Recorder, RecorderConfig};

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ingero-bundle-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("tmp dir");
    d
}

fn record(path: &Path, name: &str, id: u32, rotate: bool) -> Vec<PathBuf> {
    let cfg = RecorderConfig {
        path: Some(path.to_path_buf()),
        session: SessionInfo {
            machine_name: name.to_owned(),
            clock: Some(ClockQuality {
                maxerror_us: 1_500,
                esterror_us: 20,
                unsynchronized: false,
            }),
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

/// The archive's members: name and bytes, in order.
fn members(tar_path: &Path) -> Vec<(String, Vec<u8>)> {
    let mut a = tar::Archive::new(File::open(tar_path).expect("open"));
    let mut out = Vec::new();
    for e in a.entries().expect("entries") {
        let mut e = e.expect("entry");
        assert_eq!(e.header().entry_type(), tar::EntryType::Regular);
        let name = e.path().expect("path").to_string_lossy().into_owned();
        let mut bytes = Vec::new();
        e.read_to_end(&mut bytes).expect("read");
        out.push((name, bytes));
    }
    out
}

#[test]
fn the_bundle_holds_the_manifest_and_every_hosts_files() {
    let dir = tmp("layout");
    let a = record(&dir.join("gpu-node-1/r.pftrace"), "gpu-node-1", 1, true);
    let b = record(&dir.join("gpu-node-2/r.pftrace"), "gpu-node-2", 2, false);
    let hosts = host_recordings(&dir).expect("hosts");
    let out = dir.join("job.tar");
    let offsets = [ClockOffset {
        host: "gpu-node-2".into(),
        offset_ns: -2_500_000,
    }];
    let bundle = write(&hosts, &offsets, &out).expect("bundle");
    assert!(!dir.join("job.tar.partial").exists());
    let got = members(&out);
    assert_eq!(got[0].0, MANIFEST, "the manifest comes first");
    let files: Vec<&(String, Vec<u8>)> = got[1..].iter().collect();
    assert_eq!(files.len(), a.len() + b.len());
    for ((name, bytes), src) in files.iter().zip(a.iter().chain(&b)) {
        assert!(name.len() <= MAX_MEMBER_NAME, "{name}");
        assert_eq!(
            bytes,
            &std::fs::read(src).expect("source"),
            "{name}: byte for byte"
        );
    }
    assert!(
        files[0].0.starts_with("gpu-node-1/")
            && files.last().is_some_and(|f| f.0.starts_with("gpu-node-2/"))
    );
    assert_eq!(bundle.bytes, std::fs::metadata(&out).expect("size").len());

    // The manifest: format version 1, every file on its host's machine, REALTIME as the
    // timeline, the given offset against the first host's first file.
    let m: Value = serde_json::from_slice(&got[0].1).expect("JSON");
    assert_eq!(m, bundle.manifest);
    let pm = &m["perfetto_manifest"];
    assert_eq!(pm["version"], 1);
    assert_eq!(pm["trace_time"]["clock"], "REALTIME");
    let entries = pm["files"].as_array().expect("files");
    assert_eq!(entries.len(), files.len());
    for (e, (name, _)) in entries.iter().zip(&files) {
        assert_eq!(e["path"].as_str(), Some(name.as_str()), "names a member");
        let host = name.split('/').next().unwrap_or_default();
        assert_eq!(e["machine"]["name"].as_str(), Some(host));
        let mut keys: Vec<&str> = e
            .as_object()
            .expect("object")
            .keys()
            .map(String::as_str)
            .collect();
        keys.sort_unstable();
        if host == "gpu-node-2" {
            assert_eq!(keys, ["clocks", "machine", "path"]);
            let c = &e["clocks"];
            assert_eq!(c["clock"], "REALTIME");
            assert_eq!(c["sync_to"]["file"].as_str(), Some(files[0].0.as_str()));
            assert_eq!(c["sync_to"]["clock"], "REALTIME");
            assert_eq!(c["offset_ns"], -2_500_000);
        } else {
            assert_eq!(
                keys,
                ["machine", "path"],
                "the reference host has no offset"
            );
        }
    }
    let attrs = pm["attributes"].as_object().expect("attributes");
    assert_eq!(attrs["ingero.hosts"], "gpu-node-1,gpu-node-2");
    assert_eq!(attrs["ingero.clock_error.gpu-node-1"], "±1.5 ms");
    assert!(
        attrs.values().all(|v| v.is_string() || v.is_i64()),
        "strings or integers only"
    );
}

#[test]
fn member_names_are_portable_short_and_unique() {
    let long = "a".repeat(200);
    let n = member_name(
        "gpu node/17 (rack:3)",
        Path::new("/x/ingero-1.pftrace"),
        &[],
    );
    assert_eq!(n, "gpu_node_17__rack_3_/ingero-1.pftrace");
    let n = member_name(&long, &PathBuf::from(format!("/x/{long}.pftrace")), &[]);
    assert!(n.len() <= MAX_MEMBER_NAME && n.ends_with(".pftrace"), "{n}");
    let first = member_name("h", Path::new("/a/r.pftrace"), &[]);
    let second = member_name("h", Path::new("/b/r.pftrace"), std::slice::from_ref(&first));
    assert_eq!(
        (first.as_str(), second.as_str()),
        ("h/r.pftrace", "h/r-2.pftrace")
    );
    assert_eq!(
        member_name(".hidden", Path::new("/a/.pftrace"), &[]),
        "_.hidden/_.pftrace"
    );
}

#[test]
fn nothing_to_bundle_is_an_error_and_leaves_no_file() {
    let dir = tmp("empty");
    let out = dir.join("job.tar");
    assert!(matches!(write(&[], &[], &out), Err(BundleError::Empty)));
    assert!(!out.exists());
    // A file gone since it was listed: an error naming it, and no partial archive.
    let host = HostRecording {
        name: "h".into(),
        machine_id: 1,
        session: None,
        files: vec![dir.join("gone.pftrace")],
    };
    let err = write(&[host], &[], &out).expect_err("missing file");
    assert!(err.to_string().contains("gone.pftrace"), "{err}");
    assert!(!out.exists() && !dir.join("job.tar.partial").exists());
}
