//! What happens to one complete line: rate limit, parse and validate, pid
//! authorisation, clock conversion, and a non-blocking hand-off to the
//! timeline queue. Synchronous and allocation-light: this is the ingest hot
//! path.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use ingero_annotate::{RejectReason, parse_line};
use tokio::sync::mpsc::error::TrySendError;

use super::authz::PidAuthorizer;
use super::ratelimit::TokenBucket;
use super::received::{AnnotationTime, Peer, ReceivedAnnotation};
use super::shared::Shared;
use ingero_trace::clock::{monotonic_now_ns, realtime_now_ns};

/// The fate of one line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Queued for the timeline.
    Accepted,
    /// Refused for this reason.
    Rejected(RejectReason),
    /// Valid, but the timeline queue was full (or gone).
    Dropped,
}

impl Outcome {
    /// The reply-mode answer, newline included.
    pub(crate) fn reply(self) -> String {
        match self {
            Outcome::Accepted => "{\"ok\":true}\n".to_owned(),
            Outcome::Rejected(r) => format!("{{\"ok\":false,\"error\":\"{}\"}}\n", r.as_str()),
            Outcome::Dropped => "{\"ok\":false,\"error\":\"queue_full\"}\n".to_owned(),
        }
    }
}

/// Per-connection line handler.
pub(crate) struct LineProcessor {
    shared: Arc<Shared>,
    peer: Peer,
    bucket: TokenBucket,
    authz: PidAuthorizer,
}

impl LineProcessor {
    pub(crate) fn new(shared: Arc<Shared>, peer: Peer) -> LineProcessor {
        let bucket = TokenBucket::new(shared.rate_per_conn, shared.burst, Instant::now());
        let authz = PidAuthorizer::new(PathBuf::from("/proc"));
        LineProcessor {
            shared,
            peer,
            bucket,
            authz,
        }
    }

    /// Handle one line and count the outcome.
    pub(crate) fn process(&mut self, line: &[u8]) -> Outcome {
        let outcome = self.decide(line);
        let c = &self.shared.counters;
        match outcome {
            Outcome::Accepted => c.ingested(),
            Outcome::Rejected(r) => c.rejected(r),
            Outcome::Dropped => c.dropped(),
        }
        outcome
    }

    /// Count an over-long line (the framer skipped it).
    pub(crate) fn too_long(&mut self) -> Outcome {
        self.shared.counters.rejected(RejectReason::LineTooLong);
        Outcome::Rejected(RejectReason::LineTooLong)
    }

    fn decide(&mut self, line: &[u8]) -> Outcome {
        let now = Instant::now();
        // Per connection first, so one noisy writer exhausts its own bucket
        // before it can eat into everyone's share.
        if !self.bucket.try_take(now) || !self.shared.global.try_take(now) {
            return Outcome::Rejected(RejectReason::RateLimited);
        }
        let now_real = realtime_now_ns();
        let wire = match parse_line(line, now_real) {
            Ok(w) => w,
            Err(rej) => return Outcome::Rejected(rej.reason),
        };
        self.shared.counters.unknown_fields(wire.unknown_fields);
        let scope = match wire.pid {
            None => None,
            Some(pid) => match self.authz.authorize(&self.peer, pid, wire.start_time, now) {
                Ok(scope) => Some(scope),
                Err(reason) => return Outcome::Rejected(reason),
            },
        };
        let received_ns = monotonic_now_ns();
        let clock = &self.shared.clock;
        let time = AnnotationTime::resolve(wire.span, wire.ts, clock, received_ns, now_real);
        let annotation = ReceivedAnnotation {
            labels: wire.labels,
            scope,
            time,
            provenance: self.peer,
            received_ns,
        };
        match self.shared.tx.try_send(annotation) {
            Ok(()) => Outcome::Accepted,
            Err(TrySendError::Full(_) | TrySendError::Closed(_)) => Outcome::Dropped,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::annotate::IngestConfig;

    fn processor(
        cfg: &IngestConfig,
    ) -> (
        LineProcessor,
        tokio::sync::mpsc::Receiver<ReceivedAnnotation>,
    ) {
        let (shared, rx) = Shared::new(cfg);
        let peer = Peer {
            uid: 0,
            gid: 0,
            pid: Some(std::process::id()),
        };
        (LineProcessor::new(shared, peer), rx)
    }

    #[test]
    fn accepted_lines_are_converted_and_queued() {
        let (mut p, mut rx) = processor(&IngestConfig::default());
        let real = realtime_now_ns();
        let line = format!(
            r#"{{"labels":{{"step":"42"}},"pid":{},"ts":{real}}}"#,
            std::process::id()
        );
        assert_eq!(p.process(line.as_bytes()), Outcome::Accepted);
        let a = rx.try_recv().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(a.labels, vec![("step".to_owned(), "42".to_owned())]);
        assert_eq!(a.scope.map(|s| s.pid), Some(std::process::id()));
        match a.time {
            AnnotationTime::Instant {
                ts_ns,
                realtime_ns,
                stamped_by_agent,
            } => {
                assert_eq!(realtime_ns, real);
                assert!(!stamped_by_agent);
                assert!(ts_ns.abs_diff(monotonic_now_ns()) < 1_000_000_000);
            }
            other => panic!("{other:?}"),
        }
        // No ts: stamped on receipt.
        assert_eq!(p.process(br#"{"labels":{"a":"b"}}"#), Outcome::Accepted);
        let a = rx.try_recv().unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(
            a.time,
            AnnotationTime::Instant {
                stamped_by_agent: true,
                ..
            }
        ));
        assert_eq!(a.scope, None);
    }

    #[test]
    fn a_full_queue_drops_and_counts() {
        let cfg = IngestConfig {
            queue_capacity: 2,
            ..IngestConfig::default()
        };
        let (mut p, _rx) = processor(&cfg);
        let outcomes: Vec<Outcome> = (0..5)
            .map(|_| p.process(br#"{"labels":{"a":"b"}}"#))
            .collect();
        assert_eq!(&outcomes[..2], &[Outcome::Accepted, Outcome::Accepted]);
        assert!(outcomes[2..].iter().all(|o| *o == Outcome::Dropped));
        let s = p.shared.counters.snapshot();
        assert_eq!((s.ingested, s.dropped), (2, 3));
    }

    #[test]
    fn rejections_are_counted_and_replied() {
        let (mut p, _rx) = processor(&IngestConfig::default());
        let o = p.process(br#"{"labels":{}}"#);
        assert_eq!(o, Outcome::Rejected(RejectReason::EmptyLabels));
        assert_eq!(o.reply(), "{\"ok\":false,\"error\":\"empty_labels\"}\n");
        assert_eq!(Outcome::Accepted.reply(), "{\"ok\":true}\n");
        assert_eq!(
            p.process(br#"{"labels":{"a":"b"},"pid":4194303}"#),
            Outcome::Rejected(RejectReason::NoSuchProcess)
        );
        assert_eq!(
            p.process(br#"{"labels":{"a":"b"},"x":1,"y":2}"#),
            Outcome::Accepted
        );
        let s = p.shared.counters.snapshot();
        assert_eq!(s.rejected_for(RejectReason::EmptyLabels), 1);
        assert_eq!(s.unknown_fields, 2);
    }

    #[test]
    fn per_connection_rate_limit() {
        let cfg = IngestConfig {
            rate_per_conn: 1,
            burst: 5,
            ..IngestConfig::default()
        };
        let (mut p, _rx) = processor(&cfg);
        let accepted = (0..20)
            .filter(|_| p.process(br#"{"labels":{"a":"b"}}"#) == Outcome::Accepted)
            .count();
        assert_eq!(accepted, 5);
        assert_eq!(
            p.shared
                .counters
                .snapshot()
                .rejected_for(RejectReason::RateLimited),
            15
        );
    }
}
