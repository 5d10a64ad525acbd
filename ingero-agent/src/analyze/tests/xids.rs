//! GPU faults the NVIDIA driver reported, in `explain` and `query --events`, on the NCCL
//! scenarios' three-rank job (`nccl.rs`) with driver messages added:
//! - an application fault reported three times naming rank 2's process, a GPU off the bus
//!   naming none, a corrected error, and a message that is no Xid report: a finding per device
//!   and code, with the severity the catalog gives, the process and its rank, and the time
//!   from the first report on as the impact; the messages are listed as events;
//! - a selection that ends before the faults finds none;
//! - a rank that stopped calling collectives after a GPU fault: the stall names the fault, in
//!   one recording and across hosts (where the fault is its host's).

use std::path::PathBuf;

use serde_json::Value;

use super::fixtures::{self, MS, T0, US};
use super::nccl::{PIDS, Plan, STEPS, explain_json, job, of_kind, write};
use crate::analyze::events::{self, EventFormat};
use crate::analyze::fleet::{Fleet, report};
use crate::analyze::xids::MAX_XIDS;
use crate::analyze::{self, SelectionSpec};
use ingero_trace::model::{DriverMessage, TimelineRecord};
use ingero_trace::synth::task;

/// Rank 2's GPU page fault, as the driver names its process.
const PAGE_FAULT: &str = "NVRM: Xid (PCI:0000:01:00): 31, pid=7000012, name=train, Ch 00000008, intr 00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ 0x7f1d_e4000000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ";
/// A GPU off the bus: the driver names no process.
const OFF_THE_BUS: &str =
    "NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.";
/// A corrected error: nothing stopped.
const REMAPPED: &str = "NVRM: Xid (PCI:0000:3b:00): 63, pid=1896, Row Remapper: New row marked for remapping, reset gpu to activate.";
/// Not an Xid report.
const DISCOVERED: &str = "NVRM: GPU at PCI:0000:3b:00: GPU-5a2f1c3e-0000-0000-0000-000000000000";

fn driver(ts_ns: u64, text: &str) -> TimelineRecord {
    TimelineRecord::Driver(DriverMessage {
        ts_ns,
        text: text.to_owned(),
        truncated: false,
    })
}

/// The job, its ranks labelled, with `extra` records; written as one host's recording.
fn recording(name: &str, plan: Plan, extra: Vec<TimelineRecord>) -> PathBuf {
    let mut records = job(plan, &[0, 1, 2]);
    for (rank, pid) in PIDS.iter().enumerate() {
        records.push(fixtures::label(*pid, T0, "rank", &rank.to_string()));
    }
    records.extend(extra);
    let dir = std::env::temp_dir().join(format!("ingero-xids-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let path = dir.join("run.pftrace");
    write(&path, "gpu-node-1", records);
    path
}

fn faults() -> Vec<TimelineRecord> {
    vec![
        driver(T0 + 500 * MS, PAGE_FAULT),
        driver(T0 + 510 * MS, PAGE_FAULT),
        driver(T0 + 520 * MS, PAGE_FAULT),
        driver(T0 + 1_000 * MS, OFF_THE_BUS),
        driver(T0 + 1_200 * MS, REMAPPED),
        driver(T0 + 1_300 * MS, DISCOVERED),
    ]
}

fn summary(f: &Value) -> &str {
    f["summary"].as_str().unwrap_or_default()
}

#[test]
fn each_device_and_code_the_driver_reported_is_a_finding() {
    let path = recording("faults", Plan::Healthy, faults());
    let e = explain_json(&path);
    let found = of_kind(&e, "gpu_xid");
    assert_eq!(found.len(), 3, "{e:#}");
    // The recording ends with rank 2's last sync: its step 19 at +1.9 s + 20 µs, then 80 ms
    // on, 10 ms long.
    let end = T0 + (STEPS - 1) * 100 * MS + 20 * US + 90 * MS;
    // Most impact first: the page fault, reported first.
    let page = found[0];
    assert_eq!(page["severity"], "HIGH");
    assert_eq!(page["pid"], PIDS[2]);
    assert_eq!(
        summary(page),
        "GPU 0000:01:00 reported Xid 31 (GPU memory page fault (often an illegal address in a kernel)) 3 times, naming train[7000012] (rank 2)"
    );
    assert_eq!(page["impact_ns"].as_u64(), Some(end - (T0 + 500 * MS)));
    assert_eq!(page["window"]["end_ns"].as_u64(), Some(T0 + 520 * MS));
    assert_eq!(page["evidence"].as_array().map(Vec::len), Some(3));
    let root = page["root_cause"].as_str().unwrap_or_default();
    assert!(root.contains("; the application's own fault: "), "{root}");
    let off = found[1];
    assert_eq!(off["severity"], "HIGH");
    assert!(
        off.get("pid").is_none(),
        "the driver named no process: {off:#}"
    );
    assert_eq!(
        summary(off),
        "GPU 0000:3b:00 reported Xid 79 (GPU has fallen off the bus) once"
    );
    assert_eq!(off["impact_ns"].as_u64(), Some(end - (T0 + 1_000 * MS)));
    let remap = found[2];
    assert_eq!(remap["severity"], "LOW", "a corrected error: {remap:#}");
    assert_eq!(remap["impact_ns"].as_u64(), Some(0));
    assert_eq!(
        remap["pid"], 1896,
        "a process the recording never saw is named by the driver's pid"
    );

    // Every driver message is an event, in time order, with what the Xid says.
    let an = fixtures::open(&path, &SelectionSpec::default());
    let mut out = Vec::new();
    events::write(&an, EventFormat::Json, &mut out).expect("events");
    let lines: Vec<Value> = String::from_utf8_lossy(&out)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["type"] == "driver")
        .collect();
    let texts: Vec<&str> = lines.iter().filter_map(|v| v["text"].as_str()).collect();
    assert_eq!(
        texts,
        [
            PAGE_FAULT,
            PAGE_FAULT,
            PAGE_FAULT,
            OFF_THE_BUS,
            REMAPPED,
            DISCOVERED
        ]
    );
    assert_eq!(lines[0]["xid"], 31);
    assert_eq!(lines[0]["pid"], PIDS[2]);
    assert_eq!(lines[3]["severity"], "hardware");
    assert!(lines[5].get("xid").is_none(), "{:#}", lines[5]);
}

#[test]
fn a_selection_that_ends_before_the_faults_finds_none() {
    let path = recording("before", Plan::Healthy, faults());
    let spec = SelectionSpec {
        to: Some("+400ms".into()),
        ..SelectionSpec::default()
    };
    let an = fixtures::open(&path, &spec);
    let e = analyze::explain(&an, None).expect("explain");
    assert!(
        e.findings.iter().all(|f| f.kind != "gpu_xid"),
        "{:#?}",
        e.findings
    );
}

#[test]
fn a_stalled_rank_names_the_gpu_fault_that_stopped_it() {
    // Rank 2 stops calling collectives at step 10 (+1 s); its GPU falls off the bus then.
    for (name, text, whose) in [
        (
            "stall-bus",
            OFF_THE_BUS,
            "naming no process: if it is this rank's GPU",
        ),
        ("stall-named", PAGE_FAULT, "naming this rank's process"),
    ] {
        let extra = vec![driver(T0 + 1_005 * MS, text)];
        let e = explain_json(&recording(name, Plan::Stall { tail_ms: 8_000 }, extra));
        let stall = of_kind(&e, "nccl_stall");
        assert_eq!(stall.len(), 1, "{e:#}");
        let root = stall[0]["root_cause"].as_str().unwrap_or_default();
        assert!(
            root.starts_with("The NVIDIA driver reported Xid "),
            "{root}"
        );
        assert!(root.contains(whose), "{root}");
        let evidence = stall[0]["evidence"].to_string();
        assert!(
            evidence.contains("the NVIDIA driver reported Xid"),
            "{evidence}"
        );
    }
    // Without a fault the stall says nothing of one.
    let e = explain_json(&recording(
        "stall-alone",
        Plan::Stall { tail_ms: 8_000 },
        Vec::new(),
    ));
    let root = of_kind(&e, "nccl_stall")[0]["root_cause"].to_string();
    assert!(!root.contains("Xid"), "{root}");
}

#[test]
fn with_several_hosts_a_fault_is_the_host_s_and_names_the_stall_there() {
    let dir = std::env::temp_dir().join(format!("ingero-xids-{}-hosts", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let stall = Plan::Stall { tail_ms: 8_000 };
    write(
        &dir.join("gpu-node-1/run.pftrace"),
        "gpu-node-1",
        job(stall, &[0, 1]),
    );
    let mut second = job(stall, &[2]);
    second.push(driver(T0 + 1_005 * MS, OFF_THE_BUS));
    // Its host's recording goes on as long as the other's (rank 2 hangs, polling its stream).
    let hung = task(PIDS[2], PIDS[2], "train");
    for i in 0..80 {
        second.push(fixtures::sync(
            hung,
            T0 + (STEPS * 100 + i * 100) * MS,
            100 * US,
        ));
    }
    write(&dir.join("gpu-node-2/run.pftrace"), "gpu-node-2", second);
    let fleet = Fleet::open(Some(&dir), &SelectionSpec::default(), &[]).expect("opens");
    let e = report::explain(&fleet, None).expect("explain");
    let xids: Vec<_> = e.findings.iter().filter(|f| f.kind == "gpu_xid").collect();
    assert_eq!(xids.len(), 1, "{:#?}", e.findings);
    assert_eq!(xids[0].host.as_deref(), Some("gpu-node-2"));
    let stall = e
        .findings
        .iter()
        .find(|f| f.kind == "nccl_stall")
        .expect("the stall");
    assert_eq!(stall.host.as_deref(), Some("gpu-node-2"));
    assert!(
        stall
            .root_cause
            .starts_with("The NVIDIA driver reported Xid 79"),
        "{}",
        stall.root_cause
    );
}

#[test]
fn reports_past_the_bound_are_named_in_the_limits() {
    let storm = (0..MAX_XIDS as u64 + 2)
        .map(|i| driver(T0 + 500 * MS + i * US, PAGE_FAULT))
        .collect();
    let e = explain_json(&recording("storm", Plan::Healthy, storm));
    let limits = e["losses"][0]["limits"].to_string();
    assert!(
        limits.contains("2 more Xid reports of the NVIDIA driver were not kept (4096 are)"),
        "{e:#}"
    );
    let found = of_kind(&e, "gpu_xid");
    assert_eq!(found.len(), 1, "{e:#}");
    assert!(
        summary(found[0]).contains(" 4096 times"),
        "{}",
        summary(found[0])
    );
}
