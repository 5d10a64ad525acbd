//! NCCL, traced through the probes CUDA's calls take.
//!
//! Against the real `libnccl.so.2` of two wheels, without a GPU: `ncclGetUniqueId` succeeds,
//! `ncclCommInitRank` fails (no CUDA device) after taking its unique id by value on the stack,
//! and every collective and point-to-point call on a NULL communicator fails with
//! `ncclInvalidArgument` without touching anything, so every argument the probes report is the
//! one passed (`tests/fixtures/nccl_calls.c`). NCCL 2.27.5 (`nvidia-nccl-cu12`) has no
//! AlltoAll, Gather or Scatter; 2.30.7 (`nvidia-nccl-cu13`, the NCCL torch 2.15 pulls) has them.
//!
//! Against a test-only NCCL whose calls succeed (`tests/fixtures/mock_nccl.c`, named
//! `libnccl.so.2`), four ranks of one made-up job (`tests/fixtures/nccl_ranks.c`): every rank
//! gives its communicators the same identity and numbers their collectives alike, live and in
//! the recording.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail, ensure};
use ingero_e2e::{
    Agent, Driver, build_fixture, calls_of, fresh_recording, kernel_tests_enabled, nccl, nccl13,
    only_call, run_ingero,
};
use ingero_trace::model::{split_id, unique_id};
use serde_json::{Value, json};

/// The identity the agent gives a communicator made from a unique id whose first 16 bytes are
/// `hex` (as the fixtures print them): the two little-endian words through
/// [`unique_id`], in the 16 hex digits of the JSON.
fn comm_id_of(hex: &str) -> Result<u64> {
    ensure!(hex.len() == 32, "16 bytes in hex: {hex:?}");
    let mut words = [0u64; 2];
    for (w, word) in words.iter_mut().enumerate() {
        let mut bytes = [0u8; 8];
        for (i, b) in bytes.iter_mut().enumerate() {
            let at = 16 * w + 2 * i;
            *b = u8::from_str_radix(&hex[at..at + 2], 16).with_context(|| hex.to_string())?;
        }
        *word = u64::from_le_bytes(bytes);
    }
    Ok(unique_id(words))
}

fn id_text(id: u64) -> String {
    format!("{id:016x}")
}

/// What each call of `nccl_calls` returns with the real library and no GPU, and its
/// arguments as `--json` prints them (`comm_id` is added from the printed unique id).
fn expected_calls(optional: bool) -> Vec<(&'static str, i32, Value)> {
    let invalid = "ncclInvalidArgument";
    let mut calls = vec![
        (
            "ncclCommInitRank",
            1,
            json!({"comm": null, "rank": 3, "nranks": 4, "error": "ncclUnhandledCudaError"}),
        ),
        ("ncclGroupStart", 0, json!({})),
        (
            "ncclAllReduce",
            4,
            json!({"count": 1024, "datatype": "float32", "bytes": 4096, "red_op": "avg",
                   "comm": null, "stream": "0xabc", "error": invalid}),
        ),
        (
            "ncclReduce",
            4,
            json!({"count": 77, "datatype": "bfloat16", "bytes": 154, "red_op": "max",
                   "root": 1, "comm": null, "stream": "0xdef", "error": invalid}),
        ),
        (
            "ncclBroadcast",
            4,
            json!({"count": 33, "datatype": "int64", "bytes": 264, "root": 2, "comm": null,
                   "stream": "0xb0", "error": invalid}),
        ),
        (
            "ncclAllGather",
            4,
            json!({"count": 12, "datatype": "uint8", "bytes": 12, "comm": null,
                   "stream": "0xa6", "error": invalid}),
        ),
        (
            "ncclReduceScatter",
            4,
            json!({"count": 48, "datatype": "float16", "bytes": 96, "red_op": "min",
                   "comm": null, "stream": "0x5c", "error": invalid}),
        ),
        (
            "ncclSend",
            4,
            json!({"count": 5, "datatype": "int8", "bytes": 5, "peer": 2, "comm": null,
                   "stream": "0x123", "error": invalid}),
        ),
        (
            "ncclRecv",
            4,
            json!({"count": 6, "datatype": "uint32", "bytes": 24, "peer": 1, "comm": null,
                   "stream": "0x456", "error": invalid}),
        ),
    ];
    if optional {
        calls.extend([
            (
                "ncclAlltoAll",
                4,
                json!({"count": 64, "datatype": "float64", "bytes": 512, "comm": null,
                       "stream": "0xa2a", "error": invalid}),
            ),
            (
                "ncclGather",
                4,
                json!({"count": 9, "datatype": "int32", "bytes": 36, "root": 3, "comm": null,
                       "stream": "0x6a", "error": invalid}),
            ),
            (
                "ncclScatter",
                4,
                json!({"count": 10, "datatype": "uint64", "bytes": 80, "root": 0, "comm": null,
                       "stream": "0x5ca", "error": invalid}),
            ),
        ]);
    }
    // A group holding a failed call fails at its end too; destroying NULL succeeds.
    calls.extend([
        ("ncclGroupEnd", 4, json!({"error": invalid})),
        ("ncclCommDestroy", 0, json!({"comm": null})),
    ]);
    calls
}

const OPTIONAL: [&str; 3] = ["ncclAlltoAll", "ncclGather", "ncclScatter"];

/// Every call of `nccl_calls` on `lib` appears once with its exact arguments, return code and
/// error name; `ncclCommInitRank` carries the identity of the unique id it was passed; the
/// calls `lib` does not export (`optional` false: AlltoAll, Gather, Scatter) appear nowhere.
fn calls_carry_exact_arguments(lib: &Path, optional: bool) -> Result<()> {
    let lib = lib.to_string_lossy().to_string();
    let program = build_fixture("nccl_calls", "nccl_calls", &["-ldl"])?;
    let mut program = Driver::spawn(&program, &[&lib])?;
    let pid = program.read()?["pid"].as_u64().context("pid")?;
    let agent = Agent::start(&["--cuda-lib", &lib, "--pid", &pid.to_string()])?;
    let done = program.go_and_finish();
    let (all, stderr) = agent.stop_with_stderr()?;
    let done = done?;

    let absent: Vec<&str> = done["absent"]
        .as_array()
        .context("absent")?
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let expected_absent: &[&str] = if optional { &[] } else { &OPTIONAL };
    assert_eq!(absent, expected_absent, "{lib} exports: {done}");
    let printed = done["ret"].as_object().context("ret")?;
    assert_eq!(printed["ncclGetUniqueId"], 0, "no GPU needed: {done}");
    let id = comm_id_of(done["unique_id"].as_str().context("unique_id")?)?;

    let expected = expected_calls(optional);
    for (op, ret, mut args) in expected.iter().cloned() {
        assert_eq!(printed[op], ret, "{op} returned {} on {lib}", printed[op]);
        if op == "ncclCommInitRank" {
            args["comm_id"] = json!(id_text(id));
        }
        let found = calls_of(&all, op, pid);
        assert_eq!(
            found.len(),
            1,
            "{lib}: exactly one {op}: {found:?}\n{stderr}"
        );
        let call = found[0];
        assert_eq!(call["ret"], ret, "{lib}: {call}");
        assert_eq!(call["args"], args, "{lib}: {op}'s arguments");
    }
    for op in &absent {
        assert!(
            calls_of(&all, op, pid).is_empty(),
            "{lib}: {op} is not exported"
        );
    }
    // Nothing else of this process: ncclGetUniqueId is not probed, and no probed call made
    // another.
    let traced: Vec<&str> = all
        .iter()
        .filter(|e| e["type"] == "cuda" && e["pid"] == pid)
        .filter_map(|e| e["op"].as_str())
        .collect();
    assert_eq!(
        traced.len(),
        expected.len(),
        "{lib}: one event per call: {traced:?}"
    );
    Ok(())
}

/// NCCL 2.27.5 (`nvidia-nccl-cu12`): no AlltoAll, Gather or Scatter to call or trace.
#[test]
fn nccl_2_27_calls_carry_exact_arguments_and_the_unique_ids_identity() -> Result<()> {
    if !kernel_tests_enabled() {
        return Ok(());
    }
    calls_carry_exact_arguments(&nccl()?, false)
}

/// NCCL 2.30.7 (`nvidia-nccl-cu13`, the NCCL torch 2.15 pulls): AlltoAll, Gather and Scatter
/// too.
#[test]
fn nccl_2_30_calls_carry_exact_arguments_and_the_unique_ids_identity() -> Result<()> {
    if !kernel_tests_enabled() {
        return Ok(());
    }
    calls_carry_exact_arguments(&nccl13()?, true)
}

/// Ranks of the made-up job (four, so that each of the split's two colors has two members),
/// all-reduces on the world communicator and on the split one.
const RANKS: u64 = 4;
const WORLD_ALL_REDUCES: u64 = 5;
const SPLIT_ALL_REDUCES: u64 = 3;

/// One rank's run as `nccl_ranks` printed it.
struct Rank {
    rank: u64,
    pid: u64,
    world: String,
    split: String,
    color: u64,
}

/// The mock, in a directory of its own under the name discovery knows.
fn mock_nccl() -> Result<PathBuf> {
    std::fs::create_dir_all(ingero_e2e::root().join("target/test-fixtures/mock-nccl"))?;
    build_fixture("mock_nccl", "mock-nccl/libnccl.so.2", &["-shared", "-fPIC"])
}

/// What a recorded run of `nccl_ranks` processes gave: each rank's pid and final line, the
/// agent's live events, and the recording.
struct RecordedRanks {
    finished: Vec<(u64, Result<Value>)>,
    live: Vec<Value>,
    trace: String,
}

/// Starts one `nccl_ranks` per argument list (after the mock's path), traces them with the
/// agent attached to the mock and recording to `name`, and lets them run to their end.
fn record_ranks(name: &str, ranks: &[Vec<String>]) -> Result<RecordedRanks> {
    let mock = mock_nccl()?.to_string_lossy().to_string();
    let program = build_fixture("nccl_ranks", "nccl_ranks", &["-ldl"])?;
    let mut drivers = Vec::new();
    for args in ranks {
        let mut all = vec![mock.as_str()];
        all.extend(args.iter().map(String::as_str));
        let mut d = Driver::spawn(&program, &all)?;
        let pid = d.read()?["pid"].as_u64().context("pid")?;
        drivers.push((d, pid));
    }
    let pids: Vec<String> = drivers.iter().map(|(_, p)| p.to_string()).collect();
    let trace = fresh_recording("e2e-nccl", name)?
        .to_string_lossy()
        .to_string();
    let agent = Agent::start(&[
        "--cuda-lib",
        &mock,
        "--pid",
        &pids.join(","),
        "--record",
        "-o",
        &trace,
    ])?;
    let finished = drivers
        .into_iter()
        .map(|(d, pid)| (pid, d.go_and_finish()))
        .collect();
    // Let the exits reach the recording before the agent stops.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let live = agent.stop()?;
    Ok(RecordedRanks {
        finished,
        live,
        trace,
    })
}

/// Four ranks started with one seed make one world communicator, split it by `rank % 2` and
/// run collectives on both, recorded: live and in `query --events --json`, every rank's world
/// communicator has the identity of the unique id the ranks share, this rank and the rank
/// count, and its collectives are numbered 1, 2, 3… in call order; the split communicator's
/// identity is the same for the ranks of one color, not the world's, and its collectives are
/// numbered from 1 again.
#[test]
fn collectives_are_numbered_per_communicator_alike_on_every_rank() -> Result<()> {
    if !kernel_tests_enabled() {
        return Ok(());
    }
    let args: Vec<Vec<String>> = (0..RANKS)
        .map(|rank| {
            [rank, RANKS, 7341, WORLD_ALL_REDUCES, SPLIT_ALL_REDUCES]
                .map(|n| n.to_string())
                .to_vec()
        })
        .collect();
    let RecordedRanks {
        finished,
        live,
        trace,
    } = record_ranks("ranks", &args)?;
    let mut ranks = Vec::new();
    let mut ids = Vec::new();
    for (rank, (pid, done)) in (0..).zip(finished) {
        let done = done?;
        assert_eq!(done["ret"], 0, "the mock's calls succeed: {done}");
        let text = |k: &str| done[k].as_str().unwrap_or_default().to_string();
        ids.push(text("unique_id"));
        ranks.push(Rank {
            rank,
            pid,
            world: text("world"),
            split: text("split"),
            color: done["color"].as_u64().context("color")?,
        });
    }
    ensure!(
        ids.iter().all(|i| *i == ids[0]),
        "one seed, one id: {ids:?}"
    );
    let world_id = comm_id_of(&ids[0])?;

    let events = run_ingero(&["query", "--trace", &trace, "--events", "--json"])?;
    let recorded: Vec<Value> = events
        .lines()
        .map(serde_json::from_str)
        .collect::<Result<_, _>>()
        .context("query --events --json")?;
    for (source, all) in [("live", &live), ("recorded", &recorded)] {
        for r in &ranks {
            // Said before the checks, whose panics show it.
            eprintln!(
                "checking the {source} events of rank {} (pid {})",
                r.rank, r.pid
            );
            one_rank(all, r, world_id).with_context(|| format!("{source}, rank {}", r.rank))?;
        }
        // The ranks of one color share their split communicator's id; the two colors do not.
        let split_ids: Vec<(u64, &Value)> = ranks
            .iter()
            .map(|r| {
                (
                    r.color,
                    &only_call(all, "ncclCommSplit", r.pid)["args"]["comm_id"],
                )
            })
            .collect();
        for (color, id) in &split_ids {
            for (other_color, other) in &split_ids {
                assert_eq!(color == other_color, id == other, "{source}: {split_ids:?}");
            }
        }
    }
    Ok(())
}

/// One rank's communicators and collectives, as `--json` or `query --events --json` gives
/// them.
fn one_rank(all: &[Value], r: &Rank, world_id: u64) -> Result<()> {
    let pid = r.pid;
    let world = id_text(world_id);
    let split = id_text(split_id(world_id, r.color as i32));
    ensure!(split != world, "the split's id is its own");
    let sorted = |op: &str| {
        let mut found = calls_of(all, op, pid);
        found.sort_by_key(|e| e["ts_ns"].as_u64());
        found
    };

    let init = only_call(all, "ncclCommInitRank", pid);
    assert_eq!(init["ret"], 0);
    let a = &init["args"];
    assert_eq!(a["comm"], r.world.as_str(), "{init}");
    assert_eq!(a["comm_id"], world.as_str(), "{init}");
    assert_eq!(a["rank"], r.rank, "{init}");
    assert_eq!(a["nranks"], RANKS, "{init}");

    let made = only_call(all, "ncclCommSplit", pid);
    let a = &made["args"];
    assert_eq!(a["comm"], r.split.as_str(), "{made}");
    assert_eq!(a["parent_comm"], r.world.as_str(), "{made}");
    assert_eq!(a["color"], r.color, "{made}");
    assert_eq!(a["key"], r.rank, "{made}");
    assert_eq!(a["comm_id"], split.as_str(), "same color, same id: {made}");

    // The world communicator: N all-reduces then the all-gather, numbered 1..N+1 in call
    // order, each with this rank and the rank count; the all-reduces on the split one after
    // them, then its broadcast, numbered from 1 again.
    let all_reduces = sorted("ncclAllReduce");
    ensure!(
        all_reduces.len() as u64 == WORLD_ALL_REDUCES + SPLIT_ALL_REDUCES,
        "{all_reduces:?}"
    );
    let (on_world, on_split) = all_reduces.split_at(WORLD_ALL_REDUCES as usize);
    let gather = only_call(all, "ncclAllGather", pid);
    for (i, c) in on_world.iter().copied().chain([gather]).enumerate() {
        let a = &c["args"];
        assert_eq!(a["comm"], r.world.as_str(), "{c}");
        assert_eq!(a["comm_id"], world.as_str(), "{c}");
        assert_eq!(a["rank"], r.rank, "{c}");
        assert_eq!(a["nranks"], RANKS, "{c}");
        assert_eq!(a["seq"], i + 1, "{c}");
        let count = if i < on_world.len() { 1000 + i } else { 256 };
        assert_eq!(a["count"], count, "in call order: {c}");
    }
    let broadcast = only_call(all, "ncclBroadcast", pid);
    for (i, c) in on_split.iter().copied().chain([broadcast]).enumerate() {
        let a = &c["args"];
        assert_eq!(a["comm"], r.split.as_str(), "{c}");
        assert_eq!(a["comm_id"], split.as_str(), "{c}");
        assert_eq!(a["seq"], i + 1, "numbered from 1 on the split: {c}");
        let count = if i < on_split.len() { 2000 + i } else { 64 };
        assert_eq!(a["count"], count, "in call order: {c}");
    }

    // Point-to-point calls name their communicator and take no number.
    for (op, peer) in [
        ("ncclSend", (r.rank + 1) % RANKS),
        ("ncclRecv", (r.rank + RANKS - 1) % RANKS),
    ] {
        let c = only_call(all, op, pid);
        let a = &c["args"];
        assert_eq!(a["peer"], peer, "{c}");
        assert_eq!(a["comm_id"], world.as_str(), "{c}");
        assert_eq!(a["rank"], r.rank, "{c}");
        assert_eq!(a.get("seq"), None, "{c}");
    }
    assert_eq!(calls_of(all, "ncclGroupStart", pid).len(), 1);
    assert_eq!(calls_of(all, "ncclGroupEnd", pid).len(), 1);
    let ended: Vec<&str> = sorted("ncclCommDestroy")
        .iter()
        .filter_map(|e| e["args"]["comm"].as_str())
        .collect();
    if ended != [r.split.as_str(), r.world.as_str()] {
        bail!("the split, then the world communicator destroyed: {ended:?}");
    }
    Ok(())
}

/// `explain` on a recording of three ranks gone wrong, traced through the probes: rank 1 calls
/// an all-gather where the others call their third all-reduce (`nccl_desync` names rank 1 and
/// collective #3), and rank 2 stops after its third, sleeping 6 s while the others call the
/// fourth and go on to their seventh (`nccl_stall` names rank 2, stopped at #3).
#[test]
fn explain_names_the_rank_that_called_another_collective_and_the_one_that_stopped() -> Result<()> {
    if !kernel_tests_enabled() {
        return Ok(());
    }
    // (odd all-reduce, stop after, sleep ms) per rank.
    let plans = [("-1", "-1", "0"), ("2", "-1", "0"), ("-1", "3", "6000")];
    let args: Vec<Vec<String>> = plans
        .iter()
        .enumerate()
        .map(|(rank, (odd, stop, sleep))| {
            [&rank.to_string(), "3", "9001", "6", "0", odd, stop, sleep]
                .map(str::to_owned)
                .to_vec()
        })
        .collect();
    let run = record_ranks("explain", &args)?;
    let mut pids = Vec::new();
    for (pid, done) in &run.finished {
        if let Err(e) = done {
            bail!("rank {pid}: {e:#}");
        }
        pids.push(pid.to_string());
    }
    let report: Value =
        serde_json::from_str(&run_ingero(&["explain", "--trace", &run.trace, "--json"])?)?;
    let finding = |kind: &str| -> Result<Value> {
        let all: Vec<&Value> = report["findings"]
            .as_array()
            .context("findings")?
            .iter()
            .filter(|f| f["kind"] == kind)
            .collect();
        ensure!(all.len() == 1, "one {kind}: {report:#}");
        Ok(all[0].clone())
    };
    let desync = finding("nccl_desync")?;
    assert_eq!(
        desync["pid"].as_u64().map(|p| p.to_string()).as_ref(),
        Some(&pids[1])
    );
    let summary = desync["summary"].as_str().unwrap_or_default();
    assert!(
        summary.starts_with("Collective #3 on NCCL communicator")
            && summary.contains("rank 0, rank 2 called ncclAllReduce(1002 × float32, sum)")
            && summary.contains("rank 1 called ncclAllGather(1002 × float32)"),
        "{summary}"
    );
    let stall = finding("nccl_stall")?;
    assert_eq!(
        stall["pid"].as_u64().map(|p| p.to_string()).as_ref(),
        Some(&pids[2])
    );
    let summary = stall["summary"].as_str().unwrap_or_default();
    // Six all-reduces, then the all-gather every finishing rank calls: #7.
    assert!(
        summary.contains(
            "rank 2 stopped at collective #3 while the other ranks called #4 and went on to #7"
        ),
        "{summary}"
    );
    assert!(
        stall["impact_ns"].as_u64() >= Some(5_000_000_000),
        "{stall:#}"
    );
    Ok(())
}
