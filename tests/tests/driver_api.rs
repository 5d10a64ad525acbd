//! The driver API and kernel names, against the real NVIDIA libraries without a GPU: the real
//! `libcuda.so.1` of driver 535 (every call returns 3 before `cuInit`, without touching its
//! made-up handles, so every argument the probes report is the one passed), and the real
//! `libcudart.so.12` registering a fake fatbin whose kernel the launches must name.

use anyhow::{Context, Result};
use ingero_e2e::{
    Agent, Driver, build_fixture, calls_of, cudart, cudart13, kernel_tests_enabled, libcuda,
    only_call,
};
use serde_json::{Value, json};

fn program() -> Result<std::path::PathBuf> {
    build_fixture("cuda_driver_api", "cuda_driver_api", &["-ldl"])
}

#[test]
fn driver_calls_carry_exact_arguments_with_their_export() -> Result<()> {
    if !kernel_tests_enabled() {
        return Ok(());
    }
    let libcuda = libcuda()?;
    let lib = libcuda.to_string_lossy().to_string();
    let mut program = Driver::spawn(&program()?, &[&lib, "driver"])?;
    let pid = program.read()?["pid"].as_u64().context("pid")?;
    let agent = Agent::start(&["--cuda-lib", &lib, "--pid", &pid.to_string()])?;
    let done = program.go_and_finish()?;
    assert!(
        done["ret"]
            .as_array()
            .is_some_and(|r| r.iter().all(|v| v == 3)),
        "every driver call returns 3 before cuInit: {done}"
    );
    let all = agent.stop()?;

    let launches = calls_of(&all, "cuLaunchKernel", pid);
    assert_eq!(
        launches.len(),
        2,
        "both exports of cuLaunchKernel: {launches:?}"
    );
    let base = launches
        .iter()
        .find(|l| l["args"].get("symbol").is_none())
        .context("base")?;
    assert_eq!(base["ret"], 3);
    assert_eq!(base["args"]["func"], "0xdead0000");
    assert_eq!(base["args"]["grid"], json!([16, 4, 1]));
    assert_eq!(
        base["args"]["block"],
        json!([32, 8, 1]),
        "blockDimZ from the stack"
    );
    assert_eq!(
        base["args"]["shared_mem"], 1024,
        "sharedMemBytes from the stack"
    );
    assert_eq!(base["args"]["stream"], "0x1234", "hStream from the stack");
    let ptsz = launches
        .iter()
        .find(|l| l["args"]["symbol"] == "cuLaunchKernel_ptsz")
        .context("the _ptsz export, named")?;
    assert_eq!(ptsz["args"]["grid"], json!([2, 3, 4]));
    assert_eq!(ptsz["args"]["block"], json!([5, 6, 7]));
    assert_eq!(ptsz["args"]["shared_mem"], 2048);
    assert_eq!(ptsz["args"]["stream"], "0x5678");

    let ex = only_call(&all, "cuLaunchKernelEx", pid);
    assert_eq!(ex["args"]["func"], "0xbeef0000");
    assert_eq!(ex["args"]["grid"], json!([7, 8, 9]));
    assert_eq!(ex["args"]["block"], json!([10, 11, 12]));
    assert_eq!(
        ex["args"]["shared_mem"], 4096,
        "a u32 with the padding masked off"
    );
    assert_eq!(ex["args"]["stream"], "0x9abc");
    let coop = only_call(&all, "cuLaunchCooperativeKernel", pid);
    assert_eq!(coop["args"]["block"], json!([4, 5, 6]));
    assert_eq!(coop["args"]["shared_mem"], 512);
    assert_eq!(coop["args"]["stream"], "0x4321");

    let alloc = only_call(&all, "cuMemAlloc", pid);
    assert_eq!(alloc["args"]["size"], 1 << 20);
    assert_eq!(alloc["args"]["symbol"], "cuMemAlloc_v2");
    assert_eq!(alloc["args"]["ptr"], Value::Null, "no pointer on failure");
    let alloc_async = only_call(&all, "cuMemAllocAsync", pid);
    assert_eq!(alloc_async["args"]["size"], 4096);
    assert_eq!(alloc_async["args"]["stream"], "0x77");
    assert_eq!(
        only_call(&all, "cuMemAllocHost", pid)["args"]["size"],
        65536
    );
    assert_eq!(
        only_call(&all, "cuMemHostAlloc", pid)["args"]["size"],
        32768
    );
    assert_eq!(only_call(&all, "cuMemFree", pid)["args"]["ptr"], "0xabc000");
    let free_async = only_call(&all, "cuMemFreeAsync", pid);
    assert_eq!(free_async["args"]["ptr"], "0xabd000");
    assert_eq!(free_async["args"]["stream"], "0x88");

    // The host buffer every host-side argument points at.
    let host = &done["host"];
    assert!(host.as_str().is_some_and(|h| h.starts_with("0x")), "{done}");
    let htod = only_call(&all, "cuMemcpyHtoD", pid);
    assert_eq!(htod["args"]["count"], 256);
    assert_eq!(htod["args"]["kind"], "H2D");
    assert_eq!(htod["args"]["host_ptr"], *host, "srcHost");
    let dtoh = only_call(&all, "cuMemcpyDtoH", pid);
    assert_eq!(dtoh["args"]["count"], 128);
    assert_eq!(dtoh["args"]["kind"], "D2H");
    assert_eq!(dtoh["args"]["symbol"], "cuMemcpyDtoH_v2_ptds");
    assert_eq!(dtoh["args"]["host_ptr"], *host, "dstHost");
    let htod_async = only_call(&all, "cuMemcpyHtoDAsync", pid);
    assert_eq!(htod_async["args"]["count"], 512);
    assert_eq!(htod_async["args"]["stream"], "0x99");
    assert_eq!(htod_async["args"]["host_ptr"], *host, "srcHost");
    let copy_async = only_call(&all, "cuMemcpyAsync", pid);
    assert_eq!(copy_async["args"]["count"], 2000);
    assert_eq!(copy_async["args"]["stream"], "0x55");
    assert_eq!(
        copy_async["args"].get("host_ptr"),
        None,
        "a unified copy names no host side"
    );
    let registered = calls_of(&all, "cuMemHostRegister", pid);
    assert_eq!(registered.len(), 2, "both exports: {registered:?}");
    let v2 = registered
        .iter()
        .find(|r| r["args"]["symbol"] == "cuMemHostRegister_v2")
        .context("the _v2 export, named")?;
    assert_eq!(v2["args"]["ptr"], *host);
    assert_eq!(v2["args"]["size"], 64);
    assert_eq!(v2["args"]["flags"], 1);
    let unsuffixed = registered
        .iter()
        .find(|r| r["args"].get("symbol").is_none())
        .context("the unsuffixed export")?;
    assert_eq!(unsuffixed["args"]["ptr"], *host);
    assert_eq!(unsuffixed["args"]["size"], 32);
    assert_eq!(unsuffixed["args"]["flags"], 2);
    assert_eq!(
        only_call(&all, "cuMemHostUnregister", pid)["args"]["ptr"],
        *host
    );
    let copy_2d = only_call(&all, "cuMemcpy2D", pid);
    assert_eq!(
        copy_2d["args"]["count"], 300,
        "width x height from the descriptor"
    );
    assert_eq!(
        copy_2d["args"]["kind"], "H2D",
        "from the descriptor's memory types"
    );
    assert_eq!(
        copy_2d["args"].get("host_ptr"),
        None,
        "a descriptor's pointers are not read"
    );
    assert_eq!(only_call(&all, "cuMemsetD32", pid)["args"]["count"], 400);

    assert_eq!(
        only_call(&all, "cuStreamSynchronize", pid)["args"]["stream"],
        "0x1234"
    );
    assert_eq!(only_call(&all, "cuCtxSynchronize", pid)["ret"], 3);
    let graph = only_call(&all, "cuGraphLaunch", pid);
    assert_eq!(graph["args"]["graph_exec"], "0xfeed0000");
    assert_eq!(graph["args"]["stream"], "0x31");
    let begin = only_call(&all, "cuStreamBeginCapture", pid);
    assert_eq!(begin["args"]["stream"], "0x1234");
    assert_eq!(begin["args"]["symbol"], "cuStreamBeginCapture_v2");
    assert_eq!(
        only_call(&all, "cuStreamEndCapture", pid)["args"]["graph"],
        Value::Null
    );
    assert_eq!(
        only_call(&all, "cuGraphInstantiateWithFlags", pid)["args"]["graph"],
        "0x5000"
    );

    // Virtual memory management: the location from the properties the call points at.
    let create = only_call(&all, "cuMemCreate", pid);
    assert_eq!(create["args"]["size"], 2 << 20);
    assert_eq!(create["args"]["location"], "device:1", "{create}");
    assert_eq!(
        create["args"]["handle"],
        Value::Null,
        "no handle on failure"
    );
    let reserve = only_call(&all, "cuMemAddressReserve", pid);
    assert_eq!(reserve["args"]["size"], 1 << 30);
    assert_eq!(reserve["args"]["ptr"], Value::Null, "no range on failure");
    let map = only_call(&all, "cuMemMap", pid);
    assert_eq!(map["args"]["ptr"], "0x7f4000000000");
    assert_eq!(map["args"]["size"], 2 << 20);
    assert_eq!(map["args"]["handle"], "0x5100");
    assert_eq!(
        only_call(&all, "cuMemRetainAllocationHandle", pid)["args"]["ptr"],
        "0x7f4000001000"
    );
    assert_eq!(only_call(&all, "cuMemUnmap", pid)["args"]["size"], 2 << 20);
    let access = only_call(&all, "cuMemSetAccess", pid);
    assert_eq!(access["args"]["ptr"], "0x7f4000000000");
    assert_eq!(access["args"]["size"], 2 << 20);
    assert_eq!(
        only_call(&all, "cuMemRelease", pid)["args"]["handle"],
        "0x5100"
    );
    assert_eq!(
        only_call(&all, "cuMemAddressFree", pid)["args"]["size"],
        1 << 30
    );
    Ok(())
}

/// Registration against the real runtime: a fake fatbin, a mangled C++ template kernel, then
/// `cudaLaunchKernel` and `__cudaLaunchKernel` (which tail-jumps into `cudaLaunchKernel`): each
/// launch once, with the demangled name.
fn registered_kernel_is_named(runtime: &std::path::Path) -> Result<()> {
    registered_kernel_is_named_when(runtime, AgentRuns::Along)
}

/// Whether the agent runs while the program does.
#[derive(Clone, Copy, PartialEq)]
enum AgentRuns {
    Along,
    /// It learns the name, then is stopped (SIGSTOP) until the program has launched, slept
    /// and exited, as on a busy machine: the launches and the exit then wait in two rings at
    /// once, and the exit's ring is the one that woke the agent.
    NotWhileTheProgramLaunchesAndExits,
}

fn registered_kernel_is_named_when(runtime: &std::path::Path, runs: AgentRuns) -> Result<()> {
    let lib = runtime.to_string_lossy().to_string();
    let paused = runs == AgentRuns::NotWhileTheProgramLaunchesAndExits;
    let mode = if paused {
        "register-then-wait"
    } else {
        "register"
    };
    let mut program = Driver::spawn(&program()?, &[&lib, mode])?;
    let pid = program.read()?["pid"].as_u64().context("pid")?;
    let pid_arg = pid.to_string();
    let mut args = vec!["--cuda-lib", &lib, "--pid", &pid_arg];
    if paused {
        // The smallest rings wake the agent after an eighth of a ring: the program's 16 sleeps
        // fill the scheduler ring past it, its two launches do not fill the CUDA ring, so when
        // the agent resumes the exit's ring is ready on its own (the drain tick would take
        // the CUDA ring first).
        args.extend(["--ringbuf-size", "4096"]);
    }
    let agent = Agent::start(&args)?;
    if paused {
        program.go()?;
        program.read()?;
        // The agent takes the names ring on its drain tick (100 ms).
        std::thread::sleep(std::time::Duration::from_millis(300));
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(agent.pid() as i32, libc::SIGSTOP) };
    }
    // The agent resumes whatever the program did, so no failure leaves it stopped.
    let done = program.go_and_finish();
    if paused {
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(agent.pid() as i32, libc::SIGCONT) };
        // Let it drain what waited before the SIGINT of `stop` (whose shutdown drains the CUDA
        // ring first, which would hide the race).
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
    let (all, stderr) = agent.stop_with_stderr()?;
    let done = done?;
    // The final statistics count the names learned from the names ring, those kept and the
    // store's ELF fallbacks: they tell a missed registration from a name lost on the way.
    let names = all
        .iter()
        .rev()
        .find(|e| e["type"] == "stats")
        .map(|s| s["kernel_names"].clone());
    let launches = calls_of(&all, "cudaLaunchKernel", pid);
    assert_eq!(
        launches.len(),
        2,
        "{lib}: cudaLaunchKernel and __cudaLaunchKernel, each once: {launches:?}\n{stderr}"
    );
    for l in launches {
        assert_eq!(l["args"]["func"], done["func"]);
        assert_eq!(
            l["args"]["kernel"], "void demo::scale<4>(float*, float, int)",
            "{l}\nkernel_names: {names:?}\nthe agent's stderr:\n{stderr}"
        );
        assert_eq!(l["args"]["kernel_mangled"], "_ZN4demo5scaleILi4EEEvPffi");
        assert_eq!(l["args"]["kernel_source"], "registration");
        assert_eq!(l["args"]["grid"], json!([4, 2, 1]));
    }
    Ok(())
}

#[test]
fn runtime_12_launches_name_their_registered_kernel_once_each() -> Result<()> {
    if !kernel_tests_enabled() {
        return Ok(());
    }
    registered_kernel_is_named(&cudart()?)
}

/// The exit of a short program may be read before its launches (another ring): they keep
/// their names. The agent that forgot a process at its exit failed this 9 runs in 10.
#[test]
fn launches_read_after_their_program_exited_keep_their_names() -> Result<()> {
    if !kernel_tests_enabled() {
        return Ok(());
    }
    registered_kernel_is_named_when(&cudart()?, AgentRuns::NotWhileTheProgramLaunchesAndExits)
}

#[test]
fn runtime_13_launches_name_their_registered_kernel_once_each() -> Result<()> {
    if !kernel_tests_enabled() {
        return Ok(());
    }
    let runtime = cudart13().context(
        "INGERO_CUDART13 names libcudart.so.13 (set by `cargo xtask test`, or \
         `export $(cargo xtask test-deps)`)",
    )?;
    registered_kernel_is_named(&runtime)
}

/// Discovery while tracing: the agent starts first, with nothing to attach in the install
/// places; a program then loads the real libcuda from a directory no install place covers,
/// and the rescan attaches it and follows the program.
#[test]
fn a_driver_loaded_after_the_agent_started_is_found_and_traced() -> Result<()> {
    if !kernel_tests_enabled() {
        return Ok(());
    }
    let original = libcuda()?;
    // A copy in a directory of its own: a different inode, in no install place.
    let dir = tempfile_dir()?.join("late-driver");
    std::fs::create_dir_all(&dir)?;
    let copy = dir.join("libcuda.so.1");
    std::fs::copy(&original, &copy)?;
    let lib = copy.to_string_lossy().to_string();
    let agent = Agent::start(&[])?;
    let mut program = Driver::spawn(&program()?, &[&lib, "driver"])?;
    let pid = program.read()?["pid"].as_u64().context("pid")?;
    // A bound, not a timing: attaching waits in the kernel behind the uprobe releases of the
    // agents that ran before (about 12 s each here), as the first attach does.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while !agent.stderr().contains(&lib) {
        if std::time::Instant::now() > deadline {
            anyhow::bail!("the rescan never attached {lib}: {}", agent.stderr());
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    program.go_and_finish()?;
    let all = agent.stop()?;
    let launches = calls_of(&all, "cuLaunchKernel", pid);
    assert_eq!(launches.len(), 2, "{launches:?}");
    assert!(launches.iter().any(|l| l["args"]["func"] == "0xdead0000"));
    Ok(())
}

/// A runtime call that enters the driver on the same thread is one operation: the driver call
/// is its child (`parent`), and the live statistics and `query` count it once, as the runtime
/// call. Checked with the test-only runtime that calls the real libcuda (the real runtime
/// reaches the driver's launch only on a GPU).
#[test]
fn a_runtime_call_that_enters_the_driver_counts_once() -> Result<()> {
    if !kernel_tests_enabled() {
        return Ok(());
    }
    let libcuda = libcuda()?;
    let driver_lib = libcuda.to_string_lossy().to_string();
    let mock = build_fixture(
        "mock_nesting",
        "libmock_nesting.so",
        &["-shared", "-fPIC", "-ldl"],
    )?;
    let mock_lib = mock.to_string_lossy().to_string();
    let mut program = Driver::spawn_with_env(
        &program()?,
        &[&mock_lib, "nested"],
        &[("INGERO_MOCK_LIBCUDA", driver_lib.as_str())],
    )?;
    let pid = program.read()?["pid"].as_u64().context("pid")?;
    let dir = tempfile_dir()?;
    let trace = dir.join("nested.pftrace");
    let trace_str = trace.to_string_lossy().to_string();
    let agent = Agent::start(&[
        "--cuda-lib",
        &mock_lib,
        "--cuda-lib",
        &driver_lib,
        "--pid",
        &pid.to_string(),
        "--record",
        "-o",
        &trace_str,
    ])?;
    let done = program.go_and_finish()?;
    assert_eq!(done["ret"], json!([0, 3]));
    let all = agent.stop()?;
    let malloc = only_call(&all, "cudaMalloc", pid);
    assert_eq!(malloc["args"].get("parent"), None);
    let inner = only_call(&all, "cuMemAlloc", pid);
    assert_eq!(inner["args"]["parent"], "cudaMalloc");
    assert_eq!(inner["args"]["size"], 4096);
    let launch = only_call(&all, "cuLaunchKernel", pid);
    assert_eq!(launch["args"]["parent"], "cudaLaunchKernel");
    assert_eq!(launch["args"]["shared_mem"], 256);
    assert_eq!(launch["args"]["stream"], "0x42");
    let outer = only_call(&all, "cudaLaunchKernel", pid);
    let (o0, o1) = span(outer);
    let (i0, i1) = span(launch);
    assert!(
        o0 <= i0 && i1 <= o1,
        "the driver call lies inside the runtime call"
    );
    let stats = all
        .iter()
        .rev()
        .find(|e| e["type"] == "stats")
        .context("a final stats line")?;
    assert_eq!(stats["ops"]["cudaMalloc"]["count"], 1);
    assert_eq!(
        stats["ops"].get("cuMemAlloc"),
        None,
        "counted once, as cudaMalloc"
    );
    assert_eq!(stats["ops"].get("cuLaunchKernel"), None);

    let query = ingero_e2e::run_ingero(&["query", "--trace", &trace_str, "--json"])?;
    let rows: Value = serde_json::from_str(&query).context("query --json")?;
    let ops: Vec<&str> = rows
        .as_array()
        .context("rows")?
        .iter()
        .filter_map(|r| r["op"].as_str())
        .collect();
    assert!(
        ops.contains(&"cudaMalloc") && ops.contains(&"cudaLaunchKernel"),
        "{ops:?}"
    );
    assert!(
        !ops.contains(&"cuMemAlloc") && !ops.contains(&"cuLaunchKernel"),
        "{ops:?}"
    );
    let asked = ingero_e2e::run_ingero(&[
        "query",
        "--trace",
        &trace_str,
        "--json",
        "--op",
        "cuLaunchKernel",
    ])?;
    assert!(
        asked.contains("cuLaunchKernel"),
        "--op names the driver call: {asked}"
    );
    let events = ingero_e2e::run_ingero(&["query", "--trace", &trace_str, "--events", "--json"])?;
    let recorded: Vec<Value> = events
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let inner = only_call(&recorded, "cuMemAlloc", pid);
    assert_eq!(
        inner["args"]["parent"], "cudaMalloc",
        "the recording keeps the nesting"
    );
    Ok(())
}

fn span(e: &Value) -> (u64, u64) {
    let t = e["ts_ns"].as_u64().unwrap_or(0);
    (t, t + e["duration_ns"].as_u64().unwrap_or(0))
}

fn tempfile_dir() -> Result<std::path::PathBuf> {
    let dir = std::env::temp_dir().join(format!("ingero-driver-api-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}
