//! The decoder's side of reading labels by stretches (`read::labels`): a first pass that skips
//! the label packets from a file's first restart mark on (their interned names and track
//! descriptors are still taken: a later read of a stretch needs them), and the label states a
//! restart restates (`label open` instants), which open a state's slice on its track when a
//! read starts at that restart.
//!
//! A read of the whole file finds each restated state already open on its track, as the
//! packets before the restart left it, and leaves it as it is.

use std::sync::Arc;

use super::iids::IidTable;
use super::plan::OpenBody;
use super::slices::Track;
use super::track_kind::TrackKind;
use super::values::Val;
use crate::read::seek::{Mark, MarkKind};
use crate::vocab::SeekArg;

/// Whether and where label packets are skipped.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct LabelSkip {
    /// Skip them from the file's first restart mark on, if it says the writer restated its
    /// label states (`labels.open`).
    pub(super) wanted: bool,
    /// Skipping now.
    pub(super) active: bool,
    /// Seek marks read so far in this file.
    pub(super) marks: u64,
    /// Label packets skipped so far.
    pub(super) skipped: u64,
}

/// Whether events on a track of `kind` are label records (what a first pass skips).
pub(super) fn is_label_track(kind: Option<&TrackKind>) -> bool {
    matches!(
        kind,
        Some(
            TrackKind::Labels(_)
                | TrackKind::State(..)
                | TrackKind::SpanLane(_)
                | TrackKind::Nvtx(..)
                | TrackKind::NvtxLane(_)
        )
    )
}

impl LabelSkip {
    /// A seek mark was read: the file's first, a restart that says how many label states
    /// follow it restated, starts the skipping when it is wanted (the rule
    /// `FileIndex::labels_skipped` follows).
    pub(super) fn note_mark(&mut self, mark: &Mark) {
        let first = self.marks == 0;
        self.marks += 1;
        if first && mark.kind == MarkKind::Restart && mark.labels_open.is_some() {
            self.active = self.wanted;
        }
    }

    /// Whether a track event on `track` of `tracks` is a label packet to skip now (outside
    /// bundles); it is counted. The track is looked up only while skipping.
    #[inline]
    pub(super) fn skips(&mut self, in_bundle: bool, tracks: &IidTable<Track>, track: u64) -> bool {
        if !self.active || in_bundle {
            return false;
        }
        if !is_label_track(tracks.get(track).and_then(|t| t.kind.as_ref())) {
            return false;
        }
        self.skipped += 1;
        true
    }

    /// A `label open` instant: the state it restates opens on its track in `tracks`, unless a
    /// slice is open there already (a read that decoded its begin) or labels are being
    /// skipped.
    pub(super) fn restate(&self, tracks: &mut IidTable<Track>, args: &[(Arc<str>, Val)]) {
        if self.active {
            return;
        }
        let (mut track, mut begin, mut name) = (None, None, None);
        let mut rest = Vec::with_capacity(args.len());
        for (key, value) in args {
            match SeekArg::from_text(key) {
                Some(SeekArg::LabelTrack) => track = value.as_u64(),
                Some(SeekArg::LabelBeginNs) => begin = value.as_u64(),
                Some(SeekArg::LabelName) => name = value.as_str().map(Arc::<str>::from),
                _ => rest.push((key.clone(), value.clone())),
            }
        }
        let (Some(track), Some(begin), Some(name)) = (track, begin, name) else {
            return;
        };
        let Some(tr) = tracks.get_mut(track) else {
            return;
        };
        if matches!(tr.kind, Some(TrackKind::State(..))) && tr.open.is_empty() {
            tr.push(begin, OpenBody::General { name, args: rest });
        }
    }

    /// A read of labels starts afresh at a restart: the state slices of `tracks` left open by
    /// what was read before (whose ends may have been skipped) are forgotten, and labels are
    /// no longer skipped.
    pub(super) fn read_afresh(&mut self, tracks: &mut IidTable<Track>) {
        self.wanted = false;
        self.active = false;
        for t in tracks.values_mut() {
            if matches!(t.kind, Some(TrackKind::State(..))) {
                t.open.clear();
                t.bodies.clear();
            }
        }
    }
}
