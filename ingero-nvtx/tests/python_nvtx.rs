//! The PyPI `nvtx` package (0.2.16) from Python: ranges, annotations with domain, color and
//! payload, start/end and marks arrive; without `NVTX_INJECTION64_PATH` the same program runs
//! unchanged and nothing connects. Skipped (with a message) when `python3 -c "import nvtx"`
//! fails; `scripts/install-prerequisites.sh` installs it.

mod common;

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use ingero_nvtx::wire::{Attributes, Message, Payload, Record};

fn python_with_nvtx() -> Option<Command> {
    let py = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let ok = Command::new(&py)
        .args(["-c", "import nvtx"])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!("SKIPPED: `{py} -c 'import nvtx'` failed; pip install nvtx==0.2.16");
        return None;
    }
    let mut cmd = Command::new(py);
    cmd.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/py/producer.py"));
    Some(cmd)
}

#[test]
fn the_python_nvtx_package_is_captured() {
    let Some(cmd) = python_with_nvtx() else {
        return;
    };
    let dir = temp_dir("python");
    let sock = dir.join("nvtx.sock");
    let rx = Receiver::bind(&sock, &dir, Arc::new(Mutex::new(Vec::new())));
    let out = run(cmd, true, &sock, &dir);
    assert!(out.status.success());
    let v = values(&out);
    let tid: u32 = num(&v, "main_tid");
    let (t1, t2): (u64, u64) = (num(&v, "t1"), num(&v, "t2"));
    let conns = rx.finished(1);
    assert_eq!(conns.len(), 1);
    assert_eq!(conns[0].hello.pid, num::<u32>(&v, "pid"));
    let recs = conns[0].records();
    // The package sends every message as a registered string: resolve them.
    let strings: HashMap<u64, &str> = recs
        .iter()
        .filter_map(|r| match *r {
            Record::RegisterString { id, text, .. } => Some((id, text)),
            _ => None,
        })
        .collect();
    let dom = recs
        .iter()
        .find_map(|r| match *r {
            Record::DomainCreate {
                domain,
                name: "py domain",
                ..
            } => Some(domain),
            _ => None,
        })
        .expect("the domain");
    // (kind, domain, message, color, payload) of each event, in order.
    let seen: Vec<(&str, u64, &str, Option<u32>, Payload)> = thread_events(&recs, tid)
        .iter()
        .map(|r| {
            let msg = |a: &Attributes<'_>| match a.message {
                Message::Registered(id) => strings.get(&id).copied().unwrap_or("?"),
                Message::Text(_) => "(text)",
                Message::None => "",
            };
            match r {
                Record::Push { domain, attrs, .. } => {
                    ("push", *domain, msg(attrs), attrs.color, attrs.payload)
                }
                Record::Mark { domain, attrs, .. } => {
                    ("mark", *domain, msg(attrs), attrs.color, attrs.payload)
                }
                Record::Start { domain, attrs, .. } => {
                    ("start", *domain, msg(attrs), attrs.color, attrs.payload)
                }
                Record::Pop { domain, .. } => ("pop", *domain, "", None, Payload::None),
                Record::End { domain, .. } => ("end", *domain, "", None, Payload::None),
                _ => ("?", 0, "", None, Payload::None),
            }
        })
        .collect();
    // The warm-up mark comes before the program's first clock reading: the library connects
    // during NVTX's initialization, so it is normally captured (it is the program's own, not
    // part of what is compared here).
    let seen: Vec<_> = seen.into_iter().filter(|e| e.2 != "warm-up").collect();
    let (red, blue) = (Some(0x00FF_0000), Some(0x0000_00FF));
    assert_eq!(
        seen,
        vec![
            ("push", 0, "py outer", red, Payload::None),
            ("push", dom, "py annotated", blue, Payload::I64(7)),
            ("mark", dom, "py mark", blue, Payload::F64(2.5)),
            ("pop", dom, "", None, Payload::None),
            ("pop", 0, "", None, Payload::None),
            ("start", 0, "py range", blue, Payload::I64(-4)),
            ("end", 0, "", None, Payload::None),
        ]
    );
    // The range's end carries the id its start got.
    let ids: Vec<u64> = recs
        .iter()
        .filter_map(|r| match *r {
            Record::Start { id, .. } | Record::End { id, .. } => Some(id),
            _ => None,
        })
        .collect();
    assert!(ids.len() == 2 && ids[0] == ids[1] && ids[0] != 0);
    // Every event but the warm-up mark (the first, before `t1`) lies between the program's
    // two clock readings.
    assert!(
        recs.iter()
            .filter(|r| event_tid(r).is_some())
            .skip_while(|r| matches!(r, Record::Mark { .. }) && ts_of(r) < t1)
            .all(|r| (t1..=t2).contains(&ts_of(r)))
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn without_the_variable_the_program_runs_unchanged_and_nothing_connects() {
    let Some(mut cmd) = python_with_nvtx() else {
        return;
    };
    let dir = temp_dir("python-plain");
    let sock = dir.join("nvtx.sock");
    let conns = Arc::new(Mutex::new(Vec::new()));
    let rx = Receiver::bind(&sock, &dir, conns.clone());
    cmd.arg("--no-gate");
    let out = run(cmd, false, &sock, &dir);
    assert!(out.status.success());
    assert_eq!(num::<u32>(&values(&out), "done"), 1);
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        conns.lock().unwrap().is_empty(),
        "nothing may connect without the variable"
    );
    rx.close();
    std::fs::remove_dir_all(&dir).unwrap();
}
