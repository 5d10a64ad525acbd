//! What a recording says it lost, and what the analysis could not follow: shown beside the
//! results, so a report over an incomplete trace says where it falls short.
//!
//! The agent samples its total of drops (ring buffers full, unreadable arguments, full maps;
//! every counter of the `drops:` line) once a second into the recording, and writes the
//! drops per reason in its final statistics. The first pass ([`super::index`]) reads both
//! into a [`LossLog`]: the stretches between two samples in which the total rose, and the
//! reasons. A report then says how many drops the recording counted, how many in the
//! selection's time and where ([`Losses`]); a finding or a row whose time overlaps a
//! stretch says how many drops were counted there (`drops_overlapping`: an upper bound on
//! what it lost, the stretches being about a second long).
//!
//! Not every drop loses a record: some lose a detail of one the trace still holds (an
//! argument, a size, a kernel's name; [`loses_records`] tells them apart by reason), and a
//! recording whose drops are all of those says so and marks nothing. Drops whose reasons are
//! unknown (no final statistics) count as lost records.
//!
//! Bounded: [`MAX_STRETCHES`] stretches (past it a new one is merged into the last, so the
//! totals stay exact and only the places coarsen).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use super::fmt;
use ingero_trace::model::{CounterKind, ReadRecord};
use ingero_trace::read::TimeRange;

/// Stretches with drops remembered; past it a new stretch is merged into the last.
pub const MAX_STRETCHES: usize = 4096;
/// Stretches a report lists (the ones with most drops).
pub const STRETCHES_LISTED: usize = 5;
/// The prefix of the kernel's counters of records lost to a full ring buffer.
const RING_FULL_PREFIX: &str = "ring_full_";

/// Drop reasons that lose a detail of a record the trace still holds (an argument, a size,
/// a kernel's name, a rank label), or that are the live table's and the exporter's own
/// rather than the recording's. See [`loses_records`].
const DETAIL_ONLY: &[&str] = &[
    "out_pointer_unreadable",
    "free_of_unknown_pointer",
    "alloc_pointer_unreadable",
    "argument_unreadable",
    "nvtx_message_unreadable",
    "ring_full_kernel_name",
    "kernel_aliases_dropped",
    "kernels_untallied",
    "memory_processes_untallied",
    "memory_handles_unfollowed",
    "graphs_forgotten",
    "nccl_communicators_forgotten",
    "process_exits_settled_early",
];
/// Prefixes of such reasons: kernel names (`kernel_name_unreadable`, `kernel_names_…`), rank
/// labels (`rank_environ_…`), the OTLP exporter's (`otlp_…`).
const DETAIL_ONLY_PREFIXES: &[&str] = &["kernel_name", "rank_", "otlp_"];

/// Whether drops of `reason` lose records (calls, off-CPU intervals, process events,
/// annotations, NVTX ranges): every reason but those known to lose a detail only, so a
/// reason added later counts as losing records until it is classified here.
pub fn loses_records(reason: &str) -> bool {
    !(DETAIL_ONLY.contains(&reason) || DETAIL_ONLY_PREFIXES.iter().any(|p| reason.starts_with(p)))
}

/// Drops counted between two samples of the drops counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DropStretch {
    /// The sample before (or the session's start), on the trace clock.
    pub start_ns: u64,
    /// The sample that counted them.
    pub end_ns: u64,
    pub drops: u64,
}

impl DropStretch {
    /// Whether `[start_ns, end_ns]` meets the stretch: its drops were counted after the
    /// sample before and by the sample that ends it, `(start_ns, end_ns]`.
    fn overlaps(&self, start_ns: u64, end_ns: u64) -> bool {
        start_ns <= self.end_ns && end_ns > self.start_ns
    }
}

/// The drops a recording counted, as its first pass reads them.
#[derive(Clone, Debug, Default)]
pub struct LossLog {
    /// Time-ordered as read.
    stretches: Vec<DropStretch>,
    /// The session's last sample: when, and the total it gave.
    last: Option<(u64, u64)>,
    /// Where the current session started (its first file's session packet).
    session_start: Option<u64>,
    /// Sessions begun (first files read) and final statistics read.
    sessions: u32,
    statistics: u32,
    /// Drops per reason, from the final statistics (summed over sessions).
    by_reason: BTreeMap<String, u64>,
}

impl LossLog {
    /// Takes what `rec` says of drops (a session start, a drops sample, final statistics).
    pub fn add(&mut self, rec: &ReadRecord) {
        match rec {
            ReadRecord::Session(s) if s.file_index == 0 => {
                self.sessions += 1;
                self.session_start = Some(s.ts_ns);
                self.last = None;
            }
            ReadRecord::Counter(c) if c.kind == CounterKind::Drops => {
                let total = u64::try_from(c.value).unwrap_or(0);
                self.sampled(c.ts_ns, total);
            }
            ReadRecord::Statistics(f) => {
                self.statistics += 1;
                let mut total = 0u64;
                for (reason, n) in f.drops.iter().filter(|(_, n)| *n > 0) {
                    *self.by_reason.entry(reason.clone()).or_default() += n;
                    total = total.saturating_add(*n);
                }
                // What the last drain counted after the last sample: until the end (the
                // statistics carry no time; [`Self::seal`] sets it). Never a new count: the
                // totals only grow within a session.
                let (from, before) = self.last.unwrap_or((self.session_start.unwrap_or(0), 0));
                if total > before {
                    self.push(DropStretch {
                        start_ns: from,
                        end_ns: u64::MAX,
                        drops: total - before,
                    });
                }
                self.last = None;
            }
            _ => {}
        }
    }

    /// A total of `total` drops by `ts_ns`: the rise since the sample before is a stretch.
    fn sampled(&mut self, ts_ns: u64, total: u64) {
        let (from, before) = match self.last {
            // A lower total is a new count (a session whose start was not read).
            Some((t, n)) if n <= total => (t, n),
            Some((t, _)) => (t, 0),
            None => (self.session_start.unwrap_or(ts_ns).min(ts_ns), 0),
        };
        if total > before {
            self.push(DropStretch {
                start_ns: from,
                end_ns: ts_ns,
                drops: total - before,
            });
        }
        self.last = Some((ts_ns, total));
    }

    fn push(&mut self, s: DropStretch) {
        let full = self.stretches.len() >= MAX_STRETCHES;
        match self.stretches.last_mut() {
            Some(last) if full => {
                last.start_ns = last.start_ns.min(s.start_ns);
                last.end_ns = last.end_ns.max(s.end_ns);
                last.drops = last.drops.saturating_add(s.drops);
            }
            _ => self.stretches.push(s),
        }
    }

    /// Ends the open stretches (the drops of the final statistics after the last sample) at
    /// the recording's end. A sample can be stamped after the last event the recording holds
    /// (it is stamped when read, and the events after the last one kept were the ones lost): a
    /// stretch that begins there spans instead from where the stretch before it began (the
    /// drops came from the same activity) to the end, so the selections and rows reaching the
    /// end hold its drops; still an upper bound of what they lack.
    pub fn seal(&mut self, end_ns: u64) {
        let mut before: Option<u64> = None;
        for s in &mut self.stretches {
            if s.end_ns == u64::MAX {
                s.end_ns = end_ns.max(s.start_ns);
            }
            if s.start_ns >= end_ns {
                s.start_ns = before.unwrap_or(end_ns.saturating_sub(1));
                s.end_ns = end_ns;
            }
            before = Some(s.start_ns).filter(|t| *t < end_ns);
        }
    }

    /// Drops the recording counted.
    pub fn total(&self) -> u64 {
        self.stretches.iter().map(|s| s.drops).sum()
    }

    /// Drops counted in the stretches that overlap any of `intervals` (each stretch once).
    pub fn overlapping(&self, intervals: &[(u64, u64)]) -> u64 {
        self.stretches
            .iter()
            .filter(|s| intervals.iter().any(|(a, b)| s.overlaps(*a, *b)))
            .map(|s| s.drops)
            .sum()
    }

    /// Of [`Self::total`], those that lost records: all but the drops of reasons that lose a
    /// detail only (drops without a known reason count as lost).
    pub fn records_lost(&self) -> u64 {
        let detail: u64 = self
            .by_reason
            .iter()
            .filter(|(r, _)| !loses_records(r))
            .map(|(_, n)| n)
            .sum();
        self.total().saturating_sub(detail)
    }

    /// [`Self::overlapping`] as a report field: `None` when none were, or when no drop of the
    /// recording lost a record (its stretches then mark nothing missing).
    pub fn overlapping_field(&self, intervals: &[(u64, u64)]) -> Option<u64> {
        if self.records_lost() == 0 {
            return None;
        }
        Some(self.overlapping(intervals)).filter(|n| *n > 0)
    }

    /// Whether every session read ended with its final statistics (the agent exited cleanly).
    pub fn ended_cleanly(&self) -> bool {
        self.statistics >= self.sessions.max(1)
    }

    /// The report for `range`, its places' offsets counted from `origin`: `None` when there
    /// is nothing to say (no drops, a clean end, no limits reached).
    pub fn report(&self, range: TimeRange, origin: u64, limits: Vec<String>) -> Option<Losses> {
        let drops = self.total();
        let ended_cleanly = self.ended_cleanly();
        if drops == 0 && ended_cleanly && limits.is_empty() {
            return None;
        }
        let mut stretches: Vec<DropStretch> = self
            .stretches
            .iter()
            .filter(|s| s.overlaps(range.start_ns, range.end_ns))
            .copied()
            .collect();
        let drops_in_selection = stretches.iter().map(|s| s.drops).sum();
        stretches.sort_by(|a, b| b.drops.cmp(&a.drops).then(a.start_ns.cmp(&b.start_ns)));
        stretches.truncate(STRETCHES_LISTED);
        stretches.sort_by_key(|s| s.start_ns);
        Some(Losses {
            host: None,
            drops,
            records_lost: self.records_lost(),
            drops_in_selection,
            by_reason: self.by_reason.clone(),
            places: stretches
                .iter()
                .map(|s| DropPlace {
                    start_ns: s.start_ns,
                    end_ns: s.end_ns,
                    offset_ns: s.start_ns.saturating_sub(origin),
                    duration_ns: s.end_ns.saturating_sub(s.start_ns),
                    drops: s.drops,
                })
                .collect(),
            final_statistics: ended_cleanly,
            limits,
        })
    }
}

/// Where drops were counted: a stretch between two samples.
#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq)]
pub struct DropPlace {
    /// On the trace clock of the recording's host.
    pub start_ns: u64,
    pub end_ns: u64,
    /// `start_ns` from the recording's start (with several hosts, from the job's start).
    pub offset_ns: u64,
    pub duration_ns: u64,
    pub drops: u64,
}

/// What a report over a recording should be read with: the drops it counted, whether it has
/// its final statistics, and the bounds the analysis reached.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Losses {
    /// The host, when the recordings read are several hosts'.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// Drops the recording counted, over all of it.
    pub drops: u64,
    /// Of them, those that lost records ([`loses_records`]; drops without a known reason
    /// count); the rest lost a detail only.
    pub records_lost: u64,
    /// Of them, those counted in the stretches that overlap the selection's time.
    pub drops_in_selection: u64,
    /// Drops per reason (the final statistics'; empty without them).
    pub by_reason: BTreeMap<String, u64>,
    /// The [`STRETCHES_LISTED`] stretches of the selection with most drops, in time order.
    pub places: Vec<DropPlace>,
    /// False: a session has no final statistics (its agent was killed, or is still
    /// recording), so drops after its last sample are not known.
    pub final_statistics: bool,
    /// Bounds the analysis reached, one sentence each (what it could not follow).
    pub limits: Vec<String>,
}

impl Losses {
    /// What to say, one sentence each.
    pub fn notes(&self) -> Vec<String> {
        let mut out = Vec::new();
        let on = self
            .host
            .as_ref()
            .map_or_else(String::new, |h| format!(" of {h}"));
        let reasons = || {
            let listed: Vec<String> = self
                .by_reason
                .iter()
                .map(|(r, n)| format!("{r} {n}"))
                .collect();
            listed.join(", ")
        };
        if self.drops > 0 && self.records_lost == 0 {
            out.push(format!(
                "the recording{on} counted {} drops of detail only ({}): every event is in the trace, some without an argument, a size or a kernel's name",
                self.drops,
                reasons()
            ));
        } else if self.drops > 0 {
            let mut line = format!("the recording{on} counted {} drops", self.drops);
            if !self.by_reason.is_empty() {
                let _ = write!(line, " ({})", reasons());
            }
            if self.drops_in_selection == 0 {
                line.push_str(", none of them in the selection");
            } else {
                let places: Vec<String> = self
                    .places
                    .iter()
                    .map(|p| {
                        format!(
                            "{}..{} ({})",
                            fmt::offset(p.offset_ns, 0),
                            fmt::offset(p.offset_ns.saturating_add(p.duration_ns), 0),
                            p.drops
                        )
                    })
                    .collect();
                let _ = write!(
                    line,
                    ", {} in the selection's time, counted in {}: events there may be missing, and counts and times fall short of what ran",
                    self.drops_in_selection,
                    places.join(", ")
                );
            }
            out.push(line);
            if self
                .by_reason
                .keys()
                .any(|r| r.starts_with(RING_FULL_PREFIX))
            {
                out.push(
                    "records were lost to full ring buffers: trace with a larger --ringbuf-size (default 8 MiB per ring)".to_owned(),
                );
            }
        }
        if !self.final_statistics {
            out.push(format!(
                "the recording{on} has no final statistics (its agent was killed, or is still recording): drops after its last sample are unknown"
            ));
        }
        out.extend(self.limits.iter().cloned());
        out
    }

    /// [`Self::notes`] for a text report: a line each, starting `note: `.
    pub fn text(&self) -> String {
        self.notes()
            .iter()
            .map(|n| format!("note: {n}\n"))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ingero_trace::model::{CounterSample, FinalStats, SessionInfo, SessionRecord};

    fn session(ts_ns: u64, file_index: u64) -> ReadRecord {
        ReadRecord::Session(SessionRecord {
            ts_ns,
            info: SessionInfo::default(),
            machine_id: 0,
            file_index,
            started_realtime_ns: 0,
        })
    }

    fn sample(ts_ns: u64, value: i64) -> ReadRecord {
        ReadRecord::Counter(CounterSample {
            kind: CounterKind::Drops,
            ts_ns,
            value,
        })
    }

    fn stats(drops: &[(&str, u64)]) -> ReadRecord {
        ReadRecord::Statistics(FinalStats {
            drops: drops.iter().map(|(r, n)| ((*r).to_owned(), *n)).collect(),
            ..FinalStats::default()
        })
    }

    fn log(records: &[ReadRecord], end_ns: u64) -> LossLog {
        let mut l = LossLog::default();
        for r in records {
            l.add(r);
        }
        l.seal(end_ns);
        l
    }

    #[test]
    fn rises_between_samples_are_stretches_and_the_final_statistics_close_the_last() {
        let l = log(
            &[
                session(100, 0),
                sample(1_000, 0),
                sample(2_000, 30),
                sample(3_000, 30),
                sample(4_000, 50),
                stats(&[("ring_full_cuda", 45), ("nesting_overflow", 10), ("x", 0)]),
            ],
            5_000,
        );
        assert_eq!(
            l.stretches,
            vec![
                DropStretch {
                    start_ns: 1_000,
                    end_ns: 2_000,
                    drops: 30
                },
                DropStretch {
                    start_ns: 3_000,
                    end_ns: 4_000,
                    drops: 20
                },
                DropStretch {
                    start_ns: 4_000,
                    end_ns: 5_000,
                    drops: 5
                },
            ]
        );
        assert_eq!(l.total(), 55);
        assert!(l.ended_cleanly());
        assert_eq!(l.overlapping(&[(2_100, 2_900)]), 0);
        assert_eq!(l.overlapping(&[(1_500, 2_500)]), 30);
        assert_eq!(l.overlapping(&[(0, 1_200), (3_500, 3_600)]), 50);
        // A stretch holds what was counted after its first sample and by its last.
        assert_eq!(l.overlapping(&[(2_000, 3_000)]), 30);
        assert_eq!(l.overlapping(&[(4_000, 4_000)]), 20);
        let r = l.report(TimeRange::new(3_500, 6_000), 0, Vec::new());
        let r = r.expect("drops to report");
        assert_eq!((r.drops, r.drops_in_selection), (55, 25));
        assert_eq!(r.by_reason.len(), 2, "zero reasons left out");
        assert!(
            r.text()
                .contains("55 drops (nesting_overflow 10, ring_full_cuda 45)")
        );
        assert!(r.text().contains("--ringbuf-size"));
    }

    #[test]
    fn a_session_without_statistics_and_a_restarted_count_are_said() {
        // Two sessions: the first ends cleanly, the second's count restarts and has no end.
        let l = log(
            &[
                session(0, 0),
                sample(10, 4),
                stats(&[("ring_full_cuda", 4)]),
                session(100, 0),
                sample(200, 7),
                sample(300, 2),
            ],
            400,
        );
        assert_eq!(l.total(), 4 + 7 + 2);
        assert_eq!(l.stretches[1].start_ns, 100, "from the session's start");
        assert_eq!(l.stretches[2].start_ns, 200, "a lower total counts afresh");
        assert!(!l.ended_cleanly());
        let text = l
            .report(TimeRange::all(), 0, Vec::new())
            .map(|r| r.text())
            .unwrap_or_default();
        assert!(text.contains("no final statistics"), "{text}");
    }

    #[test]
    fn final_statistics_add_only_what_the_samples_did_not_count() {
        // Fewer in the statistics than sampled (a counter the end does not report): no new
        // count. A session too short for a sample: its drops span it.
        let l = log(
            &[
                session(0, 0),
                sample(10, 9),
                stats(&[("ring_full_cuda", 4)]),
            ],
            20,
        );
        assert_eq!(l.total(), 9);
        let l = log(&[session(5, 0), stats(&[("ring_full_cuda", 4)])], 20);
        let s = l.stretches.first().copied();
        assert_eq!(s.map(|s| (s.start_ns, s.end_ns, s.drops)), Some((5, 20, 4)));
    }

    #[test]
    fn drops_after_a_last_sample_stamped_past_the_last_event_are_at_the_end() {
        // The last sample was read (and stamped) at 3,000, after the last event the recording
        // holds (2,500): the 7 drops counted after it are still the whole recording's.
        let l = log(
            &[
                session(0, 0),
                sample(1_000, 10),
                sample(3_000, 20),
                stats(&[("ring_full_cuda", 27)]),
            ],
            2_500,
        );
        assert_eq!(l.total(), 27);
        let r = l
            .report(TimeRange::new(0, 2_500), 0, Vec::new())
            .expect("drops to report");
        assert_eq!((r.drops, r.drops_in_selection), (27, 27));
        assert_eq!(l.overlapping(&[(2_400, 2_500)]), 17);
        // From where the rise before it began.
        assert_eq!(l.overlapping(&[(1_100, 1_200)]), 17);
        assert_eq!(l.overlapping(&[(0, 900)]), 10);
    }

    #[test]
    fn drops_of_detail_only_are_said_and_mark_nothing() {
        let l = log(
            &[
                session(0, 0),
                sample(10, 3),
                stats(&[
                    ("kernel_names_truncated", 2),
                    ("free_of_unknown_pointer", 1),
                ]),
            ],
            20,
        );
        assert_eq!((l.total(), l.records_lost()), (3, 0));
        assert_eq!(l.overlapping_field(&[(0, 20)]), None);
        let text = l
            .report(TimeRange::all(), 0, Vec::new())
            .map(|r| r.text())
            .unwrap_or_default();
        assert!(text.contains("3 drops of detail only"), "{text}");
        // Without final statistics the reasons are unknown: counted as lost.
        let l = log(&[session(0, 0), sample(10, 3)], 20);
        assert_eq!(l.records_lost(), 3);
        assert_eq!(l.overlapping_field(&[(0, 20)]), Some(3));
    }

    #[test]
    fn every_kernel_counter_is_classified() {
        // The kernel's counters: the ring buffers' and the nesting stack's lose records; an
        // unreadable argument or name, an unknown free, a detail.
        let lost = [
            "ring_full_cuda",
            "ring_full_off_cpu",
            "ring_full_exec",
            "ring_full_exit",
            "ring_full_fork",
            "ring_full_nvtx_probe",
            "ring_full_driver_log",
            "nesting_overflow",
            "tracked_map_full",
            "entry_state_unavailable",
            "off_cpu_state_unavailable",
        ];
        for (_, name) in ingero_ebpf::counters::NAMED {
            assert_eq!(loses_records(name), lost.contains(name), "{name}");
        }
        for name in [
            "decode_short_record",
            "annotations_dropped",
            "nvtx_queue_full",
        ] {
            assert!(loses_records(name), "{name}");
        }
        for name in [
            "kernel_names_truncated",
            "rank_environ_unreadable",
            "otlp_late_events",
        ] {
            assert!(!loses_records(name), "{name}");
        }
    }

    #[test]
    fn a_clean_recording_without_drops_has_nothing_to_say_unless_a_limit_was_reached() {
        let l = log(&[session(0, 0), sample(10, 0), stats(&[("a", 0)])], 20);
        assert_eq!(l.report(TimeRange::all(), 0, Vec::new()), None);
        let r = l.report(TimeRange::all(), 0, vec!["limit".into()]);
        assert_eq!(r.map(|r| r.text()).as_deref(), Some("note: limit\n"));
    }

    #[test]
    fn past_the_bound_stretches_merge_and_the_total_stays_exact() {
        let mut recs = vec![session(0, 0)];
        for i in 0..(MAX_STRETCHES as i64 + 10) {
            recs.push(sample((i as u64 + 1) * 10, i + 1));
        }
        let l = log(&recs, u64::MAX);
        assert_eq!(l.stretches.len(), MAX_STRETCHES);
        assert_eq!(l.total(), MAX_STRETCHES as u64 + 10);
        let last = l.stretches.last().copied();
        assert_eq!(
            last.map(|s| s.end_ns),
            Some((MAX_STRETCHES as u64 + 10) * 10)
        );
    }
}
