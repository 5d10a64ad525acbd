//! [`SkippedLabels`]: the label packets a first pass left unread
//! ([`super::TraceReader::skip_labels`]), read afterwards by the stretches a window needs.
//!
//! A skim skipping labels reads each file's labels up to its first restart mark, and after it
//! only their interned names and track descriptors, keeping the file's decoder with them. The
//! marks bound the label records completed in each stretch ([`FileIndex::label_ranges`]), and
//! after each restart the writer restated the label states open across it. So a stretch's
//! labels decode with that decoder from the stretch's restart mark on: it forgets the states
//! left open by what it read before, takes the restated ones, and reads the packets up to the
//! next stretch it does not want, every container skipped unread.
//!
//! Every label record completed in a stretch lies inside that stretch's bounds, so the
//! stretches overlapping a window hold every label record overlapping it (and others, which
//! the caller filters): what a whole read yields of them.

use std::fs::File;
use std::io::{Seek, SeekFrom};
use std::path::PathBuf;

use super::error::ReadError;
use super::file_decoder::FileDecoder;
use super::framing::ChunkedPackets;
use super::seek::{FileIndex, LabelStretches, SeekIndex};
use super::{Result, empty_record, file_order};
use crate::model::ReadRecord;

/// One file whose labels a skim skipped: its marks and the decoder that skimmed it.
struct SkippedFile {
    /// Its place among the skim's files.
    ordinal: u64,
    path: PathBuf,
    index: FileIndex,
    decoder: FileDecoder,
}

/// The labels a skim skipped, by file (see the module docs).
pub struct SkippedLabels {
    files: Vec<SkippedFile>,
    /// Bytes framed and label packets decoded so far.
    bytes: u64,
    packets: u64,
}

impl SkippedLabels {
    /// The files whose labels were skipped, with their decoders, and the marks of each.
    pub(super) fn new(files: Vec<(u64, PathBuf, FileDecoder)>, marks: &SeekIndex) -> SkippedLabels {
        let files = files
            .into_iter()
            .map(|(ordinal, path, decoder)| SkippedFile {
                ordinal,
                index: marks.get(&path).cloned().unwrap_or_default(),
                path,
                decoder,
            })
            .collect();
        SkippedLabels {
            files,
            bytes: 0,
            packets: 0,
        }
    }

    /// No file's labels were skipped.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// Bytes of the files read so far (from a stretch's restart mark to the end of what it
    /// wanted).
    pub fn bytes_read(&self) -> u64 {
        self.bytes
    }

    /// Label packets the skim skipped.
    pub fn skipped_by_the_skim(&self) -> u64 {
        self.files.iter().map(|f| f.decoder.labels_skipped()).sum()
    }

    /// Packets outside containers decoded so far.
    pub fn packets(&self) -> u64 {
        self.packets
    }

    /// Calls `f` on the label records (annotations, label states, spans, NVTX ranges and
    /// marks) of the stretches `which` names, with each one's place in the recording
    /// ([`super::file_order`], as [`super::TraceReader::record_place`] gives the skim's), file
    /// by file: with
    /// [`LabelStretches::Unbounded`] those the marks do not bound (read them before relying
    /// on [`SeekIndex::labels_extent`]), with [`LabelStretches::Overlapping`] every record
    /// overlapping the window a whole read yields and not the first pass, and others.
    pub fn read(
        &mut self,
        which: LabelStretches,
        mut f: impl FnMut(&ReadRecord, u64),
    ) -> Result<()> {
        let mut slot = empty_record();
        for file in &mut self.files {
            let ranges = file.index.label_ranges(which);
            if ranges.is_empty() {
                continue;
            }
            let mut opened = File::open(&file.path).map_err(|source| ReadError::Open {
                path: file.path.clone(),
                source,
            })?;
            for (from, until) in ranges {
                let read = read_range(file, &mut opened, (from, until), &mut slot, &mut f)?;
                self.bytes += read.0;
                self.packets += read.1;
            }
        }
        Ok(())
    }
}

/// Decodes `file`'s packets outside containers from offset `from` (a restart mark) up to
/// `until` (`None`: the end), calling `f` on its label records; returns the bytes framed and
/// the packets decoded.
fn read_range(
    file: &mut SkippedFile,
    opened: &mut File,
    (from, until): (u64, Option<u64>),
    slot: &mut ReadRecord,
    f: &mut impl FnMut(&ReadRecord, u64),
) -> Result<(u64, u64)> {
    let framing = |source| ReadError::Framing {
        path: file.path.clone(),
        source,
    };
    opened
        .seek(SeekFrom::Start(from))
        .map_err(|e| framing(e.into()))?;
    let mut packets = ChunkedPackets::new_at(&mut *opened, from);
    file.decoder.read_labels_afresh();
    let end = until.unwrap_or(u64::MAX);
    let mut decoded = 0;
    while let Some(range) = packets.next_plain_range(u64::MAX).map_err(framing)? {
        let offset = packets.packet_start();
        if offset >= end {
            break;
        }
        decoded += 1;
        let done = file
            .decoder
            .packet_into(&packets.buf()[range], slot)
            .map_err(|source| ReadError::Packet {
                path: file.path.clone(),
                offset,
                source,
            })?;
        // What the marks are and said is known from the first pass.
        let _ = file.decoder.take_mark();
        if done && slot.is_label() {
            f(slot, file_order(file.ordinal, offset));
        }
    }
    Ok((packets.offset().min(end) - from, decoded))
}
