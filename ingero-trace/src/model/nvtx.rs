//! [`NvtxRecord`]: an NVTX range or mark as the timeline holds it. The agent pairs what the
//! injection library streams (a push with its pop, a start with its end) into one record per
//! range; the writer draws it (push/pop ranges nested on their thread's NVTX track, start/end
//! ranges on lanes of their process, marks as instants) and the reader yields it back equal.

/// What kind of NVTX event a record is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum NvtxKind {
    /// `nvtxRangePush*` … `nvtxRangePop` (and the domain forms): nests per thread and domain.
    PushPop,
    /// `nvtxRangeStart*` … `nvtxRangeEnd`: a process range, possibly ended on another thread.
    StartEnd,
    /// `nvtxMark*`: an instant.
    Mark,
}

impl NvtxKind {
    /// Its name in JSON and in the recording.
    pub const fn name(self) -> &'static str {
        match self {
            NvtxKind::PushPop => "push_pop",
            NvtxKind::StartEnd => "start_end",
            NvtxKind::Mark => "mark",
        }
    }

    /// The kind a name stands for.
    pub fn from_name(s: &str) -> Option<NvtxKind> {
        [NvtxKind::PushPop, NvtxKind::StartEnd, NvtxKind::Mark]
            .into_iter()
            .find(|k| k.name() == s)
    }
}

/// The payload an `nvtxEventAttributes_t` carried.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum NvtxPayload {
    /// An unsigned payload (`uint64`, `uint32`).
    U64(u64),
    /// A signed payload (`int64`, `int32`).
    I64(i64),
    /// A floating-point payload (`double`, `float`).
    F64(f64),
}

/// One NVTX range (or mark).
#[derive(Clone, Debug, PartialEq)]
pub struct NvtxRecord {
    /// Push/pop range, start/end range or mark.
    pub kind: NvtxKind,
    /// Push, start or mark time (CLOCK_MONOTONIC ns).
    pub ts_ns: u64,
    /// Pop or end time (equal to `ts_ns` for a mark).
    pub end_ns: u64,
    /// The process.
    pub pid: u32,
    /// The thread that pushed, started or marked.
    pub tid: u32,
    /// For start/end ranges: the thread that ended it, when another one did.
    pub end_tid: Option<u32>,
    /// Nesting level on its thread and domain (0: outermost); 0 for the other kinds.
    pub depth: u32,
    /// The message (a registered string resolved), empty when there was none.
    pub message: String,
    /// The domain's name; `None`: the default domain.
    pub domain: Option<String>,
    /// The category (0: none).
    pub category: u32,
    /// The category's name, when the program named it.
    pub category_name: Option<String>,
    /// ARGB color, when the program gave one.
    pub color: Option<u32>,
    /// The payload, when the program gave one.
    pub payload: Option<NvtxPayload>,
    /// The message was longer than the library keeps and was cut.
    pub truncated: bool,
    /// Still open when its process ended (or disconnected): `end_ns` is when that was seen.
    pub unclosed: bool,
    /// The thread's name, when the agent knew it (names the thread's track if the recording
    /// has not described it yet; not stored with the range).
    pub thread_name: String,
}

impl NvtxRecord {
    /// A record of `kind` with everything else empty (for building one field by field).
    pub fn new(kind: NvtxKind, pid: u32, tid: u32, ts_ns: u64, end_ns: u64) -> NvtxRecord {
        NvtxRecord {
            kind,
            ts_ns,
            end_ns,
            pid,
            tid,
            end_tid: None,
            depth: 0,
            message: String::new(),
            domain: None,
            category: 0,
            category_name: None,
            color: None,
            payload: None,
            truncated: false,
            unclosed: false,
            thread_name: String::new(),
        }
    }

    /// Whether it is a range (not a mark).
    pub fn is_range(&self) -> bool {
        self.kind != NvtxKind::Mark
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_round_trip_by_name() {
        for k in [NvtxKind::PushPop, NvtxKind::StartEnd, NvtxKind::Mark] {
            assert_eq!(NvtxKind::from_name(k.name()), Some(k));
        }
        assert_eq!(NvtxKind::from_name("pop"), None);
    }
}
