//! `query --events`: the matching events of a recording with their labels, streamed straight
//! to the output (NDJSON with `--json`, CSV with `--csv`, aligned lines otherwise), for
//! piping. With `--json` each line is the event's `trace --json` line
//! ([`ingero_trace::json`]) plus the labels in force.

use std::io::Write;

use anyhow::{Context, Result};
use ingero_trace::json::{Labeled, Line};
use ingero_trace::model::ReadRecord;
use serde_json::{Map, Value};

use super::Analysis;
use super::fmt;
use super::labels::ValueId;
use super::table::csv_cell;

/// How `--events` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventFormat {
    Text,
    Json,
    Csv,
}

/// The labels of an event of `pid` at `t`: every key's values, joined with `|` where spans
/// give several.
pub(crate) fn labels_at(
    an: &Analysis,
    pid: u32,
    t: u64,
    scratch: &mut Vec<ValueId>,
) -> Map<String, Value> {
    let ix = &an.index.labels;
    let mut m = Map::new();
    for name in ix.key_names() {
        let Some(key) = ix.key(name) else { continue };
        scratch.clear();
        key.values_at(pid, t, scratch);
        if scratch.is_empty() {
            continue;
        }
        let vals: Vec<&str> = scratch.iter().map(|v| ix.value(*v)).collect();
        m.insert(name.to_owned(), Value::String(vals.join("|")));
    }
    m
}

/// One selected record, as the text and CSV forms show it (the CSV form adds [`detail`]).
struct Row<'a> {
    kind: &'static str,
    ts: u64,
    dur: u64,
    pid: u32,
    tid: u32,
    thread: &'a str,
    op: &'static str,
    ret: i32,
}

/// The row of a record `--events` lists; `None` for the records it does not.
fn row(rec: &ReadRecord) -> Option<Row<'_>> {
    Some(match rec {
        ReadRecord::Cuda(c) => Row {
            kind: "cuda",
            ts: c.ts_ns,
            dur: c.real_duration_ns(),
            pid: c.thread.pid,
            tid: c.thread.tid,
            thread: &c.thread.name,
            op: c.op.name(),
            ret: c.ret,
        },
        ReadRecord::OffCpu(o) => Row {
            kind: "off_cpu",
            ts: o.ts_ns,
            dur: o.real_duration_ns(),
            pid: o.thread.pid,
            tid: o.thread.tid,
            thread: &o.thread.name,
            op: "",
            ret: 0,
        },
        ReadRecord::Lifecycle(l) => Row {
            kind: "process",
            ts: l.ts_ns,
            dur: 0,
            pid: l.thread.pid,
            tid: l.thread.tid,
            thread: &l.thread.name,
            op: l.op.text(),
            ret: 0,
        },
        ReadRecord::Annotation(a) => Row {
            kind: "annotation",
            ts: a.ts_ns,
            dur: a.end_ns.map_or(0, |e| e.saturating_sub(a.ts_ns)),
            pid: a.scope.map_or(0, |s| s.pid),
            tid: 0,
            thread: "",
            op: "",
            ret: 0,
        },
        ReadRecord::Nvtx(n) => Row {
            kind: "nvtx",
            ts: n.ts_ns,
            dur: n.end_ns.saturating_sub(n.ts_ns),
            pid: n.pid,
            tid: n.tid,
            thread: "",
            op: n.kind.name(),
            ret: 0,
        },
        ReadRecord::Driver(d) => Row {
            kind: "driver",
            ts: d.ts_ns,
            dur: 0,
            pid: driver_pid(d),
            tid: 0,
            thread: "",
            op: "",
            ret: 0,
        },
        _ => return None,
    })
}

/// The CSV `detail` column of a listed record: a CUDA call's arguments, why a thread went off
/// the CPU and what ran instead, a lifecycle event's other pid and text, an annotation's labels.
/// Built only for CSV, the one form that prints it.
fn detail(rec: &ReadRecord) -> String {
    match rec {
        ReadRecord::Cuda(c) => format!("{:?}", c.args),
        ReadRecord::OffCpu(o) => format!("{}, ran instead: {}", o.reason.name(), o.next_comm),
        ReadRecord::Lifecycle(l) => format!("{} {}", l.other_pid, l.text),
        ReadRecord::Annotation(a) => {
            let labels: Vec<String> = a.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
            labels.join(" ")
        }
        ReadRecord::Nvtx(n) => match &n.domain {
            Some(d) => format!("{d}: {}", n.message),
            None => n.message.clone(),
        },
        ReadRecord::Driver(d) => d.text.clone(),
        _ => String::new(),
    }
}

/// The process a driver message names (an Xid's `pid=`), or 0.
fn driver_pid(d: &ingero_trace::model::DriverMessage) -> u32 {
    d.xid().and_then(|x| x.pid).unwrap_or(0)
}

/// Whether the selection keeps `rec` (its op, process and labels).
fn admitted(an: &Analysis, rec: &ReadRecord, scratch: &mut Vec<ValueId>) -> bool {
    let sel = &an.selection;
    let (pid, ts) = match rec {
        ReadRecord::Cuda(c) if sel.admits_op(c.op) => (c.thread.pid, c.ts_ns),
        // `--op` names CUDA calls: every other kind is left out by it.
        _ if !sel.op_mask.is_empty() => return false,
        ReadRecord::OffCpu(o) => (o.thread.pid, o.ts_ns),
        ReadRecord::Lifecycle(l) => (l.thread.pid, l.ts_ns),
        ReadRecord::Annotation(a) => (a.scope.map_or(0, |s| s.pid), a.ts_ns),
        ReadRecord::Nvtx(n) => (n.pid, n.ts_ns),
        // Machine-wide: kept unless `--pid` selects processes other than the one it names.
        ReadRecord::Driver(_) if sel.pids.is_empty() => return true,
        ReadRecord::Driver(d) => (driver_pid(d), d.ts_ns),
        _ => return false,
    };
    sel.admits_pid(pid)
        && (sel.labels.is_empty() || sel.admits_labels(&an.index.labels, pid, ts, scratch))
}

/// Streams the selected events to `out`; returns how many were written.
pub fn write(an: &Analysis, format: EventFormat, out: &mut dyn Write) -> Result<u64> {
    let origin = an.index.clock.start_ns;
    let mut scratch = Vec::new();
    let mut n = 0u64;
    if format == EventFormat::Csv {
        writeln!(
            out,
            "kind,ts_ns,offset,duration_ns,pid,tid,thread,op,ret,detail,labels"
        )
        .context("writing events")?;
    }
    let range = an.selection.range;
    let mut reader = an.index.window_reader(range, range);
    for rec in reader.by_ref() {
        let rec = rec?;
        // `admitted` first: it refuses every record `row` has no row for, so the order changes
        // nothing but the work done on the records left out.
        if !admitted(an, &rec, &mut scratch) {
            continue;
        }
        let Some(row) = row(&rec) else { continue };
        let labels = labels_at(an, row.pid, row.ts, &mut scratch);
        n += 1;
        let res = match format {
            EventFormat::Json => match Line::of_record(&rec) {
                Some(line) => {
                    let labels = Some(&labels);
                    ingero_trace::json::write_line(out, &Labeled { line, labels })
                }
                // Every record with a row has a line.
                None => Ok(()),
            },
            EventFormat::Csv => {
                let l = super::query::label_text(&labels);
                writeln!(
                    out,
                    "{},{},{},{},{},{},{},{},{},{},{}",
                    row.kind,
                    row.ts,
                    fmt::offset(row.ts, origin),
                    row.dur,
                    row.pid,
                    row.tid,
                    csv_cell(row.thread),
                    row.op,
                    row.ret,
                    csv_cell(&detail(&rec)),
                    csv_cell(&l)
                )
            }
            // A driver message has no thread or op: its text is what it says.
            EventFormat::Text if row.kind == "driver" => writeln!(
                out,
                "{}  {:>9}  {}  {}",
                fmt::offset(row.ts, origin),
                fmt::dur(row.dur),
                ingero_trace::vocab::TrackName::Driver.text(),
                detail(&rec)
            ),
            EventFormat::Text => writeln!(
                out,
                "{}  {:>9}  {}[{}/{}]  {} {}  {}",
                fmt::offset(row.ts, origin),
                fmt::dur(row.dur),
                row.thread,
                row.pid,
                row.tid,
                if row.op.is_empty() { row.kind } else { row.op },
                if row.ret != 0 {
                    format!("ret={}", row.ret)
                } else {
                    String::new()
                },
                super::query::label_text(&labels)
            ),
        };
        // A closed pipe (`| head`) ends the stream quietly.
        if let Err(e) = res {
            if e.kind() == std::io::ErrorKind::BrokenPipe {
                return Ok(n);
            }
            return Err(e).context("writing events");
        }
    }
    reader.warn_damage();
    Ok(n)
}
