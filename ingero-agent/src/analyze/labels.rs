//! [`LabelIndex`]: every label interval of the recording, built in the first pass and looked up
//! per event in the second. Instant labels become the intervals during which each value held
//! (the writer's state slices, per scope); spans keep their own interval and may overlap.
//!
//! An event of process P sees P's own states first and the trace-wide ones where P has none;
//! spans scoped to P or trace-wide all apply. Lookups are by the event's start time.

use std::collections::BTreeMap;

use ingero_trace::fast_map::FastMap;
use ingero_trace::model::LabelInterval;
use ingero_trace::model::{AnnotationRecord, NvtxRecord, ReadRecord};
use ingero_trace::vocab::{NVTX_DOMAIN_LABEL, NVTX_LABEL};

/// A label value, interned (index into [`LabelIndex::value`]).
pub type ValueId = u32;

#[derive(Clone, Copy, Debug)]
struct Interval {
    start: u64,
    end: u64,
    value: ValueId,
}

/// Non-overlapping state intervals of one key in one scope, sorted by start.
#[derive(Default)]
struct States {
    list: Vec<Interval>,
    /// Until [`LabelIndex::seal`]: each interval's place in the recording (see
    /// [`LabelIndex::add_at`]), which orders intervals with the same start and end.
    order: Vec<u64>,
}

/// Possibly overlapping spans of one key in one scope, sorted by start, with the running
/// maximum of their ends so a lookup can stop scanning backwards early.
#[derive(Default)]
struct Spans {
    list: Vec<Interval>,
    max_end: Vec<u64>,
    /// As [`States::order`].
    order: Vec<u64>,
}

/// Adds `iv` at place `order` to a list being built.
fn push(list: &mut Vec<Interval>, orders: &mut Vec<u64>, iv: Interval, order: u64) {
    list.push(iv);
    orders.push(order);
}

/// Sorts a list by start, then end, then place in the recording; the places are dropped.
fn sort_list(list: &mut Vec<Interval>, order: &mut Vec<u64>) {
    if order.len() == list.len() {
        let mut both: Vec<(Interval, u64)> = list.drain(..).zip(order.drain(..)).collect();
        both.sort_unstable_by_key(|(i, o)| (i.start, i.end, *o));
        list.extend(both.into_iter().map(|(i, _)| i));
    } else {
        list.sort_by_key(|i| (i.start, i.end));
    }
    *order = Vec::new();
}

#[derive(Default)]
struct KeyIndex {
    states: FastMap<Option<u32>, States>,
    spans: FastMap<Option<u32>, Spans>,
}

/// All label intervals of a recording.
#[derive(Default)]
pub struct LabelIndex {
    keys: BTreeMap<String, KeyIndex>,
    values: Vec<String>,
    value_ids: FastMap<String, ValueId>,
    /// The place [`Self::add_state`] and the others give the next interval: in the order
    /// they are added.
    added: u64,
}

/// Which key of the index (stable after [`LabelIndex::seal`]).
#[derive(Clone, Copy)]
pub struct KeyRef<'a> {
    key: &'a KeyIndex,
}

impl LabelIndex {
    fn intern(&mut self, v: &str) -> ValueId {
        if let Some(id) = self.value_ids.get(v) {
            return *id;
        }
        let id = self.values.len() as ValueId;
        self.values.push(v.to_owned());
        self.value_ids.insert(v.to_owned(), id);
        id
    }

    /// The next place in the order of adding.
    fn next_place(&mut self) -> u64 {
        self.added += 1;
        self.added
    }

    /// Adds the label record `rec` (a state, a span or an NVTX range; anything else adds
    /// nothing) found at place `order` in the recording (see
    /// `ingero_trace::read::file_order`): intervals with the same start and end keep that
    /// order, whatever order they were added in.
    pub fn add_at(&mut self, rec: &ReadRecord, order: u64) {
        match rec {
            ReadRecord::LabelState(s) => self.add_state_at(s, order),
            ReadRecord::Annotation(a) => self.add_span_at(a, order),
            ReadRecord::Nvtx(n) => self.add_nvtx_at(n, order),
            _ => {}
        }
    }

    /// Adds a state interval (`step=42` from .. to ..). Empty values (cleared keys) are skipped.
    pub fn add_state(&mut self, s: &LabelInterval) {
        let order = self.next_place();
        self.add_state_at(s, order);
    }

    fn add_state_at(&mut self, s: &LabelInterval, order: u64) {
        if s.value.is_empty() {
            return;
        }
        let value = self.intern(&s.value);
        let key = self.keys.entry(s.key.clone()).or_default();
        let states = key.states.entry(s.scope_pid).or_default();
        let iv = Interval {
            start: s.start_ns,
            end: s.end_ns,
            value,
        };
        push(&mut states.list, &mut states.order, iv, order);
    }

    /// Adds a span's labels (instants are covered by the state intervals).
    pub fn add_span(&mut self, a: &AnnotationRecord) {
        let order = self.next_place();
        self.add_span_at(a, order);
    }

    fn add_span_at(&mut self, a: &AnnotationRecord, order: u64) {
        let Some(end) = a.end_ns else {
            return;
        };
        let scope = a.scope.map(|s| s.pid);
        for (k, v) in &a.labels {
            if v.is_empty() {
                continue;
            }
            let value = self.intern(v);
            let key = self.keys.entry(k.clone()).or_default();
            let spans = key.spans.entry(scope).or_default();
            let iv = Interval {
                start: a.ts_ns,
                end,
                value,
            };
            push(&mut spans.list, &mut spans.order, iv, order);
        }
    }

    /// Adds an NVTX range as spans of its process: `nvtx` = its message, and `nvtx.domain`
    /// when the domain is not the default one (marks are instants and label nothing). A range
    /// labels the whole process over its interval, not only its thread: PyTorch's `backward`
    /// range is pushed on the Python thread while the autograd engine's threads launch.
    pub fn add_nvtx(&mut self, n: &NvtxRecord) {
        let order = self.next_place();
        self.add_nvtx_at(n, order);
    }

    fn add_nvtx_at(&mut self, n: &NvtxRecord, order: u64) {
        if !n.is_range() {
            return;
        }
        let mut add = |k: &str, v: &str| {
            let value = self.intern(v);
            let key = self.keys.entry(k.to_owned()).or_default();
            let spans = key.spans.entry(Some(n.pid)).or_default();
            let iv = Interval {
                start: n.ts_ns,
                end: n.end_ns.max(n.ts_ns),
                value,
            };
            push(&mut spans.list, &mut spans.order, iv, order);
        };
        add(NVTX_LABEL, &n.message);
        if let Some(d) = &n.domain {
            add(NVTX_DOMAIN_LABEL, d);
        }
    }

    /// Sorts everything for lookups; call once after the first pass.
    pub fn seal(&mut self) {
        for k in self.keys.values_mut() {
            for s in k.states.values_mut() {
                sort_list(&mut s.list, &mut s.order);
            }
            for s in k.spans.values_mut() {
                sort_list(&mut s.list, &mut s.order);
                let mut m = 0;
                s.max_end = s
                    .list
                    .iter()
                    .map(|i| {
                        m = m.max(i.end);
                        m
                    })
                    .collect();
            }
        }
    }

    /// The earliest start of the intervals that overlap `[a, b]`.
    pub fn earliest_overlapping(&self, a: u64, b: u64) -> Option<u64> {
        let starts = |list: &[Interval]| {
            list.iter()
                .filter(|i| i.start <= b && i.end >= a)
                .map(|i| i.start)
                .min()
        };
        self.keys
            .values()
            .flat_map(|k| {
                let states = k.states.values().map(|s| starts(&s.list));
                states.chain(k.spans.values().map(|s| starts(&s.list)))
            })
            .flatten()
            .min()
    }

    /// The intervals that overlap `[a, b]`, in a new sealed index whose value ids depend on
    /// nothing but them and their places: the labels a time window needs, the same whichever
    /// superset of them this index was built from with [`Self::add_at`] (a first pass that
    /// read only the window's stretches, or all).
    pub fn restricted_to(&self, a: u64, b: u64) -> LabelIndex {
        let mut out = LabelIndex::default();
        for (name, key) in &self.keys {
            let states = self.overlapping(&key.states, |s| (&s.list, &s.order), (a, b));
            let spans = self.overlapping(&key.spans, |s| (&s.list, &s.order), (a, b));
            if states.is_empty() && spans.is_empty() {
                continue;
            }
            let mut kept = KeyIndex::default();
            for (scope, list) in states {
                kept.states.entry(scope).or_default().list = out.intern_all(list);
            }
            for (scope, list) in spans {
                kept.spans.entry(scope).or_default().list = out.intern_all(list);
            }
            out.keys.insert(name.clone(), kept);
        }
        out.seal();
        out
    }

    /// Per scope (in order), the intervals of `lists` overlapping `[a, b]` with their values'
    /// text, by start, end and place (a sealed list's own order where the places are gone).
    #[expect(clippy::type_complexity, reason = "a private helper's plain tuples")]
    fn overlapping<T>(
        &self,
        lists: &FastMap<Option<u32>, T>,
        parts: impl Fn(&T) -> (&Vec<Interval>, &Vec<u64>),
        (a, b): (u64, u64),
    ) -> Vec<(Option<u32>, Vec<(u64, u64, u64, &str)>)> {
        let mut out: Vec<_> = lists
            .iter()
            .map(|(scope, l)| {
                let (list, order) = parts(l);
                let place = |k: usize| {
                    if order.len() == list.len() {
                        order[k]
                    } else {
                        k as u64
                    }
                };
                let mut kept: Vec<_> = list
                    .iter()
                    .enumerate()
                    .filter(|(_, i)| i.start <= b && i.end >= a)
                    .map(|(k, i)| (i.start, i.end, place(k), self.value(i.value)))
                    .collect();
                kept.sort_unstable_by_key(|(s, e, p, _)| (*s, *e, *p));
                (*scope, kept)
            })
            .filter(|(_, kept)| !kept.is_empty())
            .collect();
        out.sort_unstable_by_key(|(scope, _)| *scope);
        out
    }

    /// `list`'s intervals with their values interned here, in order.
    fn intern_all(&mut self, list: Vec<(u64, u64, u64, &str)>) -> Vec<Interval> {
        list.into_iter()
            .map(|(start, end, _, v)| Interval {
                start,
                end,
                value: self.intern(v),
            })
            .collect()
    }

    pub fn value(&self, id: ValueId) -> &str {
        self.values.get(id as usize).map_or("", String::as_str)
    }

    pub fn value_id(&self, v: &str) -> Option<ValueId> {
        self.value_ids.get(v).copied()
    }

    pub fn key(&self, name: &str) -> Option<KeyRef<'_>> {
        self.keys.get(name).map(|key| KeyRef { key })
    }

    /// Label keys in name order.
    pub fn key_names(&self) -> impl Iterator<Item = &str> {
        self.keys.keys().map(String::as_str)
    }

    /// Whether `name` is carried by spans (so grouping by it has overlap semantics).
    pub fn is_span_key(&self, name: &str) -> bool {
        self.keys.get(name).is_some_and(|k| !k.spans.is_empty())
    }

    /// Whether an event can lie in two of `key`'s spans at once, so per-value totals overlap:
    /// two spans of one scope, or a process's and a trace-wide one, share some time (spans
    /// that only touch, as consecutive step spans do, do not). Requests served concurrently
    /// overlap; a process's step spans follow one another.
    pub fn spans_overlap(&self, key: &str) -> bool {
        let Some(k) = self.keys.get(key) else {
            return false;
        };
        // Sorted by start, so a span overlaps an earlier one when it starts before the
        // furthest end so far.
        let within = |s: &Spans| {
            s.list
                .iter()
                .skip(1)
                .zip(&s.max_end)
                .any(|(i, reach)| i.start < *reach)
        };
        let union =
            |s: &Spans| super::intervals::union(s.list.iter().map(|i| (i.start, i.end)).collect());
        let global = k.spans.get(&None).map(union).unwrap_or_default();
        k.spans.iter().any(|(scope, s)| {
            within(s)
                || (scope.is_some()
                    && super::intervals::total(&super::intervals::intersect(&union(s), &global))
                        > 0)
        })
    }

    /// For every value of `key`, the intervals during which it held (states and spans, all
    /// scopes), unsorted: one walk over the key's intervals, where asking [`Self::intervals_of`]
    /// per value would walk them once per value (quadratic with thousands of requests).
    pub fn intervals_by_value(&self, key: &str) -> FastMap<ValueId, Vec<(u64, u64)>> {
        let mut out: FastMap<ValueId, Vec<(u64, u64)>> = FastMap::default();
        if let Some(k) = self.keys.get(key) {
            let states = k.states.values().flat_map(|s| s.list.iter());
            let spans = k.spans.values().flat_map(|s| s.list.iter());
            for i in states.chain(spans) {
                out.entry(i.value).or_default().push((i.start, i.end));
            }
        }
        out
    }

    /// The intervals during which `key` had `value` (states and spans, all scopes), unsorted.
    pub fn intervals_of(&self, key: &str, value: ValueId) -> Vec<(u64, u64)> {
        let Some(k) = self.keys.get(key) else {
            return Vec::new();
        };
        let states = k.states.values().flat_map(|s| s.list.iter());
        let spans = k.spans.values().flat_map(|s| s.list.iter());
        states
            .chain(spans)
            .filter(|i| i.value == value)
            .map(|i| (i.start, i.end))
            .collect()
    }
}

impl LabelIndex {
    /// Every value `key` took, in a scope of `pids` (all when empty) or trace-wide, during an
    /// interval that overlaps `range`. Lets a grouping list groups in which nothing happened.
    pub fn values_of(&self, key: &str, pids: &[u32], range: (u64, u64)) -> Vec<ValueId> {
        let Some(k) = self.keys.get(key) else {
            return Vec::new();
        };
        let in_scope =
            |scope: &Option<u32>| scope.is_none_or(|p| pids.is_empty() || pids.contains(&p));
        let mut out: Vec<ValueId> = k
            .states
            .iter()
            .filter(|(scope, _)| in_scope(scope))
            .flat_map(|(_, s)| s.list.iter())
            .chain(
                k.spans
                    .iter()
                    .filter(|(scope, _)| in_scope(scope))
                    .flat_map(|(_, s)| s.list.iter()),
            )
            .filter(|i| i.start <= range.1 && i.end >= range.0)
            .map(|i| i.value)
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Every value `key` took during an interval that overlaps `range`, with the process it
    /// was scoped to (`None`: trace-wide), for scopes in `pids` (all when empty) and the
    /// trace-wide one. Sorted, without repeats.
    pub fn values_of_scoped(
        &self,
        key: &str,
        pids: &[u32],
        range: (u64, u64),
    ) -> Vec<(ValueId, Option<u32>)> {
        let Some(k) = self.keys.get(key) else {
            return Vec::new();
        };
        let in_scope =
            |scope: &Option<u32>| scope.is_none_or(|p| pids.is_empty() || pids.contains(&p));
        let overlapping = |scope: &Option<u32>, list: &[Interval]| {
            let scope = *scope;
            list.iter()
                .filter(move |i| i.start <= range.1 && i.end >= range.0)
                .map(move |i| (i.value, scope))
                .collect::<Vec<_>>()
        };
        let mut out: Vec<(ValueId, Option<u32>)> = k
            .states
            .iter()
            .filter(|(scope, _)| in_scope(scope))
            .flat_map(|(scope, s)| overlapping(scope, &s.list))
            .chain(
                k.spans
                    .iter()
                    .filter(|(scope, _)| in_scope(scope))
                    .flat_map(|(scope, s)| overlapping(scope, &s.list)),
            )
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// For every value of `key` and every process scope it had, the intervals during which it
    /// held there (states and spans), unsorted. Trace-wide intervals are not included: see
    /// [`Self::intervals_by_value`].
    pub fn intervals_by_value_in_process(
        &self,
        key: &str,
    ) -> FastMap<(ValueId, u32), Vec<(u64, u64)>> {
        let mut out: FastMap<(ValueId, u32), Vec<(u64, u64)>> = FastMap::default();
        if let Some(k) = self.keys.get(key) {
            let states = k.states.iter().map(|(s, l)| (*s, &l.list));
            let spans = k.spans.iter().map(|(s, l)| (*s, &l.list));
            for (scope, list) in states.chain(spans) {
                let Some(pid) = scope else { continue };
                for i in list {
                    out.entry((i.value, pid))
                        .or_default()
                        .push((i.start, i.end));
                }
            }
        }
        out
    }

    /// The last value `key` took in `pid`'s own scope (a state, else a span), at any time: what
    /// a process is (its rank) even for events before the label was set.
    pub fn process_value(&self, key: &str, pid: u32) -> Option<&str> {
        let k = self.keys.get(key)?;
        let last = |list: Option<&Vec<Interval>>| list.and_then(|l| l.last()).map(|i| i.value);
        last(k.states.get(&Some(pid)).map(|s| &s.list))
            .or_else(|| last(k.spans.get(&Some(pid)).map(|s| &s.list)))
            .map(|v| self.value(v))
    }

    /// The other labels in force at `t`, for showing a group with its context (`step=3` with
    /// `phase=train`, `epoch=0`). Keys in `exclude` are left out. Per key, the processes'
    /// own values win over the trace-wide one, but only when they agree: a group that merges
    /// rank 0 and rank 1 names no rank. Then the first span found.
    pub fn context_at(&self, t: u64, exclude: &[String]) -> Vec<(&str, &str)> {
        self.context(None, t, exclude)
    }

    /// [`Self::context_at`] for the events of one process: its own values, else the
    /// trace-wide ones; other processes' labels are not looked at.
    pub fn context_of(&self, pid: u32, t: u64, exclude: &[String]) -> Vec<(&str, &str)> {
        self.context(Some(pid), t, exclude)
    }

    fn context(&self, pid: Option<u32>, t: u64, exclude: &[String]) -> Vec<(&str, &str)> {
        let mut out = Vec::new();
        let mut found = Vec::new();
        for (name, key) in &self.keys {
            if exclude.iter().any(|e| e == name) {
                continue;
            }
            let mut scopes: Vec<Option<u32>> = match pid {
                Some(p) => vec![Some(p), None],
                None => key.states.keys().chain(key.spans.keys()).copied().collect(),
            };
            // Process scopes before the trace-wide one, in a stable order.
            scopes.sort_by_key(|s| (s.is_none(), *s));
            scopes.dedup();
            let mut value: Option<ValueId> = None;
            let mut disagree = false;
            for scope in scopes {
                if scope.is_none() && (value.is_some() || disagree) {
                    break;
                }
                found.clear();
                if let Some(v) = key.states.get(&scope).and_then(|st| state_at(st, t)) {
                    found.push(v);
                }
                if let Some(sp) = key.spans.get(&scope) {
                    spans_at(sp, t, &mut found);
                }
                match (found.first(), value) {
                    (Some(v), None) => value = Some(*v),
                    (Some(v), Some(held)) if *v != held => disagree = true,
                    _ => {}
                }
            }
            if let (Some(v), false) = (value, disagree) {
                out.push((name.as_str(), self.value(v)));
            }
        }
        out
    }
}

impl<'a> KeyRef<'a> {
    /// Every value `key` has for an event of `pid` at `t`: the state (own scope first, else
    /// trace-wide) and each span containing `t`. Appended to `out`.
    pub fn values_at(&self, pid: u32, t: u64, out: &mut Vec<ValueId>) {
        self.values_until(pid, t, out);
    }

    /// [`Self::values_at`], also returning the end of the interval `[t, end)` over which the
    /// answer stays the same, so a caller can reuse it for the events that follow.
    pub fn values_until(&self, pid: u32, t: u64, out: &mut Vec<ValueId>) -> u64 {
        self.values_until_scoped(pid, t, out).0
    }

    /// [`Self::values_until`], also saying whether any value came from the process's own
    /// scope (a process-scoped state or span) rather than a trace-wide one. That too holds
    /// until the returned end.
    pub fn values_until_scoped(&self, pid: u32, t: u64, out: &mut Vec<ValueId>) -> (u64, bool) {
        let (own, own_end) = match self.key.states.get(&Some(pid)) {
            Some(s) => state_until(s, t),
            None => (None, u64::MAX),
        };
        let (state, mut end) = match own {
            Some(v) => (Some(v), own_end),
            None => match self.key.states.get(&None) {
                Some(s) => {
                    let (v, e) = state_until(s, t);
                    (v, e.min(own_end))
                }
                None => (None, own_end),
            },
        };
        let mut scoped = own.is_some();
        if let Some(v) = state {
            out.push(v);
        }
        for scope in [Some(pid), None] {
            if let Some(s) = self.key.spans.get(&scope) {
                let before = out.len();
                end = end.min(spans_until(s, t, out));
                scoped |= scope.is_some() && out.len() > before;
            }
        }
        (end, scoped)
    }
}

/// The state at `t` and where that answer stops holding: the state's end or the next start.
fn state_until(s: &States, t: u64) -> (Option<ValueId>, u64) {
    let idx = s.list.partition_point(|i| i.start <= t);
    let next = s.list.get(idx).map_or(u64::MAX, |i| i.start);
    let Some(i) = idx.checked_sub(1).and_then(|p| s.list.get(p)) else {
        return (None, next);
    };
    // A state slice ends where the next begins: half-open, so a boundary event belongs to
    // the new value. A zero-length slice holds at its one instant only.
    if t < i.end {
        (Some(i.value), i.end.min(next))
    } else if t == i.end && i.start == i.end {
        (Some(i.value), t.saturating_add(1).min(next))
    } else {
        (None, next)
    }
}

/// Appends the spans containing `t` (closed intervals) and returns where that set changes:
/// the next span's start or just after the first of the containing spans ends.
fn spans_until(s: &Spans, t: u64, out: &mut Vec<ValueId>) -> u64 {
    let mut idx = s.list.partition_point(|i| i.start <= t);
    let mut end = s.list.get(idx).map_or(u64::MAX, |i| i.start);
    while idx > 0 {
        idx -= 1;
        if s.max_end[idx] < t {
            break;
        }
        let i = s.list[idx];
        if i.end >= t {
            end = end.min(i.end.saturating_add(1));
            if !out.contains(&i.value) {
                out.push(i.value);
            }
        }
    }
    end
}

fn state_at(s: &States, t: u64) -> Option<ValueId> {
    state_until(s, t).0
}

fn spans_at(s: &Spans, t: u64, out: &mut Vec<ValueId>) {
    spans_until(s, t, out);
}

/// Label records for the analysis's unit tests.
#[cfg(test)]
pub(crate) mod test_records {
    use super::*;
    use ingero_trace::model::Scope;

    /// `key` = `value` over `[start, end)` in a process's scope (`None`: trace-wide).
    pub fn state(
        scope: Option<u32>,
        key: &str,
        value: &str,
        start: u64,
        end: u64,
    ) -> LabelInterval {
        LabelInterval {
            scope_pid: scope,
            key: key.into(),
            value: value.into(),
            start_ns: start,
            end_ns: end,
            provenance_uid: 0,
            provenance_pid: None,
            continued: false,
        }
    }

    /// A `request_id` span over `[start, end)`.
    pub fn span(scope: Option<u32>, value: &str, start: u64, end: u64) -> AnnotationRecord {
        AnnotationRecord {
            labels: vec![("request_id".into(), value.into())],
            scope: scope.map(|pid| Scope { pid, start_time: 1 }),
            ts_ns: start,
            end_ns: Some(end),
            provenance_uid: 0,
            provenance_pid: None,
            ..Default::default()
        }
    }
}

#[cfg(test)]
mod tests;
