//! `query --events`: the raw matching events with their labels, streamed straight to the
//! output (NDJSON with `--json`, CSV with `--csv`, aligned lines otherwise), for piping.

use std::io::Write;

use anyhow::{Context, Result};
use serde_json::{Map, Value, json};

use super::Analysis;
use super::fmt;
use super::labels::ValueId;
use super::table::csv_cell;
use ingero_trace::model::CudaArgs;
use ingero_trace::model::ReadRecord;

/// How `--events` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventFormat {
    Text,
    Json,
    Csv,
}

/// The labels of an event of `pid` at `t`: every key's values, joined with `|` where spans
/// give several.
fn labels_at(an: &Analysis, pid: u32, t: u64, scratch: &mut Vec<ValueId>) -> Map<String, Value> {
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

fn args_json(args: &CudaArgs) -> Value {
    match args {
        CudaArgs::Alloc { size, ptr, .. } => json!({"size": size, "ptr": ptr}),
        CudaArgs::Free { ptr, size, .. } => json!({"ptr": ptr, "size": size}),
        CudaArgs::Memcpy { count, kind, .. } => json!({"count": count, "kind": kind.label()}),
        CudaArgs::MemcpyPeer { count, .. } | CudaArgs::Memset { count, .. } => {
            json!({"count": count})
        }
        CudaArgs::Launch { grid, block, .. } => json!({"grid": grid, "block": block}),
        _ => json!({}),
    }
}

/// Streams the selected events to `out`; returns how many were written.
pub fn write(an: &Analysis, format: EventFormat, out: &mut dyn Write) -> Result<u64> {
    let sel = &an.selection;
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
    let mut reader = an.index.reader(sel.range);
    for rec in reader.by_ref() {
        let (kind, ts, dur, thread, op, ret, detail, args) = match rec? {
            ReadRecord::Cuda(c) => {
                if !sel.admits_op(c.op) {
                    continue;
                }
                let detail = format!("{:?}", c.args);
                let args = args_json(&c.args);
                (
                    "cuda",
                    c.ts_ns,
                    c.duration_ns,
                    c.thread,
                    c.op.name().to_owned(),
                    c.ret,
                    detail,
                    args,
                )
            }
            ReadRecord::OffCpu(o) => {
                if sel.op_mask != 0 {
                    continue;
                }
                let reason = format!("{:?}", o.reason).to_lowercase();
                let detail = format!("{reason}, ran instead: {}", o.next_comm);
                let args =
                    json!({"reason": reason, "next_comm": o.next_comm, "next_tid": o.next_tid});
                (
                    "off_cpu",
                    o.ts_ns,
                    o.duration_ns,
                    o.thread,
                    String::new(),
                    0,
                    detail,
                    args,
                )
            }
            _ => continue,
        };
        if !sel.admits_pid(thread.pid)
            || (!sel.labels.is_empty()
                && !sel.admits_labels(&an.index.labels, thread.pid, ts, &mut scratch))
        {
            continue;
        }
        let labels = labels_at(an, thread.pid, ts, &mut scratch);
        n += 1;
        let res = match format {
            EventFormat::Json => {
                let v = json!({
                    "kind": kind, "ts_ns": ts, "duration_ns": dur, "pid": thread.pid,
                    "tid": thread.tid, "thread": &*thread.name, "op": op, "ret": ret,
                    "args": args, "labels": labels,
                });
                writeln!(out, "{v}")
            }
            EventFormat::Csv => {
                let l = super::query::label_text(&labels);
                writeln!(
                    out,
                    "{kind},{ts},{},{dur},{},{},{},{op},{ret},{},{}",
                    fmt::offset(ts, origin),
                    thread.pid,
                    thread.tid,
                    csv_cell(&thread.name),
                    csv_cell(&detail),
                    csv_cell(&l)
                )
            }
            EventFormat::Text => writeln!(
                out,
                "{}  {:>9}  {}[{}/{}]  {} {}  {}",
                fmt::offset(ts, origin),
                fmt::dur(dur),
                thread.name,
                thread.pid,
                thread.tid,
                if op.is_empty() { kind } else { op.as_str() },
                if ret != 0 {
                    format!("ret={ret}")
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
