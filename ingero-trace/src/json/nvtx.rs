//! An NVTX range's or mark's line (`type: "nvtx"`): its kind, times, process and threads,
//! message, domain, category, color (`"0xAARRGGBB"`), payload and flags.

use serde::ser::SerializeMap;

use super::Hex;
use crate::model::{NvtxPayload, NvtxRecord};

pub(super) fn entries<M: SerializeMap>(n: &NvtxRecord, map: &mut M) -> Result<(), M::Error> {
    map.serialize_entry("type", "nvtx")?;
    map.serialize_entry("kind", n.kind.name())?;
    map.serialize_entry("ts_ns", &n.ts_ns)?;
    map.serialize_entry("duration_ns", &n.end_ns.saturating_sub(n.ts_ns))?;
    map.serialize_entry("pid", &n.pid)?;
    map.serialize_entry("tid", &n.tid)?;
    if let Some(t) = n.end_tid {
        map.serialize_entry("end_tid", &t)?;
    }
    map.serialize_entry("message", &n.message)?;
    map.serialize_entry("domain", &n.domain)?;
    if n.kind == crate::model::NvtxKind::PushPop {
        map.serialize_entry("depth", &n.depth)?;
    }
    if n.category != 0 {
        map.serialize_entry("category", &n.category)?;
    }
    if let Some(c) = &n.category_name {
        map.serialize_entry("category_name", c)?;
    }
    if let Some(c) = n.color {
        map.serialize_entry("color", &Hex(u64::from(c)))?;
    }
    match n.payload {
        Some(NvtxPayload::U64(v)) => map.serialize_entry("payload", &v)?,
        Some(NvtxPayload::I64(v)) => map.serialize_entry("payload", &v)?,
        Some(NvtxPayload::F64(v)) => map.serialize_entry("payload", &v)?,
        None => {}
    }
    if n.truncated {
        map.serialize_entry("truncated", &true)?;
    }
    if n.unclosed {
        map.serialize_entry("unclosed", &true)?;
    }
    Ok(())
}
