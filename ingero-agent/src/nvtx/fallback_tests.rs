//! The fallback pairing: per-thread stacks, instants for marks, starts and ends, processes
//! connected to the socket dropped, bounds, unclosed ranges at exit.

use super::*;

fn call(call: NvtxCall, ts_ns: u64, tid: u32, message: &str) -> ProbedCall {
    ProbedCall {
        call,
        ts_ns,
        sp: 0,
        pid: 7,
        tid,
        comm: format!("t{tid}"),
        message: message.to_owned(),
        truncated: false,
    }
}

fn run(f: &mut Fallback, calls: Vec<ProbedCall>) -> Vec<NvtxRecord> {
    let mut out = Vec::new();
    for c in calls {
        f.feed(c, false, &mut |r| out.push(r));
    }
    out
}

fn summary(r: &NvtxRecord) -> (NvtxKind, u32, u32, &str, u64, u64, bool) {
    (
        r.kind,
        r.tid,
        r.depth,
        r.message.as_str(),
        r.ts_ns,
        r.end_ns,
        r.unclosed,
    )
}

#[test]
fn pushes_pair_with_pops_per_thread_inner_first() {
    use NvtxCall::*;
    let mut f = Fallback::new(Limits::default());
    let out = run(
        &mut f,
        vec![
            call(RangePushA, 10, 1, "outer"),
            call(RangePushA, 11, 2, "other thread"),
            call(RangePushEx, 12, 1, "inner"),
            call(RangePop, 13, 1, ""),
            call(RangePop, 14, 2, ""),
            call(MarkA, 15, 1, "here"),
            call(RangePop, 16, 1, ""),
        ],
    );
    let got: Vec<_> = out.iter().map(summary).collect();
    assert_eq!(
        got,
        vec![
            (NvtxKind::PushPop, 1, 1, "inner", 12, 13, false),
            (NvtxKind::PushPop, 2, 0, "other thread", 11, 14, false),
            (NvtxKind::Mark, 1, 0, "here", 15, 15, false),
            (NvtxKind::PushPop, 1, 0, "outer", 10, 16, false),
        ]
    );
    assert_eq!(out[0].thread_name, "t1");
    assert_eq!(out[0].pid, 7);
    assert_eq!(f.counters.records, 4);
}

#[test]
fn starts_and_ends_are_instants_since_they_cannot_be_paired() {
    use NvtxCall::*;
    let mut f = Fallback::new(Limits::default());
    let out = run(
        &mut f,
        vec![call(RangeStartA, 10, 1, "load"), call(RangeEnd, 20, 2, "")],
    );
    let got: Vec<_> = out.iter().map(summary).collect();
    assert_eq!(
        got,
        vec![
            (NvtxKind::Mark, 1, 0, "load", 10, 10, false),
            (NvtxKind::Mark, 2, 0, "nvtxRangeEnd", 20, 20, false),
        ]
    );
}

#[test]
fn a_pop_with_nothing_open_is_counted_and_open_ranges_close_at_exit() {
    use NvtxCall::*;
    let mut f = Fallback::new(Limits::default());
    let mut out = run(
        &mut f,
        vec![
            call(RangePop, 5, 1, ""),
            call(RangePushA, 10, 1, "a"),
            call(RangePushA, 11, 1, "b"),
        ],
    );
    assert_eq!(f.counters.unmatched, 1);
    assert!(out.is_empty());
    f.exit(7, 50, &mut |r| out.push(r));
    let got: Vec<_> = out.iter().map(summary).collect();
    assert_eq!(
        got,
        vec![
            (NvtxKind::PushPop, 1, 0, "a", 10, 50, true),
            (NvtxKind::PushPop, 1, 1, "b", 11, 50, true),
        ]
    );
    assert_eq!(f.counters.unclosed, 2);
    // The exit forgot the process: a later pop is unmatched.
    run(&mut f, vec![call(RangePop, 60, 1, "")]);
    assert_eq!(f.counters.unmatched, 2);
}

#[test]
fn finish_closes_everything_at_the_newest_time() {
    use NvtxCall::*;
    let mut f = Fallback::new(Limits::default());
    let mut out = run(
        &mut f,
        vec![call(RangePushA, 10, 1, "a"), call(MarkA, 30, 2, "m")],
    );
    f.finish(&mut |r| out.push(r));
    assert_eq!(
        summary(&out[1]),
        (NvtxKind::PushPop, 1, 0, "a", 10, 30, true)
    );
}

#[test]
fn calls_of_connected_processes_are_dropped_and_counted() {
    let mut f = Fallback::new(Limits::default());
    let mut out = Vec::new();
    f.feed(call(NvtxCall::MarkA, 1, 1, "m"), true, &mut |r| out.push(r));
    f.feed(call(NvtxCall::RangePushA, 2, 1, "p"), true, &mut |r| {
        out.push(r)
    });
    assert!(out.is_empty());
    assert_eq!(f.counters.connected, 2);
    f.finish(&mut |r| out.push(r));
    assert!(out.is_empty());
}

#[test]
fn depth_threads_and_processes_are_bounded_and_pops_stay_paired() {
    use NvtxCall::*;
    let limits = Limits {
        max_processes: 1,
        max_threads: 1,
        max_depth: 1,
    };
    let mut f = Fallback::new(limits);
    let mut calls = vec![
        call(RangePushA, 1, 1, "kept"),
        call(RangePushA, 2, 1, "too deep"),
        call(RangePushA, 3, 2, "second thread"),
    ];
    let mut other = call(RangePushA, 4, 1, "second process");
    other.pid = 8;
    calls.push(other);
    calls.push(call(RangePop, 5, 1, ""));
    calls.push(call(RangePop, 6, 1, ""));
    let out = run(&mut f, calls);
    assert_eq!(f.counters.over_limit, 3);
    let got: Vec<_> = out.iter().map(summary).collect();
    assert_eq!(got, vec![(NvtxKind::PushPop, 1, 0, "kept", 1, 6, false)]);
}

#[test]
fn the_lazy_init_reentry_is_dropped_but_a_repeated_call_is_not() {
    use NvtxCall::*;
    let at = |c: NvtxCall, ts: u64, sp: u64, msg: &str| ProbedCall {
        sp,
        ..call(c, ts, 1, msg)
    };
    let mut f = Fallback::new(Limits::default());
    let out = run(
        &mut f,
        vec![
            // The process's first call, then its re-entry (a tail jump: the same stack).
            at(RangePushA, 10, 0x7000, "outer"),
            at(RangePushA, 11, 0x7000, "outer"),
            // The program's own nested push of the same text from the same frame: kept.
            at(RangePushA, 12, 0x7000, "outer"),
            at(RangePushA, 13, 0x7000, "outer"),
            at(RangePop, 14, 0x7000, ""),
            at(RangePop, 15, 0x7000, ""),
            at(RangePop, 16, 0x7000, ""),
        ],
    );
    assert_eq!(f.counters.reentries, 1);
    let got: Vec<_> = out.iter().map(summary).collect();
    assert_eq!(
        got,
        vec![
            (NvtxKind::PushPop, 1, 2, "outer", 13, 14, false),
            (NvtxKind::PushPop, 1, 1, "outer", 12, 15, false),
            (NvtxKind::PushPop, 1, 0, "outer", 10, 16, false),
        ]
    );

    // Too late, too far below, or on another thread: not a re-entry.
    for (ts, sp, tid) in [
        (11 + REENTRY_NS, 0x7000, 1),
        (11, 0x7000 - REENTRY_STACK - 8, 1),
        (11, 0x7000, 2),
    ] {
        let mut f = Fallback::new(Limits::default());
        let mut second = at(MarkA, ts, sp, "m");
        second.tid = tid;
        let out = run(&mut f, vec![at(MarkA, 10, 0x7000, "m"), second]);
        assert_eq!(
            (out.len(), f.counters.reentries),
            (2, 0),
            "{ts} {sp:x} {tid}"
        );
    }
}
