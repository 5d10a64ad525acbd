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
        r.thread_name = self.thread_names.get(&open.tid).cloned().unwrap_or_default();
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
