//! A C program built against the NVTX3 headers (header-only NVTX, one table per linkage unit),
//! run with `NVTX_INJECTION64_PATH` naming the library: exactly the records it made arrive, and
//! the program behaves with no agent, a late agent and an agent that goes away.

mod common;

use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use ingero_nvtx::wire::{Attributes, Message, Payload, Record};

#[test]
fn every_call_of_an_nvtx3_program_arrives_exactly() {
    let Some(include) = nvtx_include() else {
        return;
    };
    let dir = temp_dir("full");
    let exe = compile("producer.c", &dir, Some(&include));
    let sock = dir.join("nvtx.sock");
    let rx = Receiver::bind(&sock, &dir, Arc::new(Mutex::new(Vec::new())));
    let out = run(Command::new(&exe), true, &sock, &dir);
    assert!(out.status.success());
    let v = values(&out);
    let (pid, main_tid): (u32, u32) = (num(&v, "pid"), num(&v, "main_tid"));
    let (child_pid, child_tid): (u32, u32) = (num(&v, "child_pid"), num(&v, "child_tid"));
    let (t1, t2): (u64, u64) = (num(&v, "t1"), num(&v, "t2"));
    let (dom, reg): (u64, u64) = (num(&v, "domain"), num(&v, "reg"));
    let (id, id2): (u64, u64) = (num(&v, "range_id"), num(&v, "range_id2"));
    // What NVTX returned to the program: real depths, -1 on underflow, fresh ids.
    assert_eq!(
        (num::<i32>(&v, "d_outer"), num::<i32>(&v, "d_inner")),
        (0, 1)
    );
    assert_eq!(
        (
            num::<i32>(&v, "p_inner"),
            num::<i32>(&v, "p_outer"),
            num::<i32>(&v, "p_under")
        ),
        (1, 0, -1)
    );
    assert_eq!(
        (
            num::<i32>(&v, "dd_push"),
            num::<i32>(&v, "dd_pop"),
            num::<i32>(&v, "d_open")
        ),
        (0, 0, 0)
    );
    assert_eq!(num::<i32>(&v, "child_status"), 0);
    assert!(dom != 0 && reg != 0 && id != 0 && id2 != 0 && id != id2);

    let conns = rx.finished(2);
    assert_eq!(conns.len(), 2, "the parent's and the child's connections");
    let parent = conns
        .iter()
        .find(|c| c.hello.pid == pid)
        .expect("parent connection");
    let child = conns
        .iter()
        .find(|c| c.hello.pid == child_pid)
        .expect("child connection");
    assert!(parent.hello.monotonic_ns <= t1);
    let recs = parent.records();
    assert!(
        !recs.iter().any(|r| matches!(r, Record::Dropped { .. })),
        "nothing dropped"
    );

    let color = Some(0xFF11_2233);
    let ex = |payload, msg| Record::Push {
        ts_ns: 0,
        tid: main_tid,
        domain: 0,
        attrs: Attributes {
            category: 7,
            color,
            payload,
            message: Message::Text(msg),
            truncated: false,
        },
    };
    let pop = |domain| Record::Pop {
        ts_ns: 0,
        tid: main_tid,
        domain,
    };
    let regd = Attributes {
        category: 3,
        message: Message::Registered(reg),
        ..Attributes::EMPTY
    };
    let mut expected = vec![
        Record::Push {
            ts_ns: 0,
            tid: main_tid,
            domain: 0,
            attrs: text("outer"),
        },
        Record::Push {
            ts_ns: 0,
            tid: main_tid,
            domain: 0,
            attrs: text("inner \u{2713}"),
        },
        Record::Mark {
            ts_ns: 0,
            tid: main_tid,
            domain: 0,
            attrs: text("mark a"),
        },
        Record::Mark {
            ts_ns: 0,
            tid: main_tid,
            domain: 0,
            attrs: text("mark w"),
        },
        pop(0),
        pop(0),
    ];
    for (p, m) in [
        (Payload::U64(u64::MAX), "ex u64"),
        (Payload::I64(-42), "ex i64"),
        (Payload::F64(2.5), "ex f64"),
        (Payload::U32(4_000_000_000), "ex u32"),
        (Payload::I32(-7), "ex i32"),
        (Payload::F32(0.5), "ex f32"),
    ] {
        expected.push(ex(p, m));
        expected.push(pop(0));
    }
    expected.extend([
        Record::Push {
            ts_ns: 0,
            tid: main_tid,
            domain: dom,
            attrs: regd,
        },
        Record::Mark {
            ts_ns: 0,
            tid: main_tid,
            domain: dom,
            attrs: regd,
        },
        pop(dom),
        Record::Start {
            ts_ns: 0,
            tid: main_tid,
            domain: 0,
            id,
            attrs: text("process range"),
        },
        Record::Start {
            ts_ns: 0,
            tid: main_tid,
            domain: dom,
            id: id2,
            attrs: regd,
        },
        Record::End {
            ts_ns: 0,
            tid: main_tid,
            domain: dom,
            id: id2,
        },
        Record::Push {
            ts_ns: 0,
            tid: main_tid,
            domain: 0,
            attrs: text("left open"),
        },
    ]);
    assert_eq!(thread_events(&recs, main_tid), expected);

    // The range started on main and ended on another thread; the thread that exited.
    let ender: u32 = num(&v, "ender_tid");
    assert_eq!(
        thread_events(&recs, ender),
        vec![Record::End {
            ts_ns: 0,
            tid: ender,
            domain: 0,
            id
        }]
    );
    let exiting: u32 = num(&v, "exiting_tid");
    assert_eq!(
        thread_events(&recs, exiting),
        vec![
            Record::Push {
                ts_ns: 0,
                tid: exiting,
                domain: 0,
                attrs: text("in thread")
            },
            Record::Mark {
                ts_ns: 0,
                tid: exiting,
                domain: 0,
                attrs: text("thread mark")
            },
            Record::Pop {
                ts_ns: 0,
                tid: exiting,
                domain: 0
            },
        ]
    );
    assert_eq!(
        recs.iter().filter(|r| event_tid(r).is_some()).count(),
        expected.len() + 1 + 3
    );

    let defs = vec![
        Record::NameThread {
            ts_ns: 0,
            tid: main_tid,
            name: "main thread",
        },
        Record::NameCategory {
            ts_ns: 0,
            domain: 0,
            category: 7,
            name: "cat seven",
        },
        Record::DomainCreate {
            ts_ns: 0,
            domain: dom,
            name: "my domain",
        },
        Record::RegisterString {
            ts_ns: 0,
            domain: dom,
            id: reg,
            text: "registered msg",
        },
        Record::NameCategory {
            ts_ns: 0,
            domain: dom,
            category: 3,
            name: "dom cat",
        },
    ];
    let mut parent_defs = defs.clone();
    parent_defs.push(Record::DomainDestroy {
        ts_ns: 0,
        domain: dom,
    });
    assert_eq!(definitions(&recs), parent_defs);
    // A registered string is on the wire before the first event naming it.
    let def_at = recs
        .iter()
        .position(|r| matches!(r, Record::RegisterString { .. }))
        .unwrap();
    let use_at = recs
        .iter()
        .position(|r| {
            matches!(
                r,
                Record::Push {
                    attrs: Attributes {
                        message: Message::Registered(_),
                        ..
                    },
                    ..
                }
            )
        })
        .unwrap();
    assert!(def_at < use_at);

    // Timestamps: the events lie between the program's own clock readings, in order per thread.
    for tid in [main_tid, ender, exiting] {
        let ts: Vec<u64> = recs
            .iter()
            .filter(|r| event_tid(r) == Some(tid))
            .map(ts_of)
            .collect();
        assert!(
            ts.iter().all(|&t| t1 <= t && t <= t2),
            "tid {tid}: {ts:?} outside [{t1}, {t2}]"
        );
        assert!(ts.windows(2).all(|w| w[0] <= w[1]));
    }

    // The child: its own connection, the definitions it inherited replayed, its own events.
    // The child's warm-up mark normally precedes its connection and is discarded; it arrives
    // only if the new sender connected within the call that started it.
    let warm_up = Record::Mark {
        ts_ns: 0,
        tid: child_tid,
        domain: 0,
        attrs: text("child warm-up"),
    };
    let crecs: Vec<Record<'_>> = child
        .records()
        .into_iter()
        .filter(|r| no_ts(r) != warm_up)
        .collect();
    assert_eq!(definitions(&crecs), defs);
    assert_eq!(
        thread_events(&crecs, child_tid),
        vec![
            Record::Push {
                ts_ns: 0,
                tid: child_tid,
                domain: 0,
                attrs: text("child range")
            },
            Record::Mark {
                ts_ns: 0,
                tid: child_tid,
                domain: 0,
                attrs: text("child mark")
            },
            Record::Pop {
                ts_ns: 0,
                tid: child_tid,
                domain: 0
            },
        ]
    );
    assert_eq!(num::<i32>(&v, "child_d"), 0);
    let (c1, c2): (u64, u64) = (num(&v, "child_t1"), num(&v, "child_t2"));
    assert!(thread_events(&crecs, child_tid).len() == 3);
    assert!(
        crecs
            .iter()
            .filter(|r| event_tid(r).is_some())
            .all(|r| (c1..=c2).contains(&ts_of(r)))
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn with_no_agent_the_program_runs_and_exits_at_once() {
    let Some(include) = nvtx_include() else {
        return;
    };
    let dir = temp_dir("absent");
    let exe = compile("producer.c", &dir, Some(&include));
    let mut cmd = Command::new(&exe);
    cmd.arg("absent")
        .env("INGERO_NVTX_SOCKET", dir.join("nobody.sock"))
        .env_remove("GATE_DIR");
    cmd.env("NVTX_INJECTION64_PATH", lib_path());
    let started = Instant::now();
    let out = cmd.output().unwrap();
    let took = started.elapsed();
    assert!(out.status.success());
    assert_eq!(num::<i32>(&values(&out), "depth"), 0);
    assert!(took < Duration::from_millis(900), "took {took:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_agent_that_appears_later_gets_the_earlier_definitions() {
    let Some(include) = nvtx_include() else {
        return;
    };
    let dir = temp_dir("late");
    let exe = compile("producer.c", &dir, Some(&include));
    let sock = dir.join("nvtx.sock");
    let mut cmd = Command::new(&exe);
    cmd.arg("late")
        .env("INGERO_NVTX_SOCKET", &sock)
        .env("GATE_DIR", &dir)
        .env("NVTX_INJECTION64_PATH", lib_path());
    let child = cmd.stdout(std::process::Stdio::piped()).spawn().unwrap();
    wait_until("the program's definitions", || dir.join("defined").exists());
    // Only now does an agent exist; the library retries every second.
    let rx = Receiver::bind(&sock, &dir, Arc::new(Mutex::new(Vec::new())));
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let v = values(&out);
    let (dom, reg, tid): (u64, u64, u32) = (num(&v, "domain"), num(&v, "reg"), num(&v, "main_tid"));
    let conns = rx.finished(1);
    assert_eq!(conns.len(), 1);
    let recs = conns[0].records();
    assert_eq!(
        definitions(&recs),
        vec![
            Record::NameThread {
                ts_ns: 0,
                tid,
                name: "main thread"
            },
            Record::DomainCreate {
                ts_ns: 0,
                domain: dom,
                name: "early domain"
            },
            Record::RegisterString {
                ts_ns: 0,
                domain: dom,
                id: reg,
                text: "early string"
            },
            Record::NameThread {
                ts_ns: 0,
                tid,
                name: "early thread"
            },
        ]
    );
    let attrs = Attributes {
        message: Message::Registered(reg),
        ..Attributes::EMPTY
    };
    assert_eq!(
        thread_events(&recs, tid),
        vec![
            Record::Push {
                ts_ns: 0,
                tid,
                domain: dom,
                attrs
            },
            Record::Pop {
                ts_ns: 0,
                tid,
                domain: dom
            }
        ]
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_program_outlives_its_agent_and_reconnects() {
    let Some(include) = nvtx_include() else {
        return;
    };
    let dir = temp_dir("reconnect");
    let exe = compile("producer.c", &dir, Some(&include));
    let sock = dir.join("nvtx.sock");
    let conns = Arc::new(Mutex::new(Vec::new()));
    let rx = Receiver::bind(&sock, &dir, conns.clone());
    let mut cmd = Command::new(&exe);
    cmd.arg("reconnect")
        .env("INGERO_NVTX_SOCKET", &sock)
        .env("GATE_DIR", &dir)
        .env("NVTX_INJECTION64_PATH", lib_path());
    let child = cmd.stdout(std::process::Stdio::piped()).spawn().unwrap();
    wait_until("the first events", || {
        dir.join("first").exists()
            && conns
                .lock()
                .unwrap()
                .first()
                .is_some_and(|c| c.records().len() >= 3)
    });
    rx.close();
    std::thread::sleep(Duration::from_millis(300));
    let rx = Receiver::bind(&sock, &dir, conns.clone());
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let v = values(&out);
    let tid: u32 = num(&v, "main_tid");
    assert!(
        num::<u32>(&v, "marks") > 100,
        "the program kept running meanwhile"
    );
    let all = rx.finished(2);
    assert_eq!(all.len(), 2);
    let first = all[0].records();
    assert!(thread_events(&first, tid).contains(&Record::Push {
        ts_ns: 0,
        tid,
        domain: 0,
        attrs: text("before")
    }));
    let second = all[1].records();
    let defs = definitions(&second);
    let dom = defs
        .iter()
        .find_map(|d| match d {
            Record::DomainCreate {
                domain,
                name: "kept domain",
                ..
            } => Some(*domain),
            _ => None,
        })
        .expect("the domain replayed to the new agent");
    let events = thread_events(&second, tid);
    assert_eq!(
        events[events.len() - 2..],
        [
            Record::Push {
                ts_ns: 0,
                tid,
                domain: dom,
                attrs: text("after")
            },
            Record::Pop {
                ts_ns: 0,
                tid,
                domain: dom
            }
        ]
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
