//! Every file names its machine: a `SystemInfo` packet with `machine_name` (and the
//! `machine_id` every packet carries), and the session's machine name and clock quality read
//! back; a session written without them (older agents) falls back to the host name.

use prost::Message;

use super::Recorder;
use super::tests::{config, tmp_dir};
use crate::clock_quality::ClockQuality;
use crate::model::{FinalStats, ReadRecord, SessionInfo};
use crate::proto::TracePacket;
use crate::read::{ExpandedPackets, TimeRange, TraceReader};
use crate::synth;

/// Writes the scenario with `session` into two rotated files; returns them.
fn record(name: &str, session: SessionInfo) -> Vec<std::path::PathBuf> {
    let dir = tmp_dir(name);
    let mut cfg = config(Some(dir.join("t.pftrace")), None);
    cfg.session = session;
    cfg.max_file_size = 2_000;
    let mut rec = Recorder::create_with(cfg, false).expect("create");
    for r in synth::scenario().iter() {
        rec.write(r).expect("write");
    }
    rec.finish(&FinalStats::default()).expect("finish")
}

fn system_infos(path: &std::path::Path) -> Vec<TracePacket> {
    let bytes = std::fs::read(path).expect("read");
    let mut packets = ExpandedPackets::new(&bytes[..]);
    let mut buf = Vec::new();
    let mut out = Vec::new();
    while packets.next_into(&mut buf).expect("packet") {
        let p = TracePacket::decode(&buf[..]).expect("decodes");
        if p.system_info.is_some() {
            out.push(p);
        }
    }
    out
}

fn sessions(files: &[std::path::PathBuf]) -> Vec<SessionInfo> {
    TraceReader::from_files(files.to_vec(), TimeRange::all())
        .filter_map(|r| match r.expect("record") {
            ReadRecord::Session(s) => Some(s.info),
            _ => None,
        })
        .collect()
}

#[test]
fn every_file_names_its_machine_in_system_info_and_the_session() {
    let session = config(None, None).session;
    let files = record("identity-named", session.clone());
    assert!(files.len() >= 2, "rotated: {files:?}");
    for f in &files {
        let infos = system_infos(f);
        assert_eq!(infos.len(), 1, "one SystemInfo per file: {}", f.display());
        let p = &infos[0];
        assert_eq!(p.machine_id, Some(77), "stamped like every packet");
        let si = p.system_info.as_ref().expect("system info");
        assert_eq!(si.machine_name.as_deref(), Some("gpu-node-1"));
        let uts = si.utsname.as_ref().expect("utsname");
        assert_eq!(uts.release.as_deref(), Some("6.1"));
        assert_eq!(uts.sysname.as_deref(), Some("Linux"));
    }
    let read = sessions(&files);
    assert_eq!(read.len(), files.len());
    for s in &read {
        assert_eq!(s, &session, "machine name and clock quality read back");
        assert_eq!(s.machine(), "gpu-node-1");
    }
}

#[test]
fn a_session_without_machine_name_or_clock_reads_back_as_the_host() {
    let mut session = config(None, None).session;
    session.machine_name.clear();
    session.clock = None;
    let files = record("identity-old", session);
    let si = system_infos(&files[0]);
    let name = si[0]
        .system_info
        .as_ref()
        .and_then(|s| s.machine_name.clone());
    assert_eq!(name.as_deref(), Some("h1"), "Perfetto still gets a name");
    let read = sessions(&files);
    assert_eq!(read[0].machine_name, "");
    assert_eq!(read[0].machine(), "h1", "falls back to the host name");
    assert_eq!(read[0].clock, None);
}

#[test]
fn an_unsynchronised_clock_reads_back_as_such() {
    let mut session = config(None, None).session;
    session.clock = Some(ClockQuality {
        maxerror_us: 16_000_000,
        esterror_us: 16_000_000,
        unsynchronized: true,
    });
    let files = record("identity-unsync", session.clone());
    assert_eq!(sessions(&files)[0].clock, session.clock);
}
