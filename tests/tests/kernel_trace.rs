//! Kernel tests of `ingero trace`: real uprobes on the real libcudart from the PyPI wheel, real
//! scheduler tracepoints. Run as root through `cargo xtask test` (one test at a time).

use anyhow::Result;
use ingero_e2e::{
    Agent, Driver, build_fixture, cuda_driver, cudart, events, kernel_tests_enabled, only_call,
};
use serde_json::{Value, json};

#[test]
fn cuda_calls_carry_exact_arguments_and_untargeted_processes_emit_nothing() -> Result<()> {
    if !kernel_tests_enabled() {
        return Ok(());
    }
    let lib = cudart()?;
    let lib_str = lib.to_string_lossy().to_string();
    let program = cuda_driver()?;
    let mut target = Driver::spawn(&program, &[&lib_str, "calls"])?;
    let mut outsider = Driver::spawn(&program, &[&lib_str, "calls"])?;
    let ids = target.read()?;
    outsider.read()?;
    let pid = ids["pid"].as_u64().unwrap_or_default();
    let tid = ids["tid"].as_u64().unwrap_or_default();
    let outsider_pid = outsider.pid() as u64;

    let agent = Agent::start(&["--cuda-lib", &lib_str, "--pid", &pid.to_string()])?;
    let done = target.go_and_finish()?;
    outsider.go_and_finish()?;
    assert_eq!(
        done["ret"],
        json!([35, 35, 35, 35, 35, 35, 35, 35, 35]),
        "the driver saw other return codes"
    );
    let all = agent.stop()?;

    for op in [
        "cudaMalloc",
        "cudaFree",
        "cudaLaunchKernel",
        "cudaMemcpy",
        "cudaStreamSynchronize",
        "cudaDeviceSynchronize",
        "cudaHostRegister",
        "cudaMemcpyAsync",
        "cudaHostUnregister",
    ] {
        let e = only_call(&all, op, pid);
        assert_eq!(e["tid"], tid, "{op} tid");
        assert_eq!(e["ret"], 35, "{op} return code");
        assert_eq!(e["comm"], "cuda_driver", "{op} comm");
        assert!(
            e["duration_ns"].as_u64().unwrap_or(0) > 0,
            "{op} duration: {e}"
        );
        assert!(e["ts_ns"].as_u64().unwrap_or(0) > 0, "{op} timestamp: {e}");
        assert_eq!(e["args"]["error"], "cudaErrorInsufficientDriver");
    }
    let malloc = only_call(&all, "cudaMalloc", pid);
    assert_eq!(malloc["args"]["size"], 1_048_576);
    assert_eq!(malloc["args"]["ptr"], Value::Null, "no pointer on failure");
    let free = only_call(&all, "cudaFree", pid);
    assert_eq!(free["args"]["ptr"], "0xdead0000");
    let launch = only_call(&all, "cudaLaunchKernel", pid);
    assert_eq!(launch["args"]["func"], "0x1234");
    assert_eq!(launch["args"]["grid"], json!([16, 4, 1]));
    assert_eq!(launch["args"]["block"], json!([32, 8, 1]));
    assert_eq!(launch["args"]["shared_mem"], 1024);
    assert_eq!(launch["args"]["stream"], "0xabcd");
    let memcpy = only_call(&all, "cudaMemcpy", pid);
    assert_eq!(memcpy["args"]["count"], 4096);
    assert_eq!(memcpy["args"]["kind"], "H2D");
    // The host buffer, the source of the H2D copy and the destination of the D2H one.
    let host = &done["host"];
    assert!(host.as_str().is_some_and(|h| h.starts_with("0x")), "{done}");
    assert_eq!(memcpy["args"]["host_ptr"], *host, "src of an H2D copy");
    let register = only_call(&all, "cudaHostRegister", pid);
    assert_eq!(register["args"]["ptr"], *host);
    assert_eq!(register["args"]["size"], 4096);
    assert_eq!(register["args"]["flags"], 1);
    let copy_async = only_call(&all, "cudaMemcpyAsync", pid);
    assert_eq!(copy_async["args"]["count"], 512);
    assert_eq!(copy_async["args"]["kind"], "D2H");
    assert_eq!(copy_async["args"]["stream"], "0xabcd");
    assert_eq!(copy_async["args"]["host_ptr"], *host, "dst of a D2H copy");
    assert_eq!(
        only_call(&all, "cudaHostUnregister", pid)["args"]["ptr"],
        *host
    );
    assert_eq!(
        only_call(&all, "cudaStreamSynchronize", pid)["args"]["stream"],
        "0xabcd"
    );

    // Calls happen in program order, each after the previous one returned.
    let order: Vec<u64> = ["cudaMalloc", "cudaFree", "cudaLaunchKernel", "cudaMemcpy"]
        .iter()
        .map(|op| only_call(&all, op, pid)["ts_ns"].as_u64().unwrap_or(0))
        .collect();
    assert!(
        order.windows(2).all(|w| w[0] < w[1]),
        "timestamps out of order: {order:?}"
    );

    let leaked: Vec<&Value> = all.iter().filter(|e| e["pid"] == outsider_pid).collect();
    assert!(
        leaked.is_empty(),
        "a process outside --pid produced events: {leaked:#?}"
    );
    Ok(())
}

#[test]
fn off_cpu_intervals_tell_preemption_from_blocking_and_lifecycle_is_traced() -> Result<()> {
    if !kernel_tests_enabled() {
        return Ok(());
    }
    let lib = cudart()?;
    let lib_str = lib.to_string_lossy().to_string();
    let mut driver = Driver::spawn(&cuda_driver()?, &[&lib_str, "sched"])?;
    let ids = driver.read()?;
    let pid = ids["pid"].as_u64().unwrap_or_default();
    let agent = Agent::start(&["--cuda-lib", &lib_str, "--pid", &pid.to_string()])?;
    let done = driver.go_and_finish()?;
    let child = done["child"].as_u64().unwrap_or_default();
    let all = agent.stop()?;

    let off_cpu = events(&all, "sched", "off_cpu");
    let of_thread = |tid: &Value, reason: &str| -> Vec<&Value> {
        off_cpu
            .iter()
            .copied()
            .filter(|e| &e["tid"] == tid && e["args"]["reason"] == reason)
            .collect()
    };
    let slept = of_thread(&ids["sleeper"], "blocked");
    assert!(
        slept
            .iter()
            .filter(|e| e["duration_ns"].as_u64().unwrap_or(0) >= 15_000_000)
            .count()
            >= 3,
        "the sleeper's 20 ms sleeps must show as blocked off-CPU intervals: {slept:#?}"
    );
    let preempted = of_thread(&ids["victim"], "preempted");
    assert!(
        preempted
            .iter()
            .any(|e| e["args"]["next_tid"] == ids["hog"] && e["args"]["next_comm"] == "hog"),
        "the victim must be preempted by the hog pinned to its CPU: {preempted:#?}"
    );
    for e in slept.iter().chain(preempted.iter()) {
        assert_eq!(e["pid"], pid, "off-CPU events carry the thread group id");
    }

    let forks: Vec<&Value> = events(&all, "process", "fork")
        .into_iter()
        .filter(|e| e["args"]["child_tid"] == child)
        .collect();
    assert_eq!(forks.len(), 1, "one fork of the child: {forks:#?}");
    assert_eq!(forks[0]["pid"], pid);
    let threads: Vec<&Value> = events(&all, "process", "thread_start");
    assert!(threads.is_empty() || threads.iter().all(|e| e["pid"] == pid));
    let exec: Vec<&Value> = events(&all, "process", "exec")
        .into_iter()
        .filter(|e| e["pid"] == child)
        .collect();
    assert_eq!(exec.len(), 1, "the child's exec: {exec:#?}");
    assert_eq!(exec[0]["args"]["filename"], "/bin/true");
    let exits: Vec<&Value> = events(&all, "process", "exit")
        .into_iter()
        .filter(|e| e["pid"] == child)
        .collect();
    assert_eq!(exits.len(), 1, "the child's process exit: {exits:#?}");
    let thread_exits: Vec<&Value> = events(&all, "process", "thread_exit")
        .into_iter()
        .filter(|e| {
            e["tid"] == ids["sleeper"] || e["tid"] == ids["victim"] || e["tid"] == ids["hog"]
        })
        .collect();
    assert_eq!(
        thread_exits.len(),
        3,
        "the three worker threads end as thread exits: {thread_exits:#?}"
    );
    Ok(())
}

/// The wheel's copy, as the Python environment's site-packages holds it (`.ci/run` installs
/// `nvidia-cuda-runtime-cu12` with pip).
fn site_packages_cudart() -> Result<String> {
    let out = std::process::Command::new("python3")
        .args([
            "-c",
            "import importlib.util, os; s = importlib.util.find_spec('nvidia.cuda_runtime'); \
             print(os.path.join(list(s.submodule_search_locations)[0], 'lib', 'libcudart.so.12'))",
        ])
        .output()?;
    anyhow::ensure!(
        out.status.success(),
        "nvidia-cuda-runtime-cu12 is not installed in python3's site-packages: pip install it"
    );
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

#[test]
fn finds_the_wheel_in_site_packages_without_cuda_lib() -> Result<()> {
    if !kernel_tests_enabled() {
        return Ok(());
    }
    let lib = site_packages_cudart()?;
    // The agent starts first, so no running process maps the library yet: it must come from
    // the install-place search.
    let agent = Agent::start(&[])?;
    assert!(
        agent
            .stderr()
            .contains("site-packages/nvidia/cuda_runtime/lib/libcudart.so.12"),
        "{}",
        agent.stderr()
    );
    let mut driver = Driver::spawn(&cuda_driver()?, &[&lib, "calls"])?;
    let pid = driver.read()?["pid"].as_u64().unwrap_or_default();
    driver.go_and_finish()?;
    let all = agent.stop()?;
    let malloc = only_call(&all, "cudaMalloc", pid);
    assert_eq!(malloc["args"]["size"], 1_048_576);
    assert_eq!(malloc["ret"], 35);
    Ok(())
}

/// The real libcudart fails every call without a GPU, so the success paths (the device pointer
/// read back at return, the freed size from the live-allocation map, a long synchronisation)
/// are checked on the test-only mock library.
#[test]
fn successful_allocations_resolve_pointers_and_frees_report_their_size() -> Result<()> {
    if !kernel_tests_enabled() {
        return Ok(());
    }
    let mock_lib = build_fixture("mock_cuda", "libmock_cuda.so", &["-shared", "-fPIC"])?;
    let mock_str = mock_lib.to_string_lossy().to_string();
    let mut driver = Driver::spawn(&cuda_driver()?, &[&mock_str, "alloc"])?;
    let pid = driver.read()?["pid"].as_u64().unwrap_or_default();
    let agent = Agent::start(&["--cuda-lib", &mock_str, "--pid", &pid.to_string()])?;
    let done = driver.go_and_finish()?;
    assert_eq!(done["ret"], json!([0, 0, 0]));
    let all = agent.stop()?;
    let ptr = done["ptr"].as_str().unwrap_or_default();
    let malloc = only_call(&all, "cudaMalloc", pid);
    assert_eq!(malloc["ret"], 0);
    assert_eq!(
        malloc["args"]["ptr"], ptr,
        "the pointer cudaMalloc wrote to *devPtr"
    );
    assert_eq!(malloc["args"].get("error"), None);
    let free = only_call(&all, "cudaFree", pid);
    assert_eq!(free["args"]["ptr"], ptr);
    assert_eq!(
        free["args"]["size"], 1_048_576,
        "the freed allocation's size"
    );
    let sync = only_call(&all, "cudaStreamSynchronize", pid);
    assert!(
        sync["duration_ns"].as_u64().unwrap_or(0) >= 20_000_000,
        "a 20 ms synchronisation lasts at least 20 ms: {sync}"
    );
    Ok(())
}
