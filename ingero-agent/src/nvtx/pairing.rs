//! One connected process's NVTX stream turned into timeline records: a push paired with its
//! pop (per thread and domain), a start with its end (by id, on any thread), marks as they
//! come; messages resolved (registered strings), domains and categories named. Everything is
//! bounded ([`Limits`]); what does not fit is counted, never kept, and the records still open
//! when the process goes away are closed as `unclosed`.

use std::collections::HashMap;

use ingero_nvtx::wire::{Attributes, Message, Payload, Record};
use ingero_trace::model::{NvtxKind, NvtxPayload, NvtxRecord};

/// Bounds on what one process's session keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Open push/pop ranges per thread and domain.
    pub max_depth: usize,
    /// Open start/end ranges.
    pub max_open_ranges: usize,
    /// Domains, registered strings, category and thread names, each.
    pub max_names: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_depth: 256,
            max_open_ranges: 65_536,
            max_names: 65_536,
        }
    }
}

/// What a session counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SessionCounters {
    /// Ranges and marks produced.
    pub records: u64,
    /// Pops and ends with nothing open to close.
    pub unmatched: u64,
    /// Pushes, starts and names over [`Limits`].
    pub over_limit: u64,
    /// Ranges closed because the process went away.
    pub unclosed: u64,
    /// Events the library reported dropped (its own count, cumulative).
    pub library_dropped: u64,
}

/// A range waiting for its end.
struct Open {
    ts_ns: u64,
    tid: u32,
    domain: u64,
    attrs: OwnedAttrs,
}

/// [`Attributes`] with the message resolved and owned.
struct OwnedAttrs {
    category: u32,
    color: Option<u32>,
    payload: Option<NvtxPayload>,
    message: String,
    truncated: bool,
}

/// One process's NVTX state.
pub struct Session {
    pid: u32,
    limits: Limits,
    domains: HashMap<u64, String>,
    strings: HashMap<(u64, u64), String>,
    categories: HashMap<(u64, u32), String>,
    thread_names: HashMap<u32, String>,
    stacks: HashMap<(u32, u64), Vec<Open>>,
    open_ranges: HashMap<u64, Open>,
    /// The newest time seen (where unclosed ranges end).
    last_ts: u64,
    pub counters: SessionCounters,
}

fn payload(p: Payload) -> Option<NvtxPayload> {
    match p {
        Payload::None => None,
        Payload::U64(v) => Some(NvtxPayload::U64(v)),
        Payload::U32(v) => Some(NvtxPayload::U64(u64::from(v))),
        Payload::I64(v) => Some(NvtxPayload::I64(v)),
        Payload::I32(v) => Some(NvtxPayload::I64(i64::from(v))),
        Payload::F64(v) => Some(NvtxPayload::F64(v)),
        Payload::F32(v) => Some(NvtxPayload::F64(f64::from(v))),
    }
}

/// Inserts unless the map is full (then counts).
fn bounded_insert<K: std::hash::Hash + Eq, V>(
    map: &mut HashMap<K, V>,
    max: usize,
    key: K,
    value: V,
    over: &mut u64,
) {
    if map.len() >= max && !map.contains_key(&key) {
        *over += 1;
    } else {
        map.insert(key, value);
    }
}

impl Session {
    pub fn new(pid: u32, limits: Limits) -> Session {
        Session {
            pid,
            limits,
            domains: HashMap::new(),
            strings: HashMap::new(),
            categories: HashMap::new(),
            thread_names: HashMap::new(),
            stacks: HashMap::new(),
            open_ranges: HashMap::new(),
            last_ts: 0,
            counters: SessionCounters::default(),
        }
    }

    fn own(&self, domain: u64, a: &Attributes<'_>) -> OwnedAttrs {
        let message = match a.message {
            Message::None => String::new(),
            Message::Text(t) => t.to_owned(),
            Message::Registered(id) => self
                .strings
                .get(&(domain, id))
                .cloned()
                .unwrap_or_else(|| format!("(registered string {id})")),
        };
        OwnedAttrs {
            category: a.category,
            color: a.color,
            payload: payload(a.payload),
            message,
            truncated: a.truncated,
        }
    }

    fn record(&self, kind: NvtxKind, open: Open, end_ns: u64) -> NvtxRecord {
        let mut r = NvtxRecord::new(kind, self.pid, open.tid, open.ts_ns, end_ns.max(open.ts_ns));
        r.message = open.attrs.message;
        r.domain = (open.domain != 0).then(|| {
            self.domains
                .get(&open.domain)
                .cloned()
                .unwrap_or_else(|| format!("domain {}", open.domain))
        });
        r.category = open.attrs.category;
        r.category_name = self
            .categories
            .get(&(open.domain, open.attrs.category))
            .cloned();
        r.color = open.attrs.color;
        r.payload = open.attrs.payload;
        r.truncated = open.attrs.truncated;
        r.thread_name = self
            .thread_names
            .get(&open.tid)
            .cloned()
            .unwrap_or_default();
        r
    }

    /// Takes one record of the stream; `out` receives each range or mark completed by it.
    pub fn feed(&mut self, rec: &Record<'_>, out: &mut impl FnMut(NvtxRecord)) {
        let mut emit = |s: &mut Session, r: NvtxRecord| {
            s.counters.records += 1;
            out(r);
        };
        match *rec {
            Record::Push {
                ts_ns,
                tid,
                domain,
                attrs,
            } => {
                self.seen(ts_ns);
                let attrs = self.own(domain, &attrs);
                let stack = self.stacks.entry((tid, domain)).or_default();
                if stack.len() >= self.limits.max_depth {
                    self.counters.over_limit += 1;
                    // Still pushed (without its attributes kept), so the pops stay paired.
                    stack.push(Open {
                        ts_ns,
                        tid,
                        domain,
                        attrs: OwnedAttrs {
                            category: 0,
                            color: None,
                            payload: None,
                            message: String::new(),
                            truncated: true,
                        },
                    });
                    return;
                }
                stack.push(Open {
                    ts_ns,
                    tid,
                    domain,
                    attrs,
                });
            }
            Record::Pop { ts_ns, tid, domain } => {
                self.seen(ts_ns);
                let stack = self.stacks.entry((tid, domain)).or_default();
                match stack.pop() {
                    Some(open) => {
                        let depth = stack.len() as u32;
                        let over = depth as usize >= self.limits.max_depth;
                        let mut r = self.record(NvtxKind::PushPop, open, ts_ns);
                        r.depth = depth;
                        if !over {
                            emit(self, r);
                        }
                    }
                    None => self.counters.unmatched += 1,
                }
            }
            Record::Start {
                ts_ns,
                tid,
                domain,
                id,
                attrs,
            } => {
                self.seen(ts_ns);
                if self.open_ranges.len() >= self.limits.max_open_ranges {
                    self.counters.over_limit += 1;
                    return;
                }
                let attrs = self.own(domain, &attrs);
                self.open_ranges.insert(
                    id,
                    Open {
                        ts_ns,
                        tid,
                        domain,
                        attrs,
                    },
                );
            }
            Record::End { ts_ns, tid, id, .. } => {
                self.seen(ts_ns);
                match self.open_ranges.remove(&id) {
                    Some(open) => {
                        let started_on = open.tid;
                        let mut r = self.record(NvtxKind::StartEnd, open, ts_ns);
                        r.end_tid = (tid != started_on).then_some(tid);
                        emit(self, r);
                    }
                    None => self.counters.unmatched += 1,
                }
            }
            Record::Mark {
                ts_ns,
                tid,
                domain,
                attrs,
            } => {
                self.seen(ts_ns);
                let attrs = self.own(domain, &attrs);
                let r = self.record(
                    NvtxKind::Mark,
                    Open {
                        ts_ns,
                        tid,
                        domain,
                        attrs,
                    },
                    ts_ns,
                );
                emit(self, r);
            }
            Record::DomainCreate { domain, name, .. } => {
                let max = self.limits.max_names;
                bounded_insert(
                    &mut self.domains,
                    max,
                    domain,
                    name.to_owned(),
                    &mut self.counters.over_limit,
                );
            }
            // A destroyed domain's name is kept: its ranges may still be open.
            Record::DomainDestroy { .. } => {}
            Record::RegisterString {
                domain, id, text, ..
            } => {
                let max = self.limits.max_names;
                bounded_insert(
                    &mut self.strings,
                    max,
                    (domain, id),
                    text.to_owned(),
                    &mut self.counters.over_limit,
                );
            }
            Record::NameCategory {
                domain,
                category,
                name,
                ..
            } => {
                let max = self.limits.max_names;
                bounded_insert(
                    &mut self.categories,
                    max,
                    (domain, category),
                    name.to_owned(),
                    &mut self.counters.over_limit,
                );
            }
            Record::NameThread { tid, name, .. } => {
                let max = self.limits.max_names;
                bounded_insert(
                    &mut self.thread_names,
                    max,
                    tid,
                    name.to_owned(),
                    &mut self.counters.over_limit,
                );
            }
            Record::Dropped { total, .. } => {
                self.counters.library_dropped = self.counters.library_dropped.max(total);
            }
        }
    }

    fn seen(&mut self, ts: u64) {
        self.last_ts = self.last_ts.max(ts);
    }

    /// The process went away (or disconnected) at `at` (0: at the newest time seen): every
    /// range still open is closed there, flagged `unclosed`.
    pub fn close(mut self, at: u64, out: &mut impl FnMut(NvtxRecord)) -> SessionCounters {
        let end = if at == 0 { self.last_ts } else { at };
        let mut open: Vec<(NvtxKind, u32, Open)> = Vec::new();
        for (_, stack) in self.stacks.drain() {
            for (depth, o) in stack.into_iter().enumerate() {
                open.push((NvtxKind::PushPop, depth as u32, o));
            }
        }
        for (_, o) in self.open_ranges.drain() {
            open.push((NvtxKind::StartEnd, 0, o));
        }
        open.sort_by_key(|(_, d, o)| (o.ts_ns, *d));
        for (kind, depth, o) in open {
            let mut r = self.record(kind, o, end);
            r.depth = depth;
            r.unclosed = true;
            self.counters.unclosed += 1;
            self.counters.records += 1;
            out(r);
        }
        self.counters
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(msg: &str) -> Attributes<'_> {
        Attributes {
            message: Message::Text(msg),
            ..Attributes::EMPTY
        }
    }

    fn run(records: &[Record<'_>], limits: Limits) -> (Vec<NvtxRecord>, SessionCounters) {
        let mut s = Session::new(42, limits);
        let mut out = Vec::new();
        for r in records {
            s.feed(r, &mut |n| out.push(n));
        }
        let c = s.close(0, &mut |n| out.push(n));
        (out, c)
    }

    #[test]
    fn pushes_pair_with_pops_per_thread_and_domain_inner_first() {
        let recs = [
            Record::DomainCreate {
                ts_ns: 1,
                domain: 7,
                name: "NCCL",
            },
            Record::RegisterString {
                ts_ns: 1,
                domain: 7,
                id: 3,
                text: "allreduce",
            },
            Record::NameCategory {
                ts_ns: 1,
                domain: 0,
                category: 2,
                name: "train",
            },
            Record::NameThread {
                ts_ns: 1,
                tid: 10,
                name: "trainer",
            },
            Record::Push {
                ts_ns: 10,
                tid: 10,
                domain: 0,
                attrs: Attributes {
                    category: 2,
                    color: Some(0xff00_00ff),
                    payload: Payload::I32(-3),
                    ..attrs("step")
                },
            },
            Record::Push {
                ts_ns: 20,
                tid: 10,
                domain: 0,
                attrs: attrs("forward"),
            },
            Record::Push {
                ts_ns: 25,
                tid: 10,
                domain: 7,
                attrs: Attributes {
                    message: Message::Registered(3),
                    ..Attributes::EMPTY
                },
            },
            Record::Push {
                ts_ns: 26,
                tid: 11,
                domain: 0,
                attrs: attrs("loader"),
            },
            Record::Pop {
                ts_ns: 30,
                tid: 10,
                domain: 0,
            },
            Record::Pop {
                ts_ns: 35,
                tid: 10,
                domain: 7,
            },
            Record::Pop {
                ts_ns: 40,
                tid: 11,
                domain: 0,
            },
            Record::Pop {
                ts_ns: 50,
                tid: 10,
                domain: 0,
            },
            Record::Pop {
                ts_ns: 60,
                tid: 10,
                domain: 0,
            },
        ];
        let (out, c) = run(&recs, Limits::default());
        let got: Vec<(&str, u64, u64, u32, Option<&str>)> = out
            .iter()
            .map(|r| {
                (
                    r.message.as_str(),
                    r.ts_ns,
                    r.end_ns,
                    r.depth,
                    r.domain.as_deref(),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("forward", 20, 30, 1, None),
                ("allreduce", 25, 35, 0, Some("NCCL")),
                ("loader", 26, 40, 0, None),
                ("step", 10, 50, 0, None),
            ]
        );
        let step = &out[3];
        assert_eq!(step.category_name.as_deref(), Some("train"));
        assert_eq!(step.color, Some(0xff00_00ff));
        assert_eq!(step.payload, Some(NvtxPayload::I64(-3)));
        assert_eq!(step.thread_name, "trainer");
        assert_eq!(
            (c.records, c.unmatched, c.unclosed),
            (4, 1, 0),
            "the last pop had no push"
        );
    }

    #[test]
    fn starts_pair_with_ends_on_any_thread_and_open_ones_close_unclosed() {
        let recs = [
            Record::Start {
                ts_ns: 5,
                tid: 1,
                domain: 0,
                id: 9,
                attrs: attrs("load"),
            },
            Record::Start {
                ts_ns: 6,
                tid: 1,
                domain: 0,
                id: 10,
                attrs: attrs("never ends"),
            },
            Record::Mark {
                ts_ns: 7,
                tid: 2,
                domain: 0,
                attrs: attrs("ckpt"),
            },
            Record::End {
                ts_ns: 8,
                tid: 2,
                domain: 0,
                id: 9,
            },
            Record::End {
                ts_ns: 9,
                tid: 2,
                domain: 0,
                id: 99,
            },
            Record::Push {
                ts_ns: 11,
                tid: 1,
                domain: 0,
                attrs: attrs("open at exit"),
            },
            Record::Dropped {
                ts_ns: 12,
                total: 5,
            },
        ];
        let (out, c) = run(&recs, Limits::default());
        let mark = out.iter().find(|r| r.kind == NvtxKind::Mark).expect("mark");
        assert_eq!((mark.ts_ns, mark.end_ns, mark.tid), (7, 7, 2));
        let load = out.iter().find(|r| r.message == "load").expect("load");
        assert_eq!(
            (load.kind, load.tid, load.end_tid, load.end_ns),
            (NvtxKind::StartEnd, 1, Some(2), 8)
        );
        let open: Vec<_> = out
            .iter()
            .filter(|r| r.unclosed)
            .map(|r| (r.message.as_str(), r.end_ns))
            .collect();
        assert_eq!(
            open,
            [("never ends", 11), ("open at exit", 11)],
            "closed at the newest event time seen"
        );
        assert_eq!((c.unmatched, c.unclosed, c.library_dropped), (1, 2, 5));
    }

    #[test]
    fn limits_are_counted_and_pairing_survives_them() {
        let limits = Limits {
            max_depth: 2,
            max_open_ranges: 1,
            max_names: 1,
        };
        let recs = [
            Record::Push {
                ts_ns: 1,
                tid: 1,
                domain: 0,
                attrs: attrs("a"),
            },
            Record::Push {
                ts_ns: 2,
                tid: 1,
                domain: 0,
                attrs: attrs("b"),
            },
            Record::Push {
                ts_ns: 3,
                tid: 1,
                domain: 0,
                attrs: attrs("too deep"),
            },
            Record::Pop {
                ts_ns: 4,
                tid: 1,
                domain: 0,
            },
            Record::Pop {
                ts_ns: 5,
                tid: 1,
                domain: 0,
            },
            Record::Pop {
                ts_ns: 6,
                tid: 1,
                domain: 0,
            },
            Record::Start {
                ts_ns: 7,
                tid: 1,
                domain: 0,
                id: 1,
                attrs: attrs("x"),
            },
            Record::Start {
                ts_ns: 8,
                tid: 1,
                domain: 0,
                id: 2,
                attrs: attrs("y"),
            },
            Record::NameThread {
                ts_ns: 9,
                tid: 1,
                name: "one",
            },
            Record::NameThread {
                ts_ns: 9,
                tid: 2,
                name: "two",
            },
        ];
        let (out, c) = run(&recs, limits);
        let names: Vec<&str> = out.iter().map(|r| r.message.as_str()).collect();
        assert_eq!(
            names,
            ["b", "a", "x"],
            "the over-deep push is counted, its pop absorbed"
        );
        assert_eq!(c.over_limit, 3);
        assert!(out[2].unclosed);
    }
}
