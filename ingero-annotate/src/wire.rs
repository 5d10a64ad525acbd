//! The decoded form of one accepted wire line.

/// One annotation as the client sent it, after validation. Times are unix
/// nanoseconds (CLOCK_REALTIME), exactly as on the wire; converting them to
/// the trace clock is the agent's job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireAnnotation {
    /// Labels in the order they appeared on the line. Keys are unique.
    pub labels: Vec<(String, String)>,
    /// The process the annotation is scoped to; `None` means trace-wide.
    pub pid: Option<u32>,
    /// Field 22 of `/proc/<pid>/stat` as the client saw it; only with `pid`.
    pub start_time: Option<u64>,
    /// Instant timestamp; `None` means "stamp it on receipt".
    pub ts: Option<u64>,
    /// `(span_start, span_end)`, `span_end >= span_start`. When present the
    /// annotation is a span and `ts` is informational only.
    pub span: Option<(u64, u64)>,
    /// Protocol version the line declared (1 when absent).
    pub version: u64,
    /// How many unknown top-level fields were ignored.
    pub unknown_fields: u32,
}
