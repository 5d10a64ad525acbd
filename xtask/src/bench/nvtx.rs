//! `cargo xtask bench nvtx`: what libingero_nvtx.so costs an application thread, and whether
//! its transport keeps up.
//!
//! One NVTX3 C program (`nvtx_bench.c`, headers from `cargo xtask test-deps`) does N
//! `nvtxRangePushA` + `nvtxRangePop` pairs in a tight loop, run (a) without a tool, (b) with the
//! library and no agent, (c) with the library and an agent stand-in (a receiver here that
//! decodes every frame with `ingero_nvtx::wire` and counts). Each is run several times and the
//! median and range reported, since this machine is shared. Then a sustained run at 200 k
//! ranges/s for 5 s, paced, with the receiver: received must equal sent, with no drops.

use std::io::Read;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use ingero_nvtx::wire::{self, Record};

use crate::test_deps::fetch_nvtx_include;
use crate::util::{run as run_cmd, workspace_root};

/// Pairs per tight run.
const PAIRS: u64 = 2_000_000;
/// Pairs per burst run, and per burst (about 136 KB of records: fits a 256 KiB ring).
const BURST_PAIRS: u64 = 400_000;
const BURST: u64 = 2_000;
/// Runs per configuration.
const REPEATS: usize = 5;
/// The sustained run.
const RATE: u64 = 200_000;
const SECONDS: f64 = 5.0;

/// What the receiver counted.
#[derive(Default)]
struct Counts {
    connections: AtomicU64,
    pushes: AtomicU64,
    pops: AtomicU64,
    dropped: AtomicU64,
    bytes: AtomicU64,
}

impl Counts {
    fn reset(&self) {
        for c in [
            &self.connections,
            &self.pushes,
            &self.pops,
            &self.dropped,
            &self.bytes,
        ] {
            c.store(0, Ordering::SeqCst);
        }
    }
}

pub fn run() -> Result<String> {
    let include = fetch_nvtx_include()?;
    let root = workspace_root();
    run_cmd(
        Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .current_dir(&root)
            .args(["build", "--release", "-q", "-p", "ingero-nvtx"]),
    )?;
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let lib = target.join("release/libingero_nvtx.so");
    let dir = target.join("bench-nvtx");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let exe = dir.join("nvtx_bench");
    run_cmd(
        Command::new("cc")
            .args(["-O2", "-o"])
            .arg(&exe)
            .arg(root.join("xtask/src/bench/nvtx_bench.c"))
            .arg("-I")
            .arg(&include)
            .arg("-ldl"),
    )?;
    let sock = dir.join("nvtx.sock");
    let counts = Arc::new(Counts::default());
    let stop = Arc::new(AtomicBool::new(false));
    let receiver = spawn_receiver(&sock, &dir, counts.clone(), stop.clone())?;

    let mut rows = Vec::new();
    let tight = ["tight".to_string(), PAIRS.to_string()];
    let burst = [
        "burst".to_string(),
        BURST_PAIRS.to_string(),
        BURST.to_string(),
    ];
    for (name, inject, agent, args, pairs) in [
        ("(a) no tool", false, false, &tight, PAIRS),
        ("(b) tool, no agent", true, false, &tight, PAIRS),
        (
            "(c) tool + receiving agent, tight loop",
            true,
            true,
            &tight,
            PAIRS,
        ),
    ]
    .into_iter()
    .map(|(n, i, a, args, p)| (n, i, a, &args[..], p))
    .chain([(
        "(c') tool + receiving agent, bursts of 2,000 pairs 5 ms apart",
        true,
        true,
        &burst[..],
        BURST_PAIRS,
    )]) {
        let mut ns = Vec::new();
        let mut drops = 0;
        for _ in 0..REPEATS {
            counts.reset();
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let out = program(&exe, &lib, inject, agent, &sock, &dir, &args)?;
            ns.push(value(&out, "ns_per_pair")?);
            if agent {
                wait_closed(&counts)?;
                drops += counts.dropped.load(Ordering::SeqCst);
            }
        }
        ns.sort_by(f64::total_cmp);
        rows.push(format!(
            "| {name} | {:.1} | {:.1}–{:.1} | {} |",
            ns[ns.len() / 2],
            ns[0],
            ns[ns.len() - 1],
            if agent {
                format!(
                    "{drops} of {} pairs dropped",
                    REPEATS as u64 * (pairs + 1000)
                )
            } else {
                "—".into()
            }
        ));
    }

    counts.reset();
    let out = program(
        &exe,
        &lib,
        true,
        true,
        &sock,
        &dir,
        &["paced", &RATE.to_string(), &SECONDS.to_string()],
    )?;
    let sent = value(&out, "sent")? as u64;
    let secs = value(&out, "seconds")?;
    wait_closed(&counts)?;
    let (pushes, pops, dropped) = (
        counts.pushes.load(Ordering::SeqCst),
        counts.pops.load(Ordering::SeqCst),
        counts.dropped.load(Ordering::SeqCst),
    );
    let bytes = counts.bytes.load(Ordering::SeqCst);
    stop.store(true, Ordering::SeqCst);
    let _ = receiver.join();
    let verdict = if pushes == sent && pops == sent && dropped == 0 {
        "received == sent, 0 dropped"
    } else {
        "LOSS"
    };
    Ok(format!(
        "### NVTX push+pop on the application thread ({REPEATS} runs each; {PAIRS} pairs per tight run)\n\n\
         | configuration | ns/pair (median) | range | drops |\n|---|---:|---:|---|\n{}\n\n\
         ### Sustained: {RATE} ranges/s for {SECONDS} s, paced, with the receiver\n\n\
         sent {sent} pairs in {secs:.2} s; received {pushes} pushes and {pops} pops, {dropped} dropped \
         ({:.1} MB on the wire, {:.1} bytes per pair): {verdict}\n",
        rows.join("\n"),
        bytes as f64 / 1e6,
        bytes as f64 / sent.max(1) as f64,
    ))
}

fn program(
    exe: &Path,
    lib: &Path,
    inject: bool,
    agent: bool,
    sock: &Path,
    dir: &Path,
    args: &[&str],
) -> Result<String> {
    let mut cmd = Command::new(exe);
    cmd.args(args);
    if inject {
        cmd.env("NVTX_INJECTION64_PATH", lib);
    } else {
        cmd.env_remove("NVTX_INJECTION64_PATH");
    }
    if agent {
        cmd.env("INGERO_NVTX_SOCKET", sock).env("GATE_DIR", dir);
    } else {
        cmd.env("INGERO_NVTX_SOCKET", dir.join("nobody.sock"))
            .env_remove("GATE_DIR");
    }
    let out = cmd.output().context("running nvtx_bench")?;
    if !out.status.success() {
        bail!(
            "nvtx_bench failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn value(out: &str, key: &str) -> Result<f64> {
    out.lines()
        .find_map(|l| l.strip_prefix(key).map(str::trim))
        .and_then(|v| v.parse().ok())
        .with_context(|| format!("no {key} in nvtx_bench's output"))
}

/// Waits until the program's connection has closed (its exit flush is done).
fn wait_closed(counts: &Counts) -> Result<()> {
    for _ in 0..2000 {
        if counts.connections.load(Ordering::SeqCst) == 0 {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    bail!("the benchmark's connection did not close")
}

fn spawn_receiver(
    sock: &Path,
    gate_dir: &Path,
    counts: Arc<Counts>,
    stop: Arc<AtomicBool>,
) -> Result<std::thread::JoinHandle<()>> {
    let _ = std::fs::remove_file(sock);
    let listener = UnixListener::bind(sock)?;
    listener.set_nonblocking(true)?;
    let gate_dir = gate_dir.to_path_buf();
    Ok(std::thread::spawn(move || {
        while !stop.load(Ordering::SeqCst) {
            let Ok((mut s, _)) = listener.accept() else {
                std::thread::sleep(Duration::from_millis(1));
                continue;
            };
            let _ = s.set_nonblocking(false);
            counts.connections.fetch_add(1, Ordering::SeqCst);
            let (counts, gate_dir) = (counts.clone(), gate_dir.clone());
            std::thread::spawn(move || {
                let mut hello = [0u8; wire::HELLO_LEN];
                if s.read_exact(&mut hello).is_ok() {
                    if let Ok(h) = wire::decode_hello(&hello) {
                        let _ = std::fs::write(gate_dir.join(format!("gate.{}.1", h.pid)), b"");
                    }
                    let mut body = Vec::new();
                    loop {
                        let mut len = [0u8; 4];
                        if s.read_exact(&mut len).is_err() {
                            break;
                        }
                        let Ok(n) = wire::frame_len(len) else { break };
                        body.resize(n, 0);
                        if s.read_exact(&mut body).is_err() {
                            break;
                        }
                        counts.bytes.fetch_add(4 + n as u64, Ordering::SeqCst);
                        for r in wire::records(&body) {
                            match r {
                                Ok(Record::Push { .. }) => {
                                    counts.pushes.fetch_add(1, Ordering::Relaxed)
                                }
                                Ok(Record::Pop { .. }) => {
                                    counts.pops.fetch_add(1, Ordering::Relaxed)
                                }
                                Ok(Record::Dropped { total, .. }) => {
                                    counts.dropped.fetch_max(total, Ordering::Relaxed)
                                }
                                Ok(_) => 0,
                                Err(_) => break,
                            };
                        }
                    }
                }
                counts.connections.fetch_sub(1, Ordering::SeqCst);
            });
        }
    }))
}
