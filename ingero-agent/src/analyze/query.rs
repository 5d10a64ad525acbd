//! `ingero query`: per-operation latency (default), one row per label group (`--group-by`),
//! or per request with overlap semantics (`--by-request`), as a table, CSV or JSON.

use std::fmt::Write as _;

use serde::Serialize;
use serde_json::{Map, Value};

use super::Analysis;
use super::aggregate::{Aggregate, Names, Needs};
use super::fmt;
use super::groups::{GroupSpec, GroupStats, Grouping, MERGED, PID_KEY};
use super::intervals;
use super::json::Json;
use super::kernels::{self, KernelRow};
use super::labels::ValueId;
use super::ranges::{RangeStats, has_range_stats, range_stats};
use super::table::{Table, host_cell, host_header};

/// The label carrying a process's rank (the agent's, from the launcher's environment, or an
/// adapter's).
pub const RANK_KEY: &str = ingero_trace::vocab::ProcessLabel::Rank.text();

/// The label key `--by-request` groups by.
pub const REQUEST_KEY: &str = "request_id";

/// Said with every per-request report.
pub const OVERLAP_CAVEAT: &str = "Requests overlap in time (for example under continuous batching), so an event inside several request spans counts once for each of them and per-request totals can add up to more than the whole.";

/// Said with NVTX groups, whose ranges nest.
pub const NVTX_OVERLAP_CAVEAT: &str = "NVTX ranges nest and overlap, so an event inside several ranges counts once for each of them (a nested range's calls count for every level) and the rows can add up to more than the whole.";

/// What `query` reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum QueryMode {
    Ops,
    /// `--group-by`: label keys (and the `pid` pseudo key), per process unless
    /// `--merge-processes`.
    GroupBy(GroupSpec),
    ByRequest,
    /// `--group-by kernel`: one row per kernel and per replayed graph.
    ByKernel,
}

/// One operation's latency.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct OpRow {
    /// The host, when the recordings read are several hosts' (`fleet`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    pub op: String,
    pub count: u64,
    pub p50_ns: u64,
    pub p95_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
    pub total_ns: u64,
    pub errors: u64,
}

/// The slowest call of a group.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct SlowestOp {
    pub op: String,
    pub ts_ns: u64,
    pub duration_ns: u64,
}

/// A task that ran while a traced thread was preempted.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Preempter {
    pub name: String,
    pub ns: u64,
}

impl QueryMode {
    /// `--group-by KEYS`, per process (the default).
    pub fn group_by(keys: &[&str]) -> QueryMode {
        QueryMode::GroupBy(GroupSpec {
            keys: keys.iter().map(|k| (*k).to_owned()).collect(),
            per_process: true,
        })
    }
}

/// One label group.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct GroupRow {
    /// The host, when the recordings read are several hosts' (`fleet`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    pub labels: Map<String, Value>,
    /// The process, when the group is one process's (per-process grouping, or `pid` key).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// The `rank` label of the group, when it has one (a number).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rank: Option<u32>,
    /// Where the group's label values held (first start, last end, within the selection), on
    /// the trace clock of the group's host.
    pub start_ns: u64,
    /// With several hosts: `start_ns` as REALTIME (unix ns), where the hosts' rows line up.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wall_start_ns: Option<u64>,
    pub end_ns: u64,
    /// Wall time during which the values held.
    pub duration_ns: u64,
    /// The group's counters, written in place (`cuda_calls` … `blocked_ns`). Its preempters
    /// and slowest call are the raw forms of `preempted_by` and `slowest_op`.
    #[serde(flatten)]
    pub totals: GroupStats,
    /// Who ran instead while the group's threads were preempted, most first.
    pub preempted_by: Vec<Preempter>,
    pub slowest_op: Option<SlowestOp>,
    /// Present when the grouping has overlap semantics (a span key whose spans overlap).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub caveat: Option<String>,
    /// For NVTX groups: the individual ranges' count and durations.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ranges: Option<RangeStats>,
    /// Drops the recording counted in the stretches (about a second each) that overlap the
    /// time the group held: an upper bound on what its counts lack (`analyze::losses`);
    /// absent when none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drops_overlapping: Option<u64>,
}

/// One request of `--by-request`.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct RequestRow {
    pub request_id: String,
    /// This request's API time over the selection's (overlap semantics).
    pub share_of_api_time: f64,
    #[serde(flatten)]
    pub stats: GroupRow,
}

/// `--by-request`: the caveat and the requests.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct RequestReport {
    pub caveat: String,
    pub requests: Vec<RequestRow>,
}

/// A query's result.
#[derive(Clone, Debug, PartialEq)]
pub enum QueryReport {
    Ops(Vec<OpRow>),
    Groups(Vec<GroupRow>),
    Requests(RequestReport),
    Kernels(Vec<KernelRow>),
}

/// The groupings the aggregation pass needs for `mode`.
pub fn groupings_for(mode: &QueryMode) -> Vec<GroupSpec> {
    match mode {
        QueryMode::Ops | QueryMode::ByKernel => Vec::new(),
        QueryMode::GroupBy(spec) => vec![spec.clone()],
        // Requests are the job's, whichever process served them.
        QueryMode::ByRequest => vec![GroupSpec::merged(vec![REQUEST_KEY.to_owned()])],
    }
}

/// What the report of `mode` reads from the aggregate.
pub fn needs(mode: &QueryMode) -> Needs {
    Needs {
        ops: matches!(mode, QueryMode::Ops),
        total: matches!(mode, QueryMode::ByRequest),
        processes: false,
        kernels: matches!(mode, QueryMode::ByKernel),
    }
}

pub fn op_rows(agg: &Aggregate) -> Vec<OpRow> {
    let mut rows: Vec<OpRow> = agg
        .ops
        .values()
        .map(|s| OpRow {
            host: None,
            op: s.op.name().to_owned(),
            count: s.count,
            p50_ns: s.quantile(0.50),
            p95_ns: s.quantile(0.95),
            p99_ns: s.quantile(0.99),
            max_ns: s.max_ns,
            total_ns: s.total_ns,
            errors: s.errors,
        })
        .collect();
    // Where the time went first; names break ties so the order is stable.
    rows.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.op.cmp(&b.op)));
    rows
}

/// Rows of one grouping, in time order.
pub fn group_rows(an: &Analysis, names: &Names, g: &Grouping) -> Vec<GroupRow> {
    let labels = &an.index.labels;
    let range = (an.selection.range.start_ns, an.selection.range.end_ns);
    // Per key, each value's intervals (and, for per-process groups, each process's), gathered
    // once.
    let by_value: Vec<_> = g
        .keys
        .iter()
        .map(|k| labels.intervals_by_value(k))
        .collect();
    let by_process: Vec<_> = g
        .keys
        .iter()
        .map(|k| labels.intervals_by_value_in_process(k))
        .collect();
    let intervals_of = |key: usize, v: ValueId, pid: Option<u32>| {
        pid.and_then(|p| by_process.get(key).and_then(|m| m.get(&(v, p))))
            .or_else(|| by_value.get(key).and_then(|m| m.get(&v)))
            .cloned()
            .unwrap_or_default()
    };
    let empty: Vec<(Vec<ValueId>, GroupStats)> = idle_groups(an, g, &intervals_of)
        .into_iter()
        .map(|v| (v, GroupStats::default()))
        .collect();
    let mut rows: Vec<GroupRow> = g
        .groups
        .iter()
        .map(|(v, s)| (v, s, false))
        .chain(empty.iter().map(|(v, s)| (v, s, true)))
        .filter_map(|(values, s, idle)| {
            let pid = g.process_of(values);
            let mut held = vec![range];
            let mut map = Map::new();
            for (k, (key, v)) in g.keys.iter().zip(values).enumerate() {
                if key == PID_KEY {
                    map.insert(key.clone(), Value::String(v.to_string()));
                    continue;
                }
                map.insert(key.clone(), Value::String(labels.value(*v).to_owned()));
                let iv = intervals::union(intervals_of(k, *v, pid));
                held = intervals::intersect(&held, &iv);
            }
            // A group without events is a row only for the time its values held together.
            if idle && intervals::total(&held) == 0 {
                return None;
            }
            // The other labels in force at the start of each of the group's intervals (the
            // process's own, for one process's group), so a step row says its phase, its
            // rank and the request it began in (but a request id reused across steps names
            // no step).
            let context_at = |t: u64| match pid {
                Some(p) => labels.context_of(p, t, &g.keys),
                None => labels.context_at(t, &g.keys),
            };
            if let Some(((first, _), rest)) = held.split_first() {
                let mut ctx = context_at(*first);
                for (start, _) in rest {
                    if ctx.is_empty() {
                        break;
                    }
                    let here = context_at(*start);
                    ctx.retain(|kv| here.contains(kv));
                }
                for (k, v) in ctx {
                    map.insert(k.to_owned(), Value::String(v.to_owned()));
                }
            }
            let caveat = g.overlapping.then(|| match g.keys.as_slice() {
                [key] if has_range_stats(key) => NVTX_OVERLAP_CAVEAT,
                _ => OVERLAP_CAVEAT,
            });
            let mut row = group_row(map, &held, s, caveat);
            row.pid = pid;
            row.drops_overlapping = an.index.losses.overlapping_field(&held);
            if let ([key], [v]) = (g.keys.as_slice(), values.get(..1).unwrap_or_default()) {
                if has_range_stats(key) {
                    // The ranges the selected time holds, as the calls are.
                    let mut ranges = intervals_of(0, *v, pid);
                    ranges.retain(|(a, b)| *a <= range.1 && *b >= range.0);
                    row.ranges = Some(range_stats(&ranges));
                }
            }
            // The process's rank even where the group began before the agent saw it.
            row.rank = row
                .labels
                .get(RANK_KEY)
                .and_then(Value::as_str)
                .or_else(|| pid.and_then(|p| labels.process_value(RANK_KEY, p)))
                .and_then(|r| r.parse().ok());
            // By name: a row says which tasks ran instead, whatever their threads.
            row.preempted_by = Vec::new();
            for (w, ns) in &s.preempters {
                let name = names.get(*w);
                match row.preempted_by.iter_mut().find(|p| p.name == name) {
                    Some(p) => p.ns += ns,
                    None => row.preempted_by.push(Preempter {
                        name: name.to_owned(),
                        ns: *ns,
                    }),
                }
            }
            row.preempted_by
                .sort_by(|a, b| b.ns.cmp(&a.ns).then_with(|| a.name.cmp(&b.name)));
            Some(row)
        })
        .collect();
    rows.sort_by(|a, b| {
        (a.start_ns, a.end_ns)
            .cmp(&(b.start_ns, b.end_ns))
            .then_with(|| label_text(&a.labels).cmp(&label_text(&b.labels)))
            .then(a.pid.cmp(&b.pid))
    });
    rows
}

/// A span of time during which the keys joined so far held these values, with the process
/// a process-scoped value among them belongs to.
struct Piece {
    start: u64,
    end: u64,
    values: Vec<ValueId>,
    scope: Option<u32>,
}

/// The groups in which nothing was traced (a CPU-only step): every combination of the keys'
/// values that held together for some time in the selection and is not among `g.groups`.
/// The keys' intervals are joined one key at a time, so the work follows the combinations
/// that did hold rather than the product of the values (steps × requests). Not under
/// `--label`, where such a group could be a value the filter excludes, nor with the `pid`
/// key, whose values are only the processes that had events.
fn idle_groups(
    an: &Analysis,
    g: &Grouping,
    intervals_of: &dyn Fn(usize, ValueId, Option<u32>) -> Vec<(u64, u64)>,
) -> Vec<Vec<ValueId>> {
    let labels = &an.index.labels;
    let pids = &an.selection.pids;
    let range = (an.selection.range.start_ns, an.selection.range.end_ns);
    if !an.selection.labels.is_empty() || g.keys.iter().any(|k| k == PID_KEY) {
        return Vec::new();
    }
    let mut pieces = vec![Piece {
        start: range.0,
        end: range.1,
        values: Vec::new(),
        scope: None,
    }];
    for (k, key) in g.keys.iter().enumerate() {
        let values: Vec<(ValueId, Option<u32>)> = if g.per_process {
            labels.values_of_scoped(key, pids, range)
        } else {
            let values = labels.values_of(key, pids, range);
            values.into_iter().map(|v| (v, None)).collect()
        };
        // This key's intervals by start, with the running maximum of their ends so the scan
        // back from a piece's end stops at the first interval that cannot reach it.
        let mut held: Vec<(u64, u64, ValueId, Option<u32>)> = values
            .into_iter()
            .flat_map(|(v, scope)| {
                intervals::union(intervals_of(k, v, scope))
                    .into_iter()
                    .map(move |(a, b)| (a, b, v, scope))
            })
            .collect();
        held.sort_unstable();
        let mut reach = 0;
        let max_end: Vec<u64> = held
            .iter()
            .map(|h| {
                reach = reach.max(h.1);
                reach
            })
            .collect();
        let mut next = Vec::new();
        for p in &pieces {
            let mut j = held.partition_point(|h| h.0 < p.end);
            while j > 0 {
                j -= 1;
                if max_end[j] <= p.start {
                    break;
                }
                let (a, b, v, scope) = held[j];
                let (start, end) = (a.max(p.start), b.min(p.end));
                // Values of two processes never hold for the same event.
                let scope = match (p.scope, scope) {
                    (Some(x), Some(y)) if x != y => continue,
                    (Some(x), _) | (None, Some(x)) => Some(x),
                    (None, None) => None,
                };
                if start < end {
                    let mut values = p.values.clone();
                    values.push(v);
                    next.push(Piece {
                        start,
                        end,
                        values,
                        scope,
                    });
                }
            }
        }
        pieces = next;
    }
    let mut out: Vec<Vec<ValueId>> = pieces
        .into_iter()
        .map(|p| {
            let mut group = p.values;
            if g.per_process {
                group.push(p.scope.unwrap_or(MERGED));
            }
            group
        })
        .filter(|group| !g.groups.contains_key(group.as_slice()))
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

fn group_row(
    labels: Map<String, Value>,
    held: &[(u64, u64)],
    s: &GroupStats,
    caveat: Option<&str>,
) -> GroupRow {
    GroupRow {
        host: None,
        labels,
        pid: None,
        rank: None,
        start_ns: held.first().map_or(s.first_ns, |h| h.0),
        wall_start_ns: None,
        end_ns: held.last().map_or(s.last_ns, |h| h.1),
        duration_ns: intervals::total(held),
        totals: s.clone(),
        preempted_by: Vec::new(),
        slowest_op: s.slowest.map(|x| SlowestOp {
            op: x.op.name().to_owned(),
            ts_ns: x.ts_ns,
            duration_ns: x.duration_ns,
        }),
        caveat: caveat.map(str::to_owned),
        ranges: None,
        drops_overlapping: None,
    }
}

/// `k=v,k=v`.
pub fn label_text(m: &Map<String, Value>) -> String {
    m.iter()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
        .collect::<Vec<_>>()
        .join(",")
}

/// Requests by API time, largest first.
pub fn request_report(an: &Analysis, agg: &Aggregate) -> RequestReport {
    let total = agg.total.api_time_ns;
    let mut requests: Vec<RequestRow> = agg
        .groupings
        .first()
        .map(|g| group_rows(an, &agg.names, g))
        .unwrap_or_default()
        .into_iter()
        .map(|mut stats| {
            stats.caveat = None;
            RequestRow {
                request_id: stats
                    .labels
                    .get(REQUEST_KEY)
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned(),
                share_of_api_time: if total == 0 {
                    0.0
                } else {
                    (stats.totals.api_time_ns as f64 / total as f64 * 1e4).round() / 1e4
                },
                stats,
            }
        })
        .collect();
    requests.sort_by(|a, b| {
        b.stats
            .totals
            .api_time_ns
            .cmp(&a.stats.totals.api_time_ns)
            .then(a.stats.start_ns.cmp(&b.stats.start_ns))
            .then_with(|| a.request_id.cmp(&b.request_id))
    });
    RequestReport {
        caveat: OVERLAP_CAVEAT.to_owned(),
        requests,
    }
}

/// Builds the report of `mode` from an aggregation made with [`groupings_for`].
pub fn report(an: &Analysis, agg: &Aggregate, mode: &QueryMode) -> QueryReport {
    match mode {
        QueryMode::Ops => QueryReport::Ops(op_rows(agg)),
        QueryMode::GroupBy(_) => QueryReport::Groups(
            agg.groupings
                .first()
                .map(|g| group_rows(an, &agg.names, g))
                .unwrap_or_default(),
        ),
        QueryMode::ByRequest => QueryReport::Requests(request_report(an, agg)),
        QueryMode::ByKernel => QueryReport::Kernels(agg.kernels.rows()),
    }
}

fn group_cells(r: &GroupRow, origin: u64) -> Vec<String> {
    vec![
        // Several hosts' rows: REALTIME, and `origin` is the job's start on it.
        fmt::offset(r.wall_start_ns.unwrap_or(r.start_ns), origin),
        fmt::dur(r.duration_ns),
        r.totals.cuda_calls.to_string(),
        fmt::dur(r.totals.api_time_ns),
        fmt::dur(r.totals.sync_time_ns),
        fmt::bytes(r.totals.memcpy_bytes.h2d),
        fmt::bytes(r.totals.memcpy_bytes.d2h),
        r.totals.launches.to_string(),
        fmt::dur(r.totals.preempted_ns),
        fmt::dur(r.totals.blocked_ns),
        r.slowest_op.as_ref().map_or_else(
            || "-".to_owned(),
            |s| format!("{} {}", s.op, fmt::dur(s.duration_ns)),
        ),
    ]
}

const GROUP_HEADERS: [&str; 11] = [
    "start",
    "duration",
    "calls",
    "api",
    "sync",
    "h2d",
    "d2h",
    "launches",
    "preempted",
    "blocked",
    "slowest",
];

/// The columns of NCCL's calls, when some row made any (a single-GPU job's table stays as it
/// was).
const NCCL_HEADERS: [&str; 3] = ["nccl", "collectives", "nccl bytes"];

fn has_nccl(r: &GroupRow) -> bool {
    r.totals.nccl_time_ns > 0 || r.totals.collectives > 0
}

fn nccl_cells(r: &GroupRow) -> [String; 3] {
    [
        fmt::dur(r.totals.nccl_time_ns),
        r.totals.collectives.to_string(),
        fmt::bytes(r.totals.nccl_bytes),
    ]
}

/// The column of drops counted around a row, when some row has any.
const DROPS_HEADER: &str = "drops";

fn drops_cell(r: &GroupRow) -> String {
    r.drops_overlapping
        .map_or_else(|| "-".to_owned(), |n| n.to_string())
}

/// A [`QueryReport`] as JSON: its rows (or the requests report) without the variant.
pub struct QueryJson<'a>(&'a QueryReport);

impl Serialize for QueryJson<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            QueryReport::Ops(rows) => rows.serialize(s),
            QueryReport::Groups(rows) => rows.serialize(s),
            QueryReport::Requests(r) => r.serialize(s),
            QueryReport::Kernels(rows) => rows.serialize(s),
        }
    }
}

impl QueryReport {
    pub fn json(&self) -> Json<QueryJson<'_>> {
        Json(QueryJson(self))
    }

    /// The rows as a table (text and CSV share it); times are offsets from `origin`.
    pub fn table(&self, origin: u64) -> Table {
        match self {
            QueryReport::Ops(rows) => {
                let with_host = rows.iter().any(|r| r.host.is_some());
                let mut h = host_header(with_host);
                h.extend(["op", "count", "p50", "p95", "p99", "max", "total", "errors"]);
                let mut t = Table::new(&h);
                for r in rows {
                    let mut cells = host_cell(with_host, &r.host);
                    cells.extend([
                        r.op.clone(),
                        r.count.to_string(),
                        fmt::dur(r.p50_ns),
                        fmt::dur(r.p95_ns),
                        fmt::dur(r.p99_ns),
                        fmt::dur(r.max_ns),
                        fmt::dur(r.total_ns),
                        r.errors.to_string(),
                    ]);
                    t.push(cells);
                }
                t
            }
            QueryReport::Groups(rows) => {
                // A pid column only when the rows are several processes' (the rank, where
                // known, is among the labels).
                let mut pids: Vec<u32> = rows.iter().filter_map(|r| r.pid).collect();
                pids.sort_unstable();
                pids.dedup();
                let with_pid = pids.len() > 1;
                let with_ranges = rows.iter().any(|r| r.ranges.is_some());
                let with_host = rows.iter().any(|r| r.host.is_some());
                let mut h = host_header(with_host);
                h.push("labels");
                if with_pid {
                    h.push("pid");
                }
                if with_ranges {
                    h.extend(["ranges", "range p50", "range p95", "range max"]);
                }
                h.extend(GROUP_HEADERS);
                let with_nccl = rows.iter().any(has_nccl);
                if with_nccl {
                    h.extend(NCCL_HEADERS);
                }
                let with_drops = rows.iter().any(|r| r.drops_overlapping.is_some());
                if with_drops {
                    h.push(DROPS_HEADER);
                }
                let mut t = Table::new(&h);
                for r in rows {
                    let mut cells = host_cell(with_host, &r.host);
                    cells.push(label_text(&r.labels));
                    if with_pid {
                        cells.push(r.pid.map_or_else(|| "-".to_owned(), |p| p.to_string()));
                    }
                    if with_ranges {
                        let x = r.ranges.unwrap_or_default();
                        cells.extend([
                            x.count.to_string(),
                            fmt::dur(x.p50_ns),
                            fmt::dur(x.p95_ns),
                            fmt::dur(x.max_ns),
                        ]);
                    }
                    cells.extend(group_cells(r, origin));
                    if with_nccl {
                        cells.extend(nccl_cells(r));
                    }
                    if with_drops {
                        cells.push(drops_cell(r));
                    }
                    t.push(cells);
                }
                t
            }
            QueryReport::Requests(rep) => {
                let with_host = rep.requests.iter().any(|r| r.stats.host.is_some());
                let mut h = host_header(with_host);
                h.extend(["request_id", "share"]);
                h.extend(GROUP_HEADERS);
                let with_nccl = rep.requests.iter().any(|r| has_nccl(&r.stats));
                if with_nccl {
                    h.extend(NCCL_HEADERS);
                }
                let with_drops = rep
                    .requests
                    .iter()
                    .any(|r| r.stats.drops_overlapping.is_some());
                if with_drops {
                    h.push(DROPS_HEADER);
                }
                let mut t = Table::new(&h);
                for r in &rep.requests {
                    let mut cells = host_cell(with_host, &r.stats.host);
                    cells.extend([
                        r.request_id.clone(),
                        format!("{:.0}%", r.share_of_api_time * 100.0),
                    ]);
                    cells.extend(group_cells(&r.stats, origin));
                    if with_nccl {
                        cells.extend(nccl_cells(&r.stats));
                    }
                    if with_drops {
                        cells.push(drops_cell(&r.stats));
                    }
                    t.push(cells);
                }
                t
            }
            QueryReport::Kernels(rows) => kernels::table(rows),
        }
    }

    /// The caveat, when this report has overlap semantics.
    pub fn caveat(&self) -> Option<&str> {
        match self {
            QueryReport::Requests(r) => Some(&r.caveat),
            QueryReport::Groups(rows) => rows.iter().find_map(|r| r.caveat.as_deref()),
            QueryReport::Ops(_) | QueryReport::Kernels(_) => None,
        }
    }

    /// The readable form: the table, then the caveat where it applies.
    pub fn text(&self, origin: u64) -> String {
        let t = self.table(origin);
        let mut out = if t.rows.is_empty() {
            "no matching events\n".to_owned()
        } else {
            t.text()
        };
        if let Some(c) = self.caveat() {
            let _ = writeln!(out, "\nnote: {c}");
        }
        out
    }

    /// CSV; the caveat, where it applies, as a leading `#` comment line.
    pub fn csv(&self, origin: u64) -> String {
        let body = self.table(origin).csv();
        match self.caveat() {
            Some(c) => format!("# {c}\n{body}"),
            None => body,
        }
    }
}
