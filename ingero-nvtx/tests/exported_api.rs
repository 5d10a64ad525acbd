//! The same NVTX calls through the libraries that export the API, loaded with dlopen by a small
//! C program: the v2 `libnvToolsExt.so.1` (nvidia-nvtx-cu12 12.8.90, one table per process,
//! a CORE2 table of 15 entries) and the v3 `libnvtx3interop.so.1` (nvidia-nvtx-cu12 12.9.79).

mod common;

use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};

use common::*;
use ingero_nvtx::wire::{Attributes, Message, Payload, Record};

#[expect(
    clippy::unwrap_used,
    reason = "a test helper: a failure stops the test"
)]
fn through(lib: &Path, name: &str) {
    let dir = temp_dir(name);
    let exe = compile("dlopen_producer.c", &dir, None);
    let sock = dir.join("nvtx.sock");
    let rx = Receiver::bind(&sock, &dir, Arc::new(Mutex::new(Vec::new())));
    let mut cmd = Command::new(&exe);
    cmd.arg(lib);
    let out = run(cmd, true, &sock, &dir);
    assert!(out.status.success());
    let v = values(&out);
    let tid: u32 = num(&v, "main_tid");
    let (dom, reg, id): (u64, u64, u64) = (num(&v, "domain"), num(&v, "reg"), num(&v, "range_id"));
    let (t1, t2): (u64, u64) = (num(&v, "t1"), num(&v, "t2"));
    for (k, want) in [
        ("d_outer", 0),
        ("d_inner", 1),
        ("p_inner", 1),
        ("p_outer", 0),
        ("dd_push", 0),
        ("dd_pop", 0),
    ] {
        assert_eq!(num::<i32>(&v, k), want, "{k}");
    }
    let conns = rx.finished(1);
    assert_eq!(conns.len(), 1);
    let recs = conns[0].records();
    assert_eq!(
        definitions(&recs),
        vec![
            Record::NameThread {
                ts_ns: 0,
                tid,
                name: "dl main"
            },
            Record::DomainCreate {
                ts_ns: 0,
                domain: dom,
                name: "v domain"
            },
            Record::RegisterString {
                ts_ns: 0,
                domain: dom,
                id: reg,
                text: "v registered"
            },
        ]
    );
    let regd = Attributes {
        message: Message::Registered(reg),
        ..Attributes::EMPTY
    };
    let ex = Attributes {
        payload: Payload::I32(-3),
        ..text("v ex")
    };
    assert_eq!(
        thread_events(&recs, tid),
        vec![
            Record::Push {
                ts_ns: 0,
                tid,
                domain: 0,
                attrs: text("v outer")
            },
            Record::Push {
                ts_ns: 0,
                tid,
                domain: 0,
                attrs: text("v inner")
            },
            Record::Mark {
                ts_ns: 0,
                tid,
                domain: 0,
                attrs: text("v mark")
            },
            Record::Pop {
                ts_ns: 0,
                tid,
                domain: 0
            },
            Record::Pop {
                ts_ns: 0,
                tid,
                domain: 0
            },
            Record::Start {
                ts_ns: 0,
                tid,
                domain: 0,
                id,
                attrs: text("v range")
            },
            Record::End {
                ts_ns: 0,
                tid,
                domain: 0,
                id
            },
            Record::Push {
                ts_ns: 0,
                tid,
                domain: dom,
                attrs: regd
            },
            Record::Pop {
                ts_ns: 0,
                tid,
                domain: dom
            },
            Record::Push {
                ts_ns: 0,
                tid,
                domain: 0,
                attrs: ex
            },
            Record::Pop {
                ts_ns: 0,
                tid,
                domain: 0
            },
        ]
    );
    assert!(
        recs.iter()
            .filter(|r| event_tid(r).is_some())
            .all(|r| (t1..=t2).contains(&ts_of(r)))
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn calls_through_libnvtoolsext_v2_arrive() {
    if let Some(lib) = test_dep(
        "INGERO_NVTOOLSEXT",
        "nvtoolsext/nvidia/nvtx/lib/libnvToolsExt.so.1",
    ) {
        through(&lib, "nvtoolsext");
    }
}

#[test]
fn calls_through_libnvtx3interop_arrive() {
    if let Some(lib) = test_dep(
        "INGERO_NVTX3INTEROP",
        "interop/nvidia/nvtx/lib/libnvtx3interop.so.1",
    ) {
        through(&lib, "interop");
    }
}
