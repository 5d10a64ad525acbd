//! `ingero check`'s two outputs: one line per check for people, one JSON object for scripts
//! (keys documented in docs/json-schema.md, "ingero check --json").

use serde_json::{Value, json};

use super::Report;

/// Width of the status column: the longest word (`warn`, `info`, `FAIL`) and two spaces.
const STATUS_WIDTH: usize = 6;

/// The text output: a line per check, then the verdict.
pub fn text(report: &Report) -> String {
    let mut out = String::new();
    for line in &report.lines {
        out.push_str(&format!(
            "{:<STATUS_WIDTH$}{}: {}\n",
            line.status.text(),
            line.name,
            line.message
        ));
    }
    if report.ok() {
        out.push_str("ingero check: tracing will work on this host\n");
    } else {
        let names: Vec<&str> = report.failures().map(|l| l.name).collect();
        out.push_str(&format!(
            "ingero check: tracing will NOT work on this host (failed: {})\n",
            names.join(", ")
        ));
    }
    out
}

/// The JSON object of `ingero check --json`.
pub fn json(report: &Report) -> Value {
    let checks: Vec<Value> = report
        .lines
        .iter()
        .map(|l| json!({"name": l.name, "status": l.status.json(), "message": l.message}))
        .collect();
    let libraries: Vec<Value> = report
        .libraries
        .iter()
        .map(|l| {
            json!({
                "path": l.path.display().to_string(),
                "library": l.kind.name(),
                "version": l.version,
                "probed_symbols": l.probed.len(),
                "exported_symbols": l.exported.len(),
                "missing": l.missing,
                "error": l.error,
                "linked_in": l.linked_in,
            })
        })
        .collect();
    let p = report.privileges;
    let s = &report.socket;
    let n = &report.nvtx;
    json!({
        "ok": report.ok(),
        "checks": checks,
        "kernel": {"release": report.kernel_release},
        "privileges": {
            "euid": p.euid,
            "cap_bpf": p.cap_bpf(),
            "cap_perfmon": p.cap_perfmon(),
            "cap_sys_admin": p.cap_sys_admin(),
            "sufficient": p.sufficient(),
        },
        "libraries": libraries,
        "nvtx": {
            "available": n.available(),
            "library": n.library.as_ref().map(|l| l.display().to_string()),
            "error": n.error,
            "other_tool": n.other_tool,
        },
        "annotate_socket": {
            "path": s.socket.display().to_string(),
            "directory": s.directory.display().to_string(),
            "exists": s.exists,
            "mode": s.mode.map(|m| format!("{m:04o}")),
            "usable": s.usable,
        },
    })
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use ingero_ebpf::CudaLibrary;

    use super::super::{
        Line, Status, cuda::LibraryReport, host::Privileges, nvtx, socket::SocketReport,
    };
    use super::*;

    fn sample(fail: bool) -> Report {
        let status = if fail { Status::Fail } else { Status::Ok };
        Report {
            lines: vec![
                Line::new("privileges", status, "root with CAP_BPF".into()),
                Line::new("libcuda", Status::Warn, "none found".into()),
            ],
            kernel_release: "6.1.0-28-amd64".into(),
            privileges: Privileges {
                euid: 0,
                cap_eff: u64::MAX,
            },
            libraries: vec![LibraryReport {
                path: PathBuf::from("/usr/lib/x86_64-linux-gnu/libcudart.so.12"),
                kind: CudaLibrary::Runtime,
                version: Some("12.9.79".into()),
                probed: vec!["cudaMalloc", "cudaFree"],
                exported: vec!["cudaMalloc"],
                missing: vec!["cudaFree"],
                error: None,
                test_offset: Some(64),
                linked_in: false,
            }],
            nvtx: nvtx::report(None, None),
            socket: SocketReport {
                socket: PathBuf::from("/run/ingero/annotate.sock"),
                directory: PathBuf::from("/run/ingero"),
                exists: false,
                mode: None,
                usable: true,
                line: Line::new("annotate-socket", Status::Ok, "will be created".into()),
            },
        }
    }

    #[test]
    fn text_has_a_status_column_and_a_verdict() {
        let out = text(&sample(false));
        assert!(
            out.starts_with("ok    privileges: root with CAP_BPF\nwarn  libcuda: none found\n")
        );
        assert!(out.ends_with("ingero check: tracing will work on this host\n"));
        let out = text(&sample(true));
        assert!(out.starts_with("FAIL  privileges:"));
        assert!(out.contains("will NOT work on this host (failed: privileges)"));
    }

    #[test]
    fn json_has_the_documented_keys() {
        let v = json(&sample(false));
        let keys: Vec<&str> = v
            .as_object()
            .map(|o| o.keys().map(String::as_str).collect())
            .unwrap_or_default();
        assert_eq!(
            keys,
            [
                "ok",
                "checks",
                "kernel",
                "privileges",
                "libraries",
                "nvtx",
                "annotate_socket"
            ]
        );
        assert_eq!(v["ok"], true);
        assert_eq!(v["checks"][1]["status"], "warn");
        let lib = &v["libraries"][0];
        assert_eq!(lib["library"], "libcudart");
        assert_eq!(lib["version"], "12.9.79");
        assert_eq!(lib["probed_symbols"], 2);
        assert_eq!(lib["exported_symbols"], 1);
        assert_eq!(lib["missing"], serde_json::json!(["cudaFree"]));
        assert_eq!(lib["linked_in"], false);
        assert_eq!(v["privileges"]["sufficient"], true);
        assert_eq!(v["annotate_socket"]["mode"], Value::Null);
        assert_eq!(v["nvtx"]["available"], false);
        assert_eq!(v["nvtx"]["library"], Value::Null);
        assert_eq!(json(&sample(true))["checks"][0]["status"], "fail");
    }
}
