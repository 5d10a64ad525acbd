//! Bounded everything: rate limits, connection limits, idle timeout, queue
//! overflow, many idle connections, shutdown.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::support::{OK, ReplyClient, collect, connect, refused, start, wait_for};

#[tokio::test]
async fn per_connection_rate_limit() {
    let (_dir, server, mut rx) = start("rate", |c| {
        c.rate_per_conn = 2;
        c.burst = 5;
    })
    .await;
    let mut c = ReplyClient::connect(server.socket_path()).await;
    let mut answers = Vec::new();
    for i in 0..20 {
        answers.push(
            c.send(format!("{{\"labels\":{{\"i\":\"{i}\"}}}}").as_bytes())
                .await,
        );
    }
    let ok = answers.iter().filter(|a| *a == OK).count();
    // The burst, plus at most one refill token if the test ran slowly.
    assert!((5..=6).contains(&ok), "{answers:?}");
    assert!(answers[..5].iter().all(|a| a == OK), "{answers:?}");
    assert_eq!(answers[19], refused("rate_limited"));
    collect(&mut rx, ok).await;
    // Another connection has its own bucket.
    let mut other = ReplyClient::connect(server.socket_path()).await;
    assert_eq!(other.send(br#"{"labels":{"x":"y"}}"#).await, OK);
    // After a refill, the first connection may write again.
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(c.send(br#"{"labels":{"again":"1"}}"#).await, OK);
    server.shutdown().await;
}

#[tokio::test]
async fn global_rate_limit_spans_connections() {
    let (_dir, server, _rx) = start("global", |c| {
        c.rate_per_conn = 0;
        c.global_rate = 10;
    })
    .await;
    let mut a = ReplyClient::connect(server.socket_path()).await;
    let mut b = ReplyClient::connect(server.socket_path()).await;
    let mut ok = 0;
    for _ in 0..10 {
        for c in [&mut a, &mut b] {
            if c.send(br#"{"labels":{"x":"y"}}"#).await == OK {
                ok += 1;
            }
        }
    }
    assert!(
        (10..=11).contains(&ok),
        "{ok} accepted of 20 with a global limit of 10/s"
    );
    assert!(
        server
            .counters()
            .rejected
            .get("rate_limited")
            .is_some_and(|n| *n >= 9)
    );
    server.shutdown().await;
}

#[tokio::test]
async fn connections_over_the_limit_are_closed_at_once() {
    let (_dir, server, _rx) = start("maxconns", |c| c.max_conns = 3).await;
    let mut kept = Vec::new();
    for _ in 0..3 {
        kept.push(connect(server.socket_path()).await);
    }
    wait_for(&server, "3 open", |c| c.connections_open == 3).await;
    let mut extra = connect(server.socket_path()).await;
    let mut buf = [0u8; 8];
    let n = tokio::time::timeout(Duration::from_secs(5), extra.read(&mut buf)).await;
    assert!(matches!(n, Ok(Ok(0))), "refused connection sees EOF: {n:?}");
    wait_for(&server, "1 refused", |c| {
        c.connections_refused == 1 && c.connections_open == 3
    })
    .await;
    // Closing one frees a slot.
    drop(kept.pop());
    wait_for(&server, "2 open", |c| c.connections_open == 2).await;
    let mut c = ReplyClient::connect(server.socket_path()).await;
    assert_eq!(c.send(br#"{"labels":{"a":"b"}}"#).await, OK);
    server.shutdown().await;
}

#[tokio::test]
async fn idle_connections_are_closed() {
    let (_dir, server, _rx) = start("idle", |c| c.idle_timeout = Duration::from_millis(200)).await;
    let mut s = connect(server.socket_path()).await;
    let started = std::time::Instant::now();
    let mut buf = [0u8; 8];
    let n = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf)).await;
    assert!(matches!(n, Ok(Ok(0))), "{n:?}");
    assert!(started.elapsed() >= Duration::from_millis(150));
    wait_for(&server, "closed", |c| c.connections_open == 0).await;
    server.shutdown().await;
}

#[tokio::test]
async fn a_full_queue_drops_and_never_blocks_the_writer() {
    let (_dir, server, mut rx) = start("queue", |c| c.queue_capacity = 3).await;
    let mut c = ReplyClient::connect(server.socket_path()).await;
    let mut answers = Vec::new();
    for _ in 0..10 {
        answers.push(c.send(br#"{"labels":{"a":"b"}}"#).await);
    }
    assert!(answers[..3].iter().all(|a| a == OK), "{answers:?}");
    assert!(
        answers[3..].iter().all(|a| *a == refused("queue_full")),
        "{answers:?}"
    );
    let counters = server.counters();
    assert_eq!((counters.ingested, counters.dropped), (3, 7));
    // Draining makes room again.
    collect(&mut rx, 3).await;
    assert_eq!(c.send(br#"{"labels":{"a":"b"}}"#).await, OK);
    server.shutdown().await;
}

/// Raise the open-file limit so one process can hold both ends of 1000+
/// connections (as root the hard limit can be raised too).
fn raise_nofile(want: u64) {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid out-parameter for getrlimit.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return;
    }
    if lim.rlim_cur >= want {
        return;
    }
    let new = libc::rlimit {
        rlim_cur: want,
        rlim_max: lim.rlim_max.max(want),
    };
    // SAFETY: `new` is a valid rlimit; failure is tolerated (checked below).
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &new) } != 0 {
        let soft = libc::rlimit {
            rlim_cur: lim.rlim_max,
            rlim_max: lim.rlim_max,
        };
        // SAFETY: as above.
        unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &soft) };
    }
}

#[tokio::test]
async fn a_thousand_idle_connections_while_another_writes() {
    raise_nofile(8192);
    let (_dir, server, mut rx) = start("thousand", |_| {}).await;
    let mut idle = Vec::with_capacity(1000);
    for _ in 0..1000 {
        idle.push(connect(server.socket_path()).await);
    }
    wait_for(&server, "1000 open", |c| c.connections_open == 1000).await;
    let mut w = connect(server.socket_path()).await;
    let mut batch = String::new();
    for i in 0..500 {
        batch.push_str(&format!("{{\"labels\":{{\"i\":\"{i}\"}}}}\n"));
    }
    w.write_all(batch.as_bytes())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let got = collect(&mut rx, 500).await;
    assert_eq!(got.len(), 500);
    let c = server.counters();
    assert_eq!((c.connections_open, c.connections_refused), (1001, 0));
    drop(idle);
    wait_for(&server, "idle ones closed", |c| c.connections_open == 1).await;
    server.shutdown().await;
}

#[tokio::test]
async fn shutdown_closes_connections_ends_the_stream_and_removes_the_socket() {
    let (_dir, server, mut rx) = start("shutdown", |_| {}).await;
    let path = server.socket_path().to_owned();
    let mut s = connect(&path).await;
    s.write_all(b"{\"labels\":{\"a\":\"b\"}}\n")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    collect(&mut rx, 1).await;
    server.shutdown().await;
    assert!(!path.exists(), "socket removed");
    let end = tokio::time::timeout(Duration::from_secs(5), rx.recv()).await;
    assert!(matches!(end, Ok(None)), "stream ends: {end:?}");
    let mut buf = [0u8; 8];
    let n = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf)).await;
    assert!(
        matches!(n, Ok(Ok(0)) | Ok(Err(_))),
        "connection closed: {n:?}"
    );
}
