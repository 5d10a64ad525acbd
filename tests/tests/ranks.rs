//! Kernel test of ranks: two processes started as torchrun starts a job's ranks (`RANK`,
//! `WORLD_SIZE`, `TORCHELASTIC_RUN_ID` in their environment) are traced with `--record
//! --annotate`; each labels its steps on the socket. Rank 1 sleeps inside step 3 while rank 0
//! waits for it in a long `cudaStreamSynchronize` (the test-only mock runtime sleeps the
//! microseconds it is given). The agent labels each process with its rank; `query --group-by
//! step,rank` gives a row per step and rank, `query --memory` each rank's held and peak device
//! memory, and `explain` names rank 1 at step 3.

use anyhow::{Context, Result};
use ingero_e2e::{Agent, Driver, build_fixture, cuda_driver, kernel_tests_enabled, run_ingero};
use serde_json::Value;

const STEPS: u32 = 6;
const SLOW_STEP: &str = "3";

fn rank(program: &std::path::Path, lib: &str, socket: &str, rank: u32) -> Result<Driver> {
    // Rank 1 sleeps 300 ms in step 3; rank 0 synchronises for 320 ms there instead.
    let (slow, wait) = if rank == 1 {
        (SLOW_STEP, "-1")
    } else {
        ("-1", SLOW_STEP)
    };
    let rank_text = rank.to_string();
    Driver::spawn_with_env(
        program,
        &[
            lib,
            "steps",
            socket,
            &STEPS.to_string(),
            slow,
            "300000",
            wait,
            "320000",
        ],
        &[
            ("RANK", &rank_text),
            ("LOCAL_RANK", &rank_text),
            ("WORLD_SIZE", "2"),
            ("TORCHELASTIC_RUN_ID", "e2e-ranks"),
        ],
    )
}

#[test]
fn the_slow_rank_is_named_and_steps_group_per_rank() -> Result<()> {
    if !kernel_tests_enabled() {
        return Ok(());
    }
    let dir = std::env::temp_dir().join(format!("ingero-e2e-ranks-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let recording = dir.join("run.pftrace").to_string_lossy().to_string();
    let socket = dir.join("annotate.sock").to_string_lossy().to_string();
    let mock = build_fixture("mock_cuda", "libmock_cuda.so", &["-shared", "-fPIC"])?;
    let mock = mock.to_string_lossy().to_string();
    let program = cuda_driver()?;
    let mut ranks = Vec::new();
    let mut pids = Vec::new();
    for r in 0..2 {
        let mut d = rank(&program, &mock, &socket, r)?;
        pids.push(d.read()?["pid"].as_u64().context("driver pid")?);
        ranks.push(d);
    }
    let pid_list = format!("{},{}", pids[0], pids[1]);
    let agent = Agent::start(&[
        "--cuda-lib",
        &mock,
        "--pid",
        &pid_list,
        "-o",
        &recording,
        "--annotate",
        "--annotate-socket",
        &socket,
    ])?;
    let running: Vec<_> = ranks
        .into_iter()
        .map(|d| std::thread::spawn(move || d.go_and_finish()))
        .collect();
    for r in running {
        let done = r
            .join()
            .map_err(|_| anyhow::anyhow!("driver thread panicked"))??;
        assert_eq!(done["failed"], 0, "{done}");
    }
    // Let the last labels and events through the reorder window.
    std::thread::sleep(std::time::Duration::from_millis(500));
    let agent_pid = u64::from(agent.pid());
    let live = agent.stop()?;

    // The agent's own annotations: one per rank, scoped to it, with the agent as provenance.
    let agent_made: Vec<&Value> = live
        .iter()
        .filter(|l| l["type"] == "annotation" && l["provenance"]["pid"] == agent_pid)
        .collect();
    assert_eq!(agent_made.len(), 2, "{agent_made:#?}");
    for a in &agent_made {
        let r = pids
            .iter()
            .position(|p| a["pid"] == *p)
            .context("scoped to a rank")?;
        assert_eq!(a["labels"]["rank"], r.to_string(), "{a}");
        assert_eq!(a["labels"]["world_size"], "2");
        assert_eq!(a["labels"]["run_id"], "e2e-ranks");
    }

    let q = run_ingero(&[
        "query",
        "--trace",
        &recording,
        "--group-by",
        "step,rank",
        "--json",
    ])?;
    let rows: Vec<Value> = serde_json::from_str::<Value>(&q)?
        .as_array()
        .context("rows")?
        .clone();
    // The closing step=6 label holds no CUDA calls (perhaps an off-CPU moment at exit).
    let mut keys: Vec<(String, u64)> = rows
        .iter()
        .filter(|r| r["cuda_calls"].as_u64().unwrap_or(0) > 0)
        .map(|r| {
            let rank = r["rank"].as_u64().unwrap_or(99);
            assert_eq!(r["labels"]["rank"], rank.to_string(), "{r}");
            assert_eq!(r["pid"], pids[rank as usize], "{r}");
            (r["labels"]["step"].as_str().unwrap_or("").to_owned(), rank)
        })
        .collect();
    keys.sort();
    let mut want: Vec<(String, u64)> = (0..STEPS)
        .flat_map(|s| [(s.to_string(), 0), (s.to_string(), 1)])
        .collect();
    want.sort();
    assert_eq!(keys, want, "one row per step and rank:\n{q}");
    let slow_row = |rank: u64| {
        rows.iter()
            .find(|r| r["labels"]["step"] == SLOW_STEP && r["rank"] == rank)
            .cloned()
            .unwrap_or_default()
    };
    assert!(
        slow_row(1)["blocked_ns"].as_u64().unwrap_or(0) >= 300_000_000,
        "{}",
        slow_row(1)
    );
    assert!(
        slow_row(0)["sync_time_ns"].as_u64().unwrap_or(0) >= 320_000_000,
        "{}",
        slow_row(0)
    );

    // Which process held VRAM: each rank allocates (rank + 1) MiB per step and frees the
    // previous step's block, so it held one block when it exited and peaked at two.
    let m: Value = serde_json::from_str(&run_ingero(&[
        "query", "--trace", &recording, "--memory", "--json",
    ])?)?;
    let procs = m["processes"].as_array().context("memory rows")?;
    for (r, pid) in pids.iter().enumerate() {
        let row = procs
            .iter()
            .find(|p| p["pid"] == *pid)
            .with_context(|| format!("no memory row for rank {r}: {m:#}"))?;
        let unit = (r as u64 + 1) << 20;
        assert_eq!(row["rank"], r, "{row}");
        // The rank has exited by now: it held one block when it did, and holds nothing after.
        assert_eq!(row["held_at_exit_bytes"], unit, "{row}");
        assert_eq!(row["held_bytes"], 0, "{row}");
        assert_eq!(row["peak_bytes"], 2 * unit, "{row}");
        assert_eq!(row["allocations"], STEPS, "{row}");
    }

    let e: Value =
        serde_json::from_str(&run_ingero(&["explain", "--trace", &recording, "--json"])?)?;
    let stragglers: Vec<&Value> = e["findings"]
        .as_array()
        .context("findings")?
        .iter()
        .filter(|f| f["kind"] == "straggler")
        .collect();
    let named = stragglers.iter().find(|f| {
        f["summary"]
            .as_str()
            .is_some_and(|s| s.starts_with("rank 1 was the straggler at"))
            && f["evidence"].as_array().is_some_and(|ev| {
                ev.iter().any(|x| {
                    x["what"]
                        .as_str()
                        .is_some_and(|w| w.starts_with(&format!("step {SLOW_STEP}:")))
                })
            })
    });
    let finding = named.with_context(|| format!("no finding names rank 1 at step 3: {e:#}"))?;
    let summary = finding["summary"].as_str().unwrap_or("");
    assert!(summary.contains("blocked off-CPU"), "{summary}");
    assert!(summary.contains("waited in synchronisation"), "{summary}");
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
