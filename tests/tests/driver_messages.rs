//! Kernel test of the NVIDIA drivers' messages: lines written to `/dev/kmsg` go through the
//! kernel's own printk path to the `printk:console` tracepoint, as the NVIDIA driver's do (this
//! machine has no GPU, so the driver's Xid lines are written in its format). The agent keeps
//! the NVIDIA ones only: live (`--json` lines, and a line on stderr for a GPU fault), recorded
//! (`query --events`), and explained (a `gpu_xid` finding per device and code).

use std::io::Write;

use anyhow::{Context, Result, ensure};
use ingero_e2e::{Agent, build_fixture, kernel_tests_enabled, run_ingero};
use serde_json::Value;

const OFF_THE_BUS: &str =
    "NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.";
const PAGE_FAULT: &str = "NVRM: Xid (PCI:0000:01:00): 31, pid=4242, name=train, Ch 00000008, intr 00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ 0x7f1d_e4000000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ";
const DISCOVERED: &str = "NVRM: GPU at PCI:0000:3b:00: GPU-5a2f1c3e-0000-0000-0000-000000000000";
/// Not an NVIDIA driver's message: not kept.
const OTHER: &str = "ingero-e2e: a message of another driver";

/// Logs `line` through the kernel, as a driver's printk would be.
fn kmsg(line: &str) -> Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/kmsg")
        .context("opening /dev/kmsg")?;
    // One write is one message.
    f.write_all(line.as_bytes())
        .with_context(|| format!("writing {line:?} to /dev/kmsg (sysctl kernel.printk_devkmsg?)"))
}

fn texts<'a>(lines: impl Iterator<Item = &'a Value>) -> Vec<&'a str> {
    lines
        .filter(|v| v["type"] == "driver")
        .filter_map(|v| v["text"].as_str())
        .filter(|t| [OFF_THE_BUS, PAGE_FAULT, DISCOVERED, OTHER].contains(t))
        .collect()
}

#[test]
fn nvidia_driver_messages_are_traced_recorded_and_explained() -> Result<()> {
    if !kernel_tests_enabled() {
        return Ok(());
    }
    let dir = std::env::temp_dir().join(format!("ingero-e2e-driver-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let recording = dir.join("run.pftrace").to_string_lossy().to_string();
    // Any library will do: the messages are machine-wide, whatever is traced.
    let mock = build_fixture("mock_cuda", "libmock_cuda.so", &["-shared", "-fPIC"])?;
    let me = std::process::id().to_string();
    let agent = Agent::start(&[
        "--cuda-lib",
        &mock.to_string_lossy(),
        "--pid",
        &me,
        "-o",
        &recording,
    ])?;
    for line in [OFF_THE_BUS, OTHER, PAGE_FAULT, DISCOVERED] {
        kmsg(line)?;
    }
    // The tracepoint's records wake the agent at once; leave it time to drain and write.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let (live, stderr) = agent.stop_with_stderr()?;

    // Live: the NVIDIA messages, in order, each once; the other driver's not at all.
    assert_eq!(
        texts(live.iter()),
        [OFF_THE_BUS, PAGE_FAULT, DISCOVERED],
        "{stderr}"
    );
    let bus = live
        .iter()
        .find(|v| v["text"] == OFF_THE_BUS)
        .context("the Xid line")?;
    assert_eq!(bus["xid"], 79);
    assert_eq!(bus["pci"], "0000:3b:00");
    assert_eq!(bus["severity"], "hardware");
    assert!(bus["ts_ns"].as_u64().is_some_and(|t| t > 0), "{bus}");
    assert!(
        stderr.contains("GPU 0000:3b:00 reported Xid 79 (GPU has fallen off the bus; hardware)")
            && stderr.contains("GPU 0000:01:00 reported Xid 31 (")
            && stderr.contains(" for pid 4242 (train)"),
        "{stderr}"
    );

    let last = live
        .iter()
        .rev()
        .find(|v| v["type"] == "stats")
        .context("the final stats line")?;
    assert_eq!(last["driver_messages"]["total"], 3, "{last}");
    assert_eq!(last["driver_messages"]["xids"], 2, "{last}");

    // Recorded: the same messages, with the same fields.
    let events: Vec<Value> = run_ingero(&["query", "--trace", &recording, "--events", "--json"])?
        .lines()
        .map(serde_json::from_str)
        .collect::<Result<_, _>>()?;
    assert_eq!(texts(events.iter()), [OFF_THE_BUS, PAGE_FAULT, DISCOVERED]);
    let recorded = events
        .iter()
        .find(|v| v["text"] == OFF_THE_BUS)
        .context("the recorded Xid")?;
    assert_eq!(recorded, bus, "live and recorded lines are the same");

    // Explained: a finding per device and code, naming the process the driver named.
    let report: Value =
        serde_json::from_str(&run_ingero(&["explain", "--trace", &recording, "--json"])?)?;
    let xids: Vec<&Value> = report["findings"]
        .as_array()
        .context("findings")?
        .iter()
        .filter(|f| f["kind"] == "gpu_xid")
        .collect();
    ensure!(xids.len() == 2, "two devices and codes: {report:#}");
    let page = xids
        .iter()
        .find(|f| f["pid"] == 4242)
        .context("the page fault's finding")?;
    assert_eq!(page["severity"], "HIGH");
    assert!(
        page["summary"]
            .as_str()
            .is_some_and(|s| s.starts_with("GPU 0000:01:00 reported Xid 31 (")
                && s.ends_with("once, naming train[4242]")),
        "{page:#}"
    );
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
