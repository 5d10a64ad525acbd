//! Lines in, annotations out: concurrency, framing edge cases, validation
//! on a live connection, reply mode, time conversion.

use std::collections::HashSet;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::support::{
    OK, ReplyClient, assert_quiet, collect, connect, label, refused, start, wait_for,
};
use crate::annotate::AnnotationTime;
use ingero_trace::clock::{monotonic_now_ns, realtime_now_ns};

#[tokio::test]
async fn eight_connections_of_25_lines_all_land() {
    let (_dir, server, mut rx) = start("concurrent", |_| {}).await;
    let path = server.socket_path().to_owned();
    let writers: Vec<_> = (0..8)
        .map(|c| {
            let path = path.clone();
            tokio::spawn(async move {
                let mut s = connect(&path).await;
                for i in 0..25 {
                    let line = format!("{{\"labels\":{{\"conn\":\"{c}\",\"i\":\"{i}\"}}}}\n");
                    s.write_all(line.as_bytes())
                        .await
                        .unwrap_or_else(|e| panic!("{e}"));
                }
            })
        })
        .collect();
    for w in writers {
        w.await.unwrap_or_else(|e| panic!("{e}"));
    }
    let got = collect(&mut rx, 200).await;
    let pairs: HashSet<(String, String)> = got
        .iter()
        .map(|a| {
            (
                label(a, "conn").unwrap_or("").to_owned(),
                label(a, "i").unwrap_or("").to_owned(),
            )
        })
        .collect();
    assert_eq!(pairs.len(), 200, "every (conn, line) exactly once");
    assert_quiet(&mut rx).await;
    wait_for(&server, "200 ingested", |c| {
        c.ingested == 200 && c.rejected_total == 0
    })
    .await;
    server.shutdown().await;
}

#[tokio::test]
async fn a_line_split_across_many_writes() {
    let (_dir, server, mut rx) = start("split", |_| {}).await;
    let mut s = connect(server.socket_path()).await;
    let line = b"{\"labels\":{\"phase\":\"backward\",\"model\":\"llama-3-8b \\u00e9\"}}\n";
    for piece in line.chunks(3) {
        s.write_all(piece).await.unwrap_or_else(|e| panic!("{e}"));
        s.flush().await.unwrap_or_else(|e| panic!("{e}"));
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let got = collect(&mut rx, 1).await;
    assert_eq!(label(&got[0], "phase"), Some("backward"));
    assert_eq!(label(&got[0], "model"), Some("llama-3-8b é"));
    server.shutdown().await;
}

#[tokio::test]
async fn a_client_that_disconnects_mid_line_loses_only_that_line() {
    let (_dir, server, mut rx) = start("midline", |_| {}).await;
    {
        let mut s = connect(server.socket_path()).await;
        s.write_all(b"{\"labels\":{\"a\":\"1\"}}\n{\"labels\":{\"a\":\"2\"")
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let got = collect(&mut rx, 1).await;
    assert_eq!(label(&got[0], "a"), Some("1"));
    wait_for(&server, "the cut line refused", |c| {
        c.rejected_for(ingero_annotate::RejectReason::MalformedJson) == 1
    })
    .await;
    // The server is unaffected.
    let mut s = connect(server.socket_path()).await;
    s.write_all(b"{\"labels\":{\"a\":\"3\"}}\n")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(label(&collect(&mut rx, 1).await[0], "a"), Some("3"));
    server.shutdown().await;
}

#[tokio::test]
async fn a_final_line_without_newline_is_still_read() {
    let (_dir, server, mut rx) = start("nonewline", |_| {}).await;
    {
        let mut s = connect(server.socket_path()).await;
        s.write_all(b"{\"labels\":{\"a\":\"last\"}}")
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }
    assert_eq!(label(&collect(&mut rx, 1).await[0], "a"), Some("last"));
    server.shutdown().await;
}

#[tokio::test]
async fn bad_lines_then_good_ones_on_one_connection() {
    let (_dir, server, mut rx) = start("bad-then-good", |_| {}).await;
    let mut c = ReplyClient::connect(server.socket_path()).await;
    let now = realtime_now_ns();
    let cases: Vec<(String, &str)> = vec![
        ("not json".into(), "malformed_json"),
        (r#"{"labels":{"step":42}}"#.into(), "wrong_type"),
        (r#"{"labels":{"a":"1"},"pid":1.5}"#.into(), "wrong_type"),
        (r#"{"labels":{"a":"1","a":"2"}}"#.into(), "duplicate_key"),
        (r#"{"labels":{}}"#.into(), "empty_labels"),
        (r#"{"labels":{"a b":"1"}}"#.into(), "bad_key"),
        (
            format!(r#"{{"labels":{{"a":"{}"}}}}"#, "x".repeat(257)),
            "value_too_long",
        ),
        (
            format!(
                r#"{{"labels":{{{}}}}}"#,
                (0..33)
                    .map(|i| format!("\"k{i}\":\"v\""))
                    .collect::<Vec<_>>()
                    .join(",")
            ),
            "too_many_labels",
        ),
        (r#"{"labels":{"a":"x\u202ey"}}"#.into(), "control_char"),
        (
            format!(r#"{{"labels":{{"a":"1"}},"span_start":{now}}}"#),
            "half_span",
        ),
        (
            format!(
                r#"{{"labels":{{"a":"1"}},"span_start":{now},"span_end":{}}}"#,
                now - 1
            ),
            "reversed_span",
        ),
        (
            r#"{"labels":{"a":"1"},"ts":1700000000}"#.into(),
            "ts_out_of_range",
        ),
        (
            r#"{"labels":{"a":"1"},"v":2}"#.into(),
            "unsupported_version",
        ),
        (r#"{"labels":{"a":"1"},"pid":0}"#.into(), "bad_pid"),
        (
            r#"{"labels":{"a":"1"},"pid":4194303}"#.into(),
            "no_such_process",
        ),
    ];
    for (line, reason) in &cases {
        assert_eq!(c.send(line.as_bytes()).await, refused(reason), "{line}");
    }
    assert_eq!(
        c.send(b"{\"labels\":{\"a\":\"\xff\"}}").await,
        refused("invalid_utf8")
    );
    assert_eq!(c.send(br#"{"labels":{"step":"42"}}"#).await, OK);
    assert_eq!(
        c.send(b"{\"labels\":{\"step\":\"43\"}}\r").await,
        OK,
        "trailing CR tolerated"
    );
    let got = collect(&mut rx, 2).await;
    assert_eq!(
        (label(&got[0], "step"), label(&got[1], "step")),
        (Some("42"), Some("43"))
    );
    let counters = server.counters();
    assert_eq!(counters.rejected_total, cases.len() as u64 + 1);
    assert_eq!(counters.rejected.get("wrong_type"), Some(&2));
    server.shutdown().await;
}

#[tokio::test]
async fn an_oversized_line_then_a_good_one() {
    let (_dir, server, mut rx) = start("oversized", |_| {}).await;
    let mut c = ReplyClient::connect(server.socket_path()).await;
    // 1 MiB of one line, far over the cap, then a valid line.
    let mut big = b"{\"labels\":{\"a\":\"".to_vec();
    big.extend(std::iter::repeat_n(b'x', 1 << 20));
    big.extend_from_slice(b"\"}}");
    assert_eq!(c.send(&big).await, refused("line_too_long"));
    assert_eq!(c.send(br#"{"labels":{"after":"big"}}"#).await, OK);
    assert_eq!(label(&collect(&mut rx, 1).await[0], "after"), Some("big"));
    // A maximal valid annotation, fully escaped (~60 KB), still fits.
    let esc = |n: usize| "\\u0061".repeat(n);
    let body: Vec<String> = (0..32)
        .map(|i| format!("\"k{i:0>63}\":\"{}\"", esc(256)))
        .collect();
    let line = format!("{{\"labels\":{{{}}}}}", body.join(","));
    assert!(line.len() > 50_000);
    assert_eq!(c.send(line.as_bytes()).await, OK);
    let got = collect(&mut rx, 1).await;
    assert_eq!(got[0].labels.len(), 32);
    assert_eq!(got[0].labels[0].1, "a".repeat(256));
    server.shutdown().await;
}

#[tokio::test]
async fn without_the_hello_there_are_no_answers() {
    let (_dir, server, mut rx) = start("noreply", |_| {}).await;
    let mut s = connect(server.socket_path()).await;
    s.write_all(b"{\"labels\":{\"a\":\"1\"}}\n{\"v\":1,\"reply\":true}\nbad\n")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    collect(&mut rx, 1).await;
    wait_for(&server, "two refusals", |c| c.rejected_total == 2).await;
    assert_eq!(
        server.counters().rejected.get("missing_labels"),
        Some(&1),
        "a late hello is just a bad line"
    );
    let mut buf = [0u8; 64];
    let read = tokio::time::timeout(Duration::from_millis(200), s.read(&mut buf)).await;
    assert!(read.is_err(), "nothing was written back: {read:?}");
    server.shutdown().await;
}

#[tokio::test]
async fn times_are_converted_to_the_trace_clock() {
    let (_dir, server, mut rx) = start("clock", |_| {}).await;
    let mut c = ReplyClient::connect(server.socket_path()).await;
    let real = realtime_now_ns();
    let line = format!(
        r#"{{"labels":{{"a":"1"}},"span_start":{},"span_end":{real}}}"#,
        real - 1_000_000_000
    );
    assert_eq!(c.send(line.as_bytes()).await, OK);
    assert_eq!(
        c.send(format!(r#"{{"labels":{{"a":"2"}},"ts":{real}}}"#).as_bytes())
            .await,
        OK
    );
    assert_eq!(c.send(br#"{"labels":{"a":"3"}}"#).await, OK);
    let got = collect(&mut rx, 3).await;
    let mono = monotonic_now_ns();
    match got[0].time {
        AnnotationTime::Span {
            start_ns,
            end_ns,
            start_realtime_ns,
            end_realtime_ns,
        } => {
            assert_eq!(
                end_ns - start_ns,
                1_000_000_000,
                "durations survive conversion"
            );
            assert!(end_ns.abs_diff(mono) < 2_000_000_000);
            assert_eq!(
                (start_realtime_ns, end_realtime_ns),
                (real - 1_000_000_000, real)
            );
        }
        other => panic!("{other:?}"),
    }
    match (got[1].time, got[2].time) {
        (
            AnnotationTime::Instant {
                ts_ns,
                realtime_ns,
                stamped_by_agent: false,
            },
            AnnotationTime::Instant {
                ts_ns: stamped,
                stamped_by_agent: true,
                ..
            },
        ) => {
            assert_eq!(realtime_ns, real);
            assert!(ts_ns <= stamped + 50_000_000 && stamped <= mono);
        }
        other => panic!("{other:?}"),
    }
    let json = got[0].to_json();
    assert_eq!(json["type"], "annotation");
    assert!(json["span_start_ns"].is_u64() && json["span_end_ns"].is_u64());
    server.shutdown().await;
}

#[tokio::test]
async fn unknown_fields_are_counted() {
    let (_dir, server, mut rx) = start("unknown", |_| {}).await;
    let mut c = ReplyClient::connect(server.socket_path()).await;
    assert_eq!(
        c.send(br#"{"labels":{"a":"1"},"future":{"x":[1]},"other":null}"#)
            .await,
        OK
    );
    collect(&mut rx, 1).await;
    assert_eq!(server.counters().unknown_fields, 2);
    server.shutdown().await;
}
