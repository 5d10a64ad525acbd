//! [`XidLog`]: the Xid (and NVSwitch SXid) reports of the NVIDIA driver a recording holds, as
//! the first pass found them (they sit outside the compressed chunks, so finding them costs
//! nothing extra). Bounded: a fault storm (the same Xid thousands of times a second) keeps its
//! first [`MAX_XIDS`] reports and counts the rest.

use ingero_trace::model::{DriverMessage, XidReport};

/// Reports kept at most; the later ones are counted in [`XidLog::dropped`].
pub const MAX_XIDS: usize = 4096;

/// The Xid reports read, in time order (the first pass reads in order).
#[derive(Debug, Default)]
pub struct XidLog {
    /// (trace clock ns, the report).
    pub reports: Vec<(u64, XidReport)>,
    /// Reports past [`MAX_XIDS`], not kept (`explain` says so in its limits).
    pub dropped: u64,
}

impl XidLog {
    /// Takes one driver message (one that is no Xid report is not kept).
    pub fn add(&mut self, message: &DriverMessage) {
        let Some(report) = message.xid() else {
            return;
        };
        if self.reports.len() >= MAX_XIDS {
            self.dropped += 1;
            return;
        }
        self.reports.push((message.ts_ns, report));
    }

    /// The reports in `[start, end]`.
    pub fn between(&self, start: u64, end: u64) -> impl Iterator<Item = &(u64, XidReport)> {
        let from = self.reports.partition_point(|(t, _)| *t < start);
        self.reports[from..]
            .iter()
            .take_while(move |(t, _)| *t <= end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(ts_ns: u64, text: &str) -> DriverMessage {
        DriverMessage {
            ts_ns,
            text: text.to_owned(),
            truncated: false,
        }
    }

    #[test]
    fn keeps_xid_reports_in_order_and_counts_the_rest() {
        let mut log = XidLog::default();
        log.add(&message(
            5,
            "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  535.183.01",
        ));
        for i in 0..(MAX_XIDS as u64 + 3) {
            log.add(&message(
                10 + i,
                "NVRM: Xid (PCI:0000:01:00): 13, pid=7, name=python3, Graphics Exception",
            ));
        }
        assert_eq!(
            log.reports.first().map(|(t, _)| *t),
            Some(10),
            "not the module load"
        );
        assert_eq!(log.reports.len(), MAX_XIDS);
        assert_eq!(log.dropped, 3);
        let window: Vec<u64> = log.between(12, 14).map(|(t, _)| *t).collect();
        assert_eq!(window, vec![12, 13, 14]);
        assert_eq!(log.between(0, 9).count(), 0);
    }
}
