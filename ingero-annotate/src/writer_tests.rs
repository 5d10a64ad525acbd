//! Tests of the client against small in-test Unix socket servers.

use super::*;
use crate::parse::parse_line;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::net::UnixListener;
use std::sync::atomic::AtomicUsize;

/// A fresh private directory for one test's socket.
fn temp_sock() -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "ingero-annotate-writer-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("mkdir {}: {e}", dir.display()));
    dir.join("a.sock")
}

fn listen(path: &Path) -> UnixListener {
    UnixListener::bind(path).unwrap_or_else(|e| panic!("bind {}: {e}", path.display()))
}

#[test]
fn without_an_agent_it_is_a_silent_no_op() {
    let path = temp_sock();
    let w = AnnotationWriter::with_path(&path);
    assert!(!w.is_active());
    let t = Instant::now();
    for i in 0..1000 {
        assert_eq!(w.write(&[("step", i.to_string())], None), Ok(false));
    }
    assert!(
        t.elapsed() < Duration::from_secs(1),
        "no-op writes must be cheap"
    );
    assert_eq!((w.sent(), w.dropped()), (0, 1000));
    assert!(
        w.write(&[("bad key", "1")], None).is_err(),
        "invalid labels still surface"
    );
    assert_eq!(w.socket_path(), path);
}

#[test]
fn lines_arrive_complete_and_parse() {
    let path = temp_sock();
    let listener = listen(&path);
    let w = AnnotationWriter::with_path(&path);
    assert!(w.is_active());
    let (conn, _) = listener.accept().unwrap_or_else(|e| panic!("accept: {e}"));
    assert_eq!(
        w.write(&[("step", "42"), ("phase", "fwd \"x\"")], Some(1234)),
        Ok(true)
    );
    {
        let _span = w
            .span(&[("request_id", "abc-123")], None)
            .unwrap_or_else(|e| panic!("{e}"));
        std::thread::sleep(Duration::from_millis(2));
    }
    let mut lines = BufReader::new(conn).lines();
    let now = now_realtime_ns();
    let first = lines.next().and_then(Result::ok).unwrap_or_default();
    let a = parse_line(first.as_bytes(), now).unwrap_or_else(|e| panic!("{e}: {first}"));
    assert_eq!(a.labels[1].1, "fwd \"x\"");
    assert_eq!(a.pid, Some(1234));
    assert!(a.ts.is_some_and(|ts| ts <= now && now - ts < 10_000_000_000));
    let second = lines.next().and_then(Result::ok).unwrap_or_default();
    let s = parse_line(second.as_bytes(), now).unwrap_or_else(|e| panic!("{e}: {second}"));
    let (start, end) = s.span.unwrap_or_default();
    assert!(
        end - start >= 2_000_000,
        "span covers the sleep: {start}..{end}"
    );
    assert_eq!(w.sent(), 2);
}

#[test]
fn a_stalled_agent_never_blocks_the_writer_and_lines_stay_whole() {
    let path = temp_sock();
    let listener = listen(&path);
    let w = AnnotationWriter::with_path(&path);
    let (mut conn, _) = listener.accept().unwrap_or_else(|e| panic!("accept: {e}"));
    let value = "v".repeat(200);
    let t = Instant::now();
    let mut accepted = 0u64;
    for i in 0..50_000u64 {
        if w.write(&[("step", i.to_string()), ("pad", value.clone())], None) == Ok(true) {
            accepted += 1;
        }
    }
    assert!(
        t.elapsed() < Duration::from_secs(10),
        "writes must not block"
    );
    assert!(w.dropped() > 0, "a full buffer drops");
    assert_eq!(w.sent(), accepted);
    // Drain: everything the writer reported as sent arrives whole, even
    // lines the socket took only part of at first.
    let flush = w.write(&[("step", "last")], None);
    drop(w);
    let _ = flush;
    let mut all = Vec::new();
    conn.read_to_end(&mut all)
        .unwrap_or_else(|e| panic!("read: {e}"));
    let now = now_realtime_ns();
    let mut n = 0u64;
    for line in all.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        parse_line(line, now).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(line)));
        n += 1;
    }
    // The last write may or may not have gone through; a partially sent
    // tail is lost when the writer is dropped, so allow one short.
    assert!(
        n + 1 >= accepted && n <= accepted + 1,
        "received {n}, sent {accepted}"
    );
}

#[test]
fn an_agent_started_later_is_picked_up() {
    let path = temp_sock();
    let w = AnnotationWriter::with_path(&path);
    assert_eq!(w.write(&[("a", "1")], None), Ok(false));
    let listener = listen(&path);
    // Within the backoff window nothing is attempted; after it, the next
    // write connects.
    let deadline = Instant::now() + Duration::from_secs(3);
    while w.write(&[("a", "2")], None) != Ok(true) {
        assert!(Instant::now() < deadline, "never reconnected");
        std::thread::sleep(Duration::from_millis(20));
    }
    let (conn, _) = listener.accept().unwrap_or_else(|e| panic!("accept: {e}"));
    let mut line = String::new();
    BufReader::new(conn)
        .read_line(&mut line)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(line.contains("\"a\":\"2\""), "{line}");
}

#[test]
fn an_agent_restart_is_survived() {
    let path = temp_sock();
    let listener = listen(&path);
    let w = AnnotationWriter::with_path(&path);
    let (conn, _) = listener.accept().unwrap_or_else(|e| panic!("accept: {e}"));
    drop(conn);
    drop(listener);
    std::fs::remove_file(&path).unwrap_or_else(|e| panic!("{e}"));
    let listener = listen(&path);
    // The first write after the peer closed hits EPIPE, reconnects at once
    // and resends.
    assert_eq!(w.write(&[("a", "after-restart")], None), Ok(true));
    let (conn, _) = listener.accept().unwrap_or_else(|e| panic!("accept: {e}"));
    let mut line = String::new();
    BufReader::new(conn)
        .read_line(&mut line)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(line.contains("after-restart"), "{line}");
}

#[test]
fn concurrent_threads_never_interleave_lines() {
    let path = temp_sock();
    let listener = listen(&path);
    let w = std::sync::Arc::new(AnnotationWriter::with_path(&path));
    let (conn, _) = listener.accept().unwrap_or_else(|e| panic!("accept: {e}"));
    let reader = std::thread::spawn(move || {
        let mut all = Vec::new();
        let mut conn = conn;
        let _ = conn.read_to_end(&mut all);
        all
    });
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let w = w.clone();
            std::thread::spawn(move || {
                for i in 0..500 {
                    let _ = w.write(&[("thread", t.to_string()), ("i", i.to_string())], None);
                }
            })
        })
        .collect();
    for t in threads {
        let _ = t.join();
    }
    let sent = w.sent();
    drop(w);
    let all = reader.join().unwrap_or_default();
    let now = now_realtime_ns();
    let lines: Vec<&[u8]> = all
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .collect();
    for l in &lines {
        parse_line(l, now).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(l)));
    }
    assert_eq!(lines.len() as u64, sent);
}
