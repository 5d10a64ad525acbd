//! The session's runtime serves the annotation socket while the drain loop's thread is busy:
//! a line scoped to a process is checked (and bound to it) when it arrives, not when the loop
//! next yields, by which time a short job may have exited.

use std::io::Write;
use std::os::unix::net::UnixStream;
use std::time::Duration;

use crate::annotate::{IngestConfig, IngestServer};

#[test]
fn a_line_is_checked_while_the_loop_is_busy() {
    let dir = std::env::temp_dir().join(format!("ingero-runtime-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir(&dir).unwrap_or_else(|e| panic!("mkdir {}: {e}", dir.display()));
    let socket = dir.join("annotate.sock");
    let runtime = super::runtime().unwrap_or_else(|e| panic!("runtime: {e:#}"));
    runtime.block_on(async {
        let cfg = IngestConfig {
            socket_path: Some(socket.clone()),
            ..IngestConfig::default()
        };
        let (server, mut rx) = IngestServer::start(cfg)
            .await
            .unwrap_or_else(|e| panic!("start: {e:#}"));
        // The job: alive when its line is written, gone before the loop looks at the queue.
        let mut job = std::process::Command::new("sleep")
            .arg("1")
            .spawn()
            .unwrap_or_else(|e| panic!("spawn sleep: {e}"));
        let line = format!("{{\"labels\":{{\"step\":\"1\"}},\"pid\":{}}}\n", job.id());
        let mut client = UnixStream::connect(&socket).unwrap_or_else(|e| panic!("connect: {e}"));
        client
            .write_all(line.as_bytes())
            .unwrap_or_else(|e| panic!("write: {e}"));
        // This thread is the loop's, and it does not yield until the job has exited and been
        // reaped (its /proc entry gone), as in a long drain.
        let _ = job.wait();
        std::thread::sleep(Duration::from_millis(50));
        let got = tokio::time::timeout(Duration::from_secs(10), rx.recv())
            .await
            .unwrap_or_else(|_| panic!("no annotation: {:?}", server.counters()));
        let got = got.unwrap_or_else(|| panic!("queue closed"));
        assert_eq!(got.labels, [("step".to_string(), "1".to_string())]);
        assert!(got.scope.is_some(), "bound to the job's incarnation");
        assert_eq!(
            server.counters().rejected_total,
            0,
            "{:?}",
            server.counters()
        );
        drop(client);
        server.shutdown().await;
    });
    let _ = std::fs::remove_dir_all(&dir);
}
