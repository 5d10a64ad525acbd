//! Helpers shared by the server tests: private temp directories, starting a
//! server, connecting, reply-mode clients and collecting annotations.

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::mpsc::Receiver;

use crate::annotate::{IngestConfig, IngestServer, ReceivedAnnotation};

/// How long a test waits for something that should happen promptly.
pub(super) const PATIENCE: Duration = Duration::from_secs(10);

/// A private (0700) directory removed on drop.
pub(super) struct TempDir(PathBuf);

impl TempDir {
    pub(super) fn new(tag: &str) -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "ingero-ingest-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .unwrap_or_else(|e| panic!("mkdir {}: {e}", dir.display()));
        TempDir(dir)
    }

    pub(super) fn path(&self) -> &Path {
        &self.0
    }

    pub(super) fn socket(&self) -> PathBuf {
        self.0.join("annotate.sock")
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Start a server on a socket in a fresh temp dir, with `tweak` applied to
/// the default config.
pub(super) async fn start(
    tag: &str,
    tweak: impl FnOnce(&mut IngestConfig),
) -> (TempDir, IngestServer, Receiver<ReceivedAnnotation>) {
    let dir = TempDir::new(tag);
    let mut cfg = IngestConfig {
        socket_path: Some(dir.socket()),
        ..IngestConfig::default()
    };
    tweak(&mut cfg);
    let (server, rx) = IngestServer::start(cfg)
        .await
        .unwrap_or_else(|e| panic!("start: {e:#}"));
    (dir, server, rx)
}

pub(super) async fn connect(path: &Path) -> UnixStream {
    UnixStream::connect(path)
        .await
        .unwrap_or_else(|e| panic!("connect {}: {e}", path.display()))
}

/// Receive exactly `n` annotations (panics after [`PATIENCE`]).
pub(super) async fn collect(
    rx: &mut Receiver<ReceivedAnnotation>,
    n: usize,
) -> Vec<ReceivedAnnotation> {
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        match tokio::time::timeout(PATIENCE, rx.recv()).await {
            Ok(Some(a)) => out.push(a),
            Ok(None) => panic!("queue closed after {} of {n}", out.len()),
            Err(_) => panic!("timed out after {} of {n} annotations", out.len()),
        }
    }
    out
}

/// Assert nothing more arrives within a short while.
pub(super) async fn assert_quiet(rx: &mut Receiver<ReceivedAnnotation>) {
    if let Ok(Some(a)) = tokio::time::timeout(Duration::from_millis(200), rx.recv()).await {
        panic!("unexpected annotation {a:?}");
    }
}

/// Wait until `cond` holds on the server's counters.
pub(super) async fn wait_for(
    server: &IngestServer,
    what: &str,
    cond: impl Fn(&crate::annotate::IngestCountersSnapshot) -> bool,
) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let c = server.counters();
        if cond(&c) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}: {c:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A reply-mode connection.
pub(super) struct ReplyClient {
    reader: BufReader<OwnedReadHalf>,
    writer: OwnedWriteHalf,
}

impl ReplyClient {
    pub(super) async fn connect(path: &Path) -> ReplyClient {
        Self::over(connect(path).await).await
    }

    pub(super) async fn over(stream: UnixStream) -> ReplyClient {
        let (r, mut w) = stream.into_split();
        w.write_all(format!("{}\n", ingero_annotate::REPLY_HELLO).as_bytes())
            .await
            .unwrap_or_else(|e| panic!("hello: {e}"));
        ReplyClient {
            reader: BufReader::new(r),
            writer: w,
        }
    }

    /// Send one line (a `\n` is appended) and return the answer, trimmed.
    pub(super) async fn send(&mut self, line: &[u8]) -> String {
        self.writer
            .write_all(line)
            .await
            .unwrap_or_else(|e| panic!("write: {e}"));
        self.writer
            .write_all(b"\n")
            .await
            .unwrap_or_else(|e| panic!("write: {e}"));
        self.answer().await
    }

    pub(super) async fn answer(&mut self) -> String {
        let mut s = String::new();
        match tokio::time::timeout(PATIENCE, self.reader.read_line(&mut s)).await {
            Ok(Ok(n)) if n > 0 => s.trim_end().to_owned(),
            other => panic!("no answer: {other:?}"),
        }
    }
}

/// The expected answer for a refused line.
pub(super) fn refused(reason: &str) -> String {
    format!("{{\"ok\":false,\"error\":\"{reason}\"}}")
}

pub(super) const OK: &str = "{\"ok\":true}";

/// Label value of `key`.
pub(super) fn label<'a>(a: &'a ReceivedAnnotation, key: &str) -> Option<&'a str> {
    a.labels
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}
