//! The seek marks in the files the recorder writes (`seek_marks.rs`): a `restart` mark ahead
//! of every chunk where the chunk sequences start afresh and nowhere else, a `file end` mark
//! after the last chunk of every file, none in an uncompressed file; and what each says holds
//! for the records decoded after it.

use std::path::Path;

use super::tests::tmp_dir;
use crate::model::ReadRecord;
use crate::proto::{SEQ_INCREMENTAL_STATE_CLEARED, TracePacket};
use crate::read::seek::{Mark, MarkKind};
use crate::read::{FileDecoder, PacketReader};
use crate::synth::edges::{self, EdgeOptions};

/// What a file holds in order: its marks, and for each container whether it restarts the
/// chunk sequences and the records decoded from it.
enum Item {
    Mark(Mark),
    Container {
        restarts: bool,
        records: Vec<ReadRecord>,
    },
}

fn items(file: &Path) -> Vec<Item> {
    let bytes = std::fs::read(file).expect("read");
    let mut packets = PacketReader::new(&bytes[..]);
    let mut dec = FileDecoder::new();
    let mut buf = Vec::new();
    let mut out = Vec::new();
    while packets.next_into(&mut buf).expect("packet") {
        let mut records = Vec::new();
        dec.packet(&buf, &mut records).expect("decode");
        if let Some(m) = dec.take_mark() {
            out.push(Item::Mark(m));
        } else if let Some(inner) = super::chunk_tests::inflated(&buf) {
            let first = super::chunk_tests::outer_packets(&inner).remove(0).1;
            out.push(Item::Container {
                restarts: clears_main_sequence(&first),
                records,
            });
        }
    }
    out
}

/// Whether `packet` starts the main sequence afresh.
fn clears_main_sequence(packet: &[u8]) -> bool {
    use prost::Message;
    TracePacket::decode(packet).is_ok_and(|p| {
        p.trusted_packet_sequence_id == Some(super::sequence::MAIN_SEQUENCE)
            && p.sequence_flags.unwrap_or(0) & SEQ_INCREMENTAL_STATE_CLEARED != 0
    })
}

#[test]
fn a_mark_precedes_every_restart_and_ends_every_file() {
    let dir = tmp_dir("seek-marks");
    let files = edges::write(dir.join("m.pftrace"), &EdgeOptions::default()).expect("write");
    assert!(files.len() > 1);
    for (n, f) in files.iter().enumerate() {
        let items = items(f);
        let mut pending: Option<Mark> = None;
        let mut restarts = 0;
        for (i, item) in items.iter().enumerate() {
            match item {
                Item::Mark(m) => {
                    assert!(pending.is_none(), "{f:?}: two marks in a row");
                    let last = i == items.len() - 1;
                    assert_eq!(m.kind == MarkKind::FileEnd, last, "{f:?}: item {i}");
                    pending = Some(*m);
                }
                Item::Container { restarts: r, .. } => {
                    // The first container of a file starts its sequences: no mark before it.
                    let first = !items[..i]
                        .iter()
                        .any(|x| matches!(x, Item::Container { .. }));
                    let marked = pending.take().is_some_and(|m| m.kind == MarkKind::Restart);
                    assert_eq!(*r && !first, marked, "{f:?}: container {i}");
                    restarts += usize::from(marked);
                }
            }
        }
        // Where the last file begins moves with the vocabulary's size: it may hold a few.
        if n + 1 < files.len() {
            assert!(restarts > 20, "{f:?}: {restarts} restarts");
        }
        assert!(matches!(items.last(), Some(Item::Mark(m)) if m.kind == MarkKind::FileEnd));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn each_mark_bounds_what_its_stretch_holds() {
    let dir = tmp_dir("seek-bounds");
    let files = edges::write(dir.join("b.pftrace"), &EdgeOptions::default()).expect("write");
    let mut open_across = 0;
    for f in &files {
        let items = items(f);
        // The records decoded in each stretch, and the marks ending the stretches.
        let mut stretches: Vec<Vec<&ReadRecord>> = vec![Vec::new()];
        let mut marks = Vec::new();
        for item in &items {
            match item {
                Item::Mark(m) => {
                    marks.push(*m);
                    stretches.push(Vec::new());
                }
                Item::Container { records, .. } => {
                    if let Some(s) = stretches.last_mut() {
                        s.extend(records);
                    }
                }
            }
        }
        let mut latest_end = 0;
        for (k, recs) in stretches.iter().enumerate().take(marks.len()) {
            let m = marks[k];
            latest_end = latest_end.max(m.records.map_or(0, |r| r.1));
            // Stretch k starts at mark k - 1: what was open across it began at its
            // `open.from_ns`; everything else in the stretch began after `records.from_ns`.
            let open_from = k.checked_sub(1).and_then(|j| marks[j].open_from);
            let from = m.records.map_or(u64::MAX, |r| r.0);
            for r in recs {
                let (s, e) = r.interval();
                if s < from {
                    open_across += 1;
                    assert!(
                        open_from.is_some_and(|o| o <= s),
                        "{f:?} stretch {k}: {r:?}"
                    );
                }
                assert!(
                    e <= latest_end,
                    "{f:?} stretch {k}: {r:?} ends after every mark"
                );
            }
        }
    }
    assert!(
        open_across > 30,
        "{open_across} records open across restarts"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_uncompressed_file_has_no_marks() {
    let dir = tmp_dir("seek-plain");
    let mut cfg = super::tests::config(Some(dir.join("p.pftrace")), None);
    cfg.compression_level = 0;
    cfg.restart_bytes = 1;
    let records = edges::records(&EdgeOptions {
        records: 3_000,
        ..Default::default()
    });
    let (files, _) = super::tests::write_all(cfg, &records);
    assert!(items(&files[0]).iter().all(|i| !matches!(i, Item::Mark(_))));
    let _ = std::fs::remove_dir_all(&dir);
}
