//! The harness of the integration tests: where the built library and the NVTX test
//! dependencies are, a C compiler call, and an agent stand-in that listens on a Unix socket in
//! a temp dir and decodes what arrives with `ingero_nvtx::wire`.
//!
//! The library: `cargo test` builds the crate's `cdylib` next to the test binary's `deps/`
//! directory (`<target>/<profile>/libingero_nvtx.so`, also `deps/libingero_nvtx.so`), so the
//! tests find it from `std::env::current_exe()`, whatever `CARGO_TARGET_DIR` is;
//! `INGERO_NVTX_LIB` overrides. The NVTX headers and libraries come from `cargo xtask
//! test-deps` (`INGERO_NVTX_INCLUDE`, `INGERO_NVTOOLSEXT`, `INGERO_NVTX3INTEROP`, or their
//! default places under `<target>/test-deps/nvtx/`); a test whose dependency is missing says
//! so and passes without running.

#![allow(dead_code, reason = "each test file uses part of the harness")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test harness (outside #[test] fns): a failure should stop the test right there"
)]

use std::collections::HashMap;
use std::io::Read;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ingero_nvtx::wire::{self, Hello, Record};

/// `<target>/<profile>`, from the test binary's path (`<target>/<profile>/deps/<test>-<hash>`).
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    exe.parent()
        .and_then(Path::parent)
        .expect("deps/..")
        .to_path_buf()
}

/// The cdylib under test.
pub fn lib_path() -> PathBuf {
    if let Some(p) = std::env::var_os("INGERO_NVTX_LIB") {
        return PathBuf::from(p);
    }
    let dir = profile_dir();
    for p in [
        dir.join("libingero_nvtx.so"),
        dir.join("deps/libingero_nvtx.so"),
    ] {
        if p.exists() {
            return p;
        }
    }
    panic!("libingero_nvtx.so not found beside {}", dir.display());
}

/// A test dependency: `$var`, else `<target>/test-deps/nvtx/<default>`, if it exists. A
/// variable that is set (as `cargo xtask test` sets it) must name something that exists: that
/// is a failure, not a skip.
pub fn test_dep(var: &str, default: &str) -> Option<PathBuf> {
    if let Some(p) = std::env::var_os(var).map(PathBuf::from) {
        assert!(p.exists(), "{var}={} does not exist", p.display());
        return Some(p);
    }
    let p = std::env::var_os(var).map(PathBuf::from).unwrap_or_else(|| {
        profile_dir()
            .join("..")
            .join("test-deps/nvtx")
            .join(default)
    });
    if p.exists() {
        Some(p)
    } else {
        eprintln!(
            "SKIPPED: {var} not set and {} absent; run `cargo xtask test-deps`",
            p.display()
        );
        None
    }
}

/// The include directory holding `nvtx3/`.
pub fn nvtx_include() -> Option<PathBuf> {
    test_dep("INGERO_NVTX_INCLUDE", "headers/nvidia/cu13/include")
}

/// A fresh temp directory for one test.
pub fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ingero-nvtx-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Compiles `tests/c/<src>` into `dir`.
pub fn compile(src: &str, dir: &Path, include: Option<&Path>) -> PathBuf {
    let out = dir.join(src.trim_end_matches(".c"));
    let mut cc = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()));
    cc.arg("-O2").arg("-o").arg(&out).arg(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/c")
            .join(src),
    );
    if let Some(inc) = include {
        cc.arg("-I").arg(inc);
    }
    let st = cc.args(["-pthread", "-ldl"]).status().expect("cc");
    assert!(st.success(), "compiling {src}");
    out
}

/// Runs `cmd` to completion with the library injected (or not), the socket and gate dir set.
pub fn run(mut cmd: Command, inject: bool, socket: &Path, gate_dir: &Path) -> Output {
    cmd.env("INGERO_NVTX_SOCKET", socket)
        .env("GATE_DIR", gate_dir);
    if inject {
        cmd.env("NVTX_INJECTION64_PATH", lib_path());
    } else {
        cmd.env_remove("NVTX_INJECTION64_PATH");
    }
    let out = cmd.output().expect("run producer");
    if !out.status.success() {
        eprintln!(
            "stdout:\n{}\nstderr:\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    out
}

/// The program's "key value" lines (the first value of a repeated key wins).
pub fn values(out: &Output) -> HashMap<String, String> {
    let mut m = HashMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        if let Some((k, v)) = line.split_once(' ') {
            m.entry(k.to_string()).or_insert_with(|| v.to_string());
        }
    }
    m
}

/// A number from [`values`].
pub fn num<T: std::str::FromStr>(v: &HashMap<String, String>, key: &str) -> T {
    v.get(key)
        .unwrap_or_else(|| panic!("no {key} in the output"))
        .parse()
        .ok()
        .expect(key)
}

/// One connection's hello and the bodies of its frames, concatenated (records stay whole).
#[derive(Clone, Debug)]
pub struct Conn {
    pub hello: Hello,
    pub body: Vec<u8>,
    pub closed: bool,
}

impl Conn {
    pub fn records(&self) -> Vec<Record<'_>> {
        wire::records(&self.body)
            .map(|r| r.expect("a valid record"))
            .collect()
    }
}

/// The agent stand-in.
pub struct Receiver {
    pub path: PathBuf,
    gate_dir: PathBuf,
    pub conns: Arc<Mutex<Vec<Conn>>>,
    stop: Arc<AtomicBool>,
    accept: Option<std::thread::JoinHandle<()>>,
    streams: Arc<Mutex<Vec<UnixStream>>>,
}

impl Receiver {
    /// Binds `path`; each hello read creates `<gate_dir>/gate.<pid>.<n>` (n-th connection of
    /// that pid, counting those `conns` already holds).
    pub fn bind(path: &Path, gate_dir: &Path, conns: Arc<Mutex<Vec<Conn>>>) -> Receiver {
        let _ = std::fs::remove_file(path);
        let listener = UnixListener::bind(path).unwrap();
        listener.set_nonblocking(true).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let streams = Arc::new(Mutex::new(Vec::new()));
        let accept = {
            let (stop, conns, streams, gate_dir) = (
                stop.clone(),
                conns.clone(),
                streams.clone(),
                gate_dir.to_path_buf(),
            );
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    match listener.accept() {
                        Ok((s, _)) => {
                            s.set_nonblocking(false).unwrap();
                            streams.lock().unwrap().push(s.try_clone().unwrap());
                            let (conns, gate_dir) = (conns.clone(), gate_dir.clone());
                            std::thread::spawn(move || read_conn(s, &conns, &gate_dir));
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(2)),
                    }
                }
            })
        };
        Receiver {
            path: path.to_path_buf(),
            gate_dir: gate_dir.to_path_buf(),
            conns,
            stop,
            accept: Some(accept),
            streams,
        }
    }

    /// Stops listening, closes the connections and removes the socket.
    pub fn close(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(a) = self.accept.take() {
            a.join().unwrap();
        }
        for s in self.streams.lock().unwrap().drain(..) {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
        let _ = std::fs::remove_file(&self.path);
    }

    /// The connections, once every one of them has been closed by its process (or after 5 s).
    pub fn finished(&self, expected: usize) -> Vec<Conn> {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let c = self.conns.lock().unwrap().clone();
            if (c.len() >= expected && c.iter().all(|c| c.closed)) || Instant::now() > deadline {
                return c;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn read_conn(mut s: UnixStream, conns: &Mutex<Vec<Conn>>, gate_dir: &Path) {
    let mut hello = [0u8; wire::HELLO_LEN];
    if s.read_exact(&mut hello).is_err() {
        return;
    }
    let hello = wire::decode_hello(&hello).expect("hello");
    let index = {
        let mut c = conns.lock().unwrap();
        c.push(Conn {
            hello,
            body: Vec::new(),
            closed: false,
        });
        let n = c.iter().filter(|c| c.hello.pid == hello.pid).count();
        std::fs::write(gate_dir.join(format!("gate.{}.{n}", hello.pid)), b"").unwrap();
        c.len() - 1
    };
    loop {
        let mut len = [0u8; 4];
        if s.read_exact(&mut len).is_err() {
            break;
        }
        let n = wire::frame_len(len).expect("frame length");
        let mut body = vec![0u8; n];
        if s.read_exact(&mut body).is_err() {
            break;
        }
        // Every frame holds whole, valid records.
        assert!(
            wire::records(&body).all(|r| r.is_ok()),
            "a frame with a bad record"
        );
        conns.lock().unwrap()[index].body.extend_from_slice(&body);
    }
    conns.lock().unwrap()[index].closed = true;
}

/// Waits up to 10 s for `cond`.
pub fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A record's timestamp.
pub fn ts_of(r: &Record<'_>) -> u64 {
    match *r {
        Record::Push { ts_ns, .. }
        | Record::Pop { ts_ns, .. }
        | Record::Start { ts_ns, .. }
        | Record::End { ts_ns, .. }
        | Record::Mark { ts_ns, .. }
        | Record::DomainCreate { ts_ns, .. }
        | Record::DomainDestroy { ts_ns, .. }
        | Record::RegisterString { ts_ns, .. }
        | Record::NameCategory { ts_ns, .. }
        | Record::NameThread { ts_ns, .. }
        | Record::Dropped { ts_ns, .. } => ts_ns,
    }
}

/// The thread of an event (push, pop, start, end, mark); None for the others.
pub fn event_tid(r: &Record<'_>) -> Option<u32> {
    match *r {
        Record::Push { tid, .. }
        | Record::Pop { tid, .. }
        | Record::Start { tid, .. }
        | Record::End { tid, .. }
        | Record::Mark { tid, .. } => Some(tid),
        _ => None,
    }
}

/// `r` with its timestamp set to 0, to compare with an expected record.
pub fn no_ts<'a>(r: &Record<'a>) -> Record<'a> {
    let mut r = *r;
    match &mut r {
        Record::Push { ts_ns, .. }
        | Record::Pop { ts_ns, .. }
        | Record::Start { ts_ns, .. }
        | Record::End { ts_ns, .. }
        | Record::Mark { ts_ns, .. }
        | Record::DomainCreate { ts_ns, .. }
        | Record::DomainDestroy { ts_ns, .. }
        | Record::RegisterString { ts_ns, .. }
        | Record::NameCategory { ts_ns, .. }
        | Record::NameThread { ts_ns, .. }
        | Record::Dropped { ts_ns, .. } => *ts_ns = 0,
    }
    r
}

/// The events of `tid`, without timestamps, in arrival order.
pub fn thread_events<'a>(recs: &[Record<'a>], tid: u32) -> Vec<Record<'a>> {
    recs.iter()
        .filter(|r| event_tid(r) == Some(tid))
        .map(no_ts)
        .collect()
}

/// The definitions, without timestamps, in arrival order.
pub fn definitions<'a>(recs: &[Record<'a>]) -> Vec<Record<'a>> {
    recs.iter()
        .filter(|r| event_tid(r).is_none() && !matches!(r, Record::Dropped { .. }))
        .map(no_ts)
        .collect()
}

/// Attributes with only a text message.
pub fn text(t: &str) -> wire::Attributes<'_> {
    wire::Attributes {
        message: wire::Message::Text(t),
        ..wire::Attributes::EMPTY
    }
}
