//! NVTX ranges and marks read back (see `write/nvtx.rs`): a slice on a thread's NVTX track is a
//! push/pop range, one on a process's `NVTX ranges` lane a start/end range, an instant on a
//! thread's NVTX track a mark; the arguments are found by their [`NvtxArg`] names.

use std::sync::Arc;

use super::values::Val;
use crate::model::{NvtxKind, NvtxPayload, NvtxRecord};
use crate::vocab::NvtxArg;

fn arg(args: &[(Arc<str>, Val)], key: NvtxArg) -> Option<&Val> {
    args.iter()
        .find(|(k, _)| &**k == key.text())
        .map(|(_, v)| v)
}

fn num(args: &[(Arc<str>, Val)], key: NvtxArg) -> Option<u32> {
    arg(args, key)
        .and_then(Val::as_u64)
        .and_then(|v| u32::try_from(v).ok())
}

fn flag(args: &[(Arc<str>, Val)], key: NvtxArg) -> bool {
    matches!(arg(args, key), Some(Val::B(true)))
}

/// The record of an NVTX slice or instant: `kind`, the track's process and thread (the
/// arguments name them too; they win when present), its domain, times, name and arguments.
pub(super) fn record(
    kind: NvtxKind,
    (pid, tid): (u32, u32),
    domain: Option<&str>,
    (ts, end): (u64, u64),
    name: &str,
    args: &[(Arc<str>, Val)],
) -> NvtxRecord {
    let mut r = NvtxRecord::new(
        kind,
        num(args, NvtxArg::Pid).unwrap_or(pid),
        num(args, NvtxArg::Tid).unwrap_or(tid),
        ts,
        end,
    );
    r.message = name.to_owned();
    r.domain = arg(args, NvtxArg::Domain)
        .and_then(Val::as_str)
        .or(domain)
        .map(str::to_owned);
    r.end_tid = num(args, NvtxArg::EndTid);
    r.depth = num(args, NvtxArg::Depth).unwrap_or(0);
    r.category = num(args, NvtxArg::Category).unwrap_or(0);
    r.category_name = arg(args, NvtxArg::CategoryName)
        .and_then(Val::as_str)
        .map(str::to_owned);
    r.color = num(args, NvtxArg::Color);
    r.payload = match arg(args, NvtxArg::Payload) {
        Some(Val::U(v)) => Some(NvtxPayload::U64(*v)),
        Some(Val::I(v)) => Some(NvtxPayload::I64(*v)),
        Some(Val::F(v)) => Some(NvtxPayload::F64(*v)),
        _ => None,
    };
    r.truncated = flag(args, NvtxArg::Truncated);
    r.unclosed = flag(args, NvtxArg::Unclosed);
    r
}
